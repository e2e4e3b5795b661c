"""The records of ``__transaction_state``, in Kafka's formats (Kafka's ``TransactionLog``).

A record's key is ``TransactionLogKey`` v0 (version-prefixed: int16 version 0, then the
transactional id as an int16-length string). Its value is ``TransactionLogValue`` v0, what Kafka
3.6 writes: int16 version 0, producer id (int64), producer epoch (int16), transaction timeout
(int32), state id (int8), the transaction's partitions (nullable int32-count array of
{int16-length topic, int32-count array of int32 partitions}; null for Empty), last-update
timestamp (int64) and start timestamp (int64). Version 1, the flexible form of the same fields,
is read too. A null value is a tombstone: the transactional id expired. Like Kafka, the last
producer id and epoch (KIP-360) are not stored: a loaded id has none.

Also here: the partition of ``__transaction_state`` a transactional id belongs to (Kafka's
``partitionFor``, the same function as for groups).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from pybroker.protocol.primitives import StructReader, write_string
from pybroker.server.group.records import partition_for
from pybroker.server.transaction.metadata import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TransactionMetadata,
    TransactionState,
    TxnTransitMetadata,
)
from pybroker.types import TopicPartition

__all__ = [
    "TRANSACTION_STATE_TOPIC", "KEY_VERSION", "VALUE_VERSION", "TxnKey", "UnknownKey", "RecordFormatError",
    "key_to_bytes", "value_to_bytes", "read_key", "read_value", "partition_for",
]

TRANSACTION_STATE_TOPIC = "__transaction_state"
KEY_VERSION = 0
VALUE_VERSION = 0  # the highest non-flexible version: what Kafka 3.6 writes
_HIGHEST_VALUE_VERSION = 1


class RecordFormatError(ValueError):
    """A key or value of ``__transaction_state`` that cannot be read."""


@dataclass(frozen=True)
class TxnKey:
    transactional_id: str


@dataclass(frozen=True)
class UnknownKey:
    """A key of a version this coordinator does not know (skipped on load, as Kafka does)."""

    version: int


def key_to_bytes(transactional_id: str) -> bytes:
    return struct.pack(">h", KEY_VERSION) + write_string(transactional_id)


def value_to_bytes(transit: TxnTransitMetadata) -> bytes:
    """The record of ``transit``'s state (Empty carries no partitions: a null array)."""
    if transit.txn_state == TransactionState.EMPTY and transit.topic_partitions:
        raise ValueError(f"Transaction is not expected to have any partitions since its state is Empty: {transit}")
    parts = [struct.pack(">hqhib", VALUE_VERSION, transit.producer_id, transit.producer_epoch,
                         transit.txn_timeout_ms, int(transit.txn_state))]
    if transit.txn_state == TransactionState.EMPTY:
        parts.append(struct.pack(">i", -1))
    else:
        by_topic: dict[str, list[int]] = {}
        for tp in transit.topic_partitions:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        parts.append(struct.pack(">i", len(by_topic)))
        for topic in sorted(by_topic):
            ids = sorted(by_topic[topic])
            parts.append(write_string(topic) + struct.pack(f">i{len(ids)}i", len(ids), *ids))
    parts.append(struct.pack(">qq", transit.txn_last_update_timestamp, transit.txn_start_timestamp))
    return b"".join(parts)


def read_key(data: bytes) -> TxnKey | UnknownKey:
    reader = StructReader(data, RecordFormatError, "__transaction_state key")
    version = reader.int16()
    if version != KEY_VERSION:
        return UnknownKey(version)
    return TxnKey(reader.string())


def read_value(transactional_id: str, data: bytes | None) -> TransactionMetadata | None:
    """The transactional id's metadata as the record stores it; None for a tombstone."""
    if data is None:
        return None
    reader = _Reader(data, RecordFormatError, "__transaction_state value")
    version = reader.int16()
    if not 0 <= version <= _HIGHEST_VALUE_VERSION:
        raise RecordFormatError(f"Unknown version {version} from the transaction log message value")
    flexible = version >= 1
    producer_id, producer_epoch, timeout_ms = reader.int64(), reader.int16(), reader.int32()
    try:
        state = TransactionState(reader.int8())
    except ValueError as e:
        raise RecordFormatError(f"unknown transaction state in the record of {transactional_id}: {e}") from None
    partitions: set[TopicPartition] = set()
    count = reader.compact_array_length() if flexible else reader.array_length()
    for _ in range(count):
        topic = reader.compact_string() if flexible else reader.string()
        ids = reader.compact_array_length() if flexible else reader.array_length(nullable=False)
        partitions.update(TopicPartition(topic, reader.int32()) for _ in range(ids))
        if flexible:
            reader.skip_tagged_fields()
    last_update, start = reader.int64(), reader.int64()
    if flexible:
        reader.skip_tagged_fields()
    metadata = TransactionMetadata(
        transactional_id, producer_id, NO_PRODUCER_ID, producer_epoch, NO_PRODUCER_EPOCH, timeout_ms, state,
        txn_start_timestamp=start, txn_last_update_timestamp=last_update,
    )
    if state != TransactionState.EMPTY:
        metadata.add_partitions(partitions)
    return metadata


class _Reader(StructReader):
    """The non-flexible primitives plus the few flexible ones TransactionLogValue v1 uses."""

    def int8(self) -> int:
        return struct.unpack(">b", self._take(1))[0]

    def uvarint(self) -> int:
        value = shift = 0
        while True:
            byte = self._take(1)[0]
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7
            if shift > 28:
                raise self._fail("varint too long")

    def compact_array_length(self) -> int:
        """A compact (length + 1) array count; null reads as empty."""
        size = self.uvarint() - 1
        if size > len(self.data) - self.pos:
            raise self._fail(f"invalid array length {size}")
        return max(size, 0)

    def compact_string(self) -> str:
        size = self.uvarint() - 1
        if size < 0:
            raise self._fail("null where a string is required")
        try:
            return bytes(self._take(size)).decode("utf-8")
        except UnicodeDecodeError:
            raise self._fail("invalid UTF-8 in a string") from None

    def skip_tagged_fields(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self._take(self.uvarint())
