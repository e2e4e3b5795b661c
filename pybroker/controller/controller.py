"""The controller: the one broker that decides leaders, ISRs and topic lifecycles.

Owns Kafka's ``KafkaController`` for this project: one event queue drained by one asyncio task
(Kafka's single controller thread), the controller's view of the cluster (`ControllerContext`:
live brokers and their epochs, every topic's assignment and partition states, the topics being
deleted), and the state changes: becoming controller (failover), new topics and partitions,
topic deletion, controlled shutdown, the ISR changes partition leaders ask for
(AlterPartition), the leader elections an administrator asks for (ElectLeaders), partition
reassignments (AlterPartitionReassignments, ListPartitionReassignments: their steps are
`pybroker.controller.reassignment`'s, called from here) and the
periodic automatic preferred-leader rebalance (``auto.leader.rebalance.enable``, on an injected
`Scheduler`). Each change is written to the `ControllerStore` first, fenced by the controller
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
from collections.abc import Awaitable, Callable, Collection, Mapping
from dataclasses import dataclass

from pybroker.common.cluster import (
    EPOCH_DURING_DELETE,
    LEADER_DURING_DELETE,
    PartitionState,
)
from pybroker.common.errors import ErrorCode
from pybroker.common.topic import PartitionAssignment, TopicMetadata
from pybroker.controller.alter_partition import (
    RECOVERED,
    AlterPartition,
    AlterPartitionAnswer,
    IsrProposal,
    PartitionResult,
)
from pybroker.controller.channel import ControllerBrokerRequestBatch, ControllerChannelManager
from pybroker.controller.context import ControllerContext
from pybroker.controller.election import (
    DEFAULT_LEADER_IMBALANCE_PERCENTAGE,
    ElectionType,
    ElectLeadersOutcome,
    elect_controlled_shutdown,
    elect_leaders_outcome,
    elect_offline,
    partitions_to_rebalance,
    remove_replica_from_isr,
)
from pybroker.controller.election import LeaderAndIsr as LeaderAndIsrValue
from pybroker.controller.log_offsets import LogOffsetsReader
from pybroker.controller.reassignment import (
    AlterReassignmentsAnswer,
    ListReassignmentsAnswer,
    PartitionReassignments,
)
from pybroker.controller.requests import ControlResponse, StopReplicaPartition
from pybroker.controller.requests import LeaderAndIsr as LeaderAndIsrRequest
from pybroker.controller.store import (
    ControllerMovedError,
    ControllerStore,
    PartitionEpochConflictError,
    StoreListener,
)
from pybroker.scheduler import AsyncioScheduler, ScheduledTask, Scheduler
from pybroker.types import TopicPartition

log = logging.getLogger(__name__)
# Kafka's state change logger: "[Controller id=N epoch=E] Changed partition ..." lines.
state_change_log = logging.getLogger("state.change.logger")

AUTO_REBALANCE_FIRST_DELAY_MS = 5000
"""The first leader imbalance check comes this long after becoming controller (Kafka: 5 s)."""
MAX_ELECTION_ATTEMPTS = 5
DEFAULT_PARTITION_DELETION_CHECK_INTERVAL_MS = 1000
"""How often the controller asks whether partitions marked for deletion are drained (KIP-253's
periodic ListOffsets check; ``partition.deletion.check.interval.ms``)."""
"""How often an election is decided again when its partition's stored state changed meanwhile."""


@dataclass(frozen=True)
class AutoLeaderRebalance:
    """``leader.imbalance.check.interval.seconds`` (in ms here) and
    ``leader.imbalance.per.broker.percentage``, for a controller with
    ``auto.leader.rebalance.enable``."""

    check_interval_ms: int = 300_000
    imbalance_percentage: int = DEFAULT_LEADER_IMBALANCE_PERCENTAGE


Event = Callable[[], Awaitable[None]]


def _committed(p: PartitionAssignment) -> PartitionResult:
    """A stored state as an AlterPartition answer."""
    return PartitionResult(ErrorCode.NONE, p.leader, p.leader_epoch, tuple(p.isr), p.partition_epoch)


def _value(p: PartitionAssignment) -> LeaderAndIsrValue:
    """A stored partition state as the election functions take it."""
    return LeaderAndIsrValue(p.leader, p.leader_epoch, tuple(p.isr), partition_epoch=p.partition_epoch)


class Controller:
    """Runs for as long as the broker does; acts while it is the active controller."""

    def __init__(
        self, broker_id: int, store: ControllerStore, channels: ControllerChannelManager,
        unclean_leader_election_default: bool = False,
        auto_leader_rebalance: AutoLeaderRebalance | None = None,
        scheduler: Scheduler | None = None,
        log_offsets: LogOffsetsReader | None = None,
        partition_deletion_check_interval_ms: int = DEFAULT_PARTITION_DELETION_CHECK_INTERVAL_MS,
    ) -> None:
        """``auto_leader_rebalance`` None: no automatic rebalance. ``scheduler`` runs its checks
        (default: one on the running event loop). ``log_offsets`` asks leaders whether the
        partitions marked for deletion are drained (None: they are never removed)."""
        self.broker_id = broker_id
        self.unclean_leader_election_default = unclean_leader_election_default
        self.auto_leader_rebalance = auto_leader_rebalance
        self._scheduler = scheduler
        self._rebalance_task: ScheduledTask | None = None
        self._log_offsets = log_offsets
        self.partition_deletion_check_interval_ms = partition_deletion_check_interval_ms
        self._drain_check: ScheduledTask | None = None
        self.store = store
        self.channels = channels
        self.context = ControllerContext()
        self.active = False
        self._queue: asyncio.Queue[tuple[str, Event]] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None
        self._connected = asyncio.Event()  # the store's connection: events wait while it is lost
        self._connected.set()
        self.reassignments = PartitionReassignments(self)

    def listener(self, base: StoreListener) -> StoreListener:
        """``base`` with the controller's watches added (the store's notifications become events)."""
        base.on_brokers_changed = lambda: self._enqueue("BrokerChange", self._process_broker_change)
        base.on_topics_changed = lambda names: self._enqueue(
            "TopicChange", lambda: self._process_topic_change(None if names is None else set(names)))
        base.on_topic_deletions = lambda: self._enqueue("TopicDeletion", self._process_topic_deletion)
        base.on_controller_changed = lambda: self._enqueue("Reelect", self._elect)
        base.on_connection_suspended = self._on_connection_suspended
        base.on_connection_resumed = self._on_connection_resumed
        base.on_session_expired = self._on_session_expired
        base.on_log_dir_event = lambda: self._enqueue("LogDirEventNotification", self._process_log_dir_event_notification)
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
        log.info("[Controller id=%d] %d successfully elected as the controller. Epoch incremented to %d",
                 self.broker_id, self.broker_id, epoch)
        await self._on_controller_failover()

    def _resign(self) -> None:
        if self.active:
            log.info("[Controller id=%d] Resigned", self.broker_id)
        self.active = False
        if self._rebalance_task is not None:
            self._rebalance_task.cancel()
            self._rebalance_task = None
        if self._drain_check is not None:
            self._drain_check.cancel()
            self._drain_check = None

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
        await self._record_deletions(list(ctx.topics.values()))
        await self._elect_offline_partitions()
        # Replicas on brokers that are not registered go offline (Kafka's replica state machine
        # start-up): they leave the ISRs, and a leader that could not be replaced becomes -1,
        # as if this controller had seen their brokers die.
        dead = {r for topic in ctx.topics.values() for p in topic.partitions for r in p.replicas} - set(ctx.live_brokers)
        if dead:
            await self._remove_replicas_from_isr(dead)
        await self.reassignments.resume(lambda tp, assignment: True)  # Kafka's initializePartitionReassignments
        await self._resume_topic_deletions()
        if self.auto_leader_rebalance is not None:
            self._schedule_auto_leader_rebalance(AUTO_REBALANCE_FIRST_DELAY_MS)

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
                    result = elect_controlled_shutdown(_value(p), p.replicas, ctx.eligible_for(TopicPartition(topic.name, index)),
                                                       ctx.shutting_down)
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

    async def alter_partition(self, request: AlterPartition, version: int) -> AlterPartitionAnswer:
        """AlterPartition (key 56), processed as an event: partition leaders' proposed ISRs
        (Kafka's AlterPartitionReceived). ``version`` is the request's (it picks one error code)."""
        answer: asyncio.Future[AlterPartitionAnswer] = asyncio.get_running_loop().create_future()

        async def process() -> None:
            try:
                result = await self._try_process_alter_partition(request, version)
            except ControllerMovedError:
                if not answer.done():
                    answer.set_result(AlterPartitionAnswer(ErrorCode.NOT_CONTROLLER))
                raise
            except Exception:
                if not answer.done():  # Kafka's processAlterPartition: UNKNOWN_SERVER_ERROR, top level
                    answer.set_result(AlterPartitionAnswer(ErrorCode.UNKNOWN_SERVER_ERROR))
                raise
            if not answer.done():
                answer.set_result(result)
            # After the answer: a successful ISR change may complete a reassignment.
            await self.reassignments.maybe_complete([tp for tp, r in result.partitions.items() if r.error == ErrorCode.NONE])

        self._enqueue("AlterPartitionReceived", process)
        return await answer

    async def _try_process_alter_partition(self, request: AlterPartition, version: int) -> AlterPartitionAnswer:
        """Kafka's tryProcessAlterPartition (ZooKeeper mode, 3.x): fence the broker epoch, check
        each proposal against the cached state, write the accepted ones conditionally on their
        partition epoch, then UpdateMetadata (no LeaderAndIsr) to every live broker for the
        partitions asked about. The leader epoch is not bumped by a leader's own ISR change."""
        ctx = self.context
        if not self.active:
            return AlterPartitionAnswer(ErrorCode.NOT_CONTROLLER)
        broker_id = request.broker_id
        known_epoch = ctx.broker_epochs.get(broker_id)
        if known_epoch is None or request.broker_epoch != known_epoch:
            log.info("Ignoring AlterPartition from broker %d: broker epoch %d, the registered one is %s",
                     broker_id, request.broker_epoch, known_epoch)
            return AlterPartitionAnswer(ErrorCode.STALE_BROKER_EPOCH)
        results: dict[TopicPartition, PartitionResult] = {}
        accepted: dict[TopicPartition, tuple[TopicMetadata, int, IsrProposal]] = {}
        # A topic whose deletion waits for its reassignments still takes ISR changes (they complete them).
        deleting = {name for name in ctx.topics_being_deleted
                    if (t := ctx.topics.get(name)) is None or not t.partitions_being_reassigned}
        for proposal in {p.topic_partition: p for p in request.proposals}.values():
            tp = proposal.topic_partition
            topic = ctx.topics.get(tp.topic)
            # (A topic being deleted counts as unknown: Kafka would still write its ISR, but its
            # brokers are dropping it, and an UpdateMetadata would announce it again.)
            if (topic is None or tp.topic in deleting or not 0 <= tp.partition < len(topic.partitions)
                    or topic.partitions[tp.partition].leader_epoch < 0):
                results[tp] = PartitionResult(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                continue
            error = self._check_isr_proposal(broker_id, proposal, topic.partitions[tp.partition], version)
            if error is None:
                accepted[tp] = (topic, tp.partition, proposal)
            elif error == ErrorCode.NONE:  # already the state: answered with it (idempotent)
                results[tp] = _committed(topic.partitions[tp.partition])
            else:
                log.info("Rejecting AlterPartition from broker %d for %s (ISR %s at leader epoch %d, partition "
                         "epoch %d): %s", broker_id, tp, list(proposal.new_isr), proposal.leader_epoch,
                         proposal.partition_epoch, error.name)
                results[tp] = PartitionResult(error)
        writes: dict[str, dict[int, PartitionAssignment]] = {}
        for topic, index, proposal in accepted.values():
            p = topic.partitions[index]
            writes.setdefault(topic.name, {})[index] = PartitionAssignment(
                list(p.replicas), leader=broker_id, leader_epoch=proposal.leader_epoch, isr=list(proposal.new_isr),
                partition_epoch=proposal.partition_epoch, controller_epoch=ctx.epoch,
            )
        conflicts = await self._write_partition_states(writes, "AlterPartition: {}") if writes else set()
        for tp, (topic, index, _) in accepted.items():
            if (tp.topic, index) in conflicts:
                results[tp] = PartitionResult(ErrorCode.INVALID_UPDATE_VERSION)
                continue
            topic.partitions[index] = writes[topic.name][index]
            results[tp] = _committed(topic.partitions[index])
            log.info("ISR of %s changed to %s by its leader %d (partition epoch %d)",
                     tp, topic.partitions[index].isr, broker_id, topic.partitions[index].partition_epoch)
        states = [
            ctx.state(topic, p.topic_partition.partition) for p in request.proposals
            if (topic := ctx.topics.get(p.topic_partition.topic)) is not None
            and p.topic_partition.topic not in deleting
            and 0 <= p.topic_partition.partition < len(topic.partitions)
            and topic.partitions[p.topic_partition.partition].leader_epoch >= 0
        ]
        if states:
            batch = self._batch()
            batch.add_update_metadata(set(ctx.live_brokers), states)
            self._send(batch)
        return AlterPartitionAnswer(ErrorCode.NONE, results)

    def _check_isr_proposal(
        self, broker_id: int, proposal: IsrProposal, current: PartitionAssignment, version: int
    ) -> ErrorCode | None:
        """Kafka's per-partition checks, in its order: None to write the proposal, NONE when it
        is already the state, else the error to answer."""
        if proposal.partition_epoch > current.partition_epoch or proposal.leader_epoch > current.leader_epoch:
            return ErrorCode.NOT_CONTROLLER  # the leader knows a newer state: this controller is stale
        if proposal.leader_epoch < current.leader_epoch:
            return ErrorCode.FENCED_LEADER_EPOCH
        if (broker_id == current.leader and list(proposal.new_isr) == list(current.isr)
                and proposal.leader_recovery_state == RECOVERED):
            return ErrorCode.NONE  # equalsAllowStalePartitionEpoch: before the partition-epoch fence
        if proposal.partition_epoch < current.partition_epoch:
            return ErrorCode.INVALID_UPDATE_VERSION
        if proposal.leader_recovery_state != RECOVERED:
            # RECOVERING with an ISR > 1, or RECOVERED -> RECOVERING (every state here is RECOVERED)
            return ErrorCode.INVALID_REQUEST
        isr = proposal.new_isr
        # Beyond ZooKeeper-mode Kafka (its KRaft controller's checks): only the leader changes its
        # ISR, and the ISR is a non-empty set of assigned replicas that includes the leader.
        if (broker_id != current.leader or broker_id not in isr or len(set(isr)) != len(isr)
                or not set(isr) <= set(current.replicas)):
            return ErrorCode.INVALID_REQUEST
        if set(isr) - self.context.eligible_brokers:  # KIP-841: live and not shutting down
            return ErrorCode.INELIGIBLE_REPLICA if version > 1 else ErrorCode.OPERATION_NOT_ATTEMPTED
        return None
    async def elect_leaders(
        self, partitions: Collection[TopicPartition], election_type: ElectionType
    ) -> dict[TopicPartition, ElectLeadersOutcome]:
        """ElectLeaders (key 43) from an administrator, processed as an event (Kafka's
        ReplicaLeaderElection, AdminClientTriggered): each partition's outcome; where the error
        is NONE, the new leader is ``outcome.election.leader_and_isr.leader``, written and sent.
        Any broker but the active controller answers NOT_CONTROLLER for every partition."""
        answer: asyncio.Future[dict[TopicPartition, ElectLeadersOutcome]] = asyncio.get_running_loop().create_future()

        async def process() -> None:
            if answer.done():
                return
            if not self.active:
                answer.set_result({tp: ElectLeadersOutcome(ErrorCode.NOT_CONTROLLER) for tp in partitions})
                return
            try:
                answer.set_result(await self._elect_leaders(partitions, election_type, admin=True))
            except ControllerMovedError:
                answer.set_result({tp: ElectLeadersOutcome(ErrorCode.NOT_CONTROLLER) for tp in partitions})
                raise
            except Exception as e:
                answer.set_exception(e)
                raise

        self._enqueue("ReplicaLeaderElection", process)
        return await answer

    # --- partition reassignment (AlterPartitionReassignments, ListPartitionReassignments) -------

    async def alter_partition_reassignments(
        self, reassignments: Mapping[TopicPartition, list[int] | None]
    ) -> AlterReassignmentsAnswer:
        """AlterPartitionReassignments (key 45), processed as an event (Kafka's
        ApiPartitionReassignment): each partition's target replicas (None: cancel its
        reassignment). Answered once every reassignment is started (written, requests queued);
        any broker but the active controller answers NOT_CONTROLLER."""
        answer: asyncio.Future[AlterReassignmentsAnswer] = asyncio.get_running_loop().create_future()

        async def process() -> None:
            if answer.done():
                return
            try:
                answer.set_result(await self.reassignments.alter(reassignments))
            except ControllerMovedError:
                answer.set_result(AlterReassignmentsAnswer(ErrorCode.NOT_CONTROLLER, ErrorCode.NOT_CONTROLLER.message))
                raise
            except Exception as e:
                answer.set_exception(e)
                raise

        self._enqueue("ApiPartitionReassignment", process)
        return await answer

    async def list_partition_reassignments(
        self, partitions: Collection[TopicPartition] | None
    ) -> ListReassignmentsAnswer:
        """ListPartitionReassignments (key 46), processed as an event: the reassignments under way
        among ``partitions`` (None: all of them)."""
        answer: asyncio.Future[ListReassignmentsAnswer] = asyncio.get_running_loop().create_future()

        async def process() -> None:
            if not answer.done():
                answer.set_result(self.reassignments.list(partitions))

        self._enqueue("ListPartitionReassignments", process)
        return await answer

    # --- leader elections (ElectLeaders, auto rebalance) ---------------------------------------

    async def _elect_leaders(
        self, partitions: Collection[TopicPartition], election_type: ElectionType, admin: bool
    ) -> dict[TopicPartition, ElectLeadersOutcome]:
        """Kafka's onReplicaElection over the cached states: unknown partitions, topics being
        deleted, partitions that already have a valid leader and those without an eligible one
        are classified (`elect_leaders_outcome`); the others get their new leader (leader epoch
        +1), written conditionally on their partition epoch (decided again from a fresh read
        when the stored state moved on), then LeaderAndIsr and UpdateMetadata are sent."""
        ctx = self.context
        names = ",".join(map(str, list(partitions)[:20])) + (f",… ({len(partitions)} in all)" if len(partitions) > 20 else "")
        log.info("Starting replica leader election (%s) for partitions %s triggered by %s", election_type.name,
                 names, "AdminClientTriggered" if admin else "AutoTriggered")
        outcomes: dict[TopicPartition, ElectLeadersOutcome] = {}
        pending = list(dict.fromkeys(partitions))
        for _ in range(MAX_ELECTION_ATTEMPTS):
            decided: list[tuple[TopicMetadata, int, LeaderAndIsrValue, tuple[int, ...]]] = []
            for tp in pending:
                topic = ctx.topics.get(tp.topic)
                p = topic.partitions[tp.partition] if topic is not None and 0 <= tp.partition < len(topic.partitions) else None
                outcome = elect_leaders_outcome(
                    election_type,
                    None if p is None else p.replicas,
                    None if p is None or p.leader_epoch < 0 else _value(p),
                    ctx.eligible_for(tp),
                    topic_being_deleted=tp.topic in ctx.topics_being_deleted,
                    partition_name=str(tp),
                )
                outcomes[tp] = outcome
                if outcome.election is not None and outcome.election.leader_and_isr is not None:
                    assert topic is not None
                    decided.append((topic, tp.partition, outcome.election.leader_and_isr, outcome.election.recipients))
                    if outcome.election.unclean:
                        log.warning("Unclean leader election for %s: broker %d was not in sync; records may be lost",
                                    tp, outcome.election.leader_and_isr.leader)
            conflicts = await self._write_decisions(decided)
            pending = [TopicPartition(topic, index) for topic, index in conflicts]
            if not pending:
                break
        for tp in pending:
            outcomes[tp] = ElectLeadersOutcome(
                ErrorCode.UNKNOWN_SERVER_ERROR, f"The state of partition {tp} kept changing during the election"
            )
        return outcomes

    def _schedule_auto_leader_rebalance(self, delay_ms: float) -> None:
        """The next imbalance check, as an event ``delay_ms`` from now (Kafka's
        auto-leader-rebalance-task: one-shot, scheduled again after each check)."""
        if self._scheduler is None:
            self._scheduler = AsyncioScheduler()
        self._rebalance_task = self._scheduler.schedule(
            "auto-leader-rebalance-task",
            lambda: self._enqueue("AutoPreferredReplicaLeaderElection", self._process_auto_leader_rebalance),
            delay_ms,
        )

    async def _process_auto_leader_rebalance(self) -> None:
        if not self.active or self.auto_leader_rebalance is None:
            return
        try:
            await self._check_and_trigger_auto_leader_rebalance(self.auto_leader_rebalance.imbalance_percentage)
        finally:
            self._schedule_auto_leader_rebalance(self.auto_leader_rebalance.check_interval_ms)

    async def _check_and_trigger_auto_leader_rebalance(self, imbalance_percentage: int) -> None:
        """Kafka's checkAndTriggerAutoLeaderRebalance: for every broker whose leader imbalance
        ratio (its preferred partitions led by another broker, over its preferred partitions)
        is above ``imbalance_percentage`` %, a preferred election for those of them whose
        preferred replica is live and in the ISR. Topics being deleted are left out."""
        ctx = self.context
        assignments: dict[TopicPartition, list[int]] = {}
        states: dict[TopicPartition, LeaderAndIsrValue] = {}
        for topic in ctx.topics.values():
            if topic.name in ctx.topics_being_deleted:
                continue
            for index, p in enumerate(topic.partitions):
                tp = TopicPartition(topic.name, index)
                assignments[tp] = p.replicas
                if p.leader_epoch >= 0:
                    states[tp] = _value(p)
        candidates = partitions_to_rebalance(assignments, states, ctx.eligible_brokers, imbalance_percentage)
        # Kafka checks the preferred replica with isReplicaOnline: not one on a failed log dir.
        candidates = [tp for tp in candidates if ctx.is_replica_online(assignments[tp][0], tp)]
        if not candidates:
            return
        outcomes = await self._elect_leaders(candidates, ElectionType.PREFERRED, admin=False)
        for tp, outcome in outcomes.items():
            if outcome.error not in (ErrorCode.NONE, ErrorCode.ELECTION_NOT_NEEDED):
                log.warning("Error completing replica leader election (PREFERRED) for partition %s: %s %s",
                            tp, outcome.error.name, outcome.message or "")

    # --- events --------------------------------------------------------------------------------

    async def _process_broker_change(self) -> None:
        """Kafka's BrokerChange: brokers that died (their ephemeral node is gone), started, or
        bounced (registered again with a newer broker epoch: a failure then a start-up); and
        its BrokerModifications: a broker that rewrote its registration (a dynamic
        ``advertised.listeners``) has its new endpoints sent to every broker."""
        if not self.active:
            return
        ctx = self.context
        before, before_epochs, registrations = set(ctx.live_brokers), dict(ctx.broker_epochs), dict(ctx.live_brokers)
        await self._refresh_brokers()
        after = set(ctx.live_brokers)
        bounced = {b for b in before & after if ctx.broker_epochs[b] > before_epochs.get(b, -1)}
        dead, started = (before - after) | bounced, (after - before) | bounced
        modified = {b for b in (before & after) - bounced if ctx.live_brokers[b] != registrations[b]}
        for broker_id in sorted(modified):
            log.info("[Controller id=%d] Updated broker metadata: %s -> %s", self.broker_id, registrations[broker_id],
                     ctx.live_brokers[broker_id])
        ctx.shutting_down -= dead
        if dead or started:
            log.info("[Controller id=%d] Newly added brokers: %s, deleted brokers: %s, bounced brokers: %s, all live "
                     "brokers: %s", self.broker_id, _ids(after - before), _ids(before - after), _ids(bounced),
                     _ids(after))
        if dead:
            log.info("[Controller id=%d] Broker failure callback for %s", self.broker_id, _ids(dead))
            await self._on_broker_failure(dead)
        if started:
            log.info("[Controller id=%d] New broker startup callback for %s", self.broker_id, _ids(started))
            await self._on_broker_startup(started)
        if not dead and not started and (before != after or modified):
            batch = self._batch()
            batch.add_update_metadata(after, [])
            self._send(batch)

    async def _on_broker_failure(self, dead: set[int]) -> None:
        """Partitions led by a dead broker elect a new leader among their live in-sync replicas;
        dead replicas leave the ISRs they were in (leader epoch +1). Then, as Kafka's
        OfflineReplica transition does, every live broker gets the new set of live brokers and
        the state of each partition with a replica on a dead broker: its offline replicas
        changed, even where nothing else did (a broker that stopped after a controlled shutdown
        led nothing and was in no ISR)."""
        await self._elect_offline_partitions()
        await self._remove_replicas_from_isr(dead)
        ctx = self.context
        batch = self._batch()
        batch.add_update_metadata(set(ctx.live_brokers), [
            ctx.state(topic, index) for topic in ctx.topics.values()
            for index, p in enumerate(topic.partitions) if p.leader_epoch >= 0 and dead & set(p.replicas)
        ])
        self._send(batch)

    async def _on_broker_startup(self, started: set[int]) -> None:
        """A new broker learns the cluster (the broker list to the others, everything to it), then
        the state of every partition it hosts (it becomes their follower, or leader where it is
        the only choice), and leaderless partitions may now elect it."""
        ctx = self.context
        for broker_id in started:  # registered again: its log dirs are read afresh (Kafka's onBrokerStartup)
            ctx.replicas_on_offline_dirs.pop(broker_id, None)
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
        await self.reassignments.resume(lambda tp, assignment: bool(set(assignment.target_replicas) & started))
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
                eligible = ctx.eligible_for(TopicPartition(topic.name, index))
                if p.leader_epoch < 0 or p.leader in eligible:
                    continue
                result = elect_offline(_value(p), p.replicas, eligible, unclean)
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
        then LeaderAndIsr to their recipients and UpdateMetadata to every live broker. Returns
        how many were applied (a state that changed meanwhile is read again, not written)."""
        return len(decided) - len(await self._write_decisions(decided))

    async def _write_decisions(
        self, decided: list[tuple[TopicMetadata, int, LeaderAndIsrValue, tuple[int, ...]]]
    ) -> set[tuple[str, int]]:
        """As `_apply_decisions`; returns the partitions whose stored state had changed since
        the decision (re-read into the context, nothing written or sent for them)."""
        if not decided:
            return set()
        ctx = self.context
        writes: dict[str, dict[int, PartitionAssignment]] = {}
        for topic, index, value, _ in decided:
            p = topic.partitions[index]
            writes.setdefault(topic.name, {})[index] = PartitionAssignment(
                list(p.replicas), leader=value.leader, leader_epoch=value.leader_epoch, isr=list(value.isr),
                partition_epoch=p.partition_epoch, controller_epoch=ctx.epoch,
            )
        conflicts = await self._write_partition_states(writes, "{}; they are read again and decided next time")
        batch = self._batch()
        for topic, index, _, recipients in decided:
            if (topic.name, index) in conflicts:
                continue
            self._log_partition_change(topic.name, index, topic.partitions[index], writes[topic.name][index])
            topic.partitions[index] = writes[topic.name][index]
            batch.add_leader_and_isr(list(recipients), ctx.state(topic, index), set(ctx.live_brokers))
        self._send(batch)
        return conflicts

    def _log_partition_change(self, topic: str, index: int, old: PartitionAssignment, new: PartitionAssignment) -> None:
        """Kafka's partition state machine line for a decided state (the state change log)."""
        live = self.context.live_brokers
        state_change_log.info(
            "[Controller id=%d epoch=%d] Changed partition %s-%d from %s to %s with state LeaderAndIsr(leader=%d, "
            "leaderEpoch=%d, isr=%s, partitionEpoch=%d)", self.broker_id, self.context.epoch, topic, index,
            "OnlinePartition" if old.leader in live else "OfflinePartition",
            "OnlinePartition" if new.leader >= 0 else "OfflinePartition", new.leader, new.leader_epoch,
            _ids(new.isr), new.partition_epoch)

    def _unclean_enabled(self, topic: str) -> bool:
        value = self.store.topic_configs(topic).get("unclean.leader.election.enable")
        return self.unclean_leader_election_default if value is None else value.lower() == "true"

    async def _write_partition_states(
        self, writes: dict[str, dict[int, PartitionAssignment]], conflict_message: str
    ) -> set[tuple[str, int]]:
        """Write partition states conditionally on their partition epochs; the partitions whose
        stored state had moved on are returned, and read again into the context."""
        ctx = self.context
        try:
            await self.store.write_partition_states(ctx.epoch, writes)
        except PartitionEpochConflictError as e:
            log.warning(conflict_message.format(e))
            conflicts = set(e.partitions)
            for name in {topic for topic, _ in conflicts}:
                fresh = await self.store.read_topics([name])
                if name in fresh and name in ctx.topics:
                    ctx.topics[name].partitions = fresh[name].partitions
            return conflicts
        return set()

    async def _process_topic_change(self, changed_names: set[str] | None) -> None:
        """Kafka's TopicChange and PartitionModifications: read the topics that are new to this
        controller and those the store says changed (all of them when it cannot say). Every
        partition new to the controller's context is created, whatever state was read for it,
        as Kafka's onNewPartitionCreation does: the creation is fenced by the controller epoch,
        so a deposed controller that has not heard of its successor learns it here (and
        resigns) even when the successor has already written the states."""
        if not self.active:
            return
        ctx = self.context
        names = await self.store.topic_names()
        for gone in set(ctx.topics) - names:
            del ctx.topics[gone]
        wanted = names if changed_names is None else (names - set(ctx.topics)) | (changed_names & names)
        changed = await self.store.read_topics(wanted) if wanted else {}
        new: list[tuple[TopicMetadata, int]] = []
        for name, topic in changed.items():
            known = ctx.topics.get(name)
            first_new = 0 if known is None or known.topic_id != topic.topic_id else len(known.partitions)
            if known is not None and known.topic_id == topic.topic_id:
                known.partitions.extend(topic.partitions[first_new:])
                known.configs = topic.configs
                known.initial_partition_count = topic.initial_partition_count
                known.undeleted_partition_count = topic.undeleted_partition_count
                known.leader_epochs_after_creation = topic.leader_epochs_after_creation
                known.leader_epochs_before_deletion = topic.leader_epochs_before_deletion
                topic = known
            else:
                ctx.topics[name] = topic
            new += [(topic, index) for index in range(first_new, len(topic.partitions))]
        await self._on_new_partition_creation(new)
        await self._record_deletions([ctx.topics[name] for name in changed if name in ctx.topics])

    async def _process_topic_deletion(self) -> None:
        if not self.active:
            return
        ctx = self.context
        ctx.topics_being_deleted |= await self.store.topics_marked_for_deletion() & set(ctx.topics)
        await self._resume_topic_deletions()

    # --- state changes -------------------------------------------------------------------------

    async def _on_new_partition_creation(self, partitions: list[tuple[TopicMetadata, int]]) -> None:
        """New partitions get their first leader (the first live replica) and ISR (every live
        replica), leader epoch 0; LeaderAndIsr (IsNew) to the ISR, UpdateMetadata to all.
        Partitions added to a topic that has some already are KIP-253 expansions (see
        `_record_expansions`), done first.

        The states are created (`ControllerStore.create_partition_states`), fenced by the
        controller epoch (ControllerMovedError: the controller resigns). One that turns out to
        have a state already keeps it (Kafka's NODEEXISTS, which Kafka logs as a failed state
        change): it is read into the context and sent to its live replicas as it is, as a
        failover sends the states it finds."""
        if not partitions:
            return
        partitions = await self._record_expansions(partitions)
        ctx = self.context
        writes: dict[str, dict[int, PartitionAssignment]] = {}
        started: list[tuple[TopicMetadata, int]] = []
        for topic, index in partitions:
            replicas = topic.partitions[index].replicas
            live = [r for r in replicas if r in ctx.live_brokers]
            if not live:
                log.warning("Partition %s-%d has no live replica (replicas %s); it stays offline",
                          topic.name, index, replicas)
                continue
            writes.setdefault(topic.name, {})[index] = PartitionAssignment(
                list(replicas), leader=live[0], leader_epoch=0, isr=live, partition_epoch=0,
                controller_epoch=ctx.epoch,
            )
            started.append((topic, index))
        existing: set[tuple[str, int]] = set()
        if writes:
            try:
                await self.store.create_partition_states(ctx.epoch, writes)
            except PartitionEpochConflictError as e:
                log.warning("New partitions have a state already, which is kept: %s", e)
                existing = set(e.partitions)
                fresh = await self.store.read_topics({name for name, _ in existing})
                for topic, index in started:
                    stored = fresh.get(topic.name)
                    if ((topic.name, index) in existing and stored is not None and stored.topic_id == topic.topic_id
                            and index < len(stored.partitions)):
                        topic.partitions[index] = stored.partitions[index]
        batch = self._batch()
        for topic, index in started:
            if (topic.name, index) in existing:
                p = topic.partitions[index]
                if p.leader_epoch >= 0:
                    batch.add_leader_and_isr([r for r in p.replicas if r in ctx.live_brokers],
                                             ctx.state(topic, index), set(ctx.live_brokers))
                continue
            topic.partitions[index] = writes[topic.name][index]
            state = ctx.state(topic, index, is_new=True)
            batch.add_leader_and_isr(state.isr, state, set(ctx.live_brokers))
        self._send(batch)

    async def _record_expansions(self, partitions: list[tuple[TopicMetadata, int]]) -> list[tuple[TopicMetadata, int]]:
        """KIP-253: for partitions added to a topic whose other partitions have a state, bump the
        leader epoch of each of those (same leader and ISR), then record the epochs they had
        just before into the added partitions (``leaderEpochAfterCreation``). In this order a
        controller failover in between bumps once more, never leaving an added partition tied
        to an epoch that does not end. Returns the partitions to create now (a topic whose bump
        could not be written keeps its added partitions without state, for the next attempt)."""
        ctx = self.context
        added: dict[str, tuple[TopicMetadata, list[int]]] = {}
        for topic, index in partitions:
            added.setdefault(topic.name, (topic, []))[1].append(index)
        postponed: set[str] = set()
        for name, (topic, indexes) in added.items():
            created = set(indexes)
            existing = [i for i, p in enumerate(topic.partitions) if p.leader_epoch >= 0 and i not in created]
            if not existing:
                continue  # a new topic
            before = await self._bump_leader_epochs(topic, existing)
            if before is None:
                log.error("Partitions %s of topic %s are not created yet: the leader epochs of its other "
                          "partitions could not be bumped", indexes, name)
                postponed.add(name)
                continue
            topic.leader_epochs_after_creation.update({index: dict(before) for index in indexes})
            await self.store.record_leader_epochs(ctx.epoch, topic, indexes)
            log.info("Topic %s grew to %d partitions: the leader epochs of its %d other partitions were bumped",
                     name, len(topic.partitions), len(existing))
        return [(topic, index) for topic, index in partitions if topic.name not in postponed]

    async def _bump_leader_epochs(self, topic: TopicMetadata, indexes: list[int]) -> dict[int, int] | None:
        """Leader epoch + 1 for these partitions of ``topic``, leader and ISR unchanged (written
        conditionally, decided again on a fresh read when a state moved on; LeaderAndIsr to
        their live replicas). The epochs they had just before, or None if some stayed unwritten."""
        ctx = self.context
        before: dict[int, int] = {}
        pending = list(indexes)
        for _ in range(MAX_ELECTION_ATTEMPTS):
            decided: list[tuple[TopicMetadata, int, LeaderAndIsrValue, tuple[int, ...]]] = []
            for index in pending:
                p = topic.partitions[index]
                before[index] = p.leader_epoch
                bumped = LeaderAndIsrValue(p.leader, p.leader_epoch + 1, tuple(p.isr), partition_epoch=p.partition_epoch)
                decided.append((topic, index, bumped, tuple(r for r in p.replicas if r in ctx.live_brokers)))
            pending = [index for _, index in await self._write_decisions(decided)]
            if not pending:
                return before
        return None

    async def _record_deletions(self, topics: list[TopicMetadata]) -> None:
        """KIP-253 shrinks: for the partitions of ``topics`` newly marked for deletion (at or
        above the undeleted count, with no ``leaderEpochBeforeDeletion`` yet), record the leader
        epoch every surviving partition has now, then bump the leader epoch of every partition
        of the topic (LeaderAndIsr carries the new count with it, so each leader rejects
        producers of the old count from the new epoch on). In this order a failover in between
        finds the epochs recorded and the survivors not bumped, and bumps them: a recorded
        epoch is never later than the last one producers of the old count wrote in."""
        ctx = self.context
        for topic in topics:
            marked = topic.marked_for_deletion
            if not marked:
                continue
            survivors = range(topic.undeleted_partition_count)
            unrecorded = [q for q in marked if q not in topic.leader_epochs_before_deletion]
            if unrecorded:
                epochs = {p: topic.partitions[p].leader_epoch for p in survivors}
                if min(epochs.values()) < 0:
                    log.error("Partitions %s of topic %s stay unmarked for now: some of its partitions have no "
                              "leader epoch yet", unrecorded, topic.name)
                    continue
                topic.leader_epochs_before_deletion.update({q: dict(epochs) for q in unrecorded})
                await self.store.record_leader_epochs(ctx.epoch, topic, unrecorded)
            recorded = {p: max(m.get(p, -1) for m in map(topic.leader_epochs_before_deletion.get, marked) if m)
                        for p in survivors}
            if all(topic.partitions[p].leader_epoch > recorded[p] for p in survivors):
                continue
            bumped = await self._bump_leader_epochs(
                topic, [i for i, p in enumerate(topic.partitions) if p.leader_epoch >= 0])
            if bumped is None:
                log.error("Topic %s: the leader epochs of its partitions could not be bumped for its shrink to %d "
                          "partitions; tried again at the next check", topic.name, topic.undeleted_partition_count)
                continue
            log.info("Topic %s shrinks to %d partitions: partitions %d-%d are marked for deletion until drained",
                     topic.name, topic.undeleted_partition_count, marked.start, marked.stop - 1)
        self._schedule_drain_check()

    def _schedule_drain_check(self) -> None:
        """While some topic has partitions marked for deletion, check every
        ``partition.deletion.check.interval.ms`` whether they are drained."""
        if self._drain_check is not None or self._log_offsets is None:
            return
        if not any(t.marked_for_deletion for t in self.context.topics.values()):
            return
        if self._scheduler is None:
            self._scheduler = AsyncioScheduler()
        self._drain_check = self._scheduler.schedule(
            "marked-partitions-drain-check", self._start_drain_check, self.partition_deletion_check_interval_ms,
        )

    def _start_drain_check(self) -> None:
        self._drain_check = None
        if self.active:
            asyncio.get_running_loop().create_task(self._check_drained_or_retry())

    async def _check_drained_or_retry(self) -> None:
        try:
            await self._check_drained()
        except Exception:
            log.exception("Checking whether partitions marked for deletion are drained failed; tried again later")
            self._schedule_drain_check()

    async def _check_drained(self) -> None:
        """Ask the leaders of the marked partitions for their log start offsets and high
        watermarks (outside the event task: it is network I/O), then hand the drained ones to
        the event task."""
        assert self._log_offsets is not None
        ctx = self.context
        by_leader: dict[int, list[TopicPartition]] = {}
        topic_ids: dict[str, uuid.UUID] = {}
        for topic in ctx.topics.values():
            if topic.name in ctx.topics_being_deleted:
                continue
            for index in topic.marked_for_deletion:
                leader = topic.partitions[index].leader
                if leader in ctx.live_brokers:
                    by_leader.setdefault(leader, []).append(TopicPartition(topic.name, index))
                    topic_ids[topic.name] = topic.topic_id
        answers = await asyncio.gather(
            *(self._log_offsets(ctx.live_brokers[b], tps) for b, tps in by_leader.items()), return_exceptions=True)
        drained = {tp for answer in answers if isinstance(answer, dict)
                   for tp, (start, end) in answer.items() if start == end}
        self._enqueue("MarkedPartitionsDrained", lambda: self._remove_drained_partitions(drained, topic_ids))

    async def _remove_drained_partitions(self, drained: set[TopicPartition], topic_ids: dict[str, uuid.UUID]) -> None:
        """Remove, per topic, the drained marked partitions at its tail (partition indexes stay
        contiguous: a drained partition below one still holding records waits for it):
        StopReplica (delete) to their replicas and leader -2 in the UpdateMetadata to every
        broker, once all their replicas are live, then the store forgets them. When no marked
        partition is left, the topic may grow again."""
        if not self.active:
            return
        ctx = self.context
        for name, topic_id in topic_ids.items():
            topic = ctx.topics.get(name)
            if topic is None or topic.topic_id != topic_id or name in ctx.topics_being_deleted:
                continue
            count = len(topic.partitions)
            while count > topic.undeleted_partition_count and TopicPartition(name, count - 1) in drained:
                count -= 1
            removed = range(count, len(topic.partitions))
            if not removed:
                continue
            offline = {r for i in removed for r in topic.partitions[i].replicas if r not in ctx.live_brokers}
            if offline:
                log.info("Removal of the drained partitions %s of topic %s waits for broker(s) %s",
                         list(removed), name, sorted(offline))
                continue
            batch = self._batch()
            gone = []
            for index in removed:
                state = ctx.state(topic, index)
                state.leader = LEADER_DURING_DELETE
                gone.append(state)
                for replica in topic.partitions[index].replicas:
                    batch.add_stop_replica(
                        replica, StopReplicaPartition(state.topic_partition, EPOCH_DURING_DELETE, delete=True))
            await self.store.remove_partitions(ctx.epoch, name, count)
            del topic.partitions[count:]
            for epochs in (topic.leader_epochs_after_creation, topic.leader_epochs_before_deletion):
                for index in removed:
                    epochs.pop(index, None)
            batch.add_update_metadata(set(ctx.live_brokers), gone)
            self._send(batch)
            log.info("Removed the drained partitions %d-%d of topic %s; it has %d partitions", removed.start,
                     removed.stop - 1, name, count)
        self._schedule_drain_check()

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
            if topic.partitions_being_reassigned:  # Kafka: ineligible while a reassignment is in progress
                log.info("Deletion of topic %s waits for the reassignment of its partitions %s", name,
                         topic.partitions_being_reassigned)
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

    # --- log dir failures (KIP-112: Kafka's LogDirEventNotification) ----------------------------

    async def _process_log_dir_event_notification(self) -> None:
        """Kafka's ``processLogDirEventNotification``: the brokers named by the waiting
        notifications (which are deleted) get LeaderAndIsr for every replica they host."""
        if not self.active:
            return
        brokers = await self.store.take_log_dir_events(self.context.epoch) & set(self.context.live_brokers)
        if brokers:
            await self._on_broker_log_dir_failure(brokers)

    async def _on_broker_log_dir_failure(self, brokers: set[int]) -> None:
        """Kafka's ``onBrokerLogDirFailure``: the current state of each of their replicas
        (OnlineReplica) goes to them in LeaderAndIsr; the replicas they answer
        KAFKA_STORAGE_ERROR for then go offline (``_on_replicas_offline``)."""
        ctx = self.context
        log.info("Handling log directory failure for broker(s) %s", sorted(brokers))
        states: dict[int, list[PartitionState]] = {}
        for topic in ctx.topics.values():
            if topic.name in ctx.topics_being_deleted:
                continue
            for index, p in enumerate(topic.partitions):
                if p.leader_epoch >= 0:
                    for broker in brokers & set(p.replicas):
                        states.setdefault(broker, []).append(ctx.state(topic, index))
        for broker, broker_states in states.items():
            leaders = {s.leader for s in broker_states}
            future = self.channels.send(broker, LeaderAndIsrRequest(
                self.broker_id, ctx.epoch, ctx.broker_epochs.get(broker, -1), broker_states,
                {s.topic_partition.topic: ctx.topic_ids[s.topic_partition.topic]
                 for s in broker_states if s.topic_partition.topic in ctx.topic_ids},
                [ctx.live_brokers[b] for b in leaders if b in ctx.live_brokers],
            ))
            if future is not None:
                self._watch_leader_and_isr_answer(broker, {s.topic_partition for s in broker_states}, future)

    def _watch_leader_and_isr_answer(
        self, broker: int, partitions: set[TopicPartition], future: asyncio.Future[ControlResponse]
    ) -> None:
        """When ``broker`` answers a LeaderAndIsr for ``partitions``, hand its replicas on failed
        log dirs (KAFKA_STORAGE_ERROR) and those it now serves to the event task (Kafka's
        LeaderAndIsrResponseReceived) — only when that may change what the controller knows."""
        ctx = self.context
        broker_epoch = ctx.broker_epochs.get(broker, -1)

        def answered(f: asyncio.Future[ControlResponse]) -> None:
            if f.cancelled() or f.exception() is not None or f.result().error != ErrorCode.NONE:
                return
            errors = f.result().partition_errors
            offline = {tp for tp, error in errors.items() if error == ErrorCode.KAFKA_STORAGE_ERROR}
            online = {tp for tp in partitions if tp not in errors}
            if offline or online & ctx.replicas_on_offline_dirs.get(broker, set()):
                self._enqueue("LeaderAndIsrResponseReceived", lambda: self._process_leader_and_isr_response(
                    ctx, broker, broker_epoch, offline, online))

        future.add_done_callback(answered)

    async def _process_leader_and_isr_response(
        self, ctx: ControllerContext, broker: int, broker_epoch: int,
        offline: set[TopicPartition], online: set[TopicPartition],
    ) -> None:
        """Kafka's processLeaderAndIsrResponseReceived: the broker's replicas on offline dirs
        become (previous - online + offline); those newly offline go offline
        (`_on_replicas_offline`). An answer from an earlier controller context or an earlier
        registration of the broker is ignored."""
        if not self.active or self.context is not ctx or ctx.broker_epochs.get(broker) != broker_epoch:
            return
        previous = ctx.replicas_on_offline_dirs.get(broker, set())
        current = (previous - online) | offline
        if current:
            ctx.replicas_on_offline_dirs[broker] = current
        else:
            ctx.replicas_on_offline_dirs.pop(broker, None)
        if current - previous:
            await self._on_replicas_offline({broker: current - previous})

    async def _on_replicas_offline(self, offline: dict[int, set[TopicPartition]]) -> None:
        """Kafka's ``onReplicasBecomeOffline`` (the replicas are already recorded in
        ``replicas_on_offline_dirs``): a partition whose leader replica is offline elects another
        leader among its other live in-sync replicas (OfflinePartition → OnlinePartition); every
        offline replica leaves the ISR (OfflineReplica); every live broker learns the partitions'
        offline replicas (UpdateMetadata)."""
        if not self.active:
            return
        ctx = self.context
        for broker, partitions in sorted(offline.items()):
            log.info("Replicas %s on broker %d are offline (their log dir failed)",
                     ",".join(sorted(map(str, partitions))), broker)
        decided: list[tuple[TopicMetadata, int, LeaderAndIsrValue, tuple[int, ...]]] = []
        unchanged: list[tuple[TopicMetadata, int]] = []
        for topic in ctx.topics.values():
            if topic.name in ctx.topics_being_deleted:
                continue
            for index, p in enumerate(topic.partitions):
                tp = TopicPartition(topic.name, index)
                gone = {broker for broker, partitions in offline.items() if tp in partitions}
                if not gone or p.leader_epoch < 0:
                    continue
                original = current = _value(p)
                recipients = tuple(r for r in p.replicas if ctx.is_replica_online(r, tp))
                if p.leader in gone:
                    result = elect_offline(current, p.replicas, ctx.eligible_for(tp) - gone,
                                           self._unclean_enabled(topic.name))
                    if result.leader_and_isr is not None:
                        current = result.leader_and_isr
                    else:
                        log.warning("Partition %s has no other live in-sync replica (ISR %s); it stays offline",
                                    tp, p.isr)
                for replica in sorted(gone & set(current.isr)):
                    current = remove_replica_from_isr(current, replica) or current
                if current != original:
                    decided.append((topic, index, current, recipients))
                else:
                    unchanged.append((topic, index))
        await self._apply_decisions(decided)
        if unchanged:
            batch = self._batch()
            batch.add_update_metadata(set(ctx.live_brokers), [ctx.state(topic, index) for topic, index in unchanged])
            self._send(batch)

    # --- sending -------------------------------------------------------------------------------

    def _batch(self) -> ControllerBrokerRequestBatch:
        return ControllerBrokerRequestBatch(self.broker_id, self.context.epoch)

    def _send(self, batch: ControllerBrokerRequestBatch) -> dict[int, asyncio.Future[ControlResponse]]:
        if not self.active:  # resigned during the event (its session expired): decided nothing
            return {}
        ctx = self.context
        stops = batch.send(self.channels, ctx.live_brokers, ctx.broker_epochs, ctx.topic_ids, ctx.partition_counts)
        for broker, answer in batch.leader_and_isr_answers.items():
            partitions = {TopicPartition(topic, index) for topic, index in batch.leader_and_isr[broker]}
            self._watch_leader_and_isr_answer(broker, partitions, answer)
        return stops


def _ids(brokers: Collection[int]) -> str:
    """Broker ids as Kafka's controller lines write them: ``1,2,3``."""
    return ",".join(map(str, sorted(brokers)))
