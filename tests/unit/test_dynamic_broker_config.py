"""Dynamic broker configs: which names are dynamic, Kafka's refusals, the layers as stored, the
describer's sources and synonyms, reconfiguration calls, and logger levels."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest

from pybroker.replication.fetcher import FetcherConfig, InitialFetchState, ReplicaFetcherManager
from pybroker.server import broker_loggers
from pybroker.server.config import BrokerConfig
from pybroker.server.config_describer import (
    ConfigSource,
    describe_broker,
    describe_broker_defaults,
    describe_topic,
)
from pybroker.server.dynamic_broker_config import (
    DYNAMIC_CONFIGS,
    DynamicBrokerConfig,
    DynamicConfigError,
    broker_synonyms,
)
from pybroker.types import TopicPartition


def test_dynamic_names_are_kafkas_first_synonyms():
    assert {"log.retention.ms", "log.roll.ms", "log.segment.bytes", "log.cleaner.threads", "num.replica.fetchers",
            "message.max.bytes", "leader.replication.throttled.rate", "unclean.leader.election.enable"} <= DYNAMIC_CONFIGS
    for name in ("log.retention.hours", "log.roll.hours", "log.dirs", "listeners", "log.message.format.version",
                 "replica.fetch.max.bytes", "zookeeper.connect"):
        assert name not in DYNAMIC_CONFIGS, name
    assert broker_synonyms("log.retention.hours") == ("log.retention.ms", "log.retention.minutes", "log.retention.hours")


def dynamic(props: dict[str, str] | None = None) -> DynamicBrokerConfig:
    return DynamicBrokerConfig(1, BrokerConfig(props or {}))


@pytest.mark.parametrize("props, per_broker, message", [
    ({"log.dirs": "/x", "num.partitions": "3"}, True, "Cannot update these configs dynamically: Set(log.dirs, num.partitions)"),
    ({"ssl.keystore.location": "/k"}, True,
     "These security configs can be dynamically updated only per-listener using the listener prefix: "
     "Set(ssl.keystore.location)"),
    ({"listener.name.internal.ssl.keystore.location": "/k"}, True, "pybroker cannot update listener configs dynamically"),
    ({"log.retention.ms": "soon"}, False, "Invalid value soon for configuration log.retention.ms:"),
    ({"log.segment.bytes": "5"}, True, "Invalid value 5 for configuration log.segment.bytes: Value must be at least 14"),
])
def test_refusals(props, per_broker, message):
    with pytest.raises(DynamicConfigError) as e:
        dynamic().validate(props, per_broker)
    assert str(e.value).startswith(message)


def test_thread_counts_may_at_most_double_or_halve():
    config = dynamic({"num.replica.fetchers": "2"})
    broker = SimpleNamespace(log_manager=SimpleNamespace(cleaner=SimpleNamespace(config=SimpleNamespace(threads=1))),
                             replica_manager=SimpleNamespace(fetcher_manager=None), controller=SimpleNamespace())
    config.add_reconfigurables(broker)  # type: ignore[arg-type]
    config.validate({"num.replica.fetchers": "4", "log.cleaner.threads": "2", "custom.name": "kept"}, True)
    with pytest.raises(DynamicConfigError, match="num.replica.fetchers=5, value should not be greater than double "
                                                 "the current value 2 for configuration Invalid dynamic configuration"):
        config.validate({"num.replica.fetchers": "5"}, False)
    with pytest.raises(DynamicConfigError, match="Invalid value 0 for configuration num.replica.fetchers"):
        config.validate({"num.replica.fetchers": "0"}, True)
    with pytest.raises(DynamicConfigError, match="Log cleaner threads cannot be increased to more than double"):
        config.validate({"log.cleaner.threads": "3"}, True)


def test_layers_as_stored_and_their_reconfigurations():
    config = BrokerConfig({"log.retention.hours": "24"})
    dyn = DynamicBrokerConfig(1, config)
    calls: list[set[str]] = []
    config.add_reconfigurable({"log.retention.ms"}, calls.append)
    dyn.on_broker_configs("<default>", {"log.retention.ms": "1000"})
    dyn.on_broker_configs("2", {"log.retention.ms": "5"})  # another broker's: not followed
    assert config.retention_ms == 1000 and calls == [{"log.retention.ms"}]
    dyn.on_broker_configs("1", {"log.retention.ms": "2000"})
    assert config.retention_ms == 2000 and config.source("log.retention.ms") == "DYNAMIC_BROKER_CONFIG"
    dyn.on_broker_configs("1", {})
    assert config.retention_ms == 1000 and config.source("log.retention.ms") == "DYNAMIC_DEFAULT_BROKER_CONFIG"
    dyn.on_broker_configs("<default>", {})
    assert config.retention_ms == 24 * 3_600_000 and len(calls) == 4


def test_stored_configs_it_cannot_apply_are_ignored(caplog):
    dyn = dynamic()
    with caplog.at_level(logging.ERROR):
        dyn.on_broker_configs("1", {"log.dirs": "/x", "log.segment.bytes": "x", "log.cleaner.threads": "2"})
    assert dyn.broker_props == {"log.cleaner.threads": "2"}
    assert "Non-dynamic configs configured in ZooKeeper will be ignored: Set(log.dirs)" in caplog.text
    assert "Dynamic broker config contains invalid values in: Set(log.segment.bytes)" in caplog.text


def fake_broker(static: dict[str, str]) -> SimpleNamespace:
    config = BrokerConfig(static)
    return SimpleNamespace(config=config, dynamic_config=DynamicBrokerConfig(1, config),
                           admin_manager=SimpleNamespace(topic_configs=lambda topic: {}))


def test_sources_and_synonyms_in_kafkas_order():
    broker = fake_broker({"log.retention.minutes": "30"})
    broker.dynamic_config.on_broker_configs("<default>", {"log.retention.ms": "1000", "custom.thing": "x"})
    broker.dynamic_config.on_broker_configs("1", {"log.retention.ms": "2000"})
    entries = {e.name: e for e in describe_broker(broker)}  # type: ignore[arg-type]
    ms = entries["log.retention.ms"]
    assert (ms.value, ms.source, ms.read_only) == ("2000", ConfigSource.DYNAMIC_BROKER_CONFIG, False)
    assert ms.synonyms == [("log.retention.ms", "2000", ConfigSource.DYNAMIC_BROKER_CONFIG),
                           ("log.retention.ms", "1000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
                           ("log.retention.minutes", "30", ConfigSource.STATIC_BROKER_CONFIG),
                           ("log.retention.hours", "168", ConfigSource.DEFAULT_CONFIG)]
    # Kafka drops the more specific names that come before the one described.
    minutes = entries["log.retention.minutes"]
    assert (minutes.value, minutes.source, minutes.read_only) == ("30", ConfigSource.STATIC_BROKER_CONFIG, True)
    assert [s[0] for s in minutes.synonyms] == ["log.retention.minutes", "log.retention.hours"]
    assert entries["custom.thing"].source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
    defaults = describe_broker_defaults(broker)  # type: ignore[arg-type]
    # In the order of Kafka's Scala mutable.HashMap of the names.
    assert [(e.name, e.value, e.source, e.synonyms) for e in defaults] == [
        ("log.retention.ms", "1000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
         [("log.retention.ms", "1000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)]),
        # A name Kafka does not define has no known type, so it is sensitive: no value shown.
        ("custom.thing", None, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
         [("custom.thing", None, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)]),
    ]
    topic = {e.name: e for e in describe_topic(broker, "t")}["retention.ms"]  # type: ignore[arg-type]
    assert (topic.value, topic.source) == ("2000", ConfigSource.DYNAMIC_BROKER_CONFIG)


def test_fetcher_pool_resize_moves_partitions_with_their_state():
    manager = ReplicaFetcherManager(FetcherConfig(1, num_fetchers=1), endpoint_for=lambda b: None,  # type: ignore[arg-type]
                                    get_log=lambda tp: None, start_fetchers=False)
    tps = [TopicPartition("t", p) for p in range(8)]
    manager.add_fetcher_for_partitions({tp: InitialFetchState("id", 2, 5, 100 + tp.partition, 4) for tp in tps})
    manager.resize_thread_pool(2)
    assert {key[1] for key in manager.fetchers if manager.fetchers[key].partition_count} == {0, 1}
    states = {tp: s for f in manager.fetchers.values() for tp, s in f.states.items()}
    assert {tp: (s.fetch_offset, s.current_leader_epoch, s.last_fetched_epoch) for tp, s in states.items()} == {
        tp: (100 + tp.partition, 5, 4) for tp in tps}
    assert all(f.config.num_fetchers == 2 for f in manager.fetchers.values())


def test_logger_levels():
    name = "pybroker.test.dynamic.logger"
    logger = logging.getLogger(name)
    try:
        assert broker_loggers.logger_exists(name) and not broker_loggers.logger_exists("no.such.logger")
        broker_loggers.validate(0, name, "TRACE")
        broker_loggers.apply(0, name, "TRACE")
        assert broker_loggers.loggers()[name] == "TRACE" and logger.isEnabledFor(5)
        broker_loggers.apply(1, name, None)
        assert broker_loggers.loggers()[name] == broker_loggers.loggers()["root"]
        for op, logger_name, level, message in [
            (0, "nope", "INFO", "Logger nope does not exist!"),
            (0, name, "info", "Cannot set the log level of"),
            (1, "root", None, "Removing the log level of the root logger is not allowed"),
            (2, name, "INFO", "APPEND operation is not allowed for the BROKER_LOGGER resource"),
        ]:
            with pytest.raises(broker_loggers.LoggerError, match=message):
                broker_loggers.validate(op, logger_name, level)
    finally:
        logger.setLevel(logging.NOTSET)
