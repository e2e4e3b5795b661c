"""What the controller tells brokers: LeaderAndIsr, UpdateMetadata and StopReplica, as values.

Owns the domain form of the three controller-to-broker requests of Kafka's ZooKeeper mode. The
controller builds them; a broker applies them (``pybroker.server.broker_control``), whether they
arrived over a socket (their wire form is decoded into these) or in-process from the controller
of a single broker. No I/O, no behaviour.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from pybroker.protocol.errors import ErrorCode
from pybroker.types import TopicPartition

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


@dataclass
class LeaderAndIsr:
    """Become leader or follower of these partitions (sent to their replicas only)."""

    controller_id: int
    controller_epoch: int
    broker_epoch: int
    partition_states: list[PartitionState]
    topic_ids: dict[str, uuid.UUID]
    live_leaders: list[LiveBroker]


@dataclass
class UpdateMetadata:
    """The complete list of live brokers and the new state of some partitions (sent to every
    live broker; partitions not listed keep their cached state)."""

    controller_id: int
    controller_epoch: int
    broker_epoch: int
    partition_states: list[PartitionState]
    live_brokers: list[LiveBroker]
    topic_ids: dict[str, uuid.UUID]
    # KIP-253's (initial_partition_count, undeleted_partition_count) of the topics listed.
    partition_counts: dict[str, tuple[int, int]] = field(default_factory=dict)


@dataclass(frozen=True)
class StopReplicaPartition:
    topic_partition: TopicPartition
    leader_epoch: int
    delete: bool


@dataclass
class StopReplica:
    """Stop replicating (and with ``delete``, remove) these partitions."""

    controller_id: int
    controller_epoch: int
    broker_epoch: int
    partitions: list[StopReplicaPartition]


@dataclass
class ControlResponse:
    """A broker's answer to a controller request: a top-level error, and per-partition errors
    (only those that are not NONE)."""

    error: ErrorCode = ErrorCode.NONE
    partition_errors: dict[TopicPartition, ErrorCode] = field(default_factory=dict)
