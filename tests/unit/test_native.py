"""Tests of the Python surface of ``pybroker._native`` (the Rust storage hot path).

Batches are built here with ``struct`` + ``_native.crc32c``, independently of the Rust test
builder, so the two sides check each other.
"""

from __future__ import annotations

import os
import struct
import threading
from pathlib import Path

import pytest

from pybroker import _native
from pybroker._native import Segment
from pybroker.common.errors import CorruptRecordError, RecordTooLargeError
from tests.unit import batches

MB = 1 << 20


def build_batch(timestamps: list[int], value: bytes = b"value", codec: int = 0, **fields: int) -> bytes:
    """A batch (base offset 0) holding one keyless record per timestamp."""
    return batches.build_batch([(None, value)] * len(timestamps), timestamps=timestamps, codec=codec, **fields)


def split_batches(data: bytes) -> list[dict[str, int]]:
    """Header fields of each batch in ``data``."""
    out = []
    pos = 0
    while pos < len(data):
        base, length, epoch, magic, crc, attrs, lod = struct.unpack_from(">qiibIhi", data, pos)
        max_ts = struct.unpack_from(">q", data, pos + 35)[0]
        out.append(
            {
                "base": base,
                "last": base + lod,
                "epoch": epoch,
                "attrs": attrs,
                "max_ts": max_ts,
                "size": length + 12,
            }
        )
        pos += length + 12
    return out


@pytest.fixture
def seg(tmp_path: Path):
    s = Segment(str(tmp_path), 0)
    yield s
    s.close()


# --- crc32c -----------------------------------------------------------------------------------


def test_crc32c_vectors_and_chaining():
    assert _native.crc32c(b"123456789") == 0xE3069283
    assert _native.crc32c(b"") == 0
    assert _native.crc32c(bytes(32)) == 0x8A9136AA
    data = os.urandom(100_000)
    assert _native.crc32c(data[1000:], _native.crc32c(data[:1000])) == _native.crc32c(data)
    assert _native.crc32c(bytearray(b"123456789")) == 0xE3069283
    assert _native.crc32c(memoryview(b"xx123456789")[2:]) == 0xE3069283


# --- validate_batches -------------------------------------------------------------------------


def test_validate_batches_summary():
    first = build_batch(
        [100, 300, 200], producer_id=42, producer_epoch=3, base_sequence=9, attributes=0x10
    )
    second = build_batch([500, 400])
    third = build_batch([450])
    info = _native.validate_batches(first + second + third, MB)
    assert info.size == len(first + second + third)
    assert info.batch_count == 3
    assert info.record_count == 6
    assert info.first_timestamp == 100
    assert info.max_timestamp == 500
    assert info.last_offset_delta_of_max_timestamp == 4
    assert (info.producer_id, info.producer_epoch, info.base_sequence) == (42, 3, 9)
    assert info.last_offset_delta == 2
    assert info.is_transactional and not info.is_control
    assert info.compression == 0
    assert "RecordsInfo(" in repr(info)
    with pytest.raises(AttributeError):
        info.size = 1  # type: ignore[misc]
    assert _native.validate_batches(build_batch([1, 2], codec=1), MB).compression == 1


def test_validate_batches_errors():
    good = build_batch([1, 2, 3])
    assert issubclass(CorruptRecordError, ValueError)
    assert issubclass(RecordTooLargeError, ValueError)
    with pytest.raises(CorruptRecordError, match="empty"):
        _native.validate_batches(b"", MB)
    bad_crc = bytearray(good)
    bad_crc[-1] ^= 1
    with pytest.raises(CorruptRecordError, match="CRC"):
        _native.validate_batches(bad_crc, MB)
    bad_magic = bytearray(good)
    bad_magic[16] = 1
    with pytest.raises(CorruptRecordError, match="magic"):
        _native.validate_batches(bad_magic, MB)
    with pytest.raises(CorruptRecordError, match="partial"):
        _native.validate_batches(good + good[:20], MB)
    with pytest.raises(CorruptRecordError, match="partial"):
        _native.validate_batches(good[:-1], MB)
    short = bytearray(good)
    struct.pack_into(">i", short, 8, 30)
    with pytest.raises(CorruptRecordError):
        _native.validate_batches(short, MB)
    with pytest.raises(RecordTooLargeError):
        _native.validate_batches(good, len(good) - 1)
    assert _native.validate_batches(good, len(good)).batch_count == 1


# --- validate_replicated_batches ---------------------------------------------------------------


def stamped(timestamps: list[int], base_offset: int, epoch: int, value: bytes = b"value", **fields: int) -> bytes:
    """A batch as a leader stores it: base offset and partition leader epoch set."""
    batch = bytearray(build_batch(timestamps, value, **fields))
    struct.pack_into(">qii", batch, 0, base_offset, struct.unpack_from(">i", batch, 8)[0], epoch)
    return bytes(batch)


def test_validate_replicated_batches_summary():
    data = (
        stamped([10, 30], 100, 0)
        + stamped([20], 102, 0, producer_id=42, producer_epoch=3, base_sequence=2**31 - 1)
        + stamped([5, 6, 7], 110, 2, producer_id=42, producer_epoch=3, base_sequence=0)
        + stamped([8], 113, 5, attributes=0x30, producer_id=42, producer_epoch=3)  # a control batch
        + stamped([1], 114, 4)
    )
    info = _native.validate_replicated_batches(memoryview(data), -1)
    assert info.valid_bytes == len(data)
    assert (info.batch_count, info.record_count) == (5, 8)
    assert (info.first_offset, info.last_offset, info.last_leader_epoch) == (100, 114, 4)
    assert (info.max_timestamp, info.offset_of_max_timestamp) == (30, 101)
    assert info.offsets_monotonic
    assert info.epoch_starts == [(0, 100), (2, 110), (5, 113)]
    # Control batches are listed too; this one's record is no marker (control type -1).
    assert info.producer_batches == [
        (42, 3, 2**31 - 1, 2**31 - 1, 102, 102, 20, False, -1, -1),
        (42, 3, 0, 2, 110, 112, 7, False, -1, -1),
        (42, 3, -1, -1, 113, 113, 8, True, -1, -1),
    ]
    assert _native.validate_replicated_batches(data, 2).epoch_starts == [(5, 113)]
    assert "ReplicatedRecordsInfo(" in repr(info)
    with pytest.raises(AttributeError):
        info.valid_bytes = 1  # type: ignore[misc]


def test_validate_replicated_batches_is_lenient_where_a_follower_is():
    big = stamped([1] * 100, 0, 0, value=b"x" * 1000)
    # No max.message.bytes here, an empty set is fine, a trailing partial batch is left out.
    assert _native.validate_replicated_batches(big, -1).batch_count == 1
    assert _native.validate_replicated_batches(b"", -1).batch_count == 0
    partial = _native.validate_replicated_batches(big + big[:100], -1)
    assert (partial.batch_count, partial.valid_bytes) == (1, len(big))
    backwards = _native.validate_replicated_batches(stamped([1, 2], 5, 0) + stamped([3], 6, 0), -1)
    assert not backwards.offsets_monotonic
    bad_crc = bytearray(big)
    bad_crc[-1] ^= 1
    with pytest.raises(CorruptRecordError, match="CRC"):
        _native.validate_replicated_batches(bad_crc, -1)


# --- append / read ----------------------------------------------------------------------------


def test_append_patches_in_place_and_reads_back(seg: Segment):
    assert (seg.size, seg.next_offset, seg.max_timestamp, seg.first_batch_timestamp) == (
        0,
        0,
        -1,
        -1,
    )
    frame = bytearray(b"HEAD" + build_batch([10, 30, 20]) + build_batch([25]) + b"TAIL")
    records = memoryview(frame)[4:-4]  # a writable view into a request frame
    info = _native.validate_batches(records, MB)
    result = seg.append(records, 0, 7, -1)
    assert result == (3, 30, 2)
    batches = split_batches(bytes(records))
    assert [(b["base"], b["last"], b["epoch"]) for b in batches] == [(0, 2, 7), (3, 3, 7)]
    assert frame[:4] == b"HEAD" and frame[-4:] == b"TAIL"
    # Offsets and epoch are outside the CRC: still valid.
    assert _native.validate_batches(records, MB).record_count == info.record_count

    second = build_batch([40, 50])
    assert seg.append(second, 4, 8, -1) == (5, 50, 5)
    assert split_batches(second)[0]["base"] == 0, "read-only bytes are copied, not patched"
    assert (seg.next_offset, seg.max_timestamp, seg.offset_of_max_timestamp) == (6, 50, 5)
    assert seg.first_batch_timestamp == 30  # the largest timestamp of the set that started the segment
    assert seg.size == len(records) + len(second)

    data = seg.read(0, MB, 1 << 62, False)
    assert isinstance(data, bytes)
    assert data[: len(records)] == bytes(records)
    assert [b["base"] for b in split_batches(data)] == [0, 3, 4]
    assert _native.validate_batches(data, MB).record_count == 6
    assert [b["base"] for b in split_batches(seg.read(4, MB, 1 << 62, False))] == [4]
    assert seg.read(6, MB, 1 << 62, False) == b""

    with pytest.raises(ValueError):
        seg.append(build_batch([1]), 3, 8, -1)  # below next_offset


def test_log_append_time(seg: Segment):
    records = bytearray(build_batch([1, 2, 3]) + build_batch([4]))
    assert seg.append(records, 0, 0, 1_234_567) == (3, 1_234_567, 2)
    for b in split_batches(seg.read(0, MB, 1 << 62, False)):
        assert b["attrs"] & 0x08
        assert b["max_ts"] == 1_234_567
    _native.validate_batches(seg.read(0, MB, 1 << 62, False), MB)  # CRC recomputed
    assert seg.find_offset_by_timestamp(1_000_000, 1) == (1, 1_234_567)


def test_read_limits(seg: Segment):
    batch = build_batch([1, 2, 3, 4, 5], value=b"x" * 50)
    for _ in range(6):
        seg.append(batch, seg.next_offset, 0, -1)
    size = len(batch)
    assert len(seg.read(0, 2 * size + size // 2, 1 << 62, False)) == 2 * size
    assert [b["base"] for b in split_batches(seg.read(7, MB, 16, False))] == [5, 10, 15]
    assert [b["base"] for b in split_batches(seg.read(7, MB, 15, False))] == [5, 10]
    assert seg.read(0, 10, 1 << 62, False) == b""
    assert len(seg.read(0, 10, 1 << 62, True)) == size  # KIP-74
    assert seg.read(0, MB, 0, True) == b""


def test_read_region_names_the_bytes_read_returns(seg: Segment):
    batch = build_batch([1, 2, 3, 4, 5], value=b"x" * 50)
    for _ in range(6):
        seg.append(batch, seg.next_offset, 0, -1)
    size = len(batch)
    for args in [(0, 2 * size + size // 2, 1 << 62, False), (7, MB, 16, False), (0, 10, 1 << 62, True)]:
        region = seg.read_region(*args)
        assert region is not None
        assert (region.position, len(region)) == (0 if args[0] == 0 else size, len(seg.read(*args)))
        assert bytes(region) == region.read() == seg.read(*args)
        assert region.read(7) == seg.read(*args)[7:]
    assert seg.read_region(0, 10, 1 << 62, False) is None
    assert seg.read_region(30, MB, 1 << 62, True) is None


def test_log_region_outlives_its_segment(tmp_path: Path):
    s = Segment(str(tmp_path), 0)
    s.append(build_batch([1, 2]), 0, 0, -1)
    region = s.read_region(0, MB, 1 << 62, False)
    expected = s.read(0, MB, 1 << 62, False)
    s.delete()
    assert region is not None and region.read() == expected


def test_find_offset_by_timestamp_and_max_timestamp_record(seg: Segment):
    # offsets 0-2: 100, 300, 200 | 3-5 gzip: 250, 400, 350 | 6-7: 500, 450
    seg.append(build_batch([100, 300, 200]), 0, 0, -1)
    seg.append(build_batch([250, 400, 350], codec=1), 3, 0, -1)
    seg.append(build_batch([500, 450]), 6, 0, -1)
    assert seg.find_offset_by_timestamp(0, 0) == (0, 100)
    assert seg.find_offset_by_timestamp(150, 0) == (1, 300)
    assert seg.find_offset_by_timestamp(301, 0) == (4, 400)
    assert seg.find_offset_by_timestamp(240, 3) == (3, 250)
    assert seg.find_offset_by_timestamp(450, 7) == (7, 450)
    assert seg.find_offset_by_timestamp(501, 0) is None
    assert seg.max_timestamp_record() == (6, 500)


def assert_timestamps_10_30_20_30_found(tmp_path: Path, batch: bytes) -> None:
    """Lookups in a batch of four records stamped 10, 30, 20, 30, appended at offset 10."""
    seg = Segment(str(tmp_path), 10)
    seg.append(batch, 10, 0, -1)
    assert seg.find_offset_by_timestamp(25, 0) == (11, 30)
    assert seg.find_offset_by_timestamp(25, 12) == (13, 30)
    assert seg.max_timestamp_record() == (11, 30)
    seg.close()


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_find_offset_by_timestamp_compressed(tmp_path: Path, codec: int):
    batch = build_batch([10, 30, 20, 30], codec=codec)
    assert _native.validate_batches(batch, MB).compression == codec
    assert_timestamps_10_30_20_30_found(tmp_path, batch)


# --- truncation, reopen, recovery -------------------------------------------------------------


def test_truncate_to(seg: Segment):
    batch = build_batch([1, 2, 3, 4])
    for i in range(5):
        seg.append(build_batch([10 * i + 1, 10 * i + 2, 10 * i + 3, 10 * i + 4]), 4 * i, 0, -1)
    assert seg.truncate_to(100) == 0
    assert seg.truncate_to(9) == 3 * len(batch)  # batch 8..11 goes entirely
    assert (seg.next_offset, seg.size, seg.max_timestamp) == (8, 2 * len(batch), 14)
    assert seg.append(batch, 8, 0, -1)[0] == 11


def test_reopen_after_close(tmp_path: Path):
    seg = Segment(str(tmp_path), 1000, index_interval_bytes=100)
    for i in range(20):
        seg.append(build_batch([i * 10 + 5, i * 10 + 1]), seg.next_offset, 0, -1)
    state = (seg.size, seg.next_offset, seg.max_timestamp, seg.offset_of_max_timestamp)
    assert os.path.getsize(tmp_path / "00000000000000001000.index") == 10 * MB
    seg.close()
    seg.close()  # idempotent
    assert seg.closed
    assert os.path.getsize(tmp_path / "00000000000000001000.index") % 8 == 0
    assert os.path.getsize(tmp_path / "00000000000000001000.index") < 10 * MB
    with pytest.raises(ValueError, match="closed"):
        _ = seg.size
    with pytest.raises(ValueError, match="closed"):
        seg.read(0, 1, 1, True)

    again = Segment(str(tmp_path), 1000, index_interval_bytes=100)
    assert (
        again.size,
        again.next_offset,
        again.max_timestamp,
        again.offset_of_max_timestamp,
    ) == state
    assert again.first_batch_timestamp == 5
    assert again.path == str(tmp_path / "00000000000000001000.log")
    assert again.last_modified_ms > 0
    headers = again.batches()
    assert [h.base_offset for h in headers] == list(range(1000, 1040, 2))
    assert headers[1].position == headers[0].size
    assert again.batches(headers[-1].position)[0].last_offset == 1039
    again.close()


def test_recover_torn_tail(tmp_path: Path):
    seg = Segment(str(tmp_path), 0, index_interval_bytes=200)
    for i in range(30):
        seg.append(build_batch([i, i + 1, i + 2], value=b"v" * 40), seg.next_offset, 0, -1)
    good = (seg.size, seg.next_offset, seg.max_timestamp)
    seg.flush()
    seg.on_become_inactive()
    del seg  # no clean close
    torn = build_batch([99, 100])[:37]
    with open(tmp_path / "00000000000000000000.log", "ab") as f:
        f.write(torn)

    seg = Segment(str(tmp_path), 0, index_interval_bytes=200)
    assert seg.recover(MB) == len(torn)
    assert (seg.size, seg.next_offset, seg.max_timestamp) == good
    assert os.path.getsize(tmp_path / "00000000000000000000.log") == good[0]
    assert _native.validate_batches(seg.read(0, 10 * MB, 1 << 62, False), MB).record_count == 90
    assert seg.read(45, MB, 1 << 62, False)[:8] == struct.pack(">q", 45)
    assert seg.recover(MB) == 0
    seg.close()


def test_recover_corrupted_byte(tmp_path: Path):
    seg = Segment(str(tmp_path), 0, index_interval_bytes=1)
    batch = build_batch([1, 2])
    for _ in range(8):
        seg.append(batch, seg.next_offset, 0, -1)
    seg.close()
    path = tmp_path / "00000000000000000000.log"
    data = bytearray(path.read_bytes())
    data[3 * len(batch) + 65] ^= 0xFF
    path.write_bytes(data)
    seg = Segment(str(tmp_path), 0, index_interval_bytes=1)
    assert seg.recover(MB) == 5 * len(batch)
    assert (seg.size, seg.next_offset) == (3 * len(batch), 6)
    seg.close()


# --- lifecycle, errors, threads ---------------------------------------------------------------


def test_delete_and_rename(tmp_path: Path):
    seg = Segment(str(tmp_path), 5)
    seg.append(build_batch([1]), 5, 0, -1)
    seg.rename_suffix(".deleted")
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "00000000000000000005.index.deleted",
        "00000000000000000005.log.deleted",
        "00000000000000000005.timeindex.deleted",
    ]
    with pytest.raises(ValueError):
        seg.append(build_batch([1]), 6, 0, -1)
    other = Segment(str(tmp_path), 9)
    other.delete()
    assert not (tmp_path / "00000000000000000009.log").exists()
    with pytest.raises(ValueError):
        other.delete()


def test_os_error_names_the_path(tmp_path: Path):
    missing = tmp_path / "no-such-dir"
    with pytest.raises(FileNotFoundError) as err:
        Segment(str(missing), 0)
    assert str(missing) in str(err.value.filename)


def test_index_is_full(tmp_path: Path):
    seg = Segment(str(tmp_path), 0, index_interval_bytes=0, max_index_size=40)
    for _ in range(50):
        if seg.index_is_full:
            break
        seg.append(build_batch([1]), seg.next_offset, 0, -1)
    assert seg.index_is_full
    assert os.path.getsize(tmp_path / "00000000000000000000.index") <= 40
    assert os.path.getsize(tmp_path / "00000000000000000000.timeindex") <= 40
    seg.close()


def test_flush_from_worker_thread_while_appending(seg: Segment):
    batch = build_batch(list(range(100)), value=b"x" * 100)
    stop = threading.Event()
    errors: list[BaseException] = []

    def flusher() -> None:
        try:
            while not stop.is_set():
                seg.flush()
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    worker = threading.Thread(target=flusher)
    worker.start()
    try:
        for _ in range(200):
            seg.append(batch, seg.next_offset, 0, -1)
            assert seg.read(seg.next_offset - 1, MB, 1 << 62, True)
    finally:
        stop.set()
        worker.join()
    assert not errors
    assert seg.next_offset == 200 * 100


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
def test_batches_built_by_kafka_python(tmp_path: Path, codec: int):
    """Interop: batches encoded by a real client library (xerial snappy, lz4 frame, ...)."""
    default_records = pytest.importorskip("kafka.record.default_records")
    builder = default_records.DefaultRecordBatchBuilder(
        magic=2,
        compression_type=codec,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=MB,
    )
    for i, ts in enumerate([10, 30, 20, 30]):
        builder.append(i, timestamp=ts, key=b"k%d" % i, value=b"value" * 50, headers=[("h", b"x")])
    batch = bytes(builder.build())
    info = _native.validate_batches(batch, MB)
    assert (info.compression, info.record_count, info.max_timestamp) == (codec, 4, 30)
    assert_timestamps_10_30_20_30_found(tmp_path, batch)


def test_raw_snappy_batch(tmp_path: Path):
    """librdkafka-style snappy: a raw block without xerial framing."""
    batch = build_batch([5, 9, 7], b"abc", codec=2, xerial=False)
    seg = Segment(str(tmp_path), 0)
    seg.append(batch, 0, 0, -1)
    assert seg.find_offset_by_timestamp(8, 0) == (1, 9)
    assert seg.max_timestamp_record() == (1, 9)
    seg.close()
