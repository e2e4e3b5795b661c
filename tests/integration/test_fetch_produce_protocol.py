"""Produce and Fetch at the protocol level: acks, long polls, byte limits, offsets out of range."""

from __future__ import annotations

import asyncio
import time

from pybroker.common.errors import ErrorCode
from pybroker.protocol import codec
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages import (
    FetchRequest,
    InitProducerIdRequest,
    MetadataRequest,
    ProduceRequest,
)
from tests.conftest import auto_create, broker_connection
from tests.unit.batches import build_batch


def run(coro):
    return asyncio.run(coro)


connect = broker_connection


create = auto_create


def produce_request(topic: str, batch: bytes, acks: int = 1) -> ProduceRequest:
    return ProduceRequest(acks=acks, timeout_ms=5000, topic_data=[ProduceRequest.TopicProduceData(
        name=topic, partition_data=[ProduceRequest.PartitionProduceData(index=0, records=batch)])])


def fetch_request(topic: str, offset: int, max_wait_ms: int = 0, min_bytes: int = 1,
                  partition_max_bytes: int = 1 << 20, isolation_level: int = 0) -> FetchRequest:
    return FetchRequest(
        replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=50 << 20,
        isolation_level=isolation_level, session_id=0, session_epoch=-1,
        topics=[FetchRequest.FetchTopic(topic=topic, partitions=[FetchRequest.FetchPartition(
            partition=0, current_leader_epoch=-1, fetch_offset=offset, log_start_offset=-1,
            partition_max_bytes=partition_max_bytes)])],
        forgotten_topics_data=[], rack_id="",
    )


def partition_of(response):
    return response.responses[0].partitions[0]


async def parked_fetch(bootstrap: str, topic: str, max_wait_ms: int) -> tuple[asyncio.StreamWriter, asyncio.Future]:
    """Send a long-poll fetch that the broker has certainly received and parked when this returns.

    One write carries Metadata (correlation id 1) and then the Fetch (id 2): the broker handles the
    frames of one read in order and flushes at the end of that read, so the Metadata reply (which
    no pipelined reply precedes) arrives only after the Fetch was dispatched. Returns the writer
    and a future of (Fetch response, seconds from sending to its arrival).
    """
    host, port = bootstrap.split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    metadata = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=topic)], allow_auto_topic_creation=False)
    sent = time.monotonic()
    writer.write(codec.encode_request(ApiKey.METADATA, 4, 1, "t", metadata)
                 + codec.encode_request(ApiKey.FETCH, 11, 2, "t", fetch_request(topic, 0, max_wait_ms=max_wait_ms)))
    assert (await read_frame(reader))[0] == 1

    async def fetched() -> tuple[object, float]:
        correlation_id, frame = await read_frame(reader)
        assert correlation_id == 2
        return codec.decode_response(ApiKey.FETCH, 11, memoryview(frame))[1], time.monotonic() - sent

    return writer, asyncio.ensure_future(fetched())


async def read_frame(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    size = int.from_bytes(await reader.readexactly(4), "big")
    frame = await reader.readexactly(size)
    return int.from_bytes(frame[:4], "big"), frame


def test_long_poll_wakes_when_a_record_arrives(broker, topic_name):
    async def scenario():
        producer = await connect(broker.bootstrap)
        await create(producer, topic_name)
        writer, waiting = await parked_fetch(broker.bootstrap, topic_name, max_wait_ms=30000)
        response = await producer.send(ApiKey.PRODUCE, produce_request(topic_name, build_batch([(b"k", b"v")])))
        assert response.responses[0].partition_responses[0].error_code == 0
        fetched, elapsed = await waiting
        writer.close()
        await producer.close()
        return partition_of(fetched), elapsed

    fetched, elapsed = run(scenario())
    # The fetch was parked before the produce, so it holds the record only because the append woke
    # it; without long polling it would have answered at once, empty.
    assert fetched.error_code == 0 and fetched.high_watermark == 1
    assert bytes(fetched.records).endswith(b"k\x02v\x00")
    assert elapsed < 15, "the fetch waited for its max_wait instead of waking on the append"


def test_long_poll_returns_empty_at_max_wait(broker, topic_name):
    async def scenario():
        connection = await connect(broker.bootstrap)
        await create(connection, topic_name)
        writer, waiting = await parked_fetch(broker.bootstrap, topic_name, max_wait_ms=400)
        fetched, elapsed = await waiting
        writer.close()
        await connection.close()
        return partition_of(fetched), elapsed

    fetched, elapsed = run(scenario())
    assert fetched.error_code == 0 and not fetched.records and fetched.high_watermark == 0
    # It waited its max_wait_ms (a lower bound holds however loaded the machine is).
    assert elapsed >= 0.4, f"answered after {elapsed:.3f}s, before max_wait_ms"


def test_partition_max_bytes_returns_whole_batches_and_at_least_one(broker, topic_name):
    async def scenario():
        connection = await connect(broker.bootstrap)
        await create(connection, topic_name)
        batches = [build_batch([(None, bytes([i]) * 1000)]) for i in range(5)]
        for batch in batches:
            await connection.send(ApiKey.PRODUCE, produce_request(topic_name, batch))
        small = partition_of(await connection.send(ApiKey.FETCH, fetch_request(topic_name, 0, partition_max_bytes=10)))
        two = partition_of(await connection.send(ApiKey.FETCH, fetch_request(topic_name, 0, partition_max_bytes=2 * len(batches[0]) + 5)))
        middle = partition_of(await connection.send(ApiKey.FETCH, fetch_request(topic_name, 3)))
        await connection.close()
        return batches, small, two, middle

    batches, small, two, middle = run(scenario())
    assert len(small.records) == len(batches[0])  # KIP-74: one batch even over the limit
    assert len(two.records) == 2 * len(batches[0])
    assert len(middle.records) == 2 * len(batches[0])
    assert int.from_bytes(bytes(middle.records[:8]), "big") == 3


def test_offset_out_of_range_and_unknown_partition(broker, topic_name):
    async def scenario():
        connection = await connect(broker.bootstrap)
        await create(connection, topic_name)
        await connection.send(ApiKey.PRODUCE, produce_request(topic_name, build_batch([(None, b"x")])))
        beyond = partition_of(await connection.send(ApiKey.FETCH, fetch_request(topic_name, 5)))
        unknown = partition_of(await connection.send(ApiKey.FETCH, fetch_request(topic_name + "-nope", 0)))
        await connection.close()
        return beyond, unknown

    beyond, unknown = run(scenario())
    assert beyond.error_code == ErrorCode.OFFSET_OUT_OF_RANGE and beyond.high_watermark == -1
    assert unknown.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_acks_zero_and_all(broker, topic_name):
    async def scenario():
        connection = await connect(broker.bootstrap)
        await create(connection, topic_name)
        # acks=0: no response; the next request's response must still match its own request.
        await connection.send_without_response(
            ApiKey.PRODUCE, produce_request(topic_name, build_batch([(None, b"a")]), acks=0), version=7)
        all_acks = await connection.send(ApiKey.PRODUCE, produce_request(topic_name, build_batch([(None, b"b")]), acks=-1))
        bad_acks = await connection.send(ApiKey.PRODUCE, produce_request(topic_name, build_batch([(None, b"c")]), acks=2))
        committed = partition_of(await connection.send(ApiKey.FETCH, fetch_request(topic_name, 0, isolation_level=1)))
        await connection.close()
        return all_acks, bad_acks, committed

    all_acks, bad_acks, committed = run(scenario())
    assert all_acks.responses[0].partition_responses[0].base_offset == 1
    assert bad_acks.responses[0].partition_responses[0].error_code == ErrorCode.INVALID_REQUIRED_ACKS
    assert committed.high_watermark == committed.last_stable_offset == 2
    assert committed.aborted_transactions == []


def test_pipelined_requests_are_answered_in_order(broker, topic_name):
    """A long-polling fetch followed by quick requests on one connection: the quick replies, ready
    at once, are held back until the fetch is answered, and replies keep request order."""
    async def scenario():
        setup = await connect(broker.bootstrap)
        await create(setup, topic_name)
        host, port = broker.bootstrap.split(":")
        reader, writer = await asyncio.open_connection(host, int(port))
        metadata = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=topic_name)], allow_auto_topic_creation=False)
        frames = [codec.encode_request(ApiKey.METADATA, 4, 1, "t", metadata),
                  codec.encode_request(ApiKey.FETCH, 11, 2, "t", fetch_request(topic_name, 0, max_wait_ms=30000)),
                  codec.encode_request(ApiKey.METADATA, 4, 3, "t", metadata),
                  codec.encode_request(ApiKey.METADATA, 4, 4, "t", metadata)]
        writer.write(b"".join(frames))  # all at once, before any reply
        order = [(await read_frame(reader))[0]]
        # Replies 3 and 4 were ready when 1 was written (the frames came in one read), but they
        # must wait behind the fetch, which waits for a record: a produce from elsewhere wakes it.
        await setup.send(ApiKey.PRODUCE, produce_request(topic_name, build_batch([(b"k", b"v")])))
        correlation_id, frame = await read_frame(reader)
        order.append(correlation_id)
        fetched = partition_of(codec.decode_response(ApiKey.FETCH, 11, memoryview(frame))[1])
        order += [(await read_frame(reader))[0] for _ in range(2)]
        writer.close()
        await setup.close()
        return order, fetched

    order, fetched = run(scenario())
    assert order == [1, 2, 3, 4]
    assert fetched.high_watermark == 1 and bytes(fetched.records).endswith(b"k\x02v\x00")


def test_idempotent_duplicates_gaps_and_fenced_epochs(broker, topic_name):
    async def scenario():
        connection = await connect(broker.bootstrap)
        await create(connection, topic_name)
        init = await connection.send(ApiKey.INIT_PRODUCER_ID, InitProducerIdRequest(
            transactional_id=None, transaction_timeout_ms=60000, producer_id=-1, producer_epoch=-1))
        pid = init.producer_id

        async def send(seq: int, epoch: int = 0, n: int = 2):
            batch = build_batch([(None, b"r%d" % (seq + i)) for i in range(n)], producer_id=pid,
                                producer_epoch=epoch, base_sequence=seq)
            return (await connection.send(ApiKey.PRODUCE, produce_request(topic_name, batch, acks=-1))).responses[0].partition_responses[0]

        results = [await send(0), await send(2), await send(2), await send(0), await send(7)]
        bumped = await connection.send(ApiKey.INIT_PRODUCER_ID, InitProducerIdRequest(
            transactional_id=None, transaction_timeout_ms=60000, producer_id=pid, producer_epoch=0))
        results += [await send(0, epoch=1), await send(4, epoch=0)]
        await connection.close()
        return init, bumped, results

    init, bumped, results = run(scenario())
    assert init.error_code == 0 and init.producer_id >= 0 and init.producer_epoch == 0
    assert [r.error_code for r in results[:4]] == [0, 0, 0, 0]
    assert [r.base_offset for r in results[:4]] == [0, 2, 2, 0]  # retries get their original offsets
    assert results[4].error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert (bumped.producer_id, bumped.producer_epoch) == (init.producer_id, 1)
    assert results[5].error_code == 0 and results[5].base_offset == 4
    assert results[6].error_code == ErrorCode.INVALID_PRODUCER_EPOCH


def test_segment_ms_rolls_on_record_time(start_broker, topic_name):
    broker = start_broker(**{"log.roll.ms": 60000})

    async def scenario():
        connection = await connect(broker.bootstrap)
        await create(connection, topic_name)
        hour = 3_600_000
        for i in range(3):
            batch = build_batch([(None, b"x")], base_timestamp=1_700_000_000_000 + i * hour)
            await connection.send(ApiKey.PRODUCE, produce_request(topic_name, batch))
        await connection.close()

    run(scenario())
    logs = sorted(p.name for p in (broker.data_dir / f"{topic_name}-0").glob("*.log"))
    assert logs == [f"{offset:020d}.log" for offset in range(3)]
