"""Client quotas end to end on one broker: quotas altered and described through the project's
admin client (confluent-kafka 2.16 and kafka-python 3.0.12 expose no client-quota admin API),
a producer and a consumer held to their byte rates with ``throttle_time_ms`` seen by
kafka-python's metrics, and DescribeProducers through kafka-python's admin client.

The broker keeps short quota windows (2 samples of 1 s) so a throttle shows within seconds."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest
from kafka import KafkaConsumer, KafkaProducer
from kafka.admin import KafkaAdminClient

from pybroker.client.admin import Admin, AdminError
from pybroker.protocol.errors import ErrorCode
from pybroker.types import TopicPartition

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
