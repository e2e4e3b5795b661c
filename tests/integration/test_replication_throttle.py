"""A throttled reassignment stays under its rate, end to end on a three-broker cluster.

A partition holding `TOTAL` bytes on broker 1 is reassigned to [1, 2] with ``pybroker
reassign-partitions --execute --throttle RATE``: the tool sets ``leader/follower.replication.
throttled.rate`` on brokers 1 and 2 and the topic's ``*.replication.throttled.replicas``, so
the leader (Kafka's ``shouldLeaderThrottle``) and the new follower (``shouldFollowerThrottle``)
both hold the copy to RATE. The new replica's log on broker 2's disk is watched: the bytes copied
by time t never exceed what the rate allows (RATE·(t + one quota window) + one fetch's worth),
and the copy does not finish sooner than the rate allows. ``--verify`` then reports completion and
removes the throttle configs (DescribeConfigs through confluent-kafka shows them gone). An
unthrottled move of the same data finishes much faster: the test measures the throttle.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, ResourceType

from pybroker.client.admin import TOPIC_RESOURCE, Admin
from tests.conftest import wait_until
from tests.integration.cluster import Cluster, start_cluster
from tests.integration.test_cli import ok, pybroker
from tests.zookeeper import chroot_for

RATE = 500_000  # B/s
FETCH_MAX = 262_144  # replica.fetch.max.bytes: one fetch's worth per partition
WINDOW = 1.0  # replication.quota.window.size.seconds
TOTAL = 2_500_000  # about five seconds' worth at RATE
THROTTLE_CONFIGS = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")
TOPIC_THROTTLE_CONFIGS = ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas")


@pytest.fixture
def cluster(zookeeper, tmp_path, request):
    cluster = start_cluster(chroot_for(zookeeper, request.node.name), tmp_path, **{
        "auto.leader.rebalance.enable": False, "replica.fetch.max.bytes": FETCH_MAX,
        "replication.quota.window.num": 11, "replication.quota.window.size.seconds": int(WINDOW)})
    yield cluster
    cluster.kill()


def log_bytes(cluster: Cluster, node: int, topic: str) -> int:
    """The size of the partition's segment files on ``node``'s disk (0 before it exists)."""
    directory = Path(cluster.broker(node).data_dir) / f"{topic}-0"
    try:
        return sum(f.stat().st_size for f in directory.iterdir() if f.name.endswith(".log"))
    except FileNotFoundError:
        return 0


def fill(cluster: Cluster, topic: str) -> int:
    assert ok(pybroker("topics", "--bootstrap-server", cluster.bootstrap, "create", "--topic", topic,
                       "--replica-assignment", "1")) == f"Created topic {topic}.\n"
    # Batches well under one fetch (librdkafka's default batch.size is 1 MB, and a fetch returns
    # at least one whole batch, KIP-74): "one fetch's worth" below is then FETCH_MAX.
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": 1, "linger.ms": 5,
                         "batch.size": FETCH_MAX // 4})
    value = os.urandom(1000)
    for i in range(TOTAL // len(value)):
        producer.produce(topic, value[i % 10:] + value[:i % 10])
        if i % 500 == 0:
            producer.poll(0)
    assert producer.flush(30) == 0
    size = log_bytes(cluster, 1, topic)
    assert size >= TOTAL
    return size


def move(cluster: Cluster, topic: str, plan: Path, *throttle: str) -> tuple[list[tuple[float, int]], float]:
    """Reassign the partition to [1, 2]; the (seconds since the start, bytes on broker 2) samples
    and the seconds until broker 2 held all of it."""
    size = log_bytes(cluster, 1, topic)
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": topic, "partition": 0, "replicas": [1, 2]}]}))
    started = time.monotonic()
    out = ok(pybroker("reassign-partitions", "--bootstrap-server", cluster.bootstrap, "--execute",
                      "--reassignment-json-file", str(plan), *throttle))
    assert out.rstrip().endswith(f"Successfully started partition reassignment for {topic}-0"), out
    samples: list[tuple[float, int]] = []

    def copied() -> bool:
        samples.append((time.monotonic() - started, log_bytes(cluster, 2, topic)))
        return samples[-1][1] >= size

    wait_until(copied, timeout=60, interval=0.05, message=f"broker 2 copying {size} bytes")
    return samples, samples[-1][0]


def topic_config_on(bootstrap: str, topic: str, key: str) -> str | None:
    """``key`` of ``topic`` as the broker at ``bootstrap`` itself describes it."""
    async def describe() -> str | None:
        async with Admin(bootstrap) as admin:
            entries = await admin.describe_configs(TOPIC_RESOURCE, topic, keys=[key])
        return next((e.value for e in entries if e.name == key), None)

    return asyncio.run(describe())


def dynamic_configs(admin: AdminClient, kind: ResourceType, name: str, wanted: tuple[str, ...]) -> dict[str, str]:
    resource = ConfigResource(kind, name)
    entries = admin.describe_configs([resource])[resource].result(timeout=30)
    sources = (ConfigSource.DYNAMIC_BROKER_CONFIG.value, ConfigSource.DYNAMIC_TOPIC_CONFIG.value)
    return {n: e.value for n, e in entries.items() if n in wanted and e.source in sources}


def test_a_throttled_reassignment_stays_under_its_rate(cluster, topic_name, tmp_path):
    topic = topic_name
    size = fill(cluster, topic)
    plan = tmp_path / "plan.json"
    samples, seconds = move(cluster, topic, plan, "--throttle", str(RATE))
    admin = cluster.admin()
    # Never faster than the rate allows: one window's burst and one fetch in flight of slack.
    for t, copied in samples:
        assert copied <= RATE * (t + WINDOW) + FETCH_MAX, (t, copied, samples)
    # And it did not finish sooner than the rate allows.
    assert seconds >= (size - FETCH_MAX) / RATE - WINDOW, (seconds, samples)
    # While under way (or until --verify) the throttles are set, on both brokers and the topic.
    for node in (1, 2):
        assert dynamic_configs(admin, ResourceType.BROKER, str(node), THROTTLE_CONFIGS) == {
            name: str(RATE) for name in THROTTLE_CONFIGS}
    assert dynamic_configs(admin, ResourceType.TOPIC, topic, TOPIC_THROTTLE_CONFIGS) == {
        "leader.replication.throttled.replicas": "0:1", "follower.replication.throttled.replicas": "0:2"}
    wait_until(lambda: sorted(cluster.partitions(topic)[0][2]) == [1, 2], timeout=20, message="broker 2 in the ISR")

    out = ok(pybroker("reassign-partitions", "--bootstrap-server", cluster.bootstrap, "--verify",
                      "--reassignment-json-file", str(plan)))
    assert out.splitlines() == [
        "Status of partition reassignment:", f"Reassignment of partition {topic}-0 is completed.",
        "Clearing broker-level throttles on brokers 1,2,3", f"Clearing topic-level throttles on topic {topic}"], out
    for node in (1, 2, 3):
        assert dynamic_configs(admin, ResourceType.BROKER, str(node), THROTTLE_CONFIGS) == {}
    assert dynamic_configs(admin, ResourceType.TOPIC, topic, TOPIC_THROTTLE_CONFIGS) == {}

    # Control: the same move without a throttle is much faster.
    control = topic + "-control"
    fill(cluster, control)
    _, unthrottled = move(cluster, control, tmp_path / "control.json")
    print(f"throttled: {seconds:.1f} s, unthrottled: {unthrottled:.1f} s")
    assert unthrottled < seconds / 2, (unthrottled, seconds)


@pytest.mark.parametrize("side", ["leader", "follower"])
def test_each_side_of_the_throttle_holds_the_rate_alone(cluster, topic_name, tmp_path, side):
    """Only the leader's throttle (broker 1's rate, the topic's leader list) or only the
    follower's (broker 2's, the follower list), set with ``pybroker configs``: either holds the
    copy to its rate."""
    topic = topic_name
    size = fill(cluster, topic)
    node, replicas = (1, "0:1") if side == "leader" else (2, "0:2")
    ok(pybroker("configs", "--bootstrap-server", cluster.bootstrap, "--alter", "--broker", str(node),
                "--add-config", f"{side}.replication.throttled.rate={RATE}"))
    ok(pybroker("configs", "--bootstrap-server", cluster.bootstrap, "--alter", "--topic", topic,
                "--add-config", f"{side}.replication.throttled.replicas={replicas}"))
    # The topic config reaches the throttling broker by a ZooKeeper notification: move only once
    # it has it (else the first fetches go unthrottled).
    key = f"{side}.replication.throttled.replicas"
    wait_until(lambda: topic_config_on(cluster.broker(node).bootstrap, topic, key) == replicas,
               message=f"broker {node} seeing {key}")
    samples, seconds = move(cluster, topic, tmp_path / "plan.json")
    for t, copied in samples:
        assert copied <= RATE * (t + WINDOW) + FETCH_MAX, (t, copied, samples)
    assert seconds >= (size - FETCH_MAX) / RATE - WINDOW, (seconds, samples)
