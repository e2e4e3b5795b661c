"""``pybroker consumer-groups`` (like kafka-consumer-groups.sh) and the Admin group calls behind it.

Groups are made by confluent-kafka consumers (subscribe, commit, close); what the CLI reports and
changes is checked against what confluent-kafka's AdminClient and consumers see.
"""

from __future__ import annotations

import asyncio
import re
import subprocess
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta, timezone

import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from pybroker.client.admin import Admin, AdminError, CommittedOffset
from pybroker.client.node import Node
from pybroker.common.errors import ErrorCode
from pybroker.protocol import consumer_protocol
from pybroker.types import TopicPartition
from tests.integration.test_cli import failed, ok, pybroker

# Groups form at once instead of after Kafka's default 3 s initial rebalance delay.
BROKER_OVERRIDES = {"group.initial.rebalance.delay.ms": 0}

CLIENT_ID = "cg-test-client"
OFFSETS_HEADER = ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID"]
MEMBERS_HEADER = ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"]
RESET_HEADER = ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"]


# --- helpers -------------------------------------------------------------------------------------

@pytest.fixture
def group(topic_name: str) -> str:
    return "g" + topic_name[1:]


@pytest.fixture(scope="module")
def kafka_admin(broker) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def consumer_groups(broker, *args: str) -> subprocess.CompletedProcess[str]:
    return pybroker("consumer-groups", "--bootstrap-server", broker.bootstrap, *args)


def run_all(broker, cases: list[tuple[str, ...]]) -> list[subprocess.CompletedProcess[str]]:
    """Run independent CLI invocations side by side."""
    with ThreadPoolExecutor(len(cases)) as pool:
        return list(pool.map(lambda args: consumer_groups(broker, *args), cases))


def table(out: str) -> tuple[list[str], list[list[str]]]:
    """Kafka's layout: a blank line, a header, rows; columns separated by runs of spaces."""
    assert out.startswith("\n"), repr(out)
    header, *rows = [line.split() for line in out.strip("\n").splitlines()]
    assert all(len(row) == len(header) for row in rows), out
    return header, rows


def fixed_table(out: str) -> list[list[str]]:
    """Rows of a table whose values may hold spaces, cut at the header's column starts."""
    assert out.startswith("\n"), repr(out)
    header, *rows = out.strip("\n").splitlines()
    starts = [m.start() for m in re.finditer(r"\S+", header)]
    bounds = list(zip(starts, [*starts[1:], None], strict=True))
    return [[row[a:b].strip() for a, b in bounds] for row in rows]


def create_topic(kafka_admin: AdminClient, name: str, partitions: int) -> None:
    kafka_admin.create_topics([NewTopic(name, partitions)])[name].result(30)


def produce(broker, topic: str, count: int, partition: int = 0, timestamps: list[int] | None = None) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    errors: list[object] = []
    for i in range(count):
        producer.produce(topic, value=b"v%d" % i, partition=partition, timestamp=timestamps[i] if timestamps else 0,
                         on_delivery=lambda err, _msg: errors.append(err) if err else None)
    assert producer.flush(30) == 0 and not errors, errors


def new_consumer(broker, group: str, **config: object) -> Consumer:
    return Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "client.id": CLIENT_ID,
                     "enable.auto.commit": False, "auto.offset.reset": "earliest", **config})


@contextmanager
def group_member(broker, group: str, topics: list[str], timeout: float = 30.0) -> Iterator[Consumer]:
    """A consumer subscribed to ``topics`` that has got its assignment (the group is Stable)."""
    consumer = new_consumer(broker, group)
    try:
        consumer.subscribe(topics)
        deadline = time.monotonic() + timeout
        while not consumer.assignment():
            assert time.monotonic() < deadline, f"no assignment in group {group} within {timeout}s"
            consumer.poll(0.1)
        yield consumer
    finally:
        consumer.close()


def commit(consumer: Consumer, offsets: dict[tuple[str, int], int]) -> None:
    committed = consumer.commit(offsets=[KafkaTopicPartition(t, p, o) for (t, p), o in offsets.items()], asynchronous=False)
    assert all(tp.error is None for tp in committed), committed


def commit_and_leave(broker, group: str, topics: list[str], offsets: dict[tuple[str, int], int]) -> None:
    """Join ``group``, commit ``offsets`` as its member, close: the group is left Empty with them."""
    with group_member(broker, group, topics) as consumer:
        commit(consumer, offsets)


def first_offset(broker, group: str, topic: str, timeout: float = 30.0) -> int:
    """Where a new member of ``group`` starts reading ``topic`` (partition 0)."""
    consumer = new_consumer(broker, group)
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            message = consumer.poll(0.1)
            if message is not None and message.error() is None:
                return message.offset()
        raise AssertionError(f"no record for group {group} within {timeout}s")
    finally:
        consumer.close()


def kafka_committed(kafka_admin: AdminClient, group: str) -> dict[tuple[str, int], int]:
    """The group's committed offsets as confluent-kafka's AdminClient reads them."""
    request = [ConsumerGroupTopicPartitions(group)]
    result = kafka_admin.list_consumer_group_offsets(request)[group].result(30)
    return {(tp.topic, tp.partition): tp.offset for tp in result.topic_partitions if tp.offset >= 0}


def iso(ms: int, tz: timezone = UTC) -> str:
    """A time the way --to-datetime takes it (``YYYY-MM-DDTHH:mm:SS.sss`` + zone unless UTC)."""
    moment = datetime.fromtimestamp(ms / 1000, tz)
    text = moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}"
    return text if tz is UTC else text + moment.strftime("%z")[:3] + ":" + moment.strftime("%z")[3:]


# --- list and describe ---------------------------------------------------------------------------

def test_list_describe_lag_and_members(broker, kafka_admin, topic_name, group):
    create_topic(kafka_admin, topic_name, 2)
    produce(broker, topic_name, 10, partition=0)
    produce(broker, topic_name, 3, partition=1)

    with group_member(broker, group, [topic_name]) as consumer:
        commit(consumer, {(topic_name, 0): 6})  # partition 1: nothing committed
        member = consumer.memberid()
        (offsets, members, verbose, state, listed, stable, empty) = run_all(broker, [
            ("--describe", "--group", group),
            ("--describe", "--group", group, "--members"),
            ("--describe", "--group", group, "--members", "--verbose"),
            ("--describe", "--group", group, "--state"),
            ("--list",),
            ("--list", "--state", "stable"),
            ("--list", "--state", "Empty,Dead"),
        ])
        assert offsets.stderr == "" and members.stderr == ""
        assert table(ok(offsets)) == (OFFSETS_HEADER, [
            [group, topic_name, "0", "6", "10", "4", member, "/127.0.0.1", CLIENT_ID],
            [group, topic_name, "1", "-", "3", "-", member, "/127.0.0.1", CLIENT_ID],
        ])
        assert table(ok(members)) == (MEMBERS_HEADER, [[group, member, "/127.0.0.1", CLIENT_ID, "2"]])
        assert table(ok(verbose)) == ([*MEMBERS_HEADER, "ASSIGNMENT"],
                                      [[group, member, "/127.0.0.1", CLIENT_ID, "2", f"{topic_name}(0,1)"]])
        state_lines = ok(state).splitlines()
        assert state_lines[0] == "" and state_lines[1].split() == ["GROUP", "COORDINATOR", "(ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"]
        assert re.fullmatch(rf"{group} +127\.0\.0\.1:{broker.port} \(1\) +range +Stable +1", state_lines[2]), state_lines[2]
        assert group in ok(listed).splitlines()
        assert [group, "Stable"] in [line.split() for line in ok(stable).splitlines()]
        assert ok(stable).splitlines()[0].split() == ["GROUP", "STATE"]
        assert group not in ok(empty)

    # The consumer left: the group is Empty and keeps its offsets.
    (offsets, members, state, listed, empty, every) = run_all(broker, [
        ("--describe", "--group", group),
        ("--describe", "--group", group, "--members"),
        ("--describe", "--group", group, "--state"),
        ("--list",),
        ("--list", "--state", "Empty"),
        ("--describe", "--all-groups"),
    ])
    no_members = f"Consumer group '{group}' has no active members.\n"
    assert offsets.stderr == no_members
    assert table(ok(offsets)) == (OFFSETS_HEADER, [[group, topic_name, "0", "6", "10", "4", "-", "-", "-"]])
    assert ok(members) == "" and members.stderr == no_members  # no members, no table (as in Kafka)
    assert state.stderr == no_members
    assert re.fullmatch(rf"{group} +127\.0\.0\.1:{broker.port} \(1\) +Empty +0", ok(state).splitlines()[2])
    assert group in ok(listed).splitlines()
    assert [group, "Empty"] in [line.split() for line in ok(empty).splitlines()]
    assert f"{group} {topic_name} 0 6 10 4 - - -" in [" ".join(line.split()) for line in ok(every).splitlines()]
    assert no_members in every.stderr


def test_active_group_refuses_reset_delete_and_offset_delete(broker, kafka_admin, topic_name, group):
    create_topic(kafka_admin, topic_name, 1)
    produce(broker, topic_name, 5)
    with group_member(broker, group, [topic_name]) as consumer:
        commit(consumer, {(topic_name, 0): 4})
        (reset, dry_reset, delete, delete_offsets) = run_all(broker, [
            ("--reset-offsets", "--group", group, "--topic", topic_name, "--to-earliest", "--execute"),
            ("--reset-offsets", "--group", group, "--all-topics", "--to-offset", "1", "--dry-run"),
            ("--delete", "--group", group),
            ("--delete-offsets", "--group", group, "--topic", topic_name),
        ])
        refusal = f"Error: Assignments can only be reset if the group '{group}' is inactive, but the current state is Stable."
        assert failed(reset) == refusal
        assert failed(dry_reset) == refusal
        failed(delete, f"'{group}'", "NON_EMPTY_GROUP")
        assert delete_offsets.returncode == 1 and len(delete_offsets.stderr.splitlines()) == 1, delete_offsets.stderr
        assert fixed_table(delete_offsets.stdout) == [
            [topic_name, "0", f"Error: {ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC.message}"],
        ]
        assert kafka_committed(kafka_admin, group) == {(topic_name, 0): 4}  # nothing changed
        assert ok(consumer_groups(broker, "--describe", "--group", group, "--members")).count(consumer.memberid()) == 1


# --- reset offsets -------------------------------------------------------------------------------

def test_reset_offsets_dry_run_and_execute(broker, kafka_admin, topic_name, group):
    create_topic(kafka_admin, topic_name, 1)
    base = (int(time.time()) - 3600) * 1000  # record i has timestamp base + i s
    produce(broker, topic_name, 10, timestamps=[base + i * 1000 for i in range(10)])
    commit_and_leave(broker, group, [topic_name], {(topic_name, 0): 6})

    def reset(*args: str) -> subprocess.CompletedProcess[str]:
        return consumer_groups(broker, "--reset-offsets", "--group", group, *args)

    def plan(result: subprocess.CompletedProcess[str]) -> int:
        header, rows = table(ok(result))
        assert header == RESET_HEADER and len(rows) == 1 and rows[0][:3] == [group, topic_name, "0"], result.stdout
        return int(rows[0][3])

    scope = ("--topic", topic_name)
    plus_one = timezone(timedelta(hours=1))
    dry_runs = [  # (arguments, the planned offset, a fragment of stderr or "")
        ((*scope, "--to-earliest"), 0, "No action will be performed as the --execute option is missing"),
        ((*scope, "--to-latest", "--dry-run"), 10, ""),
        ((*scope, "--to-current", "--dry-run"), 6, ""),
        ((*scope, "--to-offset", "3", "--dry-run"), 3, ""),
        ((*scope, "--to-offset", "0", "--dry-run"), 0, ""),
        ((*scope, "--shift-by", "0", "--dry-run"), 6, ""),
        ((*scope, "--to-offset", "42", "--dry-run"), 10, f"New offset (42) is higher than latest offset for topic partition {topic_name}-0"),
        ((*scope, "--shift-by", "2", "--dry-run"), 8, ""),
        ((*scope, "--shift-by", "-100", "--dry-run"), 0, f"New offset (-94) is lower than earliest offset for topic partition {topic_name}-0"),
        ((*scope, "--to-datetime", iso(base + 4000), "--dry-run"), 4, ""),
        ((*scope, "--to-datetime", iso(base + 4500, plus_one), "--dry-run"), 5, ""),
        ((*scope, "--to-datetime", "2999-01-01T00:00:00.000", "--dry-run"), 10, f"Partition 0 from topic {topic_name} is empty. Falling back to latest"),
        ((*scope, "--by-duration", "PT2H", "--dry-run"), 0, ""),
        ((*scope, "--by-duration", "PT1S", "--dry-run"), 10, "Falling back to latest known offset"),
        (("--topic", f"{topic_name}:0", "--to-offset", "7", "--dry-run"), 7, ""),
        (("--all-topics", "--to-offset", "2", "--dry-run"), 2, ""),
    ]
    with ThreadPoolExecutor(len(dry_runs)) as pool:
        results = list(pool.map(lambda case: reset(*case[0]), dry_runs))
    for (args, expected, note), result in zip(dry_runs, results, strict=True):
        assert plan(result) == expected, args
        assert (note in result.stderr) if note else result.stderr == "", (args, result.stderr)
    assert kafka_committed(kafka_admin, group) == {(topic_name, 0): 6}  # dry runs changed nothing

    executed = [  # applied in turn: (arguments, the new committed offset)
        ((*scope, "--to-offset", "3"), 3),
        ((*scope, "--shift-by", "2"), 5),
        ((*scope, "--to-latest"), 10),
        ((*scope, "--to-earliest"), 0),
        ((*scope, "--to-datetime", iso(base + 4000)), 4),
    ]
    for args, expected in executed:
        assert plan(reset(*args, "--execute")) == expected, args
        assert kafka_committed(kafka_admin, group) == {(topic_name, 0): expected}, args
    _, rows = table(ok(consumer_groups(broker, "--describe", "--group", group)))
    assert rows == [[group, topic_name, "0", "4", "10", "6", "-", "-", "-"]]
    assert first_offset(broker, group, topic_name) == 4  # a new member starts where the reset put the group

    assert plan(reset(*scope, "--shift-by", "3", "--execute")) == 7
    assert first_offset(broker, group, topic_name) == 7


def test_reset_offsets_of_a_new_group_creates_it(broker, kafka_admin, topic_name, group):
    create_topic(kafka_admin, topic_name, 2)
    produce(broker, topic_name, 4, partition=1)
    out = ok(consumer_groups(broker, "--reset-offsets", "--group", group, "--topic", topic_name, "--to-latest", "--execute"))
    assert table(out) == (RESET_HEADER, [[group, topic_name, "0", "0"], [group, topic_name, "1", "4"]])
    assert kafka_committed(kafka_admin, group) == {(topic_name, 0): 0, (topic_name, 1): 4}
    assert group in ok(consumer_groups(broker, "--list")).splitlines()


# --- delete --------------------------------------------------------------------------------------

def test_delete_group(broker, kafka_admin, topic_name, group):
    create_topic(kafka_admin, topic_name, 1)
    produce(broker, topic_name, 3)
    commit_and_leave(broker, group, [topic_name], {(topic_name, 0): 2})

    assert ok(consumer_groups(broker, "--delete", "--group", group)) == \
        f"Deletion of requested consumer groups ('{group}') was successful.\n"
    (listed, described, again) = run_all(broker, [
        ("--list",), ("--describe", "--group", group), ("--delete", "--group", group),
    ])
    assert group not in ok(listed).splitlines()
    assert failed(described) == f"Error: Consumer group '{group}' does not exist."
    failed(again, f"Group '{group}' could not be deleted", "GROUP_ID_NOT_FOUND")
    assert kafka_committed(kafka_admin, group) == {}
    assert first_offset(broker, group, topic_name) == 0  # auto.offset.reset: nothing committed any more


def test_delete_offsets(broker, kafka_admin, topic_name, group):
    other = topic_name + "-b"
    create_topic(kafka_admin, topic_name, 2)
    create_topic(kafka_admin, other, 1)
    commit_and_leave(broker, group, [topic_name, other], {(topic_name, 0): 0, (topic_name, 1): 0, (other, 0): 0})

    out = ok(consumer_groups(broker, "--delete-offsets", "--group", group, "--topic", topic_name))
    first, rest = out.split("\n", 1)
    assert first == f"Request succeed for deleting offsets with topic {topic_name} group {group}"
    assert table(rest) == (["TOPIC", "PARTITION", "STATUS"], [[topic_name, "0", "Successful"], [topic_name, "1", "Successful"]])
    assert kafka_committed(kafka_admin, group) == {(other, 0): 0}

    missing = topic_name + "-missing"
    partial = consumer_groups(broker, "--delete-offsets", "--group", group, "--topic", f"{other}:0", "--topic", missing)
    assert partial.returncode == 1 and len(partial.stderr.splitlines()) == 1, partial.stderr
    assert fixed_table(partial.stdout) == [  # sorted by topic, as Kafka prints them
        [other, "0", "Successful"],
        [missing, "Not Provided", f"Error: {ErrorCode.UNKNOWN_TOPIC_OR_PARTITION.message}"],
    ]
    assert kafka_committed(kafka_admin, group) == {}
    # With no members and no offsets left the group is gone, as in Kafka.
    assert failed(consumer_groups(broker, "--delete-offsets", "--group", group, "--topic", other)) == f"Error: '{group}' does not exist."


# --- usage ---------------------------------------------------------------------------------------

def test_usage_and_connection_errors(broker):
    cases = [  # (arguments, fragments of the one error line)
        ((), ("exactly one action",)),
        (("--list", "--describe"), ("exactly one action",)),
        (("--describe",), ("--all-groups, --group",)),
        (("--describe", "--group", "g", "--all-groups"), ("--all-groups, --group",)),
        (("--describe", "--group", "g", "--members", "--state"), ("at most one",)),
        (("--describe", "--group", "g", "--verbose"), ("--verbose",)),
        (("--describe", "--group", "g", "--topic", "t"), ("--topic", "--describe")),
        (("--list", "--group", "g"), ("--group", "--list")),
        (("--list", "--state", "Sleeping"), ("Invalid state list 'Sleeping'", "Stable")),
        (("--delete-offsets", "--group", "g"), ("--topic",)),
        (("--reset-offsets", "--group", "g", "--to-earliest"), ("--all-topics, --topic",)),
        (("--reset-offsets", "--group", "g", "--topic", "t"), ("scenarios",)),
        (("--reset-offsets", "--group", "g", "--topic", "t", "--to-earliest", "--to-latest"), ("scenarios",)),
        (("--reset-offsets", "--group", "g", "--topic", "t", "--to-earliest", "--dry-run", "--execute"), ("--execute and --dry-run",)),
        (("--reset-offsets", "--group", "g", "--topic", "t:x", "--to-earliest"), ("Invalid partition 'x'",)),
        (("--reset-offsets", "--group", "g", "--topic", "t", "--to-datetime", "2024-01-01 10:00"), ("Error parsing timestamp",)),
        (("--reset-offsets", "--group", "g", "--topic", "t", "--by-duration", "1h"), ("Error parsing duration",)),
        (("--describe", "--group", "g", "--to-earliest"), ("--to-earliest", "--describe")),
    ]
    results = run_all(broker, [case[0] for case in cases])
    for (args, fragments), result in zip(cases, results, strict=True):
        assert result.returncode == 2, (args, result.returncode)
        failed(result, *fragments)
    unreachable = pybroker("consumer-groups", "--bootstrap-server", "127.0.0.1:1", "--list")
    assert failed(unreachable, "127.0.0.1:1").startswith("Error: ") and unreachable.returncode == 1
    reset_missing_topic = consumer_groups(broker, "--reset-offsets", "--group", "g", "--topic", "no-such-topic",
                                          "--to-earliest", "--execute")
    assert reset_missing_topic.returncode == 1
    failed(reset_missing_topic, "UNKNOWN_TOPIC_OR_PARTITION")


def test_datetime_and_duration_parsing():
    from pybroker.cli.consumer_groups import parse_datetime, parse_duration

    utc = datetime(2024, 3, 1, 12, 30, 15, 250000, tzinfo=UTC).timestamp() * 1000
    assert parse_datetime("2024-03-01T12:30:15.250") == utc
    assert parse_datetime("2024-03-01T12:30:15.250Z") == utc
    assert parse_datetime("2024-03-01T13:30:15.250+01:00") == utc
    assert parse_datetime("2024-03-01T13:30:15.250+0100") == utc
    assert parse_datetime("2024-03-01T10:30:15.250-02") == utc
    assert parse_duration("PT1H") == 3_600_000
    assert parse_duration("P1DT2H3M4.5S") == ((24 + 2) * 3600 + 3 * 60 + 4.5) * 1000


# --- the Admin calls behind the CLI ---------------------------------------------------------------

def test_admin_group_calls(broker, kafka_admin, topic_name, group):
    create_topic(kafka_admin, topic_name, 2)
    produce(broker, topic_name, 5, partition=0)
    t0, t1 = TopicPartition(topic_name, 0), TopicPartition(topic_name, 1)

    async def while_active(member_id: str) -> None:
        async with Admin(broker.bootstrap) as admin:
            assert await admin.find_coordinator(group) == Node(1, "127.0.0.1", broker.port)
            (described,) = (await admin.describe_groups([group])).values()
            assert (described.state, described.protocol_type, described.protocol) == ("Stable", "consumer", "range")
            (member,) = described.members
            assert (member.member_id, member.client_id, member.host) == (member_id, CLIENT_ID, "/127.0.0.1")
            assert sorted(member.assignment) == [t0, t1]
            assert consumer_protocol.decode_assignment(member.member_assignment).partitions == member.assignment
            assert topic_name in consumer_protocol.decode_subscription(member.member_metadata).topics

            assert await admin.list_group_offsets(group) == {t0: CommittedOffset(3, None, "")}
            assert list(await admin.list_group_offsets(group, [t0, t1])) == [t0]  # t1: nothing committed

            with pytest.raises(AdminError) as active:
                await admin.alter_group_offsets(group, {t0: 1})
            assert active.value.error == ErrorCode.UNKNOWN_MEMBER_ID and "active members" in str(active.value)
            with pytest.raises(AdminError) as subscribed:
                await admin.delete_group_offsets(group, [t0, t1])
            assert subscribed.value.error == ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC and set(subscribed.value.failures) == {t0, t1}
            with pytest.raises(AdminError) as non_empty:
                await admin.delete_groups([group])
            assert non_empty.value.error == ErrorCode.NON_EMPTY_GROUP
            listed = {g.group_id: g for g in await admin.list_groups(["Stable"])}
            assert listed[group].state == "Stable" and listed[group].is_consumer_group

    async def when_empty() -> None:
        async with Admin(broker.bootstrap) as admin:
            latest = await admin.list_offsets([t0, t1], "latest")
            assert {tp: o.offset for tp, o in latest.items()} == {t0: 5, t1: 0}
            assert (await admin.list_offsets([t0], "earliest"))[t0].offset == 0
            assert (await admin.list_offsets([t0], 2**62))[t0].offset == -1  # no record that late
            with pytest.raises(AdminError) as unknown:
                await admin.list_offsets([t0, TopicPartition(topic_name, 9)], "latest")
            assert unknown.value.error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            assert list(unknown.value.failures) == [TopicPartition(topic_name, 9)]

            await admin.alter_group_offsets(group, {t0: 2, t1: 0})
            assert {tp: o.offset for tp, o in (await admin.list_group_offsets(group)).items()} == {t0: 2, t1: 0}
            await admin.delete_group_offsets(group, [t1])
            assert list(await admin.list_group_offsets(group)) == [t0]

            missing = group + "-missing"
            with pytest.raises(AdminError) as partly:
                await admin.delete_groups([group, missing])
            assert partly.value.error == ErrorCode.GROUP_ID_NOT_FOUND and list(partly.value.failures) == [missing]
            assert (await admin.describe_groups([group]))[group].state == "Dead"  # the other one went
            with pytest.raises(AdminError) as gone:
                await admin.delete_group_offsets(group, [t0])
            assert gone.value.error == ErrorCode.GROUP_ID_NOT_FOUND

    with group_member(broker, group, [topic_name]) as consumer:
        commit(consumer, {(topic_name, 0): 3})
        asyncio.run(while_active(consumer.memberid()))
    assert kafka_committed(kafka_admin, group) == {(topic_name, 0): 3}
    asyncio.run(when_empty())


def test_consumer_protocol_codec():
    tps = [TopicPartition("a", 0), TopicPartition("a", 2), TopicPartition("b", 1)]
    for version in (0, 1, 3):
        for user_data in (None, b"", b"\x00data"):
            assignment = consumer_protocol.ConsumerAssignment(tps, user_data, version)
            assert consumer_protocol.decode_assignment(consumer_protocol.encode_assignment(assignment)) == assignment
    # Kafka's bytes for version 0, topic "t" partitions [0, 1], null user data.
    raw = b"\x00\x00" + b"\x00\x00\x00\x01" + b"\x00\x01t" + b"\x00\x00\x00\x02" + b"\x00\x00\x00\x00\x00\x00\x00\x01" + b"\xff\xff\xff\xff"
    assert consumer_protocol.decode_assignment(raw).partitions == [TopicPartition("t", 0), TopicPartition("t", 1)]
    assert consumer_protocol.decode_assignment(b"") == consumer_protocol.ConsumerAssignment()
    with pytest.raises(ValueError, match="past the end"):
        consumer_protocol.decode_assignment(raw[:-3])
    subscription = consumer_protocol.ConsumerSubscription(["a", "b"], b"x", [TopicPartition("a", 0)], 7, "rack-1", 3)
    assert consumer_protocol.decode_subscription(consumer_protocol.encode_subscription(subscription)) == subscription
    # An older layout leaves the later fields at their defaults.
    v0 = consumer_protocol.ConsumerSubscription(["a"], None, version=0)
    assert consumer_protocol.decode_subscription(consumer_protocol.encode_subscription(v0)) == v0
