"""Options of the ``pybroker`` Spark data source: the names, defaults and checks of Spark's own
Kafka source and sink, parsed once on the driver into plain picklable values.

Spark hands a Python data source its options as a case-insensitive map of strings (keys
lower-cased), so every lookup here is by lower-cased name and every value is parsed from text.
``kafka.``-prefixed options are Kafka client properties: they go to the producer or fetcher with
the prefix removed (``kafka.acks`` → ``acks``), as Spark's connector passes them to Kafka's
clients. Error messages follow the Spark connector's wording where it has one.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from pybroker.client.fetcher import FetcherConfig
from pybroker.types import TopicPartition

EARLIEST, LATEST = -2, -1  # Spark's sentinels in startingOffsets / endingOffsets JSON


@dataclass(frozen=True)
class OffsetSpec:
    """``earliest``, ``latest``, or offsets per partition (``by_partition``, sentinels allowed);
    or timestamps (ms) per partition / one timestamp for all, for ``startingOffsetsByTimestamp`` /
    ``startingTimestamp``. Partitions a JSON spec does not name take ``default``."""

    kind: str  # "earliest" | "latest" | "offsets" | "timestamps"
    by_partition: dict[TopicPartition, int] = field(default_factory=dict)
    global_timestamp: int | None = None


@dataclass(frozen=True)
class SourceOptions:
    """Everything the reader needs, parsed on the driver."""

    bootstrap_servers: str
    subscribe: tuple[str, ...] | None
    subscribe_pattern: str | None
    assign: tuple[TopicPartition, ...] | None
    starting: OffsetSpec
    ending: OffsetSpec
    fail_on_data_loss: bool
    include_headers: bool
    min_partitions: int | None
    max_records_per_partition: int | None
    max_offsets_per_trigger: int | None
    kafka: dict[str, str]
    isolation_level: int = 0  # kafka.isolation.level: 0 read_uncommitted (Kafka's default), 1 read_committed


@dataclass(frozen=True)
class SinkOptions:
    """Everything the writer needs, parsed on the driver."""

    bootstrap_servers: str
    topic: str | None
    kafka: dict[str, str]
    summary_path: str | None  # pybroker.writeSummaryPath: commit summaries as JSON lines


def lowercase_keys(options: Mapping[str, str]) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in options.items()}


def kafka_properties(options: Mapping[str, str]) -> dict[str, str]:
    """The ``kafka.``-prefixed options, prefix removed, as Kafka client properties."""
    return {k[len("kafka."):]: v for k, v in lowercase_keys(options).items() if k.startswith("kafka.")}


def _bootstrap(opts: dict[str, str], role: str) -> str:
    servers = opts.get("kafka.bootstrap.servers", "").strip()
    if not servers:
        raise ValueError(f"Option 'kafka.bootstrap.servers' must be specified for configuring Kafka {role}")
    return servers


def bool_option(opts: dict[str, str], name: str, default: bool) -> bool:
    raw = opts.get(name.lower())
    if raw is None:
        return default
    if raw.strip().lower() in ("true", "false"):
        return raw.strip().lower() == "true"
    raise ValueError(f"Option '{name}' must be true or false, got {raw!r}")


def _positive(opts: dict[str, str], name: str) -> int | None:
    raw = opts.get(name.lower())
    if raw is None:
        return None
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"Option '{name}' must be a positive integer, got {raw!r}") from None
    if value <= 0:
        raise ValueError(f"Option '{name}' must be a positive integer, got {raw!r}")
    return value


def _partition_json(name: str, raw: str) -> dict[TopicPartition, int]:
    try:
        parsed = json.loads(raw)
        return {TopicPartition(topic, int(p)): int(v) for topic, parts in parsed.items() for p, v in parts.items()}
    except (ValueError, AttributeError, TypeError):
        raise ValueError(
            f"Option '{name}': expected e.g. {{\"topicA\":{{\"0\":23,\"1\":-1}},\"topicB\":{{\"0\":-2}}}}, got {raw}"
        ) from None


def parse_offset_spec(opts: dict[str, str], name: str, default: str, streaming: bool) -> OffsetSpec:
    """``startingOffsets`` / ``endingOffsets``, with Spark's rules for batch queries."""
    raw = opts.get(name.lower(), default).strip()
    starting = name == "startingOffsets"
    if raw.lower() in ("earliest", "latest"):
        kind = raw.lower()
        if not streaming and starting and kind == "latest":
            raise ValueError("starting offset can't be latest for batch queries on Kafka")
        if not streaming and not starting and kind == "earliest":
            raise ValueError("ending offset can't be earliest for batch queries on Kafka")
        return OffsetSpec(kind)
    offsets = _partition_json(name, raw)
    for tp, offset in offsets.items():
        if offset < EARLIEST:
            raise ValueError(f"Option '{name}': offset {offset} for {tp.topic}-{tp.partition} is not valid")
        if not streaming and starting and offset == LATEST:
            raise ValueError(f"starting offset for {tp.topic}-{tp.partition} can't be latest for batch queries on Kafka")
        if not streaming and not starting and offset == EARLIEST:
            raise ValueError(f"ending offset for {tp.topic}-{tp.partition} can't be earliest for batch queries on Kafka")
    return OffsetSpec("offsets", offsets)


def _starting(opts: dict[str, str], streaming: bool) -> OffsetSpec:
    """startingTimestamp > startingOffsetsByTimestamp > startingOffsets, as Spark ranks them."""
    if "startingtimestamp" in opts:
        try:
            return OffsetSpec("timestamps", global_timestamp=int(opts["startingtimestamp"]))
        except ValueError:
            raise ValueError(f"Option 'startingTimestamp' must be a timestamp in ms, got {opts['startingtimestamp']!r}") from None
    if "startingoffsetsbytimestamp" in opts:
        return OffsetSpec("timestamps", _partition_json("startingOffsetsByTimestamp", opts["startingoffsetsbytimestamp"]))
    return parse_offset_spec(opts, "startingOffsets", "latest" if streaming else "earliest", streaming)


def source_options(options: Mapping[str, str], streaming: bool) -> SourceOptions:
    """Parse and check the reader's options (raises ValueError with the problem)."""
    opts = lowercase_keys(options)
    strategies = [k for k in ("subscribe", "subscribepattern", "assign") if k in opts]
    if len(strategies) != 1:
        raise ValueError(
            "One of the following options must be specified for Kafka source: subscribe, subscribePattern, assign. "
            "See the docs for more details."
            if not strategies else
            f"Only one of the following options can be specified for Kafka source: {', '.join(strategies)}"
        )
    subscribe = pattern = assign = None
    if "subscribe" in opts:
        subscribe = tuple(t.strip() for t in opts["subscribe"].split(",") if t.strip())
        if not subscribe:
            raise ValueError(f"No topics to subscribe to as specified value for option 'subscribe' is '{opts['subscribe']}'")
    elif "subscribepattern" in opts:
        pattern = opts["subscribepattern"].strip()
        if not pattern:
            raise ValueError("Pattern to subscribe is empty as specified value for option 'subscribePattern' is ''")
        try:
            re.compile(pattern)
        except re.error as e:
            raise ValueError(f"Option 'subscribePattern': {pattern!r} is not a valid regular expression: {e}") from None
    else:
        try:
            parsed = json.loads(opts["assign"])
            assign = tuple(TopicPartition(t, int(p)) for t, ps in parsed.items() for p in ps)
        except (ValueError, AttributeError, TypeError):
            raise ValueError(
                f"Option 'assign': expected e.g. {{\"topicA\":[0,1],\"topicB\":[0,1]}}, got {opts['assign']}"
            ) from None
        if not assign:
            raise ValueError(f"No topic partitions to assign as specified value for option 'assign' is '{opts['assign']}'")
    if streaming and "endingoffsets" in opts:
        raise ValueError("Ending offset not valid in streaming queries")
    kafka = kafka_properties(opts)
    return SourceOptions(
        bootstrap_servers=_bootstrap(opts, "consumer"),
        subscribe=subscribe,
        subscribe_pattern=pattern,
        assign=assign,
        starting=_starting(opts, streaming),
        ending=OffsetSpec("latest") if streaming else parse_offset_spec(opts, "endingOffsets", "latest", False),
        fail_on_data_loss=bool_option(opts, "failOnDataLoss", True),
        include_headers=bool_option(opts, "includeHeaders", False),
        min_partitions=_positive(opts, "minPartitions"),
        max_records_per_partition=_positive(opts, "maxRecordsPerPartition"),
        max_offsets_per_trigger=_positive(opts, "maxOffsetsPerTrigger"),
        kafka=kafka,
        isolation_level=FetcherConfig.from_properties(kafka).isolation_level,
    )


def sink_options(options: Mapping[str, str]) -> SinkOptions:
    """Parse and check the writer's options (raises ValueError with the problem)."""
    opts = lowercase_keys(options)
    topic = opts.get("topic")
    return SinkOptions(
        bootstrap_servers=_bootstrap(opts, "producer"),
        topic=topic.strip() if topic and topic.strip() else None,
        kafka=kafka_properties(opts),
        summary_path=opts.get("pybroker.writesummarypath"),
    )
