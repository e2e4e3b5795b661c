"""Idempotent-producer state of one partition: last sequences per producer id.

Owns the duplicate and sequence checks Kafka's ``ProducerStateManager`` makes for each appended
batch that carries a producer id: a retried batch (same epoch, same first/last sequence as one of
the producer's last five batches) is answered with its original offsets and not appended again; a
gap in sequence numbers is OUT_OF_ORDER_SEQUENCE_NUMBER (45); an older epoch is
INVALID_PRODUCER_EPOCH (47). State is rebuilt from batch headers when a log is loaded; a producer
whose state is gone (its batches were deleted) may resume at any sequence, as in Kafka.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

NO_PRODUCER_EPOCH = -1
INT32_MAX = 2**31 - 1
RETAINED_BATCHES = 5  # Kafka's ProducerStateEntry.NUM_BATCHES_TO_RETAIN


class OutOfOrderSequenceError(Exception):
    """The batch's first sequence does not follow the producer's last one."""


class InvalidProducerEpochError(Exception):
    """The batch comes from a fenced (older) producer epoch."""


@dataclass(frozen=True)
class BatchMetadata:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


@dataclass
class ProducerEntry:
    producer_epoch: int = NO_PRODUCER_EPOCH
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=RETAINED_BATCHES))
    last_timestamp: int = -1

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


def last_sequence(base_sequence: int, last_offset_delta: int) -> int:
    """The sequence of a batch's last record; sequences wrap at Int32.MAX."""
    value = base_sequence + last_offset_delta
    return value - INT32_MAX - 1 if value > INT32_MAX else value


class ProducerStateManager:
    """Producer id → its latest epoch and last batches, for one partition."""

    def __init__(self) -> None:
        self._producers: dict[int, ProducerEntry] = {}

    def __len__(self) -> int:
        return len(self._producers)

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

    def check(self, producer_id: int, producer_epoch: int, first_seq: int) -> None:
        """Raise if a new batch from this producer may not be appended."""
        entry = self._producers.get(producer_id)
        if entry is None:
            return
        if producer_epoch < entry.producer_epoch:
            raise InvalidProducerEpochError(
                f"Producer {producer_id}'s epoch {producer_epoch} is older than {entry.producer_epoch}"
            )
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

    def update(
        self,
        producer_id: int,
        producer_epoch: int,
        first_seq: int,
        last_seq: int,
        first_offset: int,
        last_offset: int,
        timestamp: int,
    ) -> None:
        entry = self._producers.get(producer_id)
        if entry is None:
            entry = self._producers[producer_id] = ProducerEntry()
        if producer_epoch != entry.producer_epoch:
            entry.producer_epoch = producer_epoch
            entry.batches.clear()
        entry.batches.append(BatchMetadata(first_seq, last_seq, first_offset, last_offset, timestamp))
        entry.last_timestamp = timestamp

    def truncate_and_reload(self) -> None:
        """Forget everything (the log was truncated; the caller replays what remains)."""
        self._producers.clear()
