"""Kafka's timestamp rule at produce time (``LogValidator.validateTimestamp``): with
``message.timestamp.before.max.ms`` / ``after.max.ms`` (or the deprecated
``message.timestamp.difference.max.ms``, for whichever of the two is not set) on a CreateTime
topic, a client's batch holding a record whose timestamp is further from the broker's clock is
refused whole (INVALID_TIMESTAMP, one record error per such record, Kafka's texts); nothing is
appended. LogAppendTime topics and records without a timestamp are not checked. No networking."""

from __future__ import annotations

import pytest

from pybroker.common.config import LONG_MAX
from pybroker.log.log import AppendOrigin, Log, RecordValidationError
from tests.unit.batches import build_batch
from tests.unit.replica_logs import T0, make_log


def append(log: Log, batch: bytes, now_ms: int = T0, origin: AppendOrigin = AppendOrigin.CLIENT) -> int:
    return log.append_as_leader(memoryview(bytearray(batch)), 0, now_ms, origin).first_offset


def out_of_range(timestamp: int, offset: int, low: int, high: int) -> str:
    return (f"Timestamp {timestamp} of message with offset {offset} is out of range. The timestamp should be "
            f"within [{low}, {high}]")


@pytest.mark.parametrize("codec", [0, 1, 4])
def test_records_too_old_or_too_new_refuse_the_batch(tmp_path, codec: int):
    log = make_log(tmp_path, message_timestamp_before_max_ms=1000, message_timestamp_after_max_ms=500)
    batch = build_batch([(b"a", b"1"), (b"b", b"2"), (b"c", b"3")], timestamps=[T0 - 1001, T0 - 1000, T0 + 501],
                        codec=codec)
    with pytest.raises(RecordValidationError) as refused:
        append(log, batch)
    assert refused.value.invalid_timestamp
    assert str(refused.value) == "One or more records have been rejected due to invalid timestamp"
    assert refused.value.record_errors == [
        (0, out_of_range(T0 - 1001, 0, T0 - 1000, T0 + 500)),
        (2, out_of_range(T0 + 501, 2, T0 - 1000, T0 + 500)),
    ]
    assert log.log_end_offset == 0
    assert append(log, build_batch([(b"a", b"1")], timestamps=[T0 + 500], codec=codec)) == 0


def test_an_unset_limit_is_printed_as_java_adds_it(tmp_path):
    """``now + Long.MAX_VALUE`` overflows in Kafka's message, and so it does here."""
    log = make_log(tmp_path, message_timestamp_before_max_ms=10)
    with pytest.raises(RecordValidationError) as refused:
        append(log, build_batch([(b"a", b"1")], timestamps=[T0 - 11]))
    high = T0 + LONG_MAX - 2**64
    assert refused.value.record_errors == [(0, out_of_range(T0 - 11, 0, T0 - 10, high))]


def test_the_deprecated_difference_stands_for_an_unset_limit(tmp_path):
    log = make_log(tmp_path, message_timestamp_difference_max_ms=100, message_timestamp_after_max_ms=5)
    assert log.config.timestamp_limits == (100, 5)
    with pytest.raises(RecordValidationError):
        append(log, build_batch([(b"a", b"1")], timestamps=[T0 - 101]))
    with pytest.raises(RecordValidationError):
        append(log, build_batch([(b"a", b"1")], timestamps=[T0 + 6]))
    assert append(log, build_batch([(b"a", b"1")], timestamps=[T0 - 100])) == 0


def test_a_keyless_record_of_a_compacted_topic_keeps_its_own_error(tmp_path):
    log = make_log(tmp_path, cleanup_policy="compact", message_timestamp_before_max_ms=0)
    with pytest.raises(RecordValidationError) as refused:
        append(log, build_batch([(None, b"1"), (b"b", b"2")], timestamps=[T0 - 5, T0 - 5]))
    assert refused.value.invalid_timestamp
    assert refused.value.record_errors == [
        (0, "Compacted topic cannot accept message without key in topic partition t-0"),
        (1, out_of_range(T0 - 5, 1, T0, T0 + LONG_MAX - 2**64)),
    ]


def test_not_checked_without_limits_with_log_append_time_or_for_coordinators(tmp_path):
    old = build_batch([(b"a", b"1")], timestamps=[0])
    assert make_log(tmp_path, name="t-1").config.timestamp_limits is None
    assert append(make_log(tmp_path, name="t-1"), old) == 0
    log_append = make_log(tmp_path, name="t-2", message_timestamp_type="LogAppendTime",
                          message_timestamp_before_max_ms=1)
    assert append(log_append, old) == 0
    limited = make_log(tmp_path, name="t-3", message_timestamp_before_max_ms=1)
    assert append(limited, old, origin=AppendOrigin.COORDINATOR) == 0
    assert append(limited, build_batch([(b"a", b"1")], timestamps=[-1])) == 1  # no timestamp
