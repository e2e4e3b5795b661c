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

Losing the store: while its connection is lost (SUSPENDED) the controller acts on nothing (the
event task waits between events; an event under way waits in its store calls), because another
broker may be elected meanwhile: kazoo notices a silent connection within two thirds of the
session timeout, before the session can expire. When the session expires the controller resigns
at once (Kafka's Expire event), and nothing it decided is written or sent afterwards: its store
writes are bound to the session that elected it, and `_send` sends only while it is active.
The re-registered broker then runs the election again.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from pybroker.controller.channel import ControllerBrokerRequestBatch, ControllerChannelManager
from pybroker.controller.election import LeaderAndIsr as LeaderAndIsrValue
from pybroker.controller.election import (
    elect_controlled_shutdown,
    elect_offline,
    remove_replica_from_isr,
)
from pybroker.controller.metadata import PartitionAssignment, TopicMetadata
from pybroker.controller.requests import (
    EPOCH_DURING_DELETE,
    LEADER_DURING_DELETE,
    ControlResponse,
    LiveBroker,
    PartitionState,
    StopReplicaPartition,
)
from pybroker.controller.store import (
    ControllerMovedError,
    ControllerStore,
    PartitionEpochConflictError,
    StoreListener,
)
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
    shutting_down: set[int] = field(default_factory=set)  # brokers in controlled shutdown

    @property
    def eligible_brokers(self) -> set[int]:
        """Brokers that may lead or join an ISR: live and not shutting down (Kafka's
        liveBrokerIds; a shutting-down broker still receives requests)."""
        return set(self.live_brokers) - self.shutting_down

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


def _value(p: PartitionAssignment) -> LeaderAndIsrValue:
    """A stored partition state as the election functions take it."""
    return LeaderAndIsrValue(p.leader, p.leader_epoch, tuple(p.isr), partition_epoch=p.partition_epoch)


class Controller:
    """Runs for as long as the broker does; acts while it is the active controller."""

    def __init__(
        self, broker_id: int, store: ControllerStore, channels: ControllerChannelManager,
        unclean_leader_election_default: bool = False,
    ) -> None:
        self.broker_id = broker_id
        self.unclean_leader_election_default = unclean_leader_election_default
        self.store = store
        self.channels = channels
        self.context = ControllerContext()
        self.active = False
        self._queue: asyncio.Queue[tuple[str, Event]] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None
        self._connected = asyncio.Event()  # the store's connection: events wait while it is lost
        self._connected.set()

    def listener(self, base: StoreListener) -> StoreListener:
        """``base`` with the controller's watches added (the store's notifications become events)."""
        base.on_brokers_changed = lambda: self._enqueue("BrokerChange", self._process_broker_change)
        base.on_topics_changed = lambda: self._enqueue("TopicChange", self._process_topic_change)
        base.on_topic_deletions = lambda: self._enqueue("TopicDeletion", self._process_topic_deletion)
        base.on_controller_changed = lambda: self._enqueue("Reelect", self._elect)
        base.on_connection_suspended = self._on_connection_suspended
        base.on_connection_resumed = self._on_connection_resumed
        base.on_session_expired = self._on_session_expired
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
            await self._connected.wait()
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

    # --- the store's session -------------------------------------------------------------------

    def _on_connection_suspended(self) -> None:
        self._connected.clear()
        if self.active:
            log.warning("Controller %d lost its ZooKeeper connection: it does not act until the connection is back",
                        self.broker_id)

    def _on_connection_resumed(self) -> None:
        if not self._connected.is_set() and self.active:
            log.info("Controller %d has its ZooKeeper connection back and acts again", self.broker_id)
        self._connected.set()

    def _on_session_expired(self) -> None:
        """Kafka's Expire: resign now, ahead of every queued event (those find it inactive)."""
        if self.active:
            log.warning("Controller %d: its ZooKeeper session expired", self.broker_id)
        self._resign()

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
        await self._elect_offline_partitions()
        # Replicas on brokers that are not registered go offline (Kafka's replica state machine
        # start-up): they leave the ISRs, and a leader that could not be replaced becomes -1,
        # as if this controller had seen their brokers die.
        dead = {r for topic in ctx.topics.values() for p in topic.partitions for r in p.replicas} - set(ctx.live_brokers)
        if dead:
            await self._remove_replicas_from_isr(dead)
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

    # --- requests from brokers -----------------------------------------------------------------

    async def controlled_shutdown(self, broker_id: int, broker_epoch: int) -> tuple[ErrorCode, list[TopicPartition]]:
        """ControlledShutdown (key 7), processed as an event: move away the leadership of every
        replicated partition ``broker_id`` leads, take it out of the ISRs it follows in, and
        answer the partitions it still leads (Kafka's doControlledShutdown)."""
        answer: asyncio.Future[tuple[ErrorCode, list[TopicPartition]]] = asyncio.get_running_loop().create_future()

        async def process() -> None:
            if not answer.done():
                answer.set_result(await self._do_controlled_shutdown(broker_id, broker_epoch))

        self._enqueue("ControlledShutdown", process)
        return await answer

    async def _do_controlled_shutdown(self, broker_id: int, broker_epoch: int) -> tuple[ErrorCode, list[TopicPartition]]:
        ctx = self.context
        if not self.active:
            return ErrorCode.NOT_CONTROLLER, []
        if broker_id not in ctx.live_brokers:
            return ErrorCode.BROKER_NOT_AVAILABLE, []
        if 0 <= broker_epoch < ctx.broker_epochs.get(broker_id, -1):
            return ErrorCode.STALE_BROKER_EPOCH, []
        ctx.shutting_down.add(broker_id)
        log.info("Broker %d is shutting down: moving its leaderships away", broker_id)
        led: list[tuple[TopicMetadata, int, LeaderAndIsrValue, tuple[int, ...]]] = []
        followed: list[tuple[TopicMetadata, int]] = []
        for topic in ctx.topics.values():
            if topic.name in ctx.topics_being_deleted:
                continue
            for index, p in enumerate(topic.partitions):
                if p.leader_epoch < 0 or broker_id not in p.replicas or len(p.replicas) < 2:
                    continue
                if p.leader == broker_id:
                    result = elect_controlled_shutdown(_value(p), p.replicas, ctx.eligible_brokers, ctx.shutting_down)
                    if result.leader_and_isr is not None:
                        led.append((topic, index, result.leader_and_isr, result.recipients))
                else:
                    followed.append((topic, index))
        await self._apply_decisions(led)
        if followed:
            batch = self._batch()
            for topic, index in followed:
                batch.add_stop_replica(
                    broker_id, StopReplicaPartition(TopicPartition(topic.name, index),
                                                    topic.partitions[index].leader_epoch, delete=False)
                )
            self._send(batch)
            await self._remove_replicas_from_isr({broker_id}, [(t, i) for t, i in followed])
        remaining = [
            TopicPartition(topic.name, index)
            for topic in ctx.topics.values() for index, p in enumerate(topic.partitions)
            if p.leader == broker_id and len(p.replicas) > 1
        ]
        return ErrorCode.NONE, remaining

    # --- events --------------------------------------------------------------------------------

    async def _process_broker_change(self) -> None:
        """Kafka's BrokerChange: brokers that died (their ephemeral node is gone), started, or
        bounced (registered again with a newer broker epoch: a failure then a start-up)."""
        if not self.active:
            return
        ctx = self.context
        before, before_epochs = set(ctx.live_brokers), dict(ctx.broker_epochs)
        await self._refresh_brokers()
        after = set(ctx.live_brokers)
        bounced = {b for b in before & after if ctx.broker_epochs[b] > before_epochs.get(b, -1)}
        dead, started = (before - after) | bounced, (after - before) | bounced
        ctx.shutting_down -= dead
        if dead:
            log.info("Broker(s) %s failed%s", sorted(dead), f" ({sorted(bounced)} bounced)" if bounced else "")
            await self._on_broker_failure(dead)
        if started:
            log.info("Broker(s) %s started", sorted(started))
            await self._on_broker_startup(started)
        if not dead and not started and before != after:
            batch = self._batch()
            batch.add_update_metadata(after, [])
            self._send(batch)

    async def _on_broker_failure(self, dead: set[int]) -> None:
        """Partitions led by a dead broker elect a new leader among their live in-sync replicas;
        dead replicas leave the ISRs they were in (leader epoch +1). When nothing changed, an
        UpdateMetadata still tells every broker the new set of live brokers."""
        changed = await self._elect_offline_partitions()
        changed += await self._remove_replicas_from_isr(dead)
        if not changed:
            batch = self._batch()
            batch.add_update_metadata(set(self.context.live_brokers), [])
            self._send(batch)

    async def _on_broker_startup(self, started: set[int]) -> None:
        """A new broker learns the cluster (the broker list to the others, everything to it), then
        the state of every partition it hosts (it becomes their follower, or leader where it is
        the only choice), and leaderless partitions may now elect it."""
        ctx = self.context
        batch = self._batch()
        batch.add_update_metadata(set(ctx.live_brokers) - started, [])
        self._send(batch)
        batch = self._batch()
        batch.add_update_metadata(started, [
            ctx.state(topic, index) for topic in ctx.topics.values()
            for index in range(len(topic.partitions)) if topic.partitions[index].leader_epoch >= 0
        ])
        self._send(batch)
        batch = self._batch()
        for topic in ctx.topics.values():
            for index, p in enumerate(topic.partitions):
                hosts = [r for r in p.replicas if r in started]
                if hosts and p.leader_epoch >= 0:
                    batch.add_leader_and_isr(hosts, ctx.state(topic, index), set(ctx.live_brokers))
        self._send(batch)
        await self._elect_offline_partitions()
        await self._resume_topic_deletions()

    async def _elect_offline_partitions(self) -> int:
        """Kafka's triggerOnlinePartitionStateChange: every partition with a state whose leader is
        not alive runs the offline election (first live in-sync replica in assignment order;
        an unclean one only where the topic allows it). Returns how many partitions changed."""
        ctx = self.context
        decided: list[tuple[TopicMetadata, int, LeaderAndIsrValue, tuple[int, ...]]] = []
        for topic in ctx.topics.values():
            if topic.name in ctx.topics_being_deleted:
                continue
            unclean = self._unclean_enabled(topic.name)
            for index, p in enumerate(topic.partitions):
                if p.leader_epoch < 0 or p.leader in ctx.eligible_brokers:
                    continue
                result = elect_offline(_value(p), p.replicas, ctx.eligible_brokers, unclean)
                if result.leader_and_isr is None:
                    log.warning("Partition %s-%d has no live in-sync replica (ISR %s); it stays offline",
                                topic.name, index, p.isr)
                    continue
                if result.unclean:
                    log.warning("Unclean leader election for %s-%d: broker %d was not in sync; records may be lost",
                                topic.name, index, result.leader_and_isr.leader)
                decided.append((topic, index, result.leader_and_isr, result.recipients))
        return await self._apply_decisions(decided)

    async def _remove_replicas_from_isr(
        self, replicas: set[int], only: list[tuple[TopicMetadata, int]] | None = None
    ) -> int:
        """Kafka's OfflineReplica transition: each of ``replicas`` leaves the ISRs it is in (the
        leader becomes -1 if it led; an ISR never becomes empty), leader epoch +1; the other
        live replicas are told."""
        ctx = self.context
        decided: list[tuple[TopicMetadata, int, LeaderAndIsrValue, tuple[int, ...]]] = []
        candidates = only if only is not None else [
            (topic, index) for topic in ctx.topics.values() if topic.name not in ctx.topics_being_deleted
            for index in range(len(topic.partitions))
        ]
        for topic, index in candidates:
            p = topic.partitions[index]
            if p.leader_epoch >= 0:
                original = current = _value(p)
                for replica in sorted(replicas & set(p.isr)):
                    current = remove_replica_from_isr(current, replica) or current
                if current != original:
                    recipients = tuple(r for r in p.replicas if r in ctx.live_brokers and r not in replicas)
                    decided.append((topic, index, current, recipients))
        return await self._apply_decisions(decided)

    async def _apply_decisions(
        self, decided: list[tuple[TopicMetadata, int, LeaderAndIsrValue, tuple[int, ...]]]
    ) -> int:
        """Write the decided states (conditionally on the partition epochs they were based on),
        then LeaderAndIsr to their recipients and UpdateMetadata to every live broker."""
        if not decided:
            return 0
        ctx = self.context
        writes: dict[str, dict[int, PartitionAssignment]] = {}
        for topic, index, value, _ in decided:
            p = topic.partitions[index]
            writes.setdefault(topic.name, {})[index] = PartitionAssignment(
                list(p.replicas), leader=value.leader, leader_epoch=value.leader_epoch, isr=list(value.isr),
                partition_epoch=p.partition_epoch, controller_epoch=ctx.epoch,
            )
        conflicts: set[tuple[str, int]] = set()
        try:
            await self.store.write_partition_states(ctx.epoch, writes)
        except PartitionEpochConflictError as e:
            conflicts = set(e.partitions)
            log.warning("%s; they are read again and decided next time", e)
            for name in {topic for topic, _ in conflicts}:
                fresh = await self.store.read_topics([name])
                if name in fresh and name in ctx.topics:
                    ctx.topics[name].partitions = fresh[name].partitions
        batch = self._batch()
        applied = 0
        for topic, index, _, recipients in decided:
            if (topic.name, index) in conflicts:
                continue
            topic.partitions[index] = writes[topic.name][index]
            batch.add_leader_and_isr(list(recipients), ctx.state(topic, index), set(ctx.live_brokers))
            applied += 1
        self._send(batch)
        return applied

    def _unclean_enabled(self, topic: str) -> bool:
        value = self.store.topic_configs(topic).get("unclean.leader.election.enable")
        return self.unclean_leader_election_default if value is None else value.lower() == "true"

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
        if not self.active:  # resigned during the event (its session expired): decided nothing
            return {}
        ctx = self.context
        return batch.send(self.channels, ctx.live_brokers, ctx.broker_epochs, ctx.topic_ids)
