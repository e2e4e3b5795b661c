"""Fetch sessions (KIP-227) against a real broker process, with raw Fetch v12 requests, and the
consumers of confluent-kafka and kafka-python fetching across many requests.

Each row of the rule table is a function ``(bootstrap) -> summary`` (`ROWS`) that creates its own
two-partition topic, produces known records, sends its fetches and summarizes every answer in
broker-independent terms: error names, session ids as labels (``0``, or ``"S1"``, ``"S2"``... in
order of appearance, so "the same session" shows), and per partition its topic label, index,
error name, high watermark and the offsets of the records returned. The tests compare them with
Kafka 3.9's answers (`EXPECTED`); ``python -m tests.integration.test_fetch_sessions HOST:PORT
[ROW...]`` runs them against any broker (a Kafka 3.9.2, say; it must auto-create nothing and
accept CreateTopics) and prints each row's answers, JSON a step a line, and whether they are
the expected ones.
"""

from __future__ import annotations

import asyncio
import json
import struct
import sys
import time
import uuid
from collections.abc import Callable, Iterable
from typing import Any

import pytest

from pybroker.client.connection import BrokerConnection
from pybroker.common.errors import ErrorCode
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages import (
    CreateTopicsRequest,
    FetchRequest,
    FetchResponse,
    ProduceRequest,
)
from tests.unit.batches import build_batch

FETCH_VERSION = 12
INT_MAX = 2**31 - 1
MISSING = "fetch-sessions-no-such-topic"
#: Records produced to partitions 0 and 1 of a row's topic before its fetches.
INITIAL_RECORDS = (3, 2)

Summary = list[dict[str, Any]]


class Row:
    """One row's connection, topic and session labels."""

    def __init__(self, connection: BrokerConnection, topic: str) -> None:
        self.connection = connection
        self.topic = topic
        self.labels: dict[int, str] = {INT_MAX: "INT_MAX"}  # an id only a client would send
        self.sessions = 0
        self.steps: Summary = []

    async def produce(self, partition: int, count: int = 1) -> None:
        for _ in range(count):
            request = ProduceRequest(acks=1, timeout_ms=10_000, topic_data=[ProduceRequest.TopicProduceData(
                name=self.topic, partition_data=[ProduceRequest.PartitionProduceData(
                    index=partition, records=build_batch([(None, b"v")]))])])
            deadline = time.monotonic() + 30
            while True:
                response = await self.connection.send(ApiKey.PRODUCE, request)
                error = response.responses[0].partition_responses[0].error_code
                if error == ErrorCode.NONE:
                    break
                assert time.monotonic() < deadline, f"produce to {self.topic}-{partition}: {ErrorCode(error).name}"
                await asyncio.sleep(0.1)

    async def fetch(self, session_id: int, epoch: int, offsets: dict[int | str, int] | None = None,
                    forget: Iterable[int] = (), max_wait_ms: int = 0) -> dict[str, Any]:
        """Send a Fetch: ``offsets`` by partition of the row's topic (or MISSING: its partition 0),
        ``forget`` partitions of the row's topic; returns and records the answer's summary."""
        topics: list[FetchRequest.FetchTopic] = []
        for key, offset in (offsets or {}).items():
            name, partition = (MISSING, 0) if key == MISSING else (self.topic, int(key))
            if not topics or topics[-1].topic != name:
                topics.append(FetchRequest.FetchTopic(topic=name, partitions=[]))
            topics[-1].partitions.append(FetchRequest.FetchPartition(
                partition=partition, current_leader_epoch=-1, fetch_offset=offset, log_start_offset=-1,
                partition_max_bytes=1 << 20))
        forgotten = list(forget)
        request = FetchRequest(
            replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=50 << 20, isolation_level=0,
            session_id=session_id, session_epoch=epoch, topics=topics, rack_id="",
            forgotten_topics_data=[FetchRequest.ForgottenTopic(topic=self.topic, partitions=forgotten)]
            if forgotten else [])
        response = await self.connection.send(ApiKey.FETCH, request, FETCH_VERSION, timeout=max_wait_ms / 1000 + 30)
        summary = self.summary(response)
        self.steps.append(summary)
        return summary

    def session(self, label: str) -> int:
        """The id of the session labelled ``label``."""
        return next(session_id for session_id, name in self.labels.items() if name == label)

    def summary(self, response: FetchResponse) -> dict[str, Any]:
        session_id = response.session_id
        if session_id == 0:
            session: int | str = 0
        elif session_id in self.labels:
            session = self.labels[session_id]
        else:
            self.sessions += 1
            session = self.labels[session_id] = f"S{self.sessions}"
        return {
            "error": ErrorCode(response.error_code).name,
            "session": session,
            "partitions": [
                ["t" if t.topic == self.topic else t.topic, p.partition_index, ErrorCode(p.error_code).name,
                 p.high_watermark, record_offsets(p.records)]
                for t in response.responses for p in t.partitions
            ],
        }


def record_offsets(records: Any) -> list[int] | None:
    """[first offset, last offset + 1] of the whole record batches returned, None for none."""
    data = bytes(records or b"")
    first = end = None
    position = 0
    while position + 27 <= len(data):
        base_offset, length = struct.unpack_from(">qi", data, position)
        if position + 12 + length > len(data):
            break  # a partial batch at the end
        (last_delta,) = struct.unpack_from(">i", data, position + 23)
        first = base_offset if first is None else first
        end = base_offset + last_delta + 1
        position += 12 + length
    return None if first is None else [first, end]


async def new_row(bootstrap: str) -> Row:
    host, port = bootstrap.rsplit(":", 1)
    connection = BrokerConnection(host, int(port), client_id="fetch-sessions")
    await connection.connect()
    topic = f"fetch-sessions-{uuid.uuid4().hex[:12]}"
    created = await connection.send(ApiKey.CREATE_TOPICS, CreateTopicsRequest(topics=[
        CreateTopicsRequest.CreatableTopic(name=topic, num_partitions=2, replication_factor=1)], timeout_ms=30_000))
    assert created.topics[0].error_code == ErrorCode.NONE, created
    row = Row(connection, topic)
    for partition, count in enumerate(INITIAL_RECORDS):
        await row.produce(partition, count)
    return row


def row_function(body: Callable[[Row], Any]) -> Callable[[str], Summary]:
    """A row: ``body`` run on a fresh topic; returns the summaries of its fetches in order."""
    def run_row(bootstrap: str) -> Summary:
        async def scenario() -> Summary:
            row = await new_row(bootstrap)
            try:
                await body(row)
            finally:
                await row.connection.close()
            return row.steps
        return asyncio.run(scenario())
    run_row.__name__ = body.__name__
    run_row.__doc__ = body.__doc__
    return run_row


# --- the rows ---------------------------------------------------------------------------------------


@row_function
async def final_epoch_session_id_minus_1(row: Row) -> None:
    """The issue: SessionId -1, SessionEpoch -1 is a full fetch without a session."""
    await row.fetch(-1, -1, {0: 0, 1: 0})


@row_function
async def final_epoch_session_id_0(row: Row) -> None:
    await row.fetch(0, -1, {0: 0, 1: 0})


@row_function
async def initial_epoch_opens_a_session(row: Row) -> None:
    """Epoch 0 opens a session; its first incremental fetch (nothing changed) lists nothing."""
    await row.fetch(0, 0, {0: 0, 1: 0})
    await row.fetch(row.session("S1"), 1, {0: 3, 1: 2})


@row_function
async def incremental_lists_only_changed_partitions(row: Row) -> None:
    """At the log end: partition 1 grows; a fetch listing nothing answers only it."""
    await row.fetch(0, 0, {0: 3, 1: 2})
    session = row.session("S1")
    await row.fetch(session, 1)
    await row.produce(1)
    await row.fetch(session, 2)
    await row.fetch(session, 3, {1: 3})


@row_function
async def incremental_add_and_forget(row: Row) -> None:
    await row.fetch(0, 0, {0: 3})
    session = row.session("S1")
    await row.fetch(session, 1, {1: 2}, forget=[0])  # 1 added: in the answer; 0 forgotten
    await row.produce(0)
    await row.fetch(session, 2)  # partition 0 is no longer read


@row_function
async def incremental_forgetting_everything_closes_the_session(row: Row) -> None:
    await row.fetch(0, 0, {0: 3, 1: 2})
    session = row.session("S1")
    await row.fetch(session, 1, forget=[0, 1])
    await row.fetch(session, 2)


@row_function
async def wrong_epoch(row: Row) -> None:
    await row.fetch(0, 0, {0: 3})
    session = row.session("S1")
    await row.fetch(session, 5, {0: 3})
    await row.fetch(session, 0x7FFFFFFF)
    await row.fetch(session, 1)  # the session survived


@row_function
async def unknown_session_id(row: Row) -> None:
    await row.fetch(123456, 1, {0: 0})


@row_function
async def session_id_0_with_a_positive_epoch(row: Row) -> None:
    await row.fetch(0, 1, {0: 0})


@row_function
async def full_fetch_closes_the_session_it_names(row: Row) -> None:
    await row.fetch(0, 0, {0: 3})
    first = row.session("S1")
    await row.fetch(first, 0, {0: 3})  # closes S1, opens S2
    await row.fetch(first, 1)
    second = row.session("S2")
    await row.fetch(second, -1, {0: 3})  # closes S2, sessionless
    await row.fetch(second, 1)


@row_function
async def full_fetch_ignores_forgotten_topics(row: Row) -> None:
    await row.fetch(0, 0, {0: 3, 1: 2}, forget=[1])
    await row.produce(1)
    await row.fetch(row.session("S1"), 1)


@row_function
async def unknown_topic_in_a_session(row: Row) -> None:
    """A partition the broker does not know comes after those read, and in every answer."""
    await row.fetch(0, 0, {MISSING: 0, 0: 3})
    await row.fetch(row.session("S1"), 1)


@row_function
async def records_move_partitions_to_the_end_of_the_session(row: Row) -> None:
    """Partition 0 answered with records is read, and answered, after partition 1 next time."""
    await row.fetch(0, 0, {0: 3, 1: 2})
    session = row.session("S1")
    await row.produce(0)
    await row.fetch(session, 1)
    await row.produce(0)
    await row.produce(1)
    await row.fetch(session, 2, {0: 4})


@row_function
async def parked_incremental_fetch_wakes_on_a_partition_not_listed(row: Row) -> None:
    await row.fetch(0, 0, {0: 3, 1: 2})
    session = row.session("S1")
    waiting = asyncio.ensure_future(row.fetch(session, 1, max_wait_ms=20_000))
    await asyncio.sleep(1.0)
    assert not waiting.done()
    host, port = row.connection.host, row.connection.port
    producer = BrokerConnection(host, port)
    await producer.connect()
    try:
        await Row(producer, row.topic).produce(1)
    finally:
        await producer.close()
    await asyncio.wait_for(waiting, 15)


@row_function
async def session_id_no_cache_shard_covers(row: Row) -> None:
    """Kafka 3.9 indexes its 8 cache shards by id / (INT_MAX / 8): INT_MAX has none, and the
    request fails (UNKNOWN_SERVER_ERROR on top and on each partition, the request's session id)."""
    await row.fetch(INT_MAX, -1, {0: 0})


ROWS: dict[str, Callable[[str], Summary]] = {f.__name__: f for f in (
    final_epoch_session_id_minus_1, final_epoch_session_id_0, initial_epoch_opens_a_session,
    incremental_lists_only_changed_partitions, incremental_add_and_forget,
    incremental_forgetting_everything_closes_the_session, wrong_epoch, unknown_session_id,
    session_id_0_with_a_positive_epoch, full_fetch_closes_the_session_it_names, full_fetch_ignores_forgotten_topics,
    unknown_topic_in_a_session, records_move_partitions_to_the_end_of_the_session,
    parked_incremental_fetch_wakes_on_a_partition_not_listed, session_id_no_cache_shard_covers,
)}


def step(error: str, session: int | str, *partitions: list[Any]) -> dict[str, Any]:
    return {"error": error, "session": session, "partitions": list(partitions)}


def p(partition: int, hw: int, records: list[int] | None = None, error: str = "NONE", topic: str = "t") -> list[Any]:
    return [topic, partition, error, hw, records]


NONE, NOT_FOUND, BAD_EPOCH = "NONE", "FETCH_SESSION_ID_NOT_FOUND", "INVALID_FETCH_SESSION_EPOCH"
ALL = [p(0, 3, [0, 3]), p(1, 2, [0, 2])]

#: Kafka 3.9's answers.
EXPECTED: dict[str, Summary] = {
    "final_epoch_session_id_minus_1": [step(NONE, 0, *ALL)],
    "final_epoch_session_id_0": [step(NONE, 0, *ALL)],
    "initial_epoch_opens_a_session": [step(NONE, "S1", *ALL), step(NONE, "S1")],
    "incremental_lists_only_changed_partitions": [
        step(NONE, "S1", p(0, 3), p(1, 2)), step(NONE, "S1"), step(NONE, "S1", p(1, 3, [2, 3])), step(NONE, "S1")],
    "incremental_add_and_forget": [step(NONE, "S1", p(0, 3)), step(NONE, "S1", p(1, 2)), step(NONE, "S1")],
    "incremental_forgetting_everything_closes_the_session": [
        step(NONE, "S1", p(0, 3), p(1, 2)), step(NONE, 0), step(NOT_FOUND, 0)],
    "wrong_epoch": [step(NONE, "S1", p(0, 3)), step(BAD_EPOCH, 0), step(BAD_EPOCH, 0), step(NONE, "S1")],
    "unknown_session_id": [step(NOT_FOUND, 0)],
    "session_id_0_with_a_positive_epoch": [step(NOT_FOUND, 0)],
    "full_fetch_closes_the_session_it_names": [
        step(NONE, "S1", p(0, 3)), step(NONE, "S2", p(0, 3)), step(NOT_FOUND, 0), step(NONE, 0, p(0, 3)),
        step(NOT_FOUND, 0)],
    "full_fetch_ignores_forgotten_topics": [step(NONE, "S1", p(0, 3), p(1, 2)), step(NONE, "S1", p(1, 3, [2, 3]))],
    "unknown_topic_in_a_session": [
        step(NONE, "S1", p(0, 3), p(0, -1, None, "UNKNOWN_TOPIC_OR_PARTITION", MISSING)),
        step(NONE, "S1", p(0, -1, None, "UNKNOWN_TOPIC_OR_PARTITION", MISSING))],
    "records_move_partitions_to_the_end_of_the_session": [
        step(NONE, "S1", p(0, 3), p(1, 2)), step(NONE, "S1", p(0, 4, [3, 4])),
        step(NONE, "S1", p(1, 3, [2, 3]), p(0, 5, [4, 5]))],
    "parked_incremental_fetch_wakes_on_a_partition_not_listed": [
        step(NONE, "S1", p(0, 3), p(1, 2)), step(NONE, "S1", p(1, 3, [2, 3]))],
    "session_id_no_cache_shard_covers": [step("UNKNOWN_SERVER_ERROR", "INT_MAX", p(0, -1, None, "UNKNOWN_SERVER_ERROR"))],
}


@pytest.mark.broker_log_allows(r"no fetch session cache shard for session id")
@pytest.mark.parametrize("name", list(ROWS))
def test_rule_table_row(broker, name):
    assert ROWS[name](broker.bootstrap) == EXPECTED[name]


@pytest.mark.parametrize("name", list(ROWS))
def test_rule_table_row_on_kafka(kafka, name):
    """The same row against Apache Kafka 3.9.2: the expected answers are Kafka's own."""
    assert ROWS[name](kafka.bootstrap) == EXPECTED[name]


# --- real consumers ------------------------------------------------------------------------------------


def produce_many(bootstrap: str, topic: str, count: int) -> None:
    """``count`` more records to each partition, ten to a batch."""
    from tests.integration.clients import produce_confluent

    for partition in (0, 1):
        produce_confluent(bootstrap, topic, [(b"k%d" % i, b"p%d-%d" % (partition, i)) for i in range(count)],
                          partition=partition, **{"batch.num.messages": 10, "linger.ms": 0})


def create_topic(bootstrap: str) -> str:
    async def scenario() -> str:
        row = await new_row(bootstrap)
        await row.connection.close()
        return row.topic
    return asyncio.run(scenario())


def expected_values(count: int) -> dict[int, list[bytes]]:
    initial = {0: [b"v"] * INITIAL_RECORDS[0], 1: [b"v"] * INITIAL_RECORDS[1]}
    return {partition: initial[partition] + [b"p%d-%d" % (partition, i) for i in range(count)] for partition in (0, 1)}


def test_kafka_python_consumes_across_many_incremental_fetches(broker):
    """kafka-python (3.x) opens a fetch session and goes on incrementally: every record arrives,
    in order, over many small fetches, and the session reached a high epoch."""
    from kafka import KafkaConsumer, TopicPartition

    topic = create_topic(broker.bootstrap)
    produce_many(broker.bootstrap, topic, 300)
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False,
                             auto_offset_reset="earliest", max_partition_fetch_bytes=300, fetch_max_wait_ms=100)
    try:
        tps = [TopicPartition(topic, 0), TopicPartition(topic, 1)]
        consumer.assign(tps)
        got: dict[int, list[bytes]] = {0: [], 1: []}
        deadline = time.monotonic() + 60
        want = expected_values(300)
        while got != want and time.monotonic() < deadline:
            for tp, messages in consumer.poll(timeout_ms=500).items():
                got[tp.partition] += [m.value for m in messages]
        assert got == want
        handlers = consumer._fetcher._session_handlers
        assert handlers and all(h.next_metadata.session_id > 0 and h.next_metadata.epoch > 10
                                for h in handlers.values()), {n: h.next_metadata.epoch for n, h in handlers.items()}
    finally:
        consumer.close()


def test_confluent_kafka_consumes_across_many_fetches(broker):
    """librdkafka 2.16 sends SessionId 0, SessionEpoch -1 (no sessions): full fetches each time."""
    from confluent_kafka import Consumer, TopicPartition

    topic = create_topic(broker.bootstrap)
    produce_many(broker.bootstrap, topic, 300)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "fetch-sessions",
                         "enable.auto.commit": False, "fetch.max.bytes": 1024, "message.max.bytes": 1000,
                         "max.partition.fetch.bytes": 300,
                         "fetch.wait.max.ms": 100})
    try:
        consumer.assign([TopicPartition(topic, 0, 0), TopicPartition(topic, 1, 0)])
        got: dict[int, list[bytes]] = {0: [], 1: []}
        want = expected_values(300)
        deadline = time.monotonic() + 60
        while got != want and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None or message.error() is not None:
                continue
            got[message.partition()].append(message.value())
        assert got == want
    finally:
        consumer.close()


def main(bootstrap: str, *names: str) -> int:
    """Run the rows (all, or those named) against ``bootstrap``: each row's name, whether its
    answers are Kafka 3.9's expected ones, and the answers, one step a line."""
    differing = 0
    for name in names or ROWS:
        steps = ROWS[name](bootstrap)
        same = steps == EXPECTED[name]
        differing += not same
        print(f"{name}: {'as expected' if same else 'DIFFERS from ' + json.dumps(EXPECTED[name])}")
        for summary in steps:
            print("  " + json.dumps(summary))
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
