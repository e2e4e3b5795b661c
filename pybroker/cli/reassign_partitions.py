"""``pybroker reassign-partitions``: move partition replicas between brokers (like
kafka-reassign-partitions.sh 3.6).

Exactly one action:

* ``--generate --topics-to-move-json-file F --broker-list 1,2 [--disable-rack-aware]``: prints the
  current assignment of the topics in F (``{"version":1,"topics":[{"topic":"t"}]}``) and a
  proposed one over the brokers listed, from the project's replica placement (Kafka's
  ``AdminUtils.assignReplicasToBrokers``, rack-aware when the brokers have racks).
* ``--execute --reassignment-json-file F [--throttle B/s] [--replica-alter-log-dirs-throttle B/s]
  [--additional]``: prints the current assignment for rollback, sets the throttles (the broker
  configs ``leader/follower.replication.throttled.rate`` on every broker involved, the topic
  configs ``leader/follower.replication.throttled.replicas`` as ``partition:broker`` lists), then
  starts the reassignments (AlterPartitionReassignments).
* ``--verify --reassignment-json-file F [--preserve-throttles]``: the state of each partition;
  once nothing is under way, the throttles are removed.
* ``--cancel --reassignment-json-file F [--preserve-throttles]``: cancels those under way.
* ``--list``: the reassignments under way.

The JSON of a reassignment is Kafka's: ``{"version":1,"partitions":[{"topic":"t","partition":0,
"replicas":[1,2],"log_dirs":["any","any"]}]}`` (``log_dirs`` optional; a path instead of ``any``
moves that replica to that log dir: --execute sends AlterReplicaLogDirs, retried while the replica
does not exist yet on its broker for up to --timeout ms, and --verify reports each move). Output lines and error messages are Kafka's. Every action takes
``--bootstrap-server`` and ``--command-config``. Exit status 1 on failure, 2 on usage errors.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from pybroker.cli.command_config import AdminOptions, settings_for_command
from pybroker.client.admin import (
    BROKER_RESOURCE,
    TOPIC_RESOURCE,
    Admin,
    AdminError,
    PartitionReassignment,
)
from pybroker.client.connection import KafkaClientError
from pybroker.common.errors import ErrorCode
from pybroker.controller.replica_assignment import AdminOperationError, assign_replicas_to_brokers
from pybroker.types import TopicPartition

PROG = "pybroker reassign-partitions"
ANY_LOG_DIR = "any"
BROKER_LEADER_THROTTLE = "leader.replication.throttled.rate"
BROKER_FOLLOWER_THROTTLE = "follower.replication.throttled.rate"
BROKER_LOG_DIR_THROTTLE = "replica.alter.log.dirs.io.max.bytes.per.second"
BROKER_THROTTLES = (BROKER_LEADER_THROTTLE, BROKER_FOLLOWER_THROTTLE, BROKER_LOG_DIR_THROTTLE)
TOPIC_LEADER_THROTTLE = "leader.replication.throttled.replicas"
TOPIC_FOLLOWER_THROTTLE = "follower.replication.throttled.replicas"
TOPIC_THROTTLES = (TOPIC_LEADER_THROTTLE, TOPIC_FOLLOWER_THROTTLE)
ACTIONS = ("generate", "execute", "verify", "cancel", "list")
CANNOT_EXECUTE_BECAUSE_OF_EXISTING = (
    "Cannot execute because there is an existing partition assignment.  Use --additional to override this and "
    "create a new partition assignment in addition to the existing one. The --additional flag can also be used to "
    "change the throttle by resubmitting the current reassignment.")
RUN_VERIFY_PERIODICALLY = ("Warning: You must run --verify periodically, until the reassignment completes, to "
                           "ensure the throttle is removed.")


class ReassignmentFailure(Exception):
    """Kafka's AdminCommandFailedException / TerseReassignmentFailureException: printed, exit 1."""


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "reassign-partitions", help="move partition replicas between brokers (like kafka-reassign-partitions.sh)",
        description="This tool helps to move topic partitions between replicas.",
    )
    for action in ACTIONS:
        parser.add_argument(f"--{action}", action="store_true", help=f"the {action} action")
    parser.add_argument("--bootstrap-server", metavar="HOST:PORT", help="REQUIRED: the server(s) to use for bootstrapping")
    parser.add_argument("--command-config", metavar="FILE", help="Property file containing configs to be passed to Admin Client.")
    parser.add_argument("--reassignment-json-file", metavar="FILE",
                        help='The JSON file with the partition reassignment configuration: {"version":1,"partitions":'
                             '[{"topic":"foo","partition":1,"replicas":[1,2,3],"log_dirs":["any","any","any"]}]}')
    parser.add_argument("--topics-to-move-json-file", metavar="FILE",
                        help='Generate a reassignment configuration to move the partitions of the specified topics: '
                             '{"topics":[{"topic":"foo"},{"topic":"foo1"}],"version":1}')
    parser.add_argument("--broker-list", metavar="1,2", help="The list of brokers to which the partitions need to be "
                        "reassigned, for --generate")
    parser.add_argument("--disable-rack-aware", action="store_true", help="Disable rack aware replica assignment")
    parser.add_argument("--throttle", type=int, default=-1, metavar="B/S",
                        help="The movement of partitions between brokers will be throttled to this value (bytes/sec).")
    parser.add_argument("--replica-alter-log-dirs-throttle", type=int, default=-1, metavar="B/S",
                        help="The movement of replicas between log directories on the same broker will be throttled "
                             "to this value (bytes/sec).")
    parser.add_argument("--timeout", type=int, default=10000, metavar="MS",
                        help="The maximum time in ms to wait for log directory replica assignment to begin.")
    parser.add_argument("--additional", action="store_true",
                        help="Execute this reassignment in addition to any other ongoing ones.")
    parser.add_argument("--preserve-throttles", action="store_true", help="Do not modify broker or topic throttles.")
    parser.set_defaults(run=run)


# --- JSON ----------------------------------------------------------------------------------------


def format_reassignment_json(assignment: Mapping[TopicPartition, list[int]]) -> str:
    """Kafka's formatAsReassignmentJson: compact, partitions sorted, every log dir ``any``."""
    return json.dumps({"version": 1, "partitions": [
        {"topic": tp.topic, "partition": tp.partition, "replicas": list(assignment[tp]),
         "log_dirs": [ANY_LOG_DIR] * len(assignment[tp])}
        for tp in sorted(assignment)
    ]}, separators=(",", ":"))


def _load_json(text: str) -> object:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        raise ReassignmentFailure("The input string is not a valid JSON") from None


def parse_topics_data(text: str) -> list[str]:
    """Kafka's parseTopicsData (version 1)."""
    document = _load_json(text)
    if not isinstance(document, dict):
        raise ReassignmentFailure("The input string is not a valid JSON")
    version = document.get("version", 1)
    if version != 1:
        raise ReassignmentFailure(f"Not supported version field value {version}")
    topics = []
    for entry in document.get("topics") or []:
        if not isinstance(entry, dict) or not isinstance(entry.get("topic"), str):
            raise ReassignmentFailure('each topic must be {"topic": <string>}')
        topics.append(entry["topic"])
    return topics


def parse_reassignment_data(text: str) -> list[tuple[TopicPartition, list[int]]]:
    """Kafka's parsePartitionReassignmentData and parseExecuteAssignmentArgs checks."""
    document = _load_json(text)
    if not isinstance(document, dict):
        raise ReassignmentFailure("The input string is not a valid JSON")
    version = document.get("version", 1)
    if version != 1:
        raise ReassignmentFailure(f"Not supported version field value {version}")
    out: list[tuple[TopicPartition, list[int]]] = []
    for entry in document.get("partitions") or []:
        if not isinstance(entry, dict):
            raise ReassignmentFailure("each partition must be a JSON object")
        topic, partition, replicas = entry.get("topic"), entry.get("partition"), entry.get("replicas")
        if (not isinstance(topic, str) or not isinstance(partition, int) or not isinstance(replicas, list)
                or not all(isinstance(r, int) for r in replicas)):
            raise ReassignmentFailure('each partition needs "topic", "partition" and "replicas"')
        log_dirs = entry.get("log_dirs")
        if log_dirs is not None:
            if not isinstance(log_dirs, list) or len(log_dirs) != len(replicas):
                raise ReassignmentFailure(
                    f"Size of replicas list {replicas} is different from size of log dirs list {log_dirs} for "
                    f"partition {topic}-{partition}")
            if not all(isinstance(d, str) for d in log_dirs):
                raise ReassignmentFailure('"log_dirs" must be a list of strings')
        out.append((TopicPartition(topic, partition), list(replicas)))
    if not out:
        raise ReassignmentFailure("Partition reassignment list cannot be empty")
    if any(not replicas for _, replicas in out):
        raise ReassignmentFailure("Partition replica list cannot be empty")
    seen = [tp for tp, _ in out]
    duplicates = list(dict.fromkeys(tp for tp in seen if seen.count(tp) > 1))
    if duplicates:
        raise ReassignmentFailure("Partition reassignment contains duplicate topic partitions: "
                                  + ",".join(map(str, duplicates)))
    bad = [(tp, replicas) for tp, replicas in out if len(set(replicas)) != len(replicas)]
    if bad:
        raise ReassignmentFailure("Partition replica lists may not contain duplicate entries: " + ", ".join(
            f"{tp} contains multiple entries for "
            + ",".join(map(str, dict.fromkeys(r for r in replicas if replicas.count(r) > 1)))
            for tp, replicas in bad))
    return out


def parse_log_dir_moves(text: str) -> dict[tuple[TopicPartition, int], str]:
    """The replicas whose ``log_dirs`` entry is not "any": (partition, broker) → absolute log dir
    (Kafka's targetLogDirs), after `parse_reassignment_data`'s checks."""
    parse_reassignment_data(text)
    moves: dict[tuple[TopicPartition, int], str] = {}
    for entry in _load_json(text)["partitions"]:  # type: ignore[index]
        tp = TopicPartition(entry["topic"], entry["partition"])
        for broker, log_dir in zip(entry["replicas"], entry.get("log_dirs") or [], strict=False):
            if log_dir != ANY_LOG_DIR:
                moves[(tp, broker)] = log_dir
    return moves


def replica_name(replica: tuple[TopicPartition, int]) -> str:
    """Kafka's TopicPartitionReplica: ``topic-partition-broker``."""
    return f"{replica[0]}-{replica[1]}"


def _replica_order(replica: tuple[TopicPartition, int]) -> tuple[str, int, int]:
    return replica[0].topic, replica[0].partition, replica[1]


async def execute_moves(
    admin: Admin, moves: Mapping[tuple[TopicPartition, int], str], timeout_ms: int,
    sleep_s: float = 0.1, clock: Callable[[], float] = time.monotonic,
) -> None:
    """Kafka's executeMoves: AlterReplicaLogDirs for the pending replicas until every move has
    started, retrying those answered REPLICA_NOT_AVAILABLE (a replica not created on its new
    broker yet) every 100 ms for up to ``timeout_ms``; any other error fails the command."""
    deadline = clock() + timeout_ms / 1000
    pending = dict(moves)
    while True:
        results = await admin.alter_replica_log_dirs(pending)
        completed = []
        for replica, error in results.items():
            if error is None:
                completed.append(replica)
            elif error.error != ErrorCode.REPLICA_NOT_AVAILABLE:
                raise ReassignmentFailure(f"Failed to alter dir for {replica_name(replica)}: {error.message}")
        if completed:
            print(f"Successfully started log directory move{'' if len(completed) == 1 else 's'} for: "
                  + ",".join(replica_name(r) for r in sorted(completed, key=_replica_order)))
        for replica in completed:
            pending.pop(replica, None)
        if not pending:
            return
        if clock() >= deadline:
            raise ReassignmentFailure(
                f"Timed out before log directory move{'' if len(pending) == 1 else 's'} could be started for: "
                + ",".join(replica_name(r) for r in sorted(pending, key=_replica_order)))
        await asyncio.sleep(sleep_s)


async def log_dir_move_lines(
    admin: Admin, moves: Mapping[tuple[TopicPartition, int], str],
) -> tuple[list[str], bool]:
    """Kafka's verifyReplicaMoves: one line per replica move (from DescribeLogDirs: the replica's
    current and future dirs), and whether some move is not done."""
    described = await admin.describe_log_dirs(sorted({b for _, b in moves}), sorted({tp for tp, _ in moves}))
    where: dict[tuple[TopicPartition, int], dict[bool, str]] = {}
    for broker, dirs in described.items():
        for d in dirs:
            for r in d.replicas:
                where.setdefault((r.topic_partition, broker), {})[r.is_future] = d.path
    lines: list[str] = []
    ongoing = False
    for replica in sorted(moves, key=_replica_order):
        target, (tp, broker) = moves[replica], replica
        info = where.get(replica)
        if info is None:
            ongoing = True
            lines.append(f"Partition {tp} cannot be found in any live log directory on broker {broker}.")
        elif False not in info:
            ongoing = True
            lines.append(f"Partition {tp} is not found in any live log dir on broker {broker}. There is likely an "
                         "offline log directory on the broker.")
        elif True in info:
            ongoing = True
            lines.append(f"Reassignment of replica {replica_name(replica)} is still in progress." if info[True] == target
                         else f"Partition {tp} on broker {broker} is being moved to log dir {info[True]} instead of "
                              f"{target}.")
        elif info[False] == target:
            lines.append(f"Reassignment of replica {replica_name(replica)} completed successfully.")
        else:
            lines.append(f"Partition {tp} on broker {broker} is not being moved from log dir {info[False]} to "
                         f"{target}.")
    return lines, ongoing


# --- throttles -----------------------------------------------------------------------------------


@dataclass
class PartitionMove:
    sources: set[int] = field(default_factory=set)
    destinations: set[int] = field(default_factory=set)


def proposed_move_map(
    current_reassignments: Mapping[TopicPartition, PartitionReassignment],
    proposed: Mapping[TopicPartition, list[int]], current: Mapping[TopicPartition, list[int]],
) -> dict[str, dict[int, PartitionMove]]:
    """Kafka's calculateProposedMoveMap: per topic and partition, the brokers replicas move from
    (the original replicas) and to."""
    moves: dict[str, dict[int, PartitionMove]] = {}
    for tp, r in current_reassignments.items():
        origin = [b for b in r.replicas if b not in r.adding_replicas]
        moves.setdefault(tp.topic, {})[tp.partition] = PartitionMove(set(origin), set(r.adding_replicas))
    for tp, replicas in proposed.items():
        by_partition = moves.setdefault(tp.topic, {})
        if tp.partition in by_partition:
            sources = by_partition[tp.partition].sources
        elif tp in current:
            sources = set(current[tp])
        else:
            raise ReassignmentFailure(f"Trying to reassign a topic partition {tp} with 0 replicas")
        by_partition[tp.partition] = PartitionMove(set(sources), {b for b in replicas if b not in sources})
    return moves


def leader_throttles(moves: Mapping[str, Mapping[int, PartitionMove]]) -> dict[str, str]:
    """``leader.replication.throttled.replicas`` per topic: ``partition:source`` for every source."""
    return {topic: ",".join(sorted({f"{p}:{b}" for p, move in parts.items() for b in move.sources}))
            for topic, parts in moves.items()}


def follower_throttles(moves: Mapping[str, Mapping[int, PartitionMove]]) -> dict[str, str]:
    """``follower.replication.throttled.replicas`` per topic: ``partition:destination``."""
    return {topic: ",".join(sorted({f"{p}:{b}" for p, move in parts.items() for b in move.destinations
                                    if b not in move.sources}))
            for topic, parts in moves.items()}


def reassigning_brokers(moves: Mapping[str, Mapping[int, PartitionMove]]) -> set[int]:
    return {b for parts in moves.values() for move in parts.values() for b in move.sources | move.destinations}


async def set_reassignment_throttles(admin: Admin, moves: Mapping[str, Mapping[int, PartitionMove]], rate: int) -> None:
    """Kafka's modifyReassignmentThrottle: the topic throttle lists, then the rate on each broker."""
    leaders, followers = leader_throttles(moves), follower_throttles(moves)
    for topic in sorted(set(leaders) | set(followers)):
        configs = {}
        if topic in leaders:
            configs[TOPIC_LEADER_THROTTLE] = leaders[topic]
        if topic in followers:
            configs[TOPIC_FOLLOWER_THROTTLE] = followers[topic]
        await admin.incremental_alter_configs(TOPIC_RESOURCE, topic, configs)
    for broker in sorted(reassigning_brokers(moves)):
        await admin.incremental_alter_configs(BROKER_RESOURCE, str(broker), {
            BROKER_LEADER_THROTTLE: str(rate), BROKER_FOLLOWER_THROTTLE: str(rate)})
    print(f"The inter-broker throttle limit was set to {rate} B/s")


async def set_log_dir_throttle(admin: Admin, brokers: Iterable[int], rate: int) -> None:
    for broker in sorted(set(brokers)):
        await admin.incremental_alter_configs(BROKER_RESOURCE, str(broker), {BROKER_LOG_DIR_THROTTLE: str(rate)})
    print(f"The replica-alter-dir throttle limit was set to {rate} B/s")


async def clear_all_throttles(admin: Admin, targets: list[tuple[TopicPartition, list[int]]]) -> None:
    """Kafka's clearAllThrottles: every live broker and every target broker loses the rates,
    every topic of the file its throttled replica lists."""
    brokers = {n.node_id for n in await admin.brokers()} | {b for _, replicas in targets for b in replicas}
    print(f"Clearing broker-level throttles on broker{'' if len(brokers) == 1 else 's'} "
          + ",".join(map(str, sorted(brokers))))
    for broker in sorted(brokers):
        await admin.incremental_alter_configs(BROKER_RESOURCE, str(broker), delete_configs=BROKER_THROTTLES)
    topics = sorted({tp.topic for tp, _ in targets})
    print(f"Clearing topic-level throttles on topic{'' if len(topics) == 1 else 's'} " + ",".join(topics))
    for topic in topics:
        await admin.incremental_alter_configs(TOPIC_RESOURCE, topic, delete_configs=TOPIC_THROTTLES)


# --- actions -------------------------------------------------------------------------------------


async def current_assignment(admin: Admin, topics: Iterable[str]) -> dict[TopicPartition, list[int]]:
    wanted = sorted(set(topics))
    described = {d.name: d for d in await admin.describe_topics(wanted)}
    for name in wanted:
        if name not in described:
            raise ReassignmentFailure(f"Topic {name} not found.")
    return {TopicPartition(name, p.partition): list(p.replicas)
            for name, d in described.items() for p in d.partitions}


async def generate(admin: Admin, args: argparse.Namespace) -> None:
    try:
        brokers = [int(b) for b in args.broker_list.split(",")]
    except ValueError:
        raise ReassignmentFailure(f"--broker-list must be broker ids separated by commas: {args.broker_list}") from None
    duplicates = sorted({b for b in brokers if brokers.count(b) > 1})
    if duplicates:
        raise ReassignmentFailure("Broker list contains duplicate entries: " + ",".join(map(str, duplicates)))
    topics = parse_topics_data(_read(args.topics_to_move_json_file))
    repeated = sorted({t for t in topics if topics.count(t) > 1})
    if repeated:
        raise ReassignmentFailure("List of topics to reassign contains duplicate entries: " + ",".join(repeated))
    current = await current_assignment(admin, topics)
    nodes = [(b, rack) for b, rack in (await admin.broker_racks()).items() if b in set(brokers)]
    racks = {b: rack for b, rack in nodes if rack is not None} if not args.disable_rack_aware else {}
    if racks and len(racks) != len(nodes):
        raise ReassignmentFailure("Not all brokers have rack information. Add --disable-rack-aware in command line "
                                  "to make replica assignment without rack information.")
    proposed: dict[TopicPartition, list[int]] = {}
    for topic in dict.fromkeys(tp.topic for tp in sorted(current)):
        parts = sorted(tp.partition for tp in current if tp.topic == topic)
        rf = len(current[TopicPartition(topic, parts[0])])
        try:
            placed = assign_replicas_to_brokers([b for b, _ in nodes], len(parts), rf, racks=racks or None)
        except (AdminOperationError, ValueError) as e:
            raise ReassignmentFailure(str(e)) from None
        proposed.update({TopicPartition(topic, p): replicas for p, replicas in placed.items()})
    print(f"Current partition replica assignment\n{format_reassignment_json(current)}\n")
    print(f"Proposed partition reassignment configuration\n{format_reassignment_json(proposed)}")


async def execute(admin: Admin, args: argparse.Namespace) -> None:
    text = _read(args.reassignment_json_file)
    targets = parse_reassignment_data(text)
    moves = parse_log_dir_moves(text)
    proposed = dict(targets)
    under_way = await admin.list_partition_reassignments()
    if not args.additional and under_way:
        raise ReassignmentFailure(CANNOT_EXECUTE_BECAUSE_OF_EXISTING)
    known = {n.node_id for n in await admin.brokers()}
    unknown = next((b for _, replicas in targets for b in replicas if b not in known), None)
    if unknown is not None:
        raise ReassignmentFailure(f"Unknown broker id {unknown}")
    current = {tp: r for tp, r in (await current_assignment(admin, {tp.topic for tp in proposed})).items()
               if tp in proposed}
    print(f"Current partition replica assignment\n\n{format_reassignment_json(current)}\n\n"
          "Save this to use as the --reassignment-json-file option during rollback")
    if args.throttle >= 0 or args.replica_alter_log_dirs_throttle >= 0:
        print(RUN_VERIFY_PERIODICALLY)
        if args.throttle >= 0:
            await set_reassignment_throttles(admin, proposed_move_map(under_way, proposed, current), args.throttle)
        if args.replica_alter_log_dirs_throttle >= 0:
            await set_log_dir_throttle(admin, {b for _, b in moves}, args.replica_alter_log_dirs_throttle)
    results = await admin.alter_partition_reassignments(proposed)
    errors = {tp: e for tp, e in results.items() if e is not None}
    if errors:
        raise ReassignmentFailure("Error reassigning partition(s):\n" + "\n".join(
            f"{tp}: {errors[tp].message}" for tp in sorted(errors)))
    print(f"Successfully started partition reassignment{'' if len(proposed) == 1 else 's'} for "
          + ",".join(map(str, sorted(proposed))))
    if moves:
        await execute_moves(admin, moves, args.timeout)


async def verify(admin: Admin, args: argparse.Namespace) -> bool:
    """Prints the state of each partition; True when some reassignment is under way."""
    text = _read(args.reassignment_json_file)
    targets = parse_reassignment_data(text)
    moves = parse_log_dir_moves(text)
    under_way = await admin.list_partition_reassignments()
    current = await current_assignment(admin, {tp.topic for tp, _ in targets}) if targets else {}
    lines = ["Status of partition reassignment:"]
    for tp, replicas in sorted(targets):
        if tp in under_way:
            lines.append(f"Reassignment of partition {tp} is still in progress.")
        elif current.get(tp, []) == replicas:
            lines.append(f"Reassignment of partition {tp} is completed.")
        else:
            lines.append(f"There is no active reassignment of partition {tp}, but replica set is "
                         f"{','.join(map(str, current.get(tp, [])))} rather than {','.join(map(str, replicas))}.")
    print("\n".join(lines))
    moving = False
    if moves:
        move_lines, moving = await log_dir_move_lines(admin, moves)
        print("\n".join(move_lines))
    if not under_way and not moving and not args.preserve_throttles:
        await clear_all_throttles(admin, targets)
    return bool(under_way) or moving


async def cancel(admin: Admin, args: argparse.Namespace) -> None:
    targets = parse_reassignment_data(_read(args.reassignment_json_file))
    listed = await admin.list_partition_reassignments([tp for tp, _ in targets])
    reassigning = sorted(tp for tp, r in listed.items() if r.adding_replicas or r.removing_replicas)
    if reassigning:
        results = await admin.alter_partition_reassignments({tp: None for tp in reassigning})
        errors = {tp: e for tp, e in results.items() if e is not None}
        if errors:
            raise ReassignmentFailure(f"Error cancelling partition reassignment{'' if len(errors) == 1 else 's'} "
                                      "for:\n" + "\n".join(f"{tp}: {errors[tp].message}" for tp in sorted(errors)))
        print(f"Successfully cancelled partition reassignment{'' if len(reassigning) == 1 else 's'} for: "
              + ",".join(map(str, reassigning)))
    else:
        print("None of the specified partition reassignments are active.")
    print("None of the specified partition moves are active.")
    if not args.preserve_throttles:
        await clear_all_throttles(admin, targets)


async def list_reassignments(admin: Admin) -> None:
    under_way = await admin.list_partition_reassignments()
    lines = []
    for tp in sorted(under_way):
        r = under_way[tp]
        lines.append(f"{tp}: replicas: {','.join(map(str, r.replicas))}."
                     + (f" adding: {','.join(map(str, r.adding_replicas))}." if r.adding_replicas else "")
                     + (f" removing: {','.join(map(str, r.removing_replicas))}." if r.removing_replicas else ""))
    print("Current partition reassignments:\n" + "\n".join(lines) if lines else "No partition reassignments found.")


def _read(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ReassignmentFailure(f"cannot read {path}: {e}") from None


def usage_error(args: argparse.Namespace) -> str | None:
    """Kafka's validateAndParseArgs, with its messages."""
    actions = [a for a in ACTIONS if getattr(args, a)]
    if len(actions) != 1:
        return "Command must include exactly one action: " + ", ".join(f"--{a}" for a in ACTIONS)
    if args.bootstrap_server is None:
        return "Please specify --bootstrap-server"
    action = actions[0]
    required = {"generate": ("topics_to_move_json_file", "broker_list"), "execute": ("reassignment_json_file",),
                "verify": ("reassignment_json_file",), "cancel": ("reassignment_json_file",), "list": ()}[action]
    for name in required:
        if getattr(args, name) is None:
            return f"Missing required argument \"[{name.replace('_', '-')}]\""
    allowed = {
        "generate": {"topics_to_move_json_file", "broker_list", "disable_rack_aware"},
        "execute": {"reassignment_json_file", "throttle", "replica_alter_log_dirs_throttle", "timeout", "additional"},
        "verify": {"reassignment_json_file", "preserve_throttles"},
        "cancel": {"reassignment_json_file", "preserve_throttles", "timeout"},
        "list": set(),
    }[action]
    defaults = {"reassignment_json_file": None, "topics_to_move_json_file": None, "broker_list": None,
                "disable_rack_aware": False, "throttle": -1, "replica_alter_log_dirs_throttle": -1,
                "timeout": 10000, "additional": False, "preserve_throttles": False}
    for name, default in defaults.items():
        if name not in allowed and getattr(args, name) != default:
            return f'Option "[{name.replace("_", "-")}]" can\'t be used with action "[{action}]"'
    return None


async def _run(args: argparse.Namespace, client: AdminOptions) -> int:
    async with Admin(args.bootstrap_server, **client) as admin:
        if args.generate:
            await generate(admin, args)
        elif args.execute:
            await execute(admin, args)
        elif args.verify:
            await verify(admin, args)
        elif args.cancel:
            await cancel(admin, args)
        else:
            await list_reassignments(admin)
    return 0


def run(args: argparse.Namespace) -> int:
    problem = usage_error(args)
    if problem:
        print(f"{PROG}: {problem}", file=sys.stderr)
        return 2
    settings = settings_for_command(args.command_config)
    if settings is None:
        return 1
    client = settings.admin_options("reassign-partitions-tool")
    try:
        return asyncio.run(_run(args, client))
    except ReassignmentFailure as e:
        print(f"Error: {e}", file=sys.stderr)
        return 1
    except (AdminError, KafkaClientError, ValueError, TimeoutError) as e:
        print(f"Error: {e or type(e).__name__}", file=sys.stderr)
        return 1
