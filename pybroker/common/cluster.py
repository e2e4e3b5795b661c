"""The cluster's shared records: a listener (`Endpoint`, parsed as Kafka parses ``listeners``), a
registered broker and its advertised endpoints (`LiveBroker`, `BrokerEndpoint`), and one
partition's state as the controller decides it (`PartitionState`). The network, the ZooKeeper
client, the clients, the controller and the brokers all speak of these. No I/O.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from pybroker.common.config import ConfigError
from pybroker.types import TopicPartition

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")

# Kafka's EndPoint.uriParseExp: NAME://host:port, an IPv6 host in brackets, an empty host allowed.
_LISTENER_URI = re.compile(r"^(.*)://\[?([0-9a-zA-Z\-%._:]*)\]?:(-?[0-9]+)")


@dataclass(frozen=True)
class Endpoint:
    """One listener: ``NAME://host:port`` and its security protocol. An empty host binds every
    interface (and is advertised as this machine's canonical host name, as Kafka does)."""

    listener_name: str
    host: str
    port: int
    security_protocol: str = "PLAINTEXT"

    @classmethod
    def parse(cls, uri: str, protocol_map: Mapping[str, str] | None = None) -> Endpoint:
        """Parse ``NAME://host:port`` (the name upper-cased, Kafka's ``ListenerName.normalised``);
        the protocol comes from ``protocol_map`` (default: the listener named after a protocol)."""
        match = _LISTENER_URI.match(uri)
        if match is None:
            raise ConfigError(f"Unable to parse {uri} to a broker endpoint")
        name, host, port = match.group(1).upper(), match.group(2), int(match.group(3))
        protocols = protocol_map if protocol_map is not None else {p: p for p in SECURITY_PROTOCOLS}
        if name not in protocols:
            raise ConfigError(f"No security protocol defined for listener {name}")
        return cls(name, host, port, protocols[name])

    @property
    def uses_tls(self) -> bool:
        return self.security_protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        return self.security_protocol in ("SASL_PLAINTEXT", "SASL_SSL")


#: UpdateMetadata leader meaning "this topic is being deleted: drop the partition" (Kafka's
#: LeaderDuringDelete), and the StopReplica leader epoch that always passes (EpochDuringDelete).
LEADER_DURING_DELETE = -2
EPOCH_DURING_DELETE = -2
NO_LEADER = -1


@dataclass(frozen=True)
class BrokerEndpoint:
    """One listener of a broker, as brokers advertise them."""

    listener: str
    host: str
    port: int
    security_protocol: str = "PLAINTEXT"


@dataclass(frozen=True)
class LiveBroker:
    """A registered broker: its id, its listeners and its rack."""

    broker_id: int
    endpoints: tuple[BrokerEndpoint, ...]
    rack: str | None = None

    def endpoint(self, listener: str | None = None) -> BrokerEndpoint | None:
        """The endpoint of ``listener`` (None: the first one)."""
        for endpoint in self.endpoints:
            if listener is None or endpoint.listener == listener:
                return endpoint
        return None


@dataclass
class PartitionState:
    """One partition's state as the controller decided it (LeaderAndIsrPartitionState and
    UpdateMetadataPartitionState in one shape)."""

    topic_partition: TopicPartition
    controller_epoch: int
    leader: int
    leader_epoch: int
    isr: list[int]
    partition_epoch: int
    replicas: list[int]
    offline_replicas: list[int] = field(default_factory=list)
    is_new: bool = False
    # KIP-253. LeaderAndIsr: the topic's undeleted partition count (-1: unknown), which a replica
    # adopts with this leader epoch. UpdateMetadata: the partition's epoch boundaries (empty: none).
    undeleted_partition_count: int = -1
    leader_epochs_after_creation: dict[int, int] = field(default_factory=dict)
    leader_epochs_before_deletion: dict[int, int] = field(default_factory=dict)
    # KIP-455 (LeaderAndIsr): while the partition is being reassigned, the replicas being added
    # and removed (``replicas`` is then the full set, the target replicas first).
    adding_replicas: list[int] = field(default_factory=list)
    removing_replicas: list[int] = field(default_factory=list)
