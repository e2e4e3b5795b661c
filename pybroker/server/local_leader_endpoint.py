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

from pybroker.common.errors import ErrorCode, KafkaError
from pybroker.log.log import Log
from pybroker.replication.fetcher import (
    EpochEndOffset,
    FetchRequestData,
    FetchResponsePartition,
    LeaderEndPointError,
)
from pybroker.server.partition import Partition
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

    def _partition(self, tp: TopicPartition) -> Partition:
        self._check()
        partition = self.leader.get_partition(tp)
        if partition is None:
            raise LeaderEndPointError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        return partition

    def _leader_log(self, tp: TopicPartition, current_leader_epoch: int) -> Log:
        partition = self._partition(tp)
        try:
            return partition.local_log(current_leader_epoch)
        except KafkaError as e:
            raise LeaderEndPointError(e.code, str(e)) from e

    async def fetch_earliest_offset(self, tp: TopicPartition, current_leader_epoch: int) -> int:
        return self._leader_log(tp, current_leader_epoch).log_start_offset

    async def fetch_latest_offset(self, tp: TopicPartition, current_leader_epoch: int) -> int:
        return self._leader_log(tp, current_leader_epoch).log_end_offset

    async def fetch_epoch_end_offsets(
        self, partitions: dict[TopicPartition, tuple[int, int]]
    ) -> dict[TopicPartition, EpochEndOffset]:
        answers = {}
        for tp, (current_epoch, epoch) in partitions.items():
            try:
                answers[tp] = EpochEndOffset(
                    ErrorCode.NONE, *self._partition(tp).last_offset_for_leader_epoch(current_epoch, epoch)
                )
            except KafkaError as e:
                answers[tp] = EpochEndOffset(e.code)
        return answers

    async def close(self) -> None:
        pass
