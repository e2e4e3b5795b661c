"""The replica manager: hosted partitions, appends, reads, and the delayed operations on them.

Owns the map of partitions this broker hosts, applying metadata (become leader, stop hosting),
appending produce record sets to leaders (with Kafka's per-partition error mapping), reading for
fetches (consumer or follower view), and the purgatories for delayed produce and delayed fetch.
Handlers in ``server/apis`` translate wire messages to and from these calls; this module never
sees wire classes.

Leader side of replication: a fetch with ``replica_id >= 0`` is a follower's. It is fenced by its
CurrentLeaderEpoch, checked for divergence (LastFetchedEpoch → DivergingEpoch), read up to the log
end offset, answered with the HW as it was before the fetch, and then recorded
(``Partition.update_follower_fetch_state``), completing delayed produce / fetch / delete-records
operations whose condition it changed. A parked follower fetch is woken by any append and by any
move of the leader's log start offset. ``shrink_isrs`` is run every replica.lag.time.max.ms / 2 by
whoever owns the scheduler. Everything runs on the event loop.

Log dirs (KIP-112/113, the "log dirs" section below): DescribeLogDirs' view of every dir,
AlterReplicaLogDirs (a future log in the destination dir, copied and swapped in by
``server/alter_log_dirs.py``), and a failed dir's partitions going offline: they answer
KAFKA_STORAGE_ERROR from then on, and the controller is told (``on_log_dir_failure_notify``).
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import time
from collections.abc import Awaitable, Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from pybroker import _native
from pybroker.common.cluster import EPOCH_DURING_DELETE, PartitionState
from pybroker.common.errors import ErrorCode, KafkaError
from pybroker.common.topic import INTERNAL_TOPICS, topic_id_to_string
from pybroker.controller.requests import ControlResponse, LeaderAndIsr, StopReplica
from pybroker.log.config import LogConfig
from pybroker.log.log import (
    AppendOrigin,
    Log,
    RecordValidationError,
)
from pybroker.log.log_manager import LogManager
from pybroker.metrics.stats import BrokerTopicStats, IsrStats
from pybroker.replication.fetcher import (
    FetcherConfig,
    LeaderEndPoint,
    ReplicaFetcherManager,
    initial_fetch_state,
)
from pybroker.replication.truncation import diverging_epoch
from pybroker.scheduler import ScheduledTask, Scheduler, SystemTime, Time
from pybroker.server.alter_log_dirs import ReplicaAlterLogDirsManager
from pybroker.server.metadata_cache import MetadataCache
from pybroker.server.partition import (
    DEFAULT_REPLICA_LAG_TIME_MAX_MS,
    IsrChangeSubmitter,
    NotLeaderError,
    Partition,
    UnknownLeaderEpochError,
)
from pybroker.server.purgatory import DelayedOperation, Purgatory
from pybroker.server.quota.replication_quota_manager import ReplicationQuotaManager
from pybroker.server.replica_selector import ReplicaSelector, ReplicaView
from pybroker.types import TopicPartition

log = logging.getLogger(__name__)

# Append errors Kafka does not count as failed produce requests (its "known" exceptions).
_EXPECTED_APPEND_ERRORS = frozenset({
    ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.CORRUPT_MESSAGE,
})

def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class PartitionAppendResult:
    error: ErrorCode = ErrorCode.NONE
    error_message: str | None = None  # logged; sent to the client only when it is custom (below)
    base_offset: int = -1
    log_append_time: int = -1
    log_start_offset: int = -1
    required_offset: int = -1  # acks=all: the high watermark this append waits for
    # INVALID_RECORD for some records of the batch: (batch index, message) of each (Produce v8+).
    record_errors: tuple[tuple[int, str | None], ...] = ()
    # Kafka's hasCustomErrorMessage: the Produce answer carries ``error_message`` (record
    # validation, a transaction's unverified partition); other errors go without one.
    has_custom_error_message: bool = False


# Append results now, or a future of them when the answer must wait.
AppendOutcome = dict[TopicPartition, PartitionAppendResult] | asyncio.Future[dict[TopicPartition, PartitionAppendResult]]


# The coordinator could not tell yet: the client retries the produce.
_UNVERIFIED_RETRIABLE = frozenset({
    ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR,
})


def produce_error(error: ErrorCode) -> tuple[ErrorCode, str | None]:
    """What a Produce answers for a partition the coordinator did not verify: the error and its
    message, as Kafka's ``ReplicaManager`` translates the coordinator's answer (None: the error
    alone)."""
    if error in _UNVERIFIED_RETRIABLE:
        return (ErrorCode.NOT_ENOUGH_REPLICAS,
                f"Unable to verify the partition has been added to the transaction. Underlying error: {error.name}")
    if error == ErrorCode.INVALID_TXN_STATE:
        return error, "Partition was not added to the transaction"
    if error == ErrorCode.PRODUCER_FENCED:
        return ErrorCode.INVALID_PRODUCER_EPOCH, None
    return error, None


@dataclass
class ProduceAppendResults:
    """A Produce's appends (Kafka's ``handleProduceAppend``): the partitions KIP-890 verification
    refused before any append, and the append results of the rest. Kafka answers the two groups
    from two maps, in that order."""

    unverified: dict[TopicPartition, PartitionAppendResult]
    appended: dict[TopicPartition, PartitionAppendResult]


class TransactionVerifier(Protocol):
    """Asks a transactional id's coordinator whether partitions are in the producer's ongoing
    transaction (``server/transaction/verification.py``)."""

    async def verify(
        self, transactional_id: str, producer_id: int, producer_epoch: int, partitions: list[TopicPartition]
    ) -> dict[TopicPartition, ErrorCode]: ...


@dataclass(frozen=True)
class ClientMetadata:
    """What a consumer's Fetch v11+ tells of it for KIP-392: its rack (``client.rack``, empty
    when unset) and the listener it came in on."""

    rack: str
    listener: str | None


@dataclass
class FetchPartitionRequest:
    topic_partition: TopicPartition
    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int = -1
    log_start_offset: int = -1  # a follower's, reported in its fetch
    last_fetched_epoch: int = -1  # a follower's (Fetch v12+): checked for divergence


@dataclass
class FetchPartitionResult:
    error: ErrorCode = ErrorCode.NONE
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    # The batches read, left in the log file: the response sends them without copying.
    records: _native.LogRegion | bytes = b""
    # (epoch, end offset) answered to a follower whose log diverged (no records then).
    diverging_epoch: tuple[int, int] | None = None
    # read_committed: (producer id, first offset) of the aborted transactions in the records.
    aborted_transactions: list[tuple[int, int]] = field(default_factory=list)
    # KIP-392's preferred read replica (-1: none; pybroker computes none, consumers read leaders).
    preferred_read_replica: int = -1


class DelayedProduce(DelayedOperation):
    """acks=all: waits until every appended partition's high watermark covers its records."""

    def __init__(
        self,
        timeout_ms: int,
        results: dict[TopicPartition, PartitionAppendResult],
        partitions: Callable[[TopicPartition], Partition | None],
        future: asyncio.Future[dict[TopicPartition, PartitionAppendResult]],
    ) -> None:
        super().__init__(timeout_ms)
        self.results = results
        self._partitions = partitions
        self._future = future

    def _pending(self) -> list[TopicPartition]:
        return [tp for tp, r in self.results.items() if r.error == ErrorCode.NONE and r.required_offset >= 0]

    def try_complete(self) -> bool:
        for tp in self._pending():
            partition = self._partitions(tp)
            if partition is None or not partition.is_leader:
                self.results[tp].error = ErrorCode.NOT_LEADER_OR_FOLLOWER
                self.results[tp].required_offset = -1
                continue
            done, error = partition.check_enough_replicas_reach_offset(self.results[tp].required_offset)
            if done:
                self.results[tp].error = error
                self.results[tp].required_offset = -1
        if self._pending():
            return False
        return self.force_complete()

    def blocked_on(self, key: Hashable) -> bool:
        """Its append to ``key`` waits for that partition's high watermark: so do the later
        appends, whose operations were watched after this one."""
        if not isinstance(key, TopicPartition):
            return False
        result = self.results.get(key)
        if result is None or result.error != ErrorCode.NONE or result.required_offset < 0:
            return False
        partition = self._partitions(key)
        return partition is not None and not partition.check_enough_replicas_reach_offset(result.required_offset)[0]

    def on_complete(self) -> None:
        for tp in self._pending():
            self.results[tp].error = ErrorCode.REQUEST_TIMED_OUT
        if not self._future.done():
            self._future.set_result(self.results)


@dataclass
class LeaderAndIsrOutcome(ControlResponse):
    """A LeaderAndIsr's answer, plus the partitions that became leader and follower here."""

    leaders: list[Partition] = field(default_factory=list)
    followers: list[Partition] = field(default_factory=list)


#: DescribeLogDirs' offset lag of a replica that is not hosted (Kafka's INVALID_OFFSET_LAG).
INVALID_OFFSET_LAG = -1


@dataclass
class LogDirReplica:
    """One log of a log dir as DescribeLogDirs shows it."""

    topic_partition: TopicPartition
    size: int
    offset_lag: int
    is_future: bool


@dataclass
class LogDirDescription:
    """One of ``log.dirs`` as DescribeLogDirs shows it (error KAFKA_STORAGE_ERROR: offline)."""

    log_dir: str
    error: ErrorCode = ErrorCode.NONE
    replicas: list[LogDirReplica] = field(default_factory=list)
    total_bytes: int = -1
    usable_bytes: int = -1


@dataclass
class DeleteRecordsResult:
    """One partition's DeleteRecords outcome. Errors carry -1 watermarks, except a timeout, which
    keeps the low watermark seen when the leader moved its log start offset."""

    error: ErrorCode = ErrorCode.NONE
    low_watermark: int = -1
    leader_log_start_offset: int = -1
    requested_offset: int = -1
    error_message: str | None = None


class DelayedDeleteRecords(DelayedOperation):
    """DeleteRecords (LeaderOnly=false): waits until every partition's low watermark (the smallest
    log start offset over the leader and its alive replicas) reaches the requested offset."""

    def __init__(
        self,
        timeout_ms: int,
        results: dict[TopicPartition, DeleteRecordsResult],
        partitions: Callable[[TopicPartition], Partition | None],
        future: asyncio.Future[dict[TopicPartition, DeleteRecordsResult]],
    ) -> None:
        super().__init__(timeout_ms)
        self.results = results
        self._partitions = partitions
        self._future = future
        self.pending = {tp for tp, r in results.items() if r.error == ErrorCode.NONE}
        for tp in self.pending:
            results[tp].error = ErrorCode.REQUEST_TIMED_OUT  # what is left pending at the deadline

    def try_complete(self) -> bool:
        for tp in list(self.pending):
            result = self.results[tp]
            partition = self._partitions(tp)
            if partition is None:
                result.error, result.low_watermark, result.leader_log_start_offset = (
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1, -1)
            elif not partition.is_leader:
                result.error, result.low_watermark, result.leader_log_start_offset = (
                    ErrorCode.NOT_LEADER_OR_FOLLOWER, -1, -1)
            else:
                low_watermark = partition.low_watermark()
                if low_watermark < result.requested_offset:
                    continue
                result.error, result.low_watermark = ErrorCode.NONE, low_watermark
                result.leader_log_start_offset = partition.log.log_start_offset
            self.pending.discard(tp)
        return not self.pending and self.force_complete()

    def on_complete(self) -> None:
        if not self._future.done():
            self._future.set_result(self.results)


class DelayedFetch(DelayedOperation):
    """A long poll (Kafka's ``DelayedFetch``): each check reads again and completes when
    ``answerable`` says that read may be answered (`ReplicaManager.fetch_answerable`), or when
    ``max_wait_ms`` passes. A follower's fetch is answered by ``final_read`` (which records the
    fetch)."""

    def __init__(
        self,
        max_wait_ms: int,
        read: Callable[[], tuple[dict[TopicPartition, FetchPartitionResult], int, bool]],
        answerable: Callable[[dict[TopicPartition, FetchPartitionResult], int, bool], bool],
        future: asyncio.Future[dict[TopicPartition, FetchPartitionResult]],
        final_read: Callable[[], dict[TopicPartition, FetchPartitionResult]] | None = None,
    ) -> None:
        super().__init__(max_wait_ms)
        self._read = read
        self._answerable = answerable
        self._future = future
        self._result: dict[TopicPartition, FetchPartitionResult] | None = None
        self._final_read = final_read

    def try_complete(self) -> bool:
        results, total, errors = self._read()
        if self._answerable(results, total, errors):
            self._result = results
            return self.force_complete()
        return False

    def on_complete(self) -> None:
        if self._final_read is not None:
            self._result = self._final_read()
        elif self._result is None:
            self._result = self._read()[0]
        if not self._future.done():
            self._future.set_result(self._result)


class ReplicaManager:
    """The partitions hosted by this broker and the operations on them."""

    def __init__(
        self, broker_id: int, log_manager: LogManager, metadata_cache: MetadataCache,
        time: Time | None = None, scheduler: Scheduler | None = None,
        isr_submitter: IsrChangeSubmitter | None = None,
        leader_endpoint: Callable[[int], LeaderEndPoint] | None = None,
        fetcher_config: FetcherConfig | None = None,
        replica_lag_time_max_ms: int = DEFAULT_REPLICA_LAG_TIME_MAX_MS,
        alter_log_dirs_max_bytes_per_second: float = math.inf,
        replica_selector: ReplicaSelector | None = None,
    ) -> None:
        self.broker_id = broker_id
        self.replica_selector = replica_selector  # replica.selector.class (KIP-392)
        self.log_manager = log_manager
        self.metadata_cache = metadata_cache
        self.time: Time = time or SystemTime()
        self.scheduler = scheduler
        self.isr_submitter = isr_submitter
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        self.partitions: dict[TopicPartition, Partition] = {}
        self.produce_purgatory = Purgatory("Produce", scheduler, in_key_order=True)
        self.fetch_purgatory = Purgatory("Fetch", scheduler)
        self.delete_records_purgatory = Purgatory("DeleteRecords", scheduler)
        self.controller_epoch = 0  # the highest controller epoch seen (fences stale controllers)
        # The follower side: without a way to reach leaders (a single broker) nothing is fetched.
        self.fetcher_manager: ReplicaFetcherManager | None = None
        if leader_endpoint is not None:
            self.fetcher_manager = ReplicaFetcherManager(
                fetcher_config or FetcherConfig(broker_id), leader_endpoint, self._local_log, self.time,
                on_log_start_offset_changed=self.on_log_start_offset_changed,
                on_high_watermark_changed=self.complete_delayed_operations,
            )
            self.fetcher_manager.on_storage_error = self._on_follower_storage_error
        self._isr_expiration: ScheduledTask | None = None
        # --- replication throttle (pybroker.server.quota): set by QuotaManagers.install ---
        self.leader_replication_quota: ReplicationQuotaManager | None = None
        self.topic_stats = BrokerTopicStats()  # metrics: bytes and messages in and out (pybroker.metrics)
        if self.fetcher_manager is not None:
            self.fetcher_manager.topic_stats = self.topic_stats  # ReplicationBytesInPerSec
        self.isr_stats = IsrStats()  # metrics: ISR shrinks and expansions of the partitions hosted here
        # Log dirs: partitions of failed dirs (Kafka's HostedPartition.Offline), the replica
        # moves between dirs, and how the controller hears of a failed dir (cluster mode).
        self.offline_partitions: set[TopicPartition] = set()
        self.alter_log_dirs_manager = ReplicaAlterLogDirsManager(
            log_manager, self._local_log, self._on_future_log_swapped, time=self.time,
            max_bytes_per_second=alter_log_dirs_max_bytes_per_second,
        )
        self.on_log_dir_failure_notify: Callable[[], Awaitable[None]] | None = None
        self._notifications: set[asyncio.Future[None]] = set()
        self._failed_dirs_handled: set[str] = set()
        failure_channel = getattr(log_manager, "failure_channel", None)  # test doubles may have none
        if failure_channel is not None:
            failure_channel.on_failure = self.handle_log_dir_failure

    def is_leader_throttled(self, tp: TopicPartition) -> bool:
        """Whether ``tp`` is in its topic's leader.replication.throttled.replicas for this broker."""
        quota, partition = self.leader_replication_quota, self.partitions.get(tp)
        return quota is not None and partition is not None and quota.is_throttled(
            tp, partition.log.config.leader_replication_throttled_replicas)

    def _should_leader_throttle(self, partition: Partition, replica_id: int) -> bool:
        """Kafka's ``shouldLeaderThrottle``: a follower out of the ISR, a throttled partition,
        and the leader replication rate over its bound: the follower gets no records now."""
        quota = self.leader_replication_quota
        return (quota is not None and quota.active and replica_id not in partition.isr
                and self.is_leader_throttled(partition.topic_partition) and quota.is_quota_exceeded())

    def startup(self) -> None:
        """Start the ISR expiration task (every replica.lag.time.max.ms / 2, as Kafka)."""
        if self.scheduler is not None and self._isr_expiration is None:
            period = self.replica_lag_time_max_ms / 2
            self._isr_expiration = self.scheduler.schedule("isr-expiration", self.shrink_isrs, period, period)

    def _local_log(self, tp: TopicPartition) -> Log | None:
        partition = self.partitions.get(tp)
        return None if partition is None else partition.log

    # --- the controller's decisions ------------------------------------------------------------

    async def become_leader_or_follower(self, request: LeaderAndIsr) -> LeaderAndIsrOutcome:
        """Apply a LeaderAndIsr (Kafka's ``becomeLeaderOrFollower``): the partitions whose
        leader epoch is newer than ours become leader or follower here, their logs created
        (off the event loop) when missing. A partition whose epoch is not newer answers
        STALE_CONTROLLER_EPOCH, one that does not list this broker UNKNOWN_TOPIC_OR_PARTITION."""
        outcome = LeaderAndIsrOutcome()
        if request.controller_epoch < self.controller_epoch:
            outcome.error = ErrorCode.STALE_CONTROLLER_EPOCH
            return outcome
        self.controller_epoch = request.controller_epoch
        accepted: list[PartitionState] = []
        new_followers: list[Partition] = []
        channel = getattr(self.log_manager, "failure_channel", None)
        offline_dirs = channel.offline_log_dirs if channel is not None else set()
        for state in request.partition_states:
            tp = state.topic_partition
            partition = self.partitions.get(tp)
            if tp in self.offline_partitions or (
                    partition is None and offline_dirs and not state.is_new and self.log_manager.get_log(tp) is None):
                # Kafka: an offline replica, or one whose log may be in a failed dir.
                outcome.partition_errors[tp] = ErrorCode.KAFKA_STORAGE_ERROR
            elif self.broker_id not in state.replicas:
                outcome.partition_errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif partition is not None and state.leader_epoch <= partition.leader_epoch:
                outcome.partition_errors[tp] = ErrorCode.STALE_CONTROLLER_EPOCH
            else:
                accepted.append(state)
        wanted = [
            (s.topic_partition, topic_id_to_string(request.topic_ids[s.topic_partition.topic]))
            for s in accepted
            if s.topic_partition not in self.partitions and s.topic_partition.topic in request.topic_ids
        ]
        try:
            logs = await self.log_manager.create_logs(wanted) if wanted else {}
        except OSError as e:  # the log manager took the failed dir offline
            log.error("Creating logs for %d partitions failed: %s", len(wanted), e)
            logs = {tp: partition_log for tp, _topic_id in wanted
                    if (partition_log := self.log_manager.get_log(tp)) is not None}
        now = self.time.milliseconds()
        for state in accepted:
            tp = state.topic_partition
            partition = self.partitions.get(tp)
            if partition is None:
                partition_log = logs.get(tp) or self.log_manager.get_log(tp)
                if partition_log is None:
                    outcome.partition_errors[tp] = ErrorCode.KAFKA_STORAGE_ERROR
                    continue
                topic_id = request.topic_ids.get(tp.topic)
                partition = Partition(tp, topic_id_to_string(topic_id) if topic_id else "", self.broker_id, partition_log)
                self.host_partition(partition)
            if state.leader == self.broker_id:
                partition.make_leader(state, now)
                outcome.leaders.append(partition)
            elif partition.make_follower(state):
                outcome.followers.append(partition)
                new_followers.append(partition)
            else:
                outcome.followers.append(partition)  # same leader epoch: keep fetching as before
            for purgatory in (self.produce_purgatory, self.fetch_purgatory, self.delete_records_purgatory):
                purgatory.check_and_complete(tp)
        if self.fetcher_manager is not None:
            await self._update_fetchers(outcome.leaders, new_followers)
        self._maybe_add_log_dir_fetchers(outcome.leaders + outcome.followers)
        return outcome

    async def _update_fetchers(self, leaders: list[Partition], followers: list[Partition]) -> None:
        """Kafka's ``makeLeaders``/``makeFollowers`` fetcher part: a new leader stops fetching;
        a follower with a new leader epoch fetches again, from its log end offset with its latest
        epoch (or truncating from its HW when it has none), if its leader is alive here."""
        assert self.fetcher_manager is not None
        self.fetcher_manager.remove_fetcher_for_partitions(
            [p.topic_partition for p in leaders] + [p.topic_partition for p in followers]
        )
        initial = {
            p.topic_partition: initial_fetch_state(p.topic_id, p.leader_id, p.leader_epoch, p.log)
            for p in followers
            if self.metadata_cache.alive_broker(p.leader_id) is not None
        }
        if initial:
            self.fetcher_manager.add_fetcher_for_partitions(initial)
        await self.fetcher_manager.shutdown_idle_fetchers()

    async def stop_replicas(self, request: StopReplica) -> ControlResponse:
        """Apply a StopReplica: stop hosting the partitions, deleting their logs when asked;
        operations waiting on them complete (with NOT_LEADER_OR_FOLLOWER or unknown)."""
        response = ControlResponse()
        if request.controller_epoch < self.controller_epoch:
            response.error = ErrorCode.STALE_CONTROLLER_EPOCH
            return response
        self.controller_epoch = request.controller_epoch
        stopped = []
        for stop in request.partitions:
            tp = stop.topic_partition
            partition = self.partitions.get(tp)
            if (partition is not None and stop.leader_epoch not in (EPOCH_DURING_DELETE, -1)
                    and stop.leader_epoch < partition.leader_epoch):
                response.partition_errors[tp] = ErrorCode.FENCED_LEADER_EPOCH
                continue
            stopped.append(tp)
            if self.fetcher_manager is not None:
                self.fetcher_manager.remove_fetcher_for_partitions([tp])
            if stop.delete:
                self.partitions.pop(tp, None)
                self.offline_partitions.discard(tp)
                self.alter_log_dirs_manager.remove_partitions([tp])
                self.log_manager.remove_future_log(tp)
            for purgatory in (self.produce_purgatory, self.fetch_purgatory, self.delete_records_purgatory):
                purgatory.check_and_complete(tp)
            if stop.delete:
                self.log_manager.delete_log(tp)
        if self.fetcher_manager is not None and stopped:
            await self.fetcher_manager.shutdown_idle_fetchers()
        return response

    def get_partition(self, tp: TopicPartition) -> Partition | None:
        return self.partitions.get(tp)

    def get_log_config(self, tp: TopicPartition) -> LogConfig | None:
        """The configs of the hosted partition's log (None when not hosted)."""
        partition = self.partitions.get(tp)
        return None if partition is None else partition.log.config

    def host_partition(self, partition: Partition) -> None:
        """Start hosting ``partition``: it gets this broker's clock and ISR seam, and tells us
        when a committed ISR change moved its high watermark."""
        partition.time = self.time
        partition.isr_submitter = self.isr_submitter
        partition.replica_lag_time_max_ms = self.replica_lag_time_max_ms
        partition.is_broker_alive = lambda broker: self.metadata_cache.alive_broker(broker) is not None
        partition.on_high_watermark_changed = lambda p: self.complete_delayed_operations(p.topic_partition)
        partition.isr_stats = self.isr_stats
        self.partitions[partition.topic_partition] = partition

    def complete_delayed_operations(self, tp: TopicPartition) -> None:
        """The HW (or the ISR) of ``tp`` moved: re-check everything waiting on it."""
        for purgatory in (self.produce_purgatory, self.fetch_purgatory, self.delete_records_purgatory):
            purgatory.check_and_complete(tp)

    def shrink_isrs(self, replica_lag_time_max_ms: int | None = None) -> None:
        """Kafka's ``maybeShrinkIsr`` over every led partition (scheduled every lag/2)."""
        now = self.time.milliseconds()
        for partition in list(self.partitions.values()):
            if partition.is_leader:
                partition.maybe_shrink_isr(now, replica_lag_time_max_ms)
                if partition.maybe_increment_high_watermark(now):
                    self.complete_delayed_operations(partition.topic_partition)

    def partition_count_errors(
        self, requested: Iterable[tuple[TopicPartition, int]], producing: bool
    ) -> dict[TopicPartition, ErrorCode]:
        """KIP-253: the partitions, led here, that refuse a Produce or Fetch for the client's
        undeleted partition count (-1: it sent none); see ``Partition.partition_count_error``."""
        errors: dict[TopicPartition, ErrorCode] = {}
        for tp, client_count in requested:
            partition = self.partitions.get(tp)
            if partition is not None and partition.is_leader:
                error = partition.partition_count_error(client_count, producing)
                if error != ErrorCode.NONE:
                    errors[tp] = error
        return errors

    def missing_partition_error(self, tp: TopicPartition) -> ErrorCode:
        """Why ``tp`` is not hosted here: its log dir failed (56), it exists elsewhere (6) or not
        at all (3)."""
        if tp in self.offline_partitions:
            return ErrorCode.KAFKA_STORAGE_ERROR
        known = self.metadata_cache.contains(tp)
        return ErrorCode.NOT_LEADER_OR_FOLLOWER if known else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    # --- produce -------------------------------------------------------------------------------

    def handle_produce_append(
        self, required_acks: int, timeout_ms: int, transactional_id: str | None,
        entries: list[tuple[TopicPartition, memoryview | None]], verifier: TransactionVerifier | None,
    ) -> ProduceAppendResults | Awaitable[ProduceAppendResults]:
        """A client's Produce (Kafka's ``handleProduceAppend``): with a ``verifier`` (KIP-890), the
        partitions this broker leads whose transactional batch would open a transaction are first
        verified with the coordinator; then ``append_records``. Returns the results now, or an
        awaitable of them when the verification or the answer must wait."""
        guards = self._start_transaction_verification(transactional_id, entries) if verifier is not None else None
        if guards is not None:
            assert verifier is not None and transactional_id is not None
            return self._verify_then_append(required_acks, timeout_ms, transactional_id, entries, verifier, *guards)
        outcome = self.append_records(required_acks, timeout_ms, entries)
        if asyncio.isfuture(outcome):
            return self._appended_later(outcome)
        return ProduceAppendResults({}, outcome)

    def _start_transaction_verification(
        self, transactional_id: str | None, entries: list[tuple[TopicPartition, memoryview | None]]
    ) -> tuple[int, int, dict[TopicPartition, object]] | None:
        """KIP-890: (producer id, epoch, partition → verification guard) for the partitions led here
        whose transactional batch starts a transaction; None when there are none. Each partition's
        verification starts now: its append needs the guard."""
        if transactional_id is None:
            return None
        now_ms = self.time.milliseconds()
        producer = None
        guards: dict[TopicPartition, object] = {}
        for tp, records in entries:
            partition = self.partitions.get(tp)
            if records is None or partition is None or not partition.is_leader:
                continue  # the append answers the partition's error
            found = _native.transactional_producer(records)
            if found is None:
                continue
            guard = partition.maybe_start_transaction_verification(*found, now_ms)
            if guard is not None:
                producer = found
                guards[tp] = guard
        return None if producer is None else (*producer, guards)

    async def _verify_then_append(
        self, required_acks: int, timeout_ms: int, transactional_id: str,
        entries: list[tuple[TopicPartition, memoryview | None]], verifier: TransactionVerifier,
        producer_id: int, epoch: int, guards: dict[TopicPartition, object],
    ) -> ProduceAppendResults:
        errors = await verifier.verify(transactional_id, producer_id, epoch, list(guards))
        unverified = {
            tp: PartitionAppendResult(code, message, has_custom_error_message=message is not None)
            for tp, error in errors.items() if error != ErrorCode.NONE
            for code, message in [produce_error(error)]
        }
        # A marker written while the coordinator was asked dropped the guard: that append is refused.
        outcome = self.append_records(required_acks, timeout_ms, [e for e in entries if e[0] not in unverified],
                                      verification_guards=guards)
        return ProduceAppendResults(unverified, await outcome if asyncio.isfuture(outcome) else outcome)

    @staticmethod
    async def _appended_later(outcome: asyncio.Future[dict[TopicPartition, PartitionAppendResult]]) -> ProduceAppendResults:
        return ProduceAppendResults({}, await outcome)

    def append_records(
        self, required_acks: int, timeout_ms: int, entries: Iterable[tuple[TopicPartition, memoryview | None]],
        internal_topics_allowed: bool = False, origin: AppendOrigin = AppendOrigin.CLIENT,
        verification_guards: Mapping[TopicPartition, object] | None = None,
    ) -> AppendOutcome:
        """Append to leaders; returns results now, or a future when the answer must wait: for
        acks=all until the high watermarks cover the appends, and for an append after which
        flush.messages forced an fsync until that fsync is done (as Kafka flushes inside the
        append). ``verification_guards``: per partition, the KIP-890 guard its verification
        started with."""
        results: dict[TopicPartition, PartitionAppendResult] = {}
        flushes: dict[TopicPartition, asyncio.Future[None]] = {}
        timestamp = self.time.milliseconds()
        for tp, records in entries:
            results[tp] = result = self._append_one(
                tp, records, required_acks, timestamp, internal_topics_allowed, origin,
                verification_guards.get(tp) if verification_guards else None,
            )
            if result.error in (ErrorCode.NONE, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND):
                self.fetch_purgatory.check_and_complete(tp)
                flush = self.log_manager.maybe_flush_after_append(self.partitions[tp].log)
                if flush is not None:
                    flushes[tp] = flush
        outcome: AppendOutcome = results
        if required_acks == -1 and any(r.required_offset >= 0 for r in results.values()):
            outcome = asyncio.get_running_loop().create_future()
            operation = DelayedProduce(timeout_ms, results, self.partitions.get, outcome)
            # _append_one already found these high watermarks short of the appended records.
            # Watched in the same step as the appends (no await in between): per partition, the
            # purgatory's watch order is append order, which its in-key-order scan relies on.
            self.produce_purgatory.watch(operation, [tp for tp, r in results.items() if r.required_offset >= 0])
        if flushes:
            return asyncio.ensure_future(self._after_flushes(flushes, outcome))
        return outcome

    @staticmethod
    async def _after_flushes(
        flushes: dict[TopicPartition, asyncio.Future[None]], outcome: AppendOutcome
    ) -> dict[TopicPartition, PartitionAppendResult]:
        """The append results once the forced flushes are done; a partition whose flush failed
        answers KAFKA_STORAGE_ERROR (its records may not be on disk)."""
        done = await asyncio.gather(*flushes.values(), return_exceptions=True)
        results = await outcome if asyncio.isfuture(outcome) else outcome
        for tp, error in zip(flushes, done, strict=True):
            if isinstance(error, BaseException):
                log.error("Flushing %s after an append failed: %s", tp, error)
                results[tp] = PartitionAppendResult(ErrorCode.KAFKA_STORAGE_ERROR, str(error))
        return results

    def _append_one(
        self, tp: TopicPartition, records: memoryview | None, required_acks: int, timestamp: int,
        internal_topics_allowed: bool, origin: AppendOrigin, verification_guard: object | None = None,
    ) -> PartitionAppendResult:
        self.topic_stats.produce_request(tp.topic)
        partition = self.partitions.get(tp)
        if partition is None:
            return PartitionAppendResult(self.missing_partition_error(tp))
        if tp.topic in INTERNAL_TOPICS and not internal_topics_allowed:
            return PartitionAppendResult(
                ErrorCode.INVALID_TOPIC_EXCEPTION, f"Cannot append to internal topic {tp.topic}"
            )
        if records is None or len(records) == 0:
            return PartitionAppendResult(ErrorCode.INVALID_RECORD, "Produce request has no record batch")
        try:
            info = partition.append_records_to_leader(records, required_acks, timestamp, origin,
                                                      verification_guard)
        except RecordValidationError as e:
            # Kafka's RecordValidationException: the records' errors and the log start offset.
            log.debug("Append to %s failed: %s", tp, e)
            self.topic_stats.failed_produce(tp.topic)
            return PartitionAppendResult(
                e.code, str(e), log_start_offset=partition.log.log_start_offset,
                record_errors=tuple(e.record_errors), has_custom_error_message=True,
            )
        except KafkaError as e:
            log.debug("Append to %s failed: %s", tp, e)
            if e.code not in _EXPECTED_APPEND_ERRORS:
                self.topic_stats.failed_produce(tp.topic)
            return PartitionAppendResult(e.code, str(e))
        except OSError as e:
            self.log_dir_io_error(tp, "Error while appending records to", e)
            return PartitionAppendResult(ErrorCode.KAFKA_STORAGE_ERROR, str(e))
        self.topic_stats.appended(tp.topic, len(records), info.record_count)
        required = info.last_offset + 1 if required_acks == -1 else -1
        error = ErrorCode.NONE
        if required >= 0:
            done, error = partition.check_enough_replicas_reach_offset(required)
            if done:
                required = -1
        return PartitionAppendResult(
            error=error,
            base_offset=info.first_offset,
            log_append_time=info.log_append_time,
            log_start_offset=partition.log.log_start_offset,
            required_offset=required,
        )

    # --- DeleteRecords ---------------------------------------------------------------------------

    def delete_records(
        self, timeout_ms: int, offsets: dict[TopicPartition, int], leader_only: bool
    ) -> dict[TopicPartition, DeleteRecordsResult] | asyncio.Future[dict[TopicPartition, DeleteRecordsResult]]:
        """Move each partition's log start offset (KIP-107). With ``leader_only`` (KIP-1343) answer
        as soon as the leader has moved it; otherwise wait until the low watermark has too."""
        results = {tp: self._delete_records_on_local_log(tp, offset) for tp, offset in offsets.items()}
        for tp, result in results.items():
            if result.error == ErrorCode.NONE:
                self.on_log_start_offset_changed(tp)
        waiting = [
            tp for tp, r in results.items() if r.error == ErrorCode.NONE and r.low_watermark < r.requested_offset
        ]
        if leader_only or not waiting:
            return results
        future: asyncio.Future[dict[TopicPartition, DeleteRecordsResult]] = asyncio.get_running_loop().create_future()
        operation = DelayedDeleteRecords(timeout_ms, results, self.partitions.get, future)
        self.delete_records_purgatory.try_complete_else_watch(operation, waiting)
        return future

    def _delete_records_on_local_log(self, tp: TopicPartition, offset: int) -> DeleteRecordsResult:
        if tp.topic in INTERNAL_TOPICS:
            return DeleteRecordsResult(
                ErrorCode.INVALID_TOPIC_EXCEPTION, error_message=f"Cannot delete records of internal topic {tp.topic}"
            )
        partition = self.partitions.get(tp)
        if partition is None:
            return DeleteRecordsResult(self.missing_partition_error(tp))
        try:
            requested, low_watermark = partition.delete_records_on_leader(offset)
        except KafkaError as e:
            return DeleteRecordsResult(e.code, error_message=str(e))
        except OSError as e:
            self.log_dir_io_error(tp, "Exception while increasing log start offset of", e)
            return DeleteRecordsResult(ErrorCode.KAFKA_STORAGE_ERROR, error_message=str(e))
        return DeleteRecordsResult(
            ErrorCode.NONE, low_watermark, partition.log.log_start_offset, requested_offset=requested
        )

    def on_log_start_offset_changed(self, tp: TopicPartition) -> None:
        """A replica's (or the leader's) log start offset moved: waiting DeleteRecords may be done,
        and parked follower fetches answer at once with the new leader log start offset."""
        self.delete_records_purgatory.check_and_complete(tp)
        self.fetch_purgatory.check_and_complete(tp)

    # --- fetch ---------------------------------------------------------------------------------

    def read_from_local_log(
        self, replica_id: int, requests: list[FetchPartitionRequest], max_bytes: int, read_committed: bool = False,
        client: ClientMetadata | None = None,
    ) -> tuple[dict[TopicPartition, FetchPartitionResult], int, bool]:
        """Read every requested partition; returns (results, bytes read, whether any failed or
        diverged). A follower (``replica_id >= 0``) reads to the log end offset, after its
        leader-epoch fencing and divergence check; nothing is recorded of its fetch here. A
        consumer reads to the high watermark, or with ``read_committed`` to the last stable
        offset, and then also gets the aborted transactions of what it read.

        KIP-392: a consumer that sent its ``client`` metadata (Fetch v11+) may read a follower
        too (to the follower's high watermark), and a leader whose ``replica.selector.class``
        picks another replica answers that replica's id and no records."""
        results: dict[TopicPartition, FetchPartitionResult] = {}
        remaining = max_bytes
        total = 0
        errors = False
        min_one = True
        follower = replica_id >= 0
        for request in requests:
            tp = request.topic_partition
            partition = self.partitions.get(tp)
            if partition is None:
                results[tp] = FetchPartitionResult(self.missing_partition_error(tp))
                errors = True
                continue
            try:
                partition_log = partition.require_leader() if follower or client is None else partition.log
                partition.check_leader_epoch(request.current_leader_epoch)
                if follower and replica_id not in partition.remote_replicas:
                    raise (UnknownLeaderEpochError if request.current_leader_epoch >= 0 else NotLeaderError)(
                        f"Replica {replica_id} is not a replica of {tp}"
                    )
                hw = partition_log.high_watermark
                lso = partition_log.last_stable_offset
                if follower and request.last_fetched_epoch >= 0:
                    diverging = diverging_epoch(
                        partition_log.leader_epoch_cache, partition_log.log_start_offset,
                        partition_log.log_end_offset, request.last_fetched_epoch, request.fetch_offset,
                    )
                    if diverging is not None:
                        results[tp] = FetchPartitionResult(
                            high_watermark=hw, last_stable_offset=lso,
                            log_start_offset=partition_log.log_start_offset, diverging_epoch=diverging,
                        )
                        errors = True
                        continue
                if client is not None and partition.is_leader:
                    preferred = self.preferred_read_replica(partition, client, request.fetch_offset)
                    if preferred >= 0:
                        results[tp] = FetchPartitionResult(
                            high_watermark=hw, last_stable_offset=lso,
                            log_start_offset=partition_log.log_start_offset, preferred_read_replica=preferred,
                        )
                        continue
                max_offset = partition_log.log_end_offset if follower else lso if read_committed else hw
                limit = min(request.max_bytes, remaining)
                if follower and self.leader_replication_quota is not None \
                        and self._should_leader_throttle(partition, replica_id):
                    limit, min_one = 0, False  # throttled: no records (Kafka's MemoryRecords.EMPTY)
                region = (
                    partition_log.read_region(request.fetch_offset, limit, max_offset, min_one)
                    if limit > 0 or min_one
                    else None
                )
                aborted = (
                    partition_log.collect_aborted_transactions(request.fetch_offset, region.next_offset)
                    if read_committed and region is not None else []
                )
            except KafkaError as e:
                results[tp] = FetchPartitionResult(e.code)
                errors = True
                continue
            except OSError as e:
                self.log_dir_io_error(tp, "Exception while reading from", e)
                results[tp] = FetchPartitionResult(ErrorCode.KAFKA_STORAGE_ERROR)
                errors = True
                continue
            if region is not None:
                min_one = False
                remaining -= len(region)
                total += len(region)
            results[tp] = FetchPartitionResult(
                high_watermark=hw, last_stable_offset=lso,
                log_start_offset=partition_log.log_start_offset,
                records=b"" if region is None else region, aborted_transactions=aborted,
            )
        return results, total, errors

    def _record_follower_fetch(
        self, replica_id: int, requests: list[FetchPartitionRequest], results: dict[TopicPartition, FetchPartitionResult]
    ) -> None:
        """After a follower fetch was read: record it on each partition that answered without
        an error or divergence (Kafka's ``updateFollowerFetchState``), and complete what the
        new HW, ISR or low watermark allows."""
        now = self.time.milliseconds()
        for request in requests:
            tp = request.topic_partition
            result = results.get(tp)
            partition = self.partitions.get(tp)
            if result is None or result.error != ErrorCode.NONE or result.diverging_epoch is not None:
                continue
            if partition is None or not partition.is_leader:
                continue
            outcome = partition.update_follower_fetch_state(
                replica_id, request.fetch_offset, request.log_start_offset, now, partition.log.log_end_offset
            )
            if outcome.high_watermark_changed:
                self.complete_delayed_operations(tp)
            elif outcome.log_start_offset_changed:
                self.delete_records_purgatory.check_and_complete(tp)

    def _follower_read(
        self, replica_id: int, requests: list[FetchPartitionRequest], max_bytes: int
    ) -> dict[TopicPartition, FetchPartitionResult]:
        results = self.read_from_local_log(replica_id, requests, max_bytes)[0]
        self._record_follower_fetch(replica_id, requests, results)
        return results

    def fetch_messages(
        self, replica_id: int, max_wait_ms: int, min_bytes: int, max_bytes: int,
        requests: list[FetchPartitionRequest], read_committed: bool = False, client: ClientMetadata | None = None,
    ) -> dict[TopicPartition, FetchPartitionResult] | asyncio.Future[dict[TopicPartition, FetchPartitionResult]]:
        """Read now if the read may be answered (`fetch_answerable`, or no waiting is wanted),
        else long-poll in the purgatory. A follower's fetch is recorded when it is answered (at
        once, or when the parked fetch completes)."""
        results, total, errors = self.read_from_local_log(replica_id, requests, max_bytes, read_committed, client)
        follower = replica_id >= 0
        if follower:
            # Kafka records a follower's position before deciding to park: the HW may move now.
            self._record_follower_fetch(replica_id, requests, results)

        def answerable(results: dict[TopicPartition, FetchPartitionResult], total: int, errors: bool) -> bool:
            return self.fetch_answerable(replica_id, requests, min_bytes, read_committed, results, total, errors)

        if max_wait_ms <= 0 or not requests or answerable(results, total, errors):
            self.topic_stats.fetched(replica_id, results)
            return results
        future: asyncio.Future[dict[TopicPartition, FetchPartitionResult]] = asyncio.get_running_loop().create_future()
        operation = DelayedFetch(
            max_wait_ms, lambda: self.read_from_local_log(replica_id, requests, max_bytes, read_committed, client),
            answerable, future,
            final_read=(lambda: self._follower_read(replica_id, requests, max_bytes)) if follower else None,
        )
        # The read above found too little; wait for appends to these partitions (or the deadline).
        self.fetch_purgatory.watch(operation, [r.topic_partition for r in requests])
        self.topic_stats.fetched_later(replica_id, future)
        return future

    def preferred_read_replica(self, partition: Partition, client: ClientMetadata, fetch_offset: int) -> int:
        """KIP-392 on a leader (Kafka's ``findPreferredReadReplica``): the replica the configured
        selector picks for ``client`` among the leader and the in-sync followers whose log holds
        ``fetch_offset`` and that have an endpoint on the client's listener; -1 for the leader or
        without a selector."""
        if self.replica_selector is None:
            return -1
        now_ms = self.time.milliseconds()

        def rack_on_listener(broker_id: int) -> tuple[bool, str | None]:
            broker = self.metadata_cache.alive_broker(broker_id)
            if broker is None or broker.endpoint(client.listener) is None:
                return False, None
            return True, broker.rack

        reachable, rack = rack_on_listener(self.broker_id)
        leader = ReplicaView(self.broker_id, rack, partition.log.log_end_offset, 0)
        candidates = [leader] if reachable else []
        for replica in partition.remote_replicas.values():
            reachable, rack = rack_on_listener(replica.broker_id)
            if (reachable and replica.broker_id in partition.isr
                    and replica.log_start_offset <= fetch_offset <= replica.log_end_offset):
                candidates.append(ReplicaView(replica.broker_id, rack, replica.log_end_offset,
                                              now_ms - replica.last_caught_up_time_ms))
        chosen = self.replica_selector(client.rack, leader, candidates)
        return -1 if chosen == leader or chosen not in candidates else chosen.broker_id

    def fetch_answerable(
        self, replica_id: int, requests: list[FetchPartitionRequest], min_bytes: int, read_committed: bool,
        results: dict[TopicPartition, FetchPartitionResult], total: int, errors: bool,
    ) -> bool:
        """Whether a fetch whose read gave ``results`` (``total`` bytes) is answered now rather
        than parked, or a parked one completes: Kafka's ``DelayedFetch.tryComplete`` cases.

        * A-E, H: a partition answered an error (no longer leader or follower, unknown, storage,
          fenced or unknown leader epoch, offset out of range) or a diverging epoch;
        * G: ``min_bytes`` readable;
        * F: the fetch offset lies on another segment than the end offset it reads to (the log
          end offset for a follower, the last stable offset for read_committed, else the high
          watermark): on an older one the read stopped at its segment's end and waiting cannot
          gather more (unless the follower is throttled), on a newer one the log was truncated;
        * beyond Kafka: a follower reported a log start offset below its leader's, so it learns
          the new one at once (KIP-107: DeleteRecords reaches the followers in one round trip).
        """
        if total >= min_bytes or errors:
            return True
        follower = replica_id >= 0
        for request in requests:
            tp = request.topic_partition
            result = results.get(tp)
            partition = self.partitions.get(tp)
            if result is None or partition is None or partition.log is None:
                continue
            if follower and result.log_start_offset > request.log_start_offset >= 0:
                return True
            log_ = partition.log
            end = (log_.log_end_offset if follower
                   else log_.last_stable_offset if read_committed else log_.high_watermark)
            if request.fetch_offset == end:
                continue  # also just after a roll: the end is the new segment's base
            if log_.segment_base_offset_of(request.fetch_offset) != log_.segment_base_offset_of(end):
                behind = request.fetch_offset < end
                if not (behind and follower and self._should_leader_throttle(partition, replica_id)):
                    return True
        return False

    async def shutdown(self) -> None:
        """Stop fetching and the ISR task, then answer everything waiting in the purgatories."""
        if self._isr_expiration is not None:
            self._isr_expiration.cancel()
        if self.fetcher_manager is not None:
            await self.fetcher_manager.shutdown()
        await self.alter_log_dirs_manager.shutdown()
        for notification in list(self._notifications):
            await asyncio.gather(notification, return_exceptions=True)
        for purgatory in (self.produce_purgatory, self.fetch_purgatory, self.delete_records_purgatory):
            purgatory.shutdown()

    # --- log dirs (KIP-112, KIP-113) -----------------------------------------------------------

    def describe_log_dirs(self, partitions: set[TopicPartition] | None) -> list[LogDirDescription]:
        """Kafka's ``describeLogDirs``: every configured dir with its volume's total and usable
        bytes and the logs of ``partitions`` (None: all) in it, current and future; an offline
        dir answers KAFKA_STORAGE_ERROR and nothing else."""
        manager = self.log_manager
        by_dir: dict[str, list[LogDirReplica]] = {}
        for logs, dir_of, is_future in ((manager.logs, manager.dir_of, False),
                                        (manager.future_logs, manager.future_dir_of, True)):
            for tp, partition_log in logs.items():
                log_dir = dir_of(tp)
                if log_dir is None or (partitions is not None and tp not in partitions):
                    continue
                by_dir.setdefault(log_dir, []).append(LogDirReplica(
                    tp, partition_log.size_in_bytes, self._log_end_offset_lag(tp, partition_log.log_end_offset, is_future),
                    is_future,
                ))
        described = []
        for log_dir in manager.log_dirs:
            if not manager.is_log_dir_online(log_dir):
                described.append(LogDirDescription(log_dir, ErrorCode.KAFKA_STORAGE_ERROR))
                continue
            try:
                volume = os.statvfs(log_dir)
            except OSError as e:
                log.warning("Unable to describe replica dirs for %s: %s", log_dir, e)
                described.append(LogDirDescription(log_dir, ErrorCode.KAFKA_STORAGE_ERROR))
                continue
            described.append(LogDirDescription(
                log_dir, ErrorCode.NONE, by_dir.get(log_dir, []),
                total_bytes=volume.f_blocks * volume.f_frsize, usable_bytes=volume.f_bavail * volume.f_frsize,
            ))
        return described

    def _log_end_offset_lag(self, tp: TopicPartition, log_end_offset: int, is_future: bool) -> int:
        """Kafka's ``getLogEndOffsetLag``: a future log's distance to the current log's end; a
        current log's to its high watermark (never negative)."""
        current = self.log_manager.get_log(tp)
        if current is None:
            return INVALID_OFFSET_LAG
        if is_future:
            return current.log_end_offset - log_end_offset
        return max(current.high_watermark - log_end_offset, 0)

    async def alter_replica_log_dirs(self, partition_dirs: Mapping[TopicPartition, str]) -> dict[TopicPartition, ErrorCode]:
        """Kafka's ``alterReplicaLogDirs``: per partition, move its replica to the given dir (a
        future log there, copied and swapped in), or cancel a move when the dir is its current
        one. A partition not hosted here remembers the dir for its creation and answers
        REPLICA_NOT_AVAILABLE (UNKNOWN_TOPIC_OR_PARTITION if it does not exist); an unknown dir LOG_DIR_NOT_FOUND; an offline dir or partition, or
        any offline dir when a future log would be created, KAFKA_STORAGE_ERROR."""
        manager = self.log_manager
        results: dict[TopicPartition, ErrorCode] = {}
        for tp, requested_dir in partition_dirs.items():
            destination = os.path.abspath(requested_dir)
            if len(f"{tp}.{'0' * 32}-future") > 255:
                results[tp] = ErrorCode.INVALID_TOPIC_EXCEPTION
            elif destination not in manager.log_dirs:
                log.warning("Unable to alter log dirs for %s: Log dir %s is not found in the config.", tp, destination)
                results[tp] = ErrorCode.LOG_DIR_NOT_FOUND
            elif not manager.is_log_dir_online(destination) or tp in self.offline_partitions:
                results[tp] = ErrorCode.KAFKA_STORAGE_ERROR
            else:
                results[tp] = await self._alter_replica_log_dir(tp, destination)
        return results

    async def _alter_replica_log_dir(self, tp: TopicPartition, destination: str) -> ErrorCode:
        manager = self.log_manager
        future_dir = manager.future_dir_of(tp)
        if tp in self.partitions and future_dir is not None and future_dir != destination:
            self.alter_log_dirs_manager.remove_partitions([tp])  # the destination changed
            manager.remove_future_log(tp)
        manager.maybe_update_preferred_log_dir(tp, destination)
        partition = self.partitions.get(tp)
        if partition is None:  # Kafka's getPartitionOrException for a follower's question
            return ErrorCode.REPLICA_NOT_AVAILABLE if self.metadata_cache.contains(tp) else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if manager.dir_of(tp) == destination or manager.future_dir_of(tp) == destination:
            return ErrorCode.NONE
        if manager.failure_channel.offline_log_dirs:
            return ErrorCode.KAFKA_STORAGE_ERROR
        try:
            await manager.create_future_log(tp, partition.topic_id, destination)
        except OSError as e:
            manager.failure_channel.maybe_add_offline_log_dir(
                destination, f"Error while creating the future log of {tp} in dir {destination}", e)
            return ErrorCode.KAFKA_STORAGE_ERROR
        if self.partitions.get(tp) is not partition:  # stopped meanwhile
            manager.remove_future_log(tp)
            return ErrorCode.REPLICA_NOT_AVAILABLE
        log.info("Moving the replica of %s from %s to %s", tp, manager.dir_of(tp), destination)
        self.alter_log_dirs_manager.add_partition(tp)
        return ErrorCode.NONE

    def _maybe_add_log_dir_fetchers(self, partitions: list[Partition]) -> None:
        """Kafka's ``maybeAddLogDirFetchers``: a hosted partition with a future log (one loaded at
        start-up) resumes its move."""
        for partition in partitions:
            tp = partition.topic_partition
            if self.log_manager.get_future_log(tp) is not None:
                self.alter_log_dirs_manager.add_partition(tp)

    def log_dir_io_error(self, tp: TopicPartition, operation: str, error: OSError, *, future: bool = False) -> None:
        """Kafka's ``maybeHandleIOException``: an I/O error on the (current or future) log of
        ``tp`` takes its log dir offline through the failure channel (the caller answers
        KAFKA_STORAGE_ERROR); a log no longer here (deleted meanwhile) only logs it."""
        manager = self.log_manager
        channel = getattr(manager, "failure_channel", None)
        dir_of = getattr(manager, "future_dir_of" if future else "dir_of", None)
        log_dir = dir_of(tp) if dir_of is not None else None
        if channel is None or log_dir is None:
            log.error("%s %s failed with a storage error: %s", operation, tp, error)
            return
        channel.maybe_add_offline_log_dir(log_dir, f"{operation} {tp} in dir {log_dir}", error)

    def _on_follower_storage_error(self, tp: TopicPartition, error: OSError) -> None:
        """A replica fetcher's append or truncation of ``tp`` met an I/O error."""
        self.log_dir_io_error(tp, "Error while processing data for partition", error)

    def _on_future_log_swapped(self, tp: TopicPartition, new_log: Log) -> None:
        partition = self.partitions.get(tp)
        if partition is not None:
            partition.log = new_log
        self.complete_delayed_operations(tp)

    def handle_log_dir_failure(self, log_dir: str, send_notification: bool = True) -> None:
        """Kafka's ``handleLogDirFailure``: the partitions whose log is in ``log_dir`` go offline
        (no longer hosted: KAFKA_STORAGE_ERROR to produce, fetch and LeaderAndIsr; their
        fetchers stop), moves into or out of it stop, the dir's logs are dropped, and the
        controller is told through ZooKeeper."""
        manager = self.log_manager
        if log_dir in self._failed_dirs_handled:
            return
        self._failed_dirs_handled.add(log_dir)
        log.warning("Stopping serving replicas in dir %s", log_dir)
        offline = [tp for tp in self.partitions if manager.dir_of(tp) == log_dir]
        moving = [tp for tp in self.partitions if manager.future_dir_of(tp) == log_dir]
        if self.fetcher_manager is not None:
            self.fetcher_manager.remove_fetcher_for_partitions(offline)
        self.alter_log_dirs_manager.remove_partitions(offline + moving)
        for tp in offline:
            self.partitions.pop(tp, None)
            self.offline_partitions.add(tp)
        for tp in offline + moving:
            self.complete_delayed_operations(tp)
        log.warning("Broker %d stopped fetcher for partitions %s and stopped moving logs for partitions %s because "
                    "they are in the failed log directory %s.", self.broker_id, ",".join(map(str, offline)),
                    ",".join(map(str, moving)), log_dir)
        manager.handle_log_dir_failure(log_dir)
        if send_notification and self.on_log_dir_failure_notify is not None:
            notification = asyncio.ensure_future(self._notify_log_dir_failure())
            self._notifications.add(notification)
            notification.add_done_callback(self._notifications.discard)
        log.warning("Stopped serving replicas in dir %s", log_dir)

    async def _notify_log_dir_failure(self) -> None:
        assert self.on_log_dir_failure_notify is not None
        try:
            await self.on_log_dir_failure_notify()
        except Exception as e:
            log.warning("Could not tell the controller that a log dir failed: %s", e)
