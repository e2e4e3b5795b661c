"""``pybroker delete-records``: delete the records of partitions below given offsets (like
kafka-delete-records.sh, plus KIP-1343's ``--leader-only``).

The offset file is Kafka's: ``{"version": 1, "partitions": [{"topic": "t", "partition": 0,
"offset": 5}]}`` (offset -1: the high watermark). A partition named twice is refused before
anything is sent. Output, as Kafka prints it, with the leader's log start offset added (-1 from
a broker older than DeleteRecords v3)::

    Executing records delete operation
    Records delete operation completed:
    partition: t-0	low_watermark: 5	leader_log_start_offset: 5
    partition: t-1	error: OFFSET_OUT_OF_RANGE: The requested offset is not within ...

Exits 1 when any partition failed, or with one ``Error: …`` line on stderr when the command could
not run (bad file, duplicates, unreachable broker); usage errors exit 2.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

from pybroker.cli.command_config import AdminOptions, CommandConfigError, read_client_settings
from pybroker.client.admin import Admin, AdminError, DeletedRecords
from pybroker.client.connection import KafkaClientError
from pybroker.types import TopicPartition

PROG = "pybroker delete-records"
DEFAULT_TIMEOUT_MS = 30000
JSON_FORMAT = '{"partitions": [{"topic": "foo", "partition": 1, "offset": 1}], "version": 1}'


class OffsetFileError(ValueError):
    """An offset JSON file that cannot be used."""


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "delete-records", help="delete records of partitions below an offset (like kafka-delete-records.sh)",
        description="Delete the records of the given partitions down to the specified offset "
                    "(like kafka-delete-records.sh).",
    )
    parser.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT", help="REQUIRED: the server(s) to connect to")
    parser.add_argument("--offset-json-file", required=True, metavar="FILE",
                        help=f"REQUIRED: the JSON file with the offset per partition (-1: the high watermark): {JSON_FORMAT}")
    parser.add_argument("--command-config", metavar="FILE",
                        help="a properties file of admin client settings (client.id, request.timeout.ms, "
                             "default.api.timeout.ms, and security: security.protocol, ssl.*, sasl.mechanism, sasl.jaas.config)")
    parser.add_argument("--leader-only", action="store_true",
                        help="answer once each leader has deleted, without waiting for the followers "
                             "(KIP-1343; needs brokers with DeleteRecords v3)")
    parser.add_argument("--timeout-ms", type=int, metavar="N",
                        help=f"how long to wait for the replicas and retry leader changes "
                             f"(default: default.api.timeout.ms of --command-config, else {DEFAULT_TIMEOUT_MS})")
    parser.set_defaults(run=run)


def parse_offset_json(text: str, source: str = "offset json file") -> list[tuple[TopicPartition, int]]:
    """Kafka's offset file, in file order (duplicates kept: the caller refuses them)."""
    try:
        document = json.loads(text)
    except json.JSONDecodeError as e:
        raise OffsetFileError(f"{source} is not valid JSON: {e}") from None
    if not isinstance(document, dict):
        raise OffsetFileError(f"{source}: expected a JSON object like {JSON_FORMAT}")
    version = document.get("version", 1)
    if version != 1 or isinstance(version, bool):
        raise OffsetFileError(f"{source}: Not supported version field value {json.dumps(version)}")
    partitions = document.get("partitions")
    if partitions is None:
        raise OffsetFileError(f"{source}: Missing partitions field")
    if not isinstance(partitions, list):
        raise OffsetFileError(f"{source}: \"partitions\" must be a list")
    out = []
    for i, entry in enumerate(partitions):
        where = f"{source}: partitions[{i}]"
        if not isinstance(entry, dict):
            raise OffsetFileError(f"{where}: expected an object with topic, partition and offset")
        for key in ("topic", "partition", "offset"):
            if key not in entry:
                raise OffsetFileError(f"{where}: missing \"{key}\"")
        topic, partition, offset = entry["topic"], entry["partition"], entry["offset"]
        if not isinstance(topic, str):
            raise OffsetFileError(f"{where}: \"topic\" must be a string")
        if not isinstance(partition, int) or isinstance(partition, bool) or not 0 <= partition < 2**31:
            raise OffsetFileError(f"{where}: \"partition\" must be an integer from 0 to 2147483647")
        if not isinstance(offset, int) or isinstance(offset, bool) or not -(2**63) <= offset < 2**63:
            raise OffsetFileError(f"{where}: \"offset\" must be a 64-bit integer")
        out.append((TopicPartition(topic, partition), offset))
    return out


def duplicates(entries: list[tuple[TopicPartition, int]]) -> list[TopicPartition]:
    seen: set[TopicPartition] = set()
    repeated: dict[TopicPartition, None] = {}
    for tp, _ in entries:
        if tp in seen:
            repeated[tp] = None
        seen.add(tp)
    return list(repeated)


def format_result(tp: TopicPartition, outcome: DeletedRecords | AdminError) -> str:
    if isinstance(outcome, AdminError):
        return f"partition: {tp}\terror: {outcome.error.name}: {outcome.message}"
    return (f"partition: {tp}\tlow_watermark: {outcome.low_watermark}"
            f"\tleader_log_start_offset: {outcome.leader_log_start_offset}")


async def _run(
    args: argparse.Namespace, offsets: dict[TopicPartition, int], client: AdminOptions, timeout_ms: int,
) -> int:
    async with Admin(args.bootstrap_server, **client) as admin:
        print("Executing records delete operation", flush=True)
        results = await admin.delete_records(offsets, leader_only=args.leader_only, timeout_ms=timeout_ms)
    print("Records delete operation completed:")
    for tp, outcome in results.items():
        print(format_result(tp, outcome))
    return 1 if any(isinstance(o, AdminError) for o in results.values()) else 0


def run(args: argparse.Namespace) -> int:
    if args.timeout_ms is not None and args.timeout_ms < 0:
        print(f"{PROG}: --timeout-ms must be at least 0", file=sys.stderr)
        return 2
    try:
        settings = read_client_settings(args.command_config)
        try:
            text = Path(args.offset_json_file).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise OffsetFileError(f"cannot read offset json file {args.offset_json_file}: {e}") from None
        entries = parse_offset_json(text, f"offset json file {args.offset_json_file}")
        repeated = duplicates(entries)
        if repeated:
            raise OffsetFileError("Offset json file contains duplicate topic partitions: " + ",".join(map(str, repeated)))
    except (CommandConfigError, OffsetFileError) as e:
        print(f"Error: {e}", file=sys.stderr)
        return 1
    for warning in settings.warnings:
        print(f"Warning: --command-config {args.command_config}: {warning}", file=sys.stderr)
    timeout_ms = args.timeout_ms if args.timeout_ms is not None else (settings.default_api_timeout_ms or DEFAULT_TIMEOUT_MS)
    client = settings.admin_options("pybroker-delete-records")
    try:
        return asyncio.run(_run(args, dict(entries), client, timeout_ms))
    except (AdminError, KafkaClientError, ValueError, TimeoutError) as e:
        print(f"Error: {e}", file=sys.stderr)
        return 1
