"""The log cleaner over real `Log`s in a temporary directory, driven by a mock clock: which log and
range it cleans (dirty ratio, min/max compaction lag, the last stable offset, the active
segment), what a clean leaves (the last value of each key at its offset, tombstones until
delete.retention.ms), its checkpoint, and the crash safety of the swap (every intermediate state
of the files loads as all-old or all-new segments)."""

from __future__ import annotations

import asyncio
import os
import shutil

import pytest

from pybroker import _native
from pybroker.log.checkpoint import OffsetCheckpointFile
from pybroker.log.cleaner import (
    CLEANER_OFFSET_CHECKPOINT,
    CleanerConfig,
    LogCleaner,
    cleanable_offsets,
    finish_cleaned_segment,
    group_segments_by_size,
)
from pybroker.log.log import CLEANED_SUFFIX, DELETED_SUFFIX, SWAP_SUFFIX, Log
from pybroker.log.log_manager import LogManager
from pybroker.server.config import BrokerConfig
from pybroker.types import TopicPartition
from tests.mock_time import MockTime
from tests.unit.batches import build_batch

TP = TopicPartition("t", 0)
T0 = 1_700_000_000_000
RECORD_BATCH = len(build_batch([(b"k00", b"v00")]))
FOUR_PER_SEGMENT = str(4 * RECORD_BATCH)


def make_log(path, **overrides: object) -> Log:
    settings = {"cleanup.policy": "compact", "segment.bytes": FOUR_PER_SEGMENT}
    settings.update({k.replace("_", "."): str(v) for k, v in overrides.items()})
    return Log(str(path / "t-0"), TP, BrokerConfig().log_config(settings))


def put(log: Log, key: bytes, value: bytes | None, timestamp: int = T0) -> int:
    batch = build_batch([(key, value)], timestamps=[timestamp])
    info = log.append_as_leader(memoryview(bytearray(batch)), 0, timestamp)
    log.update_high_watermark(log.log_end_offset)
    return info.first_offset


def contents(log: Log) -> list[tuple[int, bytes | None, bytes | None]]:
    """Every record from the log start offset on: (offset, key, value)."""
    out = []
    for segment in log.segments:
        data = segment.read(segment.base_offset, 1 << 30, 1 << 62, True)
        out += [(r[0], r[2], r[3]) for r in _native.read_records(data)]
    return out


def cleaner_for(log: Log, time: MockTime, tmp_path) -> LogCleaner:
    logs = {TP: log}
    return LogCleaner(CleanerConfig(dedupe_buffer_size=1 << 20), [str(tmp_path)], logs,
                      lambda tp: str(tmp_path) if tp in logs else None, time=time)


def history(log: Log, keys: int = 3, versions: int = 4) -> dict[bytes, tuple[int, bytes]]:
    """``versions`` rounds of ``keys`` keys; the last offset and value of each key."""
    last = {}
    for version in range(versions):
        for k in range(keys):
            key, value = b"k%02d" % k, b"v%02d" % version
            last[key] = (put(log, key, value), value)
    return last


def test_a_clean_keeps_the_last_value_of_each_key_at_its_offset(tmp_path):
    time = MockTime(T0)
    log = make_log(tmp_path)
    last = history(log)  # 12 records: segments at 0, 4, 8; the one at 8 is active
    put(log, b"k00", b"new")  # the active segment's record, never cleaned
    cleaner = cleaner_for(log, time, tmp_path)
    assert asyncio.run(cleaner.clean_filthiest_log())
    # Everything below the active segment was dirty: only the last of each key in it stays.
    kept = contents(log)
    assert kept[-1] == (12, b"k00", b"new")
    below_active = [r for r in kept if r[0] < log.active_segment.base_offset]
    assert {key for _, key, _ in below_active} == {b"k00", b"k01", b"k02"}
    assert all(last[key] == (offset, value) for offset, key, value in below_active)
    assert log.log_end_offset == 13  # offsets are never reassigned
    # The new first dirty offset is checkpointed in the log dir, in Kafka's format.
    checkpoint = OffsetCheckpointFile(str(tmp_path / CLEANER_OFFSET_CHECKPOINT)).read()
    assert checkpoint == {TP: log.active_segment.base_offset}
    assert cleaner.last_cleans[TP].stats["messages_written"] == 3
    # Nothing left to clean: the dirty ratio is 0.
    assert not asyncio.run(cleaner.clean_filthiest_log())
    assert cleaner.dirty_ratio(TP) == 0.0


def test_the_metrics_report_the_dirty_ratio_and_the_last_clean(tmp_path):
    time = MockTime(T0)
    log = make_log(tmp_path)
    history(log)
    cleaner = cleaner_for(log, time, tmp_path)
    assert cleaner.metrics()["max-dirty-percent"] == 0  # no run yet
    assert cleaner.dirty_ratio(TP) == 1.0  # nothing below the active segment was cleaned yet
    assert asyncio.run(cleaner.clean_filthiest_log())
    time.advance(5_000)
    metrics = cleaner.metrics()
    assert metrics["max-dirty-percent"] == 100  # the ratio of the log chosen
    assert metrics["time-since-last-run-ms"] == 5_000
    assert metrics["uncleanable-partitions-count"] == 0
    # The last clean: 8 records of two segments read, the last of each of 3 keys written.
    last = cleaner.last_cleans[TP]
    assert (last.first_dirty_offset, last.end_offset) == (0, 8)
    assert last.stats["messages_read"] == 8 and last.stats["messages_written"] == 3
    assert last.stats["bytes_read"] == 8 * RECORD_BATCH
    assert last.stats["bytes_written"] == 3 * RECORD_BATCH
    assert metrics["cleaner-recopy-percent"] == pytest.approx(100 * 3 / 8)
    assert metrics["max-clean-time-secs"] == last.elapsed_ms / 1000
    assert cleaner.dirty_ratio(TP) == 0.0


def test_only_compacted_logs_above_the_dirty_ratio_are_cleaned(tmp_path):
    time = MockTime(T0)
    log = make_log(tmp_path, cleanup_policy="delete")
    history(log)
    cleaner = cleaner_for(log, time, tmp_path)
    assert cleaner.grab_filthiest_compacted_log() is None
    log.config = make_log(tmp_path / "other", min_cleanable_dirty_ratio=1).config
    assert cleaner.grab_filthiest_compacted_log() is None  # ratio 1.0 is never exceeded
    log.config = make_log(tmp_path / "third", min_cleanable_dirty_ratio=0.5).config
    chosen = cleaner.grab_filthiest_compacted_log()
    assert chosen is not None and chosen.cleanable_ratio == 1.0 and TP in cleaner.in_progress


def test_tombstones_stay_for_delete_retention_ms_after_the_clean_that_kept_them(tmp_path):
    time = MockTime(T0)
    log = make_log(tmp_path, delete_retention_ms=60_000, min_cleanable_dirty_ratio=0)
    put(log, b"a", b"1")
    put(log, b"b", b"1")
    put(log, b"a", None)  # a tombstone
    put(log, b"c", b"1")
    put(log, b"d", b"1")  # rolls: the first four records are cleanable
    cleaner = cleaner_for(log, time, tmp_path)
    assert asyncio.run(cleaner.clean_filthiest_log())
    assert [(o, k, v) for o, k, v in contents(log) if o < 4] == [(1, b"b", b"1"), (2, b"a", None), (3, b"c", b"1")]
    # Until delete.retention.ms has passed since then, later cleans keep it.
    for _ in range(4):
        put(log, b"e", b"1")  # more dirty data, so the log is cleaned again
    time.advance(59_999)
    assert asyncio.run(cleaner.clean_filthiest_log())
    assert (2, b"a", None) in contents(log)
    for _ in range(4):
        put(log, b"e", b"2")
    time.advance(1)
    assert asyncio.run(cleaner.clean_filthiest_log())
    assert all(key != b"a" for _, key, _ in contents(log))


def test_min_compaction_lag_and_the_last_stable_offset_bound_the_range(tmp_path):
    time = MockTime(T0 + 10_000)
    log = make_log(tmp_path, min_compaction_lag_ms=5_000)
    for i in range(8):
        put(log, b"k", b"%d" % i, timestamp=T0 + i * 1000)  # segments at 0 and 4, active at 8
    put(log, b"k", b"8", timestamp=T0 + 9000)
    # Segment 4 holds a record younger than 5 s (T0 + 7000 > now - 5000): cleanable up to 4.
    assert cleanable_offsets(log, None, time.milliseconds())[:2] == (0, 4)
    time.advance(10_000)
    assert cleanable_offsets(log, None, time.milliseconds())[:2] == (0, 8)
    # The high watermark (the last stable offset) bounds it too.
    log.update_high_watermark(5)
    assert cleanable_offsets(log, None, time.milliseconds())[:2] == (0, 5)
    # A checkpoint beyond the log end offset restarts at the log start offset.
    assert cleanable_offsets(log, 99, time.milliseconds()) == (0, 5, True)


def test_max_compaction_lag_forces_a_clean_below_the_dirty_ratio(tmp_path):
    time = MockTime(T0)
    log = make_log(tmp_path, min_cleanable_dirty_ratio=1, max_compaction_lag_ms=60_000)
    history(log)
    cleaner = cleaner_for(log, time, tmp_path)
    assert cleaner.grab_filthiest_compacted_log() is None
    time.advance(60_001)
    chosen = cleaner.grab_filthiest_compacted_log()
    assert chosen is not None and chosen.need_compaction_now
    # On a compacted topic, max.compaction.lag.ms also bounds segment.ms (the log must roll).
    assert log.config.max_segment_ms == 60_000


def test_an_open_transaction_is_never_cleaned(tmp_path):
    time = MockTime(T0)
    log = make_log(tmp_path)
    history(log, versions=2)  # offsets 0..5
    txn = build_batch([(b"k00", b"txn")], producer_id=9, producer_epoch=0, base_sequence=0, attributes=0x10)
    log.append_as_leader(memoryview(bytearray(txn)), 0, T0)  # offset 6, left open
    for i in range(6):
        put(log, b"k01", b"%d" % i)
    assert log.last_stable_offset == 6
    cleaner = cleaner_for(log, time, tmp_path)
    assert asyncio.run(cleaner.clean_filthiest_log())
    assert cleaner.last_cleans[TP].end_offset <= 6
    assert (6, b"k00", b"txn") in contents(log)
    assert any(offset >= 6 and key == b"k01" for offset, key, _ in contents(log))


def test_a_truncation_during_a_clean_aborts_it(tmp_path):
    time = MockTime(T0)
    log = make_log(tmp_path)
    history(log)
    before = contents(log)
    cleaner = cleaner_for(log, time, tmp_path)
    log.on_truncated = cleaner.on_truncated
    chosen = cleaner.grab_filthiest_compacted_log()
    assert chosen is not None
    log.truncate_to(6)
    asyncio.run(_clean_expecting_abort(cleaner, chosen))
    assert contents(log) == before[:6]
    assert not any(name.endswith(CLEANED_SUFFIX) for name in os.listdir(log.dir))


async def _clean_expecting_abort(cleaner: LogCleaner, chosen) -> None:
    from pybroker.log.cleaner import CleaningAbortedError

    with pytest.raises(CleaningAbortedError):
        await cleaner.clean(chosen)


def test_groups_fit_one_segment(tmp_path):
    log = make_log(tmp_path)
    history(log, keys=4, versions=4)  # segments at 0, 4, 8; the one at 12 is active
    segments = log.segments[:-1]
    assert [len(g) for g in group_segments_by_size(segments, 4 * RECORD_BATCH, 1 << 20, 12)] == [1, 1, 1]
    assert [len(g) for g in group_segments_by_size(segments, 8 * RECORD_BATCH, 1 << 20, 12)] == [2, 1]
    assert [len(g) for g in group_segments_by_size(segments, 1 << 30, 1 << 20, 12)] == [3]
    # An offset range past an int32 of relative offsets starts a new group.
    assert [len(g) for g in group_segments_by_size(segments, 1 << 30, 1 << 20, 2**31 + 5)] == [2, 1]


# --- crash safety of the swap ---------------------------------------------------------------


def crash_images(tmp_path) -> tuple[list, list, dict[str, str]]:
    """Clean a log's first two segments into one by hand, copying the partition directory at every
    step of the swap (what a kill -9 there would leave). Returns the old records, the new ones and
    the images by step name."""
    log = make_log(tmp_path)
    history(log, keys=2, versions=6)  # segments 0, 4, 8 (active)
    old = contents(log)
    images: dict[str, str] = {}

    def image(name: str) -> None:
        target = str(tmp_path / f"image-{name}" / "t-0")
        shutil.copytree(log.dir, target)
        images[name] = target

    group = log.segments[:2]
    cleaning = _native.LogCleaning(1 << 20, 0.9, 8)
    for segment, following in zip(group, [group[1].base_offset, 8], strict=True):
        cleaning.map_segment(segment, 0, following)
    cleaned = _native.Segment(log.dir, 0, 4096, 1 << 20, CLEANED_SUFFIX)
    image("cleaned-empty")
    for segment in group:
        cleaning.clean_segment(segment, cleaned, T0, 86_400_000, {})
    finish_cleaned_segment(cleaned, group[-1].last_modified_ms)
    image("cleaned-written")
    cleaned.change_file_suffixes(CLEANED_SUFFIX, SWAP_SUFFIX)
    image("swap")
    group[0].rename_suffix(DELETED_SUFFIX)
    image("first-old-deleted")
    group[1].rename_suffix(DELETED_SUFFIX)
    image("all-old-deleted")
    os.rename(os.path.join(log.dir, f"{0:020d}.log{SWAP_SUFFIX}"), os.path.join(log.dir, f"{0:020d}.log"))
    image("log-renamed")
    for ext in (".index", ".timeindex"):
        os.rename(os.path.join(log.dir, f"{0:020d}{ext}{SWAP_SUFFIX}"), os.path.join(log.dir, f"{0:020d}{ext}"))
    image("done")
    cleaned.close(False)
    new = contents_of(images["done"])
    return old, new, images


def contents_of(directory: str) -> list:
    log = Log(directory, TP, make_log_config(), had_clean_shutdown=False)
    try:
        return contents(log)
    finally:
        log.close(sync=False)


def make_log_config():
    return BrokerConfig().log_config({"cleanup.policy": "compact", "segment.bytes": FOUR_PER_SEGMENT})


@pytest.mark.parametrize("step, expected", [
    ("cleaned-empty", "old"), ("cleaned-written", "old"), ("swap", "new"), ("first-old-deleted", "new"),
    ("all-old-deleted", "new"), ("log-renamed", "new"), ("done", "new"),
])
def test_a_crash_at_any_step_of_the_swap_loads_all_old_or_all_new_segments(tmp_path, step, expected):
    old, new, images = crash_images(tmp_path)
    assert len(new) < len(old)
    # The new set is the old one minus superseded records, nothing else.
    latest = {}
    for offset, key, value in old:
        if offset < 8:
            latest[key] = (offset, key, value)
    assert [r for r in new if r[0] < 8] == sorted(latest.values())
    assert [r for r in new if r[0] >= 8] == [r for r in old if r[0] >= 8]
    loaded = contents_of(images[step])
    assert loaded == (old if expected == "old" else new)
    names = os.listdir(images[step])
    assert not any(name.endswith((CLEANED_SUFFIX, SWAP_SUFFIX, DELETED_SUFFIX)) for name in names), names


def test_log_cleaner_enable_false_creates_no_cleaner(tmp_path):
    """Kafka creates its LogCleaner only with log.cleaner.enable: without it a compacted log is
    only ever appended to."""
    config = BrokerConfig({"log.cleaner.enable": "false", "log.cleaner.threads": "2"})
    cleaner_config = CleanerConfig.from_broker_config(config.get)
    assert not cleaner_config.enable and cleaner_config.threads == 2
    manager = LogManager([str(tmp_path)], lambda topic: config.log_config({"cleanup.policy": "compact"}),
                         node_id=1, cluster_id="c", cleaner_config=cleaner_config)
    assert manager.cleaner is None
    enabled = LogManager([str(tmp_path / "on")], lambda topic: config.log_config(), node_id=1, cluster_id="c",
                         cleaner_config=CleanerConfig.from_broker_config(BrokerConfig().get))
    assert enabled.cleaner is not None and enabled.cleaner.config.backoff_ms == 15000
