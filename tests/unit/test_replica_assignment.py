"""Replica assignment: Kafka's AdminUtils placement, rack-unaware and rack-aware, and the
placement of partitions added to a topic (expected values from Kafka's AdminRackAwareTest and
AddPartitionsTest)."""

import random
from collections import Counter

import pytest

from pybroker.common.topic import InvalidPartitionsError, InvalidReplicationFactorError
from pybroker.controller.replica_assignment import (
    AdminOperationError,
    RackAwareMode,
    assign_replicas_to_brokers,
    assignment_for_new_partitions,
    rack_alternated_broker_list,
    racks_for_assignment,
)


class ScriptedRandom(random.Random):
    """A Random whose randrange answers come from a list, to see which draws are made."""

    def __init__(self, answers):
        super().__init__(0)
        self.answers = list(answers)
        self.calls = []

    def randrange(self, *args):
        self.calls.append(args)
        return self.answers.pop(0)


# --- rack-unaware ------------------------------------------------------------------------------

# AdminRackAwareTest.testReplicaAssignment; also the table in AdminUtils' Javadoc and cluster.md §2.6.
FIVE_BROKERS_TEN_PARTITIONS_RF3 = {
    0: [0, 1, 2],
    1: [1, 2, 3],
    2: [2, 3, 4],
    3: [3, 4, 0],
    4: [4, 0, 1],
    5: [0, 2, 3],
    6: [1, 3, 4],
    7: [2, 4, 0],
    8: [3, 0, 1],
    9: [4, 1, 2],
}


def test_worked_example():
    assert assign_replicas_to_brokers(range(5), 10, 3, 0, -1) == FIVE_BROKERS_TEN_PARTITIONS_RF3
    assert assign_replicas_to_brokers(range(5), 10, 3, fixed_start_index=0, start_partition_id=0) == (
        FIVE_BROKERS_TEN_PARTITIONS_RF3
    )


def test_broker_ids_are_sorted_and_deduplicated():
    assert assign_replicas_to_brokers([4, 2, 0, 3, 1, 2], 10, 3, 0) == FIVE_BROKERS_TEN_PARTITIONS_RF3
    ids = [10, 30, 20]
    assert assign_replicas_to_brokers(ids, 3, 2, 0) == {0: [10, 20], 1: [20, 30], 2: [30, 10]}


def test_fixed_start_index_is_also_the_initial_shift():
    # start 2 and shift 2 over 5 brokers: p0 leads on broker 2, its follower is 2+1+2 = broker 0
    assert assign_replicas_to_brokers(range(5), 2, 2, 2) == {0: [2, 0], 1: [3, 1]}


def test_random_start_and_shift_are_two_independent_draws():
    rng = ScriptedRandom([3, 1])
    out = assign_replicas_to_brokers(range(5), 6, 2, rng=rng)
    assert rng.calls == [(5,), (5,)]
    # start index 3, shift 1 (bumped to 2 at p5): follower = first + 1 + shift
    assert out == {0: [3, 0], 1: [4, 1], 2: [0, 2], 3: [1, 3], 4: [2, 4], 5: [3, 1]}
    rng = ScriptedRandom([0, 0])
    assert assign_replicas_to_brokers(range(5), 10, 3, rng=rng) == FIVE_BROKERS_TEN_PARTITIONS_RF3


def test_no_random_draw_with_a_fixed_start():
    rng = ScriptedRandom([])
    assign_replicas_to_brokers(range(3), 3, 2, 1, rng=rng)
    assert rng.calls == []


def test_seeded_rng_is_reproducible():
    a = assign_replicas_to_brokers(range(6), 12, 3, rng=random.Random(42))
    b = assign_replicas_to_brokers(range(6), 12, 3, rng=random.Random(42))
    assert a == b
    starts = {assign_replicas_to_brokers(range(6), 1, 1, rng=random.Random(s))[0][0] for s in range(50)}
    assert starts == set(range(6))  # the first leader is not always the same broker


def test_start_partition_id():
    # partition ids continue from start_partition_id, with the shift it would have had
    tail = assign_replicas_to_brokers(range(5), 5, 3, 0, 5)
    assert tail == {p: FIVE_BROKERS_TEN_PARTITIONS_RF3[p] for p in range(5, 10)}


@pytest.mark.parametrize("brokers,partitions,rf", [(5, 10, 3), (6, 60, 3), (3, 30, 3), (7, 70, 2), (4, 400, 4)])
@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_even_distribution(brokers, partitions, rf, seed):
    assignment = assign_replicas_to_brokers(range(brokers), partitions, rf, rng=random.Random(seed))
    assert sorted(assignment) == list(range(partitions))
    for replicas in assignment.values():
        assert len(replicas) == rf
        assert len(set(replicas)) == rf
    leaders = Counter(r[0] for r in assignment.values())
    assert leaders == {b: partitions // brokers for b in range(brokers)}
    replicas = Counter(b for r in assignment.values() for b in r)
    assert replicas == {b: partitions * rf // brokers for b in range(brokers)}


def test_followers_of_one_leader_are_spread():
    # broker 0 leads p0, p5, p10, p15; the shift moves its follower to each other broker in turn
    assignment = assign_replicas_to_brokers(range(5), 20, 2, 0)
    assert [assignment[p] for p in (0, 5, 10, 15)] == [[0, 1], [0, 2], [0, 3], [0, 4]]


def test_uneven_counts_stay_within_one():
    for seed in range(10):
        assignment = assign_replicas_to_brokers(range(4), 7, 2, rng=random.Random(seed))
        leaders = Counter(r[0] for r in assignment.values())
        assert max(leaders.values()) - min(leaders.values()) <= 1
        assert all(len(set(r)) == 2 for r in assignment.values())


def test_single_broker():
    assert assign_replicas_to_brokers([7], 3, 1, rng=random.Random(1)) == {0: [7], 1: [7], 2: [7]}


def test_errors():
    with pytest.raises(InvalidReplicationFactorError, match=r"^Replication factor: 3 larger than available brokers: 1\.$"):
        assign_replicas_to_brokers([0], 1, 3)
    with pytest.raises(InvalidReplicationFactorError, match="larger than available brokers: 5"):
        assign_replicas_to_brokers(range(5), 10, 6)
    with pytest.raises(InvalidReplicationFactorError, match="must be larger than 0"):
        assign_replicas_to_brokers(range(5), 10, 0)
    with pytest.raises(InvalidReplicationFactorError):
        assign_replicas_to_brokers(range(5), 10, -1)
    with pytest.raises(InvalidPartitionsError, match="Number of partitions must be larger than 0"):
        assign_replicas_to_brokers(range(5), 0, 1)
    with pytest.raises(InvalidPartitionsError):
        assign_replicas_to_brokers(range(5), -3, 1)
    with pytest.raises(InvalidReplicationFactorError, match="available brokers: 0"):
        assign_replicas_to_brokers([], 1, 1)


# --- rack-aware --------------------------------------------------------------------------------


def test_rack_alternated_broker_list():
    racks = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
    assert rack_alternated_broker_list(racks) == [0, 3, 1, 5, 4, 2]
    del racks[5]
    assert rack_alternated_broker_list(racks) == [0, 3, 1, 4, 2]
    nine = {b: f"rack{b // 3 + 1}" for b in range(9)}
    assert rack_alternated_broker_list(nine) == [0, 3, 6, 1, 4, 7, 2, 5, 8]


def test_rack_aware_assignment_expected():
    racks = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
    assert assign_replicas_to_brokers(racks, 7, 3, 0, 0, racks=racks) == {
        0: [0, 3, 1],
        1: [3, 1, 5],
        2: [1, 5, 4],
        3: [5, 4, 2],
        4: [4, 2, 0],
        5: [2, 0, 3],
        6: [0, 4, 2],  # the shift after a full round: not 0,3,1 again
    }


def check_distribution(assignment, racks, partitions, rf, rack_aware=True, leaders=True, replicas=True):
    """AdminRackAwareTest's checks: no broker twice in a partition; optionally one rack per
    replica, equal leader counts, equal replica counts."""
    assert len(assignment) == partitions
    brokers = len(racks)
    for replica_list in assignment.values():
        assert len(replica_list) == rf
        assert len(set(replica_list)) == rf
        if rack_aware:
            assert len({racks[b] for b in replica_list}) == rf
    if leaders:
        counts = Counter(r[0] for r in assignment.values())
        assert sorted(counts.values()) == [partitions // brokers] * brokers
    if replicas:
        counts = Counter(b for r in assignment.values() for b in r)
        assert sorted(counts.values()) == [partitions * rf // brokers] * brokers


SIX_BROKERS_THREE_RACKS = {0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack1"}

# (racks, partitions, rf, fixed start, start partition, check rack-awareness, leaders, replicas),
# AdminRackAwareTest's cases. A start of -1 is random: every seed must pass.
RACK_AWARE_CASES = [
    pytest.param(SIX_BROKERS_THREE_RACKS, 6, 3, 2, 0, True, True, True, id="fixed-start"),
    pytest.param(SIX_BROKERS_THREE_RACKS, 6, 3, -1, -1, True, True, True, id="random-start"),
    pytest.param(SIX_BROKERS_THREE_RACKS, 13, 3, 0, 0, True, False, False, id="uneven-replicas"),
    pytest.param(
        {0: "rack1", 1: "rack1", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack1"},
        12, 3, -1, -1, True, True, False, id="uneven-racks",
    ),
    pytest.param(SIX_BROKERS_THREE_RACKS, 12, 2, -1, -1, True, True, True, id="rf2"),
    pytest.param(
        {6: "rack1", 7: "rack2", 8: "rack2", 9: "rack3", 10: "rack3", 11: "rack1"},
        12, 2, -1, 12, True, True, True, id="expansion",
    ),
    pytest.param(SIX_BROKERS_THREE_RACKS, 6, 2, -1, -1, True, True, True, id="rf2-6-partitions"),
    pytest.param({0: "rack1", 1: "rack2", 4: "rack3"}, 3, 2, -1, -1, True, True, True, id="3-brokers"),
    pytest.param(
        {0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack1",
         6: "rack1", 7: "rack2", 8: "rack2", 9: "rack3", 10: "rack1", 11: "rack3"},
        96, 3, -1, -1, True, True, True, id="96-partitions",
    ),
    pytest.param(
        {0: "a", 1: "b", 2: "c", 3: "a", 4: "a"}, 6, 4, 2, -1, False, False, False,
        id="skip-broker-with-replica",
    ),
]


@pytest.mark.parametrize("racks,partitions,rf,start,first,rack_aware,leaders,replicas", RACK_AWARE_CASES)
@pytest.mark.parametrize("seed", [0, 1, 2, 3, 4])
def test_rack_aware_distribution(racks, partitions, rf, start, first, rack_aware, leaders, replicas, seed):
    assignment = assign_replicas_to_brokers(
        racks, partitions, rf, start, first, rng=random.Random(seed), racks=racks
    )
    assert sorted(assignment) == list(range(max(0, first), max(0, first) + partitions))
    check_distribution(assignment, racks, partitions, rf, rack_aware, leaders, replicas)


@pytest.mark.parametrize("seed", range(5))
def test_more_replicas_than_racks(seed):
    racks = {0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack2"}
    assignment = assign_replicas_to_brokers(racks, 6, 5, rng=random.Random(seed), racks=racks)
    for replicas in assignment.values():
        assert len(replicas) == 5 and len(set(replicas)) == 5
        assert len({racks[b] for b in replicas}) == 3  # every rack gets one


@pytest.mark.parametrize("seed", range(5))
def test_less_replicas_than_racks(seed):
    racks = {0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack2"}
    assignment = assign_replicas_to_brokers(racks, 6, 2, rng=random.Random(seed), racks=racks)
    for replicas in assignment.values():
        assert len({racks[b] for b in replicas}) == 2  # at most one per rack


@pytest.mark.parametrize("seed", range(5))
def test_single_rack(seed):
    racks = dict.fromkeys(range(6), "rack1")
    assignment = assign_replicas_to_brokers(racks, 6, 3, rng=random.Random(seed), racks=racks)
    assert all(len(set(r)) == 3 for r in assignment.values())
    assert Counter(r[0] for r in assignment.values()) == dict.fromkeys(range(6), 1)


def test_some_brokers_without_rack():
    with pytest.raises(AdminOperationError, match="Not all brokers have rack information"):
        assign_replicas_to_brokers(range(3), 3, 2, 0, racks={0: "a", 1: "b"})


def test_racks_for_assignment_modes():
    full = {0: "a", 1: "b"}
    partial = {0: "a", 1: None}
    none = {0: None, 1: None}
    assert racks_for_assignment(full) == full
    assert racks_for_assignment(none) == {}
    with pytest.raises(AdminOperationError, match="^Not all brokers have rack information"):
        racks_for_assignment(partial)
    assert racks_for_assignment(partial, RackAwareMode.SAFE) == {}
    assert racks_for_assignment(full, RackAwareMode.SAFE) == full
    assert racks_for_assignment(full, RackAwareMode.DISABLED) == {}
    assert racks_for_assignment(partial, RackAwareMode.DISABLED) == {}


# --- partitions added to a topic ---------------------------------------------------------------


def test_new_partitions_all_servers():
    # AddPartitionsTest.testReplicaPlacementAllServers: 4 brokers, p0 = [2, 3, 0, 1], grow to 7
    added = assignment_for_new_partitions({0: [2, 3, 0, 1]}, range(4), 7)
    assert sorted(added) == [1, 2, 3, 4, 5, 6]
    assert [added[p][0] for p in range(1, 7)] == [3, 0, 1, 2, 3, 0]
    assert all(sorted(r) == [0, 1, 2, 3] for r in added.values())


def test_new_partitions_partial_servers():
    # AddPartitionsTest.testReplicaPlacementPartialServers: 4 brokers, p0 = [1, 2], grow to 3
    assert assignment_for_new_partitions({0: [1, 2]}, range(4), 3) == {1: [2, 0], 2: [3, 1]}


def test_new_partitions_continue_the_round_robin():
    # p0 led by broker 0 and created with start 0: adding partitions gives what creating them
    # all at once would have given
    existing = {p: FIVE_BROKERS_TEN_PARTITIONS_RF3[p] for p in range(3)}
    added = assignment_for_new_partitions(existing, [4, 3, 2, 1, 0], 10, topic="t")
    assert added == {p: FIVE_BROKERS_TEN_PARTITIONS_RF3[p] for p in range(3, 10)}


def test_new_partitions_start_index():
    # start index: the first broker whose id is >= p0's first replica
    assert assignment_for_new_partitions({0: [15]}, [10, 20, 30], 2) == {1: [30]}
    # none: index 0
    assert assignment_for_new_partitions({0: [99]}, [10, 20, 30], 2) == {1: [20]}
    # RF of partition 0
    assert assignment_for_new_partitions({0: [20, 30], 1: [30, 10]}, [10, 20, 30], 3) == {2: [10, 30]}


def test_new_partitions_errors():
    with pytest.raises(InvalidPartitionsError, match=(
        r"^The number of partitions for a topic can only be increased\. Topic t currently has 2 "
        r"partitions, 2 would not be an increase\.$"
    )):
        assignment_for_new_partitions({0: [0], 1: [1]}, range(2), 2, topic="t")
    with pytest.raises(InvalidPartitionsError, match="1 would not be an increase"):
        assignment_for_new_partitions({0: [0], 1: [1]}, range(2), 1, topic="t")
    with pytest.raises(AdminOperationError, match="topic 'new-topic5', partition id 0 is missing"):
        assignment_for_new_partitions({1: [0, 1]}, range(4), 2, topic="new-topic5")
    with pytest.raises(InvalidReplicationFactorError, match="Replication factor: 3 larger than available brokers: 2"):
        assignment_for_new_partitions({0: [0, 1, 2]}, [0, 1], 2)


def test_new_partitions_rack_aware():
    racks = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
    added = assignment_for_new_partitions({0: [0, 3, 1]}, racks, 4, racks=racks)
    assert sorted(added) == [1, 2, 3]
    for replicas in added.values():
        assert len({racks[b] for b in replicas}) == 3
