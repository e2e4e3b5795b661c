"""``pybroker topics``: create, list, describe, alter and delete topics (like kafka-topics.sh).

``describe`` prints Kafka's TopicCommand lines (fields separated by tabs): per topic a header,
then one line per partition with its leader ("none" when it has no live one), replicas and
in-sync replicas::

    Topic: t\\tTopicId: …\\tPartitionCount: 2\\tReplicationFactor: 3\\tConfigs: cleanup.policy=compact
    \\tTopic: t\\tPartition: 0\\tLeader: 1\\tReplicas: 1,2,3\\tIsr: 1,2,3

A topic whose partition count changed since its creation also shows KIP-253's counts at the end
of its header: ``InitialPartitionCount`` (the count it was created with) and
``UndeletedPartitionCount`` (the partitions producers use), and each partition a shrink marked
for deletion (drained, then removed) ends with ``MarkedForDeletion: true``. ``alter --partitions
N`` below the current count shrinks a topic with ``enable.ordered.delivery`` (KIP-253).

``--under-replicated-partitions`` (fewer in-sync replicas than replicas) and
``--unavailable-partitions`` (no live leader) print only the matching partition lines, without
headers. ``create --replica-assignment 1:2,2:3`` places each partition's replicas by hand (the
first of each is its preferred leader), instead of ``--partitions``/``--replication-factor``.

Kafka's other options (``--if-exists``, ``--if-not-exists``, ``--exclude-internal``,
``--topics-with-overrides``, ``--under-min-isr-partitions``, ``--at-min-isr-partitions``) and
the hidden ``--kafka-tool`` of ``kafka-topics.sh`` (TopicCommand's exact behaviour) are in their
own block, `add_kafka_arguments`.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys

from pybroker.cli.command_config import ClientSettings, settings_for_command
from pybroker.client.admin import Admin, AdminError, PartitionInfo, TopicDescription
from pybroker.client.connection import KafkaClientError
from pybroker.common.errors import ErrorCode

ACTIONS = ("create", "list", "describe", "alter", "delete")
ZERO_TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAA"  # Kafka's Uuid.ZERO_UUID, printed


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser("topics", help="manage topics (like kafka-topics.sh)")
    parser.add_argument("action", nargs="?", choices=ACTIONS, help="what to do (or use --create, --list …)")
    for action in ACTIONS:
        parser.add_argument(f"--{action}", dest="flag_" + action, action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--bootstrap-server", default="127.0.0.1:9092", metavar="HOST:PORT")
    parser.add_argument("--command-config", metavar="FILE",
                        help="a properties file of admin client settings (client.id, request.timeout.ms, "
                             "security.protocol, ssl.*, sasl.mechanism, sasl.jaas.config)")
    parser.add_argument("--topic", help="topic name")
    parser.add_argument("--partitions", type=int, default=-1, help="partition count (create) or new total (alter)")
    parser.add_argument("--replication-factor", type=int, default=-1)
    parser.add_argument("--config", action="append", default=[], metavar="KEY=VALUE", help="topic config (repeatable)")
    parser.add_argument("--delete-config", action="append", default=[], metavar="KEY", help="remove a config override (alter)")
    parser.add_argument("--replica-assignment", metavar="B1:B2,B1:B2,...",
                        help="create: each partition's replicas (comma between partitions, colon between "
                             "replicas; the first is the preferred leader)")
    parser.add_argument("--under-replicated-partitions", action="store_true",
                        help="describe: only partitions with fewer in-sync replicas than replicas")
    parser.add_argument("--unavailable-partitions", action="store_true",
                        help="describe: only partitions whose leader is not available")
    add_kafka_arguments(parser)
    parser.set_defaults(run=run)


# --- kafka-topics.sh's other options (issue 18: the Kafka script names) -------------------------

def add_kafka_arguments(parser: argparse.ArgumentParser) -> None:
    """TopicCommand's options beyond the ones above, and the hidden ``--kafka-tool`` that
    ``kafka-topics.sh`` (`pybroker.cli.kafka_scripts`) passes to get TopicCommand's exact
    behaviour: ``--topic`` a regular expression (commas for ``|``), alter and delete silent,
    errors as ``Error while executing topic command : …`` on stdout, static broker configs among
    a topic's ``Configs:``."""
    parser.add_argument("--if-exists", action="store_true",
                        help="alter, delete, describe: do nothing when the topic does not exist")
    parser.add_argument("--if-not-exists", action="store_true",
                        help="create: do nothing when the topic already exists")
    parser.add_argument("--exclude-internal", action="store_true", help="list, describe: leave out internal topics")
    parser.add_argument("--topics-with-overrides", action="store_true",
                        help="describe: only the headers of topics with config overrides")
    parser.add_argument("--under-min-isr-partitions", action="store_true",
                        help="describe: only partitions with fewer in-sync replicas than min.insync.replicas")
    parser.add_argument("--at-min-isr-partitions", action="store_true",
                        help="describe: only partitions with exactly min.insync.replicas in-sync replicas")
    parser.add_argument("--kafka-tool", action="store_true", help=argparse.SUPPRESS)


def include_list(pattern: str) -> re.Pattern[str]:
    """Kafka's ``IncludeList``: commas mean ``|``, blanks and enclosing quotes are dropped, and
    a topic must match the whole expression."""
    regex = re.sub(r"[\"']+$", "", re.sub(r"^[\"']+", "", pattern.strip().replace(",", "|").replace(" ", "")))
    try:
        return re.compile(regex)
    except re.error:
        raise ValueError(f"{pattern} is an invalid regex.") from None


async def _matching_topics(admin: Admin, args: argparse.Namespace) -> list[TopicDescription]:
    """The topics ``--topic`` names (every topic without it), sorted; a regular expression with
    --kafka-tool; internal ones left out with --exclude-internal; "does not exist as expected"
    unless --if-exists."""
    if args.topic and not args.kafka_tool:
        try:
            found = await admin.describe_topics([args.topic])
        except AdminError as e:
            if e.error != ErrorCode.UNKNOWN_TOPIC_OR_PARTITION or not args.if_exists:
                raise
            found = []
    else:
        found = await admin.describe_topics(None)
        if args.topic:
            pattern = include_list(args.topic)
            found = [t for t in found if pattern.fullmatch(t.name)]
    found = sorted((t for t in found if not (args.exclude_internal and t.internal)), key=lambda t: t.name)
    if args.topic and not found and not args.if_exists:
        raise ValueError(f"Topic '{args.topic}' does not exist as expected")
    return found


def min_isr_lines(topic: TopicDescription, min_isr: int, live_brokers: set[int], under: bool, at: bool) -> list[str]:
    """``--under-min-isr-partitions`` (no leader, or fewer in sync than ``min_isr``) and
    ``--at-min-isr-partitions`` (exactly ``min_isr`` in sync) partition lines."""
    return [
        partition_line(topic.name, p, live_brokers) for p in topic.partitions
        if (under and (p.leader < 0 or len(p.isr) < min_isr)) or (at and len(p.isr) == min_isr)
    ]


async def _kafka_describe(admin: Admin, args: argparse.Namespace, topics: list[TopicDescription]) -> None:
    """TopicCommand.describeTopic for the options pybroker's describe does not take."""
    live = {node.node_id for node in await admin.brokers()}
    reports = (args.under_replicated_partitions, args.unavailable_partitions,
               args.under_min_isr_partitions, args.at_min_isr_partitions)
    # A topic's Configs: every non-default value (Kafka's ``!isDefault``) with --kafka-tool,
    # only its overrides otherwise.
    shown = (lambda source: source != 5) if args.kafka_tool else (lambda source: source == 1)
    for topic in topics:
        configs = await admin.describe_topic_configs(topic.name)
        overrides = ",".join(f"{k}={v}" for k, (v, source) in sorted(configs.items()) if shown(source))
        if not any(reports):
            if not args.topics_with_overrides or any(source == 1 for _, source in configs.values()):
                print(topic_line(topic, overrides))
            if not args.topics_with_overrides:
                for line in describe_lines(topic, overrides, live)[1:]:
                    print(line)
            continue
        lines = describe_lines(topic, overrides, live, args.under_replicated_partitions, args.unavailable_partitions) \
            if args.under_replicated_partitions or args.unavailable_partitions else []
        min_isr = int(configs.get("min.insync.replicas", ("1", 5))[0] or 1)
        for line in lines + min_isr_lines(topic, min_isr, live, args.under_min_isr_partitions,
                                          args.at_min_isr_partitions):
            print(line)


def _kafka_usage_error(args: argparse.Namespace, action: str) -> str | None:
    """TopicCommand's checks of the options of this block."""
    if args.if_exists and action not in ("alter", "delete", "describe"):
        return 'Option "[if-exists]" can\'t be used with option "[' + action + ']"'
    if args.if_not_exists and action != "create":
        return 'Option "[if-not-exists]" can\'t be used with option "[' + action + ']"'
    if args.exclude_internal and action not in ("list", "describe"):
        return 'Option "[exclude-internal]" can\'t be used with option "[' + action + ']"'
    for flag in ("topics_with_overrides", "under_min_isr_partitions", "at_min_isr_partitions"):
        if getattr(args, flag) and action != "describe":
            return f'Option "[{flag.replace("_", "-")}]" can\'t be used with option "[{action}]"'
    return None


# --- end of kafka-topics.sh's other options ------------------------------------------------------


def parse_replica_assignment(text: str) -> list[list[int]]:
    """Kafka's ``--replica-assignment``: ``1:2,2:3`` is partition 0 on brokers 1 and 2, partition
    1 on 2 and 3. Raises ValueError for duplicates or unequal replica counts."""
    out: list[list[int]] = []
    for index, item in enumerate(text.split(",")):
        try:
            brokers = [int(b.strip()) for b in item.split(":")]
        except ValueError:
            raise ValueError(f"--replica-assignment: {item!r} is not a colon-separated list of broker ids") from None
        duplicates = sorted({b for b in brokers if brokers.count(b) > 1})
        if duplicates:
            raise ValueError("Partition replica lists may not contain duplicate entries: " + ",".join(map(str, duplicates)))
        if out and len(brokers) != len(out[0]):
            raise ValueError(f"Partition {index} has different replication factor: {brokers}")
        out.append(brokers)
    return out


def _ids(ids: list[int]) -> str:
    return ",".join(map(str, ids))


def topic_line(topic: TopicDescription, configs: str) -> str:
    """TopicCommand's topic header (the replication factor is partition 0's replica count)."""
    replication = len(topic.partitions[0].replicas) if topic.partitions else 0
    topic_id = f"\tTopicId: {topic.topic_id}" if topic.topic_id != ZERO_TOPIC_ID else ""
    line = (f"Topic: {topic.name}{topic_id}\tPartitionCount: {len(topic.partitions)}\t"
            f"ReplicationFactor: {replication}\tConfigs: {configs}")
    counts = (topic.initial_partition_count, topic.undeleted_partition_count)
    if None not in counts and counts != (len(topic.partitions),) * 2:
        line += f"\tInitialPartitionCount: {counts[0]}\tUndeletedPartitionCount: {counts[1]}"
    return line


def has_live_leader(partition: PartitionInfo, live_brokers: set[int]) -> bool:
    return partition.leader >= 0 and partition.leader in live_brokers


def partition_line(topic: str, partition: PartitionInfo, live_brokers: set[int], marked: bool = False) -> str:
    """TopicCommand's partition line; the leader is "none" when the partition has no live one;
    ``marked``: KIP-253's marked for deletion."""
    leader = partition.leader if has_live_leader(partition, live_brokers) else "none"
    return (f"\tTopic: {topic}\tPartition: {partition.partition}\tLeader: {leader}\t"
            f"Replicas: {_ids(partition.replicas)}\tIsr: {_ids(partition.isr)}"
            + ("\tMarkedForDeletion: true" if marked else ""))


def is_under_replicated(partition: PartitionInfo) -> bool:
    return len(partition.replicas) - len(partition.isr) > 0


def describe_lines(
    topic: TopicDescription, configs: str, live_brokers: set[int],
    under_replicated: bool = False, unavailable: bool = False,
) -> list[str]:
    """What ``describe`` prints for one topic: without a filter its header and every partition;
    with ``under_replicated`` or ``unavailable`` only the matching partitions."""
    undeleted = topic.undeleted_partition_count or len(topic.partitions)

    def line(p: PartitionInfo) -> str:
        return partition_line(topic.name, p, live_brokers, marked=p.partition >= undeleted)

    if not under_replicated and not unavailable:
        return [topic_line(topic, configs)] + [line(p) for p in topic.partitions]
    return [
        line(p) for p in topic.partitions
        if (under_replicated and is_under_replicated(p)) or (unavailable and not has_live_leader(p, live_brokers))
    ]


def _configs(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"--config {item!r} is not KEY=VALUE")
        out[key.strip()] = value.strip()
    return out


async def _run(args: argparse.Namespace, action: str, settings: ClientSettings) -> int:
    async with Admin(args.bootstrap_server, **settings.admin_options("pybroker-topics")) as admin:
        kafka = args.kafka_tool
        if action == "list":
            if kafka or args.topic or args.exclude_internal:
                names = [t.name for t in await _matching_topics(admin, args)]
                if kafka or names:  # TopicCommand prints one (maybe empty) line
                    print("\n".join(names))
            else:
                for name in await admin.list_topics():
                    print(name)
            return 0
        if action != "describe" and not args.topic:
            print(f"pybroker topics {action}: --topic is required", file=sys.stderr)
            return 2
        if action == "create":
            if kafka and ("." in args.topic or "_" in args.topic):
                print("WARNING: Due to limitations in metric names, topics with a period ('.') or underscore ('_') "
                      "could collide. To avoid issues it is best to use either, but not both.")
            assignment = parse_replica_assignment(args.replica_assignment) if args.replica_assignment else None
            try:
                await admin.create_topic(args.topic, args.partitions, args.replication_factor, _configs(args.config),
                                         replica_assignment=assignment)
            except AdminError as e:
                if e.error == ErrorCode.TOPIC_ALREADY_EXISTS and args.if_not_exists:
                    return 0
                raise
            print(f"Created topic {args.topic}.")
        elif action == "delete":
            names = [t.name for t in await _matching_topics(admin, args)] \
                if kafka or args.if_exists else [args.topic]
            for name in names:
                await admin.delete_topic(name)
                if not kafka:
                    print(f"Deleted topic {name}.")
        elif action == "alter":
            names = [t.name for t in await _matching_topics(admin, args)] \
                if kafka or args.if_exists else [args.topic]
            for name in names:
                if args.partitions > 0:
                    await admin.create_partitions(name, args.partitions)
                if args.config or args.delete_config:
                    await admin.alter_topic_configs(name, _configs(args.config), args.delete_config)
                if not kafka:
                    print(f"Altered topic {name}.")
        elif action == "describe" and (kafka or args.if_exists or args.exclude_internal or args.topics_with_overrides
                                       or args.under_min_isr_partitions or args.at_min_isr_partitions):
            await _kafka_describe(admin, args, await _matching_topics(admin, args))
        elif action == "describe":
            filtered = args.under_replicated_partitions or args.unavailable_partitions
            live = {node.node_id for node in await admin.brokers()}
            for topic in await admin.describe_topics([args.topic] if args.topic else None):
                overrides = ""
                if not filtered:
                    configs = await admin.describe_topic_configs(topic.name)
                    overrides = ",".join(f"{k}={v}" for k, (v, source) in sorted(configs.items()) if source == 1)
                for line in describe_lines(topic, overrides, live, args.under_replicated_partitions,
                                           args.unavailable_partitions):
                    print(line)
    return 0


def _usage_error(args: argparse.Namespace, action: str) -> str | None:
    """Kafka's TopicCommand option checks that concern the options added here."""
    if args.replica_assignment is not None:
        if action not in ("create",):
            return "--replica-assignment is only valid with create"
        if args.partitions != -1 or args.replication_factor != -1:
            return 'Option "[replica-assignment]" can\'t be used with option "[partitions]" or "[replication-factor]"'
    if (args.under_replicated_partitions or args.unavailable_partitions) and action != "describe":
        return "--under-replicated-partitions and --unavailable-partitions are only valid with describe"
    if args.under_replicated_partitions and args.unavailable_partitions:
        return 'Option "[under-replicated-partitions]" can\'t be used with option "[unavailable-partitions]"'
    return None


def run(args: argparse.Namespace) -> int:
    chosen = [a for a in ACTIONS if getattr(args, "flag_" + a)] + ([args.action] if args.action else [])
    if len(set(chosen)) != 1:
        print("pybroker topics: give exactly one of " + ", ".join(ACTIONS), file=sys.stderr)
        return 2
    problem = _usage_error(args, chosen[0]) or _kafka_usage_error(args, chosen[0])
    if problem:
        print(f"pybroker topics: {problem}", file=sys.stderr)
        return 2
    settings = settings_for_command(args.command_config)
    if settings is None:
        return 1
    try:
        return asyncio.run(_run(args, chosen[0], settings))
    except (AdminError, KafkaClientError, ValueError) as e:
        if args.kafka_tool:  # TopicCommand.printException
            print(f"Error while executing topic command : {e.message if isinstance(e, AdminError) else e}")
        else:
            print(f"Error: {e}", file=sys.stderr)
        return 1
