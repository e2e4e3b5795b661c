"""The controller: the one broker that decides leaders, ISRs and topic lifecycles.

Owns Kafka's ``KafkaController`` for this project: one event queue drained by one asyncio task
(Kafka's single controller thread), the controller's view of the cluster (`ControllerContext`:
live brokers and their epochs, every topic's assignment and partition states, the topics being
deleted), and the state changes: becoming controller (failover), new topics and partitions,
topic deletion. Each change is written to the `ControllerStore` first, fenced by the controller
epoch, and then sent to the brokers through the `ControllerChannelManager` in one batch.

The same logic runs over both stores: over `LocalStore` the single broker elects itself and its
channel is in-process; over ZooKeeper every broker runs a `Controller`, and the one that wins
the election acts. Store notifications (watches) only enqueue events; all reads and writes
happen in the event task, in order. `start()` enqueues the election; `shutdown()` stops the
task and the channels.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from pybroker.controller.channel import ControllerBrokerRequestBatch, ControllerChannelManager
from pybroker.controller.metadata import PartitionAssignment, TopicMetadata
from pybroker.controller.requests import (
    EPOCH_DURING_DELETE,
    LEADER_DURING_DELETE,
    ControlResponse,
    LiveBroker,
    PartitionState,
    StopReplicaPartition,
)
from pybroker.controller.store import ControllerMovedError, ControllerStore, StoreListener
from pybroker.protocol.errors import ErrorCode
from pybroker.types import TopicPartition

log = logging.getLogger(__name__)


@dataclass
class ControllerContext:
    """What the active controller knows (Kafka's ControllerContext)."""

    epoch: int = 0
    live_brokers: dict[int, LiveBroker] = field(default_factory=dict)
    broker_epochs: dict[int, int] = field(default_factory=dict)
    topics: dict[str, TopicMetadata] = field(default_factory=dict)
    topics_being_deleted: set[str] = field(default_factory=set)
    deletions_started: set[str] = field(default_factory=set)  # StopReplica sent, answers pending

    def state(self, topic: TopicMetadata, index: int, is_new: bool = False) -> PartitionState:
        p = topic.partitions[index]
        return PartitionState(
            TopicPartition(topic.name, index), p.controller_epoch, p.leader, p.leader_epoch, list(p.isr),
            p.partition_epoch, list(p.replicas),
            offline_replicas=[r for r in p.replicas if r not in self.live_brokers], is_new=is_new,
        )

    @property
    def topic_ids(self) -> dict[str, uuid.UUID]:
        return {name: topic.topic_id for name, topic in self.topics.items()}


Event = Callable[[], Awaitable[None]]


class Controller:
    """Runs for as long as the broker does; acts while it is the active controller."""

    def __init__(
        self, broker_id: int, store: ControllerStore, channels: ControllerChannelManager,
    ) -> None:
        self.broker_id = broker_id
        self.store = store
        self.channels = channels
        self.context = ControllerContext()
        self.active = False
        self._queue: asyncio.Queue[tuple[str, Event]] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None

    def listener(self, base: StoreListener) -> StoreListener:
        """``base`` with the controller's watches added (the store's notifications become events)."""
        base.on_brokers_changed = lambda: self._enqueue("BrokerChange", self._process_broker_change)
        base.on_topics_changed = lambda: self._enqueue("TopicChange", self._process_topic_change)
        base.on_topic_deletions = lambda: self._enqueue("TopicDeletion", self._process_topic_deletion)
        base.on_controller_changed = lambda: self._enqueue("Reelect", self._elect)
        return base

    # --- lifecycle -----------------------------------------------------------------------------

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="controller-event-thread")
        self._enqueue("Startup", self._elect)

    async def shutdown(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        self._resign()
        await self.channels.shutdown()

    def _enqueue(self, name: str, event: Event) -> None:
        self._queue.put_nowait((name, event))

    async def _run(self) -> None:
        while True:
            name, event = await self._queue.get()
            try:
                await event()
            except ControllerMovedError as e:
                log.info("Controller moved while processing %s: %s", name, e)
                self._resign()
            except Exception:
                log.exception("Controller event %s failed", name)

    async def idle(self) -> None:
        """Wait until every event queued so far has been processed (for tests and start-up)."""
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        async def mark() -> None:
            done.set_result(None)

        self._enqueue("Idle", mark)
        await done

    # --- election ------------------------------------------------------------------------------

    async def _elect(self) -> None:
        if self.active:
            if await self.store.controller_id() == self.broker_id:
                return
            self._resign()  # deposed (or our session expired): Kafka's maybeResign, then elect
        epoch = await self.store.try_become_controller(self.broker_id)
        if epoch is None:
            log.info("Broker %s is the controller", await self.store.controller_id())
            return
        self.context = ControllerContext(epoch=epoch)
        self.active = True
        log.info("Broker %d became the controller (epoch %d)", self.broker_id, epoch)
        await self._on_controller_failover()

    def _resign(self) -> None:
        if self.active:
            log.info("Broker %d resigned as controller", self.broker_id)
        self.active = False

    async def _on_controller_failover(self) -> None:
        ctx = self.context
        await self._refresh_brokers()
        ctx.topics = await self.store.read_topics(await self.store.topic_names())
        ctx.topics_being_deleted = await self.store.topics_marked_for_deletion() & set(ctx.topics)
        # First the live brokers alone, so that every broker knows every leader's endpoint.
        batch = self._batch()
        batch.add_update_metadata(set(ctx.live_brokers), [])
        self._send(batch)
        # Every replica on a live broker: LeaderAndIsr with the current state (OnlineReplica).
        batch = self._batch()
        new: list[tuple[TopicMetadata, int]] = []
        for topic in ctx.topics.values():
            for index, p in enumerate(topic.partitions):
                if p.leader_epoch < 0:
                    new.append((topic, index))
                    continue
                state = ctx.state(topic, index)
                batch.add_leader_and_isr(
                    [r for r in p.replicas if r in ctx.live_brokers], state, set(ctx.live_brokers)
                )
        self._send(batch)
        await self._on_new_partition_creation(new)
        await self._resume_topic_deletions()

    async def _refresh_brokers(self) -> None:
        registered = await self.store.live_brokers()
        ctx = self.context
        ctx.live_brokers = {broker_id: broker for broker_id, (broker, _) in registered.items()}
        ctx.broker_epochs = {broker_id: epoch for broker_id, (_, epoch) in registered.items()}
        for broker_id in self.channels.broker_ids - set(ctx.live_brokers):
            await self.channels.remove_broker(broker_id)
        for broker in ctx.live_brokers.values():
            self.channels.add_broker(broker)

    # --- events --------------------------------------------------------------------------------

    async def _process_broker_change(self) -> None:
        if not self.active:
            return
        before = set(self.context.live_brokers)
        await self._refresh_brokers()
        after = set(self.context.live_brokers)
        if before != after:
            batch = self._batch()
            batch.add_update_metadata(after, [])
            self._send(batch)

    async def _process_topic_change(self) -> None:
        if not self.active:
            return
        ctx = self.context
        names = await self.store.topic_names()
        for gone in set(ctx.topics) - names:
            del ctx.topics[gone]
        changed = await self.store.read_topics(names)
        new: list[tuple[TopicMetadata, int]] = []
        for name, topic in changed.items():
            known = ctx.topics.get(name)
            first_new = 0 if known is None or known.topic_id != topic.topic_id else len(known.partitions)
            if known is not None and known.topic_id == topic.topic_id:
                known.partitions.extend(topic.partitions[first_new:])
                known.configs = topic.configs
                topic = known
            else:
                ctx.topics[name] = topic
            new += [(topic, index) for index in range(first_new, len(topic.partitions))
                    if topic.partitions[index].leader_epoch < 0]
        await self._on_new_partition_creation(new)

    async def _process_topic_deletion(self) -> None:
        if not self.active:
            return
        ctx = self.context
        ctx.topics_being_deleted |= await self.store.topics_marked_for_deletion() & set(ctx.topics)
        await self._resume_topic_deletions()

    # --- state changes -------------------------------------------------------------------------

    async def _on_new_partition_creation(self, partitions: list[tuple[TopicMetadata, int]]) -> None:
        """New partitions get their first leader (the first live replica) and ISR (every live
        replica), leader epoch 0; LeaderAndIsr (IsNew) to the ISR, UpdateMetadata to all."""
        if not partitions:
            return
        ctx = self.context
        writes: dict[str, dict[int, PartitionAssignment]] = {}
        started: list[tuple[TopicMetadata, int]] = []
        for topic, index in partitions:
            replicas = topic.partitions[index].replicas
            live = [r for r in replicas if r in ctx.live_brokers]
            if not live:
                log.error("Partition %s-%d has no live replica (replicas %s); it stays offline",
                          topic.name, index, replicas)
                continue
            writes.setdefault(topic.name, {})[index] = PartitionAssignment(
                list(replicas), leader=live[0], leader_epoch=0, isr=live, partition_epoch=0,
                controller_epoch=ctx.epoch,
            )
            started.append((topic, index))
        await self.store.write_partition_states(ctx.epoch, writes)
        batch = self._batch()
        for topic, index in started:
            topic.partitions[index] = writes[topic.name][index]
            state = ctx.state(topic, index, is_new=True)
            batch.add_leader_and_isr(state.isr, state, set(ctx.live_brokers))
        self._send(batch)

    async def _resume_topic_deletions(self) -> None:
        """Delete every topic marked for deletion whose replicas are all on live brokers:
        UpdateMetadata with leader -2 to all brokers, StopReplica (delete) to every replica,
        and once every replica answered without error, the topic leaves the store."""
        ctx = self.context
        for name in sorted(ctx.topics_being_deleted):
            topic = ctx.topics.get(name)
            if topic is None:
                ctx.topics_being_deleted.discard(name)
                continue
            if name in ctx.deletions_started:
                continue
            offline = {r for p in topic.partitions for r in p.replicas if r not in ctx.live_brokers}
            if offline:
                log.info("Deletion of topic %s waits for broker(s) %s", name, sorted(offline))
                continue
            batch = self._batch()
            deleting = []
            for index in range(len(topic.partitions)):
                state = ctx.state(topic, index)
                state.leader = LEADER_DURING_DELETE
                deleting.append(state)
                for replica in topic.partitions[index].replicas:
                    batch.add_stop_replica(
                        replica, StopReplicaPartition(state.topic_partition, EPOCH_DURING_DELETE, delete=True)
                    )
            batch.add_update_metadata(set(ctx.live_brokers), deleting)
            ctx.deletions_started.add(name)
            answers = list(self._send(batch).values())
            asyncio.get_running_loop().create_task(self._await_stop_replicas(name, topic, answers))

    async def _await_stop_replicas(
        self, name: str, topic: TopicMetadata, answers: list[asyncio.Future[ControlResponse]]
    ) -> None:
        """Wait for a deletion's StopReplica answers, then hand them to the event task."""
        results = await asyncio.gather(*answers, return_exceptions=True)
        failed = [r for r in results if not isinstance(r, ControlResponse) or r.error != ErrorCode.NONE
                  or r.partition_errors]

        async def stop_replicas_answered() -> None:
            ctx = self.context
            ctx.deletions_started.discard(name)
            if not self.active or ctx.topics.get(name) is not topic:
                return
            if failed:
                log.warning("Deletion of topic %s is retried later: %s", name, failed)
                return
            await self.store.remove_topic(ctx.epoch, name)
            del ctx.topics[name]
            ctx.topics_being_deleted.discard(name)
            log.info("Deleted topic %s", name)

        self._enqueue("TopicDeletionStopReplicaResponseReceived", stop_replicas_answered)

    # --- sending -------------------------------------------------------------------------------

    def _batch(self) -> ControllerBrokerRequestBatch:
        return ControllerBrokerRequestBatch(self.broker_id, self.context.epoch)

    def _send(self, batch: ControllerBrokerRequestBatch) -> dict[int, asyncio.Future[ControlResponse]]:
        ctx = self.context
        return batch.send(self.channels, ctx.live_brokers, ctx.broker_epochs, ctx.topic_ids)
