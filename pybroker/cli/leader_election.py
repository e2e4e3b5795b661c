"""``pybroker leader-election``: elect preferred or unclean leaders (like kafka-leader-election.sh).

Sends one ElectLeaders request to the controller for the partitions chosen by exactly one of
``--topic``/``--partition``, ``--path-to-json-file`` (Kafka's ``{"partitions": [{"topic": "foo",
"partition": 1}]}``) or ``--all-topic-partitions`` (every partition; the controller then reports
only those that needed an election). ``--election-type preferred`` moves leadership back to each
partition's preferred (first) replica when it is alive and in sync; ``unclean`` elects a leader for
partitions that have none, from outside the ISR if need be. Output, as Kafka prints it::

    Successfully completed leader election (PREFERRED) for partitions t-0, t-2
    Valid replica already elected for partitions t-1
    Error completing leader election (PREFERRED) for partition: t-3: PREFERRED_LEADER_NOT_AVAILABLE: …

Exits 1 when any partition failed (``Error: N replica(s) could not be elected`` on stderr) or the
command could not run (one ``Error: …`` line); usage errors exit 2.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

from pybroker.cli.command_config import AdminOptions, CommandConfigError, read_client_settings
from pybroker.client.admin import PREFERRED_ELECTION, UNCLEAN_ELECTION, Admin, AdminError
from pybroker.client.connection import KafkaClientError
from pybroker.common.errors import ErrorCode
from pybroker.types import TopicPartition

PROG = "pybroker leader-election"
TIMEOUT_MS = 30000  # Kafka's tool: 30 s for the call, half of it per request
ELECTION_TYPES = {"preferred": PREFERRED_ELECTION, "unclean": UNCLEAN_ELECTION}
JSON_FORMAT = '{"partitions": [{"topic": "foo", "partition": 1}, {"topic": "foobar", "partition": 2}]}'


class ElectionDataError(ValueError):
    """A partitions JSON file that cannot be used."""


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "leader-election", help="elect preferred or unclean partition leaders (like kafka-leader-election.sh)",
        description="Attempt to elect a new leader for a set of topic partitions. The type of elections supported "
                    "are preferred replicas and unclean replicas (like kafka-leader-election.sh).",
    )
    parser.add_argument("--bootstrap-server", metavar="HOST:PORT", help="REQUIRED: the server(s) to connect to")
    parser.add_argument("--election-type", type=str.lower, choices=sorted(ELECTION_TYPES), metavar="TYPE",
                        help='REQUIRED: "preferred" (back to the preferred replica, if in sync) or "unclean" '
                             "(a leader for partitions without one, even from outside the ISR)")
    parser.add_argument("--topic", help="the topic of the partition to elect (with --partition)")
    parser.add_argument("--partition", type=int, help="the partition to elect (with --topic)")
    parser.add_argument("--all-topic-partitions", action="store_true",
                        help="every partition that needs an election of this type")
    parser.add_argument("--path-to-json-file", metavar="FILE", help=f"the partitions to elect, as JSON: {JSON_FORMAT}")
    parser.add_argument("--admin.config", dest="admin_config", metavar="FILE",
                        help="a properties file of admin client settings (client.id, request.timeout.ms, "
                             "default.api.timeout.ms)")
    parser.set_defaults(run=run)


def usage_error(args: argparse.Namespace) -> str | None:
    """Kafka's LeaderElectionCommand.validate, with its messages."""
    missing = [name for name, value in (("election-type", args.election_type), ("bootstrap-server", args.bootstrap_server))
               if value is None]
    if missing:
        return "Missing required option(s): " + ", ".join(missing)
    chosen = sum((args.topic is not None, args.all_topic_partitions, args.path_to_json_file is not None))
    if chosen != 1:
        return ("One and only one of the following options is required: "
                "topic, all-topic-partitions, path-to-json-file")
    if args.topic is not None and args.partition is None:
        return "Missing required option(s): partition"
    if args.topic is None and args.partition is not None:
        return "Option partition is only allowed if topic is used"
    return None


def parse_election_data(text: str, source: str = "json file") -> list[TopicPartition]:
    """Kafka's election file: ``{"partitions": [{"topic": ..., "partition": ...}]}``; a partition
    named twice is refused."""
    try:
        document = json.loads(text)
    except json.JSONDecodeError as e:
        raise ElectionDataError(f"{source} is not valid JSON: {e}") from None
    if not isinstance(document, dict):
        raise ElectionDataError("Replica election data is empty")
    partitions = document.get("partitions")
    if partitions is None:
        raise ElectionDataError('Replica election data is missing "partitions" field')
    if not isinstance(partitions, list):
        raise ElectionDataError(f'{source}: "partitions" must be a list')
    out: list[TopicPartition] = []
    for i, entry in enumerate(partitions):
        topic = entry.get("topic") if isinstance(entry, dict) else None
        partition = entry.get("partition") if isinstance(entry, dict) else None
        if not isinstance(topic, str) or not isinstance(partition, int) or isinstance(partition, bool):
            raise ElectionDataError(f'{source}: partitions[{i}] must be {{"topic": <string>, "partition": <int>}}')
        out.append(TopicPartition(topic, partition))
    repeated = list(dict.fromkeys(tp for tp in out if out.count(tp) > 1))
    if repeated:
        raise ElectionDataError("Replica election data contains duplicate partitions: " + ",".join(map(str, repeated)))
    return out


def report(election_type: str, results: dict[TopicPartition, AdminError | None]) -> tuple[list[str], int]:
    """Kafka's output lines for the results, and how many partitions failed."""
    name = election_type.upper()
    ordered = sorted(results, key=lambda tp: (tp.topic, tp.partition))
    succeeded = [tp for tp in ordered if results[tp] is None]
    noop = [tp for tp in ordered if (e := results[tp]) is not None and e.error == ErrorCode.ELECTION_NOT_NEEDED]
    failed = [tp for tp in ordered if (e := results[tp]) is not None and e.error != ErrorCode.ELECTION_NOT_NEEDED]
    lines = []
    if succeeded:
        lines.append(f"Successfully completed leader election ({name}) for partitions {', '.join(map(str, succeeded))}")
    if noop:
        lines.append(f"Valid replica already elected for partitions {', '.join(map(str, noop))}")
    for tp in failed:
        error = results[tp]
        assert error is not None
        lines.append(f"Error completing leader election ({name}) for partition: {tp}: {error.error.name}: {error.message}")
    return lines, len(failed)


async def _run(
    args: argparse.Namespace, partitions: list[TopicPartition] | None, client: AdminOptions, timeout_ms: int,
) -> int:
    async with Admin(args.bootstrap_server, **client) as admin:
        try:
            results = await admin.elect_leaders(ELECTION_TYPES[args.election_type], partitions, timeout_ms)
        except TimeoutError:
            print("Timeout waiting for election results")
            raise
        except AdminError as e:
            if e.error == ErrorCode.CLUSTER_AUTHORIZATION_FAILED:
                print("Not authorized to perform leader election")
            raise
    lines, failures = report(args.election_type, results)
    for line in lines:
        print(line)
    if failures:
        print(f"Error: {failures} replica(s) could not be elected", file=sys.stderr)
        return 1
    return 0


def run(args: argparse.Namespace) -> int:
    problem = usage_error(args)
    if problem:
        print(f"{PROG}: {problem}", file=sys.stderr)
        return 2
    try:
        settings = read_client_settings(args.admin_config)
        partitions: list[TopicPartition] | None = None
        if args.path_to_json_file is not None:
            try:
                text = Path(args.path_to_json_file).read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as e:
                raise ElectionDataError(f"cannot read {args.path_to_json_file}: {e}") from None
            partitions = parse_election_data(text, args.path_to_json_file)
        elif args.topic is not None:
            partitions = [TopicPartition(args.topic, args.partition)]
    except (CommandConfigError, ElectionDataError) as e:
        print(f"Error: {e}", file=sys.stderr)
        return 1
    for warning in settings.warnings:
        print(f"Warning: --admin.config {args.admin_config}: {warning}", file=sys.stderr)
    timeout_ms = settings.default_api_timeout_ms or TIMEOUT_MS
    client: AdminOptions = {
        "client_id": settings.client_id or "pybroker-leader-election",
        "security": settings.security,
        "request_timeout": (settings.request_timeout_ms or TIMEOUT_MS // 2) / 1000,
        "retry_timeout": timeout_ms / 1000,
    }
    try:
        return asyncio.run(_run(args, partitions, client, timeout_ms))
    except (AdminError, KafkaClientError, ValueError, TimeoutError) as e:
        print(f"Error: {e or type(e).__name__}", file=sys.stderr)
        return 1
