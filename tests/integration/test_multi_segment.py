"""A partition spread over many small segments: Kafka's file names, reads and timestamp lookups
across segment boundaries, and the same after a restart."""

from __future__ import annotations

import os
import re
import struct

import pytest
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

from tests.integration import clients

SEGMENT_BYTES = 10000
COUNT = 2000
BASE = 1_700_000_000_000
SEGMENT_FILE = re.compile(r"(\d{20})\.(log|index|timeindex|snapshot)")
OTHER_FILES = {"partition.metadata", "leader-epoch-checkpoint"}


def record(i: int) -> tuple[bytes | None, bytes, int]:
    """(key, value, timestamp) of record i: binary values of varying length, some null keys."""
    key = None if i % 7 == 0 else f"key-{i}".encode()
    value = bytes((i * 7 + j) % 256 for j in range(i % 200)) + i.to_bytes(4, "big")
    return key, value, BASE + i * 10


def produce(bootstrap: str, topic: str, count: int) -> None:
    # Small batches, so that segments roll often (a batch is never split across segments).
    producer = Producer({"bootstrap.servers": bootstrap, "batch.size": 1000, "linger.ms": 5})
    errors: list[object] = []
    for i in range(count):
        key, value, timestamp = record(i)
        producer.produce(topic, value=value, key=key, partition=0, timestamp=timestamp,
                         on_delivery=lambda err, _msg: errors.append(err) if err else None)
        producer.poll(0)
    assert producer.flush(30) == 0 and not errors, errors


def create(bootstrap: str, topic: str, segment_bytes: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config={"segment.bytes": str(segment_bytes)})])[topic].result(timeout=30)


def segment_bases(partition_dir) -> list[int]:
    """Base offsets of the segments in a partition directory, checking every file's name."""
    by_suffix: dict[str, set[int]] = {"log": set(), "index": set(), "timeindex": set(), "snapshot": set()}
    for name in os.listdir(partition_dir):
        match = SEGMENT_FILE.fullmatch(name)
        if match is None:
            assert name in OTHER_FILES, f"unexpected file {name}"
            continue
        by_suffix[match[2]].add(int(match[1]))
    assert by_suffix["log"] == by_suffix["index"] == by_suffix["timeindex"]
    # A producer snapshot at each roll (Kafka names it by the new segment's base offset).
    assert set(sorted(by_suffix["log"])[1:]) <= by_suffix["snapshot"]
    return sorted(by_suffix["log"])


@pytest.fixture(scope="module")
def segmented(broker) -> tuple[str, str]:
    """(bootstrap, topic) of a topic with COUNT records in many SEGMENT_BYTES segments."""
    topic = f"t-multi-segment-{os.getpid()}"
    create(broker.bootstrap, topic, SEGMENT_BYTES)
    produce(broker.bootstrap, topic, COUNT)
    return broker.bootstrap, topic


def test_segment_files_are_named_and_sized_like_kafka(broker, segmented):
    _, topic = segmented
    partition_dir = broker.data_dir / f"{topic}-0"
    bases = segment_bases(partition_dir)
    assert len(bases) >= 10 and bases[0] == 0 and bases[-1] < COUNT
    for base in bases:
        log_file = partition_dir / f"{base:020d}.log"
        data = log_file.read_bytes()
        # Each segment starts with a batch whose base offset is the one in the file name.
        assert struct.unpack(">q", data[:8])[0] == base
        if base != bases[-1]:
            assert 0 < len(data) <= SEGMENT_BYTES
    # Every file's first batch continues where the previous segment ended: walk the batches.
    offsets = []
    for base in bases:
        data = (partition_dir / f"{base:020d}.log").read_bytes()
        position = 0
        while position < len(data):
            first, length = struct.unpack(">qi", data[position:position + 12])
            last_delta = struct.unpack(">i", data[position + 23:position + 27])[0]
            offsets.append((first, first + last_delta))
            position += 12 + length
    assert offsets[0][0] == 0 and offsets[-1][1] == COUNT - 1
    assert all(prev[1] + 1 == nxt[0] for prev, nxt in zip(offsets, offsets[1:], strict=False))


@pytest.mark.parametrize("consumer", ["confluent", "kafka-python", "aiokafka"])
def test_consume_everything_across_segments(segmented, consumer):
    bootstrap, topic = segmented
    consume = {"confluent": clients.consume_confluent, "kafka-python": clients.consume_kafka_python,
               "aiokafka": clients.consume_aiokafka}[consumer]
    got = consume(bootstrap, topic, COUNT)
    assert [o for o, *_ in got] == list(range(COUNT))
    assert [(k, v, ts) for _, k, v, ts in got] == [record(i) for i in range(COUNT)]


def test_reads_starting_just_before_a_segment_boundary(broker, segmented):
    bootstrap, topic = segmented
    bases = segment_bases(broker.data_dir / f"{topic}-0")
    for boundary in (bases[1], bases[len(bases) // 2], bases[-1]):
        got = clients.consume_confluent(bootstrap, topic, 3, offset=boundary - 1)
        assert [o for o, *_ in got] == [boundary - 1, boundary, boundary + 1]
        assert [(k, v, ts) for _, k, v, ts in got] == [record(i) for i in range(boundary - 1, boundary + 2)]
    got = clients.consume_kafka_python(bootstrap, topic, 50, offset=bases[2] - 25)[:50]  # it may return a few more
    assert [(k, v) for _, k, v, _ in got] == [record(i)[:2] for i in range(bases[2] - 25, bases[2] + 25)]


def test_list_offsets_by_timestamp_finds_records_in_old_segments(broker, segmented):
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KpTopicPartition

    bootstrap, topic = segmented
    bases = segment_bases(broker.data_dir / f"{topic}-0")
    targets = sorted({0, 1, bases[1] - 1, bases[1], bases[2] + 3, bases[len(bases) // 2], bases[-1] - 1, COUNT - 1})
    for offset in targets:
        timestamp = record(offset)[2]
        assert clients.offset_for_time_confluent(bootstrap, topic, timestamp) == offset
        assert clients.offset_for_time_confluent(bootstrap, topic, timestamp - 5) == offset  # between two records
    assert clients.offset_for_time_confluent(bootstrap, topic, record(COUNT - 1)[2] + 1) == -1

    kp = KafkaConsumer(bootstrap_servers=bootstrap)
    try:
        tp = KpTopicPartition(topic, 0)
        for offset in targets:
            found = kp.offsets_for_times({tp: record(offset)[2] - 1})[tp]
            assert (found.offset, found.timestamp) == (offset, record(offset)[2])
        assert kp.beginning_offsets([tp]) == {tp: 0} and kp.end_offsets([tp]) == {tp: COUNT}
    finally:
        kp.close()

    admin = AdminClient({"bootstrap.servers": bootstrap})
    tp = TopicPartition(topic, 0)
    newest = admin.list_offsets({tp: OffsetSpec.max_timestamp()})[tp].result(timeout=30)
    assert (newest.offset, newest.timestamp) == (COUNT - 1, record(COUNT - 1)[2])


def test_segments_reads_and_lookups_survive_restart(start_broker, topic_name):
    count = 600
    broker = start_broker()
    create(broker.bootstrap, topic_name, 5000)
    produce(broker.bootstrap, topic_name, count)
    partition_dir = broker.data_dir / f"{topic_name}-0"
    bases = segment_bases(partition_dir)
    assert len(bases) >= 5

    broker.restart()
    assert segment_bases(partition_dir) == bases
    got = clients.consume_aiokafka(broker.bootstrap, topic_name, count)
    assert [(o, k, v, ts) for o, k, v, ts in got] == [(i, *record(i)) for i in range(count)]
    for offset in (0, bases[1], bases[-2] + 1, count - 1):
        assert clients.offset_for_time_confluent(broker.bootstrap, topic_name, record(offset)[2]) == offset

    # Appends continue in the last segment, at the next offset.
    clients.produce_confluent(broker.bootstrap, topic_name, [(b"after", b"restart")])
    got = clients.consume_confluent(broker.bootstrap, topic_name, 1, offset=count)
    assert [(o, k, v) for o, k, v, _ in got] == [(count, b"after", b"restart")]
