"""The group coordinator's rebalance timing against a mock clock: no broker, no sockets, no sleeps.

A ``GroupCoordinator`` runs over an in-memory group store, with its purgatories' deadlines on a
``MockScheduler``: each test says exactly how much time passes, so "answered at the rebalance
timeout, not a millisecond before" is checked as such. Members speak through the coordinator's
handlers the way the API handlers do, and keep every answer they get.

The cases are Kafka's (``GroupCoordinator``): a member that stops polling past
``max.poll.interval.ms`` during a rebalance (the Java client's and librdkafka's rebalance timeout)
never rejoins, whether it falls silent or its heartbeat thread keeps going; the join phase then
ends at the rebalance timeout without it, in an eager rebalance as in the second rebalance of a
cooperative one. Last, a seeded random walk checks that whatever the members did, a group whose
other members fall silent or only heartbeat stabilizes around the one member that behaves, and
that no JoinGroup or SyncGroup is left unanswered.

When the group's write (the leader's SyncGroup stores the group) completes, the leader's SyncGroup
answer and every waiting member's are given in that step, through the SyncGroup handler and
through the dispatcher to each member's connection: nothing handled after the write is answered
before them.

The last part follows the leadership of ``__consumer_offsets`` partitions, over the real metadata
manager and real logs: what the group APIs answer while a partition loads (off the event loop),
after it is unloaded, when its leadership moves away in the middle of a load, and how leader
epochs order elections and resignations.
"""

from __future__ import annotations

import asyncio
import logging
import random
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from pybroker import _native
from pybroker.common.errors import ErrorCode as E
from pybroker.log.log import AppendOrigin
from pybroker.network.connection import KafkaConnection
from pybroker.protocol import codec
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.consumer_protocol import ConsumerSubscription, encode_subscription
from pybroker.protocol.messages import SyncGroupRequest
from pybroker.server.apis import sync_group
from pybroker.server.dispatcher import RequestDispatcher
from pybroker.server.group.coordinator import (
    GroupConfig,
    GroupCoordinator,
    JoinRequest,
    JoinResult,
    SyncResult,
)
from pybroker.server.group.delayed_operations import join_key, sync_key
from pybroker.server.group.group_metadata import GroupMetadata, GroupState
from pybroker.server.group.metadata_manager import OFFSETS_TOPIC, GroupMetadataManager
from pybroker.server.group.records import (
    GroupMetadataKey,
    GroupRecord,
    MemberRecord,
    OffsetAndMetadata,
    OffsetCommitKey,
)
from pybroker.server.replica_manager import PartitionAppendResult
from pybroker.types import TopicPartition
from tests.mock_time import MockScheduler, MockTime
from tests.unit.handler_context import allowed_context
from tests.unit.replica_logs import make_log

GROUP = "g"
PR, CR, STABLE = GroupState.PREPARING_REBALANCE, GroupState.COMPLETING_REBALANCE, GroupState.STABLE
SESSION_MS, REBALANCE_MS = 1000, 3000


def subscription(*owned: int) -> bytes:
    """A consumer's JoinGroup metadata for topic t, with the partitions it owns (as the
    cooperative assignor sends them)."""
    return encode_subscription(ConsumerSubscription(["t"], owned_partitions=[TopicPartition("t", p) for p in owned],
                                                    version=1))


class InMemoryGroupStore:
    """The coordinator's ``GroupMetadataManager``, minus ``__consumer_offsets``: every group is
    local and loaded, and every write succeeds at once."""

    def __init__(self) -> None:
        self.groups: dict[str, GroupMetadata] = {}
        self.loading_partitions: set[int] = set()

    def partition_for(self, group_id: str) -> int:
        return 0

    def is_local(self, group_id: str) -> bool:
        return True

    def is_loading(self, group_id: str) -> bool:
        return False

    def get_group(self, group_id: str) -> GroupMetadata | None:
        return self.groups.get(group_id)

    def add_group(self, group: GroupMetadata) -> GroupMetadata:
        return self.groups.setdefault(group.group_id, group)

    def store_group(self, group: GroupMetadata, assignments: dict[str, bytes], callback: Callable[[E], None]) -> None:
        callback(E.NONE)

    def store_offsets(self, group: GroupMetadata, offsets: dict[TopicPartition, Any],
                      callback: Callable[[dict[TopicPartition, E]], None]) -> None:
        callback(dict.fromkeys(offsets, E.NONE))

    def expire_offsets(self) -> int:
        return 0


    async def shutdown(self) -> None:
        pass


class Cluster:
    """A coordinator, its mock clock, and the time since the test began."""

    def __init__(self, store: Any = None, **config: Any) -> None:
        self.time = MockTime()
        self.scheduler = MockScheduler(self.time)
        settings = {"min_session_timeout_ms": 100, "initial_rebalance_delay_ms": 0, **config}
        self.coordinator = GroupCoordinator(store or InMemoryGroupStore(), GroupConfig(**settings), 600_000,
                                            self.scheduler, self.time)
        self.coordinator.startup()
        self.start = self.time.monotonic_ms()

    @property
    def now(self) -> float:
        return self.time.monotonic_ms() - self.start

    @property
    def group(self) -> GroupMetadata:
        group = self.coordinator.manager.get_group(GROUP)
        assert group is not None
        return group

    async def advance(self, ms: float) -> None:
        """Move the clock, run the deadlines that fell due, deliver the answers they gave."""
        await self.scheduler.advance(ms)
        await self.settle()

    async def settle(self) -> None:
        """Without moving the clock: run the deadlines due now (e.g. an initial rebalance delay of
        0) and let the event loop deliver the answers given. The coordinator answers a waiting
        JoinGroup by completing a future, whose callback runs on the loop's next turn (a waiting
        SyncGroup's callback is called directly)."""
        await self.scheduler.tick()
        for _ in range(3):
            await asyncio.sleep(0)

    def member(self, name: str, **kwargs: Any) -> Member:
        return Member(self, name, **kwargs)


class Pending:
    """A request's answer, once it comes."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.answers: list[Any] = []
        self.answered_at: float | None = None

    def __call__(self, answer: Any) -> None:
        self.answers.append(answer)
        self.answered_at = self.cluster.now

    @property
    def done(self) -> bool:
        return bool(self.answers)

    @property
    def result(self) -> Any:
        assert len(self.answers) == 1, f"answered {len(self.answers)} times: {self.answers}"
        return self.answers[0]


class Member:
    """One consumer, speaking through the coordinator's handlers as the API handlers do."""

    def __init__(self, cluster: Cluster, name: str, *, session_ms: int = SESSION_MS,
                 rebalance_ms: int = REBALANCE_MS, instance: str | None = None) -> None:
        self.cluster, self.name, self.instance = cluster, name, instance
        self.session_ms, self.rebalance_ms = session_ms, rebalance_ms
        self.metadata = subscription()
        self.member_id = ""
        self.generation = -1
        self.joined: JoinResult | None = None
        self.requests: list[tuple[str, Pending]] = []

    def join_request(self) -> JoinRequest:
        return JoinRequest(
            group_id=GROUP, member_id=self.member_id, group_instance_id=self.instance,
            require_known_member_id=self.instance is None, client_id=self.name, client_host="/127.0.0.1",
            rebalance_timeout_ms=self.rebalance_ms, session_timeout_ms=self.session_ms,
            protocol_type="consumer", protocols=[("range", self.metadata)],
        )

    def send_join(self) -> Pending:
        """One JoinGroup; its answer may wait for the join phase to end."""
        pending = Pending(self.cluster)
        self.requests.append(("JoinGroup", pending))
        self.cluster.coordinator.handle_join_group(self.join_request(), pending)
        return pending

    def took(self, joined: JoinResult) -> JoinResult:
        """Adopt what a JoinGroup answered, as a client does."""
        if joined.error in (E.NONE, E.MEMBER_ID_REQUIRED):
            self.member_id = joined.member_id
        if joined.error == E.NONE:
            self.generation, self.joined = joined.generation_id, joined
        elif joined.error == E.UNKNOWN_MEMBER_ID:
            self.member_id, self.generation = "", -1
        return joined

    async def join(self) -> Pending:
        """JoinGroup, with KIP-394's member-id round trip for a new dynamic member."""
        pending = self.send_join()
        await self.cluster.settle()
        if pending.done and pending.result.error == E.MEMBER_ID_REQUIRED:
            self.took(pending.result)
            pending = self.send_join()
            await self.cluster.settle()
        return pending

    @property
    def is_leader(self) -> bool:
        return self.joined is not None and self.joined.leader_id == self.member_id

    def send_sync(self) -> Pending:
        assert self.joined is not None
        assignments = {m: f"{m} of generation {self.generation}".encode() for m, _, _ in self.joined.members}
        pending = Pending(self.cluster)
        self.requests.append(("SyncGroup", pending))
        self.cluster.coordinator.handle_sync_group(
            GROUP, self.generation, self.member_id, self.instance, "consumer", "range",
            assignments if self.is_leader else {}, pending,
        )
        return pending

    def heartbeat(self) -> E:
        return self.cluster.coordinator.handle_heartbeat(GROUP, self.member_id, self.instance, self.generation)

    def leave(self) -> E:
        error, members = self.cluster.coordinator.handle_leave_group(GROUP, [(self.member_id, self.instance)])
        assert error == E.NONE
        return members[0]

    def unanswered(self) -> list[str]:
        return [kind for kind, pending in self.requests if not pending.done]


def run(scenario: Callable[[], Any]) -> Any:
    return asyncio.run(scenario())


@pytest.fixture(autouse=True)
def no_errors_logged(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    """A deadline whose action raised is only logged by the scheduler: fail the test on it."""
    with caplog.at_level(logging.ERROR):
        yield
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert not errors, errors


async def joined_generation(*pendings: Pending) -> list[JoinResult]:
    await pendings[0].cluster.settle()
    assert all(p.done for p in pendings), "a JoinGroup is still waiting"
    return [p.result for p in pendings]


async def completing_rebalance(cluster: Cluster, *members: Member) -> None:
    """The members form a generation (one join phase) and the group waits for their SyncGroups;
    the first is the leader."""
    first = await members[0].join()
    members[0].took(first.result)  # a lone member's join phase ends at once
    if len(members) > 1:
        pendings = [await m.join() for m in members[1:]]  # a rebalance the first member must rejoin
        pendings.insert(0, members[0].send_join())
        for member, result in zip(members, await joined_generation(*pendings), strict=True):
            member.took(result)
    assert cluster.group.is_state(CR) and members[0].is_leader


async def stable_group(cluster: Cluster, *members: Member) -> None:
    """The members form a group (one join phase), sync, and it is Stable; the first is the leader."""
    await completing_rebalance(cluster, *members)
    await sync(*members)
    assert cluster.group.is_state(STABLE)
    assert members[0].is_leader


async def sync(*members: Member) -> list[SyncResult]:
    pendings = [m.send_sync() for m in members if not m.is_leader] + [m.send_sync() for m in members if m.is_leader]
    await members[0].cluster.settle()
    results = [p.result for p in pendings]
    assert all(r.error == E.NONE for r in results), results
    return results


async def heartbeats_until(cluster: Cluster, member: Member, done: Callable[[], bool], limit_ms: float,
                           interval_ms: int = 200) -> list[E]:
    """``member`` heartbeats every ``interval_ms`` (and does nothing else) until ``done()``."""
    answers = []
    while not done():
        assert cluster.now <= limit_ms, f"still waiting at {cluster.now} ms"
        await cluster.advance(interval_ms)
        if not done():
            answers.append(member.heartbeat())
    return answers


# --- a member stops polling during a rebalance ------------------------------------------------------


@pytest.mark.parametrize("protocol", ["eager", "cooperative"])
@pytest.mark.parametrize("stopped", ["heartbeats only", "silent"])
def test_member_that_stops_polling_in_a_rebalance_is_dropped_and_the_rest_stabilize(protocol, stopped):
    """A and B are Stable; a rebalance starts and A rejoins; B has stopped polling, so it never
    rejoins. If B's heartbeat thread keeps going it is dropped exactly at the rebalance timeout
    (max.poll.interval.ms), not a moment before; if it fell silent, when its session ends. Then
    A's JoinGroup is answered with a generation of A alone, A syncs, and the group is Stable.

    Cooperative: the rebalance B misses is the second one. In the first, B rejoined and kept its
    partitions while A revoked some; A's rejoin after revoking them starts the second."""

    async def scenario() -> None:
        cluster = Cluster()
        a, b = cluster.member("a"), cluster.member("b")
        await stable_group(cluster, a, b)
        if protocol == "cooperative":
            a.metadata = subscription(0, 1)
            a_join = a.send_join()  # a's subscription changed: the first rebalance
            assert cluster.group.is_state(PR)
            b_join = b.send_join()
            for member, result in zip((a, b), await joined_generation(a_join, b_join), strict=True):
                member.took(result)
            await sync(a, b)
            a.metadata = subscription(0)  # revoked partition 1: rejoin for the second rebalance
        started = cluster.now
        generation = a.generation
        a_join = a.send_join()
        assert cluster.group.is_state(PR)
        await cluster.settle()
        assert not a_join.done

        if stopped == "heartbeats only":
            answers = await heartbeats_until(cluster, b, lambda: a_join.done, started + REBALANCE_MS)
            assert set(answers) == {E.REBALANCE_IN_PROGRESS}
            assert a_join.answered_at == started + REBALANCE_MS
        else:
            while not a_join.done:
                assert cluster.now < started + REBALANCE_MS
                await cluster.advance(100)
            assert a_join.answered_at == started + SESSION_MS  # b's session, restarted by its sync

        joined = a.took(a_join.result)
        assert (joined.error, joined.generation_id) == (E.NONE, generation + 1)
        assert joined.leader_id == a.member_id
        assert [m for m, _, _ in joined.members] == [a.member_id]
        assert b.heartbeat() == E.UNKNOWN_MEMBER_ID
        assert (await sync(a))[0].assignment == f"{a.member_id} of generation {a.generation}".encode()
        assert cluster.group.is_state(STABLE) and list(cluster.group.members) == [a.member_id]
        assert len(cluster.coordinator.rebalance_purgatory) == 0  # no join or sync deadline left
        assert a.unanswered() == b.unanswered() == []

    run(scenario)


def test_member_awaiting_join_is_not_expired_by_its_session():
    """B rejoined and waits in JoinGroup far beyond its own session timeout (a member waiting
    for the rebalance counts as alive); the leader A only heartbeats. At the rebalance timeout A
    is dropped and B, now the leader, gets the generation."""

    async def scenario() -> None:
        cluster = Cluster()
        a, b = cluster.member("a"), cluster.member("b")
        await stable_group(cluster, a, b)
        b.metadata = subscription(0, 1, 2, 3)
        b_join = b.send_join()
        assert cluster.group.is_state(PR)
        await heartbeats_until(cluster, a, lambda: b_join.done, REBALANCE_MS + cluster.now)
        assert b_join.answered_at is not None and b_join.answered_at > 2 * SESSION_MS
        joined = b.took(b_join.result)
        assert joined.leader_id == b.member_id and [m for m, _, _ in joined.members] == [b.member_id]
        assert a.heartbeat() == E.UNKNOWN_MEMBER_ID

    run(scenario)


def test_rebalance_timeout_is_the_largest_of_the_members():
    """The join phase waits as long as the most patient member's rebalance timeout allows."""

    async def scenario() -> None:
        cluster = Cluster()
        a, b = cluster.member("a", rebalance_ms=1000), cluster.member("b", rebalance_ms=5000)
        await stable_group(cluster, a, b)
        started = cluster.now
        a_join = a.send_join()
        await heartbeats_until(cluster, b, lambda: a_join.done, started + 5000)
        assert a_join.answered_at == started + 5000

    run(scenario)


# --- no request left waiting ------------------------------------------------------------------------


def test_leaving_member_gets_an_answer_to_its_waiting_sync_group():
    """B's SyncGroup waits for the leader's assignment when B leaves (its consumer is closed, or
    its max.poll.interval.ms passed). The SyncGroup is answered (UNKNOWN_MEMBER_ID) at once: a
    client's LeaveGroup pipelined behind it on the same connection is answered only after it, so
    an unanswered one would hold back every later answer on that connection. The leader's
    SyncGroup then finds a rebalance, which A completes alone."""

    async def scenario() -> None:
        cluster = Cluster()
        a, b = cluster.member("a"), cluster.member("b")
        await stable_group(cluster, a, b)
        b.metadata = subscription(0, 1, 2, 3)
        pendings = [b.send_join(), a.send_join()]
        for member, result in zip((b, a), await joined_generation(*pendings), strict=True):
            member.took(result)
        assert cluster.group.is_state(CR) and a.is_leader
        b_sync = b.send_sync()
        await cluster.settle()
        assert not b_sync.done
        assert b.leave() == E.NONE
        await cluster.settle()
        assert b_sync.result.error == E.UNKNOWN_MEMBER_ID
        assert cluster.group.is_state(PR)
        assert a.send_sync().result.error == E.REBALANCE_IN_PROGRESS
        a.took((await joined_generation(a.send_join()))[0])
        await sync(a)
        assert b.unanswered() == []

    run(scenario)


def test_pending_member_refused_for_group_size_no_longer_holds_the_join_phase():
    """A member id handed out (KIP-394) whose JoinGroup is then refused because the group is
    full is forgotten, as Kafka forgets it: the join phase does not wait for it to expire."""

    async def scenario() -> None:
        cluster = Cluster(max_size=2)
        a, b, late = cluster.member("a"), cluster.member("b"), cluster.member("late", session_ms=10_000)
        await stable_group(cluster, a)
        late_first = late.send_join()  # a member id while there is room
        await cluster.settle()
        assert late.took(late_first.result).error == E.MEMBER_ID_REQUIRED
        b_join = await b.join()  # b takes the last place: a rebalance
        a_join = a.send_join()
        await cluster.settle()
        assert not a_join.done and not b_join.done  # the join phase waits for the pending member id
        refused = late.send_join()
        await cluster.settle()
        assert refused.result.error == E.GROUP_MAX_SIZE_REACHED
        assert a_join.answered_at == b_join.answered_at == cluster.now  # at once, not 10 s later
        assert late.member_id not in cluster.group.pending_members

    run(scenario)


def test_sync_deadline_ends_when_every_member_has_synced():
    """Kafka's pending-sync deadline is completed by the last SyncGroup, not left to expire."""

    async def scenario() -> None:
        cluster = Cluster()
        a, b = cluster.member("a"), cluster.member("b")
        first = await a.join()
        a.took(first.result)
        assert cluster.coordinator.rebalance_purgatory.watched(sync_key(GROUP)) == 1
        await sync(a)
        assert cluster.coordinator.rebalance_purgatory.watched(sync_key(GROUP)) == 0
        b_join = await b.join()
        a_join = a.send_join()
        a.took(a_join.result if a_join.done else (await joined_generation(a_join))[0])
        b.took(b_join.result)
        b_sync = b.send_sync()
        assert cluster.coordinator.rebalance_purgatory.watched(sync_key(GROUP)) == 1  # a has not synced
        await sync(a)
        assert b_sync.result.error == E.NONE
        assert len(cluster.coordinator.rebalance_purgatory) == 0

    run(scenario)


def test_leader_stays_when_no_member_rejoined():
    """Static members keep their place when they miss a join phase (KIP-345). If no member
    rejoined at all, the phase starts over (Kafka's "could not complete rebalance") and the group
    keeps its leader; the static leader's rejoin then ends the next phase with it as leader."""

    async def scenario() -> None:
        cluster = Cluster()
        s1 = cluster.member("s1", instance="s1", session_ms=10_000)  # sessions outlast two join phases
        s2 = cluster.member("s2", instance="s2", session_ms=10_000)
        dynamic = cluster.member("d")
        await stable_group(cluster, s1, s2, dynamic)
        assert dynamic.leave() == E.NONE  # a rebalance nobody rejoins in time
        assert cluster.group.is_state(PR)
        await cluster.advance(REBALANCE_MS)
        assert cluster.group.is_state(PR) and cluster.group.leader_id == s1.member_id
        assert cluster.coordinator.rebalance_purgatory.watched(join_key(GROUP)) == 1
        s1_join = s1.send_join()
        await cluster.advance(REBALANCE_MS)
        joined = s1.took(s1_join.result)
        assert joined.leader_id == s1.member_id
        assert sorted(m for m, _, _ in joined.members) == sorted([s1.member_id, s2.member_id])

    run(scenario)


# --- the group's write and the SyncGroup answers ---------------------------------------------------
#
# The leader's SyncGroup makes the coordinator write the group to __consumer_offsets; here the write
# is held until the test completes it. Kafka answers the leader and every member waiting in SyncGroup
# in that write's callback, so no request handled after the write is answered before them.


class HeldWrites(InMemoryGroupStore):
    """Group writes complete at once, or, while ``held``, when the test completes them: a write
    in flight is its completion callback (in the metadata manager, what the append's result calls)."""

    def __init__(self) -> None:
        super().__init__()
        self.held = False
        self.in_flight: list[Callable[[E], None]] = []

    def store_group(self, group: GroupMetadata, assignments: dict[str, bytes], callback: Callable[[E], None]) -> None:
        if self.held:
            self.in_flight.append(callback)
        else:
            callback(E.NONE)

    def complete_write(self) -> None:
        [callback] = self.in_flight
        self.in_flight.clear()
        callback(E.NONE)


def assignment_of(member: Member) -> bytes:
    """What the leader assigns ``member`` (`Member.send_sync`'s assignments)."""
    return f"{member.member_id} of generation {member.generation}".encode()


def sync_group_request(member: Member) -> SyncGroupRequest:
    """``member``'s SyncGroup v5; the leader's assigns every member of its generation (the
    members its JoinGroup answer listed) what `assignment_of` says."""
    assert member.joined is not None
    assignments = [SyncGroupRequest.SyncGroupRequestAssignment(
        member_id=m, assignment=f"{m} of generation {member.generation}".encode()) for m, _, _ in member.joined.members]
    return SyncGroupRequest(group_id=GROUP, generation_id=member.generation, member_id=member.member_id,
                            protocol_type="consumer", protocol_name="range", assignments=assignments)


def api_broker(cluster: Cluster) -> Any:
    """A broker as the dispatcher and the group handlers see it: metadata initialized, every
    request authorized, and the cluster's coordinator."""
    initialized = asyncio.Event()
    initialized.set()
    return SimpleNamespace(metadata_cache=SimpleNamespace(initialized=initialized),
                           authorizer=SimpleNamespace(authorize=lambda *args: True),
                           group_coordinator=cluster.coordinator, quotas=SimpleNamespace(enabled=False))


def test_leader_and_waiting_sync_group_answers_are_done_in_the_step_the_write_completes():
    """The SyncGroup handler's futures: the follower's waits for the group's write, the leader's
    starts it. Right after the write's completion callback, before the event loop runs anything
    else, both are done with their assignments; a SyncGroup handled after that is answered at
    once (from the stored assignment). Both used to be answered through a future's done callback
    a loop turn later, so that later SyncGroup could be answered first."""

    async def scenario() -> None:
        store = HeldWrites()
        cluster = Cluster(store)
        leader, waiting, later = cluster.member("leader"), cluster.member("waiting"), cluster.member("later")
        await completing_rebalance(cluster, leader, waiting, later)
        store.held = True
        ctx = allowed_context(api_broker(cluster), 5)
        waiting_answer = sync_group.handle(ctx, sync_group_request(waiting))
        leader_answer = sync_group.handle(ctx, sync_group_request(leader))
        assert isinstance(waiting_answer, asyncio.Future) and isinstance(leader_answer, asyncio.Future)
        assert len(store.in_flight) == 1 and not waiting_answer.done() and not leader_answer.done()

        store.complete_write()
        assert leader_answer.done() and waiting_answer.done()  # no await since the write completed
        later_answer = sync_group.handle(ctx, sync_group_request(later))
        assert not isinstance(later_answer, asyncio.Future)
        for member, answer in ((leader, leader_answer.result()), (waiting, waiting_answer.result()),
                               (later, later_answer)):
            assert (answer.error_code, bytes(answer.assignment)) == (E.NONE, assignment_of(member)), member.name
        assert cluster.group.is_state(STABLE)

    run(scenario)


class RecordingTransport:
    """A connection's transport that notes, in one list shared by every connection, each reply
    written (the connection's name and the bytes)."""

    def __init__(self, name: str, written: list[tuple[str, bytes]]) -> None:
        self.name, self.written = name, written

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 9092) if name == "peername" else default

    def write(self, data: Any) -> None:
        self.written.append((self.name, bytes(data)))

    def writelines(self, chunks: list[Any]) -> None:
        for chunk in chunks:
            self.write(chunk)

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def close(self) -> None:
        pass


def receive(connection: KafkaConnection, data: bytes) -> None:
    """``data`` read from ``connection``'s socket, as the event loop hands it to the protocol."""
    buffer = connection.get_buffer(len(data))
    buffer[: len(data)] = data
    connection.buffer_updated(len(data))


def test_sync_group_replies_are_written_in_the_step_the_write_completes():
    """The same through the dispatcher and each member's own connection: when the group's write
    completes, the leader's reply and the waiting follower's are written to their connections in
    that step, so the reply to a SyncGroup read afterwards on a third connection comes after
    both. Without the hand-over, each reply waited for the dispatcher's and then the connection's
    done callback, a loop turn each."""

    async def scenario() -> None:
        store = HeldWrites()
        cluster = Cluster(store)
        leader, waiting, later = cluster.member("leader"), cluster.member("waiting"), cluster.member("later")
        await completing_rebalance(cluster, leader, waiting, later)
        store.held = True
        dispatcher = RequestDispatcher(api_broker(cluster))  # type: ignore[arg-type]
        written: list[tuple[str, bytes]] = []
        connections: dict[str, KafkaConnection] = {}
        for member in (leader, waiting, later):
            connection = connections[member.name] = KafkaConnection(dispatcher, 1 << 20)
            connection.connection_made(RecordingTransport(member.name, written))  # type: ignore[arg-type]

        def send(member: Member, correlation_id: int) -> None:
            frame = codec.encode_request(ApiKey.SYNC_GROUP, 5, correlation_id, member.name,
                                         sync_group_request(member))
            receive(connections[member.name], bytes(frame))

        send(waiting, 1)
        send(leader, 2)
        assert len(store.in_flight) == 1 and written == []
        store.complete_write()
        assert [name for name, _ in written] == ["leader", "waiting"]  # no await since the write completed
        send(later, 3)
        for _ in range(3):
            await asyncio.sleep(0)  # the futures' done callbacks find nothing more to write
        assert [name for name, _ in written] == ["leader", "waiting", "later"]
        by_name = {member.name: member for member in (leader, waiting, later)}
        for (name, frame), correlation_id in zip(written, (2, 1, 3), strict=True):
            answered_id, response = codec.decode_response(ApiKey.SYNC_GROUP, 5, memoryview(frame)[4:])
            assert answered_id == correlation_id
            assert (response.error_code, bytes(response.assignment)) == (E.NONE, assignment_of(by_name[name])), name

    run(scenario)


# --- a random walk ----------------------------------------------------------------------------------


async def random_walk(seed: int) -> None:
    """Members do random things (join, rejoin with other metadata, sync, heartbeat, leave, let
    time pass; some static, some joining without KIP-394, some twice at once); then one member
    behaves like a polling consumer while the others fall silent or only heartbeat. The group
    must end Stable with that member alone, and every request must have had its answer."""
    rnd = random.Random(seed)
    cluster = Cluster(initial_rebalance_delay_ms=rnd.choice([0, 0, 300, 3000]), max_size=rnd.choice([2, 3, 100]))
    members = [
        cluster.member(f"m{i}", session_ms=rnd.choice([500, 1000, 3000]), rebalance_ms=rnd.choice([1000, 3000, 5000]),
                       instance=f"s{i}" if rnd.random() < 0.2 else None)
        for i in range(rnd.randint(2, 4))
    ]
    joins: dict[str, Pending] = {}
    for _ in range(rnd.randint(20, 80)):
        m = rnd.choice(members)
        action = rnd.choice(["join", "join", "heartbeat", "heartbeat", "sync", "leave", "wait", "wait", "metadata"])
        if action == "join" and (m.name not in joins or rnd.random() < 0.2):
            joins[m.name] = m.send_join()
        elif action == "heartbeat" and m.member_id:
            m.heartbeat()
        elif action == "sync" and m.joined is not None and m.generation == m.joined.generation_id:
            m.send_sync()
        elif action == "leave" and m.member_id:
            m.leave()
        elif action == "metadata":
            m.metadata = subscription(rnd.choice([0, 1]))
        elif action == "wait":
            await cluster.advance(rnd.choice([10, 100, 400, 1000, 3000]))
        await cluster.settle()
        for name, pending in list(joins.items()):
            if pending.done:
                del joins[name]
                next(x for x in members if x.name == name).took(pending.answers[-1])
        group = cluster.coordinator.manager.get_group(GROUP)
        waiting_joins = cluster.coordinator.rebalance_purgatory.watched(join_key(GROUP))
        if group is not None:  # exactly one join phase while the group prepares a rebalance
            assert waiting_joins == (1 if group.is_state(PR) else 0), f"seed {seed}: {group}, {waiting_joins}"

    a, others = members[0], members[1:]
    others_heartbeat = rnd.random() < 0.6
    last_forced = -1e9
    for _ in range(1000):
        group = cluster.group
        if a.name in joins:
            pass
        elif a.generation < 0 or group.is_state(PR) or not group.has(a.member_id):
            if a.member_id and not group.has(a.member_id) and a.member_id not in group.pending_members:
                a.member_id = ""
            joins[a.name] = a.send_join()
        elif group.is_state(CR) and a.generation == group.generation_id and not any(
                k == "SyncGroup" and not p.done for k, p in a.requests):
            a.send_sync()
        elif group.is_state(STABLE) and len(group.members) > 1 and others_heartbeat and cluster.now - last_forced > 6000:
            last_forced = cluster.now  # the others only heartbeat: a rebalance must drop them
            a.metadata = subscription(0) if a.metadata != subscription(0) else subscription(1)
            joins[a.name] = a.send_join()
        elif a.heartbeat() in (E.UNKNOWN_MEMBER_ID, E.ILLEGAL_GENERATION):
            a.generation = -1
        if others_heartbeat:
            for m in others:
                if m.member_id and m.generation > 0 and m.heartbeat() in (
                        E.UNKNOWN_MEMBER_ID, E.ILLEGAL_GENERATION, E.FENCED_INSTANCE_ID):
                    m.generation = -1
        await cluster.advance(100)
        if a.name in joins and joins[a.name].done:
            a.took(joins.pop(a.name).answers[-1])
        group = cluster.group
        if group.is_state(STABLE) and list(group.members) == [a.member_id]:
            left = [(m.name, m.unanswered()) for m in others if m.unanswered()]
            assert not left, f"seed {seed}: requests never answered: {left}"
            return
    raise AssertionError(f"seed {seed}: not Stable with {a.member_id} alone after 100 s: {cluster.group} "
                         f"members {list(cluster.group.members)}")


def test_random_walks_end_stable_with_every_request_answered():
    async def scenario() -> None:
        for seed in range(300):
            await random_walk(seed)

    run(scenario)


# --- following the leadership of __consumer_offsets -------------------------------------------------
#
# Here the coordinator runs over the real GroupMetadataManager, whose __consumer_offsets partitions
# are real logs in a temporary directory. The load thread can be held at the start of each step of a
# load, so "while the partition loads" is a state the test holds, not a race it hopes to win.

PARTITIONS = 4
G_PARTITION, H_PARTITION, UNLED_GROUP = 3, 0, "y"  # "g" is in partition 3, "h" in 0, "y" in 1
T = TopicPartition("t", 0)


def offsets_tp(index: int) -> TopicPartition:
    return TopicPartition(OFFSETS_TOPIC, index)


class OffsetsTopic:
    """The replica manager as the metadata manager sees it: every ``__consumer_offsets``
    partition is a log here, and an append goes straight to it (acks=all met at once)."""

    def __init__(self, path: Path, **log_config: object) -> None:
        self.metadata_cache = SimpleNamespace(partition_count=lambda topic: PARTITIONS)
        self.logs = {i: make_log(path, f"{OFFSETS_TOPIC}-{i}", **log_config) for i in range(PARTITIONS)}

    def get_partition(self, tp: TopicPartition) -> Any:
        return SimpleNamespace(log=self.logs[tp.partition]) if tp.topic == OFFSETS_TOPIC else None

    def write(self, index: int, records: list[tuple[bytes, bytes | None]]) -> None:
        batch = _native.build_batch(records, 1_700_000_000_000)
        self.logs[index].append_as_leader(memoryview(bytearray(batch)), 0, 1_700_000_000_000)

    def append_records(self, acks: int, timeout_ms: int, entries: list[tuple[TopicPartition, memoryview]],
                       internal_topics_allowed: bool, origin: AppendOrigin) -> dict[TopicPartition, PartitionAppendResult]:
        results = {}
        for tp, records in entries:
            info = self.logs[tp.partition].append_as_leader(records, 0, 1_700_000_000_000, origin)
            results[tp] = PartitionAppendResult(base_offset=info.first_offset)
        return results


def commit(group: str, offset: int, tp: TopicPartition = T) -> tuple[bytes, bytes | None]:
    return (OffsetCommitKey(group, tp.topic, tp.partition).encode(),
            OffsetAndMetadata(offset, commit_timestamp=1_700_000_000_000).encode())


def stable_record(group: str, *member_ids: str) -> tuple[bytes, bytes]:
    """A group's metadata record as stored after a SyncGroup: generation 1, the first member leads."""
    members = [MemberRecord(m, None, m, "/127.0.0.1", REBALANCE_MS, SESSION_MS, subscription(), f"{m}'s".encode())
               for m in member_ids]
    record = GroupRecord("consumer", 1, "range", member_ids[0], 1_700_000_000_000, members)
    return GroupMetadataKey(group).encode(), record.encode()


async def until(condition: Callable[[], bool], what: str, timeout_s: float = 10) -> None:
    """Wait (really: the load thread runs meanwhile) until ``condition()``."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.001)


class GatedManager(GroupMetadataManager):
    """The real metadata manager; each step its load thread takes can be held at a gate."""

    def __init__(self, topic: OffsetsTopic) -> None:
        async def create_topic(*args: object) -> None:
            raise AssertionError("__consumer_offsets exists")

        super().__init__(topic, create_topic, num_partitions=PARTITIONS, replication_factor=1,
                         segment_bytes=1 << 20, commit_timeout_ms=5000, retention_ms=7 * 24 * 3600 * 1000)
        self.gate = threading.Event()
        self.gate.set()
        self.entered = threading.Event()
        self.steps = 0
        self.threads: set[int] = set()

    async def _off_loop(self, fn: Callable[..., Any], *args: object) -> Any:
        def step() -> Any:
            self.threads.add(threading.get_ident())
            self.entered.set()
            assert self.gate.wait(10), "the gate was never opened"
            self.steps += 1
            return fn(*args)

        return await super()._off_loop(step)

    def hold(self) -> None:
        self.gate.clear()
        self.entered.clear()

    async def held(self) -> None:
        """The load thread has started a step and waits at the gate."""
        await until(self.entered.is_set, "the load thread to reach the gate")

    async def idle(self) -> None:
        """Every load finished (or was abandoned) and the load thread has nothing left to do."""
        self.gate.set()
        await until(lambda: not self._loads, "the loads to finish")
        if self._executor is not None:
            await asyncio.get_running_loop().run_in_executor(self._executor, lambda: None)


class CoordinatorOverLogs(Cluster):
    def __init__(self, path: Path, **config: Any) -> None:
        self.topic = OffsetsTopic(path)
        self.manager = GatedManager(self.topic)
        super().__init__(self.manager, **config)

    def elect(self, index: int, epoch: int) -> None:
        self.coordinator.on_leadership_change([(offsets_tp(index), epoch)], [])

    def resign(self, index: int, epoch: int | None) -> None:
        self.coordinator.on_leadership_change([], [(offsets_tp(index), epoch)])

    async def loaded(self) -> None:
        await self.manager.idle()
        await self.settle()

    def fetch(self, group: str) -> tuple[E, dict[TopicPartition, OffsetAndMetadata]]:
        return self.coordinator.handle_fetch_offsets(group, [T])

    def status(self, group: str) -> tuple[str, int, str]:
        """Whether the partition of ``group`` is owned, loading, and what OffsetFetch answers."""
        index = self.manager.partition_for(group)
        return (index in self.manager.owned_partitions, index in self.manager.loading_partitions,
                self.fetch(group)[0].name)


def test_groups_answer_load_in_progress_until_their_partition_is_loaded(tmp_path):
    """While g's partition loads (off the event loop), every group API answers for g as Kafka's
    coordinator does: COORDINATOR_LOAD_IN_PROGRESS, except SyncGroup (REBALANCE_IN_PROGRESS, so the
    member rejoins) and Heartbeat (NONE, blindly); ListGroups lists what is loaded and says 14.
    Groups of a loaded partition are served meanwhile; those of a partition led elsewhere answer
    NOT_COORDINATOR. Once loaded, g is back with its member (whose session starts) and offsets."""

    async def scenario() -> None:
        cluster = CoordinatorOverLogs(tmp_path)
        cluster.topic.write(G_PARTITION, [stable_record(GROUP, "m-1"), commit(GROUP, 42)])
        cluster.topic.write(H_PARTITION, [commit("h", 7)])
        cluster.elect(H_PARTITION, 1)
        await cluster.loaded()
        manager, coordinator = cluster.manager, cluster.coordinator
        manager.hold()
        cluster.elect(G_PARTITION, 1)
        await manager.held()
        assert cluster.status(GROUP) == (False, True, "COORDINATOR_LOAD_IN_PROGRESS")

        joined = Pending(cluster)
        coordinator.handle_join_group(JoinRequest(GROUP, "", None, True, "c", "/h", REBALANCE_MS, SESSION_MS,
                                                  "consumer", [("range", subscription())]), joined)
        synced = Pending(cluster)
        coordinator.handle_sync_group(GROUP, 1, "m-1", None, "consumer", "range", {}, synced)
        committed = Pending(cluster)
        coordinator.handle_commit_offsets(GROUP, "m-1", None, 1, {T: OffsetAndMetadata(43)}, committed)
        assert joined.result.error == E.COORDINATOR_LOAD_IN_PROGRESS
        assert synced.result.error == E.REBALANCE_IN_PROGRESS
        assert committed.result == {T: E.COORDINATOR_LOAD_IN_PROGRESS}
        assert coordinator.handle_heartbeat(GROUP, "m-1", None, 1) == E.NONE
        assert cluster.fetch(GROUP) == (E.COORDINATOR_LOAD_IN_PROGRESS, {})
        assert coordinator.handle_fetch_offsets(GROUP, None) == (E.COORDINATOR_LOAD_IN_PROGRESS, {})
        assert coordinator.handle_describe_group(GROUP)[0] == E.COORDINATOR_LOAD_IN_PROGRESS
        assert coordinator.handle_leave_group(GROUP, [("m-1", None)]) == (E.COORDINATOR_LOAD_IN_PROGRESS, [])
        assert coordinator.handle_delete_groups([GROUP, "h"]) == {
            GROUP: E.COORDINATOR_LOAD_IN_PROGRESS, "h": E.NONE,
        }
        assert coordinator.handle_delete_offsets(GROUP, [T]) == (E.COORDINATOR_LOAD_IN_PROGRESS, {})
        assert coordinator.handle_list_groups(None) == (E.COORDINATOR_LOAD_IN_PROGRESS, [])  # h was deleted
        assert cluster.fetch(UNLED_GROUP)[0] == E.NOT_COORDINATOR
        assert cluster.topic.logs[G_PARTITION].log_end_offset == 2  # nothing was written for g

        await cluster.loaded()
        assert manager.threads and threading.get_ident() not in manager.threads  # decoded off the loop
        assert cluster.status(GROUP) == (True, False, "NONE")
        assert cluster.fetch(GROUP)[1][T].offset == 42
        error, summary = coordinator.handle_describe_group(GROUP)
        assert (error, summary.state, [m.member_id for m in summary.members]) == (E.NONE, "Stable", ["m-1"])
        assert summary.members[0].assignment == b"m-1's"
        assert coordinator.handle_list_groups(None) == (E.NONE, [(GROUP, "consumer", "Stable")])
        assert coordinator.handle_heartbeat(GROUP, "m-1", None, 1) == E.NONE
        await cluster.advance(SESSION_MS)  # no heartbeat since: the loaded member's session ends
        assert coordinator.handle_heartbeat(GROUP, "m-1", None, 1) == E.UNKNOWN_MEMBER_ID

    run(scenario)


def test_load_reads_every_segment_and_what_is_appended_while_it_runs(tmp_path):
    """The load reads the partition one segment at a time, each decoded in its own step of the
    load thread, up to the log end offset as it is at each step (as Kafka's load does)."""

    async def scenario() -> None:
        cluster = CoordinatorOverLogs(tmp_path)
        cluster.topic = OffsetsTopic(tmp_path / "small", segment_bytes=1024)
        cluster.manager.replica_manager = cluster.topic
        for i in range(100):
            cluster.topic.write(G_PARTITION, [commit(GROUP, i, TopicPartition("t", i % 10))])
        segments = len(cluster.topic.logs[G_PARTITION].segments)
        assert segments > 5
        cluster.manager.hold()
        cluster.elect(G_PARTITION, 1)
        await cluster.manager.held()
        cluster.topic.write(G_PARTITION, [commit(GROUP, 1000), (OffsetCommitKey(GROUP, "t", 9).encode(), None)])
        await cluster.loaded()
        assert cluster.manager.steps >= segments + 1  # one step per segment, then the rebuild
        offsets = cluster.coordinator.handle_fetch_offsets(GROUP, None)[1]
        assert {tp.partition: o.offset for tp, o in offsets.items()} == {
            0: 1000, **{p: 90 + p for p in range(1, 9)},
        }

    run(scenario)


def test_unloaded_group_answers_not_coordinator_and_its_waiting_members_are_told(tmp_path):
    """A and B form a group; A's JoinGroup waits in a rebalance when the partition's leadership
    moves away. A is answered NOT_COORDINATOR at once, and so is every later request for the group.
    The group is dead here: none of its deadlines acts any more (nothing is written to the log the
    broker no longer leads). Leading it again reloads the group as it was stored."""

    async def scenario() -> None:
        cluster = CoordinatorOverLogs(tmp_path)
        cluster.elect(G_PARTITION, 1)
        await cluster.loaded()
        a, b = cluster.member("a"), cluster.member("b")
        await stable_group(cluster, a, b)
        group = cluster.group
        a.metadata = subscription(0)
        a_join = a.send_join()
        assert group.is_state(PR)
        end = cluster.topic.logs[G_PARTITION].log_end_offset

        cluster.resign(G_PARTITION, 2)
        await cluster.settle()
        assert a_join.result.error == E.NOT_COORDINATOR
        assert group.is_state(GroupState.DEAD) and cluster.coordinator.manager.get_group(GROUP) is None
        assert b.heartbeat() == E.NOT_COORDINATOR
        assert cluster.status(GROUP) == (False, False, "NOT_COORDINATOR")
        await cluster.advance(2 * REBALANCE_MS)
        assert cluster.topic.logs[G_PARTITION].log_end_offset == end
        assert len(cluster.coordinator.heartbeat_purgatory) == 0

        cluster.elect(G_PARTITION, 3)
        await cluster.loaded()
        reloaded = cluster.group
        assert reloaded is not group and reloaded.is_state(STABLE)
        assert sorted(reloaded.members) == sorted([a.member_id, b.member_id])
        assert a.unanswered() == b.unanswered() == []

    run(scenario)


def test_leadership_lost_during_a_load_abandons_it(tmp_path):
    """The partition's leadership moves away while its load is in the middle of a step: the load
    is abandoned at once (NOT_COORDINATOR from then on), and what the step read is thrown away
    when it ends; the partition ends up neither owned nor loading, its groups not in the cache."""

    async def scenario() -> None:
        cluster = CoordinatorOverLogs(tmp_path)
        cluster.topic.write(G_PARTITION, [stable_record(GROUP, "m-1"), commit(GROUP, 42)])
        cluster.manager.hold()
        cluster.elect(G_PARTITION, 1)
        await cluster.manager.held()
        cluster.resign(G_PARTITION, 2)
        assert cluster.status(GROUP) == (False, False, "NOT_COORDINATOR")
        await cluster.loaded()  # the step held at the gate runs to its end
        assert cluster.manager.steps == 1
        assert cluster.status(GROUP) == (False, False, "NOT_COORDINATOR")
        assert cluster.manager.groups == {}
        assert cluster.coordinator.handle_heartbeat(GROUP, "m-1", None, 1) == E.NOT_COORDINATOR
        assert cluster.coordinator.handle_list_groups(None) == (E.NONE, [])

    run(scenario)


def test_leadership_epochs_order_loads_and_unloads(tmp_path):
    """Kafka's coordinator epoch (the partition's leader epoch): a newer leadership wins over a
    load still under way for an older one, and an election or resignation older than the newest
    seen changes nothing. A newer epoch of a leadership this broker keeps loads nothing again."""

    async def scenario() -> None:
        cluster = CoordinatorOverLogs(tmp_path)
        manager = cluster.manager
        cluster.topic.write(G_PARTITION, [commit(GROUP, 42)])
        manager.hold()
        cluster.elect(G_PARTITION, 1)
        await manager.held()
        cluster.resign(G_PARTITION, 2)
        cluster.topic.write(G_PARTITION, [commit(GROUP, 50)])  # written meanwhile by the other leader
        cluster.elect(G_PARTITION, 3)
        cluster.elect(G_PARTITION, 4)  # the same leadership, a newer epoch: the load under way goes on
        assert len(manager._loads) == 1
        assert cluster.status(GROUP) == (False, True, "COORDINATOR_LOAD_IN_PROGRESS")
        await cluster.loaded()
        assert cluster.status(GROUP) == (True, False, "NONE")
        assert cluster.fetch(GROUP)[1][T].offset == 50  # epoch 3's load; epoch 1's read was dropped
        loaded = cluster.group

        cluster.resign(G_PARTITION, 3)  # stale: ignored
        cluster.elect(G_PARTITION, 2)  # stale: ignored
        cluster.elect(G_PARTITION, 5)  # newer, still this broker: the groups stay as they are
        await cluster.loaded()
        assert cluster.group is loaded and cluster.status(GROUP) == (True, False, "NONE")

        cluster.resign(G_PARTITION, 6)
        cluster.elect(G_PARTITION, 5)  # an election older than that resignation: ignored
        await cluster.loaded()
        assert cluster.status(GROUP) == (False, False, "NOT_COORDINATOR")
        cluster.resign(G_PARTITION, None)  # a StopReplica without an epoch: still nothing to unload
        cluster.elect(G_PARTITION, 7)
        await cluster.loaded()
        assert cluster.status(GROUP) == (True, False, "NONE")

    run(scenario)


def test_group_loaded_over_capacity_rebalances(tmp_path):
    """Kafka's onGroupLoaded: a group stored with more members than group.max.size now allows
    prepares a rebalance as soon as it is loaded."""

    async def scenario() -> None:
        cluster = CoordinatorOverLogs(tmp_path, max_size=1)
        cluster.topic.write(G_PARTITION, [stable_record(GROUP, "m-1", "m-2")])
        cluster.elect(G_PARTITION, 1)
        await cluster.loaded()
        assert cluster.group.is_state(PR)

    run(scenario)


def test_shutdown_abandons_a_load_under_way(tmp_path):
    async def scenario() -> None:
        cluster = CoordinatorOverLogs(tmp_path)
        cluster.topic.write(G_PARTITION, [commit(GROUP, 42)])
        cluster.manager.hold()
        cluster.elect(G_PARTITION, 1)
        await cluster.manager.held()
        shutdown = asyncio.create_task(cluster.coordinator.shutdown())
        await asyncio.sleep(0.01)
        assert not shutdown.done()  # it waits for the load thread's step, off the event loop
        cluster.manager.gate.set()
        await asyncio.wait_for(shutdown, 10)
        assert cluster.manager.groups == {} and not cluster.manager.owned_partitions

    run(scenario)
