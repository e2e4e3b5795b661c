"""The transactional producer's state (Kafka's ``TransactionManager``; KIP-98, KIP-360, KIP-447).

Owns, for a `KafkaProducer` with a ``transactional.id``:

- **the state machine**, with Kafka's states and transitions: UNINITIALIZED → INITIALIZING →
  READY → IN_TRANSACTION → COMMITTING_TRANSACTION / ABORTING_TRANSACTION → READY, plus
  ABORTABLE_ERROR (the transaction can only be aborted) and FATAL_ERROR (the producer can only
  be closed). A call in the wrong state raises `TransactionStateError`; a call in an error state
  raises the error that put the producer there (`ProducerFencedError` after fencing).
- **the producer id and epoch** (InitProducerId with the transactional id and
  ``transaction.timeout.ms``) and the **sequence number** of the next batch of each partition;
  they start at 0 for a new epoch.
- **the partitions of the transaction**: a partition the producer is about to write joins
  through AddPartitionsToTxn (v0-3); the partitions that became new since the previous request
  go in one request, as Kafka's client batches them, and a partition's batches are only sent
  once it is in the transaction (`send_allowed`).
- **every coordinator request**, one at a time as in Kafka's client: FindCoordinator (key type 1,
  through ``Admin.find_coordinator``), InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn and
  EndTxn to the transaction coordinator; TxnOffsetCommit (v3: generation, member id, group
  instance id) to the group's coordinator.

Errors are Kafka's client's verdicts. Retried after ``retry.backoff.ms`` (20 ms for a first
AddPartitionsToTxn answered CONCURRENT_TRANSACTIONS): COORDINATOR_NOT_AVAILABLE and
NOT_COORDINATOR (after looking the coordinator up again), COORDINATOR_LOAD_IN_PROGRESS,
CONCURRENT_TRANSACTIONS, a lost connection. Fatal: PRODUCER_FENCED and INVALID_PRODUCER_EPOCH from
a coordinator (both `ProducerFencedError`), TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
CLUSTER_AUTHORIZATION_FAILED, INVALID_TXN_STATE, an unsupported version, unexpected errors.
Abortable: a failed batch (`batch_failed`), TOPIC_ / GROUP_AUTHORIZATION_FAILED, a TxnOffsetCommit
refused for the consumer's generation (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, FENCED_INSTANCE_ID:
`CommitFailedError`), UNKNOWN_PRODUCER_ID / INVALID_PRODUCER_ID_MAPPING. KIP-360: when the
coordinator offers InitProducerId v3+, an abortable error makes the abort end with InitProducerId
carrying the current id and epoch, which bumps the epoch (sequences restart at 0); without it, a
batch whose fate is unknown (expired after being sent) is fatal, as in Kafka.

One deviation: an EndTxn(abort) answered UNKNOWN_PRODUCER_ID / INVALID_PRODUCER_ID_MAPPING goes
straight on to the epoch bump (Kafka's client fails that abort and a second abort call then fails
its state transition).

The producer owns the records: it calls `maybe_add_partition` for each partition it appends to,
asks `send_allowed` before sending a partition's batch and `next_sequence` when encoding one,
starts `add_partitions` from its sender, and reports each batch that failed (`batch_failed`) or
was given back unsent (`batch_unsent`).
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections.abc import Callable, Mapping
from typing import Any

from pybroker.client.admin import TRANSACTION_KEY_TYPE, AdminError
from pybroker.client.connection import KafkaClientError, UnsupportedVersionError
from pybroker.client.consumer_coordinator import CommitFailedError, ConsumerGroupMetadata
from pybroker.client.node import Node
from pybroker.common.errors import ErrorCode
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages import (
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    EndTxnRequest,
    InitProducerIdRequest,
    TxnOffsetCommitRequest,
)
from pybroker.types import TopicPartition

log = logging.getLogger(__name__)

INT32_MAX = 2**31 - 1
ADD_PARTITIONS_RETRY_BACKOFF_MS = 20  # Kafka's, for a first AddPartitionsToTxn meeting CONCURRENT_TRANSACTIONS
EPOCH_BUMP_INIT_PRODUCER_ID_VERSION = 3  # KIP-360: InitProducerId with the current id and epoch
ADD_PARTITIONS_MAX_VERSION = 3  # v4 is the brokers' batched form (KIP-890)
TXN_OFFSET_COMMIT_MEMBER_VERSION = 3  # KIP-447: generation, member id, group instance id

_NEW_COORDINATOR = frozenset({ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR})
_RETRY = frozenset({ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.CONCURRENT_TRANSACTIONS})
_FENCED = frozenset({ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH})
_BUMP_OR_FATAL = frozenset({ErrorCode.UNKNOWN_PRODUCER_ID, ErrorCode.INVALID_PRODUCER_ID_MAPPING})
# Produce errors after which the producer can only be closed (Kafka's maybeTransitionToErrorState).
_FATAL_PRODUCE_ERRORS = frozenset({
    ErrorCode.PRODUCER_FENCED, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    ErrorCode.CLUSTER_AUTHORIZATION_FAILED, ErrorCode.UNSUPPORTED_VERSION,
})


class TransactionState(enum.Enum):
    UNINITIALIZED = "UNINITIALIZED"
    INITIALIZING = "INITIALIZING"
    READY = "READY"
    IN_TRANSACTION = "IN_TRANSACTION"
    COMMITTING_TRANSACTION = "COMMITTING_TRANSACTION"
    ABORTING_TRANSACTION = "ABORTING_TRANSACTION"
    ABORTABLE_ERROR = "ABORTABLE_ERROR"
    FATAL_ERROR = "FATAL_ERROR"


S = TransactionState
_VALID_SOURCES: dict[TransactionState, frozenset[TransactionState]] = {  # Kafka's isTransitionValid
    S.INITIALIZING: frozenset({S.UNINITIALIZED, S.ABORTING_TRANSACTION}),
    S.READY: frozenset({S.INITIALIZING, S.COMMITTING_TRANSACTION, S.ABORTING_TRANSACTION}),
    S.IN_TRANSACTION: frozenset({S.READY}),
    S.COMMITTING_TRANSACTION: frozenset({S.IN_TRANSACTION}),
    S.ABORTING_TRANSACTION: frozenset({S.IN_TRANSACTION, S.ABORTABLE_ERROR}),
    S.ABORTABLE_ERROR: frozenset({S.IN_TRANSACTION, S.COMMITTING_TRANSACTION, S.ABORTABLE_ERROR}),
}


class TransactionError(Exception):
    """A transactional call or a record of a transaction failed. ``error`` is Kafka's error code
    when a broker gave one; ``fatal``: the producer can only be closed (else the transaction can
    be aborted and the producer used again)."""

    def __init__(self, message: str, error: ErrorCode | None = None, fatal: bool = False) -> None:
        super().__init__(message)
        self.error, self.fatal = error, fatal


class ProducerFencedError(TransactionError):
    """Another producer with the same transactional id took over (Kafka's
    ``ProducerFencedException``): close this one."""

    def __init__(self, message: str = "There is a newer producer with the same transactionalId which fences the "
                 "current one.") -> None:
        super().__init__(message, ErrorCode.PRODUCER_FENCED, fatal=True)


class TransactionAbortedError(TransactionError):
    """The record was not sent: its transaction was aborted (Kafka's ``TransactionAbortedException``)."""


class TransactionStateError(TransactionError):
    """A transactional call made in a state that does not allow it (Kafka's
    ``IllegalStateException``), e.g. ``send`` outside a transaction."""


class TransactionManager:
    """One transactional producer's transaction state and coordinator requests.

    ``admin`` gives ``find_coordinator(key, key_type)``, ``forget_coordinator(key, key_type)``,
    ``connection(node)`` and ``reset_connection(node)`` (an ``Admin`` or a test stand-in).
    """

    def __init__(self, transactional_id: str, transaction_timeout_ms: int, retry_backoff_ms: int, admin: Any,
                 request_timeout_s: float = 35.0) -> None:
        self.transactional_id = transactional_id
        self.transaction_timeout_ms = transaction_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.admin = admin
        self.request_timeout_s = request_timeout_s
        self.state = S.UNINITIALIZED
        self.last_error: TransactionError | None = None
        self.producer_id, self.producer_epoch = -1, -1
        self.epoch_bump_required = False
        self.supports_epoch_bump = False  # the transaction coordinator offers InitProducerId v3+
        self.transaction_started = False  # a partition or a group's offsets joined the transaction
        self.partitions: set[TopicPartition] = set()  # in the transaction
        self._new_partitions: set[TopicPartition] = set()  # to add with the next AddPartitionsToTxn
        self._pending_partitions: set[TopicPartition] = set()  # in the AddPartitionsToTxn in flight
        self._sequences: dict[TopicPartition, int] = {}
        self._lock = asyncio.Lock()  # one coordinator request at a time
        self._add_task: asyncio.Task[None] | None = None

    # --- state -----------------------------------------------------------------------------------

    def has_error(self) -> bool:
        return self.state in (S.ABORTABLE_ERROR, S.FATAL_ERROR)

    def is_completing(self) -> bool:
        return self.state in (S.COMMITTING_TRANSACTION, S.ABORTING_TRANSACTION)

    def has_ongoing_transaction(self) -> bool:
        return self.state in (S.IN_TRANSACTION, S.COMMITTING_TRANSACTION, S.ABORTING_TRANSACTION, S.ABORTABLE_ERROR)

    def _transition(self, target: TransactionState, error: TransactionError | None = None) -> None:
        if target != S.FATAL_ERROR and self.state not in _VALID_SOURCES[target]:
            raise TransactionStateError(f"TransactionalId {self.transactional_id}: Invalid transition attempted "
                                        f"from state {self.state.name} to state {target.name}")
        self.last_error = error
        log.debug("transactional id %s: %s -> %s%s", self.transactional_id, self.state.name, target.name,
                  f" ({error})" if error else "")
        self.state = target

    def fatal(self, error: TransactionError) -> TransactionError:
        """Enter FATAL_ERROR; returns ``error`` (marked fatal) for the caller to raise."""
        error.fatal = True
        log.warning("transactional id %s: fatal error: %s", self.transactional_id, error)
        self._transition(S.FATAL_ERROR, error)
        return error

    def abortable(self, error: TransactionError) -> TransactionError:
        """Enter ABORTABLE_ERROR (not while aborting already); returns ``error`` to raise."""
        if self.state == S.FATAL_ERROR:
            return error
        if self.state not in _VALID_SOURCES[S.ABORTABLE_ERROR]:  # aborting already, or no transaction
            log.debug("transactional id %s: %s in state %s", self.transactional_id, error, self.state.name)
            return error
        log.info("transactional id %s: abortable error: %s", self.transactional_id, error)
        self._transition(S.ABORTABLE_ERROR, error)
        return error

    def _abortable_or_fatal(self, error: TransactionError) -> TransactionError:
        """Kafka's abortableErrorIfPossible: abortable with an epoch bump when the coordinator can
        bump epochs, else fatal."""
        if self.supports_epoch_bump:
            self.epoch_bump_required = True
            return self.abortable(error)
        return self.fatal(error)

    def raise_if_error(self) -> None:
        """Kafka's maybeFailWithError: raise the error the producer is in, if any."""
        if not self.has_error():
            return
        last = self.last_error
        if isinstance(last, ProducerFencedError):
            raise ProducerFencedError("The producer has been rejected from the broker because it tried to use an "
                                      "old epoch with the transactionalId")
        raise TransactionError(f"Cannot execute transactional method because we are in an error state: {last}",
                               last.error if last else None, fatal=self.state == S.FATAL_ERROR) from last

    # --- the calls (state changes; the producer awaits the requests) -----------------------------

    def begin_init(self) -> None:
        self.raise_if_error()
        self._transition(S.INITIALIZING)

    def begin_transaction(self) -> None:
        self.raise_if_error()
        if self.state != S.READY:
            raise TransactionStateError(f"Cannot begin a transaction in state {self.state.name}"
                                        + (" (call init_transactions first)" if self.producer_id < 0 else ""))
        self._transition(S.IN_TRANSACTION)

    def begin_commit(self) -> None:
        self.raise_if_error()
        self._transition(S.COMMITTING_TRANSACTION)

    def begin_abort(self) -> None:
        if self.state != S.ABORTABLE_ERROR:
            self.raise_if_error()
        self._transition(S.ABORTING_TRANSACTION)
        self._new_partitions.clear()  # aborting: no partition needs adding any more

    def check_send_offsets(self) -> None:
        self.raise_if_error()
        if self.state != S.IN_TRANSACTION:
            raise TransactionStateError("Cannot send offsets to transaction either because the producer is not in "
                                        "an active transaction")

    def fail_if_not_ready_for_send(self) -> None:
        """Kafka's failIfNotReadyForSend: ``send`` only inside a transaction, without an error."""
        if self.has_error():
            raise TransactionError(f"Cannot perform send because at least one previous transactional or idempotent "
                                   f"request has failed with errors: {self.last_error}",
                                   self.last_error.error if self.last_error else None,
                                   fatal=self.state == S.FATAL_ERROR) from self.last_error
        if self.producer_id < 0:
            raise TransactionStateError("Cannot perform a 'send' before completing a call to init_transactions "
                                        "when transactions are enabled.")
        if self.state != S.IN_TRANSACTION:
            raise TransactionStateError(f"Cannot call send in state {self.state.name}")

    # --- partitions and sequences ----------------------------------------------------------------

    def maybe_add_partition(self, tp: TopicPartition) -> None:
        if tp not in self.partitions and tp not in self._pending_partitions:
            self._new_partitions.add(tp)

    def has_partitions_to_add(self) -> bool:
        return bool(self._new_partitions) and (self._add_task is None or self._add_task.done())

    def send_allowed(self, tp: TopicPartition) -> bool:
        return self.state != S.FATAL_ERROR and tp in self.partitions

    def next_sequence(self, tp: TopicPartition, record_count: int) -> int:
        """The base sequence of the batch of ``record_count`` records about to be encoded for
        ``tp``; the partition's next one moves on (wrapping at 2**31 - 1 like Kafka's)."""
        base = self._sequences.get(tp, 0)
        self._sequences[tp] = base + record_count if base <= INT32_MAX - record_count else record_count - (INT32_MAX - base) - 1
        return base

    def batch_unsent(self, tp: TopicPartition, base_sequence: int) -> None:
        """A batch that got ``base_sequence`` was never sent and never will be (aborted): the
        partition's next batch takes its sequence (it was the last one encoded for ``tp``)."""
        self._sequences[tp] = base_sequence

    def batch_failed(self, tp: TopicPartition, base_sequence: int, error: TransactionError,
                     code: ErrorCode | None, maybe_written: bool) -> None:
        """A batch of the transaction failed: ``code`` the partition leader's answer (None: no
        answer, e.g. expired); ``maybe_written`` when the leader may have appended it."""
        if code in _FATAL_PRODUCE_ERRORS:
            self.fatal(ProducerFencedError() if code == ErrorCode.PRODUCER_FENCED else error)
            return
        if self.state == S.FATAL_ERROR:
            return
        if maybe_written and not self.supports_epoch_bump:
            self.fatal(TransactionError(f"The client hasn't received acknowledgment for some previously sent "
                                        f"messages and can no longer retry them. It isn't safe to continue. ({error})",
                                        code))
            return
        if self.supports_epoch_bump:
            self.epoch_bump_required = True
        elif code == ErrorCode.UNKNOWN_PRODUCER_ID:
            self._sequences.pop(tp, None)  # the leader lost this producer's state: start over at 0
        elif not maybe_written and base_sequence >= 0:
            self._sequences[tp] = base_sequence  # refused: the next batch takes its sequence
        self.abortable(error)

    # --- coordinator requests ----------------------------------------------------------------------

    async def _backoff(self, ms: float | None = None) -> None:
        await asyncio.sleep((self.retry_backoff_ms if ms is None else ms) / 1000)

    async def _find_coordinator(self, group: str | None) -> Node:
        """The transaction coordinator, or ``group``'s coordinator; retried while it is not
        available."""
        key, key_type = (self.transactional_id, TRANSACTION_KEY_TYPE) if group is None else (group, 0)
        while True:
            try:
                node: Node = await self.admin.find_coordinator(key, key_type)
            except AdminError as e:
                if e.error == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED:
                    raise self.fatal(TransactionError(str(e), e.error)) from e
                if e.error == ErrorCode.GROUP_AUTHORIZATION_FAILED:
                    raise self.abortable(TransactionError(str(e), e.error)) from e
                if not e.error.retriable:
                    raise self.fatal(TransactionError(f"Could not find a coordinator with key {key}: {e}", e.error)) from e
                log.info("transactional id %s: no coordinator for %s yet (%s)", self.transactional_id, key, e)
            except (KafkaClientError, OSError, TimeoutError) as e:
                log.info("transactional id %s: FindCoordinator failed: %s", self.transactional_id, e)
            else:
                if group is None:
                    await self._learn_coordinator(node)
                return node
            await self._backoff()

    async def _learn_coordinator(self, node: Node) -> None:
        try:
            connection = await self.admin.connection(node)
            self.supports_epoch_bump = connection.version_for(ApiKey.INIT_PRODUCER_ID) >= EPOCH_BUMP_INIT_PRODUCER_ID_VERSION
        except (KafkaClientError, OSError, TimeoutError):
            pass  # learnt on the next lookup

    def forget_coordinator(self, group: str | None = None) -> None:
        if group is None:
            self.admin.forget_coordinator(self.transactional_id, TRANSACTION_KEY_TYPE)
        else:
            self.admin.forget_coordinator(group)

    async def _send(self, api_key: int, make: Callable[[int], Any], max_version: int | None = None,
                    group: str | None = None) -> tuple[Any, int]:
        """Send ``make(version)`` to the transaction coordinator (or ``group``'s); a lost
        connection forgets the coordinator and is retried after ``retry.backoff.ms``."""
        while True:
            node = await self._find_coordinator(group)
            try:
                connection = await self.admin.connection(node)
                version = connection.version_for(api_key, max_version)
                request = make(version)
                return await connection.send(api_key, request, version, timeout=self.request_timeout_s), version
            except UnsupportedVersionError as e:
                raise self.fatal(TransactionError(str(e), ErrorCode.UNSUPPORTED_VERSION)) from e
            except (KafkaClientError, OSError, TimeoutError) as e:
                log.info("transactional id %s: %s to %s failed: %s", self.transactional_id, ApiKey(api_key).name,
                         node, e or type(e).__name__)
                self.forget_coordinator(group)
                await self.admin.reset_connection(node)
            await self._backoff()

    async def init_producer_id(self, bump: bool = False) -> None:
        """InitProducerId: a producer id and epoch (``bump``: KIP-360's bump of the current ones).
        READY once answered; sequences start again at 0."""
        producer_id, epoch = (self.producer_id, self.producer_epoch) if bump else (-1, -1)
        log.info("transactional id %s: InitProducerId%s", self.transactional_id,
                 f" with producer id {producer_id} epoch {epoch} to bump the epoch" if bump else "")

        def make(_version: int) -> InitProducerIdRequest:
            return InitProducerIdRequest(transactional_id=self.transactional_id,
                                         transaction_timeout_ms=self.transaction_timeout_ms,
                                         producer_id=producer_id, producer_epoch=epoch)

        while True:
            response, _ = await self._send(ApiKey.INIT_PRODUCER_ID, make)
            error = ErrorCode.for_code(response.error_code)
            if error == ErrorCode.NONE:
                self.producer_id, self.producer_epoch = response.producer_id, response.producer_epoch
                log.info("transactional id %s: producer id %d epoch %d", self.transactional_id,
                         self.producer_id, self.producer_epoch)
                self._transition(S.READY)
                self._sequences.clear()
                self.epoch_bump_required = False
                return
            if error in _NEW_COORDINATOR:
                self.forget_coordinator()
            elif error in _RETRY:
                pass
            elif error in (ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, ErrorCode.CLUSTER_AUTHORIZATION_FAILED):
                raise self.fatal(TransactionError(f"InitProducerId: {error.name}", error))
            elif error in _FENCED:
                raise self.fatal(ProducerFencedError())
            else:
                raise self.fatal(TransactionError(f"Unexpected error in InitProducerIdResponse; {error.name}: "
                                                  f"{error.message}", error))
            await self._backoff()

    def start_add_partitions(self) -> asyncio.Task[None]:
        """AddPartitionsToTxn for the partitions new since the last one, in the background."""
        task = asyncio.ensure_future(self._add_partitions())
        self._add_task = task
        return task

    async def _add_partitions(self) -> None:
        async with self._lock:
            if not self._new_partitions or self.has_error():
                return  # Kafka's maybeTerminateRequestWithError: nothing is sent in an error state
            self._pending_partitions |= self._new_partitions
            self._new_partitions.clear()
            partitions = sorted(self._pending_partitions)
            by_topic: dict[str, list[int]] = {}
            for tp in partitions:
                by_topic.setdefault(tp.topic, []).append(tp.partition)

            def make(_version: int) -> AddPartitionsToTxnRequest:
                return AddPartitionsToTxnRequest(
                    v3_and_below_transactional_id=self.transactional_id,
                    v3_and_below_producer_id=self.producer_id, v3_and_below_producer_epoch=self.producer_epoch,
                    v3_and_below_topics=[AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name=t, partitions=ps)
                                         for t, ps in by_topic.items()])

            while True:
                if self.state == S.FATAL_ERROR:
                    return
                response, _ = await self._send(ApiKey.ADD_PARTITIONS_TO_TXN, make, ADD_PARTITIONS_MAX_VERSION)
                errors = {TopicPartition(t.name, r.partition_index): ErrorCode.for_code(r.partition_error_code)
                          for t in response.results_by_topic_v3_and_below for r in t.results_by_partition}
                backoff = self.retry_backoff_ms
                if self._add_partitions_verdict(partitions, errors):
                    return
                if ErrorCode.CONCURRENT_TRANSACTIONS in errors.values() and not self.partitions:
                    backoff = min(backoff, ADD_PARTITIONS_RETRY_BACKOFF_MS)  # the previous transaction is completing
                await self._backoff(backoff)

    def _add_partitions_verdict(self, partitions: list[TopicPartition], errors: dict[TopicPartition, ErrorCode]) -> bool:
        """Kafka's AddPartitionsToTxnHandler.handleResponse: True when done (added or failed),
        False to send the request again."""
        unauthorized: set[str] = set()
        failed = False
        for tp in partitions:
            error = errors.get(tp, ErrorCode.UNKNOWN_SERVER_ERROR)
            if error == ErrorCode.NONE:
                continue
            if error in _NEW_COORDINATOR:
                self.forget_coordinator()
                return False
            if error in _RETRY or error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                return False
            if error in _FENCED:
                self.fatal(ProducerFencedError())
                return True
            if error in (ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, ErrorCode.INVALID_TXN_STATE):
                self.fatal(TransactionError(f"AddPartitionsToTxn: {error.name}: {error.message}", error))
                return True
            if error in _BUMP_OR_FATAL:
                self._abortable_or_fatal(TransactionError(f"AddPartitionsToTxn: {error.name}: {error.message}", error))
                return True
            if error == ErrorCode.TOPIC_AUTHORIZATION_FAILED:
                unauthorized.add(tp.topic)
            elif error != ErrorCode.OPERATION_NOT_ATTEMPTED:
                log.error("transactional id %s: could not add partition %s: %s", self.transactional_id, tp, error.name)
                failed = True
            else:
                failed = True
        self._pending_partitions.difference_update(partitions)
        if unauthorized:
            self.abortable(TransactionError(f"Not authorized to access topics: {sorted(unauthorized)}",
                                            ErrorCode.TOPIC_AUTHORIZATION_FAILED))
        elif failed:
            self.abortable(TransactionError(f"Could not add partitions to transaction due to errors: "
                                            f"{ {str(tp): e.name for tp, e in errors.items()} }"))
        else:
            log.debug("transactional id %s: added partitions %s", self.transactional_id, [str(tp) for tp in partitions])
            self.partitions.update(partitions)
            self.transaction_started = True
        return True

    async def send_offsets(self, offsets: Mapping[TopicPartition, int], group: ConsumerGroupMetadata) -> None:
        """AddOffsetsToTxn with the group, then TxnOffsetCommit of ``offsets`` to its coordinator."""
        async with self._lock:
            self.check_send_offsets()
            await self._add_offsets(group.group_id)
            await self._txn_offset_commit(dict(offsets), group)

    async def _add_offsets(self, group_id: str) -> None:
        def make(_version: int) -> AddOffsetsToTxnRequest:
            return AddOffsetsToTxnRequest(transactional_id=self.transactional_id, producer_id=self.producer_id,
                                          producer_epoch=self.producer_epoch, group_id=group_id)

        while True:
            response, _ = await self._send(ApiKey.ADD_OFFSETS_TO_TXN, make)
            error = ErrorCode.for_code(response.error_code)
            if error == ErrorCode.NONE:
                self.transaction_started = True
                return
            if error in _NEW_COORDINATOR:
                self.forget_coordinator()
            elif error in _RETRY:
                pass
            elif error in _BUMP_OR_FATAL:
                raise self._abortable_or_fatal(TransactionError(f"AddOffsetsToTxn: {error.name}: {error.message}", error))
            elif error in _FENCED:
                raise self.fatal(ProducerFencedError())
            elif error == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED:
                raise self.fatal(TransactionError(f"AddOffsetsToTxn: {error.name}", error))
            elif error == ErrorCode.GROUP_AUTHORIZATION_FAILED:
                raise self.abortable(TransactionError(f"Not authorized to access group: {group_id}", error))
            else:
                raise self.fatal(TransactionError(f"Unexpected error in AddOffsetsToTxnResponse: {error.name}: "
                                                  f"{error.message}", error))
            await self._backoff()

    async def _txn_offset_commit(self, pending: dict[TopicPartition, int], group: ConsumerGroupMetadata) -> None:
        member_fields = group.generation_id >= 0 or group.member_id or group.group_instance_id is not None

        def make(version: int) -> TxnOffsetCommitRequest:
            if version < TXN_OFFSET_COMMIT_MEMBER_VERSION and member_fields:
                raise UnsupportedVersionError(f"TxnOffsetCommit v{version} cannot carry the consumer's group metadata "
                                              "(KIP-447 needs v3)")
            by_topic: dict[str, list[tuple[int, int]]] = {}
            for tp, offset in sorted(pending.items()):
                by_topic.setdefault(tp.topic, []).append((tp.partition, offset))
            return TxnOffsetCommitRequest(
                transactional_id=self.transactional_id, group_id=group.group_id, producer_id=self.producer_id,
                producer_epoch=self.producer_epoch, generation_id=group.generation_id, member_id=group.member_id,
                group_instance_id=group.group_instance_id,
                topics=[TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic(name=t, partitions=[
                    TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition(
                        partition_index=p, committed_offset=o, committed_leader_epoch=-1, committed_metadata="")
                    for p, o in parts]) for t, parts in by_topic.items()])

        while pending:
            response, _ = await self._send(ApiKey.TXN_OFFSET_COMMIT, make, group=group.group_id)
            errors = {TopicPartition(t.name, p.partition_index): ErrorCode.for_code(p.error_code)
                      for t in response.topics for p in t.partitions}
            reloaded = False
            for tp in list(pending):
                error = errors.get(tp, ErrorCode.UNKNOWN_SERVER_ERROR)
                if error == ErrorCode.NONE:
                    del pending[tp]
                elif error in _NEW_COORDINATOR or error == ErrorCode.REQUEST_TIMED_OUT:
                    if not reloaded:
                        reloaded = True
                        self.forget_coordinator(group.group_id)
                elif error in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, *_RETRY):
                    continue
                elif error == ErrorCode.GROUP_AUTHORIZATION_FAILED:
                    raise self.abortable(TransactionError(f"Not authorized to access group: {group.group_id}", error))
                elif error == ErrorCode.FENCED_INSTANCE_ID:
                    raise self.abortable(TransactionError(f"TxnOffsetCommit: {error.name}: {error.message}", error))
                elif error in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION):
                    failure = TransactionError(f"Transaction offset Commit failed due to consumer group metadata "
                                               f"mismatch: {error.name}: {error.message}", error)
                    failure.__cause__ = CommitFailedError(str(failure))
                    raise self.abortable(failure)
                elif error in (*_FENCED, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                               ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT):
                    raise self.fatal(ProducerFencedError() if error in _FENCED
                                     else TransactionError(f"TxnOffsetCommit: {error.name}", error))
                else:
                    raise self.fatal(TransactionError(f"Unexpected error in TxnOffsetCommitResponse: {error.name}: "
                                                      f"{error.message}", error))
            if pending:
                await self._backoff()

    async def end_transaction(self, commit: bool) -> None:
        """EndTxn (when the transaction wrote anything), then, after an abortable error with a
        coordinator that can, the KIP-360 epoch bump; READY afterwards."""
        if self._add_task is not None and not self._add_task.done():
            await asyncio.wait([self._add_task])
        async with self._lock:
            if commit:
                self.raise_if_error()  # a batch failed while flushing
            last = self.last_error
            skip_end = not commit and last is not None and last.error == ErrorCode.INVALID_PRODUCER_ID_MAPPING
            if not skip_end and self.transaction_started:
                skip_end = not await self._end_txn(commit)
            elif not self.transaction_started:
                log.debug("transactional id %s: no EndTxn: nothing joined the transaction", self.transactional_id)
            if self.epoch_bump_required or skip_end:
                await self.init_producer_id(bump=True)
            else:
                self._transition(S.READY)
            self.transaction_started = False
            self.partitions.clear()
            self._new_partitions.clear()
            self._pending_partitions.clear()

    async def _end_txn(self, commit: bool) -> bool:
        """EndTxn; False when the abort must go straight on to the epoch bump."""
        def make(_version: int) -> EndTxnRequest:
            return EndTxnRequest(transactional_id=self.transactional_id, producer_id=self.producer_id,
                                 producer_epoch=self.producer_epoch, committed=commit)

        while True:
            response, _ = await self._send(ApiKey.END_TXN, make)
            error = ErrorCode.for_code(response.error_code)
            if error == ErrorCode.NONE:
                return True
            if error in _NEW_COORDINATOR:
                self.forget_coordinator()
            elif error in _RETRY:
                pass
            elif error in _FENCED:
                raise self.fatal(ProducerFencedError())
            elif error in (ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, ErrorCode.INVALID_TXN_STATE):
                raise self.fatal(TransactionError(f"EndTxn: {error.name}: {error.message}", error))
            elif error in _BUMP_OR_FATAL:
                failure = TransactionError(f"EndTxn: {error.name}: {error.message}", error)
                if commit or not self.supports_epoch_bump:
                    raise self._abortable_or_fatal(failure)
                log.info("transactional id %s: %s; bumping the epoch", self.transactional_id, failure)
                return False
            else:
                raise self.fatal(TransactionError(f"Unhandled error in EndTxnResponse: {error.name}: {error.message}",
                                                  error))
            await self._backoff()
