"""How this broker applies the controller's requests: LeaderAndIsr, UpdateMetadata, StopReplica.

Owns Kafka's ``KafkaApis.handleLeaderAndIsrRequest`` / ``handleUpdateMetadataRequest`` /
``handleStopReplicaRequest`` behind the wire: the fences (a request meant for an earlier
incarnation of this broker answers STALE_BROKER_EPOCH; one from a controller older than the
newest seen, STALE_CONTROLLER_EPOCH), then the replica manager and the metadata cache, then the
consequences for the group coordinator (it follows the leadership of ``__consumer_offsets``
partitions; the offsets of deleted partitions go) and the transaction coordinator (it follows the
leadership of ``__transaction_state`` partitions). The wire handlers and the in-process channel
of a single broker both end here. Runs on the event loop.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from pybroker.common.cluster import LiveBroker
from pybroker.common.errors import ErrorCode
from pybroker.controller.requests import ControlResponse, LeaderAndIsr, StopReplica, UpdateMetadata
from pybroker.server.group.coordinator import GroupCoordinator
from pybroker.server.metadata_cache import MetadataCache
from pybroker.server.replica_manager import ReplicaManager
from pybroker.server.transaction.coordinator import TransactionCoordinator

log = logging.getLogger(__name__)

ControlRequest = LeaderAndIsr | UpdateMetadata | StopReplica


class BrokerControl:
    """The controller's requests, applied to this broker."""

    def __init__(
        self, replica_manager: ReplicaManager, metadata_cache: MetadataCache,
        group_coordinator: GroupCoordinator, broker_epoch: Callable[[], int],
        transaction_coordinator: TransactionCoordinator | None = None,
    ) -> None:
        self.replica_manager = replica_manager
        self.metadata_cache = metadata_cache
        self.group_coordinator = group_coordinator
        self.transaction_coordinator = transaction_coordinator
        self._broker_epoch = broker_epoch

    async def handle(self, request: ControlRequest) -> ControlResponse:
        if 0 <= request.broker_epoch < self._broker_epoch():
            return ControlResponse(ErrorCode.STALE_BROKER_EPOCH)
        if isinstance(request, LeaderAndIsr):
            return await self.leader_and_isr(request)
        if isinstance(request, UpdateMetadata):
            return self.update_metadata(request)
        return await self.stop_replica(request)

    async def leader_and_isr(self, request: LeaderAndIsr) -> ControlResponse:
        outcome = await self.replica_manager.become_leader_or_follower(request)
        if outcome.error == ErrorCode.NONE:
            self.group_coordinator.on_leadership_change(
                [(p.topic_partition, p.leader_epoch) for p in outcome.leaders],
                [(p.topic_partition, p.leader_epoch) for p in outcome.followers],
            )
            # --- transactions: the coordinator follows __transaction_state's leadership ---
            if self.transaction_coordinator is not None:
                self.transaction_coordinator.on_leadership_change(
                    [(p.topic_partition, p.leader_epoch) for p in outcome.leaders],
                    [(p.topic_partition, p.leader_epoch) for p in outcome.followers],
                )
        return ControlResponse(outcome.error, outcome.partition_errors)

    def update_metadata(self, request: UpdateMetadata) -> ControlResponse:
        if request.controller_epoch < self.replica_manager.controller_epoch:
            return ControlResponse(ErrorCode.STALE_CONTROLLER_EPOCH)
        self.replica_manager.controller_epoch = request.controller_epoch
        deleted = self.metadata_cache.update_metadata(request)
        if deleted:
            self.group_coordinator.on_partitions_deleted(deleted)
        return ControlResponse()

    async def stop_replica(self, request: StopReplica) -> ControlResponse:
        response = await self.replica_manager.stop_replicas(request)
        if response.error == ErrorCode.NONE:
            # As Kafka: the StopReplica's leader epoch orders the resignation, unless it has none.
            self.group_coordinator.on_leadership_change([], [
                (s.topic_partition, s.leader_epoch if s.leader_epoch >= 0 else None)
                for s in request.partitions if s.topic_partition not in response.partition_errors
            ])
            # --- transactions: the coordinator follows __transaction_state's leadership ---
            if self.transaction_coordinator is not None:
                self.transaction_coordinator.on_leadership_change([], [
                    (s.topic_partition, s.leader_epoch if s.leader_epoch >= 0 else None)
                    for s in request.partitions if s.topic_partition not in response.partition_errors
                ])
        return response


class InProcessBrokerChannel:
    """The controller's channel to the broker it runs in, when nothing else is in the cluster:
    requests are applied directly, without encoding them."""

    def __init__(self, control: BrokerControl, broker: LiveBroker) -> None:
        self._control = control
        self.broker = broker

    async def send(self, request: ControlRequest) -> ControlResponse:
        return await self._control.handle(request)

    async def close(self) -> None:
        pass
