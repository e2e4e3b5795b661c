"""The project's own asyncio admin client.

Owns bootstrapping: `parse_bootstrap` reads ``bootstrap.servers`` as Kafka's clients do (a comma
list of ``host:port``, ``[ipv6]:port`` or ``SCHEME://host:port`` entries; Kafka's "Invalid url" and
"Invalid port in bootstrap.servers" as `BootstrapError`), and `Admin.connect` takes the first
reachable entry (Kafka's "No resolvable bootstrap urls" when no host resolves). Then cluster
metadata lookups, the topic administration calls (create/delete topics, create partitions,
describe and alter topic and broker configs), offset lookups (ListOffsets, sent to each
partition's leader), record deletion (DeleteRecords, sent to each partition's leader;
``leader_only`` is KIP-1343's v3 flag), ACLs (CreateAcls, DescribeAcls, DeleteAcls, sent to the
bootstrap broker), leader elections (ElectLeaders, sent to the controller), users' SCRAM
credentials (DescribeUserScramCredentials to any broker; AlterUserScramCredentials to the
controller, the password salted and hashed here as Kafka's admin does) and the consumer group
calls (FindCoordinator, ListGroups, DescribeGroups, DeleteGroups, OffsetFetch, OffsetCommit,
OffsetDelete), each sent to the group's coordinator. Each call returns
per-resource results or raises ``AdminError`` naming the resource and Kafka's error; a call about
several resources tries them all first, then raises for the first failure with every failure in
``AdminError.failures``.

Requests go to the broker that must answer them: a connection per broker address is opened on
first use. Coordinator errors (COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR,
COORDINATOR_LOAD_IN_PROGRESS) and leadership errors are retried, after looking the coordinator
or leader up again, until ``retry_timeout`` seconds have passed.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import re
import socket
import uuid
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple, TypeVar

from pybroker.client.connection import BrokerConnection, KafkaClientError, UnsupportedVersionError
from pybroker.client.node import Node
from pybroker.client.security import PLAINTEXT, ClientSecurity
from pybroker.client.topic_layout import TopicLayout
from pybroker.common.errors import ErrorCode
from pybroker.common.topic import topic_id_to_string
from pybroker.protocol import consumer_protocol
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages import (
    AlterClientQuotasRequest,
    AlterConfigsRequest,
    AlterPartitionReassignmentsRequest,
    AlterReplicaLogDirsRequest,
    AlterUserScramCredentialsRequest,
    CreateAclsRequest,
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteAclsRequest,
    DeleteGroupsRequest,
    DeleteRecordsRequest,
    DeleteTopicsRequest,
    DescribeAclsRequest,
    DescribeClientQuotasRequest,
    DescribeConfigsRequest,
    DescribeGroupsRequest,
    DescribeLogDirsRequest,
    DescribeProducersRequest,
    DescribeUserScramCredentialsRequest,
    ElectLeadersRequest,
    FindCoordinatorRequest,
    IncrementalAlterConfigsRequest,
    ListGroupsRequest,
    ListOffsetsRequest,
    ListPartitionReassignmentsRequest,
    MetadataRequest,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    OffsetFetchRequest,
    OffsetForLeaderEpochRequest,
    PartitionLeaderEpochsForPartitionsRequest,
)
from pybroker.security.acl import (
    ANY_BINDING,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    ResourcePattern,
)
from pybroker.security.authorizer import AclOperation, AclPermissionType, PatternType, ResourceType
from pybroker.security.scram import ScramMechanism, secure_random_string
from pybroker.types import TopicPartition

log = logging.getLogger(__name__)

TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4
BROKER_LOGGER_RESOURCE = 8
GROUP_KEY_TYPE, TRANSACTION_KEY_TYPE = 0, 1  # FindCoordinator's key types: a group, a transactional id
NO_GENERATION = -1  # OffsetCommit from outside the group (Kafka's AdminClient does this)
NO_MEMBER_ID = ""
CONSUMER_REPLICA_ID = -1
EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP = -2, -1, -3
PREFERRED_ELECTION, UNCLEAN_ELECTION = 0, 1  # ElectLeaders' ElectionType
RETRY_BACKOFF_S = 0.1

COORDINATOR_ERRORS = frozenset({
    ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
})
LEADERSHIP_ERRORS = frozenset({
    ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.LEADER_NOT_AVAILABLE, ErrorCode.UNKNOWN_LEADER_EPOCH,
    ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.OFFSET_NOT_AVAILABLE, ErrorCode.REPLICA_NOT_AVAILABLE,
})

# Metadata: a topic that exists but is not ready yet (just created, or being auto-created).
_TOPIC_NOT_READY = frozenset({ErrorCode.LEADER_NOT_AVAILABLE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION})

# DeleteRecords: errors after which the partition is looked up again and retried (a leader moved,
# or the connection to it broke). REQUEST_TIMED_OUT is the broker's verdict for this timeout: final.
DELETE_RECORDS_RETRY_ERRORS = LEADERSHIP_ERRORS | {ErrorCode.NETWORK_EXCEPTION}
DELETE_RECORDS_LEADER_ONLY_VERSION = 3  # KIP-1343

# Kafka's ConfigEntry.ConfigSource names, by the wire's ConfigSource code (DescribeConfigs v1+).
CONFIG_SOURCE_NAMES = {
    0: "UNKNOWN", 1: "DYNAMIC_TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG", 3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
    4: "STATIC_BROKER_CONFIG", 5: "DEFAULT_CONFIG", 6: "DYNAMIC_BROKER_LOGGER_CONFIG",
    7: "DYNAMIC_CLIENT_METRICS_CONFIG", 8: "DYNAMIC_GROUP_CONFIG",
}

# OffsetCommit errors about a partition rather than the group.
PARTITION_COMMIT_ERRORS = frozenset({
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.OFFSET_METADATA_TOO_LARGE, ErrorCode.TOPIC_AUTHORIZATION_FAILED,
})

OffsetSpec = Literal["earliest", "latest", "max_timestamp"] | int


@dataclass(frozen=True)
class ProducerState:
    """One active producer of a partition (DescribeProducers; Kafka's ``ProducerState``)."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int
    current_transaction_start_offset: int  # -1: no open transaction


class AdminError(Exception):
    """A resource-level failure: ``error`` is Kafka's error code.

    A call about several resources raises for its first failure; ``failures`` then maps every
    failed resource (group id, ``TopicPartition``) to its own ``AdminError`` (this one included).
    """

    def __init__(
        self, resource: str, error: int, message: str | None = None,
        failures: Mapping[object, AdminError] | None = None,
    ) -> None:
        self.resource, self.error = resource, ErrorCode.for_code(error)
        self.message = message or self.error.message or self.error.name
        self.failures: dict[object, AdminError] = dict(failures or {})
        super().__init__(f"{resource}: {self.error.name}" + (f" ({message})" if message else ""))


T = TypeVar("T")

def _raise_failures(failures: Mapping[Any, AdminError]) -> None:
    """Raise the first of ``failures`` (carrying all of them), if any."""
    if failures:
        first = next(iter(failures.values()))
        first.failures = dict(failures)
        raise first


def _at_any_version(request: T) -> Callable[[int], T]:
    """A ``make_request`` for `Admin._send_to` that sends ``request`` whatever the version."""
    return lambda _version: request


async def _for_each_group(groups: Iterable[str], call: Callable[[str], Awaitable[T]]) -> dict[str, T]:
    """``call`` every distinct group concurrently; AdminErrors are collected and raised together."""
    names = list(dict.fromkeys(groups))
    outcomes = await asyncio.gather(*(call(g) for g in names), return_exceptions=True)
    failures: dict[str, AdminError] = {}
    results: dict[str, T] = {}
    for name, outcome in zip(names, outcomes, strict=True):
        if isinstance(outcome, AdminError):
            failures[name] = outcome
        elif isinstance(outcome, BaseException):
            raise outcome
        else:
            results[name] = outcome
    _raise_failures(failures)
    return results


@dataclass(frozen=True)
class LogDirReplicaInfo:
    """A replica's log in a log dir (Kafka's ``ReplicaInfo``)."""

    topic_partition: TopicPartition
    size: int
    offset_lag: int
    is_future: bool


@dataclass(frozen=True)
class LogDirInfo:
    """One log dir of a broker (Kafka's ``LogDirDescription``): error 56 when it is offline;
    total/usable bytes -1 when the broker does not tell (DescribeLogDirs before v4)."""

    path: str
    error: int
    replicas: list[LogDirReplicaInfo]
    total_bytes: int = -1
    usable_bytes: int = -1


@dataclass
class GroupListing:
    """One group as ListGroups reports it (``state`` is None when the broker is older than v4)."""

    group_id: str
    protocol_type: str
    state: str | None = None

    @property
    def is_consumer_group(self) -> bool:
        """A consumer group or a "simple" one that only commits offsets (protocol type "")."""
        return self.protocol_type in (consumer_protocol.PROTOCOL_TYPE, "")


@dataclass
class MemberDescription:
    """A group member. For the consumer protocol, ``assignment`` is decoded from
    ``member_assignment``; it is empty while the group rebalances."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    host: str
    assignment: list[TopicPartition] = field(default_factory=list)
    member_metadata: bytes = b""
    member_assignment: bytes = b""


@dataclass
class GroupDescription:
    """A group as DescribeGroups reports it. A group the coordinator does not know is "Dead".
    ``protocol`` is the chosen protocol (for consumer groups: the assignment strategy)."""

    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: list[MemberDescription]
    coordinator: Node


@dataclass
class CommittedOffset:
    """A committed offset: the next offset the group will consume."""

    offset: int
    leader_epoch: int | None = None
    metadata: str = ""


@dataclass
class ListedOffset:
    """A ListOffsets answer. ``offset`` is -1 when no record matches a timestamp spec;
    ``timestamp`` is -1 for earliest/latest."""

    offset: int
    timestamp: int = -1
    leader_epoch: int | None = None


@dataclass(frozen=True)
class DeletedRecords:
    """A partition's DeleteRecords answer: its low watermark (the smallest log start offset of
    its replicas) and, from brokers with DeleteRecords v3, the leader's log start offset (-1 from
    older brokers)."""

    low_watermark: int
    leader_log_start_offset: int = -1


@dataclass(frozen=True)
class ConfigSynonym:
    """Where a config's value could come from, most specific first (DescribeConfigs synonyms)."""

    name: str
    value: str | None
    source: int

    @property
    def source_name(self) -> str:
        return CONFIG_SOURCE_NAMES.get(self.source, "UNKNOWN")


@dataclass
class ConfigEntry:
    """A config as DescribeConfigs reports it. ``source`` is the wire's ConfigSource code
    (1 = a topic override); ``value`` is None when sensitive."""

    name: str
    value: str | None
    source: int
    is_sensitive: bool = False
    read_only: bool = False
    synonyms: list[ConfigSynonym] = field(default_factory=list)

    @property
    def source_name(self) -> str:
        return CONFIG_SOURCE_NAMES.get(self.source, "UNKNOWN")


@dataclass
class PartitionInfo:
    partition: int
    leader: int
    leader_epoch: int
    replicas: list[int]
    isr: list[int]


@dataclass
class TopicDescription:
    name: str
    topic_id: str
    partitions: list[PartitionInfo] = field(default_factory=list)
    internal: bool = False
    # KIP-253's counts, as a pybroker broker reports them (None from any other broker).
    initial_partition_count: int | None = None
    undeleted_partition_count: int | None = None


@dataclass(frozen=True)
class PartitionReassignment:
    """A reassignment under way (Kafka's ``PartitionReassignment``): the partition's replicas (the
    target replicas first, then the original ones) and those being added and removed."""

    replicas: list[int]
    adding_replicas: list[int]
    removing_replicas: list[int]


DEFAULT_SCRAM_ITERATIONS = 4096  # Kafka's ScramCredentialInfo default in kafka-configs


@dataclass(frozen=True)
class ScramCredentialInfo:
    """A mechanism a user has a credential for (``SCRAM-SHA-256``/``SCRAM-SHA-512``, or
    ``UNKNOWN`` for a mechanism byte this client does not know) and its iterations."""

    mechanism: str
    iterations: int


@dataclass(frozen=True)
class UserScramCredentialUpsertion:
    """Set ``user``'s credential for ``mechanism`` from ``password`` (Kafka's
    ``UserScramCredentialUpsertion``). The salt is Kafka's kind of random one unless given;
    the salted password is computed by the client, so the password never leaves it."""

    user: str
    mechanism: str
    password: str | bytes = field(repr=False)
    iterations: int = DEFAULT_SCRAM_ITERATIONS
    salt: bytes | None = field(default=None, repr=False)


@dataclass(frozen=True)
class UserScramCredentialDeletion:
    """Remove ``user``'s credential for ``mechanism``."""

    user: str
    mechanism: str


def _scram_mechanism(name: str) -> ScramMechanism:
    mechanism = ScramMechanism.for_name(name)
    if mechanism is None:
        raise ValueError(f"Unknown SCRAM mechanism {name!r}: expected SCRAM-SHA-256 or SCRAM-SHA-512")
    return mechanism


class BootstrapError(KafkaClientError, ValueError):
    """``bootstrap.servers`` Kafka's clients refuse (their ConfigException): the message is Kafka's."""


class BootstrapServer(NamedTuple):
    """One entry of ``bootstrap.servers``: where to connect, and the entry as given (``url``)."""

    host: str
    port: int
    url: str


# An entry as Kafka's clients read it (ClientUtils.parseAndValidateAddresses): the whole entry is
# an optional prefix (the shortest that lets the rest match, so ``PLAINTEXT://`` or any other
# ``SCHEME://`` is skipped), a host of letters, digits and ``-%._:`` (an IPv6 literal, bracketed
# or not), then ``:port``.
_BOOTSTRAP_ENTRY = re.compile(r".*?\[?(?P<host>[0-9a-zA-Z\-%._:]*)\]?:(?P<port>[0-9]+)")
BOOTSTRAP_SERVERS = "bootstrap.servers"


def parse_bootstrap(servers: str) -> list[BootstrapServer]:
    """``bootstrap.servers`` as Kafka's clients read it: a comma-separated list (blank entries
    skipped) of ``host:port``, ``[ipv6]:port`` or ``SCHEME://host:port`` (any scheme, as Kafka
    3.9's tools accept ``PLAINTEXT://127.0.0.1:9092`` or ``SASL_SSL://...``: the connection's
    security comes from the client's settings, not from the entry); an empty host is the loopback
    address, as for Kafka. Raises `BootstrapError` with Kafka's message for an entry without a
    port ("Invalid url in bootstrap.servers: ENTRY"), a port above 65535 ("Invalid port in
    bootstrap.servers: ENTRY") and a list without entries ("No resolvable bootstrap urls given
    in bootstrap.servers"). Host names are resolved when connecting (`Admin.connect`)."""
    out = []
    for url in (item.strip() for item in servers.split(",")):
        if not url:
            continue
        match = _BOOTSTRAP_ENTRY.fullmatch(url)
        if match is None:
            raise BootstrapError(f"Invalid url in {BOOTSTRAP_SERVERS}: {url}")
        port = int(match["port"])
        if port > 0xFFFF:
            raise BootstrapError(f"Invalid port in {BOOTSTRAP_SERVERS}: {url}")
        out.append(BootstrapServer(match["host"] or "127.0.0.1", port, url))
    if not out:
        raise BootstrapError(f"No resolvable bootstrap urls given in {BOOTSTRAP_SERVERS}")
    return out


class Admin:
    """``async with Admin("127.0.0.1:9092") as admin: ...``"""

    def __init__(
        self, bootstrap_servers: str, client_id: str = "pybroker-admin", retry_timeout: float = 30.0,
        request_timeout: float = 30.0, security: ClientSecurity = PLAINTEXT,
    ) -> None:
        """``retry_timeout``: how long retriable errors are retried (seconds); ``request_timeout``:
        how long one request waits for its response (seconds, Kafka's request.timeout.ms);
        ``security``: how every connection secures itself (TLS, SASL; `security_from_properties`
        builds it from Kafka client properties)."""
        self._security = security
        self._bootstrap = parse_bootstrap(bootstrap_servers)
        self._client_id = client_id
        self._retry_timeout = retry_timeout
        self._request_timeout = request_timeout
        self._connection: BrokerConnection | None = None
        self._connections: dict[tuple[str, int], BrokerConnection] = {}  # by address, bootstrap included
        self._connect_lock = asyncio.Lock()
        self._coordinators: dict[str, Node] = {}
        self._txn_coordinators: dict[str, Node] = {}  # by transactional id

    async def __aenter__(self) -> Admin:
        await self.connect()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def connect(self) -> None:
        """Connect to the first bootstrap server that answers. A server whose host does not
        resolve is skipped with Kafka's warning; when none resolves, `BootstrapError` says so in
        Kafka's words; otherwise `KafkaClientError` lists why each failed."""
        errors = []
        unresolved = 0
        for host, port, url in self._bootstrap:
            connection = BrokerConnection(host, port, self._client_id, security=self._security)
            try:
                await connection.connect()
            except socket.gaierror as e:
                log.warning("Couldn't resolve server %s from %s as DNS resolution failed for %s", url,
                            BOOTSTRAP_SERVERS, host)
                errors.append(f"{host}:{port}: {e}")
                unresolved += 1
                continue
            except (OSError, KafkaClientError, TimeoutError) as e:
                errors.append(f"{host}:{port}: {e}")
                continue
            self._connection = connection
            self._connections[(host, port)] = connection
            return
        if unresolved == len(self._bootstrap):
            raise BootstrapError(f"No resolvable bootstrap urls given in {BOOTSTRAP_SERVERS}")
        raise KafkaClientError("could not reach any bootstrap server: " + "; ".join(errors))

    async def close(self) -> None:
        connections = {id(c): c for c in [*self._connections.values(), self._connection] if c is not None}
        self._connections.clear()
        self._connection = None
        for connection in connections.values():
            await connection.close()

    async def _send(self, api_key: int, request: Any) -> Any:
        if self._connection is None:
            raise KafkaClientError("not connected")
        return await self._connection.send(api_key, request, timeout=self._request_timeout)

    # --- routing ---------------------------------------------------------------------------------

    async def _connection_to(self, host: str, port: int) -> BrokerConnection:
        """The connection to the broker at ``host:port``, opened on first use."""
        if self._connection is None:
            raise KafkaClientError("not connected")
        async with self._connect_lock:
            connection = self._connections.get((host, port))
            if connection is None:
                connection = BrokerConnection(host, port, self._client_id, security=self._security)
                try:
                    await connection.connect()
                except (OSError, KafkaClientError, TimeoutError) as e:
                    raise KafkaClientError(f"could not connect to broker {host}:{port}: {e}") from e
                self._connections[(host, port)] = connection
            return connection

    async def _send_to(
        self, node: Node, api_key: int, make_request: Callable[[int], Any], timeout: float | None = None,
    ) -> tuple[Any, int]:
        """Send ``make_request(version)`` to ``node`` at the best common version; (response, version).
        ``timeout`` (seconds) defaults to the request timeout."""
        connection = await self._connection_to(node.host, node.port)
        version = connection.version_for(api_key)
        wait = self._request_timeout if timeout is None else timeout
        try:
            return await connection.send(api_key, make_request(version), version, timeout=wait), version
        except KafkaClientError:
            if connection is not self._connection and self._connections.get((node.host, node.port)) is connection:
                del self._connections[(node.host, node.port)]  # reconnect next time
                await connection.close()
            raise

    def _deadline(self) -> float:
        return asyncio.get_running_loop().time() + self._retry_timeout

    async def _backoff_or_give_up(self, deadline: float, resource: str, error: ErrorCode, message: str | None) -> None:
        if asyncio.get_running_loop().time() + RETRY_BACKOFF_S > deadline:
            raise AdminError(resource, error, f"{message or error.message} (still failing after {self._retry_timeout:g}s)")
        await asyncio.sleep(RETRY_BACKOFF_S)

    async def brokers(self) -> list[Node]:
        """Every broker of the cluster, by node id."""
        return await self._brokers()

    async def _brokers(self) -> list[Node]:
        """Every broker of the cluster (Metadata without topics)."""
        response = await self._send(ApiKey.METADATA, MetadataRequest(topics=[], allow_auto_topic_creation=False))
        return sorted((Node(b.node_id, b.host, b.port) for b in response.brokers), key=lambda n: n.node_id)

    # --- topics --------------------------------------------------------------------------------

    async def describe_topics(self, names: list[str] | None = None) -> list[TopicDescription]:
        request = MetadataRequest(
            topics=None if names is None else [MetadataRequest.MetadataRequestTopic(name=n) for n in names],
            allow_auto_topic_creation=False,
        )
        response = await self._send(ApiKey.METADATA, request)
        out = []
        for topic in response.topics:
            if topic.error_code != ErrorCode.NONE:
                raise AdminError(f"topic {topic.name}", topic.error_code)
            out.append(TopicDescription(
                topic.name,
                topic_id_to_string(topic.topic_id or uuid.UUID(int=0)),
                sorted(
                    (PartitionInfo(p.partition_index, p.leader_id, p.leader_epoch, list(p.replica_nodes), list(p.isr_nodes))
                     for p in topic.partitions),
                    key=lambda p: p.partition,
                ),
                topic.is_internal,
                topic.initial_partition_count if topic.initial_partition_count > 0 else None,
                topic.undeleted_partition_count if topic.undeleted_partition_count > 0 else None,
            ))
        return sorted(out, key=lambda t: t.name)

    async def partition_leaders(
        self, topics: Iterable[str], *, auto_create: bool = False,
    ) -> dict[str, dict[int, Node | None]]:
        """For each topic, every partition's leader (None while it has none), from one Metadata
        request. With ``auto_create`` the broker may create missing topics (its
        ``auto.create.topics.enable`` decides), and topics still being created are waited for until
        ``retry_timeout``. Raises AdminError for a topic that does not exist or fails."""
        layouts = await self.topic_layouts(topics, auto_create=auto_create)
        return {name: layout.leaders for name, layout in layouts.items()}

    async def topic_layouts(self, topics: Iterable[str], *, auto_create: bool = False) -> dict[str, TopicLayout]:
        """Like ``partition_leaders``, with each topic's KIP-253 counts (``TopicLayout``)."""
        names = list(dict.fromkeys(topics))
        deadline = self._deadline()
        while True:
            response = await self._send(ApiKey.METADATA, MetadataRequest(
                topics=[MetadataRequest.MetadataRequestTopic(name=n) for n in names],
                allow_auto_topic_creation=auto_create,
            ))
            brokers = {b.node_id: Node(b.node_id, b.host, b.port) for b in response.brokers}
            found = {t.name: t for t in response.topics}
            waiting = [n for n in names if n not in found or found[n].error_code in _TOPIC_NOT_READY
                       or not found[n].partitions]
            if not waiting:
                break
            for name in waiting:
                topic = found.get(name)
                error = topic.error_code if topic else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                if error not in _TOPIC_NOT_READY or (error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and not auto_create):
                    raise AdminError(f"topic {name}", error)
            await self._backoff_or_give_up(deadline, f"topic {waiting[0]}", ErrorCode.LEADER_NOT_AVAILABLE, None)
        out: dict[str, TopicLayout] = {}
        for name in names:
            topic = found[name]
            if topic.error_code != ErrorCode.NONE:
                raise AdminError(f"topic {name}", topic.error_code)
            out[name] = TopicLayout.from_metadata(
                name, {p.partition_index: brokers.get(p.leader_id) for p in topic.partitions},
                topic.initial_partition_count, topic.undeleted_partition_count,
                {p.partition_index: p.leader_epoch for p in topic.partitions},
            )
        return out

    async def connection(self, node: Node) -> BrokerConnection:
        """The connection to ``node``, opened on first use and shared by every call."""
        return await self._connection_to(node.host, node.port)

    async def reset_connection(self, node: Node) -> None:
        """Close the connection to ``node`` after a transport failure; the next use reconnects."""
        connection = self._connections.get((node.host, node.port))
        if connection is not None and connection is not self._connection:
            del self._connections[(node.host, node.port)]
            await connection.close()

    async def list_topics(self) -> list[str]:
        return [t.name for t in await self.describe_topics(None)]

    async def create_topic(
        self, name: str, num_partitions: int = -1, replication_factor: int = -1,
        configs: dict[str, str] | None = None, validate_only: bool = False, timeout_ms: int = 30000,
        replica_assignment: list[list[int]] | None = None,
    ) -> None:
        """Create one topic. ``replica_assignment`` (each partition's broker ids, the preferred
        replica first) replaces ``num_partitions`` and ``replication_factor``, which stay -1."""
        assignments = [
            CreateTopicsRequest.CreatableReplicaAssignment(partition_index=index, broker_ids=list(replicas))
            for index, replicas in enumerate(replica_assignment or [])
        ]
        topic = CreateTopicsRequest.CreatableTopic(
            name=name, num_partitions=num_partitions, replication_factor=replication_factor, assignments=assignments,
            configs=[CreateTopicsRequest.CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()],
        )
        response = await self._send(ApiKey.CREATE_TOPICS, CreateTopicsRequest(topics=[topic], timeout_ms=timeout_ms, validate_only=validate_only))
        for result in response.topics:
            if result.error_code != ErrorCode.NONE:
                raise AdminError(f"topic {result.name}", result.error_code, result.error_message)

    async def create_topics(
        self, names: Iterable[str], num_partitions: int = -1, replication_factor: int = -1,
        configs: dict[str, str] | None = None, validate_only: bool = False, timeout_ms: int = 30000,
    ) -> None:
        """Create several topics alike in one CreateTopics request. Every topic is tried; then
        AdminError is raised for the first that failed, ``failures`` naming them all."""
        wanted = list(dict.fromkeys(names))
        if not wanted:
            return
        request = CreateTopicsRequest(topics=[
            CreateTopicsRequest.CreatableTopic(
                name=name, num_partitions=num_partitions, replication_factor=replication_factor, assignments=[],
                configs=[CreateTopicsRequest.CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()],
            ) for name in wanted
        ], timeout_ms=timeout_ms, validate_only=validate_only)
        response = await self._send(ApiKey.CREATE_TOPICS, request)
        answers = {result.name: result for result in response.topics}
        failures: dict[str, AdminError] = {}
        for name in wanted:
            result = answers.get(name)
            if result is None:
                failures[name] = AdminError(f"topic {name}", ErrorCode.UNKNOWN_SERVER_ERROR, "CreateTopics did not answer for it")
            elif result.error_code != ErrorCode.NONE:
                failures[name] = AdminError(f"topic {name}", result.error_code, result.error_message)
        _raise_failures(failures)

    async def delete_topic(self, name: str, timeout_ms: int = 30000) -> None:
        version = self._connection.version_for(ApiKey.DELETE_TOPICS) if self._connection else 0
        if version >= 6:
            request = DeleteTopicsRequest(topics=[DeleteTopicsRequest.DeleteTopicState(name=name)], timeout_ms=timeout_ms)
        else:
            request = DeleteTopicsRequest(topic_names=[name], timeout_ms=timeout_ms)
        response = await self._send(ApiKey.DELETE_TOPICS, request)
        for result in response.responses:
            if result.error_code != ErrorCode.NONE:
                raise AdminError(f"topic {name}", result.error_code, result.error_message)

    async def create_partitions(self, name: str, total_count: int, validate_only: bool = False) -> None:
        request = CreatePartitionsRequest(
            topics=[CreatePartitionsRequest.CreatePartitionsTopic(name=name, count=total_count, assignments=None)],
            timeout_ms=30000, validate_only=validate_only,
        )
        response = await self._send(ApiKey.CREATE_PARTITIONS, request)
        for result in response.results:
            if result.error_code != ErrorCode.NONE:
                raise AdminError(f"topic {name}", result.error_code, result.error_message)

    # --- leader elections ----------------------------------------------------------------------

    async def controller(self) -> Node:
        """The controller, as Metadata names it (retried until one is known, or
        ``retry_timeout``)."""
        deadline = self._deadline()
        while True:
            response = await self._send(ApiKey.METADATA, MetadataRequest(topics=[], allow_auto_topic_creation=False))
            for b in response.brokers:
                if b.node_id == response.controller_id:
                    return Node(b.node_id, b.host, b.port)
            await self._backoff_or_give_up(deadline, "cluster", ErrorCode.NOT_CONTROLLER, "no controller is known")

    async def elect_leaders(
        self, election_type: int, partitions: Iterable[TopicPartition] | None, timeout_ms: int = 30000,
    ) -> dict[TopicPartition, AdminError | None]:
        """ElectLeaders (``PREFERRED_ELECTION`` or ``UNCLEAN_ELECTION``), sent to the controller,
        as Kafka's ``Admin.electLeaders``: each partition's outcome, None when its new leader was
        elected. ``partitions`` None means every partition, and then only those that needed an
        election are reported. ``timeout_ms`` is how long the controller may wait for the new
        leaders to show. Raises AdminError for a top-level error."""
        wanted = None if partitions is None else list(dict.fromkeys(partitions))
        controller = await self.controller()

        def make(version: int) -> ElectLeadersRequest:
            if version == 0 and election_type != PREFERRED_ELECTION:
                raise UnsupportedVersionError("the controller supports only preferred elections (ElectLeaders v0)")
            by_topic: dict[str, list[int]] = {}
            for tp in wanted or []:
                by_topic.setdefault(tp.topic, []).append(tp.partition)
            return ElectLeadersRequest(
                election_type=election_type if version >= 1 else PREFERRED_ELECTION,
                topic_partitions=None if wanted is None else [
                    ElectLeadersRequest.TopicPartitions(topic=topic, partitions=ps) for topic, ps in by_topic.items()
                ],
                timeout_ms=timeout_ms,
            )

        response, _ = await self._send_to(
            controller, ApiKey.ELECT_LEADERS, make, timeout=max(self._request_timeout, timeout_ms / 1000 + 5),
        )
        if response.error_code != ErrorCode.NONE:
            raise AdminError("cluster", response.error_code)
        out: dict[TopicPartition, AdminError | None] = {}
        for result in response.replica_election_results:
            for p in result.partition_result:
                tp = TopicPartition(result.topic, p.partition_id)
                out[tp] = None if p.error_code == ErrorCode.NONE else AdminError(
                    f"partition {tp}", p.error_code, p.error_message)
        return out

    # --- partition reassignments (KIP-455) ------------------------------------------------------

    async def alter_partition_reassignments(
        self, reassignments: Mapping[TopicPartition, Iterable[int] | None], timeout_ms: int = 60000,
    ) -> dict[TopicPartition, AdminError | None]:
        """AlterPartitionReassignments, sent to the controller (Kafka's
        ``Admin.alterPartitionReassignments``): each partition's target replicas, or None to
        cancel its reassignment. Each partition's outcome: None once its reassignment started.
        A controller that moved meanwhile (NOT_CONTROLLER) is looked up again until
        ``retry_timeout``; any other top-level error raises AdminError."""
        by_topic: dict[str, list[AlterPartitionReassignmentsRequest.ReassignablePartition]] = {}
        for tp, replicas in reassignments.items():
            by_topic.setdefault(tp.topic, []).append(AlterPartitionReassignmentsRequest.ReassignablePartition(
                partition_index=tp.partition, replicas=None if replicas is None else list(replicas)))
        request = AlterPartitionReassignmentsRequest(timeout_ms=timeout_ms, topics=[
            AlterPartitionReassignmentsRequest.ReassignableTopic(name=name, partitions=ps) for name, ps in by_topic.items()
        ])
        response = await self._send_to_controller(ApiKey.ALTER_PARTITION_REASSIGNMENTS, request, timeout_ms)
        out: dict[TopicPartition, AdminError | None] = {}
        for topic in response.responses:
            for p in topic.partitions:
                tp = TopicPartition(topic.name, p.partition_index)
                out[tp] = None if p.error_code == ErrorCode.NONE else AdminError(
                    f"partition {tp}", p.error_code, p.error_message)
        return out

    async def list_partition_reassignments(
        self, partitions: Iterable[TopicPartition] | None = None, timeout_ms: int = 60000,
    ) -> dict[TopicPartition, PartitionReassignment]:
        """ListPartitionReassignments, sent to the controller (Kafka's
        ``Admin.listPartitionReassignments``): the reassignments under way among ``partitions``
        (None: all of them)."""
        topics = None
        if partitions is not None:
            by_topic: dict[str, list[int]] = {}
            for tp in dict.fromkeys(partitions):
                by_topic.setdefault(tp.topic, []).append(tp.partition)
            topics = [ListPartitionReassignmentsRequest.ListPartitionReassignmentsTopics(name=name, partition_indexes=ps)
                      for name, ps in by_topic.items()]
        request = ListPartitionReassignmentsRequest(timeout_ms=timeout_ms, topics=topics)
        response = await self._send_to_controller(ApiKey.LIST_PARTITION_REASSIGNMENTS, request, timeout_ms)
        return {
            TopicPartition(topic.name, p.partition_index): PartitionReassignment(
                list(p.replicas), list(p.adding_replicas), list(p.removing_replicas))
            for topic in response.topics for p in topic.partitions
        }

    async def broker_racks(self) -> dict[int, str | None]:
        """Every broker's rack (None when it has none), by node id, as Metadata reports them."""
        response = await self._send(ApiKey.METADATA, MetadataRequest(topics=[], allow_auto_topic_creation=False))
        return {b.node_id: b.rack for b in sorted(response.brokers, key=lambda b: b.node_id)}

    async def _send_to_controller(self, api_key: int, request: Any, timeout_ms: int) -> Any:
        """``request`` to the controller; NOT_CONTROLLER at the top level looks it up again
        (until ``retry_timeout``), another top-level error raises AdminError."""
        deadline = self._deadline()
        while True:
            controller = await self.controller()
            response, _ = await self._send_to(
                controller, api_key, lambda _version: request, timeout=max(self._request_timeout, timeout_ms / 1000 + 5))
            if response.error_code == ErrorCode.NOT_CONTROLLER:
                await self._backoff_or_give_up(deadline, "cluster", ErrorCode.NOT_CONTROLLER, response.error_message)
                continue
            if response.error_code != ErrorCode.NONE:
                raise AdminError("cluster", response.error_code, response.error_message)
            return response
    # --- log dirs (DescribeLogDirs, AlterReplicaLogDirs) ----------------------------------------

    async def describe_log_dirs(
        self, broker_ids: Iterable[int] | None = None, partitions: Iterable[TopicPartition] | None = None,
    ) -> dict[int, list[LogDirInfo]]:
        """DescribeLogDirs to each broker (all when ``broker_ids`` is None), as Kafka's
        ``Admin.describeLogDirs``: per broker its log dirs, each with its replicas of
        ``partitions`` (None: all). Raises AdminError for a broker's top-level error."""
        nodes = {n.node_id: n for n in await self._brokers()}
        wanted_brokers = sorted(nodes) if broker_ids is None else list(dict.fromkeys(broker_ids))
        wanted = None if partitions is None else list(dict.fromkeys(partitions))

        def make(_version: int) -> DescribeLogDirsRequest:
            if wanted is None:
                return DescribeLogDirsRequest(topics=None)
            by_topic: dict[str, list[int]] = {}
            for tp in wanted:
                by_topic.setdefault(tp.topic, []).append(tp.partition)
            return DescribeLogDirsRequest(topics=[
                DescribeLogDirsRequest.DescribableLogDirTopic(topic=t, partitions=ps) for t, ps in by_topic.items()
            ])

        out: dict[int, list[LogDirInfo]] = {}
        for broker_id in wanted_brokers:
            node = nodes.get(broker_id)
            if node is None:
                raise AdminError(f"broker {broker_id}", ErrorCode.BROKER_NOT_AVAILABLE,
                                 f"Broker {broker_id} is not in the cluster's metadata")
            response, version = await self._send_to(node, ApiKey.DESCRIBE_LOG_DIRS, make)
            if version >= 3 and response.error_code != ErrorCode.NONE:
                raise AdminError(f"broker {broker_id}", response.error_code)
            out[broker_id] = [
                LogDirInfo(
                    result.log_dir, result.error_code,
                    [LogDirReplicaInfo(TopicPartition(topic.name, p.partition_index), p.partition_size, p.offset_lag,
                                       p.is_future_key)
                     for topic in result.topics for p in topic.partitions],
                    result.total_bytes if version >= 4 else -1, result.usable_bytes if version >= 4 else -1,
                )
                for result in response.results
            ]
        return out

    async def alter_replica_log_dirs(
        self, assignments: Mapping[tuple[TopicPartition, int], str],
    ) -> dict[tuple[TopicPartition, int], AdminError | None]:
        """AlterReplicaLogDirs, as Kafka's ``Admin.alterReplicaLogDirs``: ``assignments`` maps
        (partition, broker id) — a replica — to the absolute log dir it should move to; each
        broker gets one request for its replicas. Per replica None (the move started) or its
        AdminError (LOG_DIR_NOT_FOUND, KAFKA_STORAGE_ERROR, REPLICA_NOT_AVAILABLE...)."""
        nodes = {n.node_id: n for n in await self._brokers()}
        per_broker: dict[int, dict[TopicPartition, str]] = {}
        for (tp, broker_id), log_dir in assignments.items():
            per_broker.setdefault(broker_id, {})[tp] = log_dir
        out: dict[tuple[TopicPartition, int], AdminError | None] = {}
        for broker_id, dirs in per_broker.items():
            node = nodes.get(broker_id)
            if node is None:
                for tp in dirs:
                    out[(tp, broker_id)] = AdminError(f"replica {tp} on broker {broker_id}", ErrorCode.BROKER_NOT_AVAILABLE)
                continue

            def make(_version: int, dirs: dict[TopicPartition, str] = dirs) -> AlterReplicaLogDirsRequest:
                by_dir: dict[str, dict[str, list[int]]] = {}
                for tp, log_dir in dirs.items():
                    by_dir.setdefault(log_dir, {}).setdefault(tp.topic, []).append(tp.partition)
                return AlterReplicaLogDirsRequest(dirs=[
                    AlterReplicaLogDirsRequest.AlterReplicaLogDir(path=log_dir, topics=[
                        AlterReplicaLogDirsRequest.AlterReplicaLogDirTopic(name=t, partitions=ps)
                        for t, ps in topics.items()
                    ])
                    for log_dir, topics in by_dir.items()
                ])

            response, _ = await self._send_to(node, ApiKey.ALTER_REPLICA_LOG_DIRS, make)
            for result in response.results:
                for p in result.partitions:
                    tp = TopicPartition(result.topic_name, p.partition_index)
                    out[(tp, broker_id)] = None if p.error_code == ErrorCode.NONE else AdminError(
                        f"replica {tp} on broker {broker_id}", p.error_code)
        return out

    # --- SCRAM credentials ---------------------------------------------------------------------

    async def describe_user_scram_credentials(
        self, users: Iterable[str] | None = None,
    ) -> dict[str, list[ScramCredentialInfo]]:
        """DescribeUserScramCredentials: each user's credentials (mechanism and iterations), for
        ``users`` (None: every user that has any). A user-level failure (RESOURCE_NOT_FOUND for a
        user without credentials) raises AdminError for the first, after the others, with every
        failure in ``failures``; a top-level error raises for the cluster."""
        results = await self.user_scram_credential_results(users)
        _raise_failures({user: r for user, r in results.items() if isinstance(r, AdminError)})
        return {user: r for user, r in results.items() if not isinstance(r, AdminError)}

    async def user_scram_credential_results(
        self, users: Iterable[str] | None = None,
    ) -> dict[str, list[ScramCredentialInfo] | AdminError]:
        """DescribeUserScramCredentials as the broker answered it, user by user in its order:
        the credentials, or the user's error. A top-level error raises AdminError."""
        wanted = None if users is None else list(users)
        request = DescribeUserScramCredentialsRequest(
            users=None if wanted is None else [DescribeUserScramCredentialsRequest.UserName(name=u) for u in wanted])
        response = await self._send(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, request)
        if response.error_code != ErrorCode.NONE:
            raise AdminError("cluster", response.error_code, response.error_message)
        out: dict[str, list[ScramCredentialInfo] | AdminError] = {}
        for result in response.results:
            if result.error_code != ErrorCode.NONE:
                out[result.user] = AdminError(f"user {result.user}", result.error_code, result.error_message)
                continue
            out[result.user] = [
                ScramCredentialInfo(m.mechanism_name if (m := ScramMechanism.for_type(info.mechanism)) else "UNKNOWN",
                                    info.iterations)
                for info in result.credential_infos
            ]
        return out

    async def alter_user_scram_credentials(
        self, alterations: Iterable[UserScramCredentialUpsertion | UserScramCredentialDeletion],
    ) -> None:
        """AlterUserScramCredentials, sent to the controller (retried while it answers
        NOT_CONTROLLER, until ``retry_timeout``). Each upsertion's password is salted here
        (``Hi(password, salt, iterations)``, as Kafka's admin does). User-level failures raise
        AdminError for the first, after the others are applied, with every failure in
        ``failures`` (by user)."""
        deletions: list[AlterUserScramCredentialsRequest.ScramCredentialDeletion] = []
        upsertions: list[AlterUserScramCredentialsRequest.ScramCredentialUpsertion] = []
        for alteration in alterations:
            mechanism = _scram_mechanism(alteration.mechanism)
            if isinstance(alteration, UserScramCredentialDeletion):
                deletions.append(AlterUserScramCredentialsRequest.ScramCredentialDeletion(
                    name=alteration.user, mechanism=mechanism.type))
                continue
            salt = alteration.salt if alteration.salt is not None else secure_random_string().encode()
            password = alteration.password
            password_bytes = password.encode("utf-8") if isinstance(password, str) else bytes(password)
            # Hi(); Java's runs at least one round, so a count below 1 reaches the broker to be refused.
            salted = hashlib.pbkdf2_hmac(mechanism.hash_name, password_bytes, salt, max(1, alteration.iterations))
            upsertions.append(AlterUserScramCredentialsRequest.ScramCredentialUpsertion(
                name=alteration.user, mechanism=mechanism.type, iterations=alteration.iterations, salt=salt,
                salted_password=salted,
            ))
        if not deletions and not upsertions:
            return
        request = AlterUserScramCredentialsRequest(deletions=deletions, upsertions=upsertions)
        deadline = self._deadline()
        while True:
            controller = await self.controller()
            response, _ = await self._send_to(controller, ApiKey.ALTER_USER_SCRAM_CREDENTIALS, lambda _v: request)
            if not any(r.error_code == ErrorCode.NOT_CONTROLLER for r in response.results):
                break
            await self._backoff_or_give_up(deadline, "cluster", ErrorCode.NOT_CONTROLLER, None)
        _raise_failures({
            r.user: AdminError(f"user {r.user}", r.error_code, r.error_message)
            for r in response.results if r.error_code != ErrorCode.NONE
        })

    # --- client quotas (KIP-546) and producers (KIP-664) -----------------------------------------

    async def describe_client_quotas(
        self, components: Iterable[tuple[str, int, str | None]] = (), strict: bool = False,
    ) -> list[tuple[dict[str, str | None], dict[str, float]]]:
        """DescribeClientQuotas: every quota entity matching the filter, each as (its entity types
        and names, None for a default: ``{"user": "alice", "client-id": None}``, its quota values).
        A component is (entity type, match type: 0 exact name, 1 the default, 2 any name, the name
        for 0). A top-level error raises AdminError."""
        request = DescribeClientQuotasRequest(components=[
            DescribeClientQuotasRequest.ComponentData(entity_type=t, match_type=m, match=n) for t, m, n in components
        ], strict=strict)
        response = await self._send(ApiKey.DESCRIBE_CLIENT_QUOTAS, request)
        if response.error_code != ErrorCode.NONE:
            raise AdminError("client quotas", response.error_code, response.error_message)
        return [({e.entity_type: e.entity_name for e in entry.entity}, {v.key: v.value for v in entry.values})
                for entry in response.entries or []]

    async def alter_client_quotas(
        self, alterations: Iterable[tuple[Mapping[str, str | None], Mapping[str, float | None]]],
        validate_only: bool = False,
    ) -> None:
        """AlterClientQuotas: per entity (``{"user": name or None for the default, ...}``), the
        quota keys to set (a number) or remove (None). Entity-level failures raise AdminError
        for the first, with every failure in ``failures`` (by entity, as a sorted tuple)."""
        entries = [
            AlterClientQuotasRequest.EntryData(
                entity=[AlterClientQuotasRequest.EntityData(entity_type=t, entity_name=n) for t, n in entity.items()],
                ops=[AlterClientQuotasRequest.OpData(key=k, value=0.0 if v is None else float(v), remove=v is None)
                     for k, v in ops.items()])
            for entity, ops in alterations
        ]
        if not entries:
            return
        response = await self._send(ApiKey.ALTER_CLIENT_QUOTAS,
                                    AlterClientQuotasRequest(entries=entries, validate_only=validate_only))
        failures: dict[Any, AdminError] = {}
        for entry in response.entries:
            if entry.error_code != ErrorCode.NONE:
                key = tuple(sorted((e.entity_type, e.entity_name or "<default>") for e in entry.entity))
                failures[key] = AdminError(f"client quota entity {dict(key)}", entry.error_code, entry.error_message)
        _raise_failures(failures)

    async def describe_producers(
        self, partitions: Iterable[TopicPartition],
    ) -> dict[TopicPartition, list[ProducerState] | AdminError]:
        """DescribeProducers, sent to each partition's leader: its active producers, or its
        error. A topic that does not exist raises AdminError."""
        wanted = list(dict.fromkeys(partitions))
        leaders = await self.partition_leaders({tp.topic for tp in wanted})
        by_node: dict[Node, list[TopicPartition]] = {}
        out: dict[TopicPartition, list[ProducerState] | AdminError] = {}
        for tp in wanted:
            node = leaders[tp.topic].get(tp.partition)
            if node is None:
                out[tp] = AdminError(str(tp), ErrorCode.LEADER_NOT_AVAILABLE if tp.partition in leaders[tp.topic]
                                     else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            else:
                by_node.setdefault(node, []).append(tp)
        for node, tps in by_node.items():
            topics: dict[str, list[int]] = {}
            for tp in tps:
                topics.setdefault(tp.topic, []).append(tp.partition)
            request = DescribeProducersRequest(topics=[
                DescribeProducersRequest.TopicRequest(name=t, partition_indexes=p) for t, p in topics.items()])
            response, _ = await self._send_to(node, ApiKey.DESCRIBE_PRODUCERS, _at_any_version(request))
            for topic in response.topics:
                for p in topic.partitions:
                    tp = TopicPartition(topic.name, p.partition_index)
                    if p.error_code != ErrorCode.NONE:
                        out[tp] = AdminError(str(tp), p.error_code, p.error_message)
                        continue
                    out[tp] = [ProducerState(s.producer_id, s.producer_epoch, s.last_sequence, s.last_timestamp,
                                             s.coordinator_epoch, s.current_txn_start_offset)
                               for s in p.active_producers]
        return {tp: out[tp] for tp in wanted if tp in out}

    # --- configs -------------------------------------------------------------------------------

    async def describe_topic_configs(self, name: str) -> dict[str, tuple[str | None, int]]:
        """{config name: (value, config source)} of a topic."""
        entries = await self.describe_configs(TOPIC_RESOURCE, name, include_synonyms=False)
        return {e.name: (e.value, e.source) for e in entries}

    async def alter_topic_configs(
        self, name: str, set_configs: Mapping[str, str], delete_configs: Sequence[str] = (),
    ) -> None:
        """Incrementally SET and DELETE topic config overrides."""
        await self.incremental_alter_configs(TOPIC_RESOURCE, name, set_configs, delete_configs)

    async def describe_configs(
        self, resource_type: int, name: str, include_synonyms: bool = True, keys: Iterable[str] | None = None,
    ) -> list[ConfigEntry]:
        """DescribeConfigs of one resource (``TOPIC_RESOURCE`` or ``BROKER_RESOURCE``), sorted by name.

        A broker's configs (``name`` its node id) are asked of that broker, as Kafka's AdminClient
        does; ``name`` "" (the cluster-wide broker defaults) and topics of any broker.
        """
        request = DescribeConfigsRequest(resources=[DescribeConfigsRequest.DescribeConfigsResource(
            resource_type=resource_type, resource_name=name, configuration_keys=None if keys is None else list(keys))],
            include_synonyms=include_synonyms)
        response = await self._send_for_resource(resource_type, name, ApiKey.DESCRIBE_CONFIGS, request)
        result = next((r for r in response.results if r.resource_name == name), None)
        label = _resource_label(resource_type, name)
        if result is None:
            raise AdminError(label, ErrorCode.UNKNOWN_SERVER_ERROR, "DescribeConfigs did not answer for it")
        if result.error_code != ErrorCode.NONE:
            raise AdminError(label, result.error_code, result.error_message)
        entries = [
            ConfigEntry(c.name, c.value, c.config_source, c.is_sensitive, c.read_only,
                        [ConfigSynonym(s.name, s.value, s.source) for s in c.synonyms or []])
            for c in result.configs
        ]
        return sorted(entries, key=lambda e: e.name)

    async def incremental_alter_configs(
        self, resource_type: int, name: str, set_configs: Mapping[str, str] | None = None,
        delete_configs: Iterable[str] = (), validate_only: bool = False,
    ) -> None:
        """IncrementalAlterConfigs of one resource: DELETE ``delete_configs``, SET ``set_configs``."""
        ops = [IncrementalAlterConfigsRequest.AlterableConfig(name=k, config_operation=1, value=None) for k in delete_configs]
        ops += [IncrementalAlterConfigsRequest.AlterableConfig(name=k, config_operation=0, value=v)
                for k, v in (set_configs or {}).items()]
        request = IncrementalAlterConfigsRequest(resources=[IncrementalAlterConfigsRequest.AlterConfigsResource(
            resource_type=resource_type, resource_name=name, configs=ops)], validate_only=validate_only)
        response = await self._send_for_resource(resource_type, name, ApiKey.INCREMENTAL_ALTER_CONFIGS, request)
        result = next((r for r in response.responses if r.resource_name == name), None)
        label = _resource_label(resource_type, name)
        if result is None:
            raise AdminError(label, ErrorCode.UNKNOWN_SERVER_ERROR, "IncrementalAlterConfigs did not answer for it")
        if result.error_code != ErrorCode.NONE:
            raise AdminError(label, result.error_code, result.error_message)

    async def alter_configs(
        self, resource_type: int, name: str, configs: Mapping[str, str], validate_only: bool = False,
    ) -> None:
        """The legacy AlterConfigs of one resource: its whole set of dynamic configs replaced by
        ``configs`` (a broker's id, or "" for the cluster-wide broker defaults; or a topic)."""
        request = AlterConfigsRequest(resources=[AlterConfigsRequest.AlterConfigsResource(
            resource_type=resource_type, resource_name=name,
            configs=[AlterConfigsRequest.AlterableConfig(name=k, value=v) for k, v in configs.items()])],
            validate_only=validate_only)
        response = await self._send_for_resource(resource_type, name, ApiKey.ALTER_CONFIGS, request)
        result = next((r for r in response.responses if r.resource_name == name), None)
        label = _resource_label(resource_type, name)
        if result is None:
            raise AdminError(label, ErrorCode.UNKNOWN_SERVER_ERROR, "AlterConfigs did not answer for it")
        if result.error_code != ErrorCode.NONE:
            raise AdminError(label, result.error_code, result.error_message)

    async def _send_for_resource(self, resource_type: int, name: str, api_key: int, request: Any) -> Any:
        """Send a config request to the broker a broker resource names, else to the bootstrap broker."""
        if resource_type in (BROKER_RESOURCE, BROKER_LOGGER_RESOURCE) and name:
            if not name.isdigit():
                raise AdminError(f"broker {name}", ErrorCode.INVALID_REQUEST, "a broker resource is named by its node id")
            node = next((n for n in await self._brokers() if n.node_id == int(name)), None)
            if node is None:
                raise AdminError(f"broker {name}", ErrorCode.BROKER_NOT_AVAILABLE, f"the cluster has no broker with id {name}")
            response, _ = await self._send_to(node, api_key, lambda _version: request)
            return response
        return await self._send(api_key, request)

    # --- offsets of partitions -----------------------------------------------------------------

    async def list_offsets(
        self, partitions: Iterable[TopicPartition], spec: OffsetSpec, isolation_level: int = 0,
    ) -> dict[TopicPartition, ListedOffset]:
        """ListOffsets for ``partitions``, each asked of its leader.

        ``spec`` is ``"earliest"`` (log start), ``"latest"`` (log end / high watermark),
        ``"max_timestamp"`` (the record with the largest timestamp) or a timestamp in ms (the
        first offset whose timestamp is at or after it; offset -1 when there is none).
        ``isolation_level`` 1 is read_committed. Raises AdminError (with every failed partition in
        ``failures``) when a partition fails, e.g. UNKNOWN_TOPIC_OR_PARTITION.
        """
        timestamp = _spec_timestamp(spec)
        wanted = list(dict.fromkeys(partitions))
        results: dict[TopicPartition, ListedOffset] = {}
        failures: dict[TopicPartition, AdminError] = {}
        deadline = self._deadline()
        pending = wanted
        while pending:
            leaders, failed = await self._leaders(pending)
            retry: dict[TopicPartition, AdminError] = {}
            answers = await asyncio.gather(*(
                self._list_offsets_on(node, tps, timestamp, isolation_level) for node, tps in leaders.items()
            ))
            outcomes: list[Mapping[TopicPartition, ListedOffset | AdminError]] = [failed, *answers]
            for answer in outcomes:
                for tp, outcome in answer.items():
                    if isinstance(outcome, ListedOffset):
                        results[tp] = outcome
                    elif outcome.error in LEADERSHIP_ERRORS:
                        retry[tp] = outcome
                    else:
                        failures[tp] = outcome
            pending = list(retry)
            if pending and asyncio.get_running_loop().time() + RETRY_BACKOFF_S > deadline:
                failures.update(retry)
                break
            if pending:
                await asyncio.sleep(RETRY_BACKOFF_S)
        _raise_failures({tp: failures[tp] for tp in wanted if tp in failures})
        return {tp: results[tp] for tp in wanted}

    async def _leaders(
        self, partitions: list[TopicPartition]
    ) -> tuple[dict[Node, list[TopicPartition]], dict[TopicPartition, AdminError]]:
        topics = list(dict.fromkeys(tp.topic for tp in partitions))
        response = await self._send(ApiKey.METADATA, MetadataRequest(
            topics=[MetadataRequest.MetadataRequestTopic(name=t) for t in topics], allow_auto_topic_creation=False,
        ))
        brokers = {b.node_id: Node(b.node_id, b.host, b.port) for b in response.brokers}
        topic_errors = {t.name: t.error_code for t in response.topics}
        leader_of = {TopicPartition(t.name, p.partition_index): (p.leader_id, p.error_code)
                     for t in response.topics for p in t.partitions}
        by_leader: dict[Node, list[TopicPartition]] = {}
        failures: dict[TopicPartition, AdminError] = {}
        for tp in partitions:
            topic_error = topic_errors.get(tp.topic, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            leader, partition_error = leader_of.get(tp, (-1, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
            if topic_error != ErrorCode.NONE:
                failures[tp] = AdminError(f"partition {tp}", topic_error)
            elif tp not in leader_of:
                failures[tp] = AdminError(f"partition {tp}", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                          f"topic {tp.topic} has no partition {tp.partition}")
            elif leader not in brokers:
                failures[tp] = AdminError(f"partition {tp}", partition_error or ErrorCode.LEADER_NOT_AVAILABLE)
            else:
                by_leader.setdefault(brokers[leader], []).append(tp)
        return by_leader, failures

    async def _list_offsets_on(
        self, node: Node, partitions: list[TopicPartition], timestamp: int, isolation_level: int,
    ) -> dict[TopicPartition, ListedOffset | AdminError]:
        by_topic: dict[str, list[int]] = {}
        for tp in partitions:
            by_topic.setdefault(tp.topic, []).append(tp.partition)

        def make(version: int) -> ListOffsetsRequest:
            if timestamp == MAX_TIMESTAMP and version < 7:
                raise UnsupportedVersionError(f"ListOffsets max_timestamp needs v7; broker {node} offers v{version}")
            return ListOffsetsRequest(
                replica_id=CONSUMER_REPLICA_ID, isolation_level=isolation_level,
                topics=[ListOffsetsRequest.ListOffsetsTopic(name=topic, partitions=[
                    ListOffsetsRequest.ListOffsetsPartition(partition_index=p, timestamp=timestamp) for p in indexes
                ]) for topic, indexes in by_topic.items()],
            )

        response, _ = await self._send_to(node, ApiKey.LIST_OFFSETS, make)
        out: dict[TopicPartition, ListedOffset | AdminError] = {}
        for topic in response.topics:
            for p in topic.partitions:
                tp = TopicPartition(topic.name, p.partition_index)
                if p.error_code != ErrorCode.NONE:
                    out[tp] = AdminError(f"partition {tp}", p.error_code)
                else:
                    epoch = p.leader_epoch if p.leader_epoch >= 0 else None
                    out[tp] = ListedOffset(p.offset, p.timestamp, epoch)
        for tp in partitions:
            out.setdefault(tp, AdminError(f"partition {tp}", ErrorCode.UNKNOWN_SERVER_ERROR, f"broker {node} did not answer for it"))
        return out

    async def offsets_for_leader_epochs(self, epochs: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        """OffsetForLeaderEpoch (as a consumer) for each partition, asked of its leader: the end
        offset of the given leader epoch, exclusive (the start offset of the next larger epoch, or
        the log end offset for the current one); -1 when the leader knows no epoch that old.
        Leadership errors are retried until ``retry_timeout``; other failures raise AdminError."""
        wanted = dict(epochs)
        results: dict[TopicPartition, int] = {}
        deadline = self._deadline()
        pending = list(wanted)
        while pending:
            leaders, failed = await self._leaders(pending)
            _raise_failures({tp: e for tp, e in failed.items() if e.error not in LEADERSHIP_ERRORS})
            retry = [tp for tp in failed]
            for node, tps in leaders.items():
                def make(_version: int, tps: list[TopicPartition] = tps) -> OffsetForLeaderEpochRequest:
                    by_topic: dict[str, list[TopicPartition]] = {}
                    for tp in tps:
                        by_topic.setdefault(tp.topic, []).append(tp)
                    return OffsetForLeaderEpochRequest(replica_id=CONSUMER_REPLICA_ID, topics=[
                        OffsetForLeaderEpochRequest.OffsetForLeaderTopic(topic=topic, partitions=[
                            OffsetForLeaderEpochRequest.OffsetForLeaderPartition(
                                partition=tp.partition, current_leader_epoch=-1, leader_epoch=wanted[tp])
                            for tp in parts])
                        for topic, parts in by_topic.items()])

                response, _ = await self._send_to(node, ApiKey.OFFSET_FOR_LEADER_EPOCH, make)
                answered = {TopicPartition(t.topic, p.partition): p for t in response.topics for p in t.partitions}
                for tp in tps:
                    answer = answered.get(tp)
                    if answer is None or answer.error_code in LEADERSHIP_ERRORS:
                        retry.append(tp)
                    elif answer.error_code != ErrorCode.NONE:
                        raise AdminError(f"partition {tp}", answer.error_code)
                    else:
                        results[tp] = answer.end_offset
            pending = retry
            if pending:
                await self._backoff_or_give_up(deadline, f"partition {pending[0]}", ErrorCode.NOT_LEADER_OR_FOLLOWER, None)
        return {tp: results[tp] for tp in wanted}

    async def partition_leader_epochs(
        self, partitions: Iterable[TopicPartition],
    ) -> dict[TopicPartition, tuple[dict[int, int], dict[int, int]]]:
        """PartitionLeaderEpochsForPartitions (KIP-253, key 30002) from the bootstrap broker: for
        each partition, (leader epochs after creation, leader epochs before deletion), each a
        {partition: epoch} map, empty for none. Raises UnsupportedVersionError when the broker does
        not offer the API (any Kafka broker), AdminError for a failed partition."""
        if self._connection is None:
            raise KafkaClientError("not connected")
        wanted = list(dict.fromkeys(partitions))
        by_topic: dict[str, list[int]] = {}
        for tp in wanted:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        request = PartitionLeaderEpochsForPartitionsRequest(topics=[
            PartitionLeaderEpochsForPartitionsRequest.RequestTopic(name=t, partition_indexes=ps) for t, ps in by_topic.items()
        ])
        response = await self._send(ApiKey.PARTITION_LEADER_EPOCHS_FOR_PARTITIONS, request)
        out: dict[TopicPartition, tuple[dict[int, int], dict[int, int]]] = {}
        failures: dict[TopicPartition, AdminError] = {}
        for topic in response.topics:
            for p in topic.partitions:
                tp = TopicPartition(topic.name, p.partition_index)
                if p.error_code != ErrorCode.NONE:
                    failures[tp] = AdminError(f"partition {tp}", p.error_code)
                else:
                    out[tp] = ({e.partition_index: e.leader_epoch for e in p.leader_epochs_after_creation},
                               {e.partition_index: e.leader_epoch for e in p.leader_epochs_before_deletion})
        for tp in wanted:
            if tp not in out and tp not in failures:
                failures[tp] = AdminError(f"partition {tp}", ErrorCode.UNKNOWN_SERVER_ERROR, "the broker did not answer for it")
        _raise_failures(failures)
        return {tp: out[tp] for tp in wanted}

    def supports(self, api_key: int) -> bool:
        """Whether the bootstrap broker offers ``api_key`` (ApiVersions)."""
        return self._connection is not None and api_key in self._connection.api_versions

    # --- deleting records ----------------------------------------------------------------------

    async def delete_records(
        self, offsets: Mapping[TopicPartition, int], leader_only: bool = False, timeout_ms: int = 30000,
    ) -> dict[TopicPartition, DeletedRecords | AdminError]:
        """DeleteRecords: move each partition's log start offset up to its offset (-1: the high
        watermark), asking each partition's leader (one request per leader, concurrently).

        Returns every partition's outcome, in the order given: ``DeletedRecords`` or the
        ``AdminError`` it failed with (e.g. OFFSET_OUT_OF_RANGE past the high watermark,
        UNKNOWN_TOPIC_OR_PARTITION, INVALID_TOPIC_EXCEPTION for internal topics, POLICY_VIOLATION
        without cleanup.policy delete, REQUEST_TIMED_OUT when the replicas did not follow within
        ``timeout_ms``). NOT_LEADER_OR_FOLLOWER, LEADER_NOT_AVAILABLE and lost connections are
        retried after a metadata refresh until ``timeout_ms`` has passed.

        ``leader_only`` (KIP-1343, DeleteRecords v3) answers once the leader has moved its log
        start offset, without waiting for the followers: the low watermark may then still be
        below the offset, and ``leader_log_start_offset`` is the leader's. A leader whose broker
        offers only v0-v2 fails its partitions with UNSUPPORTED_VERSION and is sent nothing for
        them (no silent downgrade); without ``leader_only`` such a broker is asked at its version
        and ``leader_log_start_offset`` is -1.
        """
        wanted = dict(offsets)
        results: dict[TopicPartition, DeletedRecords | AdminError] = {}
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(timeout_ms, 0) / 1000
        pending = list(wanted)
        while pending:
            leaders, failed = await self._leaders(pending)
            remaining_ms = max(0, int((deadline - loop.time()) * 1000))
            answers = await asyncio.gather(*(
                self._delete_records_on(node, {tp: wanted[tp] for tp in tps}, leader_only, remaining_ms)
                for node, tps in leaders.items()
            ))
            retry: dict[TopicPartition, AdminError] = {}
            outcomes: list[Mapping[TopicPartition, DeletedRecords | AdminError]] = [failed, *answers]
            for answer in outcomes:
                for tp, outcome in answer.items():
                    if isinstance(outcome, AdminError) and outcome.error in DELETE_RECORDS_RETRY_ERRORS:
                        retry[tp] = outcome
                    else:
                        results[tp] = outcome
            pending = list(retry)
            if pending and loop.time() + RETRY_BACKOFF_S > deadline:
                for tp, error in retry.items():
                    results[tp] = AdminError(error.resource, error.error,
                                             f"{error.message} (still failing after {timeout_ms} ms)")
                break
            if pending:
                await asyncio.sleep(RETRY_BACKOFF_S)
        return {tp: results[tp] for tp in wanted}

    async def _delete_records_on(
        self, node: Node, offsets: dict[TopicPartition, int], leader_only: bool, timeout_ms: int,
    ) -> dict[TopicPartition, DeletedRecords | AdminError]:
        def fail_all(error: int, message: str) -> dict[TopicPartition, DeletedRecords | AdminError]:
            return {tp: AdminError(f"partition {tp}", error, message) for tp in offsets}

        try:
            connection = await self._connection_to(node.host, node.port)
            version = connection.version_for(ApiKey.DELETE_RECORDS)
        except UnsupportedVersionError as e:
            return fail_all(ErrorCode.UNSUPPORTED_VERSION, str(e))
        except KafkaClientError as e:
            return fail_all(ErrorCode.NETWORK_EXCEPTION, str(e))
        if leader_only and version < DELETE_RECORDS_LEADER_ONLY_VERSION:
            return fail_all(ErrorCode.UNSUPPORTED_VERSION,
                            f"leader_only needs DeleteRecords v{DELETE_RECORDS_LEADER_ONLY_VERSION} (KIP-1343); "
                            f"broker {node} supports at most v{version}")
        by_topic: dict[str, list[tuple[int, int]]] = {}
        for tp, offset in offsets.items():
            by_topic.setdefault(tp.topic, []).append((tp.partition, offset))
        request = DeleteRecordsRequest(
            topics=[DeleteRecordsRequest.DeleteRecordsTopic(name=topic, partitions=[
                DeleteRecordsRequest.DeleteRecordsPartition(partition_index=p, offset=o) for p, o in parts
            ]) for topic, parts in by_topic.items()],
            timeout_ms=timeout_ms, leader_only=leader_only,
        )
        # The broker may hold the request for timeout_ms (waiting for the replicas): wait longer.
        wait = max(self._request_timeout, timeout_ms / 1000 + 5)
        try:
            response, version = await self._send_to(node, ApiKey.DELETE_RECORDS, lambda _v: request, wait)
        except UnsupportedVersionError as e:
            return fail_all(ErrorCode.UNSUPPORTED_VERSION, str(e))
        except KafkaClientError as e:
            return fail_all(ErrorCode.NETWORK_EXCEPTION, str(e))
        except TimeoutError:
            return fail_all(ErrorCode.REQUEST_TIMED_OUT, f"broker {node} did not answer within {wait:g}s")
        out: dict[TopicPartition, DeletedRecords | AdminError] = {}
        for topic in response.topics:
            for p in topic.partitions:
                tp = TopicPartition(topic.name, p.partition_index)
                if tp not in offsets:
                    continue
                leader_lso = p.leader_log_start_offset if version >= DELETE_RECORDS_LEADER_ONLY_VERSION else -1
                if p.error_code == ErrorCode.NONE:
                    out[tp] = DeletedRecords(p.low_watermark, leader_lso)
                elif p.error_code == ErrorCode.REQUEST_TIMED_OUT:
                    out[tp] = AdminError(f"partition {tp}", p.error_code,
                                         f"the replicas did not reach offset {offsets[tp]} in time "
                                         f"(low watermark {p.low_watermark}, leader log start offset {leader_lso})")
                else:
                    out[tp] = AdminError(f"partition {tp}", p.error_code)
        for tp in offsets:
            out.setdefault(tp, AdminError(f"partition {tp}", ErrorCode.UNKNOWN_SERVER_ERROR, f"broker {node} did not answer for it"))
        return out

    # --- ACLs ----------------------------------------------------------------------------------

    async def create_acls(self, bindings: Iterable[AclBinding]) -> None:
        """CreateAcls (any broker answers); raises `AdminError` for the first binding that failed,
        with every failure (by binding) in ``failures``."""
        wanted = list(bindings)
        if not wanted:
            return
        request = CreateAclsRequest(creations=[
            CreateAclsRequest.AclCreation(
                resource_type=b.pattern.resource_type, resource_name=b.pattern.name,
                resource_pattern_type=b.pattern.pattern_type, principal=b.entry.principal, host=b.entry.host,
                operation=b.entry.operation, permission_type=b.entry.permission_type,
            ) for b in wanted
        ])
        response = await self._send(ApiKey.CREATE_ACLS, request)
        failures: dict[object, AdminError] = {}
        for binding, result in zip(wanted, response.results, strict=False):
            if result.error_code != ErrorCode.NONE:
                failures[binding] = AdminError(f"ACL {binding}", result.error_code, result.error_message)
        _raise_failures(failures)

    async def describe_acls(self, binding_filter: AclBindingFilter = ANY_BINDING) -> list[AclBinding]:
        """DescribeAcls: every binding the filter matches."""
        pattern, entry = binding_filter.pattern_filter, binding_filter.entry_filter
        request = DescribeAclsRequest(
            resource_type_filter=pattern.resource_type, resource_name_filter=pattern.name,
            pattern_type_filter=pattern.pattern_type, principal_filter=entry.principal, host_filter=entry.host,
            operation=entry.operation, permission_type=entry.permission_type,
        )
        response = await self._send(ApiKey.DESCRIBE_ACLS, request)
        if response.error_code != ErrorCode.NONE:
            raise AdminError("ACLs", response.error_code, response.error_message)
        return [
            AclBinding(
                ResourcePattern(ResourceType(r.resource_type), r.resource_name, PatternType(r.pattern_type)),
                AccessControlEntry(a.principal, a.host, AclOperation(a.operation), AclPermissionType(a.permission_type)),
            )
            for r in response.resources for a in r.acls
        ]

    async def delete_acls(self, filters: Iterable[AclBindingFilter]) -> list[list[AclBinding]]:
        """DeleteAcls: per filter, the bindings it deleted; raises `AdminError` for the first
        filter (or deletion) that failed, with every failure in ``failures``."""
        wanted = list(filters)
        if not wanted:
            return []
        request = DeleteAclsRequest(filters=[
            DeleteAclsRequest.DeleteAclsFilter(
                resource_type_filter=f.pattern_filter.resource_type, resource_name_filter=f.pattern_filter.name,
                pattern_type_filter=f.pattern_filter.pattern_type, principal_filter=f.entry_filter.principal,
                host_filter=f.entry_filter.host, operation=f.entry_filter.operation,
                permission_type=f.entry_filter.permission_type,
            ) for f in wanted
        ])
        response = await self._send(ApiKey.DELETE_ACLS, request)
        failures: dict[object, AdminError] = {}
        out: list[list[AclBinding]] = []
        for binding_filter, result in zip(wanted, response.filter_results, strict=False):
            if result.error_code != ErrorCode.NONE:
                failures[binding_filter] = AdminError(f"ACL filter {binding_filter}", result.error_code,
                                                      result.error_message)
                out.append([])
                continue
            deleted = []
            for m in result.matching_acls:
                binding = AclBinding(
                    ResourcePattern(ResourceType(m.resource_type), m.resource_name, PatternType(m.pattern_type)),
                    AccessControlEntry(m.principal, m.host, AclOperation(m.operation), AclPermissionType(m.permission_type)),
                )
                if m.error_code != ErrorCode.NONE:
                    failures[binding] = AdminError(f"ACL {binding}", m.error_code, m.error_message)
                deleted.append(binding)
            out.append(deleted)
        _raise_failures(failures)
        return out

    # --- groups: coordinator ---------------------------------------------------------------------

    async def find_coordinator(self, group: str, key_type: int = GROUP_KEY_TYPE) -> Node:
        """The broker coordinating ``group`` (FindCoordinator; asked of any broker, then cached).
        With ``key_type`` TRANSACTION_KEY_TYPE, ``group`` is a transactional id and the answer
        is its transaction coordinator.

        Retries COORDINATOR_NOT_AVAILABLE / COORDINATOR_LOAD_IN_PROGRESS (e.g. while
        ``__consumer_offsets`` is being created) until ``retry_timeout``.
        """
        cache = self._coordinators if key_type == GROUP_KEY_TYPE else self._txn_coordinators
        cached = cache.get(group)
        if cached is not None:
            return cached
        if self._connection is None:
            raise KafkaClientError("not connected")
        deadline = self._deadline()
        while True:
            version = self._connection.version_for(ApiKey.FIND_COORDINATOR)
            if version >= 4:
                request = FindCoordinatorRequest(key_type=key_type, coordinator_keys=[group])
            else:
                request = FindCoordinatorRequest(key=group, key_type=key_type)
            response = await self._connection.send(ApiKey.FIND_COORDINATOR, request, version)
            if version >= 4:
                answer = next((c for c in response.coordinators if c.key == group), None)
                if answer is None:
                    raise AdminError(f"group {group}", ErrorCode.UNKNOWN_SERVER_ERROR, "FindCoordinator did not answer for it")
            else:
                answer = response
            error = ErrorCode.for_code(answer.error_code)
            if error == ErrorCode.NONE:
                node = Node(answer.node_id, answer.host, answer.port)
                cache[group] = node
                return node
            if not error.retriable:
                raise AdminError(f"group {group}", error, answer.error_message)
            await self._backoff_or_give_up(deadline, f"group {group}", error, answer.error_message)

    def forget_coordinator(self, group: str, key_type: int = GROUP_KEY_TYPE) -> None:
        """Look ``group``'s coordinator up again next time (it moved, or its connection broke)."""
        (self._coordinators if key_type == GROUP_KEY_TYPE else self._txn_coordinators).pop(group, None)

    async def _coordinator_call(
        self, group: str, api_key: int, make_request: Callable[[int], Any], error_of: Callable[[Any, int], int],
    ) -> tuple[Any, int, Node]:
        """Send a request to ``group``'s coordinator; when ``error_of(response, version)`` is a
        coordinator error, look the coordinator up again and retry. (response, version, node)."""
        deadline = self._deadline()
        while True:
            node = await self.find_coordinator(group)
            response, version = await self._send_to(node, api_key, make_request)
            error = ErrorCode.for_code(error_of(response, version))
            if error not in COORDINATOR_ERRORS:
                return response, version, node
            if error != ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
                self._coordinators.pop(group, None)
            await self._backoff_or_give_up(deadline, f"group {group}", error, None)

    # --- groups ----------------------------------------------------------------------------------

    async def list_groups(self, states: Collection[str] | None = None) -> list[GroupListing]:
        """Every group of every broker (ListGroups), sorted by id.

        ``states`` (e.g. ``["Stable", "Empty"]``, case-insensitive) keeps only groups in those
        states; it needs ListGroups v4, else UnsupportedVersionError.
        """
        brokers = await self._brokers()
        listed = await asyncio.gather(*(self._list_groups_on(node, states) for node in brokers))
        groups = {g.group_id: g for answer in listed for g in answer}
        return [groups[name] for name in sorted(groups)]

    async def _list_groups_on(self, node: Node, states: Collection[str] | None) -> list[GroupListing]:
        def make(version: int) -> ListGroupsRequest:
            if states and version < 4:
                raise UnsupportedVersionError(f"ListGroups with a states filter needs v4; broker {node} offers v{version}")
            return ListGroupsRequest(states_filter=list(states or []))

        deadline = self._deadline()
        while True:
            response, version = await self._send_to(node, ApiKey.LIST_GROUPS, make)
            error = ErrorCode.for_code(response.error_code)
            if error == ErrorCode.NONE:
                return [GroupListing(g.group_id, g.protocol_type, g.group_state if version >= 4 else None)
                        for g in response.groups]
            if error not in COORDINATOR_ERRORS:
                raise AdminError(f"broker {node}", error)
            await self._backoff_or_give_up(deadline, f"broker {node}", error, None)

    async def describe_groups(self, groups: Iterable[str]) -> dict[str, GroupDescription]:
        """DescribeGroups for each group (at its coordinator), in the order asked.

        A group the coordinator does not know is reported with state "Dead" (as Kafka does). For
        the consumer protocol each member's assignment is decoded into topic partitions.
        """
        return await _for_each_group(groups, self._describe_group)

    async def _describe_group(self, group: str) -> GroupDescription:
        def error_of(response: Any, _version: int) -> int:
            return response.groups[0].error_code if response.groups else ErrorCode.NONE

        response, _, node = await self._coordinator_call(
            group, ApiKey.DESCRIBE_GROUPS, lambda _v: DescribeGroupsRequest(groups=[group]), error_of,
        )
        described = next((g for g in response.groups if g.group_id == group), None)
        if described is None:
            raise AdminError(f"group {group}", ErrorCode.UNKNOWN_SERVER_ERROR, "DescribeGroups did not answer for it")
        if described.error_code != ErrorCode.NONE:
            raise AdminError(f"group {group}", described.error_code)
        is_consumer = described.protocol_type == consumer_protocol.PROTOCOL_TYPE
        members = []
        for m in described.members:
            assignment: list[TopicPartition] = []
            if is_consumer and m.member_assignment:
                try:
                    assignment = consumer_protocol.decode_assignment(bytes(m.member_assignment)).partitions
                except ValueError as e:
                    raise ValueError(f"group {group} member {m.member_id}: {e}") from e
            members.append(MemberDescription(
                m.member_id, m.group_instance_id, m.client_id, m.client_host, assignment,
                bytes(m.member_metadata), bytes(m.member_assignment),
            ))
        return GroupDescription(group, described.group_state, described.protocol_type, described.protocol_data, members, node)

    async def delete_groups(self, groups: Iterable[str]) -> None:
        """DeleteGroups: delete each (empty) group and its committed offsets.

        Every group is tried; then AdminError is raised for the first that failed
        (NON_EMPTY_GROUP while it has members, GROUP_ID_NOT_FOUND), ``failures`` naming them all.
        """
        await _for_each_group(groups, self._delete_group)

    async def _delete_group(self, group: str) -> None:
        def error_of(response: Any, _version: int) -> int:
            return next((r.error_code for r in response.results if r.group_id == group), ErrorCode.NONE)

        response, _, _ = await self._coordinator_call(
            group, ApiKey.DELETE_GROUPS, lambda _v: DeleteGroupsRequest(groups_names=[group]), error_of,
        )
        result = next((r for r in response.results if r.group_id == group), None)
        if result is None:
            raise AdminError(f"group {group}", ErrorCode.UNKNOWN_SERVER_ERROR, "DeleteGroups did not answer for it")
        if result.error_code != ErrorCode.NONE:
            raise AdminError(f"group {group}", result.error_code, _group_error_message(result.error_code))

    # --- groups: committed offsets ---------------------------------------------------------------

    async def list_group_offsets(
        self, group: str, partitions: Iterable[TopicPartition] | None = None, require_stable: bool = False,
    ) -> dict[TopicPartition, CommittedOffset]:
        """OffsetFetch: ``group``'s committed offsets, sorted by partition.

        ``partitions`` None asks for every partition the group has committed; a requested
        partition without a committed offset is left out of the answer. ``require_stable``
        (OffsetFetch v7+, KIP-447; a read_committed consumer's) makes the coordinator answer
        UNSTABLE_OFFSET_COMMIT for a partition with offsets of an open transaction pending.
        """
        wanted = None if partitions is None else list(dict.fromkeys(partitions))
        by_topic: dict[str, list[int]] = {}
        for tp in wanted or []:
            by_topic.setdefault(tp.topic, []).append(tp.partition)

        def make(version: int) -> OffsetFetchRequest:
            if version >= 8:
                group_topics = None if wanted is None else [
                    OffsetFetchRequest.OffsetFetchRequestTopics(name=t, partition_indexes=ps) for t, ps in by_topic.items()
                ]
                return OffsetFetchRequest(
                    groups=[OffsetFetchRequest.OffsetFetchRequestGroup(group_id=group, topics=group_topics)],
                    require_stable=require_stable)
            if wanted is None and version < 2:
                raise UnsupportedVersionError("OffsetFetch of every partition needs v2; the coordinator offers v1")
            topics = None if wanted is None else [
                OffsetFetchRequest.OffsetFetchRequestTopic(name=t, partition_indexes=ps) for t, ps in by_topic.items()
            ]
            return OffsetFetchRequest(group_id=group, topics=topics, require_stable=require_stable and version >= 7)

        response, version, _ = await self._coordinator_call(group, ApiKey.OFFSET_FETCH, make, _offset_fetch_error)
        if version >= 8:
            answer = next((g for g in response.groups if g.group_id == group), None)
            if answer is None:
                raise AdminError(f"group {group}", ErrorCode.UNKNOWN_SERVER_ERROR, "OffsetFetch did not answer for it")
            group_error, topics = answer.error_code, answer.topics
        else:
            group_error, topics = (response.error_code if version >= 2 else ErrorCode.NONE), response.topics
        if group_error != ErrorCode.NONE:
            raise AdminError(f"group {group}", group_error, _group_error_message(group_error))
        out: dict[TopicPartition, CommittedOffset] = {}
        failures: dict[TopicPartition, AdminError] = {}
        for topic in topics:
            for p in topic.partitions:
                tp = TopicPartition(topic.name, p.partition_index)
                if p.error_code != ErrorCode.NONE:
                    failures[tp] = AdminError(f"group {group} partition {tp}", p.error_code)
                elif p.committed_offset >= 0:
                    epoch = p.committed_leader_epoch if p.committed_leader_epoch >= 0 else None
                    out[tp] = CommittedOffset(p.committed_offset, epoch, p.metadata or "")
        _raise_failures(failures)
        return dict(sorted(out.items()))

    async def alter_group_offsets(self, group: str, offsets: Mapping[TopicPartition, int]) -> None:
        """OffsetCommit ``offsets`` for ``group`` from outside it (generation -1, member id ""),
        as Kafka's AdminClient ``alterConsumerGroupOffsets`` does.

        The coordinator only accepts this while the group has no members: otherwise every
        partition fails with UNKNOWN_MEMBER_ID. A group that does not exist is created (as a
        "simple" group holding just these offsets).
        """
        by_topic: dict[str, list[tuple[int, int]]] = {}
        for tp, offset in offsets.items():
            by_topic.setdefault(tp.topic, []).append((tp.partition, offset))
        if not by_topic:
            return

        def make(_version: int) -> OffsetCommitRequest:
            return OffsetCommitRequest(
                group_id=group, generation_id_or_member_epoch=NO_GENERATION, member_id=NO_MEMBER_ID,
                group_instance_id=None, retention_time_ms=-1,
                topics=[OffsetCommitRequest.OffsetCommitRequestTopic(name=topic, partitions=[
                    OffsetCommitRequest.OffsetCommitRequestPartition(
                        partition_index=p, committed_offset=o, committed_leader_epoch=-1, committed_metadata="",
                    ) for p, o in parts
                ]) for topic, parts in by_topic.items()],
            )

        def error_of(response: Any, _version: int) -> int:
            codes = [p.error_code for t in response.topics for p in t.partitions]
            return next((c for c in codes if c in COORDINATOR_ERRORS), ErrorCode.NONE)

        response, _, _ = await self._coordinator_call(group, ApiKey.OFFSET_COMMIT, make, error_of)
        errors = {TopicPartition(t.name, p.partition_index): ErrorCode.for_code(p.error_code)
                  for t in response.topics for p in t.partitions}
        failed = {tp: e for tp, e in errors.items() if e != ErrorCode.NONE}
        missing = [tp for tp in offsets if tp not in errors]
        if missing:
            failed.update(dict.fromkeys(missing, ErrorCode.UNKNOWN_SERVER_ERROR))
        if not failed:
            return
        error = next(iter(failed.values()))
        if error not in PARTITION_COMMIT_ERRORS and len(failed) == len(offsets) and set(failed.values()) == {error}:
            # One group-wide failure (e.g. the group has members): say so once.
            raise AdminError(f"group {group}", error, _commit_error_message(error),
                             {tp: AdminError(f"group {group} partition {tp}", error) for tp in failed})
        _raise_failures({tp: AdminError(f"group {group} partition {tp}", e, _commit_error_message(e)) for tp, e in failed.items()})

    async def delete_group_offsets(self, group: str, partitions: Iterable[TopicPartition]) -> None:
        """OffsetDelete: forget ``group``'s committed offsets of ``partitions``.

        Group-level failures (GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP) raise for the group; failed
        partitions (GROUP_SUBSCRIBED_TO_TOPIC while members consume the topic,
        UNKNOWN_TOPIC_OR_PARTITION) raise after the others are deleted, ``failures`` naming them.
        """
        wanted = list(dict.fromkeys(partitions))
        by_topic: dict[str, list[int]] = {}
        for tp in wanted:
            by_topic.setdefault(tp.topic, []).append(tp.partition)

        def make(_version: int) -> OffsetDeleteRequest:
            return OffsetDeleteRequest(group_id=group, topics=[
                OffsetDeleteRequest.OffsetDeleteRequestTopic(name=topic, partitions=[
                    OffsetDeleteRequest.OffsetDeleteRequestPartition(partition_index=p) for p in parts
                ]) for topic, parts in by_topic.items()
            ])

        response, _, _ = await self._coordinator_call(
            group, ApiKey.OFFSET_DELETE, make, lambda response, _v: response.error_code,
        )
        if response.error_code != ErrorCode.NONE:
            raise AdminError(f"group {group}", response.error_code, _group_error_message(response.error_code))
        errors = {TopicPartition(t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions}
        failures = {
            tp: AdminError(f"group {group} partition {tp}", errors.get(tp, ErrorCode.UNKNOWN_SERVER_ERROR),
                           None if tp in errors else "OffsetDelete did not answer for it")
            for tp in wanted if errors.get(tp, ErrorCode.UNKNOWN_SERVER_ERROR) != ErrorCode.NONE
        }
        _raise_failures(failures)


def _resource_label(resource_type: int, name: str) -> str:
    if resource_type == TOPIC_RESOURCE:
        return f"topic {name}"
    if resource_type in (BROKER_RESOURCE, BROKER_LOGGER_RESOURCE):
        return f"broker {name}" if name else "broker defaults"
    return f"resource {resource_type}:{name}"


def _spec_timestamp(spec: OffsetSpec) -> int:
    if spec == "earliest":
        return EARLIEST_TIMESTAMP
    if spec == "latest":
        return LATEST_TIMESTAMP
    if spec == "max_timestamp":
        return MAX_TIMESTAMP
    if isinstance(spec, int) and not isinstance(spec, bool) and spec >= 0:
        return spec
    raise ValueError(f"offset spec {spec!r}: expected 'earliest', 'latest', 'max_timestamp' or a timestamp in ms (>= 0)")


def _offset_fetch_error(response: Any, version: int) -> int:
    if version >= 8:
        return response.groups[0].error_code if response.groups else ErrorCode.NONE
    if version >= 2 and response.error_code != ErrorCode.NONE:
        return response.error_code
    # v1 carries a coordinator error on every partition.
    return next((p.error_code for t in response.topics for p in t.partitions if p.error_code in COORDINATOR_ERRORS),
                ErrorCode.NONE)


def _group_error_message(error: int) -> str | None:
    return {
        ErrorCode.GROUP_ID_NOT_FOUND: "the group does not exist",
        ErrorCode.NON_EMPTY_GROUP: "the group is not empty: it still has members",
        ErrorCode.INVALID_GROUP_ID: "the group id is not valid",
    }.get(ErrorCode.for_code(error), ErrorCode.for_code(error).message)


def _commit_error_message(error: ErrorCode) -> str | None:
    if error == ErrorCode.UNKNOWN_MEMBER_ID:
        return "the group has active members; its offsets can only be altered while it is empty"
    return error.message
