"""Produce and consume byte-exact with every real client, with and without compression."""

from __future__ import annotations

import pytest

from tests.integration import clients

PRODUCERS = {
    "confluent": (clients.produce_confluent, ["none", "gzip", "snappy", "lz4", "zstd"]),
    "kcat": (clients.produce_kcat, ["none", "gzip", "snappy", "lz4", "zstd"]),
    "aiokafka": (clients.produce_aiokafka, [None, "gzip", "snappy", "lz4", "zstd"]),
    "kafka-python": (clients.produce_kafka_python, [None, "gzip", "snappy", "lz4", "zstd"]),
}
CONSUMERS = {
    "confluent": clients.consume_confluent,
    "kcat": clients.consume_kcat,
    "aiokafka": clients.consume_aiokafka,
    "kafka-python": clients.consume_kafka_python,
}


def make_pairs(n: int, text_only: bool = False) -> list[tuple[bytes | None, bytes]]:
    pairs: list[tuple[bytes | None, bytes]] = []
    for i in range(n):
        if text_only:
            value = f"value-{i}-".encode() + b"x" * (i % 50)
        else:
            value = bytes((i + j) % 256 for j in range(i % 300)) + f"#{i}".encode()
        pairs.append((f"key-{i}".encode() if i % 3 or text_only else None, value))  # kcat cannot send a null key
    return pairs


@pytest.mark.parametrize(
    "producer,compression",
    [(name, codec) for name, (_, codecs) in PRODUCERS.items() for codec in codecs],
)
def test_produce_then_consume_byte_exact(broker, topic_name, producer, compression):
    produce, _ = PRODUCERS[producer]
    pairs = make_pairs(300, text_only=producer == "kcat")
    produce(broker.bootstrap, topic_name, pairs, compression=compression)
    got = clients.consume_confluent(broker.bootstrap, topic_name, len(pairs))
    assert [o for o, *_ in got] == list(range(len(pairs)))
    assert [(k, v) for _, k, v, _ in got] == pairs


@pytest.mark.parametrize("consumer", list(CONSUMERS))
def test_every_consumer_reads_what_confluent_wrote(broker, topic_name, consumer):
    pairs = make_pairs(500, text_only=consumer == "kcat")
    clients.produce_confluent(broker.bootstrap, topic_name, pairs, compression="lz4")
    got = CONSUMERS[consumer](broker.bootstrap, topic_name, len(pairs))
    assert [(k, v) for _, k, v, _ in got] == pairs
    assert [o for o, *_ in got] == list(range(len(pairs)))
    # A read from the middle starts exactly at the requested offset.
    tail = CONSUMERS[consumer](broker.bootstrap, topic_name, 100, offset=400)
    assert [o for o, *_ in tail] == list(range(400, 500))


def test_idempotent_producer_by_default_in_kafka_python(broker, topic_name):
    pairs = make_pairs(50)
    clients.produce_kafka_python(broker.bootstrap, topic_name, pairs)
    clients.produce_kafka_python(broker.bootstrap, topic_name, pairs)
    got = clients.consume_aiokafka(broker.bootstrap, topic_name, 100)
    assert [(k, v) for _, k, v, _ in got] == pairs + pairs


def test_confluent_idempotent_producer(broker, topic_name):
    pairs = make_pairs(200)
    clients.produce_confluent(broker.bootstrap, topic_name, pairs, **{"enable.idempotence": True})
    got = clients.consume_confluent(broker.bootstrap, topic_name, 200)
    assert [(k, v) for _, k, v, _ in got] == pairs
