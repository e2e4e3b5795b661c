"""Test helper: leader and follower logs in a temporary directory, batches stamped with a chosen
offset and leader epoch, and a fetch loop that copies a leader's batches to a follower the way
Kafka's replica fetcher does (read from the follower's log end offset, append as follower, take
the leader's high watermark and log start offset). No networking."""

from __future__ import annotations

import struct
from pathlib import Path

from pybroker.log.log import Log
from pybroker.server.config import BrokerConfig
from pybroker.types import TopicPartition
from tests.unit.batches import build_batch

TP = TopicPartition("t", 0)
T0 = 1_700_000_000_000
FETCH_MAX_BYTES = 1 << 20  # replica.fetch.max.bytes


def make_log(path: Path, name: str = "t-0", **overrides: object) -> Log:
    """A log under ``path/name`` with Kafka's defaults, overridden as ``segment_bytes=...``."""
    config = BrokerConfig().log_config({k.replace("_", "."): str(v) for k, v in overrides.items()})
    return Log(str(path / name), TP, config)


def stamped(
    values: list[bytes],
    base_offset: int,
    epoch: int,
    *,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
) -> bytes:
    """One batch of ``values`` as a leader stores it: ``baseOffset`` and ``partitionLeaderEpoch``
    set (neither is covered by the CRC)."""
    batch = bytearray(build_batch(
        [(None, value) for value in values], base_offset=base_offset, base_timestamp=T0 + base_offset,
        producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=base_sequence,
    ))
    struct.pack_into(">i", batch, 12, epoch)
    return bytes(batch)


def lead(log: Log, epoch: int, *values: bytes, now_ms: int = T0) -> None:
    """Append each value as its own single-record batch, as leader in ``epoch``."""
    for value in values:
        batch = build_batch([(None, value)], base_timestamp=T0 + log.log_end_offset)
        log.append_as_leader(memoryview(bytearray(batch)), epoch, now_ms)


def lead_batch(log: Log, epoch: int, values: list[bytes], now_ms: int = T0) -> None:
    """Append one batch holding ``values``, as leader in ``epoch``."""
    batch = build_batch([(None, value) for value in values], base_timestamp=T0 + log.log_end_offset)
    log.append_as_leader(memoryview(bytearray(batch)), epoch, now_ms)


def log_bytes(log: Log) -> bytes:
    """Every byte of the log's segments, oldest first."""
    return b"".join(Path(segment.path).read_bytes() for segment in log.segments)


def batch_epochs(log: Log) -> list[tuple[int, int, int]]:
    """``(base offset, last offset, partition leader epoch)`` of every batch in the log."""
    return [
        (h.base_offset, h.last_offset, h.partition_leader_epoch)
        for segment in log.segments
        for h in segment.batches()
    ]


def fetch(leader: Log, offset: int) -> bytes:
    """What a leader answers a follower's fetch from ``offset``: whole batches up to its log end
    offset (isolation LOG_END), from one segment."""
    return leader.read(offset, FETCH_MAX_BYTES, leader.log_end_offset, True)


def replicate(leader: Log, follower: Log) -> None:
    """Fetch from the follower's log end offset until it reaches the leader's: append as
    follower, then the leader's high watermark and log start offset (Kafka's
    ``processPartitionData``)."""
    while follower.log_end_offset < leader.log_end_offset:
        data = fetch(leader, follower.log_end_offset)
        info = follower.append_as_follower(memoryview(bytearray(data)), T0)
        assert info.record_count > 0, "the fetch made no progress"
        follower.maybe_update_high_watermark(leader.high_watermark)
        follower.maybe_increment_log_start_offset(leader.log_start_offset, "LeaderOffsetIncremented")
    follower.maybe_update_high_watermark(leader.high_watermark)
