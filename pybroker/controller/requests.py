"""What the controller tells brokers: LeaderAndIsr, UpdateMetadata and StopReplica, as values.

Owns the domain form of the three controller-to-broker requests of Kafka's ZooKeeper mode. The
controller builds them; a broker applies them (``pybroker.server.broker_control``), whether they
arrived over a socket (their wire form is decoded into these) or in-process from the controller
of a single broker. No I/O, no behaviour.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from pybroker.common.cluster import LiveBroker, PartitionState
from pybroker.common.errors import ErrorCode
from pybroker.types import TopicPartition


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
