"""A follower's log: appending its leader's batches as they are (Kafka's
``UnifiedLog.appendAsFollower``), truncating (``truncateTo``, ``truncateFullyAndStartAt``) and the
follower's high watermark. No networking: the leader is another ``Log`` in the same directory."""

from __future__ import annotations

import pytest

from pybroker.common.errors import CorruptRecordError, RecordTooLargeError
from pybroker.log.leader_epoch import LeaderEpochCache
from pybroker.log.log import OffsetsOutOfOrderError, UnexpectedAppendOffsetError
from pybroker.log.producer_state import OutOfOrderSequenceError
from tests.unit.replica_logs import (
    T0,
    batch_epochs,
    fetch,
    lead,
    lead_batch,
    log_bytes,
    make_log,
    replicate,
    stamped,
)


def test_follower_append_keeps_the_leaders_offsets_epochs_and_bytes(tmp_path):
    leader = make_log(tmp_path, "leader")
    lead(leader, 0, b"a", b"b")
    lead_batch(leader, 2, [b"c", b"d", b"e"])
    lead(leader, 5, b"f")
    leader.update_high_watermark(leader.log_end_offset)
    follower = make_log(tmp_path, "follower")

    info = follower.append_as_follower(memoryview(bytearray(fetch(leader, 0))), T0)

    assert (info.first_offset, info.last_offset, info.record_count) == (0, 5, 6)
    assert info.last_leader_epoch == 5
    assert info.log_append_time == -1
    assert (info.max_timestamp, info.offset_of_max_timestamp) == (leader.active_segment.max_timestamp, 5)
    assert follower.log_end_offset == 6
    assert log_bytes(follower) == log_bytes(leader)
    assert follower.read(0, 1 << 20, 6, True) == leader.read(0, 1 << 20, 6, True)
    assert batch_epochs(follower) == [(0, 0, 0), (1, 1, 0), (2, 4, 2), (5, 5, 5)]
    assert follower.leader_epoch_cache.entries == leader.leader_epoch_cache.entries == [(0, 0), (2, 2), (5, 5)]
    # The checkpoint was written (no log manager: at once).
    assert LeaderEpochCache(follower.dir).entries == [(0, 0), (2, 2), (5, 5)]
    assert follower.unflushed_messages == 6
    # Appending does not move a follower's high watermark: the leader's does.
    assert follower.high_watermark == 0


def test_epoch_cache_after_batches_of_epochs_0_0_2_5(tmp_path):
    follower = make_log(tmp_path)
    records = b"".join([
        stamped([b"a", b"b"], 0, 0), stamped([b"c"], 2, 0), stamped([b"d", b"e"], 3, 2), stamped([b"f"], 5, 5),
    ])
    follower.append_as_follower(memoryview(bytearray(records)), T0)
    assert follower.leader_epoch_cache.entries == [(0, 0), (2, 3), (5, 5)]
    assert follower.leader_epoch_cache.end_offset_for(2, follower.log_end_offset) == (2, 5)
    # A later set in the same epoch adds nothing; a new epoch starts at its first batch.
    follower.append_as_follower(memoryview(stamped([b"g"], 6, 5)), T0)
    follower.append_as_follower(memoryview(stamped([b"h"], 7, 5) + stamped([b"i"], 8, 7)), T0)
    assert follower.leader_epoch_cache.entries == [(0, 0), (2, 3), (5, 5), (7, 8)]


def test_epoch_cache_entries_are_written_behind_through_the_log_manager_hook(tmp_path):
    follower = make_log(tmp_path)
    changed = []
    follower.on_leader_epochs_changed = changed.append
    follower.append_as_follower(memoryview(stamped([b"a"], 0, 1) + stamped([b"b"], 1, 3)), T0)
    assert follower.leader_epoch_cache.entries == [(1, 0), (3, 1)]
    assert changed == [follower, follower]
    assert follower.leader_epoch_cache.dirty


@pytest.mark.parametrize("first_offset", [0, 2, 3])
def test_first_offset_below_the_log_end_offset_is_rejected_with_nothing_written(tmp_path, first_offset):
    follower = make_log(tmp_path)
    follower.append_as_follower(memoryview(stamped([b"a", b"b", b"c", b"d"], 0, 1)), T0)
    before = (log_bytes(follower), follower.log_end_offset, follower.leader_epoch_cache.entries,
              follower.unflushed_messages)

    with pytest.raises(UnexpectedAppendOffsetError, match="is less than the next offset 4") as raised:
        follower.append_as_follower(memoryview(stamped([b"x", b"y"], first_offset, 2)), T0)

    assert (raised.value.first_offset, raised.value.last_offset) == (first_offset, first_offset + 1)
    assert (log_bytes(follower), follower.log_end_offset, follower.leader_epoch_cache.entries,
            follower.unflushed_messages) == before


def test_damaged_or_backwards_sets_are_rejected_with_nothing_written(tmp_path):
    follower = make_log(tmp_path)
    good = stamped([b"a"], 0, 0)
    bad_crc = bytearray(stamped([b"b"], 1, 0))
    bad_crc[-1] ^= 1
    with pytest.raises(CorruptRecordError, match="CRC"):
        follower.append_as_follower(memoryview(good + bytes(bad_crc)), T0)
    with pytest.raises(OffsetsOutOfOrderError):
        follower.append_as_follower(memoryview(stamped([b"a", b"b"], 0, 0) + stamped([b"c"], 1, 0)), T0)
    assert follower.log_end_offset == 0 and follower.active_segment.size == 0
    assert follower.leader_epoch_cache.entries == []


def test_a_gap_after_the_log_end_offset_is_accepted(tmp_path):
    # Kafka only rejects a first offset below the log end offset: a compacted leader log has gaps.
    follower = make_log(tmp_path)
    follower.append_as_follower(memoryview(stamped([b"a"], 0, 0)), T0)
    follower.append_as_follower(memoryview(stamped([b"b"], 10, 0) + stamped([b"c"], 15, 1)), T0)
    assert follower.log_end_offset == 16
    assert batch_epochs(follower) == [(0, 0, 0), (10, 10, 0), (15, 15, 1)]
    assert follower.leader_epoch_cache.entries == [(0, 0), (1, 15)]


def test_empty_set_and_trailing_partial_batch(tmp_path):
    follower = make_log(tmp_path)
    nothing = follower.append_as_follower(memoryview(b""), T0)
    assert (nothing.first_offset, nothing.last_offset, nothing.record_count) == (-1, -1, 0)
    first, second = stamped([b"a"], 0, 0), stamped([b"b"], 1, 0)
    lone_partial = follower.append_as_follower(memoryview(second[:20]), T0)
    assert lone_partial.record_count == 0 and follower.active_segment.size == 0
    # A fetch cut inside its last batch: the complete batches are appended, the rest dropped.
    info = follower.append_as_follower(memoryview(bytearray(first + second[:-3])), T0)
    assert (info.first_offset, info.last_offset) == (0, 0)
    assert log_bytes(follower) == first
    follower.append_as_follower(memoryview(second), T0)
    assert log_bytes(follower) == first + second


def test_no_max_message_bytes_limit_for_a_follower(tmp_path):
    # appendAsFollower passes ignoreRecordSize: the leader already accepted the batch.
    big = stamped([b"x" * 2000], 0, 0)
    leader = make_log(tmp_path, "leader", max_message_bytes=1000)
    with pytest.raises(RecordTooLargeError):
        leader.append_as_leader(memoryview(bytearray(big)), 0, T0)
    follower = make_log(tmp_path, "follower", max_message_bytes=1000)
    follower.append_as_follower(memoryview(big), T0)
    assert follower.log_end_offset == 1


def test_producer_state_is_updated_without_sequence_checks(tmp_path):
    follower = make_log(tmp_path)
    pid = 7
    records = (
        stamped([b"a", b"b"], 0, 0, producer_id=pid, producer_epoch=1, base_sequence=0)
        # A sequence gap the leader path would refuse; the follower takes what the leader wrote.
        + stamped([b"c"], 2, 0, producer_id=pid, producer_epoch=1, base_sequence=5)
        + stamped([b"d"], 3, 0)
    )
    follower.append_as_follower(memoryview(records), T0)
    state = follower.producer_state
    assert len(state) == 1
    duplicate = state.find_duplicate(pid, 1, 5, 5)
    assert duplicate is not None and (duplicate.first_offset, duplicate.last_offset) == (2, 2)
    assert state.find_duplicate(pid, 1, 0, 1) is not None
    with pytest.raises(OutOfOrderSequenceError):
        state.check(pid, 1, 7)
    # An older producer epoch is taken too (Kafka only warns on the replication path).
    follower.append_as_follower(memoryview(stamped([b"e"], 4, 0, producer_id=pid, producer_epoch=0,
                                                   base_sequence=0)), T0)
    assert state.find_duplicate(pid, 0, 0, 0) is not None
    # The same state is rebuilt from the batches after a truncation.
    follower.truncate_to(3)
    assert state.find_duplicate(pid, 1, 5, 5) is not None
    assert state.find_duplicate(pid, 0, 0, 0) is None


def test_roll_while_appending_as_follower(tmp_path):
    one = len(stamped([b"v"], 0, 0))
    leader = make_log(tmp_path, "leader", segment_bytes=3 * one)
    lead(leader, 0, *[b"v"] * 4)
    lead(leader, 1, *[b"v"] * 5)
    leader.update_high_watermark(leader.log_end_offset)
    assert [s.base_offset for s in leader.segments] == [0, 3, 6]
    follower = make_log(tmp_path, "follower", segment_bytes=3 * one)

    replicate(leader, follower)

    assert [s.base_offset for s in follower.segments] == [0, 3, 6]
    assert log_bytes(follower) == log_bytes(leader)
    assert follower.leader_epoch_cache.entries == [(0, 0), (1, 4)]
    assert follower.high_watermark == 9
    # One fetch larger than a segment (a leader with a larger segment.bytes) still rolls first.
    small = make_log(tmp_path, "small", segment_bytes=3 * one)
    small.append_as_follower(memoryview(stamped([b"v"], 0, 0)), T0)
    small.append_as_follower(memoryview(b"".join(stamped([b"v"], i, 0) for i in range(1, 6))), T0)
    assert [s.base_offset for s in small.segments] == [0, 1]


def test_roll_on_offset_overflow_starts_the_segment_at_the_first_offset(tmp_path):
    follower = make_log(tmp_path)
    follower.append_as_follower(memoryview(stamped([b"a"], 0, 0)), T0)
    far = 2**31 + 5  # beyond int32 relative offsets of the segment at 0
    follower.append_as_follower(memoryview(stamped([b"b"], far, 0)), T0)
    assert [s.base_offset for s in follower.segments] == [0, far]
    assert follower.log_end_offset == far + 1
    # An empty active segment rolls too when the set does not fit it.
    empty = make_log(tmp_path, "empty")
    empty.append_as_follower(memoryview(stamped([b"c"], 2**32, 3)), T0)
    assert [s.base_offset for s in empty.segments] == [0, 2**32]
    assert empty.leader_epoch_cache.entries == [(3, 2**32)]


def test_truncate_to_then_append_again(tmp_path):
    one = len(stamped([b"v"], 0, 0))
    follower = make_log(tmp_path, segment_bytes=3 * one)
    follower.append_as_follower(memoryview(b"".join(
        stamped([b"v"], offset, epoch) for offset, epoch in enumerate([0, 0, 1, 1, 1, 3, 3, 4])
    )), T0)
    follower.append_as_follower(memoryview(stamped([b"w"], 8, 4)), T0)
    assert [s.base_offset for s in follower.segments] == [0, 8]
    follower.recovery_point = 9
    follower.update_high_watermark(9)
    assert follower.leader_epoch_cache.entries == [(0, 0), (1, 2), (3, 5), (4, 7)]

    assert follower.truncate_to(5) is True

    assert follower.log_end_offset == 5
    assert [s.base_offset for s in follower.segments] == [0]
    assert follower.leader_epoch_cache.entries == [(0, 0), (1, 2)]
    assert LeaderEpochCache(follower.dir).entries == [(0, 0), (1, 2)]
    assert (follower.high_watermark, follower.recovery_point) == (5, 5)
    assert follower.truncate_to(7) is False
    follower.append_as_follower(memoryview(stamped([b"x", b"y"], 5, 6)), T0)
    assert follower.log_end_offset == 7
    assert follower.leader_epoch_cache.entries == [(0, 0), (1, 2), (6, 5)]
    assert batch_epochs(follower)[-1] == (5, 6, 6)


def test_truncate_to_removes_a_straddling_batch_and_lowers_only_what_is_above(tmp_path):
    follower = make_log(tmp_path)
    follower.append_as_follower(memoryview(stamped([b"a", b"b"], 0, 0) + stamped([b"c", b"d", b"e"], 2, 1)), T0)
    follower.update_high_watermark(2)
    follower.recovery_point = 1
    assert follower.truncate_to(3) is True  # inside the batch 2..4: it goes entirely
    assert follower.log_end_offset == 2
    assert (follower.high_watermark, follower.recovery_point) == (2, 1)
    assert follower.leader_epoch_cache.entries == [(0, 0)]


def test_truncate_to_the_log_end_offset_still_drops_a_later_epoch(tmp_path):
    # A leader that assigned its epoch at its log end offset and wrote nothing before it lost the
    # leadership: Kafka's truncateTo always truncates the epoch cache from the end.
    log = make_log(tmp_path)
    lead(log, 0, b"a", b"b")
    log.assign_leader_epoch(3, 2)
    assert log.leader_epoch_cache.entries == [(0, 0), (3, 2)]
    assert log.truncate_to(2) is False
    assert log.leader_epoch_cache.entries == [(0, 0)]
    assert LeaderEpochCache(log.dir).entries == [(0, 0)]
    with pytest.raises(ValueError):
        log.truncate_to(-1)


def test_truncate_to_writes_the_epoch_checkpoint_behind_through_the_hook(tmp_path):
    log = make_log(tmp_path)
    lead(log, 0, b"a")
    lead(log, 1, b"b")
    changed = []
    log.on_leader_epochs_changed = changed.append
    log.truncate_to(1)
    assert changed == [log]
    assert log.leader_epoch_cache.entries == [(0, 0)]
    assert LeaderEpochCache(log.dir).entries == [(0, 0), (1, 1)]  # the log manager writes it


def test_truncate_to_at_or_below_the_first_segment_empties_the_log(tmp_path):
    log = make_log(tmp_path)
    log.truncate_fully_and_start_at(10)
    log.append_as_follower(memoryview(stamped([b"a"], 10, 2) + stamped([b"b"], 11, 3)), T0)
    assert log.truncate_to(10) is True
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark) == (10, 10, 10)
    assert log.leader_epoch_cache.entries == []
    # Below the first segment's base (Kafka: below firstSegmentBaseOffset): the log restarts there.
    assert log.truncate_to(4) is True
    assert [s.base_offset for s in log.segments] == [4]
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark) == (4, 4, 4)


def test_truncate_fully_and_start_at_clears_the_epoch_cache_and_producer_state(tmp_path):
    log = make_log(tmp_path)
    log.append_as_follower(memoryview(stamped([b"a"], 0, 1, producer_id=3, producer_epoch=0, base_sequence=0)
                                      + stamped([b"b"], 1, 2)), T0)
    log.update_high_watermark(2)
    log.truncate_fully_and_start_at(100)
    assert [s.base_offset for s in log.segments] == [100]
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark, log.recovery_point) == (100, 100, 100, 100)
    assert log.leader_epoch_cache.entries == [] and LeaderEpochCache(log.dir).entries == []
    assert len(log.producer_state) == 0
    log.append_as_follower(memoryview(stamped([b"c"], 100, 4)), T0)
    assert log.leader_epoch_cache.entries == [(4, 100)]


def test_follower_high_watermark_is_min_of_the_leaders_and_its_own_end(tmp_path):
    follower = make_log(tmp_path)
    follower.truncate_fully_and_start_at(5)
    follower.append_as_follower(memoryview(stamped([b"a", b"b", b"c"], 5, 0)), T0)
    assert follower.maybe_update_high_watermark(100) == 8  # capped at its own log end offset
    assert follower.maybe_update_high_watermark(100) is None  # unchanged
    assert follower.maybe_update_high_watermark(6) == 6  # the leader's may be lower: it goes down
    assert follower.maybe_update_high_watermark(0) == 5  # never below the log start offset
    # The leader's log start offset moves the follower's, up to its high watermark.
    follower.maybe_update_high_watermark(8)
    assert follower.maybe_increment_log_start_offset(7, "LeaderOffsetIncremented")
    assert follower.log_start_offset == 7
