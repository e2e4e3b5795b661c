"""Partition leader election: who leads a partition next, with which ISR and which epochs.

Owns the controller's decisions about one partition's leadership, as Kafka's ZooKeeper-mode
controller makes them (``Election``, ``PartitionLeaderElectionAlgorithms``,
``doRemoveReplicasFromIsr``, ``checkAndTriggerAutoLeaderRebalance``, the ElectLeaders API):

- the ``LeaderAndIsr`` value kept for each partition, and its epoch rules: every election and
  every removal of a replica from an ISR bumps the leader epoch (an ISR change the leader asks for
  through AlterPartition does not); the partition epoch is the version of the stored state, so
  only a write to the store moves it;
- the four election strategies (offline, reassign, preferred, controlled shutdown), each a choice
  among the assigned replicas in assignment order, and the brokers to tell;
- taking a replica out of an ISR, which never empties it;
- the leader imbalance per broker and the partitions an automatic rebalance moves;
- the per-partition outcome of an ElectLeaders request.

Pure functions over plain values: the caller reads the current state, applies the result, writes
it conditionally on the partition epoch and sends the requests.
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TypeVar

from pybroker.common.errors import ErrorCode

NO_LEADER = -1
"""The leader id of a partition without a leader."""
LEADER_DURING_DELETE = -2
"""The leader id sent for a partition whose topic is being deleted."""
NO_EPOCH = -1
EPOCH_DURING_DELETE = -2
INITIAL_LEADER_EPOCH = 0
INITIAL_PARTITION_EPOCH = 0
DEFAULT_LEADER_IMBALANCE_PERCENTAGE = 10
"""``leader.imbalance.per.broker.percentage``."""

P = TypeVar("P", bound=Hashable)


class LeaderRecoveryState(enum.IntEnum):
    """Whether the leader came from an unclean election and is still recovering (KIP-704)."""

    RECOVERED = 0
    RECOVERING = 1


class ElectionType(enum.IntEnum):
    """The ElectLeaders request's election type."""

    PREFERRED = 0
    UNCLEAN = 1


@dataclass(frozen=True)
class LeaderAndIsr:
    """One partition's leadership as the controller stores it."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    leader_recovery_state: LeaderRecoveryState = LeaderRecoveryState.RECOVERED
    partition_epoch: int = INITIAL_PARTITION_EPOCH

    def __post_init__(self) -> None:
        object.__setattr__(self, "isr", tuple(self.isr))
        object.__setattr__(
            self, "leader_recovery_state", LeaderRecoveryState(self.leader_recovery_state)
        )

    @classmethod
    def initial(cls, leader: int, isr: Iterable[int]) -> LeaderAndIsr:
        """A new partition's state: both epochs at 0, recovered."""
        return cls(leader, INITIAL_LEADER_EPOCH, tuple(isr))

    @property
    def has_leader(self) -> bool:
        return self.leader != NO_LEADER

    def new_leader_and_isr(self, leader: int, isr: Iterable[int]) -> LeaderAndIsr:
        """``leader`` and ``isr`` at the next leader epoch; recovery state and partition epoch kept."""
        return replace(self, leader=leader, leader_epoch=self.leader_epoch + 1, isr=tuple(isr))

    def new_recovering_leader_and_isr(self, leader: int, isr: Iterable[int]) -> LeaderAndIsr:
        """As ``new_leader_and_isr``, for a leader elected uncleanly: RECOVERING."""
        return replace(
            self.new_leader_and_isr(leader, isr),
            leader_recovery_state=LeaderRecoveryState.RECOVERING,
        )

    def new_leader(self, leader: int) -> LeaderAndIsr:
        """``leader`` at the next leader epoch, the ISR unchanged."""
        return self.new_leader_and_isr(leader, self.isr)

    def new_epoch(self) -> LeaderAndIsr:
        """The same leader and ISR at the next leader epoch."""
        return self.new_leader_and_isr(self.leader, self.isr)

    def with_partition_epoch(self, partition_epoch: int) -> LeaderAndIsr:
        """The state as stored at ``partition_epoch`` (the store's version after a write)."""
        return replace(self, partition_epoch=partition_epoch)


@dataclass(frozen=True)
class ElectionResult:
    """What an election decided for one partition.

    ``leader_and_isr`` is the state to write, or None when no replica is eligible (nothing to
    write, the partition keeps its state). ``recipients`` are the brokers to send LeaderAndIsr to
    once it is written. ``unclean`` is True when the leader came from outside the ISR.
    """

    leader_and_isr: LeaderAndIsr | None
    recipients: tuple[int, ...]
    unclean: bool = False


# --- the four strategies ---------------------------------------------------------------------


def offline_partition_leader_election(
    assignment: Sequence[int],
    isr: Sequence[int],
    live_replicas: Collection[int],
    unclean_enabled: bool,
) -> tuple[int | None, tuple[int, ...], bool]:
    """(leader, new ISR, unclean) for a partition whose leader is gone, or that has none.

    The leader is the first assigned replica that is live and in the ISR; the new ISR is then the
    live part of the ISR. Failing that, with unclean election enabled, the first live assigned
    replica leads alone (unclean). Otherwise no leader, and the ISR is returned unchanged.
    """
    for replica in assignment:
        if replica in live_replicas and replica in isr:
            return replica, tuple(r for r in isr if r in live_replicas), False
    if unclean_enabled:
        for replica in assignment:
            if replica in live_replicas:
                return replica, (replica,), True
    return None, tuple(isr), False


def reassign_partition_leader_election(
    target_replicas: Sequence[int], isr: Sequence[int], live_replicas: Collection[int]
) -> int | None:
    """The first target replica that is live and in the ISR (the ISR stays as it is)."""
    return next((r for r in target_replicas if r in live_replicas and r in isr), None)


def preferred_replica_partition_leader_election(
    assignment: Sequence[int], isr: Sequence[int], live_replicas: Collection[int]
) -> int | None:
    """The preferred replica (the first assigned), if it is live and in the ISR; else None."""
    if assignment and assignment[0] in live_replicas and assignment[0] in isr:
        return assignment[0]
    return None


def controlled_shutdown_partition_leader_election(
    assignment: Sequence[int],
    isr: Sequence[int],
    live_replicas: Collection[int],
    shutting_down: Collection[int],
) -> tuple[int | None, tuple[int, ...]]:
    """(leader, new ISR) for a partition led by a broker that is shutting down.

    The leader is the first assigned replica that is live, in the ISR and not shutting down (a
    shutting-down broker may be in ``live_replicas``: it still counts as live here). The new ISR
    drops the shutting-down brokers. No such replica: no leader, and the ISR is returned unchanged.
    """
    for replica in assignment:
        if replica in live_replicas and replica in isr and replica not in shutting_down:
            return replica, tuple(r for r in isr if r not in shutting_down)
    return None, tuple(isr)


# --- elections over the stored state ---------------------------------------------------------


def initial_leader_and_isr(
    assignment: Sequence[int], live_brokers: Collection[int]
) -> LeaderAndIsr | None:
    """A new partition going online: the first live replica leads, every live replica is in the
    ISR, both epochs 0. None when no replica is live (the partition stays new)."""
    live = [r for r in assignment if r in live_brokers]
    return LeaderAndIsr.initial(live[0], live) if live else None


def elect_offline(
    current: LeaderAndIsr,
    assignment: Sequence[int],
    live_brokers: Collection[int],
    unclean_enabled: bool,
    leader_recovery_supported: bool = False,
) -> ElectionResult:
    """The offline strategy applied to ``current``: told to the live replicas.

    An unclean leader is marked RECOVERING when ``leader_recovery_supported`` (IBP 3.2 and later);
    otherwise the recovery state is kept.
    """
    recipients = tuple(r for r in assignment if r in live_brokers)
    leader, isr, unclean = offline_partition_leader_election(
        assignment, current.isr, live_brokers, unclean_enabled
    )
    if leader is None:
        return ElectionResult(None, recipients)
    if unclean and leader_recovery_supported:
        return ElectionResult(current.new_recovering_leader_and_isr(leader, isr), recipients, True)
    return ElectionResult(current.new_leader_and_isr(leader, isr), recipients, unclean)


def elect_reassign(
    current: LeaderAndIsr, target_replicas: Sequence[int], live_brokers: Collection[int]
) -> ElectionResult:
    """The reassign strategy applied to ``current``: ISR kept, told to every target replica."""
    leader = reassign_partition_leader_election(target_replicas, current.isr, live_brokers)
    new = current.new_leader(leader) if leader is not None else None
    return ElectionResult(new, tuple(target_replicas))


def elect_preferred(
    current: LeaderAndIsr, assignment: Sequence[int], live_brokers: Collection[int]
) -> ElectionResult:
    """The preferred strategy applied to ``current``: ISR kept, told to every assigned replica."""
    leader = preferred_replica_partition_leader_election(assignment, current.isr, live_brokers)
    new = current.new_leader(leader) if leader is not None else None
    return ElectionResult(new, tuple(assignment))


def elect_controlled_shutdown(
    current: LeaderAndIsr,
    assignment: Sequence[int],
    live_brokers: Collection[int],
    shutting_down: Collection[int],
) -> ElectionResult:
    """The controlled-shutdown strategy applied to ``current``: the shutting-down brokers leave
    the ISR; told to the replicas that are live or shutting down."""
    live_or_shutting_down = set(live_brokers) | set(shutting_down)
    recipients = tuple(r for r in assignment if r in live_or_shutting_down)
    leader, isr = controlled_shutdown_partition_leader_election(
        assignment, current.isr, live_or_shutting_down, shutting_down
    )
    new = current.new_leader_and_isr(leader, isr) if leader is not None else None
    return ElectionResult(new, recipients)


def remove_replica_from_isr(current: LeaderAndIsr, replica: int) -> LeaderAndIsr | None:
    """``current`` after ``replica`` goes offline, or None when it is not in the ISR (no change).

    The leader becomes NO_LEADER if it was ``replica``; the leader epoch goes up by one. The ISR
    never becomes empty: when ``replica`` is its only member it stays, so the partition waits for
    that broker (or an unclean election).
    """
    if replica not in current.isr:
        return None
    leader = NO_LEADER if replica == current.leader else current.leader
    isr = current.isr if len(current.isr) == 1 else tuple(r for r in current.isr if r != replica)
    return current.new_leader_and_isr(leader, isr)


# --- automatic rebalance ---------------------------------------------------------------------


def leader_imbalance(
    assignments: Mapping[P, Sequence[int]], leaders: Mapping[P, int]
) -> dict[int, float]:
    """Each preferred broker's leader imbalance ratio: among the partitions whose first replica it
    is, the share that it does not lead.

    A partition missing from ``leaders`` (no state yet) counts in the total but not as
    imbalanced; one without a leader counts as imbalanced. Leave out topics being deleted.
    """
    totals: dict[int, int] = {}
    off: dict[int, int] = {}
    for partition, replicas in assignments.items():
        if not replicas:
            continue
        preferred = replicas[0]
        totals[preferred] = totals.get(preferred, 0) + 1
        leader = leaders.get(partition)
        if leader is not None and leader != preferred:
            off[preferred] = off.get(preferred, 0) + 1
    return {broker: off.get(broker, 0) / total for broker, total in totals.items()}


def partitions_to_rebalance(
    assignments: Mapping[P, Sequence[int]],
    states: Mapping[P, LeaderAndIsr],
    live_brokers: Collection[int],
    imbalance_percentage: int = DEFAULT_LEADER_IMBALANCE_PERCENTAGE,
) -> list[P]:
    """The partitions an automatic preferred-leader rebalance elects, in ``assignments`` order.

    For each broker whose imbalance ratio is above ``imbalance_percentage`` / 100, its partitions
    not led by it whose preferred replica can lead (live and in the ISR). Leave out topics being
    deleted.
    """
    ratios = leader_imbalance(assignments, {p: s.leader for p, s in states.items()})
    threshold = imbalance_percentage / 100
    out: list[P] = []
    for partition, replicas in assignments.items():
        state = states.get(partition)
        if not replicas or state is None or state.leader == replicas[0]:
            continue
        if ratios[replicas[0]] > threshold and preferred_replica_partition_leader_election(
            replicas, state.isr, live_brokers
        ) is not None:
            out.append(partition)
    return out


# --- ElectLeaders ----------------------------------------------------------------------------


@dataclass(frozen=True)
class ElectLeadersOutcome:
    """One partition's answer to ElectLeaders. ``election`` (when ``error`` is NONE) holds the
    state to write and the brokers to tell."""

    error: ErrorCode
    message: str | None = None
    election: ElectionResult | None = None


def elect_leaders_outcome(
    election_type: ElectionType,
    assignment: Sequence[int] | None,
    current: LeaderAndIsr | None,
    live_brokers: Collection[int],
    *,
    topic_being_deleted: bool = False,
    partition_name: str = "",
    leader_recovery_supported: bool = False,
) -> ElectLeadersOutcome:
    """Classify and run an ElectLeaders election for one partition.

    ``assignment`` None means the partition does not exist: UNKNOWN_TOPIC_OR_PARTITION. A topic
    being deleted gives INVALID_TOPIC_EXCEPTION. ELECTION_NOT_NEEDED when the preferred replica
    already leads (PREFERRED) or a live leader exists (UNCLEAN). Otherwise the preferred strategy,
    or the offline strategy with unclean election allowed; no eligible replica gives
    PREFERRED_LEADER_NOT_AVAILABLE or ELIGIBLE_LEADERS_NOT_AVAILABLE.
    """
    preferred = election_type is ElectionType.PREFERRED
    unavailable = (
        ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
        if preferred
        else ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
    )
    if assignment is None:
        return ElectLeadersOutcome(
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist."
        )
    if topic_being_deleted:
        return ElectLeadersOutcome(ErrorCode.INVALID_TOPIC_EXCEPTION, "The topic is being deleted")
    if current is None:
        return ElectLeadersOutcome(
            unavailable, f"LeaderAndIsr information doesn't exist for partition {partition_name}"
        )
    if preferred:
        if assignment and current.leader == assignment[0]:
            return ElectLeadersOutcome(ErrorCode.ELECTION_NOT_NEEDED)
        result = elect_preferred(current, assignment, live_brokers)
        strategy = "PreferredReplicaPartitionLeaderElectionStrategy"
    else:
        if current.leader != NO_LEADER and current.leader in live_brokers:
            return ElectLeadersOutcome(ErrorCode.ELECTION_NOT_NEEDED)
        result = elect_offline(
            current, assignment, live_brokers, True, leader_recovery_supported
        )
        strategy = "OfflinePartitionLeaderElectionStrategy(true)"
    if result.leader_and_isr is None:
        return ElectLeadersOutcome(
            unavailable,
            f"Failed to elect leader for partition {partition_name} under strategy {strategy}",
        )
    return ElectLeadersOutcome(ErrorCode.NONE, None, result)
