"""Topic-level log configuration: Kafka's topic config names, types, defaults and validation.

Owns the table of topic configs (``cleanup.policy``, ``retention.ms``, ``segment.bytes`` …), the
broker property each one falls back to (its synonym: ``log.retention.ms`` for ``retention.ms``),
and ``LogConfig``, the resolved per-topic view a ``Log`` reads. It knows nothing of the network or
of requests; DescribeConfigs/AlterConfigs handlers use the table to validate and describe.
Kafka 3.x topic configs that pybroker accepts without effect (``message.format.version``,
``message.downconversion.enable``, ``preallocate``) are in the table too, with Kafka's
validation, and ``ignored_config_warnings`` gives Kafka's WARN for an ignored old format.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1


class ConfigError(ValueError):
    """A config value that is unknown or out of range; maps to INVALID_CONFIG (40)."""


def parse_bool(value: str) -> bool:
    lowered = value.strip().lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    raise ConfigError(f"expected true or false, got {value!r}")


def parse_int(value: str) -> int:
    try:
        return int(value.strip())
    except ValueError:
        raise ConfigError(f"expected an integer, got {value!r}") from None


def parse_list(value: str) -> list[str]:
    return [item.strip() for item in value.split(",") if item.strip()]


@dataclass(frozen=True)
class ConfigDef:
    """One config: its Kafka name, type (as DescribeConfigs v3+ reports it), default and checks."""

    name: str
    type: str  # BOOLEAN, STRING, INT, SHORT, LONG, DOUBLE, LIST, CLASS, PASSWORD
    default: Any
    doc: str
    synonym: str | None = None  # broker property supplying the default
    minimum: int | float | None = None
    choices: tuple[str, ...] | None = None
    maximum: float | None = None  # DOUBLE only
    # A further check of the parsed value, given (name, value): raises ConfigError.
    validator: Callable[[str, Any], None] | None = None

    def parse(self, raw: str) -> Any:
        """Convert a string value to its typed form, raising ConfigError if it is invalid, in the
        words of Kafka's ConfigDef: "Invalid value V for configuration N: <reason>", V the parsed
        value when it parsed ("2.0"), else as given."""
        text = raw.strip()
        value: Any
        if self.type == "BOOLEAN":
            if text.lower() not in ("true", "false"):
                raise self.invalid(text, "Expected value to be either true or false")
            value = text.lower() == "true"
        elif self.type in ("INT", "LONG", "SHORT"):
            limit = {"INT": INT_MAX, "SHORT": 2**15 - 1}.get(self.type, LONG_MAX)
            try:
                value = int(text)
            except ValueError:
                value = None
            if value is None or not -limit - 1 <= value <= limit:
                raise self.invalid(text, f"Not a number of type {self.type}")
            if self.minimum is not None and value < self.minimum:
                raise self.invalid(value, f"Value must be at least {self.minimum}")
        elif self.type == "DOUBLE":
            try:
                value = float(text)
            except ValueError:
                raise self.invalid(text, "Not a number of type DOUBLE") from None
            if self.minimum is not None and value < self.minimum:
                raise self.invalid(value, f"Value must be at least {self.minimum}")
            if self.maximum is not None and value > self.maximum:
                raise self.invalid(value, f"Value must be no more than {self.maximum}")
        elif self.type == "LIST":
            value = parse_list(raw)
            if self.choices is not None:
                for item in value:
                    if item not in self.choices:
                        raise self.invalid(item, f"String must be one of: {', '.join(self.choices)}")
        else:
            value = text
            if self.choices is not None and value not in self.choices:
                raise self.invalid(value, f"String must be one of: {', '.join(self.choices)}")
        if self.validator is not None:
            self.validator(self.name, value)
        return value

    def invalid(self, value: object, reason: str) -> ConfigError:
        """Kafka's ``ConfigException(name, value, reason)``."""
        return ConfigError(f"Invalid value {value} for configuration {self.name}: {reason}")


def format_value(value: Any) -> str:
    """Render a typed config value as Kafka prints it (lists comma-joined, booleans lowercase)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(value)
    return str(value)


# --- Kafka 3.x's deprecated message format version ---------------------------------------------
# pybroker answers as a Kafka 3.6.2 broker, whose inter-broker protocol is 3.6-IV2: from 3.0 on,
# Kafka ignores message.format.version (every batch is magic 2), and so does pybroker.
INTER_BROKER_PROTOCOL_VERSION = "3.6-IV2"
# Kafka 3.6's MetadataVersion values, oldest first; a bare release ("2.8") means its latest.
_METADATA_VERSIONS = (
    "0.8.0", "0.8.1", "0.8.2", "0.9.0", "0.10.0-IV0", "0.10.0-IV1", "0.10.1-IV0", "0.10.1-IV1",
    "0.10.1-IV2", "0.10.2-IV0", "0.11.0-IV0", "0.11.0-IV1", "0.11.0-IV2", "1.0-IV0", "1.1-IV0",
    "2.0-IV0", "2.0-IV1", "2.1-IV0", "2.1-IV1", "2.1-IV2", "2.2-IV0", "2.2-IV1", "2.3-IV0",
    "2.3-IV1", "2.4-IV0", "2.4-IV1", "2.5-IV0", "2.6-IV0", "2.7-IV0", "2.7-IV1", "2.7-IV2",
    "2.8-IV0", "2.8-IV1", "3.0-IV0", "3.0-IV1", "3.1-IV0", "3.2-IV0", "3.3-IV0", "3.3-IV1",
    "3.3-IV2", "3.3-IV3", "3.4-IV0", "3.5-IV0", "3.5-IV1", "3.5-IV2", "3.6-IV0", "3.6-IV1",
    "3.6-IV2",
)
_METADATA_VERSION_INDEX = {
    **{version: index for index, version in enumerate(_METADATA_VERSIONS)},
    **{version.split("-")[0]: index for index, version in enumerate(_METADATA_VERSIONS)},
}
# The first version whose record format is v2 (magic 2): Kafka warns about older formats only.
_FIRST_RECORD_V2 = _METADATA_VERSION_INDEX["0.11.0-IV0"]


def metadata_version_index(version: str) -> int:
    """Kafka's ``MetadataVersion.fromVersionString``, as a position in Kafka 3.6's list: only the
    first three parts of a 0.x version and the first two of a later one count ("2.8.1" is 2.8,
    "0.10.2.1" is 0.10.2). Raises ValueError for a version Kafka 3.6 does not know."""
    segments = version.split(".")
    parts = 3 if version.startswith("0.") else 2
    key = version if parts >= len(segments) else ".".join(segments[:parts])
    try:
        return _METADATA_VERSION_INDEX[key]
    except KeyError:
        raise ValueError(f"Version {version} is not a valid version") from None


def _check_metadata_version(name: str, value: str) -> None:
    """Kafka's ``MetadataVersionValidator``."""
    try:
        metadata_version_index(value)
    except ValueError as e:
        raise ConfigError(f"Invalid value {value} for configuration {name}: {e}") from None


def ignored_config_warnings(topic: str, overrides: Mapping[str, str]) -> list[str]:
    """The WARN lines Kafka 3.6 logs when it applies ``topic``'s overrides: a
    ``message.format.version`` older than 0.11.0 (before record format v2) is ignored. A newer
    one is ignored silently, as in Kafka."""
    value = overrides.get("message.format.version")
    if value is None:
        return []
    try:
        old_format = metadata_version_index(value.strip()) < _FIRST_RECORD_V2
    except ValueError:
        return []  # refused when set; not stored
    if not old_format:
        return []
    return [
        f"Topic configuration message.format.version with value `{value}` is ignored for `{topic}` because the "
        f"inter-broker protocol version `{INTER_BROKER_PROTOCOL_VERSION}` is greater or equal than 3.0. This "
        "configuration is deprecated and it will be removed in Apache Kafka 4.0."
    ]


def _check_throttled_replicas(name: str, value: list[str]) -> None:
    """Kafka's ThrottledReplicaListValidator: ``*``, or ``partition:broker`` pairs."""
    if value == ["*"]:
        return
    for item in value:
        partition, sep, broker = item.partition(":")
        if not (sep and partition.strip().isdigit() and broker.strip().isdigit()):
            raise ConfigError(
                f"Invalid value {','.join(value)} for configuration {name}: {name} must be the literal '*' or "
                "a list of replicas in the following format: [partitionId]:[brokerId],[partitionId]:[brokerId],...")


_TOPIC_CONFIG_DEFS = [
    ConfigDef("cleanup.policy", "LIST", ["delete"], "Retention policy: delete and/or compact.",
              synonym="log.cleanup.policy", choices=("compact", "delete")),
    ConfigDef("compression.type", "STRING", "producer",
              "Final compression for the topic; 'producer' keeps what the producer sent.",
              synonym="compression.type",
              choices=("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")),
    ConfigDef("delete.retention.ms", "LONG", 86400000, "Retention of delete markers (compaction).",
              synonym="log.cleaner.delete.retention.ms", minimum=0),
    ConfigDef("enable.ordered.delivery", "BOOLEAN", True,
              "KIP-253: keep per-key order across partition count changes (the broker checks the "
              "producer's partition count, consumers gate new and surviving partitions; a topic "
              "shrinks only when true)."),
    ConfigDef("file.delete.delay.ms", "LONG", 60000,
              "Delay before a segment renamed .deleted is removed from disk.",
              synonym="log.segment.delete.delay.ms", minimum=0),
    ConfigDef("flush.messages", "LONG", LONG_MAX, "Messages between forced fsyncs of the log.",
              synonym="log.flush.interval.messages", minimum=1),
    ConfigDef("flush.ms", "LONG", LONG_MAX, "Milliseconds between forced fsyncs of the log.",
              synonym="log.flush.interval.ms", minimum=0),
    ConfigDef("follower.replication.throttled.replicas", "LIST", [],
              "Replicas throttled on the follower side (partition:broker,... or *).",
              validator=_check_throttled_replicas),
    ConfigDef("index.interval.bytes", "INT", 4096, "Bytes between offset index entries.",
              synonym="log.index.interval.bytes", minimum=0),
    ConfigDef("leader.replication.throttled.replicas", "LIST", [],
              "Replicas throttled on the leader side (partition:broker,... or *).",
              validator=_check_throttled_replicas),
    ConfigDef("log.retention.min.timestamp", "LONG", 0,
              "Delete segments whose largest timestamp is below this Unix time in ms "
              "(0 disables it). OR-ed with retention.ms and retention.bytes."),
    ConfigDef("max.compaction.lag.ms", "LONG", LONG_MAX,
              "Longest time a record stays uncompacted (compacted topics).",
              synonym="log.cleaner.max.compaction.lag.ms", minimum=1),
    ConfigDef("max.message.bytes", "INT", 1048588, "Largest record batch size allowed.",
              synonym="message.max.bytes", minimum=0),
    # Deprecated in Kafka 3.x and ignored there from 3.0 on; accepted, described, without effect.
    ConfigDef("message.format.version", "STRING", "3.0-IV1",
              "[DEPRECATED] The message format version of the topic's records. Ignored: Kafka 3.0 and "
              "later (and pybroker) write record format v2 whatever it says.",
              synonym="log.message.format.version", validator=_check_metadata_version),
    ConfigDef("message.downconversion.enable", "BOOLEAN", True,
              "Whether consumers reading with Fetch v0-v3 (message formats v0 and v1) get the "
              "topic's records converted; when false they are answered UNSUPPORTED_VERSION. "
              "Followers are always served.",
              synonym="log.message.downconversion.enable"),
    ConfigDef("message.timestamp.type", "STRING", "CreateTime",
              "Whether record timestamps are the producer's or the broker's append time.",
              synonym="log.message.timestamp.type", choices=("CreateTime", "LogAppendTime")),
    ConfigDef("min.cleanable.dirty.ratio", "DOUBLE", 0.5,
              "Share of the log that must be dirty (not yet compacted) before it is compacted.",
              synonym="log.cleaner.min.cleanable.ratio", minimum=0, maximum=1),
    ConfigDef("min.compaction.lag.ms", "LONG", 0, "Shortest time a record stays uncompacted.",
              synonym="log.cleaner.min.compaction.lag.ms", minimum=0),
    ConfigDef("min.insync.replicas", "INT", 1,
              "Replicas that must acknowledge an acks=all write.",
              synonym="min.insync.replicas", minimum=1),
    # A file-system hint (preallocate the segment file); accepted, described, without effect.
    ConfigDef("preallocate", "BOOLEAN", False,
              "Whether to preallocate a new segment's file on disk. Without effect: pybroker's "
              "segment files grow as they are written.",
              synonym="log.preallocate"),
    ConfigDef("retention.bytes", "LONG", -1, "Largest partition size before old segments go.",
              synonym="log.retention.bytes"),
    ConfigDef("retention.ms", "LONG", 604800000, "Age after which old segments are deleted.",
              synonym="log.retention.ms", minimum=-1),
    ConfigDef("segment.bytes", "INT", 1073741824, "Segment file size.",
              synonym="log.segment.bytes", minimum=14),
    ConfigDef("segment.index.bytes", "INT", 10485760, "Size of the offset/time index files.",
              synonym="log.index.size.max.bytes", minimum=4),
    ConfigDef("segment.jitter.ms", "LONG", 0, "Random jitter subtracted from segment.ms.",
              synonym="log.roll.jitter.ms", minimum=0),
    ConfigDef("segment.ms", "LONG", 604800000, "Time after which a segment is rolled.",
              synonym="log.roll.ms", minimum=1),
    ConfigDef("unclean.leader.election.enable", "BOOLEAN", False,
              "Whether out-of-sync replicas may become leader.",
              synonym="unclean.leader.election.enable"),
]

TOPIC_CONFIGS: dict[str, ConfigDef] = {d.name: d for d in _TOPIC_CONFIG_DEFS}


def validate_topic_configs(raw: Mapping[str, str | None]) -> dict[str, str]:
    """Check topic config overrides; returns them normalised. Raises ConfigError."""
    out: dict[str, str] = {}
    for name, value in raw.items():
        definition = TOPIC_CONFIGS.get(name)
        if definition is None:
            raise ConfigError(f"Unknown topic config name: {name}")
        if value is None:
            raise ConfigError(f"Null value not supported for topic config {name}")
        definition.parse(value)
        out[name] = value.strip()
    return out


class LogConfig:
    """The resolved configuration of one topic's logs: overrides over broker defaults.

    Attributes use the config names with dots replaced by underscores (``retention_ms``).
    """

    def __init__(self, overrides: Mapping[str, str], defaults: Callable[[str], Any]) -> None:
        self.overrides = dict(overrides)
        for name, definition in TOPIC_CONFIGS.items():
            if name in overrides:
                value = definition.parse(overrides[name])
            else:
                value = defaults(name)
            setattr(self, name.replace(".", "_"), value)

    cleanup_policy: list[str]
    compression_type: str
    delete_retention_ms: int
    enable_ordered_delivery: bool
    file_delete_delay_ms: int
    flush_messages: int
    flush_ms: int
    index_interval_bytes: int
    log_retention_min_timestamp: int
    max_compaction_lag_ms: int
    max_message_bytes: int
    message_downconversion_enable: bool  # Fetch v0-v3 from consumers (pybroker.server.apis.fetch)
    message_format_version: str  # without effect
    message_timestamp_type: str
    min_cleanable_dirty_ratio: float
    min_compaction_lag_ms: int
    min_insync_replicas: int
    preallocate: bool  # without effect
    retention_bytes: int
    retention_ms: int
    segment_bytes: int
    segment_index_bytes: int
    segment_jitter_ms: int
    segment_ms: int
    unclean_leader_election_enable: bool

    @property
    def delete_enabled(self) -> bool:
        return "delete" in self.cleanup_policy

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def max_segment_ms(self) -> int:
        """segment.ms, bounded by max.compaction.lag.ms on a compacted topic (Kafka's
        ``LogConfig.maxSegmentMs``): a segment must roll to become cleanable in time."""
        if self.compact and self.max_compaction_lag_ms > 0:
            return min(self.max_compaction_lag_ms, self.segment_ms)
        return self.segment_ms

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"

    def value(self, name: str) -> Any:
        return getattr(self, name.replace(".", "_"))
