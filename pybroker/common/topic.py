"""The topic model every layer shares: topics, their ids, partition assignments, leaders, epochs,
configs (Kafka keeps the like in ``clients/.../common/internals/Topic.java``).

Owns the value types the controller, its stores, the ZooKeeper client, the clients and the
brokers' metadata caches share
(`TopicMetadata`, `PartitionAssignment`), the validation of topic names, partition counts and
replication factors with Kafka's error semantics, the names of the internal topics, and a
partition's full assignment while it is being reassigned (KIP-455's `FullReplicaAssignment`:
the replica set with the replicas being added and removed). No I/O.
"""

from __future__ import annotations

import base64
import re
import uuid
from dataclasses import dataclass, field

from pybroker.common.errors import ErrorCode, KafkaError

MAX_TOPIC_NAME_LENGTH = 249
_LEGAL_TOPIC_CHARS = re.compile(r"^[a-zA-Z0-9._-]+$")
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})


class TopicExistsError(KafkaError):
    code = ErrorCode.TOPIC_ALREADY_EXISTS


class InvalidTopicError(KafkaError):
    code = ErrorCode.INVALID_TOPIC_EXCEPTION


class InvalidPartitionsError(KafkaError):
    code = ErrorCode.INVALID_PARTITIONS


class InvalidReplicationFactorError(KafkaError):
    code = ErrorCode.INVALID_REPLICATION_FACTOR


class InvalidReplicaAssignmentError(KafkaError):
    code = ErrorCode.INVALID_REPLICA_ASSIGNMENT


class UnknownTopicError(KafkaError):
    code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def topic_id_to_string(topic_id: uuid.UUID) -> str:
    """Kafka's printed form of a Uuid: URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(topic_id.bytes).rstrip(b"=").decode()


def validate_topic_name(name: str) -> None:
    """Kafka 3.9's ``Topic.validate``, with its texts; raises InvalidTopicError."""
    if not name:
        raise InvalidTopicError("Topic name is invalid: the empty string is not allowed")
    if name in (".", ".."):
        raise InvalidTopicError(f"Topic name is invalid: '{name}' is not allowed")
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        raise InvalidTopicError(
            f"Topic name is invalid: the length of '{name}' is longer than the max allowed length "
            f"{MAX_TOPIC_NAME_LENGTH}"
        )
    if not _LEGAL_TOPIC_CHARS.match(name):
        raise InvalidTopicError(
            f"Topic name is invalid: '{name}' contains one or more characters other than ASCII "
            "alphanumerics, '.', '_' and '-'"
        )


@dataclass
class PartitionAssignment:
    """One partition's replicas and leadership: Kafka's partition state (leader -1: none; the
    partition epoch is the version of the state, bumped by every change of it)."""

    replicas: list[int]
    leader: int
    leader_epoch: int = 0
    isr: list[int] = field(default_factory=list)
    partition_epoch: int = 0
    controller_epoch: int = 0


@dataclass(frozen=True)
class FullReplicaAssignment:
    """A partition's replica set RS and, while it is being reassigned (KIP-455), the replicas being
    added (AR = TRS - ORS) and removed (RR = ORS - TRS): Kafka's controller ``ReplicaAssignment``.
    During a reassignment RS = TRS + ORS (the target replicas first, in their order)."""

    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()

    @property
    def origin_replicas(self) -> tuple[int, ...]:
        """ORS: the replicas before the reassignment."""
        return tuple(r for r in self.replicas if r not in self.adding_replicas)

    @property
    def target_replicas(self) -> tuple[int, ...]:
        """TRS: the replicas once the reassignment completes."""
        return tuple(r for r in self.replicas if r not in self.removing_replicas)

    @property
    def is_being_reassigned(self) -> bool:
        return bool(self.adding_replicas or self.removing_replicas)

    def reassign_to(self, target: list[int] | tuple[int, ...]) -> FullReplicaAssignment:
        """Kafka's ``reassignTo``: RS = (TRS ++ ORS) without duplicates, AR = RS - ORS, RR = RS - TRS
        (a reassignment under way is replaced: its ORS stays the origin)."""
        origin = self.origin_replicas
        full = tuple(dict.fromkeys([*target, *origin]))
        return FullReplicaAssignment(
            full, tuple(r for r in full if r not in origin), tuple(r for r in full if r not in target)
        )


@dataclass
class TopicMetadata:
    """A topic: its id, its partitions in index order, and its config overrides.

    KIP-253's counts: ``initial_partition_count``, the partitions it was created with, and
    ``undeleted_partition_count``, those producers may write to (the partitions above it are
    marked for deletion). Keys go by linear hashing from the first over the second; both are
    the partition count for a topic whose count never changed (0 given: that count).
    ``leader_epochs_after_creation``: for each partition added by an expansion, the leader epoch
    every partition that existed then had just before the expansion bumped it (the seed's
    ``leaderEpochAfterCreation``: a consumer of the new partition waits until the partition it
    splits from is consumed past the end of that epoch). ``leader_epochs_before_deletion``: for
    each partition marked for deletion by a shrink, the leader epoch every surviving partition
    had just before the shrink bumped it (the seed's ``leaderEpochBeforeDeletion``: records of
    later epochs in a survivor wait until the marked partitions tied to it are drained).
    ``adding_replicas`` / ``removing_replicas``: KIP-455's, by partition, only for partitions
    being reassigned (as the topic znode keeps them); their ``replicas`` are then the full RS."""

    name: str
    topic_id: uuid.UUID
    partitions: list[PartitionAssignment]
    configs: dict[str, str] = field(default_factory=dict)
    initial_partition_count: int = 0
    undeleted_partition_count: int = 0
    leader_epochs_after_creation: dict[int, dict[int, int]] = field(default_factory=dict)
    leader_epochs_before_deletion: dict[int, dict[int, int]] = field(default_factory=dict)
    adding_replicas: dict[int, list[int]] = field(default_factory=dict)
    removing_replicas: dict[int, list[int]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.initial_partition_count = self.initial_partition_count or len(self.partitions)
        self.undeleted_partition_count = self.undeleted_partition_count or len(self.partitions)

    @property
    def marked_for_deletion(self) -> range:
        """The partitions a shrink marked for deletion, not yet removed."""
        return range(self.undeleted_partition_count, len(self.partitions))

    @property
    def is_internal(self) -> bool:
        return self.name in INTERNAL_TOPICS

    def full_assignment(self, index: int) -> FullReplicaAssignment:
        """Partition ``index``'s replicas with its reassignment, if one is under way."""
        return FullReplicaAssignment(
            tuple(self.partitions[index].replicas), tuple(self.adding_replicas.get(index, ())),
            tuple(self.removing_replicas.get(index, ())),
        )

    def set_full_assignment(self, index: int, assignment: FullReplicaAssignment) -> None:
        """Partition ``index`` takes ``assignment`` (its replicas, and the reassignment maps)."""
        self.partitions[index].replicas = list(assignment.replicas)
        for target, value in ((self.adding_replicas, assignment.adding_replicas),
                              (self.removing_replicas, assignment.removing_replicas)):
            if value:
                target[index] = list(value)
            else:
                target.pop(index, None)

    @property
    def partitions_being_reassigned(self) -> list[int]:
        return sorted(set(self.adding_replicas) | set(self.removing_replicas))
