"""``pybroker reassign-partitions`` without a cluster: Kafka's JSON parsing and its errors, the
move map and the throttle configs the tool sends (``--execute --throttle``, and their removal
by ``--verify`` once nothing is under way), ``--list`` and ``--cancel`` output, against a fake
admin client that records its calls."""

from __future__ import annotations

import argparse
import asyncio
import json

import pytest

from pybroker.cli import reassign_partitions as tool
from pybroker.client.admin import (
    BROKER_RESOURCE,
    TOPIC_RESOURCE,
    AdminError,
    LogDirInfo,
    LogDirReplicaInfo,
    PartitionInfo,
    PartitionReassignment,
    TopicDescription,
)
from pybroker.client.node import Node
from pybroker.common.errors import ErrorCode
from pybroker.types import TopicPartition

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)


class FakeAdmin:
    def __init__(self, assignment: dict[TopicPartition, list[int]], under_way=None) -> None:
        self.assignment = assignment
        self.under_way: dict[TopicPartition, PartitionReassignment] = dict(under_way or {})
        self.configs: list[tuple[int, str, dict[str, str], tuple[str, ...]]] = []
        self.altered: list[dict] = []

    async def brokers(self):
        return [Node(b, "h", 9000 + b) for b in (1, 2, 3)]

    async def broker_racks(self):
        return {1: None, 2: None, 3: None}

    async def describe_topics(self, names):
        return [TopicDescription(name, "id", [PartitionInfo(tp.partition, r[0], 0, r, r)
                                              for tp, r in sorted(self.assignment.items()) if tp.topic == name])
                for name in names if any(tp.topic == name for tp in self.assignment)]

    async def list_partition_reassignments(self, partitions=None):
        return {tp: r for tp, r in self.under_way.items() if partitions is None or tp in partitions}

    async def alter_partition_reassignments(self, reassignments):
        self.altered.append(dict(reassignments))
        return {tp: None for tp in reassignments}

    async def incremental_alter_configs(self, resource_type, name, set_configs=None, delete_configs=()):
        self.configs.append((resource_type, name, dict(set_configs or {}), tuple(delete_configs)))


def args(**values) -> argparse.Namespace:
    base = dict(reassignment_json_file=None, topics_to_move_json_file=None, broker_list=None, disable_rack_aware=False,
                throttle=-1, replica_alter_log_dirs_throttle=-1, timeout=10000, additional=False,
                preserve_throttles=False, bootstrap_server="b:1", **{a: False for a in tool.ACTIONS})
    base.update(values)
    return argparse.Namespace(**base)


def plan(tmp_path, partitions) -> str:
    path = tmp_path / "plan.json"
    path.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": tp.topic, "partition": tp.partition, "replicas": r} for tp, r in partitions.items()]}))
    return str(path)


def test_execute_with_a_throttle_sets_kafkas_topic_and_broker_configs(tmp_path, capsys):
    admin = FakeAdmin({T0: [1, 2], T1: [2, 3]})
    a = args(execute=True, reassignment_json_file=plan(tmp_path, {T0: [2, 3], T1: [2, 3]}), throttle=1000)
    asyncio.run(tool.execute(admin, a))
    assert admin.configs == [
        (TOPIC_RESOURCE, "t", {tool.TOPIC_LEADER_THROTTLE: "0:1,0:2,1:2,1:3", tool.TOPIC_FOLLOWER_THROTTLE: "0:3"}, ()),
        *[(BROKER_RESOURCE, str(b), {"leader.replication.throttled.rate": "1000",
                                     "follower.replication.throttled.rate": "1000"}, ()) for b in (1, 2, 3)],
    ]
    assert admin.altered == [{T0: [2, 3], T1: [2, 3]}]
    out = capsys.readouterr().out
    assert out == (
        "Current partition replica assignment\n\n"
        '{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2],"log_dirs":["any","any"]},'
        '{"topic":"t","partition":1,"replicas":[2,3],"log_dirs":["any","any"]}]}\n\n'
        "Save this to use as the --reassignment-json-file option during rollback\n"
        f"{tool.RUN_VERIFY_PERIODICALLY}\n"
        "The inter-broker throttle limit was set to 1000 B/s\n"
        "Successfully started partition reassignments for t-0,t-1\n"
    )


def test_execute_refuses_while_another_reassignment_runs_unless_additional(tmp_path):
    admin = FakeAdmin({T0: [1]}, {T1: PartitionReassignment([1, 2], [2], [])})
    with pytest.raises(tool.ReassignmentFailure, match="existing partition assignment"):
        asyncio.run(tool.execute(admin, args(execute=True, reassignment_json_file=plan(tmp_path, {T0: [2]}))))
    with pytest.raises(tool.ReassignmentFailure, match="Unknown broker id 7"):
        asyncio.run(tool.execute(admin, args(execute=True, additional=True,
                                             reassignment_json_file=plan(tmp_path, {T0: [7]}))))


def test_verify_reports_and_clears_every_throttle_once_nothing_runs(tmp_path, capsys):
    admin = FakeAdmin({T0: [2, 3], T1: [1]})
    under = args(verify=True, reassignment_json_file=plan(tmp_path, {T0: [2, 3], T1: [3]}))
    asyncio.run(tool.verify(admin, under))
    assert capsys.readouterr().out == (
        "Status of partition reassignment:\n"
        "Reassignment of partition t-0 is completed.\n"
        "There is no active reassignment of partition t-1, but replica set is 1 rather than 3.\n"
        "Clearing broker-level throttles on brokers 1,2,3\n"
        "Clearing topic-level throttles on topic t\n"
    )
    assert admin.configs == [
        *[(BROKER_RESOURCE, str(b), {}, tool.BROKER_THROTTLES) for b in (1, 2, 3)],
        (TOPIC_RESOURCE, "t", {}, tool.TOPIC_THROTTLES),
    ]
    # still in progress: the throttles stay
    admin = FakeAdmin({T0: [2, 3, 1]}, {T0: PartitionReassignment([2, 3, 1], [3], [1])})
    asyncio.run(tool.verify(admin, args(verify=True, reassignment_json_file=plan(tmp_path, {T0: [2, 3]}))))
    assert "Reassignment of partition t-0 is still in progress." in capsys.readouterr().out
    assert admin.configs == []


def test_list_and_cancel_print_kafkas_lines(tmp_path, capsys):
    admin = FakeAdmin({T0: [2, 3, 1]}, {T0: PartitionReassignment([2, 3, 1], [3], [1])})
    asyncio.run(tool.list_reassignments(admin))
    assert capsys.readouterr().out == "Current partition reassignments:\nt-0: replicas: 2,3,1. adding: 3. removing: 1.\n"
    asyncio.run(tool.cancel(admin, args(cancel=True, preserve_throttles=True,
                                        reassignment_json_file=plan(tmp_path, {T0: [2, 3]}))))
    assert admin.altered == [{T0: None}]
    assert capsys.readouterr().out == ("Successfully cancelled partition reassignment for: t-0\n"
                                       "None of the specified partition moves are active.\n")
    asyncio.run(tool.list_reassignments(FakeAdmin({})))
    assert capsys.readouterr().out == "No partition reassignments found.\n"


def test_generate_proposes_the_project_placement(tmp_path, capsys):
    admin = FakeAdmin({T0: [1, 2], T1: [2, 1]})
    topics = tmp_path / "topics.json"
    topics.write_text('{"version":1,"topics":[{"topic":"t"}]}')
    asyncio.run(tool.generate(admin, args(generate=True, topics_to_move_json_file=str(topics), broker_list="2,3")))
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "Current partition replica assignment" and lines[3] == "Proposed partition reassignment configuration"
    proposed = json.loads(lines[4])["partitions"]
    assert [sorted(p["replicas"]) for p in proposed] == [[2, 3], [2, 3]]


@pytest.mark.parametrize("document, message", [
    ('{"version":1,"partitions":[]}', "Partition reassignment list cannot be empty"),
    ('{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[]}]}', "Partition replica list cannot be empty"),
    ('{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1]},{"topic":"t","partition":0,"replicas":[2]}]}',
     "Partition reassignment contains duplicate topic partitions: t-0"),
    ('{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,1]}]}',
     "Partition replica lists may not contain duplicate entries: t-0 contains multiple entries for 1"),
    ('{"version":2,"partitions":[]}', "Not supported version field value 2"),
    ("{", "The input string is not a valid JSON"),
])
def test_reassignment_json_errors_are_kafkas(document, message):
    with pytest.raises(tool.ReassignmentFailure, match=message):
        tool.parse_reassignment_data(document)


def test_usage_errors():
    assert tool.usage_error(args()) == "Command must include exactly one action: --generate, --execute, --verify, --cancel, --list"
    assert tool.usage_error(args(list=True, bootstrap_server=None)) == "Please specify --bootstrap-server"
    assert tool.usage_error(args(list=True, throttle=5)) == 'Option "[throttle]" can\'t be used with action "[list]"'
    assert tool.usage_error(args(generate=True, broker_list="1")) == 'Missing required argument "[topics-to-move-json-file]"'


class LogDirAdmin(FakeAdmin):
    """FakeAdmin with log dirs: AlterReplicaLogDirs answers REPLICA_NOT_AVAILABLE for the replicas
    in ``missing`` (each time, until removed); DescribeLogDirs answers ``dirs``."""

    def __init__(self, assignment, missing=(), dirs=None) -> None:
        super().__init__(assignment)
        self.missing = set(missing)
        self.dir_calls: list[dict] = []
        self.dirs: dict[int, list[LogDirInfo]] = dirs or {}

    async def alter_replica_log_dirs(self, assignments):
        self.dir_calls.append(dict(assignments))
        answers = {r: AdminError(str(r), ErrorCode.REPLICA_NOT_AVAILABLE) if r in self.missing else None
                   for r in assignments}
        self.missing -= {(T1, 3)}  # broker 3's new replica of t-1 exists after the first try
        return answers

    async def describe_log_dirs(self, broker_ids=None, partitions=None):
        return {b: self.dirs.get(b, []) for b in broker_ids}


def moves_plan(tmp_path) -> str:
    path = tmp_path / "moves.json"
    path.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "t", "partition": 0, "replicas": [1, 2], "log_dirs": ["/d/b", "any"]},
        {"topic": "t", "partition": 1, "replicas": [3], "log_dirs": ["/d/a"]}]}))
    return str(path)


def test_execute_moves_replicas_between_log_dirs_retrying_replicas_not_created_yet(tmp_path, capsys):
    """Kafka's executeMoves: AlterReplicaLogDirs for every replica with a log dir; a replica its
    broker does not have yet (REPLICA_NOT_AVAILABLE: t-1 is moving to broker 3) is asked again."""
    assert tool.parse_log_dir_moves(open(moves_plan(tmp_path)).read()) == {(T0, 1): "/d/b", (T1, 3): "/d/a"}
    admin = LogDirAdmin({T0: [1, 2], T1: [1]}, missing={(T1, 3)})
    asyncio.run(tool.execute(admin, args(execute=True, reassignment_json_file=moves_plan(tmp_path),
                                         replica_alter_log_dirs_throttle=1000)))
    out = capsys.readouterr().out.splitlines()
    assert out[-3:] == ["Successfully started partition reassignments for t-0,t-1",
                        "Successfully started log directory move for: t-0-1",
                        "Successfully started log directory move for: t-1-3"]
    assert admin.dir_calls == [{(T0, 1): "/d/b", (T1, 3): "/d/a"}, {(T1, 3): "/d/a"}]
    assert "The replica-alter-dir throttle limit was set to 1000 B/s" in out
    assert admin.configs == [(BROKER_RESOURCE, str(b), {tool.BROKER_LOG_DIR_THROTTLE: "1000"}, ()) for b in (1, 3)]


def test_execute_moves_give_up_after_the_timeout():
    admin = LogDirAdmin({}, missing={(T0, 1)})
    now = [0.0]

    def clock() -> float:
        now[0] += 1.0
        return now[0]

    with pytest.raises(tool.ReassignmentFailure,
                       match="^Timed out before log directory move could be started for: t-0-1$"):
        asyncio.run(tool.execute_moves(admin, {(T0, 1): "/d/b"}, 2500, sleep_s=0, clock=clock))
    assert len(admin.dir_calls) == 3  # the deadline 3.5 s: tries at 2, 3 and 4 s


def test_verify_reports_each_log_dir_move(tmp_path, capsys):
    """Kafka's replicaMoveStatesToString: completed, in progress (a future replica in the target
    dir); the throttles stay while a move is under way."""
    dirs = {1: [LogDirInfo("/d/a", 0, [LogDirReplicaInfo(T0, 10, 0, False)]),
                LogDirInfo("/d/b", 0, [LogDirReplicaInfo(T0, 5, 0, True)])],
            3: [LogDirInfo("/d/a", 0, [LogDirReplicaInfo(T1, 10, 0, False)])]}
    admin = LogDirAdmin({T0: [1, 2], T1: [3]}, dirs=dirs)
    assert asyncio.run(tool.verify(admin, args(verify=True, reassignment_json_file=moves_plan(tmp_path)))) is True
    assert capsys.readouterr().out == (
        "Status of partition reassignment:\n"
        "Reassignment of partition t-0 is completed.\n"
        "Reassignment of partition t-1 is completed.\n"
        "Reassignment of replica t-0-1 is still in progress.\n"
        "Reassignment of replica t-1-3 completed successfully.\n"
    )
    assert admin.configs == []
    admin.dirs = {1: [LogDirInfo("/d/b", 0, [LogDirReplicaInfo(T0, 10, 0, False)])]}
    assert asyncio.run(tool.verify(admin, args(verify=True, reassignment_json_file=moves_plan(tmp_path)))) is True
    out = capsys.readouterr().out
    assert ("Reassignment of replica t-0-1 completed successfully.\n"
            "Partition t-1 cannot be found in any live log directory on broker 3.\n") in out
