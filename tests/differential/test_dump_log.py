"""Kafka's DumpLogSegments (kafka-dump-log, from the 3.9.2 jars) reads every file pybroker writes,
and sees in them what it sees in Kafka 3.9.2's files after the same writes.

The same writes go to a pybroker and to a Kafka broker: a topic per codec (one batch of keyed
records with headers), an idempotent producer's records, three transactions (commit, abort,
commit: markers and an aborted-transaction index), and a compacted topic of small segments that
the cleaner compacts. Both stop cleanly; then ``--deep-iteration --index-sanity-check`` dumps every
``.log``, ``.index``, ``.timeindex``, ``.txnindex`` and ``.snapshot`` of each broker without an
error, ``--verify-index-only`` finds no mismatch, and the dumps of the user topics summarize
alike: each batch's offsets, count, codec, transactional and control flags, producer fields
(ids relabelled), each record's offset and key and value sizes, the aborted transactions and the
producer snapshots' entries.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from bench.apache_kafka import ZOOKEEPER_VERSION, KafkaBroker, run_kafka_tool
from tests.conftest import BrokerProcess, require_kafka, wait_until
from tests.zookeeper import chroot_for

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
USER_TOPICS = (*(f"codec-{c}" for c in CODECS), "idempotent", "transactions")
SUFFIXES = (".log", ".index", ".timeindex", ".txnindex", ".snapshot")
COMPACTED = {"cleanup.policy": "compact", "segment.bytes": "1200", "min.cleanable.dirty.ratio": "0.01",
             "delete.retention.ms": "0"}
FAST_CLEANER = {"log.cleaner.backoff.ms": 100, "log.initial.task.delay.ms": 0, "offsets.topic.replication.factor": 1,
                "transaction.state.log.replication.factor": 1, "transaction.state.log.min.isr": 1}


def write(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = [NewTopic(t, 1, 1) for t in USER_TOPICS] + [NewTopic("compacted", 1, 1, config=COMPACTED)]
    for future in admin.create_topics(topics).values():
        future.result(30)
    for codec in CODECS:
        producer = Producer({"bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": 5000,
                             "enable.idempotence": False})
        # Leaders known before the first record, so all 50 wait in one batch for flush (a record
        # queued before the metadata answer could leave alone, uncompressed).
        producer.list_topics(f"codec-{codec}", timeout=10)
        for i in range(50):
            producer.produce(f"codec-{codec}", key=b"k%d" % (i % 5), value=b"value-%d" % i * 3, headers=[("h", b"x")])
        assert producer.flush(30) == 0
    idempotent = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 1000})
    for i in range(10):
        idempotent.produce("idempotent", value=b"i%d" % i)
    assert idempotent.flush(30) == 0
    transactional = Producer({"bootstrap.servers": bootstrap, "transactional.id": "dump-log", "linger.ms": 1000})
    transactional.init_transactions(30)
    for outcome in ("commit", "abort", "commit"):
        transactional.begin_transaction()
        for i in range(3):
            transactional.produce("transactions", value=b"%s-%d" % (outcome.encode(), i))
        transactional.flush(30)
        (transactional.commit_transaction if outcome == "commit" else transactional.abort_transaction)(30)
    compacted = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "enable.idempotence": False})
    for i in range(120):  # one batch at a time: many small segments
        compacted.produce("compacted", key=b"k%d" % (i % 4), value=b"v%03d" % i)
        assert compacted.flush(30) == 0


def cleaned(data: Path) -> bool:
    """The cleaner has compacted the topic: a cleaned segment holds fewer records than written."""
    return any(path.name.endswith(".log") and path.stat().st_size < 1000
               for path in (data / "compacted-0").iterdir() if path.name.startswith("0" * 20))


def files(data: Path) -> list[str]:
    return sorted(str(p) for p in data.glob("*/*") if p.suffix in SUFFIXES)


def summary(dump: str, data: Path) -> dict[str, list[str]]:
    """The user topics' dumps, file by file, with what differs between two brokers' runs taken out
    (positions, sizes, CRCs, times, epochs) and producer ids relabelled in order of appearance."""
    ids: dict[str, str] = {}

    def relabel(match: re.Match[str]) -> str:
        pid = match.group(1)
        if pid == "-1":
            return "producerId: -1"
        return "producerId: " + ids.setdefault(pid, f"P{len(ids)}")

    out: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in dump.splitlines():
        if line.startswith("Dumping "):
            path = Path(line.removeprefix("Dumping ").strip())
            name = f"{path.parent.name}/{path.suffix}"
            current = out.setdefault(name, []) if path.parent.name.rsplit("-", 1)[0] in USER_TOPICS else None
            continue
        if current is None:
            continue
        line = re.sub(r"producerId: (-?\d+)", relabel, line)
        line = re.sub(r" (position|size|crc|CreateTime|LogAppendTime|lastTimestamp|timestamp|partitionLeaderEpoch|"
                      r"coordinatorEpoch|producerEpoch): -?\d+", "", line)
        if str(data) in line:
            line = line.replace(str(data), "DATA")
        current.append(line)
    return out


def dump(data: Path) -> tuple[dict[str, list[str]], str, str]:
    run = run_kafka_tool(ZOOKEEPER_VERSION, "kafka.tools.DumpLogSegments",
                         ["--deep-iteration", "--index-sanity-check", "--files", ",".join(files(data))], timeout=300)
    assert run.returncode == 0, run.stderr
    verify = run_kafka_tool(ZOOKEEPER_VERSION, "kafka.tools.DumpLogSegments",
                            ["--verify-index-only", "--files", ",".join(f for f in files(data) if f.endswith("index"))],
                            timeout=300)
    assert verify.returncode == 0, verify.stderr
    return summary(run.stdout, data), run.stdout + run.stderr, verify.stdout + verify.stderr


@pytest.fixture(scope="module")
def dumps(zookeeper, tmp_path_factory) -> Iterator[dict[str, Any]]:
    require_kafka(ZOOKEEPER_VERSION)
    found: dict[str, Any] = {}
    ours = BrokerProcess(tmp_path_factory.mktemp("dump-pybroker") / "data", **FAST_CLEANER)
    ours.start()
    try:
        write(ours.bootstrap)
        wait_until(lambda: cleaned(ours.data_dir), timeout=60, message="pybroker's cleaner to compact")
    finally:
        assert ours.stop() == 0
    kafka = KafkaBroker(tmp_path_factory.mktemp("dump-kafka"), chroot_for(zookeeper, "dump-kafka"), quick_start=True,
                        **FAST_CLEANER)
    kafka.start()
    try:
        write(kafka.bootstrap)
        wait_until(lambda: cleaned(kafka.data_dir), timeout=60, message="Kafka's cleaner to compact")
    finally:
        kafka.stop()
        kafka.kill()
    found["pybroker"] = dump(ours.data_dir)
    found["kafka"] = dump(kafka.data_dir)
    yield found


def test_kafka_reads_every_file_pybroker_writes(dumps):
    _, output, verified = dumps["pybroker"]
    for text in (output, verified):
        problems = [line for line in text.splitlines()
                    if re.search(r"error|exception|mismatch|corrupt|not valid|isvalid: false", line, re.I)]
        assert not problems, problems[:10]
    assert "passed sanity check" in output
    assert re.search(r"version: 0 producerId: \d+ firstOffset: \d+ lastOffset: \d+ lastStableOffset: \d+", output)


def test_the_dumps_show_what_kafkas_own_show(dumps):
    ours, theirs = dumps["pybroker"][0], dumps["kafka"][0]
    assert sorted(ours) == sorted(theirs)
    for name in sorted(ours):
        assert ours[name] == theirs[name], name
    # What was compared: every codec's batch with its records, markers, an aborted transaction.
    transactions = "\n".join(ours["transactions-0/.log"])
    assert transactions.count("isControl: true") == 3 and "endTxnMarker: ABORT" in transactions
    assert ours["transactions-0/.txnindex"] and ours["transactions-0/.snapshot"]
    for codec in CODECS:
        log = "\n".join(ours[f"codec-{codec}-0/.log"])
        assert f"compresscodec: {codec}" in log and log.count("| offset: ") == 50, codec
