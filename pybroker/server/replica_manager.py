"""The replica manager: hosted partitions, appends, reads, and the delayed operations on them.

Owns the map of partitions this broker hosts, applying metadata (become leader, stop hosting),
appending produce record sets to leaders (with Kafka's per-partition error mapping), reading for
fetches (consumer or follower view), and the purgatories for delayed produce and delayed fetch.
Handlers in ``server/apis`` translate wire messages to and from these calls; this module never
sees wire classes.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from pybroker import _native
from pybroker.controller.metadata import INTERNAL_TOPICS, topic_id_to_string
from pybroker.controller.requests import (
    EPOCH_DURING_DELETE,
    ControlResponse,
    LeaderAndIsr,
    PartitionState,
    StopReplica,
)
from pybroker.log.log import InvalidRecordError, OffsetOutOfRangeError
from pybroker.log.log_manager import LogManager
from pybroker.log.producer_state import InvalidProducerEpochError, OutOfOrderSequenceError
from pybroker.protocol.errors import ErrorCode
from pybroker.server.metadata_cache import MetadataCache
from pybroker.server.partition import (
    FencedLeaderEpochError,
    NotEnoughReplicasError,
    NotLeaderError,
    Partition,
    PolicyViolationError,
    UnknownLeaderEpochError,
)
from pybroker.server.purgatory import DelayedOperation, Purgatory
from pybroker.types import TopicPartition

log = logging.getLogger(__name__)

_APPEND_ERRORS: dict[type[BaseException], ErrorCode] = {
    _native.CorruptRecordError: ErrorCode.CORRUPT_MESSAGE,
    _native.RecordTooLargeError: ErrorCode.MESSAGE_TOO_LARGE,
    InvalidRecordError: ErrorCode.INVALID_RECORD,
    OutOfOrderSequenceError: ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
    InvalidProducerEpochError: ErrorCode.INVALID_PRODUCER_EPOCH,
    NotEnoughReplicasError: ErrorCode.NOT_ENOUGH_REPLICAS,
    NotLeaderError: ErrorCode.NOT_LEADER_OR_FOLLOWER,
}

_READ_ERRORS: dict[type[BaseException], ErrorCode] = {
    OffsetOutOfRangeError: ErrorCode.OFFSET_OUT_OF_RANGE,
    NotLeaderError: ErrorCode.NOT_LEADER_OR_FOLLOWER,
    FencedLeaderEpochError: ErrorCode.FENCED_LEADER_EPOCH,
    UnknownLeaderEpochError: ErrorCode.UNKNOWN_LEADER_EPOCH,
}

_DELETE_RECORDS_ERRORS: dict[type[BaseException], ErrorCode] = {
    NotLeaderError: ErrorCode.NOT_LEADER_OR_FOLLOWER,
    PolicyViolationError: ErrorCode.POLICY_VIOLATION,
    OffsetOutOfRangeError: ErrorCode.OFFSET_OUT_OF_RANGE,
}


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class PartitionAppendResult:
    error: ErrorCode = ErrorCode.NONE
    error_message: str | None = None
    base_offset: int = -1
    log_append_time: int = -1
    log_start_offset: int = -1
    required_offset: int = -1  # acks=all: the high watermark this append waits for


# Append results now, or a future of them when the answer must wait.
AppendOutcome = dict[TopicPartition, PartitionAppendResult] | asyncio.Future[dict[TopicPartition, PartitionAppendResult]]


@dataclass
class FetchPartitionRequest:
    topic_partition: TopicPartition
    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int = -1
    log_start_offset: int = -1  # a follower's, reported in its fetch


@dataclass
class FetchPartitionResult:
    error: ErrorCode = ErrorCode.NONE
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    # The batches read, left in the log file: the response sends them without copying.
    records: _native.LogRegion | bytes = b""


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
            elif partition.high_watermark >= self.results[tp].required_offset:
                self.results[tp].required_offset = -1
        if self._pending():
            return False
        return self.force_complete()

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
    """A long poll: waits until ``min_bytes`` are readable or ``max_wait_ms`` passes."""

    def __init__(
        self,
        max_wait_ms: int,
        min_bytes: int,
        read: Callable[[], tuple[dict[TopicPartition, FetchPartitionResult], int, bool]],
        future: asyncio.Future[dict[TopicPartition, FetchPartitionResult]],
    ) -> None:
        super().__init__(max_wait_ms)
        self._min_bytes = min_bytes
        self._read = read
        self._future = future
        self._result: dict[TopicPartition, FetchPartitionResult] | None = None

    def try_complete(self) -> bool:
        results, total, errors = self._read()
        if total >= self._min_bytes or errors:
            self._result = results
            return self.force_complete()
        return False

    def on_complete(self) -> None:
        if self._result is None:
            self._result = self._read()[0]
        if not self._future.done():
            self._future.set_result(self._result)


class ReplicaManager:
    """The partitions hosted by this broker and the operations on them."""

    def __init__(self, broker_id: int, log_manager: LogManager, metadata_cache: MetadataCache) -> None:
        self.broker_id = broker_id
        self.log_manager = log_manager
        self.metadata_cache = metadata_cache
        self.partitions: dict[TopicPartition, Partition] = {}
        self.produce_purgatory = Purgatory("Produce")
        self.fetch_purgatory = Purgatory("Fetch")
        self.delete_records_purgatory = Purgatory("DeleteRecords")
        self.controller_epoch = 0  # the highest controller epoch seen (fences stale controllers)

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
        for state in request.partition_states:
            tp = state.topic_partition
            partition = self.partitions.get(tp)
            if self.broker_id not in state.replicas:
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
        logs = await self.log_manager.create_logs(wanted) if wanted else {}
        now = now_ms()
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
                self.partitions[tp] = partition
            if state.leader == self.broker_id:
                partition.make_leader(state, now)
                outcome.leaders.append(partition)
            else:
                partition.make_follower(state)
                outcome.followers.append(partition)
            for purgatory in (self.produce_purgatory, self.fetch_purgatory, self.delete_records_purgatory):
                purgatory.check_and_complete(tp)
        return outcome

    def stop_replicas(self, request: StopReplica) -> ControlResponse:
        """Apply a StopReplica: stop hosting the partitions, deleting their logs when asked;
        operations waiting on them complete (with NOT_LEADER_OR_FOLLOWER or unknown)."""
        response = ControlResponse()
        if request.controller_epoch < self.controller_epoch:
            response.error = ErrorCode.STALE_CONTROLLER_EPOCH
            return response
        self.controller_epoch = request.controller_epoch
        for stop in request.partitions:
            tp = stop.topic_partition
            partition = self.partitions.get(tp)
            if (partition is not None and stop.leader_epoch not in (EPOCH_DURING_DELETE, -1)
                    and stop.leader_epoch < partition.leader_epoch):
                response.partition_errors[tp] = ErrorCode.FENCED_LEADER_EPOCH
                continue
            if stop.delete:
                self.partitions.pop(tp, None)
            for purgatory in (self.produce_purgatory, self.fetch_purgatory, self.delete_records_purgatory):
                purgatory.check_and_complete(tp)
            if stop.delete:
                self.log_manager.delete_log(tp)
        return response

    def get_partition(self, tp: TopicPartition) -> Partition | None:
        return self.partitions.get(tp)

    def missing_partition_error(self, tp: TopicPartition) -> ErrorCode:
        """Why ``tp`` is not hosted here: it exists elsewhere (6) or not at all (3)."""
        known = self.metadata_cache.contains(tp)
        return ErrorCode.NOT_LEADER_OR_FOLLOWER if known else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    # --- produce -------------------------------------------------------------------------------

    def append_records(
        self, required_acks: int, timeout_ms: int, entries: Iterable[tuple[TopicPartition, memoryview | None]],
        internal_topics_allowed: bool = False,
    ) -> AppendOutcome:
        """Append to leaders; returns results now, or a future when the answer must wait: for
        acks=all until the high watermarks cover the appends, and for an append after which
        flush.messages forced an fsync until that fsync is done (as Kafka flushes inside the
        append)."""
        results: dict[TopicPartition, PartitionAppendResult] = {}
        flushes: dict[TopicPartition, asyncio.Future[None]] = {}
        timestamp = now_ms()
        for tp, records in entries:
            results[tp] = result = self._append_one(tp, records, required_acks, timestamp, internal_topics_allowed)
            if result.error == ErrorCode.NONE:
                self.fetch_purgatory.check_and_complete(tp)
                flush = self.log_manager.maybe_flush_after_append(self.partitions[tp].log)
                if flush is not None:
                    flushes[tp] = flush
        outcome: AppendOutcome = results
        if required_acks == -1 and any(r.required_offset >= 0 for r in results.values()):
            outcome = asyncio.get_running_loop().create_future()
            operation = DelayedProduce(timeout_ms, results, self.partitions.get, outcome)
            # _append_one already found these high watermarks short of the appended records.
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
        internal_topics_allowed: bool,
    ) -> PartitionAppendResult:
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
            info = partition.append_records_to_leader(records, required_acks, timestamp)
        except tuple(_APPEND_ERRORS) as e:
            code = next(c for t, c in _APPEND_ERRORS.items() if isinstance(e, t))
            log.debug("Append to %s failed: %s", tp, e)
            return PartitionAppendResult(code, str(e))
        except OSError as e:
            log.error("Append to %s failed with a storage error: %s", tp, e)
            return PartitionAppendResult(ErrorCode.KAFKA_STORAGE_ERROR, str(e))
        required = info.last_offset + 1 if required_acks == -1 else -1
        if required >= 0 and partition.high_watermark >= required:
            required = -1
        return PartitionAppendResult(
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
        except tuple(_DELETE_RECORDS_ERRORS) as e:
            code = next(c for t, c in _DELETE_RECORDS_ERRORS.items() if isinstance(e, t))
            return DeleteRecordsResult(code, error_message=str(e))
        except OSError as e:
            log.error("DeleteRecords on %s failed with a storage error: %s", tp, e)
            return DeleteRecordsResult(ErrorCode.KAFKA_STORAGE_ERROR, error_message=str(e))
        return DeleteRecordsResult(
            ErrorCode.NONE, low_watermark, partition.log.log_start_offset, requested_offset=requested
        )

    def on_log_start_offset_changed(self, tp: TopicPartition) -> None:
        """A replica's (or the leader's) log start offset moved: waiting DeleteRecords may be done.
        (Follower fetches will report theirs here once replication lands.)"""
        self.delete_records_purgatory.check_and_complete(tp)

    # --- fetch ---------------------------------------------------------------------------------

    def read_from_local_log(
        self, replica_id: int, requests: list[FetchPartitionRequest], max_bytes: int
    ) -> tuple[dict[TopicPartition, FetchPartitionResult], int, bool]:
        """Read every requested partition; returns (results, bytes read, whether any failed)."""
        results: dict[TopicPartition, FetchPartitionResult] = {}
        remaining = max_bytes
        total = 0
        errors = False
        min_one = True
        for request in requests:
            tp = request.topic_partition
            partition = self.partitions.get(tp)
            if partition is None:
                results[tp] = FetchPartitionResult(self.missing_partition_error(tp))
                errors = True
                continue
            try:
                partition_log = partition.require_leader()
                partition.check_leader_epoch(request.current_leader_epoch)
                max_offset = partition_log.log_end_offset if replica_id >= 0 else partition_log.high_watermark
                limit = min(request.max_bytes, remaining)
                region = (
                    partition_log.read_region(request.fetch_offset, limit, max_offset, min_one)
                    if limit > 0 or min_one
                    else None
                )
            except tuple(_READ_ERRORS) as e:
                code = next(c for t, c in _READ_ERRORS.items() if isinstance(e, t))
                results[tp] = FetchPartitionResult(code)
                errors = True
                continue
            except OSError as e:
                log.error("Read from %s failed with a storage error: %s", tp, e)
                results[tp] = FetchPartitionResult(ErrorCode.KAFKA_STORAGE_ERROR)
                errors = True
                continue
            if region is not None:
                min_one = False
                remaining -= len(region)
                total += len(region)
            hw = partition_log.high_watermark
            results[tp] = FetchPartitionResult(
                high_watermark=hw, last_stable_offset=hw,
                log_start_offset=partition_log.log_start_offset,
                records=b"" if region is None else region,
            )
        return results, total, errors

    def fetch_messages(
        self, replica_id: int, max_wait_ms: int, min_bytes: int, max_bytes: int,
        requests: list[FetchPartitionRequest],
    ) -> dict[TopicPartition, FetchPartitionResult] | asyncio.Future[dict[TopicPartition, FetchPartitionResult]]:
        """Read now if enough is there (or no waiting is wanted), else long-poll in the purgatory."""
        results, total, errors = self.read_from_local_log(replica_id, requests, max_bytes)
        if max_wait_ms <= 0 or not requests or total >= min_bytes or errors:
            return results
        future: asyncio.Future[dict[TopicPartition, FetchPartitionResult]] = asyncio.get_running_loop().create_future()
        operation = DelayedFetch(
            max_wait_ms, min_bytes, lambda: self.read_from_local_log(replica_id, requests, max_bytes), future
        )
        # The read above found too little; wait for appends to these partitions (or the deadline).
        self.fetch_purgatory.watch(operation, [r.topic_partition for r in requests])
        return future

    async def shutdown(self) -> None:
        """Answer everything waiting in the purgatories."""
        for purgatory in (self.produce_purgatory, self.fetch_purgatory, self.delete_records_purgatory):
            purgatory.shutdown()
