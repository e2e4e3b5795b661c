"""The group leader's partition assignment (classic consumer protocol), KIP-253 style.

Owns `range_assign`: Kafka's range assignor (per topic, the members subscribed to it sorted by
member id, each taking a contiguous range, the first ``count % members`` one partition more)
applied *separately* to a topic's undeleted partitions and to its partitions marked for
deletion (seed §6, research kip-semantics §1.7 #21): marked partitions get no new records, so
counting them with the others would leave a member with few live partitions. The ranges of
the marked partitions start where the extra partitions of the undeleted ones stopped, so the
extras do not pile up on the same members. Deterministic: the same subscriptions and layouts
give the same assignment.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pybroker.client.topic_layout import TopicLayout
from pybroker.types import TopicPartition

PROTOCOL_NAME = "range"  # the name Kafka's RangeAssignor uses; the assignment bytes are the same


def _ranges(partitions: Sequence[int], members: Sequence[str], first: int) -> dict[str, list[int]]:
    """Contiguous ranges of ``partitions`` over ``members``, the extra partitions going to the
    members from index ``first`` on (wrapping)."""
    out: dict[str, list[int]] = {m: [] for m in members}
    if not members:
        return out
    count, extra = divmod(len(partitions), len(members))
    start = 0
    for i in range(len(members)):
        member = members[(first + i) % len(members)]
        take = count + (1 if i < extra else 0)
        out[member] = list(partitions[start:start + take])
        start += take
    return out


def range_assign(
    subscriptions: Mapping[str, Sequence[str]], layouts: Mapping[str, TopicLayout],
) -> dict[str, list[TopicPartition]]:
    """{member id: its partitions} from {member id: subscribed topics} and the topics' layouts
    (topics without a layout are not assigned)."""
    assignment: dict[str, list[TopicPartition]] = {member: [] for member in subscriptions}
    topics = sorted({t for topics in subscriptions.values() for t in topics if t in layouts})
    for topic in topics:
        members = sorted(m for m, subscribed in subscriptions.items() if topic in subscribed)
        layout = layouts[topic]
        undeleted = layout.undeleted_partitions
        marked = layout.marked_partitions
        live = _ranges(undeleted, members, 0)
        draining = _ranges(marked, members, len(undeleted) % len(members) if members else 0)
        for member in members:
            assignment[member] += [TopicPartition(topic, p) for p in sorted(live[member] + draining[member])]
    return assignment
