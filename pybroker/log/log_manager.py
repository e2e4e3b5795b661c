"""The log manager: every partition log under ``log.dirs``, their checkpoints and flushes.

Owns the log directories (``meta.properties``, the ``.kafka_cleanshutdown`` marker, the
``recovery-point-offset-checkpoint``, ``replication-offset-checkpoint`` and
``log-start-offset-checkpoint`` files), loading and recovering logs at start-up, creating and
deleting partition logs, the log cleaner (`pybroker.log.cleaner`, which it starts, stops and
tells of truncations and deletions), the periodic checkpoint/flush tasks, the retention task (Kafka's
``kafka-log-retention``: every log's ``delete_old_segments``, then the removal of the renamed
``.deleted`` files after ``file.delete.delay.ms``), and clean shutdown. fsyncs and file removals
run in worker threads, never on the event loop. Time and the timed tasks come from the injected
`Time` and `Scheduler` (``pybroker.scheduler``).

Several log dirs (JBOD, KIP-112/113): a new log goes to the preferred dir AlterReplicaLogDirs
recorded for it, else to the live dir holding the fewest logs (future logs counted, as Kafka's
``nextLogDirs``); every dir has its ``meta.properties``. An I/O error on a dir (loading it,
flushing, writing its checkpoints) goes to the `LogDirFailureChannel`; ``handle_log_dir_failure``
then drops the dir's logs (the broker answers KAFKA_STORAGE_ERROR for them) and stops writing its
checkpoints. Future logs (``<topic>-<partition>.<uuid>-future``, the copy a replica move makes)
are kept beside the current ones (``future_logs``), loaded at start-up, and swapped in by
``finish_future_log`` + ``replace_current_with_future_log``; the replaced log's directory is
renamed ``.<uuid>-delete`` and removed in a worker thread.

Many partitions: new logs are created in a worker thread, `CREATE_BATCH` per call, their
``partition.metadata`` written without fsync and fsynced behind them (`BackgroundPasses`); a deleted
log's directory is renamed ``…-delete`` on the event loop and removed in a worker thread.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import shutil
import time
import uuid
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor

from pybroker.common.config import LONG_MAX
from pybroker.log.checkpoint import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    CheckpointError,
    OffsetCheckpointFile,
    render_offsets,
    write_atomically,
)
from pybroker.log.cleaner import CleanerConfig, LogCleaner
from pybroker.log.config import LogConfig
from pybroker.log.file_sync import BackgroundPasses, CoalescingFileWriter, fsync_paths
from pybroker.log.log import (
    PARTITION_METADATA,
    Log,
    SegmentListing,
    delete_files,
    segment_base_offsets,
    write_partition_metadata,
)
from pybroker.log.log_dir_failure import (
    LogDirFailureChannel,
    OfflineLogDirError,
    is_resource_exhaustion,
)
from pybroker.scheduler import SYSTEM_TIME, AsyncioScheduler, ScheduledTask, Scheduler, Time
from pybroker.types import TopicPartition

log = logging.getLogger(__name__)

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
META_PROPERTIES = "meta.properties"
DELETE_DIR_SUFFIX = "-delete"
FUTURE_DIR_SUFFIX = "-future"
# New logs created per worker-thread call: large enough to amortise the hop, small enough that
# the event loop registers each batch (and the partitions become usable) soon.
CREATE_BATCH = 256


class LogDirError(RuntimeError):
    """A log directory that cannot be used; the message says what to do."""


# Each per-log-dir offset checkpoint and the Log attribute it records.
CHECKPOINT_ATTRIBUTES = {
    RECOVERY_POINT_CHECKPOINT: "recovery_point",
    LOG_START_OFFSET_CHECKPOINT: "log_start_offset",
    REPLICATION_OFFSET_CHECKPOINT: "high_watermark",
}

def read_meta_properties(log_dir: str) -> dict[str, str]:
    """A log dir's ``meta.properties`` (version, broker.id or node.id, cluster.id); empty if
    there is none."""
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


def _meta_properties_v0(broker_id: int, cluster_id: str) -> str:
    """``meta.properties`` as ZooKeeper-mode Kafka writes it (``java.util.Properties.store``:
    an empty comment and the date, then the entries)."""
    written = time.strftime("%a %b %d %H:%M:%S UTC %Y", time.gmtime())
    return f"#\n#{written}\nbroker.id={broker_id}\nversion=0\ncluster.id={cluster_id}\n"


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
        producer_id_expiration_ms: int = 86400000,
        producer_id_expiration_check_interval_ms: int = 600000,
        transaction_verification_enabled: bool = True,
        recovery_threads: int = 1,
        cleaner_config: CleanerConfig | None = None,
        time: Time = SYSTEM_TIME,
        scheduler: Scheduler | None = None,
        failure_channel: LogDirFailureChannel | None = None,
    ) -> None:
        self.log_dirs = [os.path.abspath(d) for d in log_dirs]
        log_dirs = self.log_dirs
        self.failure_channel = failure_channel or LogDirFailureChannel()
        # Future logs (replica moves between dirs, KIP-113) and the dirs AlterReplicaLogDirs chose
        # for partitions not created yet (Kafka's preferredLogDirs).
        self.future_logs: dict[TopicPartition, Log] = {}
        self._future_dir_of: dict[TopicPartition, str] = {}
        self.preferred_log_dirs: dict[TopicPartition, str] = {}
        # The error of the last creation of each partition's log that failed while its dir stayed
        # online (the process out of descriptors or memory): CreateTopics answers it.
        self._creation_errors: dict[TopicPartition, OSError] = {}
        # Kafka's Exit.halt: every log dir failed (tests replace it).
        self.halt: Callable[[int], None] = os._exit
        self.config_for_topic = config_for_topic
        self.node_id = node_id
        self.cluster_id = cluster_id
        self.logs: dict[TopicPartition, Log] = {}
        self._dir_of: dict[TopicPartition, str] = {}
        self._logs_per_dir: dict[str, int] = dict.fromkeys(log_dirs, 0)
        self._logs_of_topic: dict[str, set[TopicPartition]] = {}
        self._creating = asyncio.Lock()
        self._path_syncer: BackgroundPasses[str, list[str], list[tuple[str, OSError]]] = BackgroundPasses(
            "fsync of new partition metadata", list, self._fsync_by_dir, self._metadata_sync_failed
        )
        self._intervals = {
            "recovery": recovery_point_interval_ms,
            "log-start": log_start_offset_interval_ms,
            "high-watermark": high_watermark_interval_ms,
            "flush": flush_check_interval_ms,
            "retention": retention_check_interval_ms,
            "producer-expiration": producer_id_expiration_check_interval_ms,
        }
        self.initial_task_delay_ms = initial_task_delay_ms
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.transaction_verification_enabled = transaction_verification_enabled
        self.recovery_threads = recovery_threads
        self.time = time
        self.scheduler: Scheduler = scheduler or AsyncioScheduler()
        # Told the partition whose log start offset retention moved (the broker points it at
        # ReplicaManager.on_log_start_offset_changed, so waiting DeleteRecords re-check).
        self.on_log_start_offset_changed: Callable[[TopicPartition], None] | None = None
        self._tasks: list[ScheduledTask] = []
        self._pending_flushes: set[asyncio.Future[None]] = set()
        # Logs whose leader-epoch-checkpoint is behind their cache, written in coalesced passes.
        self._epoch_writer: BackgroundPasses[Log, list[tuple[Log, list[tuple[int, int]]]], list[tuple[Log, OSError]]] = (
            BackgroundPasses(
                "writing leader-epoch checkpoints", epoch_snapshots, write_epoch_checkpoints, self._epoch_writes_failed
            )
        )
        # The offset checkpoints' one writer each (`pybroker.log.checkpoint`: one writer per file).
        self._checkpoint_writers = {
            (log_dir, name): CoalescingFileWriter(
                os.path.join(log_dir, name), functools.partial(self._render_checkpoint, log_dir, name),
                log_errors=False)
            for log_dir in log_dirs for name in CHECKPOINT_ATTRIBUTES
        }
        # .deleted files waiting for file.delete.delay.ms (removed by their task when it runs).
        self._scheduled_deletions: dict[ScheduledTask, list[str]] = {}
        # Compaction of compacted topics (Kafka creates its cleaner only with log.cleaner.enable).
        cleaner_config = cleaner_config or CleanerConfig()
        self.cleaner: LogCleaner | None = (
            LogCleaner(cleaner_config, list(log_dirs), self.logs, self._dir_of.get, time=time, scheduler=self.scheduler,
                       failure_channel=self.failure_channel)
            if cleaner_config.enable else None
        )

    # --- start-up ------------------------------------------------------------------------------

    def load(self) -> None:
        """Load every partition log of every log dir: after a clean shutdown from the files'
        state alone (no scans), otherwise recovering each from its recovery point. Logs are
        opened by ``num.recovery.threads.per.data.dir`` threads per dir (the native segment code
        runs without the GIL, so recovery scans proceed in parallel).

        A dir that cannot be read or loaded (an ``OSError``) goes offline and the broker starts
        without it, as Kafka; when every dir failed, ``LogDirError``. A partition found in two
        dirs (a crash in the middle of a swap) is refused with Kafka's message."""
        found: dict[str, list[tuple[TopicPartition, str, SegmentListing, bool]]] = {}
        for log_dir in self.log_dirs:
            try:
                found[log_dir] = self._partition_dirs(log_dir)
            except OSError as e:
                self._load_failed(log_dir, e)
        if not found:
            raise LogDirError(
                f"Shutdown broker because none of the specified log dirs from {', '.join(self.log_dirs)} "
                "can be created or validated"
            )
        seen: dict[TopicPartition, str] = {}
        for log_dir, entries in found.items():
            for tp, _path, _listing, is_future in entries:
                if is_future:
                    continue
                if tp in seen:
                    raise LogDirError(
                        f"Duplicate log directories for {tp} are found in both {seen[tp]} and {log_dir}. It is "
                        "likely because log directory failure happened while broker was replacing current "
                        "replica with future replica. Recover broker from this failure by manually deleting "
                        "one of the two directories for this partition. It is recommended to delete the "
                        "partition in the log directory that is known to have failed recently."
                    )
                seen[tp] = log_dir
        for log_dir, partition_dirs in found.items():
            try:
                self._load_dir(log_dir, partition_dirs)
            except OSError as e:
                self._load_failed(log_dir, e)
                self._drop_dir_logs(log_dir)
        if not self.live_log_dirs:
            raise LogDirError(
                f"Shutdown broker because none of the specified log dirs from {', '.join(self.log_dirs)} "
                "can be created or validated"
            )
        if self.cleaner is not None:
            self.cleaner.log_dirs[:] = self.live_log_dirs  # a failed dir's checkpoint is not read
            self.cleaner.load_checkpoints()

    def _load_failed(self, log_dir: str, error: OSError) -> None:
        """A dir that could not be loaded goes offline, unless the process ran out of descriptors
        or memory: then the start stops (a dir left online half-loaded would get new logs beside
        the ones it did not load)."""
        if is_resource_exhaustion(error):
            raise LogDirError(f"Cannot load the logs in {log_dir}: {error}; raise the open-file limit "
                              "(`ulimit -n`, LimitNOFILE in a systemd unit) or free memory") from error
        self.failure_channel.maybe_add_offline_log_dir(log_dir, f"Error while loading log dir {log_dir}", error)

    def _load_dir(self, log_dir: str, partition_dirs: list[tuple[TopicPartition, str, SegmentListing, bool]]) -> None:
        clean = os.path.exists(os.path.join(log_dir, CLEAN_SHUTDOWN_FILE))
        recovery = self._read_checkpoint(log_dir, RECOVERY_POINT_CHECKPOINT)
        start_offsets = self._read_checkpoint(log_dir, LOG_START_OFFSET_CHECKPOINT)
        high_watermarks = self._read_checkpoint(log_dir, REPLICATION_OFFSET_CHECKPOINT)
        started = self.time.monotonic_ms()

        def open_log(entry: tuple[TopicPartition, str, SegmentListing, bool]) -> Log:
            tp, path, listing, _is_future = entry
            return Log(
                path, tp, self.config_for_topic(tp.topic),
                recovery_point=recovery.get(tp, 0),
                log_start_offset=start_offsets.get(tp, 0),
                high_watermark=high_watermarks.get(tp, 0),
                had_clean_shutdown=clean,
                segment_bases=listing,
            )

        if self.recovery_threads > 1 and len(partition_dirs) > 1:
            with ThreadPoolExecutor(self.recovery_threads, thread_name_prefix="log-recovery") as pool:
                loaded = list(pool.map(open_log, partition_dirs))
        else:
            loaded = [open_log(entry) for entry in partition_dirs]
        for (_tp, _path, _listing, is_future), partition_log in zip(partition_dirs, loaded, strict=True):
            if is_future:
                self._register_future(log_dir, partition_log)
            else:
                self._register(log_dir, partition_log)
        if loaded and not clean:
            log.warning("%s was not shut down cleanly: recovered its logs from their recovery points", log_dir)
        log.info("Loaded %d logs from %s in %.0f ms", len(loaded), log_dir, self.time.monotonic_ms() - started)
        if clean:
            os.remove(os.path.join(log_dir, CLEAN_SHUTDOWN_FILE))

    def _partition_dirs(self, log_dir: str) -> list[tuple[TopicPartition, str, SegmentListing, bool]]:
        """The partition directories of ``log_dir`` with their segments' base offsets and
        whether each is a future log (``<topic>-<partition>.<uuid>-future``); removes the
        leftovers of an interrupted topic deletion or replica move (``…-delete``) on the way."""
        os.makedirs(log_dir, exist_ok=True)
        self._check_meta_properties(log_dir)
        found = []
        for entry in sorted(os.scandir(log_dir), key=lambda e: e.name):
            if not entry.is_dir():
                continue
            if entry.name.endswith(DELETE_DIR_SUFFIX):
                shutil.rmtree(entry.path, ignore_errors=True)
                continue
            is_future = entry.name.endswith(FUTURE_DIR_SUFFIX)
            name = entry.name[: -len(FUTURE_DIR_SUFFIX)].rpartition(".")[0] if is_future else entry.name
            try:
                tp = TopicPartition.parse_dir_name(name)
            except ValueError:
                continue
            found.append((tp, entry.path, segment_base_offsets(entry.path), is_future))
        return found

    def _check_meta_properties(self, log_dir: str) -> None:
        """The dir's ``meta.properties`` names this broker (or is written now). It is written as
        ZooKeeper-mode Kafka writes it (version 0 with ``broker.id``), so that Kafka 3.9 starts
        on the dir; a version 1 file pybroker wrote before (``node.id``, no KRaft
        ``directory.id``) is rewritten so, since Kafka refuses version 1 in ZooKeeper mode."""
        path = os.path.join(log_dir, META_PROPERTIES)
        props = read_meta_properties(log_dir)
        if props:
            owner = props.get("broker.id", props.get("node.id"))
            if owner not in (None, str(self.node_id)):
                raise LogDirError(
                    f"{path} belongs to broker.id {owner}, but this broker is node.id "
                    f"{self.node_id}: use another log.dirs or set node.id={owner}"
                )
            if props.get("cluster.id"):
                self.cluster_id = props["cluster.id"]
            if props.get("version") != "1" or "directory.id" in props:
                return
            log.info("Rewriting %s as version 0 (ZooKeeper mode), which Kafka 3.9 reads", path)
        write_atomically(path, _meta_properties_v0(self.node_id, self.cluster_id))

    @staticmethod
    def _read_checkpoint(log_dir: str, name: str) -> dict[TopicPartition, int]:
        try:
            return OffsetCheckpointFile(os.path.join(log_dir, name)).read()
        except CheckpointError as e:
            log.error("Ignoring damaged checkpoint (offsets will be recomputed): %s", e)
            return {}

    # --- partition logs ------------------------------------------------------------------------

    def _register(self, log_dir: str, partition_log: Log) -> None:
        tp = partition_log.topic_partition
        partition_log.on_roll = self._schedule_flush_on_roll
        partition_log.on_segments_deleted = self._schedule_file_deletion
        partition_log.on_leader_epochs_changed = self._schedule_leader_epoch_flush
        if self.cleaner is not None:
            partition_log.on_truncated = self.cleaner.on_truncated
        partition_log.last_flush_ms = self.time.monotonic_ms()
        partition_log.producer_state.verification_enabled = self.transaction_verification_enabled
        self.logs[tp] = partition_log
        self._dir_of[tp] = log_dir
        self._logs_per_dir[log_dir] += 1
        self._logs_of_topic.setdefault(tp.topic, set()).add(tp)
        if partition_log.leader_epoch_cache.dirty:
            # A load trimmed or recovered its epochs: written by the first writer pass, which
            # starts with the background tasks (after the partitions' leaders assigned theirs).
            self._epoch_writer.request([partition_log], start=False)

    def _unregister(self, tp: TopicPartition) -> Log | None:
        removed = self.logs.pop(tp, None)
        if removed is not None:
            self._logs_per_dir[self._dir_of.pop(tp)] -= 1
            of_topic = self._logs_of_topic[tp.topic]
            of_topic.discard(tp)
            if not of_topic:
                del self._logs_of_topic[tp.topic]
        return removed

    def _least_loaded_dir(self, tp: TopicPartition | None = None) -> str:
        """Where a new log of ``tp`` goes: the dir AlterReplicaLogDirs chose for it if that is
        online, else the live dir with the fewest logs, future logs counted (Kafka's
        ``nextLogDirs``; the first such dir in ``log.dirs`` order on a tie)."""
        live = self.live_log_dirs
        if not live:
            raise OSError(f"No log directory is online (log.dirs: {', '.join(self.log_dirs)})")
        preferred = None if tp is None else self.preferred_log_dirs.get(tp)
        if preferred in live:
            return preferred
        return min(live, key=self._logs_per_dir.__getitem__)

    def get_log(self, tp: TopicPartition) -> Log | None:
        return self.logs.get(tp)

    # --- log dirs ------------------------------------------------------------------------------

    @property
    def live_log_dirs(self) -> list[str]:
        """The dirs of ``log.dirs`` that have not failed, in their configured order."""
        offline = self.failure_channel.offline_log_dirs
        return [d for d in self.log_dirs if d not in offline]

    def is_log_dir_online(self, log_dir: str) -> bool:
        return log_dir in self.log_dirs and not self.failure_channel.has_offline_log_dir(log_dir)

    def log_dir_containing(self, path: str) -> str | None:
        """The log dir ``path`` is in (or is), None when none."""
        for log_dir in self.log_dirs:
            if path == log_dir or path.startswith(log_dir + os.sep):
                return log_dir
        return None

    def _is_registered(self, partition_log: Log) -> bool:
        tp = partition_log.topic_partition
        return self.logs.get(tp) is partition_log or self.future_logs.get(tp) is partition_log

    def _fsync_by_dir(self, paths: list[str]) -> list[tuple[str, OSError]]:
        """`fsync_paths` per log dir (a worker thread); returns the dirs whose fsync failed."""
        by_dir: dict[str, list[str]] = {}
        for path in paths:
            by_dir.setdefault(self.log_dir_containing(path) or os.path.dirname(path), []).append(path)
        failed = []
        for log_dir, dir_paths in by_dir.items():
            try:
                fsync_paths(dir_paths)
            except OSError as e:
                failed.append((log_dir, e))
        return failed

    def _metadata_sync_failed(self, failed: list[tuple[str, OSError]]) -> None:
        """Kafka's ``PartitionMetadataFile.maybeFlush`` failing: the dir goes offline."""
        for log_dir, error in failed:
            self.failure_channel.maybe_add_offline_log_dir(
                log_dir, f"Error while writing partition metadata file in dir {log_dir}", error)

    def _epoch_writes_failed(self, failed: list[tuple[Log, OSError]]) -> None:
        """A leader-epoch-checkpoint write failed: the dir of a log still here goes offline
        (Kafka's ``CheckpointFileWithFailureHandler``); a log deleted or replaced meanwhile
        (its directory gone) is no failure of the disk."""
        for partition_log, error in failed:
            path = os.path.join(partition_log.dir, "leader-epoch-checkpoint")
            if self._is_registered(partition_log):
                log_dir = os.path.dirname(partition_log.dir)
                self.failure_channel.maybe_add_offline_log_dir(
                    log_dir, f"Error while writing to checkpoint file {path}", error)
            else:
                log.warning("Writing %s failed: %s", path, error)

    def dir_of(self, tp: TopicPartition) -> str | None:
        """The log dir holding the current log of ``tp`` (None: no log here)."""
        return self._dir_of.get(tp)

    def future_dir_of(self, tp: TopicPartition) -> str | None:
        return self._future_dir_of.get(tp)

    def maybe_update_preferred_log_dir(self, tp: TopicPartition, log_dir: str) -> None:
        """Kafka's ``maybeUpdatePreferredLogDir``: remembered for when ``tp`` gets a log here,
        unless it has one already."""
        if tp not in self.logs:
            self.preferred_log_dirs[tp] = log_dir

    def _drop_dir_logs(self, log_dir: str) -> tuple[list[TopicPartition], list[TopicPartition]]:
        """Forget every current and future log of ``log_dir``, closing their files as well as a
        failed disk allows; returns the (current, future) partitions dropped."""
        current = [tp for tp, d in self._dir_of.items() if d == log_dir]
        future = [tp for tp, d in self._future_dir_of.items() if d == log_dir]
        dropped = [log_ for tp in current if (log_ := self._unregister(tp)) is not None]
        dropped += [log_ for tp in future if (log_ := self._unregister_future(tp)) is not None]
        for partition_log in dropped:
            if self.cleaner is not None:
                self.cleaner.abort(partition_log.topic_partition)
            for segment in partition_log.segments:
                try:
                    segment.close(False)
                except (OSError, ValueError):
                    pass
        return current, future

    def handle_log_dir_failure(self, log_dir: str) -> tuple[list[TopicPartition], list[TopicPartition]]:
        """Kafka's ``LogManager.handleLogDirFailure``: the dir is offline (its checkpoints are no
        longer written), its logs are dropped; returns the (current, future) partitions that went
        with it. When no dir is left the broker halts, as Kafka."""
        log.warning("Stopping serving logs in dir %s", log_dir)
        self.failure_channel.offline_log_dirs.add(log_dir)
        if not self.live_log_dirs:
            log.critical("Shutdown broker because all log dirs in %s have failed", ", ".join(self.log_dirs))
            self.halt(1)
        current, future = self._drop_dir_logs(log_dir)
        if self.cleaner is not None:
            self.cleaner.log_dirs[:] = self.live_log_dirs
        log.warning("Logs for partitions %s are offline and logs for future partitions %s are offline due to "
                    "failure on log directory %s", ",".join(map(str, current)), ",".join(map(str, future)), log_dir)
        return current, future

    # --- future logs (replica moves between log dirs, KIP-113) --------------------------------

    def _register_future(self, log_dir: str, partition_log: Log) -> None:
        tp = partition_log.topic_partition
        partition_log.on_roll = self._schedule_flush_on_roll
        partition_log.on_segments_deleted = self._schedule_file_deletion
        partition_log.on_leader_epochs_changed = self._schedule_leader_epoch_flush
        partition_log.last_flush_ms = self.time.monotonic_ms()
        self.future_logs[tp] = partition_log
        self._future_dir_of[tp] = log_dir
        self._logs_per_dir[log_dir] += 1

    def _unregister_future(self, tp: TopicPartition) -> Log | None:
        removed = self.future_logs.pop(tp, None)
        if removed is not None:
            self._logs_per_dir[self._future_dir_of.pop(tp)] -= 1
        return removed

    def get_future_log(self, tp: TopicPartition) -> Log | None:
        return self.future_logs.get(tp)

    async def create_future_log(self, tp: TopicPartition, topic_id: str, log_dir: str) -> Log:
        """An empty future log of ``tp`` in ``log_dir`` (``<topic>-<partition>.<uuid>-future``),
        created in a worker thread, or the one there already."""
        existing = self.future_logs.get(tp)
        if existing is not None:
            return existing
        path = os.path.join(log_dir, f"{tp}.{uuid.uuid4().hex}{FUTURE_DIR_SUFFIX}")
        config = self.config_for_topic(tp.topic)

        def create() -> Log:
            new_log = Log(path, tp, config)
            write_partition_metadata(path, topic_id)
            return new_log

        async with self._creating:
            new_log = await asyncio.get_running_loop().run_in_executor(None, create)
            self._register_future(log_dir, new_log)
        self._path_syncer.request([os.path.join(path, PARTITION_METADATA), path, log_dir])
        log.info("Created log for partition %s in %s", tp, path)
        return new_log

    def remove_future_log(self, tp: TopicPartition) -> None:
        """Drop the future log of ``tp`` (a move cancelled or redirected): closed and its
        directory removed, as a deleted log's."""
        removed = self._unregister_future(tp)
        if removed is not None:
            self._dispose(removed)

    def _dispose(self, old: Log) -> None:
        """A log that nothing uses any more: its directory renamed ``.<uuid>-delete`` now, on
        the event loop (so that the partition's name is never in two dirs once a swap returns: a
        restart would refuse such a pair, Kafka's "Duplicate log directories"), then its files
        closed and the directory removed in a worker thread (a load removes a leftover
        ``-delete`` directory). Reads under way hold their own file handles."""
        stem = old.dir[: -len(FUTURE_DIR_SUFFIX)].rpartition(".")[0] if old.dir.endswith(FUTURE_DIR_SUFFIX) else old.dir
        doomed = f"{stem}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}"
        try:
            os.rename(old.dir, doomed)
        except OSError as e:
            log_dir = os.path.dirname(old.dir)
            self.failure_channel.maybe_add_offline_log_dir(
                log_dir, f"Error while renaming dir for {old.topic_partition} in log dir {log_dir}", e)
            doomed = old.dir

        def dispose() -> None:
            for segment in old.segments:
                try:
                    segment.close(False)
                except (OSError, ValueError):
                    pass
            shutil.rmtree(doomed, ignore_errors=True)

        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            dispose()
            return
        removal = loop.run_in_executor(None, dispose)
        self._pending_flushes.add(removal)
        removal.add_done_callback(self._pending_flushes.discard)

    async def finish_future_log(self, tp: TopicPartition) -> Log | None:
        """First half of Kafka's ``replaceCurrentWithFutureLog``, for a future log that has caught
        up: in a worker thread its leader epochs are written, it is closed and fsynced, its
        directory renamed to the partition's own name and reopened from its files (the native
        segments know their paths, so a rename needs a reopen). The current log keeps taking
        appends meanwhile; the caller copies what it got since, then calls
        ``replace_current_with_future_log`` in the same step. None: the future log went away
        (the move was cancelled) while its pending epoch writes finished."""
        future = self.future_logs[tp]
        # The epoch writer must not write into the directory while it is renamed (nor race the
        # write below on the same temp file); nothing appends to the future log meanwhile.
        await self._epoch_writer.settle(future)
        if self.future_logs.get(tp) is not future:
            return None  # the move was cancelled (or the dir failed) meanwhile
        log_dir = self._future_dir_of[tp]
        final = os.path.join(log_dir, str(tp))
        config = self.config_for_topic(tp.topic)
        entries = future.leader_epoch_cache.entries

        def reopen() -> Log:
            end, start, high_watermark = future.log_end_offset, future.log_start_offset, future.high_watermark
            future.leader_epoch_cache.write(entries, sync=False)
            future.close(sync=True)
            os.rename(future.dir, final)
            fsync_paths([final, log_dir])
            return Log(
                final, tp, config, recovery_point=end, log_start_offset=start, high_watermark=high_watermark,
                had_clean_shutdown=True,
            )

        self._unregister_future(tp)
        try:
            reopened = await asyncio.get_running_loop().run_in_executor(None, reopen)
        except OSError as e:
            self.failure_channel.maybe_add_offline_log_dir(
                log_dir, f"Error while renaming dir for {tp} in log dir {log_dir}", e)
            raise
        self._register_future(log_dir, reopened)
        return reopened

    def replace_current_with_future_log(self, tp: TopicPartition) -> Log:
        """Second half of Kafka's ``replaceCurrentWithFutureLog``, synchronous (no append can come
        between): the future log (already at the partition's name, ``finish_future_log``)
        becomes the current one with the current one's high watermark; the old one is closed,
        renamed ``.<uuid>-delete`` and removed in a worker thread. Returns the new current log."""
        source = self._unregister(tp)
        dest = self._unregister_future(tp)
        if source is None or dest is None:
            raise OSError(f"The {'current' if source is None else 'future'} replica for {tp} is offline")
        dest_dir = os.path.dirname(dest.dir)
        dest.high_watermark = min(max(source.high_watermark, dest.log_start_offset), dest.log_end_offset)
        self._register(dest_dir, dest)
        if self.cleaner is not None:
            self.cleaner.abort(tp)
        self._dispose(source)
        log.info("The current replica is successfully replaced with the future replica for %s", tp)
        return dest

    @staticmethod
    def _new_log(tp: TopicPartition, topic_id: str, log_dir: str, config: LogConfig) -> Log:
        """Create one partition's directory, first segment and ``partition.metadata`` (not
        fsynced). Touches nothing shared, so it may run in a worker thread."""
        path = os.path.join(log_dir, str(tp))
        new_log = Log(path, tp, config)
        write_partition_metadata(path, topic_id)
        return new_log

    def _created(self, log_dir: str, new_log: Log) -> list[str]:
        """Register a new log; returns the paths that make it durable once fsynced: its
        ``partition.metadata``, the directory naming that, and the log dir naming the directory."""
        self._register(log_dir, new_log)
        self.preferred_log_dirs.pop(new_log.topic_partition, None)
        self._creation_errors.pop(new_log.topic_partition, None)
        log.info("Created log for partition %s in %s", new_log.topic_partition, new_log.dir)
        return [os.path.join(new_log.dir, PARTITION_METADATA), new_log.dir, log_dir]

    async def create_logs(self, wanted: list[tuple[TopicPartition, str]]) -> dict[TopicPartition, Log]:
        """The logs of ``wanted`` (partition, topic id), creating those that do not exist in a
        worker thread, `CREATE_BATCH` at a time. Creations run one after another, so two never
        race on a directory. The new files are fsynced after the whole creation: fsyncs running
        beside it would make every file creation wait for journal commits (7x slower, measured)."""
        async with self._creating:
            loop = asyncio.get_running_loop()
            for tp, _topic_id in wanted:
                self._creation_errors.pop(tp, None)
            missing = [(tp, topic_id) for tp, topic_id in wanted if tp not in self.logs]
            unsynced: list[str] = []
            while missing:
                placed = []
                configs: dict[str, LogConfig] = {}
                for tp, topic_id in missing[:CREATE_BATCH]:
                    if tp.topic not in configs:
                        configs[tp.topic] = self.config_for_topic(tp.topic)
                    log_dir = self._least_loaded_dir(tp)
                    self._logs_per_dir[log_dir] += 1  # reserved, so that the batch spreads over dirs
                    placed.append((tp, topic_id, log_dir, configs[tp.topic]))
                del missing[:CREATE_BATCH]
                try:
                    made, failure = await loop.run_in_executor(None, self._new_logs, placed)
                finally:
                    for _tp, _topic_id, log_dir, _config in placed:
                        self._logs_per_dir[log_dir] -= 1
                for log_dir, new_log in made:
                    unsynced += self._created(log_dir, new_log)
                if failure is not None:
                    # Kafka: that partition gets no log (KAFKA_STORAGE_ERROR), the dir goes
                    # offline, and the rest of the batch is placed again on the dirs still online.
                    self._creation_failed(*failure)
                    missing[:0] = [(tp, topic_id) for tp, topic_id, _dir, _config in placed[len(made) + 1 :]]
            self._path_syncer.request(unsynced)
        return {tp: self.logs[tp] for tp, _topic_id in wanted if tp in self.logs}

    def _new_logs(
        self, placed: list[tuple[TopicPartition, str, str, LogConfig]]
    ) -> tuple[list[tuple[str, Log]], tuple[TopicPartition, str, OSError] | None]:
        """Create the logs in order (a worker thread); an ``OSError`` stops the batch there and
        is returned with its partition and dir, beside the logs made before it."""
        made: list[tuple[str, Log]] = []
        try:
            for tp, topic_id, log_dir, config in placed:
                try:
                    made.append((log_dir, self._new_log(tp, topic_id, log_dir, config)))
                except OSError as e:
                    return made, (tp, log_dir, e)
        except BaseException:
            for _log_dir, partial in made:
                partial.close()
            raise
        return made, None

    def _creation_failed(self, tp: TopicPartition, log_dir: str, error: OSError) -> None:
        """Kafka's ``getOrCreateLog`` on an IOException: the dir goes offline (and ``tp`` has no
        log: its LeaderAndIsr answers KAFKA_STORAGE_ERROR). An error of the process's resources
        (EMFILE: too many open files) leaves the dir online; it is kept for `creation_error`."""
        offline = self.failure_channel.maybe_add_offline_log_dir(
            log_dir, f"Error while creating log for {tp} in dir {log_dir}", error)
        if not offline:
            self._creation_errors[tp] = error

    def creation_error(self, partitions: Iterable[TopicPartition]) -> tuple[TopicPartition, OSError] | None:
        """The first of ``partitions`` whose log could not be created here, the last time it was
        asked for, while its dir stayed online (the process out of descriptors or memory), with
        the error; None when there is none."""
        if not self._creation_errors:
            return None
        return next(((tp, e) for tp in partitions if (e := self._creation_errors.get(tp)) is not None), None)

    def get_or_create_log(self, tp: TopicPartition, topic_id: str) -> Log:
        """`create_logs` for one partition, synchronously (tools and tests without a loop)."""
        existing = self.logs.get(tp)
        if existing is not None:
            return existing
        log_dir = self._least_loaded_dir(tp)
        try:
            new_log = self._new_log(tp, topic_id, log_dir, self.config_for_topic(tp.topic))
        except OSError as e:
            self._creation_failed(tp, log_dir, e)
            raise
        self._path_syncer.request(self._created(log_dir, new_log))
        return new_log

    def delete_log(self, tp: TopicPartition) -> None:
        """Remove a partition's log: its directory renamed ``.<uuid>-delete`` now, closed and
        removed in a worker thread (`_dispose`). The caller rewrites the checkpoints next
        (``write_all_checkpoints``), as Kafka does, so that a topic created again under this name
        never inherits this one's start offset."""
        if self.cleaner is not None:
            self.cleaner.abort(tp)
        removed = self._unregister(tp)
        if removed is not None:
            self._dispose(removed)

    def update_config(self, topic: str) -> None:
        config = self.config_for_topic(topic)
        for tp in self._logs_of_topic.get(topic, ()):
            self.logs[tp].config = config

    # --- dynamic broker configs (pybroker/server/dynamic_broker_config.py) ----------------------

    def update_all_configs(self) -> None:
        """A broker default of topic configs changed: every topic's logs take their config
        again (a log without an override follows the new default; Kafka's ``updateLogsConfig``)."""
        for topic in list(self._logs_of_topic):
            self.update_config(topic)

    def reconfigure_cleaner(self, config: CleanerConfig) -> None:
        """The log.cleaner.* settings changed: the cleaner restarts its threads with them (none
        exists when log.cleaner.enable was false at start, as in Kafka)."""
        if self.cleaner is None:
            return
        task = asyncio.get_running_loop().create_task(self.cleaner.reconfigure(config), name="log-cleaner-reconfigure")
        self._pending_flushes.add(task)
        task.add_done_callback(self._pending_flushes.discard)

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
        await self._flush_up_to({partition_log: target})

    async def _flush_up_to(self, targets: dict[Log, int]) -> None:
        """Flush each log up to its target offset: the files of all of them in one worker-thread
        pass (`fsync_paths`: one syncfs when there are many), then advance the recovery points."""
        targets = {partition_log: target for partition_log, target in targets.items()
                   if target > partition_log.recovery_point}
        if not targets:
            return
        by_dir: dict[str, dict[Log, int]] = {}
        for partition_log, target in targets.items():
            by_dir.setdefault(os.path.dirname(partition_log.dir), {})[partition_log] = target
        flushed: dict[Log, int] = {}
        for log_dir, dir_targets in by_dir.items():
            try:
                paths = [path for partition_log, target in dir_targets.items()
                         for path in partition_log.segment_paths_to_flush(target)]
                await asyncio.get_running_loop().run_in_executor(None, fsync_paths, paths)
            except OSError as e:
                self.failure_channel.maybe_add_offline_log_dir(log_dir, f"Error while flushing logs in dir {log_dir}", e)
                continue
            flushed.update(dir_targets)
        now = self.time.monotonic_ms()
        for partition_log, target in flushed.items():
            # Recovery re-reads leader epochs only from the recovery point on, so the checkpoint
            # must hold every epoch below it first.
            await self._epoch_writer.settle(partition_log)
            partition_log.recovery_point = max(partition_log.recovery_point, target)
            partition_log.unflushed_messages = 0
            partition_log.last_flush_ms = now

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
        """Write a log's leader-epoch-checkpoint behind its change, in the writer's next pass (so
        the newest entries always land last, and a burst of new partitions costs one pass, not a
        thread hop and two fsyncs per partition)."""
        self._epoch_writer.request([partition_log])

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

    def _render_checkpoint(self, log_dir: str, name: str) -> str:
        """The text of ``log_dir``'s checkpoint ``name`` now (on the event loop: a consistent
        snapshot), future logs included."""
        if self.failure_channel.has_offline_log_dir(log_dir):
            # A save asked for before the dir failed: its logs are gone from this broker's view,
            # and the files must keep what they held for when the dir is back.
            raise OfflineLogDirError(f"{name} is not written: {log_dir} is offline")
        attribute = CHECKPOINT_ATTRIBUTES[name]
        offsets = {tp: getattr(partition_log, attribute)
                   for logs, dirs in ((self.logs, self._dir_of), (self.future_logs, self._future_dir_of))
                   for tp, partition_log in logs.items() if dirs[tp] == log_dir}
        return render_offsets(offsets)

    async def write_all_checkpoints(self) -> None:
        """Write every offset checkpoint of every log dir now (off the event loop)."""
        for name in CHECKPOINT_ATTRIBUTES:
            await self.checkpoint(name)

    async def checkpoint(self, name: str) -> None:
        """Write the checkpoint ``name`` of every live log dir, each by its one writer; returns
        when a write begun after this call is on disk (callers at once share it)."""
        saves = {log_dir: self._checkpoint_writers[log_dir, name].request() for log_dir in self.live_log_dirs}
        for log_dir, save in saves.items():
            if save is None:
                continue
            try:
                await asyncio.shield(save)
            except OSError as e:
                self.failure_channel.maybe_add_offline_log_dir(
                    log_dir, f"Disk error while writing {name} in dir {log_dir}", e)

    def start_background_tasks(self) -> None:
        """Kafka's LogManager tasks: the checkpoint writers, the flusher and the producer expiry
        every interval, and kafka-log-retention first after log.initial.task.delay.ms, then every
        log.retention.check.interval.ms."""
        schedule = [
            ("kafka-recovery-point-checkpoint", "recovery", lambda: self.checkpoint(RECOVERY_POINT_CHECKPOINT)),
            ("kafka-log-start-offset-checkpoint", "log-start", lambda: self.checkpoint(LOG_START_OFFSET_CHECKPOINT)),
            ("highwatermark-checkpoint", "high-watermark", lambda: self.checkpoint(REPLICATION_OFFSET_CHECKPOINT)),
            ("kafka-log-flusher", "flush", self._flush_dirty_logs),
            ("kafka-log-retention", "retention", self.cleanup_logs),
            ("PeriodicProducerExpirationCheck", "producer-expiration", self.remove_expired_producers),
        ]
        self._epoch_writer.start()
        if self.cleaner is not None:
            self.cleaner.start()
        for name, key, action in schedule:
            interval = self._intervals[key]
            if 0 < interval < LONG_MAX:
                delay = self.initial_task_delay_ms if key == "retention" else interval
                self._tasks.append(self.scheduler.schedule(name, action, delay, interval))

    def remove_expired_producers(self) -> int:
        """Forget, in every log, the producers idle for producer.id.expiration.ms (their last
        batch's timestamp that old) with no open transaction; returns how many went."""
        now = self.time.milliseconds()
        return sum(partition_log.producer_state.remove_expired(now, self.producer_id_expiration_ms)
                   for partition_log in self.logs.values())

    async def _flush_dirty_logs(self) -> None:
        now = self.time.monotonic_ms()
        await self._flush_up_to({
            partition_log: partition_log.log_end_offset for partition_log in self.logs.values()
            if now - partition_log.last_flush_ms >= partition_log.config.flush_ms
        })

    async def shutdown(self) -> None:
        """Flush every log, write every checkpoint (the log start offsets retention moved
        included), close the files, remove waiting ``.deleted`` files, mark a clean shutdown."""
        if self.cleaner is not None:
            await self.cleaner.stop()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*(task.wait() for task in self._tasks))
        self._tasks.clear()
        await asyncio.gather(*self._pending_flushes, return_exceptions=True)
        async with self._creating:
            await self._path_syncer.close()
        self._epoch_writer.start()
        every_log = [*self.logs.values(), *self.future_logs.values()]
        await self._flush_up_to({partition_log: partition_log.log_end_offset for partition_log in every_log})
        await self._epoch_writer.close()
        await self.write_all_checkpoints()
        every_log = [*self.logs.values(), *self.future_logs.values()]  # a failure meanwhile dropped some
        await asyncio.get_running_loop().run_in_executor(None, close_logs, every_log)
        await self._delete_scheduled_files_now()
        for log_dir in self.live_log_dirs:
            try:
                write_atomically(os.path.join(log_dir, CLEAN_SHUTDOWN_FILE), "")
            except OSError as e:
                log.error("Could not mark %s as cleanly shut down: %s", log_dir, e)


def close_logs(logs: list[Log]) -> None:
    """Close the logs (trimming their indexes), then make what closing wrote durable together
    (`fsync_paths`: one syncfs for many, not three fsyncs per segment). In a worker thread, at
    shutdown: nothing else uses the logs any more."""
    paths: list[str] = []
    for partition_log in logs:
        partition_log.close(sync=False)
        paths.extend(partition_log.segment_paths())
    fsync_paths(paths)


def epoch_snapshots(logs: list[Log]) -> list[tuple[Log, list[tuple[int, int]]]]:
    """The entries to write for each log, taken on the event loop."""
    return [(partition_log, partition_log.leader_epoch_cache.entries) for partition_log in logs]


def write_epoch_checkpoints(snapshots: list[tuple[Log, list[tuple[int, int]]]]) -> list[tuple[Log, OSError]]:
    """Write every file of a pass (temp file and rename each), then make them all durable at once:
    the files and their directories (`fsync_paths`: one syncfs for many, per log dir). Returns
    the logs whose write or fsync failed (the log manager decides on the event loop whether
    that is a failed dir or a log deleted meanwhile)."""
    failed: list[tuple[Log, OSError]] = []
    written: dict[str, list[tuple[Log, str]]] = {}
    for partition_log, entries in snapshots:
        cache = partition_log.leader_epoch_cache
        try:
            if cache.write(entries, sync=False):
                written.setdefault(os.path.dirname(partition_log.dir), []).append((partition_log, cache.path))
        except OSError as e:
            failed.append((partition_log, e))
    for logs in written.values():
        paths = [path for _log, path in logs]
        try:
            fsync_paths(paths + list(dict.fromkeys(os.path.dirname(path) for path in paths)))
        except OSError as e:
            failed.append((logs[0][0], e))
    return failed
