"""A partition log with transactions (KIP-98): transactional batches open a producer's
transaction, markers close it, the last stable offset, the aborted-transaction index
(``.txnindex``), producer snapshots (``.snapshot``), and all of it surviving a restart, a crash,
a truncation and replication to a follower; DeleteRecords into an open transaction, and idle
producers expiring. No networking."""

from __future__ import annotations

import asyncio
import os

import pytest

from pybroker import _native
from pybroker.log.log import AppendOrigin, InvalidRecordError, Log
from pybroker.log.log_manager import LogManager
from pybroker.log.producer_snapshot import snapshot_offsets
from pybroker.log.producer_state import (
    InvalidProducerEpochError,
    InvalidTxnStateError,
    TransactionCoordinatorFencedError,
)
from pybroker.server.config import BrokerConfig
from tests.mock_time import MockScheduler, MockTime
from tests.unit.replica_logs import T0, TP, fetch, make_log

COORDINATOR_EPOCH = 3


def send(log: Log, producer_id: int, seq: int, *values: bytes, epoch: int = 0, transactional: bool = True,
         timestamp: int = T0) -> int:
    """A client's (transactional) batch; returns its first offset."""
    batch = _native.build_batch(
        [(None, v) for v in values], timestamp, producer_id=producer_id, producer_epoch=epoch, base_sequence=seq,
        transactional=transactional,
    )
    return log.append_as_leader(memoryview(bytearray(batch)), 0, T0).first_offset


def mark(log: Log, producer_id: int, commit: bool, epoch: int = 0, coordinator_epoch: int = COORDINATOR_EPOCH,
         timestamp: int = T0) -> int:
    """The coordinator's marker; returns its offset."""
    batch = _native.build_control_batch(producer_id, epoch, coordinator_epoch, commit, timestamp)
    return log.append_as_leader(memoryview(bytearray(batch)), 0, T0, AppendOrigin.COORDINATOR).first_offset


def replicated(log: Log) -> None:
    log.update_high_watermark(log.log_end_offset)


def reopen(log: Log, clean: bool) -> Log:
    """The log as the next start loads it: after ``close()``, or after a crash (nothing flushed)."""
    end, start, hw = log.log_end_offset, log.log_start_offset, log.high_watermark
    if clean:
        log.close()
    return Log(log.dir, TP, log.config, recovery_point=end if clean else 0, log_start_offset=start,
               high_watermark=hw, had_clean_shutdown=clean)


def test_open_transaction_holds_the_last_stable_offset_until_its_marker_is_replicated(tmp_path):
    log = make_log(tmp_path)
    send(log, 1, 0, b"plain", transactional=False)
    first = send(log, 7, 0, b"a", b"b")
    send(log, 8, 0, b"other", transactional=False)
    replicated(log)
    assert log.high_watermark == 4 and log.last_stable_offset == first == 1
    marker = mark(log, 7, commit=True)
    assert marker == 4
    # The marker is not below the high watermark yet.
    assert log.last_stable_offset == 1
    replicated(log)
    assert log.last_stable_offset == log.high_watermark == 5
    assert not log.active_segment.has_txn_index  # a commit is not indexed


def test_aborted_transaction_goes_into_the_index_with_the_lso_it_leaves(tmp_path):
    log = make_log(tmp_path)
    first7 = send(log, 7, 0, b"a")
    first8 = send(log, 8, 0, b"b")
    send(log, 7, 1, b"c")
    abort7 = mark(log, 7, commit=False)
    replicated(log)
    # Producer 8's transaction is still open: the LSO stops at its first offset.
    assert log.last_stable_offset == first8
    assert log.active_segment.aborted_txns() == [(7, first7, abort7, first8)]
    abort8 = mark(log, 8, commit=False)
    replicated(log)
    assert log.last_stable_offset == log.log_end_offset
    assert log.active_segment.aborted_txns()[-1] == (8, first8, abort8, abort8 + 1)
    assert log.collect_aborted_transactions(0, log.log_end_offset) == [(7, first7), (8, first8)]
    # Only transactions that overlap the fetched range.
    assert log.collect_aborted_transactions(abort7 + 1, log.log_end_offset) == [(8, first8)]


def test_first_transactional_batch_needs_the_guard_a_marker_did_not_drop(tmp_path):
    """KIP-890's verification guard: the leader asks the coordinator, and meanwhile the
    transaction ends (its marker is written); the verified batch must not open a new one."""
    log = make_log(tmp_path)
    log.producer_state.verification_enabled = True

    def send_guarded(seq: int, value: bytes, guard: object | None) -> int:
        batch = _native.build_batch([(None, value)], T0, producer_id=7, producer_epoch=0, base_sequence=seq,
                                    transactional=True)
        return log.append_as_leader(memoryview(bytearray(batch)), 0, T0, verification_guard=guard).first_offset

    with pytest.raises(InvalidTxnStateError, match="not part of an ongoing transaction"):
        send_guarded(0, b"unverified", None)
    stale = log.producer_state.start_verification(7, T0)
    assert log.producer_state.start_verification(7, T0) is stale  # a retry joins the verification under way
    mark(log, 7, commit=False)  # the coordinator aborted the transaction while the leader waited
    with pytest.raises(InvalidTxnStateError):
        send_guarded(0, b"late", stale)
    assert log.log_end_offset == 1 and log.producer_state.ongoing_transactions == {}
    first = send_guarded(0, b"verified", log.producer_state.start_verification(7, T0))
    send_guarded(1, b"in the open transaction", None)  # no guard needed once it is open
    assert log.producer_state.ongoing_transactions == {first: 7} and log.log_end_offset == 3


def test_delete_records_into_an_open_transaction_moves_the_lso_with_the_log_start(tmp_path):
    log = make_log(tmp_path)
    send(log, 1, 0, b"plain", transactional=False)
    first = send(log, 7, 0, b"a", b"b")
    send(log, 8, 0, b"after", transactional=False)
    replicated(log)
    assert log.last_stable_offset == first == 1
    # The LSO is never below the log start offset, even inside an open transaction.
    log.maybe_increment_log_start_offset(2, "ClientRecordDeletion")
    assert log.last_stable_offset == 2
    log.maybe_increment_log_start_offset(4, "ClientRecordDeletion")  # the transaction's records all gone
    assert log.last_stable_offset == 4 and log.producer_state.ongoing_transactions == {first: 7}
    # The transaction is still open: its marker ends it, and the LSO follows the HW again.
    abort = mark(log, 7, commit=False)
    replicated(log)
    assert log.last_stable_offset == log.high_watermark == abort + 1
    assert log.collect_aborted_transactions(4, log.log_end_offset) == [(7, first)]


def test_bad_writes_are_refused_and_append_nothing(tmp_path):
    log = make_log(tmp_path)
    send(log, 7, 0, b"a", epoch=2)
    end = log.log_end_offset
    control = _native.build_control_batch(7, 2, 0, True, T0)
    with pytest.raises(InvalidRecordError, match="control records"):
        log.append_as_leader(memoryview(bytearray(control)), 0, T0)  # a client's marker
    with pytest.raises(InvalidTxnStateError):
        send(log, 7, 1, b"plain", epoch=2, transactional=False)
    with pytest.raises(InvalidProducerEpochError):
        mark(log, 7, commit=True, epoch=1)
    mark(log, 7, commit=True, epoch=2)
    with pytest.raises(TransactionCoordinatorFencedError):
        mark(log, 7, commit=False, epoch=2, coordinator_epoch=COORDINATOR_EPOCH - 1)
    assert log.log_end_offset == end + 1


def test_clean_restart_loads_the_snapshot_and_keeps_open_transactions_and_the_index(tmp_path):
    log = make_log(tmp_path)
    send(log, 7, 0, b"a")
    mark(log, 7, commit=False)
    open_first = send(log, 8, 0, b"b")
    replicated(log)
    log = reopen(log, clean=True)
    assert snapshot_offsets(log.dir) == [log.log_end_offset]
    assert log.last_stable_offset == open_first
    assert log.collect_aborted_transactions(0, log.log_end_offset) == [(7, 0)]
    # The retry of producer 8's batch is still recognised.
    assert send(log, 8, 0, b"b") == open_first
    mark(log, 8, commit=True)
    replicated(log)
    assert log.last_stable_offset == log.log_end_offset


def test_crash_recovery_rebuilds_the_index_and_producer_state_from_the_batches(tmp_path):
    log = make_log(tmp_path)
    send(log, 7, 0, b"a")
    mark(log, 7, commit=False)
    open_first = send(log, 8, 0, b"b")
    replicated(log)
    for segment in log.segments:
        segment.flush()
    index = os.path.join(log.dir, f"{0:020d}.txnindex")
    with open(index, "r+b") as f:
        f.truncate(0)  # recovery must rebuild what the crash lost
    log = reopen(log, clean=False)
    assert log.collect_aborted_transactions(0, log.log_end_offset) == [(7, 0)]
    log.update_high_watermark(log.log_end_offset)
    assert log.last_stable_offset == open_first


def test_transactions_the_checkpointed_high_watermark_covers_are_stable_after_a_crash(tmp_path):
    """A crash after the high watermark checkpoint passed two markers (Kafka left such a log dir
    when killed; issue 34's files both ways): the replay closes both transactions, and the high
    watermark read from the checkpoint lets them go at once, as Kafka's ``updateHighWatermark``
    at the log's creation does. Nothing else moves the high watermark before a consumer asks."""
    log = make_log(tmp_path)
    send(log, 1, 0, b"plain", transactional=False)
    committed = send(log, 7, 0, b"a")
    mark(log, 7, commit=True)
    send(log, 7, 1, b"b", epoch=0)
    mark(log, 7, commit=False)
    replicated(log)
    assert log.last_stable_offset == log.high_watermark == 5 and committed == 1
    for segment in log.segments:
        segment.flush()
    log = reopen(log, clean=False)
    assert log.high_watermark == 5
    assert log.last_stable_offset == 5


def test_damaged_index_is_detected_and_rebuilt_even_after_a_clean_stop(tmp_path):
    log = make_log(tmp_path)
    send(log, 7, 0, b"a")
    mark(log, 7, commit=False)
    replicated(log)
    end = log.log_end_offset
    log.close()
    with open(os.path.join(log.dir, f"{0:020d}.txnindex"), "ab") as f:
        f.write(b"\x00" * 5)
    log = Log(log.dir, TP, log.config, recovery_point=end, high_watermark=end)
    assert log.collect_aborted_transactions(0, log.log_end_offset) == [(7, 0)]


def test_snapshots_are_taken_at_each_roll_and_trimmed_with_the_segments(tmp_path):
    log = make_log(tmp_path, segment_bytes=200)
    for seq in range(6):
        send(log, 7, seq, b"x" * 100, transactional=False)
    assert len(log.segments) > 2
    assert snapshot_offsets(log.dir) == [segment.base_offset for segment in log.segments[1:]]
    replicated(log)
    log.maybe_increment_log_start_offset(log.segments[-1].base_offset, "ClientRecordDeletion")
    log.delete_old_segments(T0)
    assert snapshot_offsets(log.dir) == [log.segments[0].base_offset]


def test_truncation_below_a_marker_reopens_the_transaction_and_drops_its_index_entry(tmp_path):
    log = make_log(tmp_path, segment_bytes=120)
    first = send(log, 7, 0, b"a" * 40)
    send(log, 7, 1, b"b" * 40)
    abort = mark(log, 7, commit=False)
    assert log.collect_aborted_transactions(0, log.log_end_offset) == [(7, first)]
    log.truncate_to(abort)
    assert log.collect_aborted_transactions(0, log.log_end_offset) == []
    log.update_high_watermark(log.log_end_offset)
    assert log.last_stable_offset == first
    assert log.producer_state.ongoing_transactions == {first: 7}


def test_follower_replays_transactions_and_builds_the_same_index(tmp_path):
    leader = make_log(tmp_path, "leader")
    send(leader, 7, 0, b"a")
    open_first = send(leader, 8, 0, b"b")
    mark(leader, 7, commit=False)
    follower = make_log(tmp_path, "follower")
    follower.append_as_follower(memoryview(bytearray(fetch(leader, 0))), T0)
    assert follower.active_segment.aborted_txns() == leader.active_segment.aborted_txns()
    follower.update_high_watermark(follower.log_end_offset)
    assert follower.last_stable_offset == open_first


def test_idle_producers_expire_at_the_periodic_check_unless_a_transaction_is_open(tmp_path):
    async def run() -> None:
        time = MockTime(wall_ms=T0)
        scheduler = MockScheduler(time)
        manager = LogManager([str(tmp_path)], lambda topic: BrokerConfig().log_config(), node_id=1, cluster_id="c",
                             producer_id_expiration_ms=10_000, producer_id_expiration_check_interval_ms=1_000,
                             transaction_verification_enabled=False, time=time, scheduler=scheduler)
        manager.load()
        log = manager.get_or_create_log(TP, "AAAAAAAAAAAAAAAAAAAAAA")
        send(log, 1, 0, b"idle", transactional=False)
        send(log, 7, 0, b"open")
        manager.start_background_tasks()
        [check] = scheduler.tasks("PeriodicProducerExpirationCheck")
        await scheduler.advance(9_000)
        assert check.runs == 9 and set(log.producer_state.producers) == {1, 7}
        await scheduler.advance(1_000)  # producer 1's last batch is producer.id.expiration.ms old
        assert set(log.producer_state.producers) == {7}  # an open transaction keeps its producer
        mark(log, 7, commit=True, timestamp=time.milliseconds())
        await scheduler.advance(9_000)
        assert set(log.producer_state.producers) == {7}
        await scheduler.advance(1_000)  # ten seconds after the marker
        assert log.producer_state.producers == {}
        await manager.shutdown()

    asyncio.run(run())
