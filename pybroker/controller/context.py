"""What the active controller knows (Kafka's ``ControllerContext``): its epoch, the live brokers
and their epochs, every topic's assignment and state, the topics being deleted, the brokers in
controlled shutdown and the replicas on failed log dirs, with the questions every election asks of
them. The controller owns one; its collaborators (the reassignment steps) read it.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from pybroker.common.cluster import LiveBroker, PartitionState
from pybroker.common.topic import TopicMetadata
from pybroker.types import TopicPartition


@dataclass
class ControllerContext:
    """What the active controller knows (Kafka's ControllerContext)."""

    epoch: int = 0
    live_brokers: dict[int, LiveBroker] = field(default_factory=dict)
    broker_epochs: dict[int, int] = field(default_factory=dict)
    topics: dict[str, TopicMetadata] = field(default_factory=dict)
    topics_being_deleted: set[str] = field(default_factory=set)
    deletions_started: set[str] = field(default_factory=set)  # StopReplica sent, answers pending
    shutting_down: set[int] = field(default_factory=set)  # brokers in controlled shutdown
    # KIP-112 (Kafka's replicasOnOfflineDirs): per live broker, its replicas whose log dir failed,
    # as it answered LeaderAndIsr with KAFKA_STORAGE_ERROR; forgotten when the broker registers again.
    replicas_on_offline_dirs: dict[int, set[TopicPartition]] = field(default_factory=dict)

    @property
    def eligible_brokers(self) -> set[int]:
        """Brokers that may lead or join an ISR: live and not shutting down (Kafka's
        liveBrokerIds; a shutting-down broker still receives requests)."""
        return set(self.live_brokers) - self.shutting_down

    def is_replica_online(self, broker_id: int, tp: TopicPartition) -> bool:
        """Kafka's isReplicaOnline (shutting-down brokers included): the broker is registered and
        the replica's log dir has not failed."""
        return broker_id in self.live_brokers and tp not in self.replicas_on_offline_dirs.get(broker_id, ())

    def eligible_for(self, tp: TopicPartition) -> set[int]:
        """The brokers whose replica of ``tp`` may lead it or join its ISR: `eligible_brokers`
        without those holding it on a failed log dir (every election's candidates)."""
        return {b for b in self.eligible_brokers if tp not in self.replicas_on_offline_dirs.get(b, ())}

    def state(self, topic: TopicMetadata, index: int, is_new: bool = False) -> PartitionState:
        p = topic.partitions[index]
        return PartitionState(
            TopicPartition(topic.name, index), p.controller_epoch, p.leader, p.leader_epoch, list(p.isr),
            p.partition_epoch, list(p.replicas),
            offline_replicas=[r for r in p.replicas if not self.is_replica_online(r, TopicPartition(topic.name, index))],
            is_new=is_new,
            undeleted_partition_count=topic.undeleted_partition_count,
            leader_epochs_after_creation=dict(topic.leader_epochs_after_creation.get(index, {})),
            leader_epochs_before_deletion=dict(topic.leader_epochs_before_deletion.get(index, {})),
            adding_replicas=list(topic.adding_replicas.get(index, ())),
            removing_replicas=list(topic.removing_replicas.get(index, ())),
        )

    @property
    def topic_ids(self) -> dict[str, uuid.UUID]:
        return {name: topic.topic_id for name, topic in self.topics.items()}

    @property
    def partition_counts(self) -> dict[str, tuple[int, int]]:
        """KIP-253's (initial, undeleted) partition counts by topic."""
        return {name: (t.initial_partition_count, t.undeleted_partition_count) for name, t in self.topics.items()}
