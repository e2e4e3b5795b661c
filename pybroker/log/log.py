"""One partition's log: its segments, offsets, and the rules for appending, reading and trimming.

Owns the ordered list of native ``Segment`` objects of one ``<topic>-<partition>`` directory and
the offsets Kafka's ``UnifiedLog`` tracks: the log end offset (LEO), the high watermark, the log
start offset (which may sit inside a segment — KIP-107's soft delete), and the recovery point
(everything below it is known to be fsynced). A leader appends produced records
(``append_as_leader``: offsets and its epoch assigned); a follower appends its leader's batches as
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

from pybroker import _native
from pybroker.log.config import LogConfig
from pybroker.log.leader_epoch import LeaderEpochCache
from pybroker.log.producer_state import ProducerStateManager, last_sequence
from pybroker.types import TopicPartition

log = logging.getLogger(__name__)

LOG_SUFFIX = ".log"
DELETED_SUFFIX = ".deleted"
INT32_MAX = 2**31 - 1
PARTITION_METADATA = "partition.metadata"


class OffsetOutOfRangeError(Exception):
    """An offset outside [log start offset, log end offset] (OFFSET_OUT_OF_RANGE, 1)."""


class InvalidRecordError(Exception):
    """Records that are well-formed but not acceptable (INVALID_RECORD, 87)."""


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


def segment_base_offsets(directory: str) -> list[int]:
    """The base offsets of the segments in a partition directory, ascending; removes the
    leftovers of an interrupted segment deletion (``.deleted``) or checkpoint write (``.tmp``)."""
    bases: list[int] = []
    for name in os.listdir(directory):
        if name.endswith(DELETED_SUFFIX) or name.endswith(".tmp"):
            os.remove(os.path.join(directory, name))
        elif name.endswith(LOG_SUFFIX) and name[: -len(LOG_SUFFIX)].isdigit():
            bases.append(int(name[: -len(LOG_SUFFIX)]))
    return sorted(bases)


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
        segment_bases: list[int] | None = None,
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
        os.makedirs(directory, exist_ok=True)
        self.segments: list[_native.Segment] = []
        self._base_offsets: list[int] = []
        self.recovery_point = recovery_point
        self.leader_epoch_cache = LeaderEpochCache(directory)
        self.producer_state = ProducerStateManager()
        self.unflushed_messages = 0
        self.last_flush_ms = time.monotonic() * 1000
        self._load(had_clean_shutdown, log_start_offset, segment_bases)
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
        self._rebuild_producer_state()

    # --- loading and recovery ----------------------------------------------------------------

    def _open_segment(self, base_offset: int) -> _native.Segment:
        return _native.Segment(
            self.dir,
            base_offset,
            index_interval_bytes=self.config.index_interval_bytes,
            max_index_size=self.config.segment_index_bytes,
        )

    def _load(self, had_clean_shutdown: bool, log_start_offset: int, bases: list[int] | None) -> None:
        if bases is None:
            bases = segment_base_offsets(self.dir)
        for base in bases:
            self._add_segment(self._open_segment(base))
        if not self.segments:
            self._add_segment(self._open_segment(max(log_start_offset, 0)))
            return
        if not had_clean_shutdown:
            self._recover()

    def _recover(self) -> None:
        """After an unclean stop: rescan every segment from the recovery point on."""
        start = max(bisect.bisect_right(self._base_offsets, self.recovery_point) - 1, 0)
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

    def _rebuild_producer_state(self) -> None:
        self.producer_state.truncate_and_reload()
        for header in self.active_segment.batches():
            if header.producer_id >= 0 and not header.is_control:
                count = header.last_offset - header.base_offset
                self.producer_state.update(
                    header.producer_id, header.producer_epoch, header.base_sequence,
                    last_sequence(header.base_sequence, count),
                    header.base_offset, header.last_offset, header.max_timestamp,
                )

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
        return self.high_watermark

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

    def append_as_leader(self, records: memoryview, leader_epoch: int, now_ms: int) -> LogAppendInfo:
        """Validate, assign offsets to and append a produce request's record set.

        Raises ``_native.CorruptRecordError``, ``_native.RecordTooLargeError``,
        ``InvalidRecordError`` or the producer-state errors; nothing is appended then.
        """
        info = _native.validate_batches(records, self.config.max_message_bytes)
        if info.batch_count != 1:
            raise InvalidRecordError(
                "Produce requests with version 3+ are only allowed to contain exactly one record batch"
            )
        if info.is_control:
            raise InvalidRecordError("Clients are not allowed to write control records")
        producer_id = info.producer_id
        if producer_id >= 0:
            first_seq = info.base_sequence
            last_seq = last_sequence(first_seq, info.last_offset_delta)
            duplicate = self.producer_state.find_duplicate(producer_id, info.producer_epoch, first_seq, last_seq)
            if duplicate is not None:
                return LogAppendInfo(
                    duplicate.first_offset, duplicate.last_offset, duplicate.timestamp,
                    duplicate.last_offset, -1, info.record_count, duplicate=True,
                )
            self.producer_state.check(producer_id, info.producer_epoch, first_seq)
        self._maybe_roll(info.size, info.max_timestamp, self.log_end_offset + info.record_count - 1, now_ms)
        first_offset = self.log_end_offset
        log_append_time = now_ms if self.config.log_append_time else -1
        last_offset, max_timestamp, offset_of_max = self.active_segment.append(
            records, first_offset, leader_epoch, log_append_time
        )
        if leader_epoch > self.leader_epoch_cache.latest_epoch:
            self.assign_leader_epoch(leader_epoch, first_offset)
        if producer_id >= 0:
            self.producer_state.update(
                producer_id, info.producer_epoch, info.base_sequence,
                last_sequence(info.base_sequence, info.last_offset_delta),
                first_offset, last_offset, max_timestamp,
            )
        self.unflushed_messages += info.record_count
        return LogAppendInfo(
            first_offset, last_offset, max_timestamp, offset_of_max, log_append_time, info.record_count,
            last_leader_epoch=leader_epoch,
        )

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
        ``_native.CorruptRecordError``, ``UnexpectedAppendOffsetError`` or
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
        for producer_batch in info.producer_batches:
            if producer_batch[8] == -1:  # a data batch (control batches: transactions' markers)
                self.producer_state.update(*producer_batch[:7])
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
            or waited > self.config.segment_ms - self.config.segment_jitter_ms
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
        self._rebuild_producer_state()
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
        self.producer_state.truncate_and_reload()

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
        renamed: list[str] = []
        for segment in deletable:
            files = [
                os.path.join(self.dir, segment_file_name(segment.base_offset, suffix))
                for suffix in (LOG_SUFFIX, ".index", ".timeindex")
            ]
            try:
                segment.rename_suffix(DELETED_SUFFIX)
            except (OSError, ValueError):
                log.exception("%s: could not rename segment %d for deletion", self.topic_partition, segment.base_offset)
                continue
            renamed.extend(path + DELETED_SUFFIX for path in files)
        self.maybe_increment_log_start_offset(self.segments[0].base_offset, "SegmentDeletion")
        if renamed and self.on_segments_deleted is not None:
            self.on_segments_deleted(self, renamed)
        return count

    # --- durability ----------------------------------------------------------------------------

    def segment_paths_to_flush(self, up_to_offset: int) -> list[str]:
        """Files holding data between the recovery point and ``up_to_offset``."""
        paths = []
        for index, segment in enumerate(self.segments):
            end = self._base_offsets[index + 1] if index + 1 < len(self.segments) else self.log_end_offset
            if end > self.recovery_point and segment.base_offset < up_to_offset:
                paths.extend(self._segment_files(segment))
        return paths

    def segment_paths(self) -> list[str]:
        """The three files of every segment."""
        return [path for segment in self.segments for path in self._segment_files(segment)]

    def _segment_files(self, segment: _native.Segment) -> list[str]:
        base = os.path.join(self.dir, segment_file_name(segment.base_offset, ""))
        return [base + suffix for suffix in (LOG_SUFFIX, ".index", ".timeindex")]

    def close(self, sync: bool = True) -> None:
        """Close every segment (final time-index entry, trimmed indexes), fsynced unless ``sync``
        is false; the log is unusable afterwards."""
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
    names = {LOG_SUFFIX: "log", ".index": "offset index", ".timeindex": "time index"}
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
