"""Clients cleaning up at once: a broker stays up when topics are deleted from many connections.

Test teardowns delete their topics from several connections at once. Each DeleteTopics rewrites
every offset checkpoint of the log dir (so that a topic created again never inherits the old
one's start offset); two rewrites of one file used to share its ``.tmp`` name, the second rename
failed with ENOENT, that error was taken for a failed disk, and with its only log dir offline the
broker shut itself down within seconds. Each checkpoint file has one writer now
(``pybroker.log.checkpoint``).
"""

from __future__ import annotations

import asyncio
import threading
import uuid

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from pybroker.client.admin import Admin
from pybroker.common.errors import ErrorCode

CONNECTIONS = 8


def create_topics(bootstrap: str, topics: list[str], partitions: int = 3) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(t, partitions, 1) for t in topics], operation_timeout=30).values():
        future.result(timeout=60)


def delete_at_once(bootstrap: str, topics: list[str], connections: int = CONNECTIONS) -> dict[str, str]:
    """Delete ``topics`` from ``connections`` admin clients (one connection each) released at the
    same moment; returns each topic's outcome as the client reports it ("ok" or the error's
    name)."""
    clients = [AdminClient({"bootstrap.servers": bootstrap}) for _ in range(connections)]
    for client in clients:  # each connected before the race starts
        client.list_topics(timeout=30)
    start = threading.Barrier(connections)
    outcome: dict[str, str] = {}

    def delete(client: AdminClient, names: list[str]) -> None:
        start.wait(timeout=30)
        for name, future in client.delete_topics(names, operation_timeout=30).items():
            try:
                future.result(timeout=60)
                outcome[name] = "ok"
            except Exception as e:  # the client's KafkaException, reported as its error name
                error = e.args[0] if e.args else e
                outcome[name] = error.name() if hasattr(error, "name") else str(error)

    threads = [threading.Thread(target=delete, args=(client, topics[i::connections]))
               for i, client in enumerate(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=90)
    return outcome


def log_dir_errors(bootstrap: str) -> list[int]:
    async def describe() -> list[int]:
        async with Admin(bootstrap) as admin:
            return [info.error for infos in (await admin.describe_log_dirs()).values() for info in infos]

    return asyncio.run(describe())


def test_deletions_from_eight_connections_at_once_are_all_answered_and_the_broker_stays_up(broker):
    for round_ in range(3):
        topics = [f"cleanup-{round_}-{i}-{uuid.uuid4().hex[:6]}" for i in range(2 * CONNECTIONS)]
        create_topics(broker.bootstrap, topics)
        assert delete_at_once(broker.bootstrap, topics) == dict.fromkeys(topics, "ok")
        assert broker.proc.poll() is None
    assert log_dir_errors(broker.bootstrap) == [ErrorCode.NONE]


def test_a_topic_deleted_in_the_crowd_and_created_again_starts_from_offset_zero(broker):
    name = f"again-{uuid.uuid4().hex[:6]}"
    others = [f"crowd-{i}-{uuid.uuid4().hex[:6]}" for i in range(CONNECTIONS - 1)]
    create_topics(broker.bootstrap, [name, *others], partitions=1)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(5):
        producer.produce(name, b"old-%d" % i)
    assert producer.flush(30) == 0
    assert delete_at_once(broker.bootstrap, [name, *others]) == dict.fromkeys([name, *others], "ok")
    create_topics(broker.bootstrap, [name], partitions=1)
    producer.produce(name, b"new")
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": name, "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([name])
        message = None
        for _ in range(100):
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                break
        assert message is not None and (message.offset(), message.value()) == (0, b"new")
    finally:
        consumer.close()


def test_kafka_answers_the_same_crowd(kafka):
    """Apache Kafka 3.9.2, the same deletions at once: every topic deleted, the broker up."""
    topics = [f"cleanup-kafka-{i}-{uuid.uuid4().hex[:6]}" for i in range(2 * CONNECTIONS)]
    create_topics(kafka.bootstrap, topics)
    assert delete_at_once(kafka.bootstrap, topics) == dict.fromkeys(topics, "ok")
    assert kafka.alive and log_dir_errors(kafka.bootstrap) == [ErrorCode.NONE]
