"""The transaction coordinator: Kafka's ``TransactionCoordinator``, API by API.

Owns the decisions and error codes of InitProducerId with a transactional id (a new producer id,
an epoch bump, fencing the previous producer and aborting its ongoing transaction first, a new
producer id when the epoch is exhausted, KIP-360's bump of a named epoch), AddPartitionsToTxn and
AddOffsetsToTxn (which adds the group's ``__consumer_offsets`` partition), the partition leaders'
verification of KIP-890 (AddPartitionsToTxn v4 with VerifyOnly), EndTxn, DescribeTransactions and
ListTransactions; the abort of transactions open longer than their timeout (every
``transaction.abort.timed.out.transaction.cleanup.interval.ms``, on the injected scheduler); and
following the leadership of ``__transaction_state`` partitions (Kafka's ``onElection`` /
``onResignation``). State and persistence are the state manager's, markers the marker channel's.

Error codes are Kafka's as the coordinator gives them; the API handlers map PRODUCER_FENCED to
INVALID_PRODUCER_EPOCH for the request versions that predate it, as KafkaApis does. Answers that
wait for the log come through callbacks, which may run before the handling method returns.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field

from pybroker.common.errors import ErrorCode
from pybroker.scheduler import SYSTEM_TIME, ScheduledTask, Scheduler, Time
from pybroker.server.internal_topic_creation import InternalTopicCreation
from pybroker.server.transaction.marker_channel import TransactionMarkerChannelManager
from pybroker.server.transaction.metadata import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    IllegalStateError,
    TransactionMetadata,
    TransactionResult,
    TransactionState,
    TxnTransitMetadata,
    is_epoch_exhausted,
)
from pybroker.server.transaction.state_manager import (
    CoordinatorEpochAndTxnMetadata,
    ListedTransactions,
    TransactionalIdAndProducerIdEpoch,
    TransactionConfig,
    TransactionStateManager,
    TransactionTopicUnavailable,
)
from pybroker.server.transaction.transaction_log import TRANSACTION_STATE_TOPIC
from pybroker.types import TopicPartition

log = logging.getLogger(__name__)

S = TransactionState


@dataclass(frozen=True)
class InitProducerIdResult:
    producer_id: int
    producer_epoch: int
    error: ErrorCode = ErrorCode.NONE


@dataclass
class TransactionDescription:
    """DescribeTransactions' answer for one transactional id (an error answer carries the
    message's defaults, zeros, as Kafka's does)."""

    transactional_id: str
    error: ErrorCode
    state: str = ""
    timeout_ms: int = 0
    start_time_ms: int = 0
    producer_id: int = 0
    producer_epoch: int = 0
    topics: dict[str, list[int]] = field(default_factory=dict)


def _init_error(error: ErrorCode) -> InitProducerIdResult:
    return InitProducerIdResult(NO_PRODUCER_ID, NO_PRODUCER_EPOCH, error)


class _NeedsProducerId:
    """InitProducerId must rotate to a new producer id, which is to be allocated first."""


_NEEDS_PRODUCER_ID = _NeedsProducerId()


class TransactionCoordinator:
    """Coordinates the transactional ids whose ``__transaction_state`` partition this broker leads."""

    def __init__(
        self,
        broker_id: int,
        config: TransactionConfig,
        txn_manager: TransactionStateManager,
        marker_channel: TransactionMarkerChannelManager,
        allocate_producer_id: Callable[[], Awaitable[int]],
        scheduler: Scheduler,
        time: Time = SYSTEM_TIME,
    ) -> None:
        self.broker_id = broker_id
        self.config = config
        self.txn_manager = txn_manager
        self._transaction_topic = InternalTopicCreation(
            TRANSACTION_STATE_TOPIC, txn_manager.ensure_transaction_topic, TransactionTopicUnavailable)
        self.marker_channel = marker_channel
        self._allocate_producer_id = allocate_producer_id
        self.scheduler = scheduler
        self.time = time
        self.active = False
        self._abort_task: ScheduledTask | None = None

    # --- lifecycle ------------------------------------------------------------------------------

    def startup(self, enable_transactional_id_expiration: bool = True) -> None:
        interval = self.config.abort_timed_out_transactions_interval_ms
        self._abort_task = self.scheduler.schedule("transaction-abort", self.abort_timed_out_transactions,
                                                   interval, interval)
        self.txn_manager.startup(enable_transactional_id_expiration)
        self.marker_channel.start()
        self.active = True

    async def shutdown(self) -> None:
        self.active = False
        await self._transaction_topic.cancel()
        if self._abort_task is not None:
            self._abort_task.cancel()
            await self._abort_task.wait()
        await self.txn_manager.shutdown()
        await self.marker_channel.shutdown()

    # --- FindCoordinator ------------------------------------------------------------------------

    def partition_for(self, transactional_id: str) -> int:
        return self.txn_manager.partition_for(transactional_id)

    def coordinator_partition(self, transactional_id: str) -> int | None:
        """The ``__transaction_state`` partition that owns the id; None while the topic does not
        exist, whose creation this starts (`InternalTopicCreation`)."""
        if not self.txn_manager.replica_manager.metadata_cache.partition_count(TRANSACTION_STATE_TOPIC):
            self._transaction_topic.start()
            return None
        return self.partition_for(transactional_id)

    # --- leadership of __transaction_state --------------------------------------------------------

    def on_leadership_change(
        self, leaders: Iterable[tuple[TopicPartition, int]], followers: Iterable[tuple[TopicPartition, int | None]]
    ) -> None:
        """Given ``(partition, leader epoch)`` pairs of a LeaderAndIsr or StopReplica: load the
        ``__transaction_state`` partitions this broker now leads, drop those it does not."""
        for tp, epoch in leaders:
            if tp.topic == TRANSACTION_STATE_TOPIC:
                self.on_election(tp.partition, epoch)
        for tp, resigned_epoch in followers:
            if tp.topic == TRANSACTION_STATE_TOPIC:
                self.on_resignation(tp.partition, resigned_epoch)

    def on_election(self, txn_topic_partition: int, coordinator_epoch: int) -> None:
        log.debug("Elected as the txn coordinator for partition %d at epoch %d", txn_topic_partition, coordinator_epoch)
        # Whatever a previous leadership left behind goes before loading.
        self.marker_channel.remove_markers_for_txn_topic_partition(txn_topic_partition)
        self.txn_manager.load_transactions_for_txn_topic_partition(
            txn_topic_partition, coordinator_epoch, self.marker_channel.add_txn_markers_to_send
        )

    def on_resignation(self, txn_topic_partition: int, coordinator_epoch: int | None) -> None:
        if txn_topic_partition in self.txn_manager.transaction_metadata_cache or any(
            p == txn_topic_partition for p, _ in self.txn_manager.loading_partitions
        ):
            log.info("Resigned as the txn coordinator for partition %d at epoch %s", txn_topic_partition,
                     coordinator_epoch)
        self.txn_manager.remove_transactions_for_txn_topic_partition(txn_topic_partition, coordinator_epoch)
        self.marker_channel.remove_markers_for_txn_topic_partition(txn_topic_partition)

    # --- InitProducerId -------------------------------------------------------------------------

    async def handle_init_producer_id(
        self, transactional_id: str | None, transaction_timeout_ms: int, expected: tuple[int, int] | None
    ) -> InitProducerIdResult:
        """A producer id and epoch for ``transactional_id``; ``expected`` is the (producer id,
        epoch) the producer already has (KIP-360, InitProducerId v3+), or None."""
        if transactional_id is None:
            return InitProducerIdResult(await self._allocate_producer_id(), 0)
        if not transactional_id:
            return _init_error(ErrorCode.INVALID_REQUEST)
        if not self.txn_manager.validate_transaction_timeout_ms(transaction_timeout_ms):
            return _init_error(ErrorCode.INVALID_TRANSACTION_TIMEOUT)
        # Producer ids are allocated asynchronously, so before deciding: the lookup and the
        # decision that follow it then happen in one step (nothing else runs in between).
        spare: int | None = None
        while True:
            lookup = self.txn_manager.get_transaction_state(transactional_id)
            if isinstance(lookup, ErrorCode):
                return _init_error(lookup)
            if lookup is None:
                if spare is None:
                    spare = await self._allocate_producer_id()
                    continue
                created = TransactionMetadata.new(transactional_id, spare, transaction_timeout_ms,
                                                  self.time.milliseconds())
                spare = None
                added = self.txn_manager.put_transaction_state_if_not_exists(created)
                if isinstance(added, ErrorCode):
                    return _init_error(added)
                lookup = added
            prepared = self._prepare_init_producer_id_transit(
                transactional_id, transaction_timeout_ms, lookup, expected, spare
            )
            if prepared is _NEEDS_PRODUCER_ID:
                spare = await self._allocate_producer_id()
                continue
            break
        if isinstance(prepared, ErrorCode):
            return _init_error(prepared)
        assert isinstance(prepared, tuple)
        coordinator_epoch, new_metadata = prepared
        answer: asyncio.Future[InitProducerIdResult] = asyncio.get_running_loop().create_future()

        def respond(result: InitProducerIdResult) -> None:
            if not answer.done():
                answer.set_result(result)

        if new_metadata.txn_state == S.PREPARE_EPOCH_FENCE:
            # Abort the previous producer's transaction first; the caller retries meanwhile.
            def aborted(error: ErrorCode) -> None:
                respond(_init_error(ErrorCode.CONCURRENT_TRANSACTIONS if error == ErrorCode.NONE else error))

            self._end_transaction(transactional_id, new_metadata.producer_id, new_metadata.producer_epoch,
                                  TransactionResult.ABORT, False, aborted)
        else:
            def appended(error: ErrorCode) -> None:
                if error == ErrorCode.NONE:
                    log.info("Initialized transactionalId %s with producerId %d and producer epoch %d on partition "
                             "%s-%d", transactional_id, new_metadata.producer_id, new_metadata.producer_epoch,
                             TRANSACTION_STATE_TOPIC, self.partition_for(transactional_id))
                    respond(InitProducerIdResult(new_metadata.producer_id, new_metadata.producer_epoch))
                else:
                    log.info("Returning %s error code to client for %s's InitProducerId request", error.name,
                             transactional_id)
                    respond(_init_error(error))

            self.txn_manager.append_transaction_to_log(transactional_id, coordinator_epoch, new_metadata, appended)
        return await answer

    def _prepare_init_producer_id_transit(
        self, transactional_id: str, transaction_timeout_ms: int, lookup: CoordinatorEpochAndTxnMetadata,
        expected: tuple[int, int] | None, spare_producer_id: int | None,
    ) -> tuple[int, TxnTransitMetadata] | ErrorCode | _NeedsProducerId:
        metadata = lookup.transaction_metadata

        def is_valid_producer_id(producer_id: int, epoch: int) -> bool:
            # Accept: a just-created id (a producer recovering from UNKNOWN_PRODUCER_ID), the
            # current producer id (its epoch is checked by the bump), or the previous one with an
            # exhausted epoch (a retry of a rotation whose answer was lost).
            return (metadata.producer_epoch == NO_PRODUCER_EPOCH or producer_id == metadata.producer_id
                    or (producer_id == metadata.last_producer_id and is_epoch_exhausted(epoch)))

        if metadata.pending_transition_in_progress:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        if expected is not None and not is_valid_producer_id(*expected):
            return ErrorCode.PRODUCER_FENCED
        state = metadata.state
        if state in (S.PREPARE_ABORT, S.PREPARE_COMMIT):
            return ErrorCode.CONCURRENT_TRANSACTIONS
        if state in (S.COMPLETE_ABORT, S.COMPLETE_COMMIT, S.EMPTY):
            now = self.time.milliseconds()
            if metadata.is_producer_epoch_exhausted and (expected is None or expected[1] == metadata.producer_epoch):
                if spare_producer_id is None:
                    return _NEEDS_PRODUCER_ID
                transit: TxnTransitMetadata | ErrorCode = metadata.prepare_producer_id_rotation(
                    spare_producer_id, transaction_timeout_ms, now, expected is not None
                )
            else:
                transit = metadata.prepare_increment_producer_epoch(
                    transaction_timeout_ms, None if expected is None else expected[1], now
                )
            if isinstance(transit, ErrorCode):
                return transit
            return lookup.coordinator_epoch, transit
        if state == S.ONGOING:
            # Fence the current producer and abort its transaction; this epoch is never returned:
            # the client gets CONCURRENT_TRANSACTIONS and retries, which bumps the epoch again.
            return lookup.coordinator_epoch, metadata.prepare_fence_producer_epoch()
        raise IllegalStateError(f"Found transactionalId {transactional_id} with state {state.state_name}. This is "
                                "illegal as we should never have transitioned to this state.")

    # --- AddPartitionsToTxn / AddOffsetsToTxn ---------------------------------------------------

    def handle_add_partitions_to_transaction(
        self, transactional_id: str | None, producer_id: int, producer_epoch: int,
        partitions: Iterable[TopicPartition], respond: Callable[[ErrorCode], None],
    ) -> None:
        """Add ``partitions`` to the producer's transaction (starting one if none is ongoing)."""
        if not transactional_id:
            respond(ErrorCode.INVALID_REQUEST)
            return
        added = frozenset(partitions)
        lookup = self.txn_manager.get_transaction_state(transactional_id)
        if isinstance(lookup, ErrorCode):
            respond(lookup)
            return
        if lookup is None:
            respond(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
            return
        metadata = lookup.transaction_metadata
        if metadata.producer_id != producer_id:
            respond(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
        elif metadata.producer_epoch != producer_epoch:
            respond(ErrorCode.PRODUCER_FENCED)
        elif metadata.pending_transition_in_progress or metadata.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            respond(ErrorCode.CONCURRENT_TRANSACTIONS)
        elif metadata.state == S.ONGOING and added <= metadata.topic_partitions:
            respond(ErrorCode.NONE)  # already in the transaction
        else:
            new_metadata = metadata.prepare_add_partitions(added, self.time.milliseconds())
            self.txn_manager.append_transaction_to_log(transactional_id, lookup.coordinator_epoch, new_metadata, respond)

    def handle_verify_partitions_in_transaction(
        self, transactional_id: str | None, producer_id: int, producer_epoch: int, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, ErrorCode]:
        """KIP-890's check for a partition leader (AddPartitionsToTxn v4, VerifyOnly): per
        partition, NONE if it is in the ongoing transaction of this producer id and epoch, else
        INVALID_TXN_STATE; a lookup or producer mismatch gives every partition that error.
        Changes nothing."""
        asked = list(partitions)
        if not transactional_id:
            return dict.fromkeys(asked, ErrorCode.INVALID_REQUEST)
        lookup = self.txn_manager.get_transaction_state(transactional_id)
        error: ErrorCode | None = None
        if isinstance(lookup, ErrorCode):
            error = lookup
        elif lookup is None or lookup.transaction_metadata.producer_id != producer_id:
            error = ErrorCode.INVALID_PRODUCER_ID_MAPPING
        elif lookup.transaction_metadata.producer_epoch != producer_epoch:
            error = ErrorCode.PRODUCER_FENCED
        elif lookup.transaction_metadata.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            error = ErrorCode.CONCURRENT_TRANSACTIONS
        if error is not None:
            return dict.fromkeys(asked, error)
        assert isinstance(lookup, CoordinatorEpochAndTxnMetadata)
        in_txn = lookup.transaction_metadata.topic_partitions
        return {tp: ErrorCode.NONE if tp in in_txn else ErrorCode.INVALID_TXN_STATE for tp in asked}

    # --- EndTxn ---------------------------------------------------------------------------------

    def handle_end_transaction(
        self, transactional_id: str | None, producer_id: int, producer_epoch: int, result: TransactionResult,
        respond: Callable[[ErrorCode], None],
    ) -> None:
        """Commit or abort: answered once PrepareCommit / PrepareAbort is in the log; the markers
        and the Complete* state follow."""
        self._end_transaction(transactional_id, producer_id, producer_epoch, result, True, respond)

    def _end_transaction(
        self, transactional_id: str | None, producer_id: int, producer_epoch: int, result: TransactionResult,
        is_from_client: bool, respond: Callable[[ErrorCode], None],
    ) -> None:
        if not transactional_id:
            respond(ErrorCode.INVALID_REQUEST)
            return
        lookup = self.txn_manager.get_transaction_state(transactional_id)
        if isinstance(lookup, ErrorCode):
            respond(lookup)
            return
        if lookup is None:
            respond(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
            return
        metadata, coordinator_epoch = lookup.transaction_metadata, lookup.coordinator_epoch
        is_epoch_fence = False
        commit = result == TransactionResult.COMMIT
        prepared: TxnTransitMetadata | ErrorCode
        if metadata.producer_id != producer_id:
            prepared = ErrorCode.INVALID_PRODUCER_ID_MAPPING
        # A client's epoch must be the current one; the coordinator's own abort may carry a bump.
        elif (is_from_client and producer_epoch != metadata.producer_epoch) or producer_epoch < metadata.producer_epoch:
            prepared = ErrorCode.PRODUCER_FENCED
        elif metadata.pending_transition_in_progress and metadata.pending_state != S.PREPARE_EPOCH_FENCE:
            prepared = ErrorCode.CONCURRENT_TRANSACTIONS
        elif metadata.state == S.ONGOING:
            next_state = S.PREPARE_COMMIT if commit else S.PREPARE_ABORT
            if next_state == S.PREPARE_ABORT and metadata.pending_state == S.PREPARE_EPOCH_FENCE:
                # The fence goes on as this abort, with the bumped epoch.
                is_epoch_fence = True
                metadata.pending_state = None
                metadata.producer_epoch = producer_epoch
                metadata.last_producer_epoch = NO_PRODUCER_EPOCH
            prepared = metadata.prepare_abort_or_commit(next_state, self.time.milliseconds())
        elif metadata.state == S.COMPLETE_COMMIT:
            prepared = ErrorCode.NONE if commit else self._invalid_state(transactional_id, metadata, result)
        elif metadata.state == S.COMPLETE_ABORT:
            prepared = ErrorCode.NONE if not commit else self._invalid_state(transactional_id, metadata, result)
        elif metadata.state == S.PREPARE_COMMIT:
            prepared = ErrorCode.CONCURRENT_TRANSACTIONS if commit else self._invalid_state(transactional_id, metadata, result)
        elif metadata.state == S.PREPARE_ABORT:
            prepared = ErrorCode.CONCURRENT_TRANSACTIONS if not commit else self._invalid_state(transactional_id, metadata, result)
        elif metadata.state == S.EMPTY:
            prepared = self._invalid_state(transactional_id, metadata, result)
        else:
            raise IllegalStateError(f"Found transactionalId {transactional_id} with state {metadata.state.state_name}. "
                                    "This is illegal as we should never have transitioned to this state.")
        if isinstance(prepared, ErrorCode):
            respond(prepared)
            return
        new_metadata = prepared

        def appended(error: ErrorCode) -> None:
            if error != ErrorCode.NONE:
                log.info("Aborting sending of transaction markers and returning %s error to client for %s's "
                         "EndTransaction request of %s", error.name, transactional_id, result.name)
                if is_epoch_fence:
                    current = self.txn_manager.get_transaction_state(transactional_id)
                    if isinstance(current, CoordinatorEpochAndTxnMetadata) and current.coordinator_epoch == coordinator_epoch:
                        # The bumped epoch may not be in the log: the next fence must not bump again.
                        current.transaction_metadata.has_failed_epoch_fence = True
                        log.warning("The coordinator failed to write an epoch fence transition for producer %s to the "
                                    "transaction log with error %s. The epoch was increased to %d but not returned to "
                                    "the client", transactional_id, error.name, new_metadata.producer_epoch)
                respond(error)
                return
            pre_send = self._prepare_complete_after_append(transactional_id, producer_id, producer_epoch, result,
                                                           coordinator_epoch)
            if isinstance(pre_send, ErrorCode):
                log.info("Aborting sending of transaction markers after appended %s to transaction log and returning "
                         "%s error to client for %s's EndTransaction request", result.name, pre_send.name,
                         transactional_id)
                respond(pre_send)
                return
            txn_metadata, complete = pre_send
            # The client is answered now; the markers go on without it.
            respond(ErrorCode.NONE)
            self.marker_channel.add_txn_markers_to_send(coordinator_epoch, result, txn_metadata, complete)

        self.txn_manager.append_transaction_to_log(transactional_id, coordinator_epoch, new_metadata, appended)

    def _prepare_complete_after_append(
        self, transactional_id: str, producer_id: int, producer_epoch: int, result: TransactionResult,
        coordinator_epoch: int,
    ) -> tuple[TransactionMetadata, TxnTransitMetadata] | ErrorCode:
        lookup = self.txn_manager.get_transaction_state(transactional_id)
        if isinstance(lookup, ErrorCode):
            return lookup
        if lookup is None:
            raise IllegalStateError(f"The coordinator still owns the transaction partition for {transactional_id}, "
                                    "but there is no metadata in the cache; this is not expected")
        if lookup.coordinator_epoch != coordinator_epoch:
            return ErrorCode.NOT_COORDINATOR
        metadata = lookup.transaction_metadata
        if metadata.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        if metadata.producer_epoch != producer_epoch:
            return ErrorCode.PRODUCER_FENCED
        if metadata.pending_transition_in_progress:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        expected = S.PREPARE_COMMIT if result == TransactionResult.COMMIT else S.PREPARE_ABORT
        if metadata.state in (S.DEAD, S.PREPARE_EPOCH_FENCE):
            raise IllegalStateError(f"Found transactionalId {transactional_id} with state {metadata.state.state_name}. "
                                    "This is illegal as we should never have transitioned to this state.")
        if metadata.state != expected:
            return self._invalid_state(transactional_id, metadata, result)
        return metadata, metadata.prepare_complete(self.time.milliseconds())

    @staticmethod
    def _invalid_state(transactional_id: str, metadata: TransactionMetadata, result: TransactionResult) -> ErrorCode:
        log.debug("TransactionalId: %s's state is %s, but received transaction marker result to send: %s",
                  transactional_id, metadata.state.state_name, result.name)
        return ErrorCode.INVALID_TXN_STATE

    # --- timed-out transactions -----------------------------------------------------------------

    def abort_timed_out_transactions(self) -> None:
        """Kafka's ``abortTimedOutTransactions``: fence (bump the epoch of) every transaction open
        longer than its timeout and abort it."""
        for timed_out in self.txn_manager.timed_out_transactions():
            lookup = self.txn_manager.get_transaction_state(timed_out.transactional_id)
            if lookup is None:
                log.error("Could not find transaction metadata when trying to timeout transaction for %s", timed_out)
                continue
            if isinstance(lookup, ErrorCode):
                continue
            metadata = lookup.transaction_metadata
            if metadata.producer_id != timed_out.producer_id:
                log.error("Found incorrect producerId when expiring transactionalId: %s. Expected producerId: %d. "
                          "Found producerId: %d", timed_out.transactional_id, timed_out.producer_id,
                          metadata.producer_id)
                continue
            if metadata.pending_transition_in_progress:
                log.debug("Skipping abort of timed out transaction %s since there is a pending state transition",
                          timed_out)
                continue
            fence = metadata.prepare_fence_producer_epoch()
            self._end_transaction(metadata.transactional_id, fence.producer_id, fence.producer_epoch,
                                  TransactionResult.ABORT, False, _on_timeout_abort_complete(timed_out))

    # --- admin: DescribeTransactions / ListTransactions -----------------------------------------

    def handle_describe_transactions(self, transactional_id: str) -> TransactionDescription:
        if not self.active:
            return TransactionDescription(transactional_id, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if not transactional_id:
            return TransactionDescription(transactional_id, ErrorCode.INVALID_REQUEST)
        lookup = self.txn_manager.get_transaction_state(transactional_id)
        if isinstance(lookup, ErrorCode):
            return TransactionDescription(transactional_id, lookup)
        if lookup is None or lookup.transaction_metadata.state == S.DEAD:
            return TransactionDescription(transactional_id, ErrorCode.TRANSACTIONAL_ID_NOT_FOUND)
        metadata = lookup.transaction_metadata
        topics: dict[str, list[int]] = {}
        for tp in sorted(metadata.topic_partitions):
            topics.setdefault(tp.topic, []).append(tp.partition)
        return TransactionDescription(
            transactional_id, ErrorCode.NONE, metadata.state.state_name, metadata.txn_timeout_ms,
            metadata.txn_start_timestamp, metadata.producer_id, metadata.producer_epoch, topics,
        )

    def handle_list_transactions(self, producer_ids: set[int], states: set[str]) -> ListedTransactions:
        if not self.active:
            return ListedTransactions(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        return self.txn_manager.list_transaction_states(producer_ids, states)


def _on_timeout_abort_complete(timed_out: TransactionalIdAndProducerIdEpoch) -> Callable[[ErrorCode], None]:
    def done(error: ErrorCode) -> None:
        if error == ErrorCode.NONE:
            log.info("Completed rollback of ongoing transaction for transactionalId %s due to timeout",
                     timed_out.transactional_id)
        elif error in (ErrorCode.INVALID_PRODUCER_ID_MAPPING, ErrorCode.PRODUCER_FENCED,
                       ErrorCode.CONCURRENT_TRANSACTIONS):
            log.debug("Rollback of ongoing transaction for transactionalId %s has been cancelled due to error %s",
                      timed_out.transactional_id, error.name)
        else:
            log.warning("Rollback of ongoing transaction for transactionalId %s failed due to error %s",
                        timed_out.transactional_id, error.name)

    return done
