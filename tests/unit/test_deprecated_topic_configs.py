"""Topic configs Kafka 3.6 accepts that do little: ``message.format.version`` (deprecated,
ignored by Kafka from 3.0 on), ``message.downconversion.enable`` (read by Fetch v0-v3 only;
tests/differential/test_message_formats.py shows its effect) and ``preallocate`` (a file-system
hint, without effect). Validated as Kafka validates them, stored, described with Kafka's
defaults and broker synonyms; Kafka's WARN for a pre-0.11 message format."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from pybroker.common.config import ConfigError
from pybroker.log.config import (
    TOPIC_CONFIGS,
    ignored_config_warnings,
    metadata_version_index,
    validate_topic_configs,
)
from pybroker.server.config import BrokerConfig
from pybroker.server.config_describer import ConfigSource, ConfigType, describe_topic


@pytest.mark.parametrize("value", ["2.8", "2.8-IV1", "2.8.1", "0.10.2", "0.10.2-IV0", "0.10.2.1", "0.8.0",
                                   "0.11.0", "1.0", "3.0-IV1", "3.6", "3.6-IV2", " 2.1 ", "3.7", "3.9-IV0", "4.0-IV1"])
def test_message_format_versions_kafka_knows_are_accepted(value: str):
    assert validate_topic_configs({"message.format.version": value}) == {"message.format.version": value.strip()}


@pytest.mark.parametrize("value", ["4.0", "4.1", "3.10", "2.9", "3", "abc", "", "0.10", "2.8-IV9"])
def test_other_message_format_versions_are_refused(value: str):
    with pytest.raises(ConfigError) as refused:
        validate_topic_configs({"message.format.version": value})
    # Kafka's ConfigException from MetadataVersionValidator.
    assert str(refused.value) == (
        f"Invalid value {value.strip()} for configuration message.format.version: "
        f"Version {value.strip()} is not a valid version"
    )


def test_versions_parse_as_kafkas_from_version_string():
    # A bare release is its latest internal version; extra parts are ignored.
    assert metadata_version_index("2.8") == metadata_version_index("2.8-IV1") == metadata_version_index("2.8.7")
    assert metadata_version_index("0.10.2.1") == metadata_version_index("0.10.2-IV0")
    assert metadata_version_index("0.11.0-IV0") < metadata_version_index("1.0") < metadata_version_index("3.6-IV2")


@pytest.mark.parametrize("name", ["message.downconversion.enable", "preallocate"])
def test_boolean_configs_take_booleans(name: str):
    assert validate_topic_configs({name: "false"}) == {name: "false"}
    assert validate_topic_configs({name: "TRUE"}) == {name: "TRUE"}
    with pytest.raises(ConfigError):
        validate_topic_configs({name: "yes"})


def test_defaults_and_overrides_resolve():
    config = BrokerConfig()
    defaults = config.log_config()
    assert (defaults.message_format_version, defaults.message_downconversion_enable, defaults.preallocate) == (
        "3.0-IV1", True, False)
    overridden = config.log_config({"message.format.version": "0.10.2", "message.downconversion.enable": "false",
                                    "preallocate": "true"})
    assert (overridden.message_format_version, overridden.message_downconversion_enable, overridden.preallocate) == (
        "0.10.2", False, True)
    # Nothing else moves.
    for name in TOPIC_CONFIGS:
        if name not in ("message.format.version", "message.downconversion.enable", "preallocate"):
            assert overridden.value(name) == defaults.value(name), name


def test_broker_defaults_are_their_synonyms():
    config = BrokerConfig({"log.message.format.version": "2.8", "log.preallocate": "true"})
    assert config.log_config().message_format_version == "2.8"
    assert config.log_config().preallocate is True
    assert config.topic_default_synonyms("message.format.version") == [("log.message.format.version", "2.8", True)]
    assert config.topic_default_synonyms("message.downconversion.enable") == [
        ("log.message.downconversion.enable", "true", False)]
    with pytest.raises(ConfigError, match="Version 7.7 is not a valid version"):
        BrokerConfig({"log.message.format.version": "7.7"})


def test_described_like_the_other_topic_configs():
    broker = SimpleNamespace(
        admin_manager=SimpleNamespace(topic_configs=lambda topic: {"message.format.version": "2.8"}),
        config=BrokerConfig(),
        dynamic_config=SimpleNamespace(broker_props={}, default_props={}),
    )
    entries = {e.name: e for e in describe_topic(broker, "t")}  # type: ignore[arg-type]
    version = entries["message.format.version"]
    assert (version.value, version.source, version.type, version.read_only) == (
        "2.8", ConfigSource.TOPIC_CONFIG, ConfigType.STRING, False)
    assert version.synonyms == [
        ("message.format.version", "2.8", ConfigSource.TOPIC_CONFIG),
        ("log.message.format.version", "3.0-IV1", ConfigSource.DEFAULT_CONFIG),
    ]
    assert "DEPRECATED" in version.documentation
    down = entries["message.downconversion.enable"]
    assert (down.value, down.source, down.type) == ("true", ConfigSource.DEFAULT_CONFIG, ConfigType.BOOLEAN)
    assert down.synonyms == [("log.message.downconversion.enable", "true", ConfigSource.DEFAULT_CONFIG)]
    preallocate = entries["preallocate"]
    assert (preallocate.value, preallocate.source, preallocate.type) == (
        "false", ConfigSource.DEFAULT_CONFIG, ConfigType.BOOLEAN)


def test_kafka_warns_about_pre_v2_formats_only():
    assert ignored_config_warnings("orders", {"message.format.version": "0.10.2"}) == [
        "Topic configuration message.format.version with value `0.10.2` is ignored for `orders` because the "
        "inter-broker protocol version `3.9-IV0` is greater or equal than 3.0. This configuration is deprecated "
        "and it will be removed in Apache Kafka 4.0."
    ]
    assert ignored_config_warnings("orders", {"message.format.version": "0.8.2"}) != []
    # From 0.11.0 (record format v2) on, Kafka 3.x ignores the value without a word.
    for value in ("0.11.0", "2.8", "3.6-IV2", "3.9-IV0", "4.0-IV1"):
        assert ignored_config_warnings("orders", {"message.format.version": value}) == []
    assert ignored_config_warnings("orders", {"retention.ms": "5"}) == []
