"""The embedded consumer protocol (protocol type ``"consumer"``) that group members exchange
through the coordinator as opaque bytes: subscriptions (JoinGroup metadata) and assignments
(SyncGroup / DescribeGroups).

Layouts are Kafka's ``ConsumerProtocolSubscription`` and ``ConsumerProtocolAssignment``
(non-flexible, big-endian)::

    Assignment:   int16 version, [topic string, [int32 partition]], nullable bytes user_data
    Subscription: int16 version, [topic string], nullable bytes user_data,
                  v1+ [topic string, [int32 partition]] owned_partitions,
                  v2+ int32 generation_id, v3+ nullable string rack_id

A version newer than this module knows is read with the newest layout it knows, as Kafka's
``ConsumerProtocol`` does (later versions only append fields). Malformed bytes raise
``ValueError``.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from pybroker.protocol.primitives import StructReader, write_bytes, write_string
from pybroker.types import TopicPartition

PROTOCOL_TYPE = "consumer"
ASSIGNMENT_LATEST_VERSION = 3
SUBSCRIPTION_LATEST_VERSION = 3


@dataclass
class ConsumerAssignment:
    """What the group leader assigned to one member."""

    partitions: list[TopicPartition] = field(default_factory=list)
    user_data: bytes | None = None
    version: int = 0


@dataclass
class ConsumerSubscription:
    """What a member asked for when joining."""

    topics: list[str] = field(default_factory=list)
    user_data: bytes | None = None
    owned_partitions: list[TopicPartition] = field(default_factory=list)
    generation_id: int = -1
    rack_id: str | None = None
    version: int = 0


def _reader(data: bytes) -> StructReader:
    return StructReader(data, what="consumer protocol")


def _read_topic_partitions(reader: StructReader) -> list[TopicPartition]:
    out: list[TopicPartition] = []
    for _ in range(reader.array_length()):
        topic = reader.string()
        out.extend(TopicPartition(topic, reader.int32()) for _ in range(reader.array_length()))
    return out


def decode_assignment(data: bytes) -> ConsumerAssignment:
    """Decode a ``ConsumerProtocolAssignment``; empty bytes (no assignment yet) decode to none."""
    if not data:
        return ConsumerAssignment()
    reader = _reader(data)
    version = reader.int16()
    if version < 0:
        raise ValueError(f"consumer protocol: assignment version {version}")
    partitions = _read_topic_partitions(reader)
    user_data = reader.nullable_bytes()
    return ConsumerAssignment(partitions, user_data, version)


def decode_subscription(data: bytes) -> ConsumerSubscription:
    """Decode a ``ConsumerProtocolSubscription`` (JoinGroup / DescribeGroups member metadata)."""
    if not data:
        return ConsumerSubscription()
    reader = _reader(data)
    version = reader.int16()
    if version < 0:
        raise ValueError(f"consumer protocol: subscription version {version}")
    topics = [reader.string() for _ in range(reader.array_length())]
    user_data = reader.nullable_bytes()
    subscription = ConsumerSubscription(topics, user_data, version=version)
    if version >= 1 and not reader.at_end:
        subscription.owned_partitions = _read_topic_partitions(reader)
    if version >= 2 and not reader.at_end:
        subscription.generation_id = reader.int32()
    if version >= 3 and not reader.at_end:
        subscription.rack_id = reader.nullable_string()
    return subscription


def _topic_partitions(partitions: list[TopicPartition]) -> bytes:
    by_topic: dict[str, list[int]] = {}
    for tp in partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    out = [struct.pack(">i", len(by_topic))]
    for topic, indexes in by_topic.items():
        out.append(write_string(topic) + struct.pack(f">i{len(indexes)}i", len(indexes), *indexes))
    return b"".join(out)


def encode_assignment(assignment: ConsumerAssignment) -> bytes:
    """Encode a ``ConsumerProtocolAssignment`` (every version has the same layout)."""
    return (struct.pack(">h", assignment.version) + _topic_partitions(assignment.partitions)
            + write_bytes(assignment.user_data))


def encode_subscription(subscription: ConsumerSubscription) -> bytes:
    """Encode a ``ConsumerProtocolSubscription`` at ``subscription.version``."""
    version = subscription.version
    out = [struct.pack(">hi", version, len(subscription.topics))]
    out += [write_string(t) for t in subscription.topics]
    out.append(write_bytes(subscription.user_data))
    if version >= 1:
        out.append(_topic_partitions(subscription.owned_partitions))
    if version >= 2:
        out.append(struct.pack(">i", subscription.generation_id))
    if version >= 3:
        out.append(write_string(subscription.rack_id))
    return b"".join(out)
