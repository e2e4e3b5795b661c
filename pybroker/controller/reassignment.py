"""Partition reassignment in the controller (KIP-455): Kafka's ``onPartitionReassignment``.

Owns what the active controller does when an administrator moves a partition's replicas
(AlterPartitionReassignments, key 45), lists the moves under way (ListPartitionReassignments,
key 46), and how a move advances and completes, in Kafka 3.6's ZooKeeper-mode steps
(``KafkaController.onPartitionReassignment``). Vocabulary: RS the partition's replica set, ORS the
replicas before the move, TRS the target replicas, AR = TRS - ORS the replicas being added,
RR = ORS - TRS those being removed (`FullReplicaAssignment`).

* U (every trigger): the topic record gets RS = TRS + ORS with AR and RR (store first, then the
  controller's context; a new controller resumes from the store); a move replacing another one
  stops (and deletes) the adding replicas the new one no longer wants.
* A (some TRS replica is not in the ISR yet): leader epoch + 1, LeaderAndIsr with the new RS to
  every replica of RS (the new replicas create their logs and fetch from the leader). The leader
  adds them to the ISR once caught up (AlterPartition), which checks completion again.
* B (TRS ⊆ ISR): RS = TRS in the context; the leader moves to the first live in-sync replica of
  TRS if it is not in TRS or not alive (else the leader epoch + 1, so the leader learns the
  shrunken RS); the removed replicas get StopReplica (delete=false), leave the ISR (leader epoch
  + 1), then get StopReplica (delete=true); the store gets RS = TRS; UpdateMetadata to every
  broker; a deletion of the topic that waited for the move resumes.

Completion is checked when a leader's ISR change is accepted (AlterPartition), when a broker of
some TRS starts, and on failover (every move found in the store is resumed). Cancellation (a null
replica list) reassigns to ORS: the adding replicas are stopped and deleted. The checks and
per-partition errors are Kafka's (``validateReplicas``, ``maybeBuildReassignment``,
``maybeTriggerPartitionReassignment``), including the refusal of a topic queued for deletion.

The `PartitionReassignments` object belongs to one `Controller` and runs only inside its event
task (it uses the controller's write-and-send helpers).
"""

from __future__ import annotations

import asyncio
import builtins
import logging
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from pybroker.common.errors import ErrorCode
from pybroker.common.topic import FullReplicaAssignment, TopicMetadata
from pybroker.controller.channel import ControllerBrokerRequestBatch
from pybroker.controller.context import ControllerContext
from pybroker.controller.election import LeaderAndIsr as LeaderAndIsrValue
from pybroker.controller.requests import ControlResponse, StopReplicaPartition
from pybroker.controller.store import ControllerMovedError, ControllerStore
from pybroker.types import TopicPartition

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 5
"""How often a leader move of a completing reassignment is decided again when its partition's
stored state changed meanwhile."""

PARTITION_DOES_NOT_EXIST = "The partition does not exist."


@dataclass
class AlterReassignmentsAnswer:
    """The controller's answer to AlterPartitionReassignments: a top-level error (NOT_CONTROLLER
    from any broker but the active controller), else one (error, message) per partition."""

    error: ErrorCode = ErrorCode.NONE
    message: str | None = None
    results: dict[TopicPartition, tuple[ErrorCode, str | None]] = field(default_factory=dict)


@dataclass
class ListReassignmentsAnswer:
    """The controller's answer to ListPartitionReassignments: a top-level error, else the
    reassignments under way among those asked about."""

    error: ErrorCode = ErrorCode.NONE
    message: str | None = None
    reassignments: dict[TopicPartition, FullReplicaAssignment] = field(default_factory=dict)


def _scala_buffer(replicas: Collection[int]) -> str:
    """How Kafka's messages print a replica list (a Scala ``ArrayBuffer``)."""
    return f"ArrayBuffer({', '.join(map(str, replicas))})"


def _scala_set(ids: Collection[int]) -> str:
    """How Kafka's messages print a set of broker ids (Scala's ``Set``, ``HashSet`` above 4)."""
    name = "Set" if len(ids) <= 4 else "HashSet"
    return f"{name}({', '.join(map(str, sorted(ids)))})"


class Controller(Protocol):
    """What the reassignment steps use of the controller that owns them: its state, its store,
    and its primitives for sending requests, bumping leader epochs, writing elected states,
    shrinking ISRs and resuming deletions (Kafka's ``KafkaController`` does these steps inline)."""

    active: bool
    context: ControllerContext
    store: ControllerStore

    def _batch(self) -> ControllerBrokerRequestBatch: ...
    def _send(self, batch: ControllerBrokerRequestBatch) -> dict[int, asyncio.Future[ControlResponse]]: ...
    async def _bump_leader_epochs(self, topic: TopicMetadata, indexes: list[int]) -> dict[int, int] | None: ...
    async def _write_decisions(
        self, decided: list[tuple[TopicMetadata, int, LeaderAndIsrValue, tuple[int, ...]]]
    ) -> set[tuple[str, int]]: ...
    async def _remove_replicas_from_isr(
        self, replicas: set[int], only: list[tuple[TopicMetadata, int]] | None = None
    ) -> int: ...
    async def _resume_topic_deletions(self) -> None: ...


class PartitionReassignments:
    """The reassignment steps of one controller (see the module docstring)."""

    def __init__(self, controller: Controller) -> None:
        self.controller = controller

    # --- the APIs ------------------------------------------------------------------------------

    async def alter(self, reassignments: Mapping[TopicPartition, list[int] | None]) -> AlterReassignmentsAnswer:
        """Kafka's processApiPartitionReassignment: validate each target (None: cancel), build the
        new full assignment, and start each one; errors per partition."""
        ctrl = self.controller
        if not ctrl.active:
            return AlterReassignmentsAnswer(ErrorCode.NOT_CONTROLLER, ErrorCode.NOT_CONTROLLER.message)
        results: dict[TopicPartition, tuple[ErrorCode, str | None]] = {}
        to_reassign: dict[TopicPartition, FullReplicaAssignment] = {}
        for tp, target in reassignments.items():
            error = self._validate_replicas(tp, target) if target is not None else None
            if error is not None:
                results[tp] = error
                continue
            current = self._current(tp)
            if current.is_being_reassigned:
                to_reassign[tp] = current.reassign_to(current.origin_replicas if target is None else target)
            elif target is not None:
                to_reassign[tp] = current.reassign_to(target)
            else:
                results[tp] = (ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, ErrorCode.NO_REASSIGNMENT_IN_PROGRESS.message)
        results.update(await self._maybe_trigger(to_reassign))
        return AlterReassignmentsAnswer(results=results)

    def list(self, partitions: Collection[TopicPartition] | None) -> ListReassignmentsAnswer:
        """Kafka's processListPartitionReassignments: the partitions asked about (None: all)
        that are being reassigned, with their full assignments."""
        if not self.controller.active:
            return ListReassignmentsAnswer(ErrorCode.NOT_CONTROLLER, ErrorCode.NOT_CONTROLLER.message)
        wanted = self.being_reassigned() if partitions is None else partitions
        found = {}
        for tp in wanted:
            current = self._current(tp)
            if current.is_being_reassigned:
                found[tp] = current
        return ListReassignmentsAnswer(reassignments=found)

    # --- what the controller's events call -----------------------------------------------------

    def being_reassigned(self, topic: str | None = None) -> builtins.list[TopicPartition]:
        """The partitions under reassignment (of ``topic`` only, if given)."""
        topics = self.controller.context.topics
        chosen = topics.values() if topic is None else [topics[topic]] if topic in topics else []
        return [TopicPartition(t.name, index) for t in chosen for index in t.partitions_being_reassigned]

    async def maybe_complete(self, partitions: Collection[TopicPartition]) -> None:
        """Kafka's maybeCompleteReassignment, for the partitions whose ISR just changed."""
        for tp in partitions:
            topic, index = self._partition(tp)
            if topic is None:
                continue
            assignment = topic.full_assignment(index)
            if assignment.is_being_reassigned and self._is_complete(topic, index, assignment):
                log.info("Target replicas %s have all caught up with the leader for reassigning partition %s",
                         list(assignment.target_replicas), tp)
                await self._on_partition_reassignment(topic, index, assignment)

    async def resume(self, should_resume: Callable[[TopicPartition, FullReplicaAssignment], bool]) -> None:
        """Kafka's maybeResumeReassignments: run the steps again for the moves under way that
        ``should_resume`` picks (all of them on failover; those with a TRS replica on a broker
        that just started)."""
        for tp in self.being_reassigned():
            topic, index = self._partition(tp)
            if topic is None:
                continue
            assignment = topic.full_assignment(index)
            if should_resume(tp, assignment):
                try:
                    await self._on_partition_reassignment(topic, index, assignment)
                except ControllerMovedError:
                    raise
                except Exception:
                    log.exception("Error resuming the reassignment of partition %s", tp)

    # --- the steps -----------------------------------------------------------------------------

    async def _maybe_trigger(
        self, reassignments: dict[TopicPartition, FullReplicaAssignment]
    ) -> dict[TopicPartition, tuple[ErrorCode, str | None]]:
        """Kafka's maybeTriggerPartitionReassignment: refuse topics queued for deletion and
        unknown partitions, start the others."""
        ctx = self.controller.context
        results: dict[TopicPartition, tuple[ErrorCode, str | None]] = {}
        for tp, reassignment in reassignments.items():
            topic, index = self._partition(tp)
            if tp.topic in ctx.topics_being_deleted:
                log.info("Skipping reassignment of %s since the topic is currently being deleted", tp)
                results[tp] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, PARTITION_DOES_NOT_EXIST)
            elif topic is None or not topic.partitions[index].replicas:
                results[tp] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, PARTITION_DOES_NOT_EXIST)
            else:
                try:
                    await self._on_partition_reassignment(topic, index, reassignment)
                    results[tp] = (ErrorCode.NONE, None)
                except ControllerMovedError:
                    log.info("Failed completing reassignment of partition %s because controller has moved to "
                             "another broker", tp)
                    raise
                except Exception:
                    log.exception("Error completing reassignment of partition %s", tp)
                    results[tp] = (ErrorCode.UNKNOWN_SERVER_ERROR, ErrorCode.UNKNOWN_SERVER_ERROR.message)
        return results

    async def _on_partition_reassignment(
        self, topic: TopicMetadata, index: int, reassignment: FullReplicaAssignment
    ) -> None:
        """Kafka's onPartitionReassignment: phase U, then A or B (module docstring)."""
        ctrl = self.controller
        tp = TopicPartition(topic.name, index)
        await self._update_current_reassignment(topic, index, reassignment)
        if not self._is_complete(topic, index, reassignment):
            # A1: leader epoch + 1 and LeaderAndIsr with the new RS, AR and RR to every replica
            # of RS; A2: the adding replicas start with it (they create their logs and fetch).
            if topic.partitions[index].leader_epoch >= 0:
                if await ctrl._bump_leader_epochs(topic, [index]) is None:
                    log.error("Failed to send LeaderAndIsr request with new replica assignment %s to leader for "
                              "partition being reassigned %s", reassignment, tp)
            log.info("Reassignment of partition %s started: replicas %s, adding %s, removing %s", tp,
                     list(reassignment.replicas), list(reassignment.adding_replicas),
                     list(reassignment.removing_replicas))
            return
        # B2: RS = TRS, AR = RR = [] in the context (the store still has ORS + TRS until B6).
        completed = FullReplicaAssignment(reassignment.target_replicas)
        topic.set_full_assignment(index, completed)
        # B3: the leader moves into TRS if needed, else its epoch is bumped with the new RS.
        await self._move_leader_if_required(topic, index)
        # B4, B5: the removed replicas leave the ISR, stop and are deleted.
        if reassignment.removing_replicas:
            await self._stop_removed_replicas(topic, index, reassignment.removing_replicas)
        # B6: the store gets RS = TRS.
        await ctrl.store.set_replica_assignments(ctrl.context.epoch, topic.name, {index: completed})
        # B8: every broker learns the partition's final replicas, leader and ISR.
        batch = ctrl._batch()
        batch.add_update_metadata(set(ctrl.context.live_brokers), [ctrl.context.state(topic, index)])
        ctrl._send(batch)
        log.info("Reassignment of partition %s completed: replicas %s", tp, list(completed.replicas))
        if topic.name in ctrl.context.topics_being_deleted:
            await ctrl._resume_topic_deletions()

    async def _update_current_reassignment(
        self, topic: TopicMetadata, index: int, reassignment: FullReplicaAssignment
    ) -> None:
        """Phase U: the store first, then the context; a move replacing another one stops the
        replicas that were being added and are no longer wanted."""
        ctrl = self.controller
        current = topic.full_assignment(index)
        if current == reassignment:
            return
        log.debug("Updating assignment of partition %s-%d from %s to %s", topic.name, index, current, reassignment)
        await ctrl.store.set_replica_assignments(ctrl.context.epoch, topic.name, {index: reassignment})
        topic.set_full_assignment(index, reassignment)
        unneeded = [r for r in current.replicas if r not in reassignment.replicas]
        if unneeded:
            await self._stop_removed_replicas(topic, index, tuple(unneeded))

    def _is_complete(self, topic: TopicMetadata, index: int, assignment: FullReplicaAssignment) -> bool:
        """Kafka's isReassignmentComplete: not being reassigned, or every TRS replica in the ISR."""
        if not assignment.is_being_reassigned:
            return True
        p = topic.partitions[index]
        return p.leader_epoch >= 0 and set(assignment.target_replicas) <= set(p.isr)

    async def _move_leader_if_required(self, topic: TopicMetadata, index: int) -> None:
        """Kafka's moveReassignedPartitionLeaderIfRequired, once RS = TRS in the context: a leader
        outside TRS, or not alive, is replaced by the first replica of TRS that is live and in
        the ISR (Kafka's reassign election: leader epoch + 1, ISR unchanged, LeaderAndIsr to
        TRS); a live leader in TRS keeps leading, with its leader epoch bumped."""
        ctrl = self.controller
        ctx = ctrl.context
        tp = f"{topic.name}-{index}"
        for _ in range(MAX_ATTEMPTS):
            p = topic.partitions[index]
            if p.leader_epoch < 0:
                return
            eligible = ctx.eligible_for(TopicPartition(topic.name, index))  # not on a failed log dir
            if p.leader in p.replicas and p.leader in eligible:
                log.info("Leader %d for partition %s being reassigned, is already in the new list of replicas %s "
                         "and is alive", p.leader, tp, ",".join(map(str, p.replicas)))
                if await ctrl._bump_leader_epochs(topic, [index]) is None:
                    log.error("Failed to bump the leader epoch of partition %s being reassigned", tp)
                return
            if p.leader not in p.replicas:
                log.info("Leader %d for partition %s being reassigned, is not in the new list of replicas %s. "
                         "Re-electing leader", p.leader, tp, ",".join(map(str, p.replicas)))
            else:
                log.info("Leader %d for partition %s being reassigned, is already in the new list of replicas %s "
                         "but is dead", p.leader, tp, ",".join(map(str, p.replicas)))
            leader = next((r for r in p.replicas if r in eligible and r in p.isr), None)
            if leader is None:
                log.error("Partition %s being reassigned has no live in-sync replica among %s to lead it", tp,
                          p.replicas)
                return
            decided = LeaderAndIsrValue(leader, p.leader_epoch + 1, tuple(p.isr), partition_epoch=p.partition_epoch)
            recipients = tuple(r for r in p.replicas if r in ctx.live_brokers)
            if not await ctrl._write_decisions([(topic, index, decided, recipients)]):
                return
        log.error("The state of partition %s kept changing while its reassignment completed", tp)

    async def _stop_removed_replicas(self, topic: TopicMetadata, index: int, removed: tuple[int, ...]) -> None:
        """Kafka's stopRemovedReplicasOfReassignedPartition: the replicas go offline
        (StopReplica without deletion, out of the ISR with the leader epoch bumped and the other
        replicas told), then are deleted (StopReplica with deletion). Only live brokers are sent
        anything."""
        ctrl = self.controller
        tp = TopicPartition(topic.name, index)
        batch = ctrl._batch()
        for replica in removed:
            batch.add_stop_replica(replica, StopReplicaPartition(tp, topic.partitions[index].leader_epoch, delete=False))
        ctrl._send(batch)
        await ctrl._remove_replicas_from_isr(set(removed), [(topic, index)])
        batch = ctrl._batch()
        for replica in removed:
            batch.add_stop_replica(replica, StopReplicaPartition(tp, topic.partitions[index].leader_epoch, delete=True))
        ctrl._send(batch)
        log.info("Replica(s) %s of partition %s were stopped and deleted", sorted(removed), tp)

    # --- helpers -------------------------------------------------------------------------------

    def _partition(self, tp: TopicPartition) -> tuple[TopicMetadata | None, int]:
        topic = self.controller.context.topics.get(tp.topic)
        if topic is None or not 0 <= tp.partition < len(topic.partitions):
            return None, tp.partition
        return topic, tp.partition

    def _current(self, tp: TopicPartition) -> FullReplicaAssignment:
        """The partition's full assignment (no replicas at all when it does not exist)."""
        topic, index = self._partition(tp)
        return FullReplicaAssignment(()) if topic is None else topic.full_assignment(index)

    def _validate_replicas(self, tp: TopicPartition, replicas: builtins.list[int]) -> tuple[ErrorCode, str] | None:
        """Kafka's validateReplicas: a non-empty list without duplicates or negative ids, whose
        new replicas are on live brokers."""
        if not replicas:
            return ErrorCode.INVALID_REPLICA_ASSIGNMENT, "Empty replica list specified in partition reassignment."
        if len(set(replicas)) != len(replicas):
            return (ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"Duplicate replica ids in partition reassignment replica list: {_scala_buffer(replicas)}")
        if any(r < 0 for r in replicas):
            return ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"Invalid broker id in replica list: {_scala_buffer(replicas)}"
        live = self.controller.context.eligible_brokers
        adding = self._current(tp).reassign_to(replicas).adding_replicas
        if not set(adding) <= live:
            return (ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"Replica assignment has brokers that are not alive. Replica list: {_scala_buffer(adding)}, "
                    f"live broker list: {_scala_set(live)}")
        return None
