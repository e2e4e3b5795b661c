"""Producer state: idempotent checks (duplicates, sequence gaps, fenced epochs), transactions
(open, closed by markers, the first unstable offset) and snapshots."""

import pytest

from pybroker.log.producer_snapshot import CorruptSnapshotError, decode_snapshot, encode_snapshot
from pybroker.log.producer_state import (
    BatchMetadata,
    CompletedTxn,
    InvalidProducerEpochError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    ProducerStateManager,
    TransactionCoordinatorFencedError,
    last_sequence,
)


def test_duplicate_batch_is_found_with_its_original_offsets():
    state = ProducerStateManager()
    state.check(7, 0, 0)
    state.update(7, 0, 0, 4, 100, 104, 1)
    duplicate = state.find_duplicate(7, 0, 0, 4)
    assert duplicate is not None and (duplicate.first_offset, duplicate.last_offset) == (100, 104)
    assert state.find_duplicate(7, 1, 0, 4) is None


def test_sequence_gap_and_old_epoch_are_rejected():
    state = ProducerStateManager()
    state.update(7, 1, 0, 4, 0, 4, 1)
    state.check(7, 1, 5)
    with pytest.raises(OutOfOrderSequenceError):
        state.check(7, 1, 7)
    with pytest.raises(InvalidProducerEpochError):
        state.check(7, 0, 5)
    with pytest.raises(OutOfOrderSequenceError):
        state.check(7, 2, 3)  # a new epoch must start at sequence 0
    state.check(7, 2, 0)


def test_unknown_producer_may_start_anywhere_and_sequences_wrap():
    state = ProducerStateManager()
    state.check(9, 0, 12345)
    assert last_sequence(2**31 - 2, 3) == 1


# --- transactions (KIP-98) -------------------------------------------------------------------------


def test_transaction_opens_at_first_batch_and_closes_at_marker():
    state = ProducerStateManager()
    state.update(7, 0, 0, 4, 10, 14, 1, is_transactional=True)
    state.update(7, 0, 5, 9, 20, 24, 2, is_transactional=True)
    assert state.first_unstable_offset == 10
    assert state.ongoing_transactions == {10: 7}
    completed = state.update_marker(7, 0, 3, 30, commit=False, timestamp=3)
    assert completed == CompletedTxn(7, 10, 30, is_aborted=True)
    assert state.last_stable_offset(completed) == 31
    state.complete(completed)
    # Closed, but the marker is not below the high watermark yet: still unstable.
    assert state.first_unstable_offset == 10
    state.on_high_watermark_updated(30)
    assert state.first_unstable_offset == 10
    state.on_high_watermark_updated(31)
    assert state.first_unstable_offset is None


def test_last_stable_offset_of_a_completed_transaction_stops_at_the_next_open_one():
    state = ProducerStateManager()
    state.update(1, 0, 0, 0, 5, 5, 1, is_transactional=True)
    state.update(2, 0, 0, 0, 6, 6, 1, is_transactional=True)
    completed = state.update_marker(1, 0, 0, 7, commit=True, timestamp=1)
    assert completed is not None and state.last_stable_offset(completed) == 6
    state.complete(completed)
    state.on_high_watermark_updated(8)
    assert state.first_unstable_offset == 6


def test_marker_without_data_completes_nothing_and_sets_the_coordinator_epoch():
    state = ProducerStateManager()
    assert state.update_marker(3, 1, 4, 0, commit=True, timestamp=1) is None
    with pytest.raises(TransactionCoordinatorFencedError):
        state.check_marker(3, 1, 3)
    with pytest.raises(InvalidProducerEpochError):
        state.check_marker(3, 0, 4)
    state.check_marker(3, 2, 4)


def test_plain_write_inside_an_open_transaction_is_invalid_txn_state():
    state = ProducerStateManager()
    state.update(7, 0, 0, 0, 0, 0, 1, is_transactional=True)
    with pytest.raises(InvalidTxnStateError):
        state.check(7, 0, 1, is_transactional=False)
    state.check(7, 0, 1, is_transactional=True)
    # A coordinator's writes (transactional offsets) skip the sequence check.
    state.check(7, 0, -1, is_transactional=True, check_sequence=False)


def test_expiry_keeps_producers_with_open_transactions():
    state = ProducerStateManager()
    state.update(1, 0, 0, 0, 0, 0, 100)
    state.update(2, 0, 0, 0, 1, 1, 100, is_transactional=True)
    assert state.remove_expired(now_ms=10_000, expiration_ms=1000) == 1
    assert state.entry(1) is None and state.entry(2) is not None


def test_snapshot_round_trip_and_corruption():
    state = ProducerStateManager()
    state.update(7, 3, 10, 14, 100, 104, 555)
    state.update(8, 0, 0, 0, 105, 105, 556, is_transactional=True)
    state.update_marker(9, 2, 6, 106, commit=True, timestamp=557)
    data = encode_snapshot(state.producers)
    assert data[:2] == b"\x00\x01" and len(data) == 2 + 4 + 4 + 3 * 46
    loaded = decode_snapshot(data)
    assert loaded[7].producer_epoch == 3 and loaded[7].batches[-1] == BatchMetadata(10, 14, 100, 104, 555)
    assert loaded[8].current_txn_first_offset == 105
    assert loaded[9].coordinator_epoch == 6 and not loaded[9].batches
    restored = ProducerStateManager()
    for producer_id, entry in loaded.items():
        restored.load_entry(producer_id, entry)
    assert restored.first_unstable_offset == 105
    assert restored.find_duplicate(7, 3, 10, 14) is not None
    damaged = bytearray(data)
    damaged[20] ^= 1
    with pytest.raises(CorruptSnapshotError):
        decode_snapshot(bytes(damaged))
    with pytest.raises(CorruptSnapshotError):
        decode_snapshot(data[:-1])
