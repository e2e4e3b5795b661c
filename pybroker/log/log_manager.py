"""The log manager: every partition log under ``log.dirs``, their checkpoints and flushes.

Owns the log directories (``meta.properties``, the ``.kafka_cleanshutdown`` marker, the
``recovery-point-offset-checkpoint``, ``replication-offset-checkpoint`` and
``log-start-offset-checkpoint`` files), loading and recovering logs at start-up, creating and
deleting partition logs, the periodic checkpoint/flush tasks, the retention task (Kafka's
``kafka-log-retention``: every log's ``delete_old_segments``, then the removal of the renamed
``.deleted`` files after ``file.delete.delay.ms``), and clean shutdown. fsyncs and file removals
run in worker threads, never on the event loop. Time and the timed tasks come from the injected
`Time` and `Scheduler` (``pybroker.scheduler``).
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
from collections.abc import Callable

from pybroker.log.checkpoint import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    CheckpointError,
    OffsetCheckpointFile,
    write_atomically,
)
from pybroker.log.config import LONG_MAX, LogConfig
from pybroker.log.log import (
    Log,
    delete_files,
    flush_files,
    read_partition_metadata,
    write_partition_metadata,
)
from pybroker.scheduler import SYSTEM_TIME, AsyncioScheduler, ScheduledTask, Scheduler, Time
from pybroker.types import TopicPartition

log = logging.getLogger(__name__)

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
META_PROPERTIES = "meta.properties"
DELETE_DIR_SUFFIX = "-delete"


class LogDirError(RuntimeError):
    """A log directory that cannot be used; the message says what to do."""


# Each per-log-dir offset checkpoint and the Log attribute it records.
CHECKPOINT_ATTRIBUTES = {
    RECOVERY_POINT_CHECKPOINT: "recovery_point",
    LOG_START_OFFSET_CHECKPOINT: "log_start_offset",
    REPLICATION_OFFSET_CHECKPOINT: "high_watermark",
}

def read_meta_properties(log_dir: str) -> dict[str, str]:
    """A log dir's ``meta.properties`` (node.id, cluster.id, version); empty if there is none."""
    props: dict[str, str] = {}
    try:
        with open(os.path.join(log_dir, META_PROPERTIES), encoding="utf-8") as f:
            for line in f:
                if "=" in line and not line.startswith("#"):
                    key, _, value = line.strip().partition("=")
                    props[key] = value
    except FileNotFoundError:
        pass
    return props


class LogManager:
    """All partition logs of this broker."""

    def __init__(
        self,
        log_dirs: list[str],
        config_for_topic: Callable[[str], LogConfig],
        *,
        node_id: int,
        cluster_id: str,
        recovery_point_interval_ms: int = 60000,
        log_start_offset_interval_ms: int = 60000,
        high_watermark_interval_ms: int = 5000,
        flush_check_interval_ms: int = LONG_MAX,
        retention_check_interval_ms: int = 300000,
        initial_task_delay_ms: int = 30000,
        time: Time = SYSTEM_TIME,
        scheduler: Scheduler | None = None,
    ) -> None:
        self.log_dirs = log_dirs
        self.config_for_topic = config_for_topic
        self.node_id = node_id
        self.cluster_id = cluster_id
        self.logs: dict[TopicPartition, Log] = {}
        self._dir_of: dict[TopicPartition, str] = {}
        self._intervals = {
            "recovery": recovery_point_interval_ms,
            "log-start": log_start_offset_interval_ms,
            "high-watermark": high_watermark_interval_ms,
            "flush": flush_check_interval_ms,
            "retention": retention_check_interval_ms,
        }
        self.initial_task_delay_ms = initial_task_delay_ms
        self.time = time
        self.scheduler: Scheduler = scheduler or AsyncioScheduler()
        # Told the partition whose log start offset retention moved (the broker points it at
        # ReplicaManager.on_log_start_offset_changed, so waiting DeleteRecords re-check).
        self.on_log_start_offset_changed: Callable[[TopicPartition], None] | None = None
        self._tasks: list[ScheduledTask] = []
        self._pending_flushes: set[asyncio.Future[None]] = set()
        self._epoch_writers: dict[Log, asyncio.Task[None]] = {}
        self._epoch_dirty: set[Log] = set()
        # .deleted files waiting for file.delete.delay.ms (removed by their task when it runs).
        self._scheduled_deletions: dict[ScheduledTask, list[str]] = {}

    # --- start-up ------------------------------------------------------------------------------

    def load(self) -> None:
        for log_dir in self.log_dirs:
            os.makedirs(log_dir, exist_ok=True)
            self._check_meta_properties(log_dir)
            clean = os.path.exists(os.path.join(log_dir, CLEAN_SHUTDOWN_FILE))
            recovery = self._read_checkpoint(log_dir, RECOVERY_POINT_CHECKPOINT)
            start_offsets = self._read_checkpoint(log_dir, LOG_START_OFFSET_CHECKPOINT)
            high_watermarks = self._read_checkpoint(log_dir, REPLICATION_OFFSET_CHECKPOINT)
            started = self.time.monotonic_ms()
            for name in sorted(os.listdir(log_dir)):
                path = os.path.join(log_dir, name)
                if not os.path.isdir(path):
                    continue
                if name.endswith(DELETE_DIR_SUFFIX):
                    shutil.rmtree(path, ignore_errors=True)
                    continue
                try:
                    tp = TopicPartition.parse_dir_name(name)
                except ValueError:
                    continue
                self.logs[tp] = Log(
                    path, tp, self.config_for_topic(tp.topic),
                    recovery_point=recovery.get(tp, 0),
                    log_start_offset=start_offsets.get(tp, 0),
                    high_watermark=high_watermarks.get(tp, 0),
                    had_clean_shutdown=clean,
                )
                self._attach(self.logs[tp])
                self._dir_of[tp] = log_dir
            loaded = sum(1 for d in self._dir_of.values() if d == log_dir)
            if loaded and not clean:
                log.warning("%s was not shut down cleanly: recovered its logs from their recovery points", log_dir)
            log.info("Loaded %d logs from %s in %.0f ms", loaded, log_dir, self.time.monotonic_ms() - started)
            if clean:
                os.remove(os.path.join(log_dir, CLEAN_SHUTDOWN_FILE))

    def _check_meta_properties(self, log_dir: str) -> None:
        path = os.path.join(log_dir, META_PROPERTIES)
        props = read_meta_properties(log_dir)
        if props:
            if props.get("node.id") not in (None, str(self.node_id)):
                raise LogDirError(
                    f"{path} belongs to node.id {props['node.id']}, but this broker is node.id "
                    f"{self.node_id}: use another log.dirs or set node.id={props['node.id']}"
                )
            if props.get("cluster.id"):
                self.cluster_id = props["cluster.id"]
            return
        write_atomically(path, f"version=1\nnode.id={self.node_id}\ncluster.id={self.cluster_id}\n")

    @staticmethod
    def _read_checkpoint(log_dir: str, name: str) -> dict[TopicPartition, int]:
        try:
            return OffsetCheckpointFile(os.path.join(log_dir, name)).read()
        except CheckpointError as e:
            log.error("Ignoring damaged checkpoint (offsets will be recomputed): %s", e)
            return {}

    # --- partition logs ------------------------------------------------------------------------

    def _attach(self, partition_log: Log) -> None:
        partition_log.on_roll = self._schedule_flush_on_roll
        partition_log.on_segments_deleted = self._schedule_file_deletion
        partition_log.on_leader_epochs_truncated = self._schedule_leader_epoch_flush
        partition_log.last_flush_ms = self.time.monotonic_ms()

    def get_log(self, tp: TopicPartition) -> Log | None:
        return self.logs.get(tp)

    def get_or_create_log(self, tp: TopicPartition, topic_id: str) -> Log:
        existing = self.logs.get(tp)
        if existing is not None:
            return existing
        log_dir = min(self.log_dirs, key=lambda d: sum(1 for v in self._dir_of.values() if v == d))
        path = os.path.join(log_dir, str(tp))
        new_log = Log(path, tp, self.config_for_topic(tp.topic))
        write_partition_metadata(path, topic_id)
        self._attach(new_log)
        self.logs[tp] = new_log
        self._dir_of[tp] = log_dir
        log.info("Created log for partition %s in %s", tp, path)
        return new_log

    def topic_id_on_disk(self, tp: TopicPartition) -> str | None:
        existing = self.logs.get(tp)
        return read_partition_metadata(existing.dir) if existing else None

    def delete_log(self, tp: TopicPartition) -> None:
        """Remove a partition's log: rename its directory ``…-delete`` then remove it."""
        removed = self.logs.pop(tp, None)
        self._dir_of.pop(tp, None)
        if removed is None:
            return
        removed.close()
        doomed = f"{removed.dir}.{self.time.milliseconds()}{DELETE_DIR_SUFFIX}"
        os.rename(removed.dir, doomed)
        shutil.rmtree(doomed, ignore_errors=True)
        # The caller rewrites the checkpoints next (``write_all_checkpoints``), as Kafka does, so
        # that a topic created again under this name never inherits this one's start offset.

    def update_config(self, topic: str) -> None:
        config = self.config_for_topic(topic)
        for tp, partition_log in self.logs.items():
            if tp.topic == topic:
                partition_log.config = config

    # --- retention -----------------------------------------------------------------------------

    async def cleanup_logs(self) -> int:
        """One retention pass over every log (Kafka's ``LogManager.cleanupLogs``); returns the
        number of segments deleted. Each log's pass is synchronous, so appends and reads never
        see a half-updated log; the loop yields between logs."""
        started = self.time.monotonic_ms()
        total = 0
        for count, (tp, partition_log) in enumerate(list(self.logs.items()), 1):
            if self.logs.get(tp) is not partition_log:
                continue  # deleted (or replaced) while this pass yielded
            before = partition_log.log_start_offset
            try:
                total += partition_log.delete_old_segments(self.time.milliseconds())
            except Exception:
                log.exception("Retention of %s failed", tp)
            if partition_log.log_start_offset > before and self.on_log_start_offset_changed is not None:
                try:
                    self.on_log_start_offset_changed(tp)
                except Exception:
                    log.exception("Log start offset listener failed for %s", tp)
            if count % 100 == 0:
                await asyncio.sleep(0)
        log.debug("Log cleanup completed. %d segments deleted in %.0f ms", total, self.time.monotonic_ms() - started)
        return total

    def _schedule_file_deletion(self, partition_log: Log, paths: list[str]) -> None:
        """Remove a deleted segment's ``.deleted`` files after the topic's file.delete.delay.ms
        (so reads that already hold the segment can finish), in a worker thread."""

        async def delete() -> None:
            del self._scheduled_deletions[task]
            await asyncio.get_running_loop().run_in_executor(None, delete_files, paths)

        task = self.scheduler.schedule("delete-file", delete, partition_log.config.file_delete_delay_ms)
        self._scheduled_deletions[task] = paths

    async def _delete_scheduled_files_now(self) -> None:
        """At shutdown: nothing reads any more, so the waiting ``.deleted`` files go now (a
        leftover one would be removed when the log is next loaded anyway)."""
        paths = [path for waiting in self._scheduled_deletions.values() for path in waiting]
        for task in self._scheduled_deletions:
            task.cancel()
        self._scheduled_deletions.clear()
        if paths:
            await asyncio.get_running_loop().run_in_executor(None, delete_files, paths)

    # --- flushing and checkpoints --------------------------------------------------------------

    async def flush(self, partition_log: Log, up_to_offset: int | None = None) -> None:
        """fsync a log's files up to an offset in a worker thread, then advance its recovery point."""
        target = partition_log.log_end_offset if up_to_offset is None else up_to_offset
        if target <= partition_log.recovery_point:
            return
        paths = partition_log.segment_paths_to_flush(target)
        await asyncio.get_running_loop().run_in_executor(None, flush_files, paths)
        partition_log.recovery_point = max(partition_log.recovery_point, target)
        partition_log.unflushed_messages = 0
        partition_log.last_flush_ms = self.time.monotonic_ms()

    def _schedule_flush_on_roll(self, partition_log: Log) -> None:
        """Kafka flushes a rolled segment in the background; so do we."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        future = asyncio.ensure_future(self.flush(partition_log, partition_log.active_segment.base_offset), loop=loop)
        self._pending_flushes.add(future)
        future.add_done_callback(self._pending_flushes.discard)

    def _schedule_leader_epoch_flush(self, partition_log: Log) -> None:
        """Write a log's leader-epoch-checkpoint in a worker thread; changes made while a write is
        under way are written by one more write after it, so the newest entries always land last."""
        if partition_log in self._epoch_writers:
            self._epoch_dirty.add(partition_log)
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            partition_log.leader_epoch_cache.flush()
            return
        task = loop.create_task(self._write_leader_epochs(partition_log))
        self._epoch_writers[partition_log] = task
        self._pending_flushes.add(task)
        task.add_done_callback(self._pending_flushes.discard)

    async def _write_leader_epochs(self, partition_log: Log) -> None:
        cache = partition_log.leader_epoch_cache
        try:
            while True:
                self._epoch_dirty.discard(partition_log)
                try:
                    await asyncio.get_running_loop().run_in_executor(None, cache.write, cache.entries)
                except OSError as e:  # e.g. the partition was deleted meanwhile
                    log.warning("Writing the leader-epoch checkpoint of %s failed: %s", partition_log.topic_partition, e)
                if partition_log not in self._epoch_dirty:
                    return
        finally:
            del self._epoch_writers[partition_log]

    def maybe_flush_after_append(self, partition_log: Log) -> asyncio.Future[None] | None:
        """Honour flush.messages: once that many messages are unflushed, fsync (in a worker thread)
        up to the log end offset. Returns the flush, which the append's acknowledgement waits for
        (Kafka flushes inside the append), or None when no flush was due."""
        if partition_log.unflushed_messages < partition_log.config.flush_messages:
            return None
        partition_log.unflushed_messages = 0
        future = asyncio.ensure_future(self.flush(partition_log))
        self._pending_flushes.add(future)
        future.add_done_callback(self._pending_flushes.discard)
        return future

    def _snapshot(self, attribute: str) -> dict[str, dict[TopicPartition, int]]:
        per_dir: dict[str, dict[TopicPartition, int]] = {d: {} for d in self.log_dirs}
        for tp, partition_log in self.logs.items():
            per_dir[self._dir_of[tp]][tp] = getattr(partition_log, attribute)
        return per_dir

    def _write_checkpoints(self, name: str, per_dir: dict[str, dict[TopicPartition, int]]) -> None:
        for log_dir, offsets in per_dir.items():
            OffsetCheckpointFile(os.path.join(log_dir, name)).write(offsets)

    async def write_all_checkpoints(self) -> None:
        """Write every offset checkpoint of every log dir now (off the event loop)."""
        for name in CHECKPOINT_ATTRIBUTES:
            await self.checkpoint(name)

    async def checkpoint(self, name: str) -> None:
        per_dir = self._snapshot(CHECKPOINT_ATTRIBUTES[name])
        await asyncio.get_running_loop().run_in_executor(None, self._write_checkpoints, name, per_dir)

    def start_background_tasks(self) -> None:
        """Kafka's LogManager tasks: the checkpoint writers and the flusher every interval, and
        kafka-log-retention first after log.initial.task.delay.ms, then every
        log.retention.check.interval.ms."""
        schedule = [
            ("kafka-recovery-point-checkpoint", "recovery", lambda: self.checkpoint(RECOVERY_POINT_CHECKPOINT)),
            ("kafka-log-start-offset-checkpoint", "log-start", lambda: self.checkpoint(LOG_START_OFFSET_CHECKPOINT)),
            ("highwatermark-checkpoint", "high-watermark", lambda: self.checkpoint(REPLICATION_OFFSET_CHECKPOINT)),
            ("kafka-log-flusher", "flush", self._flush_dirty_logs),
            ("kafka-log-retention", "retention", self.cleanup_logs),
        ]
        for name, key, action in schedule:
            interval = self._intervals[key]
            if 0 < interval < LONG_MAX:
                delay = self.initial_task_delay_ms if key == "retention" else interval
                self._tasks.append(self.scheduler.schedule(name, action, delay, interval))

    async def _flush_dirty_logs(self) -> None:
        now = self.time.monotonic_ms()
        for partition_log in list(self.logs.values()):
            if now - partition_log.last_flush_ms >= partition_log.config.flush_ms:
                await self.flush(partition_log)

    async def shutdown(self) -> None:
        """Flush every log, write every checkpoint (the log start offsets retention moved
        included), close the files, remove waiting ``.deleted`` files, mark a clean shutdown."""
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*(task.wait() for task in self._tasks))
        self._tasks.clear()
        await asyncio.gather(*self._pending_flushes, return_exceptions=True)
        for partition_log in list(self.logs.values()):
            await self.flush(partition_log)
        await self.write_all_checkpoints()
        for partition_log in self.logs.values():
            partition_log.close()
        await self._delete_scheduled_files_now()
        for log_dir in self.log_dirs:
            write_atomically(os.path.join(log_dir, CLEAN_SHUTDOWN_FILE), "")
