"""Failover under acks=all: leaders killed with SIGKILL while an idempotent producer writes.

What a user sees with RF=3 and min.insync.replicas=2: no acknowledged record is lost or
duplicated when a leader dies, the producer continues by itself on the new leader, and the killed
broker, restarted, cuts the records it alone had (never committed) and rejoins the ISR with a log
identical to the leader's. The last test repeats kill -9 of a random broker several times
(Jepsen-style) and reads every partition back.
"""

from __future__ import annotations

import random
import threading
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import NewTopic

from tests.conftest import wait_until
from tests.integration import clients
from tests.integration.cluster import SESSION_TIMEOUT_MS, Cluster, start_cluster, zk_client
from tests.zookeeper import chroot_for

# Brokers of a killed leader's partitions log their lost connections; the controller warns
# about the dead broker while it is being replaced. None of it is an error of the code.
pytestmark = pytest.mark.broker_log_allows(r"Sending \w+ to broker \d+ failed")


@pytest.fixture
def cluster(zookeeper, tmp_path, request):
    cluster = start_cluster(chroot_for(zookeeper, request.node.name), tmp_path)
    yield cluster
    cluster.kill()


class AckedProducer:
    """An idempotent acks=all confluent-kafka producer writing ``p-i`` values in a thread, and
    the offsets its delivery reports acknowledged, per partition."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        self.topic, self.partitions = topic, partitions
        self.producer = Producer({
            "bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 2,
            "message.timeout.ms": 60_000, "retry.backoff.ms": 50,
        })
        self.acked: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(partitions)}
        self.failed: list[str] = []
        self.sent = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _report(self, error, message) -> None:  # noqa: ANN001 - confluent's callback
        if error is not None:
            self.failed.append(str(error))
        else:
            self.acked[message.partition()].append((message.offset(), message.value()))

    def _run(self) -> None:
        while not self._stop.is_set():
            partition = self.sent % self.partitions
            self.producer.produce(self.topic, f"{partition}-{self.sent}".encode(), partition=partition,
                                  on_delivery=self._report)
            self.sent += 1
            self.producer.poll(0.002)

    def start(self) -> AckedProducer:
        self._thread.start()
        return self

    def acked_count(self) -> int:
        return sum(len(a) for a in self.acked.values())

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)
        assert self.producer.flush(60) == 0


def create(cluster: Cluster, topic: str, partitions: int) -> None:
    admin = cluster.admin()
    admin.create_topics([NewTopic(topic, partitions, 3, config={"min.insync.replicas": "2"})])[topic].result(30)
    wait_for_full_isr(cluster, topic)


def wait_for_full_isr(cluster: Cluster, topic: str, timeout: float = 30) -> dict:
    return wait_until(lambda: (parts := cluster.partitions(topic)) and all(
        leader > 0 and len(isr) == 3 for leader, _, isr in parts.values()) and parts,
        timeout=timeout, message=f"every partition of {topic} led with three in-sync replicas")


def read_partition(cluster: Cluster, topic: str, partition: int, count: int) -> list[tuple[int, bytes]]:
    read = clients.consume_confluent(cluster.bootstrap, topic, count, partition=partition, timeout=60)
    return [(offset, value) for offset, _, value, _ in read]


def check_acknowledged(cluster: Cluster, topic: str, producer: AckedProducer) -> None:
    """Every acknowledged record is in its partition at its acknowledged offset, and no value
    appears twice (idempotence held across the failovers)."""
    for partition, acked in producer.acked.items():
        assert acked, f"nothing acknowledged on partition {partition}"
        last = max(offset for offset, _ in acked)
        log = dict(read_partition(cluster, topic, partition, last + 1))
        for offset, value in acked:
            assert log.get(offset) == value, f"acknowledged {value!r} at {partition}/{offset}, found {log.get(offset)!r}"
        values = list(log.values())
        assert len(values) == len(set(values)), f"duplicates in partition {partition}"


def registered(cluster: Cluster) -> set[int]:
    zk = zk_client(cluster.connect)
    try:
        return {int(node) for node in zk.get_children("/brokers/ids")}
    finally:
        zk.stop()


def segment_bytes(data_dir: Path, topic: str, partition: int) -> bytes:
    directory = data_dir / f"{topic}-{partition}"
    return b"".join(path.read_bytes() for path in sorted(directory.glob("*.log")))


def test_kill_9_of_the_leader_loses_no_acknowledged_record(cluster, topic_name):
    """The leader has records its followers never got (they are stopped) when it is killed: those
    were never acknowledged. A follower takes over, the producer retries them there, and the
    killed broker, restarted, truncates its divergent tail and rejoins the ISR."""
    create(cluster, topic_name, 1)
    producer = AckedProducer(cluster.bootstrap, topic_name, 1).start()
    wait_until(lambda: producer.acked_count() >= 300, timeout=30, message="300 acknowledged records")
    leader, replicas, _ = cluster.partitions(topic_name)[0]
    followers = [cluster.broker(r) for r in replicas if r != leader]
    for follower in followers:
        follower.pause()
    try:
        sent = producer.sent
        wait_until(lambda: producer.sent > sent + 50, message="records appended on the leader alone")
        cluster.broker(leader).kill()
    finally:
        for follower in followers:
            follower.resume()
    new_leader = wait_until(lambda: (now := cluster.partitions(topic_name)[0][0]) not in (leader, -1) and now,
                            timeout=SESSION_TIMEOUT_MS / 1000 + 20, message="a new leader")
    acked = producer.acked_count()
    wait_until(lambda: producer.acked_count() > acked + 100, timeout=30, message="acks from the new leader")
    producer.stop()
    assert not producer.failed
    mark = cluster.broker(leader).log_mark()
    cluster.broker(leader).start()
    cluster.broker(leader).wait_for_log(r"truncating to \d+", since=mark, timeout=30)
    wait_for_full_isr(cluster, topic_name)
    check_acknowledged(cluster, topic_name, producer)
    wait_until(lambda: segment_bytes(cluster.broker(leader).data_dir, topic_name, 0)
               == segment_bytes(cluster.broker(new_leader).data_dir, topic_name, 0),
               timeout=20, message="the restarted broker's log equal to the leader's")


def test_jepsen_style_kill_9_cycles(cluster, topic_name):
    """Three cycles: kill -9 a random broker while the producer writes, wait until its
    partitions have new leaders, restart it, wait until it is back in every ISR. Then every
    acknowledged record is read back exactly once, in order, from every partition."""
    rng = random.Random(topic_name)
    create(cluster, topic_name, 3)
    producer = AckedProducer(cluster.bootstrap, topic_name, 3).start()
    for cycle in range(3):
        wanted = 200 * (cycle + 1)
        wait_until(lambda wanted=wanted: producer.acked_count() >= wanted, timeout=60,
                   message=f"acknowledged records before cycle {cycle}")
        victim = rng.choice([1, 2, 3])
        cluster.broker(victim).kill()
        # Its session expires (it cannot register again before: Kafka refuses the id meanwhile),
        # and its partitions get other leaders.
        wait_until(lambda victim=victim: victim not in registered(cluster) and all(
                       leader not in (victim, -1) for leader, _, _ in cluster.partitions(topic_name).values()),
                   timeout=SESSION_TIMEOUT_MS / 1000 + 20, message=f"leaders other than the killed broker {victim}")
        cluster.broker(victim).start()
        wait_for_full_isr(cluster, topic_name, timeout=60)
    producer.stop()
    assert not producer.failed
    check_acknowledged(cluster, topic_name, producer)
