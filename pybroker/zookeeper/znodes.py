"""Kafka's ZooKeeper tree: znode paths and the JSON stored in them, byte for byte.

Owns the formats of Kafka's ZooKeeper mode (``ZkData.scala`` of Kafka 2.8-3.6), so that Kafka's
tools can read a pybroker cluster's tree and a tree written by Kafka reads here: broker
registrations (version 5), ``/controller`` (version 1), ``/controller_epoch`` (a plain decimal),
``/cluster/id``, topic assignments (version 3 with a topic id), partition states (version 1),
entity configs (a user's SCRAM credentials among them, its znode named by Kafka's ``Sanitizer``),
config change notifications (version 2), and producer-id blocks. JSON is
compact (no spaces), as Jackson writes it; readers look fields up by name, so order does not
matter. Pure functions and immutable dataclasses: no I/O, safe from any thread.

Vocabulary as in Kafka: a partition's *partition epoch* is the zkVersion of its state znode
(not stored in the JSON); a broker's *broker epoch* is the czxid of its registration znode.
"""

from __future__ import annotations

import base64
import json
import re
import time
import urllib.parse
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pybroker.types import TopicPartition

# -- paths --------------------------------------------------------------------------------------

CONSUMERS_PATH = "/consumers"
BROKERS_PATH = "/brokers"
BROKER_IDS_PATH = "/brokers/ids"
TOPICS_PATH = "/brokers/topics"
BROKER_SEQUENCE_ID_PATH = "/brokers/seqid"
CONTROLLER_PATH = "/controller"
CONTROLLER_EPOCH_PATH = "/controller_epoch"
CLUSTER_ID_PATH = "/cluster/id"
CONFIG_PATH = "/config"
CONFIG_CHANGES_PATH = "/config/changes"
CONFIG_CHANGE_PREFIX = "config_change_"
ADMIN_PATH = "/admin"
DELETE_TOPICS_PATH = "/admin/delete_topics"
ISR_CHANGE_NOTIFICATION_PATH = "/isr_change_notification"
LOG_DIR_EVENT_NOTIFICATION_PATH = "/log_dir_event_notification"
PRODUCER_ID_BLOCK_PATH = "/latest_producer_id_block"

# Kafka's ConfigType: the entity types that can have a /config/<type>/<name> znode.
CONFIG_TYPE_TOPIC = "topics"
CONFIG_TYPE_CLIENT = "clients"
CONFIG_TYPE_USER = "users"
CONFIG_TYPE_BROKER = "brokers"
CONFIG_TYPE_IP = "ips"
CONFIG_TYPES = (CONFIG_TYPE_TOPIC, CONFIG_TYPE_CLIENT, CONFIG_TYPE_USER, CONFIG_TYPE_BROKER, CONFIG_TYPE_IP)

# The persistent paths every broker creates, empty, at start-up when missing (PersistentZkPaths).
PERSISTENT_ZK_PATHS: tuple[str, ...] = (
    CONSUMERS_PATH,
    BROKER_IDS_PATH,
    TOPICS_PATH,
    CONFIG_CHANGES_PATH,
    DELETE_TOPICS_PATH,
    BROKER_SEQUENCE_ID_PATH,
    ISR_CHANGE_NOTIFICATION_PATH,
    PRODUCER_ID_BLOCK_PATH,
    LOG_DIR_EVENT_NOTIFICATION_PATH,
    *(f"{CONFIG_PATH}/{config_type}" for config_type in CONFIG_TYPES),
)

INITIAL_CONTROLLER_EPOCH = 0  # written to a missing /controller_epoch; the first controller gets 1
MATCH_ANY_VERSION = -1  # a zkVersion that matches any version in a conditional write
PRODUCER_ID_BLOCK_SIZE = 1000


def broker_id_path(broker_id: int) -> str:
    return f"{BROKER_IDS_PATH}/{broker_id}"


def topic_path(topic: str) -> str:
    return f"{TOPICS_PATH}/{topic}"


def topic_partitions_path(topic: str) -> str:
    return f"{TOPICS_PATH}/{topic}/partitions"


def topic_partition_path(partition: TopicPartition) -> str:
    return f"{TOPICS_PATH}/{partition.topic}/partitions/{partition.partition}"


def topic_partition_state_path(partition: TopicPartition) -> str:
    return f"{TOPICS_PATH}/{partition.topic}/partitions/{partition.partition}/state"


def config_entity_type_path(entity_type: str) -> str:
    return f"{CONFIG_PATH}/{entity_type}"


def config_entity_path(entity_type: str, entity_name: str) -> str:
    return f"{CONFIG_PATH}/{entity_type}/{entity_name}"


def sanitize(name: str) -> str:
    """Kafka's ``Sanitizer.sanitize``: a user (or client id) as a znode name.

    Java's ``URLEncoder.encode(name, UTF-8)`` keeps ``[A-Za-z0-9.*_-]``, writes a space as ``+``
    and percent-encodes every other UTF-8 byte in upper-case hex; Kafka then writes ``*`` as
    ``%2A`` and ``+`` as ``%20``. So only ``[A-Za-z0-9._-]`` stay as they are (``~``, which
    Python's ``quote`` keeps, becomes ``%7E``). A lone surrogate is encoded as ``?`` (``%3F``),
    as Java's encoder replaces it.
    """
    return urllib.parse.quote(name.encode("utf-8", errors="replace"), safe="").replace("~", "%7E")


def desanitize(name: str) -> str:
    """Kafka's ``Sanitizer.desanitize`` (Java's ``URLDecoder.decode``): ``%XX`` sequences are
    UTF-8 bytes and ``+`` is a space."""
    return urllib.parse.unquote_plus(name, encoding="utf-8", errors="replace")


def user_config_path(user: str) -> str:
    """``/config/users/<sanitized user>``: the user's configs (SCRAM credentials, quotas)."""
    return config_entity_path(CONFIG_TYPE_USER, sanitize(user))


def user_entity_path(user: str) -> str:
    """The ``entity_path`` of a change notification about ``user``: ``users/<sanitized>``."""
    return f"{CONFIG_TYPE_USER}/{sanitize(user)}"


def delete_topic_path(topic: str) -> str:
    return f"{DELETE_TOPICS_PATH}/{topic}"


# -- JSON ---------------------------------------------------------------------------------------


def to_json(value: object) -> bytes:
    """Compact UTF-8 JSON, as Kafka's Jackson writes it."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def from_json(data: bytes, what: str) -> dict[str, Any]:
    """A JSON object; ValueError naming ``what`` when the data is not one."""
    try:
        value = json.loads(data)
    except (ValueError, UnicodeDecodeError) as e:
        raise ValueError(f"{what} is not valid JSON: {data[:200]!r}") from e
    if not isinstance(value, dict):
        raise ValueError(f"{what} is not a JSON object: {data[:200]!r}")
    return value


def uuid_to_base64(value: uuid.UUID) -> str:
    """Kafka's printed Uuid: 22 characters of URL-safe base64, without padding."""
    return base64.urlsafe_b64encode(value.bytes).rstrip(b"=").decode()


def uuid_from_base64(text: str) -> uuid.UUID:
    return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))


def _now_ms() -> int:
    return int(time.time() * 1000)


# -- broker registration: /brokers/ids/<id> ------------------------------------------------------

_ENDPOINT = re.compile(r"^(.*)://\[?([0-9a-zA-Z\-%._:]*)\]?:(-?[0-9]+)$")
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


@dataclass(frozen=True)
class EndPoint:
    """One advertised listener of a broker (Kafka's ``EndPoint``)."""

    host: str | None
    port: int
    listener_name: str
    security_protocol: str

    @property
    def connection_string(self) -> str:
        """``NAME://host:port``, an IPv6 host in brackets, no host as ``NAME://:port``."""
        if self.host is None:
            return f"{self.listener_name}://:{self.port}"
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.listener_name}://{host}:{self.port}"

    @classmethod
    def parse(cls, connection_string: str, protocol_map: Mapping[str, str] | None = None) -> EndPoint:
        """Parse ``NAME://host:port``; the listener's protocol comes from ``protocol_map``, or
        is the listener name itself when there is no map (as in Kafka)."""
        match = _ENDPOINT.match(connection_string)
        if match is None:
            raise ValueError(f"Unable to parse {connection_string} to a broker endpoint")
        name, host, port = match.group(1).upper(), match.group(2), int(match.group(3))
        if protocol_map is None:
            protocol_map = {p: p for p in SECURITY_PROTOCOLS}
        if name not in protocol_map:
            raise ValueError(f"No security protocol defined for listener {name}")
        return cls(host or None, port, name, protocol_map[name])


@dataclass(frozen=True)
class BrokerInfo:
    """A broker's registration, as in ``/brokers/ids/<id>`` (Kafka's ``BrokerInfo``)."""

    broker_id: int
    endpoints: tuple[EndPoint, ...]
    rack: str | None = None
    jmx_port: int = -1
    features: Mapping[str, Any] = field(default_factory=dict)
    timestamp_ms: int | None = None  # None: the time of encoding
    version: int = 5

    @property
    def path(self) -> str:
        return broker_id_path(self.broker_id)


def encode_broker_info(info: BrokerInfo) -> bytes:
    """Version 5 JSON: top-level host/port of the first PLAINTEXT endpoint (null/-1 if none) for
    old clients, every endpoint as ``NAME://host:port``, and the listener->protocol map."""
    plaintext = next((e for e in info.endpoints if e.security_protocol == "PLAINTEXT"), None)
    body: dict[str, Any] = {
        "version": info.version,
        "host": plaintext.host if plaintext else None,
        "port": plaintext.port if plaintext else -1,
        "endpoints": [e.connection_string for e in info.endpoints],
        "listener_security_protocol_map": {e.listener_name: e.security_protocol for e in info.endpoints},
        "jmx_port": info.jmx_port,
        "timestamp": str(info.timestamp_ms if info.timestamp_ms is not None else _now_ms()),
    }
    if info.rack is not None:
        body["rack"] = info.rack
    body["features"] = dict(info.features)
    return to_json(body)


def decode_broker_info(broker_id: int, data: bytes) -> BrokerInfo:
    """Any registration version from 1 on (version 1: one PLAINTEXT endpoint from host/port)."""
    body = from_json(data, f"the ZooKeeper registration of broker {broker_id}")
    version = int(body["version"])
    if version < 1:
        raise ValueError(f"Unsupported version of broker registration: {data!r}")
    if version == 1:
        endpoints: tuple[EndPoint, ...] = (EndPoint(body["host"], int(body["port"]), "PLAINTEXT", "PLAINTEXT"),)
    else:
        protocol_map = body.get("listener_security_protocol_map")
        endpoints = tuple(EndPoint.parse(e, protocol_map) for e in body["endpoints"])
    timestamp = body.get("timestamp")
    return BrokerInfo(
        broker_id=broker_id,
        endpoints=endpoints,
        rack=body.get("rack"),
        jmx_port=int(body.get("jmx_port", -1)),
        features=body.get("features") or {},
        timestamp_ms=int(timestamp) if timestamp is not None else None,
        version=version,
    )


# -- /controller, /controller_epoch, /cluster/id -------------------------------------------------


def encode_controller(broker_id: int, timestamp_ms: int | None = None) -> bytes:
    """Version 1 (Kafka 2.8-3.3); 3.4+ writes version 2 with ``kraftControllerEpoch`` -1."""
    ts = timestamp_ms if timestamp_ms is not None else _now_ms()
    return to_json({"version": 1, "brokerid": broker_id, "timestamp": str(ts)})


def decode_controller(data: bytes) -> int:
    """The controller's broker id (versions 1 and 2)."""
    return int(from_json(data, "/controller")["brokerid"])


def encode_controller_epoch(epoch: int) -> bytes:
    return str(epoch).encode()


def decode_controller_epoch(data: bytes) -> int:
    return int(data.decode())


def encode_cluster_id(cluster_id: str) -> bytes:
    """Note that the version is a string here, unlike everywhere else."""
    return to_json({"version": "1", "id": cluster_id})


def decode_cluster_id(data: bytes) -> str:
    return str(from_json(data, "/cluster/id")["id"])


# -- topics: /brokers/topics/<t> and .../partitions/<p>/state ------------------------------------


@dataclass(frozen=True)
class ReplicaAssignment:
    """A partition's replicas, and those being added or removed by a reassignment."""

    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()


@dataclass(frozen=True)
class TopicIdReplicaAssignment:
    """The content of a topic znode: its id (None in a version 2 znode), its assignment, and
    KIP-253's ``initial_partition_count`` and ``undeleted_partition_count`` (None in a znode
    Kafka wrote)."""

    topic: str
    topic_id: uuid.UUID | None
    assignment: Mapping[int, ReplicaAssignment]
    initial_partition_count: int | None = None
    undeleted_partition_count: int | None = None


def encode_topic(
    topic_id: uuid.UUID | None,
    assignment: Mapping[int, ReplicaAssignment],
    initial_partition_count: int | None = None,
    undeleted_partition_count: int | None = None,
) -> bytes:
    """Version 3; partition numbers are string keys; only reassigning partitions appear in
    ``adding_replicas``/``removing_replicas``; ``topic_id`` is left out when None, and so are
    the KIP-253 counts (keys Kafka's own reader ignores, as it ignores any it does not know)."""
    ordered = sorted(assignment.items())
    body: dict[str, Any] = {
        "version": 3,
        "partitions": {str(p): list(a.replicas) for p, a in ordered},
        "adding_replicas": {str(p): list(a.adding_replicas) for p, a in ordered if a.adding_replicas},
        "removing_replicas": {str(p): list(a.removing_replicas) for p, a in ordered if a.removing_replicas},
    }
    if topic_id is not None:
        body["topic_id"] = uuid_to_base64(topic_id)
    if initial_partition_count is not None:
        body["initial_partition_count"] = initial_partition_count
    if undeleted_partition_count is not None:
        body["undeleted_partition_count"] = undeleted_partition_count
    return to_json(body)


def decode_topic(topic: str, data: bytes) -> TopicIdReplicaAssignment:
    """Versions 1-3 (no ``topic_id`` before version 3, no adding/removing before version 2)."""
    if not data:
        return TopicIdReplicaAssignment(topic, None, {})
    body = from_json(data, f"the ZooKeeper assignment of topic {topic}")
    adding = body.get("adding_replicas") or {}
    removing = body.get("removing_replicas") or {}
    assignment = {
        int(p): ReplicaAssignment(tuple(replicas), tuple(adding.get(p, ())), tuple(removing.get(p, ())))
        for p, replicas in (body.get("partitions") or {}).items()
    }
    topic_id = body.get("topic_id")
    initial, undeleted = body.get("initial_partition_count"), body.get("undeleted_partition_count")
    return TopicIdReplicaAssignment(
        topic, uuid_from_base64(topic_id) if topic_id else None, assignment,
        None if initial is None else int(initial), None if undeleted is None else int(undeleted),
    )


LEADER_RECOVERY_RECOVERED = 0
LEADER_RECOVERY_RECOVERING = 1
NO_LEADER = -1


@dataclass(frozen=True)
class LeaderAndIsr:
    """A partition's leadership; ``partition_epoch`` is its state znode's zkVersion."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    leader_recovery_state: int = LEADER_RECOVERY_RECOVERED
    partition_epoch: int = 0


@dataclass(frozen=True)
class LeaderIsrAndControllerEpoch:
    """A partition state znode: the leadership and the epoch of the controller that decided it."""

    leader_and_isr: LeaderAndIsr
    controller_epoch: int


def encode_partition_epochs(after_creation: Mapping[int, int], before_deletion: Mapping[int, int]) -> bytes:
    """KIP-253's data of a partition znode (``/brokers/topics/<t>/partitions/<p>``, empty in
    Kafka): the leader epochs, by partition, that the partition recorded when an expansion
    added it (``leaderEpochAfterCreation``) and when a shrink marked it for deletion
    (``leaderEpochBeforeDeletion``); an empty map is left out."""
    body: dict[str, Any] = {"version": 1}
    for key, epochs in (("leaderEpochAfterCreation", after_creation), ("leaderEpochBeforeDeletion", before_deletion)):
        if epochs:
            body[key] = {str(p): e for p, e in sorted(epochs.items())}
    return to_json(body)


def decode_partition_epochs(data: bytes) -> tuple[dict[int, int], dict[int, int]]:
    """``(leaderEpochAfterCreation, leaderEpochBeforeDeletion)`` of a partition znode (empty for
    Kafka's empty znode)."""
    if not data:
        return {}, {}
    body = from_json(data, "a partition znode")
    after_creation, before_deletion = (
        {int(p): int(e) for p, e in (body.get(key) or {}).items()}
        for key in ("leaderEpochAfterCreation", "leaderEpochBeforeDeletion")
    )
    return after_creation, before_deletion


def encode_partition_state(state: LeaderIsrAndControllerEpoch) -> bytes:
    """Version 1; ``leader_recovery_state`` only while RECOVERING (KIP-704)."""
    leader_and_isr = state.leader_and_isr
    body: dict[str, Any] = {
        "version": 1,
        "leader": leader_and_isr.leader,
        "leader_epoch": leader_and_isr.leader_epoch,
        "isr": list(leader_and_isr.isr),
        "controller_epoch": state.controller_epoch,
    }
    if leader_and_isr.leader_recovery_state != LEADER_RECOVERY_RECOVERED:
        body["leader_recovery_state"] = leader_and_isr.leader_recovery_state
    return to_json(body)


def decode_partition_state(data: bytes, zk_version: int) -> LeaderIsrAndControllerEpoch:
    """``zk_version`` is the znode's stat version: it becomes the partition epoch."""
    body = from_json(data, "a partition state")
    leader_and_isr = LeaderAndIsr(
        leader=int(body["leader"]),
        leader_epoch=int(body["leader_epoch"]),
        isr=tuple(int(r) for r in body["isr"]),
        leader_recovery_state=int(body.get("leader_recovery_state", LEADER_RECOVERY_RECOVERED)),
        partition_epoch=zk_version,
    )
    return LeaderIsrAndControllerEpoch(leader_and_isr, int(body["controller_epoch"]))


# -- configs: /config/<type>/<name> and /config/changes/config_change_<seq> ----------------------


def encode_entity_config(config: Mapping[str, str]) -> bytes:
    return to_json({"version": 1, "config": {k: str(v) for k, v in config.items()}})


def decode_entity_config(data: bytes) -> dict[str, str]:
    """The config map; empty for a znode without data or without a ``config`` object."""
    if not data:
        return {}
    config = from_json(data, "an entity config").get("config")
    return {k: str(v) for k, v in config.items()} if isinstance(config, dict) else {}


def encode_config_change(entity_path: str) -> bytes:
    """Version 2 notification; ``entity_path`` is ``<type>/<name>``, e.g. ``topics/t``."""
    return to_json({"version": 2, "entity_path": entity_path})


def decode_config_change(data: bytes) -> str:
    """The entity path of a version 2 notification, or of a version 1 one (type and name)."""
    body = from_json(data, "a config change notification")
    version = int(body.get("version", 0))
    if version == 1:
        return f"{body['entity_type']}/{body['entity_name']}"
    if version == 2:
        return str(body["entity_path"])
    raise ValueError(f"Unsupported version {version} of a config change notification: {data!r}")


# -- /latest_producer_id_block ------------------------------------------------------------------


@dataclass(frozen=True)
class ProducerIdsBlock:
    """A range of producer ids owned by one broker (Kafka's ``ProducerIdsBlock``)."""

    assigned_broker_id: int
    first_producer_id: int
    size: int = PRODUCER_ID_BLOCK_SIZE

    @property
    def last_producer_id(self) -> int:
        return self.first_producer_id + self.size - 1

    @property
    def next_block_first_id(self) -> int:
        return self.first_producer_id + self.size


def encode_producer_id_block(block: ProducerIdsBlock) -> bytes:
    """Version 1; the bounds are written as strings (they are longs)."""
    return to_json({
        "version": 1,
        "broker": block.assigned_broker_id,
        "block_start": str(block.first_producer_id),
        "block_end": str(block.last_producer_id),
    })


def decode_producer_id_block(data: bytes) -> ProducerIdsBlock:
    body = from_json(data, PRODUCER_ID_BLOCK_PATH)
    start, end = int(body["block_start"]), int(body["block_end"])
    return ProducerIdsBlock(int(body["broker"]), start, end - start + 1)


# -- log dir event notifications (KIP-112) --------------------------------------------------------

LOG_DIR_EVENT_PREFIX = "log_dir_event_"
LOG_DIR_FAILURE_EVENT = 1  # Kafka's LogDirEventNotificationHandler.LogDirFailureEvent


def encode_log_dir_event(broker_id: int) -> bytes:
    """``/log_dir_event_notification/log_dir_event_<seq>``: a broker's log dir failed."""
    return to_json({"version": 1, "broker": broker_id, "event": LOG_DIR_FAILURE_EVENT})


def decode_log_dir_event(data: bytes) -> int:
    """The broker id of a log dir event notification."""
    return int(from_json(data, "log dir event notification")["broker"])
