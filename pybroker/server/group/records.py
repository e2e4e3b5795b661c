"""The records the group coordinator keeps in ``__consumer_offsets``, in Kafka's formats.

Keys carry a version that says what the record is: 0 and 1 are an offset commit
(group, topic, partition), 2 is a group's metadata (group). A record with a null value is a
tombstone: the offset or the group was deleted, and a later compaction keeps only the newest value
per key. Values are written in the versions Kafka 3.x writes: OffsetCommitValue v3 (v1 when the
commit has an explicit expire timestamp, from OffsetCommit v2-v4's retention time) and
GroupMetadataValue v3; every older non-flexible version is read.

Also here: which partition of ``__consumer_offsets`` owns a group (Kafka's ``partitionFor``:
the absolute value of Java's ``String.hashCode`` modulo the partition count).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from pybroker.protocol.primitives import StructReader, write_bytes, write_string

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSION = 3
OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY = 1
GROUP_METADATA_VALUE_VERSION = 3


class RecordFormatError(ValueError):
    """A key or value of ``__consumer_offsets`` that cannot be read."""


def partition_for(group_id: str, num_partitions: int) -> int:
    """The ``__consumer_offsets`` partition that holds ``group_id`` (Kafka's ``partitionFor``)."""
    h = 0
    for unit in struct.unpack(f">{len(group_id.encode('utf-16-be')) // 2}H", group_id.encode("utf-16-be")):
        h = (31 * h + unit) & 0xFFFFFFFF
    if h >= 0x80000000:
        h -= 0x100000000
    # Kafka's Utils.abs: Integer.MIN_VALUE maps to 0, everything else to its absolute value.
    return (0 if h == -0x80000000 else abs(h)) % num_partitions


# --- keys ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class OffsetCommitKey:
    group: str
    topic: str
    partition: int

    def encode(self) -> bytes:
        return (
            struct.pack(">h", OFFSET_COMMIT_KEY_VERSION)
            + write_string(self.group) + write_string(self.topic) + struct.pack(">i", self.partition)
        )


@dataclass(frozen=True)
class GroupMetadataKey:
    group: str

    def encode(self) -> bytes:
        return struct.pack(">h", GROUP_METADATA_KEY_VERSION) + write_string(self.group)


def decode_key(data: bytes) -> OffsetCommitKey | GroupMetadataKey | None:
    """The key of a ``__consumer_offsets`` record; None for kinds this coordinator does not keep
    (e.g. the new consumer protocol's records)."""
    reader = StructReader(data, RecordFormatError, "__consumer_offsets record")
    version = reader.int16()
    if version in (0, 1):
        return OffsetCommitKey(reader.string(), reader.string(), reader.int32())
    if version == 2:
        return GroupMetadataKey(reader.string())
    return None


# --- offset commit values -----------------------------------------------------------------------


@dataclass
class OffsetAndMetadata:
    """A committed offset as Kafka stores it (``expire_timestamp`` only from OffsetCommit v2-v4)."""

    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp: int = -1
    expire_timestamp: int | None = None

    def encode(self) -> bytes:
        if self.expire_timestamp is not None:
            return (
                struct.pack(">hq", OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY, self.offset)
                + write_string(self.metadata)
                + struct.pack(">qq", self.commit_timestamp, self.expire_timestamp)
            )
        return (
            struct.pack(">hqi", OFFSET_COMMIT_VALUE_VERSION, self.offset, self.leader_epoch)
            + write_string(self.metadata)
            + struct.pack(">q", self.commit_timestamp)
        )

    @classmethod
    def decode(cls, data: bytes) -> OffsetAndMetadata:
        reader = StructReader(data, RecordFormatError, "__consumer_offsets record")
        version = reader.int16()
        if version not in (0, 1, 2, 3):
            raise RecordFormatError(f"unsupported OffsetCommitValue version {version}")
        offset = reader.int64()
        leader_epoch = reader.int32() if version >= 3 else -1
        metadata = reader.nullable_string() or ""
        commit_timestamp = reader.int64()
        expire_timestamp = reader.int64() if version == 1 else None
        if expire_timestamp is not None and expire_timestamp < 0:
            expire_timestamp = None
        return cls(offset, leader_epoch, metadata, commit_timestamp, expire_timestamp)


# --- group metadata values ----------------------------------------------------------------------


@dataclass
class MemberRecord:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass
class GroupRecord:
    """GroupMetadataValue: a group's generation, chosen protocol, leader and members."""

    protocol_type: str
    generation_id: int
    protocol_name: str | None
    leader_id: str | None
    current_state_timestamp: int
    members: list[MemberRecord] = field(default_factory=list)

    def encode(self) -> bytes:
        parts = [
            struct.pack(">h", GROUP_METADATA_VALUE_VERSION),
            write_string(self.protocol_type),
            struct.pack(">i", self.generation_id),
            write_string(self.protocol_name),
            write_string(self.leader_id),
            struct.pack(">qi", self.current_state_timestamp, len(self.members)),
        ]
        for m in self.members:
            parts += [
                write_string(m.member_id), write_string(m.group_instance_id), write_string(m.client_id), write_string(m.client_host),
                struct.pack(">ii", m.rebalance_timeout_ms, m.session_timeout_ms),
                write_bytes(m.subscription), write_bytes(m.assignment),
            ]
        return b"".join(parts)

    @classmethod
    def decode(cls, data: bytes) -> GroupRecord:
        reader = StructReader(data, RecordFormatError, "__consumer_offsets record")
        version = reader.int16()
        if version not in (0, 1, 2, 3):
            raise RecordFormatError(f"unsupported GroupMetadataValue version {version}")
        protocol_type = reader.string()
        generation_id = reader.int32()
        protocol_name = reader.nullable_string()
        leader_id = reader.nullable_string()
        current_state_timestamp = reader.int64() if version >= 2 else -1
        count = reader.array_length(nullable=False)
        members = []
        for _ in range(count):
            member_id = reader.string()
            group_instance_id = reader.nullable_string() if version >= 3 else None
            client_id = reader.string()
            client_host = reader.string()
            session_timeout = reader.int32()
            rebalance_timeout = session_timeout
            if version >= 1:
                rebalance_timeout, session_timeout = session_timeout, reader.int32()
            members.append(MemberRecord(
                member_id, group_instance_id, client_id, client_host, rebalance_timeout, session_timeout,
                (reader.nullable_bytes() or b""), (reader.nullable_bytes() or b""),
            ))
        return cls(protocol_type, generation_id, protocol_name, leader_id, current_state_timestamp, members)

