"""Client quotas and replication throttles on a mock clock: Kafka's windowed rate, the throttle
time formula, the precedence of the eight (user, client-id) entities, the request dispatcher's
recording and throttle_time_ms, connection muting, and the admin semantics of
DescribeClientQuotas / AlterClientQuotas over the local store."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from pybroker.common.errors import ErrorCode
from pybroker.controller.local_store import LocalStore
from pybroker.controller.store import DEFAULT_ENTITY, StoreListener
from pybroker.network.connection import KafkaConnection
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages import (
    FetchResponse,
    MetadataResponse,
    ProduceRequest,
    ProduceResponse,
)
from pybroker.security.principal import KafkaPrincipal
from pybroker.server.config import BrokerConfig
from pybroker.server.quota.admin import (
    FilterComponent,
    QuotaOp,
    QuotaRequestError,
    alter_client_quotas,
    describe_client_quotas,
)
from pybroker.server.quota.client_quota_manager import ClientQuotaManager
from pybroker.server.quota.entities import QuotaEntity, format_quota_value
from pybroker.server.quota.quota_managers import QuotaManagers
from pybroker.server.quota.rate import Rate, throttle_time_ms
from pybroker.server.quota.replication_quota_manager import ALL_REPLICAS, parse_throttled_partitions
from pybroker.types import TopicPartition
from tests.mock_time import MockScheduler, MockTime

D = DEFAULT_ENTITY


# --- the windowed rate ---------------------------------------------------------------------------


def test_a_fresh_rate_counts_samples_minus_one_full_windows() -> None:
    rate = Rate(11, 1000)
    rate.record(1000, 0)
    assert rate.window_size(0) == 10_000  # Kafka's Rate: at least samples - 1 windows
    assert rate.measure(0) == pytest.approx(100.0)
    rate.record(1000, 5500)
    assert rate.window_size(5500) == 10_000 + 500  # 5 full windows elapsed + 5 assumed
    # At 15 s the first sample has expired (11 windows old): 1000 bytes over 9.5 s + 1 assumed window.
    assert rate.measure(15_000) == pytest.approx(1000 / 10.5)


def test_old_samples_expire() -> None:
    rate = Rate(3, 1000)
    rate.record(900, 0)
    rate.record(300, 1000)
    assert rate.total(1500) == 1200
    assert rate.total(3000) == 300  # the first sample is samples * window old
    assert rate.total(4500) == 0


def test_simple_rate_counts_at_least_one_window() -> None:
    rate = Rate(11, 1000, simple=True)
    rate.record(500, 0)
    assert rate.window_size(200) == 1000
    assert rate.measure(200) == pytest.approx(500.0)
    assert rate.window_size(4000) == 4000


def test_throttle_time_brings_the_rate_back_to_the_bound() -> None:
    rate = Rate(11, 1000)
    rate.record(2000, 0)  # 200 B/s over the 10 s window
    assert throttle_time_ms(rate, 100, 0) == 10_000  # (200 - 100) / 100 * 10 s
    assert throttle_time_ms(rate, 200, 0) == 0


# --- precedence ----------------------------------------------------------------------------------


def manager(**kwargs: Any) -> tuple[ClientQuotaManager, MockTime]:
    time = MockTime()
    return ClientQuotaManager("Produce", 11, 1, time, **kwargs), time


def test_the_eight_entities_in_kafkas_order() -> None:
    quotas, _ = manager()
    order = [
        QuotaEntity("alice", "app"), QuotaEntity("alice", D), QuotaEntity("alice", None), QuotaEntity(D, "app"),
        QuotaEntity(D, D), QuotaEntity(D, None), QuotaEntity(None, "app"), QuotaEntity(None, D),
    ]
    for i, entity in enumerate(order):
        quotas.update_quota(entity, float(i + 1))
    for i, entity in enumerate(order):
        assert quotas.quota("alice", "app") == i + 1, entity
        quotas.update_quota(entity, None)
    assert quotas.quota("alice", "app") is None
    assert not quotas.quotas_enabled


def test_user_default_applies_before_client_quotas() -> None:
    quotas, _ = manager()
    quotas.update_quota(QuotaEntity(None, "app"), 10)
    quotas.update_quota(QuotaEntity(D, None), 20)
    assert quotas.quota("alice", "app") == 20
    assert quotas.quota("bob", "other") == 20
    quotas.update_quota(QuotaEntity(D, None), None)
    assert quotas.quota("alice", "app") == 10
    assert quotas.quota("alice", "other") is None


def test_a_user_quota_is_shared_by_the_users_clients_and_a_default_is_not() -> None:
    quotas, time = manager()
    quotas.update_quota(QuotaEntity("alice", None), 100)
    quotas.update_quota(QuotaEntity(None, D), 100)
    assert quotas.record_and_get_throttle_time_ms("alice", "a", 1000, time.monotonic_ms()) == 0
    # The same user under another client id shares the 1000 bytes already recorded.
    assert quotas.record_and_get_throttle_time_ms("alice", "b", 1000, time.monotonic_ms()) == 10_000
    # Under the client-id default each client id has its own rate.
    assert quotas.record_and_get_throttle_time_ms("ANONYMOUS", "x", 1000, time.monotonic_ms()) == 0
    assert quotas.record_and_get_throttle_time_ms("ANONYMOUS", "y", 1000, time.monotonic_ms()) == 0


def test_request_quota_throttle_is_capped_at_one_window() -> None:
    quotas, time = manager(max_throttle_ms=1000)
    quotas.update_quota(QuotaEntity(None, D), 1.0)
    assert quotas.record_and_get_throttle_time_ms("u", "c", 500.0, time.monotonic_ms()) == 1000


def test_max_value_in_quota_window() -> None:
    quotas, _ = manager()
    assert quotas.max_value_in_quota_window("u", "c") == float("inf")
    quotas.update_quota(QuotaEntity(None, "c"), 1000)
    assert quotas.max_value_in_quota_window("u", "c") == 10_000


def test_quota_configs_from_the_store_names() -> None:
    time = MockTime()
    quotas = QuotaManagers(BrokerConfig({"node.id": "1"}), 1, time, MockScheduler(time))
    assert not quotas.enabled
    quotas.update_quota_config("users", "alice/clients/%3Capp%3E", {"producer_byte_rate": "1024",
                                                                   "SCRAM-SHA-256": "ignored"})
    assert quotas.enabled
    assert quotas.produce.overridden == {QuotaEntity("alice", "%3Capp%3E"): 1024.0}
    quotas.update_quota_config("users", "<default>", {"consumer_byte_rate": "10", "request_percentage": "50.5"})
    assert quotas.fetch.quota("bob", "x") == 10 and quotas.request.quota("bob", "x") == 50.5
    quotas.update_quota_config("clients", "<default>", {"request_percentage": "5"})
    quotas.update_quota_config("users", "alice/clients/%3Capp%3E", {})
    quotas.update_quota_config("users", "<default>", {})
    assert quotas.produce.overridden == {} and quotas.request.quota("bob", "x") == 5
    quotas.update_quota_config("clients", "<default>", {})
    assert not quotas.enabled


# --- replication quotas --------------------------------------------------------------------------


def test_throttled_replicas_lists() -> None:
    assert parse_throttled_partitions(["*"], 1) == ALL_REPLICAS
    assert parse_throttled_partitions(["0:1", "1:2", "2:1"], 1) == (0, 2)
    assert parse_throttled_partitions("0:1,1:2", 2) == (1,)
    assert parse_throttled_partitions([], 2) == ()


def test_a_throttled_follower_catching_up_stays_under_its_rate() -> None:
    """A follower loop on a mock clock: each round fetches 64 KiB unless the quota is exceeded
    (Kafka's shouldFollowerThrottle); over 60 simulated seconds the bytes fetched stay within
    the rate (plus one fetch)."""
    time = MockTime()
    quotas = QuotaManagers(BrokerConfig({"node.id": "2", "follower.replication.throttled.rate": "100000"}),
                           2, time, MockScheduler(time))
    follower = quotas.follower
    tp = TopicPartition("t", 0)
    assert follower.active and follower.is_throttled(tp, ["0:2"]) and not follower.is_throttled(tp, ["0:1"])
    fetched = 0
    for _ in range(6000):  # 10 ms rounds
        if not follower.is_quota_exceeded():
            follower.record(64 * 1024)
            fetched += 64 * 1024
        time.advance(10)
    assert 100_000 * 60 * 0.9 <= fetched <= 100_000 * 60 + 64 * 1024


# --- the dispatcher's throttling -----------------------------------------------------------------


class FakeConnection:
    def __init__(self) -> None:
        self.principal = KafkaPrincipal("User", "alice")
        self.throttles: list[float] = []

    def throttle(self, delay_ms: float, scheduler: Any, now_ms: float) -> None:
        self.throttles.append(delay_ms)


def throttler_with(props: dict[str, str]) -> tuple[QuotaManagers, MockTime]:
    time = MockTime()
    return QuotaManagers(BrokerConfig({"node.id": "1", **props}), 1, time, MockScheduler(time)), time


def test_produce_over_its_byte_rate_gets_throttle_time_and_a_muted_connection() -> None:
    quotas, _ = throttler_with({})
    quotas.update_quota_config("clients", "app", {"producer_byte_rate": "1000"})
    connection = FakeConnection()
    request = ProduceRequest(acks=1)
    first = quotas.throttler.complete(ApiKey.PRODUCE, request, ProduceResponse(), connection, "app", 5000, 0)
    assert first.throttle_time_ms == 0 and connection.throttles == []
    second = quotas.throttler.complete(ApiKey.PRODUCE, request, ProduceResponse(), connection, "app", 10_000, 0)
    assert second.throttle_time_ms == 5000 and connection.throttles == [5000]  # (1500 - 1000) / 1000 * 10 s
    # Another client id is not limited.
    other = quotas.throttler.complete(ApiKey.PRODUCE, request, ProduceResponse(), connection, "other", 10**6, 0)
    assert other.throttle_time_ms == 0


def test_a_throttled_fetch_returns_nothing_and_does_not_count() -> None:
    quotas, time = throttler_with({})
    quotas.update_quota_config("users", "<default>", {"consumer_byte_rate": "100"})
    connection = FakeConnection()
    request = type("R", (), {"replica_id": -1})()

    def response(size: int) -> FetchResponse:
        return FetchResponse(responses=[FetchResponse.FetchableTopicResponse(topic="t", partitions=[
            FetchResponse.PartitionData(partition_index=0, records=b"x" * size)])])

    assert quotas.throttler.complete(ApiKey.FETCH, request, response(1000), connection, "c", 0, 0).throttle_time_ms == 0
    throttled = quotas.throttler.complete(ApiKey.FETCH, request, response(1000), connection, "c", 0, 0)
    assert throttled.responses == [] and throttled.throttle_time_ms == 10_000
    tags, _ = quotas.fetch.resolve("alice", "c")
    assert quotas.fetch._rates[tags].total(time.monotonic_ms()) == 1000  # the throttled bytes were taken back


def test_request_percentage_counts_handler_time_and_exempts_inter_broker_apis() -> None:
    quotas, _ = throttler_with({"quota.window.size.seconds": "1"})
    quotas.update_quota_config("clients", "<default>", {"request_percentage": "10"})
    connection = FakeConnection()
    # 2 s of handler time (200 percent-seconds) against 10% over the 10 s window: 20% > 10%,
    # throttled (10 s by the formula), capped at one window (1 s).
    response = quotas.throttler.complete(ApiKey.METADATA, None, MetadataResponse(), connection, "c", 0, 2 * 10**9)
    assert response.throttle_time_ms == 1000
    exempt = quotas.throttler.complete(ApiKey.LEADER_AND_ISR, None, MetadataResponse(), connection, "c", 0, 10**9)
    assert exempt.throttle_time_ms == 0 and connection.throttles == [1000]
    follower_fetch = type("R", (), {"replica_id": 2})()
    assert quotas.throttler.complete(ApiKey.FETCH, follower_fetch, FetchResponse(), connection, "c", 0, 10**9) \
        .throttle_time_ms == 0


# --- connection muting ---------------------------------------------------------------------------


class FakeTransport:
    def __init__(self) -> None:
        self.paused = False
        self.written: list[bytes] = []

    def pause_reading(self) -> None:
        self.paused = True

    def resume_reading(self) -> None:
        self.paused = False

    def write(self, data: bytes) -> None:
        self.written.append(bytes(data))

    def writelines(self, data: list[bytes]) -> None:
        self.written.extend(bytes(d) for d in data)

    def get_extra_info(self, name: str) -> Any:
        return None

    def get_write_buffer_size(self) -> int:
        return 0

    def close(self) -> None:
        pass


def test_a_throttled_connection_reads_nothing_until_the_throttle_ends() -> None:
    async def main() -> None:
        time = MockTime()
        scheduler = MockScheduler(time)
        handled: list[bytes] = []

        def dispatch(frame: bytearray, connection: KafkaConnection) -> Any:
            handled.append(bytes(frame))
            if frame == b"first":
                connection.throttle(300, scheduler, time.monotonic_ms())
            return b"reply-" + bytes(frame)

        connection = KafkaConnection(dispatch, 1 << 20)
        transport = FakeTransport()
        connection.connection_made(transport)  # type: ignore[arg-type]
        frames = b"".join(len(f).to_bytes(4, "big") + f for f in (b"first", b"second", b"third"))
        buffer = connection.get_buffer(len(frames))
        buffer[: len(frames)] = frames
        connection.buffer_updated(len(frames))
        assert handled == [b"first"] and transport.paused and connection.throttled
        assert transport.written == [b"reply-first"]  # the throttled reply is sent at once
        await scheduler.advance(299)
        assert handled == [b"first"]
        await scheduler.advance(1)
        assert handled == [b"first", b"second", b"third"] and not transport.paused
        assert transport.written[1:] == [b"reply-second", b"reply-third"] or \
            b"".join(transport.written) == b"reply-firstreply-secondreply-third"

    asyncio.run(main())


# --- DescribeClientQuotas / AlterClientQuotas over the local store ---------------------------------


def store(tmp_path: Path) -> LocalStore:
    return LocalStore(str(tmp_path), "cluster", StoreListener())


def test_alter_and_describe_with_filters(tmp_path: Path) -> None:
    async def main() -> None:
        s = store(tmp_path)
        await s.set_user_configs("alice", {"SCRAM-SHA-256": "salt=x"})
        results = await alter_client_quotas(s, [
            ([("user", "alice")], [QuotaOp("producer_byte_rate", 1024, False)]),
            ([("user", None)], [QuotaOp("consumer_byte_rate", 2048, False)]),
            ([("user", "alice"), ("client-id", "app")], [QuotaOp("request_percentage", 50.5, False)]),
            ([("client-id", None)], [QuotaOp("producer_byte_rate", 10, False)]),
            ([("client-id", "app")], [QuotaOp("bogus", 1, False)]),
            ([("client-id", "app")], [QuotaOp("producer_byte_rate", -1, False)]),
            ([("client-id", "app")], [QuotaOp("producer_byte_rate", 1.5, False)]),
            ([], [QuotaOp("producer_byte_rate", 1, False)]),
            ([("ip", "1.2.3.4"), ("user", "a")], [QuotaOp("connection_creation_rate", 1, False)]),
        ], validate_only=False)
        assert results[:4] == [(ErrorCode.NONE, None)] * 4
        assert results[4:] == [
            (ErrorCode.INVALID_REQUEST, "Invalid configuration key bogus"),
            (ErrorCode.INVALID_REQUEST, "Quota producer_byte_rate must be greater than 0"),
            (ErrorCode.INVALID_REQUEST, "Configuration producer_byte_rate must be a LONG value"),
            (ErrorCode.INVALID_REQUEST, "Invalid empty client quota entity"),
            (ErrorCode.INVALID_REQUEST,
             "Invalid quota entity combination, IP entity should not be used with user/client ID entity."),
        ]
        # The user's SCRAM credentials are kept; the value is stored as Kafka stores a LONG.
        assert s.entity_configs("users")["alice"] == {"SCRAM-SHA-256": "salt=x", "producer_byte_rate": "1024"}

        everything = await describe_client_quotas(s, [], strict=False)
        assert ({"user": "alice"}, {"producer_byte_rate": 1024.0}) in everything
        assert ({"user": "alice", "client-id": "app"}, {"request_percentage": 50.5}) in everything
        assert len(everything) == 4
        exact = await describe_client_quotas(s, [FilterComponent("user", 0, "alice")], strict=True)
        assert exact == [({"user": "alice"}, {"producer_byte_rate": 1024.0})]
        loose = await describe_client_quotas(s, [FilterComponent("user", 0, "alice")], strict=False)
        assert len(loose) == 2
        defaults = await describe_client_quotas(s, [FilterComponent("user", 1, None)], strict=True)
        assert defaults == [({"user": None}, {"consumer_byte_rate": 2048.0})]
        clients = await describe_client_quotas(s, [FilterComponent("client-id", 2, None)], strict=False)
        assert {tuple(sorted(names)) for names, _ in clients} == {("client-id",), ("client-id", "user")}

        with pytest.raises(QuotaRequestError, match="Custom entity type 'x' not supported"):
            await describe_client_quotas(s, [FilterComponent("x", 2, None)], strict=False)
        with pytest.raises(QuotaRequestError, match="Duplicate user filter component entity type"):
            await describe_client_quotas(s, [FilterComponent("user", 2, None)] * 2, strict=False)

        # validate_only stores nothing; removing the last quota leaves only the credentials.
        await alter_client_quotas(s, [([("user", "alice")], [QuotaOp("producer_byte_rate", 1, True)])], True)
        assert s.entity_configs("users")["alice"]["producer_byte_rate"] == "1024"
        await alter_client_quotas(s, [([("user", "alice")], [QuotaOp("producer_byte_rate", 0, True)])], False)
        assert s.entity_configs("users")["alice"] == {"SCRAM-SHA-256": "salt=x"}

    asyncio.run(main())


def test_quota_values_print_as_java_doubles() -> None:
    assert [format_quota_value(v) for v in (1024, 50.5, 1e10, 0.0005)] == ["1024.0", "50.5", "1.0E10", "5.0E-4"]
