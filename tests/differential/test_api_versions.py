"""ApiVersions on pybroker beside Apache Kafka 3.9.2: the version ranges are an answer too.

Every API key either broker lists is compared at each ApiVersions version (v0–v4). A range that
differs must be in `DIFFERENCES`, with why (docs/differences.md lists the same), so a range that
moves on either side without the table moving fails the test. Then the oldest versions pybroker
serves since it lists them as Kafka does — CreateTopics v0–1, DeleteTopics v0, OffsetForLeaderEpoch
v0–1, DescribeConfigs v0 (Produce v0–2, Fetch v0–3 and ListOffsets v0 are in
test_message_formats.py) — are sent to both brokers and answered alike.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from pybroker.common.errors import ErrorCode
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages import (
    ApiVersionsRequest,
    CreateTopicsRequest,
    DeleteTopicsRequest,
    DescribeConfigsRequest,
    OffsetForLeaderEpochRequest,
)
from tests.conftest import broker_connection

# API key: (Kafka 3.9.2's range, pybroker's range; None where one does not list the key), why.
NEWER_IN_KAFKA = "versions newer than pybroker serves yet; clients use the highest both have"
INTER_BROKER = ("inter-broker: pybroker's brokers and controller speak the versions of one "
                "inter.broker.protocol.version to each other and never to a Kafka broker")
KIP_890 = "KIP-890 part 2 (transactions v2): versions a client uses only when the broker finalizes transaction.version 2"
DIFFERENCES: dict[int, tuple[tuple[int, int] | None, tuple[int, int] | None, str]] = {
    ApiKey.PRODUCE: ((0, 11), (0, 9), "v10 KIP-951 leader hints, v11 " + KIP_890),
    ApiKey.FETCH: ((0, 17), (0, 12), "v13+ name topics by id (KIP-516), v16 KIP-951, v17 KIP-853: " + NEWER_IN_KAFKA),
    ApiKey.LIST_OFFSETS: ((0, 9), (0, 7), "v8 and v9 look up tiered storage (KIP-405, KIP-1005), which pybroker has not"),
    ApiKey.LEADER_AND_ISR: ((0, 7), (4, 5), INTER_BROKER),
    ApiKey.STOP_REPLICA: ((0, 4), (3, 3), INTER_BROKER),
    ApiKey.UPDATE_METADATA: ((0, 8), (6, 7), INTER_BROKER),
    ApiKey.CONTROLLED_SHUTDOWN: ((0, 3), (3, 3), INTER_BROKER),
    ApiKey.OFFSET_COMMIT: ((0, 9), (2, 8), "v0 commits to ZooKeeper and v1 has a per-partition commit time, "
                                           "neither served; v9 is KIP-848's member epoch"),
    ApiKey.OFFSET_FETCH: ((0, 9), (1, 8), "v0 reads ZooKeeper-stored offsets, not served; v9 is KIP-848's"),
    ApiKey.FIND_COORDINATOR: ((0, 6), (0, 4), "v5 " + KIP_890 + "; v6 finds share coordinators (KIP-932)"),
    ApiKey.JOIN_GROUP: ((0, 9), (0, 7), "v8 (KIP-800 leave reasons) and v9 (KIP-814): " + NEWER_IN_KAFKA),
    ApiKey.DELETE_RECORDS: ((0, 2), (0, 3), "KIP-1343's v3 (seed 000): LeaderOnly and LeaderLogStartOffset"),
    ApiKey.INIT_PRODUCER_ID: ((0, 5), (0, 4), KIP_890),
    ApiKey.ADD_PARTITIONS_TO_TXN: ((0, 5), (0, 4), KIP_890),
    ApiKey.ADD_OFFSETS_TO_TXN: ((0, 4), (0, 3), KIP_890),
    ApiKey.END_TXN: ((0, 4), (0, 3), KIP_890),
    ApiKey.TXN_OFFSET_COMMIT: ((0, 4), (0, 3), KIP_890),
    38: ((0, 3), None, "delegation tokens are not implemented"),
    39: ((0, 2), None, "delegation tokens are not implemented"),
    40: ((0, 2), None, "delegation tokens are not implemented"),
    41: ((0, 3), None, "delegation tokens are not implemented"),
    ApiKey.ALTER_PARTITION: ((0, 3), (0, 1), INTER_BROKER),
    57: ((0, 1), None, "UpdateFeatures: pybroker finalizes no features"),
    58: ((0, 0), None, "Envelope: forwarding to a KRaft controller, which pybroker has not"),
    ApiKey.LIST_TRANSACTIONS: ((0, 1), (0, 0), "v1 filters by duration (KIP-994): " + NEWER_IN_KAFKA),
    67: ((0, 0), None, "AllocateProducerIds: pybroker's brokers take producer id blocks from ZooKeeper"),
    68: ((0, 0), None, "KIP-848's consumer groups are not implemented"),
    69: ((0, 0), None, "KIP-848's consumer groups are not implemented"),
    ApiKey.CONSUMER_GROUP_POSITION: (None, (0, 0), "KIP-253 (seed 002), pybroker's own API"),
    ApiKey.PARTITION_LEADER_EPOCHS_FOR_PARTITIONS: (None, (0, 0), "KIP-253 (seed 002), pybroker's own API"),
}


async def api_versions(bootstrap: str) -> dict[int, Any]:
    """ApiVersions' answer at each version: (error, {key: (min, max)}, features)."""
    connection = await broker_connection(bootstrap)
    answers: dict[int, Any] = {}
    try:
        for version in range(5):
            request = ApiVersionsRequest(client_software_name="pybroker-tests", client_software_version="1")
            answer = await connection.send(ApiKey.API_VERSIONS, request, version=version)
            answers[version] = (
                ErrorCode(answer.error_code).name,
                {k.api_key: (k.min_version, k.max_version) for k in answer.api_keys},
                [(f.name, f.min_version, f.max_version) for f in answer.supported_features or []],
            )
    finally:
        await connection.close()
    return answers


def test_the_version_ranges_are_kafkas_but_for_the_listed_differences(broker, kafka):
    ours, theirs = asyncio.run(api_versions(broker.bootstrap)), asyncio.run(api_versions(kafka.bootstrap))
    for version in range(5):
        (our_error, our_ranges, our_features), (their_error, their_ranges, their_features) = (
            ours[version], theirs[version])
        assert (our_error, our_features) == (their_error, their_features), version
        found = {
            key: (their_ranges.get(key), our_ranges.get(key))
            for key in our_ranges.keys() | their_ranges.keys()
            if our_ranges.get(key) != their_ranges.get(key)
        }
        assert found == {key: (kafkas, ours) for key, (kafkas, ours, _why) in DIFFERENCES.items()}, version


async def oldest_versions(bootstrap: str) -> list[tuple[str, Any]]:
    """The same requests at versions below what pybroker served before, to one broker."""
    connection = await broker_connection(bootstrap)
    run = uuid.uuid4().hex[:8]
    steps: list[tuple[str, Any]] = []

    def topics(answer: Any) -> list[tuple[str, str, str | None]]:
        return [(t.name, ErrorCode(t.error_code).name, getattr(t, "error_message", None)) for t in answer.topics]

    try:
        for version in (0, 1):
            name = f"old-{version}-{run}"
            request = CreateTopicsRequest(timeout_ms=30_000, validate_only=version == 1, topics=[
                CreateTopicsRequest.CreatableTopic(name=name, num_partitions=1, replication_factor=1, assignments=[],
                                                   configs=[CreateTopicsRequest.CreatableTopicConfig(
                                                       name="retention.ms", value="3600000")]),
                CreateTopicsRequest.CreatableTopic(name=name + "-bad", num_partitions=1, replication_factor=7,
                                                   assignments=[], configs=[])])
            answer = await connection.send(ApiKey.CREATE_TOPICS, request, version=version)
            steps.append((f"create topics v{version}", [
                (t.name.replace(run, "*"), ErrorCode(t.error_code).name, t.error_message) for t in answer.topics]))
        kept = f"old-0-{run}"
        for version in (0, 1):
            request = OffsetForLeaderEpochRequest(topics=[OffsetForLeaderEpochRequest.OffsetForLeaderTopic(
                topic=kept, partitions=[OffsetForLeaderEpochRequest.OffsetForLeaderPartition(
                    partition=p, leader_epoch=0) for p in (0, 3)])])
            for _ in range(100):
                answer = await connection.send(ApiKey.OFFSET_FOR_LEADER_EPOCH, request, version=version)
                partitions = answer.topics[0].partitions
                if partitions[0].error_code != ErrorCode.LEADER_NOT_AVAILABLE:
                    break
                await asyncio.sleep(0.1)
            steps.append((f"offset for leader epoch v{version}", [
                (p.partition, ErrorCode(p.error_code).name, p.leader_epoch, p.end_offset) for p in partitions]))
        request = DescribeConfigsRequest(resources=[DescribeConfigsRequest.DescribeConfigsResource(
            resource_type=2, resource_name=kept,
            configuration_keys=["cleanup.policy", "retention.ms", "min.insync.replicas", "segment.bytes"])])
        answer = await connection.send(ApiKey.DESCRIBE_CONFIGS, request, version=0)
        result = answer.results[0]
        steps.append(("describe configs v0", (ErrorCode(result.error_code).name, sorted(
            (c.name, c.value, c.read_only, c.is_default, c.is_sensitive) for c in result.configs))))
        answer = await connection.send(ApiKey.DELETE_TOPICS, DeleteTopicsRequest(
            topic_names=[kept, f"old-missing-{run}"], timeout_ms=30_000), version=0)
        steps.append(("delete topics v0", sorted(
            (r.name.replace(run, "*"), ErrorCode(r.error_code).name) for r in answer.responses)))
    finally:
        await connection.close()
    return steps


def test_the_oldest_versions_are_answered_as_kafka_answers_them(broker, kafka):
    ours, theirs = asyncio.run(oldest_versions(broker.bootstrap)), asyncio.run(oldest_versions(kafka.bootstrap))
    for (step, mine), (_, kafkas) in zip(ours, theirs, strict=True):
        assert mine == kafkas, step
    answers = dict(ours)
    assert answers["create topics v0"][0][1] == "NONE"
    # v0 has IsDefault where later versions have ConfigSource; Kafka 3.9 leaves it false, even for
    # a config nobody set.
    assert ("cleanup.policy", "delete", False, False, False) in answers["describe configs v0"][1]
