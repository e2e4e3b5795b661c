"""Follower truncation: Kafka's rules (``AbstractFetcherThread.getOffsetTruncationState``,
``fetchOffsetAndTruncate``, the leader's ``DivergingEpoch`` check) as pure functions, and the
divergence scenarios of Kafka's EpochDrivenReplicationProtocolAcceptanceTest (KIP-101, KIP-279)
and AbstractFetcherThreadTest played at the log level: a leader log and a follower log built
with chosen epochs and offsets, truncation computed against the leader's epoch cache, then the
leader's batches fetched and appended until the follower's bytes equal the leader's."""

from __future__ import annotations

import pytest

from pybroker.log.leader_epoch import UNDEFINED_EPOCH, LeaderEpochCache
from pybroker.log.log import Log, OffsetOutOfRangeError, UnexpectedAppendOffsetError
from pybroker.replication.truncation import (
    OffsetTruncationState,
    OutOfRangeResolution,
    diverging_epoch,
    leader_start_offset_needed,
    offset_truncation_state,
    resolve_offset_out_of_range,
)
from tests.unit.replica_logs import (
    T0,
    batch_epochs,
    fetch,
    lead,
    lead_batch,
    log_bytes,
    make_log,
    replicate,
)

MAX_ROUNDS = 10

# --- the rules -----------------------------------------------------------------------------------


def cache(path, entries: list[tuple[int, int]]) -> LeaderEpochCache:
    path.mkdir(parents=True, exist_ok=True)
    epochs = LeaderEpochCache(str(path))
    for epoch, start in entries:
        epochs.assign(epoch, start)
    return epochs


def test_leader_without_an_end_offset_truncates_to_the_fetch_offset(tmp_path):
    follower = cache(tmp_path, [(0, 0), (2, 10)])
    assert offset_truncation_state(-1, -1, follower, 20, fetch_offset=7) == OffsetTruncationState(7, True)
    # Only the end offset decides: an epoch with it does not matter.
    assert offset_truncation_state(2, -1, follower, 20, fetch_offset=7) == OffsetTruncationState(7, True)


def test_leader_without_an_epoch_truncates_to_its_end_offset_capped_at_ours(tmp_path):
    follower = cache(tmp_path, [(0, 0)])
    assert offset_truncation_state(-1, 15, follower, 20, 0) == OffsetTruncationState(15, True)
    assert offset_truncation_state(-1, 25, follower, 20, 0) == OffsetTruncationState(20, True)


def test_follower_without_epochs_truncates_to_the_leaders_end_offset(tmp_path):
    empty = cache(tmp_path, [])
    assert offset_truncation_state(3, 15, empty, 20, 0) == OffsetTruncationState(15, True)
    assert offset_truncation_state(3, 25, empty, 20, 0) == OffsetTruncationState(20, True)


def test_epoch_unknown_to_the_follower_truncates_to_its_smaller_epoch_and_asks_again(tmp_path):
    # KIP-279: the follower has 1 where the leader answered 2; the end of the follower's epoch 1
    # is 30 (where its epoch 3 starts).
    follower = cache(tmp_path, [(0, 0), (1, 10), (3, 30)])
    assert offset_truncation_state(2, 40, follower, 50, 0) == OffsetTruncationState(30, False)
    assert offset_truncation_state(2, 40, follower, 25, 0) == OffsetTruncationState(25, False)


def test_known_epoch_truncates_to_the_smallest_end(tmp_path):
    # KIP-101: min(leader end offset, own end offset of that epoch, own log end offset).
    follower = cache(tmp_path, [(0, 0), (2, 10), (4, 30)])
    assert offset_truncation_state(2, 20, follower, 50, 0) == OffsetTruncationState(20, True)
    assert offset_truncation_state(2, 35, follower, 50, 0) == OffsetTruncationState(30, True)
    assert offset_truncation_state(4, 60, follower, 50, 0) == OffsetTruncationState(50, True)
    # An epoch below the follower's first: Kafka's endOffsetFor answers that epoch, ending where
    # the first known epoch starts.
    late = cache(tmp_path / "late", [(5, 100)])
    assert offset_truncation_state(3, 120, late, 150, 0) == OffsetTruncationState(100, True)


def test_diverging_epoch_is_the_leaders_check_of_a_follower_fetch(tmp_path):
    leader = cache(tmp_path, [(0, 0), (2, 10), (5, 30)])
    # Same history: no divergence, read.
    assert diverging_epoch(leader, 0, 40, last_fetched_epoch=2, fetch_offset=10) is None
    assert diverging_epoch(leader, 0, 40, last_fetched_epoch=5, fetch_offset=40) is None
    # The follower has more of epoch 2 than the leader.
    assert diverging_epoch(leader, 0, 40, last_fetched_epoch=2, fetch_offset=35) == (2, 30)
    assert diverging_epoch(leader, 0, 40, last_fetched_epoch=0, fetch_offset=12) == (0, 10)
    # The leader never had epoch 4: it answers its largest epoch below, and where that ended.
    assert diverging_epoch(leader, 0, 40, last_fetched_epoch=4, fetch_offset=35) == (2, 30)
    # Below the log start offset: OFFSET_OUT_OF_RANGE even if the epochs diverge.
    with pytest.raises(OffsetOutOfRangeError):
        diverging_epoch(leader, 20, 40, last_fetched_epoch=4, fetch_offset=15)
    # An epoch the leader cannot place: OFFSET_OUT_OF_RANGE.
    with pytest.raises(OffsetOutOfRangeError):
        diverging_epoch(leader, 0, 40, last_fetched_epoch=7, fetch_offset=35)
    with pytest.raises(OffsetOutOfRangeError):
        diverging_epoch(cache(tmp_path / "empty", []), 0, 40, last_fetched_epoch=1, fetch_offset=0)


def test_offset_out_of_range_resolution():
    # The leader's log ends below ours (an unclean election): truncate to its end.
    assert not leader_start_offset_needed(10, 4)
    assert resolve_offset_out_of_range(10, 4) == OutOfRangeResolution(4, truncate_to=4)
    # Our log ends below the leader's start: everything is stale.
    assert leader_start_offset_needed(10, 50)
    assert resolve_offset_out_of_range(10, 50, 20) == OutOfRangeResolution(20, truncate_fully_and_start_at=20)
    # Otherwise keep the log and fetch from the larger of our end and the leader's start.
    assert resolve_offset_out_of_range(10, 50, 5) == OutOfRangeResolution(10)
    assert resolve_offset_out_of_range(10, 10, 10) == OutOfRangeResolution(10)
    with pytest.raises(ValueError):
        resolve_offset_out_of_range(10, 50)


# --- the scenarios, at the log level -------------------------------------------------------------


def truncate_via_offsets_for_leader_epoch(leader: Log, follower: Log) -> list[OffsetTruncationState]:
    """State Truncating: ask the leader (OffsetsForLeaderEpoch) about the follower's latest epoch
    and truncate, until the truncation is final. The fetch offset is the follower's high
    watermark (its initial fetch offset on this path)."""
    states = []
    for _ in range(MAX_ROUNDS):
        answer = leader.leader_epoch_cache.end_offset_for(follower.leader_epoch_cache.latest_epoch,
                                                          leader.log_end_offset)
        state = offset_truncation_state(*answer, follower.leader_epoch_cache, follower.log_end_offset,
                                        follower.high_watermark)
        follower.truncate_to(state.offset)
        states.append(state)
        if state.truncation_completed:
            return states
    raise AssertionError(f"no final truncation after {states}")


def truncate_on_fetch(leader: Log, follower: Log) -> list[tuple[tuple[int, int], OffsetTruncationState]]:
    """State Fetching (Fetch v12+): fetch from the log end offset with the latest epoch as
    LastFetchedEpoch; on each DivergingEpoch answer truncate, until a fetch would read records.
    A follower with no epoch sends none, and the leader does not check."""
    answers = []
    for _ in range(MAX_ROUNDS):
        last_fetched_epoch = follower.leader_epoch_cache.latest_epoch
        if last_fetched_epoch == UNDEFINED_EPOCH:
            return answers
        diverging = diverging_epoch(leader.leader_epoch_cache, leader.log_start_offset, leader.log_end_offset,
                                    last_fetched_epoch, follower.log_end_offset)
        if diverging is None:
            return answers
        state = offset_truncation_state(*diverging, follower.leader_epoch_cache, follower.log_end_offset,
                                        follower.log_end_offset)
        follower.truncate_to(state.offset)
        answers.append((diverging, state))
    raise AssertionError(f"still diverging after {answers}")


def assert_same_log(leader: Log, follower: Log) -> None:
    assert log_bytes(follower) == log_bytes(leader)
    assert batch_epochs(follower) == batch_epochs(leader)
    assert follower.leader_epoch_cache.entries == leader.leader_epoch_cache.entries
    assert (follower.log_start_offset, follower.log_end_offset, follower.high_watermark) == (
        leader.log_start_offset, leader.log_end_offset, leader.high_watermark)


def values(prefix: str, count: int) -> list[bytes]:
    return [f"{prefix}{i}".encode() for i in range(count)]


@pytest.fixture(params=["offsets_for_leader_epoch", "truncate_on_fetch"])
def truncate(request):
    """Both ways a follower finds where to truncate: they must agree."""
    return truncate_via_offsets_for_leader_epoch if request.param == "offsets_for_leader_epoch" else truncate_on_fetch


def kip101_logs(tmp_path) -> tuple[Log, Log]:
    """EpochDrivenReplicationProtocolAcceptanceTest.offsetsShouldNotGoBackwards: 100 messages on
    both brokers; the leader crashes and loses half; as leader again (epoch 1) it takes two
    batches of 77 messages. The follower still has all 100 (high watermark 100)."""
    leader = make_log(tmp_path, "leader")
    follower = make_log(tmp_path, "follower")
    for log in (leader, follower):
        lead(log, 0, *values("m", 100))
    leader.truncate_to(50)  # the crash lost the second half of the leader's log
    lead_batch(leader, 1, values("big-a", 77))
    lead_batch(leader, 1, values("big-b", 77))
    leader.update_high_watermark(leader.log_end_offset)
    follower.update_high_watermark(100)
    return leader, follower


def test_kip101_offsets_should_not_go_backwards(tmp_path, truncate):
    leader, follower = kip101_logs(tmp_path)
    assert leader.leader_epoch_cache.entries == [(0, 0), (1, 50)]

    truncate(leader, follower)

    assert follower.log_end_offset == 50  # where the leader's epoch 0 ended
    replicate(leader, follower)
    assert_same_log(leader, follower)
    offsets = [h.base_offset for h in follower.active_segment.batches()]
    assert offsets == sorted(offsets)


def test_kip101_truncating_to_the_high_watermark_instead_is_refused(tmp_path):
    # Pre-KIP-101 the follower kept its log up to its high watermark (100) and fetched from there:
    # the leader's batch holding offset 100 starts at 50, so offsets would go backwards.
    leader, follower = kip101_logs(tmp_path)
    before = log_bytes(follower)
    with pytest.raises(UnexpectedAppendOffsetError) as raised:
        follower.append_as_follower(memoryview(bytearray(fetch(leader, 100))), T0)
    assert (raised.value.first_offset, raised.value.last_offset) == (50, 203)  # both batches came
    assert log_bytes(follower) == before


def test_kip101_should_not_allow_divergent_logs(tmp_path, truncate):
    # shouldNotAllowDivergentLogs: 10 messages on both; the leader loses the last 5 in a crash,
    # then takes 9 more in epoch 1; the follower must drop its 5 and copy the leader's 9.
    leader = make_log(tmp_path, "leader")
    follower = make_log(tmp_path, "follower")
    for log in (leader, follower):
        lead(log, 0, *values("m", 10))
    leader.truncate_to(5)
    lead(leader, 1, *values("n", 9))
    leader.update_high_watermark(leader.log_end_offset)

    truncate(leader, follower)

    assert follower.log_end_offset == 5
    replicate(leader, follower)
    assert_same_log(leader, follower)


def test_follow_leader_epoch_basic_workflow(tmp_path):
    # shouldFollowLeaderEpochBasicWorkflow: each leader change adds (epoch, LEO) on the leader at
    # once, and on the follower with the first message of the epoch it copies.
    leader = make_log(tmp_path, "leader")
    follower = make_log(tmp_path, "follower")
    lead(leader, 0, b"a")
    leader.update_high_watermark(1)
    replicate(leader, follower)
    assert follower.leader_epoch_cache.entries == [(0, 0)]
    for epoch in (1, 2):
        leader.assign_leader_epoch(epoch, leader.log_end_offset)  # becoming leader again
        replicate(leader, follower)
        assert follower.leader_epoch_cache.entries == [(e, e) for e in range(epoch)]
        lead(leader, epoch, b"x")
        leader.update_high_watermark(leader.log_end_offset)
        replicate(leader, follower)
        assert follower.leader_epoch_cache.entries == [(e, e) for e in range(epoch + 1)]
        assert batch_epochs(follower)[-1] == (epoch, epoch, epoch)
    assert_same_log(leader, follower)


def kip279_logs(tmp_path) -> tuple[Log, Log]:
    """logsShouldNotDivergeOnUncleanLeaderElections (unclean elections allowed, acks=1):
    epoch 0, both up: m0 at 0 on both. 100 stops; epoch 1, 101 leads: 1 message at 1. 101 stops,
    100 restarts; epoch 2 (unclean), 100 leads: 3 messages at 1-3. 100 stops, 101 restarts;
    epoch 3, 101 leads: 1 message at 2. 101 stops, 100 restarts; epoch 4, 100 leads: 2 messages
    at 4-5. Then 101 restarts as follower of 100."""
    b100 = make_log(tmp_path, "broker-100")
    b101 = make_log(tmp_path, "broker-101")
    for log in (b100, b101):
        lead(log, 0, b"m0")
    lead(b101, 1, b"epoch1")
    lead(b100, 2, *values("epoch2-bigger-", 3))
    lead(b101, 3, b"epoch3")
    lead(b100, 4, *values("epoch4-bigger-", 2))
    b100.update_high_watermark(b100.log_end_offset)
    assert b100.leader_epoch_cache.entries == [(0, 0), (2, 1), (4, 4)]
    assert b101.leader_epoch_cache.entries == [(0, 0), (1, 1), (3, 2)]
    return b100, b101


def test_kip279_offsets_for_leader_epoch_asks_again_with_the_smaller_epoch(tmp_path):
    leader, follower = kip279_logs(tmp_path)
    states = truncate_via_offsets_for_leader_epoch(leader, follower)
    # Asked about epoch 3, the leader answers (2, 4); the follower never had epoch 2, so it
    # truncates to where its epoch 1 ended (2), not final; asked about epoch 1, the leader answers
    # (0, 1): the logs agree up to offset 1.
    assert states == [OffsetTruncationState(2, False), OffsetTruncationState(1, True)]
    replicate(leader, follower)
    assert_same_log(leader, follower)


def test_kip279_truncation_on_fetch(tmp_path):
    leader, follower = kip279_logs(tmp_path)
    answers = truncate_on_fetch(leader, follower)
    assert answers == [((2, 4), OffsetTruncationState(2, False)), ((0, 1), OffsetTruncationState(1, True))]
    replicate(leader, follower)
    assert_same_log(leader, follower)


def test_kip279_a_single_round_would_leave_the_logs_diverged(tmp_path):
    # Pre-KIP-279 the first answer was final: the follower would keep epoch 1's message at
    # offset 1 where the leader has epoch 2's.
    leader, follower = kip279_logs(tmp_path)
    answer = leader.leader_epoch_cache.end_offset_for(follower.leader_epoch_cache.latest_epoch, leader.log_end_offset)
    first = offset_truncation_state(*answer, follower.leader_epoch_cache, follower.log_end_offset, 0)
    follower.truncate_to(first.offset)
    assert batch_epochs(follower)[1] == (1, 1, 1) != batch_epochs(leader)[1] == (1, 1, 2)


def fetcher_logs(tmp_path, replica: list[int], leader_epochs: list[int], replica_hw: int, leader_hw: int,
                 leader_start: int = 0, leader_base: int = 0) -> tuple[Log, Log]:
    """AbstractFetcherThreadTest's mkBatch logs: one single-record batch per epoch listed; the
    same offset and epoch hold the same record on both (the history they share)."""
    leader = make_log(tmp_path, "leader")
    follower = make_log(tmp_path, "follower")
    if leader_base:
        leader.truncate_fully_and_start_at(leader_base)
    for offset, epoch in enumerate(replica):
        lead(follower, epoch, f"record-{offset}-epoch-{epoch}".encode())
    for offset, epoch in enumerate(leader_epochs):
        lead(leader, epoch, f"record-{leader_base + offset}-epoch-{epoch}".encode())
    follower.update_high_watermark(replica_hw)
    leader.update_high_watermark(leader_hw)
    if leader_start > leader.log_start_offset:
        leader.maybe_increment_log_start_offset(leader_start, "DeleteRecords")
    return leader, follower


def test_fetcher_truncation(tmp_path):
    # AbstractFetcherThreadTest.testTruncation: no epoch in common.
    leader, follower = fetcher_logs(tmp_path, [0, 2, 4], [1, 3, 5], replica_hw=0, leader_hw=2)
    states = truncate_via_offsets_for_leader_epoch(leader, follower)
    assert states == [OffsetTruncationState(2, False), OffsetTruncationState(1, False),
                      OffsetTruncationState(0, True)]
    replicate(leader, follower)
    assert_same_log(leader, follower)
    assert follower.high_watermark == 2


def test_fetcher_truncation_on_fetch_without_common_epochs(tmp_path):
    leader, follower = fetcher_logs(tmp_path, [0, 2, 4], [1, 3, 5], replica_hw=0, leader_hw=2)
    answers = truncate_on_fetch(leader, follower)
    assert [state for _, state in answers] == [OffsetTruncationState(2, False), OffsetTruncationState(1, False),
                                               OffsetTruncationState(0, True)]
    assert [diverging for diverging, _ in answers] == [(3, 2), (1, 1), (0, 0)]
    replicate(leader, follower)
    assert_same_log(leader, follower)


def test_fetcher_diverging_epochs(tmp_path):
    # testDivergingEpochs: the logs differ only in the last batch's epoch (4 here, 5 there).
    leader, follower = fetcher_logs(tmp_path, [0, 2, 4], [0, 2, 5], replica_hw=0, leader_hw=2)
    answers = truncate_on_fetch(leader, follower)
    assert answers == [((2, 2), OffsetTruncationState(2, True))]
    assert follower.leader_epoch_cache.latest_epoch == 2  # the next lastFetchedEpoch
    replicate(leader, follower)
    assert follower.leader_epoch_cache.latest_epoch == 5
    assert_same_log(leader, follower)


def test_fetcher_truncate_on_fetch_keeps_the_high_watermark_until_data_arrives(tmp_path):
    # testTruncateOnFetchDoesNotProcessPartitionData.
    leader, follower = fetcher_logs(tmp_path, [0, 0, 2, 4, 4, 4], [0, 0, 2, 5, 5], replica_hw=1, leader_hw=4)
    answers = truncate_on_fetch(leader, follower)
    assert answers == [((2, 3), OffsetTruncationState(3, True))]
    assert (follower.log_end_offset, follower.high_watermark) == (3, 1)
    replicate(leader, follower)
    assert (follower.log_end_offset, follower.high_watermark) == (5, 4)
    assert_same_log(leader, follower)


def test_fetcher_truncate_to_high_watermark_if_leader_epoch_info_not_available(tmp_path):
    # testTruncateToHighWatermarkIfLeaderEpochInfoNotAvailable: the leader answers no end offset.
    _, follower = fetcher_logs(tmp_path, [0, 2, 4], [], replica_hw=2, leader_hw=0)
    state = offset_truncation_state(UNDEFINED_EPOCH, -1, follower.leader_epoch_cache, follower.log_end_offset,
                                    follower.high_watermark)
    assert state == OffsetTruncationState(2, True)
    follower.truncate_to(state.offset)
    assert follower.log_end_offset == 2


def test_fetcher_follower_fetch_out_of_range_high(tmp_path):
    # testFollowerFetchOutOfRangeHigh: the leader's log was emptied behind the follower's back.
    leader, follower = fetcher_logs(tmp_path, [0, 2, 4], [0, 2, 4], replica_hw=0, leader_hw=2)
    leader.truncate_fully_and_start_at(0)
    with pytest.raises(OffsetOutOfRangeError):
        leader.read(follower.log_end_offset, 1 << 20, leader.log_end_offset, True)
    assert not leader_start_offset_needed(follower.log_end_offset, leader.log_end_offset)
    resolution = resolve_offset_out_of_range(follower.log_end_offset, leader.log_end_offset)
    assert resolution == OutOfRangeResolution(0, truncate_to=0)
    follower.truncate_to(resolution.truncate_to)
    assert (follower.log_end_offset, follower.log_start_offset, follower.high_watermark) == (0, 0, 0)


def test_fetcher_follower_fetch_out_of_range_low(tmp_path):
    # testFollowerFetchOutOfRangeLow: the leader's log starts (at 2) past the follower's end (1).
    leader, follower = fetcher_logs(tmp_path, [0], [4], replica_hw=0, leader_hw=3, leader_start=2, leader_base=2)
    with pytest.raises(OffsetOutOfRangeError):  # checked before any divergence
        truncate_on_fetch(leader, follower)
    assert leader_start_offset_needed(follower.log_end_offset, leader.log_end_offset)
    resolution = resolve_offset_out_of_range(follower.log_end_offset, leader.log_end_offset, leader.log_start_offset)
    assert resolution == OutOfRangeResolution(2, truncate_fully_and_start_at=2)
    follower.truncate_fully_and_start_at(resolution.truncate_fully_and_start_at)
    assert (follower.log_start_offset, follower.log_end_offset) == (2, 2)
    assert follower.leader_epoch_cache.entries == []
    replicate(leader, follower)
    assert_same_log(leader, follower)


def test_leader_log_start_inside_a_batch(tmp_path):
    # DeleteRecords moved the leader's log start offset into a batch: a follower starting empty
    # at that offset gets the whole batch, which starts below its log end offset. Kafka's
    # Partition.appendRecordsToFollowerOrFutureReplica restarts the log at the batch's base offset
    # and appends again; the leader's log start offset then applies.
    leader = make_log(tmp_path, "leader")
    lead_batch(leader, 0, values("r", 5))
    leader.update_high_watermark(5)
    leader.maybe_increment_log_start_offset(2, "DeleteRecords")
    follower = make_log(tmp_path, "follower")
    follower.truncate_fully_and_start_at(2)  # after OFFSET_OUT_OF_RANGE (leader log start 2 > 0)
    data = memoryview(bytearray(fetch(leader, 2)))
    with pytest.raises(UnexpectedAppendOffsetError) as raised:
        follower.append_as_follower(data, T0)
    e = raised.value
    assert follower.log_end_offset == follower.log_start_offset and e.first_offset < 2 <= e.last_offset
    follower.truncate_fully_and_start_at(e.first_offset)
    follower.append_as_follower(data, T0)
    follower.maybe_update_high_watermark(leader.high_watermark)
    follower.maybe_increment_log_start_offset(leader.log_start_offset, "LeaderOffsetIncremented")
    assert_same_log(leader, follower)
