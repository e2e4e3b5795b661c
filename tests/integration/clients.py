"""Thin wrappers that produce and consume with each real client library, for integration tests.

Each ``produce_*`` writes (key, value) pairs to one partition with the client's default settings
(plus the given compression) and returns when every record is acknowledged; each ``consume_*``
reads ``count`` records from an offset and returns (offset, key, value, timestamp) tuples.
"""

from __future__ import annotations

import asyncio
import subprocess
import time

Record = tuple[int, bytes | None, bytes | None, int]


# --- confluent-kafka (librdkafka 2.16) ----------------------------------------------------------

def produce_confluent(bootstrap: str, topic: str, pairs: list[tuple[bytes | None, bytes]], partition: int = 0,
                      compression: str = "none", **config: object) -> None:
    from confluent_kafka import Producer

    errors: list[object] = []
    producer = Producer({"bootstrap.servers": bootstrap, "compression.type": compression, **config})
    for key, value in pairs:
        producer.produce(topic, value=value, key=key, partition=partition,
                         on_delivery=lambda err, _msg: errors.append(err) if err else None)
        producer.poll(0)
    remaining = producer.flush(30)
    assert remaining == 0 and not errors, f"confluent produce failed: {errors} ({remaining} unflushed)"


def consume_confluent(bootstrap: str, topic: str, count: int, partition: int = 0, offset: int = 0,
                      timeout: float = 30.0, **config: object) -> list[Record]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "pybroker-tests", "enable.auto.commit": False, **config})
    try:
        consumer.assign([TopicPartition(topic, partition, offset)])
        out: list[Record] = []
        deadline = time.monotonic() + timeout
        while len(out) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            assert message.error() is None or message.error().code() == -191, message.error()  # -191: partition EOF
            if message.error() is None:
                out.append((message.offset(), message.key(), message.value(), message.timestamp()[1]))
        return out
    finally:
        consumer.close()


def offset_for_time_confluent(bootstrap: str, topic: str, timestamp: int, partition: int = 0) -> int:
    """Consumer.offsets_for_times for one partition: the offset, or -1 when no record qualifies."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "pybroker-tests", "enable.auto.commit": False})
    try:
        (found,) = consumer.offsets_for_times([TopicPartition(topic, partition, timestamp)], timeout=10)
    finally:
        consumer.close()
    assert found.error is None, found.error
    return found.offset


# --- aiokafka ---------------------------------------------------------------------------------

def produce_aiokafka(bootstrap: str, topic: str, pairs: list[tuple[bytes | None, bytes]], partition: int = 0,
                     compression: str | None = None, acks: int | str | None = None) -> None:
    from aiokafka import AIOKafkaProducer

    async def run() -> None:
        options = {} if acks is None else {"acks": acks}  # None: the client's default
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, compression_type=compression, **options)
        await producer.start()
        try:
            futures = [await producer.send(topic, value=v, key=k, partition=partition) for k, v in pairs]
            await asyncio.gather(*futures)
        finally:
            await producer.stop()

    asyncio.run(run())


def consume_aiokafka(bootstrap: str, topic: str, count: int, partition: int = 0, offset: int = 0,
                     timeout: float = 30.0, isolation_level: str = "read_uncommitted") -> list[Record]:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def run() -> list[Record]:
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest",
                                    isolation_level=isolation_level)
        await consumer.start()
        try:
            tp = TopicPartition(topic, partition)
            consumer.assign([tp])
            consumer.seek(tp, offset)
            out: list[Record] = []
            deadline = time.monotonic() + timeout
            while len(out) < count and time.monotonic() < deadline:
                batch = await consumer.getmany(tp, timeout_ms=500)
                for message in batch.get(tp, []):
                    out.append((message.offset, message.key, message.value, message.timestamp))
            return out
        finally:
            await consumer.stop()

    return asyncio.run(run())


# --- kafka-python -----------------------------------------------------------------------------

def produce_kafka_python(bootstrap: str, topic: str, pairs: list[tuple[bytes | None, bytes]], partition: int = 0,
                         compression: str | None = None, acks: int | str | None = None) -> None:
    from kafka import KafkaProducer

    options = {} if acks is None else {"acks": acks}  # None: the client's default (acks=all, idempotent)
    producer = KafkaProducer(bootstrap_servers=bootstrap, compression_type=compression, **options)
    try:
        futures = [producer.send(topic, value=v, key=k, partition=partition) for k, v in pairs]
        for future in futures:
            future.get(timeout=30)
    finally:
        producer.close(timeout=10)


def consume_kafka_python(bootstrap: str, topic: str, count: int, partition: int = 0, offset: int = 0,
                         timeout: float = 30.0, isolation_level: str = "read_uncommitted") -> list[Record]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest",
                             isolation_level=isolation_level)
    try:
        tp = TopicPartition(topic, partition)
        consumer.assign([tp])
        consumer.seek(tp, offset)
        out: list[Record] = []
        deadline = time.monotonic() + timeout
        while len(out) < count and time.monotonic() < deadline:
            for message in consumer.poll(timeout_ms=500).get(tp, []):
                out.append((message.offset, message.key, message.value, message.timestamp))
        return out
    finally:
        consumer.close()


# --- kcat (Debian's, librdkafka 2.0.2) -----------------------------------------------------------

def produce_kcat(bootstrap: str, topic: str, pairs: list[tuple[bytes | None, bytes]], partition: int = 0,
                 compression: str = "none", acks: str = "all") -> None:
    """Keys and values must not contain the delimiters (tab / newline)."""
    data = b"".join((k or b"") + b"\t" + v + b"\n" for k, v in pairs)
    result = subprocess.run(
        ["kcat", "-P", "-b", bootstrap, "-t", topic, "-p", str(partition), "-K", "\t", "-z", compression,
         "-X", f"acks={acks}"],
        input=data, capture_output=True, timeout=60,
    )
    assert result.returncode == 0, result.stderr.decode(errors="replace")


def consume_kcat(bootstrap: str, topic: str, count: int, partition: int = 0, offset: int = 0,
                 isolation_level: str = "read_uncommitted") -> list[Record]:
    result = subprocess.run(
        ["kcat", "-C", "-b", bootstrap, "-t", topic, "-p", str(partition), "-o", str(offset), "-c", str(count),
         "-e", "-f", "%o\t%T\t%k\t%s\n", "-X", f"isolation.level={isolation_level}"],
        capture_output=True, timeout=60,
    )
    assert result.returncode == 0, result.stderr.decode(errors="replace")
    out: list[Record] = []
    for line in result.stdout.splitlines():
        offset_text, timestamp, key, value = line.split(b"\t", 3)
        out.append((int(offset_text), key or None, value, int(timestamp)))
    return out
