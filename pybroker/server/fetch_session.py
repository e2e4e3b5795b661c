"""Fetch sessions (KIP-227), as Kafka 3.9's ``FetchSession.scala`` keeps them.

Owns the broker side of incremental fetches: the session cache (`FetchSessionCache`, eight
`FetchSessionCacheShard`s as Kafka's ``NumFetchSessionCacheShards``: admission within
``max.incremental.fetch.session.cache.slots``, eviction, random unique session ids), the sessions
(`FetchSession`: the partitions a client fetches, each a `CachedPartition` remembering what it was
last told), and the rule table that turns a Fetch request's ``(SessionId, SessionEpoch)`` into a
`FetchContext` (`FetchManager.new_context`, Kafka's ``FetchManager.newContext``):

===========  ==================  ===========================================================
Epoch        SessionId           context (what the response carries)
===========  ==================  ===========================================================
-1 (FINAL)   any                 a session with that id is removed; `SessionlessFetchContext`:
                                 error 0, session id 0, every requested partition
0 (INITIAL)  any                 a session with that id is removed; `FullFetchContext`:
                                 error 0, every requested partition, and the id of a new
                                 session when the cache admits one, else session id 0
other        not cached (0 too)  `SessionErrorContext` FETCH_SESSION_ID_NOT_FOUND: session id
                                 0, no partitions
other        cached, epoch !=    `SessionErrorContext` INVALID_FETCH_SESSION_EPOCH (likewise)
other        cached, epoch ==    the request's partitions are added or updated, its forgotten
                                 ones removed; a session left empty is removed and answered
                                 as sessionless; else it is touched, its epoch moves on, and
                                 `IncrementalFetchContext` answers only what changed
===========  ==================  ===========================================================

A full request's ``ForgottenTopicsData`` is ignored, as Kafka ignores it. A session id outside
every shard's range (≥ 2147483640, or ≤ -268435455) raises `IndexError` where Kafka's
``getCacheShard`` throws, so it is answered UNKNOWN_SERVER_ERROR as Kafka answers it.

A context is made when the request arrives (the partitions to read are the session's: those the
request lists and those it does not); its response data is generated when the read completes
(`FetchContext.update_and_generate_response_data`: a full context creates its session then, an
incremental one updates its cached partitions then), or, for a throttled consumer, replaced by
`FetchContext.throttled_response` (no session created, nothing updated). Ages are measured on the
injected clock's ``monotonic_ms`` (tests use a mock clock).
"""

from __future__ import annotations

import itertools
import logging
import random
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import NamedTuple

from pybroker.common.errors import ErrorCode
from pybroker.scheduler import Time
from pybroker.server.replica_manager import FetchPartitionRequest, FetchPartitionResult
from pybroker.types import TopicPartition

log = logging.getLogger(__name__)

#: The session id of a fetch without a session (Kafka's ``FetchMetadata.INVALID_SESSION_ID``).
INVALID_SESSION_ID = 0
#: A full fetch that asks for a new session.
INITIAL_EPOCH = 0
#: A full fetch that wants no session (and closes the one named).
FINAL_EPOCH = -1
INT_MAX = 2**31 - 1

#: Kafka's ``KafkaBroker.NumFetchSessionCacheShards``.
NUM_FETCH_SESSION_CACHE_SHARDS = 8
#: ``max.incremental.fetch.session.cache.slots``'s default.
DEFAULT_MAX_INCREMENTAL_FETCH_SESSION_CACHE_SLOTS = 1000
#: Kafka's ``KafkaBroker.MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS``: a constant in Kafka 3.9, not
#: a config (KIP-227 named one, ``min.incremental.fetch.session.eviction.ms``, never added).
MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS = 120_000


def next_epoch(prev_epoch: int) -> int:
    """Kafka's ``FetchMetadata.nextEpoch``: FINAL stays FINAL, INT_MAX wraps to 1."""
    if prev_epoch < 0:
        return FINAL_EPOCH
    if prev_epoch == INT_MAX:
        return 1
    return prev_epoch + 1


@dataclass(frozen=True, slots=True)
class FetchMetadata:
    """A fetch request's ``(SessionId, SessionEpoch)``."""

    session_id: int
    epoch: int

    @property
    def is_full(self) -> bool:
        """Epoch 0 or -1: the request lists every partition it wants."""
        return self.epoch in (INITIAL_EPOCH, FINAL_EPOCH)


def records_size(result: FetchPartitionResult) -> int:
    records = result.records
    return 0 if records is None else len(records)


class CachedPartition:
    """One partition of a session: its last request parameters (``request``) and what the
    fetcher was last told of its high watermark and this broker's log start offset."""

    __slots__ = ("request", "high_watermark", "local_log_start_offset")

    def __init__(
        self,
        request: FetchPartitionRequest,
        high_watermark: int = -1,
        local_log_start_offset: int = -1,
    ) -> None:
        self.request = request
        self.high_watermark = high_watermark
        self.local_log_start_offset = local_log_start_offset

    def update_request_params(self, request: FetchPartitionRequest) -> None:
        self.request = request

    def maybe_update_response_data(
        self, result: FetchPartitionResult, update_response_data: bool
    ) -> bool:
        """Kafka's ``maybeUpdateResponseData``: whether the partition must be in an incremental
        response (records, a new high watermark or log start offset, a preferred read replica,
        an error, a diverging epoch); with ``update_response_data``, remember what is sent (an
        error forgets the high watermark, so the partition is sent again once it clears)."""
        must_respond = records_size(result) > 0
        if self.high_watermark != result.high_watermark:
            must_respond = True
            if update_response_data:
                self.high_watermark = result.high_watermark
        if self.local_log_start_offset != result.log_start_offset:
            must_respond = True
            if update_response_data:
                self.local_log_start_offset = result.log_start_offset
        if result.preferred_read_replica != -1:
            must_respond = True
        if result.error != ErrorCode.NONE:
            if update_response_data:
                self.high_watermark = -1
            must_respond = True
        if result.diverging_epoch is not None:
            must_respond = True
        return must_respond

    def __repr__(self) -> str:
        r = self.request
        return (
            f"CachedPartition({r.topic_partition}, max_bytes={r.max_bytes}, "
            f"fetch_offset={r.fetch_offset}, high_watermark={self.high_watermark}, "
            f"local_log_start_offset={self.local_log_start_offset})"
        )


class FetchSession:
    """A session: its partitions in fetch order (``partition_map``), its epoch (the one its
    next request must carry) and its use times. ``privileged``: created by a follower."""

    __slots__ = (
        "id",
        "privileged",
        "partition_map",
        "creation_ms",
        "last_used_ms",
        "epoch",
        "cached_size",
    )

    def __init__(
        self,
        session_id: int,
        privileged: bool,
        partition_map: dict[TopicPartition, CachedPartition],
        creation_ms: float,
        last_used_ms: float,
        epoch: int,
    ) -> None:
        self.id = session_id
        self.privileged = privileged
        self.partition_map = partition_map
        self.creation_ms = creation_ms
        self.last_used_ms = last_used_ms
        self.epoch = epoch
        self.cached_size = -1  # the size at the last touch; -1: not in the cache yet

    @property
    def size(self) -> int:
        return len(self.partition_map)

    def is_empty(self) -> bool:
        return not self.partition_map

    def last_used_key(self) -> tuple[float, int]:
        return (self.last_used_ms, self.id)

    def evictable_key(self) -> tuple[bool, int, int]:
        return (self.privileged, self.cached_size, self.id)

    def update(
        self,
        fetch_data: Mapping[TopicPartition, FetchPartitionRequest],
        to_forget: Iterable[TopicPartition],
    ) -> tuple[list[TopicPartition], list[TopicPartition], list[TopicPartition]]:
        """An incremental request's changes: its partitions are added (at the end) or updated
        (in place), then its forgotten ones removed. Returns (added, updated, removed)."""
        added: list[TopicPartition] = []
        updated: list[TopicPartition] = []
        removed: list[TopicPartition] = []
        partition_map = self.partition_map
        for tp, request in fetch_data.items():
            cached = partition_map.get(tp)
            if cached is None:
                partition_map[tp] = CachedPartition(request)
                added.append(tp)
            else:
                cached.update_request_params(request)
                updated.append(tp)
        for tp in to_forget:
            if partition_map.pop(tp, None) is not None:
                removed.append(tp)
        return added, updated, removed

    def __repr__(self) -> str:
        return (
            f"FetchSession(id={self.id}, privileged={self.privileged}, partitions={self.size}, "
            f"creation_ms={self.creation_ms}, last_used_ms={self.last_used_ms}, epoch={self.epoch})"
        )


class SessionResponse(NamedTuple):
    """What a context answers: the top-level error, the session id, and the partitions to send
    in order (Kafka's ``FetchResponse.of(error, ..., sessionId, responseData)``)."""

    error: ErrorCode
    session_id: int
    partitions: dict[TopicPartition, FetchPartitionResult]


def _sum_records(results: Iterable[FetchPartitionResult]) -> int:
    return sum(records_size(r) for r in results)


class FetchContext:
    """How one fetch request is answered (Kafka's ``FetchContext``)."""

    def partitions(self) -> list[FetchPartitionRequest]:
        """The partitions to read, in order (Kafka's ``foreachPartition``)."""
        raise NotImplementedError

    def response_size(self, updates: Mapping[TopicPartition, FetchPartitionResult]) -> int:
        """The record bytes the response to ``updates`` would carry, changing nothing (Kafka's
        ``getResponseSize``, which the fetch byte-rate quota is checked against)."""
        return _sum_records(updates.values())

    def update_and_generate_response_data(
        self, updates: dict[TopicPartition, FetchPartitionResult]
    ) -> SessionResponse:
        """The response to ``updates`` (every partition read, then those refused, in order); a
        full context creates its session here, an incremental one updates its cache."""
        raise NotImplementedError

    def throttled_response(self) -> SessionResponse:
        """The empty answer to a throttled consumer (Kafka's ``getThrottledResponse``)."""
        return SessionResponse(ErrorCode.NONE, INVALID_SESSION_ID, {})


class SessionErrorContext(FetchContext):
    """A session error: no partition is read or answered, session id 0."""

    def __init__(self, error: ErrorCode, metadata: FetchMetadata) -> None:
        self.error = error
        self.metadata = metadata

    def partitions(self) -> list[FetchPartitionRequest]:
        return []

    def response_size(self, updates: Mapping[TopicPartition, FetchPartitionResult]) -> int:
        return 0

    def update_and_generate_response_data(
        self, updates: dict[TopicPartition, FetchPartitionResult]
    ) -> SessionResponse:
        log.debug("Session error fetch context returning %s", self.error.name)
        return SessionResponse(self.error, INVALID_SESSION_ID, {})


class SessionlessFetchContext(FetchContext):
    """A full fetch without a session (epoch -1, or an incremental one that emptied its
    session): every requested partition, session id 0."""

    def __init__(self, fetch_data: dict[TopicPartition, FetchPartitionRequest]) -> None:
        self.fetch_data = fetch_data

    def partitions(self) -> list[FetchPartitionRequest]:
        return list(self.fetch_data.values())

    def update_and_generate_response_data(
        self, updates: dict[TopicPartition, FetchPartitionResult]
    ) -> SessionResponse:
        return SessionResponse(ErrorCode.NONE, INVALID_SESSION_ID, updates)


class FullFetchContext(FetchContext):
    """A full fetch asking for a session (epoch 0): every requested partition, and the id of
    the session created for them when the response is generated (0 when none was admitted)."""

    def __init__(
        self,
        time: Time,
        cache: FetchSessionCache,
        metadata: FetchMetadata,
        fetch_data: dict[TopicPartition, FetchPartitionRequest],
        is_from_follower: bool,
    ) -> None:
        self.time = time
        self.cache = cache
        self.metadata = metadata
        self.fetch_data = fetch_data
        self.is_from_follower = is_from_follower

    def partitions(self) -> list[FetchPartitionRequest]:
        return list(self.fetch_data.values())

    def update_and_generate_response_data(
        self, updates: dict[TopicPartition, FetchPartitionResult]
    ) -> SessionResponse:
        fetch_data = self.fetch_data

        def create_partitions() -> dict[TopicPartition, CachedPartition]:
            return {
                tp: CachedPartition(fetch_data[tp], result.high_watermark, result.log_start_offset)
                for tp, result in updates.items()
            }

        session_id = self.cache.next_cache_shard().maybe_create_session(
            self.time.monotonic_ms(), self.is_from_follower, len(updates), create_partitions
        )
        log.debug(
            "Full fetch context with session id %d returning %d partition(s)",
            session_id,
            len(updates),
        )
        return SessionResponse(ErrorCode.NONE, session_id, updates)


class IncrementalFetchContext(FetchContext):
    """A request in an existing session: the session's partitions are read, and only those
    that changed are answered. A partition sent with records moves to the end of the session,
    so that the next fetch reads the others first (Kafka's fairness rule)."""

    def __init__(self, metadata: FetchMetadata, session: FetchSession) -> None:
        self.metadata = metadata
        self.session = session

    def partitions(self) -> list[FetchPartitionRequest]:
        return [cached.request for cached in self.session.partition_map.values()]

    def _expected_epoch_moved(self) -> bool:
        """Whether another request of the session was accepted since this one (a duplicate)."""
        return self.session.epoch != next_epoch(self.metadata.epoch)

    def response_size(self, updates: Mapping[TopicPartition, FetchPartitionResult]) -> int:
        if self._expected_epoch_moved():
            return 0
        partition_map = self.session.partition_map
        return _sum_records(
            result
            for tp, result in updates.items()
            if (cached := partition_map.get(tp)) is None
            or cached.maybe_update_response_data(result, False)
        )

    def update_and_generate_response_data(
        self, updates: dict[TopicPartition, FetchPartitionResult]
    ) -> SessionResponse:
        session = self.session
        if self._expected_epoch_moved():
            log.info(
                "Incremental fetch session %d expected epoch %d, but got %d. "
                "Possible duplicate request.",
                session.id,
                next_epoch(self.metadata.epoch),
                session.epoch,
            )
            return SessionResponse(ErrorCode.INVALID_FETCH_SESSION_EPOCH, session.id, {})
        partition_map = session.partition_map
        selected: dict[TopicPartition, FetchPartitionResult] = {}
        for tp, result in updates.items():
            cached = partition_map.get(tp)
            if cached is None:  # not in the session (cannot happen while the epoch matches)
                selected[tp] = result
                continue
            if cached.maybe_update_response_data(result, True):
                selected[tp] = result
                if records_size(result) > 0:
                    del partition_map[tp]
                    partition_map[tp] = cached
        log.debug(
            "Incremental fetch context with session id %d returning %d partition(s)",
            session.id,
            len(selected),
        )
        return SessionResponse(ErrorCode.NONE, session.id, selected)

    def throttled_response(self) -> SessionResponse:
        session = self.session
        if self._expected_epoch_moved():
            return SessionResponse(ErrorCode.INVALID_FETCH_SESSION_EPOCH, session.id, {})
        return SessionResponse(ErrorCode.NONE, session.id, {})


class FetchSessionCacheShard:
    """One shard of the cache: at most ``max_entries`` sessions, ids in ``[max(1, shard_num *
    session_id_range), (shard_num + 1) * session_id_range)``.

    A new session takes a free slot, or evicts (Kafka's ``tryEvict``) the least recently used
    session if it has been unused for more than ``eviction_ms``; failing that, the smallest
    evictable session by (privileged, size, id), if that is smaller than the new one. So a
    follower's (privileged) new session may evict any consumer session, or a follower session
    older than ``eviction_ms`` with fewer partitions; a consumer's only a consumer session older
    than ``eviction_ms`` with fewer partitions. Ages are as of a session's last use."""

    def __init__(
        self,
        max_entries: int,
        eviction_ms: float,
        session_id_range: int = INT_MAX,
        shard_num: int = 0,
        rng: random.Random | None = None,
    ) -> None:
        self.max_entries = max_entries
        self.eviction_ms = eviction_ms
        self.session_id_range = session_id_range
        self.shard_num = shard_num
        self._random = rng or random.Random()
        self._sessions: dict[int, FetchSession] = {}
        self._evictable_by_all: set[int] = set()
        self._evictable_by_privileged: set[int] = set()
        self._num_partitions = 0
        self.evictions = 0  # Kafka's IncrementalFetchSessionEvictionsPerSec count

    def get(self, session_id: int) -> FetchSession | None:
        return self._sessions.get(session_id)

    @property
    def size(self) -> int:
        return len(self._sessions)

    @property
    def total_partitions(self) -> int:
        return self._num_partitions

    def new_session_id(self) -> int:
        """A random id of this shard's range, positive and not in use."""
        low = max(1, self.shard_num * self.session_id_range)
        high = (self.shard_num + 1) * self.session_id_range
        while True:
            session_id = self._random.randrange(low, high)
            if session_id not in self._sessions and session_id != INVALID_SESSION_ID:
                return session_id

    def maybe_create_session(
        self,
        now: float,
        privileged: bool,
        size: int,
        create_partitions: Callable[[], dict[TopicPartition, CachedPartition]],
    ) -> int:
        """A new session (epoch 1) if there is room or room can be made; its id, else 0."""
        if len(self._sessions) < self.max_entries or self._try_evict(
            privileged, (privileged, size, 0), now
        ):
            session = FetchSession(
                self.new_session_id(),
                privileged,
                create_partitions(),
                now,
                now,
                next_epoch(INITIAL_EPOCH),
            )
            log.debug("Created fetch session %s", session)
            self._sessions[session.id] = session
            self.touch(session, now)
            return session.id
        log.debug("No fetch session created for privileged=%s, size=%d.", privileged, size)
        return INVALID_SESSION_ID

    def _try_evict(self, privileged: bool, key: tuple[bool, int, int], now: float) -> bool:
        sessions = self._sessions
        if not sessions:
            return False
        stalest = min(sessions.values(), key=FetchSession.last_used_key)
        if now - stalest.last_used_ms > self.eviction_ms:
            log.debug("Evicting stale FetchSession %d.", stalest.id)
            self.remove_session(stalest)
            self.evictions += 1
            return True
        candidates = self._evictable_by_privileged if privileged else self._evictable_by_all
        if not candidates:
            return False
        smallest = min((sessions[i] for i in candidates), key=FetchSession.evictable_key)
        if key < smallest.evictable_key():
            log.debug("Can't evict %s with %s", smallest.evictable_key(), key)
            return False
        log.debug("Evicting %s with %s.", smallest.evictable_key(), key)
        self.remove_session(smallest)
        self.evictions += 1
        return True

    def remove(self, session_id: int) -> FetchSession | None:
        session = self._sessions.get(session_id)
        return None if session is None else self.remove_session(session)

    def remove_session(self, session: FetchSession) -> FetchSession | None:
        self._evictable_by_all.discard(session.id)
        self._evictable_by_privileged.discard(session.id)
        removed = self._sessions.pop(session.id, None)
        if removed is not None:
            self._num_partitions -= session.cached_size
        return removed

    def touch(self, session: FetchSession, now: float) -> None:
        """The session was used at ``now``: its last use, cached size and evictability."""
        session.last_used_ms = now
        if session.cached_size != -1:
            self._num_partitions -= session.cached_size
        session.cached_size = session.size
        old = now - session.creation_ms > self.eviction_ms
        if not session.privileged or old:
            self._evictable_by_privileged.add(session.id)
        else:
            self._evictable_by_privileged.discard(session.id)
        if old:
            self._evictable_by_all.add(session.id)
        else:
            self._evictable_by_all.discard(session.id)
        self._num_partitions += session.cached_size


def _java_int_division(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


class FetchSessionCache:
    """The shards; new sessions go to them in turn (Kafka's ``getNextCacheShard``)."""

    def __init__(self, shards: list[FetchSessionCacheShard]) -> None:
        self.shards = shards
        self._counter = itertools.count()

    @classmethod
    def create(
        cls,
        max_slots: int = DEFAULT_MAX_INCREMENTAL_FETCH_SESSION_CACHE_SLOTS,
        eviction_ms: float = MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS,
        num_shards: int = NUM_FETCH_SESSION_CACHE_SHARDS,
        rng: random.Random | None = None,
    ) -> FetchSessionCache:
        """Kafka's broker cache: ``num_shards`` shards of ``max_slots // num_shards`` sessions
        each (so fewer than ``num_shards`` slots admit no session at all, as in Kafka)."""
        id_range = INT_MAX // num_shards
        rng = rng or random.Random()
        return cls(
            [
                FetchSessionCacheShard(max_slots // num_shards, eviction_ms, id_range, n, rng)
                for n in range(num_shards)
            ]
        )

    def get_cache_shard(self, session_id: int) -> FetchSessionCacheShard:
        """The shard of ``session_id``; raises IndexError for an id no shard covers (where Kafka
        throws IndexOutOfBoundsException)."""
        index = _java_int_division(session_id, self.shards[0].session_id_range)
        if not 0 <= index < len(self.shards):
            raise IndexError(f"no fetch session cache shard for session id {session_id}")
        return self.shards[index]

    def next_cache_shard(self) -> FetchSessionCacheShard:
        return self.shards[(next(self._counter) & INT_MAX) % len(self.shards)]

    @property
    def size(self) -> int:
        """Kafka's NumIncrementalFetchSessions."""
        return sum(shard.size for shard in self.shards)

    @property
    def total_partitions(self) -> int:
        """Kafka's NumIncrementalFetchPartitionsCached."""
        return sum(shard.total_partitions for shard in self.shards)

    @property
    def evictions(self) -> int:
        """Kafka's IncrementalFetchSessionEvictionsPerSec count."""
        return sum(shard.evictions for shard in self.shards)

    def get(self, session_id: int) -> FetchSession | None:
        return self.get_cache_shard(session_id).get(session_id)


class FetchManager:
    """Makes each fetch request's context from the cache (Kafka's ``FetchManager``)."""

    def __init__(self, time: Time, cache: FetchSessionCache) -> None:
        self.time = time
        self.cache = cache

    def new_context(
        self,
        metadata: FetchMetadata,
        is_follower: bool,
        fetch_data: dict[TopicPartition, FetchPartitionRequest],
        to_forget: list[TopicPartition],
    ) -> FetchContext:
        """The context of a request (the rule table of this module's docstring)."""
        if metadata.is_full:
            removed = ""
            if metadata.session_id != INVALID_SESSION_ID:
                # Any session named by a full request is closed.
                if (
                    self.cache.get_cache_shard(metadata.session_id).remove(metadata.session_id)
                    is not None
                ):
                    removed = f" Removed fetch session {metadata.session_id}."
            if metadata.epoch == FINAL_EPOCH:
                log.debug(
                    "Created a new sessionless FetchContext with %d partition(s).%s",
                    len(fetch_data),
                    removed,
                )
                return SessionlessFetchContext(fetch_data)
            log.debug(
                "Created a new full FetchContext with %d partition(s).%s", len(fetch_data), removed
            )
            return FullFetchContext(self.time, self.cache, metadata, fetch_data, is_follower)
        shard = self.cache.get_cache_shard(metadata.session_id)
        session = shard.get(metadata.session_id)
        if session is None:
            log.debug("Session error for %d: no such session ID found.", metadata.session_id)
            return SessionErrorContext(ErrorCode.FETCH_SESSION_ID_NOT_FOUND, metadata)
        if session.epoch != metadata.epoch:
            log.debug(
                "Session error for %d: expected epoch %d, but got %d instead.",
                metadata.session_id,
                session.epoch,
                metadata.epoch,
            )
            return SessionErrorContext(ErrorCode.INVALID_FETCH_SESSION_EPOCH, metadata)
        added, updated, removed_tps = session.update(fetch_data, to_forget)
        if session.is_empty():
            log.debug(
                "Created a new sessionless FetchContext and closing session id %d, epoch %d: after "
                "removing %d partition(s), there are no more partitions left.",
                session.id,
                session.epoch,
                len(removed_tps),
            )
            shard.remove_session(session)
            return SessionlessFetchContext(fetch_data)
        shard.touch(session, self.time.monotonic_ms())
        session.epoch = next_epoch(session.epoch)
        log.debug(
            "Created a new incremental FetchContext for session id %d, epoch %d: "
            "added %d, updated %d, "
            "removed %d partition(s)",
            session.id,
            session.epoch,
            len(added),
            len(updated),
            len(removed_tps),
        )
        return IncrementalFetchContext(metadata, session)
