"""A consumer's side of the classic group protocol (Kafka's ``ConsumerCoordinator``).

Owns the member's place in its group: finding the coordinator, JoinGroup (protocol type
"consumer", with the MEMBER_ID_REQUIRED round trip of JoinGroup v4+) and SyncGroup, the
leader's assignment (`assignor.range_assign` over the subscriptions of every member), the
heartbeats (a background task every ``heartbeat.interval.ms`` while the group is stable,
which notices a rebalance, a lost membership or a poll loop that stalled past
``max.poll.interval.ms``), LeaveGroup, committing and fetching offsets (OffsetCommit with the
generation, OffsetFetch), and KIP-253's ConsumerGroupPosition exchange (only with a
coordinator that offers API key 30001).

It never decides what to do with an assignment: the consumer calls ``join`` when
``rejoin_needed`` is set and applies the result.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pybroker.client.admin import COORDINATOR_ERRORS, Admin, AdminError
from pybroker.client.assignor import PROTOCOL_NAME, range_assign
from pybroker.client.connection import BrokerConnection, KafkaClientError
from pybroker.client.node import Node
from pybroker.client.topic_layout import TopicLayout
from pybroker.common.errors import ErrorCode
from pybroker.protocol import consumer_protocol
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages import (
    ConsumerGroupPositionRequest,
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    OffsetCommitRequest,
    SyncGroupRequest,
)
from pybroker.scheduler import SYSTEM_TIME, Time
from pybroker.types import TopicPartition

log = logging.getLogger(__name__)

NO_GENERATION = -1
# Errors after which the member must join again (its generation or membership is gone).
REJOIN_ERRORS = frozenset({
    ErrorCode.REBALANCE_IN_PROGRESS, ErrorCode.ILLEGAL_GENERATION, ErrorCode.UNKNOWN_MEMBER_ID,
    ErrorCode.FENCED_INSTANCE_ID,
})
RETRY_BACKOFF_S = 0.1


class CommitFailedError(Exception):
    """The group rebalanced (or forgot this member) before the commit: the partitions may now be
    someone else's. Kafka's ``CommitFailedException``."""


class GroupError(Exception):
    """The group refused this member for good (e.g. GROUP_AUTHORIZATION_FAILED, INVALID_GROUP_ID)."""


@dataclass
class GroupPositions:
    """A ConsumerGroupPosition answer."""

    positions: dict[TopicPartition, int]  # the group's position of each partition asked about (-1 unknown)
    requested: set[TopicPartition]  # owned partitions other members wait on: report them next time
    report_errors: dict[TopicPartition, ErrorCode]


@dataclass(frozen=True)
class ConsumerGroupMetadata:
    """Kafka's ``ConsumerGroupMetadata``: who a member is in its group, for a transactional
    producer's ``send_offsets_to_transaction`` (TxnOffsetCommit v3 carries it so the coordinator
    refuses offsets from a member of an older generation, KIP-447)."""

    group_id: str
    generation_id: int = -1  # -1 and "": not a member (offsets are then not fenced by generation)
    member_id: str = ""
    group_instance_id: str | None = None


@dataclass
class GroupConfig:
    group_id: str
    session_timeout_ms: int = 45000
    heartbeat_interval_ms: int = 3000
    max_poll_interval_ms: int = 300000
    retry_backoff_ms: int = 100
    client_id: str = "pybroker-consumer"


class ConsumerCoordinator:
    """``join(topics, layouts_for)`` → assigned partitions; heartbeats in the background."""

    def __init__(self, admin: Admin, config: GroupConfig, time: Time = SYSTEM_TIME) -> None:
        self.admin = admin
        self.config = config
        self.time = time
        self.member_id = ""
        self.generation = NO_GENERATION
        self.leader_id = ""
        self.is_leader = False
        self.rejoin_needed = True
        self.assignment: list[TopicPartition] = []
        self.assigned_layouts: dict[str, tuple[int, int, int]] = {}  # the leader's snapshot: topic -> counts
        # The subscription's user data: the KIP-253 counts this member has seen (set by the
        # consumer before each join). A Stable group answers a non-leader member that rejoins with
        # unchanged metadata with the current assignment; new counts make its rejoin a rebalance.
        self.user_data: bytes | None = None
        self.last_poll_ms = time.monotonic_ms()
        self._heartbeat: asyncio.Task[None] | None = None
        self._stable = False

    # --- coordinator -----------------------------------------------------------------------------

    async def _coordinator(self) -> tuple[Node, BrokerConnection]:
        node = await self.admin.find_coordinator(self.config.group_id)
        return node, await self.admin.connection(node)

    def _coordinator_lost(self) -> None:
        self.admin.forget_coordinator(self.config.group_id)

    async def _send(self, api_key: int, make: Callable[[int], Any], timeout: float | None = None) -> Any:
        """Send to the coordinator; its loss (connection, NOT_COORDINATOR...) is retried by the caller."""
        node, connection = await self._coordinator()
        version = connection.version_for(api_key)
        try:
            return await connection.send(api_key, make(version), version,
                                         timeout=timeout if timeout is not None else self.config.session_timeout_ms / 1000)
        except (KafkaClientError, OSError) as e:
            self._coordinator_lost()
            await self.admin.reset_connection(node)
            raise KafkaClientError(f"group coordinator {node}: {e}") from e

    # --- joining ---------------------------------------------------------------------------------

    async def join(
        self, topics: Sequence[str], layouts_for: Callable[[Sequence[str]], Any],
    ) -> list[TopicPartition]:
        """Join (or rejoin) the group subscribed to ``topics`` and return this member's
        partitions. ``layouts_for(topics)`` (async) gives the layouts the leader assigns from."""
        self._stop_heartbeat()
        self._stable = False
        while True:
            try:
                assignment = await self._join_once(topics, layouts_for)
            except (KafkaClientError, TimeoutError) as e:
                log.info("group %s: join failed (%s), retrying", self.config.group_id, e)
                await asyncio.sleep(self.config.retry_backoff_ms / 1000)
                continue
            if assignment is not None:
                break
            await asyncio.sleep(0)
        self.assignment = assignment
        self.rejoin_needed = False
        self._stable = True
        self.last_poll_ms = self.time.monotonic_ms()
        self._heartbeat = asyncio.ensure_future(self._heartbeat_loop())
        return assignment

    async def _join_once(self, topics: Sequence[str], layouts_for: Callable[[Sequence[str]], Any]) -> list[TopicPartition] | None:
        subscription = consumer_protocol.encode_subscription(consumer_protocol.ConsumerSubscription(
            topics=list(topics), user_data=self.user_data, owned_partitions=[], generation_id=self.generation,
            version=1))

        def make_join(version: int) -> JoinGroupRequest:
            return JoinGroupRequest(
                group_id=self.config.group_id, session_timeout_ms=self.config.session_timeout_ms,
                rebalance_timeout_ms=self.config.max_poll_interval_ms, member_id=self.member_id,
                group_instance_id=None, protocol_type=consumer_protocol.PROTOCOL_TYPE,
                protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name=PROTOCOL_NAME, metadata=subscription)],
            )

        response = await self._send(ApiKey.JOIN_GROUP, make_join, timeout=self.config.max_poll_interval_ms / 1000 + 10)
        error = ErrorCode.for_code(response.error_code)
        if error == ErrorCode.MEMBER_ID_REQUIRED:
            self.member_id = response.member_id
            return None
        if error == ErrorCode.UNKNOWN_MEMBER_ID:
            self.member_id, self.generation = "", NO_GENERATION
            return None
        if error in COORDINATOR_ERRORS:
            self._coordinator_lost()
            await asyncio.sleep(self.config.retry_backoff_ms / 1000)
            return None
        if error == ErrorCode.REBALANCE_IN_PROGRESS:
            return None
        if error != ErrorCode.NONE:
            raise GroupError(f"group {self.config.group_id}: JoinGroup failed: {error.name}")
        self.member_id = response.member_id
        self.generation = response.generation_id
        self.leader_id = response.leader
        self.is_leader = response.leader == response.member_id
        assignments: list[SyncGroupRequest.SyncGroupRequestAssignment] = []
        if self.is_leader:
            subscriptions = {m.member_id: consumer_protocol.decode_subscription(bytes(m.metadata)).topics
                             for m in response.members}
            wanted = sorted({t for ts in subscriptions.values() for t in ts})
            layouts: dict[str, TopicLayout] = await layouts_for(wanted)
            self.assigned_layouts = {t: layout.counts for t, layout in layouts.items()}
            plan = range_assign(subscriptions, layouts)
            assignments = [SyncGroupRequest.SyncGroupRequestAssignment(
                member_id=member, assignment=consumer_protocol.encode_assignment(
                    consumer_protocol.ConsumerAssignment(partitions=parts)))
                for member, parts in plan.items()]
            log.info("group %s generation %d: leader %s assigned %s", self.config.group_id, self.generation,
                     self.member_id, {m: [str(tp) for tp in ps] for m, ps in plan.items()})

        def make_sync(version: int) -> SyncGroupRequest:
            return SyncGroupRequest(
                group_id=self.config.group_id, generation_id=self.generation, member_id=self.member_id,
                group_instance_id=None, protocol_type=consumer_protocol.PROTOCOL_TYPE, protocol_name=PROTOCOL_NAME,
                assignments=assignments,
            )

        synced = await self._send(ApiKey.SYNC_GROUP, make_sync)
        error = ErrorCode.for_code(synced.error_code)
        if error in REJOIN_ERRORS or error in COORDINATOR_ERRORS:
            if error == ErrorCode.UNKNOWN_MEMBER_ID:
                self.member_id, self.generation = "", NO_GENERATION
            if error in COORDINATOR_ERRORS:
                self._coordinator_lost()
            return None
        if error != ErrorCode.NONE:
            raise GroupError(f"group {self.config.group_id}: SyncGroup failed: {error.name}")
        return consumer_protocol.decode_assignment(bytes(synced.assignment)).partitions

    # --- heartbeats ------------------------------------------------------------------------------

    def _stop_heartbeat(self) -> None:
        if self._heartbeat is not None:
            self._heartbeat.cancel()
            self._heartbeat = None

    async def _heartbeat_loop(self) -> None:
        interval = self.config.heartbeat_interval_ms / 1000
        while self._stable and not self.rejoin_needed:
            await asyncio.sleep(interval)
            if self.time.monotonic_ms() - self.last_poll_ms > self.config.max_poll_interval_ms:
                log.warning("group %s: poll() not called within max.poll.interval.ms (%d ms): leaving the group",
                            self.config.group_id, self.config.max_poll_interval_ms)
                await self.leave("consumer poll timeout has expired")
                self.rejoin_needed = True
                return
            try:
                response = await self._send(ApiKey.HEARTBEAT, lambda _v: HeartbeatRequest(
                    group_id=self.config.group_id, generation_id=self.generation, member_id=self.member_id,
                    group_instance_id=None))
            except (KafkaClientError, TimeoutError) as e:
                log.info("group %s: heartbeat failed: %s", self.config.group_id, e)
                continue
            error = ErrorCode.for_code(response.error_code)
            if error == ErrorCode.NONE:
                continue
            if error in COORDINATOR_ERRORS:
                self._coordinator_lost()
                continue
            self._membership_error(error)
            return

    def _membership_error(self, error: ErrorCode) -> None:
        log.info("group %s: %s: rejoining", self.config.group_id, error.name)
        if error in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_INSTANCE_ID):
            self.member_id, self.generation = "", NO_GENERATION
        elif error == ErrorCode.ILLEGAL_GENERATION:
            self.generation = NO_GENERATION
        self.rejoin_needed = True
        self._stable = False

    async def leave(self, reason: str = "the consumer is being closed") -> None:
        """LeaveGroup (best effort) and forget the membership."""
        self._stop_heartbeat()
        self._stable = False
        if not self.member_id:
            return
        member_id, self.member_id, self.generation = self.member_id, "", NO_GENERATION
        try:
            def make(version: int) -> LeaveGroupRequest:
                if version < 3:
                    return LeaveGroupRequest(group_id=self.config.group_id, member_id=member_id)
                return LeaveGroupRequest(group_id=self.config.group_id, members=[
                    LeaveGroupRequest.MemberIdentity(member_id=member_id, group_instance_id=None, reason=reason)])

            await self._send(ApiKey.LEAVE_GROUP, make, timeout=5)
        except (KafkaClientError, TimeoutError, AdminError) as e:
            log.info("group %s: LeaveGroup failed: %s", self.config.group_id, e)

    async def close(self) -> None:
        await self.leave()

    # --- offsets ---------------------------------------------------------------------------------

    async def commit(self, offsets: Mapping[TopicPartition, int]) -> None:
        """OffsetCommit in this generation; CommitFailedError after a rebalance."""
        if not offsets:
            return
        by_topic: dict[str, list[tuple[int, int]]] = {}
        for tp, offset in offsets.items():
            by_topic.setdefault(tp.topic, []).append((tp.partition, offset))
        deadline = self.time.monotonic_ms() + self.config.session_timeout_ms
        while True:
            def make(_version: int) -> OffsetCommitRequest:
                return OffsetCommitRequest(
                    group_id=self.config.group_id, generation_id_or_member_epoch=self.generation,
                    member_id=self.member_id, group_instance_id=None, retention_time_ms=-1,
                    topics=[OffsetCommitRequest.OffsetCommitRequestTopic(name=t, partitions=[
                        OffsetCommitRequest.OffsetCommitRequestPartition(
                            partition_index=p, committed_offset=o, committed_leader_epoch=-1, committed_metadata="")
                        for p, o in parts]) for t, parts in by_topic.items()])

            try:
                response = await self._send(ApiKey.OFFSET_COMMIT, make)
            except (KafkaClientError, TimeoutError) as e:
                if self.time.monotonic_ms() > deadline:
                    raise CommitFailedError(f"group {self.config.group_id}: {e}") from e
                await asyncio.sleep(self.config.retry_backoff_ms / 1000)
                continue
            errors = {ErrorCode.for_code(p.error_code) for t in response.topics for p in t.partitions} - {ErrorCode.NONE}
            if not errors:
                return
            if errors & COORDINATOR_ERRORS and self.time.monotonic_ms() < deadline:
                self._coordinator_lost()
                await asyncio.sleep(self.config.retry_backoff_ms / 1000)
                continue
            rejoin = errors & REJOIN_ERRORS
            if rejoin:
                self._membership_error(next(iter(rejoin)))
                raise CommitFailedError(
                    f"group {self.config.group_id}: the commit failed ({next(iter(rejoin)).name}): the group "
                    "rebalanced and the partitions may be assigned to another member")
            raise CommitFailedError(f"group {self.config.group_id}: commit failed: {sorted(e.name for e in errors)}")

    async def committed(self, partitions: Sequence[TopicPartition], require_stable: bool = False) -> dict[TopicPartition, int]:
        """The group's committed offsets of ``partitions`` (absent: none committed). With
        ``require_stable`` (read_committed, KIP-447) offsets an open transaction is still
        committing are waited for: UNSTABLE_OFFSET_COMMIT is retried every ``retry.backoff.ms``."""
        while True:
            try:
                found = await self.admin.list_group_offsets(self.config.group_id, partitions, require_stable)
            except AdminError as e:
                errors = {e.error, *(f.error for f in e.failures.values())}
                if not require_stable or ErrorCode.UNSTABLE_OFFSET_COMMIT not in errors:
                    raise
                log.debug("group %s: offsets of an open transaction pending, retrying", self.config.group_id)
                await asyncio.sleep(self.config.retry_backoff_ms / 1000)
                continue
            return {tp: c.offset for tp, c in found.items()}

    # --- KIP-253 ---------------------------------------------------------------------------------

    async def supports_group_position(self) -> bool:
        _, connection = await self._coordinator()
        return ApiKey.CONSUMER_GROUP_POSITION in connection.api_versions

    async def group_positions(
        self, reported: Mapping[TopicPartition, int], interested: Sequence[TopicPartition],
    ) -> GroupPositions | None:
        """ConsumerGroupPosition: report positions of owned partitions, ask the group's positions
        of others. None when the member must rejoin (``rejoin_needed`` is set) or the
        coordinator could not be reached (try again later)."""
        request = build_group_position_request(self.config.group_id, self.generation, self.member_id, reported, interested)
        try:
            response = await self._send(ApiKey.CONSUMER_GROUP_POSITION, lambda _v: request)
        except (KafkaClientError, TimeoutError) as e:
            log.info("group %s: ConsumerGroupPosition failed: %s", self.config.group_id, e)
            return None
        error = ErrorCode.for_code(response.error_code)
        if error in COORDINATOR_ERRORS:
            self._coordinator_lost()
            return None
        if error in REJOIN_ERRORS:
            self._membership_error(error)
            return None
        if error != ErrorCode.NONE:
            log.warning("group %s: ConsumerGroupPosition: %s %s", self.config.group_id, error.name,
                        response.error_message or "")
            return None
        return parse_group_position_response(response)


def build_group_position_request(
    group_id: str, generation: int, member_id: str, reported: Mapping[TopicPartition, int],
    interested: Sequence[TopicPartition],
) -> ConsumerGroupPositionRequest:
    """The request, partitions grouped by topic in sorted order."""
    by_topic: dict[str, list[tuple[int, int]]] = {}
    for tp, position in sorted(reported.items()):
        by_topic.setdefault(tp.topic, []).append((tp.partition, position))
    wanted: dict[str, list[int]] = {}
    for tp in sorted(set(interested)):
        wanted.setdefault(tp.topic, []).append(tp.partition)
    return ConsumerGroupPositionRequest(
        group_id=group_id, generation_id=generation, member_id=member_id,
        reported_positions=[ConsumerGroupPositionRequest.ReportedTopic(name=t, partitions=[
            ConsumerGroupPositionRequest.ReportedPartition(partition_index=p, position=pos) for p, pos in parts])
            for t, parts in by_topic.items()],
        interested_topics=[ConsumerGroupPositionRequest.InterestedTopic(name=t, partition_indexes=ps)
                           for t, ps in wanted.items()],
    )


def parse_group_position_response(response: Any) -> GroupPositions:
    """Positions (a partition with an error counts as unknown, -1), requests and report errors."""
    positions = {TopicPartition(t.name, p.partition_index): (p.position if p.error_code == ErrorCode.NONE else -1)
                 for t in response.group_positions for p in t.partitions}
    requested = {TopicPartition(t.name, p) for t in response.position_requests for p in t.partition_indexes}
    errors = {TopicPartition(t.name, p.partition_index): ErrorCode.for_code(p.error_code)
              for t in response.report_errors for p in t.partitions if p.error_code != ErrorCode.NONE}
    return GroupPositions(positions, requested, errors)
