"""DeleteRecords' delayed path without a broker: ``ReplicaManager.delete_records`` over real logs in a
tmp dir, partitions whose remote replicas hold the low watermark back, and its delete-records
purgatory.

Kafka's rules (``ReplicaManager.deleteRecords`` and ``DelayedDeleteRecords``): a partition whose low
watermark (the smallest log start offset over the leader and its alive replicas) is below the
requested offset waits; it answers once the LW reaches the offset (with the LW at that moment), 6
if this broker stopped leading it, 3 if it is no longer hosted, or 7 at the deadline with the LW
computed when the delete ran. Partitions that already failed keep their error; one operation can
mix all of these. Followers' fetches will report their log start offsets; here ``report`` sets
them and ``ReplicaManager.on_log_start_offset_changed`` is told, as the fetch path will tell it.
"""

from __future__ import annotations

import asyncio

from pybroker.common.cluster import PartitionState
from pybroker.common.errors import ErrorCode as E
from pybroker.controller.requests import UpdateMetadata
from pybroker.log.log import Log
from pybroker.server.config import BrokerConfig
from pybroker.server.metadata_cache import MetadataCache
from pybroker.server.partition import Partition
from pybroker.server.replica_manager import DeleteRecordsResult, ReplicaManager
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
    partition.make_leader(PartitionState(tp, 0, LOCAL, 0, [LOCAL], 0, list(replicas)), now_ms=0)
    if count:
        batch = build_batch([(f"k{i}".encode(), f"v{i}".encode()) for i in range(count)])  # keyed: compacted ones too
        partition.append_records_to_leader(memoryview(bytearray(batch)), required_acks=1, now_ms=0)
    assert partition.high_watermark == count
    return partition


def replica_manager(*partitions: Partition, elsewhere: tuple[TopicPartition, ...] = ()) -> ReplicaManager:
    """A replica manager hosting ``partitions``; its metadata cache also knows the partitions
    ``elsewhere`` (led by another broker)."""
    cache = MetadataCache(LOCAL)
    cache.update_metadata(UpdateMetadata(0, 1, -1, [
        PartitionState(tp, 1, LOCAL + 1, 0, [LOCAL + 1], 0, [LOCAL + 1]) for tp in elsewhere
    ], [], {}))
    manager = ReplicaManager(LOCAL, log_manager=None, metadata_cache=cache)  # type: ignore[arg-type]
    manager.partitions = {p.topic_partition: p for p in partitions}
    return manager


def report(manager: ReplicaManager, partition: Partition, **log_start_offsets: int) -> None:
    """Followers' fetches reporting their log start offsets (``r2=5``: replica 2 is at 5)."""
    for name, offset in log_start_offsets.items():
        partition.remote_replicas[int(name[1:])].log_start_offset = offset
    manager.on_log_start_offset_changed(partition.topic_partition)


def start(manager: ReplicaManager, offsets: dict[Partition, int], timeout_ms: int = 30_000) -> asyncio.Future:
    """DeleteRecords with LeaderOnly=false: a future of the results (already done if nothing waits)."""
    outcome = manager.delete_records(timeout_ms, {p.topic_partition: o for p, o in offsets.items()}, leader_only=False)
    if asyncio.isfuture(outcome):
        return outcome
    done: asyncio.Future[dict[TopicPartition, DeleteRecordsResult]] = asyncio.get_running_loop().create_future()
    done.set_result(outcome)
    return done


def waiting(manager: ReplicaManager, partition: Partition) -> int:
    return manager.delete_records_purgatory.watched(partition.topic_partition)


def answer(future: asyncio.Future) -> dict[str, tuple[int, int, int]]:
    """topic → (error, low watermark, leader log start offset)."""
    return {tp.topic: (r.error, r.low_watermark, r.leader_log_start_offset) for tp, r in future.result().items()}


async def settled(future: asyncio.Future, timeout: float = 5.0) -> dict[str, tuple[int, int, int]]:
    await asyncio.wait_for(asyncio.shield(future), timeout)
    return answer(future)


def test_waits_for_every_alive_replica_then_completes(tmp_path):
    async def scenario():
        p = make_partition(tmp_path, "a")
        manager = replica_manager(p)
        future = start(manager, {p: 5})
        assert not future.done()
        assert p.log.log_start_offset == 5 and p.low_watermark() == -1  # followers unknown
        assert waiting(manager, p) == 1

        report(manager, p, r2=5)
        assert not future.done()  # replica 3 still at -1
        report(manager, p, r3=4)
        assert not future.done()  # 4 < 5
        report(manager, p, r3=5)
        assert answer(future) == {"a": (E.NONE, 5, 5)}
        assert waiting(manager, p) == 0 and len(manager.delete_records_purgatory) == 0

    asyncio.run(scenario())


def test_dead_replica_does_not_hold_the_low_watermark(tmp_path):
    async def scenario():
        p = make_partition(tmp_path, "a")
        manager = replica_manager(p)
        future = start(manager, {p: 3})
        p.is_broker_alive = lambda broker: broker in {LOCAL, 2}  # broker 3 fenced / gone
        report(manager, p, r2=3)
        assert answer(future) == {"a": (E.NONE, 3, 3)}

    asyncio.run(scenario())


def test_completion_reports_the_low_watermark_at_that_moment(tmp_path):
    """Two deletes wait on the same partition; when the replicas reach the later one, both answer
    with the LW then (>= each requested offset), as Kafka's tryComplete does."""
    async def scenario():
        p = make_partition(tmp_path, "a")
        manager = replica_manager(p)
        first = start(manager, {p: 4})
        second = start(manager, {p: 7})
        assert waiting(manager, p) == 2
        report(manager, p, r2=7, r3=8)
        assert answer(first) == {"a": (E.NONE, 7, 7)}
        assert answer(second) == {"a": (E.NONE, 7, 7)}

    asyncio.run(scenario())


def test_expiry_answers_7_with_the_low_watermark_from_the_delete(tmp_path):
    async def scenario():
        p = make_partition(tmp_path, "a")
        manager = replica_manager(p)
        report(manager, p, r2=1, r3=1)  # the followers last reported 1
        future = start(manager, {p: 5}, timeout_ms=30)
        report(manager, p, r2=5, r3=3)  # progress, but not enough: LW 3 < 5
        assert not future.done()
        # Timed out: error 7 and the LW computed when the delete ran (1), not the later 3.
        assert await settled(future) == {"a": (E.REQUEST_TIMED_OUT, 1, 5)}
        assert len(manager.delete_records_purgatory) == 0
        assert p.log.log_start_offset == 5  # the leader's delete stands

    asyncio.run(scenario())


def test_timeout_zero_expires_at_once_when_replicas_lag(tmp_path):
    async def scenario():
        p = make_partition(tmp_path, "a")
        future = start(replica_manager(p), {p: 2}, timeout_ms=0)
        assert not future.done()
        assert await settled(future, timeout=2) == {"a": (E.REQUEST_TIMED_OUT, -1, 2)}

    asyncio.run(scenario())


def test_losing_leadership_answers_6(tmp_path):
    async def scenario():
        p = make_partition(tmp_path, "a")
        manager = replica_manager(p)
        future = start(manager, {p: 5})
        p.leader_id = 2  # became a follower
        # Kafka does not re-check DeleteRecords on a leader change; the next check answers 6.
        manager.on_log_start_offset_changed(p.topic_partition)
        assert answer(future) == {"a": (E.NOT_LEADER_OR_FOLLOWER, -1, -1)}

    asyncio.run(scenario())


def test_partition_no_longer_hosted_answers_3(tmp_path):
    async def scenario():
        p = make_partition(tmp_path, "a")
        manager = replica_manager(p)
        future = start(manager, {p: 5})
        del manager.partitions[p.topic_partition]  # topic deleted
        manager.on_log_start_offset_changed(p.topic_partition)
        assert answer(future) == {"a": (E.UNKNOWN_TOPIC_OR_PARTITION, -1, -1)}

    asyncio.run(scenario())


def test_not_leader_at_delete_time_answers_6_without_waiting(tmp_path):
    async def scenario():
        p = make_partition(tmp_path, "a")
        p.leader_id = 2
        manager = replica_manager(p)
        future = start(manager, {p: 5})
        assert future.done() and answer(future) == {"a": (E.NOT_LEADER_OR_FOLLOWER, -1, -1)}
        assert p.log.log_start_offset == 0 and len(manager.delete_records_purgatory) == 0

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
        manager = replica_manager(*parts)
        future = start(manager, {lagging: 6, stuck: 3, single: -1, compact: 2, beyond: COUNT + 1}, timeout_ms=200)
        assert not future.done()
        assert waiting(manager, lagging) == 1 and waiting(manager, stuck) == 1
        assert waiting(manager, single) == 0  # never waited on
        report(manager, lagging, r2=6, r3=6)
        assert not future.done()  # "stuck" still pending
        assert await settled(future) == {
            "lagging": (E.NONE, 6, 6),
            "stuck": (E.REQUEST_TIMED_OUT, -1, 3),
            "single": (E.NONE, COUNT, COUNT),
            "compact": (E.POLICY_VIOLATION, -1, -1),
            "beyond": (E.OFFSET_OUT_OF_RANGE, -1, -1),
        }
        assert len(manager.delete_records_purgatory) == 0
        assert [p.log.log_start_offset for p in parts] == [6, 3, COUNT, 0, 0]

    asyncio.run(scenario())


def test_mixed_partitions_all_complete(tmp_path):
    async def scenario():
        a, b = make_partition(tmp_path, "a"), make_partition(tmp_path, "b", replicas=(LOCAL, 2))
        manager = replica_manager(a, b)
        future = start(manager, {a: 2, b: 9})
        report(manager, b, r2=9)
        assert not future.done()  # "a" still waits
        report(manager, a, r2=2, r3=5)
        assert answer(future) == {"a": (E.NONE, 2, 2), "b": (E.NONE, 9, 9)}

    asyncio.run(scenario())


def test_shutdown_answers_waiting_deletes_with_7(tmp_path):
    async def scenario():
        p = make_partition(tmp_path, "a")
        manager = replica_manager(p)
        future = start(manager, {p: 4})
        await manager.shutdown()
        assert answer(future) == {"a": (E.REQUEST_TIMED_OUT, -1, 4)}

    asyncio.run(scenario())


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
        report(manager, b, r2=6, r3=6)
        assert answer(waiting) == {"b": (E.NONE, 6, 6), "single": (E.NONE, 5, 5)}

        expiring = manager.delete_records(20, {a.topic_partition: 5}, leader_only=False)
        assert await settled(expiring) == {"a": (E.REQUEST_TIMED_OUT, -1, 5)}

    asyncio.run(scenario())


def test_replica_manager_local_errors(tmp_path):
    async def scenario():
        a = make_partition(tmp_path, "a")
        internal = make_partition(tmp_path, "__consumer_offsets")
        manager = replica_manager(a, internal, elsewhere=(TopicPartition("elsewhere", 0),))
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
