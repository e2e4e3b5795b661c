"""The cleaner on a follower's log: a truncation (the follower's log diverged from a new leader's)
that lands while a clean is finishing. As Kafka's ``LogCleanerManager.doneCleaning`` does for a
clean whose state became ``LogCleaningAborted``, the aborted clean must not checkpoint its end:
the records that will fill the truncated range are not clean."""

from __future__ import annotations

import asyncio

from pybroker.log.cleaner import group_segments_by_size
from pybroker.log.file_sync import fsync_paths
from tests.mock_time import MockTime
from tests.unit.test_log_cleaner import T0, TP, cleaner_for, contents, history, make_log, put


def test_a_truncation_after_the_last_swap_leaves_the_checkpoint_at_the_truncation(tmp_path):
    time = MockTime(T0)
    log = make_log(tmp_path, min_cleanable_dirty_ratio=0.01)
    history(log)  # 12 records: segments at 0, 4, 8; the one at 8 is active
    cleaner = cleaner_for(log, time, tmp_path)
    log.on_truncated = cleaner.on_truncated
    assert log.active_segment.base_offset == 8  # the clean's range is [0, 8)
    groups = len(group_segments_by_size(log.segments_between(0, 8), log.config.segment_bytes,
                                        log.config.segment_index_bytes, 8))
    real_run = cleaner._run
    fsyncs: list[int] = []
    truncated: list[int] = []

    async def run_then_truncate(function, *args):  # noqa: ANN001, ANN202 - LogCleaner._run's signature
        result = await real_run(function, *args)
        if function is fsync_paths:
            fsyncs.append(1)
            if len(fsyncs) == groups:
                # The directory fsync after the last swap: the replica fetcher truncates meanwhile.
                log.truncate_to(6)
                truncated.append(log.log_end_offset)
        return result

    cleaner._run = run_then_truncate  # type: ignore[method-assign]

    assert asyncio.run(cleaner.clean_filthiest_log())  # aborted, which it logs
    assert truncated and log.log_end_offset <= 6
    checkpoint = cleaner.checkpoint(TP)
    assert checkpoint is None or checkpoint <= log.active_segment.base_offset
    assert TP not in cleaner.last_cleans

    # The new leader's records refill the range: the next clean maps them (they are dirty).
    for key, value in [(b"k00", b"new-a"), (b"k00", b"new-b"), (b"k01", b"new"), (b"k02", b"new")]:
        put(log, key, value)
    put(log, b"k09", b"x" * 200)  # roll past them
    cleaner._run = real_run  # type: ignore[method-assign]
    assert asyncio.run(cleaner.clean_filthiest_log())
    kept = [(o, k, v) for o, k, v in contents(log) if o < log.active_segment.base_offset]
    assert [k for _, k, _ in kept].count(b"k00") == 1
    assert {k: v for _, k, v in kept}[b"k00"] == b"new-b"
