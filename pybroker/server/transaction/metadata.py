"""One transactional id's state and its transitions (Kafka's ``TransactionMetadata``).

Owns the transaction states with Kafka's ids (the ids are what ``__transaction_state`` stores, the
names what DescribeTransactions and ListTransactions show) and which state may follow which;
``TransactionMetadata``, the coordinator's view of one transactional id (producer id and epoch,
KIP-360's last producer id and epoch, timeout, partitions, start and last-update timestamps, and
the pending state of a transition under way); and ``TxnTransitMetadata``, the target of a
transition, which is prepared first (``prepare_*``: the pending state is set, which blocks any
other transition), written to the log, and only then applied (``complete_transition_to``). A
transition that cannot be is a bug and raises ``IllegalStateError``, as Kafka's throw.

Everything here runs on the event loop: no locks (Kafka's ``inLock``) are needed, because a check
and the ``prepare_*`` that follows it never have an ``await`` between them.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from enum import IntEnum
from typing import NoReturn

from pybroker.common.errors import ErrorCode
from pybroker.types import TopicPartition

log = logging.getLogger(__name__)

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
MAX_PRODUCER_EPOCH = 32767  # Short.MaxValue


class IllegalStateError(RuntimeError):
    """A transition the coordinator should never attempt (Kafka's IllegalStateException)."""


class TransactionResult(IntEnum):
    """What EndTxn asks and WriteTxnMarkers writes (the wire's boolean: true is commit)."""

    ABORT = 0
    COMMIT = 1


class TransactionState(IntEnum):
    """Kafka's transaction states, by the id ``__transaction_state`` stores."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def state_name(self) -> str:
        """The name DescribeTransactions and ListTransactions show (e.g. ``PrepareCommit``)."""
        return _NAMES[self]

    @property
    def valid_previous_states(self) -> frozenset[TransactionState]:
        return _VALID_PREVIOUS[self]

    @property
    def is_expiration_allowed(self) -> bool:
        """A transactional id idle in this state may expire."""
        return self in (TransactionState.EMPTY, TransactionState.COMPLETE_COMMIT, TransactionState.COMPLETE_ABORT)

    @classmethod
    def from_name(cls, name: str) -> TransactionState | None:
        return _BY_NAME.get(name)

    @classmethod
    def from_id(cls, state_id: int) -> TransactionState:
        try:
            return cls(state_id)
        except ValueError:
            raise IllegalStateError(f"Unknown transaction state id {state_id} from the transaction status message") from None


_S = TransactionState
_NAMES = {
    _S.EMPTY: "Empty", _S.ONGOING: "Ongoing", _S.PREPARE_COMMIT: "PrepareCommit", _S.PREPARE_ABORT: "PrepareAbort",
    _S.COMPLETE_COMMIT: "CompleteCommit", _S.COMPLETE_ABORT: "CompleteAbort", _S.DEAD: "Dead",
    _S.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}
_BY_NAME = {name: state for state, name in _NAMES.items()}
_VALID_PREVIOUS: dict[TransactionState, frozenset[TransactionState]] = {
    _S.EMPTY: frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.ONGOING: frozenset({_S.ONGOING, _S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.PREPARE_COMMIT: frozenset({_S.ONGOING}),
    _S.PREPARE_ABORT: frozenset({_S.ONGOING, _S.PREPARE_EPOCH_FENCE}),
    _S.COMPLETE_COMMIT: frozenset({_S.PREPARE_COMMIT}),
    _S.COMPLETE_ABORT: frozenset({_S.PREPARE_ABORT}),
    _S.DEAD: frozenset({_S.EMPTY, _S.COMPLETE_ABORT, _S.COMPLETE_COMMIT}),
    _S.PREPARE_EPOCH_FENCE: frozenset({_S.ONGOING}),
}


def is_epoch_exhausted(producer_epoch: int) -> bool:
    """No epoch may reach Short.MaxValue from a client, so that the coordinator can always fence."""
    return producer_epoch >= MAX_PRODUCER_EPOCH - 1


@dataclass(frozen=True)
class TxnTransitMetadata:
    """The target of a prepared transition: what is written to the log, then applied."""

    producer_id: int
    last_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    txn_timeout_ms: int
    txn_state: TransactionState
    topic_partitions: frozenset[TopicPartition]
    txn_start_timestamp: int
    txn_last_update_timestamp: int


@dataclass(eq=False)
class TransactionMetadata:
    """One transactional id as its coordinator knows it."""

    transactional_id: str
    producer_id: int
    last_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    txn_timeout_ms: int
    state: TransactionState
    topic_partitions: set[TopicPartition] = field(default_factory=set)
    txn_start_timestamp: int = -1
    txn_last_update_timestamp: int = -1
    # The state a transition under way goes to: set by prepare_*, cleared when it completes or
    # its append fails; while set, no other transition may start.
    pending_state: TransactionState | None = None
    # A previous fence's bumped epoch may not have reached the log: the next fence keeps it.
    has_failed_epoch_fence: bool = False

    @classmethod
    def new(cls, transactional_id: str, producer_id: int, txn_timeout_ms: int, now_ms: int) -> TransactionMetadata:
        """A transactional id seen for the first time: Empty, no epoch yet."""
        return cls(transactional_id, producer_id, NO_PRODUCER_ID, NO_PRODUCER_EPOCH, NO_PRODUCER_EPOCH,
                   txn_timeout_ms, TransactionState.EMPTY, txn_last_update_timestamp=now_ms)

    @property
    def pending_transition_in_progress(self) -> bool:
        return self.pending_state is not None

    @property
    def is_producer_epoch_exhausted(self) -> bool:
        return is_epoch_exhausted(self.producer_epoch)

    @property
    def has_pending_transaction(self) -> bool:
        return self.state in (TransactionState.ONGOING, TransactionState.PREPARE_ABORT, TransactionState.PREPARE_COMMIT)

    def add_partitions(self, partitions: set[TopicPartition] | frozenset[TopicPartition]) -> None:
        self.topic_partitions |= partitions

    def remove_partition(self, tp: TopicPartition) -> None:
        """A partition's marker is written (or it needs none any more)."""
        if self.state not in (TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT):
            raise IllegalStateError(
                f"Transaction metadata's current state is {self.state.state_name}, and its pending state is "
                f"{self.pending_state}, while trying to remove partitions whose txn marker has been sent"
            )
        self.topic_partitions.discard(tp)

    def prepare_no_transit(self) -> TxnTransitMetadata:
        """The current state as a transit, without a pending state (for tests)."""
        return TxnTransitMetadata(
            self.producer_id, self.last_producer_id, self.producer_epoch, self.last_producer_epoch,
            self.txn_timeout_ms, self.state, frozenset(self.topic_partitions), self.txn_start_timestamp,
            self.txn_last_update_timestamp,
        )

    # --- prepared transitions -------------------------------------------------------------------

    def prepare_fence_producer_epoch(self) -> TxnTransitMetadata:
        """Bump the epoch to fence the current producer before aborting its transaction (the
        bump is not bumped again if the previous fence's write failed)."""
        if self.producer_epoch == MAX_PRODUCER_EPOCH:
            raise IllegalStateError("Cannot fence producer with epoch equal to Short.MaxValue since this would overflow")
        bumped = self.producer_epoch if self.has_failed_epoch_fence else self.producer_epoch + 1
        return self._prepare_transition_to(
            TransactionState.PREPARE_EPOCH_FENCE, self.producer_id, bumped, NO_PRODUCER_EPOCH, self.txn_timeout_ms,
            frozenset(self.topic_partitions), self.txn_start_timestamp, self.txn_last_update_timestamp,
        )

    def prepare_increment_producer_epoch(
        self, new_txn_timeout_ms: int, expected_producer_epoch: int | None, update_timestamp: int
    ) -> TxnTransitMetadata | ErrorCode:
        """InitProducerId's epoch bump (KIP-360: a producer that names its current epoch gets it
        bumped; one naming the previous epoch is retrying a bump it did not see; any other is
        fenced, PRODUCER_FENCED)."""
        if self.is_producer_epoch_exhausted:
            raise IllegalStateError(f"Cannot allocate any more producer epochs for producerId {self.producer_id}")
        bumped = self.producer_epoch + 1
        if expected_producer_epoch is None:
            next_epoch, last_epoch = bumped, NO_PRODUCER_EPOCH
        elif self.producer_epoch == NO_PRODUCER_EPOCH or expected_producer_epoch == self.producer_epoch:
            next_epoch, last_epoch = bumped, self.producer_epoch
        elif expected_producer_epoch == self.last_producer_epoch:
            next_epoch, last_epoch = self.producer_epoch, self.last_producer_epoch
        else:
            log.info("Expected producer epoch %d does not match current producer epoch %d or previous producer "
                     "epoch %d", expected_producer_epoch, self.producer_epoch, self.last_producer_epoch)
            return ErrorCode.PRODUCER_FENCED
        return self._prepare_transition_to(
            TransactionState.EMPTY, self.producer_id, next_epoch, last_epoch, new_txn_timeout_ms, frozenset(), -1,
            update_timestamp,
        )

    def prepare_producer_id_rotation(
        self, new_producer_id: int, new_txn_timeout_ms: int, update_timestamp: int, record_last_epoch: bool
    ) -> TxnTransitMetadata:
        """The epoch is exhausted: a new producer id, epoch 0."""
        if self.has_pending_transaction:
            raise IllegalStateError("Cannot rotate producer ids while a transaction is still pending")
        return self._prepare_transition_to(
            TransactionState.EMPTY, new_producer_id, 0, self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH,
            new_txn_timeout_ms, frozenset(), -1, update_timestamp,
        )

    def prepare_add_partitions(self, added: frozenset[TopicPartition], update_timestamp: int) -> TxnTransitMetadata:
        start = update_timestamp if self.state in (
            TransactionState.EMPTY, TransactionState.COMPLETE_ABORT, TransactionState.COMPLETE_COMMIT
        ) else self.txn_start_timestamp
        return self._prepare_transition_to(
            TransactionState.ONGOING, self.producer_id, self.producer_epoch, self.last_producer_epoch,
            self.txn_timeout_ms, frozenset(self.topic_partitions | added), start, update_timestamp,
        )

    def prepare_abort_or_commit(self, new_state: TransactionState, update_timestamp: int) -> TxnTransitMetadata:
        return self._prepare_transition_to(
            new_state, self.producer_id, self.producer_epoch, self.last_producer_epoch, self.txn_timeout_ms,
            frozenset(self.topic_partitions), self.txn_start_timestamp, update_timestamp,
        )

    def prepare_complete(self, update_timestamp: int) -> TxnTransitMetadata:
        new_state = (TransactionState.COMPLETE_COMMIT if self.state == TransactionState.PREPARE_COMMIT
                     else TransactionState.COMPLETE_ABORT)
        # The prepare state reached the log, so an earlier failed fence is settled.
        self.has_failed_epoch_fence = False
        return self._prepare_transition_to(
            new_state, self.producer_id, self.producer_epoch, self.last_producer_epoch, self.txn_timeout_ms,
            frozenset(), self.txn_start_timestamp, update_timestamp,
        )

    def prepare_dead(self) -> TxnTransitMetadata:
        return self._prepare_transition_to(
            TransactionState.DEAD, self.producer_id, self.producer_epoch, self.last_producer_epoch,
            self.txn_timeout_ms, frozenset(), self.txn_start_timestamp, self.txn_last_update_timestamp,
        )

    def _prepare_transition_to(
        self, new_state: TransactionState, new_producer_id: int, new_epoch: int, new_last_epoch: int,
        new_txn_timeout_ms: int, new_partitions: frozenset[TopicPartition], new_start_timestamp: int,
        update_timestamp: int,
    ) -> TxnTransitMetadata:
        if self.pending_state is not None:
            raise IllegalStateError(
                f"Preparing transaction state transition to {new_state.state_name} while it already has a pending "
                f"state {self.pending_state.state_name}"
            )
        if new_producer_id < 0:
            raise ValueError(f"Illegal new producer id {new_producer_id}")
        # An id created and never initialized keeps epoch -1 until it is Dead.
        if new_state != TransactionState.DEAD and new_epoch < 0:
            raise ValueError(f"Illegal new producer epoch {new_epoch}")
        if self.state not in new_state.valid_previous_states:
            raise IllegalStateError(
                f"Preparing transaction state transition to {new_state.state_name} failed since the target state "
                f"{new_state.state_name} is not a valid previous state of the current state {self.state.state_name}"
            )
        self.pending_state = new_state
        return TxnTransitMetadata(
            new_producer_id, self.producer_id, new_epoch, new_last_epoch, new_txn_timeout_ms, new_state,
            new_partitions, new_start_timestamp, update_timestamp,
        )

    # --- completing a transition ----------------------------------------------------------------

    def complete_transition_to(self, transit: TxnTransitMetadata) -> None:
        """Apply a prepared transition whose record is in the log (Kafka's checks: the pending
        state is the target, the epoch is the same or bumped by one, partitions only grow while
        Ongoing, ...)."""
        to_state = self.pending_state
        if to_state is None:
            raise IllegalStateError(
                f"TransactionalId {self.transactional_id} completing transaction state transition while it does "
                "not have a pending state"
            )
        if to_state != transit.txn_state:
            self._transition_failure(transit)
        S = TransactionState
        if to_state == S.EMPTY:  # InitProducerId
            if ((self.producer_epoch != transit.producer_epoch and not self._valid_producer_epoch_bump(transit))
                    or transit.topic_partitions or transit.txn_start_timestamp != -1):
                self._transition_failure(transit)
            self.txn_timeout_ms = transit.txn_timeout_ms
            self.producer_epoch = transit.producer_epoch
            self.last_producer_epoch = transit.last_producer_epoch
            self.producer_id = transit.producer_id
            self.last_producer_id = transit.last_producer_id
        elif to_state == S.ONGOING:  # AddPartitionsToTxn
            if (not self._valid_producer_epoch(transit) or not self.topic_partitions <= transit.topic_partitions
                    or self.txn_timeout_ms != transit.txn_timeout_ms):
                self._transition_failure(transit)
            self.txn_start_timestamp = transit.txn_start_timestamp
            self.add_partitions(transit.topic_partitions)
        elif to_state in (S.PREPARE_ABORT, S.PREPARE_COMMIT):  # EndTxn
            if (not self._valid_producer_epoch(transit) or self.topic_partitions != transit.topic_partitions
                    or self.txn_timeout_ms != transit.txn_timeout_ms
                    or self.txn_start_timestamp != transit.txn_start_timestamp):
                self._transition_failure(transit)
        elif to_state in (S.COMPLETE_ABORT, S.COMPLETE_COMMIT):  # every marker written
            if (not self._valid_producer_epoch(transit) or self.txn_timeout_ms != transit.txn_timeout_ms
                    or transit.txn_start_timestamp == -1):
                self._transition_failure(transit)
            self.txn_start_timestamp = transit.txn_start_timestamp
            self.topic_partitions.clear()
        elif to_state == S.PREPARE_EPOCH_FENCE:
            # A fence goes straight on to PrepareAbort: it is never completed itself.
            self._transition_failure(transit)
        else:  # DEAD
            raise IllegalStateError(
                f"TransactionalId {self.transactional_id} is trying to complete a transition to Dead: an expired "
                "id is removed from the cache, never written in the Dead state"
            )
        self.txn_last_update_timestamp = transit.txn_last_update_timestamp
        self.pending_state = None
        self.state = to_state

    def _valid_producer_epoch(self, transit: TxnTransitMetadata) -> bool:
        return transit.producer_epoch == self.producer_epoch and transit.producer_id == self.producer_id

    def _valid_producer_epoch_bump(self, transit: TxnTransitMetadata) -> bool:
        return transit.producer_epoch == self.producer_epoch + 1 or (
            transit.producer_epoch == 0 and transit.producer_id != self.producer_id
        )

    def _transition_failure(self, transit: TxnTransitMetadata) -> NoReturn:
        raise IllegalStateError(
            f"TransactionalId {self.transactional_id} failed transition to state {transit} due to unexpected "
            f"metadata (current: {self})"
        )
