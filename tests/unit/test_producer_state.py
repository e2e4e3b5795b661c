"""Idempotent producer checks: duplicates, sequence gaps, fenced epochs."""

import pytest

from pybroker.log.producer_state import (
    InvalidProducerEpochError,
    OutOfOrderSequenceError,
    ProducerStateManager,
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
