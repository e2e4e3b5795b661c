"""The follower side of replication: replica fetchers and their manager.

Owns Kafka's ``AbstractFetcherThread``/``ReplicaFetcherThread`` and ``AbstractFetcherManager`` for
ZooKeeper mode (IBP 2.8/3.0, truncation on fetch with Fetch v12). A ``ReplicaFetcher`` is one
asyncio task per source broker: it keeps an explicit ``PartitionFetchState`` per followed
partition, sends sessionless fetches (SessionId 0, SessionEpoch -1, every partition every time)
through a ``LeaderEndPoint``, appends what comes back with ``Log.append_as_follower`` (one native
call per record set), takes the leader's high watermark and log start offset (KIP-107), truncates
on DivergingEpoch / OffsetsForLeaderEpoch answers with ``pybroker.replication.truncation``, and
backs failing partitions off ``replica.fetch.backoff.ms`` on the injected ``Time``.

Who calls what: the replica manager (or the broker's control path, on the event loop) calls
``ReplicaFetcherManager.add_fetcher_for_partitions`` / ``remove_fetcher_for_partitions`` after a
LeaderAndIsr; each fetcher's task calls ``do_work`` in a loop on the same event loop. Tests call
``do_work`` themselves with a ``LocalLeaderEndPoint`` (a leader ``ReplicaManager`` in the same
process) and a mock clock. Nothing here touches records one by one.
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Protocol

from pybroker.common.errors import CorruptRecordError, ErrorCode, KafkaError
from pybroker.log.leader_epoch import UNDEFINED_EPOCH
from pybroker.log.log import Log, UnexpectedAppendOffsetError
from pybroker.log.log_dir_failure import is_resource_exhaustion
from pybroker.metrics.stats import BrokerTopicStats
from pybroker.replication.truncation import (
    leader_start_offset_needed,
    offset_truncation_state,
    resolve_offset_out_of_range,
)
from pybroker.scheduler import SystemTime, Time
from pybroker.types import TopicPartition

log = logging.getLogger(__name__)

#: A follower without fetch sessions (Kafka's FetchMetadata.LEGACY).
SESSIONLESS_ID = 0
SESSIONLESS_EPOCH = -1


@dataclass(frozen=True)
class FetcherConfig:
    """The replica.fetch.* settings a follower uses (Kafka's defaults)."""

    replica_id: int
    fetch_backoff_ms: int = 1000  # replica.fetch.backoff.ms
    max_wait_ms: int = 500  # replica.fetch.wait.max.ms
    min_bytes: int = 1  # replica.fetch.min.bytes
    max_bytes: int = 10 * 1024 * 1024  # replica.fetch.response.max.bytes
    partition_max_bytes: int = 1024 * 1024  # replica.fetch.max.bytes
    num_fetchers: int = 1  # num.replica.fetchers


class FetchStateKind(enum.Enum):
    FETCHING = "Fetching"
    TRUNCATING = "Truncating"
    FAILED = "Failed"  # until a new LeaderAndIsr re-adds the partition


@dataclass
class PartitionFetchState:
    """Where a followed partition stands (Kafka's ``PartitionFetchState``)."""

    topic_id: str
    fetch_offset: int
    current_leader_epoch: int
    last_fetched_epoch: int | None
    state: FetchStateKind = FetchStateKind.FETCHING
    delayed_until_ms: float | None = None  # monotonic; back-off after an error
    lag: int | None = None  # the leader's high watermark minus our fetch offset, after a fetch

    def is_ready(self, now_ms: float) -> bool:
        return self.delayed_until_ms is None or now_ms >= self.delayed_until_ms


@dataclass(frozen=True)
class InitialFetchState:
    """How a partition joins a fetcher (Kafka's ``InitialFetchState``): last_fetched_epoch None
    means it starts Truncating (OffsetsForLeaderEpoch path, from the HW)."""

    topic_id: str
    leader_id: int
    current_leader_epoch: int
    fetch_offset: int
    last_fetched_epoch: int | None


def initial_fetch_state(topic_id: str, leader_id: int, leader_epoch: int, log_: Log) -> InitialFetchState:
    """Kafka's ``ReplicaManager.initialFetchOffset``: a log with leader epochs fetches from its
    LEO with its latest epoch (truncation on fetch); one without truncates from its HW."""
    latest = log_.leader_epoch_cache.latest_epoch
    if latest != UNDEFINED_EPOCH:
        return InitialFetchState(topic_id, leader_id, leader_epoch, log_.log_end_offset, latest)
    return InitialFetchState(topic_id, leader_id, leader_epoch, log_.high_watermark, None)


# --- what crosses the LeaderEndPoint -----------------------------------------------------------


@dataclass(frozen=True)
class FetchRequestPartition:
    topic_partition: TopicPartition
    topic_id: str
    fetch_offset: int
    current_leader_epoch: int
    last_fetched_epoch: int  # -1: none sent
    log_start_offset: int  # the follower's own
    max_bytes: int


@dataclass(frozen=True)
class FetchRequestData:
    """A sessionless replica fetch (Fetch v12 fields)."""

    replica_id: int
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    partitions: list[FetchRequestPartition]
    session_id: int = SESSIONLESS_ID
    session_epoch: int = SESSIONLESS_EPOCH


@dataclass
class FetchResponsePartition:
    error: ErrorCode = ErrorCode.NONE
    high_watermark: int = -1
    log_start_offset: int = -1
    records: bytes | memoryview = b""
    diverging_epoch: tuple[int, int] | None = None  # (epoch, end offset)


@dataclass(frozen=True)
class EpochEndOffset:
    error: ErrorCode
    leader_epoch: int = UNDEFINED_EPOCH
    end_offset: int = -1


class LeaderEndPointError(KafkaError):
    """A per-call error answered by the leader (e.g. ListOffsets' partition error)."""

    def __init__(self, code: ErrorCode, message: str = "") -> None:
        super().__init__(message or code.name)
        self.code = code


class LeaderEndPoint(Protocol):
    """How a follower talks to one source broker (Kafka's ``LeaderEndPoint``). Transport
    failures raise ``OSError``/``ConnectionError``/``asyncio.TimeoutError``."""

    async def fetch(self, request: FetchRequestData) -> dict[TopicPartition, FetchResponsePartition]: ...

    async def fetch_earliest_offset(self, tp: TopicPartition, current_leader_epoch: int) -> int: ...

    async def fetch_latest_offset(self, tp: TopicPartition, current_leader_epoch: int) -> int: ...

    async def fetch_epoch_end_offsets(
        self, partitions: dict[TopicPartition, tuple[int, int]]
    ) -> dict[TopicPartition, EpochEndOffset]:
        """``partitions``: tp → (current leader epoch, epoch asked about)."""
        ...

    async def close(self) -> None: ...


class ReplicaQuota(Protocol):
    """Kafka's ``ReplicaQuota`` (`pybroker.server.quota.replication_quota_manager`)."""

    @property
    def active(self) -> bool: ...

    def is_throttled(self, tp: TopicPartition, throttled_replicas: list[str]) -> bool: ...

    def is_quota_exceeded(self) -> bool: ...

    def record(self, value: int) -> None: ...


def log_config_list(log_: Log | None, name: str) -> list[str]:
    """A list-valued topic config of a log (empty without a log)."""
    return [] if log_ is None else getattr(log_.config, name, [])


_TRANSPORT_ERRORS = (OSError, ConnectionError, asyncio.TimeoutError, LeaderEndPointError)


# --- the fetcher -------------------------------------------------------------------------------


class ReplicaFetcher:
    """Fetches the partitions this broker follows from one source broker."""

    def __init__(
        self,
        source_broker_id: int,
        leader: LeaderEndPoint,
        get_log: Callable[[TopicPartition], Log | None],
        config: FetcherConfig,
        time: Time | None = None,
        *,
        on_log_start_offset_changed: Callable[[TopicPartition], None] | None = None,
        on_high_watermark_changed: Callable[[TopicPartition], None] | None = None,
        idle_wait: Callable[[float], Awaitable[None]] | None = None,
    ) -> None:
        self.source_broker_id = source_broker_id
        self.leader = leader
        self.get_log = get_log
        self.config = config
        self.time: Time = time or SystemTime()
        self.states: dict[TopicPartition, PartitionFetchState] = {}
        self.on_log_start_offset_changed = on_log_start_offset_changed
        self.on_high_watermark_changed = on_high_watermark_changed
        self._idle_wait = idle_wait
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._running = False
        #: The follower replication throttle (Kafka's ReplicaFetcherThread ``quota``), or None.
        self.quota: ReplicaQuota | None = None
        #: The broker's BrokerTopicStats (ReplicationBytesInPerSec), or None.
        self.topic_stats: BrokerTopicStats | None = None
        #: Told of an I/O error appending to or truncating a log (its log dir goes offline).
        self.on_storage_error: Callable[[TopicPartition, OSError], None] | None = None

    # --- partitions ---------------------------------------------------------------------------

    def add_partitions(self, initial: dict[TopicPartition, InitialFetchState]) -> None:
        for tp, init in initial.items():
            current = self.states.get(tp)
            if current is not None and current.current_leader_epoch == init.current_leader_epoch \
                    and current.state != FetchStateKind.FAILED:
                continue  # same leader epoch: keep the state we have (Kafka's addPartitions)
            self.states[tp] = PartitionFetchState(
                init.topic_id, init.fetch_offset, init.current_leader_epoch, init.last_fetched_epoch,
                FetchStateKind.FETCHING if init.last_fetched_epoch is not None else FetchStateKind.TRUNCATING,
            )
        self._wake.set()

    def remove_partitions(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, PartitionFetchState]:
        return {tp: state for tp in tps if (state := self.states.pop(tp, None)) is not None}

    @property
    def partition_count(self) -> int:
        return len(self.states)

    def _delay(self, tp: TopicPartition, state: PartitionFetchState) -> None:
        state.delayed_until_ms = self.time.monotonic_ms() + self.config.fetch_backoff_ms
        log.debug("Backing off %s for %d ms", tp, self.config.fetch_backoff_ms)

    def _mark_failed(self, tp: TopicPartition, state: PartitionFetchState, why: str) -> None:
        log.warning("Partition %s marked as failed: %s", tp, why)
        state.state = FetchStateKind.FAILED

    def _storage_failed(self, tp: TopicPartition, state: PartitionFetchState, error: OSError) -> None:
        """Kafka's KafkaStorageException case: the partition stops fetching, and its log dir
        goes offline (the failure channel's handler then removes it from this fetcher). Out of
        descriptors or memory, the dir stays online: the partition backs off and fetches again."""
        log.error("Error while processing data for partition %s at offset %d: %s", tp, state.fetch_offset, error)
        if is_resource_exhaustion(error):
            self._delay(tp, state)
        else:
            state.state = FetchStateKind.FAILED
        if self.on_storage_error is not None:
            self.on_storage_error(tp, error)

    def _truncate(self, tp: TopicPartition, state: PartitionFetchState, log_: Log, offset: int) -> bool:
        """``log_.truncate_to(offset)``; False (the partition failed) on an I/O error."""
        try:
            log_.truncate_to(offset)
        except OSError as e:
            self._storage_failed(tp, state, e)
            return False
        return True

    @staticmethod
    def _latest_epoch(log_: Log) -> int | None:
        latest = log_.leader_epoch_cache.latest_epoch
        return None if latest == UNDEFINED_EPOCH else latest

    # --- the loop -----------------------------------------------------------------------------

    def start(self) -> None:
        self._running = True
        self._task = asyncio.get_running_loop().create_task(self._run(), name=f"ReplicaFetcher-{self.source_broker_id}")

    async def _run(self) -> None:
        while self._running:
            try:
                await self.do_work()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("Replica fetcher for broker %d failed; backing off", self.source_broker_id)
                await self._wait(self.config.fetch_backoff_ms)

    async def shutdown(self) -> None:
        self._running = False
        if self._task is not None:
            self._task.cancel()
            # gather, not ``await task`` under ``except CancelledError``: a cancellation of the
            # caller itself (e.g. the controller's channel stopping) must not be swallowed here.
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        await self.leader.close()

    async def _wait(self, ms: float) -> None:
        if self._idle_wait is not None:
            await self._idle_wait(ms)
            return
        self._wake.clear()
        try:
            async with asyncio.timeout(ms / 1000):
                await self._wake.wait()
        except TimeoutError:
            pass

    async def do_work(self) -> None:
        """One round: truncate what is Truncating, then one fetch of everything fetchable (or
        wait the back-off when nothing is)."""
        await self._truncate_via_epoch_end_offsets()
        request = self.build_fetch()
        if request is None:
            await self._wait(self.config.fetch_backoff_ms)
            return
        try:
            responses = await self.leader.fetch(request)
        except _TRANSPORT_ERRORS as e:
            log.info("Fetch from broker %d failed: %s", self.source_broker_id, e)
            for p in request.partitions:
                state = self.states.get(p.topic_partition)
                if state is not None:
                    self._delay(p.topic_partition, state)
            return
        for p in request.partitions:
            tp = p.topic_partition
            state = self.states.get(tp)
            response = responses.get(tp)
            # Skip partitions removed or reset (new epoch, truncation) while the fetch was out.
            if state is None or response is None or state.state != FetchStateKind.FETCHING \
                    or state.fetch_offset != p.fetch_offset or state.current_leader_epoch != p.current_leader_epoch:
                continue
            try:
                await self._process(tp, state, response, p)
            except OSError as e:
                self._storage_failed(tp, state, e)
                continue
            if self.quota is not None and self.quota.active and len(response.records) and self.quota.is_throttled(
                    tp, log_config_list(self.get_log(tp), "follower_replication_throttled_replicas")):
                self.quota.record(len(response.records))

    def _should_follower_throttle(self, tp: TopicPartition, state: PartitionFetchState, log_: Log) -> bool:
        """Kafka's ``shouldFollowerThrottle``: not in sync, throttled, and the follower
        replication rate over its bound: left out of this fetch."""
        quota = self.quota
        assert quota is not None
        in_sync = state.lag is not None and state.lag <= 0
        return (not in_sync and quota.is_throttled(tp, log_config_list(log_, "follower_replication_throttled_replicas"))
                and quota.is_quota_exceeded())

    def build_fetch(self) -> FetchRequestData | None:
        """A sessionless fetch of every Fetching, not delayed partition."""
        now = self.time.monotonic_ms()
        partitions = []
        for tp, state in self.states.items():
            if state.state != FetchStateKind.FETCHING or not state.is_ready(now):
                continue
            log_ = self.get_log(tp)
            if log_ is None:
                continue
            state.delayed_until_ms = None
            if self.quota is not None and self.quota.active and self._should_follower_throttle(tp, state, log_):
                continue
            partitions.append(FetchRequestPartition(
                tp, state.topic_id, state.fetch_offset, state.current_leader_epoch,
                -1 if state.last_fetched_epoch is None else state.last_fetched_epoch,
                log_.log_start_offset, self.config.partition_max_bytes,
            ))
        if not partitions:
            return None
        return FetchRequestData(
            self.config.replica_id, self.config.max_wait_ms, self.config.min_bytes, self.config.max_bytes, partitions
        )

    # --- processing a response partition -----------------------------------------------------

    async def _process(
        self, tp: TopicPartition, state: PartitionFetchState, response: FetchResponsePartition,
        request: FetchRequestPartition,
    ) -> None:
        log_ = self.get_log(tp)
        if log_ is None:
            self.states.pop(tp, None)
            return
        error = response.error
        if error == ErrorCode.NONE:
            if response.diverging_epoch is not None:
                self._truncate_on_diverging_epoch(tp, state, log_, response.diverging_epoch)
            else:
                self._process_partition_data(tp, state, log_, response)
        elif error == ErrorCode.OFFSET_OUT_OF_RANGE:
            await self._handle_offset_out_of_range(tp, state, log_)
        elif error == ErrorCode.FENCED_LEADER_EPOCH:
            if state.current_leader_epoch == request.current_leader_epoch:
                self._mark_failed(tp, state, "the leader fenced our leader epoch")
            else:
                self._delay(tp, state)
        else:
            log.info("Error fetching %s from broker %d: %s", tp, self.source_broker_id, error.name)
            self._delay(tp, state)

    def _process_partition_data(
        self, tp: TopicPartition, state: PartitionFetchState, log_: Log, response: FetchResponsePartition
    ) -> None:
        if state.fetch_offset != log_.log_end_offset:
            self._mark_failed(tp, state, f"fetch offset {state.fetch_offset} is not the log end offset "
                                         f"{log_.log_end_offset}")
            return
        now = self.time.milliseconds()
        if len(response.records):
            try:
                info = self._append(log_, memoryview(response.records), now)
            except CorruptRecordError as e:
                log.warning("Corrupt records fetched for %s: %s", tp, e)
                self._delay(tp, state)
                return
            except (UnexpectedAppendOffsetError, ValueError) as e:
                self._mark_failed(tp, state, str(e))
                return
            if self.topic_stats is not None:
                self.topic_stats.replicated_in(len(response.records))
            if info.record_count > 0:
                state.fetch_offset = info.last_offset + 1
                if info.last_leader_epoch >= 0:
                    state.last_fetched_epoch = info.last_leader_epoch
        state.lag = max(0, response.high_watermark - state.fetch_offset)
        hw_changed = log_.maybe_update_high_watermark(response.high_watermark) is not None
        lso_changed = False
        if response.log_start_offset >= 0:
            lso_changed = log_.maybe_increment_log_start_offset(
                min(response.log_start_offset, log_.high_watermark), "LeaderOffsetIncremented"
            )
        if lso_changed and self.on_log_start_offset_changed is not None:
            self.on_log_start_offset_changed(tp)
        if hw_changed and self.on_high_watermark_changed is not None:
            self.on_high_watermark_changed(tp)

    @staticmethod
    def _append(log_: Log, records: memoryview, now_ms: int):  # noqa: ANN205 - LogAppendInfo
        """Append as follower; a log emptied at the leader's log start offset may get a batch that
        starts below it (DeleteRecords inside a batch): restart the log at that batch's base offset
        (Kafka's ``appendRecordsToFollowerOrFutureReplica``)."""
        try:
            return log_.append_as_follower(records, now_ms)
        except UnexpectedAppendOffsetError as e:
            end = log_.log_end_offset
            if end != log_.log_start_offset or not e.first_offset < end <= e.last_offset:
                raise
            log_.truncate_fully_and_start_at(e.first_offset)
            return log_.append_as_follower(records, now_ms)

    def _truncate_on_diverging_epoch(
        self, tp: TopicPartition, state: PartitionFetchState, log_: Log, diverging: tuple[int, int]
    ) -> None:
        """Truncation on fetch (KIP-595 path of Kafka 2.7+): cut the log where the leader says the
        epochs diverge, then keep fetching from the new end with its latest epoch."""
        epoch, end_offset = diverging
        result = offset_truncation_state(epoch, end_offset, log_.leader_epoch_cache, log_.log_end_offset,
                                         state.fetch_offset)
        log.info("%s: truncating to %d after DivergingEpoch(%d, %d)", tp, result.offset, epoch, end_offset)
        log_.truncate_to(result.offset)
        state.fetch_offset = log_.log_end_offset
        state.last_fetched_epoch = self._latest_epoch(log_)

    async def _handle_offset_out_of_range(self, tp: TopicPartition, state: PartitionFetchState, log_: Log) -> None:
        """Kafka's ``fetchOffsetAndTruncate``: ask the leader's LEO (and maybe its log start)."""
        try:
            leader_end = await self.leader.fetch_latest_offset(tp, state.current_leader_epoch)
            leader_start = None
            if leader_start_offset_needed(log_.log_end_offset, leader_end):
                leader_start = await self.leader.fetch_earliest_offset(tp, state.current_leader_epoch)
        except _TRANSPORT_ERRORS as e:
            log.info("Resolving OFFSET_OUT_OF_RANGE of %s failed: %s", tp, e)
            if isinstance(e, LeaderEndPointError) and e.code == ErrorCode.FENCED_LEADER_EPOCH:
                self._mark_failed(tp, state, "the leader fenced our leader epoch")
            else:
                self._delay(tp, state)
            return
        resolution = resolve_offset_out_of_range(log_.log_end_offset, leader_end, leader_start)
        if resolution.truncate_to is not None:
            log_.truncate_to(resolution.truncate_to)
        if resolution.truncate_fully_and_start_at is not None:
            log_.truncate_fully_and_start_at(resolution.truncate_fully_and_start_at)
            if self.on_log_start_offset_changed is not None:
                self.on_log_start_offset_changed(tp)
        state.fetch_offset = resolution.fetch_offset
        state.last_fetched_epoch = self._latest_epoch(log_)

    async def _truncate_via_epoch_end_offsets(self) -> None:
        """State Truncating: OffsetsForLeaderEpoch about each log's latest epoch; a log without
        epochs truncates to its HW (the fetch offset) at once."""
        now = self.time.monotonic_ms()
        asks: dict[TopicPartition, tuple[int, int]] = {}
        for tp, state in list(self.states.items()):
            if state.state != FetchStateKind.TRUNCATING or not state.is_ready(now):
                continue
            log_ = self.get_log(tp)
            if log_ is None:
                continue
            latest = log_.leader_epoch_cache.latest_epoch
            if latest == UNDEFINED_EPOCH:
                if self._truncate(tp, state, log_, state.fetch_offset):
                    self._start_fetching(state, log_)
            else:
                asks[tp] = (state.current_leader_epoch, latest)
        if not asks:
            return
        try:
            answers = await self.leader.fetch_epoch_end_offsets(asks)
        except _TRANSPORT_ERRORS as e:
            log.info("OffsetsForLeaderEpoch to broker %d failed: %s", self.source_broker_id, e)
            for tp in asks:
                if (fetch_state := self.states.get(tp)) is not None:
                    self._delay(tp, fetch_state)
            return
        for tp, (epoch, _) in asks.items():
            fetch_state = self.states.get(tp)
            log_ = self.get_log(tp)
            answer = answers.get(tp)
            if fetch_state is None or log_ is None or fetch_state.current_leader_epoch != epoch:
                continue
            if answer is None or answer.error not in (ErrorCode.NONE, ErrorCode.FENCED_LEADER_EPOCH):
                self._delay(tp, fetch_state)
                continue
            if answer.error == ErrorCode.FENCED_LEADER_EPOCH:
                self._mark_failed(tp, fetch_state, "the leader fenced our leader epoch")
                continue
            result = offset_truncation_state(answer.leader_epoch, answer.end_offset, log_.leader_epoch_cache,
                                             log_.log_end_offset, fetch_state.fetch_offset)
            if not self._truncate(tp, fetch_state, log_, result.offset):
                continue
            if result.truncation_completed:
                self._start_fetching(fetch_state, log_)
            else:
                fetch_state.fetch_offset = log_.log_end_offset

    def _start_fetching(self, state: PartitionFetchState, log_: Log) -> None:
        state.fetch_offset = log_.log_end_offset
        state.last_fetched_epoch = self._latest_epoch(log_)
        state.state = FetchStateKind.FETCHING


# --- the manager -------------------------------------------------------------------------------


def java_string_hash(value: str) -> int:
    h = 0
    for unit in value.encode("utf-16-be").hex(" ", 2).split():
        h = (31 * h + int(unit, 16)) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


@dataclass
class ReplicaFetcherManager:
    """One ``ReplicaFetcher`` per (source broker, fetcher id) (Kafka's ``AbstractFetcherManager``)."""

    config: FetcherConfig
    endpoint_for: Callable[[int], LeaderEndPoint]
    get_log: Callable[[TopicPartition], Log | None]
    time: Time = field(default_factory=SystemTime)
    on_log_start_offset_changed: Callable[[TopicPartition], None] | None = None
    on_high_watermark_changed: Callable[[TopicPartition], None] | None = None
    start_fetchers: bool = True
    fetchers: dict[tuple[int, int], ReplicaFetcher] = field(default_factory=dict)
    _resizing: set[asyncio.Task[None]] = field(default_factory=set)
    quota: ReplicaQuota | None = None  # the follower replication throttle, given to every fetcher
    topic_stats: BrokerTopicStats | None = None  # metrics (ReplicationBytesInPerSec), given to every fetcher
    on_storage_error: Callable[[TopicPartition, OSError], None] | None = None  # given to every fetcher

    def fetcher_id(self, tp: TopicPartition) -> int:
        return abs(31 * java_string_hash(tp.topic) + tp.partition) % self.config.num_fetchers

    def add_fetcher_for_partitions(self, initial: dict[TopicPartition, InitialFetchState]) -> None:
        groups: dict[tuple[int, int], dict[TopicPartition, InitialFetchState]] = {}
        for tp, init in initial.items():
            groups.setdefault((init.leader_id, self.fetcher_id(tp)), {})[tp] = init
        for key, partitions in groups.items():
            fetcher = self.fetchers.get(key)
            if fetcher is None:
                fetcher = ReplicaFetcher(
                    key[0], self.endpoint_for(key[0]), self.get_log, self.config, self.time,
                    on_log_start_offset_changed=self.on_log_start_offset_changed,
                    on_high_watermark_changed=self.on_high_watermark_changed,
                )
                fetcher.quota = self.quota
                fetcher.topic_stats = self.topic_stats
                fetcher.on_storage_error = self.on_storage_error
                self.fetchers[key] = fetcher
                if self.start_fetchers:
                    fetcher.start()
            fetcher.add_partitions(partitions)

    def remove_fetcher_for_partitions(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, PartitionFetchState]:
        wanted = set(tps)
        removed: dict[TopicPartition, PartitionFetchState] = {}
        for fetcher in self.fetchers.values():
            removed.update(fetcher.remove_partitions(wanted))
        return removed

    def resize_thread_pool(self, new_size: int) -> None:
        """num.replica.fetchers changed (a dynamic broker config): every followed partition
        moves, with its fetch offset and leader epoch, to the fetcher its id gives with the new
        count, and fetchers left without partitions stop (Kafka's ``resizeThreadPool``; a
        partition whose fetch had failed waits for its next LeaderAndIsr, as it would have)."""
        current = self.config.num_fetchers
        log.info("Resizing fetcher thread pool size from %d to %d", current, new_size)
        self.config = dataclasses.replace(self.config, num_fetchers=new_size)
        if new_size != current:
            for (source, _fetcher_id), fetcher in list(self.fetchers.items()):
                states = fetcher.remove_partitions(list(fetcher.states))
                self.add_fetcher_for_partitions({
                    tp: InitialFetchState(state.topic_id, source, state.current_leader_epoch, state.fetch_offset,
                                          state.last_fetched_epoch if state.state == FetchStateKind.FETCHING else None)
                    for tp, state in states.items() if state.state != FetchStateKind.FAILED
                })
        for fetcher in self.fetchers.values():
            fetcher.config = self.config
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # no loop (a test driving the manager by hand): idle fetchers stay until asked
        task = loop.create_task(self.shutdown_idle_fetchers(), name="replica-fetcher-resize")
        self._resizing.add(task)
        task.add_done_callback(self._resizing.discard)

    async def shutdown_idle_fetchers(self) -> None:
        for key, fetcher in list(self.fetchers.items()):
            if fetcher.partition_count == 0:
                del self.fetchers[key]
                await fetcher.shutdown()

    async def shutdown(self) -> None:
        for key in list(self.fetchers):
            await self.fetchers.pop(key).shutdown()
