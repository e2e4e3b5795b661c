"""The project's own clients with transactions against one real broker: ``KafkaProducer`` with a
``transactional.id`` commits across two partitions and aborts another transaction; a
read_committed ``KafkaConsumer`` sees exactly the committed records (and its position moves past
the markers), a read_uncommitted one sees them all; consume-transform-produce with
``send_offsets_to_transaction`` moves the group's committed offsets only when the transaction
commits; a second producer with the same transactional id fences the first; the Spark source at
``kafka.isolation.level=read_committed`` skips the aborted records and stops before an open
transaction."""

from __future__ import annotations

import asyncio
import time

import pytest

from pybroker.client.admin import Admin
from pybroker.client.kafka_consumer import ConsumerRecord, KafkaConsumer
from pybroker.client.kafka_producer import KafkaProducer
from pybroker.client.producer import ProduceError
from pybroker.client.transaction_manager import (
    ProducerFencedError,
    TransactionError,
    TransactionState,
)
from pybroker.types import TopicPartition

try:  # the module-scoped Spark session of the Spark tests
    from tests.integration.test_spark import spark  # noqa: F401
except pytest.skip.Exception:
    @pytest.fixture(scope="module")
    def spark() -> None:
        pytest.skip("pyspark is not installed")

BROKER_OVERRIDES = {"group.initial.rebalance.delay.ms": 0}
FAST_GROUP = {"session.timeout.ms": 6000, "heartbeat.interval.ms": 300, "metadata.max.age.ms": 1000}


def values(prefix: str, partition: int, count: int = 5) -> list[bytes]:
    return [f"{prefix}-p{partition}-{i}".encode() for i in range(count)]


async def create(bootstrap: str, topic: str, partitions: int) -> None:
    async with Admin(bootstrap) as admin:
        await admin.create_topic(topic, partitions, 1)


def txn_producer(bootstrap: str, txn_id: str, **props: object) -> KafkaProducer:
    return KafkaProducer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 5, **props})


async def committed_aborted_committed(bootstrap: str, topic: str, txn_id: str) -> None:
    """c1 committed, ab aborted, c2 committed, each across partitions 0 and 1."""
    async with txn_producer(bootstrap, txn_id) as producer:
        await producer.init_transactions()
        for prefix, commit in (("c1", True), ("ab", False), ("c2", True)):
            producer.begin_transaction()
            futures = [await producer.send(topic, value, partition=p) for p in (0, 1) for value in values(prefix, p)]
            if commit:
                await producer.commit_transaction()
                assert all(f.result().offset >= 0 for f in futures)
            else:
                await producer.flush()  # written to the log, then aborted
                await producer.abort_transaction()
            assert producer.transaction_state == TransactionState.READY


async def consume_all(bootstrap: str, topic: str, group: str, expected: int, settle_s: float = 1.5,
                      **props: object) -> tuple[list[ConsumerRecord], dict[TopicPartition, int]]:
    """Poll until ``expected`` records arrived, then ``settle_s`` more (nothing else may come);
    returns the records and the final positions."""
    config = {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
              "enable.auto.commit": "false", **FAST_GROUP, **props}
    got: list[ConsumerRecord] = []
    async with KafkaConsumer(config) as consumer:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 30
        while len(got) < expected and time.monotonic() < deadline:
            got += await consumer.poll(500)
        settle = time.monotonic() + settle_s
        while time.monotonic() < settle:
            got += await consumer.poll(200)
        positions = {tp: consumer.position(tp) for tp in consumer.assignment()}
    return got, positions


def test_commit_and_abort_across_partitions(broker, topic_name):
    async def run() -> None:
        await create(broker.bootstrap, topic_name, 2)
        await committed_aborted_committed(broker.bootstrap, topic_name, f"txn-{topic_name}")
        committed, positions = await consume_all(broker.bootstrap, topic_name, f"rc-{topic_name}", 20,
                                                 **{"isolation.level": "read_committed"})
        everything, _ = await consume_all(broker.bootstrap, topic_name, f"ru-{topic_name}", 30,
                                          **{"isolation.level": "read_uncommitted"})
        for partition in (0, 1):
            mine = [r.value for r in committed if r.partition == partition]
            assert mine == values("c1", partition) + values("c2", partition)
            assert [r.value for r in everything if r.partition == partition] == (
                values("c1", partition) + values("ab", partition) + values("c2", partition))
            # 15 records and three markers per partition: the position is past the last marker.
            assert positions[TopicPartition(topic_name, partition)] == 18
        async with Admin(broker.bootstrap) as admin:
            tps = [TopicPartition(topic_name, p) for p in (0, 1)]
            assert {o.offset for o in (await admin.list_offsets(tps, "latest", 1)).values()} == {18}

    asyncio.run(run())


def test_consume_transform_produce_commits_offsets_only_with_the_transaction(broker, topic_name):
    source, sink, group = topic_name, topic_name + "-out", f"ctp-{topic_name}"
    inputs = [b"in-%d" % i for i in range(30)]

    async def committed_offsets(admin: Admin) -> dict[TopicPartition, int]:
        return {tp: c.offset for tp, c in (await admin.list_group_offsets(group)).items()}

    async def offsets_reach(admin: Admin, positions: dict[TopicPartition, int]) -> None:
        deadline = time.monotonic() + 10
        while True:
            after = await committed_offsets(admin)
            if all(after.get(tp) == offset for tp, offset in positions.items()):
                return
            assert time.monotonic() < deadline, (after, positions)
            await asyncio.sleep(0.02)

    async def run() -> None:
        await create(broker.bootstrap, source, 2)
        await create(broker.bootstrap, sink, 1)
        async with KafkaProducer({"bootstrap.servers": broker.bootstrap}) as plain:
            for i, value in enumerate(inputs):
                await plain.send(source, value, partition=i % 2)
        config = {"bootstrap.servers": broker.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                  "enable.auto.commit": "false", "isolation.level": "read_committed", **FAST_GROUP}
        async with Admin(broker.bootstrap) as admin, txn_producer(broker.bootstrap, f"txn-{group}") as producer:
            await producer.init_transactions()
            # A first application instance transforms one poll's records, then aborts.
            async with KafkaConsumer(config) as consumer:
                consumer.subscribe([source])
                records: list[ConsumerRecord] = []
                while not records:
                    records = await consumer.poll(500, max_records=7)
                producer.begin_transaction()
                for record in records:
                    await producer.send(sink, record.value.replace(b"in", b"out"))
                await producer.send_offsets_to_transaction(
                    {TopicPartition(r.topic, r.partition): r.offset + 1 for r in records}, consumer.group_metadata())
                await producer.flush()  # the output is in the log, then aborted
                await producer.abort_transaction()
                aborted_count = len(records)
            assert await committed_offsets(admin) == {}, "an abort commits no offsets"
            # The next instance starts from the committed offsets (none: the earliest) and commits.
            async with KafkaConsumer(config) as consumer:
                consumer.subscribe([source])
                done = 0
                deadline = time.monotonic() + 60
                while done < len(inputs):
                    assert time.monotonic() < deadline, f"only {done} records transformed"
                    records = await consumer.poll(500, max_records=7)
                    if not records:
                        continue
                    producer.begin_transaction()
                    for record in records:
                        await producer.send(sink, record.value.replace(b"in", b"out"))
                    positions = {TopicPartition(r.topic, r.partition): r.offset + 1 for r in records}
                    await producer.send_offsets_to_transaction(positions, consumer.group_metadata())
                    before = await committed_offsets(admin)
                    assert all(before.get(tp, 0) < offset for tp, offset in positions.items()), "not before the commit"
                    await producer.commit_transaction()
                    # The coordinator writes the markers after answering EndTxn: the offsets show then.
                    await offsets_reach(admin, positions)
                    done += len(records)
            assert await committed_offsets(admin) == {TopicPartition(source, 0): 15, TopicPartition(source, 1): 15}
        out, _ = await consume_all(broker.bootstrap, sink, f"check-{group}", len(inputs), settle_s=1.0,
                                   **{"isolation.level": "read_committed"})
        assert sorted(r.value for r in out) == sorted(v.replace(b"in", b"out") for v in inputs), "each exactly once"
        everything, _ = await consume_all(broker.bootstrap, sink, f"all-{group}", len(inputs) + aborted_count,
                                          settle_s=1.0)
        assert len(everything) == len(inputs) + aborted_count, "the aborted output is in the log, read_committed hides it"

    asyncio.run(run())


def test_a_new_producer_with_the_same_id_fences_the_old_one(broker, topic_name):
    txn_id = f"txn-{topic_name}"

    async def run() -> None:
        await create(broker.bootstrap, topic_name, 1)
        async with txn_producer(broker.bootstrap, txn_id) as zombie, txn_producer(broker.bootstrap, txn_id) as successor:
            await zombie.init_transactions()
            zombie.begin_transaction()
            await zombie.send_and_wait(topic_name, b"zombie", partition=0)
            await successor.init_transactions()  # bumps the epoch and aborts the zombie's transaction
            assert successor.producer_id_and_epoch[1] > zombie.producer_id_and_epoch[1]
            successor.begin_transaction()
            await successor.send(topic_name, b"successor", partition=0)
            await successor.commit_transaction()
            with pytest.raises(ProducerFencedError):
                await zombie.commit_transaction()
            assert zombie.transaction_state == TransactionState.FATAL_ERROR
        got, _ = await consume_all(broker.bootstrap, topic_name, f"g-{topic_name}", 1, settle_s=1.0,
                                   **{"isolation.level": "read_committed"})
        assert [r.value for r in got] == [b"successor"]

    asyncio.run(run())


def test_a_failed_record_aborts_and_bumps_the_epoch(broker, topic_name):
    """A record the leader refuses (MESSAGE_TOO_LARGE) makes the transaction abortable: commit
    raises, abort bumps the epoch (KIP-360) and the next transaction, many small batches per
    partition, commits with sequences starting again at 0."""
    async def run() -> None:
        await create(broker.bootstrap, topic_name, 2)
        async with txn_producer(broker.bootstrap, f"txn-{topic_name}", **{"batch.size": 200}) as producer:
            await producer.init_transactions()
            first_epoch = producer.producer_id_and_epoch[1]
            producer.begin_transaction()
            small = [await producer.send(topic_name, b"doomed-%d" % i, partition=i % 2) for i in range(10)]
            big = await producer.send(topic_name, b"x" * 2_000_000, partition=0)
            with pytest.raises(ProduceError, match="TOO_LARGE"):
                await big
            with pytest.raises(TransactionError) as raised:
                await producer.commit_transaction()
            assert not raised.value.fatal and producer.transaction_state == TransactionState.ABORTABLE_ERROR
            await producer.abort_transaction()
            assert all(f.done() for f in small)
            for future in small:  # failed with the large record's batch, aborted, or written and aborted
                future.exception()
            assert producer.producer_id_and_epoch[1] == first_epoch + 1
            producer.begin_transaction()
            futures = [await producer.send(topic_name, b"kept-%03d" % i, partition=i % 2) for i in range(200)]
            await producer.commit_transaction()
            assert len({(f.result().partition, f.result().offset) for f in futures}) == 200
        got, _ = await consume_all(broker.bootstrap, topic_name, f"g-{topic_name}", 200, settle_s=1.0,
                                   **{"isolation.level": "read_committed"})
        assert sorted(r.value for r in got) == [b"kept-%03d" % i for i in range(200)]

    asyncio.run(run())


def test_spark_read_committed_skips_aborted_records(spark, broker, topic_name):  # noqa: F811 (the fixture)
    async def produce() -> KafkaProducer:
        await create(broker.bootstrap, topic_name, 2)
        await committed_aborted_committed(broker.bootstrap, topic_name, f"txn-{topic_name}")
        # A transaction left open: read_committed stops before it (the last stable offset).
        producer = txn_producer(broker.bootstrap, f"open-{topic_name}")
        await producer.start()
        await producer.init_transactions()
        producer.begin_transaction()
        for value in values("open", 0, 3):
            await producer.send_and_wait(topic_name, value, partition=0)
        return producer

    loop = asyncio.new_event_loop()
    try:
        producer = loop.run_until_complete(produce())

        def read(**options: str) -> list[tuple[int, bytes]]:
            df = (spark.read.format("pybroker").option("kafka.bootstrap.servers", broker.bootstrap)
                  .option("subscribe", topic_name).options(**options).load())
            return sorted((r.partition, r.offset, r.value) for r in df.collect())

        committed = read(**{"kafka.isolation.level": "read_committed"})
        everything = read()
        loop.run_until_complete(producer.close())  # aborts the open transaction
    finally:
        loop.close()
    for partition in (0, 1):
        assert [v for p, _, v in committed if p == partition] == values("c1", partition) + values("c2", partition)
        expected = values("c1", partition) + values("ab", partition) + values("c2", partition)
        if partition == 0:
            expected += values("open", 0, 3)
        assert [v for p, _, v in everything if p == partition] == expected
    assert [o for p, o, _ in committed if p == 0] == [0, 1, 2, 3, 4, 12, 13, 14, 15, 16]
