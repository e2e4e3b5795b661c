"""The log manager: every partition log under ``log.dirs``, their checkpoints and flushes.

Owns the log directories (``meta.properties``, the ``.kafka_cleanshutdown`` marker, the
``recovery-point-offset-checkpoint``, ``replication-offset-checkpoint`` and
``log-start-offset-checkpoint`` files), loading and recovering logs at start-up, creating and
deleting partition logs, the periodic checkpoint/flush tasks, and clean shutdown. fsyncs run in
worker threads, never on the event loop.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import time
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
from pybroker.log.log import Log, flush_files, read_partition_metadata, write_partition_metadata
from pybroker.types import TopicPartition

log = logging.getLogger(__name__)

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
META_PROPERTIES = "meta.properties"
DELETE_DIR_SUFFIX = "-delete"


class LogDirError(RuntimeError):
    """A log directory that cannot be used; the message says what to do."""


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
        }
        self._tasks: list[asyncio.Task[None]] = []
        self._pending_flushes: set[asyncio.Future[None]] = set()

    # --- start-up ------------------------------------------------------------------------------

    def load(self) -> None:
        for log_dir in self.log_dirs:
            os.makedirs(log_dir, exist_ok=True)
            self._check_meta_properties(log_dir)
            clean = os.path.exists(os.path.join(log_dir, CLEAN_SHUTDOWN_FILE))
            recovery = self._read_checkpoint(log_dir, RECOVERY_POINT_CHECKPOINT)
            start_offsets = self._read_checkpoint(log_dir, LOG_START_OFFSET_CHECKPOINT)
            high_watermarks = self._read_checkpoint(log_dir, REPLICATION_OFFSET_CHECKPOINT)
            started = time.monotonic()
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
                self.logs[tp].on_roll = self._schedule_flush_on_roll
                self._dir_of[tp] = log_dir
            loaded = sum(1 for d in self._dir_of.values() if d == log_dir)
            if loaded and not clean:
                log.warning("%s was not shut down cleanly: recovered its logs from their recovery points", log_dir)
            log.info("Loaded %d logs from %s in %.0f ms", loaded, log_dir, (time.monotonic() - started) * 1000)
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
        new_log.on_roll = self._schedule_flush_on_roll
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
        doomed = f"{removed.dir}.{int(time.time() * 1000)}{DELETE_DIR_SUFFIX}"
        os.rename(removed.dir, doomed)
        shutil.rmtree(doomed, ignore_errors=True)

    def update_config(self, topic: str) -> None:
        config = self.config_for_topic(topic)
        for tp, partition_log in self.logs.items():
            if tp.topic == topic:
                partition_log.config = config

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
        partition_log.last_flush_ms = time.monotonic() * 1000

    def _schedule_flush_on_roll(self, partition_log: Log) -> None:
        """Kafka flushes a rolled segment in the background; so do we."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        future = asyncio.ensure_future(self.flush(partition_log, partition_log.active_segment.base_offset), loop=loop)
        self._pending_flushes.add(future)
        future.add_done_callback(self._pending_flushes.discard)

    def maybe_flush_after_append(self, partition_log: Log) -> None:
        """Honour flush.messages: fsync once that many messages are unflushed."""
        if partition_log.unflushed_messages >= partition_log.config.flush_messages:
            partition_log.unflushed_messages = 0
            future = asyncio.ensure_future(self.flush(partition_log))
            self._pending_flushes.add(future)
            future.add_done_callback(self._pending_flushes.discard)

    def _snapshot(self, attribute: str) -> dict[str, dict[TopicPartition, int]]:
        per_dir: dict[str, dict[TopicPartition, int]] = {d: {} for d in self.log_dirs}
        for tp, partition_log in self.logs.items():
            per_dir[self._dir_of[tp]][tp] = getattr(partition_log, attribute)
        return per_dir

    def _write_checkpoints(self, name: str, per_dir: dict[str, dict[TopicPartition, int]]) -> None:
        for log_dir, offsets in per_dir.items():
            OffsetCheckpointFile(os.path.join(log_dir, name)).write(offsets)

    async def checkpoint(self, name: str) -> None:
        attribute = {
            RECOVERY_POINT_CHECKPOINT: "recovery_point",
            LOG_START_OFFSET_CHECKPOINT: "log_start_offset",
            REPLICATION_OFFSET_CHECKPOINT: "high_watermark",
        }[name]
        per_dir = self._snapshot(attribute)
        await asyncio.get_running_loop().run_in_executor(None, self._write_checkpoints, name, per_dir)

    def start_background_tasks(self) -> None:
        schedule = [
            ("recovery", lambda: self.checkpoint(RECOVERY_POINT_CHECKPOINT)),
            ("log-start", lambda: self.checkpoint(LOG_START_OFFSET_CHECKPOINT)),
            ("high-watermark", lambda: self.checkpoint(REPLICATION_OFFSET_CHECKPOINT)),
            ("flush", self._flush_dirty_logs),
        ]
        for key, action in schedule:
            interval = self._intervals[key]
            if 0 < interval < LONG_MAX:
                self._tasks.append(asyncio.create_task(self._every(interval, action, key)))

    async def _every(self, interval_ms: int, action: Callable[[], object], name: str) -> None:
        while True:
            await asyncio.sleep(interval_ms / 1000)
            try:
                await action()  # type: ignore[misc]
            except Exception:
                log.exception("Background task %s failed", name)

    async def _flush_dirty_logs(self) -> None:
        now = time.monotonic() * 1000
        for partition_log in list(self.logs.values()):
            if now - partition_log.last_flush_ms >= partition_log.config.flush_ms:
                await self.flush(partition_log)

    async def shutdown(self) -> None:
        """Flush every log, write every checkpoint, close the files, mark a clean shutdown."""
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, *self._pending_flushes, return_exceptions=True)
        for partition_log in list(self.logs.values()):
            await self.flush(partition_log)
        for name in (RECOVERY_POINT_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT, REPLICATION_OFFSET_CHECKPOINT):
            await self.checkpoint(name)
        for partition_log in self.logs.values():
            partition_log.close()
        for log_dir in self.log_dirs:
            write_atomically(os.path.join(log_dir, CLEAN_SHUTDOWN_FILE), "")
