"""The controller's channel to each live broker, and the batching of its requests.

Owns Kafka's ``ControllerChannelManager`` and ``ControllerBrokerRequestBatch``: one FIFO queue
and one sender task per live broker (the controller's own broker included), with one request in
flight, so every broker applies the controller's decisions in the order they were taken; and the
batch a state change fills (per broker: LeaderAndIsr partition states, UpdateMetadata partition
states, StopReplica partitions) and sends in Kafka's order, LeaderAndIsr, then UpdateMetadata,
then StopReplica.

How a request reaches a broker is a `BrokerChannel`: in-process for the single broker (its own
controller) or over a socket in a cluster. A failed send is retried after a back-off until it
succeeds or the broker is removed (Kafka resends forever until the broker dies). All of it runs
on the event loop; the controller owns the manager and calls it from its event task only.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from pybroker.common.cluster import LiveBroker, PartitionState
from pybroker.controller.requests import (
    ControlResponse,
    LeaderAndIsr,
    StopReplica,
    StopReplicaPartition,
    UpdateMetadata,
)

log = logging.getLogger(__name__)

ControlRequest = LeaderAndIsr | UpdateMetadata | StopReplica
RETRY_BACKOFF_S = 0.1


class BrokerChannel(Protocol):
    async def send(self, request: ControlRequest) -> ControlResponse:
        """Deliver ``request`` and return the broker's answer; raises OSError (or another
        exception) when it could not be delivered."""
        ...

    async def close(self) -> None:
        ...


@dataclass
class _Queued:
    request: ControlRequest
    response: asyncio.Future[ControlResponse]


class ControllerChannelManager:
    """One ordered queue per live broker."""

    def __init__(self, connect: Callable[[LiveBroker], BrokerChannel]) -> None:
        self._connect = connect
        self._queues: dict[int, asyncio.Queue[_Queued]] = {}
        self._senders: dict[int, asyncio.Task[None]] = {}
        self._channels: dict[int, BrokerChannel] = {}

    @property
    def broker_ids(self) -> set[int]:
        return set(self._queues)

    def add_broker(self, broker: LiveBroker) -> None:
        if broker.broker_id in self._queues:
            return
        channel = self._connect(broker)
        queue: asyncio.Queue[_Queued] = asyncio.Queue()
        self._channels[broker.broker_id] = channel
        self._queues[broker.broker_id] = queue
        self._senders[broker.broker_id] = asyncio.get_running_loop().create_task(
            self._send_loop(broker.broker_id, channel, queue), name=f"controller-to-broker-{broker.broker_id}"
        )

    async def remove_broker(self, broker_id: int) -> None:
        """Stop sending to ``broker_id``; what was queued for it is dropped."""
        sender = self._senders.pop(broker_id, None)
        queue = self._queues.pop(broker_id, None)
        while queue is not None and not queue.empty():
            queue.get_nowait().response.cancel()
        channel = self._channels.pop(broker_id, None)
        if sender is not None:
            sender.cancel()
            await asyncio.gather(sender, return_exceptions=True)
        if channel is not None:
            await channel.close()

    def send(self, broker_id: int, request: ControlRequest) -> asyncio.Future[ControlResponse] | None:
        """Queue ``request`` for ``broker_id``; the future of its answer (None: not a live broker)."""
        queue = self._queues.get(broker_id)
        if queue is None:
            return None
        response: asyncio.Future[ControlResponse] = asyncio.get_running_loop().create_future()
        queue.put_nowait(_Queued(request, response))
        return response

    async def _send_loop(self, broker_id: int, channel: BrokerChannel, queue: asyncio.Queue[_Queued]) -> None:
        while True:
            queued = await queue.get()
            while True:
                try:
                    answer = await channel.send(queued.request)
                except asyncio.CancelledError:
                    queued.response.cancel()
                    raise
                except Exception as e:
                    log.warning("Sending %s to broker %d failed (%s); retrying",
                                type(queued.request).__name__, broker_id, e)
                    await asyncio.sleep(RETRY_BACKOFF_S)
                    continue
                if not queued.response.done():
                    queued.response.set_result(answer)
                queue.task_done()
                break

    async def flush(self) -> None:
        """Wait until every request queued so far has been answered."""
        await asyncio.gather(*(queue.join() for queue in self._queues.values()))

    async def shutdown(self) -> None:
        for broker_id in list(self._queues):
            await self.remove_broker(broker_id)


@dataclass
class ControllerBrokerRequestBatch:
    """The requests one state change produces, sent together in Kafka's order."""

    controller_id: int
    controller_epoch: int
    leader_and_isr: dict[int, dict[tuple[str, int], PartitionState]] = field(default_factory=dict)
    update_metadata_brokers: set[int] = field(default_factory=set)
    update_metadata_states: dict[tuple[str, int], PartitionState] = field(default_factory=dict)
    stop_replica: dict[int, list[StopReplicaPartition]] = field(default_factory=dict)
    # Filled by `send`: the futures of the LeaderAndIsr answers by broker (KIP-112's
    # KAFKA_STORAGE_ERROR per partition tells the controller of replicas on failed log dirs).
    leader_and_isr_answers: dict[int, asyncio.Future[ControlResponse]] = field(default_factory=dict)

    def add_leader_and_isr(self, broker_ids: list[int], state: PartitionState, metadata_to: set[int]) -> None:
        """LeaderAndIsr for ``state`` to ``broker_ids``, and (as Kafka does for every
        LeaderAndIsr) the same state in the UpdateMetadata to every broker in ``metadata_to``."""
        key = (state.topic_partition.topic, state.topic_partition.partition)
        for broker_id in broker_ids:
            self.leader_and_isr.setdefault(broker_id, {})[key] = state
        self.add_update_metadata(metadata_to, [state])

    def add_update_metadata(self, broker_ids: set[int], states: list[PartitionState]) -> None:
        self.update_metadata_brokers |= broker_ids
        for state in states:
            self.update_metadata_states[(state.topic_partition.topic, state.topic_partition.partition)] = state

    def add_stop_replica(self, broker_id: int, partition: StopReplicaPartition) -> None:
        self.stop_replica.setdefault(broker_id, []).append(partition)

    def send(
        self,
        channels: ControllerChannelManager,
        live_brokers: dict[int, LiveBroker],
        broker_epochs: dict[int, int],
        topic_ids: dict[str, uuid.UUID],
        partition_counts: dict[str, tuple[int, int]] | None = None,
    ) -> dict[int, asyncio.Future[ControlResponse]]:
        """Queue every request of the batch; the futures of the StopReplica answers by broker."""
        for broker_id, states in self.leader_and_isr.items():
            leaders = {s.leader for s in states.values()}
            answer = channels.send(broker_id, LeaderAndIsr(
                self.controller_id, self.controller_epoch, broker_epochs.get(broker_id, -1),
                list(states.values()),
                {s.topic_partition.topic: topic_ids[s.topic_partition.topic]
                 for s in states.values() if s.topic_partition.topic in topic_ids},
                [live_brokers[b] for b in leaders if b in live_brokers],
            ))
            if answer is not None:
                self.leader_and_isr_answers[broker_id] = answer
        updated = list(self.update_metadata_states.values())
        brokers = list(live_brokers.values())
        used_ids = {s.topic_partition.topic: topic_ids[s.topic_partition.topic]
                    for s in updated if s.topic_partition.topic in topic_ids}
        known = partition_counts or {}
        counts = {name: known[name] for name in used_ids if name in known}
        for broker_id in sorted(self.update_metadata_brokers):
            channels.send(broker_id, UpdateMetadata(
                self.controller_id, self.controller_epoch, broker_epochs.get(broker_id, -1), updated, brokers,
                used_ids, counts,
            ))
        stops: dict[int, asyncio.Future[ControlResponse]] = {}
        for broker_id, partitions in self.stop_replica.items():
            future = channels.send(broker_id, StopReplica(
                self.controller_id, self.controller_epoch, broker_epochs.get(broker_id, -1), partitions,
            ))
            if future is not None:
                stops[broker_id] = future
        return stops
