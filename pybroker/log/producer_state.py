"""Producer state of one partition: idempotent sequences and open transactions per producer id.

Owns what Kafka's ``ProducerStateManager`` and ``ProducerAppendInfo`` decide for each appended
batch that carries a producer id:

* idempotence: a retried batch (same epoch, same first/last sequence as one of the producer's last
  five batches) is answered with its original offsets and not appended again; a gap in sequence
  numbers is OUT_OF_ORDER_SEQUENCE_NUMBER (45); an older epoch is INVALID_PRODUCER_EPOCH (47);
* transactions (KIP-98): a producer's first transactional batch opens its transaction at that
  offset; a non-transactional batch while one is open is INVALID_TXN_STATE (48); a commit or abort
  marker closes it (a marker from an older coordinator epoch is TRANSACTION_COORDINATOR_FENCED,
  52) and yields the ``CompletedTxn`` the log writes to its aborted-transaction index;
* the first unstable offset: the first offset of the earliest transaction that is still open,
  or closed by a marker the high watermark has not passed yet. The log's last stable offset (LSO)
  is that offset, or the high watermark when there is none;
* KIP-890's verification guard: a producer's first transactional batch on the partition is
  appended only with the guard the leader made when it began asking the coordinator about it, so
  that a marker written while the leader waited for the answer (the transaction ended) makes the
  append INVALID_TXN_STATE instead of opening a transaction no coordinator knows.

State is rebuilt from batch headers when a log is loaded, starting from the newest producer
snapshot (`pybroker.log.producer_snapshot`); a producer whose state is gone (its batches were
deleted) may resume at any sequence, as in Kafka.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from pybroker.common.errors import ErrorCode, KafkaError

NO_PRODUCER_EPOCH = -1
INT32_MAX = 2**31 - 1
RETAINED_BATCHES = 5  # Kafka's ProducerStateEntry.NUM_BATCHES_TO_RETAIN


class OutOfOrderSequenceError(KafkaError):
    """The batch's first sequence does not follow the producer's last one."""

    code = ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


class InvalidProducerEpochError(KafkaError):
    """The batch or marker comes from a fenced (older) producer epoch."""

    code = ErrorCode.INVALID_PRODUCER_EPOCH


class InvalidTxnStateError(KafkaError):
    """A non-transactional batch from a producer whose transaction is open."""

    code = ErrorCode.INVALID_TXN_STATE


class TransactionCoordinatorFencedError(KafkaError):
    """A marker from a coordinator epoch older than the producer's last one."""

    code = ErrorCode.TRANSACTION_COORDINATOR_FENCED


@dataclass(frozen=True)
class BatchMetadata:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


@dataclass(frozen=True)
class CompletedTxn:
    """A transaction closed by a marker: its first data offset, the marker's offset, and whether
    it was aborted (Kafka's ``CompletedTxn``)."""

    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool


@dataclass
class ProducerEntry:
    producer_epoch: int = NO_PRODUCER_EPOCH
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=RETAINED_BATCHES))
    last_timestamp: int = -1
    coordinator_epoch: int = -1
    current_txn_first_offset: int = -1  # -1: no open transaction

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1

    def bump_epoch(self, producer_epoch: int) -> None:
        if producer_epoch != self.producer_epoch:
            self.producer_epoch = producer_epoch
            self.batches.clear()


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


def last_sequence(base_sequence: int, last_offset_delta: int) -> int:
    """The sequence of a batch's last record; sequences wrap at Int32.MAX."""
    value = base_sequence + last_offset_delta
    return value - INT32_MAX - 1 if value > INT32_MAX else value


@dataclass
class VerificationState:
    """A producer's verification under way (Kafka's ``VerificationStateEntry``): made when the
    leader starts asking the coordinator, dropped by the producer's next transactional write."""

    guard: object
    timestamp: int


class ProducerStateManager:
    """Producer id → its latest epoch, last batches and open transaction, for one partition;
    the partition's open and not-yet-replicated transactions."""

    def __init__(self) -> None:
        # transaction.partition.verification.enable: whether a client's first transactional batch
        # needs a verification guard (the log manager sets it from the broker's config).
        self.verification_enabled = False
        self._verifications: dict[int, VerificationState] = {}
        self._producers: dict[int, ProducerEntry] = {}
        # First offset → producer id, for open transactions (inserted in log order, so ascending).
        self._ongoing: dict[int, int] = {}
        # First offset → completed transaction whose marker is at or above the high watermark.
        self._unreplicated: dict[int, CompletedTxn] = {}

    def __len__(self) -> int:
        return len(self._producers)

    @property
    def producers(self) -> dict[int, ProducerEntry]:
        return self._producers

    def entry(self, producer_id: int) -> ProducerEntry | None:
        return self._producers.get(producer_id)

    # --- checks (nothing changes) ----------------------------------------------------------------

    def find_duplicate(
        self, producer_id: int, producer_epoch: int, first_seq: int, last_seq: int
    ) -> BatchMetadata | None:
        """The already-appended batch this one repeats, if it is a retry."""
        entry = self._producers.get(producer_id)
        if entry is None or entry.producer_epoch != producer_epoch:
            return None
        for batch in entry.batches:
            if batch.first_seq == first_seq and batch.last_seq == last_seq:
                return batch
        return None

    def needs_verification(self, producer_id: int, producer_epoch: int) -> bool:
        """Whether a transactional batch of this producer epoch would open a transaction here."""
        entry = self._producers.get(producer_id)
        return entry is None or entry.current_txn_first_offset < 0 or entry.producer_epoch != producer_epoch

    def check_verified(self, producer_id: int, producer_epoch: int, guard: object | None) -> None:
        """Raise unless a client's transactional batch may be appended: its transaction is open
        here, or ``guard`` is this producer's verification guard (verification enabled)."""
        if not self.verification_enabled or not self.needs_verification(producer_id, producer_epoch):
            return
        state = self._verifications.get(producer_id)
        if guard is None or state is None or state.guard is not guard:
            raise InvalidTxnStateError("Record was not part of an ongoing transaction")

    def check(
        self, producer_id: int, producer_epoch: int, first_seq: int, *,
        is_transactional: bool = False, check_sequence: bool = True,
    ) -> None:
        """Raise if a data batch from this producer may not be appended. A coordinator's own
        transactional writes (offsets of a transaction) skip the sequence check, as in Kafka."""
        entry = self._producers.get(producer_id)
        if entry is None:
            return
        self._check_epoch(producer_id, producer_epoch, entry)
        if check_sequence:
            if producer_epoch != entry.producer_epoch:
                if first_seq != 0 and entry.producer_epoch != NO_PRODUCER_EPOCH:
                    raise OutOfOrderSequenceError(
                        f"Invalid sequence number for new epoch of producer {producer_id}: "
                        f"{producer_epoch} (request epoch), {first_seq} (seq. number), "
                        f"{entry.producer_epoch} (current producer epoch)"
                    )
            elif entry.batches and not _in_sequence(entry.last_seq, first_seq):
                raise OutOfOrderSequenceError(
                    f"Out of order sequence number for producer {producer_id} at offset: "
                    f"{first_seq} (incoming seq. number), {entry.last_seq} (current end sequence number)"
                )
        if not is_transactional and entry.current_txn_first_offset >= 0:
            raise InvalidTxnStateError(
                f"Expected transactional write from producer {producer_id} at offset "
                f"{entry.current_txn_first_offset}"
            )

    def check_marker(self, producer_id: int, producer_epoch: int, coordinator_epoch: int) -> None:
        """Raise if a transaction marker for this producer may not be appended."""
        entry = self._producers.get(producer_id)
        if entry is None:
            return
        self._check_epoch(producer_id, producer_epoch, entry)
        if coordinator_epoch < entry.coordinator_epoch:
            raise TransactionCoordinatorFencedError(
                f"Invalid coordinator epoch for producer {producer_id}: {coordinator_epoch} "
                f"(zombie), {entry.coordinator_epoch} (current)"
            )

    @staticmethod
    def _check_epoch(producer_id: int, producer_epoch: int, entry: ProducerEntry) -> None:
        if producer_epoch < entry.producer_epoch:
            raise InvalidProducerEpochError(
                f"Epoch of producer {producer_id} is {producer_epoch}, which is smaller than the "
                f"last seen epoch {entry.producer_epoch}"
            )

    # --- updates (after the append) --------------------------------------------------------------

    def update(
        self,
        producer_id: int,
        producer_epoch: int,
        first_seq: int,
        last_seq: int,
        first_offset: int,
        last_offset: int,
        timestamp: int,
        is_transactional: bool = False,
    ) -> None:
        """Record an appended data batch; a transactional one opens the producer's transaction
        if none is open."""
        entry = self._producers.get(producer_id)
        if entry is None:
            entry = self._producers[producer_id] = ProducerEntry()
        entry.bump_epoch(producer_epoch)
        entry.batches.append(BatchMetadata(first_seq, last_seq, first_offset, last_offset, timestamp))
        entry.last_timestamp = timestamp
        if is_transactional:
            self._verifications.pop(producer_id, None)
            if entry.current_txn_first_offset < 0:
                entry.current_txn_first_offset = first_offset
                self._ongoing[first_offset] = producer_id

    def update_marker(
        self, producer_id: int, producer_epoch: int, coordinator_epoch: int, offset: int, commit: bool,
        timestamp: int,
    ) -> CompletedTxn | None:
        """Record an appended commit/abort marker at ``offset``: closes the producer's open
        transaction, which is returned (None when no data was written in it, as Kafka: such a
        transaction changes neither the LSO nor the index). Call ``last_stable_offset`` and then
        ``complete`` with it."""
        self._verifications.pop(producer_id, None)
        entry = self._producers.get(producer_id)
        if entry is None:
            entry = self._producers[producer_id] = ProducerEntry()
        completed = None
        if entry.current_txn_first_offset >= 0:
            completed = CompletedTxn(producer_id, entry.current_txn_first_offset, offset, not commit)
        entry.bump_epoch(producer_epoch)
        entry.current_txn_first_offset = -1
        entry.coordinator_epoch = coordinator_epoch
        entry.last_timestamp = timestamp
        return completed

    def last_stable_offset(self, completed: CompletedTxn) -> int:
        """The LSO once ``completed`` is complete (the value its aborted-index entry records): the
        first offset of the earliest other open transaction, else the marker's offset + 1."""
        for first_offset, producer_id in self._ongoing.items():
            if producer_id != completed.producer_id:
                return first_offset
        return completed.last_offset + 1

    def complete(self, completed: CompletedTxn) -> None:
        """Move a closed transaction from open to awaiting replication of its marker."""
        self._ongoing.pop(completed.first_offset, None)
        self._unreplicated[completed.first_offset] = completed

    def on_high_watermark_updated(self, high_watermark: int) -> None:
        """Transactions whose marker the high watermark passed stop holding the LSO back."""
        self._remove_unreplicated_below(high_watermark)

    def on_log_start_offset_incremented(self, log_start_offset: int) -> None:
        self._remove_unreplicated_below(log_start_offset)

    def _remove_unreplicated_below(self, offset: int) -> None:
        if self._unreplicated:
            for first_offset in [f for f, txn in self._unreplicated.items() if txn.last_offset < offset]:
                del self._unreplicated[first_offset]

    @property
    def first_unstable_offset(self) -> int | None:
        """The first offset of the earliest open or unreplicated transaction, if any."""
        first = next(iter(self._ongoing), None)
        if self._unreplicated:
            unreplicated = min(self._unreplicated)
            first = unreplicated if first is None else min(first, unreplicated)
        return first

    def last_records(self) -> dict[int, tuple[int | None, int]]:
        """Per producer: the last offset of its last data batch (None when none is known) and its
        epoch — what the log cleaner must keep for producer state to survive a clean (Kafka's
        ``lastRecordsOfActiveProducers``)."""
        return {
            producer_id: (entry.batches[-1].last_offset if entry.batches else None, entry.producer_epoch)
            for producer_id, entry in self._producers.items()
        }

    @property
    def ongoing_transactions(self) -> dict[int, int]:
        """First offset → producer id of every open transaction, ascending."""
        return dict(self._ongoing)

    # --- loading ---------------------------------------------------------------------------------

    def load_entry(self, producer_id: int, entry: ProducerEntry) -> None:
        """A producer read from a snapshot (its open transaction included)."""
        self._producers[producer_id] = entry
        if entry.current_txn_first_offset >= 0:
            self._ongoing[entry.current_txn_first_offset] = producer_id
            self._ongoing = dict(sorted(self._ongoing.items()))

    def start_verification(self, producer_id: int, now_ms: int) -> object:
        """The producer's verification guard, made now unless a verification is under way."""
        state = self._verifications.get(producer_id)
        if state is None:
            state = self._verifications[producer_id] = VerificationState(object(), now_ms)
        return state.guard

    def remove_expired(self, now_ms: int, expiration_ms: int) -> int:
        """Forget producers idle for ``expiration_ms`` with no open transaction
        (producer.id.expiration.ms), and verifications started that long ago and never
        followed by an append; returns how many producers went."""
        expired = [
            producer_id for producer_id, entry in self._producers.items()
            if entry.current_txn_first_offset < 0 and now_ms - entry.last_timestamp >= expiration_ms
        ]
        for producer_id in expired:
            del self._producers[producer_id]
        for producer_id in [p for p, v in self._verifications.items() if now_ms - v.timestamp >= expiration_ms]:
            del self._verifications[producer_id]
        return len(expired)

    def truncate_and_reload(self) -> None:
        """Forget everything (the log was truncated or is being loaded; the caller replays)."""
        self._producers.clear()
        self._ongoing.clear()
        self._unreplicated.clear()
