"""Log compaction on a three-broker cluster: every replica's cleaner compacts its own copy.

What a user of a replicated compacted topic (RF 3, acks=all, min.insync.replicas=2) relies on:

1. every replica is cleaned (its files shrink, its ``cleaner-offset-checkpoint`` covers its
   inactive segments, its log has the cleaner's summary), and after the leader is killed with
   SIGKILL, consumers (confluent-kafka, kcat) reading the new leader from the beginning see
   Kafka's guarantee: offsets increase, every record read is the one written at its offset, and
   each key's last value read is the last value written; the killed broker, restarted,
   recovers its compacted copy and rejoins the ISR;
2. a replica far behind (stopped while the records were written, its fetch position inside a
   range the leader's cleaner removed) or empty (its log dir lost) catches up from the compacted
   leader — offsets with gaps, rebuilt batches, the empty header the cleaner keeps for an
   idempotent producer's last batch — and ends with the leader's batches, its high watermark and
   ISR membership recover, and once it leads, a consumer positioned at a removed offset goes on
   at the next retained one;
3. tombstones disappear from every replica after delete.retention.ms;
4. a replica whose active segment starts with a batch the leader's cleaner stamped with a delete
   horizon still rolls by segment.ms, so once it leads, max.compaction.lag.ms holds there.

As in ``test_log_compaction``, a topic is created with ``min.cleanable.dirty.ratio=1`` and the
ratio is lowered once the data is in (the change reaches every broker through ZooKeeper), and
every topic ends with unique "filler" keys so that the last repeated keys lie in closed segments
on every replica (each replica rolls its own segments). A clean is awaited per broker by
polling its ``cleaner-offset-checkpoint``; a replica's records are read from its segment files
with the broker's own native reader.
"""

from __future__ import annotations

import os
import shutil
import time

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import NewTopic

from pybroker import _native
from pybroker.log.checkpoint import REPLICATION_OFFSET_CHECKPOINT, OffsetCheckpointFile
from pybroker.log.log import SWAP_SUFFIX
from pybroker.types import TopicPartition
from tests.conftest import BrokerProcess, wait_until
from tests.integration import clients
from tests.integration.cluster import SESSION_TIMEOUT_MS, Cluster, start_cluster
from tests.integration.test_log_compaction import (
    CODECS,
    SEGMENT_BYTES,
    cleaner_checkpoint,
    filler,
    log_bases,
    log_bytes,
    partition_dir,
    produce,
    read_all_confluent,
    set_topic_config,
)
from tests.zookeeper import chroot_for

CLUSTER_OVERRIDES = {
    "log.cleaner.backoff.ms": 200,
    "log.retention.check.interval.ms": 200,
    "log.initial.task.delay.ms": 0,
    "log.segment.delete.delay.ms": 100,
    "replica.high.watermark.checkpoint.interval.ms": 200,
    # A follower appends what one fetch returns and rolls before an append that would not fit,
    # as Kafka's does: one large fetch of a follower behind would leave its repeated keys in the
    # active segment beside the filler. Fetches no larger than a segment keep them apart.
    "replica.fetch.max.bytes": SEGMENT_BYTES,
}

# A killed or stopped broker's peers log their lost connections to it.
pytestmark = pytest.mark.broker_log_allows(r"Sending \w+ to broker \d+ failed")

Read = tuple[int, bytes | None, bytes | None]  # offset, key, value
Batch = tuple[int, int, int, list[Read]]  # base offset, producer id, producer epoch, records


@pytest.fixture
def cluster(zookeeper, tmp_path, request):
    cluster = start_cluster(chroot_for(zookeeper, request.node.name), tmp_path, **CLUSTER_OVERRIDES)
    yield cluster
    cluster.kill()


# --- helpers ----------------------------------------------------------------------------------

class Written:
    """What the producers were acknowledged: offset -> (key, value)."""

    def __init__(self) -> None:
        self.at: dict[int, tuple[bytes, bytes | None]] = {}

    def produce(self, bootstrap: str, topic: str, pairs: list[tuple[bytes, bytes | None]], compression: str = "none",
                timestamp: int | None = None, **config: object) -> None:
        """Produce in order with acks=all; ``timestamp``: every record's CreateTime (ms)."""
        if timestamp is None:
            offsets = produce(bootstrap, topic, pairs, compression, acks="all", **config)
        else:
            offsets = produce_at(bootstrap, topic, pairs, timestamp)
        for offset, pair in zip(offsets, pairs, strict=True):
            assert offset not in self.at
            self.at[offset] = pair

    def latest(self) -> dict[bytes, tuple[int, bytes | None]]:
        """key -> (offset, value) of its last acknowledged record."""
        return {key: (offset, value) for offset, (key, value) in sorted(self.at.items())}

    @property
    def end(self) -> int:
        return max(self.at) + 1


def produce_at(bootstrap: str, topic: str, pairs: list[tuple[bytes, bytes | None]], timestamp: int) -> list[int]:
    """Produce records stamped ``timestamp`` in one batch; returns their offsets. Time-based
    rules (segment.ms, max.compaction.lag.ms) then act on those timestamps without waiting."""
    offsets: list[int] = []
    errors: list[object] = []
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    for key, value in pairs:
        producer.produce(topic, value=value, key=key, partition=0, timestamp=timestamp,
                         on_delivery=lambda err, msg: errors.append(err) if err else offsets.append(msg.offset()))
    assert producer.flush(30) == 0 and not errors, errors
    return sorted(offsets)


def check_guarantee(read: list[Read], written: Written) -> None:
    """Kafka's compaction guarantee for a read from the start: offsets increase, each record read
    is the one acknowledged at its offset, and each key's last record read is its last one written
    (older versions may remain in the part not yet cleaned, never newer or other ones)."""
    offsets = [offset for offset, _key, _value in read]
    assert offsets == sorted(set(offsets)), "offsets read do not increase"
    wrong = [(o, k, v) for o, k, v in read if written.at.get(o) != (k, v)]
    assert not wrong, f"records not written at their offsets: {wrong[:3]}"
    last = {key: (offset, value) for offset, key, value in read}
    assert last == written.latest()


def create_compacted(cluster: Cluster, topic: str, **configs: object) -> None:
    """One partition on brokers 1, 2, 3 (broker 1 leads), not cleaned until the ratio is lowered."""
    config = {"cleanup.policy": "compact", "segment.bytes": str(SEGMENT_BYTES), "min.insync.replicas": "2",
              "min.cleanable.dirty.ratio": "1", **{k.replace("_", "."): str(v) for k, v in configs.items()}}
    admin = cluster.admin()
    admin.create_topics([NewTopic(topic, 1, replica_assignment=[[1, 2, 3]], config=config)])[topic].result(30)
    wait_for_isr(cluster, topic, [1, 2, 3])


def wait_for_isr(cluster: Cluster, topic: str, isr: list[int], timeout: float = 30) -> None:
    wait_until(lambda: (state := cluster.partitions(topic)[0])[0] > 0 and state[2] == isr, timeout=timeout,
               message=f"{topic} led with the ISR {isr}")


def wait_for_leader(cluster: Cluster, topic: str, leader: int, timeout: float = SESSION_TIMEOUT_MS / 1000 + 20) -> None:
    wait_until(lambda: cluster.partitions(topic)[0][0] == leader, timeout=timeout,
               message=f"broker {leader} leading {topic}")


def disk_batches(broker: BrokerProcess, topic: str) -> list[Batch]:
    """Every batch of the replica's segment files, in offset order, read with the broker's
    native reader (control batches included, with no records). The broker may be appending or
    swapping cleaned segments in: a read that met a batch being written, a ``.swap`` file, a
    file gone or a changed listing is done again."""
    directory = partition_dir(broker, topic)

    def listing() -> list[str]:
        names = sorted(os.listdir(directory))
        assert not any(name.endswith(SWAP_SUFFIX) for name in names), "a swap under way"
        return [name for name in names if name.endswith(".log")]

    def read() -> list[Batch]:
        names = listing()
        out: list[Batch] = []
        for name in names:
            out += [(b, pid, epoch, [(o, k, v) for o, _ts, k, v in records])
                    for b, pid, epoch, _txn, _control, records
                    in _native.read_record_batches((directory / name).read_bytes())]
        assert listing() == names, "segments swapped during the read"
        return out

    return wait_until(read, 10, 0.05, f"a consistent read of {directory}")  # type: ignore[return-value]


def disk_records(broker: BrokerProcess, topic: str) -> list[Read]:
    return [record for *_, records in disk_batches(broker, topic) for record in records]


def cleaned_to_active(broker: BrokerProcess, topic: str) -> int | None:
    """The replica's first dirty offset once everything below its own active segment is cleaned."""
    checkpoint = cleaner_checkpoint(broker, topic)
    active = log_bases(partition_dir(broker, topic))[-1]
    return checkpoint if checkpoint is not None and checkpoint >= active > 0 else None


def wait_cleaned(broker: BrokerProcess, topic: str, timeout: float = 30) -> int:
    return wait_until(lambda: cleaned_to_active(broker, topic), timeout, 0.05,  # type: ignore[return-value]
                      f"broker {broker.overrides['node.id']} to clean {topic} up to its active segment")


def replicated_high_watermark(broker: BrokerProcess, topic: str) -> int | None:
    path = broker.data_dir / REPLICATION_OFFSET_CHECKPOINT
    return OffsetCheckpointFile(str(path)).read().get(TopicPartition(topic, 0)) if path.exists() else None


def watermarks(bootstrap: str, topic: str) -> tuple[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "watermarks"})
    try:
        return consumer.get_watermark_offsets(KafkaTopicPartition(topic, 0), timeout=10)
    finally:
        consumer.close()


def wait_for_high_watermark(bootstrap: str, topic: str, end: int) -> None:
    """A new leader answers ListOffsets with OFFSET_NOT_AVAILABLE until its high watermark has
    caught up (KIP-207); wait until it has, and covers every acknowledged record."""
    wait_until(lambda: watermarks(bootstrap, topic)[1] == end, 20, 0.1,
               message=f"the leader of {topic} to answer its high watermark {end}")


def write_versions(written: Written, bootstrap: str, topic: str, versions: range, keys: int = 100) -> None:
    """``keys`` keys, one round per version, each round with the next codec."""
    for version in versions:
        pairs = [(f"key-{k:03d}".encode(), f"value-{k:03d}-v{version:02d}-".encode() + b"x" * 80)
                 for k in range(keys)]
        written.produce(bootstrap, topic, pairs, CODECS[version % len(CODECS)])


# --- 1. every replica cleaned; the new leader after a SIGKILL serves the compacted log ----------

def test_every_replica_is_compacted_and_survives_leader_kill(cluster: Cluster, topic_name: str) -> None:
    create_compacted(cluster, topic_name)
    written = Written()
    write_versions(written, cluster.bootstrap, topic_name, range(20))
    written.produce(cluster.bootstrap, topic_name, filler("filler", 150))
    assert sorted(written.at) == list(range(written.end))
    wait_until(lambda: all(disk_records(b, topic_name)[-1][0] == written.end - 1 for b in cluster.brokers),
               20, 0.1, "every replica to hold every record")
    before = {node: log_bytes(partition_dir(cluster.broker(node), topic_name)) for node in (1, 2, 3)}
    assert all(len(log_bases(partition_dir(cluster.broker(n), topic_name))) > 5 for n in (1, 2, 3))
    marks = {node: cluster.broker(node).log_mark() for node in (1, 2, 3)}

    set_topic_config(cluster.bootstrap, topic_name, "min.cleanable.dirty.ratio", "0.01")
    for node in (1, 2, 3):
        broker = cluster.broker(node)
        checkpoint = wait_cleaned(broker, topic_name)
        broker.wait_for_log(rf"Log cleaner cleaned log {topic_name}-0 ", since=marks[node])
        directory = partition_dir(broker, topic_name)
        wait_until(lambda d=directory, n=node: log_bytes(d) < before[n] / 2, 10,
                   message=f"broker {node}'s copy to shrink below half of its {before[node]} bytes")
        # The replica's own files: the guarantee, and no key twice below its first dirty offset.
        records = disk_records(broker, topic_name)
        check_guarantee(records, written)
        cleaned_keys = [key for offset, key, _ in records if offset < checkpoint]
        assert len(cleaned_keys) == len(set(cleaned_keys)), f"broker {node}: a key twice in its cleaned section"

    cluster.broker(1).kill()
    wait_until(lambda: cluster.partitions(topic_name)[0][0] in (2, 3), SESSION_TIMEOUT_MS / 1000 + 20,
               message="a new leader")
    wait_for_high_watermark(cluster.bootstrap, topic_name, written.end)
    confluent = read_all_confluent(cluster.bootstrap, topic_name)
    check_guarantee(confluent, written)
    assert len(confluent) < len(written.at) / 3
    kcat = [(o, k, v) for o, k, v, _ in clients.consume_kcat(cluster.bootstrap, topic_name, len(written.at))]
    assert kcat == confluent

    # The killed broker restarts: it recovers its compacted segments (an unclean stop), follows
    # the new leader from its log end offset and rejoins the ISR; records written meanwhile reach
    # it, and its copy still keeps the guarantee.
    written.produce(cluster.bootstrap, topic_name, [(f"key-{k:03d}".encode(), b"after-failover") for k in range(5)])
    cluster.broker(1).start()
    wait_for_isr(cluster, topic_name, [1, 2, 3])
    wait_until(lambda: disk_records(cluster.broker(1), topic_name)[-1][0] == written.end - 1, 10, 0.05,
               message="the restarted broker to replicate the records written without it")
    check_guarantee(disk_records(cluster.broker(1), topic_name), written)


# --- 2. a replica far behind, or empty, catches up from a compacted leader ----------------------

@pytest.mark.parametrize("lost", ["stopped-behind", "log-dir-wiped"])
def test_replica_catches_up_from_a_compacted_leader(cluster: Cluster, topic_name: str, lost: str) -> None:
    """Broker 3 gets the first rounds, then stops (``stopped-behind``: its log ends where the leader
    later removes records; ``log-dir-wiped``: its data dir is deleted, so it restarts empty).
    Meanwhile an idempotent producer writes keys that later rounds overwrite (the leader's cleaner
    keeps its last batch as an empty header), and brokers 1 and 2 are written and compacted.
    Broker 3 then fetches the compacted log and ends with the leader's batches; once it leads
    alone, consumers read the same records from it."""
    create_compacted(cluster, topic_name)
    leader, lagging = cluster.broker(1), cluster.broker(3)
    written = Written()
    write_versions(written, cluster.bootstrap, topic_name, range(5))
    wait_until(lambda: disk_records(lagging, topic_name)[-1][0] == written.end - 1, 10, 0.05,
               message="broker 3 to hold the first rounds")
    behind = written.end  # broker 3's log end offset: removed by the leader's clean below
    assert lagging.stop() == 0
    wait_for_isr(cluster, topic_name, [1, 2])
    if lost == "log-dir-wiped":
        shutil.rmtree(lagging.data_dir)

    write_versions(written, cluster.bootstrap, topic_name, range(5, 7))
    idempotent = [(f"key-{k:03d}".encode(), b"idempotent") for k in range(10)]
    written.produce(cluster.bootstrap, topic_name, idempotent, **{"enable.idempotence": True})
    write_versions(written, cluster.bootstrap, topic_name, range(7, 20))
    written.produce(cluster.bootstrap, topic_name, filler("filler", 150))
    set_topic_config(cluster.bootstrap, topic_name, "min.cleanable.dirty.ratio", "0.01")
    wait_cleaned(leader, topic_name)
    wait_cleaned(cluster.broker(2), topic_name)
    compacted = disk_batches(leader, topic_name)
    records = [record for *_, batch in compacted for record in batch]
    check_guarantee(records, written)
    assert behind not in {offset for offset, _, _ in records}, "the lagging replica's end offset was not removed"
    empty = [(base, pid) for base, pid, _epoch, batch in compacted if pid >= 0 and not batch]
    assert empty, "the idempotent producer's last batch is not kept as an empty header"
    _low, high = watermarks(leader.bootstrap, topic_name)
    assert high == written.end

    lagging.start()
    wait_for_isr(cluster, topic_name, [1, 2, 3])
    wait_until(lambda: replicated_high_watermark(lagging, topic_name) == high, 10, 0.05,
               message=f"broker 3's checkpointed high watermark to reach {high}")
    # Broker 3's own cleaner cleans what it kept from before (stopped-behind): the same rule on the
    # same records leaves the same batches as on the leader.
    wait_until(lambda: disk_batches(lagging, topic_name) == compacted, 30, 0.1,
               message="broker 3's batches to equal the leader's")

    # Replication goes on from there; then broker 3 leads alone (controlled shutdowns of 1 and 2).
    more = [(f"key-{k:03d}".encode(), b"after-catch-up") for k in range(3)]
    written.produce(cluster.bootstrap, topic_name, more)
    wait_until(lambda: disk_records(lagging, topic_name)[-1][0] == written.end - 1, 10, 0.05,
               message="broker 3 to replicate the new records")
    assert leader.stop() == 0
    wait_for_leader(cluster, topic_name, 2)
    assert cluster.broker(2).stop() == 0
    wait_for_leader(cluster, topic_name, 3)
    wait_for_high_watermark(lagging.bootstrap, topic_name, written.end)
    read = read_all_confluent(lagging.bootstrap, topic_name)
    check_guarantee(read, written)
    assert read == disk_records(lagging, topic_name)
    assert watermarks(lagging.bootstrap, topic_name) == (0, written.end)
    # A consumer positioned at an offset the cleaner removed goes on at the next retained one.
    retained = [offset for offset, _, _ in read]
    following = next(offset for offset in retained if offset > behind)
    got = clients.consume_confluent(lagging.bootstrap, topic_name, 1, offset=behind)
    assert [offset for offset, *_ in got] == [following]


# --- 3. tombstones leave every replica after delete.retention.ms --------------------------------

def test_tombstones_vanish_from_every_replica(cluster: Cluster, topic_name: str) -> None:
    create_compacted(cluster, topic_name, delete_retention_ms=1000)
    written = Written()
    keys = [f"key-{k:02d}".encode() for k in range(50)]
    written.produce(cluster.bootstrap, topic_name, [(k, b"first") for k in keys])
    written.produce(cluster.bootstrap, topic_name, [(k, b"second") for k in keys[10:]])
    written.produce(cluster.bootstrap, topic_name, [(k, None) for k in keys[:10]])  # tombstones
    written.produce(cluster.bootstrap, topic_name, filler("filler-a", 150))

    set_topic_config(cluster.bootstrap, topic_name, "min.cleanable.dirty.ratio", "0.01")
    for broker in cluster.brokers:
        wait_cleaned(broker, topic_name)
    first_cleans_done = time.monotonic()
    expected = {**{k: None for k in keys[:10]}, **{k: b"second" for k in keys[10:]}}
    for broker in cluster.brokers:
        # The clean that first meets a tombstone keeps it (for delete.retention.ms from then).
        records = disk_records(broker, topic_name)
        check_guarantee(records, written)
        assert {k: v for _, k, v in records if k in expected} == expected

    # delete.retention.ms after every replica's first clean, new data makes the logs dirty again:
    # each replica's next clean drops the tombstones.
    wait_until(lambda: time.monotonic() > first_cleans_done + 1.0, 5, message="delete.retention.ms to pass")
    written.produce(cluster.bootstrap, topic_name, filler("filler-b", 150))
    for broker in cluster.brokers:
        wait_cleaned(broker, topic_name)  # up to the new active segment
        records = disk_records(broker, topic_name)
        assert not any(k in keys[:10] for _, k, _ in records), f"tombstones left on {broker.overrides['node.id']}"
        assert {k: v for _, k, v in records if k in expected} == {k: b"second" for k in keys[10:]}
    read = read_all_confluent(cluster.bootstrap, topic_name)
    assert not any(k in keys[:10] for _, k, _ in read)
    assert {k: v for _, k, v in read if k in expected} == {k: b"second" for k in keys[10:]}


# --- 4. max.compaction.lag.ms on a replica that copied cleaned tombstones ---------------------

def test_replica_with_copied_tombstones_compacts_in_time_once_leader(cluster: Cluster, topic_name: str) -> None:
    """The leader's cleaner stamps a batch it keeps tombstones in with their delete horizon
    (KIP-534: ``baseTimestamp`` = clean time + delete.retention.ms, a day by default). Broker 3,
    empty, copies that batch first into its active segment. As in Kafka, the segment's age for
    the segment.ms roll (capped by max.compaction.lag.ms) counts from the largest timestamp of its
    first batch, not from the horizon: broker 3 rolls where the leader does, and once it leads,
    a key overwritten there is compacted within max.compaction.lag.ms. Records carry CreateTimes
    a minute apart, so the time rules act at once."""
    create_compacted(cluster, topic_name, max_compaction_lag_ms=1000, min_insync_replicas=1)
    leader, empty = cluster.broker(1), cluster.broker(3)
    assert empty.stop() == 0
    wait_for_isr(cluster, topic_name, [1, 2])
    minute = 60_000
    start = int(time.time() * 1000) - 10 * minute
    written = Written()
    keys = [f"key-{k}".encode() for k in range(10)]
    written.produce(cluster.bootstrap, topic_name, [(k, b"v1") for k in keys], timestamp=start)
    written.produce(cluster.bootstrap, topic_name, [(k, None) for k in keys], timestamp=start)  # tombstones
    # A minute later by its timestamp: the leader rolls, and its first segment is due for cleaning.
    written.produce(cluster.bootstrap, topic_name, [(b"other", b"c")], timestamp=start + minute)
    wait_until(lambda: cleaner_checkpoint(leader, topic_name) == 20, 15, 0.05,
               message="the leader to clean its first segment")
    assert [b for b, *_ in disk_batches(leader, topic_name)] == [10, 20], "the tombstones' batch is not first"

    empty.start()
    wait_for_isr(cluster, topic_name, [1, 2, 3])
    wait_until(lambda: log_bases(partition_dir(empty, topic_name)) == log_bases(partition_dir(leader, topic_name)),
               10, 0.05, message="broker 3 to roll its segments where the leader did")

    assert leader.stop() == 0
    wait_for_leader(cluster, topic_name, 2)
    assert cluster.broker(2).stop() == 0
    wait_for_leader(cluster, topic_name, 3)
    wait_for_high_watermark(empty.bootstrap, topic_name, written.end)
    for minutes, pair in [(2, (b"late", b"first")), (3, (b"late", b"second")), (4, (b"last", b"roll"))]:
        written.produce(empty.bootstrap, topic_name, [pair], timestamp=start + minutes * minute)
    wait_until(lambda: [v for _, k, v in read_all_confluent(empty.bootstrap, topic_name) if k == b"late"] == [b"second"],
               15, 0.2, "broker 3 to compact the overwritten key within max.compaction.lag.ms")
    check_guarantee(read_all_confluent(empty.bootstrap, topic_name), written)
