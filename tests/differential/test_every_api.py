"""Every client-facing API at every version pybroker advertises, sent to pybroker and to Apache
Kafka 3.9.2 alike, the answers compared field by field.

Both brokers start the same way: broker id 1, Kafka's ACL authorizer with ``User:ANONYMOUS`` as a
super user (so the ACL APIs work and authorized operations are computed), no initial rebalance
delay, one partition per new topic, and a second listener (SASL_PLAINTEXT) where "mallory", whom no
ACL names, signs in. The module first writes the same data to both (topic ``data``, two
partitions of fixed batches) and loads their group and transaction coordinators; then

- each `test_answers_match_kafka` runs one script — a short sequence of raw requests in which one
  API is sent at one version — on both brokers at once, and compares what came back: every field
  of every response, or that the connection was closed;
- each `test_refusals_match_kafka` sends one request of one API and version as mallory to both:
  the authorization refusals must be the same.

`normalized` makes the answers comparable and names what it leaves out and why (`IGNORED`, a
script's own list, `UNORDERED` lists compared sorted, Kafka's text for a refused cluster
operation). Nothing else is ignored: a difference is fixed in pybroker or listed, with why it
stays, in docs/differences.md.

Versions covered by another module are listed in `COVERED_ELSEWHERE`;
`test_every_advertised_version_has_a_script` fails when pybroker advertises a version of a
client-facing API that neither covers.
"""

from __future__ import annotations

import asyncio
import re
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from bench.apache_kafka import KafkaBroker
from bench.brokers import free_port
from pybroker.client.connection import BrokerConnection, KafkaClientError
from pybroker.client.security import PLAINTEXT, ClientSecurity
from pybroker.protocol import codec
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.consumer_protocol import (
    ConsumerAssignment,
    ConsumerSubscription,
    encode_assignment,
    encode_subscription,
)
from pybroker.protocol.messages import REQUEST_CLASSES
from pybroker.protocol.schema import Struct
from pybroker.protocol.specs import REQUESTS
from pybroker.server.unapplied_configs import UNAPPLIED_CONFIGS
from pybroker.types import TopicPartition
from tests.conftest import BrokerProcess
from tests.unit.batches import build_batch

TS = 1_700_000_000_000
BROKER_ID = 1
SETTINGS: dict[str, object] = {
    "broker.id": BROKER_ID,
    "num.partitions": 1,
    "group.initial.rebalance.delay.ms": 0,
    "offsets.topic.replication.factor": 1,
    "transaction.state.log.replication.factor": 1,
    "transaction.state.log.min.isr": 1,
    "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
    "super.users": "User:ANONYMOUS",
}

# A SASL_PLAINTEXT listener beside PLAINTEXT, where "mallory" signs in: no ACL names her, so her
# requests show each API's authorization refusals.
MALLORY = ClientSecurity("SASL_PLAINTEXT", sasl_mechanism="PLAIN", sasl_username="mallory",
                         sasl_password="mallory-secret")
SASL_SETTINGS: dict[str, object] = {
    "sasl.enabled.mechanisms": "PLAIN",
    "listener.name.sasl_plaintext.plain.sasl.jaas.config":
        'org.apache.kafka.common.security.plain.PlainLoginModule required user_mallory="mallory-secret";',
}


def listeners(port: int, sasl_port: int) -> str:
    return f"PLAINTEXT://127.0.0.1:{port},SASL_PLAINTEXT://127.0.0.1:{sasl_port}"


# Fields left out of every comparison, and why.
IGNORED: dict[str, str] = {
    "throttle_time_ms": "depends on the moment of the request against quota windows",
    "host": "each broker listens on its own port of 127.0.0.1",
    "port": "each broker listens on its own port",
    "cluster_id": "a random id per cluster",
    "topic_id": "a random id per topic",
    "undeleted_partition_count": "KIP-253's tagged field (seed 002): pybroker's own, Kafka has none",
    "initial_partition_count": "KIP-253's tagged field (seed 002): pybroker's own, Kafka has none",
}
# Lists whose order carries no meaning, compared sorted: Kafka writes them in the iteration order of
# a Java hash map.
UNORDERED: dict[str, str] = {
    "groups": "ListGroups: Kafka lists its group cache's hash-map order",
    "transaction_states": "ListTransactions: Kafka lists its transaction cache's hash-map order",
}
# Topic configs only pybroker has, left out of config lists (docs/differences.md).
PYBROKER_CONFIGS: dict[str, str] = {
    "enable.ordered.delivery": "KIP-253's ordered delivery (seed 002)",
    "log.retention.min.timestamp": "seed 003's retention floor",
}
# Kafka's refusal of a cluster operation prints its Java request object (processor, connection id,
# buffer): pybroker names the request, principal and address instead (docs/differences.md).
NOT_AUTHORIZED = re.compile(r"^Request .* is not authorized\.$", re.DOTALL)
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")

# Versions of client-facing APIs that another module sends to both brokers.
COVERED_ELSEWHERE: dict[int, tuple[range, str]] = {
    ApiKey.API_VERSIONS: (range(0, 5), "test_api_versions.py"),
    ApiKey.DELETE_RECORDS: (range(0, 3), "test_delete_records.py (v3 is KIP-1343's, pybroker's own)"),
    ApiKey.PRODUCE: (range(0, 3), "test_message_formats.py: message formats 0 and 1"),
    ApiKey.FETCH: (range(0, 4), "test_message_formats.py: message formats 0 and 1"),
    ApiKey.LIST_OFFSETS: (range(0, 1), "test_message_formats.py: Kafka's offsets by segment time"),
}
# Inter-broker APIs and pybroker's own (KIP-253): no client sends them to Kafka.
NOT_CLIENT_FACING = {
    ApiKey.LEADER_AND_ISR, ApiKey.STOP_REPLICA, ApiKey.UPDATE_METADATA, ApiKey.CONTROLLED_SHUTDOWN,
    ApiKey.ALTER_PARTITION, ApiKey.CONSUMER_GROUP_POSITION, ApiKey.PARTITION_LEADER_EPOCHS_FOR_PARTITIONS,
}


# --------------------------------------------------------------------------- requests and answers


def build(api_key: int, version: int, fields: dict[str, Any]) -> Any:
    """The request object for ``api_key`` at ``version`` from nested dicts of field values;
    fields the version lacks are left at their defaults, as Kafka's request builders drop them."""
    cls = REQUEST_CLASSES[api_key]
    return _build(cls, cls, REQUESTS[api_key].struct, version, fields)


def _build(top: type, cls: type, struct: Struct, version: int, fields: dict[str, Any]) -> Any:
    values: dict[str, Any] = {}
    for name, value in fields.items():
        field = struct.field_named(name)
        if not field.present_in(version):
            continue
        if field.struct is not None:
            nested = getattr(top, field.struct.name)
            if field.is_array:
                value = None if value is None else [_build(top, nested, field.struct, version, v) for v in value]
            else:
                value = _build(top, nested, field.struct, version, value)
        values[name] = value
    return cls(**values)


CLOSED = "<connection closed>"
# A member's subscription and assignment in Kafka's consumer protocol (Kafka 3.9's coordinator
# reads the subscription: one it cannot parse leaves the JoinGroup unanswered).
SUBSCRIPTION = encode_subscription(ConsumerSubscription(["data"]))
ASSIGNMENT = encode_assignment(ConsumerAssignment([TopicPartition("data", 0)]))
NOT_ENOUGH_REPLICAS, COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS, CONCURRENT_TRANSACTIONS = 19, 15, 14, 51


@dataclass
class Target:
    """One broker under test: where it listens and where its log dir is."""

    name: str
    bootstrap: str
    log_dir: Path
    security: ClientSecurity = PLAINTEXT
    #: Answers before the internal topics exist: a transactional Produce, FindCoordinator of a
    #: transactional id and of a group.
    first_lookups: list[Any] = field(default_factory=list)

    async def send(self, api_key: int, version: int, fields: dict[str, Any]) -> Any:
        host, port = self.bootstrap.split(":")
        connection = BrokerConnection(host, int(port), security=self.security)
        await connection.connect()
        try:
            return await connection.send(api_key, build(api_key, version, fields), version=version, timeout=30)
        except (KafkaClientError, ConnectionError, asyncio.IncompleteReadError):
            return CLOSED
        finally:
            await connection.close()


def plain(value: Any) -> Any:
    """A response as nested dicts, lists and scalars (record sets as bytes)."""
    if hasattr(value, "__slots__") and not isinstance(value, uuid.UUID):
        return {name: plain(getattr(value, name)) for name in value.__slots__}
    if isinstance(value, list):
        return [plain(v) for v in value]
    if isinstance(value, memoryview | bytearray):
        return bytes(value)
    return value


def normalized(value: Any, ignored: dict[str, str]) -> Any:
    """``value`` without the fields named in ``ignored`` (at any depth) and without
    `PYBROKER_CONFIGS` in config lists, uuids inside strings (member ids) written ``<uuid>``."""
    if isinstance(value, dict):
        if isinstance(configs := value.get("configs"), list):
            value = value | {"configs": [c for c in configs if c.get("name") not in PYBROKER_CONFIGS]}
        return {k: sorted(normalized(v, ignored), key=repr) if k in UNORDERED and isinstance(v, list)
                else normalized(v, ignored) for k, v in value.items() if k not in ignored}
    if isinstance(value, list):
        return [normalized(v, ignored) for v in value]
    if isinstance(value, str):
        return NOT_AUTHORIZED.sub("Request <the request> is not authorized.", UUID.sub("<uuid>", value))
    return value


def differences(a: Any, b: Any, path: str = "") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for key in a.keys() | b.keys():
            out += differences(a.get(key), b.get(key), f"{path}.{key}")
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b, strict=True)) for d in differences(x, y, f"{path}[{i}]")]
    return [] if a == b else [f"{path or '.'}: pybroker {a!r}, Kafka {b!r}"]


# --------------------------------------------------------------------------- scripts

Script = Callable[[Target, int], Awaitable[list[tuple[str, Any]]]]


@dataclass
class Entry:
    api_key: int
    versions: range
    script: Script
    ignored: dict[str, str]


SCRIPTS: list[Entry] = []


def script(api_key: int, versions: range, **ignored: str) -> Callable[[Script], Script]:
    def register(fn: Script) -> Script:
        SCRIPTS.append(Entry(api_key, versions, fn, ignored))
        return fn
    return register


def records(keys: list[str], base_timestamp: int = TS, **kwargs: Any) -> bytes:
    return build_batch([(k.encode(), f"value-{k}".encode()) for k in keys], base_timestamp=base_timestamp, **kwargs)


async def create_topic(t: Target, name: str, partitions: int = 1, **configs: str) -> None:
    answer = await t.send(ApiKey.CREATE_TOPICS, 5, {"timeout_ms": 30_000, "topics": [{
        "name": name, "num_partitions": partitions, "replication_factor": 1, "assignments": [],
        "configs": [{"name": k.replace("_", "."), "value": v} for k, v in configs.items()]}]})
    assert answer.topics[0].error_code == 0, answer
    await wait_for_leaders(t, name, partitions)


async def wait_for_leaders(t: Target, name: str, partitions: int) -> None:
    for _ in range(500):
        answer = await t.send(ApiKey.METADATA, 9, {"topics": [{"name": name}], "allow_auto_topic_creation": False})
        parts = answer.topics[0].partitions
        if len(parts) == partitions and all(p.leader_id >= 0 for p in parts):
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"{t.name}: {name} has no leaders")


async def produce(t: Target, topic: str, partition: int, batch: bytes, transactional_id: str | None = None) -> Any:
    answer = await t.send(ApiKey.PRODUCE, 9, {"acks": -1, "timeout_ms": 30_000, "transactional_id": transactional_id,
                                              "topic_data": [{"name": topic, "partition_data": [
                                                  {"index": partition, "records": batch}]}]})
    assert answer.responses[0].partition_responses[0].error_code == 0, answer
    return answer


async def set_up(t: Target) -> None:
    """The same data on each broker, and its group and transaction coordinators loaded."""
    await create_topic(t, "data", 2)
    # Before the internal topics exist: a transactional batch (its leader cannot verify it), then
    # the first lookups of a transactional id and of a group.
    unverifiable = records(["u"], producer_id=4242, producer_epoch=0, base_sequence=0, attributes=0x10)
    t.first_lookups = [plain(await t.send(ApiKey.PRODUCE, 9, {
        "acks": -1, "timeout_ms": 30_000, "transactional_id": "warm-up",
        "topic_data": [{"name": "data", "partition_data": [{"index": 1, "records": unverifiable}]}]}))]
    t.first_lookups += [plain(await t.send(ApiKey.FIND_COORDINATOR, 1, {"key": "warm-up", "key_type": key_type}))
                        for key_type in (1, 0)]
    await init_producer(t, "warm-up")
    for api_key, version, fields in [
        (ApiKey.FIND_COORDINATOR, 1, {"key": "warm-up", "key_type": 0}),  # creates __consumer_offsets
        (ApiKey.OFFSET_FETCH, 7, {"group_id": "warm-up", "topics": None}),  # answered once it is loaded
    ]:
        for _ in range(500):
            answer = await t.send(api_key, version, fields)
            if answer.error_code == 0:
                break
            await asyncio.sleep(0.02)
        assert answer.error_code == 0, f"{t.name}: {answer}"
    await produce(t, "data", 0, records([f"k{i}" for i in range(5)]))
    await produce(t, "data", 1, records(["a", "b", "c"], TS + 1000))


# ----- Produce and Fetch


@script(ApiKey.PRODUCE, range(3, 10))
async def produce_script(t: Target, v: int) -> list[tuple[str, Any]]:
    topic = f"produce-v{v}"
    await create_topic(t, topic)
    out = []
    for label, partition, batch in [
        ("first", 0, records(["x", "y"])), ("second", 0, records(["z"], TS + 5)),
        ("unknown partition", 7, records(["x"])),
    ]:
        out.append((label, await t.send(ApiKey.PRODUCE, v, {
            "acks": -1, "timeout_ms": 10_000, "topic_data": [
                {"name": topic, "partition_data": [{"index": partition, "records": batch}]}]})))
    out.append(("unknown topic", await t.send(ApiKey.PRODUCE, v, {"acks": 1, "timeout_ms": 10_000, "topic_data": [
        {"name": f"no-such-topic-v{v}", "partition_data": [{"index": 0, "records": records(["x"])}]}]})))
    return out


def fetch_fields(partitions: list[tuple[str, int, int]], **extra: Any) -> dict[str, Any]:
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for topic, partition, offset in partitions:
        by_topic.setdefault(topic, []).append({"partition": partition, "fetch_offset": offset,
                                                "partition_max_bytes": 1 << 20, "log_start_offset": -1})
    return {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 22, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "",
            "topics": [{"topic": k, "partitions": p} for k, p in by_topic.items()]} | extra


@script(ApiKey.FETCH, range(4, 13))
async def fetch_script(t: Target, v: int) -> list[tuple[str, Any]]:
    return [
        ("both partitions", await t.send(ApiKey.FETCH, v, fetch_fields([("data", 0, 0), ("data", 1, 0)]))),
        ("from offset 2", await t.send(ApiKey.FETCH, v, fetch_fields([("data", 0, 2)]))),
        ("read_committed", await t.send(ApiKey.FETCH, v, fetch_fields([("data", 0, 0)], isolation_level=1))),
        ("past the end", await t.send(ApiKey.FETCH, v, fetch_fields([("data", 0, 100)]))),
        ("unknown partition", await t.send(ApiKey.FETCH, v, fetch_fields([("data", 9, 0)]))),
        ("unknown topic", await t.send(ApiKey.FETCH, v, fetch_fields([("no-such-topic", 0, 0)]))),
    ]


@script(ApiKey.LIST_OFFSETS, range(1, 8))
async def list_offsets_script(t: Target, v: int) -> list[tuple[str, Any]]:
    async def ask(timestamp: int, partition: int = 0, topic: str = "data", isolation: int = 0) -> Any:
        return await t.send(ApiKey.LIST_OFFSETS, v, {"replica_id": -1, "isolation_level": isolation, "topics": [
            {"name": topic, "partitions": [{"partition_index": partition, "timestamp": timestamp}]}]})
    out = [("latest", await ask(-1)), ("earliest", await ask(-2)), ("by time", await ask(TS + 2)),
           ("after the last", await ask(TS + 99)), ("read_committed latest", await ask(-1, isolation=1)),
           ("unknown partition", await ask(-1, 5)), ("unknown topic", await ask(-1, topic="no-such-topic"))]
    if v >= 7:
        out.append(("max timestamp", await ask(-3)))
    return out


@script(ApiKey.METADATA, range(0, 13))
async def metadata_script(t: Target, v: int) -> list[tuple[str, Any]]:
    async def ask(names: list[str] | None, auto: bool = False) -> Any:
        return await t.send(ApiKey.METADATA, v, {
            "topics": None if names is None else [{"name": n} for n in names], "allow_auto_topic_creation": auto,
            "include_cluster_authorized_operations": True, "include_topic_authorized_operations": True})
    out = [("data", await ask(["data"]))]
    if v >= 1:
        out.append(("no topics", await ask([])))
    if v >= 4:
        out.append(("missing, no auto-creation", await ask([f"meta-missing-v{v}"])))
    out.append(("auto-created", await ask([f"meta-auto-v{v}"], auto=True)))
    return out


# ----- groups


async def join(t: Target, group: str, version: int = 5, member_id: str = "") -> Any:
    fields = {"group_id": group, "session_timeout_ms": 30_000, "rebalance_timeout_ms": 30_000,
              "member_id": member_id, "group_instance_id": None, "protocol_type": "consumer",
              "protocols": [{"name": "range", "metadata": SUBSCRIPTION}]}
    answer = await t.send(ApiKey.JOIN_GROUP, version, fields)
    if answer.error_code == 79:  # MEMBER_ID_REQUIRED
        answer = await t.send(ApiKey.JOIN_GROUP, version, fields | {"member_id": answer.member_id})
    return answer


async def sync(t: Target, group: str, joined: Any, version: int = 3) -> Any:
    return await t.send(ApiKey.SYNC_GROUP, version, {
        "group_id": group, "generation_id": joined.generation_id, "member_id": joined.member_id,
        "group_instance_id": None, "protocol_type": "consumer", "protocol_name": "range",
        "assignments": [{"member_id": joined.member_id, "assignment": ASSIGNMENT}]})


async def commit(t: Target, group: str, offset: int, version: int = 7, generation: int = -1, member: str = "") -> Any:
    return await t.send(ApiKey.OFFSET_COMMIT, version, {
        "group_id": group, "generation_id_or_member_epoch": generation, "member_id": member,
        "group_instance_id": None, "retention_time_ms": -1, "topics": [{"name": "data", "partitions": [
            {"partition_index": 0, "committed_offset": offset, "committed_leader_epoch": 0,
             "commit_timestamp": -1, "committed_metadata": "m"}]}]})


@script(ApiKey.FIND_COORDINATOR, range(0, 5))
async def find_coordinator_script(t: Target, v: int) -> list[tuple[str, Any]]:
    def ask(key: str, key_type: int) -> Awaitable[Any]:
        return t.send(ApiKey.FIND_COORDINATOR, v, {"key": key, "key_type": key_type, "coordinator_keys": [key]})
    out = [("group", await ask("g-find", 0))]
    if v >= 1:
        out.append(("transaction", await ask("tx-find", 1)))
        out.append(("unknown key type", await ask("x", 5)))
    return out


@script(ApiKey.JOIN_GROUP, range(0, 8), member_id="a new member's id (client id and a random uuid)")
async def join_group_script(t: Target, v: int) -> list[tuple[str, Any]]:
    group = f"join-v{v}"
    first = await t.send(ApiKey.JOIN_GROUP, v, {
        "group_id": group, "session_timeout_ms": 30_000, "rebalance_timeout_ms": 30_000, "member_id": "",
        "group_instance_id": None, "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": SUBSCRIPTION}]})
    out = [("first join", first)]
    if first.error_code == 79:
        out.append(("with its member id", await join(t, group, v, first.member_id)))
    out.append(("unknown member", await t.send(ApiKey.JOIN_GROUP, v, {
        "group_id": group, "session_timeout_ms": 30_000, "rebalance_timeout_ms": 30_000, "member_id": "nobody",
        "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": SUBSCRIPTION}]})))
    out.append(("session timeout too small", await t.send(ApiKey.JOIN_GROUP, v, {
        "group_id": group + "-b", "session_timeout_ms": 1, "rebalance_timeout_ms": 30_000, "member_id": "",
        "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": SUBSCRIPTION}]})))
    return out


@script(ApiKey.SYNC_GROUP, range(0, 6), member_id="a new member's id")
async def sync_group_script(t: Target, v: int) -> list[tuple[str, Any]]:
    group = f"sync-v{v}"
    joined = await join(t, group)
    return [("leader", await sync(t, group, joined, v)),
            ("wrong generation", await t.send(ApiKey.SYNC_GROUP, v, {
                "group_id": group, "generation_id": 7, "member_id": joined.member_id, "assignments": []})),
            ("unknown group", await t.send(ApiKey.SYNC_GROUP, v, {
                "group_id": "no-such-group", "generation_id": 1, "member_id": "m", "assignments": []}))]


@script(ApiKey.HEARTBEAT, range(0, 5), member_id="a new member's id")
async def heartbeat_script(t: Target, v: int) -> list[tuple[str, Any]]:
    group = f"heartbeat-v{v}"
    joined = await join(t, group)
    await sync(t, group, joined)

    def beat(generation: int, member: str, group_id: str = group) -> Awaitable[Any]:
        return t.send(ApiKey.HEARTBEAT, v, {"group_id": group_id, "generation_id": generation,
                                            "member_id": member, "group_instance_id": None})
    return [("member", await beat(joined.generation_id, joined.member_id)),
            ("old generation", await beat(joined.generation_id - 1, joined.member_id)),
            ("unknown member", await beat(joined.generation_id, "nobody")),
            ("unknown group", await beat(1, "nobody", "no-such-group"))]


@script(ApiKey.LEAVE_GROUP, range(0, 6), member_id="a new member's id")
async def leave_group_script(t: Target, v: int) -> list[tuple[str, Any]]:
    group = f"leave-v{v}"
    joined = await join(t, group)
    await sync(t, group, joined)

    def leave(member: str, group_id: str = group) -> Awaitable[Any]:
        return t.send(ApiKey.LEAVE_GROUP, v, {"group_id": group_id, "member_id": member, "members": [
            {"member_id": member, "group_instance_id": None, "reason": "done"}]})
    return [("unknown member", await leave("nobody")), ("member", await leave(joined.member_id)),
            ("unknown group", await leave("nobody", "no-such-group"))]


@script(ApiKey.DESCRIBE_GROUPS, range(0, 6), member_id="a new member's id")
async def describe_groups_script(t: Target, v: int) -> list[tuple[str, Any]]:
    group = f"describe-v{v}"
    joined = await join(t, group)
    await sync(t, group, joined)
    await commit(t, f"describe-empty-v{v}", 1)
    return [("groups", await t.send(ApiKey.DESCRIBE_GROUPS, v, {
        "groups": [group, f"describe-empty-v{v}", "no-such-group"], "include_authorized_operations": True}))]


@script(ApiKey.LIST_GROUPS, range(0, 6))
async def list_groups_script(t: Target, v: int) -> list[tuple[str, Any]]:
    def ask(states: list[str], types: list[str]) -> Awaitable[Any]:
        return t.send(ApiKey.LIST_GROUPS, v, {"states_filter": states, "types_filter": types})
    out = [("all", await ask([], []))]
    if v >= 4:
        out.append(("stable", await ask(["Stable"], [])))
    if v >= 5:
        out.append(("classic", await ask([], ["classic"])))
        out.append(("consumer", await ask([], ["consumer"])))
    return out


@script(ApiKey.OFFSET_COMMIT, range(2, 9), member_id="a new member's id")
async def offset_commit_script(t: Target, v: int) -> list[tuple[str, Any]]:
    group = f"commit-v{v}"
    out = [("simple", await commit(t, group, 3, v)),
           ("past the end", await commit(t, group, 999, v))]
    joined = await join(t, group + "-member")
    await sync(t, group + "-member", joined)
    out.append(("member", await commit(t, group + "-member", 2, v, joined.generation_id, joined.member_id)))
    out.append(("wrong generation", await commit(t, group + "-member", 2, v, 9, joined.member_id)))
    out.append(("unknown member", await commit(t, group + "-member", 2, v, joined.generation_id, "nobody")))
    out.append(("unknown topic", await t.send(ApiKey.OFFSET_COMMIT, v, {
        "group_id": group, "generation_id_or_member_epoch": -1, "member_id": "", "topics": [
            {"name": "no-such-topic", "partitions": [{"partition_index": 0, "committed_offset": 1}]}]})))
    return out


@script(ApiKey.OFFSET_FETCH, range(1, 9))
async def offset_fetch_script(t: Target, v: int) -> list[tuple[str, Any]]:
    group = f"fetch-offsets-v{v}"
    await commit(t, group, 4)

    def ask(group_id: str, topics: list[dict[str, Any]] | None) -> Awaitable[Any]:
        return t.send(ApiKey.OFFSET_FETCH, v, {"group_id": group_id, "topics": topics, "require_stable": True,
                                               "groups": [{"group_id": group_id, "topics": topics}]})
    out = [("partitions", await ask(group, [{"name": "data", "partition_indexes": [0, 1]}])),
           ("unknown group", await ask("no-such-group", [{"name": "data", "partition_indexes": [0]}])),
           ("unknown topic", await ask(group, [{"name": "no-such-topic", "partition_indexes": [0]}]))]
    if v >= 2:
        out.append(("all", await ask(group, None)))
    return out


@script(ApiKey.DELETE_GROUPS, range(0, 3), member_id="a new member's id")
async def delete_groups_script(t: Target, v: int) -> list[tuple[str, Any]]:
    await commit(t, f"delete-v{v}", 1)
    joined = await join(t, f"delete-busy-v{v}")
    await sync(t, f"delete-busy-v{v}", joined)
    return [("groups", await t.send(ApiKey.DELETE_GROUPS, v, {
        "groups_names": [f"delete-v{v}", f"delete-busy-v{v}", "no-such-group"]}))]


@script(ApiKey.OFFSET_DELETE, range(0, 1), member_id="a new member's id")
async def offset_delete_script(t: Target, v: int) -> list[tuple[str, Any]]:
    await commit(t, "offset-delete", 1)
    joined = await join(t, "offset-delete-busy")
    await sync(t, "offset-delete-busy", joined)
    await commit(t, "offset-delete-busy", 1, generation=joined.generation_id, member=joined.member_id)

    def ask(group: str, topic: str = "data") -> Awaitable[Any]:
        return t.send(ApiKey.OFFSET_DELETE, v, {"group_id": group, "topics": [
            {"name": topic, "partitions": [{"partition_index": 0}, {"partition_index": 1}]}]})
    return [("empty group", await ask("offset-delete")), ("consuming group", await ask("offset-delete-busy")),
            ("unknown group", await ask("no-such-group")), ("unknown topic", await ask("offset-delete", "nope"))]


# ----- transactions and producers


async def init_producer(t: Target, transactional_id: str | None) -> Any:
    if transactional_id is not None:
        await find_transaction_coordinator(t, transactional_id)
    for _ in range(500):
        answer = await t.send(ApiKey.INIT_PRODUCER_ID, 1, {"transactional_id": transactional_id,
                                                           "transaction_timeout_ms": 60_000})
        if answer.error_code not in (COORDINATOR_LOAD_IN_PROGRESS, CONCURRENT_TRANSACTIONS):
            break
        await asyncio.sleep(0.02)
    assert answer.error_code == 0, answer
    return answer


async def find_transaction_coordinator(t: Target, transactional_id: str) -> None:
    for _ in range(500):
        answer = await t.send(ApiKey.FIND_COORDINATOR, 1, {"key": transactional_id, "key_type": 1})
        if answer.error_code == 0:
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"{t.name}: no transaction coordinator")


def add_partitions_fields(txn: str, producer_id: int, epoch: int, topics: list[dict[str, Any]]) -> dict[str, Any]:
    """AddPartitionsToTxn's fields for every version: v4 batches transactions (a broker's
    verification; Kafka takes it from a principal with CLUSTER_ACTION)."""
    return {"v3_and_below_transactional_id": txn, "v3_and_below_producer_id": producer_id,
            "v3_and_below_producer_epoch": epoch, "v3_and_below_topics": topics,
            "transactions": [{"transactional_id": txn, "producer_id": producer_id, "producer_epoch": epoch,
                              "verify_only": False, "topics": topics}]}


async def add_partitions(t: Target, txn: str, producer: Any, version: int = 3) -> Any:
    return await t.send(ApiKey.ADD_PARTITIONS_TO_TXN, version, add_partitions_fields(
        txn, producer.producer_id, producer.producer_epoch, [{"name": "data", "partitions": [0]}]))


async def transactional_write(t: Target, txn: str, producer: Any) -> None:
    for _ in range(500):  # the previous transaction's markers may still be on their way
        answer = await add_partitions(t, txn, producer)
        if answer.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code != CONCURRENT_TRANSACTIONS:
            break
        await asyncio.sleep(0.02)
    await produce(t, "data", 0, records(["t1", "t2"], producer_id=producer.producer_id,
                                        producer_epoch=producer.producer_epoch, base_sequence=0, attributes=0x10),
                  transactional_id=txn)


@script(ApiKey.INIT_PRODUCER_ID, range(0, 5))
async def init_producer_id_script(t: Target, v: int) -> list[tuple[str, Any]]:
    txn = f"init-v{v}"
    await find_transaction_coordinator(t, txn)

    def ask(transactional_id: str | None, timeout: int = 60_000, **fields: Any) -> Awaitable[Any]:
        return t.send(ApiKey.INIT_PRODUCER_ID, v, {"transactional_id": transactional_id,
                                                   "transaction_timeout_ms": timeout} | fields)
    first = await ask(txn)
    out = [("idempotent", await ask(None)), ("transactional", first), ("again", await ask(txn)),
           ("timeout too long", await ask(txn + "-b", 999_999_999))]
    if v >= 3:
        out.append(("stale epoch", await ask(txn, producer_id=first.producer_id, producer_epoch=first.producer_epoch)))
    return out


@script(ApiKey.ADD_PARTITIONS_TO_TXN, range(0, 5))
async def add_partitions_script(t: Target, v: int) -> list[tuple[str, Any]]:
    txn = f"add-partitions-v{v}"
    producer = await init_producer(t, txn)
    pid, epoch = producer.producer_id, producer.producer_epoch
    out = [("data 0", await add_partitions(t, txn, producer, v)),
           ("wrong epoch", await t.send(ApiKey.ADD_PARTITIONS_TO_TXN, v, add_partitions_fields(
               txn, pid, epoch + 5, [{"name": "data", "partitions": [1]}]))),
           ("unknown topic", await t.send(ApiKey.ADD_PARTITIONS_TO_TXN, v, add_partitions_fields(
               txn, pid, epoch, [{"name": "data", "partitions": [1]}, {"name": "no-such-topic", "partitions": [0]}])))]
    await t.send(ApiKey.END_TXN, 3, {"transactional_id": txn, "producer_id": pid, "producer_epoch": epoch,
                                     "committed": False})
    return out


@script(ApiKey.ADD_OFFSETS_TO_TXN, range(0, 4))
async def add_offsets_script(t: Target, v: int) -> list[tuple[str, Any]]:
    txn = f"add-offsets-v{v}"
    producer = await init_producer(t, txn)

    def ask(epoch: int) -> Awaitable[Any]:
        return t.send(ApiKey.ADD_OFFSETS_TO_TXN, v, {"transactional_id": txn, "producer_id": producer.producer_id,
                                                     "producer_epoch": epoch, "group_id": f"txn-group-v{v}"})
    out = [("group", await ask(producer.producer_epoch)), ("wrong epoch", await ask(producer.producer_epoch + 5))]
    await t.send(ApiKey.END_TXN, 3, {"transactional_id": txn, "producer_id": producer.producer_id,
                                     "producer_epoch": producer.producer_epoch, "committed": False})
    return out


@script(ApiKey.TXN_OFFSET_COMMIT, range(0, 4))
async def txn_offset_commit_script(t: Target, v: int) -> list[tuple[str, Any]]:
    txn, group = f"txn-commit-v{v}", f"txn-commit-group-v{v}"
    producer = await init_producer(t, txn)
    await t.send(ApiKey.ADD_OFFSETS_TO_TXN, 3, {"transactional_id": txn, "producer_id": producer.producer_id,
                                                "producer_epoch": producer.producer_epoch, "group_id": group})
    await t.send(ApiKey.FIND_COORDINATOR, 1, {"key": group, "key_type": 0})

    def ask(topic: str, epoch: int) -> Awaitable[Any]:
        return t.send(ApiKey.TXN_OFFSET_COMMIT, v, {
            "transactional_id": txn, "group_id": group, "producer_id": producer.producer_id, "producer_epoch": epoch,
            "generation_id": -1, "member_id": "", "group_instance_id": None, "topics": [
                {"name": topic, "partitions": [{"partition_index": 0, "committed_offset": 2,
                                                "committed_leader_epoch": 0, "committed_metadata": "tm"}]}]})
    out = [("offsets", await ask("data", producer.producer_epoch)),
           ("unknown topic", await ask("no-such-topic", producer.producer_epoch))]
    end = await t.send(ApiKey.END_TXN, 3, {"transactional_id": txn, "producer_id": producer.producer_id,
                                           "producer_epoch": producer.producer_epoch, "committed": True})
    out.append(("commit", end))
    return out


@script(ApiKey.END_TXN, range(0, 4))
async def end_txn_script(t: Target, v: int) -> list[tuple[str, Any]]:
    txn = f"end-v{v}"
    producer = await init_producer(t, txn)

    def end(committed: bool, epoch: int | None = None) -> Awaitable[Any]:
        return t.send(ApiKey.END_TXN, v, {"transactional_id": txn, "producer_id": producer.producer_id,
                                          "producer_epoch": producer.producer_epoch if epoch is None else epoch,
                                          "committed": committed})
    out = [("nothing to end", await end(True))]
    await transactional_write(t, txn, producer)
    out += [("wrong epoch", await end(True, producer.producer_epoch + 5)), ("commit", await end(True))]
    await transactional_write(t, txn, producer)
    out.append(("abort", await end(False)))
    return out


@script(ApiKey.WRITE_TXN_MARKERS, range(0, 2))
async def write_txn_markers_script(t: Target, v: int) -> list[tuple[str, Any]]:
    txn = f"markers-v{v}"
    producer = await init_producer(t, txn)
    await transactional_write(t, txn, producer)

    def markers(topic: str, partitions: list[int]) -> Awaitable[Any]:
        return t.send(ApiKey.WRITE_TXN_MARKERS, v, {"markers": [{
            "producer_id": producer.producer_id, "producer_epoch": producer.producer_epoch,
            "transaction_result": False, "coordinator_epoch": 0,
            "topics": [{"name": topic, "partition_indexes": partitions}]}]})
    return [("abort data 0", await markers("data", [0])), ("unknown partition", await markers("data", [7])),
            ("unknown topic", await markers("no-such-topic", [0]))]


@script(ApiKey.DESCRIBE_PRODUCERS, range(0, 1), last_timestamp="the broker's clock when it wrote a marker")
async def describe_producers_script(t: Target, v: int) -> list[tuple[str, Any]]:
    await create_topic(t, "idempotent")
    producer = await init_producer(t, None)
    await produce(t, "idempotent", 0, records(["i"], producer_id=producer.producer_id,
                                              producer_epoch=producer.producer_epoch, base_sequence=0))
    return [("producers", await t.send(ApiKey.DESCRIBE_PRODUCERS, v, {"topics": [
        {"name": "idempotent", "partition_indexes": [0]}, {"name": "data", "partition_indexes": [0, 1, 5]},
        {"name": "no-such-topic", "partition_indexes": [0]}]}))]


@script(ApiKey.DESCRIBE_TRANSACTIONS, range(0, 1),
        transaction_start_time_ms="the coordinator's clock when the transaction began")
async def describe_transactions_script(t: Target, v: int) -> list[tuple[str, Any]]:
    producer = await init_producer(t, "described")
    await transactional_write(t, "described", producer)
    return [("transactions", await t.send(ApiKey.DESCRIBE_TRANSACTIONS, v, {
        "transactional_ids": ["described", "no-such-transaction"]}))]


@script(ApiKey.LIST_TRANSACTIONS, range(0, 1))
async def list_transactions_script(t: Target, v: int) -> list[tuple[str, Any]]:
    def ask(states: list[str], producers: list[int]) -> Awaitable[Any]:
        return t.send(ApiKey.LIST_TRANSACTIONS, v, {"state_filters": states, "producer_id_filters": producers})
    return [("all", await ask([], [])), ("ongoing", await ask(["Ongoing"], [])), ("producer 0", await ask([], [0])),
            ("unknown state", await ask(["Nope"], []))]


@script(ApiKey.OFFSET_FOR_LEADER_EPOCH, range(0, 5))
async def offset_for_leader_epoch_script(t: Target, v: int) -> list[tuple[str, Any]]:
    def ask(topic: str, partition: int, epoch: int, current: int = -1) -> Awaitable[Any]:
        return t.send(ApiKey.OFFSET_FOR_LEADER_EPOCH, v, {"replica_id": -1, "topics": [{"topic": topic, "partitions": [
            {"partition": partition, "current_leader_epoch": current, "leader_epoch": epoch}]}]})
    out = [("epoch 0", await ask("data", 0, 0)), ("a later epoch", await ask("data", 0, 3)),
           ("unknown partition", await ask("data", 4, 0)), ("unknown topic", await ask("no-such-topic", 0, 0))]
    if v >= 2:
        out += [("fenced", await ask("data", 0, 0, 5))]
    return out


# ----- topics and configs


@script(ApiKey.CREATE_TOPICS, range(0, 8))
async def create_topics_script(t: Target, v: int) -> list[tuple[str, Any]]:
    def create(name: str, partitions: int = 2, replication: int = 1, configs: dict[str, str] | None = None,
               assignments: list[list[int]] | None = None, validate_only: bool = False) -> Awaitable[Any]:
        return t.send(ApiKey.CREATE_TOPICS, v, {"timeout_ms": 30_000, "validate_only": validate_only, "topics": [{
            "name": name, "num_partitions": -1 if assignments else partitions,
            "replication_factor": -1 if assignments else replication,
            "assignments": [{"partition_index": i, "broker_ids": b} for i, b in enumerate(assignments or [])],
            "configs": [{"name": k, "value": x} for k, x in (configs or {}).items()]}]})
    name = f"create-v{v}"
    out = [("created", await create(name, configs={"retention.ms": "1000000", "cleanup.policy": "compact"})),
           ("exists", await create(name)),
           ("replication factor 3", await create(name + "-rf")),
           ("assignment", await create(name + "-assigned", assignments=[[1], [1]])),
           ("bad config", await create(name + "-bad", configs={"retention.ms": "soon"})),
           ("unknown config", await create(name + "-unknown", configs={"no.such.config": "1"}))]
    if v >= 1:
        out.append(("validate only", await create(name + "-validated", validate_only=True)))
    if v >= 4:
        out.append(("defaults", await create(name + "-defaults", -1, -1)))
    return out


@script(ApiKey.DELETE_TOPICS, range(0, 7))
async def delete_topics_script(t: Target, v: int) -> list[tuple[str, Any]]:
    name = f"delete-topic-v{v}"
    await create_topic(t, name)

    def delete(names: list[str], ids: list[uuid.UUID] | None = None) -> Awaitable[Any]:
        topics = [{"name": n, "topic_id": uuid.UUID(int=0)} for n in names]
        topics += [{"name": None, "topic_id": i} for i in ids or []]
        return t.send(ApiKey.DELETE_TOPICS, v, {"timeout_ms": 30_000, "topic_names": names, "topics": topics})
    out = [("deleted", await delete([name])), ("unknown", await delete(["no-such-topic"]))]
    if v >= 6:
        out.append(("unknown id", await delete([], [uuid.UUID(int=1)])))
    return out


@script(ApiKey.CREATE_PARTITIONS, range(0, 4))
async def create_partitions_script(t: Target, v: int) -> list[tuple[str, Any]]:
    name = f"partitions-v{v}"
    # KIP-253 (seed 002) lets a pybroker topic shrink: turned off here, pybroker answers as Kafka.
    await create_topic(t, name, **({"enable_ordered_delivery": "false"} if t.name == "pybroker" else {}))

    def grow(count: int, topic: str = name, validate_only: bool = False,
             assignments: list[list[int]] | None = None) -> Awaitable[Any]:
        return t.send(ApiKey.CREATE_PARTITIONS, v, {"timeout_ms": 30_000, "validate_only": validate_only, "topics": [{
            "name": topic, "count": count,
            "assignments": None if assignments is None else [{"broker_ids": b} for b in assignments]}]})
    return [("validate only", await grow(4, validate_only=True)), ("to 3", await grow(3)),
            ("fewer", await grow(2)), ("same", await grow(3)), ("assigned", await grow(4, assignments=[[1]])),
            ("bad assignment", await grow(6, assignments=[[1]])), ("unknown topic", await grow(2, "no-such-topic"))]


TOPIC, BROKER = 2, 4


@script(ApiKey.DESCRIBE_CONFIGS, range(0, 5))
async def describe_configs_script(t: Target, v: int) -> list[tuple[str, Any]]:
    await create_topic(t, f"configs-v{v}", cleanup_policy="compact", retention_ms="12345")

    def ask(kind: int, name: str, keys: list[str] | None) -> Awaitable[Any]:
        return t.send(ApiKey.DESCRIBE_CONFIGS, v, {"include_synonyms": True, "include_documentation": False,
                                                   "resources": [{"resource_type": kind, "resource_name": name,
                                                                  "configuration_keys": keys}]})
    return [("topic", await ask(TOPIC, f"configs-v{v}", None)),
            ("topic keys", await ask(TOPIC, "data", ["retention.ms", "cleanup.policy", "no.such.config"])),
            ("broker keys", await ask(BROKER, str(BROKER_ID), [
                "num.partitions", "log.retention.hours", "message.max.bytes", "log.segment.bytes",
                "min.insync.replicas", "auto.create.topics.enable", "log.cleaner.threads"])),
            ("unknown topic", await ask(TOPIC, "no-such-topic", None)),
            ("other broker", await ask(BROKER, "7", ["num.partitions"]))]


@script(ApiKey.ALTER_CONFIGS, range(0, 3))
async def alter_configs_script(t: Target, v: int) -> list[tuple[str, Any]]:
    name = f"alter-v{v}"
    await create_topic(t, name)

    def alter(kind: int, resource: str, configs: dict[str, str], validate_only: bool = False) -> Awaitable[Any]:
        return t.send(ApiKey.ALTER_CONFIGS, v, {"validate_only": validate_only, "resources": [{
            "resource_type": kind, "resource_name": resource,
            "configs": [{"name": k, "value": x} for k, x in configs.items()]}]})
    return [("set", await alter(TOPIC, name, {"retention.ms": "5000", "segment.ms": "100000"})),
            ("validate only", await alter(TOPIC, name, {"retention.ms": "6000"}, True)),
            ("bad value", await alter(TOPIC, name, {"retention.ms": "x"})),
            ("unknown config", await alter(TOPIC, name, {"no.such.config": "1"})),
            # Kafka 3.9.2 knows 4.0's message format versions by their full names only.
            *[(f"format {version}", await alter(TOPIC, name, {"message.format.version": version}, True))
              for version in ("3.7", "3.8-IV0", "3.9", "3.9-IV0", "4.0", "4.0-IV0", "4.0-IV1", "4.0-IV2")],
            ("unknown topic", await alter(TOPIC, "no-such-topic", {"retention.ms": "1"})),
            ("broker", await alter(BROKER, str(BROKER_ID), {"log.cleaner.threads": "1"})),
            ("described", await t.send(ApiKey.DESCRIBE_CONFIGS, 4, {"resources": [{
                "resource_type": TOPIC, "resource_name": name, "configuration_keys": ["retention.ms", "segment.ms"]}]}))]


@script(ApiKey.INCREMENTAL_ALTER_CONFIGS, range(0, 2))
async def incremental_alter_configs_script(t: Target, v: int) -> list[tuple[str, Any]]:
    name = f"incremental-v{v}"
    await create_topic(t, name)

    def alter(op: int, key: str, value: str | None, resource: str = name, kind: int = TOPIC) -> Awaitable[Any]:
        return t.send(ApiKey.INCREMENTAL_ALTER_CONFIGS, v, {"validate_only": False, "resources": [{
            "resource_type": kind, "resource_name": resource,
            "configs": [{"name": key, "config_operation": op, "value": value}]}]})
    return [("set", await alter(0, "retention.ms", "5000")), ("append", await alter(2, "cleanup.policy", "compact")),
            ("subtract", await alter(3, "cleanup.policy", "delete")), ("delete", await alter(1, "retention.ms", None)),
            ("append to a non-list", await alter(2, "retention.ms", "1")), ("bad op", await alter(9, "retention.ms", "1")),
            ("unknown topic", await alter(0, "retention.ms", "1", "no-such-topic")),
            ("broker", await alter(0, "log.cleaner.threads", "1", str(BROKER_ID), BROKER)),
            ("described", await t.send(ApiKey.DESCRIBE_CONFIGS, 4, {"resources": [{
                "resource_type": TOPIC, "resource_name": name,
                "configuration_keys": ["retention.ms", "cleanup.policy"]}]}))]


# ----- log dirs, leaders, reassignments


@script(ApiKey.DESCRIBE_LOG_DIRS, range(0, 5), log_dir="each broker's own directory",
        total_bytes="the file system's size", usable_bytes="the file system's free space")
async def describe_log_dirs_script(t: Target, v: int) -> list[tuple[str, Any]]:
    return [("data", await t.send(ApiKey.DESCRIBE_LOG_DIRS, v, {"topics": [
        {"topic": "data", "partitions": [0, 1, 5]}, {"topic": "no-such-topic", "partitions": [0]}]}))]


@script(ApiKey.ALTER_REPLICA_LOG_DIRS, range(0, 3))
async def alter_replica_log_dirs_script(t: Target, v: int) -> list[tuple[str, Any]]:
    def move(path: str, topic: str = "data") -> Awaitable[Any]:
        return t.send(ApiKey.ALTER_REPLICA_LOG_DIRS, v, {"dirs": [{"path": path, "topics": [
            {"name": topic, "partitions": [0]}]}]})
    return [("the same dir", await move(str(t.log_dir))), ("unknown dir", await move("/no/such/dir")),
            ("unknown topic", await move(str(t.log_dir), "no-such-topic"))]


@script(ApiKey.ELECT_LEADERS, range(0, 3))
async def elect_leaders_script(t: Target, v: int) -> list[tuple[str, Any]]:
    def elect(election_type: int, partitions: list[tuple[str, list[int]]] | None) -> Awaitable[Any]:
        return t.send(ApiKey.ELECT_LEADERS, v, {"election_type": election_type, "timeout_ms": 30_000,
                                                "topic_partitions": None if partitions is None else [
                                                    {"topic": n, "partitions": p} for n, p in partitions]})
    out = [("preferred", await elect(0, [("data", [0, 1])])), ("unknown", await elect(0, [("no-such-topic", [0])])),
           ("all", await elect(0, None))]
    if v >= 1:
        out.append(("unclean", await elect(1, [("data", [0])])))
    return out


@script(ApiKey.ALTER_PARTITION_REASSIGNMENTS, range(0, 1))
async def alter_reassignments_script(t: Target, v: int) -> list[tuple[str, Any]]:
    def move(replicas: list[int] | None, partition: int = 0, topic: str = "data") -> Awaitable[Any]:
        return t.send(ApiKey.ALTER_PARTITION_REASSIGNMENTS, v, {"timeout_ms": 30_000, "topics": [
            {"name": topic, "partitions": [{"partition_index": partition, "replicas": replicas}]}]})
    return [("same replicas", await move([1])), ("unknown broker", await move([2])),
            ("duplicate", await move([1, 1])), ("empty", await move([])),
            ("cancel nothing", await move(None)), ("unknown partition", await move([1], 9)),
            ("unknown topic", await move([1], 0, "no-such-topic"))]


@script(ApiKey.LIST_PARTITION_REASSIGNMENTS, range(0, 1))
async def list_reassignments_script(t: Target, v: int) -> list[tuple[str, Any]]:
    return [("all", await t.send(ApiKey.LIST_PARTITION_REASSIGNMENTS, v, {"timeout_ms": 30_000, "topics": None})),
            ("data", await t.send(ApiKey.LIST_PARTITION_REASSIGNMENTS, v, {"timeout_ms": 30_000, "topics": [
                {"name": "data", "partition_indexes": [0, 1]}, {"name": "no-such-topic", "partition_indexes": [0]}]}))]


@script(ApiKey.DESCRIBE_CLUSTER, range(0, 2))
async def describe_cluster_script(t: Target, v: int) -> list[tuple[str, Any]]:
    out = [("brokers", await t.send(ApiKey.DESCRIBE_CLUSTER, v, {
        "include_cluster_authorized_operations": True, "endpoint_type": 1}))]
    if v >= 1:
        out.append(("controllers", await t.send(ApiKey.DESCRIBE_CLUSTER, v, {"endpoint_type": 2})))
    return out


# ----- security: ACLs, quotas, SCRAM, SASL on a PLAINTEXT listener

LITERAL, PREFIXED, ANY_PATTERN, MATCH = 3, 4, 1, 4
TOPIC_RESOURCE, GROUP_RESOURCE = 2, 3
READ, WRITE, ANY_OP = 3, 4, 1
ALLOW, ANY_PERMISSION = 3, 1


@script(ApiKey.CREATE_ACLS, range(0, 4))
async def create_acls_script(t: Target, v: int) -> list[tuple[str, Any]]:
    def create(name: str, pattern: int = LITERAL, principal: str = "User:alice", operation: int = READ) -> Any:
        return {"resource_type": TOPIC_RESOURCE, "resource_name": name, "resource_pattern_type": pattern,
                "principal": principal, "host": "*", "operation": operation, "permission_type": ALLOW}
    out = [("created", await t.send(ApiKey.CREATE_ACLS, v, {"creations": [
        create(f"acl-v{v}"), create(f"acl-v{v}", operation=WRITE)]}))]
    if v >= 1:
        out.append(("prefixed", await t.send(ApiKey.CREATE_ACLS, v, {"creations": [
            create(f"acl-prefix-v{v}", PREFIXED)]})))
    out.append(("bad principal", await t.send(ApiKey.CREATE_ACLS, v, {"creations": [
        create("x", principal="alice")]})))
    out.append(("operation ANY", await t.send(ApiKey.CREATE_ACLS, v, {"creations": [
        create("x", operation=ANY_OP)]})))
    return out


@script(ApiKey.DESCRIBE_ACLS, range(0, 4))
async def describe_acls_script(t: Target, v: int) -> list[tuple[str, Any]]:
    await t.send(ApiKey.CREATE_ACLS, 3, {"creations": [
        {"resource_type": TOPIC_RESOURCE, "resource_name": f"described-acl-v{v}", "resource_pattern_type": LITERAL,
         "principal": "User:bob", "host": "*", "operation": READ, "permission_type": ALLOW},
        {"resource_type": GROUP_RESOURCE, "resource_name": f"described-v{v}", "resource_pattern_type": PREFIXED,
         "principal": "User:bob", "host": "*", "operation": READ, "permission_type": ALLOW}]})

    def ask(resource_type: int, name: str | None, pattern: int = ANY_PATTERN) -> Awaitable[Any]:
        return t.send(ApiKey.DESCRIBE_ACLS, v, {
            "resource_type_filter": resource_type, "resource_name_filter": name, "pattern_type_filter": pattern,
            "principal_filter": "User:bob", "host_filter": None, "operation": ANY_OP, "permission_type": ANY_PERMISSION})
    out = [("topic", await ask(TOPIC_RESOURCE, f"described-acl-v{v}", LITERAL))]
    if v >= 1:
        out.append(("match", await ask(GROUP_RESOURCE, f"described-v{v}-x", MATCH)))
    out.append(("none", await ask(TOPIC_RESOURCE, "nothing-here", LITERAL)))
    return out


@script(ApiKey.DELETE_ACLS, range(0, 4))
async def delete_acls_script(t: Target, v: int) -> list[tuple[str, Any]]:
    name = f"deleted-acl-v{v}"
    await t.send(ApiKey.CREATE_ACLS, 3, {"creations": [
        {"resource_type": TOPIC_RESOURCE, "resource_name": name, "resource_pattern_type": LITERAL,
         "principal": "User:carol", "host": "*", "operation": op, "permission_type": ALLOW} for op in (READ, WRITE)]})

    def delete(resource_name: str, operation: int) -> Awaitable[Any]:
        return t.send(ApiKey.DELETE_ACLS, v, {"filters": [{
            "resource_type_filter": TOPIC_RESOURCE, "resource_name_filter": resource_name,
            "pattern_type_filter": LITERAL, "principal_filter": "User:carol", "host_filter": None,
            "operation": operation, "permission_type": ANY_PERMISSION}]})
    return [("read", await delete(name, READ)), ("again", await delete(name, READ)),
            ("any", await delete(name, ANY_OP))]


@script(ApiKey.ALTER_CLIENT_QUOTAS, range(0, 2))
async def alter_client_quotas_script(t: Target, v: int) -> list[tuple[str, Any]]:
    def alter(entity: dict[str, str | None], ops: list[tuple[str, float, bool]], validate_only: bool = False) -> Any:
        return t.send(ApiKey.ALTER_CLIENT_QUOTAS, v, {"validate_only": validate_only, "entries": [{
            "entity": [{"entity_type": k, "entity_name": n} for k, n in entity.items()],
            "ops": [{"key": k, "value": x, "remove": r} for k, x, r in ops]}]})
    user = f"quota-user-v{v}"
    return [("set", await alter({"user": user}, [("producer_byte_rate", 1024.0, False)])),
            ("user and client", await alter({"user": user, "client-id": "c"}, [("consumer_byte_rate", 2048.0, False)])),
            ("validate only", await alter({"user": user}, [("request_percentage", 50.0, False)], True)),
            ("unknown key", await alter({"user": user}, [("no_such_quota", 1.0, False)])),
            ("bad entity", await alter({"nobody": "x"}, [("producer_byte_rate", 1.0, False)])),
            ("remove", await alter({"user": user}, [("producer_byte_rate", 0.0, True)])),
            ("described", await t.send(ApiKey.DESCRIBE_CLIENT_QUOTAS, 1, {"strict": False, "components": [
                {"entity_type": "user", "match_type": 0, "match": user}]}))]


@script(ApiKey.DESCRIBE_CLIENT_QUOTAS, range(0, 2))
async def describe_client_quotas_script(t: Target, v: int) -> list[tuple[str, Any]]:
    await t.send(ApiKey.ALTER_CLIENT_QUOTAS, 1, {"validate_only": False, "entries": [{
        "entity": [{"entity_type": "client-id", "entity_name": f"described-client-v{v}"}],
        "ops": [{"key": "producer_byte_rate", "value": 4096.0, "remove": False}]}]})

    def ask(components: list[tuple[str, int, str | None]], strict: bool = False) -> Awaitable[Any]:
        return t.send(ApiKey.DESCRIBE_CLIENT_QUOTAS, v, {"strict": strict, "components": [
            {"entity_type": k, "match_type": m, "match": x} for k, m, x in components]})
    return [("exact", await ask([("client-id", 0, f"described-client-v{v}")])),
            ("exact, strict", await ask([("client-id", 0, f"described-client-v{v}")], True)),
            ("default", await ask([("client-id", 1, None)])),
            ("unknown type", await ask([("nobody", 0, "x")])),
            ("bad match type", await ask([("user", 7, "x")]))]


@script(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, range(0, 1))
async def alter_scram_script(t: Target, v: int) -> list[tuple[str, Any]]:
    def upsert(name: str, mechanism: int = 1, iterations: int = 4096) -> Any:
        return {"name": name, "mechanism": mechanism, "iterations": iterations, "salt": b"salt" * 4,
                "salted_password": b"p" * 32}

    def alter(upsertions: list[Any], deletions: list[tuple[str, int]]) -> Awaitable[Any]:
        return t.send(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, v, {
            "upsertions": upsertions, "deletions": [{"name": n, "mechanism": m} for n, m in deletions]})
    return [("upsert", await alter([upsert("scram-alice"), upsert("scram-bob", 2)], [])),
            ("too few iterations", await alter([upsert("scram-carol", 1, 10)], [])),
            ("unknown mechanism", await alter([upsert("scram-carol", 9)], [])),
            ("delete", await alter([], [("scram-bob", 2)])),
            ("delete missing", await alter([], [("scram-nobody", 1)])),
            ("twice", await alter([upsert("scram-dave")], [("scram-dave", 1)])),
            ("empty name", await alter([upsert("")], []))]


@script(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, range(0, 1))
async def describe_scram_script(t: Target, v: int) -> list[tuple[str, Any]]:
    await t.send(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, {"deletions": [], "upsertions": [
        {"name": "described-user", "mechanism": 1, "iterations": 8192, "salt": b"s" * 16, "salted_password": b"p" * 32}]})
    return [("named", await t.send(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, v, {"users": [
        {"name": "described-user"}, {"name": "nobody"}]})),
            ("duplicate", await t.send(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, v, {"users": [
                {"name": "described-user"}, {"name": "described-user"}]}))]


@script(ApiKey.SASL_HANDSHAKE, range(0, 2))
async def sasl_handshake_script(t: Target, v: int) -> list[tuple[str, Any]]:
    return [("on PLAINTEXT", await t.send(ApiKey.SASL_HANDSHAKE, v, {"mechanism": "PLAIN"}))]


@script(ApiKey.SASL_AUTHENTICATE, range(0, 3))
async def sasl_authenticate_script(t: Target, v: int) -> list[tuple[str, Any]]:
    return [("on PLAINTEXT", await t.send(ApiKey.SASL_AUTHENTICATE, v, {"auth_bytes": b"\x00user\x00pass"}))]


# ----- refusals: one request per API and version from mallory, whom no ACL names

_DENIED_GROUP, _DENIED_TXN = "denied-group", "denied-transaction"
_TXN = {"transactional_id": _DENIED_TXN, "producer_id": 0, "producer_epoch": 0}
_DATA_0 = [{"name": "data", "partitions": [0]}]
DENIED: dict[int, Callable[[], dict[str, Any]]] = {
    ApiKey.PRODUCE: lambda: {"acks": -1, "timeout_ms": 10_000, "topic_data": [
        {"name": "data", "partition_data": [{"index": 0, "records": records(["m"])}]}]},
    ApiKey.FETCH: lambda: fetch_fields([("data", 0, 0)]),
    ApiKey.LIST_OFFSETS: lambda: {"replica_id": -1, "topics": [
        {"name": "data", "partitions": [{"partition_index": 0, "timestamp": -1}]}]},
    ApiKey.METADATA: lambda: {"topics": [{"name": "data"}], "allow_auto_topic_creation": False,
                              "include_cluster_authorized_operations": True,
                              "include_topic_authorized_operations": True},
    ApiKey.OFFSET_COMMIT: lambda: {"group_id": _DENIED_GROUP, "member_id": "", "topics": [
        {"name": "data", "partitions": [{"partition_index": 0, "committed_offset": 1}]}]},
    ApiKey.OFFSET_FETCH: lambda: {"group_id": _DENIED_GROUP, "topics": [{"name": "data", "partition_indexes": [0]}],
                                  "groups": [{"group_id": _DENIED_GROUP, "topics": None}]},
    ApiKey.FIND_COORDINATOR: lambda: {"key": _DENIED_GROUP, "coordinator_keys": [_DENIED_GROUP]},
    ApiKey.JOIN_GROUP: lambda: {"group_id": _DENIED_GROUP, "session_timeout_ms": 30_000,
                                "rebalance_timeout_ms": 30_000, "member_id": "", "protocol_type": "consumer",
                                "protocols": [{"name": "range", "metadata": SUBSCRIPTION}]},
    ApiKey.HEARTBEAT: lambda: {"group_id": _DENIED_GROUP, "generation_id": 1, "member_id": "m"},
    ApiKey.LEAVE_GROUP: lambda: {"group_id": _DENIED_GROUP, "member_id": "m", "members": [{"member_id": "m"}]},
    ApiKey.SYNC_GROUP: lambda: {"group_id": _DENIED_GROUP, "generation_id": 1, "member_id": "m",
                                "protocol_type": "consumer", "protocol_name": "range", "assignments": []},
    ApiKey.DESCRIBE_GROUPS: lambda: {"groups": [_DENIED_GROUP], "include_authorized_operations": True},
    ApiKey.LIST_GROUPS: lambda: {},
    ApiKey.CREATE_TOPICS: lambda: {"timeout_ms": 30_000, "topics": [
        {"name": "denied-topic", "num_partitions": 1, "replication_factor": 1}]},
    ApiKey.DELETE_TOPICS: lambda: {"timeout_ms": 30_000, "topic_names": ["data"], "topics": [{"name": "data"}]},
    ApiKey.DELETE_RECORDS: lambda: {"timeout_ms": 30_000, "topics": [
        {"name": "data", "partitions": [{"partition_index": 0, "offset": 1}]}]},
    ApiKey.INIT_PRODUCER_ID: lambda: {"transactional_id": _DENIED_TXN, "transaction_timeout_ms": 60_000},
    ApiKey.OFFSET_FOR_LEADER_EPOCH: lambda: {"replica_id": -1, "topics": [
        {"topic": "data", "partitions": [{"partition": 0, "leader_epoch": 0}]}]},
    ApiKey.ADD_PARTITIONS_TO_TXN: lambda: add_partitions_fields(_DENIED_TXN, 0, 0, _DATA_0),
    ApiKey.ADD_OFFSETS_TO_TXN: lambda: _TXN | {"group_id": _DENIED_GROUP},
    ApiKey.END_TXN: lambda: _TXN | {"committed": True},
    ApiKey.WRITE_TXN_MARKERS: lambda: {"markers": [{"producer_id": 0, "producer_epoch": 0, "transaction_result": True,
                                                    "coordinator_epoch": 0,
                                                    "topics": [{"name": "data", "partition_indexes": [0]}]}]},
    ApiKey.TXN_OFFSET_COMMIT: lambda: _TXN | {"group_id": _DENIED_GROUP, "topics": [
        {"name": "data", "partitions": [{"partition_index": 0, "committed_offset": 1}]}]},
    ApiKey.DESCRIBE_ACLS: lambda: {"resource_type_filter": 1, "pattern_type_filter": 1, "operation": 1,
                                   "permission_type": 1},
    ApiKey.CREATE_ACLS: lambda: {"creations": [
        {"resource_type": TOPIC_RESOURCE, "resource_name": "data", "resource_pattern_type": LITERAL,
         "principal": "User:mallory", "host": "*", "operation": READ, "permission_type": ALLOW}]},
    ApiKey.DELETE_ACLS: lambda: {"filters": [{"resource_type_filter": 1, "pattern_type_filter": 1, "operation": 1,
                                              "permission_type": 1}]},
    ApiKey.DESCRIBE_CONFIGS: lambda: {"resources": [
        {"resource_type": TOPIC, "resource_name": "data", "configuration_keys": None},
        {"resource_type": BROKER, "resource_name": str(BROKER_ID), "configuration_keys": ["num.partitions"]}]},
    ApiKey.ALTER_CONFIGS: lambda: {"resources": [{"resource_type": TOPIC, "resource_name": "data", "configs": [
        {"name": "retention.ms", "value": "1"}]}]},
    ApiKey.INCREMENTAL_ALTER_CONFIGS: lambda: {"resources": [{
        "resource_type": TOPIC, "resource_name": "data",
        "configs": [{"name": "retention.ms", "config_operation": 0, "value": "1"}]}]},
    ApiKey.ALTER_REPLICA_LOG_DIRS: lambda: {"dirs": [{"path": "/no/such/dir", "topics": _DATA_0}]},
    ApiKey.DESCRIBE_LOG_DIRS: lambda: {"topics": None},
    ApiKey.CREATE_PARTITIONS: lambda: {"timeout_ms": 30_000, "topics": [{"name": "data", "count": 5}]},
    ApiKey.DELETE_GROUPS: lambda: {"groups_names": [_DENIED_GROUP]},
    ApiKey.ELECT_LEADERS: lambda: {"timeout_ms": 30_000, "topic_partitions": [{"topic": "data", "partitions": [0]}]},
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: lambda: {"timeout_ms": 30_000, "topics": [
        {"name": "data", "partitions": [{"partition_index": 0, "replicas": [1]}]}]},
    ApiKey.LIST_PARTITION_REASSIGNMENTS: lambda: {"timeout_ms": 30_000, "topics": None},
    ApiKey.OFFSET_DELETE: lambda: {"group_id": _DENIED_GROUP, "topics": [
        {"name": "data", "partitions": [{"partition_index": 0}]}]},
    ApiKey.DESCRIBE_CLIENT_QUOTAS: lambda: {"components": []},
    ApiKey.ALTER_CLIENT_QUOTAS: lambda: {"entries": [{"entity": [{"entity_type": "user", "entity_name": "mallory"}],
                                                      "ops": [{"key": "producer_byte_rate", "value": 1.0}]}]},
    # (Kafka leaves a refused request for every user, ``users`` null, unanswered.)
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: lambda: {"users": [{"name": "mallory"}]},
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: lambda: {"deletions": [{"name": "mallory", "mechanism": 1}]},
    ApiKey.DESCRIBE_CLUSTER: lambda: {"include_cluster_authorized_operations": True},
    ApiKey.DESCRIBE_PRODUCERS: lambda: {"topics": [{"name": "data", "partition_indexes": [0]}]},
    ApiKey.DESCRIBE_TRANSACTIONS: lambda: {"transactional_ids": [_DENIED_TXN]},
    ApiKey.LIST_TRANSACTIONS: lambda: {},
}


# --------------------------------------------------------------------------- the tests


@dataclass
class Brokers:
    """The two brokers as the super user (PLAINTEXT) and as mallory (SASL_PLAINTEXT)."""

    targets: tuple[Target, Target]
    mallory: tuple[Target, Target]


@pytest.fixture(scope="module")
def brokers(zookeeper: object, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Brokers]:
    from tests.conftest import require_kafka
    from tests.zookeeper import chroot_for

    require_kafka("3.9.2")
    ports = {name: (free_port(), free_port()) for name in ("pybroker", "Kafka")}
    data = tmp_path_factory.mktemp("every-api") / "data"
    ours = BrokerProcess(data, ports["pybroker"][0], **SETTINGS, **SASL_SETTINGS,
                         listeners=listeners(*ports["pybroker"]))
    kafka = KafkaBroker(tmp_path_factory.mktemp("kafka"), chroot_for(zookeeper, "every-api"),  # type: ignore[arg-type]
                        BROKER_ID, ports["Kafka"][0], quick_start=True, listeners=listeners(*ports["Kafka"]),
                        **{k: v for k, v in (SETTINGS | SASL_SETTINGS).items() if k != "broker.id"})
    try:
        ours.start()
        kafka.start()
        pair = (Target("pybroker", ours.bootstrap, data), Target("Kafka", kafka.bootstrap, kafka.data_dir))
        asyncio.run(_set_up_both(pair))
        yield Brokers(pair, tuple(  # type: ignore[arg-type]
            Target(t.name, f"127.0.0.1:{ports[t.name][1]}", t.log_dir, MALLORY) for t in pair))
    finally:
        ours.kill()
        kafka.stop()
        kafka.kill()


async def _set_up_both(pair: tuple[Target, Target]) -> None:
    await asyncio.gather(*(set_up(t) for t in pair))


def _cases() -> Iterator[Any]:
    for entry in SCRIPTS:
        for version in entry.versions:
            yield pytest.param(entry, version, id=f"{ApiKey(entry.api_key).name}-v{version}")


@pytest.mark.broker_log_allows(r".")
@pytest.mark.parametrize(("entry", "version"), list(_cases()))
def test_answers_match_kafka(brokers: Brokers, entry: Entry, version: int) -> None:
    ignored = IGNORED | entry.ignored

    async def run_both() -> list[list[tuple[str, Any]]]:
        return list(await asyncio.gather(*(entry.script(t, version) for t in brokers.targets)))

    ours, kafkas = asyncio.run(run_both())
    found = []
    for (label, answer), (_, kafka_answer) in zip(ours, kafkas, strict=True):
        found += [f"{label}: {d}" for d in differences(normalized(plain(answer), ignored),
                                                        normalized(plain(kafka_answer), ignored))]
    assert not found, "pybroker's answers differ from Kafka 3.9.2's:\n" + "\n".join(found)


def test_first_lookups_start_the_internal_topics(brokers: Brokers) -> None:
    """While ``__transaction_state`` and ``__consumer_offsets`` do not exist: a transactional batch
    answers NOT_ENOUGH_REPLICAS (its leader cannot verify it; the client retries), and the first
    FindCoordinator of a transactional id and of a group COORDINATOR_NOT_AVAILABLE, as the lookup
    starts the topic's creation (the client asks again)."""
    ours, kafkas = (t.first_lookups for t in brokers.targets)
    produced = kafkas[0]["responses"][0]["partition_responses"][0]["error_code"]
    assert [produced] + [answer["error_code"] for answer in kafkas[1:]] == [
        NOT_ENOUGH_REPLICAS, COORDINATOR_NOT_AVAILABLE, COORDINATOR_NOT_AVAILABLE]
    assert not differences(normalized(ours, IGNORED), normalized(kafkas, IGNORED)), (ours, kafkas)


def test_every_advertised_version_has_a_script() -> None:
    scripted = {(e.api_key, v) for e in SCRIPTS for v in e.versions}
    scripted |= {(k, v) for k, (versions, _) in COVERED_ELSEWHERE.items() for v in versions}
    missing = [f"{ApiKey(k).name} v{v}" for k, lo, hi in codec.supported_apis() if k not in NOT_CLIENT_FACING
               for v in range(lo, hi + 1) if (k, v) not in scripted and (k, v) != (ApiKey.DELETE_RECORDS, 3)]
    assert not missing, f"advertised versions no differential test sends: {missing}"


def _refusals() -> Iterator[Any]:
    for api_key, (lo, hi) in ((k, codec.supported_versions(k)) for k in DENIED):
        for version in range(lo, hi + 1):
            if (api_key, version) in _MESSAGE_FORMATS or (api_key, version) == (ApiKey.DELETE_RECORDS, 3):
                continue
            yield pytest.param(api_key, version, id=f"{ApiKey(api_key).name}-v{version}")


_MESSAGE_FORMATS = {(ApiKey.PRODUCE, v) for v in range(3)} | {(ApiKey.FETCH, v) for v in range(4)} | {
    (ApiKey.LIST_OFFSETS, 0)}


@pytest.mark.broker_log_allows(r".")
@pytest.mark.parametrize(("api_key", "version"), list(_refusals()))
def test_refusals_match_kafka(brokers: Brokers, api_key: int, version: int) -> None:
    """The same request from mallory to both brokers: the same refusal (or the same answer where
    the API asks for no permission she lacks)."""
    async def run_both() -> list[Any]:
        return list(await asyncio.gather(*(t.send(api_key, version, DENIED[api_key]()) for t in brokers.mallory)))

    ours, kafkas = asyncio.run(run_both())
    found = differences(normalized(plain(ours), IGNORED), normalized(plain(kafkas), IGNORED))
    assert not found, "pybroker's refusal differs from Kafka 3.9.2's:\n" + "\n".join(found)


# ----- every broker config (kafka-configs --describe --all --entity-type brokers --entity-name 1)

# Broker configs whose values differ, and why. Their types, read-only and sensitive flags are
# still compared.
BROKER_CONFIG_VALUES: dict[str, str] = {
    "listeners": "each broker's own ports; pybroker's default binds 127.0.0.1, Kafka's every interface",
    "log.dirs": "each broker's own directory",
    "log.dir": "pybroker's default is ./pybroker-data, Kafka's /tmp/kafka-logs",
    "zookeeper.connect": "the pybroker beside runs without ZooKeeper",
    "zookeeper.session.timeout.ms": "the Kafka harness sets 6000 (a killed broker's registration goes sooner)",
    "controlled.shutdown.retry.backoff.ms": "the Kafka harness sets 1000 (a stop retries sooner)",
}
# Built-in defaults pybroker chose otherwise (both brokers here set these names, so only the
# DEFAULT_CONFIG synonym differs): a lone broker works without any server.properties.
PYBROKER_DEFAULTS: dict[str, str] = {
    "node.id": "1 (Kafka -1): `pybroker serve` needs no id",
    "group.initial.rebalance.delay.ms": "0 (Kafka 3000), as Kafka's shipped server.properties sets it",
    "offsets.topic.replication.factor": "1 (Kafka 3), as Kafka's shipped server.properties sets it",
    "transaction.state.log.replication.factor": "1 (Kafka 3), as Kafka's shipped server.properties sets it",
    "transaction.state.log.min.isr": "1 (Kafka 2), as Kafka's shipped server.properties sets it",
}
# Configs Kafka changes at run time and pybroker does not (read-only here).
_STARTUP_ONLY = "pybroker binds its listeners and builds their TLS and SASL settings once, at start"
READ_ONLY_HERE: dict[str, str] = {
    name: _STARTUP_ONLY for name in (
        "listeners", "listener.security.protocol.map", "sasl.enabled.mechanisms", "sasl.jaas.config",
        "sasl.mechanism.inter.broker.protocol", "ssl.cipher.suites", "ssl.client.auth", "ssl.enabled.protocols",
        "ssl.endpoint.identification.algorithm", "ssl.key.password", "ssl.keystore.certificate.chain",
        "ssl.keystore.key", "ssl.keystore.location", "ssl.keystore.password", "ssl.keystore.type", "ssl.protocol",
        "ssl.truststore.certificates", "ssl.truststore.location", "ssl.truststore.password", "ssl.truststore.type")
} | {
    "transaction.partition.verification.enable": "read once, when the broker starts",
} | {name: "Kafka's setting for a subsystem pybroker has not (pybroker/server/unapplied_configs.py)"
     for name in UNAPPLIED_CONFIGS}


def _broker_config_view(entries: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    out = {}
    for entry in entries:
        name = entry["name"]
        view = {k: entry[k] for k in ("value", "read_only", "config_source", "is_sensitive", "config_type")}
        view["synonyms"] = [(s["name"], s["value"], s["source"]) for s in entry["synonyms"]]
        if name in BROKER_CONFIG_VALUES:
            view = {k: view[k] for k in ("read_only", "is_sensitive", "config_type")}
        elif name in PYBROKER_DEFAULTS:
            view["synonyms"] = [s for s in view["synonyms"] if s[2] != 5]  # DEFAULT_CONFIG
        out[name] = view
    return out


def test_every_broker_config_matches_kafka(brokers: Brokers) -> None:
    """Broker 1's every config, as ``kafka-configs --describe --all`` asks for them (synonyms
    included), after a custom name is set for it and for the cluster dynamically: the same names (Kafka's 315 and
    what server.properties sets, a listener's own SASL setting included), types, values,
    sources, sensitivity and synonyms, and the same read-only flags but for `READ_ONLY_HERE`;
    the cluster defaults too."""

    async def describe(t: Target) -> tuple[Any, Any]:
        altered = await t.send(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {"validate_only": False, "resources": [
            {"resource_type": BROKER, "resource_name": resource,
             "configs": [{"name": "custom.setting", "config_operation": 0, "value": "x"}]}
            for resource in (str(BROKER_ID), "")]})
        assert [r.error_code for r in altered.responses] == [0, 0], (t.name, altered)

        def ask(name: str, keys: list[str] | None = None) -> Awaitable[Any]:
            return t.send(ApiKey.DESCRIBE_CONFIGS, 4, {"include_synonyms": True, "include_documentation": False,
                                                       "resources": [{"resource_type": BROKER, "resource_name": name,
                                                                      "configuration_keys": keys}]})
        # Kafka applies its own dynamic change when ZooKeeper's notification comes back to it.
        deadline = time.monotonic() + 15
        while not all([(await ask(r, ["custom.setting"])).results[0].configs for r in (str(BROKER_ID), "")]):
            assert time.monotonic() < deadline, f"{t.name} never applied custom.setting"
            await asyncio.sleep(0.05)
        return await ask(str(BROKER_ID)), await ask("")

    async def both() -> list[tuple[Any, Any]]:
        return list(await asyncio.gather(*(describe(t) for t in brokers.targets)))

    (ours, our_defaults), (kafkas, kafka_defaults) = asyncio.run(both())
    mine = _broker_config_view(plain(ours.results[0].configs))
    theirs = _broker_config_view(plain(kafkas.results[0].configs))
    assert len(theirs) > 300
    assert sorted(mine) == sorted(theirs), (sorted(set(mine) - set(theirs)), sorted(set(theirs) - set(mine)))
    found = []
    for name in sorted(theirs):
        expected = dict(theirs[name])
        if name in READ_ONLY_HERE and not expected["read_only"]:
            expected["read_only"] = True
        found += [f"{name}: {d}" for d in differences(mine[name], expected)]
    assert not found, "pybroker's broker configs differ from Kafka 3.9.2's:\n" + "\n".join(found)
    defaults = [plain(d.results[0]) for d in (our_defaults, kafka_defaults)]
    assert [c["name"] for c in defaults[1]["configs"]] == ["custom.setting"]
    assert not differences(*defaults), defaults
