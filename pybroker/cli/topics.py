"""``pybroker topics``: create, list, describe, alter and delete topics (like kafka-topics.sh)."""

from __future__ import annotations

import argparse
import asyncio
import sys

from pybroker.client.admin import Admin, AdminError
from pybroker.client.connection import KafkaClientError

ACTIONS = ("create", "list", "describe", "alter", "delete")


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser("topics", help="manage topics (like kafka-topics.sh)")
    parser.add_argument("action", nargs="?", choices=ACTIONS, help="what to do (or use --create, --list …)")
    for action in ACTIONS:
        parser.add_argument(f"--{action}", dest="flag_" + action, action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--bootstrap-server", default="127.0.0.1:9092", metavar="HOST:PORT")
    parser.add_argument("--topic", help="topic name")
    parser.add_argument("--partitions", type=int, default=-1, help="partition count (create) or new total (alter)")
    parser.add_argument("--replication-factor", type=int, default=-1)
    parser.add_argument("--config", action="append", default=[], metavar="KEY=VALUE", help="topic config (repeatable)")
    parser.add_argument("--delete-config", action="append", default=[], metavar="KEY", help="remove a config override (alter)")
    parser.set_defaults(run=run)


def _configs(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"--config {item!r} is not KEY=VALUE")
        out[key.strip()] = value.strip()
    return out


async def _run(args: argparse.Namespace, action: str) -> int:
    async with Admin(args.bootstrap_server, "pybroker-topics") as admin:
        if action == "list":
            for name in await admin.list_topics():
                print(name)
            return 0
        if action != "describe" and not args.topic:
            print(f"pybroker topics {action}: --topic is required", file=sys.stderr)
            return 2
        if action == "create":
            await admin.create_topic(args.topic, args.partitions, args.replication_factor, _configs(args.config))
            print(f"Created topic {args.topic}.")
        elif action == "delete":
            await admin.delete_topic(args.topic)
            print(f"Deleted topic {args.topic}.")
        elif action == "alter":
            if args.partitions > 0:
                await admin.create_partitions(args.topic, args.partitions)
            if args.config or args.delete_config:
                await admin.alter_topic_configs(args.topic, _configs(args.config), args.delete_config)
            print(f"Altered topic {args.topic}.")
        elif action == "describe":
            for topic in await admin.describe_topics([args.topic] if args.topic else None):
                configs = await admin.describe_topic_configs(topic.name)
                overrides = ",".join(f"{k}={v}" for k, (v, source) in sorted(configs.items()) if source == 1)
                replication = len(topic.partitions[0].replicas) if topic.partitions else 0
                print(f"Topic: {topic.name}\tTopicId: {topic.topic_id}\tPartitionCount: {len(topic.partitions)}\t"
                      f"ReplicationFactor: {replication}\tConfigs: {overrides}")
                for p in topic.partitions:
                    print(f"\tTopic: {topic.name}\tPartition: {p.partition}\tLeader: {p.leader}\t"
                          f"Replicas: {','.join(map(str, p.replicas))}\tIsr: {','.join(map(str, p.isr))}")
    return 0


def run(args: argparse.Namespace) -> int:
    chosen = [a for a in ACTIONS if getattr(args, "flag_" + a)] + ([args.action] if args.action else [])
    if len(set(chosen)) != 1:
        print("pybroker topics: give exactly one of " + ", ".join(ACTIONS), file=sys.stderr)
        return 2
    try:
        return asyncio.run(_run(args, chosen[0]))
    except (AdminError, KafkaClientError, ValueError) as e:
        print(f"Error: {e}", file=sys.stderr)
        return 1
