"""Producing to a compacted topic (``cleanup.policy`` with ``compact``) with real clients: a
record without a key is refused with INVALID_RECORD (87), as Kafka's LogValidator refuses it,
and Produce v8+ says which records and why (``RecordErrors``, ``ErrorMessage``); keyed records
are accepted, a ``delete`` topic still takes keyless records, and nothing keyless reaches the
log."""

from __future__ import annotations

import asyncio

import pytest

from pybroker.common.errors import ErrorCode
from pybroker.protocol.api_keys import ApiKey
from tests.conftest import broker_connection
from tests.integration import clients
from tests.integration.test_fetch_produce_protocol import produce_request
from tests.unit.batches import build_batch


def create_topic(bootstrap: str, topic: str, configs: dict[str, str]) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config=configs)])[topic].result(30)


def keyless_message(topic: str) -> str:
    return f"Compacted topic cannot accept message without key in topic partition {topic}-0"


def assert_only_keyed_records(bootstrap: str, topic: str, expected: list[tuple[bytes, bytes]]) -> None:
    """The partition holds exactly ``expected``, at offsets 0, 1, … (a refused batch took none)."""
    got = clients.consume_confluent(bootstrap, topic, len(expected) + 1, timeout=3)
    assert [(k, v) for _, k, v, _ in got] == expected
    assert [o for o, *_ in got] == list(range(len(expected)))


def test_produce_v9_answers_the_record_errors_and_v7_the_code_only(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, {"cleanup.policy": "compact"})

    async def run() -> None:
        connection = await broker_connection(broker.bootstrap)
        try:
            keyless = build_batch([(b"a", b"1"), (None, b"2"), (None, b"3")])
            response = await connection.send(ApiKey.PRODUCE, produce_request(topic_name, keyless), version=9)
            partition = response.responses[0].partition_responses[0]
            assert partition.error_code == ErrorCode.INVALID_RECORD
            assert partition.base_offset == -1
            assert partition.log_start_offset == 0
            message = keyless_message(topic_name)
            assert [(e.batch_index, e.batch_index_error_message) for e in partition.record_errors] == [
                (1, message), (2, message),
            ]
            assert partition.error_message == (
                "One or more records have been rejected due to 2 record errors in total, and only showing the "
                f"first three errors at most: [RecordError(batchIndex=1, message='{message}'), "
                f"RecordError(batchIndex=2, message='{message}')]"
            )
            response = await connection.send(ApiKey.PRODUCE, produce_request(topic_name, keyless), version=7)
            partition = response.responses[0].partition_responses[0]
            assert partition.error_code == ErrorCode.INVALID_RECORD
            assert partition.record_errors == [] and partition.error_message is None
            keyed = build_batch([(b"a", b"1"), (b"", b"2")])
            response = await connection.send(ApiKey.PRODUCE, produce_request(topic_name, keyed), version=9)
            partition = response.responses[0].partition_responses[0]
            assert (partition.error_code, partition.base_offset, partition.record_errors) == (0, 0, [])
        finally:
            await connection.close()

    asyncio.run(run())
    assert_only_keyed_records(broker.bootstrap, topic_name, [(b"a", b"1"), (b"", b"2")])


def test_confluent_producer_gets_invalid_record(broker, topic_name):
    from confluent_kafka import KafkaError, Producer

    create_topic(broker.bootstrap, topic_name, {"cleanup.policy": "compact,delete"})
    outcomes: list[tuple[bytes | None, int | None]] = []
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})

    def send(key: bytes | None, value: bytes) -> None:
        producer.produce(topic_name, value=value, key=key, partition=0,
                         on_delivery=lambda err, msg: outcomes.append((msg.key(), err.code() if err else None)))
        assert producer.flush(30) == 0

    send(b"k1", b"v1")
    send(None, b"keyless")
    send(b"k2", b"v2")
    assert outcomes == [(b"k1", None), (None, KafkaError.INVALID_RECORD), (b"k2", None)]
    assert_only_keyed_records(broker.bootstrap, topic_name, [(b"k1", b"v1"), (b"k2", b"v2")])


def test_kafka_python_producer_gets_invalid_record(broker, topic_name):
    from kafka import KafkaProducer
    from kafka.errors import InvalidRecordError

    create_topic(broker.bootstrap, topic_name, {"cleanup.policy": "compact"})
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    try:
        producer.send(topic_name, key=b"k1", value=b"v1", partition=0).get(timeout=30)
        with pytest.raises(InvalidRecordError):
            producer.send(topic_name, key=None, value=b"keyless", partition=0).get(timeout=30)
    finally:
        producer.close(timeout=10)
    clients.produce_kafka_python(broker.bootstrap, topic_name, [(b"k2", b"v2")])
    assert_only_keyed_records(broker.bootstrap, topic_name, [(b"k1", b"v1"), (b"k2", b"v2")])


def test_aiokafka_producer_gets_invalid_record(broker, topic_name):
    from aiokafka import AIOKafkaProducer
    from aiokafka.errors import for_code

    create_topic(broker.bootstrap, topic_name, {"cleanup.policy": "compact"})

    async def run() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap)
        await producer.start()
        try:
            await producer.send_and_wait(topic_name, key=b"k1", value=b"v1", partition=0)
            # aiokafka 0.14 has no class of its own for error 87: its table gives UnknownError.
            with pytest.raises(for_code(ErrorCode.INVALID_RECORD)):
                await producer.send_and_wait(topic_name, key=None, value=b"keyless", partition=0)
            await producer.send_and_wait(topic_name, key=b"k2", value=b"v2", partition=0)
        finally:
            await producer.stop()

    asyncio.run(run())
    assert_only_keyed_records(broker.bootstrap, topic_name, [(b"k1", b"v1"), (b"k2", b"v2")])


@pytest.mark.parametrize("produce", [clients.produce_confluent, clients.produce_kafka_python, clients.produce_aiokafka])
def test_a_delete_topic_still_takes_keyless_records(broker, topic_name, produce):
    create_topic(broker.bootstrap, topic_name, {"cleanup.policy": "delete"})
    pairs = [(None, b"v0"), (b"k", b"v1"), (None, b"v2")]
    produce(broker.bootstrap, topic_name, pairs)
    got = clients.consume_confluent(broker.bootstrap, topic_name, len(pairs))
    assert [(k, v) for _, k, v, _ in got] == pairs
