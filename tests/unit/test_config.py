"""Broker and topic configuration: Kafka's names, defaults, synonyms and validation."""

import pytest

from pybroker.common.config import ConfigError
from pybroker.log.config import validate_topic_configs
from pybroker.server.config import BrokerConfig, read_properties
from pybroker.server.unapplied_configs import unapplied_reason


def test_defaults_are_kafkas():
    config = BrokerConfig()
    assert config.get("message.max.bytes") == 1048588
    assert config.get("socket.request.max.bytes") == 104857600
    assert config.retention_ms == 7 * 24 * 3600 * 1000
    log_config = config.log_config()
    assert log_config.segment_bytes == 1073741824
    assert log_config.cleanup_policy == ["delete"]
    assert log_config.log_retention_min_timestamp == 0
    assert [e.port for e in config.listeners] == [9092]


def test_synonyms_and_overrides(tmp_path):
    path = tmp_path / "server.properties"
    path.write_text("# comment\nlog.retention.hours=1\nlog.segment.bytes = 1024\nnum.partitions=3\n")
    config = BrokerConfig.load(str(path), ["log.retention.minutes=5"])
    assert config.retention_ms == 5 * 60_000
    assert config.log_config().segment_bytes == 1024
    assert config.log_config({"segment.bytes": "2048"}).segment_bytes == 2048
    assert read_properties(str(path))["num.partitions"] == "3"


@pytest.mark.parametrize("configs", [{"nope": "1"}, {"retention.ms": "abc"}, {"cleanup.policy": "shred"},
                                     {"segment.bytes": "1"}, {"message.timestamp.type": "Now"}])
def test_invalid_topic_configs(configs):
    with pytest.raises(ConfigError):
        validate_topic_configs(configs)


@pytest.mark.parametrize("name, value, message", [
    # Kafka 3.9.2's ConfigDef texts, as its broker answered them (tests/differential/test_kafka_tools_a.py).
    ("retention.ms", "abc", "Invalid value abc for configuration retention.ms: Not a number of type LONG"),
    ("max.message.bytes", "99999999999",
     "Invalid value 99999999999 for configuration max.message.bytes: Not a number of type INT"),
    ("segment.bytes", "1", "Invalid value 1 for configuration segment.bytes: Value must be at least 14"),
    ("retention.ms", "-5", "Invalid value -5 for configuration retention.ms: Value must be at least -1"),
    ("min.cleanable.dirty.ratio", "2",
     "Invalid value 2.0 for configuration min.cleanable.dirty.ratio: Value must be no more than 1"),
    ("min.cleanable.dirty.ratio", "x", "Invalid value x for configuration min.cleanable.dirty.ratio: Not a number "
     "of type DOUBLE"),
    ("cleanup.policy", "compact,bogus",
     "Invalid value bogus for configuration cleanup.policy: String must be one of: compact, delete"),
    ("compression.type", "bogus", "Invalid value bogus for configuration compression.type: String must be one of: "
     "uncompressed, zstd, lz4, snappy, gzip, producer"),
    ("unclean.leader.election.enable", "maybe", "Invalid value maybe for configuration "
     "unclean.leader.election.enable: Expected value to be either true or false"),
    ("compression.gzip.level", "0",
     "Invalid value 0 for configuration compression.gzip.level: Value must be between 1 and 9 or equal to -1"),
    ("compression.lz4.level", "18", "Invalid value 18 for configuration compression.lz4.level: Value must be no "
     "more than 17"),
    ("compression.zstd.level", "-131073", "Invalid value -131073 for configuration compression.zstd.level: Value "
     "must be at least -131072"),
    ("local.retention.ms", "-3", "Invalid value -3 for configuration local.retention.ms: Value must be at least -2"),
    ("remote.storage.enable", "true", "Tiered Storage functionality is disabled in the broker. Topic cannot be "
     "configured with remote log storage."),
    ("remote.log.copy.disable", "true", "It is invalid to set `remote.log.delete.on.disable` or "
     "`remote.log.copy.disable` under Zookeeper's mode."),
])
def test_topic_config_refusals_in_kafkas_words(name, value, message):
    with pytest.raises(ConfigError) as refused:
        validate_topic_configs({name: value})
    assert str(refused.value) == message


def test_kafkas_other_topic_configs_are_accepted():
    accepted = {"compression.gzip.level": "-1", "compression.lz4.level": "17", "compression.zstd.level": "-131072",
                "local.retention.ms": "-2", "local.retention.bytes": "5", "remote.storage.enable": "false",
                "remote.log.copy.disable": "false", "remote.log.delete.on.disable": "false",
                "message.timestamp.before.max.ms": "0", "message.timestamp.after.max.ms": "1",
                "message.timestamp.difference.max.ms": "2"}
    assert validate_topic_configs(accepted) == accepted


def test_java_double():
    from pybroker.common.config import java_double

    assert [java_double(v) for v in (2.0, 0.5, 1e10, 1e-4, 1234567.5, -3e-7, 0.0)] == [
        "2.0", "0.5", "1.0E10", "1.0E-4", "1234567.5", "-3.0E-7", "0.0"]


def test_segment_jitter_falls_back_to_log_roll_jitter_hours():
    assert BrokerConfig().log_config().segment_jitter_ms == 0
    assert BrokerConfig({"log.roll.jitter.hours": "2"}).log_config().segment_jitter_ms == 7_200_000
    config = BrokerConfig({"log.roll.jitter.hours": "2", "log.roll.jitter.ms": "5"})
    assert config.log_config().segment_jitter_ms == 5


def test_kafkas_settings_for_what_pybroker_has_not_are_parsed_and_reported():
    """A server.properties written for Kafka starts pybroker: its settings for subsystems
    pybroker has not are parsed (a bad value refused with Kafka's text) and reported, not
    taken for unknown names."""
    config = BrokerConfig({"max.connections": "100", "process.roles": "", "no.such.setting": "1"})
    assert config.unapplied == ["max.connections", "process.roles"]
    assert config.unknown == ["no.such.setting"]
    assert unapplied_reason("sasl.oauthbearer.jwks.endpoint.url").startswith("SASL/GSSAPI")
    assert unapplied_reason("num.partitions") is None
    with pytest.raises(ConfigError, match="Invalid value x for configuration max.connections: Not a number of type INT"):
        BrokerConfig({"max.connections": "x"})
