"""KIP-392's selectors (`pybroker.server.replica_selector`), as Kafka's RackAwareReplicaSelector picks."""

from __future__ import annotations

import pytest

from pybroker.server.replica_selector import (
    LEADER_SELECTOR,
    RACK_AWARE_REPLICA_SELECTOR,
    ReplicaView,
    replica_selector,
    select_rack_aware,
)

LEADER = ReplicaView(1, "a", 100, 0)


def test_the_leader_without_a_rack_or_a_replica_in_it_or_when_it_is_in_the_rack():
    others = [LEADER, ReplicaView(2, "b", 100, 0)]
    assert select_rack_aware("", LEADER, others) is LEADER
    assert select_rack_aware("z", LEADER, others) is LEADER
    assert select_rack_aware("a", LEADER, [*others, ReplicaView(3, "a", 100, 0)]) is LEADER


def test_the_most_caught_up_replica_of_the_rack():
    behind, ahead, fresher = ReplicaView(2, "b", 90, 0), ReplicaView(3, "b", 100, 500), ReplicaView(4, "b", 100, 10)
    assert select_rack_aware("b", LEADER, [LEADER, behind, ahead]) is ahead
    assert select_rack_aware("b", LEADER, [LEADER, behind, ahead, fresher]) is fresher


def test_configured_by_kafkas_class_names():
    assert replica_selector(None) is None and replica_selector(" ") is None
    assert replica_selector(RACK_AWARE_REPLICA_SELECTOR) is select_rack_aware
    assert replica_selector(LEADER_SELECTOR)("b", LEADER, [LEADER, ReplicaView(2, "b", 1, 0)]) is LEADER
    with pytest.raises(ValueError, match="replica.selector.class=com.example.Mine is not supported"):
        replica_selector("com.example.Mine")
