"""Kafka's compacted-topic rule at produce time (``LogValidator.validateKey``): a client's batch
holding a record without a key is refused whole (INVALID_RECORD, with one record error per
keyless record) when the topic's ``cleanup.policy`` includes ``compact``; nothing is appended.
The native walk (``_native.null_key_indexes``) and the log's use of it. No networking."""

from __future__ import annotations

import pytest

from pybroker import _native
from pybroker.common.errors import CorruptRecordError
from pybroker.log.log import AppendOrigin, InvalidRecordError, Log, RecordValidationError
from tests.unit.batches import build_batch
from tests.unit.replica_logs import T0, make_log

KEYLESS = "Compacted topic cannot accept message without key in topic partition t-0"


def append(log: Log, batch: bytes, origin: AppendOrigin = AppendOrigin.CLIENT) -> int:
    return log.append_as_leader(memoryview(bytearray(batch)), 0, T0, origin).first_offset


# --- the native walk ---------------------------------------------------------------------------

@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
def test_null_key_indexes_of_every_codec(codec: int):
    records = [(b"a", b"1"), (None, b"2"), (b"", b"3"), (None, None), (b"e", None)]
    batch = build_batch(records, codec=codec)
    _native.validate_batches(batch, 1 << 20)
    assert _native.null_key_indexes(batch) == [1, 3]
    assert _native.null_key_indexes(memoryview(bytearray(batch))) == [1, 3]
    assert _native.null_key_indexes(build_batch([(b"k", None), (b"", b"v")], codec=codec)) == []


def test_null_key_indexes_skip_control_batches_and_refuse_damage():
    marker = _native.build_control_batch(7, 0, 3, True, T0)
    assert _native.null_key_indexes(marker) == []
    assert _native.null_key_indexes(b"") == []
    batch = build_batch([(None, b"v")], codec=1)
    with pytest.raises(CorruptRecordError):
        _native.null_key_indexes(batch[:-1])
    garbled = batch[:61] + bytes(b ^ 0x5A for b in batch[61:])
    with pytest.raises(CorruptRecordError):
        _native.null_key_indexes(garbled)


# --- the log's rule ----------------------------------------------------------------------------

@pytest.mark.parametrize("policy", ["compact", "compact,delete", "delete,compact"])
def test_a_keyless_record_refuses_the_whole_batch_of_a_compacted_topic(tmp_path, policy: str):
    log = make_log(tmp_path, cleanup_policy=policy)
    append(log, build_batch([(b"k", b"v")]))
    size = log.size_in_bytes
    with pytest.raises(RecordValidationError) as refused:
        append(log, build_batch([(b"a", b"1"), (None, b"2"), (b"c", b"3")]))
    assert refused.value.record_errors == [(1, KEYLESS)]
    assert str(refused.value) == (
        "One or more records have been rejected due to 1 record errors in total, and only showing the first "
        f"three errors at most: [RecordError(batchIndex=1, message='{KEYLESS}')]"
    )
    assert isinstance(refused.value, InvalidRecordError)
    # Nothing was appended: the next batch takes the next offset.
    assert log.log_end_offset == 1 and log.size_in_bytes == size
    assert append(log, build_batch([(b"d", b"4")])) == 1


def test_every_keyless_record_is_listed_and_three_are_shown(tmp_path):
    log = make_log(tmp_path, cleanup_policy="compact")
    records = [(None, b"0"), (b"k", b"1"), (None, b"2"), (None, b"3"), (None, b"4"), (None, None)]
    with pytest.raises(RecordValidationError) as refused:
        append(log, build_batch(records, codec=1))
    assert [index for index, _ in refused.value.record_errors] == [0, 2, 3, 4, 5]
    shown = ", ".join(f"RecordError(batchIndex={i}, message='{KEYLESS}')" for i in (0, 2, 3))
    assert str(refused.value) == (
        "One or more records have been rejected due to 5 record errors in total, and only showing the first "
        f"three errors at most: [{shown}]"
    )
    assert log.log_end_offset == 0


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
def test_compressed_keyless_batches_are_refused_too(tmp_path, codec: int):
    log = make_log(tmp_path, cleanup_policy="compact")
    with pytest.raises(RecordValidationError):
        append(log, build_batch([(b"k", b"v"), (None, b"w")], codec=codec))
    assert append(log, build_batch([(b"k", b"v"), (b"", None)], codec=codec)) == 0


def test_empty_keys_and_tombstones_are_accepted(tmp_path):
    log = make_log(tmp_path, cleanup_policy="compact")
    assert append(log, build_batch([(b"", b"v"), (b"k", None)])) == 0
    assert log.log_end_offset == 2


def test_a_delete_topic_accepts_keyless_records(tmp_path):
    log = make_log(tmp_path)
    assert log.config.cleanup_policy == ["delete"]
    assert append(log, build_batch([(None, b"v"), (None, b"w")])) == 0
    assert log.log_end_offset == 2


def test_the_rule_follows_a_config_change(tmp_path):
    log = make_log(tmp_path)
    append(log, build_batch([(None, b"v")]))
    log.config = make_log(tmp_path, "other", cleanup_policy="compact").config
    with pytest.raises(RecordValidationError):
        append(log, build_batch([(None, b"w")]))
    assert log.log_end_offset == 1


def test_a_refused_batch_leaves_the_producer_state_alone(tmp_path):
    """The keys are checked before the producer's sequence: a refused idempotent batch does not
    advance it, so the producer's next batch (same sequence, keyed) is accepted."""
    log = make_log(tmp_path, cleanup_policy="compact")
    with pytest.raises(RecordValidationError):
        append(log, build_batch([(None, b"v")], producer_id=5, producer_epoch=0, base_sequence=0))
    assert append(log, build_batch([(b"k", b"v")], producer_id=5, producer_epoch=0, base_sequence=0)) == 0


def test_coordinator_writes_are_not_checked(tmp_path):
    """Markers (control batches) and a coordinator's own records: Kafka's coordinators always
    write keys; pybroker does not look."""
    log = make_log(tmp_path, cleanup_policy="compact")
    batch = _native.build_batch([(b"k", b"v")], T0, producer_id=7, producer_epoch=0, base_sequence=0,
                                transactional=True)
    assert append(log, batch) == 0
    marker = _native.build_control_batch(7, 0, 3, True, T0)
    assert append(log, marker, AppendOrigin.COORDINATOR) == 1
    assert append(log, build_batch([(None, b"v")]), AppendOrigin.COORDINATOR) == 2
    # A client's control batch is still refused for what it is, not for its keys.
    with pytest.raises(InvalidRecordError, match="Clients are not allowed to write control records"):
        append(log, _native.build_control_batch(7, 0, 3, False, T0))
