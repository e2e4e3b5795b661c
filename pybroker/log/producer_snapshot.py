"""Producer snapshots: ``<offset:020>.snapshot`` files, Kafka's format, so a log loads its producer
state without scanning all its segments.

A snapshot taken at offset N holds the state of every producer after the records below N. The
log takes one when it rolls a segment (named by the new segment's base offset) and one at its end
offset when it closes cleanly; loading starts from the newest snapshot at or below the log end
offset and replays only the batches after it.

Layout (Kafka's ``ProducerStateManager.PID_SNAPSHOT_MAP_SCHEMA``, big-endian): version int16 (1),
crc uint32 (CRC-32C of everything after it), then an int32 count of entries of producerId int64,
producerEpoch int16, lastSequence int32, lastOffset int64, offsetDelta int32 (last sequence minus
first sequence of the producer's last batch), timestamp int64, coordinatorEpoch int32,
currentTxnFirstOffset int64 (-1: no open transaction). A file with a bad CRC, an unknown version or
a wrong length is `CorruptSnapshotError`: the loader ignores it and replays from further back.
"""

from __future__ import annotations

import os
import struct

from pybroker import _native
from pybroker.log.producer_state import BatchMetadata, ProducerEntry

SNAPSHOT_SUFFIX = ".snapshot"
VERSION = 1
_HEADER = struct.Struct(">hI")
_COUNT = struct.Struct(">i")
_ENTRY = struct.Struct(">qhiqiqiq")


class CorruptSnapshotError(ValueError):
    """A snapshot file that does not hold what it claims."""


def snapshot_file_name(offset: int) -> str:
    return f"{offset:020d}{SNAPSHOT_SUFFIX}"


def snapshot_offsets(directory: str) -> list[int]:
    """The offsets of the snapshot files in a partition directory, ascending."""
    offsets = []
    for name in os.listdir(directory):
        if name.endswith(SNAPSHOT_SUFFIX) and name[: -len(SNAPSHOT_SUFFIX)].isdigit():
            offsets.append(int(name[: -len(SNAPSHOT_SUFFIX)]))
    return sorted(offsets)


def encode_snapshot(producers: dict[int, ProducerEntry]) -> bytes:
    body = bytearray(_COUNT.pack(len(producers)))
    for producer_id, entry in producers.items():
        last = entry.batches[-1] if entry.batches else None
        body += _ENTRY.pack(
            producer_id,
            entry.producer_epoch,
            last.last_seq if last else -1,
            last.last_offset if last else -1,
            last.last_offset - last.first_offset if last else 0,
            entry.last_timestamp,
            entry.coordinator_epoch,
            entry.current_txn_first_offset,
        )
    return _HEADER.pack(VERSION, _native.crc32c(body)) + bytes(body)


def decode_snapshot(data: bytes) -> dict[int, ProducerEntry]:
    if len(data) < _HEADER.size + _COUNT.size:
        raise CorruptSnapshotError(f"snapshot of {len(data)} bytes is too short")
    version, crc = _HEADER.unpack_from(data)
    if version != VERSION:
        raise CorruptSnapshotError(f"Snapshot contained an unknown file version {version}")
    body = memoryview(data)[_HEADER.size :]
    computed = _native.crc32c(body)
    if crc != computed:
        raise CorruptSnapshotError(
            f"Snapshot is corrupt (CRC is no longer valid). Stored crc: {crc}. Computed crc: {computed}"
        )
    (count,) = _COUNT.unpack_from(body)
    if count < 0 or len(body) != _COUNT.size + count * _ENTRY.size:
        raise CorruptSnapshotError(f"snapshot of {len(data)} bytes cannot hold {count} entries")
    producers: dict[int, ProducerEntry] = {}
    for index in range(count):
        (producer_id, epoch, last_seq, last_offset, delta, timestamp, coordinator_epoch,
         txn_first_offset) = _ENTRY.unpack_from(body, _COUNT.size + index * _ENTRY.size)
        entry = ProducerEntry(
            producer_epoch=epoch, last_timestamp=timestamp, coordinator_epoch=coordinator_epoch,
            current_txn_first_offset=txn_first_offset,
        )
        if last_offset >= 0:
            first_seq = last_seq - delta if last_seq - delta >= 0 else last_seq - delta + 2**31
            entry.batches.append(BatchMetadata(first_seq, last_seq, last_offset - delta, last_offset, timestamp))
        producers[producer_id] = entry
    return producers


def write_snapshot(directory: str, offset: int, producers: dict[int, ProducerEntry]) -> str:
    """Write the snapshot at ``offset`` (no fsync: the log's flush makes it durable with its
    segment); returns its path."""
    path = os.path.join(directory, snapshot_file_name(offset))
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(encode_snapshot(producers))
    os.replace(tmp, path)
    return path


def read_snapshot(directory: str, offset: int) -> dict[int, ProducerEntry]:
    with open(os.path.join(directory, snapshot_file_name(offset)), "rb") as f:
        return decode_snapshot(f.read())


def delete_snapshots(directory: str, offsets: list[int]) -> None:
    for offset in offsets:
        try:
            os.remove(os.path.join(directory, snapshot_file_name(offset)))
        except FileNotFoundError:
            pass
