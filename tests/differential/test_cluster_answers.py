"""Three pybroker brokers beside three Kafka 3.9.2 brokers, taken through the same steps: their
answers along the way must be the same.

A topic with replicas [1, 2, 3] (leader 1) gets records; Metadata (leader, leader epoch, replicas,
ISR, offline replicas) is read after each step: created; leadership moved to broker 2 by a
reassignment to [2, 3, 1] and a preferred-leader election (and then broker 1, the old leader,
answers a Produce NOT_LEADER_OR_FOLLOWER and a Fetch with the old epoch FENCED_LEADER_EPOCH);
broker 3 killed (it leaves the ISR once its session expires) and started again (it comes back
into the ISR); broker 2 stopped by a controlled shutdown (leadership moves away at once).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from bench.apache_kafka import ZOOKEEPER_VERSION, KafkaCluster
from pybroker.common.errors import ErrorCode
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages import (
    AlterPartitionReassignmentsRequest,
    ElectLeadersRequest,
    FetchRequest,
    MetadataRequest,
    ProduceRequest,
)
from tests.conftest import _kafka_chroot, require_kafka, send_once, wait_until
from tests.integration.cluster import Cluster, start_cluster
from tests.unit.batches import build_batch
from tests.zookeeper import chroot_for

SESSION_TIMEOUT_MS = 4000
SETTINGS = {"zookeeper.session.timeout.ms": SESSION_TIMEOUT_MS, "offsets.topic.replication.factor": 1}


@pytest.fixture(scope="module")
def pybroker_cluster(zookeeper, tmp_path_factory) -> Iterator[Cluster]:
    cluster = start_cluster(chroot_for(zookeeper, "cluster-answers"), tmp_path_factory.mktemp("cluster-answers"),
                            **SETTINGS)
    try:
        yield cluster
    finally:
        cluster.kill()


@pytest.fixture(scope="module")
def kafka_three(zookeeper, request, tmp_path_factory) -> Iterator[KafkaCluster]:
    require_kafka(ZOOKEEPER_VERSION)
    cluster = KafkaCluster(tmp_path_factory.mktemp("kafka-cluster-answers"),
                           _kafka_chroot(zookeeper, request, "cluster-answers"), 3, quick_start=True, **SETTINGS)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
        cluster.kill()


class Brokers:
    """What the steps do to one cluster's brokers, by node id."""

    def __init__(self, addresses: dict[int, str], kill: Callable[[int], None], start: Callable[[int], None],
                 stop: Callable[[int], None]) -> None:
        self.addresses, self.kill, self.start, self.stop = addresses, kill, start, stop

    def alive_address(self, not_node: int | None = None) -> str:
        return next(a for n, a in self.addresses.items() if n != not_node)




def partition_state(address: str, topic: str) -> tuple[Any, ...]:
    answer = asyncio.run(send_once(address, ApiKey.METADATA, MetadataRequest(
        topics=[MetadataRequest.MetadataRequestTopic(name=topic)], allow_auto_topic_creation=False), 9))
    p = answer.topics[0].partitions[0]
    return (ErrorCode(p.error_code).name, p.leader_id, p.leader_epoch, list(p.replica_nodes), sorted(p.isr_nodes),
            sorted(p.offline_replicas))


def settled(address: str, topic: str, check: Callable[[tuple[Any, ...]], bool], message: str) -> tuple[Any, ...]:
    """The partition's state once ``check`` holds of it, as broker ``address`` answers."""
    found: list[tuple[Any, ...]] = []

    def ready() -> bool:
        found[:] = [partition_state(address, topic)]
        return check(found[0])

    wait_until(ready, timeout=60, interval=0.2, message=message)
    return found[0]


def steps(brokers: Brokers) -> list[tuple[str, Any]]:
    topic = f"answers-{uuid.uuid4().hex[:8]}"
    bootstrap = ",".join(brokers.addresses.values())
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, replica_assignment=[[1, 2, 3]])])[topic].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(5):
        producer.produce(topic, b"v%d" % i, partition=0)
    assert producer.flush(30) == 0
    found: list[tuple[str, Any]] = []
    found.append(("created", settled(brokers.addresses[2], topic, lambda s: len(s[4]) == 3, "a full ISR")))

    reassign = AlterPartitionReassignmentsRequest(timeout_ms=30_000, topics=[
        AlterPartitionReassignmentsRequest.ReassignableTopic(name=topic, partitions=[
            AlterPartitionReassignmentsRequest.ReassignablePartition(partition_index=0, replicas=[2, 3, 1])])])
    controller = next(a for a in brokers.addresses.values())
    answer = asyncio.run(send_to_controller(brokers, ApiKey.ALTER_PARTITION_REASSIGNMENTS, reassign, 0))
    found.append(("reassigned", ErrorCode(answer.error_code).name))
    found.append(("after the reassignment", settled(controller, topic, lambda s: s[3] == [2, 3, 1], "the new order")))
    elect = ElectLeadersRequest(election_type=0, timeout_ms=30_000, topic_partitions=[
        ElectLeadersRequest.TopicPartitions(topic=topic, partitions=[0])])
    answer = asyncio.run(send_to_controller(brokers, ApiKey.ELECT_LEADERS, elect, 1))
    found.append(("elected", [ErrorCode(p.error_code).name for t in answer.replica_election_results
                              for p in t.partition_result]))
    moved = settled(brokers.addresses[1], topic, lambda s: s[1] == 2, "broker 2 leading")
    found.append(("after the election", moved))
    old_epoch = found[2][1][2]
    produce = ProduceRequest(acks=1, timeout_ms=10_000, topic_data=[ProduceRequest.TopicProduceData(
        name=topic, partition_data=[ProduceRequest.PartitionProduceData(index=0, records=build_batch([(None, b"x")]))])])
    answer = asyncio.run(send_once(brokers.addresses[1], ApiKey.PRODUCE, produce, 9))
    found.append(("produce to the old leader", ErrorCode(answer.responses[0].partition_responses[0].error_code).name))
    fetch = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0,
                         session_id=0, session_epoch=-1, forgotten_topics_data=[], rack_id="", topics=[
                             FetchRequest.FetchTopic(topic=topic, partitions=[FetchRequest.FetchPartition(
                                 partition=0, fetch_offset=0, current_leader_epoch=old_epoch,
                                 partition_max_bytes=1 << 20)])])
    answer = asyncio.run(send_once(brokers.addresses[1], ApiKey.FETCH, fetch, 12))
    found.append(("fetch with the old epoch", ErrorCode(answer.responses[0].partitions[0].error_code).name))

    brokers.kill(3)
    found.append(("broker 3 killed", settled(brokers.addresses[2], topic, lambda s: 3 not in s[4], "3 out of the ISR")))
    brokers.start(3)
    found.append(("broker 3 back", settled(brokers.addresses[2], topic, lambda s: 3 in s[4], "3 back in the ISR")))

    brokers.stop(2)
    found.append(("broker 2 shut down", settled(brokers.addresses[1], topic, lambda s: s[1] != 2 and 2 not in s[4],
                                                "leadership away from 2")))
    brokers.start(2)
    settled(brokers.addresses[1], topic, lambda s: 2 in s[4], "2 back in the ISR")
    return found


async def send_to_controller(brokers: Brokers, api_key: int, message: Any, version: int) -> Any:
    address = brokers.alive_address()
    metadata = await send_once(address, ApiKey.METADATA, MetadataRequest(topics=[]), 1)
    (controller,) = (b for b in metadata.brokers if b.node_id == metadata.controller_id)
    return await send_once(f"{controller.host}:{controller.port}", api_key, message, version)


def test_three_brokers_answer_the_steps_as_kafka_does(pybroker_cluster, kafka_three):
    ours = steps(Brokers(
        {i: b.bootstrap for i, b in enumerate(pybroker_cluster.brokers, 1)},
        kill=lambda n: pybroker_cluster.broker(n).kill(), start=lambda n: pybroker_cluster.broker(n).start(),
        stop=lambda n: pybroker_cluster.broker(n).stop()))
    theirs = steps(Brokers(
        {b.node_id: b.bootstrap for b in kafka_three.brokers},
        kill=lambda n: kafka_three.broker(n).kill(), start=lambda n: kafka_three.broker(n).start(),
        stop=lambda n: kafka_three.broker(n).stop()))
    for (step, mine), (_, kafkas) in zip(ours, theirs, strict=True):
        assert mine == kafkas, step
    answers = dict(ours)
    assert answers["produce to the old leader"] == "NOT_LEADER_OR_FOLLOWER"
    assert answers["fetch with the old epoch"] == "FENCED_LEADER_EPOCH"
