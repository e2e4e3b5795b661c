"""Dynamic broker configs and broker loggers through real clients' admin APIs (confluent-kafka and
kafka-python), on one broker and on a 3-broker ZooKeeper cluster: a change applied without a
restart, Kafka's sources and synonyms, Kafka's refusals, and the configs kept over a restart."""

from __future__ import annotations

import asyncio
import time

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
    ResourceType,
)

from pybroker.client.admin import BROKER_RESOURCE, Admin
from pybroker.common.errors import ErrorCode
from pybroker.protocol.api_keys import ApiKey
from tests.conftest import broker_connection, wait_until

DEFAULT_CONFIG = ConfigSource.DEFAULT_CONFIG.value
STATIC = ConfigSource.STATIC_BROKER_CONFIG.value
DYNAMIC = ConfigSource.DYNAMIC_BROKER_CONFIG.value
DYNAMIC_DEFAULT = ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value
LOGGER_SOURCE = 6  # DYNAMIC_BROKER_LOGGER_CONFIG (confluent-kafka has no name for it)


def incremental(admin: AdminClient, kind: ResourceType, name: str, *ops: tuple[str, str | None, AlterConfigOpType]):
    """IncrementalAlterConfigs of one resource; None or the KafkaError."""
    resource = ConfigResource(kind, name, incremental_configs=[
        ConfigEntry(key, value, incremental_operation=op) for key, value, op in ops])
    try:
        admin.incremental_alter_configs([resource])[resource].result(timeout=30)
    except KafkaException as e:
        return e.args[0]
    return None


def describe(admin: AdminClient, kind: ResourceType, name: str) -> dict:
    resource = ConfigResource(kind, name)
    return admin.describe_configs([resource])[resource].result(timeout=30)


def synonyms(entry) -> list[tuple[str, str | None, int]]:
    return [(s.name, s.value, s.source) for s in entry.synonyms.values()] if isinstance(entry.synonyms, dict) \
        else [(s.name, s.value, s.source) for s in entry.synonyms]


def create(admin: AdminClient, topic: NewTopic) -> None:
    admin.create_topics([topic])[topic.topic].result(timeout=30)


def produce_old(bootstrap: str, topic: str, count: int, partition: int = 0) -> None:
    """``count`` records of 200 bytes stamped an hour ago (past any short retention)."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
    old = int(time.time() * 1000) - 3_600_000
    for i in range(count):
        producer.produce(topic, value=b"x" * 200, key=str(i).encode(), partition=partition, timestamp=old)
        producer.flush(30)  # one batch each: segments roll at segment.bytes
    producer.flush(30)


def earliest(admin_bootstrap: str, topic: str, partition: int = 0) -> int:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": admin_bootstrap, "group.id": "watermarks"})
    try:
        low, _high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
        return low
    finally:
        consumer.close()


def project_admin(bootstrap: str, call):
    """Run ``call(admin)`` with the project's admin client: neither librdkafka nor kafka-python can
    name the cluster defaults (an empty broker resource name), as kafka-configs.sh can."""
    async def run():
        async with Admin(bootstrap) as admin:
            return await call(admin)

    return asyncio.run(run())


def describe_defaults(bootstrap: str) -> dict[str, tuple[str | None, int]]:
    entries = project_admin(bootstrap, lambda a: a.describe_configs(BROKER_RESOURCE, ""))
    return {e.name: (e.value, e.source) for e in entries}


FAST_RETENTION = {"log.retention.check.interval.ms": 200, "log.initial.task.delay.ms": 0,
                  "log.segment.delete.delay.ms": 0}


def test_cluster_default_retention_applies_at_once_and_survives_a_restart(start_broker, topic_name):
    broker = start_broker(**FAST_RETENTION)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    create(admin, NewTopic(topic_name, 1, 1, config={"segment.bytes": "1024"}))
    produce_old(broker.bootstrap, topic_name, 20)
    time.sleep(0.5)  # a few retention passes: a week's default keeps everything
    assert earliest(broker.bootstrap, topic_name) == 0

    # The cluster defaults, through the legacy AlterConfigs (the whole set).
    project_admin(broker.bootstrap, lambda a: a.alter_configs(BROKER_RESOURCE, "", {"log.retention.ms": "60000"}))
    wait_until(lambda: earliest(broker.bootstrap, topic_name) > 0, timeout=15, message="old segments deleted")

    configs = describe(admin, ResourceType.BROKER, "1")
    retention = configs["log.retention.ms"]
    assert (retention.value, retention.source, retention.is_read_only) == ("60000", DYNAMIC_DEFAULT, False)
    assert synonyms(retention) == [("log.retention.ms", "60000", DYNAMIC_DEFAULT),
                                   ("log.retention.hours", "168", DEFAULT_CONFIG)]
    assert configs["log.dirs"].is_read_only
    assert describe_defaults(broker.bootstrap) == {"log.retention.ms": ("60000", DYNAMIC_DEFAULT)}
    topic = describe(admin, ResourceType.TOPIC, topic_name)["retention.ms"]
    assert (topic.value, topic.source) == ("60000", DYNAMIC_DEFAULT)

    # A per-broker value beats the cluster default.
    assert incremental(admin, ResourceType.BROKER, "1", ("log.retention.ms", "120000", AlterConfigOpType.SET)) is None
    retention = describe(admin, ResourceType.BROKER, "1")["log.retention.ms"]
    assert (retention.value, retention.source) == ("120000", DYNAMIC)
    # (confluent-kafka keys synonyms by name, so the full list is read with the project's client)
    entries = project_admin(broker.bootstrap, lambda a: a.describe_configs(BROKER_RESOURCE, "1", keys=["log.retention.ms"]))
    assert [(s.name, s.value, s.source) for s in entries[0].synonyms] == [
        ("log.retention.ms", "120000", DYNAMIC), ("log.retention.ms", "60000", DYNAMIC_DEFAULT),
        ("log.retention.hours", "168", DEFAULT_CONFIG)]

    # Read back before the logs load after a restart.
    broker.stop()
    broker.start()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    retention = describe(admin, ResourceType.BROKER, "1")["log.retention.ms"]
    assert (retention.value, retention.source) == ("120000", DYNAMIC)
    assert broker.wait_for_log(r"Per-broker configs of 1 updated: log.retention.ms")

    # DELETE falls back to the cluster default.
    assert incremental(admin, ResourceType.BROKER, "1", ("log.retention.ms", None, AlterConfigOpType.DELETE)) is None
    assert describe(admin, ResourceType.BROKER, "1")["log.retention.ms"].source == DYNAMIC_DEFAULT


def test_refusals_with_kafkas_messages(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    error = incremental(admin, ResourceType.BROKER, "1", ("log.dirs", "/tmp/x", AlterConfigOpType.SET))
    assert (error.code(), error.str()) == (KafkaError.INVALID_REQUEST, "Cannot update these configs dynamically: Set(log.dirs)")
    error = incremental(admin, ResourceType.BROKER, "1", ("log.retention.hours", "1", AlterConfigOpType.SET))
    assert error.str() == "Cannot update these configs dynamically: Set(log.retention.hours)"
    error = incremental(admin, ResourceType.BROKER, "1", ("log.segment.bytes", "5", AlterConfigOpType.SET))
    assert error.code() == KafkaError.INVALID_REQUEST
    assert error.str().startswith("Invalid value 5 for configuration log.segment.bytes:")
    error = incremental(admin, ResourceType.BROKER, "1", ("ssl.keystore.location", "/k.pem", AlterConfigOpType.SET))
    assert error.str() == ("These security configs can be dynamically updated only per-listener using the listener "
                           "prefix: Set(ssl.keystore.location)")
    error = incremental(admin, ResourceType.BROKER, "1", ("log.cleaner.threads", "3", AlterConfigOpType.SET))
    assert error.str() == ("Invalid value org.apache.kafka.common.config.ConfigException: Log cleaner threads cannot be "
                           "increased to more than double the current value 1 for configuration Invalid dynamic "
                           "configuration")
    error = incremental(admin, ResourceType.BROKER, "1", ("log.cleanup.policy", "x", AlterConfigOpType.APPEND))
    assert error.code() == KafkaError.INVALID_REQUEST
    # Nothing was stored by any of them.
    assert describe_defaults(broker.bootstrap) == {}
    assert {n for n, e in describe(admin, ResourceType.BROKER, "1").items() if e.source == DYNAMIC} == set()


def test_cleaner_threads_and_logger_levels(start_broker):
    broker = start_broker(**FAST_RETENTION)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    mark = broker.log_mark()
    assert incremental(admin, ResourceType.BROKER, "1", ("log.cleaner.threads", "2", AlterConfigOpType.SET)) is None
    broker.wait_for_log(r"Log cleaner reconfigured: 2 thread\(s\)", since=mark)
    entry = describe(admin, ResourceType.BROKER, "1")["log.cleaner.threads"]
    assert (entry.value, entry.source) == ("2", DYNAMIC)

    # A logger level, in memory on this broker, through kafka-python (confluent-kafka's Python
    # binding has no BROKER_LOGGER resource type): the retention task's debug line appears.
    from kafka.admin import AlterConfigOp, KafkaAdminClient
    from kafka.admin import ConfigResource as KpConfigResource

    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap)

    def loggers() -> dict[str, tuple[str, str]]:
        described = client.describe_configs([KpConfigResource("BROKER_LOGGER", "1")], config_filter="all")
        return {k: (v["value"], v["config_source"]) for k, v in described["broker_logger"]["1"].items()}

    def alter(name: str, level: str | None, op: AlterConfigOp = AlterConfigOp.SET) -> object:
        result = client.alter_configs([KpConfigResource("BROKER_LOGGER", "1", {name: (op, level)})],
                                      raise_on_unknown=False)
        return result["broker_logger"]["1"]

    try:
        before = loggers()
        assert before["root"] == ("INFO", "DYNAMIC_BROKER_LOGGER_CONFIG")
        assert before["pybroker.log.log_manager"][0] == before["kafka.log"][0] == "INFO"
        mark = broker.log_mark()
        assert alter("pybroker.log.log_manager", "DEBUG") == "OK"
        broker.wait_for_log(r"DEBUG Log cleanup completed", since=mark)
        assert loggers()["pybroker.log.log_manager"][0] == "DEBUG"
        assert alter("pybroker.log.log_manager", None, AlterConfigOp.DELETE) == "OK"
        assert loggers()["pybroker.log.log_manager"][0] == "INFO"
        assert "Logger no.such.logger does not exist!" in str(alter("no.such.logger", "DEBUG"))
        assert "Valid log levels are WARN, ERROR, FATAL, DEBUG, TRACE, INFO" in str(alter("root", "LOUD"))
        assert "Removing the log level of the root logger is not allowed" in str(
            alter("root", None, AlterConfigOp.DELETE))
        # Kafka's logger name for the cleaner stands for pybroker's.
        assert alter("kafka.log.LogCleaner", "WARN") == "OK"
        assert loggers()["pybroker.log.cleaner"][0] == "WARN"
    finally:
        client.close()


def test_kafka_python_describe_and_alter_broker_configs(broker):
    from kafka.admin import ConfigResource as KpConfigResource
    from kafka.admin import KafkaAdminClient

    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        result = client.alter_configs([KpConfigResource("BROKER", "1", {"log.cleaner.backoff.ms": "1000"})])
        assert result == {"broker": {"1": "OK"}}
        described = client.describe_configs([KpConfigResource("BROKER", "1")], config_filter="all")["broker"]["1"]
        entry = described["log.cleaner.backoff.ms"]
        assert (entry["value"], entry["config_source"], entry["read_only"]) == ("1000", "DYNAMIC_BROKER_CONFIG", False)
        assert described["log.dirs"]["read_only"] is True
        dynamic = client.describe_configs([KpConfigResource("BROKER", "1")])["broker"]["1"]
        assert {k: v["value"] for k, v in dynamic.items()} == {"log.cleaner.backoff.ms": "1000"}
        with pytest.raises(ValueError, match="log.dirs"):
            client.alter_configs([KpConfigResource("BROKER", "1", {"log.dirs": "/tmp"})])
        client.reset_configs([KpConfigResource("BROKER", "1", ["log.cleaner.backoff.ms"])])
        assert client.describe_configs([KpConfigResource("BROKER", "1")])["broker"]["1"] == {}
    finally:
        client.close()


def test_cli_brokers_and_broker_loggers(start_broker):
    from tests.integration.test_cli import failed, ok, pybroker

    broker = start_broker()

    def configs(*args: str):
        return pybroker("configs", "--bootstrap-server", broker.bootstrap, *args)

    assert ok(configs("--entity-type", "brokers", "--entity-default", "--alter", "--add-config",
                      "log.retention.ms=3600000,log.cleaner.backoff.ms=2000")) == \
        "Completed updating default config for brokers in the cluster.\n"
    assert ok(configs("--entity-type", "brokers", "--entity-name", "1", "--alter", "--add-config",
                      "log.cleaner.threads=2")) == "Completed updating config for broker 1.\n"
    assert ok(configs("--entity-type", "brokers", "--entity-name", "1", "--describe")).splitlines() == [
        "Dynamic configs for broker 1 are:",
        "  log.cleaner.threads=2 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:log.cleaner.threads=2, "
        "DEFAULT_CONFIG:log.cleaner.threads=1}",
    ]
    assert ok(configs("--entity-type", "brokers", "--entity-default", "--describe")).splitlines() == [
        "Default configs for brokers in the cluster are:",
        "  log.cleaner.backoff.ms=2000 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.cleaner.backoff.ms=2000}",
        "  log.retention.ms=3600000 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=3600000}",
    ]
    # The whole set is sent again: a deletion keeps the others.
    assert ok(configs("--broker-defaults", "--alter", "--delete-config", "log.cleaner.backoff.ms")) == \
        "Completed updating default config for brokers in the cluster.\n"
    assert [line.split("=")[0] for line in ok(configs("--broker-defaults", "--describe")).splitlines()[1:]] == \
        ["  log.retention.ms"]
    assert "Invalid config(s): log.segment.bytes" in failed(configs("--broker", "1", "--alter", "--delete-config",
                                                                   "log.segment.bytes"))
    assert "Cannot update these configs dynamically: Set(log.dirs)" in failed(
        configs("--broker", "1", "--alter", "--add-config", "log.dirs=/tmp/x"))

    out = ok(configs("--entity-type", "broker-loggers", "--entity-name", "1", "--describe")).splitlines()
    assert out[0] == "Dynamic configs for broker-logger 1 are:"
    assert "  root=INFO sensitive=false synonyms={}" in out
    assert ok(configs("--entity-type", "broker-loggers", "--entity-name", "1", "--alter", "--add-config",
                      "pybroker.controller=DEBUG")) == "Completed updating config for broker-logger 1.\n"
    assert "  pybroker.controller=DEBUG sensitive=false synonyms={}" in ok(
        configs("--entity-type", "broker-loggers", "--entity-name", "1", "--describe")).splitlines()
    assert "Invalid broker logger(s): no.such" in failed(
        configs("--entity-type", "broker-loggers", "--entity-name", "1", "--alter", "--add-config", "no.such=DEBUG"))


def test_three_brokers_follow_the_cluster_default_and_their_own(zookeeper, tmp_path, topic_name, request):
    from tests.integration.cluster import start_cluster
    from tests.zookeeper import chroot_for

    cluster = start_cluster(chroot_for(zookeeper, request.node.name), tmp_path, **FAST_RETENTION)
    try:
        admin = cluster.admin()
        create(admin, NewTopic(topic_name, 3, 3, config={"segment.bytes": "1024"}))
        wait_until(lambda: all(len(isr) == 3 for _l, _r, isr in cluster.partitions(topic_name).values()), timeout=20)
        for partition in range(3):
            produce_old(cluster.bootstrap, topic_name, 8, partition)
        project_admin(cluster.broker(1).bootstrap,
                      lambda a: a.alter_configs(BROKER_RESOURCE, "", {"log.retention.ms": "60000"}))
        assert incremental(admin, ResourceType.BROKER, "2", ("log.retention.ms", "120000", AlterConfigOpType.SET),
                           ("num.replica.fetchers", "2", AlterConfigOpType.SET)) is None

        def sources() -> dict[int, tuple[str, int]]:
            out = {}
            for node in (1, 2, 3):
                entry = describe(admin, ResourceType.BROKER, str(node))["log.retention.ms"]
                out[node] = (entry.value, entry.source)
            return out

        wait_until(lambda: sources() == {1: ("60000", DYNAMIC_DEFAULT), 2: ("120000", DYNAMIC),
                                         3: ("60000", DYNAMIC_DEFAULT)}, timeout=15, message="every broker told")
        # Every partition's leader deleted its old segments under the new retention, whichever broker leads it.
        wait_until(lambda: all(earliest(cluster.bootstrap, topic_name, p) > 0 for p in range(3)), timeout=20,
                   message="old segments deleted on every leader")
        # Broker 2 resized its fetcher pool; replication goes on.
        for partition in range(3):
            produce_old(cluster.bootstrap, topic_name, 2, partition)
        wait_until(lambda: all(len(isr) == 3 for _l, _r, isr in cluster.partitions(topic_name).values()), timeout=20)
        assert describe(admin, ResourceType.BROKER, "2")["num.replica.fetchers"].value == "2"
        # A broker's configs are answered by that broker only (Kafka's message otherwise).
        async def ask_broker_1() -> object:
            connection = await broker_connection(cluster.broker(1).bootstrap)
            try:
                return await connection.send(ApiKey.DESCRIBE_CONFIGS, _describe_request("2"))
            finally:
                await connection.close()

        answer = asyncio.run(ask_broker_1()).results[0]
        assert (answer.error_code, answer.error_message) == (
            ErrorCode.INVALID_REQUEST, "Unexpected broker id, expected 1 or empty string, but received 2")
        asyncio.run(_topic_configs_read_your_writes_on_every_broker(cluster, topic_name))
    finally:
        cluster.kill()


async def _topic_configs_read_your_writes_on_every_broker(cluster, topic: str) -> None:
    """A topic config set through one broker is seen at once by the next request to another (each
    request reads ZooKeeper, as Kafka's admin path does, not the change notification's copy): an
    incremental SET of a second key through broker b keeps the first set through broker a, and a
    describe through broker c answers both. Without the store read, a round now and then answered
    the copy broker c had before the notification came."""
    from pybroker.protocol.messages import DescribeConfigsRequest, IncrementalAlterConfigsRequest

    topic_resource = 2
    connections = {node: await broker_connection(cluster.broker(node).bootstrap) for node in (1, 2, 3)}

    async def set_config(node: int, name: str, value: str) -> None:
        answer = await connections[node].send(ApiKey.INCREMENTAL_ALTER_CONFIGS, IncrementalAlterConfigsRequest(
            validate_only=False, resources=[IncrementalAlterConfigsRequest.AlterConfigsResource(
                resource_type=topic_resource, resource_name=topic, configs=[
                    IncrementalAlterConfigsRequest.AlterableConfig(name=name, config_operation=0, value=value)])]))
        assert answer.responses[0].error_code == 0, answer

    try:
        for i in range(30):
            a, b, c = i % 3 + 1, (i + 1) % 3 + 1, (i + 2) % 3 + 1
            await set_config(a, "retention.ms", str(100_000 + i))
            await set_config(b, "segment.ms", str(200_000 + i))
            answer = await connections[c].send(ApiKey.DESCRIBE_CONFIGS, DescribeConfigsRequest(resources=[
                DescribeConfigsRequest.DescribeConfigsResource(
                    resource_type=topic_resource, resource_name=topic,
                    configuration_keys=["retention.ms", "segment.ms"])], include_synonyms=False))
            found = {entry.name: entry.value for entry in answer.results[0].configs}
            assert found == {"retention.ms": str(100_000 + i), "segment.ms": str(200_000 + i)}, (i, a, b, c)
    finally:
        for connection in connections.values():
            await connection.close()


def _describe_request(name: str):
    from pybroker.protocol.messages import DescribeConfigsRequest

    return DescribeConfigsRequest(resources=[DescribeConfigsRequest.DescribeConfigsResource(
        resource_type=4, resource_name=name, configuration_keys=None)], include_synonyms=False)
