"""``pybroker console-producer`` and ``pybroker console-consumer`` (like kafka-console-producer.sh
and kafka-console-consumer.sh), on the project's KIP-253 clients.

The producer sends each line of stdin as a record (``KafkaProducer``: keys by linear hashing,
re-partitioning after a partition count change); with ``--property parse.key=true`` the text
before the first ``key.separator`` (default a tab) is the key. The consumer joins a group
(``--group``, default ``console-consumer-<random>``) with the gated ``KafkaConsumer``, so keyed
records come out in order across a partition count change, and prints each record the way
Kafka's ``DefaultMessageFormatter`` does: ``CreateTime:<ts>``, ``Partition:<p>``, ``Offset:<o>``
(``print.timestamp``, ``print.partition``, ``print.offset``), the key (``print.key``), the value,
separated by ``key.separator`` and ended by ``line.separator``; a null key or value prints as
``null.literal`` (default ``null``). It stops after ``--max-messages`` records or when no record
came for ``--timeout-ms``, then prints ``Processed a total of N messages`` to stderr, as Kafka's
does. Client settings go through ``--producer-property``/``--consumer-property KEY=VALUE``.
``--partition P`` (with ``--offset earliest|latest|N``) reads one partition without a group, as
Kafka's consumer does with those options.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import sys
import uuid
from collections.abc import AsyncIterator
from typing import Literal

from pybroker import _native
from pybroker.cli.command_config import CommandConfigError, load_properties
from pybroker.client.admin import Admin, AdminError
from pybroker.client.connection import KafkaClientError
from pybroker.client.fetcher import (
    READ_COMMITTED,
    Fetcher,
    FetcherConfig,
    FetchError,
    aborted_ranges,
    drop_ranges,
)
from pybroker.client.kafka_consumer import ConsumerRecord, KafkaConsumer
from pybroker.client.kafka_producer import KafkaProducer, KafkaTimeoutError, RecordMetadata
from pybroker.client.producer import ProduceError
from pybroker.client.security import security_from_properties
from pybroker.types import TopicPartition

READ_CHUNK = 65536


class ConsoleError(ValueError):
    """Bad input or options: one line on stderr, exit 1."""


def _key_value(text: str, what: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise ConsoleError(f"{what} {text!r}: expected KEY=VALUE")
    return key, value


def _properties(items: list[str] | None, what: str) -> dict[str, str]:
    return dict(_key_value(item, what) for item in items or [])


def _unescape(text: str) -> str:
    """Separators given on the command line: ``\\t``, ``\\n`` and ``\\r`` mean the characters."""
    return text.replace("\\t", "\t").replace("\\n", "\n").replace("\\r", "\r")


def add_parser(commands: argparse._SubParsersAction) -> None:
    producer = commands.add_parser(
        "console-producer", help="produce lines of stdin to a topic (like kafka-console-producer.sh)",
        description="Read lines from standard input and send each as a record (like kafka-console-producer.sh).",
    )
    producer.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT", help="REQUIRED: the server(s) to connect to")
    producer.add_argument("--topic", required=True, help="REQUIRED: the topic to produce to")
    producer.add_argument("--property", action="append", metavar="KEY=VALUE",
                          help="line reader settings: parse.key (false), key.separator (tab), null.marker, ignore.error (false)")
    producer.add_argument("--producer-property", action="append", metavar="KEY=VALUE",
                          help="producer settings (acks, linger.ms, batch.size, compression.type, ...)")
    producer.add_argument("--producer.config", "--command-config", dest="config_file", metavar="FILE",
                          help="a properties file of producer settings, security included (security.protocol, "
                               "ssl.*, sasl.mechanism, sasl.jaas.config); --producer-property wins")
    producer.add_argument("--request-required-acks", metavar="ACKS", help="acks (default all)")
    producer.add_argument("--compression-codec", metavar="CODEC", help="none, gzip, snappy, lz4 or zstd")
    producer.set_defaults(run=run_producer)

    consumer = commands.add_parser(
        "console-consumer", help="print records of a topic (like kafka-console-consumer.sh)",
        description="Consume records of a topic as a group member and print them (like kafka-console-consumer.sh).",
    )
    consumer.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT", help="REQUIRED: the server(s) to connect to")
    consumer.add_argument("--topic", required=True, help="REQUIRED: the topic to consume")
    consumer.add_argument("--group", help="the consumer group (default: console-consumer-<random>)")
    consumer.add_argument("--from-beginning", action="store_true",
                          help="start at the earliest offset when the group has no committed offset")
    consumer.add_argument("--property", action="append", metavar="KEY=VALUE",
                          help="formatter settings: print.key, print.partition, print.offset, print.timestamp, "
                               "print.value (true), key.separator (tab), line.separator (newline), null.literal")
    consumer.add_argument("--consumer-property", action="append", metavar="KEY=VALUE",
                          help="consumer settings (session.timeout.ms, isolation.level, ...)")
    consumer.add_argument("--consumer.config", "--command-config", dest="config_file", metavar="FILE",
                          help="a properties file of consumer settings, security included (security.protocol, "
                               "ssl.*, sasl.mechanism, sasl.jaas.config); --consumer-property wins")
    consumer.add_argument("--max-messages", type=int, metavar="N", help="exit after N records")
    consumer.add_argument("--timeout-ms", type=int, metavar="MS", help="exit when no record came for MS milliseconds")
    add_partition_arguments(consumer)
    consumer.set_defaults(run=run_consumer)


# --- console-producer ----------------------------------------------------------------------------

class LineReader:
    """Kafka's ``LineMessageReader``: a line is a value, or ``key<separator>value`` with parse.key."""

    def __init__(self, props: dict[str, str]) -> None:
        self.parse_key = props.get("parse.key", "false").strip().lower() == "true"
        self.separator = _unescape(props.get("key.separator", "\t")).encode()
        self.null_marker = props["null.marker"].encode() if "null.marker" in props else None
        self.ignore_error = props.get("ignore.error", "false").strip().lower() == "true"
        if self.null_marker is not None and not self.null_marker:
            raise ConsoleError("null.marker must not be empty")

    def record(self, line: bytes, number: int) -> tuple[bytes | None, bytes | None]:
        key: bytes | None = None
        value: bytes | None = line
        if self.parse_key:
            key, sep, rest = line.partition(self.separator)
            if not sep:
                if not self.ignore_error:
                    raise ConsoleError(f"No key separator found on line number {number}: '{line.decode(errors='replace')}'")
                key, value = None, line
            else:
                value = rest
        if self.null_marker is not None:
            key = None if key == self.null_marker else key
            value = None if value == self.null_marker else value
        return key, value


async def _stdin_lines() -> AsyncIterator[bytes]:
    """Lines of stdin (without their line ending), read in chunks off the event loop."""
    loop = asyncio.get_running_loop()
    stream = sys.stdin.buffer
    assert isinstance(stream, io.BufferedIOBase)  # a BufferedReader: read1 takes what the pipe holds
    pending = b""
    while True:
        chunk = await loop.run_in_executor(None, stream.read1, READ_CHUNK)
        if not chunk:
            break
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            yield line.removesuffix(b"\r")
    if pending:
        yield pending.removesuffix(b"\r")


async def _produce(args: argparse.Namespace, reader: LineReader, props: dict[str, str]) -> int:
    failures: list[BaseException] = []

    def delivered(future: asyncio.Future[RecordMetadata]) -> None:
        if not future.cancelled() and (error := future.exception()) is not None:
            failures.append(error)

    async with KafkaProducer(props) as producer:
        number = 0
        async for line in _stdin_lines():
            number += 1
            key, value = reader.record(line, number)
            future = await producer.send(args.topic, value, key=key)
            future.add_done_callback(delivered)
        await producer.flush()
    for error in failures[:1]:
        print(f"Error when sending message to topic {args.topic}: {error}", file=sys.stderr)
    return 1 if failures else 0


def _config_file(path: str | None) -> dict[str, str]:
    """The properties of ``--producer.config``/``--consumer.config`` (none without one)."""
    if path is None:
        return {}
    try:
        return load_properties(path)
    except CommandConfigError as e:
        raise ConsoleError(str(e)) from None


def run_producer(args: argparse.Namespace) -> int:
    try:
        props = {"client.id": "console-producer", **_config_file(args.config_file),
                 "bootstrap.servers": args.bootstrap_server,
                 **_properties(args.producer_property, "--producer-property")}
        if args.request_required_acks is not None:
            props["acks"] = args.request_required_acks
        if args.compression_codec is not None:
            props["compression.type"] = args.compression_codec
        reader = LineReader(_properties(args.property, "--property"))
        return asyncio.run(_produce(args, reader, props))
    except (ConsoleError, ValueError, AdminError, KafkaClientError, KafkaTimeoutError, ProduceError, TimeoutError) as e:
        print(f"Error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


# --- console-consumer ----------------------------------------------------------------------------

class MessageFormatter:
    """Kafka's ``DefaultMessageFormatter`` (without headers and deserializers)."""

    def __init__(self, props: dict[str, str]) -> None:
        def flag(name: str, default: bool = False) -> bool:
            return props.get(name, str(default)).strip().lower() == "true"

        self.print_timestamp = flag("print.timestamp")
        self.print_partition = flag("print.partition")
        self.print_offset = flag("print.offset")
        self.print_key = flag("print.key")
        self.print_value = flag("print.value", True)
        self.key_separator = _unescape(props.get("key.separator", "\t")).encode()
        self.line_separator = _unescape(props.get("line.separator", "\n")).encode()
        self.null_literal = props.get("null.literal", "null").encode()

    def format(self, record: ConsumerRecord) -> bytes:
        columns: list[bytes] = []
        if self.print_timestamp:
            columns.append(b"CreateTime:%d" % record.timestamp if record.timestamp >= 0 else b"NO_TIMESTAMP")
        if self.print_partition:
            columns.append(b"Partition:%d" % record.partition)
        if self.print_offset:
            columns.append(b"Offset:%d" % record.offset)
        if self.print_key:
            columns.append(record.key if record.key is not None else self.null_literal)
        if self.print_value:
            columns.append(record.value if record.value is not None else self.null_literal)
        if not columns:
            return b""
        end = self.line_separator if self.print_value else self.key_separator
        return self.key_separator.join(columns) + end


async def _consume(args: argparse.Namespace, formatter: MessageFormatter, props: dict[str, str]) -> int:
    count = 0
    out = sys.stdout.buffer
    loop = asyncio.get_running_loop()
    try:
        async with KafkaConsumer(props) as consumer:
            consumer.subscribe([args.topic])
            last = loop.time()
            while args.max_messages is None or count < args.max_messages:
                wait = 100 if args.timeout_ms is None else min(100, args.timeout_ms)
                limit = None if args.max_messages is None else args.max_messages - count
                records = await consumer.poll(wait, max_records=limit)
                if not records:
                    if args.timeout_ms is not None and (loop.time() - last) * 1000 >= args.timeout_ms:
                        break
                    continue
                last = loop.time()
                out.write(b"".join(formatter.format(r) for r in records))
                out.flush()
                count += len(records)
    finally:
        print(f"Processed a total of {count} messages", file=sys.stderr, flush=True)
    return 0


# --- console-consumer --partition/--offset (issue 18: kafka-console-consumer.sh's options) ---------

NAMED_OFFSETS: tuple[Literal["earliest", "latest"], ...] = ("earliest", "latest")  # --offset, else a number


def add_partition_arguments(consumer: argparse.ArgumentParser) -> None:
    consumer.add_argument("--partition", type=int, metavar="P",
                          help="read only this partition, without a group (from --offset, else the end, or the "
                               "start with --from-beginning)")
    consumer.add_argument("--offset", metavar="OFFSET",
                          help="with --partition: where to start: earliest, latest (default) or an offset")


def partition_usage_error(args: argparse.Namespace) -> str | None:
    """ConsoleConsumer's checks of --partition and --offset, with its messages."""
    if args.partition is not None:
        if args.from_beginning and args.offset is not None:
            return "Options from-beginning and offset cannot be specified together."
        if args.group is not None:
            return "Options group and partition cannot be specified together."
    elif args.offset is not None:
        return "The partition is required when offset is specified."
    if args.offset is not None and args.offset.lower() not in NAMED_OFFSETS and (
            not args.offset.isdigit()):
        return (f"The provided offset value '{args.offset}' is incorrect. Valid values are 'earliest', 'latest', "
                "or a non-negative long.")
    return None


async def _consume_partition(args: argparse.Namespace, formatter: MessageFormatter, props: dict[str, str]) -> int:
    """Kafka's ConsumerWrapper with a partition: assign it, seek, fetch (no group, no commits)."""
    tp = TopicPartition(args.topic, args.partition)
    start: str = (args.offset or ("earliest" if args.from_beginning else "latest")).lower()
    count = 0
    out = sys.stdout.buffer
    loop = asyncio.get_running_loop()
    config = FetcherConfig.from_properties(props)
    try:
        async with Admin(args.bootstrap_server, props.get("client.id", "console-consumer"),
                         security=security_from_properties(props)) as admin:
            if start in NAMED_OFFSETS:
                listed = await admin.list_offsets([tp], start, config.isolation_level)
                offset = listed[tp].offset
            else:
                offset = int(start)  # digits (partition_usage_error)
            fetcher = Fetcher(admin, config)
            last = loop.time()
            while args.max_messages is None or count < args.max_messages:
                wait = 100 if args.timeout_ms is None else min(100, args.timeout_ms)
                fetched = await fetcher.fetch(tp, offset, max_wait_ms=wait)
                info = _native.validate_replicated_batches(fetched.records, -1) if fetched.records else None
                records = []
                if info is not None and info.batch_count:
                    records = _native.read_records(memoryview(fetched.records)[:info.valid_bytes])
                    if config.isolation_level == READ_COMMITTED:
                        records = drop_ranges(records, aborted_ranges(info.producer_batches,
                                                                      fetched.aborted_transactions or []))
                    records = [r for r in records if r[0] >= offset]
                    offset = max(offset, info.last_offset + 1)
                if args.max_messages is not None:
                    records = records[:args.max_messages - count]
                if not records:
                    if args.timeout_ms is not None and (loop.time() - last) * 1000 >= args.timeout_ms:
                        break
                    continue
                last = loop.time()
                out.write(b"".join(formatter.format(ConsumerRecord(tp.topic, tp.partition, o, ts, k, v))
                                   for o, ts, k, v in records))
                out.flush()
                count += len(records)
    finally:
        print(f"Processed a total of {count} messages", file=sys.stderr, flush=True)
    return 0


# --- end of console-consumer --partition/--offset ---------------------------------------------------


def run_consumer(args: argparse.Namespace) -> int:
    if args.max_messages is not None and args.max_messages < 1:
        print("pybroker console-consumer: --max-messages must be at least 1", file=sys.stderr)
        return 2
    problem = partition_usage_error(args)
    if problem:
        print(f"pybroker console-consumer: {problem}", file=sys.stderr)
        return 2
    try:
        from_file = _config_file(args.config_file)
        props = {"client.id": "console-consumer", **from_file,
                 "bootstrap.servers": args.bootstrap_server,
                 "group.id": args.group or from_file.get("group.id") or f"console-consumer-{uuid.uuid4().int % 100000}",
                 "auto.offset.reset": "earliest" if args.from_beginning else "latest",
                 **_properties(args.consumer_property, "--consumer-property")}
        formatter = MessageFormatter(_properties(args.property, "--property"))
        if args.partition is not None:
            return asyncio.run(_consume_partition(args, formatter, props))
        return asyncio.run(_consume(args, formatter, props))
    except (ConsoleError, ValueError, AdminError, KafkaClientError, TimeoutError, FetchError) as e:
        print(f"Error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
