"""Leader election: the four strategies, LeaderAndIsr epochs, ISR removal, the leader imbalance
and ElectLeaders outcomes (cases from Kafka's PartitionLeaderElectionAlgorithmsTest,
LeaderAndIsrTest, PartitionStateMachineTest and ReplicaStateMachineTest, and research/cluster.md
§2.4 and §2.10)."""

import dataclasses

import pytest

from pybroker.common.errors import ErrorCode
from pybroker.controller.election import (
    NO_LEADER,
    ElectionResult,
    ElectionType,
    ElectLeadersOutcome,
    LeaderAndIsr,
    LeaderRecoveryState,
    controlled_shutdown_partition_leader_election,
    elect_controlled_shutdown,
    elect_leaders_outcome,
    elect_offline,
    elect_preferred,
    elect_reassign,
    initial_leader_and_isr,
    leader_imbalance,
    offline_partition_leader_election,
    partitions_to_rebalance,
    preferred_replica_partition_leader_election,
    reassign_partition_leader_election,
    remove_replica_from_isr,
)

RECOVERING = LeaderRecoveryState.RECOVERING

# --- PartitionLeaderElectionAlgorithmsTest, as data ------------------------------------------

# (assignment, isr, live, unclean enabled, expected leader)
OFFLINE_CASES = [
    pytest.param([2, 4], [2, 4], {4}, False, 4, id="leader-from-live-isr"),
    pytest.param([2, 4], [2], {4}, False, None, id="last-isr-offline-unclean-disabled"),
    pytest.param([2, 4], [2], {4}, True, 4, id="last-isr-offline-unclean-enabled"),
]


@pytest.mark.parametrize("assignment,isr,live,unclean,leader", OFFLINE_CASES)
def test_offline_algorithm(assignment, isr, live, unclean, leader):
    assert offline_partition_leader_election(assignment, isr, live, unclean)[0] == leader


# (target replicas, isr, live, expected leader)
REASSIGN_CASES = [
    pytest.param([2, 4], [2, 4], {4}, 4, id="leader-from-live-isr"),
    pytest.param([2, 4], [2], set(), None, id="no-live-isr"),
    pytest.param([2, 4], [], {2}, None, id="empty-isr"),
]


@pytest.mark.parametrize("targets,isr,live,leader", REASSIGN_CASES)
def test_reassign_algorithm(targets, isr, live, leader):
    assert reassign_partition_leader_election(targets, isr, live) == leader


# (assignment, isr, live, expected leader)
PREFERRED_CASES = [
    pytest.param([2, 4], [2, 4], {2, 4}, 2, id="preferred-live-in-isr"),
    pytest.param([2, 4], [2], set(), None, id="preferred-in-isr-not-live"),
    pytest.param([2, 4], [4], {2, 4}, None, id="preferred-not-in-isr-live"),
    pytest.param([2, 4], [], set(), None, id="preferred-not-in-isr-not-live"),
    pytest.param([], [], set(), None, id="no-replicas"),
]


@pytest.mark.parametrize("assignment,isr,live,leader", PREFERRED_CASES)
def test_preferred_algorithm(assignment, isr, live, leader):
    assert preferred_replica_partition_leader_election(assignment, isr, live) == leader


# (assignment, isr, live, shutting down, expected leader)
CONTROLLED_SHUTDOWN_CASES = [
    pytest.param([2, 4], [2, 4], {2, 4}, {2}, 4, id="other-isr-member"),
    pytest.param([2, 4], [2], {2, 4}, {2}, None, id="last-isr-shutting-down"),
    pytest.param([2, 4], [2, 4], {2, 4}, {2, 4}, None, id="all-isr-shutting-down"),
]


@pytest.mark.parametrize("assignment,isr,live,shutting_down,leader", CONTROLLED_SHUTDOWN_CASES)
def test_controlled_shutdown_algorithm(assignment, isr, live, shutting_down, leader):
    assert controlled_shutdown_partition_leader_election(assignment, isr, live, shutting_down)[0] == leader


# --- the strategies' rows in cluster.md §2.4 --------------------------------------------------


def test_offline_row():
    # first replica in assignment order that is live and in the ISR, not the first in ISR order
    assert offline_partition_leader_election([3, 1, 2], [2, 1, 3], {1, 2}, False) == (1, (2, 1), False)
    # the new ISR is ISR ∩ live, in ISR order
    assert offline_partition_leader_election([1, 2, 3], [3, 2, 1], {1, 3}, False) == (1, (3, 1), False)
    # a live ISR member wins over unclean election even when it is enabled
    assert offline_partition_leader_election([1, 2, 3], [3], {1, 3}, True) == (3, (3,), False)


def test_offline_unclean():
    # unclean: the first live replica in assignment order, alone in the ISR
    assert offline_partition_leader_election([1, 2, 3], [1], {3, 2}, True) == (2, (2,), True)
    # disabled: no leader, the ISR as it was
    assert offline_partition_leader_election([1, 2, 3], [1], {3, 2}, False) == (None, (1,), False)
    # nothing live at all
    assert offline_partition_leader_election([1, 2], [1], set(), True) == (None, (1,), False)
    # a live replica outside the assignment is never chosen
    assert offline_partition_leader_election([1, 2], [1], {9}, True) == (None, (1,), False)


def test_reassign_row():
    # the first *target* replica that is live and in the ISR
    assert reassign_partition_leader_election([4, 5, 1], [1, 5, 4], {1, 4, 5}) == 4
    assert reassign_partition_leader_election([4, 5, 1], [1, 5], {1, 4, 5}) == 5
    current = LeaderAndIsr(1, 7, (1, 2, 4), partition_epoch=11)
    result = elect_reassign(current, [4, 5], {1, 2, 4, 5})
    assert result == ElectionResult(LeaderAndIsr(4, 8, (1, 2, 4), partition_epoch=11), (4, 5))


def test_preferred_row():
    current = LeaderAndIsr(2, 3, (2, 1))
    result = elect_preferred(current, [1, 2, 3], {1, 2})
    assert result == ElectionResult(LeaderAndIsr(1, 4, (2, 1)), (1, 2, 3))  # all assigned are told
    assert elect_preferred(current, [3, 2, 1], {1, 2, 3}) == ElectionResult(None, (3, 2, 1))


def test_controlled_shutdown_row():
    current = LeaderAndIsr(1, 5, (1, 2, 3))
    result = elect_controlled_shutdown(current, [1, 2, 3], {2}, {1})
    # the shutting-down broker still counts as live: it is told, and is not a candidate
    assert result == ElectionResult(LeaderAndIsr(2, 6, (2, 3)), (1, 2))
    # two shutting down at once: both leave the ISR
    result = elect_controlled_shutdown(current, [1, 2, 3], {3}, {1, 2})
    assert result.leader_and_isr == LeaderAndIsr(3, 6, (3,))
    assert result.recipients == (1, 2, 3)
    assert controlled_shutdown_partition_leader_election([1, 2], [1], {1, 2}, {1}) == (None, (1,))


def test_every_election_bumps_the_leader_epoch_only():
    current = LeaderAndIsr(NO_LEADER, 9, (2,), partition_epoch=40)
    for result in (
        elect_offline(current, [1, 2], {2}, False),
        elect_reassign(current, [2], {2}),
        elect_preferred(LeaderAndIsr(1, 9, (2,), partition_epoch=40), [2, 1], {2}),
        elect_controlled_shutdown(LeaderAndIsr(1, 9, (1, 2), partition_epoch=40), [1, 2], {2}, {1}),
    ):
        assert result.leader_and_isr.leader == 2
        assert result.leader_and_isr.leader_epoch == 10
        assert result.leader_and_isr.partition_epoch == 40


# --- PartitionStateMachineTest / ReplicaStateMachineTest transitions -------------------------

B = 5  # the tests' broker id
OTHER = 6


def test_new_partition_to_online():
    assert initial_leader_and_isr([B], {B}) == LeaderAndIsr(B, 0, (B,), partition_epoch=0)
    # the first live replica leads, all live replicas form the ISR, in assignment order
    assert initial_leader_and_isr([3, 1, 2], {2, 3}) == LeaderAndIsr(3, 0, (3, 2))
    assert initial_leader_and_isr([3, 1], {2}) is None  # stays New


def test_online_to_online_preferred():
    current = LeaderAndIsr.initial(B, [B])
    assert elect_preferred(current, [B], {B}) == ElectionResult(current.new_leader(B), (B,))
    assert current.new_leader(B).leader_epoch == 1


def test_online_to_online_controlled_shutdown():
    current = LeaderAndIsr.initial(B, [B, OTHER])
    result = elect_controlled_shutdown(current, [B, OTHER], {OTHER}, {B})
    assert result.leader_and_isr == current.new_leader_and_isr(OTHER, [OTHER])
    assert result.recipients == (B, OTHER)  # the shutting-down broker too


def test_offline_to_online():
    current = LeaderAndIsr.initial(NO_LEADER, [B])
    result = elect_offline(current, [B], {B}, False)
    assert result == ElectionResult(current.new_leader(B), (B,), False)


@pytest.mark.parametrize("recovery_supported", [True, False])
def test_offline_to_unclean_online(recovery_supported):
    # Leader X, ISR [X], replicas [X, Y], live [Y] -> leader Y, ISR [Y], told to [Y]
    current = LeaderAndIsr.initial(OTHER, [OTHER])
    result = elect_offline(current, [OTHER, B], {B}, True, recovery_supported)
    expected = (
        current.new_recovering_leader_and_isr(B, [B])
        if recovery_supported
        else current.new_leader_and_isr(B, [B])
    )
    assert result == ElectionResult(expected, (B,), True)
    assert result.leader_and_isr.leader_recovery_state == (
        RECOVERING if recovery_supported else LeaderRecoveryState.RECOVERED
    )


def test_offline_without_eligible_leader():
    current = LeaderAndIsr(NO_LEADER, 3, (1,))
    assert elect_offline(current, [1, 2], {2}, False) == ElectionResult(None, (2,))


def test_clean_election_keeps_recovery_state():
    current = LeaderAndIsr(1, 2, (1, 2), RECOVERING)
    result = elect_offline(current, [1, 2], {2}, False, True)
    assert result.leader_and_isr == LeaderAndIsr(2, 3, (2,), RECOVERING)


def test_online_replica_to_offline():
    # ReplicaStateMachineTest: leader B, ISR [B, OTHER]; B goes offline
    current = LeaderAndIsr.initial(B, [B, OTHER])
    assert remove_replica_from_isr(current, B) == current.new_leader_and_isr(NO_LEADER, [OTHER])


# --- removing a replica from the ISR (doRemoveReplicasFromIsr) ---------------------------------


def test_remove_follower_from_isr():
    current = LeaderAndIsr(1, 4, (1, 2, 3), partition_epoch=9)
    assert remove_replica_from_isr(current, 2) == LeaderAndIsr(1, 5, (1, 3), partition_epoch=9)


def test_isr_never_becomes_empty():
    # a dead sole-ISR leader leaves {"leader": -1, "isr": [dead]}
    current = LeaderAndIsr(1, 4, (1,))
    assert remove_replica_from_isr(current, 1) == LeaderAndIsr(NO_LEADER, 5, (1,))
    # a sole ISR member that is not the leader (the leader was already gone)
    current = LeaderAndIsr(NO_LEADER, 5, (1,))
    assert remove_replica_from_isr(current, 1) == LeaderAndIsr(NO_LEADER, 6, (1,))
    # and the partition comes back only through that broker, or an unclean election
    assert elect_offline(LeaderAndIsr(NO_LEADER, 5, (1,)), [1, 2], {2}, False).leader_and_isr is None
    assert elect_offline(LeaderAndIsr(NO_LEADER, 5, (1,)), [1, 2], {1, 2}, False).leader_and_isr == (
        LeaderAndIsr(1, 6, (1,))
    )


def test_remove_replica_not_in_isr_changes_nothing():
    assert remove_replica_from_isr(LeaderAndIsr(1, 4, (1, 2)), 3) is None
    # even if it is recorded as leader (no ISR membership: Kafka leaves the state alone)
    assert remove_replica_from_isr(LeaderAndIsr(3, 4, (1, 2)), 3) is None


# --- LeaderAndIsr (LeaderAndIsrTest) -----------------------------------------------------------


def test_leader_and_isr_helpers():
    base = LeaderAndIsr.initial(1, [1, 2])
    assert (base.leader_epoch, base.partition_epoch, base.leader_recovery_state) == (0, 0, 0)
    recovering = base.new_recovering_leader_and_isr(3, [3])
    assert (recovering.leader, recovering.isr, recovering.leader_recovery_state) == (3, (3,), RECOVERING)
    moved = base.new_leader_and_isr(2, [1, 2])
    assert (moved.leader, moved.isr, moved.leader_recovery_state) == (2, (1, 2), 0)
    third = LeaderAndIsr.initial(2, [1, 2, 3]).new_leader(3)
    assert (third.leader, third.isr, third.leader_epoch) == (3, (1, 2, 3), 1)
    assert LeaderAndIsr.initial(3, [1, 2, 3]).new_epoch() == LeaderAndIsr(3, 1, (1, 2, 3))
    assert base.with_partition_epoch(7) == LeaderAndIsr(1, 0, (1, 2), partition_epoch=7)
    assert base.has_leader and not LeaderAndIsr.initial(NO_LEADER, [1]).has_leader


def test_leader_and_isr_is_a_value():
    a = LeaderAndIsr(1, 2, [1, 2])
    assert a.isr == (1, 2) and a == LeaderAndIsr(1, 2, (1, 2))
    assert hash(a) == hash(LeaderAndIsr(1, 2, (1, 2)))
    assert isinstance(LeaderAndIsr(1, 2, (1,), 1).leader_recovery_state, LeaderRecoveryState)
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.leader = 3
    with pytest.raises(ValueError):
        LeaderAndIsr(1, 2, (1,), 5)


# --- leader imbalance and auto rebalance (checkAndTriggerAutoLeaderRebalance) ------------------


def ten_partitions_preferred_by(broker, others, not_led):
    """Ten partitions whose preferred replica is ``broker``; ``not_led`` of them led by others[0]."""
    assignments = {("t", p): [broker, *others] for p in range(10)}
    states = {
        tp: LeaderAndIsr(others[0] if p < not_led else broker, 1, (broker, *others))
        for p, tp in enumerate(assignments)
    }
    return assignments, states


def test_imbalance_ratio():
    assignments = {"a": [1, 2], "b": [1, 2], "c": [1, 2], "d": [2, 1], "e": [3, 1]}
    leaders = {"a": 1, "b": 2, "c": NO_LEADER, "d": 2}  # "e" has no state yet
    assert leader_imbalance(assignments, leaders) == {1: 2 / 3, 2: 0.0, 3: 0.0}
    assert leader_imbalance({}, {}) == {}


def test_rebalance_at_ten_percent_is_not_triggered():
    assignments, states = ten_partitions_preferred_by(1, [2], not_led=1)
    assert leader_imbalance(assignments, {p: s.leader for p, s in states.items()}) == {1: 0.1}
    assert partitions_to_rebalance(assignments, states, {1, 2}) == []


def test_rebalance_above_ten_percent():
    assignments, states = ten_partitions_preferred_by(1, [2], not_led=2)
    assert partitions_to_rebalance(assignments, states, {1, 2}) == [("t", 0), ("t", 1)]
    # a higher threshold
    assert partitions_to_rebalance(assignments, states, {1, 2}, imbalance_percentage=20) == []
    assert partitions_to_rebalance(assignments, states, {1, 2}, imbalance_percentage=19) == [("t", 0), ("t", 1)]


def test_rebalance_below_threshold_ratio():
    # 1 of 9 is 11 %: above 10
    assignments, states = ten_partitions_preferred_by(1, [2], not_led=1)
    del assignments[("t", 9)], states[("t", 9)]
    assert partitions_to_rebalance(assignments, states, {1, 2}) == [("t", 0)]


def test_rebalance_only_where_the_preferred_replica_can_lead():
    assignments, states = ten_partitions_preferred_by(1, [2], not_led=5)
    states[("t", 0)] = LeaderAndIsr(2, 1, (2,))  # preferred replica out of the ISR
    assert partitions_to_rebalance(assignments, states, {1, 2}) == [("t", p) for p in range(1, 5)]
    assert partitions_to_rebalance(assignments, states, {2}) == []  # preferred replica dead


def test_rebalance_is_per_broker():
    a1, s1 = ten_partitions_preferred_by(1, [2], not_led=1)  # broker 1: 10 %
    a2, s2 = ten_partitions_preferred_by(2, [1], not_led=3)  # broker 2: 30 %
    a2 = {("u", p): r for (_, p), r in a2.items()}
    s2 = {("u", p): s for (_, p), s in s2.items()}
    assert partitions_to_rebalance({**a1, **a2}, {**s1, **s2}, {1, 2}) == [("u", 0), ("u", 1), ("u", 2)]


def test_rebalance_skips_partitions_without_state():
    assignments = {"a": [1, 2], "b": [1, 2]}
    states = {"a": LeaderAndIsr(2, 1, (1, 2))}
    assert partitions_to_rebalance(assignments, states, {1, 2}) == ["a"]


# --- ElectLeaders outcomes ---------------------------------------------------------------------


def test_elect_leaders_preferred():
    current = LeaderAndIsr(2, 3, (1, 2))
    out = elect_leaders_outcome(ElectionType.PREFERRED, [1, 2], current, {1, 2})
    assert out == ElectLeadersOutcome(ErrorCode.NONE, None, ElectionResult(LeaderAndIsr(1, 4, (1, 2)), (1, 2)))
    # the preferred replica already leads
    out = elect_leaders_outcome(ElectionType.PREFERRED, [2, 1], current, {1, 2})
    assert out == ElectLeadersOutcome(ErrorCode.ELECTION_NOT_NEEDED)
    # the preferred replica is down, or not in the ISR
    for live, isr in (({2}, (1, 2)), ({1, 2}, (2,))):
        out = elect_leaders_outcome(
            ElectionType.PREFERRED, [1, 2], LeaderAndIsr(2, 3, isr), live, partition_name="t-0"
        )
        assert out.error == ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
        assert out.message == (
            "Failed to elect leader for partition t-0 under strategy "
            "PreferredReplicaPartitionLeaderElectionStrategy"
        )
        assert out.election is None


def test_elect_leaders_unclean():
    # a live leader: nothing to do
    out = elect_leaders_outcome(ElectionType.UNCLEAN, [1, 2], LeaderAndIsr(2, 3, (2,)), {1, 2})
    assert out.error == ErrorCode.ELECTION_NOT_NEEDED
    # the leader is dead, a live ISR member exists: a clean election
    out = elect_leaders_outcome(ElectionType.UNCLEAN, [1, 2, 3], LeaderAndIsr(1, 3, (1, 3)), {2, 3})
    assert out.error == ErrorCode.NONE
    assert out.election == ElectionResult(LeaderAndIsr(3, 4, (3,)), (2, 3), False)
    # no live ISR member: the first live replica, unclean
    out = elect_leaders_outcome(
        ElectionType.UNCLEAN, [1, 2, 3], LeaderAndIsr(NO_LEADER, 3, (1,)), {3, 2},
        leader_recovery_supported=True,
    )
    assert out.election == ElectionResult(LeaderAndIsr(2, 4, (2,), RECOVERING), (2, 3), True)
    # nothing live
    out = elect_leaders_outcome(
        ElectionType.UNCLEAN, [1, 2], LeaderAndIsr(NO_LEADER, 3, (1,)), set(), partition_name="t-1"
    )
    assert out.error == ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
    assert out.message == (
        "Failed to elect leader for partition t-1 under strategy OfflinePartitionLeaderElectionStrategy(true)"
    )


@pytest.mark.parametrize("election_type", list(ElectionType))
def test_elect_leaders_unknown_and_deleting(election_type):
    out = elect_leaders_outcome(election_type, None, None, {1})
    assert out == ElectLeadersOutcome(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist.")
    out = elect_leaders_outcome(election_type, [1], LeaderAndIsr(1, 0, (1,)), {1}, topic_being_deleted=True)
    assert out == ElectLeadersOutcome(ErrorCode.INVALID_TOPIC_EXCEPTION, "The topic is being deleted")


def test_elect_leaders_without_state():
    out = elect_leaders_outcome(ElectionType.PREFERRED, [1], None, {1}, partition_name="t-0")
    assert out.error == ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
    out = elect_leaders_outcome(ElectionType.UNCLEAN, [1], None, {1}, partition_name="t-0")
    assert out.error == ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE


def test_error_codes_are_kafkas():
    assert ErrorCode.ELECTION_NOT_NEEDED == 84
    assert ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE == 80
    assert ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE == 83
    assert (ElectionType.PREFERRED, ElectionType.UNCLEAN) == (0, 1)
