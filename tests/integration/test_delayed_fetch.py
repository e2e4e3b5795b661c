"""A fetch that lags behind is answered at once: reading a log of many small segments.

A read returns batches of one segment only. On a log of 200-byte segments (a compacted topic with
``segment.bytes=200``), a Fetch with ``min_bytes=200, max_bytes=200`` can never gather 200 bytes,
and used to wait out ``max_wait_ms`` every time: 1,002 ms per fetch against Kafka's 2 ms, so
reading the topic from the start took minutes. Kafka completes such a fetch at once because its
offset lies on an older segment than the high watermark (DelayedFetch's case F); only the fetch
on the high watermark's own segment waits.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from pybroker.common.errors import ErrorCode
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages import FetchRequest
from tests.conftest import broker_connection

MAX_WAIT_MS = 3000
RECORDS = 40


def fill_small_segments(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    configs = {"cleanup.policy": "compact", "segment.bytes": "200"}
    for future in admin.create_topics([NewTopic(topic, 1, 1, config=configs)], operation_timeout=30).values():
        future.result(timeout=60)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "batch.num.messages": 1})
    for i in range(RECORDS):
        producer.produce(topic, key=b"key-%d" % i, value=b"value-%d" % i)
        producer.flush(30)  # one batch per record
    assert producer.flush(30) == 0


def segment_bases(partition_dir: Path) -> list[int]:
    return sorted(int(path.stem) for path in partition_dir.glob("*.log"))


def read_from_the_start(bootstrap: str, topic: str) -> list[tuple[int, int, int, float]]:
    """Fetch (v11) with min_bytes = max_bytes = 200 from offset 0 to the high watermark; returns
    each fetch's (fetch offset, error, bytes, seconds)."""

    async def read() -> list[tuple[int, int, int, float]]:
        connection = await broker_connection(bootstrap)
        out = []
        offset, high_watermark = 0, 1
        try:
            while offset < high_watermark:
                request = FetchRequest(
                    replica_id=-1, max_wait_ms=MAX_WAIT_MS, min_bytes=200, max_bytes=200, isolation_level=0,
                    session_id=0, session_epoch=-1, forgotten_topics_data=[], rack_id="",
                    topics=[FetchRequest.FetchTopic(topic=topic, partitions=[FetchRequest.FetchPartition(
                        partition=0, current_leader_epoch=-1, fetch_offset=offset, log_start_offset=-1,
                        partition_max_bytes=200)])])
                started = time.monotonic()
                response = await connection.send(ApiKey.FETCH, request, version=11)
                elapsed = time.monotonic() - started
                partition = response.responses[0].partitions[0]
                records = bytes(partition.records or b"")
                out.append((offset, partition.error_code, len(records), elapsed))
                assert partition.error_code == ErrorCode.NONE and records, out
                high_watermark = partition.high_watermark
                offset = next_offset(records)
        finally:
            await connection.close()
        return out

    return asyncio.run(read())


def next_offset(records: bytes) -> int:
    """The offset after the last batch of ``records`` (base offset + last offset delta + 1)."""
    position, end = 0, 0
    while position + 61 <= len(records):
        base = int.from_bytes(records[position:position + 8], "big")
        length = int.from_bytes(records[position + 8:position + 12], "big")
        delta = int.from_bytes(records[position + 23:position + 27], "big")
        end = base + delta + 1
        position += 12 + length
    return end


def assert_answered_without_waiting(bootstrap: str, data_dir: Path, topic: str) -> None:
    fill_small_segments(bootstrap, topic)
    bases = segment_bases(data_dir / f"{topic}-0")
    assert len(bases) > 5, bases
    fetches = read_from_the_start(bootstrap, topic)
    on_older_segments = [f for f in fetches if f[0] < bases[-1]]
    assert len(on_older_segments) >= 5
    # Each is answered long before max_wait (pybroker used to wait all of it, every time).
    assert all(seconds < MAX_WAIT_MS / 1000 / 2 for _offset, _error, _size, seconds in on_older_segments), fetches


def test_fetches_on_older_segments_are_answered_without_waiting(broker, topic_name):
    assert_answered_without_waiting(broker.bootstrap, broker.data_dir, topic_name)


def test_kafka_answers_them_without_waiting_too(kafka, topic_name):
    assert_answered_without_waiting(kafka.bootstrap, kafka.data_dir, topic_name)
