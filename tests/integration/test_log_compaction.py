"""Log compaction as a user sees it, with real broker processes and real clients: a compacted
topic keeps the latest value of each key at its original offset (whatever codec wrote it) and
shrinks on disk; tombstones stay readable for delete.retention.ms after the clean that first kept
them, then vanish; a consumer whose position points at a removed record goes on with the next
retained one; __consumer_offsets is compacted under a busy group and its committed offsets survive
a restart; a SIGKILL while the cleaner works loses no key; ``compact,delete`` topics are both
compacted and trimmed by retention; and the compaction topic configs' defaults and validation.

A topic that must not be cleaned while it is written is created with
``min.cleanable.dirty.ratio=1`` (a dirty ratio is never above 1), and the ratio is lowered once
the data is in: the clean then starts at a known moment. The cleaner never touches the active
segment, so every topic has small segments and ends with a few unique "filler" records that make
the last written versions land in a closed segment. A clean is awaited by polling the
partition's entry in the log dir's ``cleaner-offset-checkpoint``.
"""

from __future__ import annotations

import os
import re
import time
import warnings
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    OffsetSpec,
    ResourceType,
)

from pybroker.log.checkpoint import OffsetCheckpointFile
from pybroker.types import TopicPartition
from tests.conftest import BrokerProcess, wait_until

CLEANER_OVERRIDES = {
    "log.cleaner.backoff.ms": 200,
    "log.retention.check.interval.ms": 200,
    "log.initial.task.delay.ms": 0,
    "log.segment.delete.delay.ms": 100,
}
BROKER_OVERRIDES = CLEANER_OVERRIDES
SEGMENT_BYTES = 16384
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
LOG_FILE = re.compile(r"(\d{20})\.log")

Read = tuple[int, bytes | None, bytes | None]  # offset, key, value


# --- helpers ----------------------------------------------------------------------------------

def admin_for(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


def create_topic(bootstrap: str, topic: str, partitions: int = 1, **configs: object) -> None:
    config = {"cleanup.policy": "compact", "segment.bytes": str(SEGMENT_BYTES),
              **{k.replace("_", "."): str(v) for k, v in configs.items()}}
    admin = admin_for(bootstrap)
    admin.create_topics([NewTopic(topic, partitions, 1, config=config)])[topic].result(timeout=30)


def set_topic_config(bootstrap: str, topic: str, name: str, value: str) -> None:
    resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)])
    admin = admin_for(bootstrap)  # kept referenced until the result is in
    admin.incremental_alter_configs([resource])[resource].result(timeout=30)


def produce(bootstrap: str, topic: str, pairs: list[tuple[bytes, bytes | None]], compression: str = "none",
            **config: object) -> list[int]:
    """Produce in order (one connection, one in flight); returns each record's offset."""
    offsets: list[int | None] = [None] * len(pairs)
    errors: list[object] = []

    def delivered(index: int):
        def callback(err, message) -> None:
            if err:
                errors.append(err)
            else:
                offsets[index] = message.offset()
        return callback

    producer = Producer({"bootstrap.servers": bootstrap, "compression.type": compression, "linger.ms": 5,
                         "batch.size": 4096, "max.in.flight.requests.per.connection": 1, **config})
    for index, (key, value) in enumerate(pairs):
        producer.produce(topic, value=value, key=key, partition=0, on_delivery=delivered(index))
        producer.poll(0)
    assert producer.flush(30) == 0 and not errors, errors
    assert None not in offsets
    return offsets  # type: ignore[return-value]


def filler(prefix: str, count: int = 100, size: int = 200) -> list[tuple[bytes, bytes | None]]:
    """Unique keys, enough bytes to roll the active segment past what was written before."""
    return [(f"{prefix}-{i}".encode(), b"f" * size) for i in range(count)]


def partition_dir(broker: BrokerProcess, topic: str, partition: int = 0) -> Path:
    return broker.data_dir / f"{topic}-{partition}"


def log_bases(directory: Path) -> list[int]:
    return sorted(int(m[1]) for name in os.listdir(directory) if (m := LOG_FILE.fullmatch(name)))


def log_bytes(directory: Path) -> int:
    """Bytes of the partition's live segment files (.log, not yet-to-be-removed .deleted ones)."""
    return sum((directory / name).stat().st_size for name in os.listdir(directory) if LOG_FILE.fullmatch(name))


def cleaner_checkpoint(broker: BrokerProcess, topic: str, partition: int = 0) -> int | None:
    path = broker.data_dir / "cleaner-offset-checkpoint"
    if not path.exists():
        return None
    return OffsetCheckpointFile(str(path)).read().get(TopicPartition(topic, partition))


def wait_cleaned_to_active(broker: BrokerProcess, topic: str, timeout: float = 20.0) -> int:
    """Wait until everything below the active segment has been cleaned; returns that offset."""
    directory = partition_dir(broker, topic)

    def cleaned() -> int | None:
        checkpoint = cleaner_checkpoint(broker, topic)
        active = log_bases(directory)[-1]
        return checkpoint if checkpoint is not None and checkpoint >= active > 0 else None

    return wait_until(cleaned, timeout, 0.05, f"the cleaner to clean {topic} up to its active segment")  # type: ignore[return-value]


def read_all_confluent(bootstrap: str, topic: str, partition: int = 0) -> list[Read]:
    """Every record from the start of the partition to its end, read by confluent-kafka."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "compaction-reader", "enable.auto.commit": False,
                         "enable.partition.eof": True})
    try:
        tp = KafkaTopicPartition(topic, partition)
        _low, high = consumer.get_watermark_offsets(tp, timeout=10)
        consumer.assign([KafkaTopicPartition(topic, partition, -2)])  # OFFSET_BEGINNING
        out: list[Read] = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error() is not None:
                assert message.error().code() == KafkaError._PARTITION_EOF, message.error()
                if not out or out[-1][0] >= high - 1:
                    return out
                continue
            out.append((message.offset(), message.key(), message.value()))
            if message.offset() >= high - 1:
                return out
        raise AssertionError(f"confluent read of {topic} did not reach {high}: {out[-3:]}")
    finally:
        consumer.close()


def read_all_kafka_python(bootstrap: str, topic: str, partition: int = 0) -> list[Read]:
    """Every record from the start of the partition to its end, read by kafka-python."""
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KPTopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    try:
        tp = KPTopicPartition(topic, partition)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        end = consumer.end_offsets([tp])[tp]
        out: list[Read] = []
        deadline = time.monotonic() + 30
        while consumer.position(tp) < end and time.monotonic() < deadline:
            out += [(m.offset, m.key, m.value) for m in consumer.poll(timeout_ms=500).get(tp, [])]
        assert consumer.position(tp) >= end, f"kafka-python read of {topic} stopped at {consumer.position(tp)}"
        return out
    finally:
        consumer.close()


def latest_by_key(keys: list[bytes], values: list[bytes | None], offsets: list[int]) -> dict[bytes, tuple[int, bytes | None]]:
    latest: dict[bytes, tuple[int, bytes | None]] = {}
    for key, value, offset in zip(keys, values, offsets, strict=True):
        latest[key] = (offset, value)
    return latest


def as_map(records: list[Read]) -> dict[bytes, tuple[int, bytes | None]]:
    """key -> (offset, value), checking that no key occurs twice."""
    out: dict[bytes, tuple[int, bytes | None]] = {}
    for offset, key, value in records:
        assert key is not None
        assert key not in out, f"key {key!r} read twice: at {out[key][0]} and {offset}"
        out[key] = (offset, value)
    return out


# --- 1. the latest value per key, offsets kept, every codec, smaller on disk ------------------

def test_compacted_topic_keeps_latest_value_per_key(broker: BrokerProcess, topic_name: str) -> None:
    """200 keys x 20 versions, the versions written in rounds by confluent-kafka with each codec in
    turn; after the clean, confluent-kafka and kafka-python both read exactly one record per key,
    the last one written, at the offset it was given, and the partition's files are smaller."""
    create_topic(broker.bootstrap, topic_name, min_cleanable_dirty_ratio=1)
    written_keys: list[bytes] = []
    written_values: list[bytes | None] = []
    offsets: list[int] = []
    for version in range(20):
        pairs = [(f"key-{k:03d}".encode(), f"value-{k:03d}-v{version:02d}-".encode() + b"x" * 60) for k in range(200)]
        offsets += produce(broker.bootstrap, topic_name, pairs, CODECS[version % len(CODECS)])
        written_keys += [k for k, _ in pairs]
        written_values += [v for _, v in pairs]
    pairs = filler("filler")
    offsets += produce(broker.bootstrap, topic_name, pairs)
    written_keys += [k for k, _ in pairs]
    written_values += [v for _, v in pairs]
    assert offsets == list(range(len(offsets)))
    expected = latest_by_key(written_keys, written_values, offsets)
    directory = partition_dir(broker, topic_name)
    before = log_bytes(directory)
    assert len(log_bases(directory)) > 5

    set_topic_config(broker.bootstrap, topic_name, "min.cleanable.dirty.ratio", "0.01")
    wait_cleaned_to_active(broker, topic_name)

    assert as_map(read_all_confluent(broker.bootstrap, topic_name)) == expected
    assert as_map(read_all_kafka_python(broker.bootstrap, topic_name)) == expected
    # The replaced segments are removed after file.delete.delay.ms: the live log shrinks.
    wait_until(lambda: log_bytes(directory) < before / 3, 10, message=f"{directory} to shrink below {before / 3}")


# --- 2. tombstones: kept for delete.retention.ms after their first clean, then gone -----------

def test_tombstones_vanish_after_delete_retention(broker: BrokerProcess, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name, min_cleanable_dirty_ratio=1, delete_retention_ms=1000)
    keys = [f"key-{k:02d}".encode() for k in range(50)]
    produce(broker.bootstrap, topic_name, [(k, b"first") for k in keys])
    produce(broker.bootstrap, topic_name, [(k, b"second") for k in keys[10:]])
    produce(broker.bootstrap, topic_name, [(k, None) for k in keys[:10]])  # tombstones
    produce(broker.bootstrap, topic_name, filler("filler-a"))

    set_topic_config(broker.bootstrap, topic_name, "min.cleanable.dirty.ratio", "0.01")
    wait_cleaned_to_active(broker, topic_name)
    first_clean_seen = time.monotonic()
    records = as_map(read_all_confluent(broker.bootstrap, topic_name))
    assert {k: records[k][1] for k in keys} == {**{k: None for k in keys[:10]}, **{k: b"second" for k in keys[10:]}}

    # Once delete.retention.ms has passed since that clean, the next clean (new data makes the
    # log dirty again) drops the tombstones: the deleted keys are absent from a full read.
    wait_until(lambda: time.monotonic() > first_clean_seen + 1.0, 5, message="delete.retention.ms to pass")
    produce(broker.bootstrap, topic_name, filler("filler-b"))

    def tombstones_gone() -> dict[bytes, tuple[int, bytes | None]] | None:
        found = as_map(read_all_confluent(broker.bootstrap, topic_name))
        return found if not any(k in found for k in keys[:10]) else None

    records = wait_until(tombstones_gone, 20, 0.2, "the tombstones to be removed")  # type: ignore[assignment]
    assert {k: records[k][1] for k in keys[10:]} == {k: b"second" for k in keys[10:]}
    assert as_map(read_all_kafka_python(broker.bootstrap, topic_name)) == records


# --- 3. a committed offset inside the cleaned range -------------------------------------------

def test_consumer_resumes_from_a_removed_offset(broker: BrokerProcess, topic_name: str) -> None:
    """Rounds of 10 repeated keys then one unique key: after the clean, offset 12 (a repeated key's
    old version) is gone; groups whose committed offset is 12 resume at 21, the next retained record
    (the second unique key), with confluent-kafka and kafka-python, without error."""
    create_topic(broker.bootstrap, topic_name, min_cleanable_dirty_ratio=1)
    pairs: list[tuple[bytes, bytes | None]] = []
    for version in range(10):
        pairs += [(f"key-{k}".encode(), f"v{version}".encode()) for k in range(10)]
        pairs.append((f"unique-{version}".encode(), b"u"))
    pairs += filler("filler")
    assert produce(broker.bootstrap, topic_name, pairs) == list(range(len(pairs)))
    set_topic_config(broker.bootstrap, topic_name, "min.cleanable.dirty.ratio", "0.01")
    wait_cleaned_to_active(broker, topic_name)
    retained = [offset for offset, _k, _v in read_all_confluent(broker.bootstrap, topic_name)]
    assert 12 not in retained and retained[:3] == [10, 21, 32]

    for group in ("resume-confluent", "resume-kafka-python"):
        committer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "enable.auto.commit": False})
        committer.commit(offsets=[KafkaTopicPartition(topic_name, 0, 12)], asynchronous=False)
        committer.close()

    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "resume-confluent",
                         "enable.auto.commit": False, "auto.offset.reset": "error"})
    try:
        consumer.subscribe([topic_name])
        got: list[int] = []
        deadline = time.monotonic() + 20
        while len(got) < 3 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None:
                assert message.error() is None, message.error()
                got.append(message.offset())
        assert got == [21, 32, 43]
    finally:
        consumer.close()

    from kafka import KafkaConsumer

    kp = KafkaConsumer(topic_name, bootstrap_servers=broker.bootstrap, group_id="resume-kafka-python",
                       enable_auto_commit=False, auto_offset_reset="none")
    try:
        got = []
        deadline = time.monotonic() + 20
        while len(got) < 3 and time.monotonic() < deadline:
            for messages in kp.poll(timeout_ms=500).values():
                got += [m.offset for m in messages]
        assert got[:3] == [21, 32, 43]
    finally:
        kp.close()


# --- 4. __consumer_offsets under a busy group --------------------------------------------------

def test_consumer_offsets_compacted_and_kept_across_restart(start_broker, topic_name: str) -> None:
    """A group commits the same offsets hundreds of times: __consumer_offsets (compacted, small
    offsets.topic.segment.bytes) is cleaned down to a small fraction of what was written, and the
    group's committed offsets read back the same after the broker restarts (loaded from the
    compacted log)."""
    broker = start_broker(**CLEANER_OVERRIDES, **{"offsets.topic.num.partitions": 1,
                                                  "offsets.topic.segment.bytes": 4096})
    admin = admin_for(broker.bootstrap)
    admin.create_topics([NewTopic(topic_name, 3, 1)])[topic_name].result(timeout=30)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "busy-group", "enable.auto.commit": False})
    try:
        for _ in range(400):
            consumer.commit(offsets=[KafkaTopicPartition(topic_name, p, 10 * (p + 1)) for p in range(3)],
                            asynchronous=False)
        final = [KafkaTopicPartition(topic_name, p, 1000 + p) for p in range(3)]
        consumer.commit(offsets=final, asynchronous=False)
    finally:
        consumer.close()

    directory = broker.data_dir / "__consumer_offsets-0"
    written = log_bases(directory)[-1]  # records below the active segment: at least 3 per commit
    assert written > 600
    # Each offset-commit record holds the group, the (long) topic name and the offset: well over
    # 60 bytes. Once cleaned, what stays is about one record per partition plus the active segment.
    wait_until(lambda: cleaner_checkpoint(broker, "__consumer_offsets") is not None
               and log_bytes(directory) < written * 60 / 5, 20, 0.1, f"{directory} to be compacted")

    broker.stop()
    broker.start()
    reader = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "busy-group", "enable.auto.commit": False})
    try:
        committed = wait_until(lambda: reader.committed([KafkaTopicPartition(topic_name, p) for p in range(3)],
                                                        timeout=5), 20, message="the committed offsets")
        assert [(c.partition, c.offset, c.error) for c in committed] == [(p, 1000 + p, None) for p in range(3)]  # type: ignore[union-attr]
    finally:
        reader.close()


# --- 5. SIGKILL while cleaning -----------------------------------------------------------------

def latest_read(records: list[Read]) -> dict[bytes, tuple[int, bytes | None]]:
    """key -> (offset, value) of its last record in a full read (older versions may remain)."""
    return {key: (offset, value) for offset, key, value in records if key is not None}


def test_kill_during_clean_loses_nothing(start_broker, topic_name: str) -> None:
    """SIGKILL during a clean, then restart: every key's latest value is still read at its offset.

    Kafka's cleaner throttle (log.cleaner.io.max.bytes.per.second), like this broker's, checks
    the rate once per 300 ms period and then sleeps off the excess of the whole period. With a
    low limit, a clean that starts long after the broker sleeps for seconds on its first batch,
    in the middle of building its offset map: (1) the broker is killed there. After the restart
    the clean starts again and runs at full speed until the throttler's first check, which comes
    a few segments into the swaps: (2) the broker is killed right after the first swap (checked:
    the clean had not finished). Restarted without the limit, the broker reads back every key's
    latest value and completes a clean that leaves one record per key."""
    broker = start_broker(**CLEANER_OVERRIDES, **{"log.cleaner.io.max.bytes.per.second": 10000})
    create_topic(broker.bootstrap, topic_name, min_cleanable_dirty_ratio=1, segment_bytes=65536)
    keys: list[bytes] = []
    values: list[bytes | None] = []
    for version in range(25):
        keys += [f"key-{k:04d}".encode() for k in range(2000)]
        values += [f"value-{k:04d}-v{version:02d}-".encode() + b"z" * 100 for k in range(2000)]
    keys += [k for k, _ in filler("filler", 400)]
    values += [v for _, v in filler("filler", 400)]
    offsets = produce(broker.bootstrap, topic_name, list(zip(keys, values, strict=True)), **{"batch.size": 65536})
    assert offsets == list(range(len(offsets)))
    expected = latest_by_key(keys, values, offsets)
    directory = partition_dir(broker, topic_name)
    tp = re.escape(f"{topic_name}-0")

    def since(mark: int) -> str:
        with open(broker.log_path, "rb") as f:
            f.seek(mark)
            return f.read().decode("utf-8", "replace")

    def nothing_lost() -> bool:
        assert latest_read(read_all_confluent(broker.bootstrap, topic_name)) == expected
        return True

    # 1. While the offset map is built (the throttler's sleep on the first batch).
    mark = broker.log_mark()
    set_topic_config(broker.bootstrap, topic_name, "min.cleanable.dirty.ratio", "0.01")
    broker.wait_for_log(f"Building offset map for {tp}", since=mark)
    broker.kill()
    assert "Swapping in cleaned segment" not in since(mark), "the kill came after the offset map was built"

    # 2. Right after the restarted clean swapped in a cleaned segment.
    mark = broker.log_mark()
    broker.start()
    broker.wait_for_log(f"Swapping in cleaned segment .* in log {tp}", since=mark, timeout=20)
    broker.kill()
    # Here the throttle's sleeps always fell a few swaps into the clean, so the kill cut it short;
    # a machine fast enough to finish first only weakens this step (nothing to lose then), so it
    # is reported rather than failed.
    if "Log cleaner cleaned log" in since(mark):
        warnings.warn("the restarted clean finished before the kill", stacklevel=1)

    # Restarted without the throttle: nothing lost, and a clean completes.
    broker.overrides["log.cleaner.io.max.bytes.per.second"] = "1.7976931348623157E308"
    broker.start()
    wait_until(nothing_lost, 30, 0.2, "every key's latest value after the restart")
    wait_cleaned_to_active(broker, topic_name, timeout=30)
    assert as_map(read_all_confluent(broker.bootstrap, topic_name)) == expected
    assert as_map(read_all_kafka_python(broker.bootstrap, topic_name)) == expected
    assert not [name for name in os.listdir(directory) if name.endswith((".cleaned", ".swap"))]


# --- 6. compact,delete -------------------------------------------------------------------------

def test_compact_delete_applies_retention_and_compaction(broker: BrokerProcess, topic_name: str) -> None:
    """retention.bytes removes the oldest segments, and the cleaner compacts what is left. The
    clean is held back (dirty ratio 1) until retention has acted: a clean first could shrink the
    log below retention.bytes and leave retention nothing to do."""
    create_topic(broker.bootstrap, topic_name, cleanup_policy="compact,delete", min_cleanable_dirty_ratio=1,
                 retention_bytes=4 * SEGMENT_BYTES)
    for version in range(15):
        produce(broker.bootstrap, topic_name, [(f"key-{k:02d}".encode(), f"v{version:02d}-".encode() + b"y" * 100)
                                               for k in range(50)])
    produce(broker.bootstrap, topic_name, filler("filler"))
    tp = KafkaTopicPartition(topic_name, 0)
    admin = admin_for(broker.bootstrap)

    def earliest() -> int:
        return admin.list_offsets({tp: OffsetSpec.earliest()})[tp].result(timeout=30).offset

    # Retention: the oldest segments go (the log start offset moves up) ...
    wait_until(lambda: earliest() > 0, 20, 0.1, "retention.bytes to delete old segments")
    set_topic_config(broker.bootstrap, topic_name, "min.cleanable.dirty.ratio", "0.01")
    # ... and compaction: everything below the active segment cleaned, no key twice in it.
    checkpoint = wait_cleaned_to_active(broker, topic_name)
    start = earliest()
    records = read_all_confluent(broker.bootstrap, topic_name)
    assert records and records[0][0] >= start
    cleaned = [(o, k, v) for o, k, v in records if o < checkpoint]
    as_map(cleaned)
    latest = {k: v for _o, k, v in records if k and k.startswith(b"key-")}
    assert all(v is not None and v.startswith(b"v14-") for v in latest.values())
    assert log_bytes(partition_dir(broker, topic_name)) <= 4 * SEGMENT_BYTES + 2 * SEGMENT_BYTES


# --- the compaction topic configs ---------------------------------------------------------------

def test_compaction_config_defaults_and_validation(broker: BrokerProcess, topic_name: str) -> None:
    admin = admin_for(broker.bootstrap)
    admin.create_topics([NewTopic(topic_name, 1, 1)])[topic_name].result(timeout=30)
    resource = ConfigResource(ResourceType.TOPIC, topic_name)
    entries = admin.describe_configs([resource])[resource].result(timeout=30)
    assert entries["min.cleanable.dirty.ratio"].value == "0.5"
    assert entries["min.compaction.lag.ms"].value == "0"
    assert entries["max.compaction.lag.ms"].value == "9223372036854775807"

    bad = f"{topic_name}-bad"
    with pytest.raises(KafkaException) as raised:
        admin.create_topics([NewTopic(bad, 1, 1, config={"min.cleanable.dirty.ratio": "1.5"})])[bad].result(timeout=30)
    assert raised.value.args[0].code() == KafkaError.INVALID_CONFIG
