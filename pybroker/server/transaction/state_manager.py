"""The transactional ids this broker coordinates and their persistence in ``__transaction_state``.

Owns (Kafka's ``TransactionStateManager``):

* the cache of ``TransactionMetadata`` per ``__transaction_state`` partition this broker leads,
  each with its coordinator epoch (the partition's leader epoch when this broker became its
  leader), and the partitions being loaded, whose ids answer COORDINATOR_LOAD_IN_PROGRESS; any
  other id answers NOT_COORDINATOR;
* creating ``__transaction_state`` on first use (``transaction.state.log.num.partitions``,
  ``.replication.factor``, ``.segment.bytes``, ``.min.isr`` as its ``min.insync.replicas``,
  compacted, uncompressed, no unclean leader election);
* loading a partition when this broker becomes its leader: its log is read from the log start
  offset to the log end offset (one native read of up to ``transaction.state.log.load.buffer.size``
  at a time on the event loop, split into records by the native ``read_records`` and decoded in a
  worker thread), the latest value per transactional id wins and a tombstone removes it; a load
  is abandoned as soon as its (partition, epoch) is no longer the one being loaded. Transactions
  found in PrepareCommit or PrepareAbort are handed back to have their markers sent again. On
  resignation the partition's ids are dropped;
* appending a transition to the log (acks=all, one record, the transaction timeout as the
  append's timeout), applying it to the cache once the append succeeded under the same
  coordinator epoch, and mapping append errors as Kafka's ``appendTransactionToLog`` does;
* which Ongoing transactions have timed out (the coordinator aborts them), and the expiry of
  transactional ids idle for ``transactional.id.expiration.ms`` (tombstones, every
  ``transaction.remove.expired.transaction.cleanup.interval.ms``), on the injected scheduler and
  clock.

Record bytes are built and split by the native module, one call per batch; keys and values are
encoded per record in Python (``transaction_log``). Everything else runs on the event loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TypeVar

from pybroker import _native
from pybroker.common.errors import ErrorCode
from pybroker.common.topic import InvalidReplicationFactorError
from pybroker.log.log import AppendOrigin
from pybroker.scheduler import SYSTEM_TIME, ScheduledTask, Scheduler, Time
from pybroker.server.replica_manager import PartitionAppendResult, ReplicaManager
from pybroker.server.transaction import transaction_log
from pybroker.server.transaction.metadata import (
    IllegalStateError,
    TransactionMetadata,
    TransactionResult,
    TransactionState,
    TxnTransitMetadata,
)
from pybroker.server.transaction.transaction_log import (
    TRANSACTION_STATE_TOPIC,
    RecordFormatError,
    TxnKey,
)
from pybroker.types import TopicPartition

log = logging.getLogger(__name__)

_T = TypeVar("_T")

# Kafka's RecordBatch overhead and a record's worst-case framing, to keep a tombstone batch under
# the partition's max.message.bytes.
_BATCH_OVERHEAD = 61
_RECORD_OVERHEAD = 32


@dataclass
class TransactionConfig:
    """The broker properties the transaction coordinator follows (Kafka's ``TransactionConfig``)."""

    transactional_id_expiration_ms: int = 604800000
    transaction_max_timeout_ms: int = 900000
    transaction_log_num_partitions: int = 50
    transaction_log_replication_factor: int = 1
    transaction_log_segment_bytes: int = 104857600
    transaction_log_load_buffer_size: int = 5242880
    transaction_log_min_insync_replicas: int = 1
    abort_timed_out_transactions_interval_ms: int = 10000
    remove_expired_transactional_ids_interval_ms: int = 3600000
    request_timeout_ms: int = 30000


@dataclass
class CoordinatorEpochAndTxnMetadata:
    coordinator_epoch: int
    transaction_metadata: TransactionMetadata


@dataclass
class TxnMetadataCacheEntry:
    """One loaded partition: its coordinator epoch and its transactional ids."""

    coordinator_epoch: int
    metadata_per_transactional_id: dict[str, TransactionMetadata] = field(default_factory=dict)


@dataclass(frozen=True)
class TransactionalIdAndProducerIdEpoch:
    transactional_id: str
    producer_id: int
    producer_epoch: int


@dataclass
class ListedTransactions:
    """ListTransactions' answer: an error, the state filters no state has, and (id, producer id,
    state name) of every transaction listed."""

    error: ErrorCode
    unknown_state_filters: list[str] = field(default_factory=list)
    states: list[tuple[str, int, str]] = field(default_factory=list)


# What a lookup of a transactional id gives: an error (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS),
# None (not known here), or its metadata with the coordinator epoch of its partition.
TxnStateLookup = ErrorCode | CoordinatorEpochAndTxnMetadata | None
SendTxnMarkers = Callable[[int, TransactionResult, TransactionMetadata, TxnTransitMetadata], None]

# How Kafka's coordinator reports a failed append to __transaction_state.
_APPEND_ERRORS = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.REQUEST_TIMED_OUT: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR,
    ErrorCode.MESSAGE_TOO_LARGE: ErrorCode.UNKNOWN_SERVER_ERROR,
    ErrorCode.RECORD_LIST_TOO_LARGE: ErrorCode.UNKNOWN_SERVER_ERROR,
}


class TransactionTopicUnavailable(Exception):
    """``__transaction_state`` does not exist and cannot be created (e.g. too few brokers)."""


class TransactionStateManager:
    """Transactional ids by partition of ``__transaction_state``, and their records there."""

    def __init__(
        self,
        broker_id: int,
        replica_manager: ReplicaManager,
        create_topic: Callable[[str, int, int, dict[str, str | None]], Awaitable[object]],
        config: TransactionConfig,
        scheduler: Scheduler,
        time: Time = SYSTEM_TIME,
    ) -> None:
        self.broker_id = broker_id
        self.replica_manager = replica_manager
        self._create_topic = create_topic
        self.config = config
        self.scheduler = scheduler
        self.time = time
        self.loading_partitions: set[tuple[int, int]] = set()  # (partition, coordinator epoch)
        self.transaction_metadata_cache: dict[int, TxnMetadataCacheEntry] = {}
        self._loads: set[asyncio.Task[None]] = set()
        self._executor: ThreadPoolExecutor | None = None
        self._expiration_task: ScheduledTask | None = None
        self._shutting_down = False

    # --- the topic ------------------------------------------------------------------------------

    def partition_for(self, transactional_id: str) -> int:
        count = self.replica_manager.metadata_cache.partition_count(TRANSACTION_STATE_TOPIC)
        return transaction_log.partition_for(transactional_id, count or self.config.transaction_log_num_partitions)

    def transaction_topic_configs(self) -> dict[str, str | None]:
        return {
            "unclean.leader.election.enable": "false",
            "compression.type": "uncompressed",
            "cleanup.policy": "compact",
            "min.insync.replicas": str(self.config.transaction_log_min_insync_replicas),
            "segment.bytes": str(self.config.transaction_log_segment_bytes),
        }

    async def ensure_transaction_topic(self) -> None:
        """Create ``__transaction_state`` if it does not exist yet (first FindCoordinator for a
        transactional id); raises TransactionTopicUnavailable if it cannot be."""
        if self.replica_manager.metadata_cache.partition_count(TRANSACTION_STATE_TOPIC):
            return
        try:
            await self._create_topic(
                TRANSACTION_STATE_TOPIC, self.config.transaction_log_num_partitions,
                self.config.transaction_log_replication_factor, self.transaction_topic_configs(),
            )
        except InvalidReplicationFactorError as e:
            raise TransactionTopicUnavailable(
                f"Cannot create {TRANSACTION_STATE_TOPIC}: {e} Set transaction.state.log.replication.factor to at "
                "most the number of brokers."
            ) from e

    def validate_transaction_timeout_ms(self, txn_timeout_ms: int) -> bool:
        return 0 < txn_timeout_ms <= self.config.transaction_max_timeout_ms

    # --- the cache ------------------------------------------------------------------------------

    def get_transaction_state(self, transactional_id: str) -> TxnStateLookup:
        return self._get_and_maybe_add(transactional_id, None)

    def put_transaction_state_if_not_exists(
        self, metadata: TransactionMetadata
    ) -> ErrorCode | CoordinatorEpochAndTxnMetadata:
        """Add a new transactional id (or find the one already there)."""
        found = self._get_and_maybe_add(metadata.transactional_id, metadata)
        assert found is not None
        return found

    def _get_and_maybe_add(self, transactional_id: str, created: TransactionMetadata | None) -> TxnStateLookup:
        partition = self.partition_for(transactional_id)
        if any(p == partition for p, _ in self.loading_partitions):
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        entry = self.transaction_metadata_cache.get(partition)
        if entry is None:
            return ErrorCode.NOT_COORDINATOR
        metadata = entry.metadata_per_transactional_id.get(transactional_id)
        if metadata is None and created is not None:
            metadata = entry.metadata_per_transactional_id.setdefault(transactional_id, created)
        return None if metadata is None else CoordinatorEpochAndTxnMetadata(entry.coordinator_epoch, metadata)

    def is_loading(self) -> bool:
        return bool(self.loading_partitions)

    def timed_out_transactions(self) -> list[TransactionalIdAndProducerIdEpoch]:
        """Ongoing transactions open longer than their timeout, with no transition under way."""
        now = self.time.milliseconds()
        return [
            TransactionalIdAndProducerIdEpoch(tid, m.producer_id, m.producer_epoch)
            for entry in self.transaction_metadata_cache.values()
            for tid, m in entry.metadata_per_transactional_id.items()
            if not m.pending_transition_in_progress and m.state == TransactionState.ONGOING
            and m.txn_start_timestamp + m.txn_timeout_ms < now
        ]

    def list_transaction_states(self, producer_ids: set[int], state_names: set[str]) -> ListedTransactions:
        """ListTransactions (KIP-664): every transaction here, filtered by producer id and state
        (Dead ones, being expired, never); COORDINATOR_LOAD_IN_PROGRESS while a partition loads."""
        if self.loading_partitions:
            return ListedTransactions(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
        listed = ListedTransactions(ErrorCode.NONE)
        states: set[TransactionState] = set()
        for name in state_names:
            state = TransactionState.from_name(name)
            if state is None:
                listed.unknown_state_filters.append(name)
            else:
                states.add(state)
        for entry in self.transaction_metadata_cache.values():
            for m in entry.metadata_per_transactional_id.values():
                if m.state == TransactionState.DEAD:
                    continue
                if producer_ids and m.producer_id not in producer_ids:
                    continue
                if state_names and m.state not in states:
                    continue
                listed.states.append((m.transactional_id, m.producer_id, m.state.state_name))
        return listed

    # --- loading and unloading ------------------------------------------------------------------

    def load_transactions_for_txn_topic_partition(
        self, partition_id: int, coordinator_epoch: int, send_txn_markers: SendTxnMarkers
    ) -> None:
        """This broker became leader of ``partition_id`` in ``coordinator_epoch``: load its ids in
        the background (COORDINATOR_LOAD_IN_PROGRESS for them meanwhile); then the transactions
        that were preparing to commit or abort get their markers sent again."""
        key = (partition_id, coordinator_epoch)
        self.loading_partitions.add(key)
        task = asyncio.get_running_loop().create_task(
            self._load(partition_id, coordinator_epoch, send_txn_markers),
            name=f"load-{TRANSACTION_STATE_TOPIC}-{partition_id}",
        )
        self._loads.add(task)
        task.add_done_callback(self._loads.discard)

    def remove_transactions_for_txn_topic_partition(self, partition_id: int, coordinator_epoch: int | None = None) -> None:
        """This broker no longer leads ``partition_id`` (as of ``coordinator_epoch``; None: a
        StopReplica without an epoch): drop its ids; a load of that epoch is abandoned."""
        if coordinator_epoch is None:
            self.loading_partitions = {k for k in self.loading_partitions if k[0] != partition_id}
        else:
            self.loading_partitions.discard((partition_id, coordinator_epoch))
        entry = self.transaction_metadata_cache.pop(partition_id, None)
        if entry is not None:
            log.info("Unloaded %d transactional id(s) of %s-%d (coordinator epoch %d)",
                     len(entry.metadata_per_transactional_id), TRANSACTION_STATE_TOPIC, partition_id,
                     entry.coordinator_epoch)

    async def _load(self, partition_id: int, coordinator_epoch: int, send_txn_markers: SendTxnMarkers) -> None:
        key = (partition_id, coordinator_epoch)
        tp = TopicPartition(TRANSACTION_STATE_TOPIC, partition_id)
        started = self.time.monotonic_ms()
        try:
            loaded = await self._read_partition(tp, lambda: key in self.loading_partitions and not self._shutting_down)
        except asyncio.CancelledError:
            raise
        except Exception:
            # As Kafka: the partition is coordinated here all the same, with what was read.
            log.exception("Error loading transactions from transaction log %s", tp)
            loaded = {}
        if loaded is None or key not in self.loading_partitions or self._shutting_down:
            return  # abandoned: the leadership moved on
        previous = self.transaction_metadata_cache.get(partition_id)
        if previous is not None:
            log.warning("Unloaded transaction metadata of %s (coordinator epoch %d) as part of loading it at "
                        "epoch %d", tp, previous.coordinator_epoch, coordinator_epoch)
        self.transaction_metadata_cache[partition_id] = TxnMetadataCacheEntry(coordinator_epoch, loaded)
        now = self.time.milliseconds()
        pending: list[tuple[TransactionResult, TransactionMetadata, TxnTransitMetadata]] = []
        for metadata in loaded.values():
            if metadata.state == TransactionState.PREPARE_ABORT:
                pending.append((TransactionResult.ABORT, metadata, metadata.prepare_complete(now)))
            elif metadata.state == TransactionState.PREPARE_COMMIT:
                pending.append((TransactionResult.COMMIT, metadata, metadata.prepare_complete(now)))
        # Loaded first, then the markers: completing those transactions must not find it loading.
        self.loading_partitions.discard(key)
        log.log(logging.INFO if loaded else logging.DEBUG, "Loaded %d transactional id(s) from %s at coordinator "
                "epoch %d in %.0f ms", len(loaded), tp, coordinator_epoch, self.time.monotonic_ms() - started)
        for result, metadata, transit in pending:
            send_txn_markers(coordinator_epoch, result, metadata, transit)

    async def _read_partition(
        self, tp: TopicPartition, current: Callable[[], bool]
    ) -> dict[str, TransactionMetadata] | None:
        """The ids of ``tp`` as its log holds them (read to the log end offset as it is at each
        step, so appends made meanwhile are read too); None once ``current()`` is False."""
        loaded: dict[str, TransactionMetadata] = {}
        partition = self.replica_manager.get_partition(tp)
        if partition is None:
            log.warning("Attempted to load transaction metadata from %s, but found no log", tp)
            return loaded
        partition_log = partition.log
        position = partition_log.log_start_offset
        while position < partition_log.log_end_offset and current():
            data = partition_log.read(position, self.config.transaction_log_load_buffer_size,
                                      partition_log.log_end_offset, True)
            if not data:
                break
            position = await self._off_loop(_apply_records, data, tp, loaded)
        return loaded if current() else None

    async def _off_loop(self, fn: Callable[..., _T], *args: object) -> _T:
        """Run ``fn(*args)`` in the load thread (one thread: loads go one step at a time)."""
        if self._executor is None:
            self._executor = ThreadPoolExecutor(1, thread_name_prefix="transaction-log-load")
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    # --- appending ------------------------------------------------------------------------------

    def append_transaction_to_log(
        self,
        transactional_id: str,
        coordinator_epoch: int,
        new_metadata: TxnTransitMetadata,
        callback: Callable[[ErrorCode], None],
        retry_on_error: Callable[[ErrorCode], bool] = lambda error: False,
    ) -> None:
        """Write ``new_metadata`` (a prepared transition of the id) with acks=all, then apply it if
        the coordinator epoch is still ``coordinator_epoch``; ``callback`` gets Kafka's error.
        A failed append clears the pending state, unless ``retry_on_error`` says the caller will
        retry. The transition completes in the append's own callback, whatever happens to the
        request that started it."""
        lookup = self.get_transaction_state(transactional_id)
        if isinstance(lookup, ErrorCode):
            callback(lookup)
            return
        if lookup is None or lookup.coordinator_epoch != coordinator_epoch:
            callback(ErrorCode.NOT_COORDINATOR)
            return
        tp = TopicPartition(TRANSACTION_STATE_TOPIC, self.partition_for(transactional_id))
        record = (transaction_log.key_to_bytes(transactional_id), transaction_log.value_to_bytes(new_metadata))
        batch = bytearray(_native.build_batch([record], self.time.milliseconds()))
        outcome = self.replica_manager.append_records(
            -1, new_metadata.txn_timeout_ms, [(tp, memoryview(batch))], internal_topics_allowed=True,
            origin=AppendOrigin.COORDINATOR,
        )

        def appended(result: PartitionAppendResult) -> None:
            callback(self._complete_append(transactional_id, coordinator_epoch, new_metadata, result, retry_on_error))

        if isinstance(outcome, dict):
            appended(outcome[tp])
        else:
            outcome.add_done_callback(lambda done: appended(_append_result(done, tp)))

    def _complete_append(
        self, transactional_id: str, coordinator_epoch: int, new_metadata: TxnTransitMetadata,
        result: PartitionAppendResult, retry_on_error: Callable[[ErrorCode], bool],
    ) -> ErrorCode:
        error = _APPEND_ERRORS.get(result.error, result.error)
        lookup = self.get_transaction_state(transactional_id)
        if error == ErrorCode.NONE:
            if isinstance(lookup, ErrorCode):
                log.info("Appended the new metadata of %s, but looking it up now answers %s: not applying it",
                         transactional_id, lookup.name)
                return lookup
            if lookup is None or lookup.coordinator_epoch != coordinator_epoch:
                log.info("The coordinator epoch of %s changed from %d while its new metadata was appended: not "
                         "applying it, NOT_COORDINATOR", transactional_id, coordinator_epoch)
                return ErrorCode.NOT_COORDINATOR
            try:
                lookup.transaction_metadata.complete_transition_to(new_metadata)
            except IllegalStateError:
                # A bug (Kafka throws here and never answers): answer rather than hang the client.
                log.exception("Applying the appended transition of %s failed", transactional_id)
                return ErrorCode.UNKNOWN_SERVER_ERROR
            return ErrorCode.NONE
        log.info("Appending the %s transition of %s to the transaction log failed: %s (%s)",
                 new_metadata.txn_state.state_name, transactional_id, error.name, result.error.name)
        if isinstance(lookup, CoordinatorEpochAndTxnMetadata) and lookup.coordinator_epoch == coordinator_epoch:
            if not retry_on_error(error):
                lookup.transaction_metadata.pending_state = None
        return error

    # --- expiring transactional ids ---------------------------------------------------------------

    def remove_expired_transactional_ids(self) -> None:
        """Write tombstones for the ids idle (Empty, CompleteCommit, CompleteAbort) for
        ``transactional.id.expiration.ms``; each leaves the cache once its tombstone is in."""
        for partition_id, entry in list(self.transaction_metadata_cache.items()):
            self._remove_expired_in(TopicPartition(TRANSACTION_STATE_TOPIC, partition_id), entry)

    def _remove_expired_in(self, tp: TopicPartition, entry: TxnMetadataCacheEntry) -> None:
        partition = self.replica_manager.get_partition(tp)
        if partition is None:
            log.warning("Transaction expiration for partition %s failed because the log config was not available, "
                        "which likely means the partition is not online or is no longer local.", tp)
            return
        max_batch = partition.log.config.max_message_bytes
        now = self.time.milliseconds()
        expired: list[tuple[str, TxnTransitMetadata]] = []
        records: list[tuple[bytes, bytes | None]] = []
        size = _BATCH_OVERHEAD
        for metadata in list(entry.metadata_per_transactional_id.values()):
            if metadata.pending_state is not None or not self._should_expire(metadata, now):
                continue
            key = transaction_log.key_to_bytes(metadata.transactional_id)
            if records and size + len(key) + _RECORD_OVERHEAD > max_batch:
                self._write_tombstones(tp, entry.coordinator_epoch, expired, records)
                expired, records, size = [], [], _BATCH_OVERHEAD
            records.append((key, None))
            size += len(key) + _RECORD_OVERHEAD
            expired.append((metadata.transactional_id, metadata.prepare_dead()))
        if records:
            self._write_tombstones(tp, entry.coordinator_epoch, expired, records)

    def _should_expire(self, metadata: TransactionMetadata, now: int) -> bool:
        return (metadata.state.is_expiration_allowed
                and metadata.txn_last_update_timestamp <= now - self.config.transactional_id_expiration_ms)

    def _write_tombstones(
        self, tp: TopicPartition, coordinator_epoch: int, expired: list[tuple[str, TxnTransitMetadata]],
        records: list[tuple[bytes, bytes | None]],
    ) -> None:
        batch = bytearray(_native.build_batch(records, self.time.milliseconds()))
        outcome = self.replica_manager.append_records(
            -1, self.config.request_timeout_ms, [(tp, memoryview(batch))], internal_topics_allowed=True,
            origin=AppendOrigin.COORDINATOR,
        )

        def appended(result: PartitionAppendResult) -> None:
            entry = self.transaction_metadata_cache.get(tp.partition)
            if entry is None:
                return
            for transactional_id, transit in expired:
                metadata = entry.metadata_per_transactional_id.get(transactional_id)
                if metadata is None:
                    continue
                if (entry.coordinator_epoch == coordinator_epoch and metadata.pending_state == TransactionState.DEAD
                        and metadata.producer_epoch == transit.producer_epoch and result.error == ErrorCode.NONE):
                    del entry.metadata_per_transactional_id[transactional_id]
                else:
                    log.warning(
                        "Failed to remove expired transactionalId: %s from cache. Tombstone append error code: %s, "
                        "pendingState: %s, producerEpoch: %d, expected producerEpoch: %d, coordinatorEpoch: %d, "
                        "expected coordinatorEpoch: %d", transactional_id, result.error.name, metadata.pending_state,
                        metadata.producer_epoch, transit.producer_epoch, entry.coordinator_epoch, coordinator_epoch,
                    )
                    metadata.pending_state = None
            if result.error == ErrorCode.NONE:
                log.info("Expired %d transactional id(s) of %s", len(expired), tp)

        if isinstance(outcome, dict):
            appended(outcome[tp])
        else:
            outcome.add_done_callback(lambda done: appended(_append_result(done, tp)))

    # --- lifecycle ------------------------------------------------------------------------------

    def startup(self, enable_transactional_id_expiration: bool = True) -> None:
        self._shutting_down = False
        if enable_transactional_id_expiration:
            interval = self.config.remove_expired_transactional_ids_interval_ms
            self._expiration_task = self.scheduler.schedule(
                "transactionalId-expiration", self.remove_expired_transactional_ids, interval, interval
            )

    async def shutdown(self) -> None:
        self._shutting_down = True
        if self._expiration_task is not None:
            self._expiration_task.cancel()
            await self._expiration_task.wait()
        loads = list(self._loads)
        for load in loads:
            load.cancel()
        await asyncio.gather(*loads, return_exceptions=True)
        self.loading_partitions.clear()
        self.transaction_metadata_cache.clear()
        executor, self._executor = self._executor, None
        if executor is not None:
            await asyncio.to_thread(executor.shutdown, True, cancel_futures=True)


def _append_result(done: asyncio.Future[dict[TopicPartition, PartitionAppendResult]], tp: TopicPartition) -> PartitionAppendResult:
    """An acks=all append's result; one that never completed (the broker shutting down) is a
    timeout, as Kafka's delayed produce would report it."""
    if done.cancelled() or done.exception() is not None:
        return PartitionAppendResult(ErrorCode.REQUEST_TIMED_OUT)
    return done.result()[tp]


def _apply_records(data: bytes, tp: TopicPartition, loaded: dict[str, TransactionMetadata]) -> int:
    """Apply one read's batches to ``loaded`` (in the load thread); the offset to read next."""
    last_offset = _native.validate_batches(data, len(data)).last_offset
    for offset, _timestamp, key, value in _native.read_records(data):
        try:
            if key is None:
                raise RecordFormatError("Transaction state log's key should not be null")
            decoded = transaction_log.read_key(key)
            if not isinstance(decoded, TxnKey):
                log.warning("Unknown message key with version %d while loading transaction state from %s. Ignoring "
                            "it. It could be a left over from an aborted upgrade.", decoded.version, tp)
                continue
            metadata = transaction_log.read_value(decoded.transactional_id, value)
        except (RecordFormatError, ValueError) as e:
            log.error("Skipping unreadable record at offset %d of %s: %s", offset, tp, e)
            continue
        if metadata is None:
            loaded.pop(decoded.transactional_id, None)
        else:
            loaded[decoded.transactional_id] = metadata
    return last_offset + 1

