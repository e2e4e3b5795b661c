"""Client quotas end to end on one broker: quotas altered and described through the project's
admin client (confluent-kafka 2.16 and kafka-python 3.0.12 expose no client-quota admin API),
a producer and a consumer held to their byte rates with ``throttle_time_ms`` seen by
kafka-python's metrics, and DescribeProducers through kafka-python's admin client; ``pybroker
configs`` / kafka-configs.sh altering and describing quotas (kafka-configs' output and errors);
on a three-broker cluster, a quota altered through one broker described through another and
enforced by a third, and kafka-python's own AlterClientQuotas/DescribeClientQuotas messages
(which its admin client does not expose) sent through its network layer.

The broker keeps short quota windows (2 samples of 1 s) so a throttle shows within seconds."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest
from kafka import KafkaConsumer, KafkaProducer
from kafka.admin import KafkaAdminClient

from pybroker.client.admin import Admin, AdminError
from pybroker.common.errors import ErrorCode
from pybroker.types import TopicPartition
from tests.conftest import REPO
from tests.integration.cluster import start_cluster
from tests.integration.test_cli import failed, ok, pybroker
from tests.zookeeper import chroot_for

BROKER_OVERRIDES = {"quota.window.num": 2, "quota.window.size.seconds": 1}
RATE = 200_000
TOTAL = 600_000  # three seconds' worth at the quota


def throttle_time_max(metrics: dict) -> float:
    """kafka-python's ``throttle-time-max``: the largest throttle_time_ms its responses carried."""
    return max((values.get("throttle-time-max") or 0 for values in metrics.values()), default=0)


def admin_call(bootstrap: str, action):  # noqa: ANN001, ANN201
    async def main():  # noqa: ANN202
        async with Admin(bootstrap) as admin:
            return await action(admin)

    return asyncio.run(main())


def test_alter_and_describe_client_quotas(broker) -> None:  # noqa: ANN001
    bootstrap = broker.bootstrap
    admin_call(bootstrap, lambda a: a.alter_client_quotas([
        ({"user": "alice"}, {"producer_byte_rate": 1024}),
        ({"user": None, "client-id": None}, {"request_percentage": 200.5}),
        ({"client-id": "described"}, {"consumer_byte_rate": 4096}),
    ]))
    found = admin_call(bootstrap, lambda a: a.describe_client_quotas())
    assert ({"user": "alice"}, {"producer_byte_rate": 1024.0}) in found
    assert ({"user": None, "client-id": None}, {"request_percentage": 200.5}) in found
    exact = admin_call(bootstrap, lambda a: a.describe_client_quotas([("client-id", 0, "described")], strict=True))
    assert exact == [({"client-id": "described"}, {"consumer_byte_rate": 4096.0})]
    with pytest.raises(AdminError) as failure:
        admin_call(bootstrap, lambda a: a.alter_client_quotas([({"user": "bob"}, {"producer_byte_rate": -5})]))
    assert failure.value.error == ErrorCode.INVALID_REQUEST
    assert "must be greater than 0" in str(failure.value)
    admin_call(bootstrap, lambda a: a.alter_client_quotas([
        ({"user": "alice"}, {"producer_byte_rate": None}),
        ({"user": None, "client-id": None}, {"request_percentage": None}),
        ({"client-id": "described"}, {"consumer_byte_rate": None}),
    ]))
    assert admin_call(bootstrap, lambda a: a.describe_client_quotas()) == []


def test_a_producer_and_a_consumer_are_held_to_their_quotas(broker) -> None:  # noqa: ANN001
    bootstrap, topic = broker.bootstrap, f"quota-{uuid.uuid4().hex[:8]}"
    admin_call(bootstrap, lambda a: a.create_topic(topic, 1, 1))
    admin_call(bootstrap, lambda a: a.alter_client_quotas([
        ({"client-id": "slow-producer"}, {"producer_byte_rate": RATE}),
        ({"client-id": "slow-consumer"}, {"consumer_byte_rate": RATE}),
    ]))
    try:
        producer = KafkaProducer(bootstrap_servers=bootstrap, client_id="slow-producer", linger_ms=5,
                                 batch_size=16384, acks=1)
        value = b"x" * 10_000
        started = time.monotonic()
        for _ in range(TOTAL // len(value)):
            producer.send(topic, value)
        producer.flush(timeout=60)
        produce_seconds = time.monotonic() - started
        throttle = throttle_time_max(producer.metrics())
        producer.close()
        # With 2 windows of 1 s the first second's worth passes at once; the rest waits for the quota.
        assert produce_seconds >= (TOTAL - 2 * RATE) / RATE * 0.8, produce_seconds
        assert throttle > 0

        consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, client_id="slow-consumer",
                                 auto_offset_reset="earliest", enable_auto_commit=False, group_id=None,
                                 consumer_timeout_ms=30_000, fetch_max_bytes=100_000, max_partition_fetch_bytes=100_000)
        started = time.monotonic()
        received = 0
        for message in consumer:
            received += len(message.value)
            if received >= TOTAL:
                break
        consume_seconds = time.monotonic() - started
        fetch_throttle = throttle_time_max(consumer.metrics())
        consumer.close()
        assert received >= TOTAL
        assert consume_seconds >= (TOTAL - 2 * RATE) / RATE * 0.8, consume_seconds
        assert fetch_throttle > 0
    finally:
        admin_call(bootstrap, lambda a: a.alter_client_quotas([
            ({"client-id": "slow-producer"}, {"producer_byte_rate": None}),
            ({"client-id": "slow-consumer"}, {"consumer_byte_rate": None}),
        ]))


def test_describe_producers_through_kafka_python(broker) -> None:  # noqa: ANN001
    bootstrap, topic = broker.bootstrap, f"producers-{uuid.uuid4().hex[:8]}"
    admin_call(bootstrap, lambda a: a.create_topic(topic, 1, 1))
    producer = KafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True, acks="all")
    for i in range(3):
        producer.send(topic, b"v%d" % i)
    producer.flush(timeout=30)
    producer.close()
    kafka_admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        described = kafka_admin.describe_producers([TopicPartition(topic, 0)])
    finally:
        kafka_admin.close()
    print(described)
    ours = admin_call(bootstrap, lambda a: a.describe_producers([TopicPartition(topic, 0)]))
    states = ours[TopicPartition(topic, 0)]
    assert len(states) == 1 and states[0].last_sequence == 2 and states[0].current_transaction_start_offset == -1
    assert str(states[0].producer_id) in str(described)


# --- pybroker configs / kafka-configs.sh: client quotas ------------------------------------------

def configs(bootstrap: str, *args: str) -> subprocess.CompletedProcess[str]:
    return pybroker("configs", "--bootstrap-server", bootstrap, *args)


def kafka_configs(bootstrap: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Kafka's ``kafka-configs.sh`` (its flags translated by `pybroker.cli.kafka_scripts`)."""
    code = "import sys; from pybroker.cli.script_commands import kafka_configs; sys.exit(kafka_configs())"
    return subprocess.run([sys.executable, "-c", code, "--bootstrap-server", bootstrap, *args], cwd=REPO,
                          capture_output=True, text=True, timeout=60)


def test_configs_cli_alters_and_describes_client_quotas(broker) -> None:  # noqa: ANN001
    b = broker.bootstrap
    user = f"alice-{uuid.uuid4().hex[:6]}"
    assert ok(configs(b, "--alter", "--entity-type", "users", "--entity-name", user, "--add-config",
                      "producer_byte_rate=1024,consumer_byte_rate=2048,request_percentage=50")) == \
        f"Completed updating config for user {user}.\n"
    assert ok(configs(b, "--describe", "--user", user)) == (
        f"Quota configs for user-principal '{user}' are consumer_byte_rate=2048.0, request_percentage=50.0, "
        "producer_byte_rate=1024.0\n")  # Kafka's order (tests/differential/test_kafka_tools_a.py)
    # A client id of the user (the types in either order), client ids, the defaults.
    assert ok(configs(b, "--alter", "--entity-type", "users", "--entity-name", user, "--entity-type", "clients",
                      "--entity-name", "app", "--add-config", "producer_byte_rate=4096")) == \
        f"Completed updating config for user {user}.\n"
    assert ok(configs(b, "--alter", "--entity-type", "clients", "--entity-default", "--entity-type", "users",
                      "--entity-name", user, "--add-config", "request_percentage=12.5")) == \
        "Completed updating default config for clients in the cluster.\n"
    assert ok(kafka_configs(b, "--alter", "--client", "app", "--add-config", "consumer_byte_rate=1e4")) == \
        "Completed updating config for client app.\n"
    assert ok(kafka_configs(b, "--alter", "--client-defaults", "--add-config", "consumer_byte_rate=100")) == \
        "Completed updating default config for clients in the cluster.\n"
    assert ok(kafka_configs(b, "--alter", "--user-defaults", "--add-config", "producer_byte_rate=10000000000")) == \
        "Completed updating default config for users in the cluster.\n"
    assert ok(configs(b, "--describe", "--entity-type", "users", "--entity-name", user, "--entity-type", "clients")) \
        == (f"Quota configs for user-principal '{user}', the default client-id are request_percentage=12.5\n"
            f"Quota configs for user-principal '{user}', client-id 'app' are producer_byte_rate=4096.0\n")
    assert ok(configs(b, "--describe", "--entity-type", "users", "--entity-name", user, "--entity-type", "clients",
                      "--entity-name", "app")) == \
        f"Quota configs for user-principal '{user}', client-id 'app' are producer_byte_rate=4096.0\n"
    assert ok(kafka_configs(b, "--describe", "--client", "app")) == \
        "Quota configs for client-id 'app' are consumer_byte_rate=10000.0\n"
    assert ok(configs(b, "--describe", "--entity-type", "clients")) == (
        "Quota configs for the default client-id are consumer_byte_rate=100.0\n"
        "Quota configs for client-id 'app' are consumer_byte_rate=10000.0\n")
    assert ok(kafka_configs(b, "--describe", "--user-defaults")) == \
        "Quota configs for the default user-principal are producer_byte_rate=1.0E10\n"
    every_user = ok(configs(b, "--describe", "--entity-type", "users")).splitlines()
    assert "Quota configs for the default user-principal are producer_byte_rate=1.0E10" in every_user
    assert f"Quota configs for user-principal '{user}' are consumer_byte_rate=2048.0, request_percentage=50.0, " \
           "producer_byte_rate=1024.0" in every_user
    assert not any("client-id" in line for line in every_user)  # strict: users alone
    # What the broker holds (the project's admin client; neither real client exposes the API).
    found = admin_call(b, lambda a: a.describe_client_quotas([("user", 0, user), ("client-id", 0, "app")], strict=True))
    assert found == [({"user": user, "client-id": "app"}, {"producer_byte_rate": 4096.0})]
    # The user keeps SCRAM credentials beside its quotas.
    assert ok(configs(b, "--alter", "--user", user, "--add-config", "SCRAM-SHA-256=[password=secret]")) == \
        f"Completed updating config for user {user}.\n"
    assert ok(configs(b, "--describe", "--user", user)).splitlines()[1] == \
        f"SCRAM credential configs for user-principal '{user}' are SCRAM-SHA-256=iterations=4096"

    # Errors, as kafka-configs: one line, exit 1 (2 for usage errors), nothing changed.
    cases = [
        (("--alter", "--client", "app", "--delete-config", "request_percentage"), "Invalid config(s): request_percentage"),
        (("--alter", "--client", "app", "--add-config", "producer_byte_rate=fast"),
         "Cannot parse quota configuration value for producer_byte_rate: fast"),
        (("--alter", "--client", "app", "--add-config", "SCRAM-SHA-256=[password=x]"),
         "Only quota configs can be added for 'clients' using --bootstrap-server. Unexpected config names: "
         "Set(SCRAM-SHA-256)"),
        (("--alter", "--user", user, "--add-config", "producer_byte_rate=1.5"),
         "Configuration producer_byte_rate must be a LONG value"),
        (("--alter", "--user", user, "--add-config", "consumer_byte_rate=0"), "must be greater than 0"),
        (("--alter", "--user-defaults", "--add-config", "SCRAM-SHA-256=[password=x]"),
         "The use of --entity-default or --user-defaults is not allowed with User SCRAM Credentials"),
        (("--describe", "--entity-type", "users", "--entity-type", "topics"),
         "Only 'users' and 'clients' entity types may be specified together"),
        (("--describe", "--entity-type", "users", "--entity-type", "users"), "Duplicate entity type(s) specified: users"),
        (("--alter", "--entity-type", "users", "--entity-name", user, "--entity-type", "clients", "--add-config",
          "producer_byte_rate=1"), "An entity name must be specified for every entity type"),
        (("--describe", "--user", user, "--entity-type", "clients"),
         "--entity-{type,name,default} should not be used in conjunction with specific entity flags"),
    ]
    with ThreadPoolExecutor(4) as pool:
        failures = list(pool.map(lambda case: configs(b, *case[0]), cases))
    for (args, message), failure in zip(cases, failures, strict=True):
        assert failed(failure, message).startswith("Error: "), (args, failure.stderr)
        assert failure.returncode == 1
    refused = kafka_configs(b, "--describe", "--ip-defaults")
    assert refused.returncode == 1 and "IP connection-rate quotas" in refused.stderr

    # Deleting every key removes the entity.
    assert ok(configs(b, "--alter", "--client", "app", "--delete-config", "consumer_byte_rate")) == \
        "Completed updating config for client app.\n"
    assert ok(configs(b, "--alter", "--user", user, "--delete-config",
                      "producer_byte_rate,consumer_byte_rate,request_percentage")) == \
        f"Completed updating config for user {user}.\n"
    assert ok(configs(b, "--describe", "--user", user)) == \
        f"SCRAM credential configs for user-principal '{user}' are SCRAM-SHA-256=iterations=4096\n"
    assert ok(configs(b, "--describe", "--client", "app")) == ""


# --- a three-broker cluster ----------------------------------------------------------------------

@pytest.fixture
def cluster(zookeeper, tmp_path, request):  # noqa: ANN001, ANN201
    cluster = start_cluster(chroot_for(zookeeper, request.node.name), tmp_path, **BROKER_OVERRIDES)
    yield cluster
    cluster.kill()


def test_a_quota_set_on_one_broker_reaches_every_broker(cluster) -> None:  # noqa: ANN001
    """Altered through broker 1, described through broker 2, enforced by broker 3 (the leader the
    producer writes to): quotas live in ZooKeeper (``/config/clients/<id>``) and every broker
    follows their change notifications."""
    topic, client_id = f"cluster-quota-{uuid.uuid4().hex[:8]}", "slow-cluster-producer"
    assert ok(pybroker("topics", "--bootstrap-server", cluster.bootstrap, "create", "--topic", topic,
                       "--replica-assignment", "3")) == f"Created topic {topic}.\n"
    assert ok(configs(cluster.broker(1).bootstrap, "--alter", "--client", client_id, "--add-config",
                      f"producer_byte_rate={RATE}")) == f"Completed updating config for client {client_id}.\n"
    for node in (2, 3):
        assert ok(configs(cluster.broker(node).bootstrap, "--describe", "--client", client_id)) == \
            f"Quota configs for client-id '{client_id}' are producer_byte_rate={RATE}.0\n"
    producer = KafkaProducer(bootstrap_servers=cluster.broker(1).bootstrap, client_id=client_id, linger_ms=5,
                             batch_size=16384, acks=1)
    try:
        value = b"x" * 10_000
        started = time.monotonic()
        for _ in range(TOTAL // len(value)):
            producer.send(topic, value)
        producer.flush(timeout=60)
        seconds = time.monotonic() - started
        throttle = throttle_time_max(producer.metrics())
    finally:
        producer.close()
    assert seconds >= (TOTAL - 2 * RATE) / RATE * 0.8, seconds
    assert throttle > 0
    # Removed through broker 2: gone everywhere.
    assert ok(configs(cluster.broker(2).bootstrap, "--alter", "--client", client_id, "--delete-config",
                      "producer_byte_rate")) == f"Completed updating config for client {client_id}.\n"
    assert ok(configs(cluster.broker(3).bootstrap, "--describe", "--client", client_id)) == ""


def test_kafka_pythons_own_quota_messages_on_a_cluster(cluster) -> None:  # noqa: ANN001
    """kafka-python 3.0.12 has no client-quota admin methods, but it has the messages
    (``kafka.protocol.admin.AlterClientQuotasRequest`` / ``DescribeClientQuotasRequest``, v0-1):
    sent by its own network layer, encoded and decoded by its own code, to different brokers of
    the cluster — a user's client entity and the default client altered through broker 2,
    described through broker 3, strict and not."""
    from kafka.protocol.admin import AlterClientQuotasRequest, DescribeClientQuotasRequest

    entry, entity, op = (AlterClientQuotasRequest.EntryData, AlterClientQuotasRequest.EntryData.EntityData,
                         AlterClientQuotasRequest.EntryData.OpData)
    component = DescribeClientQuotasRequest.ComponentData
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    try:
        def send(request, node):  # noqa: ANN001, ANN202
            async def go():  # noqa: ANN202
                return await admin._manager.send(request, node_id=node)
            return admin._manager.run(go)

        altered = send(AlterClientQuotasRequest(entries=[
            entry(entity=[entity(entity_type="user", entity_name="alice"),
                          entity(entity_type="client-id", entity_name="app")],
                  ops=[op(key="producer_byte_rate", value=1024.0, remove=False),
                       op(key="consumer_byte_rate", value=2048.0, remove=False)]),
            entry(entity=[entity(entity_type="client-id", entity_name=None)],
                  ops=[op(key="request_percentage", value=50.0, remove=False)]),
            entry(entity=[entity(entity_type="client-id", entity_name="bad")],
                  ops=[op(key="producer_byte_rate", value=-1.0, remove=False)]),
        ], validate_only=False), 2)
        errors = [(tuple((e.entity_type, e.entity_name) for e in r.entity), r.error_code) for r in altered.entries]
        # An entity's parts come in the order of the java.util.HashMap Kafka holds them in.
        assert errors[:2] == [((("client-id", "app"), ("user", "alice")), 0), ((("client-id", None),), 0)]
        assert errors[2][1] == ErrorCode.INVALID_REQUEST

        def described(components, strict):  # noqa: ANN001, ANN202
            response = send(DescribeClientQuotasRequest(components=components, strict=strict), 3)
            assert response.error_code == 0, response.error_message
            return sorted((tuple(sorted((e.entity_type, e.entity_name or "") for e in r.entity)),
                            tuple(sorted((v.key, v.value) for v in r.values))) for r in response.entries)

        alice_app = ((("client-id", "app"), ("user", "alice")),
                     (("consumer_byte_rate", 2048.0), ("producer_byte_rate", 1024.0)))
        default_client = ((("client-id", ""),), (("request_percentage", 50.0),))  # "": the default (null)
        assert described([component(entity_type="user", match_type=0, match="alice")], False) == [alice_app]
        assert described([component(entity_type="user", match_type=0, match="alice")], True) == []
        assert described([component(entity_type="client-id", match_type=1, match=None)], True) == [default_client]
        assert described([component(entity_type="client-id", match_type=2, match=None)], False) == sorted(
            [alice_app, default_client])
    finally:
        admin.close()
