"""Apache Kafka beside pybroker (``bench/apache_kafka.py``): the harness that runs Kafka itself as an
oracle comes up and answers as Kafka does.

What is checked: a 3.9.2 broker on ZooKeeper answers ApiVersions and Metadata through pybroker's
own client, and a real client (confluent-kafka) creates a topic, produces to it and reads it
back; a 3-broker 3.9.2 cluster registers its three brokers under its chroot, and each lists all
three; a 4.4.0 KRaft node answers Metadata, before and after a restart (its storage formatted
once); a Kafka tool runs from the jars; missing jars fail with the command that resolves them.
The brokers are shared by the module (a JVM start takes seconds here).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from bench.apache_kafka import (
    KRAFT_VERSION,
    ZOOKEEPER_VERSION,
    KafkaBroker,
    KafkaCluster,
    KafkaNotResolvedError,
    KRaftNode,
    kafka_libs,
    run_kafka_tool,
)
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages import MetadataRequest
from tests.conftest import broker_connection, require_kafka
from tests.integration.cluster import zk_client

pytestmark = pytest.mark.timeout(300)  # module fixtures start JVMs: seconds each on 2 cores


@pytest.fixture(scope="module")
def kraft(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KRaftNode]:
    require_kafka(KRAFT_VERSION)
    node = KRaftNode(tmp_path_factory.mktemp("kraft"), quick_start=True)
    try:
        node.start()
        yield node
    finally:
        node.stop()
        node.kill()


def create_topic(bootstrap: str, name: str, partitions: int = 1, replication: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, partitions, replication)], operation_timeout=30)
    futures[name].result(timeout=60)


def test_broker_answers_api_versions_and_metadata(kafka: KafkaBroker) -> None:
    async def body() -> None:
        connection = await broker_connection(kafka.bootstrap)
        try:
            produce = connection.api_versions[ApiKey.PRODUCE]
            assert produce[1] == 11, produce  # Kafka 3.9's newest Produce
            assert ApiKey.METADATA in connection.api_versions
            response = await connection.send(ApiKey.METADATA, MetadataRequest(topics=[], allow_auto_topic_creation=False))
        finally:
            await connection.close()
        assert [(b.node_id, b.host, b.port) for b in response.brokers] == [(1, "127.0.0.1", kafka.port)]
        assert response.controller_id == 1
        assert response.cluster_id

    asyncio.run(body())
    assert kafka.alive and kafka.log_path.is_file()


def test_confluent_kafka_creates_produces_and_consumes(kafka: KafkaBroker, topic_name: str) -> None:
    create_topic(kafka.bootstrap, topic_name)
    producer = Producer({"bootstrap.servers": kafka.bootstrap, "enable.idempotence": True})
    sent = [(f"k{i}".encode(), f"value {i}".encode()) for i in range(10)]
    for key, value in sent:
        producer.produce(topic_name, value, key)
    assert producer.flush(30) == 0

    consumer = Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": f"g-{topic_name}",
                         "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic_name, 0, OFFSET_BEGINNING)])
        received: list[tuple[bytes | None, bytes | None, int]] = []
        for _ in range(100):
            if len(received) == len(sent):
                break
            message = consumer.poll(1.0)
            if message is not None:
                assert message.error() is None, message.error()
                received.append((message.key(), message.value(), message.offset()))
    finally:
        consumer.close()
    assert received == [(key, value, offset) for offset, (key, value) in enumerate(sent)]


def test_topic_command_lists_topics(kafka: KafkaBroker) -> None:
    name = f"listed-{uuid.uuid4().hex[:8]}"
    create_topic(kafka.bootstrap, name)
    result = run_kafka_tool(ZOOKEEPER_VERSION, "org.apache.kafka.tools.TopicCommand",
                            ["--bootstrap-server", kafka.bootstrap, "--list"], timeout=120)
    assert result.returncode == 0, result.stderr
    assert name in result.stdout.split()


def test_cluster_registers_three_brokers(kafka_cluster: KafkaCluster) -> None:
    zk = zk_client(kafka_cluster.zookeeper_connect)
    try:
        assert sorted(zk.get_children("/brokers/ids")) == ["1", "2", "3"]
    finally:
        zk.stop()
        zk.close()
    views = [broker.metadata() for broker in kafka_cluster.brokers]
    assert all(sorted(b.node_id for b in view.brokers) == [1, 2, 3] for view in views)
    assert len({view.controller_id for view in views}) == 1
    assert len({view.cluster_id for view in views}) == 1


def test_kraft_node_answers_metadata_after_a_restart(kraft: KRaftNode) -> None:
    before = kraft.metadata()
    assert [b.node_id for b in before.brokers] == [1]
    assert before.cluster_id == kraft.cluster_id
    kraft.restart()
    after = kraft.metadata()
    assert (after.cluster_id, [b.node_id for b in after.brokers]) == (kraft.cluster_id, [1])


def test_missing_jars_name_the_resolve_script(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PYBROKER_KAFKA_CACHE", str(tmp_path))
    with pytest.raises(KafkaNotResolvedError, match=rf"bash bench/kafka/resolve.sh {KRAFT_VERSION}"):
        kafka_libs(KRAFT_VERSION)
