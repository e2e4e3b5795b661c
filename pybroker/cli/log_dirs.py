"""``pybroker log-dirs``: query the log dirs of brokers (like kafka-log-dirs.sh).

``--describe`` sends DescribeLogDirs to every broker of ``--broker-list`` (default: every broker
of the cluster) and prints, as Kafka's ``LogDirsCommand``::

    Querying brokers for log directories information
    Received log directory information from brokers 1,2
    {"version":1,"brokers":[{"broker":1,"logDirs":[{"logDir":"/data/a","error":null,
     "partitions":[{"partition":"t-0","size":1234,"offsetLag":0,"isFuture":false}]}]}]}

``--topic-list t1,t2`` keeps only those topics' replicas. A dir's ``error`` is the Java class
name of its error (``org.apache.kafka.common.errors.KafkaStorageException`` for an offline
dir), as Kafka prints it. Brokers not in the cluster: ``ERROR: The given brokers do not exist
from --broker-list: …`` and exit 1; usage errors exit 2.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys

from pybroker.cli.command_config import AdminOptions, settings_for_command
from pybroker.client.admin import Admin, AdminError, LogDirInfo
from pybroker.client.connection import KafkaClientError
from pybroker.common.errors import ErrorCode

PROG = "pybroker log-dirs"


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "log-dirs", help="query the log directories of brokers (like kafka-log-dirs.sh)",
        description="This tool helps to query log directory usage on the specified brokers.",
    )
    parser.add_argument("--bootstrap-server", metavar="HOST:PORT", help="REQUIRED: the server(s) to use for bootstrapping")
    parser.add_argument("--command-config", metavar="FILE", help="Property file containing configs to be passed to Admin Client.")
    parser.add_argument("--describe", action="store_true", help="Describe the specified log directories on the specified brokers.")
    parser.add_argument("--topic-list", default="", metavar="TOPICS",
                        help='The list of topics to be queried in the form "topic1,topic2,topic3". All topics will be '
                             "queried if no topic list is specified")
    parser.add_argument("--broker-list", default="", metavar="BROKERS",
                        help='The list of brokers to be queried in the form "0,1,2". All brokers in the cluster will be '
                             "queried if no broker list is specified")
    parser.set_defaults(run=run)


def java_error_name(error: int) -> str | None:
    """The Java exception class Kafka's tool prints for a dir's error code (None: no error)."""
    if error == ErrorCode.NONE:
        return None
    try:
        name = ErrorCode(error).name
    except ValueError:
        return "org.apache.kafka.common.errors.UnknownServerException"
    if name == "KAFKA_STORAGE_ERROR":
        return "org.apache.kafka.common.errors.KafkaStorageException"
    camel = "".join(word.capitalize() for word in name.split("_"))
    return f"org.apache.kafka.common.errors.{camel.removesuffix('Error')}Exception"


def format_as_json(described: dict[int, list[LogDirInfo]], topics: set[str]) -> str:
    """Kafka's ``formatAsJson``: one compact JSON line."""
    return json.dumps({"version": 1, "brokers": [
        {"broker": broker, "logDirs": [
            {"logDir": info.path, "error": java_error_name(info.error), "partitions": [
                {"partition": str(r.topic_partition), "size": r.size, "offsetLag": r.offset_lag, "isFuture": r.is_future}
                for r in info.replicas if not topics or r.topic_partition.topic in topics
            ]}
            for info in infos
        ]}
        for broker, infos in described.items()
    ]}, separators=(",", ":"))


async def _describe(args: argparse.Namespace, client: AdminOptions) -> int:
    topics = {t for t in args.topic_list.split(",") if t}
    asked = list(dict.fromkeys(int(b) for b in args.broker_list.split(",") if b))
    async with Admin(args.bootstrap_server, **client) as admin:
        cluster = [node.node_id for node in await admin.brokers()]
        missing = [b for b in asked if b not in cluster]
        if missing:
            print(f"ERROR: The given brokers do not exist from --broker-list: {','.join(map(str, missing))}. "
                  f"Current existent brokers: {','.join(map(str, cluster))}", file=sys.stderr)
            return 1
        brokers = asked or cluster
        print("Querying brokers for log directories information")
        described = await admin.describe_log_dirs(brokers)
    print(f"Received log directory information from brokers {','.join(map(str, brokers))}")
    print(format_as_json(described, topics))
    return 0


def run(args: argparse.Namespace) -> int:
    missing = [name for name, given in (("bootstrap-server", args.bootstrap_server), ("describe", args.describe))
               if not given]
    if missing:
        print(f"{PROG}: Missing required argument(s): {', '.join(f'[{m}]' for m in missing)}", file=sys.stderr)
        return 2
    try:
        [int(b) for b in args.broker_list.split(",") if b]
    except ValueError as e:
        print(f"{PROG}: --broker-list: {e}", file=sys.stderr)
        return 2
    settings = settings_for_command(args.command_config)
    if settings is None:
        return 1
    client = settings.admin_options("pybroker-log-dirs")
    try:
        return asyncio.run(_describe(args, client))
    except (AdminError, KafkaClientError, OSError, TimeoutError) as e:
        print(f"Error: {e or type(e).__name__}", file=sys.stderr)
        return 1
