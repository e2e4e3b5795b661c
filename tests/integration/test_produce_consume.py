"""Produce and consume byte-exact with every real client, with and without compression."""

from __future__ import annotations

import asyncio
import struct
from dataclasses import dataclass

import pytest

from pybroker.client.connection import BrokerConnection
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages import FetchRequest, ProduceRequest
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


# --- idempotent producers --------------------------------------------------------------------

@dataclass
class StoredBatch:
    """A record batch as the log holds it, with the idempotence fields of its v2 header."""

    data: bytes
    base_offset: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int


def stored_batches(bootstrap: str, topic: str) -> list[StoredBatch]:
    """Every batch of partition 0, read with raw Fetch requests (nothing decodes them for us)."""

    async def fetch_all() -> list[StoredBatch]:
        host, port = bootstrap.split(":")
        connection = BrokerConnection(host, int(port))
        await connection.connect()
        batches: list[StoredBatch] = []
        offset, end = 0, None
        while end is None or offset < end:
            request = FetchRequest(
                replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0, session_id=0,
                session_epoch=-1, topics=[FetchRequest.FetchTopic(topic=topic, partitions=[FetchRequest.FetchPartition(
                    partition=0, current_leader_epoch=-1, fetch_offset=offset, log_start_offset=-1,
                    partition_max_bytes=1 << 20)])], forgotten_topics_data=[], rack_id="")
            partition = (await connection.send(ApiKey.FETCH, request, version=11)).responses[0].partitions[0]
            assert partition.error_code == 0
            end, data = partition.high_watermark, bytes(partition.records)
            position = 0
            while position + 61 <= len(data):
                base_offset, length = struct.unpack_from(">qi", data, position)
                batch = data[position : position + 12 + length]
                producer_id, epoch, sequence, count = struct.unpack_from(">qhii", batch, 43)
                batches.append(StoredBatch(batch, base_offset, producer_id, epoch, sequence, count))
                position += len(batch)
                offset = base_offset + struct.unpack_from(">i", batch, 23)[0] + 1
        await connection.close()
        return batches

    return asyncio.run(fetch_all())


def replay(bootstrap: str, topic: str, batch: bytes) -> tuple[int, int]:
    """Send a stored batch again, as a producer retries one whose acknowledgement it lost:
    returns (error code, base offset) of the answer."""

    async def send() -> tuple[int, int]:
        host, port = bootstrap.split(":")
        connection = BrokerConnection(host, int(port))
        await connection.connect()
        request = ProduceRequest(acks=-1, timeout_ms=10000, topic_data=[ProduceRequest.TopicProduceData(
            name=topic, partition_data=[ProduceRequest.PartitionProduceData(index=0, records=batch)])])
        answer = (await connection.send(ApiKey.PRODUCE, request, version=7)).responses[0].partition_responses[0]
        await connection.close()
        return answer.error_code, answer.base_offset

    return asyncio.run(send())


def assert_idempotent_batches(batches: list[StoredBatch]) -> None:
    """One producer id and epoch per producer session, and each session's sequence numbers
    contiguous from 0 across its batches."""
    assert all(b.producer_id >= 0 and b.producer_epoch >= 0 for b in batches), "a batch without a producer id"
    next_sequence: dict[tuple[int, int], int] = {}
    for b in batches:
        session = (b.producer_id, b.producer_epoch)
        assert b.base_sequence == next_sequence.get(session, 0), f"sequence gap at offset {b.base_offset}"
        next_sequence[session] = b.base_sequence + b.record_count


def assert_retry_is_suppressed(bootstrap: str, topic: str, batches: list[StoredBatch], total: int) -> None:
    """The newest batch sent again gets its original offset back and is not appended twice."""
    last = batches[-1]
    assert replay(bootstrap, topic, last.data) == (0, last.base_offset)
    assert sum(b.record_count for b in stored_batches(bootstrap, topic)) == total
    assert len(clients.consume_confluent(bootstrap, topic, total + 1, timeout=3)) == total


def test_idempotent_producer_by_default_in_kafka_python(broker, topic_name):
    pairs = make_pairs(50)
    clients.produce_kafka_python(broker.bootstrap, topic_name, pairs)
    clients.produce_kafka_python(broker.bootstrap, topic_name, pairs)
    got = clients.consume_aiokafka(broker.bootstrap, topic_name, 100)
    assert [(k, v) for _, k, v, _ in got] == pairs + pairs
    # kafka-python 3 is idempotent by default: each producer got its own id from InitProducerId,
    # and numbered its records from 0.
    batches = stored_batches(broker.bootstrap, topic_name)
    assert_idempotent_batches(batches)
    assert len({b.producer_id for b in batches}) == 2
    assert_retry_is_suppressed(broker.bootstrap, topic_name, batches, 100)


def test_confluent_idempotent_producer(broker, topic_name):
    pairs = make_pairs(200)
    clients.produce_confluent(broker.bootstrap, topic_name, pairs, **{"enable.idempotence": True})
    got = clients.consume_confluent(broker.bootstrap, topic_name, 200)
    assert [(k, v) for _, k, v, _ in got] == pairs
    batches = stored_batches(broker.bootstrap, topic_name)
    assert_idempotent_batches(batches)
    assert len({b.producer_id for b in batches}) == 1
    assert_retry_is_suppressed(broker.bootstrap, topic_name, batches, 200)
