"""DeleteRecords v0–v2 in every case of seeds 001's and 004's rules, on pybroker beside Apache
Kafka 3.9.2: one broker beside one, three beside three, the same raw requests to each.

Each version gets a fresh topic of ten records and these requests: an offset inside the log, one
below the log start offset (nothing moves), -1 (the high watermark), one past the high watermark,
another negative one, a partition and a topic that do not exist, and an internal topic; then
ListOffsets EARLIEST. On three brokers the request also goes to a follower, and every replica's
log start offset is read afterwards (ListOffsets EARLIEST with the debugging replica id, which a
follower answers from its own log: seed 004's followers learn the leader's log start offset from
their fetches). The answers must be the same (KIP-1343's v3 is pybroker's own: not compared).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from pybroker.common.errors import ErrorCode
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages import (
    CreateTopicsRequest,
    DeleteRecordsRequest,
    FindCoordinatorRequest,
    ListOffsetsRequest,
    MetadataRequest,
    ProduceRequest,
)
from tests.conftest import send_once
from tests.integration.cluster import Cluster, start_cluster
from tests.unit.batches import build_batch
from tests.zookeeper import chroot_for

EARLIEST = -2
DEBUGGING_REPLICA_ID = -2


@pytest.fixture(scope="module")
def cluster(zookeeper, tmp_path_factory) -> Iterator[Cluster]:
    cluster = start_cluster(chroot_for(zookeeper, "delete-records"), tmp_path_factory.mktemp("delete-records"))
    try:
        yield cluster
    finally:
        cluster.kill()




async def delete(address: str, topic: str, partition: int, offset: int, version: int) -> tuple[str, int]:
    answer = await send_once(address, ApiKey.DELETE_RECORDS, DeleteRecordsRequest(timeout_ms=30_000, topics=[
        DeleteRecordsRequest.DeleteRecordsTopic(name=topic, partitions=[
            DeleteRecordsRequest.DeleteRecordsPartition(partition_index=partition, offset=offset)])]), version)
    result = answer.topics[0].partitions[0]
    return ErrorCode(result.error_code).name, result.low_watermark


async def earliest(address: str, topic: str, replica_id: int = -1) -> tuple[str, int]:
    answer = await send_once(address, ApiKey.LIST_OFFSETS, ListOffsetsRequest(
        replica_id=replica_id, isolation_level=0, topics=[ListOffsetsRequest.ListOffsetsTopic(
            name=topic, partitions=[ListOffsetsRequest.ListOffsetsPartition(
                partition_index=0, timestamp=EARLIEST)])]), 1)
    result = answer.topics[0].partitions[0]
    return ErrorCode(result.error_code).name, result.offset


async def controller(address: str) -> str:
    """The address of the controller, which CreateTopics must go to (NOT_CONTROLLER elsewhere)."""
    answer = await send_once(address, ApiKey.METADATA, MetadataRequest(topics=[]), 1)
    (found,) = (b for b in answer.brokers if b.node_id == answer.controller_id)
    return f"{found.host}:{found.port}"


async def topic_of_ten(address: str, replicas: list[int]) -> str:
    """A topic of one partition on ``replicas`` (the first leads) holding ten records."""
    topic = f"dr-{uuid.uuid4().hex[:8]}"
    answer = await send_once(await controller(address), ApiKey.CREATE_TOPICS, CreateTopicsRequest(timeout_ms=30_000, validate_only=False,
        topics=[CreateTopicsRequest.CreatableTopic(name=topic, num_partitions=-1, replication_factor=-1, configs=[],
                assignments=[CreateTopicsRequest.CreatableReplicaAssignment(partition_index=0, broker_ids=replicas)])]),
        4)
    assert answer.topics[0].error_code == 0, answer
    produce = ProduceRequest(acks=-1, timeout_ms=30_000, topic_data=[ProduceRequest.TopicProduceData(
        name=topic, partition_data=[ProduceRequest.PartitionProduceData(
            index=0, records=build_batch([(None, b"v%d" % i) for i in range(10)]))])])
    for _ in range(100):
        result = (await send_once(address, ApiKey.PRODUCE, produce, 7)).responses[0].partition_responses[0]
        if result.error_code == 0:
            return topic
        await asyncio.sleep(0.1)
    raise AssertionError(f"produce to {topic}: {ErrorCode(result.error_code).name}")


async def offsets_topic(address: str) -> None:
    """__consumer_offsets exists (FindCoordinator creates it)."""
    for _ in range(100):
        answer = await send_once(address, ApiKey.FIND_COORDINATOR, FindCoordinatorRequest(key="dr-group", key_type=0), 2)
        if answer.error_code == 0:
            return
        await asyncio.sleep(0.1)
    raise AssertionError("no group coordinator")


async def cases(leader: str, replicas: list[int]) -> list[tuple[str, Any]]:
    """The rules' cases at each version, sent to ``leader`` (which leads every new topic)."""
    await offsets_topic(leader)
    steps: list[tuple[str, Any]] = []
    for version in (0, 1, 2):
        topic = await topic_of_ten(leader, replicas)
        for what, offset in (("inside", 4), ("below the log start", 2), ("-1: the high watermark", -1),
                             ("past the high watermark", 11), ("another negative offset", -2)):
            steps.append((f"v{version} {what}", await delete(leader, topic, 0, offset, version)))
        steps.append((f"v{version} earliest after", await earliest(leader, topic)))
        steps.append((f"v{version} a partition that does not exist", await delete(leader, topic, 5, 1, version)))
        steps.append((f"v{version} a topic that does not exist",
                      await delete(leader, f"dr-missing-{uuid.uuid4().hex[:6]}", 0, 1, version)))
        steps.append((f"v{version} an internal topic", await delete(leader, "__consumer_offsets", 0, 0, version)))
    return steps


def test_one_broker_answers_as_kafka(broker, kafka):
    ours, theirs = asyncio.run(cases(broker.bootstrap, [1])), asyncio.run(cases(kafka.bootstrap, [1]))
    for (step, mine), (_, kafkas) in zip(ours, theirs, strict=True):
        assert mine == kafkas, step
    answers = dict(ours)
    assert answers["v2 inside"] == ("NONE", 4) and answers["v2 below the log start"] == ("NONE", 4)
    assert answers["v2 -1: the high watermark"] == ("NONE", 10)
    assert answers["v2 past the high watermark"][0] == "OFFSET_OUT_OF_RANGE"
    assert answers["v2 earliest after"] == ("NONE", 10)


async def on_three(addresses: dict[int, str]) -> list[tuple[str, Any]]:
    topic = await topic_of_ten(addresses[1], [1, 2, 3])
    steps: list[tuple[str, Any]] = [("to a follower", await delete(addresses[2], topic, 0, 3, 2))]
    steps.append(("to the leader", await delete(addresses[1], topic, 0, 6, 2)))
    for node in (2, 3):  # DeleteRecords answered once every replica's log start offset reached 6
        steps.append((f"broker {node}'s log start offset", await earliest(addresses[node], topic, DEBUGGING_REPLICA_ID)))
    steps.append(("earliest", await earliest(addresses[1], topic)))
    return steps


def test_three_brokers_answer_as_three_of_kafka(cluster, kafka_cluster):
    ours = asyncio.run(on_three({i: b.bootstrap for i, b in enumerate(cluster.brokers, 1)}))
    theirs = asyncio.run(on_three({b.node_id: b.bootstrap for b in kafka_cluster.brokers}))
    for (step, mine), (_, kafkas) in zip(ours, theirs, strict=True):
        assert mine == kafkas, step
    answers = dict(ours)
    assert answers["to a follower"][0] == "NOT_LEADER_OR_FOLLOWER"
    assert answers["to the leader"] == ("NONE", 6) == answers["broker 3's log start offset"]
