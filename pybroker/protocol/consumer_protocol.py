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


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos = memoryview(data), 0

    def _take(self, size: int, what: str) -> memoryview:
        if size < 0 or self.pos + size > len(self.data):
            raise ValueError(f"consumer protocol: {what} runs past the end ({len(self.data)} bytes)")
        chunk = self.data[self.pos:self.pos + size]
        self.pos += size
        return chunk

    def int16(self) -> int:
        return struct.unpack(">h", self._take(2, "int16"))[0]

    def int32(self) -> int:
        return struct.unpack(">i", self._take(4, "int32"))[0]

    def string(self, nullable: bool = False) -> str | None:
        size = self.int16()
        if size == -1 and nullable:
            return None
        return bytes(self._take(size, "string")).decode("utf-8")

    def nullable_bytes(self) -> bytes | None:
        size = self.int32()
        if size == -1:
            return None
        return bytes(self._take(size, "bytes"))

    def count(self) -> int:
        size = self.int32()
        if size < -1:
            raise ValueError(f"consumer protocol: negative array length {size}")
        return max(size, 0)

    def topic_partitions(self) -> list[TopicPartition]:
        out = []
        for _ in range(self.count()):
            topic = self.string()
            assert topic is not None
            out.extend(TopicPartition(topic, self.int32()) for _ in range(self.count()))
        return out

    @property
    def at_end(self) -> bool:
        return self.pos >= len(self.data)


def decode_assignment(data: bytes) -> ConsumerAssignment:
    """Decode a ``ConsumerProtocolAssignment``; empty bytes (no assignment yet) decode to none."""
    if not data:
        return ConsumerAssignment()
    reader = _Reader(data)
    version = reader.int16()
    if version < 0:
        raise ValueError(f"consumer protocol: assignment version {version}")
    partitions = reader.topic_partitions()
    user_data = reader.nullable_bytes()
    return ConsumerAssignment(partitions, user_data, version)


def decode_subscription(data: bytes) -> ConsumerSubscription:
    """Decode a ``ConsumerProtocolSubscription`` (JoinGroup / DescribeGroups member metadata)."""
    if not data:
        return ConsumerSubscription()
    reader = _Reader(data)
    version = reader.int16()
    if version < 0:
        raise ValueError(f"consumer protocol: subscription version {version}")
    topics = [t for t in (reader.string() for _ in range(reader.count())) if t is not None]
    user_data = reader.nullable_bytes()
    subscription = ConsumerSubscription(topics, user_data, version=version)
    if version >= 1 and not reader.at_end:
        subscription.owned_partitions = reader.topic_partitions()
    if version >= 2 and not reader.at_end:
        subscription.generation_id = reader.int32()
    if version >= 3 and not reader.at_end:
        subscription.rack_id = reader.string(nullable=True)
    return subscription


def _string(value: str) -> bytes:
    raw = value.encode("utf-8")
    return struct.pack(">h", len(raw)) + raw


def _nullable_bytes(value: bytes | None) -> bytes:
    return struct.pack(">i", -1) if value is None else struct.pack(">i", len(value)) + value


def _topic_partitions(partitions: list[TopicPartition]) -> bytes:
    by_topic: dict[str, list[int]] = {}
    for tp in partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    out = [struct.pack(">i", len(by_topic))]
    for topic, indexes in by_topic.items():
        out.append(_string(topic) + struct.pack(f">i{len(indexes)}i", len(indexes), *indexes))
    return b"".join(out)


def encode_assignment(assignment: ConsumerAssignment) -> bytes:
    """Encode a ``ConsumerProtocolAssignment`` (every version has the same layout)."""
    return (struct.pack(">h", assignment.version) + _topic_partitions(assignment.partitions)
            + _nullable_bytes(assignment.user_data))


def encode_subscription(subscription: ConsumerSubscription) -> bytes:
    """Encode a ``ConsumerProtocolSubscription`` at ``subscription.version``."""
    version = subscription.version
    out = [struct.pack(">hi", version, len(subscription.topics))]
    out += [_string(t) for t in subscription.topics]
    out.append(_nullable_bytes(subscription.user_data))
    if version >= 1:
        out.append(_topic_partitions(subscription.owned_partitions))
    if version >= 2:
        out.append(struct.pack(">i", subscription.generation_id))
    if version >= 3:
        out.append(struct.pack(">h", -1) if subscription.rack_id is None else _string(subscription.rack_id))
    return b"".join(out)
