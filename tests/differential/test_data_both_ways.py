"""The same log directory served by pybroker and by Apache Kafka 3.9.2, in both directions.

One broker (id 1) writes a topic on a ZooKeeper chroot: lz4 records with keys, headers and
timestamps, an idempotent producer's records, a committed and an aborted transaction, a
DeleteRecords on partition 0, and a group's committed offsets. It stops (SIGTERM) or is killed
(SIGKILL); once its registration is gone, the other broker starts with the same id on the same
chroot and log directory. What a read_committed consumer reads from the start of each partition,
the log start and end offsets, and the group's committed offsets must be what the first broker
served. docs/moving-data.md says how a user does it.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from bench.apache_kafka import ZOOKEEPER_VERSION, KafkaBroker
from tests.conftest import BrokerProcess, require_kafka, wait_until
from tests.integration.cluster import zk_client
from tests.zookeeper import chroot_for

TOPIC = "both-ways"
GROUP = "both-ways-group"
SESSION_TIMEOUT_MS = 4000
# Both brokers checkpoint log start offsets every 60 s by default: a DeleteRecords is durable only
# once checkpointed (on either broker, a kill before that brings the deleted records back).
CHECKPOINTS = {"zookeeper.session.timeout.ms": SESSION_TIMEOUT_MS, "log.initial.task.delay.ms": 0,
               "log.flush.start.offset.checkpoint.interval.ms": 200,
               "replica.high.watermark.checkpoint.interval.ms": 200}


def write(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, 2, 1)])[TOPIC].result(30)
    plain = Producer({"bootstrap.servers": bootstrap, "compression.type": "lz4", "linger.ms": 5})
    # Recent timestamps: older than retention.ms, a segment would be deleted by the next retention pass.
    base = int(time.time() * 1000) - 60_000
    for i in range(20):
        plain.produce(TOPIC, key=b"k%d" % i, value=b"v%d" % i, partition=i % 2,
                      timestamp=base + i, headers=[("h", b"%d" % i)])
    assert plain.flush(30) == 0
    idempotent = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for i in range(6):
        idempotent.produce(TOPIC, value=b"idem-%d" % i, partition=i % 2)
    assert idempotent.flush(30) == 0
    transactional = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"both-{uuid.uuid4().hex[:6]}"})
    transactional.init_transactions(30)
    for outcome in ("committed", "aborted"):
        transactional.begin_transaction()
        for partition in (0, 1):
            transactional.produce(TOPIC, value=outcome.encode(), partition=partition)
        transactional.flush(30)
        (transactional.commit_transaction if outcome == "committed" else transactional.abort_transaction)(30)
    deleted = admin.delete_records([TopicPartition(TOPIC, 0, 3)])[TopicPartition(TOPIC, 0, 3)].result(30)
    assert deleted.low_watermark == 3
    committer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False})
    committer.commit(offsets=[TopicPartition(TOPIC, 0, 7), TopicPartition(TOPIC, 1, 4)], asynchronous=False)
    committer.close()


def read(bootstrap: str) -> dict[str, Any]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False,
                         "isolation.level": "read_committed"})
    try:
        partitions = [TopicPartition(TOPIC, p) for p in (0, 1)]
        committed = {tp.partition: tp.offset for tp in consumer.committed(partitions, timeout=30)}
        watermarks = {p.partition: consumer.get_watermark_offsets(p, timeout=30) for p in partitions}
        consumer.assign([TopicPartition(TOPIC, p.partition, watermarks[p.partition][0]) for p in partitions])
        records: list[tuple[Any, ...]] = []
        deadline = time.monotonic() + 60
        done: set[int] = set()  # partitions read to their end (past the last transaction marker)
        while done != {0, 1} and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                records.append((message.partition(), message.offset(), message.key(), message.value(),
                                message.timestamp()[1] if message.key() else None, message.headers()))
            for partition, (_, end) in watermarks.items():
                if (consumer.position([TopicPartition(TOPIC, partition)])[0].offset or 0) >= end:
                    done.add(partition)
    finally:
        consumer.close()
    return {"committed": committed, "watermarks": watermarks, "records": sorted(records, key=lambda r: r[:2])}


def start_pybroker(data: Path, connect: str) -> Any:
    broker = BrokerProcess(data, **{"node.id": 1, "zookeeper.connect": connect, "offsets.topic.replication.factor": 1,
                                    "transaction.state.log.replication.factor": 1,
                                    "transaction.state.log.min.isr": 1, "group.initial.rebalance.delay.ms": 0,
                                    **CHECKPOINTS})
    broker.start(timeout=60)
    return broker


def start_kafka(data: Path, connect: str) -> Any:
    broker = KafkaBroker(data.parent / "kafka", connect, 1, quick_start=True,
                         **{"log.dirs": str(data), **CHECKPOINTS})
    broker.start(timeout=90)
    return broker


def gone(connect: str) -> None:
    """Wait until broker 1's registration has left ZooKeeper (its session closed or expired)."""
    client = zk_client(connect)
    try:
        wait_until(lambda: not client.exists("/brokers/ids/1"), timeout=30, message="broker 1's registration to go")
    finally:
        client.stop()
        client.close()


@pytest.mark.timeout(300)
@pytest.mark.parametrize("stop", ["SIGTERM", "SIGKILL"])
@pytest.mark.parametrize("first,second", [("pybroker", "kafka"), ("kafka", "pybroker")])
def test_the_other_broker_serves_what_the_first_wrote(zookeeper, tmp_path, first, second, stop):
    require_kafka(ZOOKEEPER_VERSION)
    starts = {"pybroker": start_pybroker, "kafka": start_kafka}
    connect = chroot_for(zookeeper, f"both-{first}-{stop}")
    data = tmp_path / "data"
    writer = starts[first](data, connect)
    try:
        write(writer.bootstrap)
        served = read(writer.bootstrap)
        values = [record[3] for record in served["records"]]
        assert served["watermarks"][0][0] == 3 and served["committed"] == {0: 7, 1: 4}, served
        assert b"committed" in values and b"aborted" not in values and len(values) == 20 - 3 + 6 + 2, served
        checkpoint = data / "log-start-offset-checkpoint"
        wait_until(lambda: checkpoint.exists() and f"{TOPIC} 0 3" in checkpoint.read_text(), timeout=10,
                   message="the log start offset checkpointed")
        # The high watermark checkpointed past the transactions' markers, so that the next broker
        # loads a log whose replayed transactions the checkpoint already covers.
        end = served["watermarks"][1][1]
        high_watermarks = data / "replication-offset-checkpoint"
        wait_until(lambda: high_watermarks.exists() and f"{TOPIC} 1 {end}" in high_watermarks.read_text(),
                   timeout=10, message="the high watermark checkpointed")
    finally:
        writer.stop() if stop == "SIGTERM" else writer.kill()
        writer.kill()
    gone(connect)
    reader = starts[second](data, connect)
    try:
        got = read(reader.bootstrap)
    finally:
        reader.stop()
        reader.kill()
    # On a difference the records each side served and, for pybroker, what its log says of the
    # load are in the message.
    loaded = "" if second != "pybroker" else "\n".join(
        line for line in reader.log().splitlines()
        if any(word in line for word in ("ecover", "runcat", "producer state", "high watermark", "Leader", "ERROR")))
    for part in ("watermarks", "committed"):
        assert got[part] == served[part], (f"{part}: {second} {got[part]}, {first} {served[part]}; records "
                                           f"{second} {got['records']}, {first} {served['records']}\n{loaded}")
    missing = [r for r in served["records"] if r not in got["records"]]
    extra = [r for r in got["records"] if r not in served["records"]]
    assert got["records"] == served["records"], f"{second} lacks {missing} and has {extra} more"
