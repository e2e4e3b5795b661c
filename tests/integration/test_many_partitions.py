"""One broker serving a topic of 2,000 partitions to real clients: every partition gets exactly its
own records back, in order, at offsets 0..n-1; the same after a clean restart and after a kill -9,
with appends continuing at the next offsets; and retention.ms, set through IncrementalAlterConfigs,
moves every partition's log start offset forward. Only active segments keep their indexes mapped.

The broker runs under ``ulimit -n 1024`` (a common default), fewer descriptors than it has
partitions (and up to 6,000 segments): it keeps at most half of them, 512, of its ``.log`` files
open, opening the others when they are used; after a clean restart none is open until used."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

from tests.conftest import wait_until
from tests.integration.test_retention import RETENTION_OVERRIDES, set_config

PARTITIONS = 2000
OPEN_FILES = 1024  # the broker's RLIMIT_NOFILE
RECORDS = 3  # per partition and per produce round
MINIMUM_SEGMENT_BYTES = 14  # the smallest segment.bytes pybroker (like Kafka) accepts

pytestmark = pytest.mark.timeout(90)

Log = dict[int, list[tuple[int, bytes, bytes]]]  # partition -> [(offset, key, value)]


def key(partition: int, i: int) -> bytes:
    return f"p{partition:04d}-r{i}".encode()


def value(partition: int, i: int) -> bytes:
    # Values of different lengths per partition, naming their partition and record.
    return f"partition {partition} record {i} ".encode() + bytes(range(partition % 50))


def expected(start: int, end: int) -> Log:
    """Every partition holding records start..end-1 at offsets start..end-1."""
    return {p: [(i, key(p, i), value(p, i)) for i in range(start, end)] for p in range(PARTITIONS)}


def create_topic(bootstrap: str, topic: str, **configs: object) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    new_topic = NewTopic(topic, PARTITIONS, 1, config={k: str(v) for k, v in configs.items()})
    admin.create_topics([new_topic], operation_timeout=60, request_timeout=60)[topic].result(timeout=90)


def produce(bootstrap: str, topic: str, records: range, timestamp: int = 0) -> dict[tuple[int, int], int]:
    """Records ``records`` to every partition (explicit partition=, acks=all, record i of every
    partition before record i+1); returns when all are acknowledged: (partition, i) -> offset."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "enable.idempotence": True})
    acknowledged: dict[tuple[int, int], int] = {}
    errors: list[object] = []

    def on_delivery(partition: int, i: int):
        def delivered(error, message) -> None:
            if error is not None or message.partition() != partition:
                errors.append((partition, i, error or f"delivered to partition {message.partition()}"))
            else:
                acknowledged[(partition, i)] = message.offset()
        return delivered

    for i in records:
        for p in range(PARTITIONS):
            producer.produce(topic, value=value(p, i), key=key(p, i), partition=p, timestamp=timestamp,
                             on_delivery=on_delivery(p, i))
            producer.poll(0)
    remaining = producer.flush(60)
    assert remaining == 0 and not errors, f"produce failed: {errors[:5]} ({remaining} unflushed)"
    assert len(acknowledged) == PARTITIONS * len(records)
    return acknowledged


def consume_all(bootstrap: str, topic: str, timeout: float = 60.0) -> Log:
    """Everything in every partition, read by one confluent-kafka Consumer assigned all
    partitions from the beginning, until each partition reports its end."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "pybroker-tests",
                         "enable.auto.commit": False, "enable.partition.eof": True})
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        log: Log = {p: [] for p in range(PARTITIONS)}
        at_end: set[int] = set()
        deadline = time.monotonic() + timeout
        while len(at_end) < PARTITIONS and time.monotonic() < deadline:
            for message in consumer.consume(10000, timeout=0.5):
                error = message.error()
                if error is not None:
                    assert error.code() == KafkaError._PARTITION_EOF, error
                    at_end.add(message.partition())
                else:
                    log[message.partition()].append((message.offset(), message.key(), message.value()))
                    at_end.discard(message.partition())
        assert len(at_end) == PARTITIONS, (
            f"after {timeout}s only {len(at_end)} of {PARTITIONS} partitions read to their end")
        return log
    finally:
        consumer.close()


def assert_log(got: Log, want: Log) -> None:
    wrong = [p for p in range(PARTITIONS) if got[p] != want[p]]
    assert not wrong, f"{len(wrong)} partitions hold other records than produced, e.g. " + "; ".join(
        f"partition {p}: got {got[p][:4]}, expected {want[p][:4]}" for p in wrong[:3])


def list_offsets(bootstrap: str, topic: str, spec: OffsetSpec) -> dict[int, int]:
    """Partition -> offset, from one AdminClient.list_offsets call covering all partitions."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.list_offsets({TopicPartition(topic, p): spec for p in range(PARTITIONS)}, request_timeout=30)
    return {tp.partition: future.result(timeout=30).offset for tp, future in futures.items()}


def assert_offsets(bootstrap: str, topic: str, earliest: int, latest: int) -> None:
    assert set(list_offsets(bootstrap, topic, OffsetSpec.earliest()).values()) == {earliest}
    assert set(list_offsets(bootstrap, topic, OffsetSpec.latest()).values()) == {latest}


def mapped_index_files(pid: int) -> set[str]:
    """The ``.index`` and ``.timeindex`` files process ``pid`` has memory-mapped."""
    maps = Path(f"/proc/{pid}/maps").read_text()
    return set(re.findall(r"\S+\.(?:time)?index$", maps, flags=re.MULTILINE))


def open_log_files(pid: int, prefix: str) -> int:
    """Segment ``.log`` files process ``pid`` has open whose paths start with ``prefix``."""
    count = 0
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:  # closed meanwhile
            continue
        count += target.endswith(".log") and target.startswith(prefix)
    return count


def assert_acknowledged_at(acknowledged: dict[tuple[int, int], int], records: range) -> None:
    """Record i of every partition was acknowledged at offset i."""
    wrong = {pi: offset for pi, offset in acknowledged.items() if pi[1] != offset}
    assert not wrong, f"records acknowledged at other offsets, (partition, record) -> offset: {dict(list(wrong.items())[:5])}"
    assert {i for _, i in acknowledged} == set(records)


def test_produce_and_consume_every_partition(start_broker, topic_name):
    broker = start_broker(open_files=OPEN_FILES)
    create_topic(broker.bootstrap, topic_name)
    metadata = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(topic_name, timeout=30)
    assert sorted(metadata.topics[topic_name].partitions) == list(range(PARTITIONS))

    assert_acknowledged_at(produce(broker.bootstrap, topic_name, range(RECORDS)), range(RECORDS))
    assert_log(consume_all(broker.bootstrap, topic_name), expected(0, RECORDS))
    assert_offsets(broker.bootstrap, topic_name, 0, RECORDS)
    assert broker.proc is not None
    assert 0 < open_log_files(broker.proc.pid, f"{broker.data_dir}/") <= OPEN_FILES // 2


@pytest.mark.parametrize("stop", ["clean", "kill -9"])
def test_every_partition_survives_restart(start_broker, topic_name, stop):
    broker = start_broker(open_files=OPEN_FILES)
    create_topic(broker.bootstrap, topic_name)
    first = range(RECORDS)
    assert_acknowledged_at(produce(broker.bootstrap, topic_name, first), first)
    assert_log(consume_all(broker.bootstrap, topic_name), expected(0, RECORDS))

    if stop == "clean":
        assert broker.stop() == 0
    else:
        broker.kill()  # every record was acknowledged: all of them must be there after recovery
    broker.start()
    assert broker.proc is not None
    if stop == "clean":  # nothing to recover: no .log of the topic is opened until it is read
        assert open_log_files(broker.proc.pid, f"{broker.data_dir}/{topic_name}-") == 0
    assert_log(consume_all(broker.bootstrap, topic_name), expected(0, RECORDS))
    assert 0 < open_log_files(broker.proc.pid, f"{broker.data_dir}/") <= OPEN_FILES // 2
    assert_offsets(broker.bootstrap, topic_name, 0, RECORDS)

    # Appends continue at the next offset of every partition.
    second = range(RECORDS, 2 * RECORDS)
    assert_acknowledged_at(produce(broker.bootstrap, topic_name, second), second)
    assert_log(consume_all(broker.bootstrap, topic_name), expected(0, 2 * RECORDS))
    assert_offsets(broker.bootstrap, topic_name, 0, 2 * RECORDS)


def test_retention_moves_every_partitions_log_start_offset(start_broker, topic_name):
    broker = start_broker(open_files=OPEN_FILES, **RETENTION_OVERRIDES)
    # The smallest segment.bytes: every batch rolls a segment of its own.
    create_topic(broker.bootstrap, topic_name, **{"segment.bytes": MINIMUM_SEGMENT_BYTES})
    now = int(time.time() * 1000)
    # Records 0 and 1 of every partition are an hour old (CreateTime), record 2 is fresh; each
    # round is flushed before the next, so each record is a batch, in a segment, of its own.
    produce(broker.bootstrap, topic_name, range(0, 1), timestamp=now - 3_600_000)
    produce(broker.bootstrap, topic_name, range(1, 2), timestamp=now - 3_600_000 + 1)
    produce(broker.bootstrap, topic_name, range(2, 3), timestamp=now)
    # The default retention.ms (7 days) keeps everything.
    assert_offsets(broker.bootstrap, topic_name, 0, 3)
    # Kafka's lazy indexes: of the 6,000 segments, only the 2,000 active ones (base offset 2) hold
    # index mappings; a rolled segment released its own.
    assert broker.proc is not None
    mapped = mapped_index_files(broker.proc.pid)
    assert {Path(name).stem for name in mapped} == {f"{2:020d}"}
    assert len(mapped) == 2 * PARTITIONS

    # Ten minutes: the segments of records 0 and 1 expire, the one of the fresh record stays.
    set_config(AdminClient({"bootstrap.servers": broker.bootstrap}), topic_name, "retention.ms", "600000")

    def all_moved() -> bool:
        return set(list_offsets(broker.bootstrap, topic_name, OffsetSpec.earliest()).values()) == {2}

    wait_until(all_moved, timeout=60, interval=0.5, message="every partition's log start offset at 2")
    assert_offsets(broker.bootstrap, topic_name, 2, 3)
    assert_log(consume_all(broker.bootstrap, topic_name), expected(2, 3))
    assert 0 < open_log_files(broker.proc.pid, f"{broker.data_dir}/") <= OPEN_FILES // 2
