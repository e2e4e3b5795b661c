"""Tests of the native pieces of Kafka transactions: end-transaction marker batches
(``build_control_batch``), markers in batch headers and in a follower's record set, a segment's
aborted-transaction index (``.txnindex``), ``LogRegion.next_offset``, and read_committed
decoding on the client side (``decode_record_batches`` with aborted transactions,
``read_record_batches``)."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from pybroker import _native
from pybroker._native import Segment
from pybroker.common.errors import CorruptRecordError

TS = 1_700_000_000_000
MB = 1 << 20
ABORT, COMMIT = 0, 1


def txn_batch(producer_id: int, count: int, *, epoch: int = 0, sequence: int = 0) -> bytes:
    """A transactional data batch of ``count`` records of ``producer_id``."""
    records = [(None, b"v%d" % i) for i in range(count)]
    return _native.build_batch(
        records, TS, producer_id=producer_id, producer_epoch=epoch, base_sequence=sequence,
        transactional=True,
    )


def marker(producer_id: int, commit: bool, *, epoch: int = 0, coordinator_epoch: int = 0) -> bytes:
    return _native.build_control_batch(producer_id, epoch, coordinator_epoch, commit, TS)


def stamped(*batches: bytes) -> bytes:
    """``batches`` with contiguous offsets from 0, as a leader's log holds them."""
    out = bytearray(b"".join(batches))
    pos, offset = 0, 0
    while pos < len(out):
        length, = struct.unpack_from(">i", out, pos + 8)
        last_delta, = struct.unpack_from(">i", out, pos + 23)
        struct.pack_into(">q", out, pos, offset)
        offset += last_delta + 1
        pos += length + 12
    return bytes(out)


def offsets_of(decoded: _native.DecodedRecords) -> list[int]:
    return list(struct.unpack(f"<{decoded.count}q", decoded.offsets))


# --- marker batches ---------------------------------------------------------------------------


@pytest.mark.parametrize("commit", [False, True])
def test_control_batch_layout(commit: bool):
    data = _native.build_control_batch(4321, 7, 0x0A0B0C0D, commit, TS)
    assert len(data) == 78
    (base_offset, batch_length, leader_epoch, magic, crc, attributes, last_delta, base_ts,
     max_ts, producer_id, producer_epoch, base_sequence, count) = struct.unpack_from(
        ">qiibIhiqqqhii", data)
    assert (base_offset, batch_length, leader_epoch, magic) == (0, 66, -1, 2)
    assert crc == _native.crc32c(data[21:])
    assert attributes == 0x30  # transactional | control, CreateTime, uncompressed
    assert (last_delta, base_ts, max_ts, count) == (0, TS, TS, 1)
    assert (producer_id, producer_epoch, base_sequence) == (4321, 7, -1)
    # length 16, attributes 0, timestampDelta 0, offsetDelta 0, key (4), value (6), no headers
    key = struct.pack(">hh", 0, COMMIT if commit else ABORT)
    value = struct.pack(">hi", 0, 0x0A0B0C0D)
    assert data[61:] == bytes([0x20, 0, 0, 0, 0x08]) + key + bytes([0x0C]) + value + bytes([0])
    info = _native.validate_batches(data, MB)
    assert info.is_transactional and info.is_control
    assert _native.read_records(data) == []


def test_transactional_flag_only_sets_the_attribute_bit():
    plain = _native.build_batch([(b"k", b"v")], TS, producer_id=3, producer_epoch=1, base_sequence=0)
    txn = _native.build_batch(
        [(b"k", b"v")], TS, producer_id=3, producer_epoch=1, base_sequence=0, transactional=True
    )
    expected = bytearray(plain)
    expected[22] |= 0x10
    expected[17:21] = struct.pack(">I", _native.crc32c(bytes(expected[21:])))
    assert txn == bytes(expected)
    assert _native.validate_batches(txn, MB).is_transactional
    assert not _native.validate_batches(plain, MB).is_transactional


# --- segments: markers in headers, the .txnindex, LogRegion.next_offset ----------------------


def test_segment_headers_carry_markers(tmp_path: Path):
    seg = Segment(str(tmp_path), 0)
    seg.append(txn_batch(9, 2, epoch=3), 0, 1, -1)  # 0..1
    seg.append(marker(9, True, epoch=3, coordinator_epoch=17), 2, 1, -1)  # 2
    seg.append(txn_batch(9, 1, epoch=3), 3, 1, -1)  # 3
    seg.append(marker(9, False, epoch=3, coordinator_epoch=18), 4, 1, -1)  # 4
    headers = seg.batches()
    assert [(h.base_offset, h.is_transactional, h.is_control, h.control_type, h.coordinator_epoch)
            for h in headers] == [
        (0, True, False, -1, -1),
        (2, True, True, COMMIT, 17),
        (3, True, False, -1, -1),
        (4, True, True, ABORT, 18),
    ]
    assert (headers[1].producer_id, headers[1].producer_epoch, headers[1].base_sequence) == (9, 3, -1)
    assert "control_type=1, coordinator_epoch=17" in repr(headers[1])
    seg.close()
    # The markers are still read after reopening (from the file).
    reopened = Segment(str(tmp_path), 0)
    assert [h.control_type for h in reopened.batches()] == [-1, COMMIT, -1, ABORT]
    reopened.close()


def test_txn_index_append_collect_and_reopen(tmp_path: Path):
    seg = Segment(str(tmp_path), 100)
    txn_path = tmp_path / f"{100:020}.txnindex"
    assert not seg.has_txn_index and not txn_path.exists()
    assert seg.collect_aborted_txns(0, 1000) == ([], False)
    assert seg.aborted_txns() == []
    seg.append_aborted_txn(1, 100, 110, 100)
    seg.append_aborted_txn(2, 105, 120, 111)
    seg.append_aborted_txn(3, 121, 130, 121)
    with pytest.raises(ValueError, match="must increase sequentially"):
        seg.append_aborted_txn(4, 125, 130, 121)
    assert seg.has_txn_index and not seg.txn_index_damaged
    assert txn_path.read_bytes()[:34] == struct.pack(">hqqqq", 0, 1, 100, 110, 100)
    assert txn_path.stat().st_size == 3 * 34
    seg.flush()

    # Kafka's collectAbortedTxns: overlap with [fetch, upper), complete once lso >= upper.
    assert seg.collect_aborted_txns(111, 121) == ([(2, 105, 120, 111)], True)
    assert seg.collect_aborted_txns(100, 111) == ([(1, 100, 110, 100), (2, 105, 120, 111)], True)
    assert seg.collect_aborted_txns(125, 200) == ([(3, 121, 130, 121)], False)
    assert seg.collect_aborted_txns(131, 200) == ([], False)
    seg.close()

    reopened = Segment(str(tmp_path), 100)
    assert reopened.has_txn_index and not reopened.txn_index_damaged
    assert reopened.aborted_txns() == [(1, 100, 110, 100), (2, 105, 120, 111), (3, 121, 130, 121)]
    with pytest.raises(ValueError):
        reopened.append_aborted_txn(5, 125, 130, 125)
    reopened.append_aborted_txn(5, 125, 131, 125)
    assert len(reopened.aborted_txns()) == 4
    reopened.close()


def test_txn_index_truncate_and_recover(tmp_path: Path):
    seg = Segment(str(tmp_path), 0)
    for i in range(10):
        seg.append(txn_batch(1, 2, sequence=2 * i), 2 * i, 0, -1)  # 0..19
    seg.append_aborted_txn(1, 0, 5, 0)
    seg.append_aborted_txn(2, 3, 9, 6)
    seg.append_aborted_txn(3, 10, 15, 10)
    # Entries whose last offset is >= the truncation offset go, whatever the log holds.
    seg.truncate_to(1000)
    assert len(seg.aborted_txns()) == 3
    seg.truncate_to(12)
    assert seg.next_offset == 12
    assert seg.aborted_txns() == [(1, 0, 5, 0), (2, 3, 9, 6)]
    seg.truncate_to(9)
    assert seg.aborted_txns() == [(1, 0, 5, 0)]
    seg.append_aborted_txn(2, 3, 7, 6)  # 7 > 5: accepted again
    # Recovery empties it; the file stays, empty.
    seg.recover(MB)
    assert seg.has_txn_index and seg.aborted_txns() == []
    assert (tmp_path / f"{0:020}.txnindex").stat().st_size == 0
    seg.append_aborted_txn(1, 0, 5, 0)
    assert seg.aborted_txns() == [(1, 0, 5, 0)]
    seg.close()


@pytest.mark.parametrize(
    "damage",
    ["partial", "version", "order", "below_base"],
)
def test_damaged_txn_index_is_flagged_and_recovered(tmp_path: Path, damage: str):
    seg = Segment(str(tmp_path), 10)
    seg.append(txn_batch(1, 5), 10, 0, -1)
    seg.close()
    path = tmp_path / f"{10:020}.txnindex"
    good = struct.pack(">hqqqq", 0, 1, 10, 12, 10) + struct.pack(">hqqqq", 0, 2, 11, 14, 13)
    content = {
        "partial": good + b"\0" * 5,
        "version": good + struct.pack(">hqqqq", 1, 3, 12, 20, 13),
        "order": good + struct.pack(">hqqqq", 0, 3, 12, 14, 13),
        "below_base": struct.pack(">hqqqq", 0, 1, 0, 9, 0),
    }[damage]
    path.write_bytes(content)
    seg = Segment(str(tmp_path), 10)
    assert seg.txn_index_damaged and seg.has_txn_index
    with pytest.raises(ValueError, match="damaged"):
        seg.collect_aborted_txns(0, 100)
    with pytest.raises(ValueError, match="damaged"):
        seg.aborted_txns()
    with pytest.raises(ValueError, match="damaged"):
        seg.append_aborted_txn(9, 13, 40, 13)
    seg.recover(MB)
    assert not seg.txn_index_damaged
    assert seg.collect_aborted_txns(0, 100) == ([], False)
    seg.append_aborted_txn(1, 10, 12, 10)
    assert seg.aborted_txns() == [(1, 10, 12, 10)]
    seg.close()


def test_txn_index_renamed_and_deleted_with_the_segment(tmp_path: Path):
    seg = Segment(str(tmp_path), 0)
    seg.append(txn_batch(1, 3), 0, 0, -1)
    seg.append_aborted_txn(1, 0, 2, 0)
    seg.rename_suffix(".deleted")
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == [f"{0:020}.{ext}.deleted" for ext in ("index", "log", "timeindex", "txnindex")]

    # Without aborted transactions there is no .txnindex to rename.
    seg = Segment(str(tmp_path), 50)
    seg.append(txn_batch(1, 1), 50, 0, -1)
    seg.rename_suffix(".deleted")
    assert not (tmp_path / f"{50:020}.txnindex.deleted").exists()

    seg = Segment(str(tmp_path), 100)
    seg.append_aborted_txn(1, 100, 102, 100)
    seg.delete()
    assert not any(p.name.startswith(f"{100:020}") for p in tmp_path.iterdir())


def test_log_region_next_offset(tmp_path: Path):
    seg = Segment(str(tmp_path), 0, index_interval_bytes=1)
    sizes = []
    for i in range(6):
        batch = txn_batch(1, 1 + i % 3, sequence=i)
        sizes.append(len(batch))
        seg.append(batch, seg.next_offset, 0, -1)
    lasts = [h.last_offset for h in seg.batches()]  # 0, 2, 5, 6, 8, 11
    for offset in range(seg.next_offset):
        for max_bytes in (0, sizes[0], sum(sizes[:3]), 10 * MB):
            for max_offset in (3, 7, 1 << 62):
                region = seg.read_region(offset, max_bytes, max_offset, True)
                data = seg.read(offset, max_bytes, max_offset, True)
                if region is None:
                    assert data == b""
                    continue
                assert bytes(region) == data
                assert region.next_offset == _last_offsets(data)[-1] + 1
                assert region.next_offset - 1 in lasts
    assert "next_offset=" in repr(seg.read_region(0, MB, 1 << 62, True))
    seg.close()


def _last_offsets(data: bytes) -> list[int]:
    """Last offsets of the whole batches in ``data``."""
    out, pos = [], 0
    while pos < len(data):
        base, length = struct.unpack_from(">qi", data, pos)
        last_delta, = struct.unpack_from(">i", data, pos + 23)
        out.append(base + last_delta)
        pos += length + 12
    return out


# --- a follower's record set ------------------------------------------------------------------


def test_replicated_producer_batches_include_markers():
    data = stamped(
        txn_batch(7, 2, epoch=1),  # 0..1
        marker(7, True, epoch=1, coordinator_epoch=4),  # 2
        _native.build_batch([(None, b"x")], TS, producer_id=8, producer_epoch=0, base_sequence=5),  # 3
        _native.build_batch([(None, b"y")], TS),  # 4: no producer id
        marker(9, False, epoch=2, coordinator_epoch=5),  # 5
    )
    info = _native.validate_replicated_batches(data, -1)
    assert info.batch_count == 5
    assert info.producer_batches == [
        (7, 1, 0, 1, 0, 1, TS, True, -1, -1),
        (7, 1, -1, -1, 2, 2, TS, True, COMMIT, 4),
        (8, 0, 5, 5, 3, 3, TS, False, -1, -1),
        (9, 2, -1, -1, 5, 5, TS, True, ABORT, 5),
    ]


# --- the client side: read_committed -----------------------------------------------------------


def interleaved() -> bytes:
    """Offsets: producer 1 txn [0, 1], producer 2 txn [2], producer 3 idempotent [3], producer 1
    txn [4], ABORT of 1 [5], producer 2 txn [6], COMMIT of 2 [7], producer 1 txn [8], COMMIT of 1
    [9], producer 4 txn [10] (aborted; its marker comes later), no producer id [11]."""
    return stamped(
        txn_batch(1, 2),
        txn_batch(2, 1),
        _native.build_batch([(None, b"i")], TS, producer_id=3, producer_epoch=0, base_sequence=0),
        txn_batch(1, 1),
        marker(1, False),
        txn_batch(2, 1),
        marker(2, True),
        txn_batch(1, 1),
        marker(1, True),
        txn_batch(4, 1),
        _native.build_batch([(None, b"p")], TS),
    )


def test_decode_read_committed_across_interleaved_producers():
    data = interleaved()
    aborted = [(4, 10), (1, 0)]  # any order
    decoded = _native.decode_record_batches(data, 0, -1, False, aborted)
    assert offsets_of(decoded) == [2, 3, 6, 8, 11]
    assert decoded.next_offset == 12
    # A non-transactional batch of a producer listed as aborted is kept.
    decoded = _native.decode_record_batches(data, 0, -1, False, [(3, 3)])
    assert offsets_of(decoded) == [0, 1, 2, 3, 4, 6, 8, 10, 11]
    # Producer 1 aborted twice: its second transaction (8) goes too.
    decoded = _native.decode_record_batches(data, 0, -1, True, [(1, 0), (1, 8)])
    assert offsets_of(decoded) == [2, 3, 6, 10, 11]
    # Offset bounds apply on top.
    decoded = _native.decode_record_batches(data, 3, 9, False, aborted)
    assert offsets_of(decoded) == [3, 6, 8]
    assert decoded.next_offset == 12


def test_decode_read_uncommitted_is_the_default():
    data = interleaved()
    every = [0, 1, 2, 3, 4, 6, 8, 10, 11]
    assert offsets_of(_native.decode_record_batches(data, 0, -1, False)) == every
    assert offsets_of(_native.decode_record_batches(data, 0, -1, False, None)) == every
    # An empty list (read_committed, nothing aborted) keeps every record too.
    assert offsets_of(_native.decode_record_batches(data, 0, -1, False, [])) == every
    with pytest.raises(ValueError):
        _native.decode_record_batches(data, 0, -1, False, [(1,)])  # type: ignore[list-item]
    with pytest.raises(TypeError):
        _native.decode_record_batches(data, 0, -1, False, [(1, "x")])  # type: ignore[list-item]


def test_read_record_batches():
    data = interleaved()
    batches = _native.read_record_batches(data)
    assert [(b[0], b[1], b[2], b[3], b[4], [r[0] for r in b[5]]) for b in batches] == [
        (0, 1, 0, True, -1, [0, 1]),
        (2, 2, 0, True, -1, [2]),
        (3, 3, 0, False, -1, [3]),
        (4, 1, 0, True, -1, [4]),
        (5, 1, 0, True, ABORT, []),
        (6, 2, 0, True, -1, [6]),
        (7, 2, 0, True, COMMIT, []),
        (8, 1, 0, True, -1, [8]),
        (9, 1, 0, True, COMMIT, []),
        (10, 4, 0, True, -1, [10]),
        (11, -1, -1, False, -1, [11]),
    ]
    assert batches[0][5] == [(0, TS, None, b"v0"), (1, TS, None, b"v1")]
    flat = [record for batch in batches for record in batch[5]]
    assert flat == _native.read_records(data)
    assert _native.read_record_batches(b"") == []
    with pytest.raises(CorruptRecordError):
        _native.read_record_batches(data[:-1])
    damaged = bytearray(data)
    damaged[-1] ^= 1
    with pytest.raises(CorruptRecordError):
        _native.read_record_batches(bytes(damaged))
