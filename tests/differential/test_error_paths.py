"""Requests that must fail, sent as raw frames to pybroker and to Apache Kafka 3.9.2: the error
codes and messages must be the same, and so must whether the broker answers or closes.

Produce: an unknown topic and partition, a record set over ``max.message.bytes``, a bad CRC, a
magic 1 batch in v3+, acks 2. Fetch: an offset past the end, a leader epoch from the future.
ListOffsets and OffsetForLeaderEpoch with that epoch. CreateTopics: an invalid config value, an
unknown config, zero partitions, a replication factor of zero, a name with a slash, one too long,
a topic that exists. Metadata of a topic that does not exist, without auto-creation. Frames: a
body cut short, an unknown API key, a negative client-id length.
"""

from __future__ import annotations

import asyncio
import re
import socket
import struct
import uuid
import zlib
from typing import Any

from pybroker.common.errors import ErrorCode
from pybroker.protocol import codec
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages import (
    CreateTopicsRequest,
    FetchRequest,
    ListOffsetsRequest,
    MetadataRequest,
    OffsetForLeaderEpochRequest,
    ProduceRequest,
)
from tests.conftest import send_once
from tests.unit.batches import build_batch

FUTURE_EPOCH = 7
# A bad value of each kind of topic config: Kafka's ConfigDef words each refusal its own way.
BAD_CONFIGS = [
    ("retention.ms", "-5"), ("segment.bytes", "99999999999"), ("min.insync.replicas", "0"),
    ("min.insync.replicas", "x"), ("min.cleanable.dirty.ratio", "2"), ("min.cleanable.dirty.ratio", "y"),
    ("unclean.leader.election.enable", "maybe"), ("message.timestamp.type", "Bad"), ("cleanup.policy", "bogus"),
    ("compression.type", "brotli"),
]




def produce_request(topic: str, partition: int, records: bytes, acks: int = 1) -> ProduceRequest:
    return ProduceRequest(acks=acks, timeout_ms=10_000, topic_data=[ProduceRequest.TopicProduceData(
        name=topic, partition_data=[ProduceRequest.PartitionProduceData(index=partition, records=records)])])


async def produce(address: str, topic: str, partition: int, records: bytes, acks: int = 1,
                  version: int = 9) -> tuple[str, str | None]:
    answer = (await send_once(address, ApiKey.PRODUCE, produce_request(topic, partition, records, acks), version))
    result = answer.responses[0].partition_responses[0]
    return ErrorCode(result.error_code).name, result.error_message


def magic_1_message() -> bytes:
    body = struct.pack(">bbq", 1, 0, 1_000) + struct.pack(">i", -1) + struct.pack(">i", 1) + b"v"
    body = struct.pack(">I", zlib.crc32(body)) + body
    return struct.pack(">qi", 0, len(body)) + body


def damaged_batches() -> list[tuple[str, bytes]]:
    good = build_batch([(b"k", b"v")])
    two = good + build_batch([(b"k", b"w")])
    return [
        ("a v2 batch whose magic byte says 1", good[:16] + b"\x01" + good[17:]),
        ("a batch longer than its data", good[:8] + struct.pack(">i", len(good)) + good[12:]),
        ("a batch cut to 30 bytes", good[:30]),
        ("a batch cut to 10 bytes", good[:10]),
        ("a batch length below the minimum", good[:8] + struct.pack(">i", 5) + good[12:]),
        ("two batches", two),
        ("a batch and 20 bytes more", good + good[:20]),
        ("a batch and 5 bytes more", good + good[:5]),
    ]


async def create(address: str, name: str, partitions: int = 1, replication: int = 1,
                 configs: dict[str, str] | None = None) -> tuple[str, str | None]:
    answer = await send_once(address, ApiKey.CREATE_TOPICS, CreateTopicsRequest(timeout_ms=30_000, validate_only=False,
        topics=[CreateTopicsRequest.CreatableTopic(
            name=name, num_partitions=partitions, replication_factor=replication, assignments=[],
            configs=[CreateTopicsRequest.CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()])]),
        7)
    result = answer.topics[0]
    return ErrorCode(result.error_code).name, result.error_message


async def fetch(address: str, topic: str, offset: int, epoch: int = -1) -> tuple[str, int]:
    answer = await send_once(address, ApiKey.FETCH, FetchRequest(
        replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0, session_id=0,
        session_epoch=-1, forgotten_topics_data=[], rack_id="", topics=[FetchRequest.FetchTopic(
            topic=topic, partitions=[FetchRequest.FetchPartition(
                partition=0, fetch_offset=offset, current_leader_epoch=epoch, partition_max_bytes=1 << 20)])]), 12)
    result = answer.responses[0].partitions[0]
    return ErrorCode(result.error_code).name, result.high_watermark


async def list_offsets(address: str, topic: str, epoch: int) -> str:
    answer = await send_once(address, ApiKey.LIST_OFFSETS, ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[
        ListOffsetsRequest.ListOffsetsTopic(name=topic, partitions=[ListOffsetsRequest.ListOffsetsPartition(
            partition_index=0, current_leader_epoch=epoch, timestamp=-1)])]), 7)
    return ErrorCode(answer.topics[0].partitions[0].error_code).name


async def offset_for_leader_epoch(address: str, topic: str, epoch: int) -> tuple[str, int, int]:
    answer = await send_once(address, ApiKey.OFFSET_FOR_LEADER_EPOCH, OffsetForLeaderEpochRequest(
        replica_id=-1, topics=[OffsetForLeaderEpochRequest.OffsetForLeaderTopic(topic=topic, partitions=[
            OffsetForLeaderEpochRequest.OffsetForLeaderPartition(partition=0, current_leader_epoch=epoch,
                                                                 leader_epoch=0)])]), 4)
    result = answer.topics[0].partitions[0]
    return ErrorCode(result.error_code).name, result.leader_epoch, result.end_offset


def raw_frame(address: str, frame: bytes) -> str:
    """Send one hand-made frame: "answered" (with the frame's first bytes' correlation id) or
    "closed"."""
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(struct.pack(">i", len(frame)) + frame)
        try:
            head = sock.recv(8)
        except (ConnectionResetError, TimeoutError):
            return "closed"
        return "closed" if not head else f"answered, correlation id {struct.unpack('>i', head[4:8])[0]}"


async def steps(address: str) -> list[tuple[str, Any]]:
    run = uuid.uuid4().hex[:8]
    topic = f"errors-{run}"
    found: list[tuple[str, Any]] = [("create", await create(address, topic))]
    for _ in range(100):
        if (await produce(address, topic, 0, build_batch([(None, b"v")])))[0] == "NONE":
            break
        await asyncio.sleep(0.1)
    found += [
        ("produce to an unknown topic", await produce(address, f"errors-missing-{run}", 0, build_batch([(None, b"v")]))),
        ("produce to an unknown partition", await produce(address, topic, 3, build_batch([(None, b"v")]))),
        ("produce over max.message.bytes", await produce(address, topic, 0, build_batch([(None, b"x" * 1_100_000)]))),
        ("produce with a bad CRC", await produce(address, topic, 0, build_batch([(None, b"v")])[:-1] + b"w")),
        ("produce magic 1 in v9", await produce(address, topic, 0, magic_1_message())),
        *[(f"produce {what}", await produce(address, topic, 0, records)) for what, records in damaged_batches()],
        ("produce with acks 2", await produce(address, topic, 0, build_batch([(None, b"v")]), acks=2)),
        ("fetch past the end", await fetch(address, topic, 5)),
        ("fetch with a future leader epoch", await fetch(address, topic, 0, FUTURE_EPOCH)),
        ("list offsets with a future leader epoch", await list_offsets(address, topic, FUTURE_EPOCH)),
        ("offset for leader epoch with a future epoch", await offset_for_leader_epoch(address, topic, FUTURE_EPOCH)),
        ("create with an invalid config value", await create(address, f"e1-{run}", configs={"retention.ms": "abc"})),
        *[(f"create with {name}={value}", await create(address, f"e1{i}-{run}", configs={name: value}))
          for i, (name, value) in enumerate(BAD_CONFIGS)],
        ("create with an unknown config", await create(address, f"e2-{run}", configs={"no.such.config": "1"})),
        ("create with zero partitions", await create(address, f"e3-{run}", partitions=0)),
        ("create with replication factor 0", await create(address, f"e4-{run}", replication=0)),
        ("create with a slash in the name", await create(address, f"e5/{run}")),
        ("create with a name too long", await create(address, "e" * 250)),
        ("create named .", await create(address, ".")),
        ("create with an empty name", await create(address, "")),
        ("create a topic that exists", await create(address, topic)),
    ]
    metadata = await send_once(address, ApiKey.METADATA, MetadataRequest(
        topics=[MetadataRequest.MetadataRequestTopic(name=f"errors-missing-{run}")], allow_auto_topic_creation=False), 9)
    found.append(("metadata of a missing topic", ErrorCode(metadata.topics[0].error_code).name))
    header = struct.pack(">hhi", ApiKey.METADATA, 9, 41) + struct.pack(">h", 3) + b"raw" + b"\x00"
    found.append(("a body cut short", raw_frame(address, header + b"\x02")))
    found.append(("an unknown API key", raw_frame(address, struct.pack(">hhi", 9999, 0, 42) + struct.pack(">h", -1))))
    found.append(("a negative client id length",
                  raw_frame(address, struct.pack(">hhi", ApiKey.METADATA, 1, 43) + struct.pack(">h", -7))))
    assert bytes(codec.encode_request(ApiKey.METADATA, 1, 1, "x", MetadataRequest(topics=[])))  # the codec is sane
    return found


def normalized(found: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
    """Each run's topic names replaced by a placeholder."""
    return [(step, eval(re.sub(r"[0-9a-f]{8}(?=[-'\"/ ]|\b)", "RUN", repr(answer))))  # noqa: S307 - our own reprs
            for step, answer in found]


def test_pybroker_refuses_as_kafka_refuses(broker, kafka):
    ours, theirs = normalized(asyncio.run(steps(broker.bootstrap))), normalized(asyncio.run(steps(kafka.bootstrap)))
    mismatches = [(step, mine, kafkas) for (step, mine), (_, kafkas) in zip(ours, theirs, strict=True) if mine != kafkas]
    assert not mismatches, "\n".join(f"{s}:\n  pybroker {m}\n  kafka    {k}" for s, m, k in mismatches)
