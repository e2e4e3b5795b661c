"""``GroupMetadata`` bookkeeping by Kafka's rules (pure; no broker): protocol votes and choice,
which members may join, state transitions, and which committed offsets expire."""

from __future__ import annotations

import struct

import pytest

from pybroker.server.group.group_metadata import CommitRecord, GroupMetadata, GroupState
from pybroker.server.group.member import MemberMetadata
from pybroker.server.group.metadata_manager import GroupMetadataManager
from pybroker.server.group.records import GroupRecord, MemberRecord, OffsetAndMetadata
from pybroker.types import TopicPartition

E, PR, CR, S, D = (GroupState.EMPTY, GroupState.PREPARING_REBALANCE, GroupState.COMPLETING_REBALANCE,
                   GroupState.STABLE, GroupState.DEAD)
HOUR = 3_600_000


def member(member_id: str, protocols: list[str] | list[tuple[str, bytes]], protocol_type: str = "consumer",
           instance: str | None = None, rebalance_ms: int = 1000) -> MemberMetadata:
    pairs = [(p, b"") if isinstance(p, str) else p for p in protocols]
    return MemberMetadata(member_id, instance, "client", "/127.0.0.1", rebalance_ms, 500, protocol_type, pairs)


def subscription(*topics: str) -> bytes:
    raw = b"".join(struct.pack(">h", len(t)) + t.encode() for t in topics)
    return struct.pack(">hi", 0, len(topics)) + raw + struct.pack(">i", -1)


def group_with(*members: MemberMetadata, state: GroupState = E) -> GroupMetadata:
    group = GroupMetadata("g", state, 0)
    for m in members:
        group.add(m)
    return group


# --- protocol selection --------------------------------------------------------------------------


def test_only_a_protocol_every_member_supports_is_chosen():
    group = group_with(member("a", ["range", "roundrobin"]), member("b", ["roundrobin"]))
    assert group.candidate_protocols() == {"roundrobin"}
    assert group.select_protocol() == "roundrobin"


def test_most_votes_win():
    group = group_with(
        member("a", ["roundrobin", "range"]),
        member("b", ["range", "roundrobin"]),
        member("c", ["range", "roundrobin"]),
    )
    # a votes roundrobin, b and c vote range
    assert group.select_protocol() == "range"


def test_members_vote_for_their_most_preferred_candidate():
    group = group_with(
        member("a", ["sticky", "range", "roundrobin"]),
        member("b", ["roundrobin", "range"]),
        member("c", ["range", "roundrobin"]),
    )
    # sticky is no candidate; a's vote goes to its next preference (range)
    assert group.candidate_protocols() == {"range", "roundrobin"}
    assert group.select_protocol() == "range"


def test_tie_goes_to_the_leaders_preference():
    # Kafka breaks ties by hash-map order (effectively arbitrary); pybroker chooses the leader's
    # preference, which is one of Kafka's possible answers.
    group = group_with(member("a", ["roundrobin", "range"]), member("b", ["range", "roundrobin"]))
    assert group.leader_id == "a"
    assert group.select_protocol() == "roundrobin"
    group.remove("a")
    group.add(member("a", ["roundrobin", "range"]))
    assert group.leader_id == "b"
    assert group.select_protocol() == "range"


def test_votes_follow_protocol_updates_and_removals():
    a, b = member("a", ["range"]), member("b", ["range", "roundrobin"])
    group = group_with(a, b)
    assert group.candidate_protocols() == {"range"}
    group.update_protocols(a, [("roundrobin", b""), ("range", b"")])
    assert group.candidate_protocols() == {"range", "roundrobin"}
    group.update_protocols(b, [("roundrobin", b"")])
    assert group.select_protocol() == "roundrobin"
    group.remove("b")
    assert group.candidate_protocols() == {"roundrobin", "range"}
    group.remove("a")
    assert group.candidate_protocols() == set()
    with pytest.raises(AssertionError):
        group.select_protocol()


def test_init_next_generation_chooses_protocol_and_subscribed_topics():
    group = group_with(
        member("a", [("range", subscription("t1", "t2"))]),
        member("b", [("range", subscription("t2", "t3"))]),
    )
    group.transition_to(PR, 1)
    group.init_next_generation(2)
    assert (group.state, group.generation_id, group.protocol_name) == (CR, 1, "range")
    assert group.subscribed_topics == {"t1", "t2", "t3"}
    assert group.is_subscribed_to("t3") and not group.is_subscribed_to("t4")


def test_unreadable_subscription_leaves_subscribed_topics_unknown():
    group = group_with(member("a", [("range", b"\x00")]))
    group.transition_to(PR, 1)
    group.init_next_generation(2)
    assert group.subscribed_topics is None


def test_non_consumer_group_has_no_subscribed_topics():
    group = group_with(member("a", [("copycat", subscription("t1"))], protocol_type="connect"))
    group.transition_to(PR, 1)
    group.init_next_generation(2)
    assert group.subscribed_topics is None


def test_init_next_generation_of_an_empty_group():
    group = GroupMetadata("g", E, 0)
    group.generation_id = 4
    group.transition_to(PR, 1)
    group.init_next_generation(10)
    assert (group.state, group.generation_id, group.protocol_name, group.state_timestamp) == (E, 5, None, 10)


# --- who may join --------------------------------------------------------------------------------


def test_supports_protocols_of_an_empty_group():
    group = GroupMetadata("g", E, 0)
    assert group.supports_protocols("consumer", ["range"])
    assert group.supports_protocols("anything", ["x"])
    assert not group.supports_protocols("", ["range"])
    assert not group.supports_protocols("consumer", [])


def test_supports_protocols_of_a_group_with_members():
    group = group_with(member("a", ["range", "roundrobin"]), member("b", ["roundrobin", "sticky"]))
    assert group.supports_protocols("consumer", ["roundrobin"])
    assert group.supports_protocols("consumer", ["sticky", "roundrobin"])
    assert not group.supports_protocols("consumer", ["range"])        # b does not support it
    assert not group.supports_protocols("consumer", ["sticky"])       # a does not support it
    assert not group.supports_protocols("connect", ["roundrobin"])    # other protocol type
    assert not group.supports_protocols("consumer", [])


def test_first_member_sets_protocol_type_and_leader():
    group = GroupMetadata("g", E, 0)
    group.add(member("a", ["x"], protocol_type="connect"))
    group.add(member("b", ["x"], protocol_type="connect"))
    assert (group.protocol_type, group.leader_id) == ("connect", "a")
    assert not group.is_consumer_group
    group.remove("a")
    assert group.leader_id == "b"
    group.remove("b")
    assert group.leader_id is None


def test_static_members_are_tracked_and_fenced():
    group = group_with(member("m1", ["range"], instance="i1"), member("m2", ["range"]))
    assert group.static_member_id("i1") == "m1"
    assert group.static_member_id(None) is None
    assert not group.is_static_member_fenced("m1", "i1")
    assert not group.is_static_member_fenced("m2", None)
    assert not group.is_static_member_fenced("m2", "unknown-instance")
    replaced = group.replace_static_member("i1", "m1", "m1-new")
    assert replaced.member_id == "m1-new" and group.has("m1-new") and not group.has("m1")
    assert group.leader_id == "m1-new"
    assert group.is_static_member_fenced("m1", "i1")
    group.remove("m1-new")
    assert group.static_member_id("i1") is None


def test_pending_members_keep_a_group_non_empty_and_block_join_completion():
    group = GroupMetadata("g", E, 0)
    group.pending_members.add("p")
    assert not group.is_empty
    assert not group.has_all_members_joined()
    group.add(member("p", ["range"]))
    assert "p" not in group.pending_members


# --- state machine -------------------------------------------------------------------------------

LEGAL = {(E, PR), (PR, CR), (PR, E), (CR, S), (CR, PR), (S, PR)} | {(s, D) for s in GroupState}


@pytest.mark.parametrize("source", list(GroupState))
@pytest.mark.parametrize("target", list(GroupState))
def test_transitions(source, target):
    group = GroupMetadata("g", source, 0)
    if (source, target) in LEGAL:
        group.transition_to(target, 123)
        assert (group.state, group.state_timestamp) == (target, 123)
    else:
        with pytest.raises(AssertionError):
            group.transition_to(target, 123)
        assert (group.state, group.state_timestamp) == (source, 0)


@pytest.mark.parametrize("state,expected", [(E, True), (S, True), (CR, True), (PR, False), (D, False)])
def test_can_rebalance(state, expected):
    assert GroupMetadata("g", state, 0).can_rebalance() is expected


def test_parse_state_is_case_insensitive():
    assert GroupState.parse("stable") is S
    assert GroupState.parse("PREPARINGREBALANCE") is PR
    assert GroupState.parse("CompletingRebalance") is CR
    assert GroupState.parse("nope") is None


# --- offset expiry -------------------------------------------------------------------------------


def tp(topic: str, partition: int = 0) -> TopicPartition:
    return TopicPartition(topic, partition)


def committed(commit_ts: int, expire_ts: int | None = None) -> OffsetAndMetadata:
    return OffsetAndMetadata(offset=1, commit_timestamp=commit_ts, expire_timestamp=expire_ts)


def test_empty_group_offsets_expire_retention_after_it_became_empty():
    group = GroupMetadata("g", E, now_ms := 10 * HOUR)
    group.protocol_type = "consumer"
    group.offsets = {tp("a"): committed(0), tp("b"): committed(9 * HOUR)}
    # Committed long ago, but the group only became empty at 10h: nothing before 10h + retention.
    assert group.expired_offsets(now_ms + HOUR - 1, HOUR) == []
    assert sorted(group.expired_offsets(now_ms + HOUR, HOUR)) == [tp("a"), tp("b")]


def test_empty_group_without_state_timestamp_uses_commit_timestamps():
    group = GroupMetadata("g", E, -1)
    group.protocol_type = "consumer"
    group.offsets = {tp("a"): committed(0), tp("b"): committed(5 * HOUR)}
    assert group.expired_offsets(HOUR, HOUR) == [tp("a")]
    assert sorted(group.expired_offsets(6 * HOUR, HOUR)) == [tp("a"), tp("b")]


def test_stable_consumer_group_expires_only_unsubscribed_topics():
    group = group_with(member("m", [("range", subscription("sub"))]))
    group.transition_to(PR, 0)
    group.init_next_generation(0)
    group.transition_to(S, 0)
    group.offsets = {tp("sub"): committed(0), tp("sub", 1): committed(0), tp("old"): committed(0),
                     tp("recent"): committed(5 * HOUR)}
    assert group.expired_offsets(2 * HOUR, HOUR) == [tp("old")]
    assert sorted(group.expired_offsets(6 * HOUR, HOUR)) == [tp("old"), tp("recent")]


def test_stable_consumer_group_with_unknown_subscription_expires_nothing():
    group = group_with(member("m", [("range", b"garbage")]))
    group.transition_to(PR, 0)
    group.init_next_generation(0)
    group.transition_to(S, 0)
    group.offsets = {tp("x"): committed(0)}
    assert group.expired_offsets(100 * HOUR, HOUR) == []


@pytest.mark.parametrize("state", [PR, CR])
def test_rebalancing_group_expires_nothing(state):
    group = group_with(member("m", [("range", subscription("sub"))]))
    group.transition_to(PR, 0)
    if state == CR:
        group.init_next_generation(0)
    group.offsets = {tp("x"): committed(0), tp("y"): committed(0, expire_ts=1)}
    assert group.expired_offsets(100 * HOUR, HOUR) == []


def test_stable_non_consumer_group_expires_nothing():
    group = group_with(member("m", [("copycat", b"")], protocol_type="connect"))
    group.transition_to(PR, 0)
    group.init_next_generation(0)
    group.transition_to(S, 0)
    group.offsets = {tp("x"): committed(0)}
    assert group.expired_offsets(100 * HOUR, HOUR) == []


def test_simple_group_expires_each_offset_retention_after_its_commit():
    group = GroupMetadata("g", E, 50 * HOUR)  # state timestamp is irrelevant without a protocol type
    group.offsets = {tp("a"): committed(0), tp("b"): committed(2 * HOUR)}
    assert group.expired_offsets(HOUR - 1, HOUR) == []
    assert group.expired_offsets(HOUR, HOUR) == [tp("a")]
    assert sorted(group.expired_offsets(3 * HOUR, HOUR)) == [tp("a"), tp("b")]


def test_explicit_expire_timestamp_wins_over_retention():
    group = GroupMetadata("g", E, 0)
    group.offsets = {
        tp("short"): committed(0, expire_ts=1000),
        tp("long"): committed(0, expire_ts=100 * HOUR),
        tp("default"): committed(0),
    }
    assert group.expired_offsets(999, HOUR) == []
    assert group.expired_offsets(1000, HOUR) == [tp("short")]
    # past the retention: "default" goes, "long" stays until its own expire timestamp
    assert sorted(group.expired_offsets(2 * HOUR, HOUR)) == [tp("default"), tp("short")]
    assert len(group.expired_offsets(100 * HOUR, HOUR)) == 3


def test_explicit_expire_timestamp_in_empty_consumer_group():
    group = GroupMetadata("g", E, 0)
    group.protocol_type = "consumer"
    group.offsets = {tp("a"): committed(0, expire_ts=500), tp("b"): committed(0)}
    assert group.expired_offsets(500, HOUR) == [tp("a")]


def test_stable_consumer_group_explicit_expiry_spares_subscribed_topics():
    group = group_with(member("m", [("range", subscription("sub"))]))
    group.transition_to(PR, 0)
    group.init_next_generation(0)
    group.transition_to(S, 0)
    group.offsets = {tp("sub"): committed(0, expire_ts=1), tp("other"): committed(0, expire_ts=1)}
    assert group.expired_offsets(10, HOUR) == [tp("other")]


# --- groups rebuilt from __consumer_offsets ------------------------------------------------------


def test_rebuilt_group_with_members_is_stable_and_keeps_its_metadata():
    record = GroupRecord("consumer", 7, "range", "m2", 1234, [
        MemberRecord("m1", None, "c1", "/h", 60000, 6000, subscription("t"), b"a1"),
        MemberRecord("m2", "i2", "c2", "/h", 60000, 6000, subscription("u"), b"a2"),
    ])
    group = GroupMetadataManager._rebuild_group("g", record, {tp("t"): CommitRecord(0, committed(5))})
    assert (group.state, group.generation_id, group.protocol_type, group.protocol_name) == (S, 7, "consumer", "range")
    assert (group.leader_id, group.state_timestamp) == ("m2", 1234)
    assert group.static_member_id("i2") == "m2"
    assert group.get("m1").assignment == b"a1"
    assert group.subscribed_topics == {"t", "u"}
    assert group.offsets == {tp("t"): committed(5)}


def test_rebuilt_group_without_members_is_empty():
    record = GroupRecord("consumer", 3, None, None, 99, [])
    group = GroupMetadataManager._rebuild_group("g", record, {})
    assert (group.state, group.generation_id, group.protocol_type, group.state_timestamp) == (E, 3, "consumer", 99)


def test_offsets_without_group_record_make_a_simple_group():
    group = GroupMetadataManager._rebuild_group("g", None, {tp("t"): CommitRecord(0, committed(5))})
    assert (group.state, group.protocol_type, group.generation_id) == (E, None, 0)


def test_rebuilt_empty_group_without_state_timestamp_expires_by_commit_time():
    record = GroupRecord("consumer", 3, None, None, -1, [])
    group = GroupMetadataManager._rebuild_group("g", record, {tp("t"): CommitRecord(0, committed(0))})
    # committed at t=0 with a 1h retention: long expired, whenever the group was loaded
    assert group.expired_offsets(2 * HOUR, HOUR) == [tp("t")]
