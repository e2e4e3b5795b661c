"""Topic administration with every admin client: create, delete, partitions, configs, cluster.

The clients are confluent-kafka's ``AdminClient``, kafka-python's ``KafkaAdminClient``, aiokafka's
``AIOKafkaAdminClient`` and the project's own ``pybroker.client.admin.Admin``. Error codes and
config values/sources are Kafka's, as each client reports them to its user.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    ResourceType,
)

from pybroker.client.admin import Admin, AdminError
from pybroker.common.errors import ErrorCode
from pybroker.common.topic import topic_id_to_string
from tests.integration import clients

KAFKA_TOPIC_DEFAULTS = {
    "retention.ms": "604800000",
    "segment.bytes": "1073741824",
    "cleanup.policy": "delete",
    "max.message.bytes": "1048588",
    "log.retention.min.timestamp": "0",
}


# This module's shared broker (conftest's `broker`) gives new topics 3 partitions.
BROKER_OVERRIDES = {"num.partitions": 3}


@pytest.fixture(scope="module")
def admin(broker) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap})


@pytest.fixture(scope="module")
def kp_admin(broker) -> Iterator[object]:
    from kafka.admin import KafkaAdminClient

    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    yield client
    client.close()


# --- helpers ----------------------------------------------------------------------------------

def outcome(future) -> int | None:
    """None if a confluent admin future succeeded, else the Kafka error code it failed with."""
    try:
        future.result(timeout=30)
    except KafkaException as e:
        return e.args[0].code()
    return None


def create(admin: AdminClient, *topics: NewTopic, validate_only: bool = False) -> dict[str, int | None]:
    return {name: outcome(f) for name, f in admin.create_topics(list(topics), validate_only=validate_only).items()}


def topic_partitions(admin: AdminClient) -> dict[str, int]:
    return {name: len(t.partitions) for name, t in admin.list_topics(timeout=10).topics.items()}


def confluent_topic_id(admin: AdminClient, topic: str) -> uuid.UUID:
    described = admin.describe_topics(TopicCollection([topic]))[topic].result(timeout=30)
    mask = (1 << 64) - 1
    msb, lsb = described.topic_id.get_most_significant_bits(), described.topic_id.get_least_significant_bits()
    return uuid.UUID(int=((msb & mask) << 64) | (lsb & mask))


def topic_configs(admin: AdminClient, topic: str) -> dict[str, ConfigEntry]:
    resource = ConfigResource(ResourceType.TOPIC, topic)
    return admin.describe_configs([resource])[resource].result(timeout=30)


def overrides(admin: AdminClient, topic: str) -> dict[str, str]:
    return {n: e.value for n, e in topic_configs(admin, topic).items()
            if e.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value}


def incremental(admin: AdminClient, topic: str, *ops: tuple[str, str | None, AlterConfigOpType]) -> int | None:
    resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry(name, value, incremental_operation=op) for name, value, op in ops
    ])
    return outcome(admin.incremental_alter_configs([resource])[resource])


def run_admin(bootstrap: str, action):
    """Run ``action(admin)`` with a started project ``Admin`` and return its result."""

    async def main():
        async with Admin(bootstrap) as project_admin:
            return await action(project_admin)

    return asyncio.run(main())


def run_aiokafka_admin(bootstrap: str, action):
    from aiokafka.admin import AIOKafkaAdminClient

    async def main():
        client = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
        await client.start()
        try:
            return await action(client)
        finally:
            await client.close()

    return asyncio.run(main())


# --- CreateTopics -----------------------------------------------------------------------------

def test_confluent_creates_topics_with_partitions_and_configs(broker, admin, topic_name):
    plain, configured = topic_name + "-plain", topic_name + "-configured"
    assert create(
        admin,
        NewTopic(plain, num_partitions=2, replication_factor=1),
        NewTopic(configured, num_partitions=5, replication_factor=1,
                 config={"retention.ms": "3600000", "cleanup.policy": "compact"}),
    ) == {plain: None, configured: None}

    metadata = admin.list_topics(timeout=10)
    assert len(metadata.topics[plain].partitions) == 2
    assert len(metadata.topics[configured].partitions) == 5
    for partition in metadata.topics[configured].partitions.values():
        assert partition.replicas == [1] and partition.isrs == [1] and partition.leader == 1
    assert overrides(admin, configured) == {"retention.ms": "3600000", "cleanup.policy": "compact"}
    assert overrides(admin, plain) == {}
    # Each partition has its directory in the data dir.
    assert sorted(p.name for p in broker.data_dir.iterdir() if p.name.startswith(configured + "-")) == \
        sorted(f"{configured}-{i}" for i in range(5))


def test_confluent_create_topic_errors(admin, topic_name):
    assert create(admin, NewTopic(topic_name, 1, 1)) == {topic_name: None}
    assert create(admin, NewTopic(topic_name, 4, 1)) == {topic_name: KafkaError.TOPIC_ALREADY_EXISTS}
    assert topic_partitions(admin)[topic_name] == 1  # the failed re-creation changed nothing

    invalid = ["bad name!", "x" * 250, "..", "slash/topic"]
    assert create(admin, *(NewTopic(n, 1, 1) for n in invalid)) == dict.fromkeys(invalid, KafkaError.TOPIC_EXCEPTION)

    assert create(admin, NewTopic(topic_name + "-rf2", 1, 2)) == {topic_name + "-rf2": KafkaError.INVALID_REPLICATION_FACTOR}
    assert create(admin, NewTopic(topic_name + "-cfg", 1, 1, config={"retention.ms": "soon"})) == \
        {topic_name + "-cfg": KafkaError.INVALID_CONFIG}
    assert create(admin, NewTopic(topic_name + "-key", 1, 1, config={"no.such.config": "1"})) == \
        {topic_name + "-key": KafkaError.INVALID_CONFIG}
    existing = topic_partitions(admin)
    assert not {n for n in existing if n.startswith(topic_name + "-")} and not set(invalid) & set(existing)


def test_validate_only_creates_nothing(broker, admin, kp_admin, topic_name):
    assert create(admin, NewTopic(topic_name, 2, 1, config={"retention.ms": "1000"}), validate_only=True) == {topic_name: None}
    result = kp_admin.create_topics({topic_name: {"num_partitions": 4}}, validate_only=True)
    assert result["topics"][0]["error_code"] == 0 and result["topics"][0]["num_partitions"] == 4
    # A validate-only request still reports what a real one would.
    assert create(admin, NewTopic(topic_name + "-rf2", 1, 2), validate_only=True) == \
        {topic_name + "-rf2": KafkaError.INVALID_REPLICATION_FACTOR}
    assert topic_name not in topic_partitions(admin)
    assert topic_name not in kp_admin.list_topics()
    assert not any(p.name.startswith(topic_name) for p in broker.data_dir.iterdir())


def test_kafka_python_create_topics(kp_admin, admin, topic_name):
    import kafka.errors as Errors

    result = kp_admin.create_topics({topic_name: {"num_partitions": 2, "replication_factor": 1,
                                                  "configs": {"segment.bytes": "500000"}}})
    (created,) = result["topics"]
    assert (created["name"], created["error_code"], created["num_partitions"], created["replication_factor"]) == \
        (topic_name, 0, 2, 1)
    # CreateTopics v5+ returns the new topic's configs.
    assert created["configs"]["segment.bytes"]["value"] == "500000"
    assert created["configs"]["segment.bytes"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    assert created["configs"]["retention.ms"]["value"] == "604800000"
    assert uuid.UUID(created["topic_id"]) == confluent_topic_id(admin, topic_name)

    with pytest.raises(Errors.TopicAlreadyExistsError):
        kp_admin.create_topics({topic_name: {}})
    with pytest.raises(Errors.InvalidTopicError):
        kp_admin.create_topics({"no spaces please": {}})
    with pytest.raises(Errors.InvalidReplicationFactorError):
        kp_admin.create_topics({topic_name + "-rf2": {"replication_factor": 2}})
    with pytest.raises(Errors.InvalidConfigurationError):
        kp_admin.create_topics({topic_name + "-cfg": {"configs": {"cleanup.policy": "shred"}}})
    # Defaults come from the broker: num.partitions=3.
    kp_admin.create_topics({topic_name + "-defaults": {}})
    assert topic_partitions(admin)[topic_name + "-defaults"] == 3


def test_aiokafka_create_topics(broker, admin, topic_name):
    from aiokafka.admin import NewTopic as AioNewTopic

    async def action(client):
        first = await client.create_topics([AioNewTopic(topic_name, 2, 1, topic_configs={"retention.ms": "7000"})])
        second = await client.create_topics([
            AioNewTopic(topic_name, 2, 1),
            AioNewTopic("..", 1, 1),
            AioNewTopic(topic_name + "-rf2", 1, 2),
            AioNewTopic(topic_name + "-zero", 0, 1),
        ])
        twice = await client.create_topics([AioNewTopic(topic_name + "-twice", 1, 1), AioNewTopic(topic_name + "-twice", 2, 1)])
        return first.topic_errors, second.topic_errors, twice.topic_errors, await client.list_topics()

    first, second, twice, listed = run_aiokafka_admin(broker.bootstrap, action)
    assert [(t, code) for t, code, _ in first] == [(topic_name, 0)]
    assert [(t, code) for t, code, _ in second] == [
        (topic_name, ErrorCode.TOPIC_ALREADY_EXISTS),
        ("..", ErrorCode.INVALID_TOPIC_EXCEPTION),
        (topic_name + "-rf2", ErrorCode.INVALID_REPLICATION_FACTOR),
        (topic_name + "-zero", ErrorCode.INVALID_PARTITIONS),
    ]
    # A name given twice: one INVALID_REQUEST result for it, and nothing created.
    assert [(t, code) for t, code, _ in twice] == [(topic_name + "-twice", ErrorCode.INVALID_REQUEST)]
    assert topic_name in listed and topic_name + "-zero" not in listed and topic_name + "-twice" not in listed
    assert overrides(admin, topic_name) == {"retention.ms": "7000"}


def test_project_admin_client(broker, admin, topic_name):
    async def action(project_admin: Admin):
        await project_admin.create_topic(topic_name, 2, 1, {"retention.ms": "5000"})
        errors = {}
        for label, call in [
            ("exists", project_admin.create_topic(topic_name, 1)),
            ("invalid", project_admin.create_topic("bad*name")),
            ("rf", project_admin.create_topic(topic_name + "-rf2", 1, 2)),
            ("config", project_admin.alter_topic_configs(topic_name, {"segment.bytes": "tiny"})),
            ("partitions", project_admin.create_partitions(topic_name, 2)),
            ("unknown", project_admin.describe_topic_configs(topic_name + "-missing")),
        ]:
            with pytest.raises(AdminError) as caught:
                await call
            errors[label] = caught.value.error
        await project_admin.create_partitions(topic_name, 3)
        await project_admin.alter_topic_configs(topic_name, {"segment.bytes": "100000"}, ["retention.ms"])
        (described,) = await project_admin.describe_topics([topic_name])
        configs = await project_admin.describe_topic_configs(topic_name)
        listed = await project_admin.list_topics()
        await project_admin.delete_topic(topic_name)
        with pytest.raises(AdminError) as caught:
            await project_admin.delete_topic(topic_name)
        errors["deleted"] = caught.value.error
        return errors, described, configs, listed, await project_admin.list_topics()

    errors, described, configs, listed, after_delete = run_admin(broker.bootstrap, action)
    assert errors == {
        "exists": ErrorCode.TOPIC_ALREADY_EXISTS,
        "invalid": ErrorCode.INVALID_TOPIC_EXCEPTION,
        "rf": ErrorCode.INVALID_REPLICATION_FACTOR,
        "config": ErrorCode.INVALID_CONFIG,
        "partitions": ErrorCode.INVALID_PARTITIONS,
        "unknown": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        "deleted": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    }
    assert [p.partition for p in described.partitions] == [0, 1, 2]
    assert all(p.leader == 1 and p.replicas == [1] and p.isr == [1] for p in described.partitions)
    # KIP-253's counts (Metadata tags 10000 and 10001): created with 2, producers now use 3.
    assert (described.initial_partition_count, described.undeleted_partition_count) == (2, 3)
    assert configs["segment.bytes"] == ("100000", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)
    assert configs["retention.ms"] == ("604800000", ConfigSource.DEFAULT_CONFIG.value)
    assert topic_name in listed and topic_name not in after_delete


# --- DeleteTopics -----------------------------------------------------------------------------

def test_delete_topic_removes_metadata_and_data(broker, admin, topic_name):
    assert create(admin, NewTopic(topic_name, 2, 1, config={"retention.ms": "1000"})) == {topic_name: None}
    clients.produce_confluent(broker.bootstrap, topic_name, [(b"k", b"before delete")], partition=1)
    old_id = confluent_topic_id(admin, topic_name)
    assert (broker.data_dir / f"{topic_name}-1").is_dir()

    assert outcome(admin.delete_topics([topic_name])[topic_name]) is None
    assert topic_name not in topic_partitions(admin)
    assert not any(p.name.startswith(topic_name) for p in broker.data_dir.iterdir())
    assert outcome(admin.delete_topics([topic_name])[topic_name]) == KafkaError.UNKNOWN_TOPIC_OR_PART

    # Re-created: a new topic with a new id, no old configs and no old records.
    assert create(admin, NewTopic(topic_name, 2, 1)) == {topic_name: None}
    assert confluent_topic_id(admin, topic_name) != old_id
    assert overrides(admin, topic_name) == {}
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "pybroker-tests", "enable.auto.commit": False})
    try:
        low_high = consumer.get_watermark_offsets(TopicPartition(topic_name, 1), timeout=10)
    finally:
        consumer.close()
    assert low_high == (0, 0)


def test_delete_topics_with_kafka_python_and_aiokafka(broker, admin, kp_admin, topic_name):
    import kafka.errors as Errors

    names = [topic_name + "-kp", topic_name + "-aio"]
    assert create(admin, *(NewTopic(n, 1, 1) for n in names)) == dict.fromkeys(names)

    result = kp_admin.delete_topics([names[0]])
    assert [(t["name"], t["error_code"]) for t in result["topics"]] == [(names[0], 0)]
    with pytest.raises(Errors.UnknownTopicOrPartitionError):
        kp_admin.delete_topics([names[0]])

    async def action(client):
        return (await client.delete_topics([names[1], topic_name + "-never"])).topic_error_codes

    codes = run_aiokafka_admin(broker.bootstrap, action)
    assert sorted(codes) == sorted([(names[1], 0), (topic_name + "-never", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)])
    remaining = topic_partitions(admin)
    assert not set(names) & set(remaining)


# --- auto-creation ----------------------------------------------------------------------------

@pytest.mark.parametrize("producer", ["confluent", "kafka-python", "aiokafka"])
def test_producer_auto_creates_topic_with_num_partitions(broker, admin, topic_name, producer):
    produce = {"confluent": clients.produce_confluent, "kafka-python": clients.produce_kafka_python,
               "aiokafka": clients.produce_aiokafka}[producer]
    assert topic_name not in topic_partitions(admin)
    produce(broker.bootstrap, topic_name, [(b"k", b"auto-created")], partition=2)
    assert topic_partitions(admin)[topic_name] == 3  # num.partitions=3
    assert overrides(admin, topic_name) == {}
    got = clients.consume_confluent(broker.bootstrap, topic_name, 1, partition=2)
    assert [(o, k, v) for o, k, v, _ in got] == [(0, b"k", b"auto-created")]


def test_librdkafka_consumer_does_not_auto_create(broker, admin, topic_name):
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "pybroker-tests", "enable.auto.commit": False})
    try:
        assert consumer.list_topics(topic_name, timeout=10).topics[topic_name].error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
        consumer.assign([TopicPartition(topic_name, 0)])
        for _ in range(5):  # the consumer asks for the assigned topic's metadata meanwhile
            message = consumer.poll(0.2)
            assert message is None or message.error() is not None
    finally:
        consumer.close()
    assert topic_name not in topic_partitions(admin)
    assert not any(p.name.startswith(topic_name) for p in broker.data_dir.iterdir())


def test_auto_create_disabled(start_broker, topic_name):
    from kafka import KafkaProducer
    from kafka.errors import KafkaTimeoutError

    broker = start_broker(**{"auto.create.topics.enable": False})
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})

    errors: list[KafkaError] = []
    producer = Producer({"bootstrap.servers": broker.bootstrap, "topic.metadata.propagation.max.ms": 100})
    producer.produce(topic_name, b"value", on_delivery=lambda err, _msg: errors.append(err))
    assert producer.flush(30) == 0
    assert [e.code() for e in errors] == [KafkaError.UNKNOWN_TOPIC_OR_PART]

    assert admin.list_topics(topic_name, timeout=10).topics[topic_name].error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    kp_producer = KafkaProducer(bootstrap_servers=broker.bootstrap, max_block_ms=500)
    try:
        with pytest.raises(KafkaTimeoutError):
            kp_producer.send(topic_name, b"value").get(timeout=10)
    finally:
        kp_producer.close(timeout=5)
    assert topic_name not in topic_partitions(admin)

    # Explicit creation still works.
    assert create(admin, NewTopic(topic_name, 1, 1)) == {topic_name: None}
    clients.produce_confluent(broker.bootstrap, topic_name, [(None, b"now it exists")])


# --- CreatePartitions -------------------------------------------------------------------------

def test_create_partitions_and_use_them(broker, admin, kp_admin, topic_name):
    from kafka.admin import NewPartitions as KpNewPartitions
    from kafka.errors import InvalidPartitionsError

    # Without KIP-253's ordered delivery a smaller count is Kafka's refusal, not a shrink.
    assert create(admin, NewTopic(topic_name, 1, 1, config={"enable.ordered.delivery": "false"})) == {topic_name: None}
    fs = admin.create_partitions([NewPartitions(topic_name, 3)])
    assert outcome(fs[topic_name]) is None
    assert topic_partitions(admin)[topic_name] == 3
    assert (broker.data_dir / f"{topic_name}-2").is_dir()

    pairs = [(f"k{i}".encode(), f"new partition {i}".encode()) for i in range(20)]
    clients.produce_confluent(broker.bootstrap, topic_name, pairs, partition=2)
    got = clients.consume_kafka_python(broker.bootstrap, topic_name, 20, partition=2)
    assert [(o, k, v) for o, k, v, _ in got] == [(i, k, v) for i, (k, v) in enumerate(pairs)]

    # Equal or smaller counts are refused; so is an unknown topic.
    for count in (3, 2):
        assert outcome(admin.create_partitions([NewPartitions(topic_name, count)])[topic_name]) == KafkaError.INVALID_PARTITIONS
    missing = topic_name + "-missing"
    assert outcome(admin.create_partitions([NewPartitions(missing, 2)])[missing]) == KafkaError.UNKNOWN_TOPIC_OR_PART
    # validate_only checks but does not change anything.
    assert outcome(admin.create_partitions([NewPartitions(topic_name, 8)], validate_only=True)[topic_name]) is None
    assert topic_partitions(admin)[topic_name] == 3

    kp_admin.create_partitions({topic_name: KpNewPartitions(4)})
    with pytest.raises(InvalidPartitionsError):
        kp_admin.create_partitions({topic_name: KpNewPartitions(1)})

    async def action(client):
        from aiokafka.admin import NewPartitions as AioNewPartitions
        from aiokafka.errors import InvalidPartitionsError as AioInvalidPartitions

        await client.create_partitions({topic_name: AioNewPartitions(5)})
        with pytest.raises(AioInvalidPartitions):
            await client.create_partitions({topic_name: AioNewPartitions(5)})

    run_aiokafka_admin(broker.bootstrap, action)
    assert topic_partitions(admin)[topic_name] == 5
    clients.produce_aiokafka(broker.bootstrap, topic_name, [(b"k", b"last partition")], partition=4)
    got = clients.consume_confluent(broker.bootstrap, topic_name, 1, partition=4)
    assert [(o, v) for o, _, v, _ in got] == [(0, b"last partition")]


# --- DescribeConfigs --------------------------------------------------------------------------

def test_describe_topic_configs_defaults_and_overrides(admin, topic_name):
    assert create(admin, NewTopic(topic_name, 1, 1, config={"retention.ms": "86400000"})) == {topic_name: None}
    configs = topic_configs(admin, topic_name)
    for name, value in KAFKA_TOPIC_DEFAULTS.items():
        if name == "retention.ms":
            continue
        entry = configs[name]
        assert (entry.value, entry.source, entry.is_read_only) == (value, ConfigSource.DEFAULT_CONFIG.value, False), name
    override = configs["retention.ms"]
    assert (override.value, override.source) == ("86400000", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)
    assert configs["message.timestamp.type"].value == "CreateTime"

    missing = ConfigResource(ResourceType.TOPIC, topic_name + "-missing")
    assert outcome(admin.describe_configs([missing])[missing]) == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_describe_broker_configs(broker, admin):
    resource = ConfigResource(ResourceType.BROKER, "1")
    configs = admin.describe_configs([resource])[resource].result(timeout=30)
    assert (configs["num.partitions"].value, configs["num.partitions"].source) == \
        ("3", ConfigSource.STATIC_BROKER_CONFIG.value)
    assert configs["log.dirs"].value == str(broker.data_dir)
    assert configs["listeners"].value == f"PLAINTEXT://{broker.bootstrap}"
    assert (configs["message.max.bytes"].value, configs["message.max.bytes"].source) == \
        ("1048588", ConfigSource.DEFAULT_CONFIG.value)
    assert configs["auto.create.topics.enable"].value == "true"
    assert configs["log.retention.hours"].value == "168"


def test_kafka_python_describe_and_alter_configs(kp_admin, admin, topic_name):
    from kafka.admin import ConfigResource as KpConfigResource
    from kafka.admin._configs import AlterConfigOp

    assert create(admin, NewTopic(topic_name, 1, 1, config={"retention.ms": "5000"})) == {topic_name: None}
    described = kp_admin.describe_configs([KpConfigResource("TOPIC", topic_name)])
    assert {k: (v["value"], v["config_source"]) for k, v in described["topic"][topic_name].items()} == \
        {"retention.ms": ("5000", "DYNAMIC_TOPIC_CONFIG")}
    everything = kp_admin.describe_configs([KpConfigResource("TOPIC", topic_name)], config_filter="all")["topic"][topic_name]
    for name, value in KAFKA_TOPIC_DEFAULTS.items():
        if name != "retention.ms":
            assert (everything[name]["value"], everything[name]["config_source"]) == (value, "DEFAULT_CONFIG"), name
    assert everything["segment.bytes"]["config_type"] == "INT"
    assert everything["cleanup.policy"]["config_type"] == "LIST"
    # Only the keys asked for; an empty key list means every key (as in Kafka).
    only = kp_admin.describe_configs([KpConfigResource("TOPIC", topic_name, {"segment.bytes": None, "cleanup.policy": None})],
                                     config_filter="all")["topic"][topic_name]
    assert {k: v["value"] for k, v in only.items()} == {"segment.bytes": "1073741824", "cleanup.policy": "delete"}
    assert kp_admin.describe_configs([KpConfigResource("TOPIC", topic_name, {})], config_filter="all")["topic"][topic_name] == everything

    # kafka-python checks keys against the broker's non-read-only configs, then uses
    # IncrementalAlterConfigs (APPEND is impossible with the legacy AlterConfigs).
    result = kp_admin.alter_configs([KpConfigResource("TOPIC", topic_name, {
        "segment.bytes": "200000", "cleanup.policy": (AlterConfigOp.APPEND, "compact"),
    })])
    assert result == {"topic": {topic_name: "OK"}}
    assert overrides(admin, topic_name) == {"retention.ms": "5000", "segment.bytes": "200000", "cleanup.policy": "delete,compact"}
    with pytest.raises(ValueError, match="no.such.config"):
        kp_admin.alter_configs([KpConfigResource("TOPIC", topic_name, {"no.such.config": "1"})])
    bad = kp_admin.alter_configs([KpConfigResource("TOPIC", topic_name, {"retention.ms": "x"})])
    assert "InvalidConfigurationError" in bad["topic"][topic_name]

    kp_admin.reset_configs([KpConfigResource("TOPIC", topic_name, ["retention.ms"])])
    assert overrides(admin, topic_name) == {"segment.bytes": "200000", "cleanup.policy": "delete,compact"}


def test_confluent_incremental_alter_configs(admin, topic_name):
    assert create(admin, NewTopic(topic_name, 1, 1)) == {topic_name: None}
    assert incremental(admin, topic_name,
                       ("retention.ms", "60000", AlterConfigOpType.SET),
                       ("max.message.bytes", "2000000", AlterConfigOpType.SET)) is None
    assert overrides(admin, topic_name) == {"retention.ms": "60000", "max.message.bytes": "2000000"}

    # APPEND starts from the default (delete) and adds; SUBTRACT removes.
    assert incremental(admin, topic_name, ("cleanup.policy", "compact", AlterConfigOpType.APPEND)) is None
    assert overrides(admin, topic_name)["cleanup.policy"] == "delete,compact"
    assert incremental(admin, topic_name, ("cleanup.policy", "compact", AlterConfigOpType.APPEND)) is None
    assert overrides(admin, topic_name)["cleanup.policy"] == "delete,compact"
    assert incremental(admin, topic_name, ("cleanup.policy", "delete", AlterConfigOpType.SUBTRACT)) is None
    assert overrides(admin, topic_name)["cleanup.policy"] == "compact"

    assert incremental(admin, topic_name, ("retention.ms", None, AlterConfigOpType.DELETE)) is None
    configs = topic_configs(admin, topic_name)
    assert (configs["retention.ms"].value, configs["retention.ms"].source) == ("604800000", ConfigSource.DEFAULT_CONFIG.value)
    assert overrides(admin, topic_name) == {"max.message.bytes": "2000000", "cleanup.policy": "compact"}

    # Invalid values and operations fail the whole resource and change nothing.
    before = overrides(admin, topic_name)
    for op in [("retention.ms", "abc", AlterConfigOpType.SET),
               ("segment.bytes", "1", AlterConfigOpType.SET),
               ("cleanup.policy", "shred", AlterConfigOpType.SET),
               ("message.timestamp.type", "WallClock", AlterConfigOpType.SET),
               ("no.such.config", "1", AlterConfigOpType.SET),
               ("retention.ms", "1000", AlterConfigOpType.APPEND)]:
        assert incremental(admin, topic_name, ("flush.messages", "1000", AlterConfigOpType.SET), op) == KafkaError.INVALID_CONFIG, op
    assert overrides(admin, topic_name) == before

    assert incremental(admin, topic_name + "-missing", ("retention.ms", "1", AlterConfigOpType.SET)) == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_confluent_legacy_alter_configs_replaces_all_overrides(admin, topic_name):
    assert create(admin, NewTopic(topic_name, 1, 1, config={"retention.ms": "1000", "cleanup.policy": "compact"})) == {topic_name: None}
    resource = ConfigResource(ResourceType.TOPIC, topic_name, set_config={"segment.bytes": "100000"})
    with pytest.warns(DeprecationWarning):
        futures = admin.alter_configs([resource])
    assert outcome(futures[resource]) is None
    assert overrides(admin, topic_name) == {"segment.bytes": "100000"}

    bad = ConfigResource(ResourceType.TOPIC, topic_name, set_config={"segment.bytes": "-5"})
    with pytest.warns(DeprecationWarning):
        assert outcome(admin.alter_configs([bad])[bad]) == KafkaError.INVALID_CONFIG
    missing = ConfigResource(ResourceType.TOPIC, topic_name + "-missing", set_config={"segment.bytes": "100000"})
    with pytest.warns(DeprecationWarning):
        assert outcome(admin.alter_configs([missing])[missing]) == KafkaError.UNKNOWN_TOPIC_OR_PART
    assert overrides(admin, topic_name) == {"segment.bytes": "100000"}


def test_aiokafka_describe_and_alter_configs(broker, admin, topic_name):
    from aiokafka.admin.config_resource import ConfigResource as AioConfigResource
    from aiokafka.admin.config_resource import ConfigResourceType

    assert create(admin, NewTopic(topic_name, 1, 1, config={"retention.ms": "1000"})) == {topic_name: None}

    async def action(client):
        altered = await client.alter_configs([AioConfigResource(ConfigResourceType.TOPIC, topic_name, {"segment.bytes": "300000"})])
        described = await client.describe_configs([AioConfigResource(ConfigResourceType.TOPIC, topic_name)])
        return altered, described

    altered, described = run_aiokafka_admin(broker.bootstrap, action)
    assert [r[0] for r in altered[0].resources] == [0]
    (resource,) = described[0].resources
    assert resource[0] == 0
    entries = {e[0]: (e[1], e[3]) for e in resource[4]}  # name: (value, config_source)
    assert entries["segment.bytes"] == ("300000", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)
    # The legacy AlterConfigs replaced the whole override set.
    assert entries["retention.ms"] == ("604800000", ConfigSource.DEFAULT_CONFIG.value)


# --- persistence and the cluster -------------------------------------------------------------

def test_topic_ids_configs_and_cluster_id_survive_restart(start_broker, topic_name):
    from kafka.admin import KafkaAdminClient

    broker = start_broker(**{"num.partitions": 2})
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    names = [topic_name + "-a", topic_name + "-b"]
    assert create(admin, NewTopic(names[0], 2, 1, config={"retention.ms": "123456"}), NewTopic(names[1], 1, 1)) == dict.fromkeys(names)
    assert incremental(admin, names[1], ("cleanup.policy", "compact", AlterConfigOpType.SET)) is None
    clients.produce_confluent(broker.bootstrap, names[0], [(b"k", b"kept")], partition=1)

    def snapshot():
        kp = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        try:
            kp_ids = {t["name"]: uuid.UUID(t["topic_id"]) for t in kp.describe_topics(names)}
            cluster = kp.describe_cluster()
        finally:
            kp.close()
        project_ids = run_admin(broker.bootstrap, lambda a: a.describe_topics(names))
        return {
            "confluent": {n: confluent_topic_id(admin, n) for n in names},
            "kafka-python": kp_ids,
            "project": {t.name: t.topic_id for t in project_ids},
            "cluster": (cluster["cluster_id"], [b["broker_id"] for b in cluster["brokers"]]),
            "configs": {n: overrides(admin, n) for n in names},
            "partitions": {n: topic_partitions(admin)[n] for n in names},
        }

    before = snapshot()
    assert before["confluent"] == before["kafka-python"]
    assert before["project"] == {n: topic_id_to_string(i) for n, i in before["confluent"].items()}
    assert before["configs"] == {names[0]: {"retention.ms": "123456"}, names[1]: {"cleanup.policy": "compact"}}
    # The id is also the one in each partition's partition.metadata.
    metadata_file = (broker.data_dir / f"{names[0]}-1" / "partition.metadata").read_text()
    assert f"topic_id: {before['project'][names[0]]}" in metadata_file

    broker.restart()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    assert snapshot() == before
    got = clients.consume_confluent(broker.bootstrap, names[0], 1, partition=1)
    assert [(o, v) for o, _, v, _ in got] == [(0, b"kept")]


def test_describe_cluster(broker, admin, kp_admin):
    described = kp_admin.describe_cluster()
    metadata = admin.list_topics(timeout=10)
    assert described["cluster_id"] == metadata.cluster_id
    assert described["cluster_id"] and described["controller_id"] == 1
    assert [(b["broker_id"], b["host"], b["port"]) for b in described["brokers"]] == [(1, "127.0.0.1", broker.port)]
    meta_properties = (broker.data_dir / "meta.properties").read_text()
    assert f"cluster.id={described['cluster_id']}" in meta_properties.splitlines()
    confluent_cluster = admin.describe_cluster().result(timeout=30)
    assert confluent_cluster.cluster_id == described["cluster_id"]
    assert [(n.id, n.port) for n in confluent_cluster.nodes] == [(1, broker.port)]

