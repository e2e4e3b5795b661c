"""The group coordinator: Kafka's classic group protocol, member by member.

Owns the protocol logic of JoinGroup (with KIP-394's member-id round trip and KIP-345's static
members), SyncGroup, Heartbeat, LeaveGroup, OffsetCommit, TxnOffsetCommit (KIP-98, with KIP-447's
member fencing) and the end of its transactions, OffsetFetch (with KIP-447's RequireStable),
ListGroups, DescribeGroups, DeleteGroups and OffsetDelete, and the timers that drive rebalances (join phase,
initial rebalance delay, sessions, pending syncs) through two purgatories, whose deadlines are
timers of the injected ``Scheduler`` (a mock clock's in tests). It follows Kafka's
``GroupCoordinator`` closely, so its decisions and error codes are Kafka's; the API handlers only
translate messages. Group state lives in ``GroupMetadata``; persistence is the metadata manager's.

Answers are given through callbacks, because some wait (a JoinGroup until the rebalance's join
phase ends, a SyncGroup until the leader's assignment is stored); a callback may run before the
handling method returns. A waiting SyncGroup's callback is called directly: when the group's write
completes, the leader's answer and every waiting member's are given in that step, as in Kafka's
``storeGroup`` callback, so no request handled after the write is answered before them.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from pybroker.common.errors import ErrorCode
from pybroker.protocol import consumer_protocol
from pybroker.scheduler import SYSTEM_TIME, ScheduledTask, Scheduler, Time
from pybroker.server.group.delayed_operations import (
    DelayedHeartbeat,
    DelayedJoin,
    DelayedSync,
    InitialDelayedJoin,
    join_key,
    member_key,
    sync_key,
)
from pybroker.server.group.group_metadata import GroupMetadata, GroupState
from pybroker.server.group.member import MemberMetadata
from pybroker.server.group.metadata_manager import (
    OFFSETS_TOPIC,
    GroupMetadataManager,
    OffsetsTopicUnavailable,
)
from pybroker.server.group.positions import GroupPositions, PositionsAnswer
from pybroker.server.group.records import OffsetAndMetadata
from pybroker.server.internal_topic_creation import InternalTopicCreation
from pybroker.server.purgatory import Purgatory
from pybroker.types import TopicPartition

log = logging.getLogger(__name__)

NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000  # Kafka's bound on a new member's pending JoinGroup
UNKNOWN_MEMBER_ID = ""


@dataclass
class GroupConfig:
    """The broker properties the coordinator follows."""

    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1800000
    initial_rebalance_delay_ms: int = 3000
    max_size: int = 2147483647
    offset_metadata_max_bytes: int = 4096


@dataclass
class JoinRequest:
    """What a JoinGroup asks, as the coordinator needs it."""

    group_id: str
    member_id: str
    group_instance_id: str | None
    require_known_member_id: bool  # KIP-394 (JoinGroup v4+, dynamic members)
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]  # (name, metadata), most preferred first


@dataclass
class JoinResult:
    member_id: str
    error: ErrorCode = ErrorCode.NONE
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = ""
    members: list[tuple[str, str | None, bytes]] = field(default_factory=list)  # only for the leader


@dataclass
class SyncResult:
    error: ErrorCode
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass
class MemberSummary:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass
class GroupSummary:
    state: str
    protocol_type: str
    protocol_name: str
    members: list[MemberSummary]


EMPTY_GROUP = GroupSummary("", "", "", [])
DEAD_GROUP = GroupSummary(GroupState.DEAD.value, "", "", [])

# Offset fetch: what is reported for a partition without a committed offset.
NO_OFFSET = OffsetAndMetadata(offset=-1, leader_epoch=-1, metadata="")


class GroupCoordinator:
    """Coordinates the groups whose ``__consumer_offsets`` partition this broker leads."""

    def __init__(
        self, manager: GroupMetadataManager, config: GroupConfig, retention_check_interval_ms: int,
        scheduler: Scheduler, time: Time = SYSTEM_TIME,
    ) -> None:
        self.manager = manager
        self._offsets_topic = InternalTopicCreation(
            OFFSETS_TOPIC, lambda: self.manager.ensure_offsets_topic(), OffsetsTopicUnavailable)
        self.config = config
        self.retention_check_interval_ms = retention_check_interval_ms
        self.scheduler = scheduler
        self.time = time
        # Their deadlines are the scheduler's timers, so a test with a mock scheduler drives them.
        self.rebalance_purgatory = Purgatory("Rebalance", scheduler)
        self.heartbeat_purgatory = Purgatory("Heartbeat", scheduler)
        self.active = False
        self._expiry_task: ScheduledTask | None = None
        self._positions: dict[str, GroupPositions] = {}  # KIP-253, by group id (memory only)

    # --- lifecycle ------------------------------------------------------------------------------

    def startup(self) -> None:
        """Start offset expiry; groups are loaded as this broker becomes leader of
        ``__consumer_offsets`` partitions (`on_leadership_change`)."""
        self.active = True
        interval = self.retention_check_interval_ms
        self._expiry_task = self.scheduler.schedule(
            "delete-expired-group-metadata", self.manager.expire_offsets, interval, interval
        )

    def _start_sessions(self, loaded: list[GroupMetadata]) -> None:
        """Members of groups just loaded must heartbeat within their session timeout."""
        for group in loaded:
            for member in list(group.members.values()):
                self._complete_and_schedule_next_heartbeat(group, member)

    async def shutdown(self) -> None:
        self.active = False
        await self._offsets_topic.cancel()
        await self.manager.shutdown()
        if self._expiry_task is not None:
            self._expiry_task.cancel()
            await self._expiry_task.wait()
        self.rebalance_purgatory.shutdown()
        self.heartbeat_purgatory.shutdown()

    # --- FindCoordinator ------------------------------------------------------------------------

    def coordinator_partition(self, group_id: str) -> int | None:
        """The ``__consumer_offsets`` partition that owns ``group_id``; None while the topic does
        not exist, whose creation this starts (`InternalTopicCreation`)."""
        if not self.manager.replica_manager.metadata_cache.partition_count(OFFSETS_TOPIC):
            self._offsets_topic.start()
            return None
        return self.manager.partition_for(group_id)

    # --- leadership of __consumer_offsets ---------------------------------------------------------

    def on_leadership_change(
        self, leaders: list[tuple[TopicPartition, int]], followers: list[tuple[TopicPartition, int | None]]
    ) -> None:
        """Kafka's ``onElection``/``onResignation``, given ``(partition, leader epoch)`` pairs: start
        loading the groups of the ``__consumer_offsets`` partitions this broker now leads (their
        groups answer COORDINATOR_LOAD_IN_PROGRESS until loaded); drop those of the partitions it
        no longer leads (their members find the new coordinator). An epoch older than one already
        seen for the partition changes nothing; None (a StopReplica without one) always unloads."""
        for tp, epoch in leaders:
            if tp.topic == OFFSETS_TOPIC:
                self.manager.schedule_load(tp.partition, epoch, self._on_groups_loaded)
        for tp, resigned_epoch in followers:
            if tp.topic == OFFSETS_TOPIC:
                for group in self.manager.unload_partition(tp.partition, resigned_epoch) or []:
                    self._on_group_unloaded(group)

    def _on_groups_loaded(self, loaded: list[GroupMetadata]) -> None:
        """Kafka's ``onGroupLoaded``: a group loaded over ``group.max.size`` rebalances (so its
        members can commit before some are refused); every member's session starts now."""
        for group in loaded:
            if len(group.members) > self.config.max_size:
                self._prepare_rebalance(
                    group, f"freshly-loaded group is over capacity ({self.config.max_size}); rebalancing so "
                    "that its members can commit offsets",
                )
        self._start_sessions(loaded)

    def _on_group_unloaded(self, group: GroupMetadata) -> None:
        """Kafka's ``onGroupUnloaded``: the group is dead here; members waiting in JoinGroup or
        SyncGroup answer NOT_COORDINATOR, and its sessions and deadlines go (a dead group's
        completes at once, or ends doing nothing)."""
        group.transition_to(GroupState.DEAD, self.time.milliseconds())
        self._positions.pop(group.group_id, None)
        for member in list(group.members.values()):
            self._invoke_join(member, JoinResult(member.member_id, ErrorCode.NOT_COORDINATOR))
            self._invoke_sync(member, SyncResult(ErrorCode.NOT_COORDINATOR))
            self.heartbeat_purgatory.check_and_complete(member_key(group.group_id, member.member_id))
        for pending in list(group.pending_members):
            self.heartbeat_purgatory.check_and_complete(member_key(group.group_id, pending))
        self.rebalance_purgatory.check_and_complete(join_key(group.group_id))
        self.rebalance_purgatory.check_and_complete(sync_key(group.group_id))

    def _validate_group_status(self, group_id: str | None, allow_empty_id: bool) -> ErrorCode | None:
        if group_id is None or (not group_id and not allow_empty_id):
            return ErrorCode.INVALID_GROUP_ID
        if not self.active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if self.manager.is_loading(group_id):
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        if not self.manager.is_local(group_id):
            return ErrorCode.NOT_COORDINATOR
        return None

    # --- JoinGroup ------------------------------------------------------------------------------

    def handle_join_group(self, join: JoinRequest, respond: Callable[[JoinResult], None]) -> None:
        member_id = join.member_id
        error = self._validate_group_status(join.group_id, allow_empty_id=False)
        if error is not None:
            respond(JoinResult(member_id, error))
            return
        if not self.config.min_session_timeout_ms <= join.session_timeout_ms <= self.config.max_session_timeout_ms:
            respond(JoinResult(member_id, ErrorCode.INVALID_SESSION_TIMEOUT))
            return
        # A protocol offered twice counts once (the first, most preferred, offer wins).
        offered: dict[str, bytes] = {}
        for name, metadata in join.protocols:
            offered.setdefault(name, metadata)
        join.protocols = list(offered.items())
        is_unknown_member = member_id == UNKNOWN_MEMBER_ID
        group = self.manager.get_group(join.group_id)
        if group is None:
            if not is_unknown_member:
                respond(JoinResult(member_id, ErrorCode.UNKNOWN_MEMBER_ID))
                return
            group = self.manager.add_group(GroupMetadata(join.group_id, GroupState.EMPTY, self.time.milliseconds()))
        if not self._accept_joining_member(group, member_id):
            respond(JoinResult(UNKNOWN_MEMBER_ID, ErrorCode.GROUP_MAX_SIZE_REACHED))
            # As Kafka: a member (only one that has not rejoined a rebalance gets here) or a
            # pending member id is dropped, without a rebalance of its own; the join phase is
            # checked below, so it no longer waits for either.
            group.remove(member_id)
            self.heartbeat_purgatory.check_and_complete(member_key(group.group_id, member_id))
        elif is_unknown_member:
            self._join_new_member(group, join, respond)
        else:
            self._join_current_member(group, join, respond)
        if group.is_state(GroupState.PREPARING_REBALANCE):
            self.rebalance_purgatory.check_and_complete(join_key(group.group_id))

    def _accept_joining_member(self, group: GroupMetadata, member_id: str) -> bool:
        limit = self.config.max_size
        if group.is_state(GroupState.EMPTY, GroupState.DEAD):
            return True
        if group.is_state(GroupState.PREPARING_REBALANCE):
            joined = group.has(member_id) and group.get(member_id).is_awaiting_join
            return joined or group.num_awaiting_join < limit
        return group.has(member_id) or len(group.members) < limit

    def _join_new_member(self, group: GroupMetadata, join: JoinRequest, respond: Callable[[JoinResult], None]) -> None:
        if group.is_state(GroupState.DEAD):
            # Deleted or unloaded meanwhile; the client will find the coordinator again.
            respond(JoinResult(UNKNOWN_MEMBER_ID, ErrorCode.COORDINATOR_NOT_AVAILABLE))
            return
        if not group.supports_protocols(join.protocol_type, [name for name, _ in join.protocols]):
            respond(JoinResult(UNKNOWN_MEMBER_ID, ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
            return
        new_member_id = f"{join.group_instance_id or join.client_id}-{uuid.uuid4()}"
        if join.group_instance_id is not None:
            old_member_id = group.static_member_id(join.group_instance_id)
            if old_member_id is None:
                self._add_member_and_rebalance(group, new_member_id, join, respond)
            else:
                self._update_static_member_and_rebalance(group, old_member_id, new_member_id, join, respond)
        elif join.require_known_member_id:
            # KIP-394: hand out the member id first; the member joins with it in a second request.
            group.pending_members.add(new_member_id)
            self.heartbeat_purgatory.try_complete_else_watch(
                DelayedHeartbeat(self, group, new_member_id, True, join.session_timeout_ms),
                [member_key(group.group_id, new_member_id)],
            )
            respond(JoinResult(new_member_id, ErrorCode.MEMBER_ID_REQUIRED))
        else:
            self._add_member_and_rebalance(group, new_member_id, join, respond)

    def _join_current_member(
        self, group: GroupMetadata, join: JoinRequest, respond: Callable[[JoinResult], None]
    ) -> None:
        member_id, group_instance_id, protocols = join.member_id, join.group_instance_id, join.protocols
        if group.is_state(GroupState.DEAD):
            respond(JoinResult(member_id, ErrorCode.COORDINATOR_NOT_AVAILABLE))
            return
        if not group.supports_protocols(join.protocol_type, [name for name, _ in protocols]):
            respond(JoinResult(member_id, ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
            return
        if member_id in group.pending_members:
            # The second JoinGroup of KIP-394's round trip.
            self._add_member_and_rebalance(group, member_id, join, respond)
            return
        if group.is_static_member_fenced(member_id, group_instance_id):
            respond(JoinResult(member_id, ErrorCode.FENCED_INSTANCE_ID))
            return
        instance_unknown = group_instance_id is not None and group.static_member_id(group_instance_id) is None
        if not group.has(member_id) or instance_unknown:
            respond(JoinResult(member_id, ErrorCode.UNKNOWN_MEMBER_ID))
            return
        member = group.get(member_id)
        if group.is_state(GroupState.PREPARING_REBALANCE):
            self._update_member_and_rebalance(group, member, join, respond, f"member {member_id} rejoined")
        elif group.is_state(GroupState.COMPLETING_REBALANCE):
            if member.matches(protocols):
                # It probably missed the JoinGroup answer: give it the current generation again.
                respond(self._join_result(group, member, include_members=group.is_leader(member_id)))
            else:
                self._update_member_and_rebalance(group, member, join, respond, f"member {member_id} changed its protocols")
        elif group.is_state(GroupState.STABLE):
            if group.is_leader(member_id) or not member.matches(protocols):
                # The leader rejoining asks for a new assignment (e.g. the topics' partitions changed).
                self._update_member_and_rebalance(group, member, join, respond, f"leader or changed member {member_id} rejoined")
            else:
                respond(self._join_result(group, member, include_members=False))
        else:  # Empty: the member should forget its generation and join anew
            respond(JoinResult(member_id, ErrorCode.UNKNOWN_MEMBER_ID))

    def _join_result(self, group: GroupMetadata, member: MemberMetadata, include_members: bool) -> JoinResult:
        members = []
        if include_members and group.protocol_name is not None:
            members = [(m.member_id, m.group_instance_id, m.metadata(group.protocol_name)) for m in group.members.values()]
        return JoinResult(
            member.member_id, ErrorCode.NONE, group.generation_id, group.protocol_type, group.protocol_name,
            group.leader_id or "", members,
        )

    def _add_member_and_rebalance(
        self, group: GroupMetadata, member_id: str, join: JoinRequest, respond: Callable[[JoinResult], None]
    ) -> None:
        member = MemberMetadata(
            member_id, join.group_instance_id, join.client_id, join.client_host, join.rebalance_timeout_ms,
            join.session_timeout_ms, join.protocol_type, join.protocols,
        )
        member.is_new = True
        if group.is_state(GroupState.PREPARING_REBALANCE) and group.generation_id == 0:
            group.new_member_added = True  # lets the initial rebalance delay extend itself
        group.add(member)
        self._set_awaiting_join(member, respond)
        # A new member cannot heartbeat while its JoinGroup waits; bound that wait instead.
        self._complete_and_schedule_next_heartbeat(group, member, NEW_MEMBER_JOIN_TIMEOUT_MS)
        self._maybe_prepare_rebalance(
            group, f"adding new member {member_id} with group instance id {join.group_instance_id}"
        )

    def _update_member_and_rebalance(
        self,
        group: GroupMetadata,
        member: MemberMetadata,
        join: JoinRequest,
        respond: Callable[[JoinResult], None],
        reason: str,
    ) -> None:
        group.update_protocols(member, join.protocols)
        member.rebalance_timeout_ms, member.session_timeout_ms = join.rebalance_timeout_ms, join.session_timeout_ms
        self._set_awaiting_join(member, respond)
        self._maybe_prepare_rebalance(group, reason)

    def _update_static_member_and_rebalance(
        self,
        group: GroupMetadata,
        old_member_id: str,
        new_member_id: str,
        join: JoinRequest,
        respond: Callable[[JoinResult], None],
    ) -> None:
        """A known static member rejoins with a new member id (KIP-345): in a stable group whose
        protocol choice does not change it keeps its assignment and no rebalance happens."""
        group_instance_id = join.group_instance_id
        assert group_instance_id is not None
        current_leader = group.leader_id
        old_member = group.get(old_member_id)
        # Whoever still waits under the old member id is a zombie now: fence it.
        self._invoke_join(old_member, JoinResult(old_member_id, ErrorCode.FENCED_INSTANCE_ID))
        self._invoke_sync(old_member, SyncResult(ErrorCode.FENCED_INSTANCE_ID))
        old_protocols = old_member.supported_protocols
        old_timeouts = (old_member.rebalance_timeout_ms, old_member.session_timeout_ms)
        member = group.replace_static_member(group_instance_id, old_member_id, new_member_id)
        self.heartbeat_purgatory.check_and_complete(member_key(group.group_id, old_member_id))
        self._complete_and_schedule_next_heartbeat(group, member)
        group.update_protocols(member, join.protocols)
        member.rebalance_timeout_ms, member.session_timeout_ms = join.rebalance_timeout_ms, join.session_timeout_ms
        if group.is_state(GroupState.STABLE):
            if group.select_protocol() != group.protocol_name:
                self._set_awaiting_join(member, respond)
                self._maybe_prepare_rebalance(
                    group, f"static member {group_instance_id} rejoined with a change of protocol"
                )
                return
            generation = group.generation_id

            def stored(error: ErrorCode) -> None:
                if error != ErrorCode.NONE:
                    log.warning("Group %s: could not persist static member %s's new member id: %s",
                                group.group_id, group_instance_id, error.name)
                    if group.has(new_member_id) and group.generation_id == generation:
                        restored = group.replace_static_member(group_instance_id, new_member_id, old_member_id)
                        group.update_protocols(restored, old_protocols)
                        restored.rebalance_timeout_ms, restored.session_timeout_ms = old_timeouts
                        self._complete_and_schedule_next_heartbeat(group, restored)
                    respond(JoinResult(UNKNOWN_MEMBER_ID, error))
                    return
                # The old leader id is kept, so a rejoining leader does not redo a trivial assignment
                # that a stable group would never distribute.
                respond(JoinResult(
                    new_member_id, ErrorCode.NONE, group.generation_id, group.protocol_type, group.protocol_name,
                    current_leader or "", [],
                ))

            log.info("Static member %s of group %s rejoined with member id %s; no rebalance",
                     group_instance_id, group.group_id, new_member_id)
            self.manager.store_group(group, {m.member_id: m.assignment for m in group.members.values()}, stored)
        elif group.is_state(GroupState.COMPLETING_REBALANCE):
            self._set_awaiting_join(member, respond)
            self._maybe_prepare_rebalance(group, f"static member {group_instance_id} rejoined during CompletingRebalance")
        else:  # PreparingRebalance: the join phase answers it
            self._set_awaiting_join(member, respond)

    def _set_awaiting_join(self, member: MemberMetadata, respond: Callable[[JoinResult], None]) -> None:
        loop = asyncio.get_running_loop()
        if member.awaiting_join is not None and not member.awaiting_join.done():
            # A second JoinGroup while the first still waits: the first is superseded.
            member.awaiting_join.set_result(JoinResult(member.member_id, ErrorCode.REBALANCE_IN_PROGRESS))
        future: asyncio.Future[JoinResult] = loop.create_future()
        future.add_done_callback(lambda f: respond(f.result()))
        member.awaiting_join = future

    @staticmethod
    def _invoke_join(member: MemberMetadata, result: JoinResult) -> bool:
        future, member.awaiting_join = member.awaiting_join, None
        if future is None:
            return False
        if not future.done():
            future.set_result(result)
        return True

    def _maybe_prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group, reason)

    def _prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        if group.is_state(GroupState.COMPLETING_REBALANCE):
            self._reset_and_propagate_assignment_error(group, ErrorCode.REBALANCE_IN_PROGRESS)
        group.pending_sync_members.clear()
        self.rebalance_purgatory.check_and_complete(sync_key(group.group_id))
        delay = self.config.initial_rebalance_delay_ms
        if group.is_state(GroupState.EMPTY):
            operation: DelayedJoin = InitialDelayedJoin(
                self, self.rebalance_purgatory, group, delay, delay, max(group.rebalance_timeout_ms - delay, 0)
            )
        else:
            operation = DelayedJoin(self, group, group.rebalance_timeout_ms)
        group.transition_to(GroupState.PREPARING_REBALANCE, self.time.milliseconds())
        log.info("Preparing to rebalance group %s with old generation %d (%s)", group.group_id,
                 group.generation_id, reason)
        self.rebalance_purgatory.try_complete_else_watch(operation, [join_key(group.group_id)])

    def can_complete_join(self, group: GroupMetadata) -> bool:
        return group.has_all_members_joined()

    def on_complete_join(self, group: GroupMetadata) -> None:
        """The join phase ended: drop dynamic members that did not rejoin, start the next
        generation and answer every waiting JoinGroup (the leader gets the members' metadata)."""
        if not self.active:
            return
        gone = [m for m in group.not_yet_rejoined() if not m.is_static]
        for member in gone:
            group.remove(member.member_id)
            self.heartbeat_purgatory.check_and_complete(member_key(group.group_id, member.member_id))
        if gone:
            log.info("Group %s removed members that did not rejoin: %s", group.group_id,
                     ", ".join(m.member_id for m in gone))
        if group.is_state(GroupState.DEAD):
            return
        if not group.elect_new_joined_leader() and group.members:
            # Only static members that have not rejoined are left: wait for them or their sessions.
            log.warning("Group %s could not complete its rebalance: no member rejoined", group.group_id)
            self.rebalance_purgatory.try_complete_else_watch(
                DelayedJoin(self, group, group.rebalance_timeout_ms), [join_key(group.group_id)]
            )
            return
        group.init_next_generation(self.time.milliseconds())
        if group.is_state(GroupState.EMPTY):
            log.info("Group %s with generation %d is now empty", group.group_id, group.generation_id)

            def stored(error: ErrorCode) -> None:
                if error != ErrorCode.NONE:
                    log.warning("Group %s: failed to store the empty generation: %s", group.group_id, error.name)

            self.manager.store_group(group, {}, stored)
            return
        log.info("Stabilized group %s generation %d with %d member(s)", group.group_id, group.generation_id,
                 len(group.members))
        for member in list(group.members.values()):
            self._invoke_join(member, self._join_result(group, member, include_members=group.is_leader(member.member_id)))
            self._complete_and_schedule_next_heartbeat(group, member)
            member.is_new = False
            group.pending_sync_members.add(member.member_id)
        self.rebalance_purgatory.try_complete_else_watch(
            DelayedSync(self, group, group.generation_id, group.rebalance_timeout_ms), [sync_key(group.group_id)]
        )

    # --- pending SyncGroup ----------------------------------------------------------------------

    def sync_complete(self, group: GroupMetadata, generation_id: int) -> bool:
        return (
            group.generation_id != generation_id
            or not group.pending_sync_members
            or not group.is_state(GroupState.COMPLETING_REBALANCE, GroupState.STABLE)
        )

    def on_expire_sync(self, group: GroupMetadata, generation_id: int) -> None:
        if not self.active or self.sync_complete(group, generation_id):
            return
        missing = sorted(group.pending_sync_members)
        log.info("Group %s: removing members that sent no SyncGroup in time: %s", group.group_id, ", ".join(missing))
        for member_id in missing:
            group.remove(member_id)
            self.heartbeat_purgatory.check_and_complete(member_key(group.group_id, member_id))
        group.pending_sync_members.clear()
        self._prepare_rebalance(group, "members failed to sync")

    @staticmethod
    def _validate_current_member(group: GroupMetadata, member_id: str, group_instance_id: str | None) -> ErrorCode | None:
        """Kafka's check: a given instance id must exist and belong to ``member_id``; the member
        must exist."""
        if group_instance_id is not None:
            current = group.static_member_id(group_instance_id)
            if current is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            if current != member_id:
                return ErrorCode.FENCED_INSTANCE_ID
        if not group.has(member_id):
            return ErrorCode.UNKNOWN_MEMBER_ID
        return None

    # --- SyncGroup ------------------------------------------------------------------------------

    def handle_sync_group(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: dict[str, bytes],
        respond: Callable[[SyncResult], None],
    ) -> None:
        error = self._validate_group_status(group_id, allow_empty_id=False)
        if error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            # The rebalance's state is lost while loading: the member must join again.
            error = ErrorCode.REBALANCE_IN_PROGRESS
        if error is not None:
            respond(SyncResult(error))
            return
        group = self.manager.get_group(group_id)
        if group is None:
            respond(SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))
            return
        member_error = self._validate_current_member(group, member_id, group_instance_id)
        if group.is_state(GroupState.DEAD):
            respond(SyncResult(ErrorCode.COORDINATOR_NOT_AVAILABLE))
        elif member_error is not None:
            respond(SyncResult(member_error))
        elif generation_id != group.generation_id:
            respond(SyncResult(ErrorCode.ILLEGAL_GENERATION))
        elif (protocol_type is not None and protocol_type != group.protocol_type) or (
            protocol_name is not None and protocol_name != group.protocol_name
        ):
            respond(SyncResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
        elif group.is_state(GroupState.EMPTY):
            respond(SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))
        elif group.is_state(GroupState.PREPARING_REBALANCE):
            respond(SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
        elif group.is_state(GroupState.COMPLETING_REBALANCE):
            member = group.get(member_id)
            # A second SyncGroup while the first still waits: the first is superseded.
            self._invoke_sync(member, SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
            member.awaiting_sync = respond
            self._remove_pending_sync_member(group, member_id)
            if group.is_leader(member_id):
                self._store_assignment(group, generation_id, member_id, assignments)
        else:  # Stable: hand out the current assignment
            self._remove_pending_sync_member(group, member_id)
            member = group.get(member_id)
            respond(SyncResult(ErrorCode.NONE, group.protocol_type, group.protocol_name, member.assignment))
            self._complete_and_schedule_next_heartbeat(group, member)

    def _remove_pending_sync_member(self, group: GroupMetadata, member_id: str) -> None:
        """The member's SyncGroup came: once every member's has, the pending-sync deadline is done."""
        group.pending_sync_members.discard(member_id)
        self.rebalance_purgatory.check_and_complete(sync_key(group.group_id))

    def _store_assignment(
        self, group: GroupMetadata, generation_id: int, leader_id: str, assignments: dict[str, bytes]
    ) -> None:
        missing = [m for m in group.members if m not in assignments]
        if missing:
            log.warning("Group %s: the leader assigned nothing to %s", group.group_id, ", ".join(missing))
        assignment = {m: assignments.get(m, b"") for m in group.members}
        log.info("Assignment received from leader %s for group %s generation %d (%d member(s))",
                 leader_id, group.group_id, generation_id, len(group.members))

        def stored(error: ErrorCode) -> None:
            # Members may have come or gone while the write was in flight.
            if not group.is_state(GroupState.COMPLETING_REBALANCE) or group.generation_id != generation_id:
                return
            if error != ErrorCode.NONE:
                self._reset_and_propagate_assignment_error(group, error)
                self._maybe_prepare_rebalance(group, f"storing the assignment failed ({error.name})")
                return
            for member_id, member in group.members.items():
                member.assignment = assignment.get(member_id, b"")
            group.transition_to(GroupState.STABLE, self.time.milliseconds())
            self._propagate_assignment(group, ErrorCode.NONE)

        self.manager.store_group(group, assignment, stored)

    def _reset_and_propagate_assignment_error(self, group: GroupMetadata, error: ErrorCode) -> None:
        for member in group.members.values():
            member.assignment = b""
        self._propagate_assignment(group, error)

    def _propagate_assignment(self, group: GroupMetadata, error: ErrorCode) -> None:
        ok = error == ErrorCode.NONE
        for member in list(group.members.values()):
            answered = self._invoke_sync(member, SyncResult(
                error, group.protocol_type if ok else None, group.protocol_name if ok else None, member.assignment,
            ))
            if answered:
                # Sessions restart once the assignment is out (expiry was suspended while syncing).
                self._complete_and_schedule_next_heartbeat(group, member)

    @staticmethod
    def _invoke_sync(member: MemberMetadata, result: SyncResult) -> bool:
        """Answer the member's waiting SyncGroup, if any, now: its callback hands the answer on in
        this very step (no future in between), as Kafka's ``awaitingSyncCallback``."""
        respond, member.awaiting_sync = member.awaiting_sync, None
        if respond is None:
            return False
        respond(result)
        return True

    # --- Heartbeat and sessions -----------------------------------------------------------------

    def handle_heartbeat(
        self, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int
    ) -> ErrorCode:
        error = self._validate_group_status(group_id, allow_empty_id=False)
        if error is not None:
            # A loading coordinator answers heartbeats blindly, as Kafka does.
            return ErrorCode.NONE if error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS else error
        group = self.manager.get_group(group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.is_state(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        member_error = self._validate_current_member(group, member_id, group_instance_id)
        if member_error is not None:
            return member_error
        if generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        if group.is_state(GroupState.EMPTY):
            return ErrorCode.UNKNOWN_MEMBER_ID
        self._complete_and_schedule_next_heartbeat(group, group.get(member_id))
        if group.is_state(GroupState.PREPARING_REBALANCE):
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    def handle_consumer_group_position(
        self, group_id: str, member_id: str, generation_id: int,
        reports: list[tuple[TopicPartition, int]], interested: list[TopicPartition],
    ) -> tuple[ErrorCode, PositionsAnswer]:
        """KIP-253's ConsumerGroupPosition (see `pybroker.server.group.positions`): checked like
        a heartbeat of the current generation of a stable consumer group."""
        error = self._validate_group_status(group_id, allow_empty_id=False)
        group = self.manager.get_group(group_id) if error is None else None
        if error is None and group is None:
            error = ErrorCode.UNKNOWN_MEMBER_ID
        elif group is not None:
            if group.is_state(GroupState.DEAD):
                error = ErrorCode.COORDINATOR_NOT_AVAILABLE
            else:
                error = self._validate_current_member(group, member_id, None)
            if error is None and generation_id != group.generation_id:
                error = ErrorCode.ILLEGAL_GENERATION
            if error is None and not group.is_consumer_group:
                error = ErrorCode.INCONSISTENT_GROUP_PROTOCOL
            if error is None and not group.is_state(GroupState.STABLE):
                error = ErrorCode.REBALANCE_IN_PROGRESS
        if error is not None or group is None:
            return error or ErrorCode.UNKNOWN_MEMBER_ID, PositionsAnswer()
        positions = self._positions.get(group_id)
        if positions is None or positions.generation_id != group.generation_id:
            owners = {tp: member.member_id for member in group.members.values() if member.assignment
                      for tp in consumer_protocol.decode_assignment(member.assignment).partitions}
            positions = self._positions[group_id] = GroupPositions(group.generation_id, owners)
        committed = {tp: o.offset for tp, o in group.offsets.items()}
        return ErrorCode.NONE, positions.exchange(member_id, reports, interested, committed)

    def _complete_and_schedule_next_heartbeat(
        self, group: GroupMetadata, member: MemberMetadata, timeout_ms: int | None = None
    ) -> None:
        key = member_key(group.group_id, member.member_id)
        member.heartbeat_satisfied = True
        self.heartbeat_purgatory.check_and_complete(key)
        member.heartbeat_satisfied = False
        timeout = member.session_timeout_ms if timeout_ms is None else timeout_ms
        self.heartbeat_purgatory.try_complete_else_watch(
            DelayedHeartbeat(self, group, member.member_id, False, timeout), [key]
        )

    def heartbeat_satisfied(self, group: GroupMetadata, member_id: str, is_pending: bool) -> bool:
        if group.is_state(GroupState.DEAD):
            return True
        if is_pending:
            return group.has(member_id) or member_id not in group.pending_members
        if not group.has(member_id):
            return True
        return group.get(member_id).has_satisfied_heartbeat()

    def on_expire_heartbeat(self, group: GroupMetadata, member_id: str, is_pending: bool) -> None:
        if not self.active or group.is_state(GroupState.DEAD):
            return
        if is_pending:
            log.info("Pending member %s of group %s expired: it did not rejoin in time", member_id, group.group_id)
            self._remove_pending_member(group, member_id)
        elif group.has(member_id) and not group.get(member_id).has_satisfied_heartbeat():
            log.info("Member %s of group %s has failed (session timeout); removing it", member_id, group.group_id)
            self._remove_member_and_update_group(group, group.get(member_id), "session timeout")

    def _remove_pending_member(self, group: GroupMetadata, member_id: str) -> None:
        group.pending_members.discard(member_id)
        if group.is_state(GroupState.PREPARING_REBALANCE):
            self.rebalance_purgatory.check_and_complete(join_key(group.group_id))

    def _remove_member_and_update_group(self, group: GroupMetadata, member: MemberMetadata, reason: str) -> None:
        # A member removed while its JoinGroup waits is told to join again from scratch.
        self._invoke_join(member, JoinResult(UNKNOWN_MEMBER_ID, ErrorCode.UNKNOWN_MEMBER_ID))
        # So is one whose SyncGroup waits (its LeaveGroup may follow that SyncGroup on the same
        # connection, whose replies go out in request order: an unanswered SyncGroup would hold
        # back the LeaveGroup's answer too). Kafka mutes the connection instead, so never meets it.
        self._invoke_sync(member, SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))
        group.remove(member.member_id)
        self._after_member_removed(group, member.member_id, reason)

    def _after_member_removed(self, group: GroupMetadata, member_id: str, reason: str) -> None:
        self.heartbeat_purgatory.check_and_complete(member_key(group.group_id, member_id))
        if group.is_state(GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance(group, f"removing member {member_id}: {reason}")
        elif group.is_state(GroupState.PREPARING_REBALANCE):
            self.rebalance_purgatory.check_and_complete(join_key(group.group_id))

    # --- LeaveGroup -----------------------------------------------------------------------------

    def handle_leave_group(
        self, group_id: str, leaving: list[tuple[str, str | None]]
    ) -> tuple[ErrorCode, list[ErrorCode]]:
        """Remove members ``(member_id, group_instance_id)``; the top-level error and one per member."""
        error = self._validate_group_status(group_id, allow_empty_id=False)
        if error is not None:
            return error, []
        group = self.manager.get_group(group_id)
        if group is None:
            return ErrorCode.NONE, [ErrorCode.UNKNOWN_MEMBER_ID for _ in leaving]
        if group.is_state(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, []
        results = []
        for member_id, group_instance_id in leaving:
            if member_id == UNKNOWN_MEMBER_ID:
                # Administrative removal of a static member by its instance id.
                current = group.static_member_id(group_instance_id)
                if current is None:
                    results.append(ErrorCode.UNKNOWN_MEMBER_ID)
                    continue
                member_id = current
            elif member_id in group.pending_members:
                self._remove_pending_member(group, member_id)
                self.heartbeat_purgatory.check_and_complete(member_key(group.group_id, member_id))
                results.append(ErrorCode.NONE)
                continue
            else:
                member_error = self._validate_current_member(group, member_id, group_instance_id)
                if member_error is not None:
                    results.append(member_error)
                    continue
            log.info("Member %s is leaving group %s", member_id, group.group_id)
            self._remove_member_and_update_group(group, group.get(member_id), "the member left the group")
            results.append(ErrorCode.NONE)
        return ErrorCode.NONE, results

    # --- offsets --------------------------------------------------------------------------------

    def handle_commit_offsets(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
        offsets: dict[TopicPartition, OffsetAndMetadata],
        respond: Callable[[dict[TopicPartition, ErrorCode]], None],
    ) -> None:
        error = self._validate_group_status(group_id, allow_empty_id=True)
        if error is not None:
            respond(dict.fromkeys(offsets, error))
            return
        group = self.manager.get_group(group_id)
        if group is None:
            if generation_id >= 0:
                # A member of a generation this coordinator does not know.
                respond(dict.fromkeys(offsets, ErrorCode.ILLEGAL_GENERATION))
                return
            # A group that only stores offsets here (no group management).
            group = self.manager.add_group(GroupMetadata(group_id, GroupState.EMPTY, self.time.milliseconds()))
        error = self._validate_offset_commit(group, generation_id, member_id, group_instance_id)
        if error is None and group.is_state(GroupState.COMPLETING_REBALANCE):
            # A current member that has not got its assignment yet: let it finish the rebalance.
            error = ErrorCode.REBALANCE_IN_PROGRESS
        if error is not None:
            respond(dict.fromkeys(offsets, error))
            return
        if group.has(member_id):
            self._complete_and_schedule_next_heartbeat(group, group.get(member_id))
        self._store_offsets(group, offsets, respond)

    def _store_offsets(
        self,
        group: GroupMetadata,
        offsets: dict[TopicPartition, OffsetAndMetadata],
        respond: Callable[[dict[TopicPartition, ErrorCode]], None],
        producer_id: int | None = None,
        producer_epoch: int = -1,
    ) -> None:
        """Store the offsets whose metadata is within ``offset.metadata.max.bytes``; the others
        answer OFFSET_METADATA_TOO_LARGE."""
        limit = self.config.offset_metadata_max_bytes
        # Kafka measures the metadata in Java chars (UTF-16 code units), not bytes.
        too_large = {tp for tp, o in offsets.items() if len(o.metadata.encode("utf-16-le")) // 2 > limit}
        accepted = {tp: o for tp, o in offsets.items() if tp not in too_large}

        def stored(errors: dict[TopicPartition, ErrorCode]) -> None:
            respond({tp: errors.get(tp, ErrorCode.OFFSET_METADATA_TOO_LARGE) for tp in offsets})

        if producer_id is None:
            self.manager.store_offsets(group, accepted, stored)
        else:
            self.manager.store_offsets(group, accepted, stored, producer_id, producer_epoch)

    def handle_txn_commit_offsets(
        self,
        group_id: str,
        producer_id: int,
        producer_epoch: int,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
        offsets: dict[TopicPartition, OffsetAndMetadata],
        respond: Callable[[dict[TopicPartition, ErrorCode]], None],
    ) -> None:
        """TxnOffsetCommit (Kafka's ``handleTxnCommitOffsets``): the offsets are written as one
        transactional batch of ``producer_id`` and stay pending until its transaction ends
        (`handle_txn_completion`). A group unknown here is created Empty. A request that names a
        member or a generation (v3, KIP-447) must match the group's current ones, so a consumer
        of an older generation cannot commit: FENCED_INSTANCE_ID, UNKNOWN_MEMBER_ID,
        ILLEGAL_GENERATION; one that names neither (v0-v2) may commit whatever the group's state."""
        error = self._validate_group_status(group_id, allow_empty_id=False)
        if error is not None:
            respond(dict.fromkeys(offsets, error))
            return
        group = self.manager.get_group(group_id)
        if group is None:
            group = self.manager.add_group(GroupMetadata(group_id, GroupState.EMPTY, self.time.milliseconds()))
        error = self._validate_offset_commit(group, generation_id, member_id, group_instance_id, transactional=True)
        if error is not None:
            respond(dict.fromkeys(offsets, error))
            return
        self._store_offsets(group, offsets, respond, producer_id, producer_epoch)

    def handle_txn_completion(self, producer_id: int, offsets_partitions: Iterable[int], commit: bool) -> None:
        """A commit (``commit``) or abort marker of ``producer_id`` was appended to the
        ``__consumer_offsets`` partitions ``offsets_partitions`` (Kafka's
        ``scheduleHandleTxnCompletion``, done at once: this broker has no group locks to avoid).
        The producer's pending transactional offsets in the groups of those partitions coordinated
        here become committed (where newer in the log than the committed offset) or are dropped."""
        self.manager.handle_txn_completion(producer_id, offsets_partitions, commit)

    @staticmethod
    def _validate_offset_commit(
        group: GroupMetadata, generation_id: int, member_id: str, group_instance_id: str | None,
        transactional: bool = False,
    ) -> ErrorCode | None:
        if group.is_state(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if generation_id < 0 and group.is_state(GroupState.EMPTY):
            return None  # the group only stores offsets here
        if generation_id >= 0 or member_id != UNKNOWN_MEMBER_ID or group_instance_id is not None:
            member_error = GroupCoordinator._validate_current_member(group, member_id, group_instance_id)
            if member_error is not None:
                return member_error
            if generation_id != group.generation_id:
                return ErrorCode.ILLEGAL_GENERATION
            return None
        if not transactional and not group.is_state(GroupState.EMPTY):
            # While a group has members, only they commit; not so for a transactional commit,
            # whose versions before v3 carry no member id or generation.
            return ErrorCode.UNKNOWN_MEMBER_ID
        return None

    def handle_fetch_offsets(
        self, group_id: str, partitions: list[TopicPartition] | None, require_stable: bool = False
    ) -> tuple[ErrorCode, dict[TopicPartition, OffsetAndMetadata | None]]:
        """Committed offsets of ``partitions`` (None: all the group has committed); -1 where
        none. With ``require_stable`` (OffsetFetch v7+, KIP-447), None for a partition whose commit
        is pending (in flight, or in an open transaction): the request answers
        UNSTABLE_OFFSET_COMMIT for it. Without, pending commits are not seen."""
        error = self._validate_group_status(group_id, allow_empty_id=True)
        if error is not None:
            return error, {}
        group = self.manager.get_group(group_id)
        if group is None or group.is_state(GroupState.DEAD):
            return ErrorCode.NONE, dict.fromkeys(partitions or [], NO_OFFSET)
        committed = group.offsets
        wanted = list(committed) if partitions is None else partitions
        result: dict[TopicPartition, OffsetAndMetadata | None] = {}
        for tp in wanted:
            if require_stable and group.has_pending_offset_commits_for_topic_partition(tp):
                result[tp] = None
            else:
                result[tp] = committed.get(tp, NO_OFFSET)
        return ErrorCode.NONE, result

    def handle_delete_offsets(
        self, group_id: str, partitions: list[TopicPartition]
    ) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
        error = self._validate_group_status(group_id, allow_empty_id=False)
        if error is not None:
            return error, {}
        group = self.manager.get_group(group_id)
        if group is None or group.is_state(GroupState.DEAD):
            return ErrorCode.GROUP_ID_NOT_FOUND, {}
        errors: dict[TopicPartition, ErrorCode] = {}
        if group.is_state(GroupState.EMPTY):
            eligible = list(partitions)
        elif group.is_consumer_group:
            eligible = []
            for tp in partitions:
                if group.is_subscribed_to(tp.topic):
                    errors[tp] = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
                else:
                    eligible.append(tp)
        else:
            return ErrorCode.NON_EMPTY_GROUP, {}
        if eligible:
            self.manager.cleanup_group_metadata([group], lambda g: eligible)
            errors.update(dict.fromkeys(eligible, ErrorCode.NONE))
        return ErrorCode.NONE, errors

    def on_partitions_deleted(self, deleted: list[TopicPartition]) -> None:
        """Committed offsets of deleted partitions go with them (Kafka's handleDeletedPartitions)."""
        self.manager.cleanup_group_metadata(list(self.manager.groups.values()), lambda g: list(deleted))

    # --- ListGroups / DescribeGroups / DeleteGroups -----------------------------------------------

    def handle_list_groups(self, states: set[GroupState] | None) -> tuple[ErrorCode, list[tuple[str, str, str]]]:
        """``(group_id, protocol_type, state)`` of every group, optionally only in ``states``."""
        if not self.active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, []
        error = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if self.manager.loading_partitions else ErrorCode.NONE
        groups = [
            (g.group_id, g.protocol_type or "", g.state.value)
            for g in self.manager.groups.values()
            if states is None or g.state in states
        ]
        return error, groups

    def handle_describe_group(self, group_id: str) -> tuple[ErrorCode, GroupSummary]:
        error = self._validate_group_status(group_id, allow_empty_id=True)
        if error is not None:
            return error, EMPTY_GROUP
        group = self.manager.get_group(group_id)
        if group is None:
            return ErrorCode.NONE, DEAD_GROUP
        if group.is_state(GroupState.STABLE) and group.protocol_name is not None:
            protocol = group.protocol_name
            members = [
                MemberSummary(m.member_id, m.group_instance_id, m.client_id, m.client_host, m.metadata(protocol),
                              m.assignment)
                for m in group.members.values()
            ]
            return ErrorCode.NONE, GroupSummary(group.state.value, group.protocol_type or "", protocol, members)
        members = [
            MemberSummary(m.member_id, m.group_instance_id, m.client_id, m.client_host, b"", b"")
            for m in group.members.values()
        ]
        return ErrorCode.NONE, GroupSummary(group.state.value, group.protocol_type or "", "", members)

    def handle_delete_groups(self, group_ids: list[str]) -> dict[str, ErrorCode]:
        results: dict[str, ErrorCode] = {}
        deletable: list[GroupMetadata] = []
        for group_id in group_ids:
            error = self._validate_group_status(group_id, allow_empty_id=True)
            if error is not None:
                results[group_id] = error
                continue
            group = self.manager.get_group(group_id)
            if group is None or group.is_state(GroupState.DEAD):
                results[group_id] = ErrorCode.GROUP_ID_NOT_FOUND
            elif group.is_state(GroupState.EMPTY):
                group.transition_to(GroupState.DEAD, self.time.milliseconds())
                deletable.append(group)
                results[group_id] = ErrorCode.NONE
            else:
                results[group_id] = ErrorCode.NON_EMPTY_GROUP
        if deletable:
            self.manager.cleanup_group_metadata(deletable, lambda g: list(g.offsets))
            log.info("Deleted group(s) %s", ", ".join(g.group_id for g in deletable))
        return results

