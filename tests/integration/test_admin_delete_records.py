"""``Admin.delete_records`` against a real broker: results, Kafka's error codes, routing and
retries, and KIP-1343's ``leader_only`` with its version rules.

``KafkaProxy`` sits between the admin client and the broker: it forwards frames, records every
request, points Metadata's broker addresses at itself (so routed requests pass through it too),
can advertise a lower DeleteRecords max version in ApiVersions (a broker without KIP-1343), and
can answer the first DeleteRecords with NOT_LEADER_OR_FOLLOWER (a leader that moved).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

from pybroker.client.admin import Admin, AdminError, DeletedRecords
from pybroker.common.errors import ErrorCode
from pybroker.protocol import codec
from pybroker.protocol.api_keys import ApiKey
from pybroker.types import TopicPartition
from tests.integration.clients import produce_confluent

# __consumer_offsets (created by the first FindCoordinator) with one partition, not fifty.
BROKER_OVERRIDES = {"offsets.topic.num.partitions": 1}

T = TypeVar("T")


# --- the proxy -----------------------------------------------------------------------------------

@dataclass
class SeenRequest:
    api_key: int
    api_version: int
    client_id: str | None
    frame: bytes  # without the size prefix

    def decode(self) -> Any:
        header, offset = codec.decode_request_header(memoryview(self.frame))
        return codec.decode_request(header.api_key, header.api_version, memoryview(self.frame), offset)


class KafkaProxy:
    """A frame-forwarding proxy to one broker on 127.0.0.1 (a free port)."""

    def __init__(self, upstream: str, delete_records_max_version: int | None = None,
                 fail_first_delete_records: int | None = None) -> None:
        host, _, port = upstream.rpartition(":")
        self.upstream = (host, int(port))
        self.delete_records_max_version = delete_records_max_version
        self.fail_first_delete_records = fail_first_delete_records
        self.requests: list[SeenRequest] = []
        self.port = 0
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._writers: set[asyncio.StreamWriter] = set()

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def seen(self, api_key: int) -> list[SeenRequest]:
        return [r for r in self.requests if r.api_key == api_key]

    async def start(self) -> KafkaProxy:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for writer in list(self._writers):
            writer.close()

    async def __aenter__(self) -> KafkaProxy:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self._writers.add(writer)
        upstream_writer: asyncio.StreamWriter | None = None
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection(*self.upstream)
            self._writers.add(upstream_writer)
            in_flight: dict[int, tuple[int, int]] = {}
            forward = asyncio.create_task(self._client_to_broker(reader, upstream_writer, in_flight))
            backward = asyncio.create_task(self._broker_to_client(upstream_reader, writer, in_flight))
            try:
                await asyncio.wait([forward, backward], return_when=asyncio.FIRST_COMPLETED)
            finally:
                forward.cancel()
                backward.cancel()
                await asyncio.gather(forward, backward, return_exceptions=True)
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            for w in (writer, upstream_writer):
                if w is not None:
                    w.close()
                    self._writers.discard(w)
            self._tasks.discard(task)

    @staticmethod
    async def _read_frame(reader: asyncio.StreamReader) -> bytes:
        size = int.from_bytes(await reader.readexactly(4), "big")
        return await reader.readexactly(size)

    async def _client_to_broker(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                                in_flight: dict[int, tuple[int, int]]) -> None:
        while True:
            frame = await self._read_frame(reader)
            header, _ = codec.decode_request_header(memoryview(frame))
            in_flight[header.correlation_id] = (header.api_key, header.api_version)
            self.requests.append(SeenRequest(header.api_key, header.api_version, header.client_id, frame))
            writer.write(len(frame).to_bytes(4, "big") + frame)
            await writer.drain()

    async def _broker_to_client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                                in_flight: dict[int, tuple[int, int]]) -> None:
        while True:
            frame = await self._read_frame(reader)
            correlation_id = int.from_bytes(frame[:4], "big", signed=True)
            api_key, version = in_flight.pop(correlation_id, (-1, -1))
            writer.write(self._rewrite(api_key, version, correlation_id, frame))
            await writer.drain()

    def _rewrite(self, api_key: int, version: int, correlation_id: int, frame: bytes) -> bytes:
        unchanged = len(frame).to_bytes(4, "big") + frame
        if api_key == ApiKey.API_VERSIONS:
            if int.from_bytes(frame[4:6], "big") != ErrorCode.NONE or self.delete_records_max_version is None:
                return unchanged
            _, response = codec.decode_response(api_key, version, memoryview(frame))
            for entry in response.api_keys:
                if entry.api_key == ApiKey.DELETE_RECORDS:
                    entry.max_version = min(entry.max_version, self.delete_records_max_version)
        elif api_key == ApiKey.METADATA:
            _, response = codec.decode_response(api_key, version, memoryview(frame))
            for broker in response.brokers:
                broker.host, broker.port = "127.0.0.1", self.port
        elif api_key == ApiKey.DELETE_RECORDS and self.fail_first_delete_records is not None:
            _, response = codec.decode_response(api_key, version, memoryview(frame))
            for topic in response.topics:
                for p in topic.partitions:
                    p.error_code, p.low_watermark, p.leader_log_start_offset = self.fail_first_delete_records, -1, -1
            self.fail_first_delete_records = None
        else:
            return unchanged
        return bytes(codec.encode_response(api_key, version, correlation_id, response))


@contextmanager
def proxy_in_thread(upstream: str, **options: Any) -> Iterator[KafkaProxy]:
    """A KafkaProxy on its own event loop in a thread (for clients in other processes)."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    proxy = KafkaProxy(upstream, **options)
    try:
        asyncio.run_coroutine_threadsafe(proxy.start(), loop).result(10)
        yield proxy
    finally:
        asyncio.run_coroutine_threadsafe(proxy.close(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


# --- helpers -------------------------------------------------------------------------------------

def run(make: Callable[[], Awaitable[T]]) -> T:
    async def main() -> T:
        return await make()

    return asyncio.run(main())


async def create_topic(bootstrap: str, name: str, partitions: int = 1, configs: dict[str, str] | None = None) -> None:
    async with Admin(bootstrap) as admin:
        await admin.create_topic(name, partitions, 1, configs)


def produce(bootstrap: str, topic: str, count: int, partition: int = 0) -> None:
    produce_confluent(bootstrap, topic, [(None, b"v%d" % i) for i in range(count)], partition=partition)


async def earliest(bootstrap: str, tp: TopicPartition) -> int:
    async with Admin(bootstrap) as admin:
        return (await admin.list_offsets([tp], "earliest"))[tp].offset


def error_of(outcome: DeletedRecords | AdminError) -> ErrorCode:
    assert isinstance(outcome, AdminError), outcome
    return outcome.error


def delete_records_versions(proxy: KafkaProxy) -> list[int]:
    return [r.api_version for r in proxy.seen(ApiKey.DELETE_RECORDS)]


# --- results -------------------------------------------------------------------------------------

def test_delete_moves_the_log_start_offset(broker, topic_name):
    tp = TopicPartition(topic_name, 0)
    run(lambda: create_topic(broker.bootstrap, topic_name))
    produce(broker.bootstrap, topic_name, 5)

    async def scenario() -> None:
        async with Admin(broker.bootstrap) as admin:
            assert await admin.delete_records({tp: 2}) == {tp: DeletedRecords(2, 2)}
            assert (await admin.list_offsets([tp], "earliest"))[tp].offset == 2
            # At or below the log start offset: success, nothing changes.
            assert await admin.delete_records({tp: 1}) == {tp: DeletedRecords(2, 2)}
            # -1 is the high watermark.
            assert await admin.delete_records({tp: -1}) == {tp: DeletedRecords(5, 5)}
            assert (await admin.list_offsets([tp], "earliest"))[tp].offset == 5
            assert (await admin.list_offsets([tp], "latest"))[tp].offset == 5

    run(scenario)


def test_kafka_error_codes_per_partition(broker, topic_name):
    good, compacted = TopicPartition(topic_name, 0), TopicPartition(topic_name + "-compact", 0)
    offsets_topic = TopicPartition("__consumer_offsets", 0)

    async def setup() -> None:
        await create_topic(broker.bootstrap, topic_name)
        await create_topic(broker.bootstrap, compacted.topic, configs={"cleanup.policy": "compact"})
        async with Admin(broker.bootstrap) as admin:
            await admin.find_coordinator("g-" + topic_name)  # creates __consumer_offsets

    run(setup)
    produce(broker.bootstrap, topic_name, 3)
    # A compacted topic refuses records without a key (Kafka's LogValidator).
    produce_confluent(broker.bootstrap, compacted.topic, [(b"k%d" % i, b"v%d" % i) for i in range(3)])

    missing_topic, missing_partition = TopicPartition(topic_name + "-missing", 0), TopicPartition(topic_name, 7)

    async def scenario() -> tuple[dict[TopicPartition, DeletedRecords | AdminError], list[DeletedRecords | AdminError]]:
        async with Admin(broker.bootstrap) as admin:
            results = await admin.delete_records({good: 1, missing_topic: 0, missing_partition: 0, offsets_topic: 0, compacted: 1})
            # Past the high watermark, and below -1. Final answers: neither is retried until the timeout.
            more = [(await admin.delete_records({good: offset}, timeout_ms=60000))[good] for offset in (4, -2)]
            return results, more

    results, (past_hw, below_minus_one) = run(scenario)
    assert list(results) == [good, missing_topic, missing_partition, offsets_topic, compacted]  # the order asked
    assert results[good] == DeletedRecords(1, 1)
    assert error_of(results[missing_topic]) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert error_of(results[missing_partition]) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert error_of(results[offsets_topic]) == ErrorCode.INVALID_TOPIC_EXCEPTION
    assert error_of(results[compacted]) == ErrorCode.POLICY_VIOLATION
    assert error_of(past_hw) == ErrorCode.OFFSET_OUT_OF_RANGE
    assert error_of(below_minus_one) == ErrorCode.OFFSET_OUT_OF_RANGE
    failure = results[offsets_topic]
    assert isinstance(failure, AdminError) and failure.resource == "partition __consumer_offsets-0"
    assert run(lambda: earliest(broker.bootstrap, good)) == 1  # the failures changed nothing
    assert run(lambda: earliest(broker.bootstrap, compacted)) == 0


def test_leader_only_true_and_false_against_v3(broker, topic_name):
    tp = TopicPartition(topic_name, 0)
    run(lambda: create_topic(broker.bootstrap, topic_name))
    produce(broker.bootstrap, topic_name, 6)

    async def scenario() -> None:
        async with KafkaProxy(broker.bootstrap) as proxy, Admin(proxy.bootstrap) as admin:
            assert await admin.delete_records({tp: 2}, leader_only=True) == {tp: DeletedRecords(2, 2)}
            assert await admin.delete_records({tp: 4}, leader_only=False) == {tp: DeletedRecords(4, 4)}
            assert await admin.delete_records({tp: -1}, leader_only=True) == {tp: DeletedRecords(6, 6)}
            sent = [r.decode() for r in proxy.seen(ApiKey.DELETE_RECORDS)]
            assert delete_records_versions(proxy) == [3, 3, 3]
            assert [r.leader_only for r in sent] == [True, False, True]
            assert [r.topics[0].partitions[0].offset for r in sent] == [2, 4, -1]

    run(scenario)


def test_v3_request_encodes_leader_only_on_the_wire(broker, topic_name):
    tp = TopicPartition(topic_name, 0)
    run(lambda: create_topic(broker.bootstrap, topic_name))
    produce(broker.bootstrap, topic_name, 2)

    async def scenario() -> None:
        async with KafkaProxy(broker.bootstrap) as proxy, Admin(proxy.bootstrap) as admin:
            await admin.delete_records({tp: 1}, leader_only=True, timeout_ms=1234)
            await admin.delete_records({tp: 2}, leader_only=False, timeout_ms=1234)
            frames = [r.frame for r in proxy.seen(ApiKey.DELETE_RECORDS)]
        assert len(frames) == 2
        for frame, flag in zip(frames, (1, 0), strict=True):
            assert int.from_bytes(frame[0:2], "big") == ApiKey.DELETE_RECORDS
            assert int.from_bytes(frame[2:4], "big") == 3
            # v3 is flexible: the body ends TimeoutMs (int32), LeaderOnly (bool), no tagged fields.
            assert frame[-1] == 0
            assert frame[-2] == flag
            assert 0 < int.from_bytes(frame[-6:-2], "big") <= 1234

    run(scenario)


def test_partitions_are_sent_to_their_leader_in_one_request(broker, topic_name):
    other = topic_name + "-b"

    async def setup() -> None:
        await create_topic(broker.bootstrap, topic_name, partitions=3)
        await create_topic(broker.bootstrap, other)

    run(setup)
    for partition in range(3):
        produce(broker.bootstrap, topic_name, 4, partition)
    produce(broker.bootstrap, other, 4)
    wanted = {TopicPartition(topic_name, p): p + 1 for p in range(3)} | {TopicPartition(other, 0): -1}

    async def scenario() -> None:
        async with KafkaProxy(broker.bootstrap) as proxy, Admin(proxy.bootstrap) as admin:
            results = await admin.delete_records(wanted)
            assert results == {tp: DeletedRecords(o if o >= 0 else 4, o if o >= 0 else 4) for tp, o in wanted.items()}
            (request,) = [r.decode() for r in proxy.seen(ApiKey.DELETE_RECORDS)]
            assert {(t.name, p.partition_index, p.offset) for t in request.topics for p in t.partitions} == \
                {(tp.topic, tp.partition, o) for tp, o in wanted.items()}

    run(scenario)


def test_not_leader_is_retried_after_a_metadata_refresh(broker, topic_name):
    tp = TopicPartition(topic_name, 0)
    run(lambda: create_topic(broker.bootstrap, topic_name))
    produce(broker.bootstrap, topic_name, 3)

    async def scenario() -> None:
        options = {"fail_first_delete_records": ErrorCode.NOT_LEADER_OR_FOLLOWER}
        async with KafkaProxy(broker.bootstrap, **options) as proxy, Admin(proxy.bootstrap) as admin:
            assert await admin.delete_records({tp: 2}) == {tp: DeletedRecords(2, 2)}
            kinds = [r.api_key for r in proxy.requests if r.api_key in (ApiKey.METADATA, ApiKey.DELETE_RECORDS)]
            assert kinds == [ApiKey.METADATA, ApiKey.DELETE_RECORDS, ApiKey.METADATA, ApiKey.DELETE_RECORDS]

    run(scenario)


def test_leadership_errors_give_up_at_the_timeout(broker, topic_name):
    tp = TopicPartition(topic_name, 0)
    run(lambda: create_topic(broker.bootstrap, topic_name))

    async def scenario() -> None:
        options = {"fail_first_delete_records": ErrorCode.NOT_LEADER_OR_FOLLOWER}
        async with KafkaProxy(broker.bootstrap, **options) as proxy, Admin(proxy.bootstrap) as admin:
            # A zero timeout leaves no time for a retry: the leadership error is the answer.
            outcome = (await admin.delete_records({tp: 0}, timeout_ms=0))[tp]
            assert error_of(outcome) == ErrorCode.NOT_LEADER_OR_FOLLOWER
            assert len(proxy.seen(ApiKey.DELETE_RECORDS)) == 1

    run(scenario)


# --- brokers without KIP-1343 (DeleteRecords v0-v2) ----------------------------------------------

def test_leader_only_fails_against_a_v2_broker_and_sends_nothing(broker, topic_name):
    tp = TopicPartition(topic_name, 0)
    run(lambda: create_topic(broker.bootstrap, topic_name))
    produce(broker.bootstrap, topic_name, 3)

    async def scenario() -> None:
        async with KafkaProxy(broker.bootstrap, delete_records_max_version=2) as proxy, Admin(proxy.bootstrap) as admin:
            outcome = (await admin.delete_records({tp: 2}, leader_only=True))[tp]
            assert error_of(outcome) == ErrorCode.UNSUPPORTED_VERSION
            assert "v3" in outcome.message and "v2" in outcome.message
            assert proxy.seen(ApiKey.DELETE_RECORDS) == []

    run(scenario)
    assert run(lambda: earliest(broker.bootstrap, tp)) == 0


def test_without_leader_only_a_v2_broker_is_asked_at_v2(broker, topic_name):
    tp = TopicPartition(topic_name, 0)
    run(lambda: create_topic(broker.bootstrap, topic_name))
    produce(broker.bootstrap, topic_name, 3)

    async def scenario() -> None:
        async with KafkaProxy(broker.bootstrap, delete_records_max_version=2) as proxy, Admin(proxy.bootstrap) as admin:
            assert await admin.delete_records({tp: 2}, leader_only=False) == {tp: DeletedRecords(2, -1)}
            assert delete_records_versions(proxy) == [2]
            frame = proxy.seen(ApiKey.DELETE_RECORDS)[0].frame
            assert frame[-1] == 0 and 0 < int.from_bytes(frame[-5:-1], "big") <= 30000  # ends at TimeoutMs

    run(scenario)
    assert run(lambda: earliest(broker.bootstrap, tp)) == 2


def test_a_broker_without_delete_records_fails_every_partition(broker, topic_name):
    tp = TopicPartition(topic_name, 0)
    run(lambda: create_topic(broker.bootstrap, topic_name))

    async def scenario() -> None:
        # A max version below the client's minimum (v0) leaves no common version.
        async with KafkaProxy(broker.bootstrap, delete_records_max_version=-1) as proxy, Admin(proxy.bootstrap) as admin:
            assert error_of((await admin.delete_records({tp: 0}))[tp]) == ErrorCode.UNSUPPORTED_VERSION
            assert proxy.seen(ApiKey.DELETE_RECORDS) == []

    run(scenario)


# --- the other admin calls the CLIs use ----------------------------------------------------------

def test_create_topics_and_configs(broker, topic_name):
    names = [topic_name + "-a", topic_name + "-b"]

    async def scenario() -> None:
        async with Admin(broker.bootstrap) as admin:
            await admin.create_topics(names, 2, 1, {"retention.ms": "60000"})
            try:
                await admin.create_topics([names[0], topic_name + "-c"])
                raise AssertionError("creating an existing topic succeeded")
            except AdminError as e:
                assert e.error == ErrorCode.TOPIC_ALREADY_EXISTS
                assert set(e.failures) == {names[0]}
            assert {t.name: len(t.partitions) for t in await admin.describe_topics(names)} == dict.fromkeys(names, 2)
            await admin.create_partitions(names[0], 3)
            await admin.incremental_alter_configs(2, names[0], {"log.retention.min.timestamp": "1700000000000"},
                                                  ["retention.ms"])
            entries = {e.name: e for e in await admin.describe_configs(2, names[0])}
            assert entries["log.retention.min.timestamp"].value == "1700000000000"
            assert entries["log.retention.min.timestamp"].source_name == "DYNAMIC_TOPIC_CONFIG"
            assert entries["retention.ms"].source_name != "DYNAMIC_TOPIC_CONFIG"
            assert entries["log.retention.min.timestamp"].synonyms[0].source_name == "DYNAMIC_TOPIC_CONFIG"

    run(scenario)
