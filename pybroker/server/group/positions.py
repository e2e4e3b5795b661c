"""What members of a consumer group have delivered, shared for KIP-253's ordered delivery.

Owns, per group, the state behind ConsumerGroupPosition: the positions members reported for
partitions they own (the offset of the next record they will deliver), and which partitions each
member waits on (a consumer of a partition added by an expansion waits on the partition it split
from; a consumer of a survivor of a shrink waits on the marked partitions that drain into it).

The group's position of a partition is the larger of the position its owner reported in the
current generation and the group's committed offset, -1 when there is neither. Positions live
only in the coordinator's memory (research kip-semantics §1.7 #18): a new generation or a
coordinator failover starts with none, and owners are asked again (``PositionRequests``) until
they report, while waiting members read -1 as "still blocked". A report for a partition that is
not in the member's assignment is refused with INVALID_REQUEST and changes nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from pybroker.common.errors import ErrorCode
from pybroker.types import TopicPartition

UNKNOWN_POSITION = -1


@dataclass
class PositionsAnswer:
    """A member's answer: the positions it asked for, the partitions it owns that others wait
    on, and the errors of its reports (only those that were refused)."""

    group_positions: dict[TopicPartition, int] = field(default_factory=dict)
    position_requests: list[TopicPartition] = field(default_factory=list)
    report_errors: dict[TopicPartition, ErrorCode] = field(default_factory=dict)


@dataclass
class GroupPositions:
    """One group's shared positions, for one generation."""

    generation_id: int
    owners: Mapping[TopicPartition, str]  # the generation's assignment: partition -> member id
    reported: dict[TopicPartition, int] = field(default_factory=dict)
    interests: dict[str, set[TopicPartition]] = field(default_factory=dict)  # member id -> partitions

    def exchange(
        self,
        member_id: str,
        reports: Iterable[tuple[TopicPartition, int]],
        interested: Iterable[TopicPartition],
        committed: Mapping[TopicPartition, int],
    ) -> PositionsAnswer:
        """Record ``member_id``'s reports and what it waits on, and answer it; ``committed``
        gives the group's committed offsets."""
        answer = PositionsAnswer()
        for tp, position in reports:
            if self.owners.get(tp) != member_id or position < 0:
                answer.report_errors[tp] = ErrorCode.INVALID_REQUEST
            else:
                self.reported[tp] = max(position, self.reported.get(tp, UNKNOWN_POSITION))
        self.interests[member_id] = set(interested)
        for tp in self.interests[member_id]:
            answer.group_positions[tp] = max(self.reported.get(tp, UNKNOWN_POSITION),
                                             committed.get(tp, UNKNOWN_POSITION))
        waited_on = set().union(*(wanted for member, wanted in self.interests.items() if member != member_id))
        answer.position_requests = sorted(tp for tp in waited_on if self.owners.get(tp) == member_id)
        return answer
