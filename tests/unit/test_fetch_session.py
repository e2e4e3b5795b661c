"""Fetch sessions (KIP-227) without a broker: `FetchManager.new_context`'s rule table row by row,
what each context answers, and the session cache's limits, eviction and session ids on a mock
clock (Kafka 3.9's ``FetchSession.scala``, whose ``FetchSessionTest`` these rows follow)."""

from __future__ import annotations

import random

import pytest

from pybroker.common.errors import ErrorCode as E
from pybroker.server.fetch_session import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    INT_MAX,
    FetchManager,
    FetchMetadata,
    FetchSessionCache,
    FetchSessionCacheShard,
    FullFetchContext,
    IncrementalFetchContext,
    SessionErrorContext,
    SessionlessFetchContext,
    next_epoch,
)
from pybroker.server.replica_manager import FetchPartitionRequest, FetchPartitionResult
from pybroker.types import TopicPartition
from tests.mock_time import MockTime

EVICTION_MS = 120_000
A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)


def req(tp: TopicPartition, offset: int = 0, max_bytes: int = 1000) -> FetchPartitionRequest:
    return FetchPartitionRequest(tp, offset, max_bytes)


def data(*tps: TopicPartition, offset: int = 0) -> dict[TopicPartition, FetchPartitionRequest]:
    return {tp: req(tp, offset) for tp in tps}


def res(hw: int = 10, log_start: int = 0, records: bytes = b"", error: E = E.NONE, lso: int | None = None,
        **extra: object) -> FetchPartitionResult:
    return FetchPartitionResult(error, hw, hw if lso is None else lso, log_start, records, **extra)  # type: ignore[arg-type]


def manager(slots: int = 1000, shards: int = 1, eviction_ms: int = EVICTION_MS, seed: int = 7) -> FetchManager:
    return FetchManager(MockTime(), FetchSessionCache.create(slots, eviction_ms, shards, random.Random(seed)))


def clock(m: FetchManager) -> MockTime:
    return m.time  # type: ignore[return-value]


def new_session(m: FetchManager, *tps: TopicPartition, follower: bool = False, hw: int = 10) -> int:
    """A full fetch at epoch 0 answered with every partition at ``hw``: the new session's id."""
    context = m.new_context(FetchMetadata(0, INITIAL_EPOCH), follower, data(*tps), [])
    assert isinstance(context, FullFetchContext)
    return context.update_and_generate_response_data({tp: res(hw) for tp in tps}).session_id


def incremental(m: FetchManager, session_id: int, epoch: int, fetch: dict | None = None,
                forget: list[TopicPartition] | None = None):
    return m.new_context(FetchMetadata(session_id, epoch), False, fetch or {}, forget or [])


def answer(context, updates: dict[TopicPartition, FetchPartitionResult]) -> tuple[int, int, list[TopicPartition]]:
    error, session_id, partitions = context.update_and_generate_response_data(updates)
    return error, session_id, list(partitions)


# --- FetchMetadata ---------------------------------------------------------------------------------


def test_next_epoch_wraps_to_1_and_keeps_final():
    assert next_epoch(INITIAL_EPOCH) == 1
    assert next_epoch(41) == 42
    assert next_epoch(INT_MAX) == 1
    assert next_epoch(FINAL_EPOCH) == FINAL_EPOCH
    assert next_epoch(-7) == FINAL_EPOCH


def test_only_epochs_0_and_minus_1_are_full():
    assert FetchMetadata(0, 0).is_full and FetchMetadata(5, -1).is_full
    assert not FetchMetadata(0, 1).is_full and not FetchMetadata(5, -2).is_full


# --- the rule table --------------------------------------------------------------------------------


@pytest.mark.parametrize("session_id", [0, -1, 12345, INT_MAX // 8 - 1])
def test_final_epoch_is_a_sessionless_full_fetch_whatever_the_id(session_id):
    """Epoch -1: error 0, session id 0, every partition; no session is created (the issue: id -1
    with epoch -1 was answered FETCH_SESSION_ID_NOT_FOUND)."""
    m = manager()
    context = m.new_context(FetchMetadata(session_id, FINAL_EPOCH), False, data(A0, B0), [])
    assert isinstance(context, SessionlessFetchContext)
    assert [p.topic_partition for p in context.partitions()] == [A0, B0]
    assert answer(context, {A0: res(), B0: res()}) == (E.NONE, 0, [A0, B0])
    assert m.cache.size == 0


def test_final_epoch_closes_the_session_it_names():
    m = manager()
    session_id = new_session(m, A0)
    context = m.new_context(FetchMetadata(session_id, FINAL_EPOCH), False, data(A0), [])
    assert isinstance(context, SessionlessFetchContext)
    assert m.cache.size == 0
    assert isinstance(incremental(m, session_id, 1), SessionErrorContext)


def test_initial_epoch_creates_a_session_when_the_response_is_generated():
    m = manager()
    context = m.new_context(FetchMetadata(0, INITIAL_EPOCH), False, data(A0, A1), [])
    assert isinstance(context, FullFetchContext) and m.cache.size == 0  # not at arrival
    error, session_id, partitions = answer(context, {A0: res(hw=5, log_start=2), A1: res(hw=7)})
    assert error == E.NONE and session_id > 0 and partitions == [A0, A1]
    session = m.cache.get(session_id)
    assert session is not None and session.epoch == 1 and not session.privileged
    assert list(session.partition_map) == [A0, A1]
    cached = session.partition_map[A0]
    assert (cached.high_watermark, cached.local_log_start_offset, cached.request.fetch_offset) == (5, 2, 0)
    assert m.cache.total_partitions == 2


def test_initial_epoch_with_an_id_closes_that_session_and_opens_another():
    m = manager()
    old = new_session(m, A0)
    context = m.new_context(FetchMetadata(old, INITIAL_EPOCH), False, data(B0), [])
    assert m.cache.get(old) is None
    new = answer(context, {B0: res()})[1]
    assert new not in (0, old) and m.cache.size == 1


def test_initial_epoch_answers_session_id_0_when_the_cache_admits_none():
    m = manager(slots=0)
    context = m.new_context(FetchMetadata(0, INITIAL_EPOCH), False, data(A0), [])
    assert answer(context, {A0: res()}) == (E.NONE, 0, [A0])
    assert m.cache.size == 0


def test_a_full_fetch_ignores_its_forgotten_topics():
    """Kafka's newContext gives a full context the request's partitions only: ``toForget`` is
    not applied (a partition both listed and forgotten is still fetched and cached)."""
    m = manager()
    context = m.new_context(FetchMetadata(0, INITIAL_EPOCH), False, data(A0, B0), [B0, A1])
    assert [p.topic_partition for p in context.partitions()] == [A0, B0]
    session_id = answer(context, {A0: res(), B0: res()})[1]
    assert list(m.cache.get(session_id).partition_map) == [A0, B0]


def test_an_empty_full_fetch_still_creates_a_session():
    m = manager()
    context = m.new_context(FetchMetadata(0, INITIAL_EPOCH), False, {}, [])
    session_id = answer(context, {})[1]
    assert session_id > 0 and m.cache.get(session_id).size == 0


@pytest.mark.parametrize("session_id", [0, 42])
def test_an_incremental_fetch_of_an_unknown_session_is_session_id_not_found(session_id):
    """Session id 0 with epoch > 0 too: no session ever has id 0."""
    m = manager()
    context = incremental(m, session_id, 1, data(A0))
    assert isinstance(context, SessionErrorContext) and context.partitions() == []
    assert answer(context, {}) == (E.FETCH_SESSION_ID_NOT_FOUND, 0, [])


def test_a_wrong_epoch_is_invalid_fetch_session_epoch_and_keeps_the_session():
    m = manager()
    session_id = new_session(m, A0)
    for epoch in (2, 0x7FFF, -2):  # expected 1; epochs below -1 are not full, so checked too
        context = incremental(m, session_id, epoch, data(B0))
        assert answer(context, {}) == (E.INVALID_FETCH_SESSION_EPOCH, 0, [])
    session = m.cache.get(session_id)
    assert session.epoch == 1 and list(session.partition_map) == [A0]  # nothing applied


def test_a_negative_epoch_other_than_final_is_incremental():
    m = manager()
    assert incremental(m, 77, -2).error == E.FETCH_SESSION_ID_NOT_FOUND


def test_an_incremental_fetch_adds_updates_and_forgets_partitions():
    m = manager()
    session_id = new_session(m, A0, A1)
    context = incremental(m, session_id, 1, {A1: req(A1, offset=9, max_bytes=5), B0: req(B0)}, forget=[A0])
    assert isinstance(context, IncrementalFetchContext)
    session = m.cache.get(session_id)
    assert session.epoch == 2
    assert list(session.partition_map) == [A1, B0]  # A1 kept its place, B0 added at the end
    assert session.partition_map[A1].request.fetch_offset == 9
    assert session.partition_map[A1].high_watermark == 10  # what A1 was last told stays
    assert [p.topic_partition for p in context.partitions()] == [A1, B0]
    assert m.cache.total_partitions == 2


def test_the_session_partitions_are_read_whether_listed_or_not():
    m = manager()
    session_id = new_session(m, A0, A1, B0)
    context = incremental(m, session_id, 1, {A1: req(A1, offset=3)})
    assert [(p.topic_partition, p.fetch_offset) for p in context.partitions()] == [(A0, 0), (A1, 3), (B0, 0)]


def test_a_partition_added_and_forgotten_in_one_request_is_gone():
    m = manager()
    session_id = new_session(m, A0)
    incremental(m, session_id, 1, data(B0), forget=[B0])
    assert list(m.cache.get(session_id).partition_map) == [A0]


def test_an_incremental_fetch_that_empties_the_session_closes_it_and_is_sessionless():
    m = manager()
    session_id = new_session(m, A0, A1)
    context = incremental(m, session_id, 1, {}, forget=[A0, A1])
    assert isinstance(context, SessionlessFetchContext) and context.partitions() == []
    assert answer(context, {}) == (E.NONE, 0, [])
    assert m.cache.size == 0 and m.cache.total_partitions == 0


def test_session_ids_outside_every_shard_fail_as_in_kafka():
    """Kafka's getCacheShard indexes its shards by id / (INT_MAX / 8): ids past the last shard,
    or at most -range, throw (the request is answered UNKNOWN_SERVER_ERROR); -1 is shard 0."""
    m = FetchManager(MockTime(), FetchSessionCache.create())
    id_range = INT_MAX // 8
    for session_id in (INT_MAX, 8 * id_range, -id_range):
        with pytest.raises(IndexError):
            m.new_context(FetchMetadata(session_id, FINAL_EPOCH), False, {}, [])
        with pytest.raises(IndexError):
            incremental(m, session_id, 1)
    assert isinstance(m.new_context(FetchMetadata(-id_range + 1, FINAL_EPOCH), False, {}, []),
                      SessionlessFetchContext)
    assert m.cache.get_cache_shard(8 * id_range - 1) is m.cache.shards[7]


# --- incremental responses -------------------------------------------------------------------------


def test_an_incremental_response_lists_only_what_changed_and_remembers_it():
    m = manager()
    session_id = new_session(m, A0, A1, B0, hw=10)
    context = incremental(m, session_id, 1)
    unchanged = res(hw=10)
    assert answer(context, {A0: unchanged, A1: res(hw=11), B0: unchanged}) == (E.NONE, session_id, [A1])
    assert m.cache.get(session_id).partition_map[A1].high_watermark == 11
    context = incremental(m, session_id, 2)
    assert answer(context, {A0: unchanged, A1: res(hw=11), B0: unchanged}) == (E.NONE, session_id, [])


@pytest.mark.parametrize("changed,listed", [
    (res(hw=10, records=b"xyz"), True),
    (res(hw=12), True),
    (res(hw=10, log_start=4), True),
    (res(hw=10, preferred_read_replica=2), True),
    (res(hw=10, diverging_epoch=(3, 8)), True),
    (res(hw=-1, log_start=-1, error=E.NOT_LEADER_OR_FOLLOWER), True),
    (res(hw=10, lso=7), False),  # Kafka's maybeUpdateResponseData does not look at the LSO
    (res(hw=10), False),
], ids=["records", "high-watermark", "log-start-offset", "preferred-read-replica", "diverging-epoch", "error",
        "last-stable-offset-only", "nothing"])
def test_what_makes_a_partition_part_of_an_incremental_response(changed, listed):
    m = manager()
    session_id = new_session(m, A0, hw=10)
    assert answer(incremental(m, session_id, 1), {A0: changed})[2] == ([A0] if listed else [])


def test_an_error_is_sent_every_time_and_the_partition_again_once_it_clears():
    m = manager()
    session_id = new_session(m, A0, hw=10)
    error = res(hw=-1, log_start=-1, error=E.NOT_LEADER_OR_FOLLOWER)
    assert answer(incremental(m, session_id, 1), {A0: error})[2] == [A0]
    assert answer(incremental(m, session_id, 2), {A0: error})[2] == [A0]
    assert m.cache.get(session_id).partition_map[A0].high_watermark == -1
    assert answer(incremental(m, session_id, 3), {A0: res(hw=-1, log_start=-1)})[2] == []
    assert answer(incremental(m, session_id, 4), {A0: res(hw=10)})[2] == [A0]


def test_partitions_with_records_move_to_the_end_of_the_session():
    """The response keeps the read order; the session reads the partitions that had data last
    next time (Kafka's PartitionIterator)."""
    m = manager()
    session_id = new_session(m, A0, A1, B0, hw=10)
    updates = {A0: res(hw=10, records=b"a"), A1: res(hw=10), B0: res(hw=11, records=b"b")}
    assert answer(incremental(m, session_id, 1), updates)[2] == [A0, B0]
    assert list(m.cache.get(session_id).partition_map) == [A1, A0, B0]
    context = incremental(m, session_id, 2)
    assert [p.topic_partition for p in context.partitions()] == [A1, A0, B0]


def test_an_added_partition_is_sent_with_its_first_answer():
    m = manager()
    session_id = new_session(m, A0, hw=10)
    context = incremental(m, session_id, 1, data(B0))
    assert answer(context, {A0: res(hw=10), B0: res(hw=0)})[2] == [B0]  # HW -1 cached until answered


def test_a_response_after_the_session_moved_on_is_invalid_fetch_session_epoch():
    """Two requests of one session in flight: the first one's answer, generated after the second
    was accepted, is INVALID_FETCH_SESSION_EPOCH with the session id, and changes nothing."""
    m = manager()
    session_id = new_session(m, A0, hw=10)
    first = incremental(m, session_id, 1)
    second = incremental(m, session_id, 2)
    assert answer(first, {A0: res(hw=11)}) == (E.INVALID_FETCH_SESSION_EPOCH, session_id, [])
    assert first.throttled_response() == (E.INVALID_FETCH_SESSION_EPOCH, session_id, {})
    assert first.response_size({A0: res(hw=11, records=b"xy")}) == 0
    assert answer(second, {A0: res(hw=11)}) == (E.NONE, session_id, [A0])


def test_the_epoch_wraps_from_int_max_to_1():
    m = manager()
    session_id = new_session(m, A0)
    m.cache.get(session_id).epoch = INT_MAX
    context = incremental(m, session_id, INT_MAX)
    assert m.cache.get(session_id).epoch == 1
    assert answer(context, {A0: res()})[:2] == (E.NONE, session_id)
    assert isinstance(incremental(m, session_id, 1), IncrementalFetchContext)


# --- throttled responses ---------------------------------------------------------------------------


def test_a_throttled_full_fetch_creates_no_session():
    m = manager()
    context = m.new_context(FetchMetadata(0, INITIAL_EPOCH), False, data(A0), [])
    assert context.response_size({A0: res(records=b"12345")}) == 5
    assert context.throttled_response() == (E.NONE, 0, {})
    assert m.cache.size == 0


def test_a_throttled_incremental_fetch_keeps_the_session_and_updates_nothing():
    m = manager()
    session_id = new_session(m, A0, B0, hw=10)
    context = incremental(m, session_id, 1)
    updates = {A0: res(hw=10, records=b"abc"), B0: res(hw=10)}
    assert context.response_size(updates) == 3
    assert context.throttled_response() == (E.NONE, session_id, {})
    session = m.cache.get(session_id)
    assert session.epoch == 2 and list(session.partition_map) == [A0, B0]
    assert answer(incremental(m, session_id, 2), {A0: res(hw=12), B0: res(hw=10)})[2] == [A0]


def test_a_throttled_session_error_is_answered_without_the_error_as_kafka_does():
    context = incremental(manager(), 99, 1)
    assert context.response_size({}) == 0
    assert context.throttled_response() == (E.NONE, 0, {})


# --- the cache: limits, eviction, ids --------------------------------------------------------------


def test_a_full_cache_refuses_a_session_no_larger_than_the_young_ones():
    m = manager(slots=2)
    first, second = new_session(m, A0), new_session(m, A0, A1)
    assert first and second
    assert new_session(m, A0, A1) == 0  # equal size does not evict (and neither is old)
    assert new_session(m, A0, A1, B0) == 0  # larger, but both were created less than 120 s ago
    assert m.cache.size == 2 and m.cache.evictions == 0


def test_a_session_unused_for_longer_than_the_eviction_time_is_evicted_first():
    m = manager(slots=2)
    stale = new_session(m, A0, A1, B0)
    clock(m).advance(60_000)
    recent = new_session(m, A0, A1, B0)
    clock(m).advance(EVICTION_MS - 60_000)
    assert new_session(m, A0) == 0  # stale unused for exactly 120 s: not more than the limit
    clock(m).advance(1)
    third = new_session(m, A0)  # the stalest goes, whatever its size
    assert third and m.cache.get(stale) is None and m.cache.get(recent) is not None
    assert m.cache.evictions == 1


def test_a_used_session_older_than_the_eviction_time_yields_to_a_larger_one():
    m = manager(slots=2)
    small, large = new_session(m, A0), new_session(m, A0, A1, B0)
    for at in (60_000, 121_000):
        clock(m).advance(at - clock(m).monotonic_ms())
        for session_id in (small, large):  # kept in use: never stale
            incremental(m, session_id, m.cache.get(session_id).epoch)
    # Both are older than 120 s as of their last use: a consumer's larger session may evict the smallest.
    assert new_session(m, A0) == 0  # 1 partition is not more than the smallest's 1
    larger = new_session(m, A0, A1)
    assert larger and m.cache.get(small) is None and m.cache.get(large) is not None
    assert new_session(m, A0, A1) == 0  # 2 < 3 (the new session is not old yet)
    assert m.cache.evictions == 1


def test_evictability_is_as_of_the_last_use_not_of_now():
    m = manager(slots=1)
    session_id = new_session(m, A0)
    clock(m).advance(100_000)
    incremental(m, session_id, 1)  # touched at 100 s: 100 s old then
    clock(m).advance(50_000)  # 150 s old now, but not evictable since its last touch said 100 s
    assert new_session(m, A0, A1, B0) == 0
    assert m.cache.get(session_id) is not None


def test_a_follower_session_evicts_the_smallest_consumer_session():
    m = manager(slots=2)
    big, small = new_session(m, A0, A1, B0), new_session(m, A0)
    follower = new_session(m, A0, A1, B0, B0._replace(partition=1), follower=True)
    assert follower and m.cache.get(small) is None and m.cache.get(big) is not None
    session = m.cache.get(follower)
    assert session.privileged
    # A young follower session is safe from consumers and from other followers.
    assert new_session(m, A0, A1, B0, B0._replace(partition=1), TopicPartition("c", 0)) == 0
    follower_2 = new_session(m, A0, follower=True)  # evicts the consumer session left
    assert follower_2 and m.cache.get(big) is None
    assert new_session(m, A0, follower=True) == 0
    assert m.cache.evictions == 2


def test_an_old_follower_session_yields_only_to_a_larger_follower_session():
    """Evictable keys order consumers' sessions before followers': a consumer never evicts a
    follower's session (unless stale); another follower evicts an old one with fewer partitions."""
    m = manager(slots=1)
    follower = new_session(m, A0, follower=True)
    clock(m).advance(EVICTION_MS + 1)
    incremental(m, follower, 1)  # in use, and older than 120 s
    assert new_session(m, A0, A1, B0) == 0
    assert new_session(m, A0, follower=True) == 0
    assert new_session(m, A0, A1, follower=True)
    assert m.cache.get(follower) is None


class ScriptedRandom(random.Random):
    def __init__(self, *values: int) -> None:
        super().__init__(0)
        self.values = list(values)
        self.asked: list[tuple[int, int]] = []

    def randrange(self, start, stop=None, step=1):  # type: ignore[override]
        self.asked.append((start, stop))
        return self.values.pop(0)


def test_session_ids_are_random_positive_and_unique_within_the_shard_range():
    rng = ScriptedRandom(5, 5, 9)
    shard = FetchSessionCacheShard(10, EVICTION_MS, rng=rng)
    assert shard.maybe_create_session(0, False, 0, dict) == 5
    assert shard.maybe_create_session(0, False, 0, dict) == 9  # 5 is taken: drawn again
    assert rng.asked == [(1, INT_MAX)] * 3  # shard 0 starts at 1: never 0
    shard_3 = FetchSessionCacheShard(10, EVICTION_MS, session_id_range=100, shard_num=3, rng=ScriptedRandom(301))
    assert shard_3.maybe_create_session(0, False, 0, dict) == 301
    assert shard_3._random.asked == [(300, 400)]  # type: ignore[attr-defined]


def test_the_default_cache_has_eight_shards_of_an_eighth_of_the_slots_in_turn():
    m = FetchManager(MockTime(), FetchSessionCache.create(16, EVICTION_MS, rng=random.Random(3)))
    id_range = INT_MAX // 8
    assert [shard.max_entries for shard in m.cache.shards] == [2] * 8
    ids = [new_session(m, A0) for _ in range(16)]
    assert all(ids) and len(set(ids)) == 16
    assert [session_id // id_range for session_id in ids] == list(range(8)) * 2  # round robin
    assert new_session(m, A0) == 0  # shard 0 is full of young sessions
    assert m.cache.size == 16 and m.cache.total_partitions == 16


def test_fewer_slots_than_shards_admit_no_session_as_in_kafka():
    m = FetchManager(MockTime(), FetchSessionCache.create(7, EVICTION_MS))
    assert [new_session(m, A0) for _ in range(8)] == [0] * 8


def test_removing_and_touching_keep_the_partition_count():
    m = manager()
    first, second = new_session(m, A0, A1), new_session(m, B0)
    assert m.cache.total_partitions == 3
    incremental(m, first, 1, data(B0))
    assert m.cache.total_partitions == 4
    m.new_context(FetchMetadata(first, FINAL_EPOCH), False, {}, [])
    assert m.cache.total_partitions == 1 and m.cache.size == 1
    m.new_context(FetchMetadata(second, INITIAL_EPOCH), False, {}, [])
    assert m.cache.total_partitions == 0 and m.cache.size == 0
