"""When a fetch is answered at once and when a parked one completes: Kafka's DelayedFetch cases.

A fetch that has fewer than min_bytes to read parks in the fetch purgatory. Kafka answers it
before max_wait when waiting cannot help or something changed: the fetch offset lies on an older
segment than the end offset it reads to (a read stops at its segment's end, case F), the log was
truncated below it (F), the partition errs (not leader, fenced epoch, out of range: A-E) or its
epoch diverged (H), or min_bytes became readable (G). Driven through the replica manager, on the
injected clock.
"""

from __future__ import annotations

import asyncio

from pybroker.common.cluster import PartitionState
from pybroker.common.errors import ErrorCode
from pybroker.log.log_manager import LogManager
from pybroker.server.config import BrokerConfig
from pybroker.server.metadata_cache import MetadataCache
from pybroker.server.partition import Partition
from pybroker.server.replica_manager import FetchPartitionRequest, ReplicaManager
from pybroker.types import TopicPartition
from tests.mock_time import MockTime
from tests.unit.batches import build_batch

TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAA"
TP = TopicPartition("t", 0)
CONFIG = BrokerConfig({})


def leader(tmp_path, time: MockTime) -> ReplicaManager:
    manager = LogManager([str(tmp_path)], lambda topic: CONFIG.log_config(), node_id=1, cluster_id="c", time=time)
    manager.load()
    replicas = ReplicaManager(1, manager, MetadataCache(1), time=time)
    partition = Partition(TP, TOPIC_ID, 1, manager.get_or_create_log(TP, TOPIC_ID))
    partition.make_leader(PartitionState(TP, 0, 1, 0, [1], 0, [1]), now_ms=0)
    replicas.host_partition(partition)
    return replicas


def append(replicas: ReplicaManager, value: bytes = b"v") -> None:
    records = memoryview(bytearray(build_batch([(None, value)])))
    assert replicas.append_records(1, 1000, [(TP, records)])[TP].error == ErrorCode.NONE


def fetch(replicas: ReplicaManager, offset: int, min_bytes: int, max_bytes: int = 200, epoch: int = -1):
    return replicas.fetch_messages(-1, 1000, min_bytes, max_bytes,
                                   [FetchPartitionRequest(TP, offset, max_bytes, epoch)])


def test_a_fetch_behind_the_high_watermarks_segment_is_answered_at_once(tmp_path):
    """The issue's compacted topic of 200-byte segments: each fetch of min_bytes=max_bytes=200
    waited out max_wait (1,002 ms against Kafka's 2 ms); one segment's batch is all a read can
    return, so Kafka answers at once."""

    async def run() -> None:
        replicas = leader(tmp_path, MockTime())
        log_ = replicas.partitions[TP].log
        for _ in range(3):
            append(replicas)
            log_.roll()
        append(replicas)
        answer = fetch(replicas, 0, min_bytes=200)
        assert isinstance(answer, dict), "parked instead of answered"
        assert answer[TP].error == ErrorCode.NONE and len(answer[TP].records) > 0
        # At the high watermark's own segment there is nothing more to read: it waits.
        parked = fetch(replicas, log_.high_watermark - 1, min_bytes=200)
        assert asyncio.isfuture(parked)
        parked.cancel()

    asyncio.run(run())


def test_a_fetch_at_the_end_of_a_rolled_segment_waits(tmp_path):
    """Just after a roll, the high watermark is the new segment's base: a fetch at it waits
    (Kafka compares offsets before segments, so a roll alone completes nothing)."""

    async def run() -> None:
        replicas = leader(tmp_path, MockTime())
        append(replicas)
        replicas.partitions[TP].log.roll()
        parked = fetch(replicas, 1, min_bytes=1)
        assert asyncio.isfuture(parked) and not parked.done()
        append(replicas)  # G: a byte is readable now
        await asyncio.sleep(0)
        assert parked.done() and len(parked.result()[TP].records) > 0

    asyncio.run(run())


def test_a_parked_fetch_completes_when_the_high_watermark_moves_to_a_newer_segment(tmp_path):
    """F while parked: the partition rolls and the high watermark moves past the fetch offset's
    segment, without min_bytes to read."""

    async def run() -> None:
        replicas = leader(tmp_path, MockTime())
        append(replicas)
        parked = fetch(replicas, 0, min_bytes=10_000, max_bytes=10_000)
        assert asyncio.isfuture(parked)
        replicas.partitions[TP].log.roll()
        append(replicas)
        await asyncio.sleep(0)
        assert parked.done() and parked.result()[TP].error == ErrorCode.NONE

    asyncio.run(run())


def test_a_parked_fetch_completes_with_the_error_when_the_replica_stops_leading(tmp_path):
    """A: the partition became a follower while the fetch waited; it answers
    NOT_LEADER_OR_FOLLOWER at once instead of after max_wait."""

    async def run() -> None:
        time = MockTime()
        replicas = leader(tmp_path, time)
        append(replicas)
        parked = fetch(replicas, 1, min_bytes=1)
        assert asyncio.isfuture(parked)
        replicas.partitions[TP].make_follower(PartitionState(TP, 0, 2, 1, [1, 2], 0, [1, 2]))
        replicas.complete_delayed_operations(TP)
        await asyncio.sleep(0)
        assert parked.done() and parked.result()[TP].error == ErrorCode.NOT_LEADER_OR_FOLLOWER

    asyncio.run(run())


def test_a_fetch_with_a_fenced_epoch_or_out_of_range_offset_is_answered_at_once(tmp_path):
    async def run() -> None:
        replicas = leader(tmp_path, MockTime())
        append(replicas)
        replicas.partitions[TP].make_leader(PartitionState(TP, 0, 1, 1, [1], 0, [1]), now_ms=0)
        fenced = fetch(replicas, 1, min_bytes=1, epoch=0)
        assert isinstance(fenced, dict) and fenced[TP].error == ErrorCode.FENCED_LEADER_EPOCH
        out_of_range = fetch(replicas, 5, min_bytes=1)
        assert isinstance(out_of_range, dict) and out_of_range[TP].error == ErrorCode.OFFSET_OUT_OF_RANGE

    asyncio.run(run())
