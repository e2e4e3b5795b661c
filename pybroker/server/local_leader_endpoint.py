"""A ``LeaderEndPoint`` over a leader ``ReplicaManager`` in the same process.

Owns the in-memory path between a ``ReplicaFetcher`` and a leader: the fetch goes through
``ReplicaManager.fetch_messages`` as a follower fetch (replica id ≥ 0), so the leader-side rules
(epoch fencing, DivergingEpoch, HW before the fetch, follower state, purgatory parking) run for
real; ListOffsets EARLIEST/LATEST and OffsetsForLeaderEpoch are answered from the leader's
partition as Kafka answers a replica. Used by unit tests and usable for in-process clusters; all
on the event loop.
"""

from __future__ import annotations

import asyncio

from pybroker.protocol.errors import ErrorCode
from pybroker.replication.fetcher import (
    EpochEndOffset,
    FetchRequestData,
    FetchResponsePartition,
    LeaderEndPointError,
)
from pybroker.server.partition import FencedLeaderEpochError, Partition, UnknownLeaderEpochError
from pybroker.server.replica_manager import FetchPartitionRequest, ReplicaManager
from pybroker.types import TopicPartition


class LocalLeaderEndPoint:
    """Talks to ``leader`` directly; ``fail_with`` makes every call raise (a broken link)."""

    def __init__(self, leader: ReplicaManager, replica_id: int) -> None:
        self.leader = leader
        self.replica_id = replica_id
        self.fail_with: BaseException | None = None
        self.fetches = 0

    def _check(self) -> None:
        if self.fail_with is not None:
            raise self.fail_with

    async def fetch(self, request: FetchRequestData) -> dict[TopicPartition, FetchResponsePartition]:
        self._check()
        self.fetches += 1
        partitions = [
            FetchPartitionRequest(
                p.topic_partition, p.fetch_offset, p.max_bytes, p.current_leader_epoch, p.log_start_offset,
                p.last_fetched_epoch,
            )
            for p in request.partitions
        ]
        outcome = self.leader.fetch_messages(
            request.replica_id, request.max_wait_ms, request.min_bytes, request.max_bytes, partitions
        )
        results = await outcome if asyncio.isfuture(outcome) else outcome
        self._check()
        return {
            tp: FetchResponsePartition(
                r.error, r.high_watermark, r.log_start_offset,
                r.records if isinstance(r.records, bytes) else r.records.read(), r.diverging_epoch,
            )
            for tp, r in results.items()
        }

    def _partition(self, tp: TopicPartition, current_leader_epoch: int) -> Partition:
        self._check()
        partition = self.leader.get_partition(tp)
        if partition is None:
            raise LeaderEndPointError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        if not partition.is_leader:
            raise LeaderEndPointError(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        try:
            partition.check_leader_epoch(current_leader_epoch)
        except FencedLeaderEpochError as e:
            raise LeaderEndPointError(ErrorCode.FENCED_LEADER_EPOCH, str(e)) from e
        except UnknownLeaderEpochError as e:
            raise LeaderEndPointError(ErrorCode.UNKNOWN_LEADER_EPOCH, str(e)) from e
        return partition

    async def fetch_earliest_offset(self, tp: TopicPartition, current_leader_epoch: int) -> int:
        return self._partition(tp, current_leader_epoch).log.log_start_offset

    async def fetch_latest_offset(self, tp: TopicPartition, current_leader_epoch: int) -> int:
        return self._partition(tp, current_leader_epoch).log.log_end_offset

    async def fetch_epoch_end_offsets(
        self, partitions: dict[TopicPartition, tuple[int, int]]
    ) -> dict[TopicPartition, EpochEndOffset]:
        answers = {}
        for tp, (current_epoch, epoch) in partitions.items():
            try:
                log_ = self._partition(tp, current_epoch).log
            except LeaderEndPointError as e:
                answers[tp] = EpochEndOffset(e.error)
                continue
            answers[tp] = EpochEndOffset(ErrorCode.NONE, *log_.leader_epoch_cache.end_offset_for(epoch, log_.log_end_offset))
        return answers

    async def close(self) -> None:
        pass
