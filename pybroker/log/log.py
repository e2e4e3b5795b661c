"""One partition's log: its segments, offsets, and the rules for appending, reading and trimming.

Owns the ordered list of native ``Segment`` objects of one ``<topic>-<partition>`` directory and
the offsets Kafka's ``UnifiedLog`` tracks: the log end offset (LEO), the high watermark, the log
start offset (which may sit inside a segment — KIP-107's soft delete), and the recovery point
(everything below it is known to be fsynced). A leader appends produced records
(``append_as_leader``: offsets and its epoch assigned, a client's records refused without keys
in a compacted topic); a follower appends its leader's batches as
they are (``append_as_follower``) and truncates where its log diverged (``truncate_to``,
``truncate_fully_and_start_at``). Record bytes never pass through Python code here:
validation, offset assignment, indexing, reading and truncation are single calls into Rust.
Retention (``delete_old_segments``) decides from segment metadata only: base offsets, sizes,
largest timestamps, file mtimes.

Not thread-safe: every method runs on the event loop, except ``delete_files``, which only removes
files and may run in a worker thread, and the constructor of a new log, which touches nothing
shared (the log manager creates new logs in a worker thread).
"""

from __future__ import annotations

import bisect
import logging
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import Enum

from pybroker import _native
from pybroker.common.errors import ErrorCode, KafkaError
from pybroker.log.config import LogConfig
from pybroker.log.leader_epoch import LeaderEpochCache
from pybroker.log.producer_snapshot import (
    CorruptSnapshotError,
    delete_snapshots,
    read_snapshot,
    snapshot_file_name,
    snapshot_offsets,
    write_snapshot,
)
from pybroker.log.producer_state import CompletedTxn, ProducerStateManager, last_sequence
from pybroker.types import TopicPartition

log = logging.getLogger(__name__)

LOG_SUFFIX = ".log"
DELETED_SUFFIX = ".deleted"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
INT32_MAX = 2**31 - 1
PARTITION_METADATA = "partition.metadata"
TXN_INDEX_SUFFIX = ".txnindex"
SEGMENT_SUFFIXES = (LOG_SUFFIX, ".index", ".timeindex", TXN_INDEX_SUFFIX)
CONTROL_TYPE_ABORT = 0
CONTROL_TYPE_COMMIT = 1


class OffsetOutOfRangeError(KafkaError):
    """An offset outside [log start offset, log end offset]."""

    code = ErrorCode.OFFSET_OUT_OF_RANGE


class InvalidRecordError(KafkaError):
    """Records that are well-formed but not acceptable."""

    code = ErrorCode.INVALID_RECORD


def _java_long(value: int) -> int:
    """``value`` as a Java long sum gives it: wrapped to 64 bits (Kafka prints ``now`` plus an
    unset limit, Long.MAX_VALUE, as a negative number)."""
    return (value + 2**63) % 2**64 - 2**63


class RecordValidationError(InvalidRecordError):
    """Kafka's ``RecordValidationException``: a batch refused whole because of some of its
    records (its code is INVALID_RECORD, or INVALID_TIMESTAMP when ``invalid_timestamp``: a
    timestamp was among the reasons). ``record_errors`` lists ``(batch_index, message)`` per refused record
    (Produce v8+ answers them as ``RecordErrors``); the exception's message is Kafka's summary,
    which Produce v8+ answers as ``ErrorMessage``."""

    def __init__(self, record_errors: list[tuple[int, str]], invalid_timestamp: bool = False) -> None:
        shown = ", ".join(f"RecordError(batchIndex={index}, message='{message}')"
                          for index, message in record_errors[:3])
        if invalid_timestamp:  # Kafka's InvalidTimestampException (INVALID_TIMESTAMP, 32)
            super().__init__("One or more records have been rejected due to invalid timestamp")
        else:
            super().__init__(
                f"One or more records have been rejected due to {len(record_errors)} record errors in total, "
                f"and only showing the first three errors at most: [{shown}]"
            )
        self.record_errors = record_errors
        self.invalid_timestamp = invalid_timestamp
        if invalid_timestamp:
            self.code = ErrorCode.INVALID_TIMESTAMP


class UnexpectedAppendOffsetError(Exception):
    """A follower append whose first offset is below the log end offset (Kafka's
    UnexpectedAppendOffsetException). Carries the set's ``first_offset`` and ``last_offset``: when
    the log is empty at its start offset and the set straddles it (the leader's log start offset
    fell inside a batch), Kafka's ``Partition`` restarts the log at ``first_offset`` and appends
    again."""

    def __init__(self, message: str, first_offset: int, last_offset: int) -> None:
        super().__init__(message)
        self.first_offset = first_offset
        self.last_offset = last_offset


class OffsetsOutOfOrderError(Exception):
    """A follower append whose batches' offsets do not increase (Kafka's OffsetsOutOfOrderException)."""


class AppendOrigin(Enum):
    """Who appends to a leader's log (Kafka's ``AppendOrigin``): a client's Produce request, or a
    coordinator of this broker writing its own records (group offsets, transaction state,
    transaction markers). A coordinator's transactional batches skip the producer sequence check
    and only a coordinator may write control batches."""

    CLIENT = "client"
    COORDINATOR = "coordinator"


def segment_file_name(base_offset: int, suffix: str) -> str:
    return f"{base_offset:020d}{suffix}"


@dataclass
class LogAppendInfo:
    """What an append did: the offsets it assigned (or, for a retried batch, had assigned)."""

    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time: int  # -1 unless the topic uses LogAppendTime
    record_count: int
    duplicate: bool = False
    # partitionLeaderEpoch of the last appended batch (-1 when unknown): a follower's next
    # lastFetchedEpoch.
    last_leader_epoch: int = -1


def write_partition_metadata(partition_dir: str, topic_id: str) -> None:
    """Kafka's ``partition.metadata``: the topic id this directory belongs to. Not fsynced here:
    the log manager fsyncs new ones in the background, in batches."""
    with open(os.path.join(partition_dir, PARTITION_METADATA), "w", encoding="utf-8") as f:
        f.write(f"version: 0\ntopic_id: {topic_id}\n")


@dataclass
class SegmentListing:
    """The segments of a partition directory, by base offset, ascending; ``swapped``: those just
    completed from an interrupted swap of cleaned segments (recovered when the log loads)."""

    bases: list[int]
    swapped: list[int]


def segment_base_offsets(directory: str) -> SegmentListing:
    """List a partition directory's segments, first finishing what a crash interrupted (Kafka's
    ``LogLoader``): leftovers of a segment deletion (``.deleted``) or checkpoint write (``.tmp``)
    go; so do a clean's unfinished ``.cleaned`` files, and any ``.swap`` file at or above the
    lowest of them. A remaining ``.log.swap`` is a cleaned segment that was being swapped in: the
    old segments in its offset range are removed and every ``.swap`` file is renamed into place,
    so the log holds either all old or all new segments, never a mix."""
    names = os.listdir(directory)
    cleaned = [name for name in names if name.endswith(CLEANED_SUFFIX)]
    lowest_cleaned = min((o for name in cleaned if (o := _offset_of(name)) is not None), default=None)
    swaps: list[str] = []
    for name in names:
        path = os.path.join(directory, name)
        if name.endswith((DELETED_SUFFIX, ".tmp", CLEANED_SUFFIX)):
            os.remove(path)
        elif name.endswith(SWAP_SUFFIX):
            offset = _offset_of(name)
            if lowest_cleaned is not None and offset is not None and offset >= lowest_cleaned:
                os.remove(path)
            else:
                swaps.append(name)
    swapped = sorted(o for name in swaps
                     if name.endswith(LOG_SUFFIX + SWAP_SUFFIX) and (o := _offset_of(name)) is not None)
    if swapped:
        low = swapped[0]
        high = max(_swap_segment_end(directory, base) for base in swapped)
        for name in os.listdir(directory):
            offset = _offset_of(name)
            if (not name.endswith(SWAP_SUFFIX) and name.endswith(SEGMENT_SUFFIXES)
                    and offset is not None and low <= offset < high):
                log.info("Deleting segment file %s, compacted but not yet deleted", name)
                os.remove(os.path.join(directory, name))
    for name in swaps:
        log.info("Recovering file %s by renaming it from its .swap name", name)
        os.rename(os.path.join(directory, name), os.path.join(directory, name[: -len(SWAP_SUFFIX)]))
    bases = sorted(int(name[: -len(LOG_SUFFIX)]) for name in os.listdir(directory)
                   if name.endswith(LOG_SUFFIX) and name[: -len(LOG_SUFFIX)].isdigit())
    return SegmentListing(bases, swapped)


def _offset_of(name: str) -> int | None:
    """The base offset a segment file's name starts with, None for other files."""
    digits = name.split(".", 1)[0]
    return int(digits) if len(digits) == 20 and digits.isdigit() else None


def _swap_segment_end(directory: str, base: int) -> int:
    """The next offset of the ``.swap`` segment at ``base`` (the end of the range it replaces)."""
    segment = _native.Segment(directory, base, suffix=SWAP_SUFFIX)
    try:
        return segment.next_offset
    finally:
        segment.close(False)


class Log:
    """A partition's append-only log of segments."""

    def __init__(
        self,
        directory: str,
        topic_partition: TopicPartition,
        config: LogConfig,
        *,
        recovery_point: int = 0,
        log_start_offset: int = 0,
        high_watermark: int = 0,
        had_clean_shutdown: bool = True,
        segment_bases: SegmentListing | None = None,
    ) -> None:
        self.dir = directory
        self.topic_partition = topic_partition
        self.config = config
        self.on_roll: Callable[[Log], None] | None = None
        # Given the ``.deleted`` files of segments retention removed; the log manager removes them
        # after file.delete.delay.ms. Unset, they stay until the next load removes them.
        self.on_segments_deleted: Callable[[Log, list[str]], None] | None = None
        # Given the log after its leader-epoch cache changed (a new epoch, a log start offset
        # move); the log manager writes leader-epoch-checkpoint off the event loop. Unset, it is
        # written at once.
        self.on_leader_epochs_changed: Callable[[Log], None] | None = None
        # Told when a truncation removed records (the log cleaner forgets what it knew of them).
        self.on_truncated: Callable[[Log], None] | None = None
        os.makedirs(directory, exist_ok=True)
        self.segments: list[_native.Segment] = []
        self._base_offsets: list[int] = []
        self.recovery_point = recovery_point
        self.leader_epoch_cache = LeaderEpochCache(directory)
        self.producer_state = ProducerStateManager()
        self._snapshot_offsets: list[int] = []
        self.unflushed_messages = 0
        self.last_flush_ms = time.monotonic() * 1000
        recovered_from = self._load(had_clean_shutdown, log_start_offset, segment_bases)
        if log_start_offset > self.log_end_offset:
            # Kafka's LogLoader: a checkpointed start beyond the end means every record is gone.
            log.warning("%s: log start offset %d is past the log end offset %d; starting empty at %d",
                        topic_partition, log_start_offset, self.log_end_offset, log_start_offset)
            self.truncate_fully_and_start_at(log_start_offset)
        self.log_start_offset = max(log_start_offset, self.segments[0].base_offset)
        self.recovery_point = min(max(self.recovery_point, self.log_start_offset), self.log_end_offset)
        self.high_watermark = min(max(high_watermark, self.log_start_offset), self.log_end_offset)
        # Written by the log manager once registered (it sees the cache dirty), off the loop.
        self.leader_epoch_cache.truncate_from_end(self.log_end_offset, flush=False)
        self._snapshot_offsets = snapshot_offsets(directory)
        self._load_producer_state(recovered_from, had_clean_shutdown)
        # Kafka's updateHighWatermark of the checkpointed value when the partition's log is made:
        # transactions the load closed below it hold the last stable offset back no longer.
        self.producer_state.on_high_watermark_updated(self.high_watermark)

    # --- loading and recovery ----------------------------------------------------------------

    def _open_segment(self, base_offset: int) -> _native.Segment:
        return _native.Segment(
            self.dir,
            base_offset,
            index_interval_bytes=self.config.index_interval_bytes,
            max_index_size=self.config.segment_index_bytes,
        )

    def _load(self, had_clean_shutdown: bool, log_start_offset: int, listing: SegmentListing | None) -> int | None:
        """Open the segments; after an unclean stop, recover those past the recovery point (and
        any whose aborted-transaction index is damaged, or that an interrupted swap put in
        place). Returns the base offset of the first recovered segment (their transaction
        indexes are rebuilt while producer state loads), None when none was."""
        if listing is None:
            listing = segment_base_offsets(self.dir)
        for base in listing.bases:
            self._add_segment(self._open_segment(base))
        if not self.segments:
            self._add_segment(self._open_segment(max(log_start_offset, 0)))
            return None
        start = None if had_clean_shutdown else max(bisect.bisect_right(self._base_offsets, self.recovery_point) - 1, 0)
        if listing.swapped:
            swapped = bisect.bisect_left(self._base_offsets, listing.swapped[0])
            start = swapped if start is None else min(start, swapped)
        damaged = next((i for i, segment in enumerate(self.segments) if segment.txn_index_damaged), None)
        if damaged is not None:
            log.warning("%s: the aborted-transaction index of segment %d is damaged; recovering from there",
                        self.topic_partition, self.segments[damaged].base_offset)
            start = damaged if start is None else min(start, damaged)
        if start is None:
            return None
        self._recover(start)
        return self.segments[start].base_offset if start < len(self.segments) else None

    def _recover(self, start: int) -> None:
        """After an unclean stop: rescan every segment from index ``start`` on."""
        for index in range(start, len(self.segments)):
            segment = self.segments[index]
            truncated = segment.recover(self.config.max_message_bytes)
            if truncated:
                log.warning(
                    "%s: truncated %d invalid bytes at the end of %s; removing %d later segment(s)",
                    self.topic_partition, truncated, segment.path, len(self.segments) - index - 1,
                )
                for later in self.segments[index + 1 :]:
                    later.delete()
                del self.segments[index + 1 :]
                del self._base_offsets[index + 1 :]
                break
        # The checkpoint is written behind the appends: epochs it missed are in the batches
        # (all of them when a crash damaged it).
        cache = self.leader_epoch_cache
        cache.truncate_from_end(self.log_end_offset, flush=False)
        for segment in self.segments[0 if cache.damaged else start :]:
            for epoch, base_offset in segment.leader_epoch_starts(cache.latest_epoch):
                cache.assign(epoch, base_offset, flush=False)
        self.recovery_point = self.log_end_offset

    def _load_producer_state(self, recovered_from: int | None, had_clean_shutdown: bool) -> None:
        """Kafka's ``rebuildProducerState``: start from the newest readable snapshot at or below the
        log end offset (and at or below ``recovered_from``, the first recovered segment, whose
        aborted-transaction index the replay rebuilds) and replay the batch headers after it.

        Snapshots past the log end offset (truncated data) or at or below the log start offset
        go, as in Kafka. A log that has none after a clean stop (written before snapshots
        existed) replays its last two segments; after an unclean stop, the whole log."""
        end = self.log_end_offset
        stale = [o for o in self._snapshot_offsets if o > end or o <= self.log_start_offset]
        if stale:
            delete_snapshots(self.dir, stale)
            self._snapshot_offsets = [o for o in self._snapshot_offsets if o not in stale]
        limit = end if recovered_from is None else min(end, recovered_from)
        self.producer_state.truncate_and_reload()
        start = None
        for offset in reversed([o for o in self._snapshot_offsets if o <= limit]):
            try:
                producers = read_snapshot(self.dir, offset)
            except (OSError, CorruptSnapshotError) as e:
                log.warning("%s: ignoring producer snapshot %s: %s", self.topic_partition,
                            snapshot_file_name(offset), e)
                delete_snapshots(self.dir, [offset])
                self._snapshot_offsets.remove(offset)
                continue
            for producer_id, entry in producers.items():
                self.producer_state.load_entry(producer_id, entry)
            start = offset
            break
        if start is None:
            if had_clean_shutdown and recovered_from is None and len(self.segments) > 1:
                start = self.segments[-2].base_offset
            else:
                start = self.log_start_offset
        self._replay_producer_state(max(start, self.log_start_offset), recovered_from)

    def _replay_producer_state(self, start: int, recovered_from: int | None) -> None:
        """Apply the headers of every batch from ``start`` to the log end offset to the producer
        state (one native header walk per segment); aborted transactions whose marker lies in a
        recovered segment (at or above ``recovered_from``) go back into its index."""
        first = max(bisect.bisect_right(self._base_offsets, start) - 1, 0)
        for segment in self.segments[first:]:
            if segment.next_offset <= start:
                # Nothing to replay here (a snapshot at the log end, as a clean stop leaves): the
                # segment's file is not even opened.
                continue
            rebuild_index = recovered_from is not None and segment.base_offset >= recovered_from
            for header in segment.batches():
                if header.last_offset < start or header.producer_id < 0:
                    continue
                if header.is_control:
                    self._apply_marker(header.producer_id, header.producer_epoch, header.coordinator_epoch,
                                       header.base_offset, header.control_type, header.max_timestamp,
                                       segment if rebuild_index else None)
                else:
                    self.producer_state.update(
                        header.producer_id, header.producer_epoch, header.base_sequence,
                        last_sequence(header.base_sequence, header.last_offset - header.base_offset),
                        header.base_offset, header.last_offset, header.max_timestamp, header.is_transactional,
                    )

    def _apply_marker(
        self, producer_id: int, producer_epoch: int, coordinator_epoch: int, offset: int, control_type: int,
        timestamp: int, segment: _native.Segment | None,
    ) -> CompletedTxn | None:
        """A commit or abort marker at ``offset`` closes the producer's transaction; an aborted
        one goes into ``segment``'s aborted-transaction index (None: it is there already), with
        the LSO it leaves (Kafka's ``updateTxnIndex`` then ``completeTxn``)."""
        if control_type not in (CONTROL_TYPE_ABORT, CONTROL_TYPE_COMMIT):
            return None
        completed = self.producer_state.update_marker(
            producer_id, producer_epoch, coordinator_epoch, offset, control_type == CONTROL_TYPE_COMMIT, timestamp
        )
        if completed is not None:
            if completed.is_aborted and segment is not None:
                segment.append_aborted_txn(
                    producer_id, completed.first_offset, completed.last_offset,
                    self.producer_state.last_stable_offset(completed),
                )
            self.producer_state.complete(completed)
        return completed

    def _take_producer_snapshot(self, offset: int) -> None:
        """Write the producer state as of ``offset`` (Kafka's ``takeSnapshot``), unless there is
        one there already."""
        if self._snapshot_offsets and self._snapshot_offsets[-1] >= offset:
            return
        write_snapshot(self.dir, offset, self.producer_state.producers)
        self._snapshot_offsets.append(offset)

    def _delete_snapshots(self, keep: Callable[[int], bool]) -> None:
        gone = [offset for offset in self._snapshot_offsets if not keep(offset)]
        if gone:
            delete_snapshots(self.dir, gone)
            self._snapshot_offsets = [offset for offset in self._snapshot_offsets if keep(offset)]

    def _add_segment(self, segment: _native.Segment) -> None:
        self.segments.append(segment)
        self._base_offsets.append(segment.base_offset)

    # --- offsets -------------------------------------------------------------------------------

    @property
    def active_segment(self) -> _native.Segment:
        return self.segments[-1]

    @property
    def log_end_offset(self) -> int:
        return self.segments[-1].next_offset

    @property
    def size_in_bytes(self) -> int:
        return sum(segment.size for segment in self.segments)

    def update_high_watermark(self, offset: int) -> int:
        """Set the high watermark to ``offset`` clamped to [log start offset, log end offset]
        (Kafka's ``updateHighWatermark``); it may go down. Returns the new value."""
        self.high_watermark = min(max(offset, self.log_start_offset), self.log_end_offset)
        self.producer_state.on_high_watermark_updated(self.high_watermark)
        return self.high_watermark

    @property
    def last_stable_offset(self) -> int:
        """The LSO (KIP-98): the first offset of the earliest transaction that is open or whose
        marker is not yet below the high watermark, never below the log start offset; the high
        watermark when there is none or it is above it. read_committed consumers read below it."""
        first_unstable = self.producer_state.first_unstable_offset
        if first_unstable is None or first_unstable >= self.high_watermark:
            return self.high_watermark
        return max(first_unstable, self.log_start_offset)

    def collect_aborted_transactions(self, start_offset: int, upper_bound_offset: int) -> list[tuple[int, int]]:
        """``(producer id, first offset)`` of every aborted transaction that overlaps
        [``start_offset``, ``upper_bound_offset``): what a read_committed fetch of that range
        returns beside its records (Kafka's ``collectAbortedTransactions``: each segment's index
        from the one holding ``start_offset`` on, until an entry's LSO reaches the bound)."""
        aborted: list[tuple[int, int]] = []
        index = max(bisect.bisect_right(self._base_offsets, start_offset) - 1, 0)
        for segment in self.segments[index:]:
            if not segment.has_txn_index:
                continue
            entries, complete = segment.collect_aborted_txns(start_offset, upper_bound_offset)
            aborted.extend((producer_id, first_offset) for producer_id, first_offset, _, _ in entries)
            if complete:
                break
        return aborted

    def maybe_update_high_watermark(self, leader_high_watermark: int) -> int | None:
        """A follower's high watermark after a fetch: the leader's, clamped as
        ``update_high_watermark`` does, so min(leader HW, own LEO) and never below the log start
        offset; it may go down. Returns the new value if it changed, else None (Kafka's
        ``maybeUpdateHighWatermark``)."""
        old = self.high_watermark
        new = self.update_high_watermark(leader_high_watermark)
        return None if new == old else new

    def maybe_increment_log_start_offset(self, new_offset: int, reason: str) -> bool:
        """Move the log start offset forward (never back, never past the high watermark)."""
        if new_offset > self.high_watermark:
            raise OffsetOutOfRangeError(
                f"Cannot increment the log start offset to {new_offset} of partition "
                f"{self.topic_partition} since it is larger than the high watermark "
                f"{self.high_watermark}"
            )
        if new_offset <= self.log_start_offset:
            return False
        self.log_start_offset = new_offset
        self.recovery_point = max(self.recovery_point, new_offset)
        self.producer_state.on_log_start_offset_incremented(new_offset)
        if self.on_leader_epochs_changed is None:
            self.leader_epoch_cache.truncate_from_start(new_offset)
        elif self.leader_epoch_cache.truncate_from_start(new_offset, flush=False):
            self.on_leader_epochs_changed(self)
        log.info("%s: incremented log start offset to %d due to %s", self.topic_partition, new_offset, reason)
        return True

    def assign_leader_epoch(self, epoch: int, start_offset: int) -> None:
        """Record that ``epoch`` starts at ``start_offset``; leader-epoch-checkpoint is written
        behind it (Kafka 3.7's asynchronous epoch flush)."""
        if self.on_leader_epochs_changed is None:
            self.leader_epoch_cache.assign(epoch, start_offset)
        elif self.leader_epoch_cache.assign(epoch, start_offset, flush=False):
            self.on_leader_epochs_changed(self)

    # --- append --------------------------------------------------------------------------------

    def append_as_leader(
        self, records: memoryview, leader_epoch: int, now_ms: int, origin: AppendOrigin = AppendOrigin.CLIENT,
        verification_guard: object | None = None,
    ) -> LogAppendInfo:
        """Validate, assign offsets to and append a produce request's record set. A client's
        transactional batch that opens a transaction needs the ``verification_guard`` its
        verification started with (``ProducerStateManager.start_verification``).

        A client's records sent to a topic whose ``cleanup.policy`` includes ``compact`` must
        have keys, and their timestamps must respect the topic's ``message.timestamp.*.max.ms``
        (Kafka's ``LogValidator``); coordinators' records are not checked.

        Raises ``CorruptRecordError``, ``RecordTooLargeError``,
        ``InvalidRecordError`` (``RecordValidationError`` for keyless records in a compacted
        topic and timestamps out of range) or the producer-state errors; nothing is appended then.
        """
        info = _native.validate_batches(records, self.config.max_message_bytes)
        if info.batch_count != 1:
            raise InvalidRecordError(
                "Produce requests with version 3+ are only allowed to contain exactly one record batch"
            )
        if origin is AppendOrigin.CLIENT and not info.is_control:
            self._check_records(records, now_ms)
        producer_id = info.producer_id
        if info.is_control:
            if origin is not AppendOrigin.COORDINATOR:
                raise InvalidRecordError("Clients are not allowed to write control records")
            self.producer_state.check_marker(producer_id, info.producer_epoch, info.coordinator_epoch)
        elif producer_id >= 0:
            first_seq = info.base_sequence
            last_seq = last_sequence(first_seq, info.last_offset_delta)
            client = origin is AppendOrigin.CLIENT
            duplicate = (
                self.producer_state.find_duplicate(producer_id, info.producer_epoch, first_seq, last_seq)
                if client else None
            )
            if duplicate is not None:
                return LogAppendInfo(
                    duplicate.first_offset, duplicate.last_offset, duplicate.timestamp,
                    duplicate.last_offset, -1, info.record_count, duplicate=True,
                )
            if client and info.is_transactional:
                self.producer_state.check_verified(producer_id, info.producer_epoch, verification_guard)
            self.producer_state.check(
                producer_id, info.producer_epoch, first_seq,
                is_transactional=info.is_transactional, check_sequence=client,
            )
        self._maybe_roll(info.size, info.max_timestamp, self.log_end_offset + info.record_count - 1, now_ms)
        first_offset = self.log_end_offset
        log_append_time = now_ms if self.config.log_append_time else -1
        last_offset, max_timestamp, offset_of_max = self.active_segment.append(
            records, first_offset, leader_epoch, log_append_time
        )
        if leader_epoch > self.leader_epoch_cache.latest_epoch:
            self.assign_leader_epoch(leader_epoch, first_offset)
        if info.is_control:
            self._apply_marker(producer_id, info.producer_epoch, info.coordinator_epoch, first_offset,
                               info.control_type, max_timestamp, self.active_segment)
        elif producer_id >= 0:
            self.producer_state.update(
                producer_id, info.producer_epoch, info.base_sequence,
                last_sequence(info.base_sequence, info.last_offset_delta),
                first_offset, last_offset, max_timestamp, info.is_transactional,
            )
        self.unflushed_messages += info.record_count
        return LogAppendInfo(
            first_offset, last_offset, max_timestamp, offset_of_max, log_append_time, info.record_count,
            last_leader_epoch=leader_epoch,
        )

    def _check_records(self, records: memoryview, now_ms: int) -> None:
        """Kafka's ``LogValidator.validateRecord`` for a client's batch: in a compacted topic every
        record needs a key (an empty one will do); with ``message.timestamp.before.max.ms`` /
        ``after.max.ms`` (or the deprecated difference) set on a CreateTime topic, every record's
        timestamp must lie within them of ``now_ms``. One native walk per check, and none without
        the rule; raises ``RecordValidationError`` naming each refused record (its first error),
        as INVALID_TIMESTAMP when any timestamp is refused."""
        errors: dict[int, str] = {}
        if "compact" in self.config.cleanup_policy:
            message = f"Compacted topic cannot accept message without key in topic partition {self.topic_partition}"
            errors = {index: message for index in _native.null_key_indexes(records)}
        limits = self.config.timestamp_limits
        bad_timestamps = False
        if limits is not None:
            before, after = limits
            for index, (offset, timestamp, _, _) in enumerate(_native.read_records(records)):
                if index in errors or timestamp == -1:
                    continue
                if now_ms - timestamp > before or timestamp - now_ms > after:
                    bad_timestamps = True
                    errors[index] = (f"Timestamp {timestamp} of message with offset {offset} is out of range. "
                                     f"The timestamp should be within [{_java_long(now_ms - before)}, "
                                     f"{_java_long(now_ms + after)}]")
        if errors:
            raise RecordValidationError(sorted(errors.items()), invalid_timestamp=bad_timestamps)

    def append_as_follower(self, records: memoryview, now_ms: int | None = None) -> LogAppendInfo:
        """Append a record set fetched from the partition leader as it is: the batches keep
        their offsets and partition leader epochs (Kafka's ``appendAsFollower``).

        One native walk validates the set (``validate_replicated_batches``: structure and CRC
        of every batch; like Kafka's follower, no max.message.bytes limit, no rule on the
        number of batches) and reports the epochs that start in it and its idempotent batches.
        A trailing partial batch is dropped. The first batch must not start below the log end
        offset (a later start is a gap, legal as in Kafka: a compacted leader log has them).
        The log rolls under the leader path's rules, to a segment based at the set's first
        offset. Each new epoch is assigned at its first batch's base offset; producer state is
        updated without Kafka's duplicate and sequence checks (the leader made them).

        Returns the appended range; an empty set (or a lone partial batch) appends nothing and
        returns ``first_offset == last_offset == -1``, ``record_count == 0``. Raises
        ``CorruptRecordError``, ``UnexpectedAppendOffsetError`` or
        ``OffsetsOutOfOrderError``; nothing is appended then.
        """
        info = _native.validate_replicated_batches(records, self.leader_epoch_cache.latest_epoch)
        if info.batch_count == 0:
            return LogAppendInfo(-1, -1, -1, -1, -1, 0)
        if not info.offsets_monotonic:
            raise OffsetsOutOfOrderError(
                f"Out of order offsets found in append to {self.topic_partition}: the batches of "
                f"offsets {info.first_offset} to {info.last_offset} do not increase"
            )
        end_offset = self.log_end_offset
        if info.first_offset < end_offset:
            raise UnexpectedAppendOffsetError(
                f"Unexpected offset in append to {self.topic_partition}. First offset "
                f"{info.first_offset} is less than the next offset {end_offset}. Last offset in "
                f"append: {info.last_offset}. Log start offset = {self.log_start_offset}",
                info.first_offset, info.last_offset,
            )
        if now_ms is None:
            now_ms = int(time.time() * 1000)
        self._maybe_roll(info.valid_bytes, info.max_timestamp, info.last_offset, now_ms, info.first_offset)
        if info.valid_bytes < len(records):
            records = memoryview(records)[: info.valid_bytes]
        last_offset, max_timestamp, offset_of_max = self.active_segment.append(records, -1, -1, -1)
        for epoch, start_offset in info.epoch_starts:
            self.assign_leader_epoch(epoch, start_offset)
        self.unflushed_messages += info.record_count
        segment = self.active_segment
        for (producer_id, epoch, first_seq, last_seq, first, last, timestamp, transactional, control_type,
             coordinator_epoch) in info.producer_batches:
            if control_type >= 0:
                self._apply_marker(producer_id, epoch, coordinator_epoch, first, control_type, timestamp, segment)
            else:
                self.producer_state.update(producer_id, epoch, first_seq, last_seq, first, last, timestamp,
                                           transactional)
        return LogAppendInfo(
            info.first_offset, last_offset, max_timestamp, offset_of_max, -1, info.record_count,
            last_leader_epoch=info.last_leader_epoch,
        )

    def _maybe_roll(
        self,
        incoming_bytes: int,
        incoming_max_timestamp: int,
        last_offset: int,
        now_ms: int,
        roll_offset: int | None = None,
    ) -> None:
        """Kafka's ``LogSegment.shouldRoll`` before appending ``incoming_bytes`` that end at
        ``last_offset``: roll when the active segment would pass segment.bytes, its first
        timestamp (or, with none, its file's mtime) is older than segment.ms less the jitter, an
        index is full, or ``last_offset`` does not fit its int32 relative offsets (only this rule
        applies to an empty segment). The new segment starts at ``roll_offset`` if that is
        beyond the log end offset (a follower's set after a gap)."""
        segment = self.active_segment
        size = segment.size
        overflow = last_offset - segment.base_offset > INT32_MAX
        if size == 0 and not overflow:
            return
        first_timestamp = segment.first_batch_timestamp
        if first_timestamp >= 0:
            waited = incoming_max_timestamp - first_timestamp
        else:
            waited = now_ms - segment.last_modified_ms
        if (
            overflow
            or size > self.config.segment_bytes - incoming_bytes
            or waited > self.config.max_segment_ms - self.config.segment_jitter_ms
            or segment.index_is_full
        ):
            self.roll(roll_offset)

    def roll(self, expected_next_offset: int | None = None) -> _native.Segment:
        """Start a new active segment at the log end offset, or at ``expected_next_offset`` if
        that is larger (Kafka's ``roll(expectedNextOffset)``)."""
        new_base = self.log_end_offset
        if expected_next_offset is not None:
            new_base = max(new_base, expected_next_offset)
        old = self.active_segment
        if old.size == 0 and old.base_offset == new_base:
            return old
        old.on_become_inactive()
        segment = self._open_segment(new_base)
        self._add_segment(segment)
        self._take_producer_snapshot(new_base)
        log.info("%s: rolled new log segment at offset %d", self.topic_partition, new_base)
        if self.on_roll is not None:
            self.on_roll(self)
        return segment

    # --- read ----------------------------------------------------------------------------------

    def read(self, start_offset: int, max_bytes: int, max_offset: int, min_one_batch: bool) -> bytes:
        """Whole batches from ``start_offset`` (the batch holding it first), below ``max_offset``."""
        for segment in self._segments_to_read(start_offset, max_offset):
            data = segment.read(start_offset, max_bytes, max_offset, min_one_batch)
            if data:
                return data
        return b""

    def read_region(
        self, start_offset: int, max_bytes: int, max_offset: int, min_one_batch: bool
    ) -> _native.LogRegion | None:
        """The batches ``read`` would return, as a region of one segment's file for the network
        layer to send without copying them (Kafka's zero-copy fetch)."""
        for segment in self._segments_to_read(start_offset, max_offset):
            region = segment.read_region(start_offset, max_bytes, max_offset, min_one_batch)
            if region is not None:
                return region
        return None

    def _segments_to_read(self, start_offset: int, max_offset: int) -> Iterator[_native.Segment]:
        """The segments a read from ``start_offset`` tries in turn: the one whose range holds the
        offset, then later ones (for when it has no batch at or after the offset), none based at
        or above ``max_offset``. Raises OffsetOutOfRangeError outside the log's range."""
        if start_offset < self.log_start_offset or start_offset > self.log_end_offset:
            raise OffsetOutOfRangeError(
                f"Received request for offset {start_offset} for partition {self.topic_partition}, "
                f"but we only have log segments in the range {self.log_start_offset} to "
                f"{self.log_end_offset}."
            )
        if start_offset >= max_offset:
            return
        index = bisect.bisect_right(self._base_offsets, start_offset) - 1
        while 0 <= index < len(self.segments):
            segment = self.segments[index]
            if segment.base_offset >= max_offset:
                return
            yield segment
            index += 1

    def legacy_offsets_before(self, timestamp: int, max_num_offsets: int, now_ms: int) -> list[int]:
        """ListOffsets v0 (Kafka's ``legacyFetchOffsetsBefore``): the start offsets (at least the
        log start offset) of the segments last modified at or before ``timestamp``, and the log
        end offset standing for a segment modified at ``now_ms`` when the active segment has
        data, newest first, at most ``max_num_offsets``. ``-1`` starts from the newest, ``-2``
        gives the oldest."""
        starts = [(max(segment.base_offset, self.log_start_offset), segment.last_modified_ms)
                  for segment in self.segments]
        if self.segments[-1].size > 0:
            starts.append((self.log_end_offset, now_ms))
        if timestamp == -1:
            first = len(starts) - 1
        elif timestamp == -2:
            first = 0
        else:
            first = len(starts) - 1
            while first >= 0 and starts[first][1] > timestamp:
                first -= 1
        count = max(0, min(max_num_offsets, first + 1))
        return sorted((starts[first - j][0] for j in range(count)), reverse=True)

    def fetch_offset_by_timestamp(self, timestamp: int, max_offset: int) -> tuple[int, int, int] | None:
        """(offset, timestamp, leader epoch) of the first record at or after ``timestamp`` that is
        at or above the log start offset and below ``max_offset``; None if there is none."""
        for index, segment in enumerate(self.segments):
            following = self._base_offsets[index + 1] if index + 1 < len(self.segments) else None
            if following is not None and following <= self.log_start_offset:
                continue
            if segment.max_timestamp < timestamp:
                continue
            found = segment.find_offset_by_timestamp(timestamp, max(self.log_start_offset, segment.base_offset))
            if found is not None:
                offset, found_ts = found
                if offset >= max_offset:
                    return None
                return offset, found_ts, self.leader_epoch_cache.epoch_for_offset(offset)
        return None

    def fetch_max_timestamp(self, max_offset: int) -> tuple[int, int, int] | None:
        """(offset, timestamp, epoch) of the first record carrying the log's largest timestamp."""
        best = None
        for segment in self.segments:
            if segment.max_timestamp >= 0 and (best is None or segment.max_timestamp > best.max_timestamp):
                best = segment
        if best is None:
            return None
        found = best.max_timestamp_record()
        if found is None or found[0] >= max_offset:
            return None
        return found[0], found[1], self.leader_epoch_cache.epoch_for_offset(found[0])

    # --- truncation and deletion ---------------------------------------------------------------

    def truncate_to(self, offset: int) -> bool:
        """Remove every batch holding an offset at or above ``offset`` (a follower diverged from
        its leader; a batch straddling ``offset`` goes entirely, so the log may end below it).
        Returns whether anything was removed (Kafka's ``truncateTo``).

        The leader-epoch cache loses its entries from the new log end offset on, even when no
        record goes (a leader that assigned an epoch and wrote nothing in it before it lost the
        leadership). Producer state is rebuilt from what remains; the high watermark, the
        recovery point and the log start offset come down to the new log end offset when above
        it. Truncating at or below the first segment's base offset empties the log
        (``truncate_fully_and_start_at(offset)``).
        """
        if offset < 0:
            raise ValueError(f"Cannot truncate partition {self.topic_partition} to a negative offset ({offset})")
        if offset >= self.log_end_offset:
            self._truncate_epochs_from_end(self.log_end_offset)
            return False
        log.info("%s: truncating to offset %d", self.topic_partition, offset)
        if offset <= self.segments[0].base_offset:
            self.truncate_fully_and_start_at(offset)
            return True
        while len(self.segments) > 1 and self.segments[-1].base_offset >= offset:
            self.segments.pop().delete()
            self._base_offsets.pop()
        self.active_segment.truncate_to(offset)
        end_offset = self.log_end_offset
        self.recovery_point = min(self.recovery_point, end_offset)
        self.high_watermark = min(self.high_watermark, end_offset)
        self.log_start_offset = min(self.log_start_offset, end_offset)
        self._truncate_epochs_from_end(end_offset)
        self._delete_snapshots(lambda offset: offset <= end_offset)
        self._load_producer_state(None, had_clean_shutdown=False)
        if self.on_truncated is not None:
            self.on_truncated(self)
        return True

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete every segment and start the log empty at ``offset``: the log start offset,
        the recovery point and the high watermark all become ``offset``; the leader-epoch cache
        and the producer state are cleared (Kafka's ``truncateFullyAndStartAt``; a follower whose
        log ends below the leader's log start offset)."""
        for segment in self.segments:
            segment.delete()
        self.segments.clear()
        self._base_offsets.clear()
        self._add_segment(self._open_segment(offset))
        self.log_start_offset = self.recovery_point = self.high_watermark = offset
        self._truncate_epochs_from_end(-1)
        self._delete_snapshots(lambda _offset: False)
        self.producer_state.truncate_and_reload()
        if self.on_truncated is not None:
            self.on_truncated(self)

    def _truncate_epochs_from_end(self, end_offset: int) -> None:
        """Drop the leader-epoch entries starting at or after ``end_offset`` (all for -1); the
        file is written behind, like an assignment."""
        if self.on_leader_epochs_changed is None:
            self.leader_epoch_cache.truncate_from_end(end_offset)
        elif self.leader_epoch_cache.truncate_from_end(end_offset, flush=False):
            self.on_leader_epochs_changed(self)

    # --- retention (Kafka's UnifiedLog.deleteOldSegments) -------------------------------------

    def delete_old_segments(self, now_ms: int) -> int:
        """Delete the oldest segments that retention allows; returns how many went.

        Kafka's passes, in Kafka's order: segments wholly below the log start offset (always),
        then — only when cleanup.policy contains ``delete`` — retention.bytes, retention.ms and
        the topic's ``log.retention.min.timestamp`` (KIP-47). Each pass deletes an oldest-first
        prefix, never a segment reaching above the high watermark nor a final empty segment.
        The passes repeat until none deletes anything, so a segment that any one rule allows to
        go goes in this call (the rules are OR-ed), not only at the next retention check.
        """
        total = 0
        while True:
            deleted = self._delete_log_start_offset_breached_segments()
            if self.config.delete_enabled:
                deleted += self._delete_retention_size_breached_segments()
                deleted += self._delete_retention_ms_breached_segments(now_ms)
                deleted += self._delete_retention_min_timestamp_breached_segments()
            if not deleted:
                return total
            total += deleted

    def _delete_log_start_offset_breached_segments(self) -> int:
        def breached(_segment: _native.Segment, following: _native.Segment | None) -> bool:
            return following is not None and following.base_offset <= self.log_start_offset

        deletable = self._deletable_segments(breached)
        if deletable:
            log.info(
                "%s: Deleting segments due to log start offset %d breach: %s", self.topic_partition,
                self.log_start_offset, ",".join(describe_segment(s) for s in deletable),
            )
        return self._delete_segments(deletable)

    def _delete_retention_size_breached_segments(self) -> int:
        retention_bytes = self.config.retention_bytes
        size = self.size_in_bytes
        if retention_bytes < 0 or size < retention_bytes:
            return 0
        diff = size - retention_bytes

        def breached(segment: _native.Segment, _following: _native.Segment | None) -> bool:
            nonlocal diff
            if diff - segment.size < 0:
                return False
            diff -= segment.size
            return True

        deletable = self._deletable_segments(breached)
        for segment in deletable:
            size -= segment.size
            log.info(
                "%s: Deleting segment %s due to log retention size %d breach. Log size after deletion will be %d.",
                self.topic_partition, describe_segment(segment), retention_bytes, size,
            )
        return self._delete_segments(deletable)

    def _delete_retention_ms_breached_segments(self, now_ms: int) -> int:
        retention_ms = self.config.retention_ms
        if retention_ms < 0:
            return 0

        def breached(segment: _native.Segment, _following: _native.Segment | None) -> bool:
            return now_ms - largest_timestamp(segment) > retention_ms

        deletable = self._deletable_segments(breached)
        for segment in deletable:
            log.info(
                "%s: Deleting segment %s due to log retention time %dms breach based on the %s",
                self.topic_partition, describe_segment(segment), retention_ms, timestamp_basis(segment),
            )
        return self._delete_segments(deletable)

    def _delete_retention_min_timestamp_breached_segments(self) -> int:
        minimum = self.config.log_retention_min_timestamp
        if minimum <= 0:
            return 0

        def breached(segment: _native.Segment, _following: _native.Segment | None) -> bool:
            return largest_timestamp(segment) < minimum

        deletable = self._deletable_segments(breached)
        for segment in deletable:
            log.info(
                "%s: Deleting segment %s due to log retention minimum timestamp %d breach based on the %s",
                self.topic_partition, describe_segment(segment), minimum, timestamp_basis(segment),
            )
        return self._delete_segments(deletable)

    def _deletable_segments(
        self, predicate: Callable[[_native.Segment, _native.Segment | None], bool]
    ) -> list[_native.Segment]:
        """The oldest-first run of segments ``predicate`` accepts (Kafka's ``deletableSegments``):
        it stops at the first segment whose upper bound (next base offset, or the log end offset)
        is above the high watermark or that the predicate rejects; a final empty segment is
        never included. The predicate is only asked about segments within the high watermark."""
        deletable: list[_native.Segment] = []
        count = len(self.segments)
        for index, segment in enumerate(self.segments):
            following = self.segments[index + 1] if index + 1 < count else None
            upper_bound = following.base_offset if following is not None else self.log_end_offset
            if not (self.high_watermark >= upper_bound and predicate(segment, following)):
                break
            if following is None and segment.size == 0:
                break
            deletable.append(segment)
        return deletable

    def _delete_segments(self, deletable: list[_native.Segment]) -> int:
        """Remove a prefix of segments from the log (rolling first if it is all of them), rename
        their files ``.deleted`` and move the log start offset to the first remaining base."""
        if not deletable:
            return 0
        count = len(deletable)
        if count == len(self.segments):
            # There must always be a segment: start the new active one first.
            new_segment = self.roll()
            if new_segment is deletable[-1]:
                log.warning(
                    "%s: Empty active segment at %d was deleted and recreated",
                    self.topic_partition, new_segment.base_offset,
                )
                deletable = deletable[:-1]
                count -= 1
        del self.segments[:count]
        del self._base_offsets[:count]
        renamed = self._rename_for_deletion(deletable)
        self.maybe_increment_log_start_offset(self.segments[0].base_offset, "SegmentDeletion")
        first_base = self.segments[0].base_offset
        self._delete_snapshots(lambda offset: offset >= first_base)
        if renamed and self.on_segments_deleted is not None:
            self.on_segments_deleted(self, renamed)
        return count

    # --- compaction (the log cleaner's view) --------------------------------------------------

    def aborted_transactions_from(self, base_offset: int, upper_bound_offset: int) -> list[tuple[int, int, int, int]]:
        """``(producer id, first offset, last offset, last stable offset)`` of every aborted
        transaction above the log start offset and starting below ``upper_bound_offset``,
        searching the indexes from the segment holding ``base_offset`` on (Kafka's
        ``collectAbortedTransactions(startOffset, upperBound)``, as the cleaner calls it)."""
        found: list[tuple[int, int, int, int]] = []
        index = max(bisect.bisect_right(self._base_offsets, base_offset) - 1, 0)
        for segment in self.segments[index:]:
            if not segment.has_txn_index:
                continue
            entries, complete = segment.collect_aborted_txns(self.log_start_offset, upper_bound_offset)
            found.extend(entries)
            if complete:
                break
        return found

    def segment_base_offset_of(self, offset: int) -> int:
        """The base offset of the segment whose range holds ``offset`` (the first segment's for
        an offset below it, the active one's for the log end offset)."""
        return self._base_offsets[max(bisect.bisect_right(self._base_offsets, offset) - 1, 0)]

    def segments_between(self, from_offset: int, to_offset: int) -> list[_native.Segment]:
        """The segments holding offsets in ``[from_offset, to_offset)``: from the one holding
        ``from_offset`` to the last based below ``to_offset`` (Kafka's ``logSegments(from, to)``)."""
        start = max(bisect.bisect_right(self._base_offsets, from_offset) - 1, 0)
        return self.segments[start : bisect.bisect_left(self._base_offsets, to_offset)]

    def replace_segments(self, new_segment: _native.Segment, old_segments: list[_native.Segment]) -> bool:
        """Swap a cleaned segment (files named ``….cleaned``) in for the run of ``old_segments``
        it was made from (Kafka's ``replaceSegments``): the new files become ``….swap``, the old
        segments leave the log and are renamed ``.deleted`` (removed after file.delete.delay.ms),
        then the ``.swap`` names lose their suffix. A crash at any step leaves files that loading
        completes or undoes (`segment_base_offsets`). Returns False, changing nothing, when the
        old segments are no longer a run of this log's inactive segments (retention or a
        truncation removed some while they were cleaned)."""
        start = next((i for i, segment in enumerate(self.segments) if segment is old_segments[0]), None)
        end = None if start is None else start + len(old_segments)
        if (start is None or end is None or end >= len(self.segments)
                or any(a is not b for a, b in zip(self.segments[start:end], old_segments, strict=True))):
            return False
        new_segment.change_file_suffixes(CLEANED_SUFFIX, SWAP_SUFFIX)
        self.segments[start:end] = [new_segment]
        self._base_offsets[start:end] = [new_segment.base_offset]
        renamed = self._rename_for_deletion(old_segments)
        new_segment.change_file_suffixes(SWAP_SUFFIX, "")
        replaced = {segment.base_offset for segment in old_segments} - {new_segment.base_offset}
        self._delete_snapshots(lambda offset: offset not in replaced)
        if renamed and self.on_segments_deleted is not None:
            self.on_segments_deleted(self, renamed)
        return True

    def _rename_for_deletion(self, segments: list[_native.Segment]) -> list[str]:
        """Close ``segments`` (already out of the log) and rename their files ``.deleted``;
        returns the new paths, for the removal after file.delete.delay.ms."""
        renamed: list[str] = []
        for segment in segments:
            files = self._segment_files(segment)
            try:
                segment.rename_suffix(DELETED_SUFFIX)
            except (OSError, ValueError):
                log.exception("%s: could not rename segment %d for deletion", self.topic_partition, segment.base_offset)
                continue
            renamed.extend(path + DELETED_SUFFIX for path in files)
        return renamed

    # --- durability ----------------------------------------------------------------------------

    def segment_paths_to_flush(self, up_to_offset: int) -> list[str]:
        """Files holding data between the recovery point and ``up_to_offset``: segment files and
        the producer snapshots taken in that range."""
        paths = []
        for index, segment in enumerate(self.segments):
            end = self._base_offsets[index + 1] if index + 1 < len(self.segments) else self.log_end_offset
            if end > self.recovery_point and segment.base_offset < up_to_offset:
                paths.extend(self._segment_files(segment))
        paths.extend(self._snapshot_path(offset) for offset in self._snapshot_offsets
                     if self.recovery_point < offset <= up_to_offset)
        return paths

    def segment_paths(self) -> list[str]:
        """The files of every segment, and the producer snapshots."""
        paths = [path for segment in self.segments for path in self._segment_files(segment)]
        return paths + [self._snapshot_path(offset) for offset in self._snapshot_offsets]

    def _segment_files(self, segment: _native.Segment) -> list[str]:
        """The segment's files: ``.log``, ``.index``, ``.timeindex`` and, when it has one,
        ``.txnindex`` (also for a closed segment)."""
        base = os.path.join(self.dir, segment_file_name(segment.base_offset, ""))
        txn_index = os.path.exists(base + TXN_INDEX_SUFFIX) if segment.closed else segment.has_txn_index
        return [base + suffix for suffix in (SEGMENT_SUFFIXES if txn_index else SEGMENT_SUFFIXES[:3])]

    def _snapshot_path(self, offset: int) -> str:
        return os.path.join(self.dir, snapshot_file_name(offset))

    def close(self, sync: bool = True) -> None:
        """Take a producer snapshot at the log end offset (unless the log is empty: a snapshot
        at the log start offset is stale to the next load, which deletes it), then close every
        segment (final time-index entry, trimmed indexes), fsynced unless ``sync`` is false; the
        log is unusable afterwards."""
        try:
            if self.log_end_offset > self.log_start_offset:
                self._take_producer_snapshot(self.log_end_offset)
        except OSError as e:
            log.warning("%s: could not write the producer snapshot: %s", self.topic_partition, e)
        for segment in self.segments:
            segment.close(sync)

    def delete_directory(self) -> None:
        """Close and remove the whole partition directory (topic deletion)."""
        for segment in self.segments:
            segment.delete()
        self.segments.clear()
        for name in os.listdir(self.dir):
            os.remove(os.path.join(self.dir, name))
        os.rmdir(self.dir)


def largest_timestamp(segment: _native.Segment) -> int:
    """Kafka's ``LogSegment.largestTimestamp``: the largest record timestamp in the segment, or
    the ``.log`` file's modification time when it holds no timestamps."""
    timestamp = segment.max_timestamp
    return timestamp if timestamp >= 0 else segment.last_modified_ms


def timestamp_basis(segment: _native.Segment) -> str:
    if segment.max_timestamp >= 0:
        return "largest record timestamp in the segment"
    return "last modified time of the segment"


def describe_segment(segment: _native.Segment) -> str:
    """Kafka's ``LogSegment.toString``."""
    timestamp = segment.max_timestamp
    return (
        f"LogSegment(baseOffset={segment.base_offset}, size={segment.size}, "
        f"lastModifiedTime={segment.last_modified_ms}, "
        f"largestRecordTimestamp={timestamp if timestamp >= 0 else None})"
    )


def delete_files(paths: list[str]) -> None:
    """Remove files renamed ``.deleted`` (from a worker thread); missing ones are fine."""
    names = {LOG_SUFFIX: "log", ".index": "offset index", ".timeindex": "time index",
             TXN_INDEX_SUFFIX: "transaction index"}
    for path in paths:
        try:
            os.remove(path)
        except FileNotFoundError:
            continue
        except OSError as e:
            log.error("Could not delete %s: %s", path, e)
            continue
        stem = path[: -len(DELETED_SUFFIX)] if path.endswith(DELETED_SUFFIX) else path
        kind = next((label for suffix, label in names.items() if stem.endswith(suffix)), "file")
        log.info("Deleted %s %s.", kind, path)
