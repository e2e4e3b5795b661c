"""DeleteRecords' delayed path without a broker: real logs in a tmp dir, partitions whose remote
replicas hold the low watermark back, ``DelayedDeleteRecords`` in a ``Purgatory``.

Kafka's rules (kafka-behaviour §1.3-§1.5): a partition whose low watermark (the smallest log start
offset over the leader and its alive replicas) is below the requested offset waits; it answers
once the LW reaches the offset (with the LW at that moment), 6 if this broker stopped leading it,
3 if it is no longer hosted, or 7 at the deadline with the LW computed when the delete ran.
Partitions that already failed keep their error; one operation can mix all of these.
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from pybroker.log.log import Log, OffsetOutOfRangeError
from pybroker.protocol.errors import ErrorCode as E
from pybroker.server.config import BrokerConfig
from pybroker.server.partition import NotLeaderError, Partition, PolicyViolationError
from pybroker.server.purgatory import Purgatory
from pybroker.server.replica_manager import (
    DelayedDeleteRecords,
    DeleteRecordsResult,
    ReplicaManager,
)
from pybroker.types import TopicPartition
from tests.unit.batches import build_batch

LOCAL = 1
COUNT = 10
TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAA"


def make_partition(tmp_path, name: str, replicas=(LOCAL, 2, 3), count: int = COUNT, **overrides: str) -> Partition:
    """A partition led here with ``count`` records in one batch and its HW at the log end. Only the
    leader is in the ISR, so the HW does not wait for the followers, but every assigned replica is
    alive and counts for the low watermark (each starts with log start offset -1: unknown)."""
    tp = TopicPartition(name, 0)
    log = Log(str(tmp_path / str(tp)), tp, BrokerConfig().log_config({k.replace("_", "."): v for k, v in overrides.items()}))
    partition = Partition(tp, TOPIC_ID, LOCAL, log)
    partition.make_leader(0, list(replicas), [LOCAL], now_ms=0)
    if count:
        batch = build_batch([(None, f"v{i}".encode()) for i in range(count)])
        partition.append_records_to_leader(memoryview(bytearray(batch)), required_acks=1, now_ms=0)
    assert partition.high_watermark == count
    return partition


def report(partition: Partition, **log_start_offsets: int) -> None:
    """Followers' fetches reporting their log start offsets (``r2=5``: replica 2 is at 5)."""
    for name, offset in log_start_offsets.items():
        partition.remote_replicas[int(name[1:])].log_start_offset = offset


_ERRORS = {NotLeaderError: E.NOT_LEADER_OR_FOLLOWER, PolicyViolationError: E.POLICY_VIOLATION,
           OffsetOutOfRangeError: E.OFFSET_OUT_OF_RANGE}


def delete_now(partition: Partition, offset: int) -> DeleteRecordsResult:
    """The local half of a delete, as the replica manager builds its result."""
    try:
        requested, low_watermark = partition.delete_records_on_leader(offset)
    except tuple(_ERRORS) as e:
        return DeleteRecordsResult(_ERRORS[type(e)])
    return DeleteRecordsResult(E.NONE, low_watermark, partition.log.log_start_offset, requested_offset=requested)


def start(purgatory: Purgatory, hosted: dict[TopicPartition, Partition], offsets: dict[Partition, int],
          timeout_ms: int = 30_000) -> tuple[DelayedDeleteRecords, asyncio.Future, bool]:
    """Delete locally, then park the answer in the purgatory under each lagging partition."""
    results = {p.topic_partition: delete_now(p, offset) for p, offset in offsets.items()}
    # Before the operation exists: its constructor pre-marks pending partitions as timed out.
    waiting = [tp for tp, r in results.items() if r.error == E.NONE and r.low_watermark < r.requested_offset]
    future = asyncio.get_running_loop().create_future()
    operation = DelayedDeleteRecords(timeout_ms, results, hosted.get, future)
    done = purgatory.try_complete_else_watch(operation, waiting)
    return operation, future, done


def answer(future: asyncio.Future) -> dict[str, tuple[int, int, int]]:
    """topic → (error, low watermark, leader log start offset)."""
    return {tp.topic: (r.error, r.low_watermark, r.leader_log_start_offset) for tp, r in future.result().items()}


async def settled(future: asyncio.Future, timeout: float = 5.0) -> dict[str, tuple[int, int, int]]:
    await asyncio.wait_for(asyncio.shield(future), timeout)
    return answer(future)


def test_waits_for_every_alive_replica_then_completes(tmp_path):
    async def scenario():
        p = make_partition(tmp_path, "a")
        hosted = {p.topic_partition: p}
        purgatory = Purgatory("DeleteRecords")
        operation, future, done = start(purgatory, hosted, {p: 5})
        assert not done and not future.done()
        assert p.log.log_start_offset == 5 and p.low_watermark() == -1  # followers unknown
        assert purgatory.watched(p.topic_partition) == 1

        report(p, r2=5)
        assert purgatory.check_and_complete(p.topic_partition) == 0  # replica 3 still at -1
        report(p, r3=4)
        assert purgatory.check_and_complete(p.topic_partition) == 0  # 4 < 5
        assert not future.done()
        report(p, r3=5)
        assert purgatory.check_and_complete(p.topic_partition) == 1
        assert answer(future) == {"a": (E.NONE, 5, 5)}
        assert operation.is_completed and purgatory.watched(p.topic_partition) == 0 and len(purgatory) == 0

    asyncio.run(scenario())


def test_dead_replica_does_not_hold_the_low_watermark(tmp_path):
    async def scenario():
        p = make_partition(tmp_path, "a")
        hosted = {p.topic_partition: p}
        purgatory = Purgatory("DeleteRecords")
        _, future, _ = start(purgatory, hosted, {p: 3})
        p.alive_brokers = frozenset({LOCAL, 2})  # broker 3 fenced / gone
        report(p, r2=3)
        assert purgatory.check_and_complete(p.topic_partition) == 1
        assert answer(future) == {"a": (E.NONE, 3, 3)}

    asyncio.run(scenario())


def test_completion_reports_the_low_watermark_at_that_moment(tmp_path):
    """Two deletes wait on the same partition; when the replicas reach the later one, both answer
    with the LW then (>= each requested offset), as Kafka's tryComplete does."""
    async def scenario():
        p = make_partition(tmp_path, "a")
        hosted = {p.topic_partition: p}
        purgatory = Purgatory("DeleteRecords")
        _, first, _ = start(purgatory, hosted, {p: 4})
        _, second, _ = start(purgatory, hosted, {p: 7})
        assert purgatory.watched(p.topic_partition) == 2
        report(p, r2=7, r3=8)
        assert purgatory.check_and_complete(p.topic_partition) == 2
        assert answer(first) == {"a": (E.NONE, 7, 7)}
        assert answer(second) == {"a": (E.NONE, 7, 7)}

    asyncio.run(scenario())


def test_expiry_answers_7_with_the_low_watermark_from_the_delete(tmp_path):
    async def scenario():
        p = make_partition(tmp_path, "a")
        report(p, r2=1, r3=1)  # the followers last reported 1
        hosted = {p.topic_partition: p}
        purgatory = Purgatory("DeleteRecords")
        _, future, _ = start(purgatory, hosted, {p: 5}, timeout_ms=30)
        report(p, r2=5, r3=3)  # progress, but not enough: LW 3 < 5
        assert purgatory.check_and_complete(p.topic_partition) == 0
        # Timed out: error 7 and the LW computed when the delete ran (1), not the later 3.
        assert await settled(future) == {"a": (E.REQUEST_TIMED_OUT, 1, 5)}
        assert len(purgatory) == 0
        assert p.log.log_start_offset == 5  # the leader's delete stands

    asyncio.run(scenario())


def test_timeout_zero_expires_at_once_when_replicas_lag(tmp_path):
    async def scenario():
        p = make_partition(tmp_path, "a")
        purgatory = Purgatory("DeleteRecords")
        _, future, done = start(purgatory, {p.topic_partition: p}, {p: 2}, timeout_ms=0)
        assert not done
        assert await settled(future, timeout=2) == {"a": (E.REQUEST_TIMED_OUT, -1, 2)}

    asyncio.run(scenario())


def test_losing_leadership_answers_6(tmp_path):
    async def scenario():
        p = make_partition(tmp_path, "a")
        purgatory = Purgatory("DeleteRecords")
        _, future, _ = start(purgatory, {p.topic_partition: p}, {p: 5})
        p.leader_id = 2  # became a follower
        # Kafka does not re-check DeleteRecords on a leader change; the next check answers 6.
        assert purgatory.check_and_complete(p.topic_partition) == 1
        assert answer(future) == {"a": (E.NOT_LEADER_OR_FOLLOWER, -1, -1)}

    asyncio.run(scenario())


def test_partition_no_longer_hosted_answers_3(tmp_path):
    async def scenario():
        p = make_partition(tmp_path, "a")
        hosted = {p.topic_partition: p}
        purgatory = Purgatory("DeleteRecords")
        _, future, _ = start(purgatory, hosted, {p: 5})
        del hosted[p.topic_partition]  # topic deleted
        assert purgatory.check_and_complete(p.topic_partition) == 1
        assert answer(future) == {"a": (E.UNKNOWN_TOPIC_OR_PARTITION, -1, -1)}

    asyncio.run(scenario())


def test_not_leader_at_delete_time_answers_6_without_waiting(tmp_path):
    async def scenario():
        p = make_partition(tmp_path, "a")
        p.leader_id = 2
        purgatory = Purgatory("DeleteRecords")
        _, future, done = start(purgatory, {p.topic_partition: p}, {p: 5})
        assert done and answer(future) == {"a": (E.NOT_LEADER_OR_FOLLOWER, -1, -1)}
        assert p.log.log_start_offset == 0 and len(purgatory) == 0

    asyncio.run(scenario())


def test_mixed_partitions_in_one_operation(tmp_path):
    """A lagging partition, one already satisfied (a single replica), errors decided locally, and
    one that times out: a single answer mixing 0, 7, 1 and 44."""
    async def scenario():
        lagging = make_partition(tmp_path, "lagging")
        stuck = make_partition(tmp_path, "stuck")
        single = make_partition(tmp_path, "single", replicas=(LOCAL,))
        compact = make_partition(tmp_path, "compact", cleanup_policy="compact")
        beyond = make_partition(tmp_path, "beyond")
        parts = [lagging, stuck, single, compact, beyond]
        hosted = {p.topic_partition: p for p in parts}
        purgatory = Purgatory("DeleteRecords")
        operation, future, done = start(
            purgatory, hosted, {lagging: 6, stuck: 3, single: -1, compact: 2, beyond: COUNT + 1}, timeout_ms=200)
        assert not done
        assert purgatory.watched(lagging.topic_partition) == 1 and purgatory.watched(stuck.topic_partition) == 1
        assert purgatory.watched(single.topic_partition) == 0  # never waited on
        report(lagging, r2=6, r3=6)
        assert purgatory.check_and_complete(lagging.topic_partition) == 0  # "stuck" still pending
        assert not future.done()
        assert await settled(future) == {
            "lagging": (E.NONE, 6, 6),
            "stuck": (E.REQUEST_TIMED_OUT, -1, 3),
            "single": (E.NONE, COUNT, COUNT),
            "compact": (E.POLICY_VIOLATION, -1, -1),
            "beyond": (E.OFFSET_OUT_OF_RANGE, -1, -1),
        }
        assert operation.is_completed and len(purgatory) == 0
        assert [p.log.log_start_offset for p in parts] == [6, 3, COUNT, 0, 0]

    asyncio.run(scenario())


def test_mixed_partitions_all_complete(tmp_path):
    async def scenario():
        a, b = make_partition(tmp_path, "a"), make_partition(tmp_path, "b", replicas=(LOCAL, 2))
        hosted = {a.topic_partition: a, b.topic_partition: b}
        purgatory = Purgatory("DeleteRecords")
        _, future, _ = start(purgatory, hosted, {a: 2, b: 9})
        report(b, r2=9)
        assert purgatory.check_and_complete(b.topic_partition) == 0  # "a" still waits
        report(a, r2=2, r3=5)
        assert purgatory.check_and_complete(a.topic_partition) == 1
        assert answer(future) == {"a": (E.NONE, 2, 2), "b": (E.NONE, 9, 9)}

    asyncio.run(scenario())


def test_shutdown_answers_waiting_deletes_with_7(tmp_path):
    async def scenario():
        p = make_partition(tmp_path, "a")
        purgatory = Purgatory("DeleteRecords")
        _, future, _ = start(purgatory, {p.topic_partition: p}, {p: 4})
        purgatory.shutdown()
        assert answer(future) == {"a": (E.REQUEST_TIMED_OUT, -1, 4)}

    asyncio.run(scenario())


# --- the same through ReplicaManager.delete_records (no broker: a stub for the metadata) ----------

def replica_manager(*partitions: Partition, internal: tuple[str, ...] = ()) -> ReplicaManager:
    metadata = SimpleNamespace(
        topic=lambda name: SimpleNamespace(is_internal=name in internal),
        partition=lambda topic, index: object(),
    )
    manager = ReplicaManager(LOCAL, log_manager=None, metadata=metadata)  # type: ignore[arg-type]
    manager.partitions = {p.topic_partition: p for p in partitions}
    return manager


def test_replica_manager_waits_unless_leader_only(tmp_path):
    async def scenario():
        a, b = make_partition(tmp_path, "a"), make_partition(tmp_path, "b")
        single = make_partition(tmp_path, "single", replicas=(LOCAL,))
        manager = replica_manager(a, b, single)

        # LeaderOnly (v3): answered at once with the LW as it is, and the leader's start offset.
        now = manager.delete_records(30_000, {a.topic_partition: 4}, leader_only=True)
        assert isinstance(now, dict)
        assert {tp.topic: (r.error, r.low_watermark, r.leader_log_start_offset) for tp, r in now.items()} == {
            "a": (E.NONE, -1, 4)}
        assert len(manager.delete_records_purgatory) == 0

        # Nothing to wait for (a single replica): a dict, not a future, even with timeout 0.
        now = manager.delete_records(0, {single.topic_partition: 3}, leader_only=False)
        assert isinstance(now, dict) and now[single.topic_partition].error == E.NONE

        waiting = manager.delete_records(30_000, {b.topic_partition: 6, single.topic_partition: 5}, leader_only=False)
        assert asyncio.isfuture(waiting) and not waiting.done()
        report(b, r2=6, r3=6)
        manager.on_log_start_offset_changed(b.topic_partition)
        assert answer(waiting) == {"b": (E.NONE, 6, 6), "single": (E.NONE, 5, 5)}

        expiring = manager.delete_records(20, {a.topic_partition: 5}, leader_only=False)
        assert await settled(expiring) == {"a": (E.REQUEST_TIMED_OUT, -1, 5)}

    asyncio.run(scenario())


def test_replica_manager_local_errors(tmp_path):
    async def scenario():
        a = make_partition(tmp_path, "a")
        internal = make_partition(tmp_path, "__consumer_offsets")
        manager = replica_manager(a, internal, internal=("__consumer_offsets",))
        results = manager.delete_records(30_000, {
            internal.topic_partition: 1,
            TopicPartition("elsewhere", 0): 1,  # in metadata, not hosted here
        }, leader_only=False)
        assert isinstance(results, dict)
        assert {tp.topic: (r.error, r.low_watermark, r.leader_log_start_offset) for tp, r in results.items()} == {
            "__consumer_offsets": (E.INVALID_TOPIC_EXCEPTION, -1, -1),
            "elsewhere": (E.NOT_LEADER_OR_FOLLOWER, -1, -1),
        }
        assert internal.log.log_start_offset == 0

    asyncio.run(scenario())
