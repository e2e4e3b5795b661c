"""The record-level producer against a fake broker: partitioning by KIP-253's counts, sticky
unkeyed records over undeleted partitions only, and re-partitioning after
INVALID_PARTITION_METADATA without reordering a key."""

from __future__ import annotations

import asyncio

import pytest

from pybroker import _native
from pybroker.client.kafka_producer import KafkaProducer, KafkaProducerConfig, KafkaTimeoutError
from pybroker.client.node import Node
from pybroker.client.producer import ProduceError
from pybroker.client.topic_layout import TopicLayout
from pybroker.common.errors import ErrorCode
from pybroker.protocol.messages import ProduceResponse

NODE = Node(1, "fake", 9092)


class FakeBroker:
    """One broker leading every partition: keeps each partition's records, checks the producer's
    UndeletedPartitionCount like the KIP-253 leader does."""

    def __init__(self, topic: str, initial: int, undeleted: int, partitions: int | None = None) -> None:
        self.topic = topic
        self.set_counts(initial, undeleted, partitions)
        self.logs: dict[int, list[tuple[bytes | None, bytes | None]]] = {}
        self.appended: list[tuple[int, bytes | None, bytes | None]] = []  # (partition, key, value) in append order
        self.requests: list[object] = []
        self.fail_next: list[int] = []  # error codes for the next requests' partitions
        self.ordered = True  # enable.ordered.delivery: check the producer's count

    def set_counts(self, initial: int, undeleted: int, partitions: int | None = None) -> None:
        count = partitions or undeleted
        self.layout = TopicLayout.from_metadata(self.topic, dict.fromkeys(range(count), NODE), initial, undeleted)

    # the Admin face
    async def topic_layouts(self, topics: list[str], auto_create: bool = False) -> dict[str, TopicLayout]:
        return {t: self.layout for t in topics}

    async def connection(self, node: Node) -> FakeBroker:
        return self

    async def reset_connection(self, node: Node) -> None:
        pass

    # the BrokerConnection face
    def version_for(self, api_key: int) -> int:
        return 9

    async def send(self, api_key: int, request: object, version: int, timeout: float = 30) -> ProduceResponse:
        self.requests.append(request)
        await asyncio.sleep(0)
        responses = []
        forced = self.fail_next.pop(0) if self.fail_next else ErrorCode.NONE
        for topic in request.topic_data:
            parts = []
            for p in topic.partition_data:
                error = forced
                if error == ErrorCode.NONE and self.ordered and topic.undeleted_partition_count not in (
                        -1, self.layout.undeleted_partition_count):
                    error = ErrorCode.INVALID_PARTITION_METADATA
                base = len(self.logs.get(p.index, []))
                if error == ErrorCode.NONE:
                    records = _native.read_records(bytes(p.records))
                    self.logs.setdefault(p.index, []).extend((k, v) for _, _, k, v in records)
                    self.appended.extend((p.index, k, v) for _, _, k, v in records)
                parts.append(ProduceResponse.PartitionProduceResponse(index=p.index, error_code=error, base_offset=base))
            responses.append(ProduceResponse.TopicProduceResponse(name=topic.name, partition_responses=parts))
        return ProduceResponse(responses=responses)


def producer(broker: FakeBroker, **props: object) -> KafkaProducer:
    return KafkaProducer({"linger.ms": 0, "retry.backoff.ms": 1, **props}, admin=broker)


def test_config_from_properties():
    config = KafkaProducerConfig.from_properties({"acks": "1", "linger.ms": 7, "batch.size": "100", "compression.type": "lz4"})
    assert (config.acks, config.linger_ms, config.batch_size, config.compression) == (1, 7, 100, 3)
    assert KafkaProducerConfig().acks == -1
    with pytest.raises(ValueError, match="acks"):
        KafkaProducerConfig.from_properties({"acks": "2"})
    with pytest.raises(ValueError, match="compression.type"):
        KafkaProducerConfig.from_properties({"compression.type": "brotli"})


def test_keyed_records_follow_linear_hashing_and_counts_are_sent():
    broker = FakeBroker("t", 3, 5)

    async def run() -> list[object]:
        async with producer(broker) as p:
            futures = [await p.send("t", b"v%d" % i, key=b"k%d" % i) for i in range(200)]
            await p.flush()
            return [f.result() for f in futures]

    results = asyncio.run(run())
    hashing = _native.LinearHashing(3, 5)
    assert [r.partition for r in results] == [hashing.partition_for_key(b"k%d" % i) for i in range(200)]
    assert {r.partition for r in results} == set(range(5))
    assert all(t.undeleted_partition_count == 5 for req in broker.requests for t in req.topic_data)
    for r in results:  # offsets are each record's place in its partition
        assert broker.logs[r.partition][r.offset][1] == b"v%d" % results.index(r)


def test_a_lingering_batch_goes_out_without_flush():
    """``await (await send(...))`` completes once linger.ms passes: a new batch wakes the sender
    to start its linger timer."""
    broker = FakeBroker("t", 3, 3)

    async def run() -> int:
        async with producer(broker, **{"linger.ms": 5}) as p:
            first = await asyncio.wait_for(await p.send("t", b"v", key=b"k"), 10)
            second = await asyncio.wait_for(await p.send("t", b"w", key=b"k"), 10)
            return second.offset - first.offset

    assert asyncio.run(run()) == 1


def test_metadata_max_age_brings_new_partitions_without_any_error():
    """On a topic without ordered delivery no leader refuses a stale count: the producer looks its
    metadata up every metadata.max.age.ms, as Kafka's does, and keys then follow the new counts."""
    broker = FakeBroker("t", 3, 3)
    broker.ordered = False

    async def run() -> list[int]:
        async with producer(broker, **{"metadata.max.age.ms": 20}) as p:
            await (await p.send("t", b"v", key=b"k0"))
            broker.set_counts(3, 6)
            deadline = asyncio.get_running_loop().time() + 10
            while (await p.partitions_for("t")).undeleted_partition_count != 6:
                assert asyncio.get_running_loop().time() < deadline, "the new partitions were never seen"
                await asyncio.sleep(0.01)
            futures = [await p.send("t", b"v", key=b"k%d" % i) for i in range(100)]
            await p.flush()
            return [f.result().partition for f in futures]

    hashing = _native.LinearHashing(3, 6)
    assert asyncio.run(run()) == [hashing.partition_for_key(b"k%d" % i) for i in range(100)]


def test_unkeyed_records_never_go_to_marked_partitions():
    broker = FakeBroker("t", 3, 3, partitions=6)  # 3..5 marked for deletion

    async def run() -> set[int]:
        async with producer(broker, **{"batch.size": 1}) as p:
            futures = [await p.send("t", b"x" * 10) for _ in range(300)]
            await p.flush()
            return {f.result().partition for f in futures}

    assert asyncio.run(run()) == {0, 1, 2}  # sticky, moving on per batch, over the undeleted ones


def test_repartition_after_invalid_partition_metadata_keeps_key_order():
    """The leader's count changes from 3 to 6 while records are queued: the rejected and the
    queued records are partitioned again with the new counts and sent in send order."""
    broker = FakeBroker("t", 3, 3)
    keys = [b"key-%d" % i for i in range(40)]

    async def run() -> list[object]:
        async with producer(broker, **{"linger.ms": 50}) as p:
            first = [await p.send("t", b"a-%d" % i, key=k) for i, k in enumerate(keys)]
            await p.flush()
            # The topic grows; the producer still has the old counts for the next records.
            broker.set_counts(3, 6)
            second = [await p.send("t", b"b-%d" % i, key=k) for i, k in enumerate(keys)]
            third = [await p.send("t", b"c-%d" % i, key=k) for i, k in enumerate(keys)]
            await p.flush()
            return [f.result() for f in first + second + third]

    results = asyncio.run(run())
    old, new = _native.LinearHashing(3, 3), _native.LinearHashing(3, 6)
    for i, key in enumerate(keys):
        assert results[i].partition == old.partition_for_key(key)
        assert results[40 + i].partition == new.partition_for_key(key)
        assert results[80 + i].partition == new.partition_for_key(key)
        # the key's records were appended in the order they were sent
        appended = [v for _, k, v in broker.appended if k == key]
        assert appended == [b"a-%d" % i, b"b-%d" % i, b"c-%d" % i]
    rejected = [t for req in broker.requests for t in req.topic_data if t.undeleted_partition_count == 3]
    assert rejected and all(t.undeleted_partition_count in (3, 6) for req in broker.requests for t in req.topic_data)


def test_rejected_batch_goes_before_later_records_of_its_key():
    """A batch rejected while later batches of other partitions were in flight: after recovery
    every key's records land in send order, including records queued behind the rejected one."""
    broker = FakeBroker("t", 2, 2)

    async def run() -> None:
        async with producer(broker, **{"batch.size": 1}) as p:
            broker.set_counts(2, 4)  # the producer still thinks (2, 2)
            futures = [await p.send("t", b"%d" % i, key=b"k%d" % (i % 7)) for i in range(70)]
            await p.flush()
            assert all(f.exception() is None for f in futures)

    asyncio.run(run())
    hashing = _native.LinearHashing(2, 4)
    for j in range(7):
        key = b"k%d" % j
        assert [v for _, k, v in broker.appended if k == key] == [b"%d" % i for i in range(j, 70, 7)]
        assert {p for p, k, _ in broker.appended if k == key} == {hashing.partition_for_key(key)}


def test_non_retriable_error_fails_the_batch_and_retriable_is_retried():
    broker = FakeBroker("t", 1, 1)

    async def run() -> None:
        async with producer(broker) as p:
            broker.fail_next = [ErrorCode.NOT_LEADER_OR_FOLLOWER]
            ok = await p.send("t", b"retried")
            assert (await ok).offset == 0
            broker.fail_next = [ErrorCode.MESSAGE_TOO_LARGE]
            bad = await p.send("t", b"too large")
            with pytest.raises(ProduceError, match="MESSAGE_TOO_LARGE"):
                await bad

    asyncio.run(run())
    assert broker.logs[0] == [(None, b"retried")]


def test_delivery_timeout():
    broker = FakeBroker("t", 1, 1)

    async def run() -> None:
        async with producer(broker, **{"delivery.timeout.ms": 30}) as p:
            broker.fail_next = [ErrorCode.NOT_LEADER_OR_FOLLOWER] * 1000
            future = await p.send("t", b"never")
            with pytest.raises(KafkaTimeoutError, match="NOT_LEADER_OR_FOLLOWER"):
                await asyncio.wait_for(future, 10)

    asyncio.run(run())


def test_explicit_partition_and_headers():
    broker = FakeBroker("t", 2, 2)

    async def run() -> None:
        async with producer(broker) as p:
            meta = await p.send_and_wait("t", b"v", key=b"k", headers=[("a", b"1"), ("b", None)], partition=1)
            assert (meta.partition, meta.offset) == (1, 0)
            with pytest.raises(ValueError, match="does not exist"):
                await p.send("t", b"v", partition=2)

    asyncio.run(run())
    batch = broker.requests[0].topic_data[0].partition_data[0].records
    decoded = _native.decode_record_batches(bytes(batch), 0, -1, True)
    assert decoded.count == 1 and decoded.header_key_data == b"ab"
