"""KIP-253's promise, end to end: per-key order holds while a topic grows and shrinks under load.

Keyed records are produced continuously by the project's producer while the topic goes 3 → 4 →
6 → 12 and then shrinks 12 → 5 (the deleted partitions drained by DeleteRecords once consumed),
and a group of the project's consumers, which join and leave during the run, delivers them. One
consumer is slow, so that partitions are delivered at different paces, which is exactly when
order can break. For every key the records must be delivered in the order they were produced,
with none missing: zero violations. The same run with plain Kafka partitioning (a confluent-kafka
producer, ``murmur2 % partitions``, on a topic without ordered delivery) shows violations, so the
check can fail.
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass, field

import pytest
from confluent_kafka import Producer

from pybroker.client.admin import Admin
from pybroker.client.kafka_consumer import KafkaConsumer
from pybroker.client.kafka_producer import KafkaProducer
from pybroker.types import TopicPartition

KEYS = 40
RATE = 200  # records per second, over all keys
GROWTH = (4, 6, 12)
SHRINK_TO = 5
STEP_S = 2.0
SLOW_POLL_PAUSE_S = 0.4  # the slow consumer pauses this long after each poll of at most 40 records


@dataclass
class Delivery:
    """Every record delivered by the group, in delivery order: (consumer, key, sequence)."""

    order: list[tuple[int, int, int]] = field(default_factory=list)

    def violations(self) -> list[str]:
        """Keys whose first deliveries are not in production order (a duplicate is a record
        delivered again: it is counted apart)."""
        last: dict[int, int] = {}
        out = []
        for consumer, key, seq in self.order:
            previous = last.get(key, -1)
            if seq <= previous:
                continue  # delivered again (a rebalance re-delivers from the committed offset)
            if seq != previous + 1:
                out.append(f"key {key}: consumer {consumer} delivered #{seq} after #{previous}")
            last[key] = seq
        return out

    def delivered(self) -> dict[int, set[int]]:
        out: dict[int, set[int]] = {}
        for _, key, seq in self.order:
            out.setdefault(key, set()).add(seq)
        return out


class KafkaPartitioningProducer:
    """The control: a confluent-kafka producer (Kafka's partitioner), behind the same calls."""

    def __init__(self, bootstrap: str) -> None:
        self._producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "topic.metadata.refresh.interval.ms": 500})
        self._stop = threading.Event()
        self._poller = threading.Thread(target=self._poll, daemon=True)
        self._poller.start()

    def _poll(self) -> None:
        while not self._stop.is_set():
            self._producer.poll(0.05)

    async def send(self, topic: str, value: bytes, key: bytes) -> None:
        self._producer.produce(topic, value, key)

    async def close(self) -> None:
        await asyncio.get_running_loop().run_in_executor(None, self._producer.flush, 30)
        self._stop.set()
        self._poller.join()


async def run_changes(bootstrap: str, topic: str, ordered: bool) -> Delivery:
    """The scenario; returns what the group delivered."""
    delivery = Delivery()
    produced: dict[int, int] = {}
    stop_producing = asyncio.Event()
    async with Admin(bootstrap) as admin:
        await admin.create_topic(topic, 3, -1, {"enable.ordered.delivery": "true" if ordered else "false"})
        if ordered:
            producer = KafkaProducer({"bootstrap.servers": bootstrap, "linger.ms": 5})
            await producer.start()
        else:
            producer = KafkaPartitioningProducer(bootstrap)

        async def produce() -> None:
            seq = 0
            while not stop_producing.is_set():
                for key in range(KEYS):
                    await producer.send(topic, f"{key}:{seq}".encode(), key=f"key-{key}".encode())
                    produced[key] = seq + 1
                seq += 1
                await asyncio.sleep(KEYS / RATE)

        consumers: dict[int, asyncio.Task[None]] = {}
        leaving: dict[int, asyncio.Event] = {}

        async def consume(number: int, slow: bool) -> None:
            config = {"bootstrap.servers": bootstrap, "group.id": f"g-{topic}", "auto.offset.reset": "earliest",
                      "client.id": f"consumer-{number}", "heartbeat.interval.ms": 500, "session.timeout.ms": 10000,
                      "auto.commit.interval.ms": 500, "metadata.max.age.ms": 500,
                      "max.poll.records": 40 if slow else 500}
            async with KafkaConsumer(config) as consumer:
                consumer.subscribe([topic])
                while not leaving[number].is_set():
                    for record in await consumer.poll(100):
                        key, seq = (int(x) for x in record.value.decode().split(":"))
                        delivery.order.append((number, key, seq))
                    if slow:
                        await asyncio.sleep(SLOW_POLL_PAUSE_S)

        def start_consumer(number: int, slow: bool = False) -> None:
            leaving[number] = asyncio.Event()
            consumers[number] = asyncio.ensure_future(consume(number, slow))

        async def stop_consumer(number: int) -> None:
            leaving[number].set()
            await consumers.pop(number)

        producing = asyncio.ensure_future(produce())
        start_consumer(0, slow=True)
        start_consumer(1)
        try:
            for step, count in enumerate(GROWTH):
                await asyncio.sleep(STEP_S)
                await admin.create_partitions(topic, count)
                if step == 0:
                    start_consumer(2)  # joins during the run
                if step == 1:
                    await stop_consumer(1)  # leaves during the run
                    start_consumer(3)
            await asyncio.sleep(STEP_S)
            if ordered:
                await admin.create_partitions(topic, SHRINK_TO)
            await asyncio.sleep(STEP_S)
            stop_producing.set()
            await producing
            await producer.close()

            total = sum(produced.values())

            async def everything_delivered() -> bool:
                return sum(len(s) for s in delivery.delivered().values()) >= total
            await wait_for(everything_delivered, 90, lambda: f"{sum(len(s) for s in delivery.delivered().values())} "
                                                           f"of {total} records delivered")
            if ordered:  # drain the partitions marked for deletion: consumed, so their records may go
                marked = [TopicPartition(topic, p) for p in range(SHRINK_TO, GROWTH[-1])]
                await admin.delete_records(dict.fromkeys(marked, -1))

                async def removed() -> bool:
                    [described] = await admin.describe_topics([topic])
                    return len(described.partitions) == SHRINK_TO
                await wait_for(removed, 30, lambda: "the drained partitions were not removed")
        finally:
            stop_producing.set()
            for number in list(consumers):
                await stop_consumer(number)
            if not producing.done():
                producing.cancel()
    assert {key: len(seqs) for key, seqs in delivery.delivered().items()} == produced, "records are missing"
    return delivery


async def wait_for(condition, timeout: float, describe) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not await condition():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(describe())
        await asyncio.sleep(0.2)


@pytest.mark.timeout(240)
def test_keys_stay_in_order_on_a_single_broker(broker, topic_name):
    delivery = asyncio.run(run_changes(broker.bootstrap, topic_name, ordered=True))
    assert delivery.violations() == []


def test_kafka_partitioning_breaks_key_order(broker, topic_name):
    """The control run: the check above can fail."""
    delivery = asyncio.run(run_changes(broker.bootstrap, topic_name, ordered=False))
    assert len(delivery.violations()) > 0


def test_keys_stay_in_order_on_a_three_broker_cluster(zookeeper, tmp_path, request, topic_name):
    from tests.integration.cluster import start_cluster
    from tests.zookeeper import chroot_for

    cluster = start_cluster(chroot_for(zookeeper, request.node.name), tmp_path,
                            **{"partition.deletion.check.interval.ms": 200, "default.replication.factor": 3})
    try:
        delivery = asyncio.run(run_changes(cluster.bootstrap, topic_name, ordered=True))
        assert delivery.violations() == []
    finally:
        cluster.kill()
