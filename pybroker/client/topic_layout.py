"""A topic's partitions as a KIP-253 client sees them: leaders, counts and the partition function.

Owns `TopicLayout`: every partition of a topic with its leader, the topic's
``initial_partition_count`` (the count it was created with, the base of linear hashing) and
``undeleted_partition_count`` (the partitions producers write to; those at or above it are
*marked for deletion*: drained, then removed). A broker that does not know the counts (-1, or
any Kafka broker) gets ``initial = undeleted = number of partitions``, which makes the partition
function Kafka's ``murmur2 % n``.

The partition function itself is native (``_native.LinearHashing``); this module only holds one
per layout.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from pybroker._native import LinearHashing
from pybroker.client.node import Node


@dataclass(frozen=True)
class TopicLayout:
    """One topic's partitions (marked ones included) and KIP-253 counts, from one Metadata answer."""

    name: str
    leaders: dict[int, Node | None]  # partition -> its leader (None while it has none)
    initial_partition_count: int
    undeleted_partition_count: int
    leader_epochs: dict[int, int] = field(default_factory=dict)  # partition -> leader epoch (-1 unknown)

    @classmethod
    def from_metadata(
        cls, name: str, leaders: dict[int, Node | None], initial: int, undeleted: int,
        leader_epochs: dict[int, int] | None = None,
    ) -> TopicLayout:
        """Normalise the broker's counts: -1 (unknown) or out-of-range values mean "no change
        ever happened", initial = undeleted = number of partitions."""
        count = len(leaders)
        if not 1 <= undeleted <= count:
            undeleted = count
        if not 1 <= initial <= undeleted:
            initial = undeleted if initial < 1 else min(initial, undeleted)
        return cls(name, dict(sorted(leaders.items())), initial, undeleted, dict(leader_epochs or {}))

    @property
    def partition_count(self) -> int:
        """Every partition, marked ones included."""
        return len(self.leaders)

    @property
    def counts(self) -> tuple[int, int, int]:
        """(initial, undeleted, all partitions): what a rebalance or a gate depends on."""
        return self.initial_partition_count, self.undeleted_partition_count, self.partition_count

    @property
    def undeleted_partitions(self) -> list[int]:
        return [p for p in self.leaders if p < self.undeleted_partition_count]

    @property
    def marked_partitions(self) -> list[int]:
        """Partitions marked for deletion: no producer writes to them any more."""
        return [p for p in self.leaders if p >= self.undeleted_partition_count]

    @property
    def changed(self) -> bool:
        """True when the topic's partition count ever changed in a way consumers gate on: it grew
        past its initial count, or some partitions are marked for deletion."""
        return (self.initial_partition_count != self.undeleted_partition_count
                or self.partition_count != self.undeleted_partition_count)

    @cached_property
    def partitioner(self) -> LinearHashing:
        """Linear hashing over (initial, undeleted): the partition of a keyed record."""
        return LinearHashing(self.initial_partition_count, self.undeleted_partition_count)

    def partition_for_key(self, key: bytes) -> int:
        return self.partitioner.partition_for_key(key)
