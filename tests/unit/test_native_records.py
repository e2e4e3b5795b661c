"""Tests of ``_native.build_batch`` and ``_native.read_records``, the group coordinator's way to
write its own records and read them back (checked against the Python builder in ``batches``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pybroker import _native
from pybroker._native import Segment
from pybroker.common.errors import CorruptRecordError
from tests.unit import batches

TS = 1_700_000_000_000
MB = 1 << 20

RECORDS: list[tuple[bytes | None, bytes | None]] = [
    (b"group-a", b"offset commit"),
    (b"group-b", None),  # tombstone
    (None, b"null key"),
    (b"", b""),  # empty, not null
    (b"large", bytes(range(256)) * 400),
]


def test_round_trip():
    data = _native.build_batch(RECORDS, TS, base_offset=40)
    assert _native.read_records(data) == [
        (40 + i, TS, key, value) for i, (key, value) in enumerate(RECORDS)
    ]


def test_tombstone_and_null_key():
    data = _native.build_batch([(b"k", None), (None, b"v"), (None, None)], TS)
    assert _native.read_records(data) == [
        (0, TS, b"k", None),
        (1, TS, None, b"v"),
        (2, TS, None, None),
    ]


def test_bytes_like_keys_and_values():
    data = _native.build_batch([(bytearray(b"key"), memoryview(b"value"))], TS)
    assert _native.read_records(data) == [(0, TS, b"key", b"value")]


def test_same_bytes_as_the_python_builder():
    expected = batches.build_batch(
        RECORDS,
        base_offset=7,
        timestamps=[TS] * len(RECORDS),
        producer_id=9,
        producer_epoch=2,
        base_sequence=3,
    )
    built = _native.build_batch(
        RECORDS, TS, base_offset=7, producer_id=9, producer_epoch=2, base_sequence=3
    )
    assert built == expected


def test_validate_batches_accepts_the_built_batch():
    data = _native.build_batch(RECORDS, TS, base_offset=100)
    info = _native.validate_batches(data, MB)
    assert (info.batch_count, info.record_count) == (1, len(RECORDS))
    assert (info.base_offset, info.last_offset) == (100, 100 + len(RECORDS) - 1)
    assert (info.first_timestamp, info.max_timestamp) == (TS, TS)
    assert (info.producer_id, info.producer_epoch, info.base_sequence) == (-1, -1, -1)
    assert not info.is_transactional and not info.is_control and info.compression == 0


def test_empty_records_rejected():
    with pytest.raises(ValueError):
        _native.build_batch([], TS)


@pytest.mark.parametrize(
    ("codec", "xerial"), [(1, True), (2, True), (2, False), (3, True), (4, True)]
)
def test_reads_compressed_batches(codec: int, xerial: bool):
    timestamps = [TS + 5, TS + 1, TS + 9]
    records = [(b"k0", b"v0" * 100), (None, b"v1"), (b"k2", None)]
    data = batches.build_batch(
        records, base_offset=20, timestamps=timestamps, codec=codec, xerial=xerial
    )
    assert _native.read_records(data) == [
        (20 + i, ts, key, value)
        for i, (ts, (key, value)) in enumerate(zip(timestamps, records, strict=True))
    ]


def test_skips_control_batches_and_reads_several_batches():
    control = batches.build_batch(
        [(b"\x00\x00\x00\x01", b"\x00" * 6)], base_offset=1, attributes=0x30
    )
    data = (
        _native.build_batch([(b"a", b"1")], TS)
        + control
        + _native.build_batch([(b"b", b"2"), (b"c", None)], TS + 1, base_offset=2)
    )
    assert _native.read_records(data) == [
        (0, TS, b"a", b"1"),
        (2, TS + 1, b"b", b"2"),
        (3, TS + 1, b"c", None),
    ]
    assert _native.read_records(b"") == []


def test_log_append_time_through_a_segment(tmp_path: Path):
    seg = Segment(str(tmp_path), 0)
    try:
        seg.append(_native.build_batch(RECORDS[:2], TS), 0, 3, -1)
        seg.append(_native.build_batch(RECORDS[2:], TS), 2, 3, TS + 500)
        data = seg.read(0, MB, 1 << 62, True)
    finally:
        seg.close()
    assert [(offset, ts) for offset, ts, _, _ in _native.read_records(data)] == [
        (0, TS),
        (1, TS),
        (2, TS + 500),
        (3, TS + 500),
        (4, TS + 500),
    ]


def test_corrupt_input_raises():
    data = _native.build_batch(RECORDS, TS)
    with pytest.raises(CorruptRecordError):
        _native.read_records(data[:-1])
    damaged = bytearray(data)
    damaged[-1] ^= 0x01
    with pytest.raises(CorruptRecordError, match="CRC"):
        _native.read_records(damaged)
    with pytest.raises(CorruptRecordError):
        _native.read_records(data + data[:30])
