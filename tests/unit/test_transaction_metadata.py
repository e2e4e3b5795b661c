"""A transactional id's state machine (Kafka's ``TransactionMetadata``) and the records of
``__transaction_state`` (Kafka's ``TransactionLog``): ids, names and valid transitions as Kafka's,
KIP-360's epoch rules, and the exact bytes of TransactionLogKey v0 / TransactionLogValue v0."""

from __future__ import annotations

import struct

import pytest

from pybroker.common.errors import ErrorCode
from pybroker.server.transaction import transaction_log
from pybroker.server.transaction.metadata import (
    NO_PRODUCER_EPOCH,
    IllegalStateError,
    TransactionMetadata,
    TransactionState,
    is_epoch_exhausted,
)
from pybroker.server.transaction.transaction_log import RecordFormatError, TxnKey, UnknownKey
from pybroker.types import TopicPartition

S = TransactionState
A0, A1, B2 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 2)
NOW = 1_700_000_000_000


def test_state_ids_names_and_valid_previous_states_are_kafkas():
    assert [(s.value, s.state_name) for s in S] == [
        (0, "Empty"), (1, "Ongoing"), (2, "PrepareCommit"), (3, "PrepareAbort"), (4, "CompleteCommit"),
        (5, "CompleteAbort"), (6, "Dead"), (7, "PrepareEpochFence"),
    ]
    previous = {s.state_name: sorted(p.state_name for p in s.valid_previous_states) for s in S}
    assert previous == {
        "Empty": ["CompleteAbort", "CompleteCommit", "Empty"],
        "Ongoing": ["CompleteAbort", "CompleteCommit", "Empty", "Ongoing"],
        "PrepareCommit": ["Ongoing"],
        "PrepareAbort": ["Ongoing", "PrepareEpochFence"],
        "CompleteCommit": ["PrepareCommit"],
        "CompleteAbort": ["PrepareAbort"],
        "Dead": ["CompleteAbort", "CompleteCommit", "Empty"],
        "PrepareEpochFence": ["Ongoing"],
    }
    assert {s for s in S if s.is_expiration_allowed} == {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}
    assert S.from_name("PrepareAbort") is S.PREPARE_ABORT and S.from_name("Nope") is None
    with pytest.raises(IllegalStateError):
        S.from_id(8)


def new(epoch: int = NO_PRODUCER_EPOCH) -> TransactionMetadata:
    metadata = TransactionMetadata.new("tx", 7, 60000, NOW)
    metadata.producer_epoch = epoch
    return metadata


def test_a_transaction_goes_through_its_states_only_once_each_transition_is_completed():
    m = new()
    init = m.prepare_increment_producer_epoch(60000, None, NOW)
    assert init.txn_state == S.EMPTY and init.producer_epoch == 0 and m.pending_state == S.EMPTY
    with pytest.raises(IllegalStateError):  # a transition under way blocks any other
        m.prepare_add_partitions(frozenset({A0}), NOW)
    m.complete_transition_to(init)
    assert (m.state, m.producer_epoch, m.pending_state) == (S.EMPTY, 0, None)

    add = m.prepare_add_partitions(frozenset({A0, A1}), NOW + 5)
    m.complete_transition_to(add)
    assert m.state == S.ONGOING and m.topic_partitions == {A0, A1} and m.txn_start_timestamp == NOW + 5
    more = m.prepare_add_partitions(frozenset({B2}), NOW + 9)
    assert more.txn_start_timestamp == NOW + 5  # the transaction's start stays
    m.complete_transition_to(more)

    commit = m.prepare_abort_or_commit(S.PREPARE_COMMIT, NOW + 10)
    m.complete_transition_to(commit)
    assert m.state == S.PREPARE_COMMIT and m.topic_partitions == {A0, A1, B2}
    for tp in (A0, A1, B2):
        m.remove_partition(tp)
    complete = m.prepare_complete(NOW + 20)
    m.complete_transition_to(complete)
    assert (m.state, m.topic_partitions, m.txn_last_update_timestamp) == (S.COMPLETE_COMMIT, set(), NOW + 20)


def test_a_transition_not_allowed_from_the_current_state_raises():
    m = new(0)
    with pytest.raises(IllegalStateError):
        m.prepare_abort_or_commit(S.PREPARE_COMMIT, NOW)  # Empty → PrepareCommit
    assert m.pending_state is None
    with pytest.raises(IllegalStateError):
        m.remove_partition(A0)  # only while preparing to commit or abort
    with pytest.raises(IllegalStateError):
        m.complete_transition_to(m.prepare_no_transit())  # nothing pending


@pytest.mark.parametrize(("current", "last", "expected", "result"), [
    (5, NO_PRODUCER_EPOCH, None, (6, NO_PRODUCER_EPOCH)),  # a new producer instance
    (5, NO_PRODUCER_EPOCH, 5, (6, 5)),  # KIP-360: the producer names its current epoch
    (6, 5, 5, (6, 5)),  # the retry of a bump whose answer was lost
    (6, 5, 4, ErrorCode.PRODUCER_FENCED),  # anything else is fenced
    (NO_PRODUCER_EPOCH, NO_PRODUCER_EPOCH, 3, (0, NO_PRODUCER_EPOCH)),  # a new id with an epoch asked for
])
def test_kip360_epoch_bump(current, last, expected, result):
    m = new(current)
    m.last_producer_epoch = last
    transit = m.prepare_increment_producer_epoch(1000, expected, NOW)
    if isinstance(result, ErrorCode):
        assert transit == result and m.pending_state is None
    else:
        assert (transit.producer_epoch, transit.last_producer_epoch) == result
        assert transit.txn_timeout_ms == 1000 and transit.txn_start_timestamp == -1


def test_fencing_bumps_the_epoch_once_even_when_the_fence_is_retried():
    m = new(3)
    m.state = S.ONGOING
    assert m.prepare_fence_producer_epoch().producer_epoch == 4
    m.pending_state = None
    m.has_failed_epoch_fence = True
    assert m.prepare_fence_producer_epoch().producer_epoch == 3


def test_epoch_exhaustion_and_producer_id_rotation():
    assert not is_epoch_exhausted(32765) and is_epoch_exhausted(32766)
    m = new(32766)
    with pytest.raises(IllegalStateError):
        m.prepare_increment_producer_epoch(1000, None, NOW)
    rotation = m.prepare_producer_id_rotation(99, 1000, NOW, record_last_epoch=True)
    assert (rotation.producer_id, rotation.producer_epoch, rotation.last_producer_id, rotation.last_producer_epoch) == (
        99, 0, 7, 32766)
    m.complete_transition_to(rotation)
    assert (m.producer_id, m.producer_epoch, m.last_producer_id) == (99, 0, 7)


# --- __transaction_state records ------------------------------------------------------------------


def test_key_bytes_are_kafkas():
    assert transaction_log.key_to_bytes("tx") == b"\x00\x00\x00\x02tx"
    assert transaction_log.read_key(b"\x00\x00\x00\x02tx") == TxnKey("tx")
    assert transaction_log.read_key(b"\x00\x05\x00\x02tx") == UnknownKey(5)


def test_value_bytes_are_kafkas_v0():
    m = new(3)
    m.state = S.ONGOING
    m.topic_partitions = {A1, A0, B2}
    m.txn_start_timestamp, m.txn_last_update_timestamp = 90, 100
    value = transaction_log.value_to_bytes(m.prepare_no_transit())
    assert value == (
        struct.pack(">hqhib", 0, 7, 3, 60000, 1)
        + struct.pack(">i", 2)
        + struct.pack(">h", 1) + b"a" + struct.pack(">iii", 2, 0, 1)
        + struct.pack(">h", 1) + b"b" + struct.pack(">ii", 1, 2)
        + struct.pack(">qq", 100, 90)
    )
    loaded = transaction_log.read_value("tx", value)
    assert loaded is not None
    assert (loaded.producer_id, loaded.producer_epoch, loaded.state, loaded.topic_partitions) == (7, 3, S.ONGOING, {A0, A1, B2})
    assert (loaded.txn_start_timestamp, loaded.txn_last_update_timestamp, loaded.txn_timeout_ms) == (90, 100, 60000)
    # KIP-360's last producer id and epoch are not stored.
    assert (loaded.last_producer_id, loaded.last_producer_epoch) == (-1, -1)


def test_empty_has_a_null_partition_array_and_a_tombstone_reads_as_none():
    empty = new(0).prepare_increment_producer_epoch(1000, None, NOW)
    value = transaction_log.value_to_bytes(empty)
    assert value[17:21] == b"\xff\xff\xff\xff"
    assert transaction_log.read_value("tx", None) is None


def test_flexible_v1_values_are_read():
    value = (
        struct.pack(">hqhib", 1, 7, 3, 60000, 2)
        + bytes([2]) + bytes([2]) + b"a" + bytes([3]) + struct.pack(">ii", 0, 1) + bytes([0])  # one topic
        + struct.pack(">qq", 100, 90) + bytes([1, 5, 1, 0xFF])  # one unknown tagged field
    )
    loaded = transaction_log.read_value("tx", value)
    assert loaded is not None and loaded.state == S.PREPARE_COMMIT and loaded.topic_partitions == {A0, A1}
    assert loaded.txn_start_timestamp == 90
    with pytest.raises(RecordFormatError):
        transaction_log.read_value("tx", struct.pack(">h", 2) + value[2:])


def test_partition_for_is_abs_of_java_string_hash_code():
    assert transaction_log.partition_for("hello", 50) == 99162322 % 50  # "hello".hashCode()
    assert transaction_log.partition_for("polygenelubricants", 50) == 0  # hashCode() is Integer.MIN_VALUE
