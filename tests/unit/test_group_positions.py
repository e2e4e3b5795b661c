"""KIP-253's shared group positions: reports, interests, position requests, committed offsets."""

from __future__ import annotations

from pybroker.common.errors import ErrorCode
from pybroker.server.group.positions import GroupPositions
from pybroker.types import TopicPartition

P0, P1, P3 = (TopicPartition("t", p) for p in (0, 1, 3))


def test_a_waiting_member_reads_the_owners_report_and_the_owner_is_asked_for_it():
    positions = GroupPositions(generation_id=4, owners={P0: "a", P1: "a", P3: "b"})
    # b owns the new partition 3, split from 0: it waits on 0, which nobody reported yet.
    answer = positions.exchange("b", [], [P0], committed={})
    assert answer.group_positions == {P0: -1} and answer.position_requests == []
    # a owns 0: it is asked to report it, and reports.
    answer = positions.exchange("a", [(P0, 120)], [], committed={})
    assert answer.position_requests == [P0] and not answer.report_errors
    assert positions.exchange("b", [], [P0], committed={}).group_positions == {P0: 120}
    # A committed offset beyond the report wins; a lower report never moves a position back.
    positions.exchange("a", [(P0, 100)], [], committed={})
    assert positions.exchange("b", [], [P0], committed={P0: 150}).group_positions == {P0: 150}
    assert positions.exchange("b", [], [P0], committed={}).group_positions == {P0: 120}
    # Once b no longer waits, a is no longer asked.
    positions.exchange("b", [], [], committed={})
    assert positions.exchange("a", [], [], committed={}).position_requests == []


def test_a_report_for_a_partition_not_owned_is_refused_and_changes_nothing():
    positions = GroupPositions(generation_id=1, owners={P0: "a", P1: "b"})
    answer = positions.exchange("a", [(P1, 50), (P0, 7)], [P1], committed={})
    assert answer.report_errors == {P1: ErrorCode.INVALID_REQUEST}
    assert answer.group_positions == {P1: -1}
    assert positions.reported == {P0: 7}
