"""Broker and topic configuration: Kafka's names, defaults, synonyms and validation."""

import pytest

from pybroker.log.config import ConfigError, validate_topic_configs
from pybroker.server.config import BrokerConfig, read_properties


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
