"""Consumer groups with real clients: confluent-kafka, aiokafka, kafka-python and kcat against the
classic group coordinator (JoinGroup/SyncGroup/Heartbeat/LeaveGroup, offsets, the admin APIs).

Most tests share one broker started with ``group.initial.rebalance.delay.ms=0`` so that groups
form as soon as their members have joined; the tests about restarts and about the initial delay
start brokers of their own. Each test uses its own topic and group.
"""

from __future__ import annotations

import asyncio
import re
import subprocess
import time
from collections.abc import Callable, Iterator

import pytest
from confluent_kafka import (
    OFFSET_INVALID,
    Consumer,
    ConsumerGroupState,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic

from tests.conftest import wait_until

BROKER_OVERRIDES = {"group.initial.rebalance.delay.ms": 0}

# Short sessions and heartbeats, so that a rebalance is noticed within a second.
FAST_GROUP = {"session.timeout.ms": 6000, "heartbeat.interval.ms": 500}


# --- helpers ------------------------------------------------------------------------------------

def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(timeout=30)


def produce(bootstrap: str, topic: str, partitions: int, per_partition: int, tag: str) -> dict[int, list[bytes]]:
    """``per_partition`` records to each partition; returns their values by partition, in offset order."""
    errors: list[object] = []
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    written: dict[int, list[bytes]] = {}
    for partition in range(partitions):
        for i in range(per_partition):
            value = f"{tag}-p{partition}-{i}".encode()
            written.setdefault(partition, []).append(value)
            producer.produce(topic, value=value, key=str(i).encode(), partition=partition,
                             on_delivery=lambda err, _msg: errors.append(err) if err else None)
        producer.poll(0)
    remaining = producer.flush(30)
    assert remaining == 0 and not errors, f"produce failed: {errors} ({remaining} unflushed)"
    return written


def flatten(by_partition: dict[int, list[bytes]]) -> list[bytes]:
    return [v for values in by_partition.values() for v in values]


# An AdminClient must outlive the futures it returns: a destroyed client never completes them.

def describe_group(bootstrap: str, group: str):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    return admin.describe_consumer_groups([group], request_timeout=10)[group].result(timeout=15)


def list_groups(bootstrap: str, states: set[ConsumerGroupState] | None = None) -> dict[str, ConsumerGroupState]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    kwargs = {"states": states} if states else {}
    result = admin.list_consumer_groups(request_timeout=10, **kwargs).result(timeout=15)
    assert not result.errors, result.errors
    return {listing.group_id: listing.state for listing in result.valid}


def delete_group(bootstrap: str, group: str) -> int | None:
    """DeleteGroups through the AdminClient: None on success, else the error code."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    try:
        admin.delete_consumer_groups([group], request_timeout=10)[group].result(timeout=15)
    except KafkaException as e:
        return e.args[0].code()
    return None


def rebalances_logged(broker, group: str) -> int:
    """How often the coordinator has started a rebalance of ``group`` (its INFO log line)."""
    return len(re.findall(rf"Preparing to rebalance group {re.escape(group)} with old generation", broker.log()))


class GroupConsumer:
    """A confluent-kafka consumer subscribed in a group, recording what it gets.

    librdkafka serves rebalance callbacks (and with them the eager protocol's rejoin) only inside
    ``poll``, so every member of a group must keep being polled while the group changes:
    ``poll_until`` polls a set of them round-robin until a condition holds.
    """

    def __init__(self, bootstrap: str, group: str, topic: str, name: str, **config: object) -> None:
        self.name = name
        self.assigned: list[list[int]] = []  # the partitions of each on_assign call
        self.revoked: list[list[int]] = []
        self.records: list[tuple[int, int, bytes]] = []  # (partition, offset, value)
        self.closed = False
        self.consumer = Consumer({
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "client.id": name,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            **FAST_GROUP,
            **config,
        })
        self.consumer.subscribe(
            [topic],
            on_assign=lambda _c, tps: self.assigned.append(sorted(tp.partition for tp in tps)),
            on_revoke=lambda _c, tps: self.revoked.append(sorted(tp.partition for tp in tps)),
        )

    def poll(self, timeout: float = 0.05) -> None:
        message = self.consumer.poll(timeout)
        if message is None:
            return
        error = message.error()
        if error is not None:
            assert error.code() == KafkaError._PARTITION_EOF, f"{self.name}: {error}"
            return
        self.records.append((message.partition(), message.offset(), message.value()))

    def partitions(self) -> list[int]:
        return sorted(tp.partition for tp in self.consumer.assignment())

    def values(self) -> list[bytes]:
        return [value for _, _, value in self.records]

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.consumer.close()


def poll_until(members: list[GroupConsumer], condition: Callable[[], object], timeout: float = 30.0,
               message: str = "") -> None:
    deadline = time.monotonic() + timeout
    while True:
        for member in members:
            if not member.closed:
                member.poll()
        if condition():
            return
        if time.monotonic() > deadline:
            state = {m.name: (m.partitions() if not m.closed else "closed", len(m.records)) for m in members}
            raise AssertionError(f"timed out after {timeout}s waiting for {message or condition}: {state}")


def balanced(members: list[GroupConsumer], partitions: int, each: int) -> bool:
    """Every member owns ``each`` partitions and together they own all of them, once."""
    owned = [m.partitions() for m in members]
    return all(len(p) == each for p in owned) and sorted(p for ps in owned for p in ps) == list(range(partitions))


@pytest.fixture
def group_consumer(broker) -> Iterator[Callable[..., GroupConsumer]]:
    """Create confluent group consumers on the shared broker; all are closed at the end."""
    created: list[GroupConsumer] = []

    def make(group: str, topic: str, name: str, bootstrap: str | None = None, **config: object) -> GroupConsumer:
        member = GroupConsumer(bootstrap or broker.bootstrap, group, topic, name, **config)
        created.append(member)
        return member

    yield make
    for member in reversed(created):
        member.close()


@pytest.fixture
def group_name(topic_name: str) -> str:
    return "g-" + topic_name[2:]


# --- confluent-kafka: a group splits a topic; a leaving member's partitions move ------------------

def start_three(group_consumer, group: str, topic: str) -> list[GroupConsumer]:
    members = [group_consumer(group, topic, f"member-{i}") for i in range(3)]
    poll_until(members, lambda: balanced(members, 6, 2), message="three members with 2 partitions each")
    return members


def test_three_confluent_consumers_split_six_partitions(broker, topic_name, group_name, group_consumer):
    create_topic(broker.bootstrap, topic_name, 6)
    members = start_three(group_consumer, group_name, topic_name)
    assert all(m.assigned[-1] == m.partitions() for m in members)

    written = flatten(produce(broker.bootstrap, topic_name, 6, 50, "a"))
    poll_until(members, lambda: sum(len(m.records) for m in members) >= len(written), message="all 300 records")
    got = [v for m in members for v in m.values()]
    assert len(got) == len(set(got)), "a record was delivered twice"
    assert sorted(got) == sorted(written)
    for member in members:  # each got exactly the records of its own partitions, in offset order
        mine = member.partitions()
        assert {p for p, _, _ in member.records} == set(mine)
        for partition in mine:
            assert [o for p, o, _ in member.records if p == partition] == list(range(50))


def test_leaving_member_hands_its_partitions_to_the_rest(broker, topic_name, group_name, group_consumer):
    create_topic(broker.bootstrap, topic_name, 6)
    members = start_three(group_consumer, group_name, topic_name)
    before = flatten(produce(broker.bootstrap, topic_name, 6, 20, "before"))
    poll_until(members, lambda: sum(len(m.records) for m in members) >= len(before), message="records before the leave")
    for member in members:
        member.consumer.commit(asynchronous=False)

    leaving, stay = members[0], members[1:]
    leaving_partitions, leaving_id = leaving.partitions(), leaving.consumer.memberid()
    revokes = [len(m.revoked) for m in stay]
    leaving.close()  # LeaveGroup: the others rebalance right away, not after a session timeout
    assert f"Member {leaving_id} is leaving group {group_name}" in broker.log()
    poll_until(stay, lambda: balanced(stay, 6, 3), timeout=15, message="the two remaining members owning 3 each")
    assert set(leaving_partitions) <= {p for m in stay for p in m.partitions()}
    assert [len(m.revoked) for m in stay] == [n + 1 for n in revokes], "the remaining members were not rebalanced"
    assert len(describe_group(broker.bootstrap, group_name).members) == 2

    consumed_before = [len(m.records) for m in stay]
    after = flatten(produce(broker.bootstrap, topic_name, 6, 20, "after"))
    poll_until(stay, lambda: sum(len(m.records) for m in stay) - sum(consumed_before) >= len(after),
               message="records after the leave")
    got_after = [v for m, n in zip(stay, consumed_before, strict=True) for v in m.values()[n:]]
    # The leaver committed, so its partitions resume after what it consumed: no record repeats.
    assert sorted(got_after) == sorted(after)


@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
def test_member_that_stops_polling_in_a_rebalance_does_not_hold_up_the_others(start_broker, topic_name, group_name,
                                                                            strategy):
    """b's application stops polling just as c joins. librdkafka hands b the rebalance's
    revocation only inside poll, so b never completes the rebalance (eager: it never rejoins;
    cooperative: it rejoins once, then never gives up the partitions the next assignment takes
    away), while its background thread goes on heartbeating. Once max.poll.interval.ms (the
    rebalance timeout librdkafka sends) has passed, b is out of the group (dropped by the
    coordinator at the rebalance timeout, or by its own LeaveGroup when librdkafka sees the poll
    interval pass, whichever comes first) and a and c share the partitions."""
    own = start_broker(**{"group.initial.rebalance.delay.ms": 0, "group.min.session.timeout.ms": 500})
    create_topic(own.bootstrap, topic_name, 4)
    config = {"session.timeout.ms": 1000, "heartbeat.interval.ms": 200, "max.poll.interval.ms": 3000,
              "partition.assignment.strategy": strategy, "log_level": 2}  # quiet about b's poll interval
    members: list[GroupConsumer] = []
    try:
        a, b = (GroupConsumer(own.bootstrap, group_name, topic_name, name, **config) for name in ("a", "b"))
        members += [a, b]
        poll_until([a, b], lambda: balanced([a, b], 4, 2), timeout=15, message="a and b with 2 partitions each")
        b_id = b.consumer.memberid()
        c = GroupConsumer(own.bootstrap, group_name, topic_name, "c", **config)  # b stops polling now
        members.append(c)
        started = time.monotonic()
        poll_until([a, c], lambda: balanced([a, c], 4, 2), timeout=15, message="a and c with 2 partitions each")
        assert time.monotonic() - started < 3 + 6  # the rebalance timeout, then a second rebalance at most
        described = describe_group(own.bootstrap, group_name)
        assert b_id not in {m.member_id for m in described.members} and len(described.members) == 2
    finally:
        for member in reversed(members):
            member.close()


# --- committed offsets survive a broker restart -------------------------------------------------

@pytest.mark.parametrize("stop", ["clean", "kill-9"])
def test_committed_offsets_survive_broker_restart(start_broker, topic_name, group_name, stop):
    broker = start_broker(**{"group.initial.rebalance.delay.ms": 0})
    create_topic(broker.bootstrap, topic_name, 3)
    written = produce(broker.bootstrap, topic_name, 3, 30, "r")
    commit_at = {0: 10, 1: 17, 2: 30}  # partition 2 fully consumed

    first = GroupConsumer(broker.bootstrap, group_name, topic_name, "before-restart")
    try:
        poll_until([first], lambda: len(first.records) >= 90, message="all records before the restart")
        first.consumer.commit(offsets=[TopicPartition(topic_name, p, o) for p, o in commit_at.items()],
                              asynchronous=False)
    finally:
        first.close()

    if stop == "clean":
        assert broker.stop() == 0
    else:
        broker.kill()
    broker.start()

    second = GroupConsumer(broker.bootstrap, group_name, topic_name, "after-restart")
    try:
        committed = second.consumer.committed([TopicPartition(topic_name, p) for p in range(3)], timeout=15)
        assert {tp.partition: tp.offset for tp in committed} == commit_at
        expected = sum(30 - o for o in commit_at.values())
        poll_until([second], lambda: len(second.records) >= expected, message="the records after the commits")
        assert second.partitions() == [0, 1, 2]
        for partition, offset in commit_at.items():
            offsets = [o for p, o, _ in second.records if p == partition]
            assert offsets == list(range(offset, 30)), f"partition {partition}"
            assert [v for p, _, v in second.records if p == partition] == written[partition][offset:]
        assert len(second.records) == expected
    finally:
        second.close()


@pytest.mark.parametrize("stop", ["clean", "kill-9"])
def test_live_member_keeps_its_membership_across_broker_restart(start_broker, topic_name, group_name, stop):
    """The coordinator reloads the stable group (members, generation, assignment) from
    ``__consumer_offsets``, so a member that only lost its connection carries on: no rejoin."""
    broker = start_broker(**{"group.initial.rebalance.delay.ms": 0})
    create_topic(broker.bootstrap, topic_name, 2)
    produce(broker.bootstrap, topic_name, 2, 5, "a")
    member = GroupConsumer(broker.bootstrap, group_name, topic_name, "live", log_level=2)  # quiet reconnects
    try:
        poll_until([member], lambda: len(member.records) >= 10, message="the records before the restart")
        member.consumer.commit(asynchronous=False)
        member_id = member.consumer.memberid()

        if stop == "clean":
            assert broker.stop() == 0
        else:
            broker.kill()
        broker.start()

        after = produce(broker.bootstrap, topic_name, 2, 5, "b")
        poll_until([member], lambda: len(member.records) >= 20, message="the records after the restart")
        assert sorted(member.values()[10:]) == sorted(flatten(after))
        member.consumer.commit(asynchronous=False)  # still a member of the current generation
        committed = member.consumer.committed([TopicPartition(topic_name, p) for p in range(2)], timeout=15)
        assert [tp.offset for tp in committed] == [10, 10]
        assert member.consumer.memberid() == member_id
        assert (member.assigned, member.revoked) == ([[0, 1]], [])
        assert rebalances_logged(broker, group_name) == 1
        [described] = describe_group(broker.bootstrap, group_name).members
        assert described.member_id == member_id
    finally:
        member.close()


# --- aiokafka and kafka-python group consumers ---------------------------------------------------

def test_aiokafka_group_consumer_commits_and_a_successor_resumes(broker, topic_name, group_name):
    from aiokafka import AIOKafkaConsumer
    from aiokafka import TopicPartition as AioTP

    create_topic(broker.bootstrap, topic_name, 2)
    first_batch = produce(broker.bootstrap, topic_name, 2, 15, "aio1")
    tps = [AioTP(topic_name, p) for p in range(2)]

    async def consume(expected: int) -> tuple[list[tuple[int, int, bytes]], dict[int, int | None]]:
        consumer = AIOKafkaConsumer(
            bootstrap_servers=broker.bootstrap, group_id=group_name, enable_auto_commit=False,
            auto_offset_reset="earliest", session_timeout_ms=6000, heartbeat_interval_ms=500,
        )
        await consumer.start()
        try:
            consumer.subscribe([topic_name])
            got: list[tuple[int, int, bytes]] = []
            deadline = time.monotonic() + 30
            while len(got) < expected and time.monotonic() < deadline:
                batches = await consumer.getmany(timeout_ms=500)
                for tp, messages in batches.items():
                    got += [(tp.partition, m.offset, m.value) for m in messages]
            assert len(got) == expected, f"got {len(got)} of {expected} records"
            assert sorted(consumer.assignment()) == sorted(tps)
            await consumer.commit()
            committed = {tp.partition: await consumer.committed(tp) for tp in tps}
            return got, committed
        finally:
            await consumer.stop()

    got, committed = asyncio.run(consume(30))
    assert sorted(v for _, _, v in got) == sorted(flatten(first_batch))
    assert committed == {0: 15, 1: 15}

    second_batch = produce(broker.bootstrap, topic_name, 2, 5, "aio2")
    got, committed = asyncio.run(consume(10))
    assert sorted(v for _, _, v in got) == sorted(flatten(second_batch))
    assert sorted((p, o) for p, o, _ in got) == [(p, o) for p in range(2) for o in range(15, 20)]
    assert committed == {0: 20, 1: 20}


def test_kafka_python_group_consumer_commits_and_a_successor_resumes(broker, topic_name, group_name):
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KpTP

    create_topic(broker.bootstrap, topic_name, 2)
    first_batch = produce(broker.bootstrap, topic_name, 2, 15, "kp1")
    tps = [KpTP(topic_name, p) for p in range(2)]

    def consume(expected: int) -> tuple[list[tuple[int, int, bytes]], dict[int, int | None]]:
        consumer = KafkaConsumer(
            bootstrap_servers=broker.bootstrap, group_id=group_name, enable_auto_commit=False,
            auto_offset_reset="earliest", session_timeout_ms=6000, heartbeat_interval_ms=500,
        )
        try:
            consumer.subscribe([topic_name])
            got: list[tuple[int, int, bytes]] = []
            deadline = time.monotonic() + 30
            while len(got) < expected and time.monotonic() < deadline:
                for tp, messages in consumer.poll(timeout_ms=500).items():
                    got += [(tp.partition, m.offset, m.value) for m in messages]
            assert len(got) == expected, f"got {len(got)} of {expected} records"
            assert sorted(consumer.assignment()) == sorted(tps)
            consumer.commit()
            return got, {tp.partition: consumer.committed(tp) for tp in tps}
        finally:
            consumer.close()

    got, committed = consume(30)
    assert sorted(v for _, _, v in got) == sorted(flatten(first_batch))
    assert committed == {0: 15, 1: 15}

    second_batch = produce(broker.bootstrap, topic_name, 2, 5, "kp2")
    got, committed = consume(10)
    assert sorted(v for _, _, v in got) == sorted(flatten(second_batch))
    assert sorted((p, o) for p, o, _ in got) == [(p, o) for p in range(2) for o in range(15, 20)]
    assert committed == {0: 20, 1: 20}


# --- kcat's balanced consumer -------------------------------------------------------------------

def run_kcat_group(bootstrap: str, group: str, topic: str, count: int, timeout: float = 30.0) -> list[bytes]:
    """``kcat -G`` until ``count`` messages (old kcat has no -e in -G mode); killed if it overruns."""
    proc = subprocess.Popen(
        ["kcat", "-b", bootstrap, "-G", group, "-c", str(count), "-f", "%p\t%o\t%s\n",
         "-X", "auto.offset.reset=earliest", "-X", "session.timeout.ms=6000", topic],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(f"kcat -G did not get {count} messages in {timeout}s; got:\n{out!r}\n{err!r}") from None
    assert proc.returncode == 0, err.decode(errors="replace")
    return out.splitlines()


def test_kcat_balanced_consumer(broker, topic_name, group_name):
    create_topic(broker.bootstrap, topic_name, 3)
    first = produce(broker.bootstrap, topic_name, 3, 10, "kc1")
    lines = run_kcat_group(broker.bootstrap, group_name, topic_name, 30)
    assert sorted(line.split(b"\t", 2)[2] for line in lines) == sorted(flatten(first))

    # kcat commits what it consumed (auto commit, and on close): the next run starts after it.
    second = produce(broker.bootstrap, topic_name, 3, 4, "kc2")
    lines = run_kcat_group(broker.bootstrap, group_name, topic_name, 12)
    assert sorted(line.split(b"\t", 2)[2] for line in lines) == sorted(flatten(second))
    assert sorted(int(line.split(b"\t")[1]) for line in lines) == sorted(list(range(10, 14)) * 3)


# --- static membership --------------------------------------------------------------------------

def test_static_member_restart_gets_its_assignment_back_without_rebalance(broker, topic_name, group_name,
                                                                         group_consumer):
    create_topic(broker.bootstrap, topic_name, 4)
    static_config = {"group.instance.id": "static-a", "session.timeout.ms": 20000}
    static = group_consumer(group_name, topic_name, "static-a", **static_config)
    dynamic = group_consumer(group_name, topic_name, "dynamic-b")
    poll_until([static, dynamic], lambda: balanced([static, dynamic], 4, 2), message="two members with 2 each")
    static_partitions, dynamic_partitions = static.partitions(), dynamic.partitions()
    dynamic_assigns, dynamic_revokes = len(dynamic.assigned), len(dynamic.revoked)
    rebalances = rebalances_logged(broker, group_name)

    static.close()  # a static member sends no LeaveGroup: it stays in the group for its session
    described = describe_group(broker.bootstrap, group_name)
    assert described.state == ConsumerGroupState.STABLE
    assert sorted(m.client_id for m in described.members) == ["dynamic-b", "static-a"]
    [old_member_id] = [m.member_id for m in described.members if m.group_instance_id == "static-a"]

    restarted = group_consumer(group_name, topic_name, "static-a", **static_config)
    poll_until([restarted, dynamic], lambda: restarted.partitions() == static_partitions, timeout=15,
               message="the restarted static member owning its old partitions")
    written = produce(broker.bootstrap, topic_name, 4, 5, "s")
    poll_until([restarted, dynamic], lambda: len(restarted.records) + len(dynamic.records) >= 20,
               message="records for both members")

    assert restarted.assigned == [static_partitions]
    assert dynamic.partitions() == dynamic_partitions
    assert (len(dynamic.assigned), len(dynamic.revoked)) == (dynamic_assigns, dynamic_revokes), "the group rebalanced"
    assert rebalances_logged(broker, group_name) == rebalances
    assert sorted(restarted.values()) == sorted(v for p in static_partitions for v in written[p])
    assert sorted(dynamic.values()) == sorted(v for p in dynamic_partitions for v in written[p])
    described = describe_group(broker.bootstrap, group_name)
    assert described.state == ConsumerGroupState.STABLE
    assert len(described.members) == 2
    [static_member] = [m for m in described.members if m.group_instance_id == "static-a"]
    assert static_member.member_id != old_member_id  # the same instance under a new member id
    assert sorted(tp.partition for tp in static_member.assignment.topic_partitions) == static_partitions


# --- listing, describing and deleting groups ------------------------------------------------------

def test_list_describe_delete_groups_with_admin_client(broker, topic_name, group_name, group_consumer):
    create_topic(broker.bootstrap, topic_name, 2)
    produce(broker.bootstrap, topic_name, 2, 5, "adm")
    member = group_consumer(group_name, topic_name, "admin-probe")
    poll_until([member], lambda: len(member.records) >= 10, message="the records")
    member.consumer.commit(asynchronous=False)

    assert list_groups(broker.bootstrap).get(group_name) == ConsumerGroupState.STABLE
    assert group_name in list_groups(broker.bootstrap, {ConsumerGroupState.STABLE})
    assert group_name not in list_groups(broker.bootstrap, {ConsumerGroupState.EMPTY})

    described = describe_group(broker.bootstrap, group_name)
    assert described.group_id == group_name
    assert described.state == ConsumerGroupState.STABLE
    assert not described.is_simple_consumer_group
    assert described.partition_assignor == "range"
    assert described.coordinator.port == broker.port
    [only] = described.members
    assert only.client_id == "admin-probe"
    assert only.member_id.startswith("admin-probe-")
    assert only.host.lstrip("/") == "127.0.0.1"
    assert sorted((tp.topic, tp.partition) for tp in only.assignment.topic_partitions) == [
        (topic_name, 0), (topic_name, 1)]

    assert delete_group(broker.bootstrap, group_name) == KafkaError.NON_EMPTY_GROUP

    member.close()  # LeaveGroup: the group is empty but keeps its offsets
    wait_until(lambda: list_groups(broker.bootstrap).get(group_name) == ConsumerGroupState.EMPTY,
               message="the group to be listed Empty")
    assert delete_group(broker.bootstrap, group_name) is None
    assert group_name not in list_groups(broker.bootstrap)
    assert describe_group(broker.bootstrap, group_name).state == ConsumerGroupState.DEAD

    probe = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group_name, "enable.auto.commit": False})
    try:
        committed = probe.committed([TopicPartition(topic_name, p) for p in range(2)], timeout=15)
    finally:
        probe.close()
    assert [tp.offset for tp in committed] == [OFFSET_INVALID, OFFSET_INVALID]
    assert delete_group(broker.bootstrap, group_name) == KafkaError.GROUP_ID_NOT_FOUND


# --- the initial rebalance delay ---------------------------------------------------------------

def test_initial_rebalance_delay_holds_back_the_first_assignment(start_broker, topic_name, group_name):
    """The first record comes no sooner than the delay after subscribing (a bound that holds on any
    machine); how much later it comes is measured in bench/group_rebalance.py (scenario first)."""
    broker = start_broker(**{"group.initial.rebalance.delay.ms": 3000})  # Kafka's built-in default
    create_topic(broker.bootstrap, topic_name, 1)
    produce(broker.bootstrap, topic_name, 1, 3, "d")
    started = time.monotonic()  # before the member's JoinGroup starts the delay
    member = GroupConsumer(broker.bootstrap, group_name, topic_name, "delayed")
    try:
        poll_until([member], lambda: member.records, timeout=15, message="the first record")
        elapsed = time.monotonic() - started
    finally:
        member.close()
    assert elapsed >= 3.0, f"first record after {elapsed:.2f}s, before the 3 s delay"
