"""The project's own clients against one real broker: ``KafkaProducer`` → ``KafkaConsumer``
round trips with keys, a group of consumers sharing partitions through a rebalance, the console
tools piped together, confluent-kafka reading and writing alongside them, and aiokafka and
confluent-kafka producing and consuming without errors while a topic grows and shrinks."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time
from typing import Any

from confluent_kafka import Consumer, Producer

from pybroker import _native
from pybroker.client.admin import Admin
from pybroker.client.kafka_consumer import ConsumerRebalanceListener, KafkaConsumer
from pybroker.client.kafka_producer import KafkaProducer
from pybroker.types import TopicPartition
from tests.conftest import REPO, wait_until

BROKER_OVERRIDES = {"group.initial.rebalance.delay.ms": 0}
FAST_GROUP = {"session.timeout.ms": 6000, "heartbeat.interval.ms": 300, "metadata.max.age.ms": 1000}


async def create(bootstrap: str, topic: str, partitions: int) -> None:
    async with Admin(bootstrap) as admin:
        await admin.create_topic(topic, partitions, 1)


async def produce(bootstrap: str, topic: str, pairs: list[tuple[bytes | None, bytes]], **props: object) -> list[object]:
    async with KafkaProducer({"bootstrap.servers": bootstrap, **props}) as producer:
        futures = [await producer.send(topic, value, key=key) for key, value in pairs]
        await producer.flush()
    return [f.result() for f in futures]


def consumer_config(bootstrap: str, group: str, **props: object) -> dict[str, object]:
    return {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest", **FAST_GROUP, **props}


def test_keyed_round_trip(broker, topic_name):
    pairs = [(b"key-%d" % (i % 13), b"value-%d" % i) for i in range(600)]

    async def run() -> tuple[list[object], list[object]]:
        await create(broker.bootstrap, topic_name, 4)
        written = await produce(broker.bootstrap, topic_name, pairs, **{"linger.ms": 2, "compression.type": "lz4"})
        got = []
        async with KafkaConsumer(consumer_config(broker.bootstrap, topic_name)) as consumer:
            consumer.subscribe([topic_name])
            deadline = time.monotonic() + 30
            while len(got) < len(pairs) and time.monotonic() < deadline:
                got += await consumer.poll(500)
        return written, got

    written, got = asyncio.run(run())
    hashing = _native.LinearHashing(4, 4)
    assert [m.partition for m in written] == [hashing.partition_for_key(k) for k, _ in pairs]
    assert len(got) == len(pairs)
    for key in {k for k, _ in pairs}:  # every key in one partition, in the order produced
        mine = [r for r in got if r.key == key]
        assert len({r.partition for r in mine}) == 1
        assert [r.value for r in mine] == [v for k, v in pairs if k == key]
    by_offset = {(m.partition, m.offset): pairs[i][1] for i, m in enumerate(written)}
    assert all(by_offset[(r.partition, r.offset)] == r.value for r in got)


class Recorder(ConsumerRebalanceListener):
    def __init__(self) -> None:
        self.assigned: list[list[TopicPartition]] = []

    def on_partitions_assigned(self, partitions: list[TopicPartition]) -> None:
        self.assigned.append(partitions)


def test_group_shares_partitions_and_rebalances_when_a_member_leaves(broker, topic_name):
    """Three members split six partitions; one closes midway; every record is delivered once
    (manual commits after each poll), and the survivors end up owning every partition."""
    total = 1800

    async def run() -> tuple[list[object], list[Recorder]]:
        await create(broker.bootstrap, topic_name, 6)
        await produce(broker.bootstrap, topic_name, [(b"k%d" % (i % 50), b"%d" % i) for i in range(total // 2)])
        got: list[object] = []
        recorders = [Recorder() for _ in range(3)]
        config = consumer_config(broker.bootstrap, topic_name, **{"enable.auto.commit": "false", "max.poll.records": 50})
        consumers = [KafkaConsumer(config) for _ in range(3)]
        for consumer, recorder in zip(consumers, recorders, strict=True):
            await consumer.start()
            consumer.subscribe([topic_name], rebalance_listener=recorder)
        stop = asyncio.Event()

        async def member(consumer: KafkaConsumer, leave_after: int | None) -> None:
            seen = 0
            while not stop.is_set():
                records = await consumer.poll(200)
                if records:
                    got.extend(records)
                    await consumer.commit()
                    seen += len(records)
                if leave_after is not None and seen >= leave_after:
                    await consumer.close()
                    return

        tasks = [asyncio.ensure_future(member(c, 100 if i == 0 else None)) for i, c in enumerate(consumers)]
        await tasks[0]
        await produce(broker.bootstrap, topic_name, [(b"k%d" % (i % 50), b"%d" % i) for i in range(total // 2, total)])
        deadline = time.monotonic() + 60
        while len(got) < total and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        stop.set()
        await asyncio.gather(*tasks)
        for consumer in consumers[1:]:
            await consumer.close()
        return got, recorders

    got, recorders = asyncio.run(run())
    values = sorted(int(r.value) for r in got)
    assert values == list(range(total)), f"{len(values)} delivered, {len(set(values))} distinct"
    assert all(any(len(a) == 2 for a in r.assigned) for r in recorders)  # 6 partitions over 3 members
    final = [set(r.assigned[-1]) for r in recorders[1:]]
    assert final[0] | final[1] == {TopicPartition(got[0].topic, p) for p in range(6)} and not final[0] & final[1]


def test_console_producer_to_console_consumer(broker, topic_name):
    asyncio.run(create(broker.bootstrap, topic_name, 3))
    lines = "".join(f"user-{i % 5}:event-{i}\n" for i in range(40))
    produced = subprocess.run(
        [sys.executable, "-m", "pybroker", "console-producer", "--bootstrap-server", broker.bootstrap,
         "--topic", topic_name, "--property", "parse.key=true", "--property", "key.separator=:"],
        input=lines, cwd=REPO, capture_output=True, text=True, timeout=60)
    assert produced.returncode == 0, produced.stderr

    def consume(*extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "pybroker", "console-consumer", "--bootstrap-server", broker.bootstrap,
             "--topic", topic_name, "--group", f"{topic_name}-g", *extra],
            cwd=REPO, capture_output=True, text=True, timeout=60)

    first = consume("--from-beginning", "--property", "print.key=true", "--property", "print.partition=true",
                    "--property", "print.offset=true", "--max-messages", "25")
    assert first.returncode == 0, first.stderr
    assert "Processed a total of 25 messages" in first.stderr
    rows = [line.split("\t") for line in first.stdout.splitlines()]
    assert len(rows) == 25 and all(len(r) == 4 for r in rows)
    hashing = _native.LinearHashing(3, 3)
    for partition, offset, key, value in rows:
        assert partition == f"Partition:{hashing.partition_for_key(key.encode())}" and offset.startswith("Offset:")
        assert value.startswith("event-")
    # The same group goes on where the first run stopped: every line exactly once overall.
    rest = consume("--timeout-ms", "3000")
    assert rest.returncode == 0, rest.stderr
    values = [r[3] for r in rows] + rest.stdout.splitlines()
    assert sorted(values) == sorted(f"event-{i}" for i in range(40))
    for user in range(5):  # per key in production order
        mine = [int(v.split("-")[1]) for v in values if int(v.split("-")[1]) % 5 == user]
        assert sorted(mine) == [i for i in range(40) if i % 5 == user]
    assert "Processed a total of 15 messages" in rest.stderr


def test_confluent_reads_ours_and_we_read_confluents(broker, topic_name):
    """Keys land where Kafka's murmur2 partitioner puts them (librdkafka's murmur2_random), so a
    real client's keyed records and ours share partitions; each side reads the other's."""
    asyncio.run(create(broker.bootstrap, topic_name, 5))
    ours = [(b"key-%d" % i, b"ours-%d" % i) for i in range(100)]
    written = asyncio.run(produce(broker.bootstrap, topic_name, ours))

    delivered: list[tuple[bytes, int]] = []
    producer = Producer({"bootstrap.servers": broker.bootstrap, "partitioner": "murmur2_random"})
    for i in range(100):
        producer.produce(topic_name, value=b"theirs-%d" % i, key=b"key-%d" % i,
                         on_delivery=lambda err, msg: delivered.append((msg.key(), msg.partition())) if not err else None)
    assert producer.flush(30) == 0
    assert dict(delivered) == {k: m.partition for (k, _), m in zip(ours, written, strict=True)}

    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"{topic_name}-confluent",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic_name])
    seen: list[tuple[bytes, bytes, int]] = []
    deadline = time.monotonic() + 30
    try:
        while len(seen) < 200 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                seen.append((message.key(), message.value(), message.partition()))
    finally:
        consumer.close()
    assert sorted(v for _, v, _ in seen if v.startswith(b"ours")) == sorted(v for _, v in ours)

    async def read_back() -> list[object]:
        got: list[object] = []
        async with KafkaConsumer(consumer_config(broker.bootstrap, f"{topic_name}-ours")) as mine:
            mine.subscribe([topic_name])
            deadline = time.monotonic() + 30
            while len(got) < 200 and time.monotonic() < deadline:
                got += await mine.poll(500)
        return got

    got = asyncio.run(read_back())
    theirs = [r for r in got if r.value.startswith(b"theirs")]
    assert sorted(r.value for r in theirs) == sorted(b"theirs-%d" % i for i in range(100))
    for r in theirs:
        assert r.partition == dict(delivered)[r.key]


# --- gating end to end ---------------------------------------------------------------------------

class KeyEvents:
    """Both listeners of one member, writing into a log shared by the group."""

    def __init__(self, name: str, events: list[tuple[str, str, list[int]]]) -> None:
        self.name, self.events = name, events

    def on_partition_key_maybe_revoked(self, partitions: list[TopicPartition]) -> None:
        self.events.append((self.name, "maybe_revoked", [tp.partition for tp in partitions]))

    def on_partition_key_assigned(self, partitions: list[TopicPartition]) -> None:
        self.events.append((self.name, "assigned", [tp.partition for tp in partitions]))


def test_expansion_under_load_keeps_each_keys_order_across_the_group(broker, topic_name):
    """3 → 6 partitions while our producer writes keyed records and two gated members read
    slowly: every key's records are delivered by the group in the order they were produced,
    although a key's newer records land in a partition another member reads."""
    keys = [b"key-%d" % i for i in range(12)]
    events: list[tuple[str, str, list[int]]] = []

    async def run() -> list[tuple[str, object]]:
        await create(broker.bootstrap, topic_name, 3)
        delivered: list[tuple[str, object]] = []
        sequence = {key: 0 for key in keys}

        async def produce_round(producer: KafkaProducer, rounds: int) -> None:
            for _ in range(rounds):
                for key in keys:
                    await producer.send(topic_name, b"%d" % sequence[key], key=key)
                    sequence[key] += 1
            await producer.flush()

        config = consumer_config(broker.bootstrap, topic_name, **{"max.poll.records": 5})
        members = [KafkaConsumer(config) for _ in range(2)]
        stop = asyncio.Event()

        async def member(name: str, consumer: KafkaConsumer) -> None:
            await consumer.start()
            consumer.subscribe([topic_name], partition_key_listener=KeyEvents(name, events))
            while not stop.is_set():
                for record in await consumer.poll(100):
                    delivered.append((name, record))
                await asyncio.sleep(0.05)  # a slow application: a backlog builds up
            await consumer.close()

        async with KafkaProducer({"bootstrap.servers": broker.bootstrap, "linger.ms": 1}) as producer:
            await produce_round(producer, 40)
            tasks = [asyncio.ensure_future(member(f"m{i}", c)) for i, c in enumerate(members)]
            await asyncio.sleep(0.3)
            async with Admin(broker.bootstrap) as admin:
                await admin.create_partitions(topic_name, 6)
            await produce_round(producer, 40)
            layout = await producer.partitions_for(topic_name)
            assert layout.counts == (3, 6, 6)
        total = sum(sequence.values())
        deadline = time.monotonic() + 90
        while len(delivered) < total and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        stop.set()
        await asyncio.gather(*tasks)
        return delivered

    delivered = asyncio.run(run())
    records = [r for _, r in delivered]
    per_key: dict[bytes, list[int]] = {}
    for record in records:
        per_key.setdefault(record.key, []).append(int(record.value))
    assert {k: len(v) for k, v in per_key.items()} == dict.fromkeys(keys, 80), "every record once"
    for key, values in per_key.items():
        trail = [(name, r.partition, r.offset, int(r.value)) for name, r in delivered if r.key == key]
        assert values == list(range(80)), f"{key!r} delivered out of order: {trail}"
    assert {r.partition for r in records if r.partition >= 3} <= {3, 4, 5}
    moved = [k for k in keys if len({r.partition for r in records if r.key == k}) == 2]
    assert moved, "some keys moved to the new partitions"
    assert any(kind == "assigned" and set(ps) & {3, 4, 5} for _, kind, ps in events), events


# --- real clients on a topic that grows and shrinks -----------------------------------------------

REAL_CLIENT_METADATA_MS = 500  # how often the real clients refresh metadata on their own


class AioClients:
    """aiokafka's producer and group consumer on an event loop in a thread of their own, so that
    the consumer keeps fetching and heartbeating while the test waits in its own thread."""

    def __init__(self, bootstrap: str, topic: str, group: str) -> None:
        self.bootstrap, self.topic, self.group = bootstrap, topic, group
        self.values: set[bytes] = set()
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.call(self._start())

    def call(self, coro: Any, timeout: float = 30) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    async def _start(self) -> None:
        from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

        self.producer = AIOKafkaProducer(bootstrap_servers=self.bootstrap, metadata_max_age_ms=REAL_CLIENT_METADATA_MS)
        # No auto commit: before rejoining after the removal, aiokafka would commit its positions
        # of the removed partitions, get UNKNOWN_TOPIC_OR_PARTITION (retriable) and retry forever
        # (aio-libs/aiokafka#1095: the same happens with a topic deleted from Kafka).
        self.consumer = AIOKafkaConsumer(
            bootstrap_servers=self.bootstrap, group_id=self.group, auto_offset_reset="earliest",
            enable_auto_commit=False, metadata_max_age_ms=REAL_CLIENT_METADATA_MS, session_timeout_ms=6000,
            heartbeat_interval_ms=300)
        await self.producer.start()
        await self.consumer.start()
        self.consumer.subscribe([self.topic])
        self.reader = asyncio.ensure_future(self._read())

    async def _read(self) -> None:
        while True:
            for messages in (await self.consumer.getmany(timeout_ms=200)).values():
                self.values.update(m.value for m in messages)

    def read(self) -> set[bytes]:
        """The values the group delivered so far; raises what stopped the consumer, if anything."""
        if self.reader.done():
            self.reader.result()
        return self.values

    def produce(self, records: list[tuple[bytes, bytes, int | None]]) -> list[int]:
        """(key, value, partition or None for the client's partitioner) each; waits for every
        acknowledgement (an error raises) and returns the partitions written."""
        async def send() -> list[int]:
            futures = [await self.producer.send(self.topic, value=v, key=k, partition=p) for k, v, p in records]
            return [m.partition for m in await asyncio.gather(*futures)]
        return self.call(send())

    def partition_count(self) -> int:
        """The count the producer partitions by, after a metadata refresh."""
        async def count() -> int:
            await self.producer.client.force_metadata_update()
            return len(self.producer.client.cluster.partitions_for_topic(self.topic) or ())
        return self.call(count())

    def close(self) -> None:
        async def stop() -> None:
            self.reader.cancel()
            await self.consumer.stop()
            await self.producer.stop()
        try:
            self.call(stop())
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(10)
            self.loop.close()


class ConfluentClients:
    """confluent-kafka's producer, and its group consumer polling in a thread of its own."""

    def __init__(self, bootstrap: str, topic: str, group: str) -> None:
        self.topic = topic
        self.values: set[bytes] = set()
        self.consumer_errors: list[object] = []
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5,
                                  "topic.metadata.refresh.interval.ms": REAL_CLIENT_METADATA_MS})
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                                  "topic.metadata.refresh.interval.ms": REAL_CLIENT_METADATA_MS,
                                  "session.timeout.ms": 6000, "heartbeat.interval.ms": 300})
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        self.consumer.subscribe([self.topic])
        try:
            while not self.stopping.is_set():
                message = self.consumer.poll(0.2)
                if message is None:
                    continue
                if message.error() is not None:
                    self.consumer_errors.append(message.error())
                else:
                    self.values.add(message.value())
        finally:
            self.consumer.close()

    def read(self) -> set[bytes]:
        return self.values

    def produce(self, records: list[tuple[bytes, bytes, int | None]]) -> list[int]:
        """As `AioClients.produce`: fails unless every delivery report is a success."""
        reports: list[tuple[object, int]] = []
        for key, value, partition in records:
            extra = {} if partition is None else {"partition": partition}
            self.producer.produce(self.topic, value=value, key=key,
                                  on_delivery=lambda err, msg: reports.append((err, msg.partition())), **extra)
            self.producer.poll(0)
        assert self.producer.flush(30) == 0, "confluent records left unacknowledged"
        errors = [err for err, _ in reports if err is not None]
        assert not errors and len(reports) == len(records), f"confluent delivery errors: {errors}"
        return [p for _, p in reports]

    def partition_count(self) -> int:
        """The count in a fresh Metadata answer (librdkafka adopts it only when it grew)."""
        return len(self.producer.list_topics(self.topic, timeout=5).topics[self.topic].partitions)

    def close(self) -> None:
        self.stopping.set()
        self.thread.join(15)


def test_real_clients_keep_producing_and_consuming_while_the_topic_grows_and_shrinks(broker, topic_name):
    """aiokafka and confluent-kafka, each with a producer and a group consumer (one group per
    client), keep working on a topic that goes 3 → 6 → 4 partitions, the shrink drained by
    DeleteRecords, with the same clients throughout.

    Asserted: every record either producer sends is acknowledged without error, in every phase;
    once the expansion shows in a producer's metadata, its keyed records reach the new partitions;
    each group delivers every record both producers wrote (the marked partitions' records
    included, read before DeleteRecords drains them), and the confluent consumer reports no error.

    Not asserted: any per-key order (these clients partition by ``murmur2 % count`` or CRC32 and
    do not wait at the gates, see docs/ordered-partition-changes.md), nor exactly-once delivery (a
    record delivered twice around a rebalance counts once). Where a real producer's own
    partitioner would pick a partition that does not take records, the test names the partitions
    instead, so that no record waits on retries and the outcome does not depend on timing:
    - while 4 and 5 are marked for deletion, both producers write to 0..3 explicitly (their
      partitioners still count 6 partitions, and a marked partition refuses records with
      NOT_LEADER_OR_FOLLOWER until delivery times out);
    - after the removal, aiokafka partitions its keyed records over the 4 partitions again, but
      confluent-kafka writes to 0..3 explicitly: librdkafka adopts a partition count from
      Metadata only when it grew, so its partitioner keeps mapping keys to the removed 4 and 5.
    """
    asyncio.run(create(broker.bootstrap, topic_name, 3))
    aio = AioClients(broker.bootstrap, topic_name, f"{topic_name}-aiokafka")
    confluent = ConfluentClients(broker.bootstrap, topic_name, f"{topic_name}-confluent")
    clients = {"aiokafka": aio, "confluent": confluent}
    produced: set[bytes] = set()
    keys = [b"key-%d" % i for i in range(24)]

    def produce_both(phase: str, explicit: dict[str, list[int]] | None = None) -> dict[str, list[int]]:
        """One record per key from each client, to the partitions its partitioner picks or, for
        a client in ``explicit``, cycling through the partitions given; the partitions written."""
        written = {}
        for name, client in clients.items():
            partitions = (explicit or {}).get(name)
            records = [(key, b"%s-%s-%d" % (name.encode(), phase.encode(), i),
                        None if partitions is None else partitions[i % len(partitions)])
                       for i, key in enumerate(keys)]
            written[name] = client.produce(records)
            produced.update(value for _, value, _ in records)
        return written

    def wait_until_both_groups_read_everything() -> None:
        for name, client in clients.items():
            wait_until(lambda client=client: client.read() >= produced, 30,
                       message=f"the {name} group to deliver all {len(produced)} records")

    def wait_until_both_producers_see(count: int) -> None:
        for name, client in clients.items():
            wait_until(lambda client=client: client.partition_count() == count, 15,
                       message=f"the {name} producer's metadata to list {count} partitions")

    async def change_partition_count(total: int) -> None:
        async with Admin(broker.bootstrap) as admin:
            await admin.create_partitions(topic_name, total)

    async def drain_and_wait_for_removal() -> None:
        async with Admin(broker.bootstrap) as admin:
            await admin.delete_records({TopicPartition(topic_name, p): -1 for p in (4, 5)})
            deadline = time.monotonic() + 15
            while len((await admin.describe_topics([topic_name]))[0].partitions) != 4:
                assert time.monotonic() < deadline, "the drained partitions 4 and 5 were not removed"
                await asyncio.sleep(0.1)

    below_4 = {"aiokafka": [0, 1, 2, 3], "confluent": [0, 1, 2, 3]}
    try:
        assert all(max(ps) < 3 for ps in produce_both("three").values())

        asyncio.run(change_partition_count(6))
        wait_until_both_producers_see(6)
        written = produce_both("six")
        assert all(max(ps) >= 3 for ps in written.values()), written

        asyncio.run(change_partition_count(4))  # 4 and 5 marked, still listed (and read) until removed
        produce_both("marked", explicit=below_4)
        wait_until_both_groups_read_everything()  # before DeleteRecords drops what 4 and 5 hold

        asyncio.run(drain_and_wait_for_removal())
        wait_until_both_producers_see(4)
        written = produce_both("four", explicit={"confluent": below_4["confluent"]})
        assert all(max(ps) < 4 for ps in written.values()), written
        wait_until_both_groups_read_everything()
    finally:
        confluent.close()
        aio.close()
    assert aio.values == confluent.values == produced
    assert confluent.consumer_errors == []
