"""Retention with a real broker and real clients: retention.ms, retention.bytes and
log.retention.min.timestamp delete whole old segments from disk, the log start offset lands on a
segment boundary, newer records stay consumable, segments below a DeleteRecords offset go, and
the log-start-offset-checkpoint follows."""

from __future__ import annotations

import os
import re
import time

from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    OffsetSpec,
    ResourceType,
)

from tests.conftest import wait_until
from tests.integration import clients

RETENTION_OVERRIDES = {
    "log.retention.check.interval.ms": 200,
    "log.initial.task.delay.ms": 0,
    "log.segment.delete.delay.ms": 100,
    "log.flush.start.offset.checkpoint.interval.ms": 200,
}
BROKER_OVERRIDES = RETENTION_OVERRIDES
SEGMENT_BYTES = 2000
COUNT = 300
SEGMENT_FILE = re.compile(r"(\d{20})\.(log|index|timeindex)(\.deleted)?")


def value(i: int) -> bytes:
    return f"value-{i:05d}-".encode() + bytes(i % 37)


def produce(bootstrap: str, topic: str, timestamps: list[int], first: int = 0) -> None:
    # Small batches so that segments roll often (a batch never spans two segments).
    producer = Producer({"bootstrap.servers": bootstrap, "batch.size": 600, "linger.ms": 5})
    errors: list[object] = []
    for i, timestamp in enumerate(timestamps, first):
        producer.produce(topic, value=value(i), key=str(i).encode(), partition=0, timestamp=timestamp,
                         on_delivery=lambda err, _msg: errors.append(err) if err else None)
        producer.poll(0)
    assert producer.flush(30) == 0 and not errors, errors


def create(admin: AdminClient, topic: str, **configs: object) -> None:
    config = {"segment.bytes": str(SEGMENT_BYTES), **{k: str(v) for k, v in configs.items()}}
    admin.create_topics([NewTopic(topic, 1, 1, config=config)])[topic].result(timeout=30)


def segment_files(partition_dir) -> dict[int, set[str]]:
    """Base offset -> suffixes present (".log", ".index", ".timeindex", with ".deleted" kept)."""
    found: dict[int, set[str]] = {}
    for name in os.listdir(partition_dir):
        match = SEGMENT_FILE.fullmatch(name)
        if match:
            found.setdefault(int(match[1]), set()).add(f".{match[2]}{match[3] or ''}")
    return found


def live_bases(partition_dir) -> list[int]:
    return sorted(base for base, suffixes in segment_files(partition_dir).items() if ".log" in suffixes)


def deleted_files(partition_dir) -> list[str]:
    return [name for name in os.listdir(partition_dir) if name.endswith(".deleted")]


def earliest(admin: AdminClient, topic: str) -> int:
    tp = TopicPartition(topic, 0)
    return admin.list_offsets({tp: OffsetSpec.earliest()})[tp].result(timeout=30).offset


def latest(admin: AdminClient, topic: str) -> int:
    tp = TopicPartition(topic, 0)
    return admin.list_offsets({tp: OffsetSpec.latest()})[tp].result(timeout=30).offset


def set_config(admin: AdminClient, topic: str, name: str, new_value: str) -> None:
    resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry(name, new_value, incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([resource])[resource].result(timeout=30)


def assert_intact_from(bootstrap: str, topic: str, start: int, end: int, timestamps: list[int] | None = None) -> None:
    got = clients.consume_confluent(bootstrap, topic, end - start, offset=start)
    assert [o for o, *_ in got] == list(range(start, end))
    assert [(k, v) for _, k, v, _ in got] == [(str(i).encode(), value(i)) for i in range(start, end)]
    if timestamps is not None:
        assert [ts for *_, ts in got] == timestamps[start:end]


def admin_for(broker) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def test_retention_ms_at_creation_deletes_old_segments(broker, topic_name):
    admin = admin_for(broker)
    # A long file.delete.delay.ms, to see the renamed files before they go.
    create(admin, topic_name, **{"retention.ms": 600_000, "file.delete.delay.ms": 1500})
    now = int(time.time() * 1000)
    # Records 0..149 are an hour old (CreateTime), 150..299 are fresh.
    timestamps = [now - 3_600_000 + i for i in range(150)] + [now + i for i in range(150)]
    produce(broker.bootstrap, topic_name, timestamps)
    partition_dir = broker.data_dir / f"{topic_name}-0"

    # The segments holding only old records are renamed .deleted, then removed.
    wait_until(lambda: 0 not in live_bases(partition_dir) and deleted_files(partition_dir),
               message="old segments renamed .deleted")

    def settled() -> bool:
        # Every segment of only old records is gone from disk; the first remaining segment is the
        # one holding record 150 (its largest timestamp is fresh).
        bases = live_bases(partition_dir)
        return not deleted_files(partition_dir) and bases[0] <= 150 < (bases[1] if len(bases) > 1 else COUNT)

    wait_until(settled, message="old segments deleted and their files removed")
    bases = live_bases(partition_dir)
    assert all(suffixes == {".log", ".index", ".timeindex"} for suffixes in segment_files(partition_dir).values())
    assert earliest(admin, topic_name) == bases[0] and latest(admin, topic_name) == COUNT
    assert_intact_from(broker.bootstrap, topic_name, bases[0], COUNT, timestamps)
    assert "due to log retention time 600000ms breach based on the largest record timestamp" in broker.log()


def test_retention_bytes_at_creation_keeps_the_newest_segments(broker, topic_name):
    admin = admin_for(broker)
    retention_bytes = 3 * SEGMENT_BYTES
    create(admin, topic_name, **{"retention.bytes": retention_bytes})
    produce(broker.bootstrap, topic_name, [int(time.time() * 1000)] * COUNT)
    partition_dir = broker.data_dir / f"{topic_name}-0"

    def sizes() -> list[int]:
        return [os.path.getsize(partition_dir / f"{base:020d}.log") for base in live_bases(partition_dir)]

    # Kafka's rule: the oldest segments go while the log stays at or above retention.bytes.
    wait_until(lambda: sum(sizes()) - sizes()[0] < retention_bytes, message="log trimmed to retention.bytes")
    assert sum(sizes()) >= retention_bytes
    wait_until(lambda: not deleted_files(partition_dir), message=".deleted files removed")
    first = live_bases(partition_dir)[0]
    assert first > 0 and earliest(admin, topic_name) == first
    assert_intact_from(broker.bootstrap, topic_name, first, COUNT)


def test_min_timestamp_via_incremental_alter_configs(broker, topic_name):
    admin = admin_for(broker)
    create(admin, topic_name, **{"retention.ms": -1})
    base_ts = 1_700_000_000_000
    timestamps = [base_ts + 10 * i for i in range(COUNT)]
    produce(broker.bootstrap, topic_name, timestamps)
    partition_dir = broker.data_dir / f"{topic_name}-0"
    bases = live_bases(partition_dir)
    assert len(bases) >= 5

    # Exactly the largest timestamp of segment 2: strictly below deletes segments 0 and 1 only.
    set_config(admin, topic_name, "log.retention.min.timestamp", str(timestamps[bases[3] - 1]))
    wait_until(lambda: earliest(admin, topic_name) == bases[2], message="segments 0 and 1 deleted")
    wait_until(lambda: live_bases(partition_dir) == bases[2:] and not deleted_files(partition_dir),
               message="their files removed")
    assert_intact_from(broker.bootstrap, topic_name, bases[2], COUNT, timestamps)

    # One more millisecond and segment 2 goes too.
    set_config(admin, topic_name, "log.retention.min.timestamp", str(timestamps[bases[3] - 1] + 1))
    wait_until(lambda: earliest(admin, topic_name) == bases[3], message="segment 2 deleted")
    wait_until(lambda: live_bases(partition_dir) == bases[3:], message="its files removed")
    assert_intact_from(broker.bootstrap, topic_name, bases[3], COUNT, timestamps)
    assert "due to log retention minimum timestamp" in broker.log()


def test_retention_after_delete_records_removes_whole_segments_below(broker, topic_name):
    admin = admin_for(broker)
    create(admin, topic_name)
    produce(broker.bootstrap, topic_name, [int(time.time() * 1000)] * COUNT)
    partition_dir = broker.data_dir / f"{topic_name}-0"
    bases = live_bases(partition_dir)
    assert len(bases) >= 5
    target = bases[3] + 1  # inside segment 3
    tp = TopicPartition(topic_name, 0, target)
    result = admin.delete_records([tp])
    assert next(iter(result.values())).result(timeout=30).low_watermark == target

    # Segments 0..2 lie wholly below the new start offset: retention deletes them; segment 3
    # holds the start offset and stays; the start offset stays where DeleteRecords put it.
    wait_until(lambda: live_bases(partition_dir) == bases[3:] and not deleted_files(partition_dir),
               message="segments below the log start offset deleted")
    assert earliest(admin, topic_name) == target
    assert_intact_from(broker.bootstrap, topic_name, target, COUNT)


def checkpoint_entries(path) -> dict[str, int]:
    lines = path.read_text().splitlines()
    assert lines[0] == "0" and int(lines[1]) == len(lines) - 2
    return {topic: int(offset) for topic, _, offset in (line.split(" ") for line in lines[2:])}


def test_log_start_offset_checkpoint_follows_retention(start_broker, topic_name):
    broker = start_broker(**RETENTION_OVERRIDES)
    admin = admin_for(broker)
    by_time, by_records = f"{topic_name}-time", f"{topic_name}-records"
    create(admin, by_time, **{"retention.ms": -1})
    create(admin, by_records)
    timestamps = [1_700_000_000_000 + i for i in range(COUNT)]
    produce(broker.bootstrap, by_time, timestamps)
    produce(broker.bootstrap, by_records, [int(time.time() * 1000)] * COUNT)
    time_bases = live_bases(broker.data_dir / f"{by_time}-0")
    record_bases = live_bases(broker.data_dir / f"{by_records}-0")
    target = record_bases[2] + 3

    def move_start_offsets(admin: AdminClient, segment: int, offset: int) -> None:
        """Retention by time up to segment ``segment`` of one topic, DeleteRecords to ``offset`` in
        the other; wait until retention has deleted the segments below both."""
        set_config(admin, by_time, "log.retention.min.timestamp", str(timestamps[time_bases[segment]]))
        admin.delete_records([TopicPartition(by_records, 0, offset)])[TopicPartition(by_records, 0, offset)].result(timeout=30)
        wait_until(lambda: live_bases(broker.data_dir / f"{by_time}-0") == time_bases[segment:]
                   and live_bases(broker.data_dir / f"{by_records}-0") == record_bases[segment:],
                   message=f"retention to delete the segments below segment {segment}")

    move_start_offsets(admin, 2, target)

    # The periodic checkpoint (every 200 ms here) picks up the moved start offsets...
    checkpoint = broker.data_dir / "log-start-offset-checkpoint"

    def holds(expected: dict[str, int]) -> bool:
        entries = checkpoint_entries(checkpoint)
        return {t: entries.get(t) for t in expected} == expected

    first = {by_time: time_bases[2], by_records: target}
    wait_until(lambda: holds(first), message="checkpoint written at the next interval")

    # ... and a clean shutdown writes it. Restarted with the periodic write an hour away (and the
    # .deleted files kept that long too), both start offsets move again: the file keeps the old
    # offsets while the broker runs, and holds the new ones once SIGTERM has stopped it.
    assert broker.stop() == 0
    broker.overrides["log.flush.start.offset.checkpoint.interval.ms"] = "3600000"
    broker.overrides["log.segment.delete.delay.ms"] = "3600000"
    broker.start()
    admin = admin_for(broker)
    assert earliest(admin, by_time) == time_bases[2] and earliest(admin, by_records) == target
    second_target = record_bases[3] + 2
    move_start_offsets(admin, 3, second_target)
    assert earliest(admin, by_time) == time_bases[3] and earliest(admin, by_records) == second_target
    assert holds(first), "the checkpoint changed while the broker ran: not the shutdown's write"
    assert all(deleted_files(broker.data_dir / f"{topic}-0") for topic in first)
    assert broker.stop() == 0
    assert holds({by_time: time_bases[3], by_records: second_target})
    for topic in first:
        assert not deleted_files(broker.data_dir / f"{topic}-0")

    broker.start()
    assert earliest(admin_for(broker), by_time) == time_bases[3]
    assert earliest(admin_for(broker), by_records) == second_target
    assert_intact_from(broker.bootstrap, by_records, second_target, COUNT)
    assert_intact_from(broker.bootstrap, by_time, time_bases[3], COUNT, timestamps)
