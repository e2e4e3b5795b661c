"""Several log dirs (JBOD): placement, loading, future logs copied and swapped in, failed dirs,
DescribeLogDirs' view and AlterReplicaLogDirs' errors (replica manager level)."""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import time
import uuid

import pytest

from pybroker import _native
from pybroker.common.cluster import PartitionState
from pybroker.common.errors import ErrorCode
from pybroker.controller.requests import LeaderAndIsr
from pybroker.log import file_sync as file_sync_module
from pybroker.log.checkpoint import RECOVERY_POINT_CHECKPOINT
from pybroker.log.log_dir_failure import LogDirFailureChannel
from pybroker.log.log_manager import LogDirError, LogManager, read_meta_properties
from pybroker.server.alter_log_dirs import ReplicaAlterLogDirsManager, Throttle
from pybroker.server.config import BrokerConfig
from pybroker.server.metadata_cache import MetadataCache
from pybroker.server.partition import Partition
from pybroker.server.replica_manager import FetchPartitionRequest, ReplicaManager
from pybroker.types import TopicPartition
from tests.mock_time import MockTime
from tests.unit.batches import build_batch

TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAA"
CONFIG = BrokerConfig({})


def manager_for(*dirs: str) -> LogManager:
    manager = LogManager(list(dirs), lambda topic: CONFIG.log_config(), node_id=1, cluster_id="c")
    manager.load()
    return manager


def batch(value: bytes = b"x", count: int = 1) -> memoryview:
    return memoryview(bytearray(build_batch([(None, value)] * count)))


def test_an_older_pybroker_meta_properties_is_rewritten_as_version_0_and_another_brokers_refused(tmp_path):
    older, other = tmp_path / "older", tmp_path / "other"
    older.mkdir()
    other.mkdir()
    (older / "meta.properties").write_text("version=1\nnode.id=1\ncluster.id=kept\n")
    (other / "meta.properties").write_text("#\nbroker.id=2\nversion=0\ncluster.id=c\n")
    manager_for(str(older))
    assert read_meta_properties(str(older)) == {"broker.id": "1", "version": "0", "cluster.id": "kept"}
    with pytest.raises(LogDirError, match="belongs to broker.id 2, but this broker is node.id 1"):
        manager_for(str(other))


def test_new_logs_go_to_the_least_loaded_dir_and_every_dir_has_meta_properties(tmp_path):
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    manager = manager_for(a, b)
    for dir_ in (a, b):
        # ZooKeeper-mode Kafka's meta.properties: version 0 with broker.id (Kafka 3.9 refuses version 1).
        assert read_meta_properties(dir_) == {"broker.id": "1", "version": "0", "cluster.id": "c"}
        assert open(os.path.join(dir_, "meta.properties")).read().startswith("#\n#")
    for index in range(4):
        manager.get_or_create_log(TopicPartition("t", index), TOPIC_ID)
    assert sorted(os.listdir(a)).count("t-0") == 1 and "t-1" in os.listdir(b)
    assert [manager.dir_of(TopicPartition("t", i)) for i in range(4)] == [a, b, a, b]

    async def future_then_new() -> None:
        # A future log counts as a log of its dir (Kafka's nextLogDirs counts every log).
        await manager.create_future_log(TopicPartition("t", 0), TOPIC_ID, b)
        manager.get_or_create_log(TopicPartition("u", 0), TOPIC_ID)
        assert manager.dir_of(TopicPartition("u", 0)) == a
        # AlterReplicaLogDirs' preferred dir for a partition not created yet wins.
        manager.maybe_update_preferred_log_dir(TopicPartition("v", 0), b)
        manager.get_or_create_log(TopicPartition("v", 0), TOPIC_ID)
        assert manager.dir_of(TopicPartition("v", 0)) == b
        assert TopicPartition("v", 0) not in manager.preferred_log_dirs
        await manager.shutdown()

    asyncio.run(future_then_new())


def test_logs_of_every_dir_and_future_logs_are_loaded(tmp_path):
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    tp0, tp1 = TopicPartition("t", 0), TopicPartition("t", 1)

    async def write() -> None:
        manager = manager_for(a, b)
        manager.get_or_create_log(tp0, TOPIC_ID).append_as_leader(batch(count=3), 0, 0)
        manager.get_or_create_log(tp1, TOPIC_ID).append_as_leader(batch(count=2), 0, 0)
        future = await manager.create_future_log(tp0, TOPIC_ID, b)
        future.append_as_follower(memoryview(manager.get_log(tp0).read(0, 1 << 20, 3, True)))
        await manager.shutdown()

    asyncio.run(write())
    manager = manager_for(a, b)
    assert manager.dir_of(tp0) == a and manager.dir_of(tp1) == b
    assert manager.get_log(tp0).log_end_offset == 3 and manager.get_log(tp1).log_end_offset == 2
    assert manager.future_dir_of(tp0) == b and manager.get_future_log(tp0).log_end_offset == 3
    assert manager.get_future_log(tp0).dir.endswith("-future")


def test_a_partition_in_two_dirs_is_refused_with_kafkas_message(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    manager = manager_for(str(a), str(b))
    manager.get_or_create_log(TopicPartition("t", 0), TOPIC_ID)
    asyncio.run(manager.shutdown())
    os.makedirs(b / "t-0")
    with pytest.raises(LogDirError, match="Duplicate log directories for t-0 are found in both"):
        manager_for(str(a), str(b))


def test_a_dir_that_fails_at_start_up_is_left_out_and_all_failing_stops_the_start(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    b.write_text("not a directory")  # listing it fails (NotADirectoryError), as a dead disk would
    manager = manager_for(str(a), str(b))
    assert manager.live_log_dirs == [str(a)] and manager.failure_channel.offline_log_dirs == {str(b)}
    assert manager.dir_of(manager.get_or_create_log(TopicPartition("t", 0), TOPIC_ID).topic_partition) == str(a)
    asyncio.run(manager.shutdown())
    a.rename(tmp_path / "gone")
    a.write_text("not a directory either")
    with pytest.raises(LogDirError, match="none of the specified log dirs"):
        manager_for(str(a), str(b))


def test_the_failure_channel_hands_each_dir_over_once():
    channel = LogDirFailureChannel()
    failed: list[str] = []
    channel.on_failure = failed.append
    channel.maybe_add_offline_log_dir("/data/a", "Error while writing", OSError(5, "EIO"))
    channel.maybe_add_offline_log_dir("/data/a", "Error while writing again", OSError(5, "EIO"))
    assert failed == ["/data/a"] and channel.has_offline_log_dir("/data/a")


def all_bytes(log_) -> bytes:
    """Every batch of a log, segment after segment."""
    out, offset = b"", log_.log_start_offset
    while offset < log_.log_end_offset:
        region = log_.read_region(offset, 1 << 24, log_.log_end_offset, True)
        out, offset = out + region.read(), region.next_offset
    return out


def leader_replica_manager(manager: LogManager, *tps: TopicPartition, time: MockTime | None = None) -> ReplicaManager:
    replicas = ReplicaManager(1, manager, MetadataCache(1), time=time)
    for tp in tps:
        partition = Partition(tp, TOPIC_ID, 1, manager.get_or_create_log(tp, TOPIC_ID))
        partition.make_leader(PartitionState(tp, 0, 1, 0, [1], 0, [1]), now_ms=0)
        replicas.host_partition(partition)
    return replicas


def test_a_failed_dir_takes_only_its_partitions_offline(tmp_path):
    """The dir of t-0 is replaced by a file (what an unmounted or dead disk looks like to the
    next checkpoint write); the checkpoint fails, the dir goes offline, t-0 answers
    KAFKA_STORAGE_ERROR; t-1 in the other dir keeps working and its checkpoint is written."""
    a, b = tmp_path / "a", tmp_path / "b"

    async def run() -> None:
        manager = manager_for(str(a), str(b))
        tp0, tp1 = TopicPartition("t", 0), TopicPartition("t", 1)
        replicas = leader_replica_manager(manager, tp0, tp1)
        assert replicas.append_records(1, 1000, [(tp0, batch()), (tp1, batch())])[tp0].error == ErrorCode.NONE
        a.rename(tmp_path / "a-unplugged")
        a.write_text("")
        await manager.checkpoint("replication-offset-checkpoint")
        await asyncio.sleep(0)  # the handler runs on the loop, after the failing operation
        assert manager.failure_channel.offline_log_dirs == {str(a)} and manager.live_log_dirs == [str(b)]
        results = replicas.append_records(1, 1000, [(tp0, batch()), (tp1, batch())])
        assert results[tp0].error == ErrorCode.KAFKA_STORAGE_ERROR and results[tp1].error == ErrorCode.NONE
        fetched = replicas.read_from_local_log(-1, [FetchPartitionRequest(tp0, 0, 1000)], 1000)[0]
        assert fetched[tp0].error == ErrorCode.KAFKA_STORAGE_ERROR
        # A LeaderAndIsr for the offline replica answers KAFKA_STORAGE_ERROR (the controller
        # then takes it out of the ISR and moves the leadership).
        outcome = await replicas.become_leader_or_follower(LeaderAndIsr(
            0, 1, 0, [PartitionState(tp0, 1, 1, 1, [1], 1, [1])], {}, []))
        assert outcome.partition_errors == {tp0: ErrorCode.KAFKA_STORAGE_ERROR}
        described = {d.log_dir: d for d in replicas.describe_log_dirs(None)}
        assert described[str(a)].error == ErrorCode.KAFKA_STORAGE_ERROR and described[str(a)].replicas == []
        assert [r.topic_partition for r in described[str(b)].replicas] == [tp1]
        await manager.checkpoint("replication-offset-checkpoint")
        assert (b / "replication-offset-checkpoint").read_text() == "0\n1\nt 1 2\n"
        await manager.shutdown()

    asyncio.run(run())


def test_every_dir_failing_halts_the_broker(tmp_path):
    manager = manager_for(str(tmp_path / "a"))
    halted: list[int] = []
    manager.halt = halted.append
    manager.handle_log_dir_failure(str(tmp_path / "a"))
    assert halted == [1]


def test_describe_log_dirs_sizes_lags_and_volume(tmp_path):
    a, b = str(tmp_path / "a"), str(tmp_path / "b")

    async def run() -> None:
        manager = manager_for(a, b)
        tp = TopicPartition("t", 0)
        replicas = leader_replica_manager(manager, tp)
        replicas.append_records(1, 1000, [(tp, batch(count=5))])
        future = await manager.create_future_log(tp, TOPIC_ID, b)
        future.append_as_follower(memoryview(manager.get_log(tp).read(0, 1 << 20, 5, True)))
        replicas.append_records(1, 1000, [(tp, batch(count=2))])
        described = {d.log_dir: d for d in replicas.describe_log_dirs({tp})}
        (current,), (copy,) = described[a].replicas, described[b].replicas
        assert (current.size, current.offset_lag, current.is_future) == (manager.get_log(tp).size_in_bytes, 0, False)
        assert (copy.offset_lag, copy.is_future) == (2, True)  # current LEO 7 - future LEO 5
        assert described[a].total_bytes > 0 and 0 <= described[a].usable_bytes <= described[a].total_bytes
        assert replicas.describe_log_dirs({TopicPartition("other", 0)})[0].replicas == []
        await manager.shutdown()

    asyncio.run(run())


def test_alter_replica_log_dirs_errors(tmp_path):
    a, b = str(tmp_path / "a"), str(tmp_path / "b")

    async def run() -> None:
        manager = manager_for(a, b)
        tp = TopicPartition("t", 0)
        replicas = leader_replica_manager(manager, tp)
        absent = TopicPartition("later", 0)
        results = await replicas.alter_replica_log_dirs({
            tp: a, absent: b, TopicPartition("t", 1): str(tmp_path / "elsewhere"),
        })
        # A partition not in the metadata yet: UNKNOWN_TOPIC_OR_PARTITION, its dir remembered all the same.
        assert results == {tp: ErrorCode.NONE, absent: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                           TopicPartition("t", 1): ErrorCode.LOG_DIR_NOT_FOUND}
        assert manager.get_future_log(tp) is None  # already in a: nothing to move
        assert manager.preferred_log_dirs[absent] == b
        manager.failure_channel.offline_log_dirs.add(b)
        assert await replicas.alter_replica_log_dirs({tp: b}) == {tp: ErrorCode.KAFKA_STORAGE_ERROR}
        await replicas.shutdown()
        await manager.shutdown()

    asyncio.run(run())


def test_a_moved_replica_catches_up_under_appends_and_is_swapped_in(tmp_path):
    """A replica moves from a to b while appends continue: the future log copies whole
    batches, takes the appends made meanwhile and replaces the current log; every record is
    there, in order, in b; a holds nothing of it any more."""
    a, b = tmp_path / "a", tmp_path / "b"

    async def run() -> None:
        config = BrokerConfig({"log.segment.bytes": "4096"})
        manager = LogManager([str(a), str(b)], lambda topic: config.log_config(), node_id=1, cluster_id="c")
        manager.load()
        tp = TopicPartition("t", 0)
        replicas = leader_replica_manager(manager, tp)
        for i in range(50):
            replicas.append_records(1, 1000, [(tp, batch(b"v%03d" % i * 20, 3))])
        old_log = replicas.partitions[tp].log
        assert await replicas.alter_replica_log_dirs({tp: str(b)}) == {tp: ErrorCode.NONE}
        i = 50
        while replicas.partitions[tp].log is old_log:
            replicas.append_records(1, 1000, [(tp, batch(b"v%03d" % i * 20, 3))])
            i += 1
            await asyncio.sleep(0.001)
            assert i < 5000, "the move never finished"
        new_log = replicas.partitions[tp].log
        assert new_log.dir == str(b / "t-0") and manager.dir_of(tp) == str(b)
        replicas.append_records(1, 1000, [(tp, batch(b"last", 1))])
        assert new_log.log_end_offset == i * 3 + 1
        data = all_bytes(new_log)
        assert data.count(b"v000") == 3 * 20 and data.count(b"v%03d" % (i - 1)) == 3 * 20 and b"last" in data
        assert new_log.leader_epoch_cache.entries == old_log.leader_epoch_cache.entries
        await asyncio.gather(*manager._pending_flushes)
        assert not any(name.startswith("t-0") for name in os.listdir(a))
        assert manager.get_future_log(tp) is None
        await replicas.shutdown()
        await manager.shutdown()
        reloaded = LogManager([str(a), str(b)], lambda topic: config.log_config(), node_id=1, cluster_id="c")
        reloaded.load()
        assert reloaded.dir_of(tp) == str(b) and reloaded.get_log(tp).log_end_offset == i * 3 + 1

    asyncio.run(run())


def test_after_the_swap_only_one_dir_holds_the_partitions_name(tmp_path):
    """The replaced log's directory is renamed ``.<uuid>-delete`` within the swap's step (a
    crash right after must not find the partition in two dirs), then removed in the background."""
    a, b = tmp_path / "a", tmp_path / "b"
    tp = TopicPartition("t", 0)

    async def run() -> None:
        manager = manager_for(str(a), str(b))
        current = manager.get_or_create_log(tp, TOPIC_ID)
        current.append_as_leader(batch(count=3), 0, 0)
        future = await manager.create_future_log(tp, TOPIC_ID, str(b))
        future.append_as_follower(memoryview(current.read(0, 1 << 20, 3, True)))
        await manager.finish_future_log(tp)
        manager.replace_current_with_future_log(tp)
        left = [name for name in os.listdir(a) if name.startswith("t-0")]
        assert "t-0" not in left and all(name.endswith("-delete") for name in left)
        assert "t-0" in os.listdir(b)
        await asyncio.gather(*manager._pending_flushes)
        assert not any(name.startswith("t-0") for name in os.listdir(a))
        await manager.shutdown()

    asyncio.run(run())


def test_the_copy_follows_a_truncation_of_the_current_log(tmp_path):
    """A current log truncated (its leader changed) under a copy: the future log is cut the
    same way before it takes more, so the swapped-in log is the truncated one."""
    a, b = str(tmp_path / "a"), str(tmp_path / "b")

    async def run() -> None:
        manager = manager_for(a, b)
        tp = TopicPartition("t", 0)
        current = manager.get_or_create_log(tp, TOPIC_ID)
        for i in range(10):
            current.append_as_leader(batch(b"%d" % i), 0, 0)
        future = await manager.create_future_log(tp, TOPIC_ID, b)
        swapped: list[object] = []
        mover = ReplicaAlterLogDirsManager(manager, manager.get_log, lambda tp, log_: swapped.append(log_))
        future.append_as_follower(memoryview(current.read(0, 1 << 20, 10, True)))
        current.truncate_to(6)
        current.append_as_leader(batch(b"new"), 1, 0)
        mover.add_partition(tp)
        while not swapped:
            await asyncio.sleep(0.001)
        new_log = manager.get_log(tp)
        assert new_log is swapped[0] and new_log.log_end_offset == 7
        assert new_log.read(6, 1 << 20, 7, True).count(b"new") == 1
        await mover.shutdown()
        await manager.shutdown()

    asyncio.run(run())


def test_the_copy_throttle_is_a_token_bucket_on_the_clock():
    time = MockTime()
    throttle = Throttle(1000.0, time)
    assert throttle.delay_ms(500) == pytest.approx(500.0)  # starts empty: 500 bytes at 1000 B/s
    time.advance(1500)  # the debt paid, a full second (the bucket's size) earned
    assert throttle.delay_ms(900) == 0
    assert throttle.delay_ms(1000) == pytest.approx(900.0)
    assert Throttle(float("inf"), time).delay_ms(10**12) == 0


# --- every I/O path takes its dir offline (Kafka's maybeHandleIOException) ----------------------


def eio(*_args: object, **_kwargs: object) -> None:
    raise OSError(5, "Input/output error")


@pytest.mark.parametrize("path", ["append", "read", "delete_records"])
def test_an_io_error_in_an_append_or_read_takes_the_dir_offline(tmp_path, path):
    a, b = str(tmp_path / "a"), str(tmp_path / "b")

    async def run() -> None:
        manager = manager_for(a, b)
        tp0, tp1 = TopicPartition("t", 0), TopicPartition("t", 1)
        replicas = leader_replica_manager(manager, tp0, tp1)
        assert manager.dir_of(tp0) == a and manager.dir_of(tp1) == b
        replicas.append_records(1, 1000, [(tp0, batch())])
        if path == "append":
            manager.get_log(tp0).append_as_leader = eio
            assert replicas.append_records(1, 1000, [(tp0, batch())])[tp0].error == ErrorCode.KAFKA_STORAGE_ERROR
        elif path == "read":
            manager.get_log(tp0).read_region = eio
            fetched = replicas.read_from_local_log(-1, [FetchPartitionRequest(tp0, 0, 1000)], 1000)[0]
            assert fetched[tp0].error == ErrorCode.KAFKA_STORAGE_ERROR
        else:
            replicas.partitions[tp0].delete_records_on_leader = eio
            assert replicas.delete_records(1000, {tp0: 1}, True)[tp0].error == ErrorCode.KAFKA_STORAGE_ERROR
        await asyncio.sleep(0)  # the failure handler runs on the loop
        assert manager.failure_channel.offline_log_dirs == {a}
        assert tp0 in replicas.offline_partitions and tp0 not in replicas.partitions
        assert replicas.append_records(1, 1000, [(tp1, batch())])[tp1].error == ErrorCode.NONE
        await manager.shutdown()

    asyncio.run(run())


def test_a_failed_leader_epoch_checkpoint_write_takes_the_dir_offline_unless_the_log_is_gone(tmp_path):
    a, b = str(tmp_path / "a"), str(tmp_path / "b")

    async def run() -> None:
        manager = manager_for(a, b)
        tp0, tp1 = TopicPartition("t", 0), TopicPartition("t", 1)
        log0, log1 = manager.get_or_create_log(tp0, TOPIC_ID), manager.get_or_create_log(tp1, TOPIC_ID)
        # A log deleted meanwhile: its directory is gone, which is no disk failure.
        manager.delete_log(tp1)
        log1.leader_epoch_cache.write = lambda *args, **kwargs: eio()
        manager._schedule_leader_epoch_flush(log1)
        await manager._epoch_writer.close()
        await asyncio.sleep(0)
        assert manager.failure_channel.offline_log_dirs == set()
        log0.leader_epoch_cache.write = lambda *args, **kwargs: eio()
        manager._schedule_leader_epoch_flush(log0)
        await manager._epoch_writer.close()
        await asyncio.sleep(0)
        assert manager.failure_channel.offline_log_dirs == {a}
        await manager.shutdown()

    asyncio.run(run())


def test_a_failed_partition_metadata_fsync_takes_the_dir_offline(tmp_path, monkeypatch):
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    import pybroker.log.log_manager as log_manager_module

    def fsync_failing_in_a(paths: list[str]) -> None:
        if any(path.startswith(a) for path in paths):
            eio()

    async def run() -> None:
        manager = manager_for(a, b)
        monkeypatch.setattr(log_manager_module, "fsync_paths", fsync_failing_in_a)
        await manager.create_logs([(TopicPartition("t", 0), TOPIC_ID), (TopicPartition("t", 1), TOPIC_ID)])
        await manager._path_syncer.close()
        await asyncio.sleep(0)
        assert manager.failure_channel.offline_log_dirs == {a}
        monkeypatch.undo()
        await manager.shutdown()

    asyncio.run(run())


def test_a_failed_log_creation_in_leader_and_isr_takes_the_dir_offline(tmp_path):
    """The new log of t-0 cannot be created in dir a: a goes offline, t-0 answers
    KAFKA_STORAGE_ERROR, and the partitions after it in the batch are created in b."""
    a, b = str(tmp_path / "a"), str(tmp_path / "b")

    async def run() -> None:
        manager = manager_for(a, b)
        replicas = ReplicaManager(1, manager, MetadataCache(1))
        real = LogManager._new_log

        def new_log(tp, topic_id, log_dir, config):  # noqa: ANN001, ANN202
            if log_dir == a:
                eio()
            return real(tp, topic_id, log_dir, config)

        manager._new_log = new_log
        tps = [TopicPartition("t", i) for i in range(3)]
        outcome = await replicas.become_leader_or_follower(LeaderAndIsr(
            0, 1, 0, [PartitionState(tp, 0, 1, 0, [1], 0, [1], is_new=True) for tp in tps],
            {"t": uuid.UUID(int=1)}, []))
        await asyncio.sleep(0)
        assert outcome.partition_errors == {tps[0]: ErrorCode.KAFKA_STORAGE_ERROR}
        assert manager.failure_channel.offline_log_dirs == {a}
        assert [manager.dir_of(tp) for tp in tps] == [None, b, b]
        await manager.shutdown()

    asyncio.run(run())


def test_cleaner_io_errors_take_the_dir_offline(tmp_path):
    from pybroker.log.cleaner import CleanerConfig, LogCleaner

    a = tmp_path / "a"
    a.write_text("")  # the dir is unusable: its checkpoint cannot be written
    channel = LogDirFailureChannel()
    cleaner = LogCleaner(CleanerConfig(), [str(a)], {}, lambda tp: None, failure_channel=channel)
    asyncio.run(cleaner.write_checkpoint(str(a)))
    assert channel.offline_log_dirs == {str(a)}


# --- one writer per checkpoint file; races and exhaustion are not disk failures ----------------


def test_checkpoints_asked_for_at_once_share_one_writer_and_never_race(tmp_path, monkeypatch):
    """Eight topic deletions at once each rewrite every offset checkpoint (Kafka's rule). Two
    writes of one file at once would share its ``.tmp`` and the second rename would fail with
    ENOENT, which took the only dir offline. Each file now has one writer: concurrent requests
    fold into its next write, and no write of a file overlaps another."""
    from pybroker.log import checkpoint as checkpoint_module

    a = str(tmp_path / "a")
    writing: set[str] = set()
    overlaps: list[str] = []
    writes: list[str] = []
    real_write = checkpoint_module.write_atomically

    def watched_write(path: str, text: str, *, sync: bool = True) -> None:
        if path in writing:
            overlaps.append(path)
        writing.add(path)
        try:
            time.sleep(0.005)  # a slow disk: the next request comes while this write is under way
            real_write(path, text, sync=sync)
            writes.append(path)
        finally:
            writing.discard(path)

    monkeypatch.setattr(file_sync_module, "write_atomically", watched_write)

    async def run() -> None:
        manager = manager_for(a)
        tps = [TopicPartition(f"t{i}", 0) for i in range(8)]
        for tp in tps:
            manager.get_or_create_log(tp, TOPIC_ID)

        async def delete(tp: TopicPartition) -> None:
            manager.delete_log(tp)
            await manager.write_all_checkpoints()

        await asyncio.gather(*(delete(tp) for tp in tps), *(manager.checkpoint(RECOVERY_POINT_CHECKPOINT)
                                                               for _ in range(8)))
        assert manager.failure_channel.offline_log_dirs == set()
        await manager.shutdown()

    asyncio.run(run())
    assert overlaps == []
    assert len(writes) < 8 * 3 + 8 + 3  # folded: fewer writes than requests
    for name in ("recovery-point-offset-checkpoint", "log-start-offset-checkpoint", "replication-offset-checkpoint"):
        assert (tmp_path / "a" / name).read_text() == "0\n0\n"
    assert not any(p.name.endswith(".tmp") for p in (tmp_path / "a").iterdir())


def test_a_log_deleted_while_it_is_cleaned_aborts_the_clean_not_the_dir(tmp_path, caplog):
    """The cleaner writes its ``.cleaned`` segment into the log's directory; a topic deletion
    renames that directory meanwhile. The clean fails (ENOENT) and is dropped as aborted: the
    dir stays online and the checkpoint forgets the log."""
    from pybroker.log.cleaner import CleanerConfig, LogCleaner, log_to_clean

    a = str(tmp_path / "a")

    async def run() -> None:
        manager = manager_for(a)
        tp = TopicPartition("compacted", 0)
        log_ = manager.get_or_create_log(tp, TOPIC_ID)
        for i in range(4):
            log_.append_as_leader(batch(b"v%d" % i), 0, 0)
            log_.roll()
        log_.update_high_watermark(log_.log_end_offset)
        cleaner = LogCleaner(CleanerConfig(), [a], manager.logs, manager.dir_of, failure_channel=manager.failure_channel)
        chosen = log_to_clean(tp, log_, 0, log_.log_end_offset)
        assert chosen.cleanable_bytes > 0
        cleaner.in_progress.add(tp)
        cleaner.grab_filthiest_compacted_log = lambda: chosen
        run_in_worker = cleaner._run

        async def deleted_before_the_cleaned_segment(function, *args):
            if function is _native.Segment:  # the .cleaned segment: the topic is deleted first
                manager.delete_log(tp)
            return await run_in_worker(function, *args)

        cleaner._run = deleted_before_the_cleaned_segment
        with caplog.at_level(logging.INFO, logger="pybroker.log.cleaner"):
            await cleaner.clean_filthiest_log()
        assert "Cleaning of compacted-0 was aborted" in caplog.text
        assert manager.failure_channel.offline_log_dirs == set()
        assert tp not in cleaner.uncleanable and tp not in cleaner.in_progress
        await manager.shutdown()

    asyncio.run(run())


@pytest.mark.parametrize("code", [errno.EMFILE, errno.ENFILE, errno.ENOMEM])
def test_running_out_of_descriptors_fails_the_operation_and_leaves_the_dir_online(tmp_path, code):
    a = str(tmp_path / "a")

    def exhausted(*_args: object, **_kwargs: object) -> None:
        raise OSError(code, os.strerror(code))

    async def run() -> None:
        manager = manager_for(a)
        tp = TopicPartition("t", 0)
        replicas = leader_replica_manager(manager, tp)
        manager.get_log(tp).append_as_leader = exhausted
        assert replicas.append_records(1, 1000, [(tp, batch())])[tp].error == ErrorCode.KAFKA_STORAGE_ERROR
        await asyncio.sleep(0)
        assert manager.failure_channel.offline_log_dirs == set() and tp in replicas.partitions
        del manager.get_log(tp).append_as_leader  # descriptors free again: the next append works
        assert replicas.append_records(1, 1000, [(tp, batch())])[tp].error == ErrorCode.NONE
        await manager.shutdown()

    asyncio.run(run())


def test_a_log_not_created_for_want_of_descriptors_is_remembered_and_the_dir_stays_online(tmp_path, monkeypatch):
    """create_logs meeting EMFILE: that partition gets no log, the dir stays online, and the
    error is kept for CreateTopics (`creation_error`) until the log is created."""
    a = str(tmp_path / "a")
    manager = manager_for(a)
    real_new_log = LogManager._new_log
    exhausted = {TopicPartition("t", 1)}

    def new_log(tp: TopicPartition, *args: object) -> object:
        if tp in exhausted:
            raise OSError(errno.EMFILE, "Too many open files", os.path.join(a, str(tp)))
        return real_new_log(tp, *args)

    monkeypatch.setattr(LogManager, "_new_log", staticmethod(new_log))
    wanted = [(TopicPartition("t", p), "AAAAAAAAAAAAAAAAAAAAAA") for p in range(3)]

    async def run() -> None:
        logs = await manager.create_logs(wanted)
        assert set(logs) == {TopicPartition("t", 0), TopicPartition("t", 2)}
        assert manager.failure_channel.offline_log_dirs == set()
        failed = manager.creation_error([TopicPartition("t", p) for p in range(3)])
        assert failed is not None and failed[0] == TopicPartition("t", 1) and failed[1].errno == errno.EMFILE
        assert manager.creation_error([TopicPartition("t", 0)]) is None
        exhausted.clear()
        logs = await manager.create_logs(wanted)
        assert set(logs) == {tp for tp, _ in wanted}
        assert manager.creation_error([tp for tp, _ in wanted]) is None
        await manager.shutdown()

    asyncio.run(run())


def test_a_checkpoint_save_asked_for_before_its_dir_failed_leaves_the_files_alone(tmp_path):
    """A save queued behind another when the dir fails would render the dir without its logs
    (they were dropped) and empty its checkpoints: the render refuses instead, and the files keep
    what they held for when the dir is repaired."""
    a, b = str(tmp_path / "a"), str(tmp_path / "b")

    async def run() -> None:
        manager = manager_for(a, b)
        tp = TopicPartition("t", 0)
        log_ = manager.get_or_create_log(tp, TOPIC_ID)
        log_.append_as_leader(batch(), 0, 0)
        log_.update_high_watermark(1)
        await manager.checkpoint("replication-offset-checkpoint")
        assert (tmp_path / "a" / "replication-offset-checkpoint").read_text() == "0\n1\nt 0 1\n"
        save = manager._checkpoint_writers[a, "replication-offset-checkpoint"].request()
        manager.failure_channel.maybe_add_offline_log_dir(a, "Error while writing", OSError(5, "EIO"))
        manager.handle_log_dir_failure(a)
        with pytest.raises(OSError, match="is offline"):
            await asyncio.shield(save)
        await manager.shutdown()

    asyncio.run(run())
    assert (tmp_path / "a" / "replication-offset-checkpoint").read_text() == "0\n1\nt 0 1\n"
