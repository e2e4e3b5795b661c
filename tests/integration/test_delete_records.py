"""DeleteRecords (21) v0-v3 end to end: every client's admin call, raw requests at each version,
what Fetch / ListOffsets / consumers see after the log start offset moves, and its persistence.

The expected values are Kafka's (``shared/research/kafka-behaviour.md`` §1, §2 and §4): errors
answer LowWatermark -1; an offset above the high watermark, or below -1, is OFFSET_OUT_OF_RANGE and
moves nothing; an offset at or below the log start offset succeeds and changes nothing; -1 means
the high watermark; a partition named twice is answered once (the last offset wins); v3 (KIP-1343)
adds LeaderLogStartOffset, which v0-v2 responses do not carry.
"""

from __future__ import annotations

import asyncio
import socket
import struct
import time
from pathlib import Path

import pytest

from pybroker.client.connection import BrokerConnection
from pybroker.common.errors import ErrorCode as E
from pybroker.protocol import codec
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages import (
    CreateTopicsRequest,
    DeleteRecordsRequest,
    DeleteTopicsRequest,
    FetchRequest,
    FindCoordinatorRequest,
    ListOffsetsRequest,
    MetadataRequest,
    ProduceRequest,
)
from tests.conftest import broker_connection, wait_until
from tests.integration import clients
from tests.unit.batches import build_batch

# __consumer_offsets with one partition: the internal-topic case needs it to exist, cheaply.
BROKER_OVERRIDES = {"offsets.topic.num.partitions": 1}

BASE = 1_700_000_000_000  # record i has timestamp BASE + i * STEP unless a test says otherwise
STEP = 1000
COUNT = 10
EARLIEST, LATEST, MAX_TIMESTAMP = -2, -1, -3
LSO_CHECKPOINT = "log-start-offset-checkpoint"


# --- raw protocol helpers ------------------------------------------------------------------------

def run(coro):
    return asyncio.run(coro)


connect = broker_connection


async def create_topic(conn: BrokerConnection, name: str, partitions: int = 1, **configs: str) -> None:
    response = await conn.send(ApiKey.CREATE_TOPICS, CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=1,
        configs=[CreateTopicsRequest.CreatableTopicConfig(name=k.replace("_", "."), value=v) for k, v in configs.items()],
    )], timeout_ms=5000))
    assert response.topics[0].error_code == E.NONE, response


async def produce(conn: BrokerConnection, topic: str, count: int = COUNT, first: int = 0,
                  timestamps: list[int] | None = None, partition: int = 0, keyed: bool = False) -> int:
    """Append ``value-<first>`` … as ONE batch (keys ``key-<first>`` … when ``keyed``, as a
    compacted topic needs); returns its base offset."""
    stamps = timestamps or [BASE + (first + i) * STEP for i in range(count)]
    batch = build_batch([(f"key-{first + i}".encode() if keyed else None, f"value-{first + i}".encode())
                         for i in range(count)], timestamps=stamps)
    response = await conn.send(ApiKey.PRODUCE, ProduceRequest(acks=-1, timeout_ms=5000, topic_data=[
        ProduceRequest.TopicProduceData(name=topic, partition_data=[
            ProduceRequest.PartitionProduceData(index=partition, records=batch)])]))
    result = response.responses[0].partition_responses[0]
    assert result.error_code == E.NONE, result
    return result.base_offset


def delete_request(entries: list[tuple[str, int, int]], timeout_ms: int = 5000, leader_only: bool = False) -> DeleteRecordsRequest:
    """One DeleteRecordsTopic per run of equal topic names, in the order given."""
    topics: list[DeleteRecordsRequest.DeleteRecordsTopic] = []
    for topic, partition, offset in entries:
        if not topics or topics[-1].name != topic:
            topics.append(DeleteRecordsRequest.DeleteRecordsTopic(name=topic, partitions=[]))
        topics[-1].partitions.append(DeleteRecordsRequest.DeleteRecordsPartition(partition_index=partition, offset=offset))
    return DeleteRecordsRequest(topics=topics, timeout_ms=timeout_ms, leader_only=leader_only)


def flatten(response) -> list[tuple[str, int, int, int, int]]:
    """(topic, partition, error, low watermark, leader log start offset) in response order."""
    return [
        (t.name, p.partition_index, p.error_code, p.low_watermark, p.leader_log_start_offset)
        for t in response.topics for p in t.partitions
    ]


async def delete(conn: BrokerConnection, entries: list[tuple[str, int, int]], version: int | None = None,
                 **kwargs: object) -> list[tuple[str, int, int, int, int]]:
    """DeleteRecords at ``version`` (default: the negotiated one, v3)."""
    return flatten(await conn.send(ApiKey.DELETE_RECORDS, delete_request(entries, **kwargs), version=version))


async def list_offset(conn: BrokerConnection, topic: str, timestamp: int, partition: int = 0,
                      version: int | None = None) -> tuple[int, int, int]:
    """(error, offset, timestamp) of ListOffsets for one partition, as a consumer (read_uncommitted)."""
    response = await conn.send(ApiKey.LIST_OFFSETS, ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[
        ListOffsetsRequest.ListOffsetsTopic(name=topic, partitions=[
            ListOffsetsRequest.ListOffsetsPartition(partition_index=partition, timestamp=timestamp)])]), version=version)
    p = response.topics[0].partitions[0]
    return p.error_code, p.offset, p.timestamp


async def earliest_epoch(conn: BrokerConnection, topic: str) -> int:
    """ListOffsets EARLIEST's leader epoch (v4+): the epoch of the records at the start offset."""
    response = await conn.send(ApiKey.LIST_OFFSETS, ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[
        ListOffsetsRequest.ListOffsetsTopic(name=topic, partitions=[
            ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=EARLIEST)])]), version=7)
    return response.topics[0].partitions[0].leader_epoch


async def fetch(conn: BrokerConnection, topic: str, offset: int, partition: int = 0):
    """A consumer fetch (no waiting) of one partition: its PartitionData."""
    response = await conn.send(ApiKey.FETCH, FetchRequest(
        replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=50 << 20, isolation_level=0, session_id=0,
        session_epoch=-1, topics=[FetchRequest.FetchTopic(topic=topic, partitions=[FetchRequest.FetchPartition(
            partition=partition, current_leader_epoch=-1, fetch_offset=offset, log_start_offset=-1,
            partition_max_bytes=1 << 20)])], forgotten_topics_data=[], rack_id=""))
    return response.responses[0].partitions[0]


def batch_offsets(records: bytes | memoryview) -> list[tuple[int, int]]:
    """(base offset, last offset) of each record batch in fetched bytes."""
    data, out, pos = bytes(records), [], 0
    while pos + 12 <= len(data):
        base, length = struct.unpack_from(">qi", data, pos)
        (last_delta,) = struct.unpack_from(">i", data, pos + 23)
        out.append((base, base + last_delta))
        pos += 12 + length
    return out


async def start_offset(conn: BrokerConnection, topic: str) -> int:
    error, offset, _ = await list_offset(conn, topic, EARLIEST)
    assert error == E.NONE
    return offset


async def topic_with_records(bootstrap: str, topic: str, count: int = COUNT, **configs: str) -> BrokerConnection:
    conn = await connect(bootstrap)
    await create_topic(conn, topic, **configs)
    await produce(conn, topic, count)
    return conn


def raw_exchange(bootstrap: str, api_key: int, version: int, request: object) -> bytes:
    """Send one request on a fresh socket; the response frame's bytes (without the size prefix)."""
    host, port = bootstrap.split(":")
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(codec.encode_request(api_key, version, 42, "raw-test", request))

        def exactly(n: int) -> bytes:
            buf = b""
            while len(buf) < n:
                chunk = s.recv(n - len(buf))
                assert chunk, "connection closed"
                buf += chunk
            return buf

        return exactly(int.from_bytes(exactly(4), "big"))


# --- every client's admin call ---------------------------------------------------------------------

def delete_confluent(bootstrap: str, topic: str, offset: int, operation_timeout: float = 5) -> int:
    """AdminClient.delete_records: the low watermark; raises KafkaException on a partition error."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    tp = TopicPartition(topic, 0, offset)
    return admin.delete_records([tp], operation_timeout=operation_timeout, request_timeout=10)[tp].result(timeout=30).low_watermark


def delete_aiokafka(bootstrap: str, topic: str, offset: int) -> int:
    from aiokafka import TopicPartition
    from aiokafka.admin import AIOKafkaAdminClient, RecordsToDelete

    async def go() -> int:
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
        await admin.start()
        try:
            tp = TopicPartition(topic, 0)
            return (await admin.delete_records({tp: RecordsToDelete(before_offset=offset)}, timeout_ms=5000))[tp]
        finally:
            await admin.close()

    return asyncio.run(go())


def delete_kafka_python(bootstrap: str, topic: str, offset: int) -> int:
    from kafka import KafkaAdminClient, TopicPartition

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        tp = TopicPartition(topic, 0)
        result = admin.delete_records({tp: offset}, timeout_ms=5000)[tp]
        assert result["error_code"] == 0, result
        return result["low_watermark"]
    finally:
        admin.close()


def error_code_of(exc: BaseException) -> int:
    """The Kafka error code a client's exception carries."""
    from confluent_kafka import KafkaException

    if isinstance(exc, KafkaException):
        return exc.args[0].code()
    return exc.errno  # aiokafka and kafka-python: Errors.* classes carry ``errno``


DELETERS = {"confluent": delete_confluent, "aiokafka": delete_aiokafka, "kafka-python": delete_kafka_python}


@pytest.mark.parametrize("client", list(DELETERS))
def test_delete_with_client_then_fetch_and_list_offsets(broker, topic_name, client):
    deleter = DELETERS[client]

    async def setup():
        conn = await topic_with_records(broker.bootstrap, topic_name)
        await conn.close()

    run(setup())
    assert deleter(broker.bootstrap, topic_name, 2) == 2

    async def after_delete():
        conn = await connect(broker.bootstrap)
        try:
            assert await list_offset(conn, topic_name, EARLIEST) == (E.NONE, 2, -1)
            assert await earliest_epoch(conn, topic_name) == 0  # the epoch cache starts again at 2
            assert await list_offset(conn, topic_name, LATEST) == (E.NONE, COUNT, -1)
            below = await fetch(conn, topic_name, 0)
            # Kafka's errored partition carries -1 for HW, LSO and last stable offset.
            assert (below.error_code, below.high_watermark, below.log_start_offset, below.last_stable_offset) == (
                E.OFFSET_OUT_OF_RANGE, -1, -1, -1)
            at = await fetch(conn, topic_name, 2)
            assert (at.error_code, at.high_watermark, at.log_start_offset) == (E.NONE, COUNT, 2)
            # The start offset sits inside the one batch: the whole batch comes back (Kafka does
            # not split batches; consumers drop the records below their position).
            assert batch_offsets(at.records) == [(0, COUNT - 1)]
            above = await fetch(conn, topic_name, 5)
            assert (above.error_code, above.log_start_offset) == (E.NONE, 2)
        finally:
            await conn.close()

    run(after_delete())
    # At or below the start offset: success, nothing moves; the answer is the current LW.
    assert deleter(broker.bootstrap, topic_name, 1) == 2
    assert deleter(broker.bootstrap, topic_name, 2) == 2
    # Past the high watermark: OFFSET_OUT_OF_RANGE, and the start offset is unchanged.
    with pytest.raises(Exception) as raised:
        deleter(broker.bootstrap, topic_name, COUNT + 1)
    assert error_code_of(raised.value) == E.OFFSET_OUT_OF_RANGE, raised.value
    assert deleter(broker.bootstrap, topic_name, COUNT) == COUNT  # == HW: allowed

    async def check_end():
        conn = await connect(broker.bootstrap)
        try:
            assert await start_offset(conn, topic_name) == COUNT
        finally:
            await conn.close()

    run(check_end())


# --- consumers that start below the new start offset -------------------------------------------------

def test_consumers_reset_to_the_new_start(broker, topic_name):
    async def setup():
        conn = await topic_with_records(broker.bootstrap, topic_name)
        try:
            assert await delete(conn, [(topic_name, 0, 2)]) == [(topic_name, 0, E.NONE, 2, 2)]
        finally:
            await conn.close()

    run(setup())
    expected = [(i, f"value-{i}".encode()) for i in range(2, COUNT)]
    got = clients.consume_confluent(broker.bootstrap, topic_name, COUNT - 2, offset=0, **{"auto.offset.reset": "earliest"})
    assert [(o, v) for o, _, v, _ in got] == expected
    got = clients.consume_kafka_python(broker.bootstrap, topic_name, COUNT - 2, offset=0)
    assert [(o, v) for o, _, v, _ in got] == expected
    got = clients.consume_aiokafka(broker.bootstrap, topic_name, COUNT - 2, offset=0)
    assert [(o, v) for o, _, v, _ in got] == expected


# --- raw requests: the result table -------------------------------------------------------------------

def test_delete_to_high_watermark_then_produce(broker, topic_name):
    async def scenario():
        conn = await topic_with_records(broker.bootstrap, topic_name)
        try:
            assert await delete(conn, [(topic_name, 0, -1)]) == [(topic_name, 0, E.NONE, COUNT, COUNT)]
            assert await list_offset(conn, topic_name, EARLIEST) == (E.NONE, COUNT, -1)
            assert await list_offset(conn, topic_name, LATEST) == (E.NONE, COUNT, -1)
            empty = await fetch(conn, topic_name, COUNT)
            assert (empty.error_code, empty.log_start_offset, empty.high_watermark, bytes(empty.records)) == (
                E.NONE, COUNT, COUNT, b"")
            assert (await fetch(conn, topic_name, COUNT - 1)).error_code == E.OFFSET_OUT_OF_RANGE
            assert await produce(conn, topic_name, 3, first=COUNT) == COUNT  # offsets go on from the end
            more = await fetch(conn, topic_name, COUNT)
            assert batch_offsets(more.records) == [(COUNT, COUNT + 2)] and more.log_start_offset == COUNT
        finally:
            await conn.close()

    run(scenario())


def test_empty_partition(broker, topic_name):
    async def scenario():
        conn = await connect(broker.bootstrap)
        try:
            await create_topic(conn, topic_name)
            assert await delete(conn, [(topic_name, 0, 0)]) == [(topic_name, 0, E.NONE, 0, 0)]
            assert await delete(conn, [(topic_name, 0, -1)]) == [(topic_name, 0, E.NONE, 0, 0)]
            assert await delete(conn, [(topic_name, 0, 1)]) == [(topic_name, 0, E.OFFSET_OUT_OF_RANGE, -1, -1)]
        finally:
            await conn.close()

    run(scenario())


def test_error_results_and_unchanged_start(broker, topic_name):
    """One request, many outcomes: each partition answered once, errors with -1/-1, in Kafka's order."""
    compact, compact_delete, other = topic_name + "-c", topic_name + "-cd", topic_name + "-o"

    async def scenario():
        conn = await topic_with_records(broker.bootstrap, topic_name)
        try:
            await create_topic(conn, compact, cleanup_policy="compact")
            await create_topic(conn, compact_delete, cleanup_policy="compact,delete")
            await create_topic(conn, other, partitions=2)
            await produce(conn, compact_delete, 5, keyed=True)
            await produce(conn, other, 4, partition=1)
            # Create __consumer_offsets (FindCoordinator does, on first use).
            found = await conn.send(ApiKey.FIND_COORDINATOR, FindCoordinatorRequest(key="g-delete-records"), version=3)
            assert found.error_code in (E.NONE, E.COORDINATOR_NOT_AVAILABLE), found

            async def offsets_topic_exists() -> bool:
                metadata = await conn.send(ApiKey.METADATA, MetadataRequest(
                    topics=[MetadataRequest.MetadataRequestTopic(name="__consumer_offsets")], allow_auto_topic_creation=False))
                return metadata.topics[0].error_code == E.NONE

            deadline = time.monotonic() + 10
            while not await offsets_topic_exists():
                assert time.monotonic() < deadline, "__consumer_offsets was not created"
                await asyncio.sleep(0.02)

            missing = topic_name + "-missing"
            results = await delete(conn, [
                (topic_name, 0, COUNT + 1),     # past the high watermark
                (topic_name, 3, 0),             # no such partition index
                (missing, 0, 0),                # no such topic
                ("__consumer_offsets", 0, 0),   # internal
                ("__consumer_offsets", 7, 0),   # internal, but no such partition: 3 comes first
                (compact, 0, 0),                # cleanup.policy=compact
                (compact_delete, 0, 3),         # compact,delete: allowed
                (other, 0, -2),                 # < -1
                (other, 1, -5),
                (other, -1, 0),                 # negative partition index: not in metadata
            ], timeout_ms=0)
            assert sorted(results) == sorted([
                (topic_name, 0, E.OFFSET_OUT_OF_RANGE, -1, -1),
                (topic_name, 3, E.UNKNOWN_TOPIC_OR_PARTITION, -1, -1),
                (missing, 0, E.UNKNOWN_TOPIC_OR_PARTITION, -1, -1),
                ("__consumer_offsets", 0, E.INVALID_TOPIC_EXCEPTION, -1, -1),
                ("__consumer_offsets", 7, E.UNKNOWN_TOPIC_OR_PARTITION, -1, -1),
                (compact, 0, E.POLICY_VIOLATION, -1, -1),
                (compact_delete, 0, E.NONE, 3, 3),
                (other, 0, E.OFFSET_OUT_OF_RANGE, -1, -1),
                (other, 1, E.OFFSET_OUT_OF_RANGE, -1, -1),
                (other, -1, E.UNKNOWN_TOPIC_OR_PARTITION, -1, -1),
            ])
            assert len(results) == 10
            # Nothing moved where the answer was an error; the topic was not auto-created.
            assert await start_offset(conn, topic_name) == 0
            assert await list_offset(conn, topic_name, LATEST) == (E.NONE, COUNT, -1)
            assert await list_offset(conn, other, EARLIEST, partition=1) == (E.NONE, 0, -1)
            assert (await list_offset(conn, missing, EARLIEST))[0] == E.UNKNOWN_TOPIC_OR_PARTITION
            assert await start_offset(conn, compact_delete) == 3
        finally:
            await conn.close()

    run(scenario())


def test_partition_named_twice_is_answered_once(broker, topic_name):
    """Kafka keeps the request in a map: the last offset for a partition wins, one answer."""
    async def scenario():
        conn = await topic_with_records(broker.bootstrap, topic_name)
        try:
            request = delete_request([(topic_name, 0, 3), (topic_name, 0, 5)])
            # The same partition again under a second entry for the same topic name.
            request.topics.append(DeleteRecordsRequest.DeleteRecordsTopic(name=topic_name, partitions=[
                DeleteRecordsRequest.DeleteRecordsPartition(partition_index=0, offset=4)]))
            response = await conn.send(ApiKey.DELETE_RECORDS, request, version=3)
            assert flatten(response) == [(topic_name, 0, E.NONE, 4, 4)]
            assert await start_offset(conn, topic_name) == 4
        finally:
            await conn.close()

    run(scenario())


@pytest.mark.parametrize("leader_only", [True, False])
def test_v3_answers_leader_log_start_offset(broker, topic_name, leader_only):
    """Single replica: the low watermark is the leader's start offset, so both modes answer at once
    with LowWatermark == LeaderLogStartOffset == the requested offset."""
    async def scenario():
        conn = await topic_with_records(broker.bootstrap, topic_name)
        try:
            assert await delete(conn, [(topic_name, 0, 3)], version=3, leader_only=leader_only) == [
                (topic_name, 0, E.NONE, 3, 3)]
            assert await delete(conn, [(topic_name, 0, -1)], version=3, leader_only=leader_only) == [
                (topic_name, 0, E.NONE, COUNT, COUNT)]
            assert await delete(conn, [(topic_name, 0, 1)], version=3, leader_only=leader_only) == [
                (topic_name, 0, E.NONE, COUNT, COUNT)]
            assert await delete(conn, [(topic_name, 0, COUNT + 1), (topic_name + "-x", 0, 1)], version=3,
                                leader_only=leader_only) == [
                (topic_name, 0, E.OFFSET_OUT_OF_RANGE, -1, -1), (topic_name + "-x", 0, E.UNKNOWN_TOPIC_OR_PARTITION, -1, -1)]
        finally:
            await conn.close()

    run(scenario())


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_each_version_on_the_wire(broker, topic_name, version):
    """The response decodes at the request's version and re-encodes to the very same bytes: v0-v2
    carry no LeaderLogStartOffset (they decode to the -1 default), v3 does."""
    async def setup():
        conn = await topic_with_records(broker.bootstrap, topic_name)
        await conn.close()

    run(setup())
    request = delete_request([(topic_name, 0, 4), (topic_name, 0, COUNT + 5), (topic_name + "-none", 0, 0)], timeout_ms=0)
    frame = raw_exchange(broker.bootstrap, ApiKey.DELETE_RECORDS, version, request)
    correlation_id, response = codec.decode_response(ApiKey.DELETE_RECORDS, version, memoryview(frame))
    assert correlation_id == 42
    assert bytes(codec.encode_response(ApiKey.DELETE_RECORDS, version, correlation_id, response))[4:] == frame
    by_topic = {t.name: [(p.partition_index, p.error_code, p.low_watermark, p.leader_log_start_offset) for p in t.partitions]
                for t in response.topics}
    # (topic, 0) was named twice: the last offset (past the HW) wins, so OFFSET_OUT_OF_RANGE.
    assert by_topic == {
        topic_name: [(0, E.OFFSET_OUT_OF_RANGE, -1, -1)],
        topic_name + "-none": [(0, E.UNKNOWN_TOPIC_OR_PARTITION, -1, -1)],
    }
    offset = version + 1
    ok = raw_exchange(broker.bootstrap, ApiKey.DELETE_RECORDS, version, delete_request([(topic_name, 0, offset)], timeout_ms=0))
    _, response = codec.decode_response(ApiKey.DELETE_RECORDS, version, memoryview(ok))
    assert bytes(codec.encode_response(ApiKey.DELETE_RECORDS, version, 42, response))[4:] == ok
    assert flatten(response) == [(topic_name, 0, E.NONE, offset, offset if version == 3 else -1)]
    if version == 3:  # the same answer at v2 (same flexible layout) is 8 bytes shorter: no int64
        assert len(ok) == len(codec.encode_response(ApiKey.DELETE_RECORDS, 2, 42, response)) - 4 + 8


def test_timeout_zero_succeeds_on_a_single_replica(broker, topic_name):
    async def scenario():
        conn = await topic_with_records(broker.bootstrap, topic_name)
        try:
            for version in (0, 2, 3):
                offset = version + 2
                assert await delete(conn, [(topic_name, 0, offset)], version=version, timeout_ms=0) == [
                    (topic_name, 0, E.NONE, offset, offset if version == 3 else -1)]
        finally:
            await conn.close()

    run(scenario())


# --- ListOffsets after a delete ---------------------------------------------------------------------

@pytest.mark.parametrize("layout", ["one-batch", "segment-per-batch"])
def test_offsets_for_times_never_below_the_start(broker, topic_name, layout):
    """By timestamp: the first record at or after it *and* at or above the log start offset
    (Kafka scans from max(index hit, LSO)); -1 when no such record is below the HW."""
    async def setup():
        conn = await connect(broker.bootstrap)
        try:
            if layout == "one-batch":
                await create_topic(conn, topic_name)
                await produce(conn, topic_name)
            else:  # one record per batch, one batch per segment
                await create_topic(conn, topic_name, segment_bytes="100")
                for i in range(COUNT):
                    await produce(conn, topic_name, 1, first=i)
            # Before: a lookup below every timestamp finds offset 0.
            assert (await list_offset(conn, topic_name, BASE))[:2] == (E.NONE, 0)
            assert await delete(conn, [(topic_name, 0, 4)]) == [(topic_name, 0, E.NONE, 4, 4)]
            assert await list_offset(conn, topic_name, BASE) == (E.NONE, 4, BASE + 4 * STEP)
            assert await list_offset(conn, topic_name, BASE + 2 * STEP + 1) == (E.NONE, 4, BASE + 4 * STEP)
            assert await list_offset(conn, topic_name, BASE + 4 * STEP) == (E.NONE, 4, BASE + 4 * STEP)
            assert await list_offset(conn, topic_name, BASE + 6 * STEP - 1) == (E.NONE, 6, BASE + 6 * STEP)
            assert await list_offset(conn, topic_name, BASE + COUNT * STEP) == (E.NONE, -1, -1)
        finally:
            await conn.close()

    run(setup())
    for timestamp, expected in [(0, 4), (BASE + 3 * STEP, 4), (BASE + 7 * STEP, 7), (BASE + COUNT * STEP, -1)]:
        assert clients.offset_for_time_confluent(broker.bootstrap, topic_name, timestamp) == expected, timestamp

    async def delete_everything():
        conn = await connect(broker.bootstrap)
        try:
            assert (await delete(conn, [(topic_name, 0, -1)]))[0][2:4] == (E.NONE, COUNT)
            # Every record is below the start: nothing qualifies (Kafka: offsetsForTimes(0) is null).
            assert await list_offset(conn, topic_name, 0) == (E.NONE, -1, -1)
            assert await list_offset(conn, topic_name, BASE + 9 * STEP) == (E.NONE, -1, -1)
        finally:
            await conn.close()

    run(delete_everything())
    assert clients.offset_for_time_confluent(broker.bootstrap, topic_name, 0) == -1


def test_timestamp_lookup_skips_a_later_timestamp_below_the_start(broker, topic_name):
    """Offset 0 carries the largest timestamp. Before the delete a lookup finds it; after it the
    answer is the first qualifying record at or above the start. MAX_TIMESTAMP is Kafka's: it looks
    at every local segment without an LSO filter, so it still names offset 0 (below the start) until
    retention removes that segment (kafka-behaviour §4)."""
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KpTopicPartition

    stamps = [BASE + 9 * STEP] + [BASE + i * STEP for i in range(1, COUNT)]

    async def scenario():
        conn = await connect(broker.bootstrap)
        try:
            await create_topic(conn, topic_name)
            await produce(conn, topic_name, timestamps=stamps)
            assert await list_offset(conn, topic_name, BASE + 5 * STEP) == (E.NONE, 0, BASE + 9 * STEP)
            assert await list_offset(conn, topic_name, MAX_TIMESTAMP) == (E.NONE, 0, BASE + 9 * STEP)
            assert (await delete(conn, [(topic_name, 0, 1)]))[0][2:4] == (E.NONE, 1)
            assert await list_offset(conn, topic_name, BASE + 5 * STEP) == (E.NONE, 5, BASE + 5 * STEP)
            assert await list_offset(conn, topic_name, BASE + 9 * STEP) == (E.NONE, 9, BASE + 9 * STEP)
            assert await list_offset(conn, topic_name, 0) == (E.NONE, 1, BASE + STEP)
            assert await list_offset(conn, topic_name, MAX_TIMESTAMP) == (E.NONE, 0, BASE + 9 * STEP)
            assert (await delete(conn, [(topic_name, 0, -1)]))[0][2:4] == (E.NONE, COUNT)
            # Still below the high watermark, so still answered (Kafka filters only at the HW).
            assert await list_offset(conn, topic_name, MAX_TIMESTAMP) == (E.NONE, 0, BASE + 9 * STEP)
        finally:
            await conn.close()

    run(scenario())
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap)
    try:
        tp = KpTopicPartition(topic_name, 0)
        assert consumer.offsets_for_times({tp: BASE + 5 * STEP})[tp] is None  # everything deleted
        assert consumer.beginning_offsets([tp]) == {tp: COUNT}
    finally:
        consumer.close()


# --- persistence of the start offset ----------------------------------------------------------------

def read_checkpoint(data_dir: Path) -> tuple[str, int, list[list[str]]]:
    lines = (data_dir / LSO_CHECKPOINT).read_text().splitlines()
    return lines[0], int(lines[1]), [line.split(" ") for line in lines[2:]]


async def delete_on(bootstrap: str, topic: str, offset: int) -> None:
    conn = await topic_with_records(bootstrap, topic)
    try:
        assert (await delete(conn, [(topic, 0, offset)]))[0][2:4] == (E.NONE, offset)
    finally:
        await conn.close()


async def expect_start(bootstrap: str, topic: str, start: int) -> None:
    """After a restart: the start offset, the records from it, and out-of-range below it."""
    conn = await connect(bootstrap)
    try:
        async def ready():
            return (await list_offset(conn, topic, EARLIEST))[0] == E.NONE

        deadline = time.monotonic() + 10
        while not await ready():
            assert time.monotonic() < deadline
            await asyncio.sleep(0.02)
        assert await list_offset(conn, topic, EARLIEST) == (E.NONE, start, -1)
        assert await list_offset(conn, topic, LATEST) == (E.NONE, COUNT, -1)
        at = await fetch(conn, topic, start)
        assert (at.error_code, at.log_start_offset, at.high_watermark) == (E.NONE, start, COUNT)
        assert batch_offsets(at.records) == [(0, COUNT - 1)]
        if start > 0:
            assert (await fetch(conn, topic, start - 1)).error_code == E.OFFSET_OUT_OF_RANGE
        # Deleting below the (restored) start still changes nothing.
        assert await delete(conn, [(topic, 0, 0)]) == [(topic, 0, E.NONE, start, start)]
    finally:
        await conn.close()


def test_start_offset_survives_a_clean_restart(start_broker, topic_name):
    broker = start_broker("clean")
    run(delete_on(broker.bootstrap, topic_name, 2))
    assert broker.stop() == 0
    version, count, entries = read_checkpoint(broker.data_dir)
    assert version == "0" and count == len(entries)
    assert all(len(entry) == 3 and entry[1].isdigit() and entry[2].lstrip("-").isdigit() for entry in entries), entries
    assert [topic_name, "0", "2"] in entries
    broker.start()
    run(expect_start(broker.bootstrap, topic_name, 2))


def test_unclean_stop_within_the_checkpoint_interval_loses_the_start_offset(start_broker, topic_name):
    """Kafka writes the start offset only every log.flush.start.offset.checkpoint.interval.ms and
    at clean shutdown ("may be lost only if all in-sync replicas ... are shutdown in an unclean
    manner within" that interval): after SIGKILL the log starts at its first segment's base again,
    with every record readable and nothing else damaged."""
    broker = start_broker("kill-early", **{"log.flush.start.offset.checkpoint.interval.ms": 60000})
    run(delete_on(broker.bootstrap, topic_name, 2))
    broker.kill()
    broker.start()
    run(expect_start(broker.bootstrap, topic_name, 0))


def test_unclean_stop_after_the_checkpoint_interval_keeps_the_start_offset(start_broker, topic_name):
    broker = start_broker("kill-late", **{"log.flush.start.offset.checkpoint.interval.ms": 100})
    run(delete_on(broker.bootstrap, topic_name, 2))
    wait_until(lambda: [topic_name, "0", "2"] in read_checkpoint(broker.data_dir)[2], timeout=10,
               message="the start offset in log-start-offset-checkpoint")
    broker.kill()
    broker.start()
    run(expect_start(broker.bootstrap, topic_name, 2))


def test_recreated_topic_does_not_inherit_a_deleted_topics_start_offset(start_broker, topic_name):
    """A deleted topic's checkpointed start offset must not apply to a new topic of the same name
    (Kafka rewrites the checkpoints without the partition when it deletes a log)."""
    broker = start_broker("recreate", **{"log.flush.start.offset.checkpoint.interval.ms": 60000})
    run(delete_on(broker.bootstrap, topic_name, 5))
    assert broker.stop() == 0  # the clean shutdown writes "<topic> 0 5"
    assert [topic_name, "0", "5"] in read_checkpoint(broker.data_dir)[2]
    broker.start()

    async def recreate():
        conn = await connect(broker.bootstrap)
        try:
            response = await conn.send(ApiKey.DELETE_TOPICS, DeleteTopicsRequest(topic_names=[topic_name], timeout_ms=5000), version=5)
            assert response.responses[0].error_code == E.NONE, response
            deadline = time.monotonic() + 10
            while True:
                try:
                    await create_topic(conn, topic_name)
                    break
                except AssertionError:
                    assert time.monotonic() < deadline, "could not recreate the topic"
                    await asyncio.sleep(0.05)
            await produce(conn, topic_name, 3)
            assert await list_offset(conn, topic_name, EARLIEST) == (E.NONE, 0, -1)
        finally:
            await conn.close()

    run(recreate())
    broker.kill()  # before any periodic checkpoint
    broker.start()

    async def check():
        conn = await connect(broker.bootstrap)
        try:
            deadline = time.monotonic() + 10
            while (await list_offset(conn, topic_name, LATEST))[0] != E.NONE:
                assert time.monotonic() < deadline
                await asyncio.sleep(0.02)
            assert await list_offset(conn, topic_name, LATEST) == (E.NONE, 3, -1)
            assert await list_offset(conn, topic_name, EARLIEST) == (E.NONE, 0, -1)
            assert batch_offsets((await fetch(conn, topic_name, 0)).records) == [(0, 2)]
        finally:
            await conn.close()

    run(check())
