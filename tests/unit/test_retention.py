"""Retention on a Log: Kafka's deleteOldSegments rules (log start offset breach, retention.bytes,
retention.ms, KIP-47's log.retention.min.timestamp), the .deleted files and the retention task."""

from __future__ import annotations

import asyncio
import os

import pytest

from pybroker.log.checkpoint import LOG_START_OFFSET_CHECKPOINT
from pybroker.log.log import Log
from pybroker.log.log_manager import LogManager
from pybroker.server.config import BrokerConfig
from pybroker.types import TopicPartition
from tests.mock_time import MockScheduler, MockTime
from tests.unit.batches import build_batch

TP = TopicPartition("t", 0)
T0 = 1_700_000_000_000
BATCH_SIZE = len(build_batch([(b"k", b"x")]))  # keyed: compacted topics refuse keyless records
FIVE_PER_SEGMENT = str(5 * BATCH_SIZE)  # a segment rolls before its sixth single-record batch


def make_log(path, **overrides: object) -> Log:
    config = BrokerConfig().log_config({k.replace("_", "."): str(v) for k, v in overrides.items()})
    return Log(str(path / "t-0"), TP, config)


def append(log: Log, timestamp: int, now_ms: int | None = None) -> None:
    batch = build_batch([(b"k", b"x")], timestamps=[timestamp])
    log.append_as_leader(memoryview(bytearray(batch)), 0, T0 if now_ms is None else now_ms)
    log.update_high_watermark(log.log_end_offset)


def fifteen(tmp_path, timestamps=None, **overrides: object) -> Log:
    """Kafka's test log: 15 single-record appends, 5 per segment (bases 0, 5, 10), HW = LEO = 15."""
    log = make_log(tmp_path, segment_bytes=FIVE_PER_SEGMENT, **overrides)
    for i in range(15):
        append(log, timestamps[i] if timestamps else T0 + i)
    assert bases(log) == [0, 5, 10] and log.high_watermark == log.log_end_offset == 15
    return log


def bases(log: Log) -> list[int]:
    return [segment.base_offset for segment in log.segments]


def files(log: Log) -> set[str]:
    return set(os.listdir(log.dir)) - {"leader-epoch-checkpoint"}


def seg_files(base: int, suffix: str = "") -> set[str]:
    return {f"{base:020d}{ext}{suffix}" for ext in (".log", ".index", ".timeindex")}


def snapshots(*offsets: int) -> set[str]:
    """Producer snapshot files: one per roll (at the new segment's base) and one at the log end
    offset when the log closes; those below the first segment go with it."""
    return {f"{offset:020d}.snapshot" for offset in offsets}


def test_log_start_offset_breach_deletes_whole_segments_below_it(tmp_path):
    # UnifiedLogTest.testLogDeletionAfterDeleteRecords
    log = fifteen(tmp_path)
    for lso, left in [(1, [0, 5, 10]), (6, [5, 10]), (15, [10])]:
        log.maybe_increment_log_start_offset(lso, "ClientRecordDeletion")
        log.delete_old_segments(T0)
        assert bases(log) == left
        assert log.log_start_offset == lso  # deletion never moves it back to a segment base
    # The active segment stays although everything in it is below the log start offset.
    assert log.log_end_offset == 15 and log.segments[0].size > 0
    # Deleted segments were renamed, not removed (nobody scheduled their removal here).
    assert files(log) == seg_files(10) | seg_files(0, ".deleted") | seg_files(5, ".deleted") | snapshots(10)
    assert log.read(15, 1000, 15, True) == b""


def test_start_offset_breach_applies_without_delete_policy(tmp_path):
    # shouldDeleteStartOffsetBreachedSegmentsWhenPolicyDoesNotIncludeDelete, and
    # shouldNotDeleteSegmentsWhenPolicyDoesNotIncludeDelete: retention.ms/bytes are ignored.
    log = fifteen(tmp_path, cleanup_policy="compact", retention_ms=0, retention_bytes=0,
                  log_retention_min_timestamp=T0 + 1000)
    assert log.delete_old_segments(T0 + 10**9) == 0 and bases(log) == [0, 5, 10]
    log.maybe_increment_log_start_offset(5, "ClientRecordDeletion")
    assert log.delete_old_segments(T0 + 10**9) == 1
    assert bases(log) == [5, 10] and log.log_start_offset == 5


def test_compact_and_delete_policy_applies_retention(tmp_path):
    log = fifteen(tmp_path, cleanup_policy="compact,delete", retention_ms=0)
    assert log.delete_old_segments(T0 + 1000) == 3
    assert bases(log) == [15] and log.log_start_offset == 15


def test_retention_bytes(tmp_path):
    # shouldDeleteSizeBasedSegments: retention of 10 records' worth leaves 2 segments.
    log = fifteen(tmp_path, retention_bytes=10 * BATCH_SIZE, retention_ms=-1)
    assert log.delete_old_segments(T0) == 1
    assert bases(log) == [5, 10] and log.log_start_offset == 5
    assert log.delete_old_segments(T0) == 0  # size == retention.bytes: nothing more


def test_retention_bytes_never_deletes_more_than_the_excess(tmp_path):
    # One byte over needs a whole segment to go; 4 records over still is less than a segment.
    log = fifteen(tmp_path, retention_bytes=11 * BATCH_SIZE, retention_ms=-1)
    assert log.delete_old_segments(T0) == 0 and bases(log) == [0, 5, 10]
    # A segment and one byte over: one segment goes; the byte left over cannot take another.
    log.config = BrokerConfig().log_config({"retention.bytes": str(10 * BATCH_SIZE - 1), "retention.ms": "-1"})
    assert log.delete_old_segments(T0) == 1
    assert bases(log) == [5, 10] and log.log_start_offset == 5
    log.config = BrokerConfig().log_config({"retention.bytes": "0", "retention.ms": "-1"})
    assert log.delete_old_segments(T0) == 2  # the (full) active segment too, after a roll
    assert bases(log) == [15] and log.size_in_bytes == 0 and log.log_start_offset == 15


def test_retention_bytes_minus_one_is_unlimited(tmp_path):
    log = fifteen(tmp_path, retention_bytes=-1, retention_ms=-1)
    assert log.delete_old_segments(T0 + 10**12) == 0 and bases(log) == [0, 5, 10]


def test_retention_ms_uses_the_largest_record_timestamp(tmp_path):
    log = fifteen(tmp_path, retention_ms=1000)
    # Segment maxima: T0+4, T0+9, T0+14. Expired iff now - max > retention.ms.
    assert log.delete_old_segments(T0 + 4 + 1000) == 0
    assert log.delete_old_segments(T0 + 4 + 1001) == 1 and bases(log) == [5, 10]
    assert log.delete_old_segments(T0 + 10 + 1001) == 1 and bases(log) == [10]
    assert log.log_start_offset == 10 and log.log_end_offset == 15


def test_retention_ms_out_of_order_create_time_pins_a_prefix(tmp_path):
    # A late timestamp in the first segment keeps it, and everything after it, although the
    # second segment has expired: only an oldest-first prefix is ever deleted.
    stamps = [T0] * 15
    stamps[2] = T0 + 50_000
    log = fifteen(tmp_path, timestamps=stamps, retention_ms=10_000)
    assert log.delete_old_segments(T0 + 20_000) == 0 and bases(log) == [0, 5, 10]
    assert log.delete_old_segments(T0 + 60_001) == 3 and bases(log) == [15]


def test_retention_ms_with_log_append_time(tmp_path):
    log = make_log(tmp_path, segment_bytes=FIVE_PER_SEGMENT, retention_ms=1000,
                   message_timestamp_type="LogAppendTime")
    for i in range(15):
        # Ancient CreateTime; the broker's append time is what counts.
        append(log, timestamp=1000 + i, now_ms=T0 + i * 100)
    assert [s.max_timestamp for s in log.segments] == [T0 + 400, T0 + 900, T0 + 1400]
    assert log.delete_old_segments(T0 + 1400) == 0
    assert log.delete_old_segments(T0 + 1401) == 1 and bases(log) == [5, 10]


def test_expired_active_segment_is_rolled_then_deleted(tmp_path):
    # shouldDeleteTimeBasedSegmentsReadyToBeDeleted: 3 full segments, all expired -> 1 segment.
    log = fifteen(tmp_path, retention_ms=1000)
    assert log.delete_old_segments(T0 + 10**6) == 3
    assert bases(log) == [15] and log.segments[0].size == 0
    assert log.log_start_offset == log.log_end_offset == log.high_watermark == 15
    # The final empty segment is never deleted, and appends continue at the log end offset.
    assert log.delete_old_segments(T0 + 10**7) == 0 and bases(log) == [15]
    append(log, T0 + 10**7)
    assert log.log_end_offset == 16 and bases(log) == [15]


def test_never_deletes_at_or_above_the_high_watermark(tmp_path):
    # testCannotDeleteSegmentsAtOrAboveHighWatermark
    log = fifteen(tmp_path, retention_ms=0)
    for hw, left in [(4, [0, 5, 10]), (5, [5, 10]), (9, [5, 10]), (12, [10]), (14, [10]), (15, [15])]:
        log.high_watermark = hw
        log.delete_old_segments(T0 + 10**6)
        assert bases(log) == left, hw
        assert log.segments[0].base_offset <= log.high_watermark
        assert all(b > log.high_watermark for b in bases(log)[1:])
        assert log.log_start_offset == left[0]


def test_min_timestamp_is_strictly_below(tmp_path):
    log = fifteen(tmp_path, retention_ms=-1, log_retention_min_timestamp=T0 + 4)
    assert log.delete_old_segments(T0 + 10**9) == 0  # segment 0's largest timestamp == the minimum
    log.config = BrokerConfig().log_config({"retention.ms": "-1", "log.retention.min.timestamp": str(T0 + 5)})
    assert log.delete_old_segments(T0 + 10**9) == 1 and bases(log) == [5, 10]
    assert log.log_start_offset == 5
    log.config = BrokerConfig().log_config({"retention.ms": "-1", "log.retention.min.timestamp": str(T0 + 100)})
    assert log.delete_old_segments(T0) == 2 and bases(log) == [15]  # active segment rolled, too


@pytest.mark.parametrize("minimum", [0, -1])
def test_min_timestamp_zero_or_negative_is_off(tmp_path, minimum):
    log = fifteen(tmp_path, retention_ms=-1, log_retention_min_timestamp=minimum)
    assert log.delete_old_segments(T0) == 0 and bases(log) == [0, 5, 10]


def test_min_timestamp_is_or_ed_with_retention_ms(tmp_path):
    # retention.ms expires segment 0 only; the minimum covers segments 0 and 1: both go.
    log = fifteen(tmp_path, retention_ms=1000, log_retention_min_timestamp=T0 + 10)
    assert log.delete_old_segments(T0 + 5 + 1000) == 2 and bases(log) == [10]
    # And the other way round: the minimum covers nothing, retention.ms covers everything.
    log = fifteen(tmp_path / "other", retention_ms=1000, log_retention_min_timestamp=T0)
    assert log.delete_old_segments(T0 + 10**6) == 3 and bases(log) == [15]


def test_retention_rules_combine_in_one_call(tmp_path):
    # The start offset breach removes segment 0, size segment 5, time nothing: one call.
    log = fifteen(tmp_path, retention_bytes=5 * BATCH_SIZE, retention_ms=-1)
    log.maybe_increment_log_start_offset(5, "ClientRecordDeletion")
    assert log.delete_old_segments(T0) == 2 and bases(log) == [10]


def test_segment_without_timestamps_falls_back_to_file_mtime(tmp_path):
    log = make_log(tmp_path, segment_bytes=FIVE_PER_SEGMENT, retention_ms=-1,
                   log_retention_min_timestamp=T0)
    for _ in range(10):
        append(log, timestamp=-1)
    assert [s.max_timestamp for s in log.segments] == [-1, -1]
    first = os.path.join(log.dir, f"{0:020d}.log")
    os.utime(first, ns=((T0 - 5000) * 10**6, (T0 - 5000) * 10**6))
    assert log.segments[0].last_modified_ms == T0 - 5000
    assert log.delete_old_segments(T0) == 1 and bases(log) == [5] and log.log_start_offset == 5
    # retention.ms falls back to the mtime too (the active segment, rolled first).
    mtime = log.segments[0].last_modified_ms
    log.config = BrokerConfig().log_config({"retention.ms": "60000"})
    assert log.delete_old_segments(mtime + 60000) == 0
    assert log.delete_old_segments(mtime + 60001) == 1 and bases(log) == [10] and log.log_start_offset == 10


def test_leftover_deleted_files_are_removed_at_load(tmp_path):
    log = fifteen(tmp_path, retention_ms=-1)
    log.maybe_increment_log_start_offset(10, "ClientRecordDeletion")
    log.delete_old_segments(T0)
    assert seg_files(0, ".deleted") <= files(log)
    log.close()
    reopened = Log(log.dir, TP, log.config, log_start_offset=10, high_watermark=15)
    assert files(reopened) == seg_files(10) | snapshots(15)
    assert bases(reopened) == [10] and reopened.log_start_offset == 10
    reopened.close()


def manager_for(tmp_path, props: dict[str, str], **kwargs: object) -> tuple[LogManager, BrokerConfig]:
    config = BrokerConfig(props)
    manager = LogManager([str(tmp_path)], lambda topic: config.log_config(), node_id=1, cluster_id="c", **kwargs)
    manager.load()
    return manager, config


def test_manager_removes_deleted_files_after_the_delay_and_checkpoints_the_start_offset(tmp_path):
    async def run():
        manager, _ = manager_for(tmp_path, {"log.segment.bytes": FIVE_PER_SEGMENT, "log.retention.ms": "1000",
                                            "log.segment.delete.delay.ms": "300"})
        changed: list[TopicPartition] = []
        manager.on_log_start_offset_changed = changed.append
        log = manager.get_or_create_log(TP, "AAAAAAAAAAAAAAAAAAAAAA")
        for i in range(12):
            append(log, T0 + i)
        await asyncio.gather(*manager._pending_flushes)
        assert bases(log) == [0, 5, 10]

        assert await manager.cleanup_logs() == 3  # wall clock is far past T0 + 1000: all expired
        assert bases(log) == [12] and log.log_start_offset == 12 and changed == [TP]
        deleted = seg_files(0, ".deleted") | seg_files(5, ".deleted") | seg_files(10, ".deleted")
        assert deleted <= files(log)  # still there: file.delete.delay.ms has not passed
        await manager.checkpoint(LOG_START_OFFSET_CHECKPOINT)
        assert (tmp_path / "log-start-offset-checkpoint").read_text() == "0\n1\nt 0 12\n"

        loop = asyncio.get_running_loop()
        deadline = loop.time() + 10
        while files(log) & deleted and loop.time() < deadline:
            await asyncio.sleep(0.02)
        assert not files(log) & deleted
        assert await manager.cleanup_logs() == 0 and changed == [TP]
        await manager.shutdown()

    asyncio.run(run())
    assert (tmp_path / "log-start-offset-checkpoint").read_text() == "0\n1\nt 0 12\n"


def test_manager_shutdown_removes_waiting_deleted_files(tmp_path):
    async def run():
        manager, _ = manager_for(tmp_path, {"log.segment.bytes": FIVE_PER_SEGMENT, "log.retention.ms": "-1"})
        log = manager.get_or_create_log(TP, "AAAAAAAAAAAAAAAAAAAAAA")
        for i in range(10):
            append(log, T0 + i)
        log.maybe_increment_log_start_offset(7, "ClientRecordDeletion")
        assert await manager.cleanup_logs() == 1  # default delay of 60 s
        assert seg_files(0, ".deleted") <= files(log)
        await manager.shutdown()
        return log

    log = asyncio.run(run())
    assert files(log) == seg_files(5) | {"partition.metadata"} | snapshots(5, 10)
    # LSO 7 is inside the first remaining segment: the checkpoint keeps it.
    assert (tmp_path / "log-start-offset-checkpoint").read_text() == "0\n1\nt 0 7\n"


def test_retention_task_first_runs_after_the_initial_delay(tmp_path):
    async def run():
        time = MockTime()
        scheduler = MockScheduler(time)
        manager, _ = manager_for(
            tmp_path, {"log.segment.bytes": FIVE_PER_SEGMENT, "log.retention.ms": "-1",
                       "log.segment.delete.delay.ms": "0"},
            retention_check_interval_ms=3_600_000, initial_task_delay_ms=30_000, time=time, scheduler=scheduler,
        )
        log = manager.get_or_create_log(TP, "AAAAAAAAAAAAAAAAAAAAAA")
        for i in range(12):
            append(log, T0 + i)
        log.maybe_increment_log_start_offset(6, "ClientRecordDeletion")
        manager.start_background_tasks()
        [retention] = scheduler.tasks("kafka-log-retention")
        # The first run comes after log.initial.task.delay.ms, not after the hour's interval.
        await scheduler.advance(29_999)
        assert retention.runs == 0 and bases(log) == [0, 5, 10]
        await scheduler.advance(1)
        assert retention.runs == 1 and bases(log) == [5, 10]  # file.delete.delay.ms 0: files gone too
        assert not files(log) & seg_files(0, ".deleted")
        await manager.shutdown()

    asyncio.run(run())


def test_retention_task_repeats_every_interval_with_current_configs(tmp_path):
    async def run():
        time = MockTime()
        scheduler = MockScheduler(time)
        manager, config = manager_for(
            tmp_path, {"log.segment.bytes": FIVE_PER_SEGMENT, "log.retention.ms": "-1"},
            retention_check_interval_ms=300_000, initial_task_delay_ms=30_000, time=time, scheduler=scheduler,
        )
        log = manager.get_or_create_log(TP, "AAAAAAAAAAAAAAAAAAAAAA")
        for i in range(12):
            append(log, T0 + i)
        manager.start_background_tasks()
        [retention] = scheduler.tasks("kafka-log-retention")
        await scheduler.advance(30_000)
        assert retention.runs == 1 and bases(log) == [0, 5, 10]  # nothing to delete yet
        # A retention.bytes change (as AlterConfigs makes it) is applied by the next run, one
        # log.retention.check.interval.ms later, and not before.
        log.config = config.log_config({"retention.bytes": str(7 * BATCH_SIZE)})
        await scheduler.advance(299_999)
        assert retention.runs == 1 and bases(log) == [0, 5, 10]
        await scheduler.advance(1)
        assert retention.runs == 2 and bases(log) == [5, 10] and log.log_start_offset == 5
        # The deleted segment's files stay for file.delete.delay.ms (60 s), then go.
        assert seg_files(0, ".deleted") <= files(log)
        await scheduler.advance(59_999)
        assert seg_files(0, ".deleted") <= files(log)
        await scheduler.advance(1)
        assert not seg_files(0, ".deleted") & files(log)
        # ... and the runs go on: a third one comes an interval after the second.
        await scheduler.advance(300_000 - 60_000)
        assert retention.runs == 3
        await manager.shutdown()
        assert not scheduler.tasks("kafka-log-retention")

    asyncio.run(run())
