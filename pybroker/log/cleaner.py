"""The log cleaner: compaction of the logs whose cleanup.policy includes compact (Kafka's
``LogCleaner`` and ``LogCleanerManager``).

Owns the ``cleaner-offset-checkpoint`` of each log dir (each compacted log's first dirty offset:
everything below it has been cleaned), the choice of the next log to clean (the largest dirty
ratio above the log's ``min.cleanable.dirty.ratio``, or a log whose ``max.compaction.lag.ms``
has passed), the cleaner threads, and the swap of their results into a `Log`. The per-record
work is Rust (`_native.LogCleaning`: one call per segment, in a cleaner thread); this module
chooses the offsets, groups the segments and swaps.

A clean of one log (`LogCleaner.clean`): map the keys of its dirty section, ``[first dirty
offset, first uncleanable offset)`` — never the active segment, never at or above the last
stable offset, never a segment younger than ``min.compaction.lag.ms``; then rewrite every
segment below the map's end, in groups that fit one segment (`group_segments_by_size`), each
group into one ``.cleaned`` segment that `Log.replace_segments` swaps in; then checkpoint the
map's end as the new first dirty offset.

Threads and the event loop: ``log.cleaner.threads`` workers are scheduled tasks (each runs every
``log.cleaner.backoff.ms`` and cleans logs until none is cleanable). The native calls run in the
cleaner's own thread pool with the GIL released; between them, on the loop, a worker reads the
log (its segments, producer state, aborted transactions) and finally swaps. A truncation of the
log (`on_truncated`) or its deletion (`abort`) stops a clean under way: its unfinished segment is
deleted and the log is tried again later. A clean that fails (a damaged segment) marks the
partition uncleanable until the broker restarts, as Kafka does. Retention of ``compact,delete``
logs stays with the log manager's retention task; a clean whose segments it removed meanwhile
is dropped at the swap.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pybroker import _native
from pybroker.common.config import LONG_MAX
from pybroker.common.errors import CorruptRecordError
from pybroker.log.checkpoint import CheckpointError, OffsetCheckpointFile, render_offsets
from pybroker.log.file_sync import CoalescingFileWriter, fsync_paths
from pybroker.log.log import CLEANED_SUFFIX, Log, largest_timestamp
from pybroker.log.log_dir_failure import LogDirFailureChannel, OfflineLogDirError
from pybroker.scheduler import SYSTEM_TIME, AsyncioScheduler, ScheduledTask, Scheduler, Time
from pybroker.types import TopicPartition

log = logging.getLogger(__name__)

CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
DOUBLE_MAX = 1.7976931348623157e308

T = TypeVar("T")


class CleaningAbortedError(Exception):
    """The log was truncated or deleted, or the cleaner stopped, while it was being cleaned."""


@dataclass(frozen=True)
class CleanerConfig:
    """The broker's ``log.cleaner.*`` settings (Kafka's ``CleanerConfig``)."""

    enable: bool = True
    threads: int = 1
    backoff_ms: int = 15000
    dedupe_buffer_size: int = 134217728
    io_buffer_load_factor: float = 0.9
    io_max_bytes_per_second: float = DOUBLE_MAX

    @classmethod
    def from_broker_config(cls, get: Callable[[str], Any]) -> CleanerConfig:
        return cls(
            enable=get("log.cleaner.enable"),
            threads=get("log.cleaner.threads"),
            backoff_ms=get("log.cleaner.backoff.ms"),
            dedupe_buffer_size=get("log.cleaner.dedupe.buffer.size"),
            io_buffer_load_factor=get("log.cleaner.io.buffer.load.factor"),
            io_max_bytes_per_second=get("log.cleaner.io.max.bytes.per.second"),
        )


@dataclass
class LogToClean:
    """A compacted log and its cleanable range (Kafka's ``LogToClean``): ``clean_bytes`` below the
    first dirty offset, ``cleanable_bytes`` from there to the first uncleanable segment."""

    topic_partition: TopicPartition
    log: Log
    first_dirty_offset: int
    first_uncleanable_offset: int
    clean_bytes: int
    cleanable_bytes: int
    need_compaction_now: bool = False

    @property
    def total_bytes(self) -> int:
        return self.clean_bytes + self.cleanable_bytes

    @property
    def cleanable_ratio(self) -> float:
        return self.cleanable_bytes / self.total_bytes if self.total_bytes else 0.0


@dataclass
class CleanResult:
    """What one clean did (Kafka's ``CleanerStats``, plus its range and when it ended)."""

    topic_partition: TopicPartition
    first_dirty_offset: int
    end_offset: int
    elapsed_ms: float
    map_elapsed_ms: float
    map_utilization: float
    finished_ms: int
    stats: dict[str, int] = field(default_factory=dict)


# --- choosing what to clean (Kafka's LogCleanerManager) -------------------------------------


def non_active_segments_from(log_: Log, offset: int) -> list[_native.Segment]:
    """The inactive segments from the one holding ``offset`` on."""
    return log_.segments_between(offset, log_.active_segment.base_offset)


def cleanable_offsets(log_: Log, checkpoint: int | None, now_ms: int) -> tuple[int, int, bool]:
    """``(first dirty offset, first uncleanable offset, checkpoint must be rewritten)`` (Kafka's
    ``cleanableOffsets``). A checkpoint below the log start offset or beyond the log end offset
    restarts at the log start offset. Nothing at or above the last stable offset, in the active
    segment, or in a segment holding a record younger than min.compaction.lag.ms is cleanable."""
    start = log_.log_start_offset
    first_dirty = start if checkpoint is None else checkpoint
    reset = False
    if first_dirty < start:
        if not log_.config.delete_enabled:
            log.warning("Resetting first dirty offset of %s to log start offset %d since the checkpointed "
                        "offset %d is invalid.", log_.topic_partition, start, first_dirty)
        first_dirty, reset = start, True
    elif first_dirty > log_.log_end_offset:
        log.warning("The last checkpoint dirty offset for partition %s is %d, which is larger than the log end "
                    "offset %d. Resetting to the log start offset %d.", log_.topic_partition, first_dirty,
                    log_.log_end_offset, start)
        first_dirty, reset = start, True
    limits = [log_.last_stable_offset, log_.active_segment.base_offset]
    min_lag = max(log_.config.min_compaction_lag_ms, 0)
    if min_lag > 0:
        young = next((segment.base_offset for segment in non_active_segments_from(log_, first_dirty)
                      if largest_timestamp(segment) > now_ms - min_lag), None)
        if young is not None:
            limits.append(young)
    return first_dirty, max(first_dirty, min(limits)), reset


def max_compaction_delay(log_: Log, first_dirty_offset: int, now_ms: int) -> int:
    """How long past max.compaction.lag.ms the oldest dirty record is (0: not yet due)."""
    max_lag = max(log_.config.max_compaction_lag_ms, 0)
    if max_lag >= LONG_MAX:
        return 0
    stamps = [segment.first_batch_timestamp for segment in non_active_segments_from(log_, first_dirty_offset)]
    earliest = min((stamp for stamp in stamps if stamp > 0), default=None)
    clean_until = now_ms - max_lag
    return clean_until - earliest if earliest is not None and earliest < clean_until else 0


def log_to_clean(tp: TopicPartition, log_: Log, first_dirty: int, uncleanable: int,
                 need_compaction_now: bool = False) -> LogToClean:
    """Kafka's ``LogToClean`` with ``calculateCleanableBytes``: the cleanable range ends at the
    base of the segment holding the uncleanable offset."""
    following = non_active_segments_from(log_, uncleanable)
    first_uncleanable = following[0].base_offset if following else log_.active_segment.base_offset
    clean_bytes = sum(segment.size for segment in log_.segments_between(-1, first_dirty))
    cleanable_bytes = sum(segment.size for segment in
                          log_.segments_between(min(first_dirty, first_uncleanable), first_uncleanable))
    return LogToClean(tp, log_, first_dirty, first_uncleanable, clean_bytes, cleanable_bytes, need_compaction_now)


def group_segments_by_size(
    segments: list[_native.Segment], max_size: int, max_index_size: int, first_uncleanable_offset: int
) -> list[list[_native.Segment]]:
    """Consecutive segments in groups that each fit one segment (Kafka's
    ``groupSegmentsBySize``): at most ``max_size`` bytes of log and ``max_index_size`` bytes of
    each index, over an offset range an int32 relative offset can hold."""
    groups: list[list[_native.Segment]] = []
    rest = list(segments)
    while rest:
        group = [rest.pop(0)]
        size = group[0].size
        offset_index, time_index = group[0].index_sizes
        while rest:
            candidate = rest[0]
            candidate_offset_index, candidate_time_index = candidate.index_sizes
            last_offset = (rest[1].base_offset if len(rest) > 1 else first_uncleanable_offset) - 1
            if (size + candidate.size > max_size
                    or offset_index + candidate_offset_index > max_index_size
                    or time_index + candidate_time_index > max_index_size
                    or (candidate.size and last_offset - group[0].base_offset > 2**31 - 1)):
                break
            group.append(rest.pop(0))
            size += candidate.size
            offset_index += candidate_offset_index
            time_index += candidate_time_index
        groups.append(group)
    return groups


# --- the cleaner ------------------------------------------------------------------------------


class LogCleaner:
    """The cleaner threads and their shared state: checkpoints, logs in progress, uncleanable
    partitions, the I/O throttle and the last clean's figures.

    Created and driven by the `LogManager` on the event loop: `load_checkpoints` at start-up,
    `start`/`stop` with the background tasks, `on_truncated` and `abort` when a log is truncated
    or deleted. ``logs`` and ``dir_of`` are the log manager's live views; nothing else here is
    written from outside."""

    def __init__(
        self,
        config: CleanerConfig,
        log_dirs: list[str],
        logs: Mapping[TopicPartition, Log],
        dir_of: Callable[[TopicPartition], str | None],
        *,
        time: Time = SYSTEM_TIME,
        scheduler: Scheduler | None = None,
        failure_channel: LogDirFailureChannel | None = None,
    ) -> None:
        self.config = config
        #: Where an I/O error of a clean or a checkpoint write goes (its log dir goes offline).
        self.failure_channel = failure_channel
        self.log_dirs = log_dirs
        self.logs = logs
        self.dir_of = dir_of
        self.time = time
        self.scheduler: Scheduler = scheduler or AsyncioScheduler()
        self.throttler = _native.Throttler(config.io_max_bytes_per_second)
        self.checkpoints: dict[str, dict[TopicPartition, int]] = {d: {} for d in log_dirs}
        # Each dir's cleaner-offset-checkpoint has one writer (`pybroker.log.checkpoint`): the
        # threads finish cleans at once.
        self._checkpoint_writers = {
            d: CoalescingFileWriter(os.path.join(d, CLEANER_OFFSET_CHECKPOINT),
                                    functools.partial(self._render_checkpoint, d),
                                    log_errors=False)
            for d in log_dirs
        }
        self.in_progress: set[TopicPartition] = set()
        self.uncleanable: set[TopicPartition] = set()
        self._aborted: set[TopicPartition] = set()
        self._executor: ThreadPoolExecutor | None = None
        self._tasks: list[ScheduledTask] = []
        self._running = False
        self._reconfiguring = asyncio.Lock()
        self._closed = False
        # Metrics (Kafka's max-dirty-percent, time-since-last-run-ms, ... per cleaner; the last
        # clean of each log).
        self.max_dirty_ratio = 0.0
        self.last_run_ms: int | None = None
        self.last_cleans: dict[TopicPartition, CleanResult] = {}

    # --- checkpoints -------------------------------------------------------------------------

    def load_checkpoints(self) -> None:
        """Read each log dir's cleaner-offset-checkpoint (a damaged one is ignored: the logs
        are cleaned again from their start)."""
        for log_dir in self.log_dirs:
            try:
                self.checkpoints[log_dir] = OffsetCheckpointFile(os.path.join(log_dir, CLEANER_OFFSET_CHECKPOINT)).read()
            except CheckpointError as e:
                log.error("Ignoring damaged cleaner checkpoint (logs will be cleaned from their start): %s", e)

    def checkpoint(self, tp: TopicPartition) -> int | None:
        log_dir = self.dir_of(tp)
        return None if log_dir is None else self.checkpoints[log_dir].get(tp)

    def _set_checkpoint(self, tp: TopicPartition, offset: int) -> str | None:
        log_dir = self.dir_of(tp)
        if log_dir is not None:
            self.checkpoints[log_dir][tp] = offset
        return log_dir

    def _render_checkpoint(self, log_dir: str) -> str:
        if self.failure_channel is not None and self.failure_channel.has_offline_log_dir(log_dir):
            raise OfflineLogDirError(f"{CLEANER_OFFSET_CHECKPOINT} is not written: {log_dir} is offline")
        return render_offsets(self.checkpoints[log_dir])

    async def write_checkpoint(self, log_dir: str) -> None:
        """Write a log dir's checkpoint (off the event loop, by its one writer), keeping only logs
        it still holds."""
        self.checkpoints[log_dir] = {tp: offset for tp, offset in self.checkpoints[log_dir].items()
                                     if tp in self.logs and self.dir_of(tp) == log_dir}
        writer = self._checkpoint_writers[log_dir]
        save = writer.request()
        if save is None:
            return
        try:
            await asyncio.shield(save)
        except OSError as e:
            self._io_error(log_dir, f"Error while writing to checkpoint file {writer.path}", e)

    def _io_error(self, log_dir: str, message: str, error: OSError) -> None:
        if self.failure_channel is None:
            log.error("%s: %s", message, error)
        else:
            self.failure_channel.maybe_add_offline_log_dir(log_dir, message, error)

    # --- events from the log manager ---------------------------------------------------------

    def on_truncated(self, log_: Log) -> None:
        """A truncation removed records: a clean of the log under way stops, and the checkpoint
        comes down to the active segment's base offset if it was above (Kafka's
        ``abortAndPauseCleaning`` then ``maybeTruncateCheckpoint``)."""
        tp = log_.topic_partition
        if tp in self.in_progress:
            self._aborted.add(tp)
        checkpoint = self.checkpoint(tp)
        if checkpoint is not None and checkpoint > log_.active_segment.base_offset:
            self._set_checkpoint(tp, log_.active_segment.base_offset)

    def abort(self, tp: TopicPartition) -> None:
        """The log is being deleted: stop a clean of it under way and forget its checkpoint."""
        if tp in self.in_progress:
            self._aborted.add(tp)
        log_dir = self.dir_of(tp)
        if log_dir is not None:
            self.checkpoints[log_dir].pop(tp, None)
        self.uncleanable.discard(tp)

    # --- threads -----------------------------------------------------------------------------

    def start(self) -> None:
        """Start ``log.cleaner.threads`` workers (none when log.cleaner.enable is false)."""
        if not self.config.enable or self.config.threads <= 0 or self._running:
            return
        self._running = True
        self._executor = ThreadPoolExecutor(self.config.threads, thread_name_prefix="kafka-log-cleaner-thread")
        for thread_id in range(self.config.threads):
            self._tasks.append(self.scheduler.schedule(
                f"kafka-log-cleaner-thread-{thread_id}", self._work, 0, max(self.config.backoff_ms, 1)))

    async def stop(self) -> None:
        """Stop the workers: a clean under way stops at its next segment and is dropped. A
        reconfiguration under way finishes first and none starts the threads again."""
        async with self._reconfiguring:
            self._closed = True
            await self._stop_threads()
        # Checkpoint saves of cleans that finished are on disk before the log manager's shutdown.
        await asyncio.gather(*(writer.close() for writer in self._checkpoint_writers.values()))

    async def _stop_threads(self) -> None:
        self._running = False
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*(task.wait() for task in self._tasks))
        self._tasks.clear()
        if self._executor is not None:
            self._executor.shutdown(wait=False)
            self._executor = None

    async def reconfigure(self, config: CleanerConfig) -> None:
        """New log.cleaner.* settings (a dynamic broker config change): the threads stop (a
        clean under way is dropped and tried again) and start again with them, with a new I/O
        throttle (Kafka's ``LogCleaner.reconfigure``). Changes are applied one at a time."""
        async with self._reconfiguring:
            running = self._running and not self._closed
            if running:
                await self._stop_threads()
            self.config = config
            self.throttler = _native.Throttler(config.io_max_bytes_per_second)
            log.info("Log cleaner reconfigured: %d thread(s), backoff %d ms, I/O limit %s bytes/s",
                     config.threads, config.backoff_ms, config.io_max_bytes_per_second)
            if running:
                self.start()

    async def _work(self) -> None:
        while self._running and await self.clean_filthiest_log():
            pass

    async def clean_filthiest_log(self) -> bool:
        """Clean the dirtiest cleanable log, if any; returns whether there was one."""
        chosen = self.grab_filthiest_compacted_log()
        if chosen is None:
            return False
        tp = chosen.topic_partition
        try:
            await self.clean(chosen)
        except Exception as e:
            if isinstance(e, CleaningAbortedError) or self._is_aborted(chosen):
                # The log was deleted, replaced or truncated under the clean (its directory may
                # be gone): the clean's own failure, not the disk's.
                log.info("Cleaning of %s was aborted", tp)
            elif isinstance(e, OSError):
                log_dir = os.path.dirname(chosen.log.dir)
                self._io_error(log_dir, f"Failed to clean up log for {tp} in dir {log_dir} due to IOException", e)
            else:
                log.warning("Unexpected exception thrown when cleaning log %s. Marking its partition (%s) as "
                            "uncleanable: %s", chosen.log.dir, tp, e,
                            exc_info=not isinstance(e, CorruptRecordError))
                self.uncleanable.add(tp)
        finally:
            self.in_progress.discard(tp)
            self._aborted.discard(tp)
        return True

    def grab_filthiest_compacted_log(self) -> LogToClean | None:
        """The compacted log with the largest dirty ratio above its min.cleanable.dirty.ratio (or
        due under max.compaction.lag.ms), now marked in progress; None when there is none."""
        now = self.time.milliseconds()
        self.last_run_ms = now
        candidates = []
        for tp, log_ in list(self.logs.items()):
            if not log_.config.compact or tp in self.in_progress or tp in self.uncleanable:
                continue
            first_dirty, uncleanable, reset = cleanable_offsets(log_, self.checkpoint(tp), now)
            if reset:
                self._set_checkpoint(tp, first_dirty)
            delay = max_compaction_delay(log_, first_dirty, now)
            candidate = log_to_clean(tp, log_, first_dirty, uncleanable, delay > 0)
            if candidate.total_bytes > 0:
                candidates.append(candidate)
        self.max_dirty_ratio = max((c.cleanable_ratio for c in candidates), default=0.0)
        cleanable = [c for c in candidates
                     if (c.need_compaction_now and c.cleanable_bytes > 0)
                     or c.cleanable_ratio > c.log.config.min_cleanable_dirty_ratio]
        if not cleanable:
            return None
        chosen = max(cleanable, key=lambda c: c.cleanable_ratio)
        self.in_progress.add(chosen.topic_partition)
        return chosen

    def dirty_ratio(self, tp: TopicPartition) -> float | None:
        """The log's dirty ratio now (the metric Kafka's cleaner reports as its max), None for a
        log that is not compacted."""
        log_ = self.logs.get(tp)
        if log_ is None or not log_.config.compact:
            return None
        first_dirty, uncleanable, _reset = cleanable_offsets(log_, self.checkpoint(tp), self.time.milliseconds())
        return log_to_clean(tp, log_, first_dirty, uncleanable).cleanable_ratio

    # --- one clean ---------------------------------------------------------------------------

    async def _run(self, function: Callable[..., T], *args: Any) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, function, *args)

    async def _run_on_segment(self, chosen: LogToClean, segment: _native.Segment, function: Callable[..., T],
                              *args: Any) -> T:
        """A native call reading ``segment``. Retention of a ``compact,delete`` log may delete
        (and close) the segment meanwhile: the clean is then aborted and tried again later,
        rather than the partition marked uncleanable."""
        try:
            return await self._run(function, *args)
        except ValueError:  # "I/O operation on closed segment"
            if not any(live is segment for live in chosen.log.segments):
                raise CleaningAbortedError(f"{chosen.topic_partition}: a segment being cleaned was deleted") from None
            raise

    def _is_aborted(self, chosen: LogToClean) -> bool:
        """Whether the clean must stop: its log was truncated, deleted or replaced meanwhile, or
        the cleaner is stopping."""
        tp = chosen.topic_partition
        return tp in self._aborted or self.logs.get(tp) is not chosen.log or bool(self._tasks and not self._running)

    def _check(self, chosen: LogToClean) -> None:
        if self._is_aborted(chosen):
            raise CleaningAbortedError(str(chosen.topic_partition))

    async def clean(self, chosen: LogToClean) -> CleanResult:
        """Clean one log (Kafka's ``Cleaner.doClean``) and checkpoint its new first dirty offset."""
        first_dirty, upper = chosen.first_dirty_offset, chosen.first_uncleanable_offset
        started = self.time.monotonic_ms()
        now = self.time.milliseconds()
        memory = self.config.dedupe_buffer_size // max(self.config.threads, 1)
        cleaning = _native.LogCleaning(memory, self.config.io_buffer_load_factor, max(upper - first_dirty, 0))
        try:
            return await self._clean_with(chosen, cleaning, started, now)
        finally:
            # Freed off the loop: unmapping a map of tens of megabytes stalls what it runs on.
            with contextlib.suppress(RuntimeError):  # the executor is gone after stop()
                await self._run(cleaning.release)

    async def _clean_with(self, chosen: LogToClean, cleaning: _native.LogCleaning, started: float,
                          now: int) -> CleanResult:
        log_, tp = chosen.log, chosen.topic_partition
        first_dirty, upper = chosen.first_dirty_offset, chosen.first_uncleanable_offset
        dirty = log_.segments_between(first_dirty, upper)
        log.info("Building offset map for %s for %d segments in offset range [%d, %d).", tp, len(dirty),
                 first_dirty, upper)
        cleaning.add_aborted_for_map(log_.aborted_transactions_from(first_dirty, upper))
        next_starts = [segment.base_offset for segment in dirty[1:]] + [upper]
        for segment, next_start in zip(dirty, next_starts, strict=True):
            self._check(chosen)
            if await self._run_on_segment(chosen, segment, cleaning.map_segment, segment, first_dirty, next_start,
                                          self.throttler):
                break
        end_offset = max(cleaning.latest_offset + 1, first_dirty)
        mapped = self.time.monotonic_ms()
        groups = group_segments_by_size(log_.segments_between(0, end_offset), log_.config.segment_bytes,
                                        log_.config.segment_index_bytes, upper)
        for group in groups:
            await self._clean_segments(chosen, cleaning, group, now)
        # Kafka's doneCleaning: a clean aborted after its last swap (a follower's log truncated
        # during the directory fsync) checkpoints nothing; on_truncated has lowered the checkpoint.
        self._check(chosen)
        log_dir = self._set_checkpoint(tp, end_offset)
        if log_dir is not None:
            await self.write_checkpoint(log_dir)
        result = CleanResult(tp, first_dirty, end_offset, self.time.monotonic_ms() - started, mapped - started,
                             cleaning.map_utilization, self.time.milliseconds(), cleaning.stats)
        self.last_cleans[tp] = result
        log_clean(result)
        return result

    async def _clean_segments(self, chosen: LogToClean, cleaning: _native.LogCleaning,
                              group: list[_native.Segment], now_ms: int) -> None:
        """Clean a group of segments into one new segment and swap it in (Kafka's
        ``cleanSegments``)."""
        log_ = chosen.log
        config = log_.config
        cleaned = await self._run(_native.Segment, log_.dir, group[0].base_offset, config.index_interval_bytes,
                                  config.segment_index_bytes, CLEANED_SUFFIX)
        swapped = False
        try:
            active_producers = log_.producer_state.last_records()
            for index, segment in enumerate(group):
                self._check(chosen)
                upper = group[index + 1].base_offset if index + 1 < len(group) else segment.next_offset
                cleaning.add_aborted_for_clean(log_.aborted_transactions_from(segment.base_offset, upper))
                await self._run_on_segment(chosen, segment, cleaning.clean_segment, segment, cleaned, now_ms,
                                           config.delete_retention_ms, active_producers, self.throttler)
            await self._run(finish_cleaned_segment, cleaned, group[-1].last_modified_ms)
            self._check(chosen)
            log.info("Swapping in cleaned segment %s for segment(s) %s in log %s", cleaned.base_offset,
                     [segment.base_offset for segment in group], chosen.topic_partition)
            swapped = log_.replace_segments(cleaned, group)
            if not swapped:
                raise CleaningAbortedError(f"{chosen.topic_partition}: its segments changed while being cleaned")
            await self._run(fsync_paths, [log_.dir])
        finally:
            if not swapped:
                await self._run(cleaned.delete)

    def metrics(self) -> dict[str, float]:
        """Kafka's cleaner metrics (``kafka.log:type=LogCleaner`` and
        ``LogCleanerManager``)."""
        cleans = list(self.last_cleans.values())
        now = self.time.milliseconds()
        return {
            "max-dirty-percent": round(100 * self.max_dirty_ratio),
            "time-since-last-run-ms": 0 if self.last_run_ms is None else now - self.last_run_ms,
            "max-clean-time-secs": max((c.elapsed_ms for c in cleans), default=0.0) / 1000,
            "max-buffer-utilization-percent": 100 * max((c.map_utilization for c in cleans), default=0.0),
            "cleaner-recopy-percent": recopy_percent(cleans[-1]) if cleans else 0.0,
            "uncleanable-partitions-count": len(self.uncleanable),
        }


def finish_cleaned_segment(segment: _native.Segment, last_modified_ms: int) -> None:
    """Close the new segment for writing (trimmed indexes), make it durable before the swap, and
    give it its sources' modification time (time retention and rolling read it)."""
    segment.on_become_inactive()
    segment.flush()
    segment.set_last_modified_ms(last_modified_ms)


def recopy_percent(result: CleanResult) -> float:
    read = result.stats.get("bytes_read", 0)
    return 100 * result.stats.get("bytes_written", 0) / read if read else 0.0


def log_clean(result: CleanResult) -> None:
    """Kafka's summary of a clean (``recordStats``)."""
    stats = result.stats
    mb = 1024 * 1024
    seconds = max(result.elapsed_ms / 1000, 1e-9)
    map_seconds = max(result.map_elapsed_ms / 1000, 1e-9)
    read = stats.get("bytes_read", 0)
    written = stats.get("bytes_written", 0)
    messages_read = stats.get("messages_read", 0)
    log.info(
        "Log cleaner cleaned log %s (dirty section = [%d, %d])\n"
        "\t%.1f MB of log processed in %.1f seconds (%.1f MB/sec).\n"
        "\tIndexed %.1f MB in %.1f seconds (%.1f MB/sec, %.1f%% of total time)\n"
        "\tBuffer utilization: %.1f%%\n"
        "\tStart size: %.1f MB (%d messages)\n"
        "\tEnd size: %.1f MB (%d messages)\n"
        "\t%.1f%% size reduction (%.1f%% fewer messages)",
        result.topic_partition, result.first_dirty_offset, result.end_offset,
        read / mb, seconds, read / mb / seconds,
        stats.get("map_bytes_read", 0) / mb, map_seconds, stats.get("map_bytes_read", 0) / mb / map_seconds,
        100 * map_seconds / seconds,
        100 * result.map_utilization,
        read / mb, messages_read,
        written / mb, stats.get("messages_written", 0),
        100 * (1 - written / read) if read else 0.0,
        100 * (1 - stats.get("messages_written", 0) / messages_read) if messages_read else 0.0,
    )
    if stats.get("invalid_messages"):
        log.warning("Found %d invalid messages during compaction of %s.", stats["invalid_messages"],
                    result.topic_partition)
