"""Replica assignment: which brokers hold each new partition's replicas.

Owns Kafka's placement rules (``AdminUtils.assignReplicasToBrokers`` and
``AdminZkClient.createNewPartitionsAssignment``): the first replica of each partition goes round
robin over the brokers sorted by id, from a start index; the followers follow it at a shift that
grows by one each time the round robin wraps, so that the partitions a broker leads have their
followers spread over the other brokers. When every broker has a rack, the brokers are first
interleaved rack by rack, and followers prefer racks (then brokers) that hold no replica of the
partition yet. Plain values in, plain values out: the caller brings the live brokers and writes
the result wherever assignments live.

The start index and the follower shift are random unless fixed (two independent draws, as in
Kafka); pass a seeded ``random.Random`` for a reproducible result.
"""

from __future__ import annotations

import enum
import random
from collections.abc import Iterable, Mapping, Sequence

from pybroker.common.topic import InvalidPartitionsError, InvalidReplicationFactorError

__all__ = [
    "AdminOperationError",
    "RackAwareMode",
    "assign_replicas_to_brokers",
    "assignment_for_new_partitions",
    "rack_alternated_broker_list",
    "racks_for_assignment",
]


class AdminOperationError(Exception):
    """Kafka's AdminOperationException: not an API error, so a response reports it as
    UNKNOWN_SERVER_ERROR (-1)."""


class RackAwareMode(enum.Enum):
    """How rack information takes part in an assignment (Kafka's ``RackAwareMode``)."""

    DISABLED = "disabled"  # racks are ignored
    ENFORCED = "enforced"  # every broker has a rack or none has; a mix is an error
    SAFE = "safe"  # racks are used only when every broker has one


def racks_for_assignment(
    racks: Mapping[int, str | None], mode: RackAwareMode = RackAwareMode.ENFORCED
) -> dict[int, str]:
    """The racks an assignment should use, given each broker's rack (None for none) and ``mode``.

    Follows ``AdminZkClient.getBrokerMetadatas``: an empty result means a rack-unaware
    assignment. ENFORCED raises AdminOperationError when only some brokers have a rack.
    """
    with_rack = {b: r for b, r in racks.items() if r is not None}
    partial = 0 < len(with_rack) < len(racks)
    if mode is RackAwareMode.ENFORCED and partial:
        raise AdminOperationError(
            "Not all brokers have rack information. Add --disable-rack-aware in command line "
            "to make replica assignment without rack information."
        )
    if mode is RackAwareMode.DISABLED or partial:
        return {}
    return with_rack


def rack_alternated_broker_list(racks: Mapping[int, str]) -> list[int]:
    """The brokers interleaved by rack: racks in name order, each rack's brokers in id order,
    one broker of each rack in turn (racks that run out are skipped).

    For racks {0: r1, 1: r3, 2: r3, 3: r2, 4: r2, 5: r1}: [0, 3, 1, 5, 4, 2].
    """
    by_rack: dict[str, list[int]] = {}
    for broker in sorted(racks):
        by_rack.setdefault(racks[broker], []).append(broker)
    columns = [by_rack[rack] for rack in sorted(by_rack)]
    depth = max((len(c) for c in columns), default=0)
    return [c[i] for i in range(depth) for c in columns if i < len(c)]


def _follower_index(first: int, shift: int, j: int, n: int) -> int:
    """Index of a follower: ``first`` moved on by 1 + (shift + j) mod (n - 1), wrapping at n.
    The step is never 0 nor n, so a follower is never the first replica."""
    return (first + 1 + (shift + j) % (n - 1)) % n


def assign_replicas_to_brokers(
    broker_ids: Iterable[int],
    num_partitions: int,
    replication_factor: int,
    fixed_start_index: int = -1,
    start_partition_id: int = -1,
    rng: random.Random | None = None,
    racks: Mapping[int, str] | None = None,
) -> dict[int, list[int]]:
    """Partition id -> replica list (the first replica is the preferred leader).

    ``broker_ids`` is sorted (and deduplicated) first. ``fixed_start_index`` < 0 draws the start
    index and, independently, the initial follower shift from ``rng`` (a fresh ``Random`` when
    None); otherwise both equal it. Partition ids start at max(0, ``start_partition_id``).
    ``racks`` maps broker id -> rack; when given and non-empty every broker must have a rack
    (AdminOperationError otherwise), and the rack-aware placement is used.

    Raises InvalidPartitionsError (37) for ``num_partitions`` <= 0 and
    InvalidReplicationFactorError (38) for ``replication_factor`` <= 0 or above the broker count.
    """
    brokers = sorted(set(broker_ids))
    if num_partitions <= 0:
        raise InvalidPartitionsError("Number of partitions must be larger than 0.")
    if replication_factor <= 0:
        raise InvalidReplicationFactorError("Replication factor must be larger than 0.")
    if replication_factor > len(brokers):
        raise InvalidReplicationFactorError(
            f"Replication factor: {replication_factor} larger than available brokers: "
            f"{len(brokers)}."
        )
    rng = rng if rng is not None else random.Random()
    if not racks:
        return _assign_rack_unaware(
            brokers, num_partitions, replication_factor, fixed_start_index, start_partition_id, rng
        )
    if any(b not in racks for b in brokers):
        raise AdminOperationError(
            "Not all brokers have rack information for replica rack aware assignment."
        )
    return _assign_rack_aware(
        {b: racks[b] for b in brokers},
        num_partitions,
        replication_factor,
        fixed_start_index,
        start_partition_id,
        rng,
    )


def _start_and_shift(n: int, fixed_start_index: int, rng: random.Random) -> tuple[int, int]:
    if fixed_start_index >= 0:
        return fixed_start_index, fixed_start_index
    start = rng.randrange(n)
    return start, rng.randrange(n)


def _assign_rack_unaware(
    brokers: list[int],
    num_partitions: int,
    replication_factor: int,
    fixed_start_index: int,
    start_partition_id: int,
    rng: random.Random,
) -> dict[int, list[int]]:
    n = len(brokers)
    start, shift = _start_and_shift(n, fixed_start_index, rng)
    out: dict[int, list[int]] = {}
    first_id = max(0, start_partition_id)
    for partition in range(first_id, first_id + num_partitions):
        if partition > 0 and partition % n == 0:
            shift += 1
        first = (partition + start) % n
        out[partition] = [brokers[first]] + [
            brokers[_follower_index(first, shift, j, n)] for j in range(replication_factor - 1)
        ]
    return out


def _assign_rack_aware(
    racks: dict[int, str],
    num_partitions: int,
    replication_factor: int,
    fixed_start_index: int,
    start_partition_id: int,
    rng: random.Random,
) -> dict[int, list[int]]:
    arranged = rack_alternated_broker_list(racks)
    n = len(arranged)
    num_racks = len(set(racks.values()))
    start, shift = _start_and_shift(n, fixed_start_index, rng)
    out: dict[int, list[int]] = {}
    first_id = max(0, start_partition_id)
    for partition in range(first_id, first_id + num_partitions):
        if partition > 0 and partition % n == 0:
            shift += 1
        first = (partition + start) % n
        leader = arranged[first]
        replicas = [leader]
        used_racks = {racks[leader]}
        used_brokers = {leader}
        k = 0
        while len(replicas) < replication_factor:
            # Walk the followers' sequence; take a broker only if its rack is still empty (or all
            # racks have a replica) and it holds no replica yet (or every broker does).
            broker = arranged[_follower_index(first, shift * num_racks, k, n)]
            k += 1
            rack = racks[broker]
            if (rack not in used_racks or len(used_racks) == num_racks) and (
                broker not in used_brokers or len(used_brokers) == n
            ):
                replicas.append(broker)
                used_racks.add(rack)
                used_brokers.add(broker)
        out[partition] = replicas
    return out


def assignment_for_new_partitions(
    existing: Mapping[int, Sequence[int]],
    broker_ids: Iterable[int],
    new_count: int,
    *,
    topic: str = "",
    racks: Mapping[int, str] | None = None,
) -> dict[int, list[int]]:
    """The assignment of the partitions that grow a topic from len(``existing``) to ``new_count``.

    Only the new partitions are returned (ids len(existing) .. new_count-1). Their replication
    factor is partition 0's. Placement continues the topic's round robin: the start index (also
    the initial follower shift) is the position, in the id-sorted brokers, of the first broker
    whose id is >= partition 0's first replica (0 when there is none).

    Raises InvalidPartitionsError (37) when ``new_count`` is not above the current count, and
    AdminOperationError when partition 0 is missing.
    """
    if 0 not in existing:
        raise AdminOperationError(
            f"Unexpected existing replica assignment for topic '{topic}', partition id 0 is "
            f"missing. Assignment: {dict(existing)}"
        )
    current = len(existing)
    to_add = new_count - current
    if to_add <= 0:
        raise InvalidPartitionsError(
            f"The number of partitions for a topic can only be increased. Topic {topic} currently "
            f"has {current} partitions, {new_count} would not be an increase."
        )
    brokers = sorted(set(broker_ids))
    partition0 = existing[0]
    start = next((i for i, b in enumerate(brokers) if b >= partition0[0]), 0)
    return assign_replicas_to_brokers(
        brokers, to_add, len(partition0), fixed_start_index=start, start_partition_id=current,
        racks=racks,
    )
