"""Fetch sessions through the real Fetch handler and the request dispatcher: encoded Fetch v7+
frames in, decoded responses out, over a replica manager hosting real logs in a tmp dir, a mock
clock and scheduler (the fetch purgatory's deadlines), and the broker's `FetchManager`.

What a client sees (Kafka 3.9's ``handleFetchRequest`` with ``FetchManager.newContext``): epoch
-1 answers every partition without a session whatever the id; epoch 0 opens a session; an
incremental fetch reads the whole session and answers only what changed, also when it waited
in the purgatory or was throttled; session errors answer no partitions.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from pybroker.common.cluster import LiveBroker, PartitionState
from pybroker.common.errors import ErrorCode as E
from pybroker.controller.requests import UpdateMetadata
from pybroker.log.log import Log
from pybroker.protocol import codec
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages import FetchRequest, FetchResponse
from pybroker.security.authorizer import AclOperation, AllowAllAuthorizer
from pybroker.security.principal import ANONYMOUS
from pybroker.server.config import BrokerConfig
from pybroker.server.dispatcher import RequestDispatcher
from pybroker.server.fetch_session import INT_MAX, FetchManager, FetchSessionCache
from pybroker.server.metadata_cache import MetadataCache
from pybroker.server.partition import Partition
from pybroker.server.quota.quota_managers import QuotaManagers
from pybroker.server.replica_manager import ReplicaManager
from pybroker.types import TopicPartition
from tests.mock_time import MockScheduler, MockTime
from tests.unit.batches import build_batch

LOCAL = 1
TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAA"
A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)
GONE = TopicPartition("gone", 0)


class DenyTopic(AllowAllAuthorizer):
    """Everything allowed but READ on one topic."""

    def __init__(self, topic: str) -> None:
        self.topic = topic

    def authorize(self, principal, host, operation, resource_type, name) -> bool:  # type: ignore[override]
        return not (operation == AclOperation.READ and name == self.topic)


class Connection(SimpleNamespace):
    def __init__(self) -> None:
        super().__init__(principal=ANONYMOUS, client_address="127.0.0.1", client_host="/127.0.0.1",
                         attributes={}, listener_name="PLAINTEXT", peer="127.0.0.1:4242", throttles=[])

    def throttle(self, ms: float, scheduler: Any, now: float) -> None:
        self.throttles.append(ms)


class Broker:
    """A broker as far as Fetch needs it: partitions a0, a1 and b0 led here, each with
    ``records`` one-record batches."""

    def __init__(self, tmp_path: Path, records: int = 1, slots: int = 1000) -> None:
        self.config = BrokerConfig()
        self.time = MockTime()
        self.scheduler = MockScheduler(self.time)
        cache = self.metadata_cache = MetadataCache(LOCAL)
        tps = [A0, A1, B0]
        cache.update_metadata(UpdateMetadata(LOCAL, 1, -1, [
            PartitionState(tp, 1, LOCAL, 0, [LOCAL], 0, [LOCAL]) for tp in tps], [LiveBroker(LOCAL, ())], {}))
        self.replica_manager = ReplicaManager(LOCAL, None, cache, self.time, self.scheduler)  # type: ignore[arg-type]
        for tp in tps:
            log = Log(str(tmp_path / str(tp)), tp, BrokerConfig().log_config({}))
            partition = Partition(tp, TOPIC_ID, LOCAL, log)
            partition.make_leader(PartitionState(tp, 0, LOCAL, 0, [LOCAL], 0, [LOCAL]), now_ms=0)
            self.replica_manager.partitions[tp] = partition
            self.append(tp, records)
        self.authorizer: Any = AllowAllAuthorizer()
        self.fetch_manager = FetchManager(self.time, FetchSessionCache.create(slots))
        self.quotas: Any = SimpleNamespace(enabled=False)  # no client quotas
        self.dispatcher = RequestDispatcher(self)  # type: ignore[arg-type]
        self.connection = Connection()
        self._correlation = 0

    def append(self, tp: TopicPartition, count: int = 1) -> None:
        partition = self.replica_manager.partitions[tp]
        for _ in range(count):
            batch = build_batch([(None, b"v%d" % partition.log.log_end_offset)])
            partition.append_records_to_leader(memoryview(bytearray(batch)), required_acks=1, now_ms=0)
        self.replica_manager.complete_delayed_operations(tp)

    def send(self, request: FetchRequest, version: int = 12) -> Any:
        """The dispatcher's reply: an encoded frame now, or a future of it."""
        self._correlation += 1
        frame = codec.encode_request(ApiKey.FETCH, version, self._correlation, "test", request)[4:]
        return self.dispatcher(frame, self.connection)  # type: ignore[arg-type]

    async def fetch(self, session_id: int, epoch: int, offsets: dict[TopicPartition, int] | None = None,
                    forget: Iterable[TopicPartition] = (), version: int = 12, **fields: Any) -> FetchResponse:
        reply = self.send(fetch_request(session_id, epoch, offsets or {}, forget, **fields), version)
        return decode(await reply if asyncio.isfuture(reply) else reply, version)


def fetch_request(session_id: int, epoch: int, offsets: dict[TopicPartition, int], forget: Iterable[TopicPartition] = (),
                  max_wait_ms: int = 0, min_bytes: int = 1, replica_id: int = -1) -> FetchRequest:
    topics: list[FetchRequest.FetchTopic] = []
    for tp, offset in offsets.items():
        if not topics or topics[-1].topic != tp.topic:
            topics.append(FetchRequest.FetchTopic(topic=tp.topic, partitions=[]))
        topics[-1].partitions.append(FetchRequest.FetchPartition(partition=tp.partition, fetch_offset=offset,
                                                                 partition_max_bytes=1 << 20))
    forgotten: dict[str, list[int]] = {}
    for tp in forget:
        forgotten.setdefault(tp.topic, []).append(tp.partition)
    return FetchRequest(replica_id=replica_id, max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=1 << 20,
                        isolation_level=0, session_id=session_id, session_epoch=epoch, topics=topics,
                        forgotten_topics_data=[FetchRequest.ForgottenTopic(topic=t, partitions=p)
                                               for t, p in forgotten.items()])


def decode(frame: Any, version: int) -> FetchResponse:
    _, response = codec.decode_response(ApiKey.FETCH, version, memoryview(bytes(frame))[4:])  # regions read
    return response


def listed(response: FetchResponse) -> list[tuple[str, int, int, int, int]]:
    """(topic, partition, error, high watermark, record bytes) of every partition, in order."""
    return [(t.topic, p.partition_index, p.error_code, p.high_watermark, len(p.records or b""))
            for t in response.responses for p in t.partitions]


def names(response: FetchResponse) -> list[TopicPartition]:
    return [TopicPartition(t.topic, p.partition_index) for t in response.responses for p in t.partitions]


def run(scenario: Any) -> Any:
    return asyncio.run(scenario())


def test_final_epoch_with_session_id_minus_1_answers_every_partition(tmp_path):
    """The issue: SessionId -1, SessionEpoch -1 is a full fetch without a session."""
    async def scenario():
        broker = Broker(tmp_path)
        response = await broker.fetch(-1, -1, {A0: 0, B0: 0})
        assert (response.error_code, response.session_id) == (E.NONE, 0)
        assert [row[:4] for row in listed(response)] == [("a", 0, 0, 1), ("b", 0, 0, 1)]
        assert all(row[4] > 0 for row in listed(response))
        assert broker.fetch_manager.cache.size == 0
    run(scenario)


def test_v7_to_v12_all_speak_sessions_and_v4_is_sessionless(tmp_path):
    async def scenario():
        broker = Broker(tmp_path)
        for version in range(7, 13):
            response = await broker.fetch(0, 0, {A0: 1}, version=version)  # at the log end
            assert response.session_id > 0 and names(response) == [A0], version
            again = await broker.fetch(response.session_id, 1, version=version)
            assert (again.error_code, again.session_id, names(again)) == (E.NONE, response.session_id, [])
        response = await broker.fetch(0, 0, {A0: 0}, version=4)  # no session fields: LEGACY (0, -1)
        assert names(response) == [A0]
    run(scenario)


def test_a_session_answers_only_what_changed_and_reads_partitions_not_listed(tmp_path):
    async def scenario():
        broker = Broker(tmp_path)
        full = await broker.fetch(0, 0, {A0: 0, A1: 0, B0: 0})
        session = full.session_id
        assert session > 0 and names(full) == [A0, A1, B0]
        # Nothing new: an empty incremental response in the same session.
        first = await broker.fetch(session, 1, {A0: 1, A1: 1, B0: 1})
        assert (first.error_code, first.session_id, names(first)) == (E.NONE, session, [])
        # b0 grows; the request lists nothing: the session's partitions are read at their offsets.
        broker.append(B0)
        second = await broker.fetch(session, 2)
        assert [row[:4] for row in listed(second)] == [("b", 0, 0, 2)] and listed(second)[0][4] > 0
        third = await broker.fetch(session, 3, {B0: 2})
        assert names(third) == []
    run(scenario)


def test_forgotten_partitions_leave_the_session_and_an_emptied_session_closes(tmp_path):
    async def scenario():
        broker = Broker(tmp_path)
        session = (await broker.fetch(0, 0, {A0: 1, B0: 1})).session_id
        response = await broker.fetch(session, 1, {A1: 1}, forget=[A0])
        assert names(response) == [A1]  # added: sent with its first answer
        assert list(broker.fetch_manager.cache.get(session).partition_map) == [B0, A1]
        broker.append(A0)
        assert names(await broker.fetch(session, 2)) == []  # a0 is no longer read
        closing = await broker.fetch(session, 3, forget=[B0, A1])
        assert (closing.error_code, closing.session_id, names(closing)) == (E.NONE, 0, [])
        assert broker.fetch_manager.cache.size == 0
    run(scenario)


def test_session_errors_answer_no_partitions(tmp_path):
    async def scenario():
        broker = Broker(tmp_path)
        unknown = await broker.fetch(123, 1, {A0: 0})
        assert (unknown.error_code, unknown.session_id, unknown.responses) == (E.FETCH_SESSION_ID_NOT_FOUND, 0, [])
        zero = await broker.fetch(0, 5, {A0: 0})
        assert zero.error_code == E.FETCH_SESSION_ID_NOT_FOUND
        session = (await broker.fetch(0, 0, {A0: 0})).session_id
        wrong = await broker.fetch(session, 2, {A0: 0})
        assert (wrong.error_code, wrong.session_id, wrong.responses) == (E.INVALID_FETCH_SESSION_EPOCH, 0, [])
        assert (await broker.fetch(session, 1)).error_code == E.NONE  # the session survived
    run(scenario)


def test_a_session_id_no_shard_covers_is_unknown_server_error_as_in_kafka(tmp_path):
    async def scenario():
        broker = Broker(tmp_path)
        response = await broker.fetch(INT_MAX, -1, {A0: 0})
        assert (response.error_code, response.session_id) == (E.UNKNOWN_SERVER_ERROR, INT_MAX)
        assert [row[:4] for row in listed(response)] == [("a", 0, E.UNKNOWN_SERVER_ERROR, -1)]
    run(scenario)


def test_a_full_fetch_closes_the_session_it_names(tmp_path):
    async def scenario():
        broker = Broker(tmp_path)
        session = (await broker.fetch(0, 0, {A0: 0})).session_id
        reopened = await broker.fetch(session, 0, {A0: 0})
        assert reopened.session_id not in (0, session)
        closed = await broker.fetch(reopened.session_id, -1, {A0: 0})
        assert (closed.session_id, names(closed)) == (0, [A0])
        assert broker.fetch_manager.cache.size == 0
        assert (await broker.fetch(reopened.session_id, 1)).error_code == E.FETCH_SESSION_ID_NOT_FOUND
    run(scenario)


def test_a_parked_incremental_fetch_answers_the_session_partition_that_grew(tmp_path):
    """The context is made on arrival, the response when the purgatory completes the read: the
    partition that received records, though the request did not list it."""
    async def scenario():
        broker = Broker(tmp_path)
        session = (await broker.fetch(0, 0, {A0: 1, A1: 1, B0: 1})).session_id
        reply = broker.send(fetch_request(session, 1, {}, max_wait_ms=30_000))
        assert asyncio.isfuture(reply)
        await asyncio.sleep(0)
        assert not reply.done() and broker.fetch_manager.cache.get(session).epoch == 2
        broker.append(A1)
        response = decode(await asyncio.wait_for(reply, 5), 12)
        assert [row[:4] for row in listed(response)] == [("a", 1, 0, 2)] and response.session_id == session
        assert broker.fetch_manager.cache.get(session).partition_map[A1].high_watermark == 2
        assert list(broker.fetch_manager.cache.get(session).partition_map) == [A0, B0, A1]
        # A parked fetch that times out answers nothing changed.
        reply = broker.send(fetch_request(session, 2, {A1: 2}, max_wait_ms=500))
        await asyncio.sleep(0)
        await broker.scheduler.advance(500)
        response = decode(await asyncio.wait_for(reply, 5), 12)
        assert (response.error_code, response.session_id, names(response)) == (E.NONE, session, [])
    run(scenario)


def test_refused_and_unknown_partitions_come_last_and_in_every_incremental_response(tmp_path):
    async def scenario():
        broker = Broker(tmp_path)
        broker.authorizer = DenyTopic("b")
        full = await broker.fetch(0, 0, {B0: 0, GONE: 0, A0: 0})
        assert [row[:3] for row in listed(full)] == [
            ("a", 0, E.NONE), ("b", 0, E.TOPIC_AUTHORIZATION_FAILED), ("gone", 0, E.UNKNOWN_TOPIC_OR_PARTITION)]
        session = full.session_id
        again = await broker.fetch(session, 1, {A0: 1})
        assert [row[:3] for row in listed(again)] == [
            ("b", 0, E.TOPIC_AUTHORIZATION_FAILED), ("gone", 0, E.UNKNOWN_TOPIC_OR_PARTITION)]
        broker.authorizer = AllowAllAuthorizer()
        allowed = await broker.fetch(session, 2)
        assert [row[:3] for row in listed(allowed)] == [("b", 0, E.NONE), ("gone", 0, E.UNKNOWN_TOPIC_OR_PARTITION)]
    run(scenario)


def test_duplicate_partitions_in_a_request_are_answered_once(tmp_path):
    async def scenario():
        broker = Broker(tmp_path)
        request = fetch_request(0, -1, {A0: 0})
        request.topics.append(FetchRequest.FetchTopic(topic="a", partitions=[
            FetchRequest.FetchPartition(partition=0, fetch_offset=1, partition_max_bytes=1 << 20)]))
        frame = broker.send(request)
        response = decode(frame, 12)
        assert [row[:3] for row in listed(response)] == [("a", 0, E.NONE)]
        assert listed(response)[0][4] == 0  # the later entry (offset 1, the log end) won
    run(scenario)


def test_a_follower_session_is_privileged(tmp_path):
    async def scenario():
        broker = Broker(tmp_path)
        response = await broker.fetch(0, 0, {}, replica_id=2)
        session = broker.fetch_manager.cache.get(response.session_id)
        assert session is not None and session.privileged
        # pybroker's own replica fetcher stays sessionless: (0, -1) answers session id 0.
        assert (await broker.fetch(0, -1, {}, replica_id=2)).session_id == 0
    run(scenario)


def test_a_throttled_incremental_fetch_keeps_its_session_and_sends_the_data_later(tmp_path):
    """Kafka's getThrottledResponse: the session's id, no partitions, nothing updated: the next
    fetch of the session reports what the throttled one would have."""
    async def scenario():
        broker = Broker(tmp_path)
        quotas = QuotaManagers(BrokerConfig({"node.id": "1"}), 1, broker.time, broker.scheduler)
        quotas.update_quota_config("clients", "<default>", {"consumer_byte_rate": "100"})
        broker.quotas = quotas
        full = await broker.fetch(0, 0, {A0: 1})  # at the log end: no bytes, not throttled
        session = full.session_id
        assert full.throttle_time_ms == 0 and session > 0 and names(full) == [A0]
        broker.append(A0, 20)
        throttled = await broker.fetch(session, 1)
        assert throttled.throttle_time_ms > 0 and broker.connection.throttles
        assert (throttled.error_code, throttled.session_id, throttled.responses) == (E.NONE, session, [])
        assert broker.fetch_manager.cache.get(session).partition_map[A0].high_watermark == 1
        quotas.update_quota_config("clients", "<default>", {})
        later = await broker.fetch(session, 2)
        assert [row[:4] for row in listed(later)] == [("a", 0, 0, 21)] and listed(later)[0][4] > 0
        # A throttled full fetch opens no session.
        quotas.update_quota_config("clients", "<default>", {"consumer_byte_rate": "1"})
        await broker.fetch(0, -1, {A0: 0, A1: 0, B0: 0})
        before = broker.fetch_manager.cache.size
        refused = await broker.fetch(0, 0, {A0: 0})
        assert (refused.session_id, refused.responses) == (0, []) and refused.throttle_time_ms > 0
        assert broker.fetch_manager.cache.size == before
    run(scenario)


def test_the_brokers_fetch_max_bytes_lowers_the_requests_limit(tmp_path):
    """Kafka's ``fetch.max.bytes``: a Fetch asking for 1 MiB gets at most the broker's limit."""
    async def scenario():
        broker = Broker(tmp_path, records=40)
        everything = sum(row[4] for row in listed(await broker.fetch(-1, -1, {A0: 0, B0: 0})))
        assert everything > 2 * 1024
        broker.config = BrokerConfig({"fetch.max.bytes": "1024"})
        limited = sum(row[4] for row in listed(await broker.fetch(-1, -1, {A0: 0, B0: 0})))
        assert 0 < limited <= 1024
    run(scenario)
