"""The project's own clients against one real broker: ``KafkaProducer`` → ``KafkaConsumer``
round trips with keys, a group of consumers sharing partitions through a rebalance, the console
tools piped together, and confluent-kafka reading and writing alongside them."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time

from confluent_kafka import Consumer, Producer

from pybroker import _native
from pybroker.client.admin import Admin
from pybroker.client.kafka_consumer import ConsumerRebalanceListener, KafkaConsumer
from pybroker.client.kafka_producer import KafkaProducer
from pybroker.types import TopicPartition
from tests.conftest import REPO

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
