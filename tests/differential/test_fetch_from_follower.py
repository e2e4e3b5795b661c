"""KIP-392 (fetch from follower) on three pybroker brokers beside three Kafka 3.9.2 brokers.

Each cluster has racks r1, r2, r3 (brokers 1, 2, 3) and
``replica.selector.class=org.apache.kafka.common.replica.RackAwareReplicaSelector``. A topic with
replicas [1, 2, 3] (leader 1) gets five records; then raw Fetch requests ask the leader for
consumers of each rack (v11 carries the rack), a follower for a consumer of v11 and of v10, and a
confluent-kafka consumer with ``client.rack=r3`` reads the topic. The summaries (errors, preferred
read replica, high watermark, offsets read, the broker the consumer ended up fetching from) must be
the same from both clusters.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from bench.apache_kafka import KafkaCluster
from pybroker.common.errors import ErrorCode
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages import FetchRequest
from pybroker.server.replica_selector import RACK_AWARE_REPLICA_SELECTOR
from tests.conftest import _kafka_chroot, broker_connection, require_kafka, wait_until
from tests.integration.cluster import Cluster, start_cluster
from tests.zookeeper import chroot_for

SELECTOR = {"replica.selector.class": RACK_AWARE_REPLICA_SELECTOR}


def rack(node: int) -> str:
    return f"r{node}"


@pytest.fixture(scope="module")
def pybroker_cluster(zookeeper, tmp_path_factory) -> Iterator[Cluster]:
    cluster = start_cluster(chroot_for(zookeeper, "kip392"), tmp_path_factory.mktemp("kip392"),
                            broker_overrides=lambda node, _: {"broker.rack": rack(node)}, **SELECTOR)
    try:
        yield cluster
    finally:
        cluster.kill()


@pytest.fixture(scope="module")
def kafka_racks(zookeeper, request, tmp_path_factory) -> Iterator[KafkaCluster]:
    require_kafka("3.9.2")
    cluster = KafkaCluster(tmp_path_factory.mktemp("kafka-kip392"), _kafka_chroot(zookeeper, request, "kip392"),
                           3, quick_start=True, **SELECTOR)
    for broker in cluster.brokers:
        broker.overrides["broker.rack"] = rack(broker.node_id)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
        cluster.kill()


async def fetch(address: str, topic: str, version: int, rack_id: str, offset: int = 0) -> dict[str, Any]:
    connection = await broker_connection(address)
    try:
        request = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0,
                               session_id=0, session_epoch=-1, forgotten_topics_data=[], rack_id=rack_id, topics=[
                                   FetchRequest.FetchTopic(topic=topic, partitions=[FetchRequest.FetchPartition(
                                       partition=0, fetch_offset=offset, partition_max_bytes=1 << 20)])])
        answer = (await connection.send(ApiKey.FETCH, request, version=version)).responses[0].partitions[0]
    finally:
        await connection.close()
    records = bytes(answer.records or b"")
    return {"error": ErrorCode(answer.error_code).name, "high_watermark": answer.high_watermark,
            "preferred_read_replica": answer.preferred_read_replica, "bytes": len(records) > 0}


def consume_with_rack(bootstrap: str, topic: str, client_rack: str) -> tuple[list[bytes], int]:
    """The values a consumer of ``client_rack`` reads, and the broker librdkafka's statistics
    last say it fetches partition 0 from (its first statistics may come before the leader's
    first answer has sent it elsewhere)."""
    fetched_from: list[int] = [-1]

    def stats(text: str) -> None:
        partition = json.loads(text)["topics"].get(topic, {}).get("partitions", {}).get("0")
        if partition and partition.get("broker", -1) >= 0:
            fetched_from.append(partition["broker"])

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"kip392-{uuid.uuid4().hex[:6]}",
                         "auto.offset.reset": "earliest", "client.rack": client_rack,
                         "statistics.interval.ms": 100, "stats_cb": stats, "enable.auto.commit": False})
    values: list[bytes] = []
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + 60
        while len(values) < 5 and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                values.append(message.value())
        end = time.monotonic() + 1  # a few more statistics
        while time.monotonic() < end:
            consumer.poll(0.1)
    finally:
        consumer.close()
    return values, fetched_from[-1]


def scenario(bootstrap: str, addresses: dict[int, str]) -> list[tuple[str, Any]]:
    topic = f"kip392-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, replica_assignment=[[1, 2, 3]])])[topic].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(5):
        producer.produce(topic, b"v%d" % i, partition=0)
    assert producer.flush(30) == 0

    def answer(node: int, version: int, rack_id: str, offset: int = 0) -> dict[str, Any]:
        return asyncio.run(fetch(addresses[node], topic, version, rack_id, offset))

    # The followers' high watermarks reach 5 with their next fetch.
    for node in (2, 3):
        wait_until(lambda node=node: answer(node, 11, "")["high_watermark"] == 5, timeout=30,
                   message=f"broker {node}'s high watermark")
    steps: list[tuple[str, Any]] = []
    for client_rack in ("r2", "r3", "r1", "", "r9"):
        steps.append((f"leader, v11, rack {client_rack!r}", answer(1, 11, client_rack)))
    steps.append(("leader, v10, rack r2 not sent", answer(1, 10, "r2")))
    steps.append(("follower 2, v11, rack r2", answer(2, 11, "r2")))
    steps.append(("follower 2, v11, past the end", answer(2, 11, "r2", offset=6)))
    steps.append(("follower 2, v10", answer(2, 10, "")))
    values, fetched_from = consume_with_rack(bootstrap, topic, "r3")
    steps.append(("consumer in r3", (values, fetched_from)))
    return steps


def test_consumers_are_sent_to_a_replica_in_their_rack_as_kafka_does(pybroker_cluster, kafka_racks):
    ours = scenario(pybroker_cluster.bootstrap, {i: b.bootstrap for i, b in enumerate(pybroker_cluster.brokers, 1)})
    theirs = scenario(kafka_racks.bootstrap, {b.node_id: b.bootstrap for b in kafka_racks.brokers})
    for (step, mine), (_, kafkas) in zip(ours, theirs, strict=True):
        assert mine == kafkas, step
    answers = dict(ours)
    assert answers["leader, v11, rack 'r2'"]["preferred_read_replica"] == 2
    assert answers["leader, v11, rack 'r2'"]["bytes"] is False
    assert answers["leader, v11, rack 'r1'"] == {"error": "NONE", "high_watermark": 5, "preferred_read_replica": -1,
                                                 "bytes": True}
    assert answers["follower 2, v11, rack r2"]["bytes"] is True
    assert answers["follower 2, v10"]["error"] == "NOT_LEADER_OR_FOLLOWER"
    assert answers["consumer in r3"] == ([b"v%d" % i for i in range(5)], 3)
