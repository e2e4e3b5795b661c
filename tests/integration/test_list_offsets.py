"""ListOffsets as every client uses it: earliest/latest, by timestamp, max timestamp, LogAppendTime."""

from __future__ import annotations

import asyncio
import os
import subprocess
import time

import pytest
from confluent_kafka import (
    TIMESTAMP_CREATE_TIME,
    TIMESTAMP_LOG_APPEND_TIME,
    Consumer,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

from tests.integration import clients

BASE = 1_700_000_000_000  # a fixed past time: record i has timestamp BASE + i * STEP
STEP = 1000
COUNT = 10
# No consumer groups: nothing to commit to (an auto-commit on close would wait for a coordinator).
CONSUMER_CONFIG = {"group.id": "pybroker-tests", "enable.auto.commit": False}


def produce_with_timestamps(bootstrap: str, topic: str, timestamps: list[int], compression: str = "none") -> None:
    """Produce ``value-<i>`` with the given CreateTime timestamps in two flushes (so at least two
    batches, each possibly holding several records)."""
    producer = Producer({"bootstrap.servers": bootstrap, "compression.type": compression, "linger.ms": 50})
    errors: list[object] = []
    half = len(timestamps) // 2
    for chunk in (range(half), range(half, len(timestamps))):
        for i in chunk:
            producer.produce(topic, value=f"value-{i}".encode(), partition=0, timestamp=timestamps[i],
                             on_delivery=lambda err, _msg: errors.append(err) if err else None)
        assert producer.flush(30) == 0
    assert not errors, errors


def create_topic(bootstrap: str, topic: str, config: dict[str, str] | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config=config or {})])[topic].result(timeout=30)


@pytest.fixture(scope="module", params=["none", "gzip"])
def timestamped(request, broker) -> tuple[str, str]:
    """(bootstrap, topic) of a topic holding COUNT records at BASE, BASE+STEP, …"""
    topic = f"t-list-offsets-{request.param}-{os.getpid()}"
    create_topic(broker.bootstrap, topic)
    produce_with_timestamps(broker.bootstrap, topic, [BASE + i * STEP for i in range(COUNT)], request.param)
    return broker.bootstrap, topic


def admin_list_offset(bootstrap: str, topic: str, spec: OffsetSpec) -> tuple[int, int]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    tp = TopicPartition(topic, 0)
    result = admin.list_offsets({tp: spec})[tp].result(timeout=30)
    return result.offset, result.timestamp


# (timestamp asked for, offset expected): exact hits, between two records, before the first,
# after the last (-1: no such record).
LOOKUPS = [
    (BASE, 0),
    (BASE + 3 * STEP, 3),
    (BASE + 3 * STEP + 1, 4),
    (BASE + 4 * STEP + STEP // 2, 5),
    (BASE + 9 * STEP, 9),
    (0, 0),
    (BASE - 1, 0),
    (BASE + 9 * STEP + 1, -1),
]


def test_earliest_and_latest_with_every_client(timestamped):
    from aiokafka import AIOKafkaConsumer
    from aiokafka import TopicPartition as AioTopicPartition
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KpTopicPartition

    bootstrap, topic = timestamped
    consumer = Consumer(CONSUMER_CONFIG | {"bootstrap.servers": bootstrap})
    try:
        assert consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10) == (0, COUNT)
    finally:
        consumer.close()

    assert admin_list_offset(bootstrap, topic, OffsetSpec.earliest())[0] == 0
    assert admin_list_offset(bootstrap, topic, OffsetSpec.latest())[0] == COUNT

    kp = KafkaConsumer(bootstrap_servers=bootstrap)
    try:
        tp = KpTopicPartition(topic, 0)
        assert kp.beginning_offsets([tp]) == {tp: 0}
        assert kp.end_offsets([tp]) == {tp: COUNT}
    finally:
        kp.close()

    async def aio() -> tuple[dict, dict]:
        aio_consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap)
        await aio_consumer.start()
        try:
            tp = AioTopicPartition(topic, 0)
            return await aio_consumer.beginning_offsets([tp]), await aio_consumer.end_offsets([tp])
        finally:
            await aio_consumer.stop()

    beginning, end = asyncio.run(aio())
    assert list(beginning.values()) == [0] and list(end.values()) == [COUNT]


def test_offsets_for_times_confluent(timestamped):
    bootstrap, topic = timestamped
    consumer = Consumer(CONSUMER_CONFIG | {"bootstrap.servers": bootstrap})
    try:
        for timestamp, expected in LOOKUPS:
            (found,) = consumer.offsets_for_times([TopicPartition(topic, 0, timestamp)], timeout=10)
            assert (found.error, found.offset) == (None, expected), timestamp
    finally:
        consumer.close()


def test_offsets_for_times_kafka_python(timestamped):
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KpTopicPartition

    bootstrap, topic = timestamped
    tp = KpTopicPartition(topic, 0)
    consumer = KafkaConsumer(bootstrap_servers=bootstrap)
    try:
        for timestamp, expected in LOOKUPS:
            found = consumer.offsets_for_times({tp: timestamp})[tp]
            if expected == -1:
                assert found is None, timestamp
            else:
                assert (found.offset, found.timestamp) == (expected, BASE + expected * STEP), timestamp
    finally:
        consumer.close()


def test_offsets_for_times_aiokafka(timestamped):
    from aiokafka import AIOKafkaConsumer
    from aiokafka import TopicPartition as AioTopicPartition

    bootstrap, topic = timestamped

    async def lookups() -> list[object]:
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap)
        await consumer.start()
        try:
            tp = AioTopicPartition(topic, 0)
            return [(await consumer.offsets_for_times({tp: ts}))[tp] for ts, _ in LOOKUPS]
        finally:
            await consumer.stop()

    for (timestamp, expected), found in zip(LOOKUPS, asyncio.run(lookups()), strict=True):
        if expected == -1:
            assert found is None, timestamp
        else:
            assert (found.offset, found.timestamp) == (expected, BASE + expected * STEP), timestamp


def test_max_timestamp_and_for_timestamp_with_admin_client(timestamped):
    bootstrap, topic = timestamped
    assert admin_list_offset(bootstrap, topic, OffsetSpec.max_timestamp()) == (COUNT - 1, BASE + (COUNT - 1) * STEP)
    assert admin_list_offset(bootstrap, topic, OffsetSpec.for_timestamp(BASE + 2 * STEP + 1))[0] == 3
    assert admin_list_offset(bootstrap, topic, OffsetSpec.for_timestamp(BASE + COUNT * STEP))[0] == -1


def test_kcat_query_offsets(timestamped):
    bootstrap, topic = timestamped

    def kcat_query(timestamp: int) -> bytes:
        result = subprocess.run(["kcat", "-Q", "-b", bootstrap, "-t", f"{topic}:0:{timestamp}"],
                                capture_output=True, timeout=60)
        assert result.returncode == 0, result.stderr.decode(errors="replace")
        return result.stdout.strip()

    assert kcat_query(BASE + 5 * STEP) == f"{topic} [0] offset 5".encode()
    assert kcat_query(BASE + 5 * STEP - 1) == f"{topic} [0] offset 5".encode()
    assert kcat_query(BASE + 100 * STEP) == f"{topic} [0] offset -1".encode()
    assert kcat_query(-1) == f"{topic} [0] offset {COUNT}".encode()  # -1: latest
    assert kcat_query(-2) == f"{topic} [0] offset 0".encode()  # -2: earliest


def test_out_of_order_timestamps(broker, topic_name):
    """By timestamp: the first offset whose timestamp is >= the one asked for; max timestamp: the
    record with the largest timestamp, wherever it is."""
    offsets = [BASE + d for d in (1000, 5000, 2000, 6000, 3000, 4000)]
    create_topic(broker.bootstrap, topic_name)
    produce_with_timestamps(broker.bootstrap, topic_name, offsets, "lz4")
    assert clients.offset_for_time_confluent(broker.bootstrap, topic_name, BASE + 1500) == 1
    assert clients.offset_for_time_confluent(broker.bootstrap, topic_name, BASE + 5500) == 3
    assert clients.offset_for_time_confluent(broker.bootstrap, topic_name, BASE + 6001) == -1
    assert admin_list_offset(broker.bootstrap, topic_name, OffsetSpec.max_timestamp()) == (3, BASE + 6000)


def test_log_append_time_topic(broker, topic_name):
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KpTopicPartition

    create_topic(broker.bootstrap, topic_name, {"message.timestamp.type": "LogAppendTime"})
    before = int(time.time() * 1000)
    produce_with_timestamps(broker.bootstrap, topic_name, [BASE + i for i in range(COUNT)], "gzip")
    after = int(time.time() * 1000)

    consumer = Consumer(CONSUMER_CONFIG | {"bootstrap.servers": broker.bootstrap})
    try:
        consumer.assign([TopicPartition(topic_name, 0, 0)])
        consumed = []
        deadline = time.monotonic() + 30
        while len(consumed) < COUNT and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                consumed.append((message.offset(), message.value(), message.timestamp()))
        (found,) = consumer.offsets_for_times([TopicPartition(topic_name, 0, before)], timeout=10)
        assert found.offset == 0
        (found,) = consumer.offsets_for_times([TopicPartition(topic_name, 0, after + 1)], timeout=10)
        assert found.offset == -1
        (found,) = consumer.offsets_for_times([TopicPartition(topic_name, 0, BASE)], timeout=10)
        assert found.offset == 0  # the producer's timestamps are gone
    finally:
        consumer.close()

    assert [(o, v) for o, v, _ in consumed] == [(i, f"value-{i}".encode()) for i in range(COUNT)]
    for _, _, (kind, timestamp) in consumed:
        assert kind == TIMESTAMP_LOG_APPEND_TIME and before <= timestamp <= after
    timestamps = [ts for _, _, (_, ts) in consumed]
    assert timestamps == sorted(timestamps)

    # Max timestamp: the first record carrying the largest append time.
    largest = max(timestamps)
    assert admin_list_offset(broker.bootstrap, topic_name, OffsetSpec.max_timestamp()) == (timestamps.index(largest), largest)

    kp = KafkaConsumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest", enable_auto_commit=False)
    try:
        tp = KpTopicPartition(topic_name, 0)
        kp.assign([tp])
        records = []
        deadline = time.monotonic() + 30
        while len(records) < COUNT and time.monotonic() < deadline:
            records += kp.poll(timeout_ms=500).get(tp, [])
        assert [(r.offset, r.timestamp, r.timestamp_type) for r in records] == [(o, ts, 1) for o, _, (_, ts) in consumed]
        found = kp.offsets_for_times({tp: timestamps[-1]})[tp]
        assert (found.offset, found.timestamp) == (timestamps.index(timestamps[-1]), timestamps[-1])
    finally:
        kp.close()


def test_create_time_is_reported_as_such(broker, topic_name):
    create_topic(broker.bootstrap, topic_name)
    produce_with_timestamps(broker.bootstrap, topic_name, [BASE, BASE + 1])
    got = clients.consume_confluent(broker.bootstrap, topic_name, 2)
    assert [ts for *_, ts in got] == [BASE, BASE + 1]
    consumer = Consumer(CONSUMER_CONFIG | {"bootstrap.servers": broker.bootstrap})
    try:
        consumer.assign([TopicPartition(topic_name, 0, 0)])
        message = None
        deadline = time.monotonic() + 30
        while (message is None or message.error() is not None) and time.monotonic() < deadline:
            message = consumer.poll(0.5)
        assert message.timestamp() == (TIMESTAMP_CREATE_TIME, BASE)
    finally:
        consumer.close()
