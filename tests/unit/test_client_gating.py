"""KIP-253 on the consumer side, without a broker: the assignor, the gate computation (pure
functions and `GateKeeper` with a fake admin), ConsumerGroupPosition request building and
response handling."""

from __future__ import annotations

import asyncio

from pybroker.client.admin import AdminError
from pybroker.client.assignor import range_assign
from pybroker.client.consumer_coordinator import (
    build_group_position_request,
    parse_group_position_response,
)
from pybroker.client.gating import (
    DeletionGate,
    ExpansionGate,
    GateKeeper,
    PartitionGates,
    PartitionOffsets,
    deletion_sources,
    expansion_source,
    hold_from,
)
from pybroker.client.topic_layout import TopicLayout
from pybroker.common.errors import ErrorCode
from pybroker.protocol import codec
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages import ConsumerGroupPositionResponse
from pybroker.types import TopicPartition


def layout(topic: str, initial: int, undeleted: int, partitions: int) -> TopicLayout:
    return TopicLayout.from_metadata(topic, dict.fromkeys(range(partitions)), initial, undeleted)


def tp(p: int, topic: str = "t") -> TopicPartition:
    return TopicPartition(topic, p)


# --- layouts ------------------------------------------------------------------------------------

def test_unknown_counts_mean_no_change():
    unknown = TopicLayout.from_metadata("t", dict.fromkeys(range(4)), -1, -1)
    assert unknown.counts == (4, 4, 4) and not unknown.changed
    marked = layout("t", 3, 3, 6)
    assert marked.marked_partitions == [3, 4, 5] and marked.undeleted_partitions == [0, 1, 2] and marked.changed


# --- assignor -----------------------------------------------------------------------------------

def test_range_assign_separates_undeleted_and_marked_partitions():
    layouts = {"t": layout("t", 3, 4, 8)}  # 0..3 undeleted, 4..7 marked
    subscriptions = {"b": ["t"], "a": ["t"], "c": ["t"]}
    plan = range_assign(subscriptions, layouts)
    # undeleted: a [0, 1], b [2], c [3]; marked starts after the extra: b [4, 5], c [6], a [7]
    assert plan == {"a": [tp(0), tp(1), tp(7)], "b": [tp(2), tp(4), tp(5)], "c": [tp(3), tp(6)]}
    live = {m: [p for p in ps if p.partition < 4] for m, ps in plan.items()}
    assert sorted(len(v) for v in live.values()) == [1, 1, 2]  # undeleted ones spread evenly
    assert range_assign(dict(reversed(subscriptions.items())), layouts) == plan  # deterministic


def test_range_assign_only_subscribed_topics_and_known_layouts():
    layouts = {"x": layout("x", 2, 2, 2), "y": layout("y", 1, 1, 1)}
    plan = range_assign({"m1": ["x"], "m2": ["x", "y", "missing"]}, layouts)
    assert plan == {"m1": [tp(0, "x")], "m2": [tp(1, "x"), tp(0, "y")]}
    assert range_assign({}, layouts) == {}


# --- pure gate functions ------------------------------------------------------------------------

def test_expansion_source_of_a_jump_from_3_to_12():
    after = {p: 7 for p in range(3)}  # the map of every partition created by 3 -> 12
    assert expansion_source(9, 3, after) == (0, 7)  # 9's parent 3 is new too: blocked on 0
    assert [expansion_source(q, 3, after)[0] for q in range(3, 12)] == [0, 1, 2, 0, 1, 2, 0, 1, 2]
    assert expansion_source(5, 3, {}) is None  # not created by an expansion
    assert expansion_source(6, 3, {p: 1 for p in range(6)}) == (0, 1)  # 6 -> 12 step: 6 splits 0


def test_deletion_sources_of_a_shrink_from_12_to_3():
    before = {q: {0: 4, 1: 5, 2: 6} for q in range(3, 12)}  # P_new = 3 for every marked q
    assert deletion_sources(0, 3, before) == [(3, 4), (6, 4), (9, 4)]  # D(0) = {3, 6, 9}
    assert [q for q, _ in deletion_sources(1, 3, before)] == [4, 7, 10]
    assert deletion_sources(3, 3, before) == []  # a marked partition of the same shrink drains into nothing


def test_deletion_sources_of_chained_shrinks():
    """12 -> 6 then 6 -> 3 (the second before 6..11 were removed): 6..11 drain into 0..5, 3..5 into
    0..2. Partition 3 is itself marked and still gated on 9; partition 0 on 3 and on 6."""
    before = {q: {p: 1 for p in range(6)} for q in range(6, 12)}
    before.update({q: {p: 2 for p in range(3)} for q in range(3, 6)})
    assert deletion_sources(3, 3, before) == [(9, 1)]
    assert deletion_sources(0, 3, before) == [(3, 2), (6, 1)]
    assert deletion_sources(2, 3, before) == [(5, 2), (8, 1)]


def test_hold_from():
    source, deleted = tp(0), tp(3)
    expansion = PartitionGates(expansion=ExpansionGate(source, 100))
    assert hold_from(expansion, {}, {}) == 0  # group position unknown: everything held
    assert hold_from(expansion, {source: 99}, {}) == 0
    assert hold_from(expansion, {source: 100}, {}) is None
    assert hold_from(expansion, {}, {source: PartitionOffsets(log_start=120)}) is None  # retention removed it

    deletion = PartitionGates(deletions=[DeletionGate(deleted, 50), DeletionGate(tp(6), 40)])
    offsets = {deleted: PartitionOffsets(0, 30), tp(6): PartitionOffsets(0, 10)}
    assert hold_from(deletion, {}, offsets) == 40
    assert hold_from(deletion, {tp(6): 10}, offsets) == 50
    assert hold_from(deletion, {tp(6): 10, deleted: 30}, offsets) is None
    assert hold_from(deletion, {tp(6): 10}, {**offsets, deleted: PartitionOffsets(removed=True, log_end=0)}) is None
    assert hold_from(deletion, {tp(6): 10}, {**offsets, deleted: PartitionOffsets(30, 30)}) is None  # empty
    assert hold_from(deletion, {tp(6): 10}, {tp(6): offsets[tp(6)]}) == 50  # end not known yet: held


# --- GateKeeper with a fake admin ---------------------------------------------------------------

class FakeAdmin:
    def __init__(self, maps: dict, epoch_ends: dict, latest: dict, earliest: dict | None = None) -> None:
        self.maps, self.epoch_ends, self.latest, self.earliest = maps, epoch_ends, latest, earliest or {}
        self.asked: list[list[TopicPartition]] = []

    async def partition_leader_epochs(self, partitions):
        self.asked.append(list(partitions))
        return {p: self.maps.get(p, ({}, {})) for p in partitions}

    async def offsets_for_leader_epochs(self, epochs):
        return {p: self.epoch_ends[(p, e)] for p, e in epochs.items()}

    async def list_offsets(self, partitions, spec, isolation_level=0):
        table = self.latest if spec == "latest" else self.earliest
        missing = [p for p in partitions if p not in table]
        if missing:
            raise AdminError("x", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                             failures={p: AdminError("p", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION) for p in missing})

        class Listed:
            def __init__(self, offset: int) -> None:
                self.offset = offset
        return {p: Listed(table[p]) for p in partitions}


def test_gatekeeper_expansion_3_to_6():
    after = ({0: 2, 1: 2, 2: 2}, {})
    admin = FakeAdmin({tp(q): after for q in range(3, 6)}, {(tp(0), 2): 100, (tp(1), 2): 50, (tp(2), 2): -1},
                      latest={}, earliest={tp(0): 0, tp(1): 0, tp(2): 7})
    keeper = GateKeeper(admin)
    assigned = [tp(0), tp(3), tp(4), tp(5)]
    asyncio.run(keeper.prepare(assigned, {"t": layout("t", 3, 6, 6)}))
    assert admin.asked == [[tp(3), tp(4), tp(5)]]  # only partitions at or above the initial count
    assert keeper.gates[tp(3)].expansion == ExpansionGate(tp(0), 100)
    assert keeper.gates[tp(4)].expansion == ExpansionGate(tp(1), 50)
    assert keeper.gates[tp(5)].expansion == ExpansionGate(tp(2), 7)  # epoch unknown: log start of 2
    owned = {tp(0): 40, tp(3): 0, tp(4): 0, tp(5): 0}
    assert keeper.hold(tp(3), owned) == 0  # this member owns 0 and is at 40 < 100
    assert keeper.hold(tp(5), owned) is None  # the old epoch's records of 2 are gone
    assert keeper.interested(owned) == {tp(1)}  # 1 is someone else's
    assert keeper.newly_opened(owned) == [tp(5)]  # open from the start: its new keys arrive now
    assert keeper.newly_opened(owned) == []
    keeper.update_group_positions({tp(1): 49})
    assert keeper.hold(tp(4), owned) == 0 and keeper.newly_opened(owned) == []
    keeper.update_group_positions({tp(1): 50})
    assert keeper.hold(tp(4), owned) is None
    assert keeper.newly_opened(owned) == [tp(4)]
    assert keeper.holding(owned)
    owned[tp(0)] = 100
    assert keeper.hold(tp(3), owned) is None and keeper.newly_opened(owned) == [tp(3)]
    assert not keeper.holding(owned)


def test_gatekeeper_shrink_12_to_3_gates_survivor_on_its_drained_partitions():
    before = ({}, {0: 5, 1: 5, 2: 5})
    admin = FakeAdmin({tp(q): before for q in range(3, 12)}, {(tp(0), 5): 1000},
                      latest={tp(3): 10, tp(6): 20, tp(9): 0}, earliest={tp(3): 0, tp(6): 0, tp(9): 0})
    keeper = GateKeeper(admin)
    asyncio.run(keeper.prepare([tp(0)], {"t": layout("t", 3, 3, 12)}))
    assert admin.asked == [[tp(q) for q in range(3, 12)]]
    assert keeper.gates[tp(0)].deletions == [DeletionGate(tp(3), 1000), DeletionGate(tp(6), 1000), DeletionGate(tp(9), 1000)]
    owned = {tp(0): 1000}
    assert keeper.hold(tp(0), owned) == 1000  # below U goes freely
    assert keeper.interested(owned) == {tp(3), tp(6)}  # 9 is empty
    keeper.update_group_positions({tp(3): 10})
    assert keeper.hold(tp(0), owned) == 1000
    del admin.latest[tp(6)]  # 6 was drained and removed
    asyncio.run(keeper.refresh_offsets())
    assert keeper.hold(tp(0), owned) is None


def test_gatekeeper_skips_unchanged_topics_and_brokers_without_the_api():
    admin = FakeAdmin({}, {}, {})
    keeper = GateKeeper(admin)
    asyncio.run(keeper.prepare([tp(0)], {"t": layout("t", 3, 3, 3)}))
    assert admin.asked == [] and keeper.gates == {}

    class OldBroker(FakeAdmin):
        async def partition_leader_epochs(self, partitions):
            from pybroker.client.connection import UnsupportedVersionError
            raise UnsupportedVersionError("no 30002")

    keeper = GateKeeper(OldBroker({}, {}, {}))
    asyncio.run(keeper.prepare([tp(3)], {"t": layout("t", 3, 6, 6)}))
    assert keeper.gates == {} and not keeper.supported


# --- ConsumerGroupPosition ----------------------------------------------------------------------

def test_group_position_request_and_response():
    request = build_group_position_request("g", 4, "m-1", {tp(2): 17, tp(0, "a"): 3}, [tp(5), tp(1), tp(5)])
    encoded = codec.encode_request(ApiKey.CONSUMER_GROUP_POSITION, 0, 1, "c", request)
    assert encoded  # the spec accepts what the client builds
    assert [t.name for t in request.reported_positions] == ["a", "t"]
    assert [(p.partition_index, p.position) for p in request.reported_positions[1].partitions] == [(2, 17)]
    assert [(t.name, t.partition_indexes) for t in request.interested_topics] == [("t", [1, 5])]

    R = ConsumerGroupPositionResponse
    response = R(error_code=0, group_positions=[R.GroupPositionTopic(name="t", partitions=[
        R.GroupPositionPartition(partition_index=1, position=40, error_code=0),
        R.GroupPositionPartition(partition_index=5, position=9, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)])],
        position_requests=[R.PositionRequestTopic(name="t", partition_indexes=[2])],
        report_errors=[R.ReportErrorTopic(name="a", partitions=[
            R.ReportErrorPartition(partition_index=0, error_code=ErrorCode.ILLEGAL_GENERATION)])])
    parsed = parse_group_position_response(response)
    assert parsed.positions == {tp(1): 40, tp(5): -1}
    assert parsed.requested == {tp(2)}
    assert parsed.report_errors == {tp(0, "a"): ErrorCode.ILLEGAL_GENERATION}
