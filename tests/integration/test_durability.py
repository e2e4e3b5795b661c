"""Data survives a clean restart and a kill -9; a torn or corrupted tail is truncated, never served."""

from __future__ import annotations

import os

import pytest

from tests.integration import clients


def pairs(n: int, tag: str) -> list[tuple[bytes | None, bytes]]:
    return [(f"k{i}".encode(), f"{tag}-{i}-".encode() + bytes(range(i % 200))) for i in range(n)]


def read_all(bootstrap: str, topic: str, n: int) -> list[tuple[bytes | None, bytes]]:
    return [(k, v) for _, k, v, _ in clients.consume_confluent(bootstrap, topic, n, timeout=15)]


def log_end_offset(bootstrap: str, topic: str) -> int:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "pybroker-tests"})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=15)[1]
    finally:
        consumer.close()


def active_log_file(data_dir, topic: str) -> str:
    partition_dir = os.path.join(data_dir, f"{topic}-0")
    logs = sorted(f for f in os.listdir(partition_dir) if f.endswith(".log"))
    return os.path.join(partition_dir, logs[-1])


def test_clean_restart_keeps_data_and_writes_kafka_checkpoints(start_broker, topic_name):
    broker = start_broker()
    first = pairs(200, "a")
    clients.produce_confluent(broker.bootstrap, topic_name, first)
    assert broker.stop() == 0

    data = broker.data_dir
    assert (data / ".kafka_cleanshutdown").exists()
    assert (data / "recovery-point-offset-checkpoint").read_text() == f"0\n1\n{topic_name} 0 200\n"
    assert (data / "replication-offset-checkpoint").read_text() == f"0\n1\n{topic_name} 0 200\n"
    assert (data / "log-start-offset-checkpoint").read_text() == f"0\n1\n{topic_name} 0 0\n"
    assert (data / f"{topic_name}-0" / "leader-epoch-checkpoint").read_text() == "0\n1\n0 0\n"
    assert (data / f"{topic_name}-0" / "partition.metadata").read_text().startswith("version: 0\ntopic_id: ")
    assert "broker.id=1" in (data / "meta.properties").read_text()

    broker.start()
    assert not (data / ".kafka_cleanshutdown").exists()
    second = pairs(50, "b")
    clients.produce_confluent(broker.bootstrap, topic_name, second)
    got = clients.consume_confluent(broker.bootstrap, topic_name, 250, timeout=15)
    assert [o for o, *_ in got] == list(range(250))
    assert [(k, v) for _, k, v, _ in got] == first + second


def test_kill_9_keeps_acknowledged_data(start_broker, topic_name):
    broker = start_broker()
    written = pairs(300, "x")
    clients.produce_confluent(broker.bootstrap, topic_name, written)
    broker.kill()
    broker.start()
    assert read_all(broker.bootstrap, topic_name, 300) == written
    clients.produce_confluent(broker.bootstrap, topic_name, pairs(10, "y"))
    got = clients.consume_confluent(broker.bootstrap, topic_name, 310, timeout=15)
    assert [o for o, *_ in got] == list(range(310))


def test_kill_9_during_appends_keeps_every_acknowledged_record(start_broker, topic_name):
    """kill -9 while a producer keeps appending (acks=all, requests in flight): after recovery the
    log is a prefix of what was sent, in order, and holds every acknowledged record at the offset
    its acknowledgement named.

    What this proves: the broker writes a batch into the log file before it acknowledges it, and
    recovery of the unclean log truncates whatever a kill left half-written. The written pages
    live in the kernel's page cache, which a killed process leaves behind. What it does not prove:
    survival of a power loss or kernel crash, which needs the data on the device. Kafka's default
    is the same (no fsync per append, ``log.flush.interval.messages`` unset); replication, not
    fsync, is what protects acknowledged records there, and ``flush.messages`` is the opt-in.
    """
    broker = start_broker()
    # A kill can land when the broker has just answered everything sent so far (the answers wait
    # unread in the client); nothing is in flight then, and the scenario is repeated on a fresh
    # topic. Recovery is checked after every kill either way.
    for attempt in range(5):
        topic = f"{topic_name}-{attempt}"
        sent, acknowledged, failed = produce_until_killed(broker, topic)
        broker.start()
        end = log_end_offset(broker.bootstrap, topic)
        log = clients.consume_confluent(broker.bootstrap, topic, end, timeout=15)
        values = [v for _, _, v, _ in log]
        assert [o for o, *_ in log] == list(range(end))
        assert values == sent[:end], "the recovered log is not a prefix of what was sent"
        assert end >= len(acknowledged)
        assert all(values[offset] == value for offset, value in acknowledged.items())
        if failed:  # records sent before the kill went unanswered: it interrupted appends
            break
    else:
        pytest.fail("in 5 attempts no kill caught a produce request in flight")

    clients.produce_confluent(broker.bootstrap, topic, pairs(10, "after"))
    tail = clients.consume_confluent(broker.bootstrap, topic, 10, offset=end, timeout=15)
    assert [o for o, *_ in tail] == list(range(end, end + 10))


def produce_until_killed(broker, topic: str) -> tuple[list[bytes], dict[int, bytes], list[bytes]]:
    """Produce (acks=all) until 20,000 records are acknowledged with 1,000 more sent, kill -9 the
    broker, let the producer give up on the rest: (sent, acknowledged by offset, failed)."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 2,
                         "message.timeout.ms": 5000, "retry.backoff.ms": 50})
    acknowledged: dict[int, bytes] = {}
    failed: list[bytes] = []

    def delivered(error, message) -> None:
        if error is None:
            acknowledged[message.offset()] = message.value()
        else:
            failed.append(message.value())

    sent: list[bytes] = []
    while len(acknowledged) < 20_000 or len(sent) - len(acknowledged) < 1_000:
        value = b"r%08d" % len(sent) + b"." * 90
        try:
            producer.produce(topic, value=value, partition=0, on_delivery=delivered)
        except BufferError:
            producer.poll(0.01)
            continue
        sent.append(value)
        producer.poll(0)
    broker.kill()
    assert producer.flush(30) == 0
    assert len(acknowledged) + len(failed) == len(sent)
    return sent, acknowledged, failed


def test_torn_tail_is_truncated_after_unclean_stop(start_broker, topic_name):
    broker = start_broker()
    written = pairs(100, "t")
    clients.produce_confluent(broker.bootstrap, topic_name, written)
    broker.kill()
    path = active_log_file(broker.data_dir, topic_name)
    size = os.path.getsize(path)
    with open(path, "ab") as f:  # half a batch header: what a crash mid-write leaves
        f.write(b"\x00" * 8 + b"\x00\x00\x10\x00" + b"\xff" * 20)
    broker.start()
    assert os.path.getsize(path) == size
    assert "truncated" in broker.log()
    assert read_all(broker.bootstrap, topic_name, 100) == written
    clients.produce_confluent(broker.bootstrap, topic_name, pairs(5, "u"))
    got = clients.consume_confluent(broker.bootstrap, topic_name, 105, timeout=15)
    assert [o for o, *_ in got] == list(range(105))


def test_corrupted_batch_is_cut_off_not_served(start_broker, topic_name):
    broker = start_broker()
    # Two separate produce calls -> at least two batches; corrupt a byte in the last one.
    # linger.ms: each call's 50 records in one batch, however slowly a loaded machine runs the loop.
    clients.produce_confluent(broker.bootstrap, topic_name, pairs(50, "p"), **{"linger.ms": 1000})
    clients.produce_confluent(broker.bootstrap, topic_name, pairs(50, "q"), **{"linger.ms": 1000})
    broker.kill()
    path = active_log_file(broker.data_dir, topic_name)
    with open(path, "r+b") as f:
        f.seek(os.path.getsize(path) - 10)
        byte = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([byte[0] ^ 0xFF]))
    broker.start()
    got = clients.consume_confluent(broker.bootstrap, topic_name, 100, timeout=5, **{"check.crcs": True})
    assert [(k, v) for _, k, v, _ in got] == pairs(50, "p")
    assert "truncated" in broker.log()
