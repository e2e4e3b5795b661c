"""ListOffsets v0 on a Log: Kafka's ``legacyFetchOffsetsBefore`` over segments' modification times."""

from __future__ import annotations

from pybroker.log.log import Log
from tests.unit.test_retention import T0, fifteen


def stamped(tmp_path) -> Log:
    """Segments 0, 5 and 10 (HW = LEO = 15), last modified at T0, T0 + 10 and T0 + 20."""
    log = fifteen(tmp_path)
    for segment, modified in zip(log.segments, (T0, T0 + 10, T0 + 20), strict=True):
        segment.set_last_modified_ms(modified)
    return log


def test_latest_and_earliest(tmp_path):
    log = stamped(tmp_path)
    now = T0 + 1_000
    assert log.legacy_offsets_before(-1, 1, now) == [15]
    assert log.legacy_offsets_before(-1, 10, now) == [15, 10, 5, 0]
    assert log.legacy_offsets_before(-2, 10, now) == [0]


def test_a_timestamp_picks_the_segments_modified_at_or_before_it(tmp_path):
    log = stamped(tmp_path)
    now = T0 + 1_000
    assert log.legacy_offsets_before(T0 + 10, 10, now) == [5, 0]
    assert log.legacy_offsets_before(T0 + 10, 1, now) == [5]
    assert log.legacy_offsets_before(T0 + 500, 10, now) == [10, 5, 0]
    assert log.legacy_offsets_before(now, 10, now) == [15, 10, 5, 0]
    assert log.legacy_offsets_before(T0 - 1, 10, now) == []


def test_offsets_start_at_the_log_start_offset_and_an_empty_active_segment_is_left_out(tmp_path):
    log = stamped(tmp_path)
    log.maybe_increment_log_start_offset(7, "ClientRecordDeletion")
    assert log.legacy_offsets_before(-2, 10, T0) == [7]
    log.roll()
    assert log.legacy_offsets_before(-1, 10, T0 + 1_000) == [15, 10, 7, 7]
