"""The classic group coordinator at the protocol level: raw requests, Kafka's error codes.

Every test speaks the group APIs directly (FindCoordinator, JoinGroup, SyncGroup, Heartbeat,
LeaveGroup, OffsetCommit/Fetch, List/Describe/DeleteGroups, OffsetDelete) over
``BrokerConnection`` and checks what Kafka's classic ``GroupCoordinator`` answers. Members that
wait for a rebalance use their own connections. Nothing sleeps: state changes are polled with
deadlines (DescribeGroups, Heartbeat, OffsetFetch).
"""

from __future__ import annotations

import asyncio
import select
import socket
import struct
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from pybroker import _native
from pybroker.client.connection import BrokerConnection
from pybroker.common.errors import ErrorCode
from pybroker.protocol import codec
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages import (
    ApiVersionsRequest,
    CreateTopicsRequest,
    DeleteGroupsRequest,
    DescribeGroupsRequest,
    FetchRequest,
    FindCoordinatorRequest,
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    ListGroupsRequest,
    MetadataRequest,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    OffsetFetchRequest,
    ProduceRequest,
    SyncGroupRequest,
)
from pybroker.server.group.records import (
    OffsetAndMetadata,
    OffsetCommitKey,
    decode_key,
    partition_for,
)
from tests.conftest import find_coordinator
from tests.unit.batches import build_batch

BROKER_OVERRIDES = {
    "group.initial.rebalance.delay.ms": 0,
    "group.min.session.timeout.ms": 500,
}
OFFSETS_TOPIC = "__consumer_offsets"
ALL_GROUP_OPERATIONS = (1 << 3) | (1 << 6) | (1 << 8)  # READ, DELETE, DESCRIBE
OMITTED_OPERATIONS = -(2**31)
E = ErrorCode


# --- plumbing ------------------------------------------------------------------------------------


def run(coro: Awaitable[Any]) -> Any:
    return asyncio.run(coro)  # type: ignore[arg-type]


async def connect(bootstrap: str, client_id: str = "group-test") -> BrokerConnection:
    host, port = bootstrap.split(":")
    connection = BrokerConnection(host, int(port), client_id=client_id)
    await connection.connect()
    return connection


async def eventually(check: Callable[[], Awaitable[Any]], timeout: float = 10.0, interval: float = 0.02,
                     message: str = "") -> Any:
    """Poll an async ``check`` until it returns something truthy; fail at the deadline."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = await check()
        if last:
            return last
        await asyncio.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {message or check} (last: {last!r})")


async def _is(value: Awaitable[Any], expected: Any) -> bool:
    return (await value) == expected


@pytest.fixture
def group_id(request: pytest.FixtureRequest) -> str:
    return "g-" + "".join(c if c.isalnum() else "-" for c in request.node.name)[:80] + f"-{time.time_ns()}"


def consumer_subscription(*topics: str) -> bytes:
    """ConsumerProtocolSubscription v0: version, topics (int16-length names), null user data."""
    raw = b"".join(struct.pack(">h", len(t)) + t.encode() for t in topics)
    return struct.pack(">hi", 0, len(topics)) + raw + struct.pack(">i", -1)


async def create_topic(conn: BrokerConnection, name: str, partitions: int = 1) -> None:
    response = await conn.send(ApiKey.CREATE_TOPICS, CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=1)], timeout_ms=5000))
    assert response.topics[0].error_code in (E.NONE, E.TOPIC_ALREADY_EXISTS), response


async def describe(conn: BrokerConnection, group: str, version: int | None = None) -> Any:
    response = await conn.send(ApiKey.DESCRIBE_GROUPS, DescribeGroupsRequest(groups=[group]), version=version)
    return response.groups[0]


async def wait_state(conn: BrokerConnection, group: str, state: str, timeout: float = 10.0) -> Any:
    async def check() -> Any:
        described = await describe(conn, group)
        return described if described.group_state == state else None
    return await eventually(check, timeout, message=f"group {group} to be {state}")


async def commit(conn: BrokerConnection, group: str, offsets: dict[tuple[str, int], Any], *, generation: int = -1,
                 member_id: str = "", instance: str | None = None, retention_ms: int = -1,
                 version: int | None = None) -> dict[tuple[str, int], int]:
    """Commit ``{(topic, partition): offset | (offset, metadata) | (offset, metadata, leader epoch)}``."""
    by_topic: dict[str, list[Any]] = {}
    for (topic, partition), value in offsets.items():
        offset, metadata, epoch = (value, "", -1) if isinstance(value, int) else (tuple(value) + (-1,))[:3]
        fields: dict[str, Any] = {"partition_index": partition, "committed_offset": offset, "committed_metadata": metadata}
        if version is None or version >= 6:
            fields["committed_leader_epoch"] = epoch
        by_topic.setdefault(topic, []).append(OffsetCommitRequest.OffsetCommitRequestPartition(**fields))
    request: dict[str, Any] = {
        "group_id": group, "generation_id_or_member_epoch": generation, "member_id": member_id,
        "topics": [OffsetCommitRequest.OffsetCommitRequestTopic(name=t, partitions=p) for t, p in by_topic.items()],
    }
    if instance is not None:
        request["group_instance_id"] = instance
    if retention_ms != -1:
        request["retention_time_ms"] = retention_ms
    response = await conn.send(ApiKey.OFFSET_COMMIT, OffsetCommitRequest(**request), version=version)
    return {(t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions}


async def fetch_offsets(conn: BrokerConnection, group: str, partitions: list[tuple[str, int]] | None,
                        version: int = 7) -> tuple[int, dict[tuple[str, int], tuple[int, int, str | None, int]]]:
    """OffsetFetch of one group: (group error, {(topic, partition): (offset, leader epoch, metadata, error)})."""
    topics: dict[str, list[int]] = {}
    for topic, partition in partitions or []:
        topics.setdefault(topic, []).append(partition)
    if version >= 8:
        wanted = None if partitions is None else [
            OffsetFetchRequest.OffsetFetchRequestTopics(name=t, partition_indexes=p) for t, p in topics.items()]
        request = OffsetFetchRequest(groups=[OffsetFetchRequest.OffsetFetchRequestGroup(group_id=group, topics=wanted)])
        response = await conn.send(ApiKey.OFFSET_FETCH, request, version=version)
        assert [g.group_id for g in response.groups] == [group]
        error, answered = response.groups[0].error_code, response.groups[0].topics
    else:
        wanted = None if partitions is None else [
            OffsetFetchRequest.OffsetFetchRequestTopic(name=t, partition_indexes=p) for t, p in topics.items()]
        response = await conn.send(ApiKey.OFFSET_FETCH, OffsetFetchRequest(group_id=group, topics=wanted), version=version)
        error, answered = response.error_code, response.topics
    return error, {
        (t.name, p.partition_index): (p.committed_offset, p.committed_leader_epoch, p.metadata, p.error_code)
        for t in answered for p in t.partitions
    }


async def committed_offset(conn: BrokerConnection, group: str, topic: str, partition: int = 0) -> int:
    error, offsets = await fetch_offsets(conn, group, [(topic, partition)])
    assert error == E.NONE
    return offsets[(topic, partition)][0]


async def list_groups(conn: BrokerConnection, version: int | None = None, states: list[str] | None = None) -> dict[str, Any]:
    request = ListGroupsRequest(states_filter=states) if states is not None else ListGroupsRequest()
    response = await conn.send(ApiKey.LIST_GROUPS, request, version=version)
    assert response.error_code == E.NONE
    return {g.group_id: g for g in response.groups}


class Member:
    """One group member speaking the classic protocol on its own connection."""

    def __init__(self, conn: BrokerConnection, group: str, *, instance: str | None = None,
                 protocols: list[tuple[str, bytes]] | None = None, protocol_type: str = "consumer",
                 session_ms: int = 10_000, rebalance_ms: int = 10_000) -> None:
        self.conn, self.group, self.instance = conn, group, instance
        self.protocols = protocols if protocols is not None else [("range", consumer_subscription("t"))]
        self.protocol_type = protocol_type
        self.session_ms, self.rebalance_ms = session_ms, rebalance_ms
        self.member_id = ""
        self.generation = -1
        self.joined: Any = None

    def join_request(self, member_id: str | None = None) -> JoinGroupRequest:
        fields: dict[str, Any] = dict(
            group_id=self.group, session_timeout_ms=self.session_ms, rebalance_timeout_ms=self.rebalance_ms,
            member_id=self.member_id if member_id is None else member_id, protocol_type=self.protocol_type,
            protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name=n, metadata=m) for n, m in self.protocols],
        )
        if self.instance is not None:
            fields["group_instance_id"] = self.instance
        return JoinGroupRequest(**fields)

    async def join_once(self, version: int | None = None) -> Any:
        response = await self.conn.send(ApiKey.JOIN_GROUP, self.join_request(), version=version)
        if response.error_code == E.NONE:
            self.member_id, self.generation, self.joined = response.member_id, response.generation_id, response
        return response

    async def join(self, version: int | None = None) -> Any:
        """JoinGroup, with KIP-394's MEMBER_ID_REQUIRED round trip when asked for it."""
        response = await self.join_once(version)
        if response.error_code == E.MEMBER_ID_REQUIRED:
            self.member_id = response.member_id
            response = await self.join_once(version)
        return response

    async def sync(self, assignments: dict[str, bytes] | None = None, *, generation: int | None = None,
                   member_id: str | None = None, version: int | None = None, **extra: Any) -> Any:
        fields: dict[str, Any] = dict(
            group_id=self.group, generation_id=self.generation if generation is None else generation,
            member_id=self.member_id if member_id is None else member_id,
            assignments=[SyncGroupRequest.SyncGroupRequestAssignment(member_id=m, assignment=a)
                         for m, a in (assignments or {}).items()],
            **extra,
        )
        if self.instance is not None:
            fields["group_instance_id"] = self.instance
        # From v5 Kafka requires both (else INCONSISTENT_GROUP_PROTOCOL), as real clients send them.
        fields.setdefault("protocol_type", self.protocol_type)
        fields.setdefault("protocol_name", self.joined.protocol_name if self.joined else self.protocols[0][0])
        return await self.conn.send(ApiKey.SYNC_GROUP, SyncGroupRequest(**fields), version=version)

    async def heartbeat(self, *, generation: int | None = None, member_id: str | None = None,
                        version: int | None = None) -> int:
        fields: dict[str, Any] = dict(
            group_id=self.group, generation_id=self.generation if generation is None else generation,
            member_id=self.member_id if member_id is None else member_id,
        )
        if self.instance is not None:
            fields["group_instance_id"] = self.instance
        response = await self.conn.send(ApiKey.HEARTBEAT, HeartbeatRequest(**fields), version=version)
        return response.error_code

    async def leave(self, version: int | None = None) -> Any:
        if version is not None and version < 3:
            request = LeaveGroupRequest(group_id=self.group, member_id=self.member_id)
        else:
            request = LeaveGroupRequest(group_id=self.group, members=[
                LeaveGroupRequest.MemberIdentity(member_id=self.member_id, group_instance_id=self.instance)])
        return await self.conn.send(ApiKey.LEAVE_GROUP, request, version=version)


async def rebalance(admin: BrokerConnection, joining: list[Member], present: list[Member], version: int | None = None) -> None:
    """New members join a group; once it is rebalancing, the present members rejoin; all must
    land in one generation."""
    pending = [asyncio.ensure_future(m.join(version)) for m in joining]
    if present:
        await wait_state(admin, joining[0].group, "PreparingRebalance")
        pending += [asyncio.ensure_future(m.join_once(version)) for m in present]
    responses = await asyncio.gather(*pending)
    assert all(r.error_code == E.NONE for r in responses), responses
    assert len({r.generation_id for r in responses}) == 1, responses


async def sync_all(members: list[Member], assign: Callable[[Member], bytes] | None = None) -> dict[str, bytes]:
    """Every member syncs; the leader hands out ``assign(member)`` (default: its member id)."""
    assign = assign or (lambda m: m.member_id.encode())
    leader = next(m for m in members if m.joined.leader == m.member_id)
    assignments = {m.member_id: assign(m) for m in members}
    responses = await asyncio.gather(*(
        m.sync(assignments if m is leader else None) for m in members))
    assert all(r.error_code == E.NONE for r in responses), responses
    for m, r in zip(members, responses, strict=True):
        assert bytes(r.assignment) == assignments[m.member_id]
    return assignments


async def form_group(admin: BrokerConnection, members: list[Member], version: int | None = None) -> dict[str, bytes]:
    """Members join one by one (each arrival a rebalance) and sync: a Stable group."""
    first = await members[0].join(version)
    assert first.error_code == E.NONE, first
    for i in range(1, len(members)):
        await rebalance(admin, [members[i]], members[:i], version)
    assignments = await sync_all(members)
    await wait_state(admin, members[0].group, "Stable")
    return assignments


class Session:
    """Connections to one broker, closed at the end. Like any client, the first one looks up the
    coordinator (which creates ``__consumer_offsets`` on a fresh broker)."""

    def __init__(self, bootstrap: str, find_coordinator: bool = True) -> None:
        self.bootstrap = bootstrap
        self.find_coordinator = find_coordinator
        self.connections: list[BrokerConnection] = []

    async def conn(self, client_id: str = "group-test") -> BrokerConnection:
        connection = await connect(self.bootstrap, client_id)
        if self.find_coordinator:
            found = await find_coordinator(connection, "any")
            assert found.error_code == E.NONE, found
            # A (re)started broker loads its groups in the background, answering
            # COORDINATOR_LOAD_IN_PROGRESS meanwhile; clients retry it, these tests wait it out once.
            await eventually(lambda: _loaded(connection), message="the coordinator to load its groups")
            self.find_coordinator = False
        self.connections.append(connection)
        return connection

    async def member(self, group: str, **kwargs: Any) -> Member:
        return Member(await self.conn(), group, **kwargs)

    async def close(self) -> None:
        for connection in self.connections:
            await connection.close()


async def _loaded(conn: BrokerConnection) -> bool:
    """ListGroups answers COORDINATOR_LOAD_IN_PROGRESS while any partition of the broker's loads."""
    response = await conn.send(ApiKey.LIST_GROUPS, ListGroupsRequest())
    assert response.error_code in (E.NONE, E.COORDINATOR_LOAD_IN_PROGRESS), response
    return response.error_code == E.NONE


def scenario(bootstrap: str, body: Callable[[Session], Awaitable[Any]], find_coordinator: bool = True) -> Any:
    async def main() -> Any:
        session = Session(bootstrap, find_coordinator)
        try:
            return await body(session)
        finally:
            await session.close()
    return run(main())


# --- FindCoordinator and __consumer_offsets ------------------------------------------------------


def test_find_coordinator_v0_to_v3_returns_this_broker(broker):
    async def body(s: Session) -> None:
        conn = await s.conn()
        for version in range(4):
            response = await conn.send(ApiKey.FIND_COORDINATOR, FindCoordinatorRequest(key="some-group"), version=version)
            assert (response.error_code, response.node_id, response.host, response.port) == (
                E.NONE, 1, "127.0.0.1", broker.port), (version, response)

    scenario(broker.bootstrap, body)


def test_find_coordinator_v4_answers_every_key(broker):
    async def body(s: Session) -> None:
        conn = await s.conn()
        keys = ["a", "b", "test-consumer-group", ""]
        response = await conn.send(ApiKey.FIND_COORDINATOR, FindCoordinatorRequest(coordinator_keys=keys), version=4)
        assert [c.key for c in response.coordinators] == keys
        for c in response.coordinators:
            assert (c.error_code, c.node_id, c.host, c.port) == (E.NONE, 1, "127.0.0.1", broker.port)

    scenario(broker.bootstrap, body)


def test_find_coordinator_key_types(broker):
    async def body(s: Session) -> None:
        conn = await s.conn()
        await find_coordinator(conn, "tx", key_type=1)  # __transaction_state created
        for version in (1, 2, 3):
            txn = await conn.send(ApiKey.FIND_COORDINATOR, FindCoordinatorRequest(key="tx", key_type=1), version=version)
            assert (txn.error_code, txn.node_id) == (E.NONE, 1)  # the transaction coordinator
            bogus = await conn.send(ApiKey.FIND_COORDINATOR, FindCoordinatorRequest(key="g", key_type=7), version=version)
            assert (bogus.error_code, bogus.node_id) == (E.INVALID_REQUEST, -1)
        for key_type, error, node in ((1, E.NONE, 1), (2, E.INVALID_REQUEST, -1), (-1, E.INVALID_REQUEST, -1)):
            response = await conn.send(ApiKey.FIND_COORDINATOR, FindCoordinatorRequest(
                key_type=key_type, coordinator_keys=["x", "y"]), version=4)
            assert [(c.key, c.error_code, c.node_id) for c in response.coordinators] == [("x", error, node),
                                                                                          ("y", error, node)]

    scenario(broker.bootstrap, body)


def test_offsets_topic_is_internal_with_50_partitions(start_broker):
    fresh = start_broker("fresh", **BROKER_OVERRIDES)

    async def body(s: Session) -> None:
        conn = await s.conn()
        before = await conn.send(ApiKey.METADATA, MetadataRequest(topics=None))
        assert OFFSETS_TOPIC not in {t.name for t in before.topics}
        # Without __consumer_offsets this broker coordinates no group (clients find it first).
        assert (await Member(conn, "g").join_once(3)).error_code == E.NOT_COORDINATOR
        assert (await fetch_offsets(conn, "g", None, version=7))[0] == E.NOT_COORDINATOR
        v1_error, v1_offsets = await fetch_offsets(conn, "g", [("t", 0)], version=1)
        assert (v1_error, v1_offsets) == (E.NONE, {("t", 0): (-1, -1, "", E.NOT_COORDINATOR)})  # v1: per partition
        assert (await describe(conn, "g")).error_code == E.NOT_COORDINATOR
        assert await list_groups(conn) == {}
        # As Kafka's: the first lookup starts the topic's creation and answers COORDINATOR_NOT_AVAILABLE.
        first = await conn.send(ApiKey.FIND_COORDINATOR, FindCoordinatorRequest(key="g"), version=3)
        assert (first.error_code, first.node_id) == (E.COORDINATOR_NOT_AVAILABLE, -1)
        assert (await find_coordinator(conn, "g")).error_code == E.NONE
        response = await conn.send(ApiKey.METADATA, MetadataRequest(
            topics=[MetadataRequest.MetadataRequestTopic(name=OFFSETS_TOPIC)], allow_auto_topic_creation=False))
        topic = response.topics[0]
        assert (topic.error_code, topic.is_internal, len(topic.partitions)) == (E.NONE, True, 50)
        assert {p.leader_id for p in topic.partitions} == {1}

    scenario(fresh.bootstrap, body, find_coordinator=False)


def test_precreated_offsets_topic_is_coordinated(start_broker):
    fresh = start_broker("precreated", **BROKER_OVERRIDES)

    async def body(s: Session) -> None:
        conn = await s.conn()
        await create_topic(conn, OFFSETS_TOPIC, 3)
        found = await conn.send(ApiKey.FIND_COORDINATOR, FindCoordinatorRequest(key="g"), version=3)
        assert (found.error_code, found.node_id) == (E.NONE, 1)
        joined = await Member(conn, "g").join(version=3)
        assert joined.error_code == E.NONE

    scenario(fresh.bootstrap, body, find_coordinator=False)


# --- JoinGroup -----------------------------------------------------------------------------------


@pytest.mark.parametrize("version", [4, 5, 6, 7])
def test_join_v4_plus_requires_a_member_id_first(broker, group_id, version):
    async def body(s: Session) -> None:
        member = await s.member(group_id, protocols=[("range", b"meta-1")])
        first = await member.join_once(version)
        assert first.error_code == E.MEMBER_ID_REQUIRED
        assert first.member_id.startswith("group-test-") and len(first.member_id) > len("group-test-")
        assert first.generation_id == -1
        member.member_id = first.member_id
        joined = await member.join_once(version)
        assert (joined.error_code, joined.generation_id, joined.member_id, joined.leader) == (
            E.NONE, 1, first.member_id, first.member_id)
        assert joined.protocol_name == "range"
        assert [(m.member_id, bytes(m.metadata)) for m in joined.members] == [(first.member_id, b"meta-1")]
        if version >= 7:
            assert joined.protocol_type == "consumer"
        described = await describe(member.conn, group_id)
        assert (described.group_state, [m.member_id for m in described.members]) == (
            "CompletingRebalance", [first.member_id])

    scenario(broker.bootstrap, body)


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_join_v0_to_v3_joins_directly(broker, group_id, version):
    async def body(s: Session) -> None:
        member = await s.member(group_id, protocols=[("roundrobin", b"m")])
        joined = await member.join_once(version)
        assert (joined.error_code, joined.generation_id) == (E.NONE, 1)
        assert joined.member_id.startswith("group-test-")
        assert joined.leader == joined.member_id and joined.protocol_name == "roundrobin"
        assert [m.member_id for m in joined.members] == [joined.member_id]

    scenario(broker.bootstrap, body)


def test_join_rejects_session_timeouts_outside_the_broker_limits(broker, group_id):
    async def body(s: Session) -> None:
        for session_ms in (499, 0, -1, 1_800_001):
            member = await s.member(group_id, session_ms=session_ms)
            for version in (3, 7):
                response = await member.join_once(version)
                assert response.error_code == E.INVALID_SESSION_TIMEOUT, (session_ms, version)
        assert (await describe(s.connections[0], group_id)).group_state == "Dead"  # no group was created
        # the limits themselves are allowed
        lowest = await s.member(group_id, session_ms=500)
        assert (await lowest.join(version=3)).error_code == E.NONE
        assert [m.member_id for m in (await describe(lowest.conn, group_id)).members] == [lowest.member_id]
        highest = await s.member(group_id + "-max", session_ms=1_800_000)
        assert (await highest.join(version=3)).error_code == E.NONE

    scenario(broker.bootstrap, body)


def test_group_apis_reject_an_empty_group_id(broker):
    async def body(s: Session) -> None:
        conn = await s.conn()
        member = Member(conn, "")
        for version in (0, 3, 4, 7):
            assert (await member.join_once(version)).error_code == E.INVALID_GROUP_ID
        assert (await member.sync(generation=1, member_id="m")).error_code == E.INVALID_GROUP_ID
        assert await member.heartbeat(generation=1, member_id="m") == E.INVALID_GROUP_ID
        assert (await member.leave(version=0)).error_code == E.INVALID_GROUP_ID
        offset_delete = await conn.send(ApiKey.OFFSET_DELETE, OffsetDeleteRequest(group_id="", topics=[]))
        assert offset_delete.error_code == E.INVALID_GROUP_ID
        # OffsetFetch and DescribeGroups accept the empty group id (Kafka keeps it for old clients)
        error, _ = await fetch_offsets(conn, "", [("t", 0)])
        assert error == E.NONE
        assert (await describe(conn, "")).error_code == E.NONE

    scenario(broker.bootstrap, body)


def test_join_with_a_member_id_creates_no_group(broker, group_id):
    async def body(s: Session) -> None:
        member = await s.member(group_id)
        member.member_id = "made-up-member"
        for version in (0, 3, 7):
            response = await member.join_once(version)
            assert (response.error_code, response.member_id) == (E.UNKNOWN_MEMBER_ID, "made-up-member")
        assert (await describe(member.conn, group_id)).group_state == "Dead"

    scenario(broker.bootstrap, body)


def test_join_with_inconsistent_protocols(broker, group_id):
    async def body(s: Session) -> None:
        admin = await s.conn()
        # A new group needs a protocol type and at least one protocol.
        assert (await (await s.member(group_id + "-x", protocol_type="")).join_once(7)).error_code == \
            E.INCONSISTENT_GROUP_PROTOCOL
        assert (await (await s.member(group_id + "-y", protocols=[])).join_once(7)).error_code == \
            E.INCONSISTENT_GROUP_PROTOCOL

        first = await s.member(group_id, protocols=[("range", b""), ("roundrobin", b"")])
        await form_group(admin, [first])
        wrong_type = await s.member(group_id, protocol_type="connect", protocols=[("range", b"")])
        no_common = await s.member(group_id, protocols=[("sticky", b"")])
        for version in (3, 7):
            for member in (wrong_type, no_common):
                response = await member.join_once(version)
                assert (response.error_code, response.member_id) == (E.INCONSISTENT_GROUP_PROTOCOL, "")
        # the group's protocol type is fixed while it has members, even for its only member
        first.protocol_type = "connect"
        assert (await first.join_once(7)).error_code == E.INCONSISTENT_GROUP_PROTOCOL
        described = await describe(admin, group_id)
        assert (described.group_state, described.protocol_type, len(described.members)) == ("Stable", "consumer", 1)

    scenario(broker.bootstrap, body)


def test_protocol_selection_rebalance_and_sync(broker, group_id):
    async def body(s: Session) -> None:
        admin = await s.conn()
        a = await s.member(group_id, protocols=[("range", b"a-range"), ("roundrobin", b"a-rr")])
        b = await s.member(group_id, protocols=[("roundrobin", b"b-rr")])
        await form_group(admin, [a])
        assert (a.generation, a.joined.protocol_name) == (1, "range")
        assert await a.heartbeat() == E.NONE

        # b arrives: the group rebalances; a learns it from its heartbeat and rejoins
        b_join = asyncio.ensure_future(b.join())
        assert await eventually(lambda: _is(a.heartbeat(), E.REBALANCE_IN_PROGRESS), message="a's heartbeat to say rebalance")
        assert (await a.sync()).error_code == E.REBALANCE_IN_PROGRESS  # SyncGroup while preparing
        a_join = await a.join_once()
        b_joined = await b_join
        for joined in (a_join, b_joined):
            assert (joined.error_code, joined.generation_id, joined.protocol_name, joined.leader) == (
                E.NONE, 2, "roundrobin", a.member_id)
        assert sorted((m.member_id, bytes(m.metadata)) for m in a_join.members) == sorted(
            [(a.member_id, b"a-rr"), (b.member_id, b"b-rr")])
        assert b_joined.members == []
        assert await a.heartbeat() == E.NONE  # heartbeats are fine while completing the rebalance

        # the follower's SyncGroup waits for the leader's
        b_sync = asyncio.ensure_future(b.sync())
        assert (await describe(admin, group_id)).group_state == "CompletingRebalance"
        assert not b_sync.done()
        a_sync = await a.sync({a.member_id: b"for-a", b.member_id: b"for-b"})
        assert (a_sync.error_code, bytes(a_sync.assignment)) == (E.NONE, b"for-a")
        b_synced = await b_sync
        assert (b_synced.error_code, bytes(b_synced.assignment)) == (E.NONE, b"for-b")
        assert (b_synced.protocol_type, b_synced.protocol_name) == ("consumer", "roundrobin")
        described = await describe(admin, group_id)
        assert (described.group_state, described.protocol_data) == ("Stable", "roundrobin")
        assert sorted((m.member_id, bytes(m.member_metadata), bytes(m.member_assignment)) for m in described.members) == sorted(
            [(a.member_id, b"a-rr", b"for-a"), (b.member_id, b"b-rr", b"for-b")])

        # A follower rejoining unchanged gets the current generation back: no rebalance.
        again = await b.join_once()
        assert (again.error_code, again.generation_id, again.leader, again.members) == (E.NONE, 2, a.member_id, [])
        assert (await describe(admin, group_id)).group_state == "Stable"
        resynced = await b.sync()
        assert (resynced.error_code, bytes(resynced.assignment)) == (E.NONE, b"for-b")
        # The leader rejoining asks for a new assignment: a rebalance.
        a_rejoin = asyncio.ensure_future(a.join_once())
        await wait_state(admin, group_id, "PreparingRebalance")
        b_rejoin = await b.join_once()
        assert (await a_rejoin).generation_id == b_rejoin.generation_id == 3

    scenario(broker.bootstrap, body)


def test_sync_group_errors(broker, group_id):
    async def body(s: Session) -> None:
        admin = await s.conn()
        a = await s.member(group_id)
        await a.join()
        assert (await a.sync(generation=2)).error_code == E.ILLEGAL_GENERATION
        assert (await a.sync(generation=0)).error_code == E.ILLEGAL_GENERATION
        assert (await a.sync(member_id="ghost")).error_code == E.UNKNOWN_MEMBER_ID
        assert (await Member(admin, group_id + "-nope").sync(generation=1, member_id="m")).error_code == E.UNKNOWN_MEMBER_ID
        # v5 checks the protocol type and name the member believes in
        assert (await a.sync(version=5, protocol_type="connect", protocol_name="range")).error_code == \
            E.INCONSISTENT_GROUP_PROTOCOL
        assert (await a.sync(version=5, protocol_type="consumer", protocol_name="roundrobin")).error_code == \
            E.INCONSISTENT_GROUP_PROTOCOL
        # The leader assigns nothing to itself: it gets an empty assignment.
        synced = await a.sync({"someone-else": b"x"}, version=5, protocol_type="consumer", protocol_name="range")
        assert (synced.error_code, bytes(synced.assignment), synced.protocol_name) == (E.NONE, b"", "range")
        for version in range(6):
            again = await a.sync(version=version)
            assert (again.error_code, bytes(again.assignment)) == (E.NONE, b""), version

    scenario(broker.bootstrap, body)


def test_heartbeat_errors(broker, group_id):
    async def body(s: Session) -> None:
        admin = await s.conn()
        a = await s.member(group_id)
        await form_group(admin, [a])
        for version in range(5):
            assert await a.heartbeat(version=version) == E.NONE
            assert await a.heartbeat(generation=2, version=version) == E.ILLEGAL_GENERATION
            assert await a.heartbeat(generation=-1, version=version) == E.ILLEGAL_GENERATION
            assert await a.heartbeat(member_id="ghost", version=version) == E.UNKNOWN_MEMBER_ID
            assert await Member(admin, group_id + "-none").heartbeat(generation=1, member_id="m", version=version) == \
                E.UNKNOWN_MEMBER_ID
        # after leaving, the old member is unknown
        assert (await a.leave()).error_code == E.NONE
        await wait_state(admin, group_id, "Empty")
        assert await a.heartbeat() == E.UNKNOWN_MEMBER_ID

    scenario(broker.bootstrap, body)


def test_session_expiry_removes_a_silent_member(broker, group_id):
    async def body(s: Session) -> None:
        admin = await s.conn()
        a = await s.member(group_id, session_ms=10_000)
        b = await s.member(group_id, session_ms=600)
        started = time.monotonic()  # before b's last contact with the coordinator
        await form_group(admin, [a, b])
        assert a.generation == 2
        # b falls silent; a keeps heartbeating and is told to rebalance once b's session ends
        await eventually(lambda: _is(a.heartbeat(), E.REBALANCE_IN_PROGRESS), timeout=15, interval=0.05,
                         message="b's session to expire")
        assert time.monotonic() - started >= 0.6
        rejoined = await a.join_once()
        assert (rejoined.error_code, rejoined.generation_id) == (E.NONE, 3)
        assert [m.member_id for m in rejoined.members] == [a.member_id]
        await sync_all([a])
        described = await describe(admin, group_id)
        assert (described.group_state, [m.member_id for m in described.members]) == ("Stable", [a.member_id])
        assert await b.heartbeat() == E.UNKNOWN_MEMBER_ID

    scenario(broker.bootstrap, body)


def test_pending_member_that_never_rejoins_expires(broker, group_id):
    async def body(s: Session) -> None:
        admin = await s.conn()
        a = await s.member(group_id, rebalance_ms=25_000)
        await form_group(admin, [a])
        pending = await s.member(group_id, session_ms=600)
        started = time.monotonic()  # before the pending member's session can start
        first = await pending.join_once(7)
        assert first.error_code == E.MEMBER_ID_REQUIRED
        # The leader's rejoin starts a rebalance that cannot complete while a member id is pending...
        rejoined = await a.join_once()
        # ...until the pending member's session (0.6 s) ends, long before a's 25 s rebalance timeout
        # would end the join phase: bounds that hold however slow the machine is.
        assert (rejoined.error_code, rejoined.generation_id) == (E.NONE, 2)
        assert [m.member_id for m in rejoined.members] == [a.member_id]
        assert 0.6 <= time.monotonic() - started < 20
        pending.member_id = first.member_id
        assert (await pending.join_once(7)).error_code == E.UNKNOWN_MEMBER_ID

    scenario(broker.bootstrap, body)


def test_members_that_do_not_rejoin_in_time_are_dropped_unless_static(broker, group_id):
    async def body(s: Session) -> None:
        admin = await s.conn()
        a, b = await s.member(group_id, rebalance_ms=800), await s.member(group_id, rebalance_ms=800)
        static = await s.member(group_id, instance="stays", rebalance_ms=800)
        await form_group(admin, [a, b, static])
        newcomer = await s.member(group_id, rebalance_ms=800)
        started = time.monotonic()  # before the rebalance (and its 0.8 s timeout) can start
        newcomer_join = asyncio.ensure_future(newcomer.join())
        await wait_state(admin, group_id, "PreparingRebalance")
        rejoined = await a.join_once()  # b and the static member stay silent
        assert time.monotonic() - started >= 0.8  # the join phase waited for the rebalance timeout
        assert (await newcomer_join).generation_id == rejoined.generation_id == 4
        # the silent dynamic member is gone; the silent static member keeps its place (KIP-345)
        assert sorted(m.member_id for m in rejoined.members) == sorted([a.member_id, newcomer.member_id, static.member_id])
        assert await b.heartbeat() == E.UNKNOWN_MEMBER_ID
        assert await static.heartbeat() == E.ILLEGAL_GENERATION
        assert (await static.join_once()).generation_id == 4  # it catches up without a new rebalance
        assert (await describe(admin, group_id)).group_state == "CompletingRebalance"

    scenario(broker.bootstrap, body)


@pytest.mark.parametrize("protocol", ["eager", "cooperative"])
def test_member_that_only_heartbeats_is_dropped_at_the_rebalance_timeout(broker, group_id, protocol):
    """A consumer that stops polling (past max.poll.interval.ms) while its heartbeat thread goes
    on never rejoins a rebalance: its heartbeats get REBALANCE_IN_PROGRESS and keep its session
    alive, so only the rebalance timeout can drop it. Then the member that rejoined gets a
    generation of its own and the group is Stable. Cooperative: the rebalance b misses is the
    second, started by a's rejoin after revoking what the first took from it."""
    async def body(s: Session) -> None:
        admin = await s.conn()
        a = await s.member(group_id, session_ms=10_000, rebalance_ms=800)
        b = await s.member(group_id, session_ms=10_000, rebalance_ms=800)
        await form_group(admin, [a, b])
        if protocol == "cooperative":
            a.protocols = [("range", consumer_subscription("t", "u"))]
            a_first = asyncio.ensure_future(a.join_once())
            await wait_state(admin, group_id, "PreparingRebalance")
            await asyncio.gather(a_first, b.join_once())
            await sync_all([a, b])
            a.protocols = [("range", consumer_subscription("t"))]
        generation = a.generation
        started = time.monotonic()  # before a's rejoin starts the 0.8 s rebalance
        a_join = asyncio.ensure_future(a.join_once())
        await wait_state(admin, group_id, "PreparingRebalance")
        heartbeats = []

        async def b_heartbeats() -> bool:
            heartbeats.append(await b.heartbeat())
            return a_join.done()

        await eventually(b_heartbeats, timeout=10, interval=0.05, message="the join phase to end without b")
        joined = await a_join
        assert time.monotonic() - started >= 0.8
        # the last heartbeat may have come after b was dropped
        assert set(heartbeats[:-1]) == {E.REBALANCE_IN_PROGRESS}
        assert heartbeats[-1] in (E.REBALANCE_IN_PROGRESS, E.UNKNOWN_MEMBER_ID)
        assert (joined.error_code, joined.generation_id) == (E.NONE, generation + 1)
        assert [m.member_id for m in joined.members] == [a.member_id]
        assert await b.heartbeat() == E.UNKNOWN_MEMBER_ID
        await sync_all([a])
        described = await describe(admin, group_id)
        assert (described.group_state, [m.member_id for m in described.members]) == ("Stable", [a.member_id])

    scenario(broker.bootstrap, body)


def test_leave_group_behind_a_waiting_sync_group_is_answered(broker, group_id):
    """b's SyncGroup waits for the leader's assignment when b leaves on the same connection (its
    consumer closed, or its max.poll.interval.ms passed, mid-rebalance). Replies go out in request
    order, so the LeaveGroup's answer follows the SyncGroup's: the coordinator answers that
    SyncGroup (UNKNOWN_MEMBER_ID) as it removes b, or b's connection would answer nothing again."""
    async def body(s: Session) -> None:
        admin = await s.conn()
        a, b = await s.member(group_id), await s.member(group_id)
        await form_group(admin, [a])
        await rebalance(admin, [b], [a])
        assert a.joined.leader == a.member_id
        b_sync = asyncio.ensure_future(b.sync())
        b_leave = asyncio.ensure_future(b.leave())
        synced, left = await asyncio.wait_for(asyncio.gather(b_sync, b_leave), timeout=5)
        assert (synced.error_code, bytes(synced.assignment)) == (E.UNKNOWN_MEMBER_ID, b"")
        assert (left.error_code, [m.error_code for m in left.members]) == (E.NONE, [E.NONE])
        # the leader's assignment comes too late: it completes a new rebalance alone
        assert (await a.sync()).error_code == E.REBALANCE_IN_PROGRESS
        rejoined = await a.join_once()
        assert [m.member_id for m in rejoined.members] == [a.member_id]
        await sync_all([a])

    scenario(broker.bootstrap, body)


def test_members_that_never_sync_are_dropped(broker, group_id):
    async def body(s: Session) -> None:
        admin = await s.conn()
        a, b = await s.member(group_id, rebalance_ms=800), await s.member(group_id, rebalance_ms=800)
        await form_group(admin, [a])
        await rebalance(admin, [b], [a])
        assert a.joined.leader == a.member_id
        # the leader syncs, the follower never does: Stable, then b is dropped after the rebalance timeout
        synced = await a.sync({a.member_id: b"x", b.member_id: b"y"})
        assert synced.error_code == E.NONE
        await eventually(lambda: _is(a.heartbeat(), E.REBALANCE_IN_PROGRESS), timeout=10, interval=0.05,
                         message="b's missing SyncGroup to expire")
        rejoined = await a.join_once()
        assert [m.member_id for m in rejoined.members] == [a.member_id]
        assert await b.heartbeat() == E.UNKNOWN_MEMBER_ID

    scenario(broker.bootstrap, body)


def test_new_member_during_completing_rebalance_cancels_waiting_syncs(broker, group_id):
    async def body(s: Session) -> None:
        admin = await s.conn()
        a, b = await s.member(group_id), await s.member(group_id)
        await form_group(admin, [a])
        await rebalance(admin, [b], [a])
        # b's SyncGroup waits for the leader, who never syncs: c arrives first. c's JoinGroup (v3: no
        # member id round trip) follows b's SyncGroup on the same connection, so the broker handles
        # them in this order.
        c = Member(b.conn, group_id)
        b_sync = asyncio.ensure_future(b.sync())
        c_join = asyncio.ensure_future(c.join(version=3))
        answered = await b_sync
        assert (answered.error_code, bytes(answered.assignment)) == (E.REBALANCE_IN_PROGRESS, b"")
        assert (await a.sync()).error_code == E.REBALANCE_IN_PROGRESS
        await asyncio.gather(a.join_once(), b.join_once())
        assert (await c_join).generation_id == a.generation == b.generation == 3
        await sync_all([a, b, c])

    scenario(broker.bootstrap, body)


class AnswerOrder:
    """The order in which the client reads the answers on two members' connections.

    Each answer frame is noted as its connection reads it, before its request's future is set.
    When the follower's answer is read first, it is noted whether the leader's answer was already
    waiting in the leader's socket then: the broker wrote it first (or in the same step) and the
    client merely looked at the follower's socket first. No clock is involved: on loopback a
    write is in the peer's socket when the writing call returns."""

    LEADER, FOLLOWER, BOTH = "leader", "follower", "follower, the leader's answer waiting"

    def __init__(self, leader: Member, follower: Member) -> None:
        self.events: list[str] = []
        self._leader_socket = leader.conn._channel.transport.get_extra_info("socket")  # type: ignore[union-attr]
        self._watch(leader, lambda: self.LEADER)
        self._watch(follower, self._follower_read)

    def _watch(self, member: Member, event: Callable[[], str]) -> None:
        channel = member.conn._channel
        assert channel is not None
        read = channel._on_frame

        def on_frame(frame: bytearray) -> None:
            self.events.append(event())
            read(frame)

        channel._on_frame = on_frame

    def _follower_read(self) -> str:
        if self.LEADER in self.events:
            return self.FOLLOWER
        waiting, _, _ = select.select([self._leader_socket], [], [], 0)
        return self.BOTH if waiting else self.FOLLOWER

    @classmethod
    def leader_first(cls, events: list[str]) -> bool:
        """Whether the leader's answer was read first, or was waiting when the follower's was read."""
        return bool(events) and events[0] in (cls.LEADER, cls.BOTH)


@pytest.mark.parametrize("write", ["appended at once", "after an fsync"])
def test_leader_sync_answer_leaves_before_a_later_follower_sync(request, group_id, write):
    """The leader's SyncGroup stores the group (its metadata record in __consumer_offsets); the
    follower's, sent on its own connection right after, is answered from the stored assignment if
    it is read after the write completed, or waits and is answered with the leader's when it
    completes. Either way the leader's answer leaves first or in the same step, never after
    (Kafka answers the leader and every waiting member in the write's completion callback): a
    client that waits for the follower's assignment and then looks at the leader's finds the new
    one. Twenty generations, the leader's and the follower's SyncGroup sent back to back in each.
    The leader joined first, so of the members waiting it is answered first: its answer is read
    first, or is in its socket when the follower's is read (`AnswerOrder`).

    "After an fsync": log.flush.interval.messages=1 makes every append wait for its fsync (in a
    worker thread), so the write completes in a later step of the event loop, not inside the
    leader's request; the follower's SyncGroup then mostly arrives while the write is in flight
    and is answered with the leader's."""
    if write == "appended at once":
        bootstrap = request.getfixturevalue("broker").bootstrap
    else:
        own = request.getfixturevalue("start_broker")
        bootstrap = own("fsync", **BROKER_OVERRIDES, **{"log.flush.interval.messages": 1}).bootstrap
    rounds = 20

    async def body(s: Session) -> list[list[str]]:
        admin = await s.conn()
        leader = await s.member(group_id, instance="leader")
        follower = await s.member(group_id, instance="follower")
        order = AnswerOrder(leader, follower)
        assert (await leader.join_once()).error_code == E.NONE
        seen: list[list[str]] = []
        for round_number in range(rounds):
            if round_number == 0:
                await rebalance(admin, [follower], [leader])
            else:
                await rebalance(admin, [leader], [follower])  # the leader's rejoin starts a rebalance
            assert leader.joined.leader == leader.member_id
            assignments = {leader.member_id: b"L%d" % leader.generation, follower.member_id: b"F%d" % leader.generation}
            order.events.clear()
            leader_sync = asyncio.ensure_future(leader.sync(assignments))
            follower_sync = asyncio.ensure_future(follower.sync())  # written in the same loop step, after
            led, followed = await asyncio.gather(leader_sync, follower_sync)
            assert (led.error_code, bytes(led.assignment)) == (E.NONE, assignments[leader.member_id])
            assert (followed.error_code, bytes(followed.assignment)) == (E.NONE, assignments[follower.member_id])
            seen.append(list(order.events))
        return seen

    seen = scenario(bootstrap, body)
    overtaken = [(i, events) for i, events in enumerate(seen) if not AnswerOrder.leader_first(events)]
    assert not overtaken, f"the follower's answer came before the leader's in rounds {overtaken} of {len(seen)}"


def test_initial_rebalance_delay_gathers_early_members(start_broker, group_id):
    own = start_broker("delay", **{**BROKER_OVERRIDES, "group.initial.rebalance.delay.ms": 400})

    async def body(s: Session) -> None:
        admin = await s.conn()
        a, b = await s.member(group_id), await s.member(group_id)
        started = time.monotonic()  # before a's join, which starts the 0.4 s delay
        a_join = asyncio.ensure_future(a.join())
        await wait_state(admin, group_id, "PreparingRebalance")
        assert not a_join.done()
        b_joined = await b.join()
        a_joined = await a_join
        assert time.monotonic() - started >= 0.4
        # one generation for both: nobody had to rejoin
        assert (a_joined.generation_id, b_joined.generation_id) == (1, 1)
        assert len(next(r for r in (a_joined, b_joined) if r.leader == r.member_id).members) == 2

    scenario(own.bootstrap, body)


# --- LeaveGroup ----------------------------------------------------------------------------------


@pytest.mark.parametrize("version", [0, 1, 2])
def test_leave_group_v0_to_v2(broker, group_id, version):
    async def body(s: Session) -> None:
        admin = await s.conn()
        a = await s.member(group_id)
        await form_group(admin, [a])
        request = LeaveGroupRequest(group_id=group_id, member_id=a.member_id)
        response = await admin.send(ApiKey.LEAVE_GROUP, request, version=version)
        assert response.error_code == E.NONE
        described = await wait_state(admin, group_id, "Empty")
        assert described.members == []
        again = await admin.send(ApiKey.LEAVE_GROUP, request, version=version)
        assert again.error_code == E.UNKNOWN_MEMBER_ID
        nowhere = await admin.send(ApiKey.LEAVE_GROUP, LeaveGroupRequest(group_id=group_id + "-none", member_id="m"),
                                   version=version)
        assert nowhere.error_code == E.UNKNOWN_MEMBER_ID

    scenario(broker.bootstrap, body)


@pytest.mark.parametrize("version", [3, 4, 5])
def test_leave_group_batch(broker, group_id, version):
    async def body(s: Session) -> None:
        admin = await s.conn()
        s1 = await s.member(group_id, instance="i1")
        s2 = await s.member(group_id, instance="i2")
        d = await s.member(group_id)
        await form_group(admin, [s1, s2, d])
        pending = await s.member(group_id)  # given a member id (KIP-394), never joined with it
        first = await pending.conn.send(ApiKey.JOIN_GROUP, pending.join_request(), version=7)
        assert first.error_code == E.MEMBER_ID_REQUIRED

        leaving = [
            (s1.member_id, "i1"),          # by member id and instance id
            ("", "i2"),                    # administrative removal by instance id
            ("ghost", None),               # unknown member
            ("", "no-such-instance"),      # unknown instance
            (first.member_id, None),       # a pending member (KIP-394) may leave too
        ]
        request = LeaveGroupRequest(group_id=group_id, members=[
            LeaveGroupRequest.MemberIdentity(member_id=m, group_instance_id=i) for m, i in leaving])
        response = await admin.send(ApiKey.LEAVE_GROUP, request, version=version)
        assert response.error_code == E.NONE
        assert [(m.member_id, m.group_instance_id, m.error_code) for m in response.members] == [
            (s1.member_id, "i1", E.NONE), ("", "i2", E.NONE), ("ghost", None, E.UNKNOWN_MEMBER_ID),
            ("", "no-such-instance", E.UNKNOWN_MEMBER_ID), (first.member_id, None, E.NONE)]
        described = await describe(admin, group_id)
        assert (described.group_state, [m.member_id for m in described.members]) == ("PreparingRebalance", [d.member_id])
        pending.member_id = first.member_id
        assert (await pending.join_once(7)).error_code == E.UNKNOWN_MEMBER_ID
        # the dynamic member rejoins alone, then leaves too
        assert (await d.join_once()).generation_id == 4
        assert (await d.leave(version)).members[0].error_code == E.NONE
        await wait_state(admin, group_id, "Empty")
        # an unknown group: every member is unknown, the request itself is fine
        nowhere = await admin.send(ApiKey.LEAVE_GROUP, LeaveGroupRequest(group_id=group_id + "-none", members=[
            LeaveGroupRequest.MemberIdentity(member_id="m", group_instance_id=None)]), version=version)
        assert (nowhere.error_code, [m.error_code for m in nowhere.members]) == (E.NONE, [E.UNKNOWN_MEMBER_ID])

    scenario(broker.bootstrap, body)


# --- static membership ---------------------------------------------------------------------------


def test_static_member_rejoin_takes_over_without_rebalance(broker, group_id, topic_name):
    async def body(s: Session) -> None:
        admin = await s.conn()
        await create_topic(admin, topic_name)
        old = await s.member(group_id, instance="instance-1")
        other = await s.member(group_id, instance="instance-2")
        # a static member joins without the member id round trip
        first = await old.join_once()
        assert first.error_code == E.NONE and first.member_id.startswith("instance-1-")
        await rebalance(admin, [other], [old])
        assert sorted((m.member_id, m.group_instance_id) for m in old.joined.members) == sorted(
            [(old.member_id, "instance-1"), (other.member_id, "instance-2")])
        assignments = await sync_all([old, other])
        generation = old.generation

        # The same instance restarts: it joins with its instance id and no member id.
        new = await s.member(group_id, instance="instance-1")
        joined = await new.join_once()
        assert joined.error_code == E.NONE
        assert joined.member_id != old.member_id and joined.member_id.startswith("instance-1-")
        assert joined.generation_id == generation
        assert joined.leader == old.member_id and joined.members == []  # the old leader id: no assignment to do
        described = await describe(admin, group_id)
        assert described.group_state == "Stable"
        assert sorted((m.member_id, m.group_instance_id) for m in described.members) == sorted(
            [(new.member_id, "instance-1"), (other.member_id, "instance-2")])
        # it keeps the old member's assignment; nobody else is disturbed
        synced = await new.sync()
        assert (synced.error_code, bytes(synced.assignment)) == (E.NONE, assignments[old.member_id])
        assert await new.heartbeat() == E.NONE
        assert await other.heartbeat() == E.NONE

        # the old member id is fenced everywhere
        assert await old.heartbeat() == E.FENCED_INSTANCE_ID
        assert (await old.sync()).error_code == E.FENCED_INSTANCE_ID
        assert (await old.join_once()).error_code == E.FENCED_INSTANCE_ID
        fenced_commit = await commit(old.conn, group_id, {(topic_name, 0): 5}, generation=generation,
                                     member_id=old.member_id, instance="instance-1")
        assert fenced_commit == {(topic_name, 0): E.FENCED_INSTANCE_ID}
        left = await old.leave()
        assert [m.error_code for m in left.members] == [E.FENCED_INSTANCE_ID]
        assert (await describe(admin, group_id)).group_state == "Stable"
        assert await commit(new.conn, group_id, {(topic_name, 0): 6}, generation=generation,
                            member_id=new.member_id, instance="instance-1") == {(topic_name, 0): E.NONE}

    scenario(broker.bootstrap, body)


def test_replaced_static_member_pending_join_is_fenced(broker, group_id):
    async def body(s: Session) -> None:
        admin = await s.conn()
        leader = await s.member(group_id)
        static = await s.member(group_id, instance="inst")
        await form_group(admin, [leader, static])
        newcomer = await s.member(group_id)
        newcomer_join = asyncio.ensure_future(newcomer.join())
        await wait_state(admin, group_id, "PreparingRebalance")
        # The static member rejoins (and waits for the leader); its replacement arrives right after
        # on the same connection, so the broker handles the two in this order.
        replacement = Member(static.conn, group_id, instance="inst")
        old_join = asyncio.ensure_future(static.conn.send(ApiKey.JOIN_GROUP, static.join_request()))
        new_join = asyncio.ensure_future(replacement.join_once())
        old_answer = await old_join
        # the leader's rejoin completes the rebalance for everyone else
        done = await asyncio.gather(leader.join_once(), newcomer_join, new_join)
        assert all(r.error_code == E.NONE for r in done)
        assert (old_answer.error_code, old_answer.member_id) == (E.FENCED_INSTANCE_ID, static.member_id)

    scenario(broker.bootstrap, body)


def test_unknown_group_instance_id_is_unknown_member(broker, group_id):
    async def body(s: Session) -> None:
        admin = await s.conn()
        a = await s.member(group_id)
        await form_group(admin, [a])
        a.instance = "never-registered"
        assert await a.heartbeat() == E.UNKNOWN_MEMBER_ID
        assert (await a.sync()).error_code == E.UNKNOWN_MEMBER_ID

    scenario(broker.bootstrap, body)


# --- OffsetCommit / OffsetFetch -----------------------------------------------------------------


def test_simple_group_commits_and_fetches(broker, group_id, topic_name):
    async def body(s: Session) -> None:
        conn = await s.conn()
        await create_topic(conn, topic_name, 3)
        errors = await commit(conn, group_id, {(topic_name, 0): (10, "zero", 4), (topic_name, 2): (30, None)})
        assert errors == {(topic_name, 0): E.NONE, (topic_name, 2): E.NONE}
        error, offsets = await fetch_offsets(conn, group_id, [(topic_name, 0), (topic_name, 1), (topic_name, 2)])
        assert error == E.NONE
        assert offsets == {
            (topic_name, 0): (10, 4, "zero", E.NONE),
            (topic_name, 1): (-1, -1, "", E.NONE),      # nothing committed
            (topic_name, 2): (30, -1, "", E.NONE),      # null metadata reads back empty
        }
        # a later commit replaces the earlier one
        await commit(conn, group_id, {(topic_name, 0): (11, "again")})
        assert (await fetch_offsets(conn, group_id, [(topic_name, 0)]))[1][(topic_name, 0)] == (11, -1, "again", E.NONE)
        listed = await list_groups(conn)
        assert (listed[group_id].protocol_type, listed[group_id].group_state) == ("", "Empty")
        described = await describe(conn, group_id)
        assert (described.group_state, described.protocol_type, described.members) == ("Empty", "", [])
        # a group nobody committed for: -1 everywhere
        error, none = await fetch_offsets(conn, group_id + "-none", [(topic_name, 0)])
        assert (error, none) == (E.NONE, {(topic_name, 0): (-1, -1, "", E.NONE)})

    scenario(broker.bootstrap, body)


def test_commit_versions_round_trip(broker, group_id, topic_name):
    async def body(s: Session) -> None:
        conn = await s.conn()
        await create_topic(conn, topic_name, 8)
        for version in range(2, 9):
            tp = (topic_name, version - 1)
            fields: dict[str, Any] = {"version": version}
            if version <= 4:
                fields["retention_ms"] = 3_600_000  # v2-v4: a retention time for this commit
            assert await commit(conn, group_id, {tp: (100 + version, f"meta-v{version}", 7)}, **fields) == {tp: E.NONE}
        for fetch_version in range(1, 9):
            error, offsets = await fetch_offsets(conn, group_id, [(topic_name, p) for p in range(1, 8)], fetch_version)
            assert error == E.NONE
            for p in range(1, 8):
                offset, epoch, metadata, code = offsets[(topic_name, p)]
                commit_version = p + 1
                assert (offset, metadata, code) == (100 + commit_version, f"meta-v{commit_version}", E.NONE)
                # only OffsetCommit v6+ carries a leader epoch, only OffsetFetch v5+ returns one
                expected_epoch = 7 if commit_version >= 6 and fetch_version >= 5 else -1
                assert epoch == expected_epoch, (commit_version, fetch_version)

    scenario(broker.bootstrap, body)


def test_offset_fetch_all_partitions_and_many_groups(broker, group_id, topic_name):
    async def body(s: Session) -> None:
        conn = await s.conn()
        other_topic = topic_name + "-b"
        await create_topic(conn, topic_name, 2)
        await create_topic(conn, other_topic, 1)
        g1, g2, g3 = group_id + "-1", group_id + "-2", group_id + "-3"
        await commit(conn, g1, {(topic_name, 0): 1, (topic_name, 1): 2, (other_topic, 0): 3})
        await commit(conn, g2, {(topic_name, 0): 20})
        for version in range(2, 9):
            error, offsets = await fetch_offsets(conn, g1, None, version)  # null topics: everything
            assert error == E.NONE
            assert {tp: o[0] for tp, o in offsets.items()} == {(topic_name, 0): 1, (topic_name, 1): 2, (other_topic, 0): 3}
            error, offsets = await fetch_offsets(conn, g3, None, version)
            assert (error, offsets) == (E.NONE, {})
        request = OffsetFetchRequest(groups=[
            OffsetFetchRequest.OffsetFetchRequestGroup(group_id=g1, topics=None),
            OffsetFetchRequest.OffsetFetchRequestGroup(group_id=g2, topics=[
                OffsetFetchRequest.OffsetFetchRequestTopics(name=topic_name, partition_indexes=[0, 1])]),
            OffsetFetchRequest.OffsetFetchRequestGroup(group_id=g3, topics=[
                OffsetFetchRequest.OffsetFetchRequestTopics(name=other_topic, partition_indexes=[0])]),
            OffsetFetchRequest.OffsetFetchRequestGroup(group_id="", topics=None),
        ])
        response = await conn.send(ApiKey.OFFSET_FETCH, request, version=8)
        got = {g.group_id: (g.error_code, {(t.name, p.partition_index): p.committed_offset for t in g.topics for p in t.partitions})
               for g in response.groups}
        assert got[g1] == (E.NONE, {(topic_name, 0): 1, (topic_name, 1): 2, (other_topic, 0): 3})
        assert got[g2] == (E.NONE, {(topic_name, 0): 20, (topic_name, 1): -1})
        assert got[g3] == (E.NONE, {(other_topic, 0): -1})
        assert got[""][0] == E.NONE
        assert [g.group_id for g in response.groups] == [g1, g2, g3, ""]

    scenario(broker.bootstrap, body)


def test_commit_unknown_partitions_and_oversized_metadata(broker, group_id, topic_name):
    async def body(s: Session) -> None:
        conn = await s.conn()
        await create_topic(conn, topic_name, 3)
        for version in (2, 5, 8):
            group = f"{group_id}-v{version}"
            errors = await commit(conn, group, {
                (topic_name, 0): (1, "x" * 4096),          # exactly the limit: fine
                (topic_name, 1): (2, "x" * 4097),          # one over: refused
                (topic_name, 2): (3, "ok"),
                (topic_name, 3): 4,                        # no such partition
                (topic_name + "-missing", 0): 5,           # no such topic
            }, version=version)
            assert errors == {
                (topic_name, 0): E.NONE,
                (topic_name, 1): E.OFFSET_METADATA_TOO_LARGE,
                (topic_name, 2): E.NONE,
                (topic_name, 3): E.UNKNOWN_TOPIC_OR_PARTITION,
                (topic_name + "-missing", 0): E.UNKNOWN_TOPIC_OR_PARTITION,
            }, version
            _, offsets = await fetch_offsets(conn, group, [(topic_name, p) for p in range(3)])
            assert [offsets[(topic_name, p)][0] for p in range(3)] == [1, -1, 3]
        # only refused partitions: nothing is stored, the group is not even created
        only_bad = await commit(conn, group_id + "-bad", {(topic_name, 0): (1, "y" * 5000), (topic_name + "-missing", 0): 1})
        assert only_bad == {(topic_name, 0): E.OFFSET_METADATA_TOO_LARGE, (topic_name + "-missing", 0): E.UNKNOWN_TOPIC_OR_PARTITION}
        assert await committed_offset(conn, group_id + "-bad", topic_name) == -1

    scenario(broker.bootstrap, body)


def test_offset_metadata_limit_counts_characters(broker, group_id, topic_name):
    async def body(s: Session) -> None:
        conn = await s.conn()
        await create_topic(conn, topic_name)
        # 4096 characters, 8192 UTF-8 bytes
        assert await commit(conn, group_id, {(topic_name, 0): (1, "é" * 4096)}) == {(topic_name, 0): E.NONE}

    scenario(broker.bootstrap, body)


def test_commit_checks_membership_and_generation(broker, group_id, topic_name):
    async def body(s: Session) -> None:
        admin = await s.conn()
        await create_topic(admin, topic_name)
        tp = (topic_name, 0)
        a = await s.member(group_id, instance=None)
        # a group the coordinator does not know, with a generation: a stale member
        assert await commit(admin, group_id, {tp: 1}, generation=3, member_id="x") == {tp: E.ILLEGAL_GENERATION}
        assert (await describe(admin, group_id)).group_state == "Dead"

        await a.join()
        # joined, not yet synced: CompletingRebalance
        assert await commit(a.conn, group_id, {tp: 1}, generation=1, member_id=a.member_id) == {tp: E.REBALANCE_IN_PROGRESS}
        await sync_all([a])
        assert await commit(a.conn, group_id, {tp: 2}, generation=1, member_id=a.member_id) == {tp: E.NONE}
        assert await commit(a.conn, group_id, {tp: 3}, generation=2, member_id=a.member_id) == {tp: E.ILLEGAL_GENERATION}
        assert await commit(a.conn, group_id, {tp: 3}, generation=0, member_id=a.member_id) == {tp: E.ILLEGAL_GENERATION}
        assert await commit(admin, group_id, {tp: 4}, generation=1, member_id="intruder") == {tp: E.UNKNOWN_MEMBER_ID}
        # a simple (generation -1) commit into a group with members: refused
        assert await commit(admin, group_id, {tp: 5}) == {tp: E.UNKNOWN_MEMBER_ID}
        # while another member joins the group is preparing a rebalance; the current generation may commit
        b = await s.member(group_id)
        b_join = asyncio.ensure_future(b.join())
        await wait_state(admin, group_id, "PreparingRebalance")
        assert await commit(a.conn, group_id, {tp: 6}, generation=1, member_id=a.member_id) == {tp: E.NONE}
        await a.join_once()
        await b_join
        assert await commit(a.conn, group_id, {tp: 7}, generation=1, member_id=a.member_id) == {tp: E.ILLEGAL_GENERATION}
        assert await commit(a.conn, group_id, {tp: 7}, generation=2, member_id=a.member_id) == {tp: E.REBALANCE_IN_PROGRESS}
        assert await committed_offset(admin, group_id, topic_name) == 6
        # once everyone left, simple commits are welcome again
        await sync_all([a, b])
        await a.leave()
        await b.leave()
        await wait_state(admin, group_id, "Empty")
        assert await commit(admin, group_id, {tp: 8}) == {tp: E.NONE}
        assert await committed_offset(admin, group_id, topic_name) == 8

    scenario(broker.bootstrap, body)


def test_generation_minus_one_commit_with_member_id_into_empty_group(broker, group_id, topic_name):
    async def body(s: Session) -> None:
        conn = await s.conn()
        await create_topic(conn, topic_name)
        errors = await commit(conn, group_id, {(topic_name, 0): 1}, generation=-1, member_id="consumer-1-abc")
        assert errors == {(topic_name, 0): E.NONE}

    scenario(broker.bootstrap, body)


def test_offsets_expire_by_commit_retention_time_and_stay_gone(start_broker, topic_name):
    own = start_broker("retention", **BROKER_OVERRIDES, **{"offsets.retention.check.interval.ms": 500})
    group = "retention-group"

    async def expired_and_kept(conn: BrokerConnection) -> None:
        error, offsets = await fetch_offsets(conn, group, None)
        assert (error, offsets) == (E.NONE, {(topic_name, 1): (20, -1, "kept", E.NONE)})

    async def phase1(s: Session) -> None:
        conn = await s.conn()
        await create_topic(conn, topic_name, 2)
        assert await commit(conn, group, {(topic_name, 0): (10, "short")}, retention_ms=1000, version=2) == \
            {(topic_name, 0): E.NONE}
        assert await commit(conn, group, {(topic_name, 1): (20, "kept")}) == {(topic_name, 1): E.NONE}
        committed_at = time.monotonic()
        await eventually(lambda: _is(committed_offset(conn, group, topic_name, 0), -1), timeout=10, interval=0.05,
                         message="the 1 s retention to pass")
        assert time.monotonic() - committed_at >= 0.9
        await expired_and_kept(conn)

    async def phase2(s: Session) -> None:
        await expired_and_kept(await s.conn())

    scenario(own.bootstrap, phase1)
    own.restart()
    scenario(own.bootstrap, phase2)


def test_groups_and_offsets_survive_restarts(start_broker, topic_name):
    own = start_broker("restarts", **BROKER_OVERRIDES)
    simple, empty, stable, killed = "simple-group", "empty-group", "stable-group", "killed-group"
    state: dict[str, Any] = {}

    async def phase1(s: Session) -> None:
        admin = await s.conn()
        await create_topic(admin, topic_name, 2)
        assert await commit(admin, simple, {(topic_name, 0): (10, "s")}) == {(topic_name, 0): E.NONE}
        e = await s.member(empty)
        await form_group(admin, [e])
        assert await commit(e.conn, empty, {(topic_name, 0): 20}, generation=1, member_id=e.member_id) == {(topic_name, 0): E.NONE}
        await e.leave()
        await wait_state(admin, empty, "Empty")
        t = await s.member(stable, session_ms=2000, protocols=[("range", consumer_subscription(topic_name))])
        await form_group(admin, [t])
        assert await commit(t.conn, stable, {(topic_name, 1): 30}, generation=1, member_id=t.member_id) == {(topic_name, 1): E.NONE}
        state["stable"] = t.member_id
        # deletions are written too: a deleted offset stays deleted
        await commit(admin, simple, {(topic_name, 1): 50})
        response = await admin.send(ApiKey.OFFSET_DELETE, OffsetDeleteRequest(group_id=simple, topics=[
            OffsetDeleteRequest.OffsetDeleteRequestTopic(name=topic_name, partitions=[
                OffsetDeleteRequest.OffsetDeleteRequestPartition(partition_index=1)])]))
        assert response.topics[0].partitions[0].error_code == E.NONE

    async def check_offsets(admin: BrokerConnection, simple_offset: int) -> None:
        assert (await fetch_offsets(admin, simple, None))[1] == {(topic_name, 0): (simple_offset, -1, "s", E.NONE)}
        assert await committed_offset(admin, empty, topic_name, 0) == 20
        assert await committed_offset(admin, stable, topic_name, 1) == 30

    async def after_clean_restart(s: Session) -> None:
        admin = await s.conn()
        described = await describe(admin, stable)
        # reloaded Stable with its member, who never heartbeats again...
        assert (described.group_state, described.protocol_data) == ("Stable", "range")
        assert [(m.member_id, m.client_id, m.client_host, bytes(m.member_assignment)) for m in described.members] == [
            (state["stable"], "group-test", "/127.0.0.1", state["stable"].encode())]
        await check_offsets(admin, 10)
        listed = await list_groups(admin, version=4)
        assert {g: (listed[g].protocol_type, listed[g].group_state) for g in (simple, empty, stable)} == {
            simple: ("", "Empty"), empty: ("consumer", "Empty"), stable: ("consumer", "Stable")}
        # ...so its session (2 s) expires and the group is left empty, its offsets kept
        gone = await wait_state(admin, stable, "Empty", timeout=15)
        assert gone.members == []
        await check_offsets(admin, 10)
        # more changes before an unclean stop
        assert await commit(admin, simple, {(topic_name, 0): (11, "s")}) == {(topic_name, 0): E.NONE}
        k = await s.member(killed, session_ms=2000)
        await form_group(admin, [k])
        state["killed"] = k.member_id

    async def after_kill(s: Session) -> None:
        admin = await s.conn()
        described = await describe(admin, killed)
        assert (described.group_state, [m.member_id for m in described.members]) == ("Stable", [state["killed"]])
        await check_offsets(admin, 11)
        assert (await describe(admin, empty)).group_state == "Empty"
        assert (await describe(admin, stable)).group_state == "Empty"
        assert (await wait_state(admin, killed, "Empty", timeout=15)).members == []
        # a fresh member joins the reloaded empty group at the next generation
        e = await s.member(empty)
        joined = await e.join()
        assert (joined.error_code, joined.generation_id) == (E.NONE, 3)

    scenario(own.bootstrap, phase1)
    own.restart()
    scenario(own.bootstrap, after_clean_restart)
    own.kill()
    own.start()
    scenario(own.bootstrap, after_kill)


def test_deleted_groups_stay_deleted_after_restart(start_broker, topic_name):
    own = start_broker("deleted", **BROKER_OVERRIDES)
    consumer_group, simple_group = "deleted-consumer-group", "deleted-simple-group"

    async def before(s: Session) -> None:
        admin = await s.conn()
        await create_topic(admin, topic_name)
        d = await s.member(consumer_group)
        await form_group(admin, [d])
        await commit(d.conn, consumer_group, {(topic_name, 0): 40}, generation=1, member_id=d.member_id)
        await d.leave()
        await wait_state(admin, consumer_group, "Empty")
        response = await admin.send(ApiKey.DELETE_GROUPS, DeleteGroupsRequest(groups_names=[consumer_group]))
        assert [r.error_code for r in response.results] == [E.NONE]
        await commit(admin, simple_group, {(topic_name, 0): 1})
        response = await admin.send(ApiKey.OFFSET_DELETE, OffsetDeleteRequest(group_id=simple_group, topics=[
            OffsetDeleteRequest.OffsetDeleteRequestTopic(name=topic_name, partitions=[
                OffsetDeleteRequest.OffsetDeleteRequestPartition(partition_index=0)])]))
        assert response.topics[0].partitions[0].error_code == E.NONE
        for group in (consumer_group, simple_group):
            assert (await describe(admin, group)).group_state == "Dead"

    async def after(s: Session) -> None:
        admin = await s.conn()
        listed = await list_groups(admin, 4)
        assert {g: listed[g].group_state for g in (consumer_group, simple_group) if g in listed} == {}
        for group in (consumer_group, simple_group):
            assert (await describe(admin, group)).group_state == "Dead"

    scenario(own.bootstrap, before)
    own.restart()
    scenario(own.bootstrap, after)


def test_oversized_member_metadata_fails_the_sync_and_corrupts_nothing(start_broker, topic_name):
    """A group record larger than __consumer_offsets accepts (message.max.bytes) cannot be stored:
    the leader's SyncGroup gets UNKNOWN_SERVER_ERROR (Kafka's answer), the group goes back to
    rebalancing, and the log stays readable: other groups' offsets survive a restart."""
    own = start_broker("oversized", **BROKER_OVERRIDES)
    big_group, other_group = "oversized-metadata", "small-group"

    async def before(s: Session) -> None:
        admin = await s.conn()
        await create_topic(admin, topic_name)
        big = await s.member(big_group, protocols=[("range", b"\x00" * 1_200_000)])
        assert (await big.join()).error_code == E.NONE
        response = await big.sync({big.member_id: b"assignment"})
        assert response.error_code == E.UNKNOWN_SERVER_ERROR
        assert (await describe(admin, big_group)).group_state == "PreparingRebalance"
        assert await commit(admin, other_group, {(topic_name, 0): 7}) == {(topic_name, 0): E.NONE}

    async def after(s: Session) -> None:
        admin = await s.conn()
        assert await committed_offset(admin, other_group, topic_name, 0) == 7
        assert (await describe(admin, big_group)).group_state == "Dead"

    scenario(own.bootstrap, before)
    own.restart()
    scenario(own.bootstrap, after)
    assert "Traceback" not in own.log()


def test_group_max_size(start_broker, group_id):
    own = start_broker("max-size", **BROKER_OVERRIDES, **{"group.max.size": 1})

    async def body(s: Session) -> None:
        admin = await s.conn()
        a = await s.member(group_id)
        await form_group(admin, [a])
        b = await s.member(group_id)
        for version in (3, 7):
            response = await b.join_once(version)
            assert (response.error_code, response.member_id) == (E.GROUP_MAX_SIZE_REACHED, "")
        assert (await describe(admin, group_id)).group_state == "Stable"

    scenario(own.bootstrap, body)


# --- ListGroups / DescribeGroups / DeleteGroups / OffsetDelete -----------------------------------


def test_list_groups_versions_and_state_filter(broker, group_id, topic_name):
    async def body(s: Session) -> None:
        admin = await s.conn()
        await create_topic(admin, topic_name)
        stable, simple, completing = group_id + "-stable", group_id + "-simple", group_id + "-completing"
        await form_group(admin, [await s.member(stable)])
        await commit(admin, simple, {(topic_name, 0): 1})
        assert (await (await s.member(completing, protocol_type="connect", protocols=[("v0", b"")])).join()).error_code == E.NONE
        ours = {stable: ("consumer", "Stable"), simple: ("", "Empty"), completing: ("connect", "CompletingRebalance")}
        for version in range(5):
            listed = await list_groups(admin, version)
            for g, (protocol_type, state) in ours.items():
                assert listed[g].protocol_type == protocol_type
                assert listed[g].group_state == (state if version >= 4 else "")
        only_stable = await list_groups(admin, 4, ["Stable"])
        assert stable in only_stable and simple not in only_stable and completing not in only_stable
        assert all(g.group_state == "Stable" for g in only_stable.values())
        mixed = await list_groups(admin, 4, ["empty", "COMPLETINGREBALANCE"])  # case-insensitive
        assert simple in mixed and completing in mixed and stable not in mixed
        assert await list_groups(admin, 4, ["NoSuchState"]) == {}
        assert set(ours) <= set(await list_groups(admin, 4, []))

    scenario(broker.bootstrap, body)


def test_describe_groups(broker, group_id):
    async def body(s: Session) -> None:
        admin = await s.conn()
        stable = group_id + "-stable"
        static = Member(await s.conn("describe-client"), stable, instance="static-1",
                        protocols=[("range", b"sub-bytes")])
        await form_group(admin, [static])
        completing = await s.member(group_id + "-completing")
        await completing.join()
        unknown = group_id + "-unknown"
        for version in range(6):
            response = await admin.send(ApiKey.DESCRIBE_GROUPS, DescribeGroupsRequest(
                groups=[stable, completing.group, unknown]), version=version)
            described = {g.group_id: g for g in response.groups}
            assert [g.group_id for g in response.groups] == [stable, completing.group, unknown]
            s_group = described[stable]
            assert (s_group.error_code, s_group.group_state, s_group.protocol_type, s_group.protocol_data) == (
                E.NONE, "Stable", "consumer", "range")
            (m,) = s_group.members
            assert (m.member_id, m.client_id, m.client_host) == (static.member_id, "describe-client", "/127.0.0.1")
            assert (bytes(m.member_metadata), bytes(m.member_assignment)) == (b"sub-bytes", static.member_id.encode())
            assert m.group_instance_id == ("static-1" if version >= 4 else None)
            c_group = described[completing.group]
            assert (c_group.group_state, c_group.protocol_type, c_group.protocol_data) == ("CompletingRebalance", "consumer", "")
            assert [(cm.member_id, bytes(cm.member_metadata), bytes(cm.member_assignment)) for cm in c_group.members] == [
                (completing.member_id, b"", b"")]
            u_group = described[unknown]
            assert (u_group.error_code, u_group.group_state, u_group.protocol_type, u_group.protocol_data, u_group.members) == (
                E.NONE, "Dead", "", "", [])
            assert s_group.authorized_operations == OMITTED_OPERATIONS
        for version in range(3, 6):
            response = await admin.send(ApiKey.DESCRIBE_GROUPS, DescribeGroupsRequest(
                groups=[stable, unknown], include_authorized_operations=True), version=version)
            assert [g.authorized_operations for g in response.groups] == [ALL_GROUP_OPERATIONS] * 2

    scenario(broker.bootstrap, body)


def test_delete_groups(broker, group_id, topic_name):
    async def body(s: Session) -> None:
        admin = await s.conn()
        await create_topic(admin, topic_name)
        active, simple, emptied = group_id + "-active", group_id + "-simple", group_id + "-emptied"
        await form_group(admin, [await s.member(active)])
        await commit(admin, simple, {(topic_name, 0): 5})
        e = await s.member(emptied)
        await form_group(admin, [e])
        await commit(e.conn, emptied, {(topic_name, 0): 6}, generation=1, member_id=e.member_id)
        await e.leave()
        await wait_state(admin, emptied, "Empty")
        for version, group in ((0, simple), (2, emptied)):
            response = await admin.send(ApiKey.DELETE_GROUPS, DeleteGroupsRequest(
                groups_names=[active, group, group_id + "-unknown"]), version=version)
            assert {r.group_id: r.error_code for r in response.results} == {
                active: E.NON_EMPTY_GROUP, group: E.NONE, group_id + "-unknown": E.GROUP_ID_NOT_FOUND}
            assert await committed_offset(admin, group, topic_name) == -1
            assert (await describe(admin, group)).group_state == "Dead"
            assert group not in await list_groups(admin)
            again = await admin.send(ApiKey.DELETE_GROUPS, DeleteGroupsRequest(groups_names=[group]), version=1)
            assert [r.error_code for r in again.results] == [E.GROUP_ID_NOT_FOUND]
        assert (await describe(admin, active)).group_state == "Stable"
        # a deleted group's id can be used again from scratch
        reborn = await s.member(emptied)
        assert (await reborn.join()).generation_id == 1

    scenario(broker.bootstrap, body)


def test_delete_groups_with_a_repeated_group_id(broker, group_id, topic_name):
    async def body(s: Session) -> None:
        admin = await s.conn()
        await create_topic(admin, topic_name)
        await commit(admin, group_id, {(topic_name, 0): 1})
        response = await admin.send(ApiKey.DELETE_GROUPS, DeleteGroupsRequest(groups_names=[group_id, group_id]))
        assert (await describe(admin, group_id)).group_state == "Dead"  # it was deleted...
        assert [(r.group_id, r.error_code) for r in response.results] == [(group_id, E.NONE)]  # ...say so

    scenario(broker.bootstrap, body)


def test_offset_delete(broker, group_id, topic_name):
    async def body(s: Session) -> None:
        admin = await s.conn()
        subscribed, other = topic_name, topic_name + "-other"
        await create_topic(admin, subscribed)
        await create_topic(admin, other)
        def request(group: str, *tps: tuple[str, int]) -> OffsetDeleteRequest:
            by_topic: dict[str, list[int]] = {}
            for t, p in tps:
                by_topic.setdefault(t, []).append(p)
            return OffsetDeleteRequest(group_id=group, topics=[OffsetDeleteRequest.OffsetDeleteRequestTopic(
                name=t, partitions=[OffsetDeleteRequest.OffsetDeleteRequestPartition(partition_index=p) for p in ps])
                for t, ps in by_topic.items()])

        def errors(response: Any) -> dict[tuple[str, int], int]:
            return {(t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions}

        missing = await admin.send(ApiKey.OFFSET_DELETE, request(group_id + "-unknown", (subscribed, 0)))
        assert (missing.error_code, missing.topics) == (E.GROUP_ID_NOT_FOUND, [])

        # a consumer group subscribed to one topic (a real ConsumerProtocolSubscription v0)
        consumer_group = group_id + "-consumer"
        c = await s.member(consumer_group, protocols=[("range", consumer_subscription(subscribed))])
        await form_group(admin, [c])
        await commit(c.conn, consumer_group, {(subscribed, 0): 1, (other, 0): 2}, generation=1, member_id=c.member_id)
        response = await admin.send(ApiKey.OFFSET_DELETE, request(
            consumer_group, (subscribed, 0), (other, 0), (topic_name + "-missing", 0)))
        assert response.error_code == E.NONE
        assert errors(response) == {(subscribed, 0): E.GROUP_SUBSCRIBED_TO_TOPIC, (other, 0): E.NONE,
                                    (topic_name + "-missing", 0): E.UNKNOWN_TOPIC_OR_PARTITION}
        _, left = await fetch_offsets(admin, consumer_group, None)
        assert {tp: o[0] for tp, o in left.items()} == {(subscribed, 0): 1}

        # a non-consumer group with members: refused as a whole
        connect_group = group_id + "-connect"
        k = await s.member(connect_group, protocol_type="connect", protocols=[("v1", b"")])
        await form_group(admin, [k])
        await commit(k.conn, connect_group, {(other, 0): 3}, generation=1, member_id=k.member_id)
        response = await admin.send(ApiKey.OFFSET_DELETE, request(connect_group, (other, 0)))
        assert (response.error_code, response.topics) == (E.NON_EMPTY_GROUP, [])
        assert await committed_offset(admin, connect_group, other) == 3

        # an empty group: deleted; with its last offset gone the group goes too
        simple = group_id + "-simple"
        await commit(admin, simple, {(subscribed, 0): 4, (other, 0): 5})
        response = await admin.send(ApiKey.OFFSET_DELETE, request(simple, (subscribed, 0)))
        assert (response.error_code, errors(response)) == (E.NONE, {(subscribed, 0): E.NONE})
        _, left = await fetch_offsets(admin, simple, None)
        assert {tp: o[0] for tp, o in left.items()} == {(other, 0): 5}
        response = await admin.send(ApiKey.OFFSET_DELETE, request(simple, (other, 0), (other, 0)))
        assert response.error_code == E.NONE
        assert (await describe(admin, simple)).group_state == "Dead"
        assert simple not in await list_groups(admin)

    scenario(broker.bootstrap, body)


def test_offset_delete_with_unknown_subscription_is_refused(broker, group_id, topic_name):
    async def body(s: Session) -> None:
        admin = await s.conn()
        await create_topic(admin, topic_name)
        c = await s.member(group_id, protocols=[("range", b"\x00not-a-subscription")])
        await form_group(admin, [c])
        await commit(c.conn, group_id, {(topic_name, 0): 1}, generation=1, member_id=c.member_id)
        response = await admin.send(ApiKey.OFFSET_DELETE, OffsetDeleteRequest(group_id=group_id, topics=[
            OffsetDeleteRequest.OffsetDeleteRequestTopic(name=topic_name, partitions=[
                OffsetDeleteRequest.OffsetDeleteRequestPartition(partition_index=0)])]))
        assert response.topics[0].partitions[0].error_code == E.GROUP_SUBSCRIBED_TO_TOPIC

    scenario(broker.bootstrap, body)


# --- __consumer_offsets itself -------------------------------------------------------------------


def test_offsets_topic_refuses_produce_and_serves_fetch(broker, group_id, topic_name):
    async def body(s: Session) -> None:
        conn = await s.conn()
        await create_topic(conn, topic_name)
        assert await commit(conn, group_id, {(topic_name, 0): (42, "fetched")}) == {(topic_name, 0): E.NONE}
        partition = partition_for(group_id, 50)
        produce = await conn.send(ApiKey.PRODUCE, ProduceRequest(acks=-1, timeout_ms=5000, topic_data=[
            ProduceRequest.TopicProduceData(name=OFFSETS_TOPIC, partition_data=[
                ProduceRequest.PartitionProduceData(index=partition, records=build_batch([(b"k", b"v")]))])]))
        assert produce.responses[0].partition_responses[0].error_code == E.INVALID_TOPIC_EXCEPTION
        fetch = await conn.send(ApiKey.FETCH, FetchRequest(
            replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=50 << 20, isolation_level=0, session_id=0,
            session_epoch=-1, topics=[FetchRequest.FetchTopic(topic=OFFSETS_TOPIC, partitions=[FetchRequest.FetchPartition(
                partition=partition, current_leader_epoch=-1, fetch_offset=0, log_start_offset=-1,
                partition_max_bytes=1 << 20)])], forgotten_topics_data=[], rack_id=""))
        fetched = fetch.responses[0].partitions[0]
        assert fetched.error_code == E.NONE and fetched.high_watermark >= 1
        ours = [
            OffsetAndMetadata.decode(bytes(value))
            for _, _, key, value in _native.read_records(bytes(fetched.records))
            if decode_key(bytes(key)) == OffsetCommitKey(group_id, topic_name, 0)
        ]
        assert [(o.offset, o.metadata) for o in ours] == [(42, "fetched")]

    scenario(broker.bootstrap, body)


# --- malformed requests --------------------------------------------------------------------------


def _raw_frame(api_key: int, version: int, message: Any) -> bytes:
    return bytes(codec.encode_request(api_key, version, 1, "raw", message))


def _closed_or_answer(sock: socket.socket) -> bytes:
    """The broker's answer to a bad request: b'' if it closed the connection, else a frame."""
    sock.settimeout(10)
    try:
        data = sock.recv(65536)
    except ConnectionResetError:
        return b""
    return data


@pytest.mark.parametrize("cut", ["inside_protocols", "inside_metadata", "huge_array", "empty_body"])
def test_truncated_join_group_gets_closed_and_broker_keeps_serving(broker, group_id, cut):
    """Kafka closes the connection of a request it cannot parse, on purpose: the broker logs that
    close as a WARNING, not an internal error (which would fail the test), and serves on."""
    request = Member(None, group_id, protocols=[("range", b"0123456789")]).join_request()  # type: ignore[arg-type]
    frame = _raw_frame(ApiKey.JOIN_GROUP, 5, request)[4:]
    header_len = 2 + 2 + 4 + 2 + len("raw")
    body = frame[header_len:]
    if cut == "inside_protocols":
        body = body[: len(body) - 20]
    elif cut == "inside_metadata":
        body = body[: len(body) - 4]
    elif cut == "huge_array":
        # keep everything up to the protocols array and claim 2^31-1 entries
        body = body[: len(body) - (4 + 2 + 5 + 4 + 10)] + struct.pack(">i", 2**31 - 1)
    else:
        body = b""
    bad = frame[:header_len] + body
    mark = broker.log_mark()
    with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as sock:
        sock.sendall(struct.pack(">i", len(bad)) + bad)
        assert _closed_or_answer(sock) == b""
    broker.wait_for_log(r"WARNING Closing connection from 127\.0\.0\.1:\d+: malformed JOIN_GROUP v5 request", since=mark)
    assert broker.alive

    async def body_ok(s: Session) -> None:
        conn = await s.conn()
        assert (await conn.send(ApiKey.API_VERSIONS, ApiVersionsRequest(), version=0)).error_code == E.NONE
        assert (await describe(conn, group_id)).group_state == "Dead"
        joined = await (await s.member(group_id)).join()
        assert (joined.error_code, joined.generation_id) == (E.NONE, 1)

    scenario(broker.bootstrap, body_ok)
