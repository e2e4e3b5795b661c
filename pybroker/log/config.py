"""Topic-level log configuration: Kafka's topic config names, types, defaults and validation.

Owns the table of topic configs (``cleanup.policy``, ``retention.ms``, ``segment.bytes`` …), the
broker property each one falls back to (its synonym: ``log.retention.ms`` for ``retention.ms``),
and ``LogConfig``, the resolved per-topic view a ``Log`` reads. It knows nothing of the network or
of requests; DescribeConfigs/AlterConfigs handlers use the table to validate and describe. A
refused value raises ConfigError with the text of Kafka's ``ConfigDef`` ("Invalid value abc for
configuration retention.ms: Not a number of type LONG").
Kafka 3.9 topic configs that pybroker accepts without effect (``message.format.version``,
``preallocate``, the ``compression.*.level`` settings, tiered storage's ``local.retention.*``) are
in the table too, with Kafka's validation (enabling tiered storage is refused, as by a Kafka broker
without it), and ``ignored_config_warnings`` gives Kafka's WARN for an ignored old format.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from pybroker.common.config import (
    LONG_MAX,
    ConfigDef,
    ConfigError,
    invalid_value,
)


class InvalidTopicConfigError(ConfigError):
    """A change refused as Kafka's InvalidConfigurationException (a name that is no topic
    config, say), which an alter reports as it is, where it prefixes a bad value's
    ConfigException with the resource."""


# --- Kafka 3.x's deprecated message format version ---------------------------------------------
# pybroker answers as a Kafka 3.9.2 broker, whose inter-broker protocol is 3.9-IV0: from 3.0 on,
# Kafka ignores message.format.version (every batch is magic 2), and so does pybroker.
INTER_BROKER_PROTOCOL_VERSION = "3.9-IV0"
# Kafka 3.9.2's MetadataVersion values, oldest first; a bare release ("2.8") means its latest.
_METADATA_VERSIONS = (
    "0.8.0", "0.8.1", "0.8.2", "0.9.0", "0.10.0-IV0", "0.10.0-IV1", "0.10.1-IV0", "0.10.1-IV1",
    "0.10.1-IV2", "0.10.2-IV0", "0.11.0-IV0", "0.11.0-IV1", "0.11.0-IV2", "1.0-IV0", "1.1-IV0",
    "2.0-IV0", "2.0-IV1", "2.1-IV0", "2.1-IV1", "2.1-IV2", "2.2-IV0", "2.2-IV1", "2.3-IV0",
    "2.3-IV1", "2.4-IV0", "2.4-IV1", "2.5-IV0", "2.6-IV0", "2.7-IV0", "2.7-IV1", "2.7-IV2",
    "2.8-IV0", "2.8-IV1", "3.0-IV0", "3.0-IV1", "3.1-IV0", "3.2-IV0", "3.3-IV0", "3.3-IV1",
    "3.3-IV2", "3.3-IV3", "3.4-IV0", "3.5-IV0", "3.5-IV1", "3.5-IV2", "3.6-IV0", "3.6-IV1",
    "3.6-IV2", "3.7-IV0", "3.7-IV1", "3.7-IV2", "3.7-IV3", "3.7-IV4", "3.8-IV0", "3.9-IV0",
    "4.0-IV0", "4.0-IV1",
)
#: Kafka 3.9.2 knows 4.0's versions by their full names only: "4.0" alone is refused.
_UNRELEASED = ("4.0",)
_METADATA_VERSION_INDEX = {
    **{version: index for index, version in enumerate(_METADATA_VERSIONS)},
    **{version.split("-")[0]: index for index, version in enumerate(_METADATA_VERSIONS)
       if version.split("-")[0] not in _UNRELEASED},
}
# The first version whose record format is v2 (magic 2): Kafka warns about older formats only.
_FIRST_RECORD_V2 = _METADATA_VERSION_INDEX["0.11.0-IV0"]


def metadata_version_index(version: str) -> int:
    """Kafka's ``MetadataVersion.fromVersionString``, as a position in Kafka 3.9.2's list: only the
    first three parts of a 0.x version and the first two of a later one count ("2.8.1" is 2.8,
    "0.10.2.1" is 0.10.2). Raises ValueError for a version Kafka 3.9.2 does not know."""
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
    """The WARN lines Kafka 3.9 logs when it applies ``topic``'s overrides: a
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


def _check_gzip_level(name: str, value: int) -> None:
    """Kafka's GzipCompression level check: java.util.zip's levels 1-9, or -1 (its default)."""
    if value != -1 and not 1 <= value <= 9:
        raise invalid_value(name, value, "Value must be between 1 and 9 or equal to -1")


def _check_remote_storage(name: str, value: bool) -> None:
    """pybroker has no tiered storage: enabling it is refused as Kafka refuses it on a broker
    with ``remote.log.storage.system.enable=false``."""
    if value:
        raise ConfigError("Tiered Storage functionality is disabled in the broker. Topic cannot be configured "
                          "with remote log storage.")


def _check_remote_disable(name: str, value: bool) -> None:
    """KIP-950's settings, which ZooKeeper-mode Kafka refuses."""
    if value:
        raise InvalidTopicConfigError("It is invalid to set `remote.log.delete.on.disable` or "
                                      "`remote.log.copy.disable` under Zookeeper's mode.")


_TOPIC_CONFIG_DEFS = [
    ConfigDef("cleanup.policy", "LIST", ["delete"], "Retention policy: delete and/or compact.",
              synonym="log.cleanup.policy", choices=("compact", "delete")),
    # Accepted and described; pybroker's native codecs compress at their own levels (gzip's
    # default, lz4's fast mode, zstd's fastest level) whatever these say.
    ConfigDef("compression.gzip.level", "INT", -1, "Level of gzip compression; without effect.",
              synonym="compression.gzip.level", validator=_check_gzip_level),
    ConfigDef("compression.lz4.level", "INT", 9, "Level of lz4 compression; without effect.",
              synonym="compression.lz4.level", minimum=1, maximum=17),
    ConfigDef("compression.zstd.level", "INT", 3, "Level of zstd compression; without effect.",
              synonym="compression.zstd.level", minimum=-131072, maximum=22),
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
    # Tiered storage (KIP-405), which pybroker has not: accepted while off, without effect.
    ConfigDef("local.retention.bytes", "LONG", -2, "Local log size kept with remote storage; without effect.",
              synonym="log.local.retention.bytes", minimum=-2),
    ConfigDef("local.retention.ms", "LONG", -2, "Local log age kept with remote storage; without effect.",
              synonym="log.local.retention.ms", minimum=-2),
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
    ConfigDef("message.timestamp.after.max.ms", "LONG", LONG_MAX,
              "How far (ms) a CreateTime record's timestamp may be ahead of the broker's clock "
              "(INVALID_TIMESTAMP beyond).", synonym="log.message.timestamp.after.max.ms", minimum=0),
    ConfigDef("message.timestamp.before.max.ms", "LONG", LONG_MAX,
              "How far (ms) a CreateTime record's timestamp may be behind the broker's clock "
              "(INVALID_TIMESTAMP beyond).", synonym="log.message.timestamp.before.max.ms", minimum=0),
    ConfigDef("message.timestamp.difference.max.ms", "LONG", LONG_MAX,
              "[DEPRECATED] Both limits at once, for the one of before/after that is not set.",
              synonym="log.message.timestamp.difference.max.ms", minimum=0),
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
    ConfigDef("remote.log.copy.disable", "BOOLEAN", False, "KIP-950; refused when true (ZooKeeper mode).",
              validator=_check_remote_disable),
    ConfigDef("remote.log.delete.on.disable", "BOOLEAN", False, "KIP-950; refused when true (ZooKeeper mode).",
              validator=_check_remote_disable),
    ConfigDef("remote.storage.enable", "BOOLEAN", False, "Tiered storage; refused when true (pybroker has none).",
              validator=_check_remote_storage),
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
            raise InvalidTopicConfigError(f"Unknown topic config name: {name}")
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
    compression_gzip_level: int  # without effect
    compression_lz4_level: int  # without effect
    compression_type: str
    compression_zstd_level: int  # without effect
    delete_retention_ms: int
    enable_ordered_delivery: bool
    file_delete_delay_ms: int
    flush_messages: int
    flush_ms: int
    follower_replication_throttled_replicas: list[str]
    index_interval_bytes: int
    leader_replication_throttled_replicas: list[str]
    local_retention_bytes: int  # without effect
    local_retention_ms: int  # without effect
    log_retention_min_timestamp: int
    max_compaction_lag_ms: int
    max_message_bytes: int
    message_downconversion_enable: bool  # Fetch v0-v3 from consumers (pybroker.server.apis.fetch)
    message_format_version: str  # without effect
    message_timestamp_after_max_ms: int
    message_timestamp_before_max_ms: int
    message_timestamp_difference_max_ms: int
    message_timestamp_type: str
    min_cleanable_dirty_ratio: float
    min_compaction_lag_ms: int
    min_insync_replicas: int
    preallocate: bool  # without effect
    remote_log_copy_disable: bool  # always false
    remote_log_delete_on_disable: bool  # always false
    remote_storage_enable: bool  # always false
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
    def timestamp_limits(self) -> tuple[int, int] | None:
        """How far (ms) a CreateTime record may be behind and ahead of the broker's clock (Kafka's
        ``messageTimestampBeforeMaxMs`` / ``AfterMaxMs``: each falls back to the deprecated
        difference when not set); None when the topic uses LogAppendTime or sets no limit."""
        before = self.message_timestamp_before_max_ms
        after = self.message_timestamp_after_max_ms
        if before == LONG_MAX:
            before = self.message_timestamp_difference_max_ms
        if after == LONG_MAX:
            after = self.message_timestamp_difference_max_ms
        if self.log_append_time or (before == LONG_MAX and after == LONG_MAX):
            return None
        return before, after

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"

    def value(self, name: str) -> Any:
        return getattr(self, name.replace(".", "_"))
