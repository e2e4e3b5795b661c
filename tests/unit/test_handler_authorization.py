"""Every API authorizes as Kafka's request handlers do (issue 17, point 4).

Two parts. The declaration: every registered handler module declares ``AUTHORIZES`` (the
(operation, resource type) pairs it may ask), its literal checks are declared, asking an
undeclared pair fails the request with UNKNOWN_SERVER_ERROR, and nothing in ``pybroker/`` but
`RequestContext` calls the authorizer. The behaviour: a real single broker in this process (its
real dispatcher, over a real socket, with encoded requests) whose authorizer is scripted to deny
chosen (operation, resource type, name) triples; each test checks Kafka's error codes and
response shapes, and that nothing happened for what was refused.
"""

from __future__ import annotations

import ast
import asyncio
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import pybroker
from pybroker.client.connection import BrokerConnection, KafkaClientError
from pybroker.common.errors import ErrorCode
from pybroker.protocol import codec
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages import (
    AddPartitionsToTxnRequest,
    CreateTopicsRequest,
    DeleteRecordsRequest,
    DeleteTopicsRequest,
    DescribeClusterRequest,
    DescribeConfigsRequest,
    DescribeGroupsRequest,
    FetchRequest,
    FindCoordinatorRequest,
    HeartbeatRequest,
    InitProducerIdRequest,
    JoinGroupRequest,
    ListGroupsRequest,
    ListOffsetsRequest,
    MetadataRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
    ProduceRequest,
    SyncGroupRequest,
)
from pybroker.security.authorizer import (
    CLUSTER_NAME,
    SUPPORTED_OPERATIONS,
    AclOperation,
    ResourceType,
    to_32_bit_field,
)
from pybroker.security.principal import ANONYMOUS
from pybroker.server import apis
from pybroker.server.apis import HANDLERS
from pybroker.server.broker import Broker
from pybroker.server.config import BrokerConfig
from pybroker.server.request_context import RequestContext, UndeclaredAuthorization
from pybroker.types import TopicPartition
from tests.unit.batches import build_batch
from tests.unit.test_dispatcher import _error_codes
from tests.unit.test_dispatcher import _request as sample_request
from tests.zookeeper import wait_for

E = ErrorCode
Op = AclOperation
RT = ResourceType
AUTH_ERRORS = {E.TOPIC_AUTHORIZATION_FAILED, E.GROUP_AUTHORIZATION_FAILED, E.CLUSTER_AUTHORIZATION_FAILED,
               E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}
OMITTED = -(2**31)
ANY = "*"  # in a scripted denial: every name


# --- the declaration ------------------------------------------------------------------------------


def undeclared_modules(registry: dict[int, Any]) -> list[str]:
    """The registered handler modules without a well-formed ``AUTHORIZES``."""
    bad = []
    for module in registry.values():
        declared = getattr(module, "AUTHORIZES", None)
        if not isinstance(declared, frozenset) or not all(
            isinstance(pair, tuple) and len(pair) == 2 and isinstance(pair[0], AclOperation)
            and isinstance(pair[1], ResourceType) and pair[0] in SUPPORTED_OPERATIONS.get(pair[1], ())
            for pair in declared
        ):
            bad.append(module.__name__)
    return bad


def test_every_registered_handler_declares_what_it_authorizes():
    assert undeclared_modules(HANDLERS) == []


def test_a_handler_without_a_declaration_is_found():
    fake = SimpleNamespace(__name__="fake_api")
    assert undeclared_modules({**HANDLERS, 99999: fake}) == ["fake_api"]
    wrong = SimpleNamespace(__name__="wrong_api", AUTHORIZES=frozenset({(Op.READ, RT.CLUSTER)}))  # not supported
    assert undeclared_modules({99999: wrong}) == ["wrong_api"]


def test_apis_kafka_never_authorizes_declare_nothing():
    assert HANDLERS[ApiKey.API_VERSIONS].AUTHORIZES == frozenset()


_ASKING = {"authorize", "authorize_cluster", "authorize_by_resource_type", "authorized_operations"}


def _literal(node: ast.expr, enum: type) -> Any:
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in (
        enum.__name__, "AclResource",
    ):
        return getattr(enum, node.attr)
    return None


def test_literal_checks_in_each_handler_are_declared():
    """Statically: every ``ctx.authorize*`` call with literal arguments names a declared pair (the
    runtime check catches the rest, on the paths the tests take)."""
    missing = []
    for module in HANDLERS.values():
        tree = ast.parse(Path(module.__file__).read_text())
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr in _ASKING and node.args):
                continue
            if node.func.attr == "authorized_operations":
                resource = _literal(node.args[0], ResourceType)
                pairs = [(op, resource) for op in SUPPORTED_OPERATIONS[resource]] if resource else []
            else:
                operation = _literal(node.args[0], AclOperation)
                resource = RT.CLUSTER if node.func.attr == "authorize_cluster" else (
                    _literal(node.args[1], ResourceType) if len(node.args) > 1 else None)
                pairs = [(operation, resource)] if operation is not None and resource is not None else []
            missing += [(module.__name__, node.lineno, pair) for pair in pairs if pair not in module.AUTHORIZES]
    assert missing == []


def test_only_the_request_context_calls_the_authorizer():
    """No code in pybroker/ reaches the authorizer's ``authorize*`` but `RequestContext`: calls go
    through a handler's ``ctx`` (pybroker/security/, where authorizers are implemented, may call
    its own methods)."""
    root = Path(pybroker.__file__).parent
    offenders = []
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root).as_posix()
        if relative == "server/request_context.py" or relative.startswith("security/"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr.startswith("authorize")):
                continue
            receiver = node.func.value
            if isinstance(receiver, ast.Name) and receiver.id == "ctx":
                continue
            offenders.append(f"{relative}:{node.lineno} {ast.unparse(node.func)}")
    assert offenders == []


def test_asking_an_undeclared_pair_raises():
    broker = SimpleNamespace(authorizer=Scripted())
    connection = SimpleNamespace(principal=ANONYMOUS, client_address="127.0.0.1")
    ctx = RequestContext(broker, SimpleNamespace(api_key=ApiKey.HEARTBEAT, api_version=4), connection,  # type: ignore[arg-type]
                         frozenset({(Op.READ, RT.GROUP)}))
    assert ctx.authorize(Op.READ, RT.GROUP, "g")
    with pytest.raises(UndeclaredAuthorization):
        ctx.authorize(Op.DELETE, RT.GROUP, "g")
    with pytest.raises(UndeclaredAuthorization):
        ctx.authorize_cluster(Op.ALTER)
    with pytest.raises(UndeclaredAuthorization):
        ctx.authorize_by_resource_type(Op.WRITE, RT.TOPIC)


def test_an_undeclared_check_fails_the_request_with_unknown_server_error(tmp_path, monkeypatch):
    monkeypatch.setattr(apis.heartbeat, "AUTHORIZES", frozenset())

    async def main() -> None:
        async with running_broker(tmp_path) as (broker, conn):
            response = await conn.send(ApiKey.HEARTBEAT, HeartbeatRequest(
                group_id="g", generation_id=1, member_id="m", group_instance_id=None), 4)
            assert response.error_code == E.UNKNOWN_SERVER_ERROR

    asyncio.run(main())


# --- the harness ----------------------------------------------------------------------------------


class Scripted:
    """An `Authorizer` that denies chosen (operation, resource type, name) triples (name ``*``:
    any name) and records every question."""

    def __init__(self, *deny: tuple[AclOperation, ResourceType, str]) -> None:
        self.deny = set(deny)
        self.asked: list[tuple[AclOperation, ResourceType, str | None]] = []

    def _denied(self, operation: AclOperation, resource_type: ResourceType, name: str) -> bool:
        return bool({(operation, resource_type, name), (operation, resource_type, ANY)} & self.deny)

    def authorize(self, principal, host, operation, resource_type, name) -> bool:  # noqa: ANN001
        self.asked.append((operation, resource_type, name))
        return not self._denied(operation, resource_type, name)

    def authorize_by_resource_type(self, principal, host, operation, resource_type) -> bool:  # noqa: ANN001
        self.asked.append((operation, resource_type, None))
        return not self._denied(operation, resource_type, ANY)


class DenyAll(Scripted):
    def _denied(self, operation: AclOperation, resource_type: ResourceType, name: str) -> bool:
        return True


@asynccontextmanager
async def running_broker(tmp_path: Path, **props: str) -> AsyncIterator[tuple[Broker, BrokerConnection]]:
    """A single broker (its own controller, local store) in this process, and a connection to it."""
    broker = Broker(BrokerConfig({
        "log.dirs": str(tmp_path / "logs"), "listeners": "PLAINTEXT://127.0.0.1:0", "num.partitions": "2",
        "offsets.topic.num.partitions": "1", "transaction.state.log.num.partitions": "1",
        "group.initial.rebalance.delay.ms": "0", **props,
    }))
    await broker.start()
    host, port = broker.socket_server.bound[0]
    connection = BrokerConnection(host, port)
    try:
        await connection.connect()
        yield broker, connection
    finally:
        await connection.close()
        await broker.shutdown()


async def create_topics(conn: BrokerConnection, *names: str, partitions: int = 2) -> None:
    response = await conn.send(ApiKey.CREATE_TOPICS, CreateTopicsRequest(topics=[
        CreateTopicsRequest.CreatableTopic(name=name, num_partitions=partitions, replication_factor=1, assignments=[],
                                           configs=[])
        for name in names
    ], timeout_ms=10000, validate_only=False), 7)
    assert [t.error_code for t in response.topics] == [E.NONE] * len(names)


async def group_coordinator_ready(conn: BrokerConnection, group_id: str = "g") -> None:
    """Creates ``__consumer_offsets`` (FindCoordinator) and waits until this broker coordinates."""
    deadline = asyncio.get_running_loop().time() + 10
    while True:
        found = await conn.send(ApiKey.FIND_COORDINATOR, FindCoordinatorRequest(key=group_id, key_type=0), 3)
        if found.error_code == E.NONE:
            probe = await conn.send(ApiKey.HEARTBEAT, HeartbeatRequest(
                group_id=group_id, generation_id=-1, member_id="probe", group_instance_id=None), 4)
            if probe.error_code not in (E.NOT_COORDINATOR, E.COORDINATOR_LOAD_IN_PROGRESS,
                                        E.COORDINATOR_NOT_AVAILABLE):
                return
        assert asyncio.get_running_loop().time() < deadline, "the group coordinator never became ready"
        await asyncio.sleep(0.02)


def batch(n: int = 3, **kwargs: Any) -> bytes:
    return build_batch([(None, b"v%d" % i) for i in range(n)], **kwargs)


async def produce(conn: BrokerConnection, data: dict[TopicPartition, bytes], acks: int = 1,
                  transactional_id: str | None = None) -> dict[TopicPartition, Any]:
    topics: dict[str, list[Any]] = {}
    for tp, records in data.items():
        topics.setdefault(tp.topic, []).append(ProduceRequest.PartitionProduceData(index=tp.partition, records=records))
    request = ProduceRequest(transactional_id=transactional_id, acks=acks, timeout_ms=5000, topic_data=[
        ProduceRequest.TopicProduceData(name=name, partition_data=parts) for name, parts in topics.items()
    ])
    response = await conn.send(ApiKey.PRODUCE, request, 9)
    return {TopicPartition(t.name, p.index): p for t in response.responses for p in t.partition_responses}


def log_end(broker: Broker, tp: TopicPartition) -> int:
    return broker.replica_manager.get_partition(tp).log.log_end_offset


def authorize_with(broker: Broker, authorizer: Scripted) -> Scripted:
    broker.authorizer = authorizer
    return authorizer


def run(main: Callable[[], Any]) -> None:
    asyncio.run(main())


# --- every API, everything denied -----------------------------------------------------------------

# APIs whose refusals are silent filters or bitfields (DescribeCluster: no check of its own).
_SILENT = {ApiKey.LIST_GROUPS, ApiKey.LIST_TRANSACTIONS, ApiKey.DESCRIBE_CLUSTER, ApiKey.API_VERSIONS}
# (APIs that authorize nothing, the SASL ones, are left out: nothing to refuse.)
SWEEP = [(key, module.VERSIONS[1]) for key, module in sorted(HANDLERS.items())
         if key not in _SILENT and module.AUTHORIZES]


def test_every_api_refuses_with_an_authorization_error_when_everything_is_denied(tmp_path):
    """A sampled request (every array populated) of every API's newest version, everything denied:
    the answer carries an authorization error (never UNKNOWN_SERVER_ERROR), and the handler asked
    only pairs it declares."""

    async def main() -> None:
        async with running_broker(tmp_path) as (broker, conn):
            await create_topics(conn, "s")
            failures = []
            for api_key, version in SWEEP:
                authorizer = authorize_with(broker, DenyAll())
                request = sample_request(api_key, version)
                if api_key == ApiKey.SYNC_GROUP:
                    request.protocol_type, request.protocol_name = "consumer", "range"
                for acl in ([request] if api_key == ApiKey.DESCRIBE_ACLS else
                            getattr(request, "creations", None) or getattr(request, "filters", None) or []):
                    # Kafka closes the connection on an UNKNOWN (0) enum: name real ones.
                    for field, value in (("resource_type", 2), ("resource_type_filter", 2), ("operation", 3),
                                         ("resource_pattern_type", 3), ("pattern_type_filter", 3),
                                         ("permission_type", 3)):
                        if hasattr(acl, field):
                            setattr(acl, field, value)
                if api_key in (ApiKey.DESCRIBE_CONFIGS, ApiKey.ALTER_CONFIGS, ApiKey.INCREMENTAL_ALTER_CONFIGS):
                    request.resources[0].resource_type = 2  # a topic (the sample's 0 is an unknown type)
                try:
                    response = await conn.send(api_key, request, version, timeout=10)
                except KafkaClientError as e:
                    failures.append(f"{ApiKey(api_key).name}: {e}")
                    conn = BrokerConnection(*broker.socket_server.bound[0])
                    await conn.connect()
                    continue
                codes = set(_error_codes(response, codec.RESPONSES[api_key].struct, version))
                declared = HANDLERS[api_key].AUTHORIZES
                undeclared = {(op, rt) for op, rt, _ in authorizer.asked} - declared
                if not codes & AUTH_ERRORS or E.UNKNOWN_SERVER_ERROR in codes or undeclared or not authorizer.asked:
                    failures.append(f"{ApiKey(api_key).name} v{version}: codes {codes}, undeclared {undeclared}")
            await conn.close()
            assert failures == []

    run(main)


# --- Produce --------------------------------------------------------------------------------------


def test_produce_write_per_topic_refused_before_anything_else(tmp_path):
    async def main() -> None:
        async with running_broker(tmp_path) as (broker, conn):
            await create_topics(conn, "open", "secret")
            authorizer = authorize_with(broker, Scripted((Op.WRITE, RT.TOPIC, "secret")))
            results = await produce(conn, {
                TopicPartition("open", 0): batch(), TopicPartition("secret", 0): batch(),
                TopicPartition("secret", 7): batch(),  # no such partition: still 29
            })
            assert results[TopicPartition("open", 0)].error_code == E.NONE
            for tp in (TopicPartition("secret", 0), TopicPartition("secret", 7)):
                assert results[tp].error_code == E.TOPIC_AUTHORIZATION_FAILED
                assert results[tp].base_offset == -1
            assert log_end(broker, TopicPartition("open", 0)) == 3
            assert log_end(broker, TopicPartition("secret", 0)) == 0
            assert (Op.IDEMPOTENT_WRITE, RT.CLUSTER, CLUSTER_NAME) not in authorizer.asked  # not in 3.x

    run(main)


def test_produce_transactional_needs_write_on_the_transactional_id(tmp_path):
    async def main() -> None:
        async with running_broker(tmp_path) as (broker, conn):
            await create_topics(conn, "t")
            authorize_with(broker, Scripted((Op.WRITE, RT.TRANSACTIONAL_ID, "tx")))
            records = batch(producer_id=1, producer_epoch=0, base_sequence=0, attributes=0x10)
            results = await produce(conn, {TopicPartition("t", 0): records, TopicPartition("t", 1): records},
                                    transactional_id="tx")
            assert {r.error_code for r in results.values()} == {E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}
            assert all(r.error_message is None and r.base_offset == -1 for r in results.values())
            assert log_end(broker, TopicPartition("t", 0)) == 0

    run(main)


def test_produce_acks_0_refused_closes_the_connection(tmp_path):
    async def main() -> None:
        async with running_broker(tmp_path) as (broker, conn):
            await create_topics(conn, "secret")
            authorize_with(broker, Scripted((Op.WRITE, RT.TOPIC, "secret")))
            request = ProduceRequest(transactional_id=None, acks=0, timeout_ms=5000, topic_data=[
                ProduceRequest.TopicProduceData(name="secret", partition_data=[
                    ProduceRequest.PartitionProduceData(index=0, records=batch())])])
            await conn.send_without_response(ApiKey.PRODUCE, request, 9)
            with pytest.raises(KafkaClientError):
                await conn.send(ApiKey.METADATA, MetadataRequest(topics=[]), 12, timeout=5)
            assert log_end(broker, TopicPartition("secret", 0)) == 0

    run(main)


# --- Fetch, ListOffsets ---------------------------------------------------------------------------


def fetch_request(replica_id: int, *tps: TopicPartition) -> FetchRequest:
    by_topic: dict[str, list[int]] = {}
    for tp in tps:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return FetchRequest(replica_id=replica_id, max_wait_ms=5000, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
                        session_id=0, session_epoch=-1, forgotten_topics_data=[], rack_id="", topics=[
        FetchRequest.FetchTopic(topic=name, partitions=[
            FetchRequest.FetchPartition(partition=p, current_leader_epoch=-1, fetch_offset=0, log_start_offset=-1,
                                        partition_max_bytes=1 << 20, last_fetched_epoch=-1)
            for p in ps])
        for name, ps in by_topic.items()])


def fetched(response: Any) -> dict[TopicPartition, Any]:
    return {TopicPartition(t.topic, p.partition_index): p for t in response.responses for p in t.partitions}


def test_fetch_read_per_topic_and_cluster_action_for_followers(tmp_path):
    async def main() -> None:
        async with running_broker(tmp_path) as (broker, conn):
            await create_topics(conn, "open", "secret")
            await produce(conn, {TopicPartition("open", 0): batch(), TopicPartition("secret", 0): batch()})
            authorize_with(broker, Scripted((Op.READ, RT.TOPIC, "secret"), (Op.CLUSTER_ACTION, RT.CLUSTER, ANY)))
            open0, secret0, unknown = TopicPartition("open", 0), TopicPartition("secret", 0), TopicPartition("nope", 0)
            results = fetched(await conn.send(ApiKey.FETCH, fetch_request(-1, open0, secret0, unknown), 12))
            assert results[open0].error_code == E.NONE and len(results[open0].records) > 0
            assert results[secret0].error_code == E.TOPIC_AUTHORIZATION_FAILED
            assert results[secret0].high_watermark == -1 and not results[secret0].records
            assert results[unknown].error_code == E.UNKNOWN_TOPIC_OR_PARTITION
            # Only denied partitions: answered at once, not after max_wait_ms.
            started = asyncio.get_running_loop().time()
            results = fetched(await conn.send(ApiKey.FETCH, fetch_request(-1, secret0), 12))
            assert results[secret0].error_code == E.TOPIC_AUTHORIZATION_FAILED
            assert asyncio.get_running_loop().time() - started < 2
            # A follower without CLUSTER_ACTION: every partition refused, whatever the topic.
            results = fetched(await conn.send(ApiKey.FETCH, fetch_request(1, open0, secret0), 12))
            assert {r.error_code for r in results.values()} == {E.TOPIC_AUTHORIZATION_FAILED}

    run(main)


def test_list_offsets_describe_per_topic_unauthorized_last(tmp_path):
    async def main() -> None:
        async with running_broker(tmp_path) as (broker, conn):
            await create_topics(conn, "open", "secret")
            authorize_with(broker, Scripted((Op.DESCRIBE, RT.TOPIC, "secret"), (Op.DESCRIBE, RT.TOPIC, "ghost")))
            request = ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[
                ListOffsetsRequest.ListOffsetsTopic(name=name, partitions=[
                    ListOffsetsRequest.ListOffsetsPartition(partition_index=0, current_leader_epoch=-1, timestamp=-1)])
                for name in ("secret", "ghost", "open")])
            response = await conn.send(ApiKey.LIST_OFFSETS, request, 7)
            assert [t.name for t in response.topics] == ["open", "secret", "ghost"]
            assert response.topics[0].partitions[0].error_code == E.NONE
            for topic in response.topics[1:]:  # existing or not: 29, never 3
                p = topic.partitions[0]
                assert (p.error_code, p.offset, p.timestamp) == (E.TOPIC_AUTHORIZATION_FAILED, -1, -1)

    run(main)


# --- Metadata -------------------------------------------------------------------------------------


def metadata_request(names: list[str] | None, auto_create: bool = False, topic_ops: bool = False,
                     cluster_ops: bool = False) -> MetadataRequest:
    return MetadataRequest(
        topics=None if names is None else [MetadataRequest.MetadataRequestTopic(name=n) for n in names],
        allow_auto_topic_creation=auto_create, include_cluster_authorized_operations=cluster_ops,
        include_topic_authorized_operations=topic_ops)


def test_metadata_describe_filter(tmp_path):
    async def main() -> None:
        async with running_broker(tmp_path) as (broker, conn):
            await create_topics(conn, "open", "secret")
            authorize_with(broker, Scripted((Op.DESCRIBE, RT.TOPIC, "secret"), (Op.DESCRIBE, RT.TOPIC, "ghost")))
            everything = await conn.send(ApiKey.METADATA, metadata_request(None), 12)
            assert [t.name for t in everything.topics] == ["open"]  # silently omitted
            named = await conn.send(ApiKey.METADATA, metadata_request(["open", "secret", "ghost"]), 12)
            by_name = {t.name: t for t in named.topics}
            assert by_name["open"].error_code == E.NONE
            for name in ("secret", "ghost"):  # existence not disclosed
                t = by_name[name]
                assert (t.error_code, t.partitions, t.is_internal) == (E.TOPIC_AUTHORIZATION_FAILED, [], False)
                assert t.topic_id.int == 0
            # By topic id (v12): the id is kept, the name is not returned.
            secret_id = broker.metadata_cache.topic("secret").topic_id
            by_id = await conn.send(ApiKey.METADATA, MetadataRequest(
                topics=[MetadataRequest.MetadataRequestTopic(name=None, topic_id=secret_id)],
                allow_auto_topic_creation=False, include_topic_authorized_operations=False), 12)
            t = by_id.topics[0]
            assert (t.error_code, t.name, t.topic_id) == (E.TOPIC_AUTHORIZATION_FAILED, None, secret_id)

    run(main)


def test_metadata_auto_creation_needs_create(tmp_path):
    async def main() -> None:
        async with running_broker(tmp_path) as (broker, conn):
            authorizer = authorize_with(broker, Scripted((Op.CREATE, RT.CLUSTER, ANY), (Op.CREATE, RT.TOPIC, "denied")))
            response = await conn.send(ApiKey.METADATA, metadata_request(["denied", "allowed"], auto_create=True), 12)
            by_name = {t.name: t for t in response.topics}
            assert by_name["denied"].error_code == E.TOPIC_AUTHORIZATION_FAILED
            assert by_name["allowed"].error_code == E.LEADER_NOT_AVAILABLE  # created, not ready yet
            await wait_for(lambda: broker.metadata_cache.topic("allowed") is not None)
            assert broker.metadata_cache.topic("denied") is None
            assert (Op.CREATE, RT.CLUSTER, CLUSTER_NAME) in authorizer.asked
            # With CREATE on the cluster no topic is asked.
            authorizer = authorize_with(broker, Scripted())
            await conn.send(ApiKey.METADATA, metadata_request(["other"], auto_create=True), 12)
            assert (Op.CREATE, RT.TOPIC, "other") not in authorizer.asked
            await wait_for(lambda: broker.metadata_cache.topic("other") is not None)

    run(main)


def test_metadata_authorized_operations(tmp_path):
    async def main() -> None:
        async with running_broker(tmp_path) as (broker, conn):
            await create_topics(conn, "t")
            authorize_with(broker, Scripted((Op.DELETE, RT.TOPIC, "t"), (Op.ALTER, RT.CLUSTER, ANY)))
            response = await conn.send(ApiKey.METADATA, metadata_request(["t"], topic_ops=True, cluster_ops=True), 10)
            topic_ops = SUPPORTED_OPERATIONS[RT.TOPIC] - {Op.DELETE}
            assert response.topics[0].topic_authorized_operations == to_32_bit_field(topic_ops)
            assert response.cluster_authorized_operations == to_32_bit_field(SUPPORTED_OPERATIONS[RT.CLUSTER] - {Op.ALTER})
            # Not asked: the schema's default; cluster DESCRIBE denied: 0.
            authorize_with(broker, Scripted((Op.DESCRIBE, RT.CLUSTER, ANY)))
            response = await conn.send(ApiKey.METADATA, metadata_request(["t"], cluster_ops=True), 10)
            assert response.topics[0].topic_authorized_operations == OMITTED
            assert response.cluster_authorized_operations == 0
            # No authorizer: every supported operation (Kafka's 3576 for a topic).
            authorize_with(broker, Scripted())
            response = await conn.send(ApiKey.METADATA, metadata_request(["t"], topic_ops=True), 12)
            assert response.topics[0].topic_authorized_operations == 3576

    run(main)


# --- the controller's and brokers' requests -------------------------------------------------------


@pytest.mark.parametrize("api_key", [ApiKey.LEADER_AND_ISR, ApiKey.STOP_REPLICA, ApiKey.UPDATE_METADATA,
                                     ApiKey.CONTROLLED_SHUTDOWN, ApiKey.ALTER_PARTITION, ApiKey.WRITE_TXN_MARKERS])
def test_inter_broker_requests_need_cluster_action(tmp_path, api_key):
    async def main() -> None:
        async with running_broker(tmp_path) as (broker, conn):
            version = HANDLERS[api_key].VERSIONS[1]
            authorizer = authorize_with(broker, Scripted((Op.CLUSTER_ACTION, RT.CLUSTER, ANY)))
            response = await conn.send(api_key, sample_request(api_key, version), version)
            codes = set(_error_codes(response, codec.RESPONSES[api_key].struct, version))
            assert codes == {E.CLUSTER_AUTHORIZATION_FAILED}
            assert authorizer.asked == [(Op.CLUSTER_ACTION, RT.CLUSTER, CLUSTER_NAME)]

    run(main)


def test_the_brokers_own_controller_requests_are_not_authorized(tmp_path):
    """A single broker's controller reaches it in-process (no handler, no authorizer): with
    everything denied, topics are still created and led."""

    async def main() -> None:
        async with running_broker(tmp_path) as (broker, conn):
            authorizer = authorize_with(broker, DenyAll())
            topic_id = await broker.admin_manager.create_topic("internal-path", 1, 1, {})
            assert topic_id is not None
            assert await broker.admin_manager.wait_for_leaders(["internal-path"], 5000)
            assert authorizer.asked == []

    run(main)


# --- DeleteRecords, CreateTopics, DeleteTopics, CreatePartitions, configs ------------------------


def test_delete_records_needs_delete_and_deletes_nothing_without(tmp_path):
    async def main() -> None:
        async with running_broker(tmp_path) as (broker, conn):
            await create_topics(conn, "t")
            tp = TopicPartition("t", 0)
            await produce(conn, {tp: batch(5)})

            def request() -> DeleteRecordsRequest:
                return DeleteRecordsRequest(timeout_ms=5000, topics=[DeleteRecordsRequest.DeleteRecordsTopic(
                    name="t", partitions=[DeleteRecordsRequest.DeleteRecordsPartition(partition_index=0, offset=3)])])

            authorize_with(broker, Scripted((Op.DELETE, RT.TOPIC, "t")))
            p = (await conn.send(ApiKey.DELETE_RECORDS, request(), 2)).topics[0].partitions[0]
            assert (p.error_code, p.low_watermark) == (E.TOPIC_AUTHORIZATION_FAILED, -1)
            assert broker.replica_manager.get_partition(tp).log.log_start_offset == 0
            authorize_with(broker, Scripted())
            p = (await conn.send(ApiKey.DELETE_RECORDS, request(), 2)).topics[0].partitions[0]
            assert (p.error_code, p.low_watermark) == (E.NONE, 3)

    run(main)


def creatable(name: str) -> CreateTopicsRequest.CreatableTopic:
    return CreateTopicsRequest.CreatableTopic(name=name, num_partitions=1, replication_factor=1, assignments=[],
                                              configs=[])


def test_create_topics_needs_create_and_describe_configs_for_details(tmp_path):
    async def main() -> None:
        async with running_broker(tmp_path) as (broker, conn):
            authorizer = authorize_with(broker, Scripted((Op.CREATE, RT.CLUSTER, ANY), (Op.CREATE, RT.TOPIC, "no"),
                                                         (Op.DESCRIBE_CONFIGS, RT.TOPIC, "hidden")))
            response = await conn.send(ApiKey.CREATE_TOPICS, CreateTopicsRequest(
                topics=[creatable("no"), creatable("yes"), creatable("hidden"), creatable("dup"), creatable("dup")],
                timeout_ms=10000, validate_only=False), 7)
            by_name = {t.name: t for t in response.topics}
            assert (by_name["no"].error_code, by_name["no"].error_message) == (E.TOPIC_AUTHORIZATION_FAILED,
                                                                               "Authorization failed.")
            assert broker.metadata_cache.topic("no") is None
            assert by_name["yes"].error_code == E.NONE and by_name["yes"].configs
            assert by_name["yes"].num_partitions == 1 and by_name["yes"].topic_config_error_code == E.NONE
            hidden = by_name["hidden"]
            assert hidden.error_code == E.NONE and broker.metadata_cache.topic("hidden") is not None
            assert (hidden.topic_config_error_code, hidden.configs, hidden.num_partitions) == (
                E.TOPIC_AUTHORIZATION_FAILED, [], -1)
            assert hidden.topic_id.int == 0
            assert by_name["dup"].error_code == E.INVALID_REQUEST  # duplicates before authorization
            assert not any(name == "dup" and op == Op.CREATE for op, _, name in authorizer.asked)
            # Kafka marks only the topics it may not describe (a refused one too): not these.
            assert (by_name["no"].topic_config_error_code, by_name["dup"].topic_config_error_code) == (E.NONE, E.NONE)

    run(main)


def test_delete_topics_needs_delete_and_describe_by_id(tmp_path):
    async def main() -> None:
        async with running_broker(tmp_path) as (broker, conn):
            await create_topics(conn, "kept", "by-id")
            kept_id = broker.metadata_cache.topic("by-id").topic_id
            authorize_with(broker, Scripted((Op.DELETE, RT.TOPIC, "kept"), (Op.DELETE, RT.TOPIC, "ghost"),
                                            (Op.DESCRIBE, RT.TOPIC, "by-id")))
            response = await conn.send(ApiKey.DELETE_TOPICS, DeleteTopicsRequest(topics=[
                DeleteTopicsRequest.DeleteTopicState(name="kept"), DeleteTopicsRequest.DeleteTopicState(name="ghost"),
                DeleteTopicsRequest.DeleteTopicState(name=None, topic_id=kept_id),
            ], timeout_ms=5000), 6)
            results = response.responses
            assert [(r.name, r.error_code) for r in results] == [
                ("kept", E.TOPIC_AUTHORIZATION_FAILED), ("ghost", E.TOPIC_AUTHORIZATION_FAILED),
                (None, E.TOPIC_AUTHORIZATION_FAILED)]
            assert results[2].topic_id == kept_id
            assert broker.metadata_cache.topic("kept") is not None and broker.metadata_cache.topic("by-id") is not None

    run(main)


def test_describe_configs_authorized_first_with_default_messages(tmp_path):
    async def main() -> None:
        async with running_broker(tmp_path) as (broker, conn):
            await create_topics(conn, "open")
            authorize_with(broker, Scripted((Op.DESCRIBE_CONFIGS, RT.TOPIC, "secret"),
                                            (Op.DESCRIBE_CONFIGS, RT.CLUSTER, ANY)))
            resources = [(2, "secret"), (4, str(broker.node_id)), (2, "open")]
            response = await conn.send(ApiKey.DESCRIBE_CONFIGS, DescribeConfigsRequest(resources=[
                DescribeConfigsRequest.DescribeConfigsResource(resource_type=kind, resource_name=name,
                                                               configuration_keys=None)
                for kind, name in resources], include_synonyms=False, include_documentation=False), 4)
            assert [(r.resource_name, r.error_code, r.error_message) for r in response.results] == [
                ("open", E.NONE, ""),
                ("secret", E.TOPIC_AUTHORIZATION_FAILED, "Topic authorization failed."),
                (str(broker.node_id), E.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed."),
            ]
            assert response.results[0].configs and not response.results[1].configs

    run(main)


# --- groups ---------------------------------------------------------------------------------------


def commit_request(group_id: str, *tps: TopicPartition, offset: int = 1) -> OffsetCommitRequest:
    by_topic: dict[str, list[int]] = {}
    for tp in tps:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return OffsetCommitRequest(group_id=group_id, generation_id_or_member_epoch=-1, member_id="",
                               group_instance_id=None, retention_time_ms=-1, topics=[
        OffsetCommitRequest.OffsetCommitRequestTopic(name=name, partitions=[
            OffsetCommitRequest.OffsetCommitRequestPartition(partition_index=p, committed_offset=offset,
                                                             committed_leader_epoch=-1, committed_metadata="")
            for p in ps])
        for name, ps in by_topic.items()])


def committed(broker: Broker, group_id: str) -> dict[TopicPartition, int]:
    error, offsets = broker.group_coordinator.handle_fetch_offsets(group_id, None)
    return {tp: o.offset for tp, o in offsets.items() if o is not None and o.offset >= 0}


def partition_errors(topics: Iterable[Any], index: str = "partition_index") -> dict[TopicPartition, int]:
    return {TopicPartition(t.name, getattr(p, index)): p.error_code for t in topics for p in t.partitions}


def test_offset_commit_group_then_topics(tmp_path):
    async def main() -> None:
        async with running_broker(tmp_path) as (broker, conn):
            await create_topics(conn, "open", "secret")
            await group_coordinator_ready(conn)
            open0, secret0, ghost0 = TopicPartition("open", 0), TopicPartition("secret", 0), TopicPartition("ghost", 0)
            authorize_with(broker, Scripted((Op.READ, RT.GROUP, "locked"), (Op.READ, RT.TOPIC, "secret"),
                                            (Op.READ, RT.TOPIC, "ghost")))
            response = await conn.send(ApiKey.OFFSET_COMMIT, commit_request("locked", open0, secret0), 8)
            assert set(partition_errors(response.topics).values()) == {E.GROUP_AUTHORIZATION_FAILED}
            assert committed(broker, "locked") == {}
            response = await conn.send(ApiKey.OFFSET_COMMIT, commit_request("g", open0, secret0, ghost0), 8)
            assert partition_errors(response.topics) == {
                open0: E.NONE, secret0: E.TOPIC_AUTHORIZATION_FAILED, ghost0: E.TOPIC_AUTHORIZATION_FAILED}
            assert committed(broker, "g") == {open0: 1}

    run(main)


def test_offset_fetch_shapes(tmp_path):
    async def main() -> None:
        async with running_broker(tmp_path) as (broker, conn):
            await create_topics(conn, "open", "secret")
            await group_coordinator_ready(conn)
            open0, secret0 = TopicPartition("open", 0), TopicPartition("secret", 0)
            await conn.send(ApiKey.OFFSET_COMMIT, commit_request("g", open0, secret0, offset=5), 8)
            authorize_with(broker, Scripted((Op.DESCRIBE, RT.GROUP, "locked"), (Op.DESCRIBE, RT.TOPIC, "secret")))
            named = [OffsetFetchRequest.OffsetFetchRequestTopic(name=t, partition_indexes=[0]) for t in ("open", "secret")]
            # v1: the group error has no field of its own; every requested partition carries it.
            v1 = await conn.send(ApiKey.OFFSET_FETCH, OffsetFetchRequest(group_id="locked", topics=named), 1)
            assert [(t.name, p.committed_offset, p.error_code) for t in v1.topics for p in t.partitions] == [
                ("open", -1, E.GROUP_AUTHORIZATION_FAILED), ("secret", -1, E.GROUP_AUTHORIZATION_FAILED)]
            v5 = await conn.send(ApiKey.OFFSET_FETCH, OffsetFetchRequest(group_id="locked", topics=named), 5)
            assert (v5.error_code, v5.topics) == (E.GROUP_AUTHORIZATION_FAILED, [])
            v5 = await conn.send(ApiKey.OFFSET_FETCH, OffsetFetchRequest(group_id="g", topics=named), 5)
            by_tp = {TopicPartition(t.name, p.partition_index): p for t in v5.topics for p in t.partitions}
            assert (by_tp[open0].error_code, by_tp[open0].committed_offset) == (E.NONE, 5)
            assert (by_tp[secret0].error_code, by_tp[secret0].committed_offset) == (E.TOPIC_AUTHORIZATION_FAILED, -1)
            every = await conn.send(ApiKey.OFFSET_FETCH, OffsetFetchRequest(group_id="g", topics=None), 5)
            assert [t.name for t in every.topics] == ["open"]  # silently dropped
            v8 = await conn.send(ApiKey.OFFSET_FETCH, OffsetFetchRequest(groups=[
                OffsetFetchRequest.OffsetFetchRequestGroup(group_id=g, topics=None) for g in ("locked", "g")],
                require_stable=False), 8)
            assert [(g.group_id, g.error_code, [t.name for t in g.topics]) for g in v8.groups] == [
                ("locked", E.GROUP_AUTHORIZATION_FAILED, []), ("g", E.NONE, ["open"])]

    run(main)


def test_find_coordinator_describe_on_group_or_transactional_id(tmp_path):
    async def main() -> None:
        async with running_broker(tmp_path) as (broker, conn):
            authorize_with(broker, Scripted((Op.DESCRIBE, RT.GROUP, "locked"),
                                            (Op.DESCRIBE, RT.TRANSACTIONAL_ID, "locked")))
            v3 = await conn.send(ApiKey.FIND_COORDINATOR, FindCoordinatorRequest(key="locked", key_type=0), 3)
            assert (v3.error_code, v3.error_message, v3.node_id, v3.host, v3.port) == (
                E.GROUP_AUTHORIZATION_FAILED, "Group authorization failed.", -1, "", -1)
            v4 = await conn.send(ApiKey.FIND_COORDINATOR, FindCoordinatorRequest(
                key_type=1, coordinator_keys=["locked"]), 4)
            c = v4.coordinators[0]
            assert (c.error_code, c.error_message, c.node_id) == (E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, "", -1)
            assert broker.metadata_cache.topic("__transaction_state") is None  # nothing created

    run(main)


def test_group_membership_apis_need_read_on_the_group(tmp_path):
    async def main() -> None:
        async with running_broker(tmp_path) as (broker, conn):
            authorize_with(broker, Scripted((Op.READ, RT.GROUP, "locked")))
            join = await conn.send(ApiKey.JOIN_GROUP, JoinGroupRequest(
                group_id="locked", session_timeout_ms=10000, rebalance_timeout_ms=10000, member_id="",
                group_instance_id=None, protocol_type="consumer",
                protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"")]), 7)
            assert (join.error_code, join.member_id, join.generation_id) == (E.GROUP_AUTHORIZATION_FAILED, "", -1)
            assert broker.group_coordinator.manager.get_group("locked") is None
            heartbeat = await conn.send(ApiKey.HEARTBEAT, HeartbeatRequest(
                group_id="locked", generation_id=1, member_id="m", group_instance_id=None), 4)
            assert heartbeat.error_code == E.GROUP_AUTHORIZATION_FAILED
            sync = SyncGroupRequest(group_id="locked", generation_id=1, member_id="m", group_instance_id=None,
                                    protocol_type=None, protocol_name=None, assignments=[])
            # v5 without protocol type and name: INCONSISTENT_GROUP_PROTOCOL, before authorization.
            assert (await conn.send(ApiKey.SYNC_GROUP, sync, 5)).error_code == E.INCONSISTENT_GROUP_PROTOCOL
            sync.protocol_type, sync.protocol_name = "consumer", "range"
            assert (await conn.send(ApiKey.SYNC_GROUP, sync, 5)).error_code == E.GROUP_AUTHORIZATION_FAILED

    run(main)


def test_describe_and_list_groups(tmp_path):
    async def main() -> None:
        async with running_broker(tmp_path) as (broker, conn):
            await create_topics(conn, "t")
            await group_coordinator_ready(conn)
            for group_id in ("visible", "hidden"):
                await conn.send(ApiKey.OFFSET_COMMIT, commit_request(group_id, TopicPartition("t", 0)), 8)
            authorize_with(broker, Scripted((Op.DESCRIBE, RT.GROUP, "hidden"), (Op.DELETE, RT.GROUP, "visible"),
                                            (Op.DESCRIBE, RT.CLUSTER, ANY)))
            described = await conn.send(ApiKey.DESCRIBE_GROUPS, DescribeGroupsRequest(
                groups=["visible", "hidden"], include_authorized_operations=True), 5)
            assert [(g.group_id, g.error_code) for g in described.groups] == [
                ("hidden", E.GROUP_AUTHORIZATION_FAILED), ("visible", E.NONE)]  # refused first
            hidden, visible = described.groups
            assert (hidden.group_state, hidden.authorized_operations) == ("", OMITTED)
            assert visible.authorized_operations == to_32_bit_field({Op.READ, Op.DESCRIBE})
            listed = await conn.send(ApiKey.LIST_GROUPS, ListGroupsRequest(states_filter=[]), 4)
            assert [g.group_id for g in listed.groups] == ["visible"]  # no DESCRIBE on the cluster: filtered
            authorize_with(broker, Scripted())
            listed = await conn.send(ApiKey.LIST_GROUPS, ListGroupsRequest(states_filter=[]), 4)
            assert sorted(g.group_id for g in listed.groups) == ["hidden", "visible"]

    run(main)


# --- transactions and producer ids ----------------------------------------------------------------


def test_init_producer_id(tmp_path):
    async def main() -> None:
        async with running_broker(tmp_path) as (broker, conn):
            def request(transactional_id: str | None) -> InitProducerIdRequest:
                return InitProducerIdRequest(transactional_id=transactional_id, transaction_timeout_ms=60000,
                                             producer_id=-1, producer_epoch=-1)

            authorize_with(broker, Scripted((Op.WRITE, RT.TRANSACTIONAL_ID, "tx")))
            response = await conn.send(ApiKey.INIT_PRODUCER_ID, request("tx"), 4)
            assert (response.error_code, response.producer_id, response.producer_epoch) == (
                E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, -1, -1)
            # Idempotent: IDEMPOTENT_WRITE on the cluster, or WRITE on some topic (KIP-679).
            authorizer = authorize_with(broker, Scripted((Op.IDEMPOTENT_WRITE, RT.CLUSTER, ANY)))
            response = await conn.send(ApiKey.INIT_PRODUCER_ID, request(None), 4)
            assert response.error_code == E.NONE and response.producer_id >= 0
            assert authorizer.asked[-1] == (Op.WRITE, RT.TOPIC, None)
            authorize_with(broker, Scripted((Op.IDEMPOTENT_WRITE, RT.CLUSTER, ANY), (Op.WRITE, RT.TOPIC, ANY)))
            response = await conn.send(ApiKey.INIT_PRODUCER_ID, request(None), 4)
            assert (response.error_code, response.producer_id) == (E.CLUSTER_AUTHORIZATION_FAILED, -1)

    run(main)


def test_add_partitions_to_txn_client_versions(tmp_path):
    async def main() -> None:
        async with running_broker(tmp_path) as (broker, conn):
            await create_topics(conn, "open", "secret")

            def request(*topics: str) -> AddPartitionsToTxnRequest:
                return AddPartitionsToTxnRequest(
                    v3_and_below_transactional_id="tx", v3_and_below_producer_id=1, v3_and_below_producer_epoch=0,
                    v3_and_below_topics=[AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name=t, partitions=[0])
                                         for t in topics])

            def errors(response: Any) -> dict[str, int]:
                return {t.name: p.partition_error_code for t in response.results_by_topic_v3_and_below
                        for p in t.results_by_partition}

            authorize_with(broker, Scripted((Op.WRITE, RT.TRANSACTIONAL_ID, "tx")))
            response = await conn.send(ApiKey.ADD_PARTITIONS_TO_TXN, request("open", "secret"), 3)
            assert set(errors(response).values()) == {E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}
            authorize_with(broker, Scripted((Op.WRITE, RT.TOPIC, "secret")))
            response = await conn.send(ApiKey.ADD_PARTITIONS_TO_TXN, request("open", "secret", "ghost",
                                                                                "__consumer_offsets"), 3)
            assert errors(response) == {"open": E.OPERATION_NOT_ATTEMPTED, "secret": E.TOPIC_AUTHORIZATION_FAILED,
                                        "ghost": E.UNKNOWN_TOPIC_OR_PARTITION,
                                        "__consumer_offsets": E.TOPIC_AUTHORIZATION_FAILED}
            # v4 (from brokers): CLUSTER_ACTION, a top-level error.
            authorize_with(broker, Scripted((Op.CLUSTER_ACTION, RT.CLUSTER, ANY)))
            response = await conn.send(ApiKey.ADD_PARTITIONS_TO_TXN, sample_request(ApiKey.ADD_PARTITIONS_TO_TXN, 4), 4)
            assert response.error_code == E.CLUSTER_AUTHORIZATION_FAILED and response.results_by_transaction == []

    run(main)


def test_describe_cluster_bitfield(tmp_path):
    async def main() -> None:
        async with running_broker(tmp_path) as (broker, conn):
            def request(include: bool) -> DescribeClusterRequest:
                return DescribeClusterRequest(include_cluster_authorized_operations=include, endpoint_type=1)

            authorize_with(broker, Scripted((Op.DESCRIBE, RT.CLUSTER, ANY)))
            response = await conn.send(ApiKey.DESCRIBE_CLUSTER, request(True), 1)
            assert response.error_code == E.NONE and response.brokers and response.cluster_authorized_operations == 0
            authorize_with(broker, Scripted((Op.ALTER_CONFIGS, RT.CLUSTER, ANY)))
            response = await conn.send(ApiKey.DESCRIBE_CLUSTER, request(True), 1)
            assert response.cluster_authorized_operations == to_32_bit_field(
                SUPPORTED_OPERATIONS[RT.CLUSTER] - {Op.ALTER_CONFIGS})
            assert (await conn.send(ApiKey.DESCRIBE_CLUSTER, request(False), 1)).cluster_authorized_operations == OMITTED
            authorize_with(broker, Scripted())
            assert (await conn.send(ApiKey.DESCRIBE_CLUSTER, request(True), 1)).cluster_authorized_operations == 8096

    run(main)





# --- the first failing check of each API, from sampled requests -----------------------------------

S = "s"  # every string of a sampled request: topic, group and transactional id "s"
FIRST_FAILURE = [
    # (api, version, denied, the error codes answered; None: no authorization error)
    (ApiKey.ADD_OFFSETS_TO_TXN, 3, {(Op.WRITE, RT.TRANSACTIONAL_ID, S), (Op.READ, RT.GROUP, S)},
     {E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}),
    (ApiKey.ADD_OFFSETS_TO_TXN, 3, {(Op.READ, RT.GROUP, S)}, {E.GROUP_AUTHORIZATION_FAILED}),
    (ApiKey.END_TXN, 3, {(Op.WRITE, RT.TRANSACTIONAL_ID, S)}, {E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}),
    (ApiKey.TXN_OFFSET_COMMIT, 3, {(Op.WRITE, RT.TRANSACTIONAL_ID, S), (Op.READ, RT.GROUP, S)},
     {E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}),
    (ApiKey.TXN_OFFSET_COMMIT, 3, {(Op.READ, RT.GROUP, S), (Op.READ, RT.TOPIC, S)}, {E.GROUP_AUTHORIZATION_FAILED}),
    (ApiKey.TXN_OFFSET_COMMIT, 3, {(Op.READ, RT.TOPIC, S)}, {E.TOPIC_AUTHORIZATION_FAILED}),
    (ApiKey.OFFSET_DELETE, 0, {(Op.DELETE, RT.GROUP, S)}, {E.GROUP_AUTHORIZATION_FAILED}),
    (ApiKey.DELETE_GROUPS, 2, {(Op.DELETE, RT.GROUP, S)}, {E.GROUP_AUTHORIZATION_FAILED}),
    (ApiKey.LEAVE_GROUP, 5, {(Op.READ, RT.GROUP, S)}, {E.GROUP_AUTHORIZATION_FAILED}),
    (ApiKey.CONSUMER_GROUP_POSITION, 0, {(Op.READ, RT.GROUP, S)}, {E.GROUP_AUTHORIZATION_FAILED}),
    (ApiKey.CREATE_PARTITIONS, 3, {(Op.ALTER, RT.TOPIC, S)}, {E.TOPIC_AUTHORIZATION_FAILED}),
    (ApiKey.DESCRIBE_TRANSACTIONS, 0, {(Op.DESCRIBE, RT.TRANSACTIONAL_ID, S)}, {E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}),
    (ApiKey.OFFSET_FOR_LEADER_EPOCH, 4, {(Op.CLUSTER_ACTION, RT.CLUSTER, ANY), (Op.DESCRIBE, RT.TOPIC, S)},
     {E.TOPIC_AUTHORIZATION_FAILED}),
    (ApiKey.OFFSET_FOR_LEADER_EPOCH, 4, {(Op.CLUSTER_ACTION, RT.CLUSTER, ANY)}, None),  # DESCRIBE suffices
    (ApiKey.OFFSET_FOR_LEADER_EPOCH, 4, {(Op.DESCRIBE, RT.TOPIC, S)}, None),  # CLUSTER_ACTION suffices
    (ApiKey.PARTITION_LEADER_EPOCHS_FOR_PARTITIONS, 0,
     {(Op.CLUSTER_ACTION, RT.CLUSTER, ANY), (Op.DESCRIBE, RT.TOPIC, S)}, {E.TOPIC_AUTHORIZATION_FAILED}),
    (ApiKey.LIST_OFFSETS, 7, {(Op.DESCRIBE, RT.TOPIC, S)}, {E.TOPIC_AUTHORIZATION_FAILED}),
    (ApiKey.ELECT_LEADERS, 2, {(Op.ALTER, RT.CLUSTER, ANY)}, {E.CLUSTER_AUTHORIZATION_FAILED}),
    (ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, {(Op.ALTER, RT.CLUSTER, ANY)}, {E.CLUSTER_AUTHORIZATION_FAILED}),
    (ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, {(Op.DESCRIBE, RT.CLUSTER, ANY)}, {E.CLUSTER_AUTHORIZATION_FAILED}),
    (ApiKey.DESCRIBE_LOG_DIRS, 4, {(Op.DESCRIBE, RT.CLUSTER, ANY)}, {E.CLUSTER_AUTHORIZATION_FAILED}),
    (ApiKey.ALTER_REPLICA_LOG_DIRS, 2, {(Op.ALTER, RT.CLUSTER, ANY)}, {E.CLUSTER_AUTHORIZATION_FAILED}),
]


def _config_resources(request: Any, kind: int) -> None:
    for resource in request.resources:
        resource.resource_type, resource.resource_name = kind, S if kind == 2 else "1"


def test_the_first_failing_check_decides_the_answer(tmp_path):
    async def main() -> None:
        async with running_broker(tmp_path, **{"node.id": "1"}) as (broker, conn):
            await create_topics(conn, S)
            failures = []
            cases = [(key, version, denied, expected, None) for key, version, denied, expected in FIRST_FAILURE]
            for key, version in ((ApiKey.ALTER_CONFIGS, 2), (ApiKey.INCREMENTAL_ALTER_CONFIGS, 1)):
                cases.append((key, version, {(Op.ALTER_CONFIGS, RT.TOPIC, S)}, {E.TOPIC_AUTHORIZATION_FAILED}, 2))
                cases.append((key, version, {(Op.ALTER_CONFIGS, RT.CLUSTER, ANY)}, {E.CLUSTER_AUTHORIZATION_FAILED}, 4))
            for key, version, denied, expected, config_kind in cases:
                authorizer = authorize_with(broker, Scripted(*denied))
                request = sample_request(key, version)
                if config_kind is not None:
                    _config_resources(request, config_kind)
                response = await conn.send(key, request, version, timeout=10)
                codes = set(_error_codes(response, codec.RESPONSES[key].struct, version))
                ok = (codes & AUTH_ERRORS) == set() if expected is None else codes == expected
                undeclared = {(op, rt) for op, rt, _ in authorizer.asked} - HANDLERS[key].AUTHORIZES
                if not ok or undeclared:
                    failures.append((ApiKey(key).name, denied, codes, undeclared))
            assert failures == []

    run(main)


def test_alter_configs_refusals_carry_no_message_and_change_nothing(tmp_path):
    async def main() -> None:
        async with running_broker(tmp_path) as (broker, conn):
            await create_topics(conn, S)
            before = dict(broker.admin_manager.topic_configs(S))
            authorize_with(broker, Scripted((Op.ALTER_CONFIGS, RT.TOPIC, S)))
            request = sample_request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1)
            _config_resources(request, 2)
            request.resources[0].configs[0].name, request.resources[0].configs[0].value = "retention.ms", "1000"
            result = (await conn.send(ApiKey.INCREMENTAL_ALTER_CONFIGS, request, 1)).responses[0]
            assert (result.error_code, result.error_message) == (E.TOPIC_AUTHORIZATION_FAILED, None)
            assert broker.admin_manager.topic_configs(S) == before

    run(main)
