"""The group coordinator's side of transactions (KIP-98, KIP-447), over the real metadata manager
and real ``__consumer_offsets`` logs, with no broker and no sockets.

A TxnOffsetCommit is written as one transactional batch of the producer and stays pending until
the transaction's marker: a commit makes it the committed offset (unless a later write of the
partition is in the log), an abort drops it. OffsetFetch with RequireStable answers
UNSTABLE_OFFSET_COMMIT meanwhile. KIP-447's member fields fence commits of an older generation.
A load rebuilds all of it from the log: the markers found decide, an open transaction stays
pending. The markers themselves are written here the way the transaction coordinator's
WriteTxnMarkers does (a control batch appended as COORDINATOR, then ``handle_txn_completion``).
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from pybroker import _native
from pybroker.common.errors import ErrorCode as E
from pybroker.log.log import AppendOrigin
from pybroker.protocol.messages import OffsetFetchRequest, TxnOffsetCommitRequest
from pybroker.security.authorizer import AllowAllAuthorizer
from pybroker.server.apis import offset_fetch, txn_offset_commit
from pybroker.server.group.group_metadata import CommitRecord, GroupState
from pybroker.server.group.metadata_manager import _PartitionLoad
from pybroker.server.group.records import OffsetAndMetadata, OffsetCommitKey
from pybroker.server.replica_manager import PartitionAppendResult
from pybroker.types import TopicPartition
from tests.unit.handler_context import allowed_context
from tests.unit.test_group_coordinator import (
    G_PARTITION,
    GROUP,
    UNLED_GROUP,
    CoordinatorOverLogs,
    Member,
    OffsetsTopic,
    Pending,
    commit,
    no_errors_logged,  # noqa: F401  (autouse: a logged error fails the test)
    offsets_tp,
    run,
    stable_group,
)

T0, T1, U0 = TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("u", 0)
PID, OTHER_PID, EPOCH = 1000, 2000, 3
NOW = 1_700_000_000_000


def offset(value: int, metadata: str = "") -> OffsetAndMetadata:
    return OffsetAndMetadata(value, metadata=metadata, commit_timestamp=NOW)


async def led(tmp_path: Any, topic: OffsetsTopic | None = None) -> CoordinatorOverLogs:
    """A coordinator leading g's partition, loaded."""
    cluster = CoordinatorOverLogs(tmp_path)
    if topic is not None:
        cluster.topic = cluster.manager.replica_manager = topic
    cluster.elect(G_PARTITION, 1)
    await cluster.loaded()
    return cluster


def txn_commit(cluster: CoordinatorOverLogs, offsets: dict[TopicPartition, OffsetAndMetadata], *,
               pid: int = PID, group: str = GROUP, member_id: str = "", instance: str | None = None,
               generation: int = -1) -> dict[TopicPartition, E]:
    pending = Pending(cluster)
    cluster.coordinator.handle_txn_commit_offsets(group, pid, EPOCH, member_id, instance, generation, offsets, pending)
    return pending.result


def plain_commit(cluster: CoordinatorOverLogs, offsets: dict[TopicPartition, OffsetAndMetadata]) -> None:
    pending = Pending(cluster)
    cluster.coordinator.handle_commit_offsets(GROUP, "", None, -1, offsets, pending)
    assert set(pending.result.values()) == {E.NONE}


def marker(topic: OffsetsTopic, index: int, pid: int, committed: bool) -> None:
    batch = _native.build_control_batch(pid, EPOCH, 0, committed, NOW)
    topic.logs[index].append_as_leader(memoryview(bytearray(batch)), 0, NOW, AppendOrigin.COORDINATOR)


def end_txn(cluster: CoordinatorOverLogs, pid: int, committed: bool, index: int = G_PARTITION) -> None:
    """What WriteTxnMarkers does for a ``__consumer_offsets`` partition: the marker, then the group
    coordinator is told."""
    marker(cluster.topic, index, pid, committed)
    cluster.coordinator.handle_txn_completion(pid, [index], committed)


def fetched(cluster: CoordinatorOverLogs, *tps: TopicPartition, stable: bool = False) -> dict[TopicPartition, int | None]:
    error, offsets = cluster.coordinator.handle_fetch_offsets(GROUP, list(tps), stable)
    assert error == E.NONE
    return {tp: None if o is None else o.offset for tp, o in offsets.items()}


def batches(topic: OffsetsTopic, index: int) -> list[Any]:
    log = topic.logs[index]
    return _native.read_record_batches(log.read(0, 1 << 20, log.log_end_offset, True))


# --- pending until the transaction ends -----------------------------------------------------------


def test_txn_offsets_are_pending_until_the_commit_marker(tmp_path):
    """The offsets go to the log as ONE transactional batch of the producer (its id and epoch);
    until the marker, OffsetFetch sees the previous committed offset (none here), and with
    RequireStable UNSTABLE_OFFSET_COMMIT. The commit marker makes them the committed offsets."""

    async def scenario() -> None:
        cluster = await led(tmp_path)
        assert txn_commit(cluster, {T0: offset(10, "m"), T1: offset(11)}) == {T0: E.NONE, T1: E.NONE}
        [(base, pid, epoch, transactional, control, records)] = batches(cluster.topic, G_PARTITION)
        assert (base, pid, epoch, transactional, control, len(records)) == (0, PID, EPOCH, True, -1, 2)
        assert {OffsetAndMetadata.decode(value).offset for _, _, _, value in records} == {10, 11}
        assert cluster.manager.is_group_open_for_producer(PID, GROUP)
        assert cluster.group.is_state(GroupState.EMPTY)  # a txn commit to an unknown group creates it

        assert fetched(cluster, T0, T1, U0) == {T0: -1, T1: -1, U0: -1}
        assert fetched(cluster, T0, T1, U0, stable=True) == {T0: None, T1: None, U0: -1}
        cluster.coordinator.handle_txn_completion(OTHER_PID, [G_PARTITION], True)  # another producer's
        cluster.coordinator.handle_txn_completion(PID, [G_PARTITION - 1], True)  # another partition's
        assert fetched(cluster, T0, stable=True) == {T0: None}

        end_txn(cluster, PID, committed=True)
        assert fetched(cluster, T0, T1, stable=True) == {T0: 10, T1: 11}
        assert cluster.coordinator.handle_fetch_offsets(GROUP, [T0])[1][T0].metadata == "m"
        assert not cluster.manager.is_group_open_for_producer(PID, GROUP)
        assert not cluster.group.pending_txn_offset_commits

    run(scenario)


def test_abort_drops_the_pending_offsets(tmp_path):
    async def scenario() -> None:
        cluster = await led(tmp_path)
        plain_commit(cluster, {T0: offset(5)})
        assert txn_commit(cluster, {T0: offset(10), T1: offset(11)}) == {T0: E.NONE, T1: E.NONE}
        end_txn(cluster, PID, committed=False)
        assert fetched(cluster, T0, T1, stable=True) == {T0: 5, T1: -1}
        assert not cluster.manager.is_group_open_for_producer(PID, GROUP)

    run(scenario)


def test_commit_takes_only_offsets_newer_in_the_log_than_the_committed_ones(tmp_path):
    """Kafka's rule: of a transactional and a plain commit of a partition, the one later in the
    log wins. Plain 20 after txn 10: 20 stays. Txn 30 after plain 25: 30 wins at the commit."""

    async def scenario() -> None:
        cluster = await led(tmp_path)
        assert txn_commit(cluster, {T0: offset(10)}) == {T0: E.NONE}
        plain_commit(cluster, {T0: offset(20)})
        plain_commit(cluster, {T1: offset(25)})
        assert txn_commit(cluster, {T1: offset(30)}, pid=OTHER_PID) == {T1: E.NONE}
        assert fetched(cluster, T0, T1) == {T0: 20, T1: 25}
        assert fetched(cluster, T0, T1, stable=True) == {T0: None, T1: None}
        end_txn(cluster, PID, committed=True)
        end_txn(cluster, OTHER_PID, committed=True)
        assert fetched(cluster, T0, T1, stable=True) == {T0: 20, T1: 30}

    run(scenario)


def test_a_later_txn_commit_of_the_same_producer_replaces_its_earlier_one(tmp_path):
    async def scenario() -> None:
        cluster = await led(tmp_path)
        txn_commit(cluster, {T0: offset(10)})
        txn_commit(cluster, {T0: offset(12), T1: offset(3)})
        end_txn(cluster, PID, committed=True)
        assert fetched(cluster, T0, T1) == {T0: 12, T1: 3}

    run(scenario)


def test_failed_append_leaves_nothing_pending(tmp_path):
    """The log refuses the batch: the commit answers what Kafka maps the error to, and the
    group keeps no pending offsets of the producer."""

    class Refusing(OffsetsTopic):
        def append_records(self, acks: int, timeout_ms: int, entries: list[tuple[TopicPartition, memoryview]],
                           internal_topics_allowed: bool, origin: AppendOrigin) -> dict[TopicPartition, PartitionAppendResult]:
            return {tp: PartitionAppendResult(error=E.NOT_LEADER_OR_FOLLOWER) for tp, _ in entries}

    async def scenario() -> None:
        cluster = await led(tmp_path, Refusing(tmp_path / "refusing"))
        assert txn_commit(cluster, {T0: offset(10)}) == {T0: E.NOT_COORDINATOR}
        assert fetched(cluster, T0, stable=True) == {T0: -1}
        assert not cluster.manager.is_group_open_for_producer(PID, GROUP)

    run(scenario)


def test_pending_offsets_keep_an_empty_group_alive(tmp_path):
    """Offset expiry and the end of empty groups (Kafka's cleanupGroupMetadata) leave a group with
    pending transactional offsets alone; once aborted, the group goes."""

    async def scenario() -> None:
        cluster = await led(tmp_path)
        txn_commit(cluster, {T0: offset(10)})
        plain_commit(cluster, {T1: offset(4)})
        cluster.manager.retention_ms = 0  # every committed offset is past retention
        assert cluster.manager.expire_offsets() == 1
        assert fetched(cluster, T0, T1) == {T0: -1, T1: -1}
        assert cluster.manager.get_group(GROUP) is cluster.group
        assert fetched(cluster, T0, stable=True) == {T0: None}
        end_txn(cluster, PID, committed=False)
        cluster.manager.expire_offsets()
        assert cluster.manager.get_group(GROUP) is None

    run(scenario)


def test_deleted_partitions_take_their_pending_offsets(tmp_path):
    async def scenario() -> None:
        cluster = await led(tmp_path)
        txn_commit(cluster, {T0: offset(10), U0: offset(7)})
        cluster.coordinator.on_partitions_deleted([T0])
        assert fetched(cluster, T0, U0, stable=True) == {T0: -1, U0: None}
        end_txn(cluster, PID, committed=True)
        assert fetched(cluster, T0, U0) == {T0: -1, U0: 7}

    run(scenario)


def test_unloaded_group_forgets_its_producers(tmp_path):
    """The partition moves away before the marker: nothing is completed here (the new
    coordinator's load does it); leading it again reloads the still-open transaction."""

    async def scenario() -> None:
        cluster = await led(tmp_path)
        txn_commit(cluster, {T0: offset(10)})
        cluster.resign(G_PARTITION, 2)
        assert not cluster.manager.is_group_open_for_producer(PID, GROUP)
        cluster.coordinator.handle_txn_completion(PID, [G_PARTITION], True)
        cluster.elect(G_PARTITION, 3)
        await cluster.loaded()
        assert fetched(cluster, T0, stable=True) == {T0: None}
        end_txn(cluster, PID, committed=True)
        assert fetched(cluster, T0, stable=True) == {T0: 10}

    run(scenario)


# --- checks and error codes ---------------------------------------------------------------------


def test_coordinator_errors(tmp_path):
    async def scenario() -> None:
        cluster = await led(tmp_path)
        assert txn_commit(cluster, {T0: offset(1)}, group="") == {T0: E.INVALID_GROUP_ID}
        assert txn_commit(cluster, {T0: offset(1)}, group=UNLED_GROUP) == {T0: E.NOT_COORDINATOR}
        too_large = "x" * 4097
        assert txn_commit(cluster, {T0: offset(1, too_large), T1: offset(2)}) == {
            T0: E.OFFSET_METADATA_TOO_LARGE, T1: E.NONE,
        }
        assert txn_commit(cluster, {T0: offset(1, too_large)}, pid=OTHER_PID) == {T0: E.OFFSET_METADATA_TOO_LARGE}
        assert not cluster.manager.is_group_open_for_producer(OTHER_PID, GROUP)

        cluster.manager.hold()
        cluster.resign(G_PARTITION, 2)
        cluster.elect(G_PARTITION, 3)
        await cluster.manager.held()
        assert txn_commit(cluster, {T0: offset(1)}) == {T0: E.COORDINATOR_LOAD_IN_PROGRESS}
        await cluster.loaded()

    run(scenario)


def test_kip447_member_fields_fence_commits_of_another_generation(tmp_path):
    """v3's member id, group instance id and generation must be the group's current ones, as for
    OffsetCommit; a request without them (v0-v2) commits whatever the group's state."""

    async def scenario() -> None:
        cluster = await led(tmp_path)
        a = Member(cluster, "a", instance="instance-a")
        await stable_group(cluster, a)
        current = {"member_id": a.member_id, "instance": "instance-a", "generation": a.generation}
        assert txn_commit(cluster, {T0: offset(1)}, **current) == {T0: E.NONE}
        assert txn_commit(cluster, {T0: offset(2)}, **{**current, "generation": a.generation + 1}) == {
            T0: E.ILLEGAL_GENERATION,
        }
        assert txn_commit(cluster, {T0: offset(2)}, **{**current, "member_id": "zombie"}) == {
            T0: E.FENCED_INSTANCE_ID,
        }
        assert txn_commit(cluster, {T0: offset(2)}, member_id="zombie", generation=a.generation) == {
            T0: E.UNKNOWN_MEMBER_ID,
        }
        assert txn_commit(cluster, {T0: offset(2)}, **{**current, "instance": "instance-b"}) == {
            T0: E.UNKNOWN_MEMBER_ID,
        }
        assert txn_commit(cluster, {T0: offset(3)}) == {T0: E.NONE}  # v0-v2: no member fields
        # An unknown group is created Empty; a member of it cannot exist yet.
        assert txn_commit(cluster, {T0: offset(1)}, group="new3", member_id="m", generation=1) == {
            T0: E.UNKNOWN_MEMBER_ID,
        }
        assert cluster.manager.get_group("new3").is_state(GroupState.EMPTY)

    run(scenario)


# --- the API handlers ---------------------------------------------------------------------------


def context(cluster: CoordinatorOverLogs, version: int) -> Any:
    cache = SimpleNamespace(contains=lambda tp: tp.topic == "t" and tp.partition < 2)
    return allowed_context(SimpleNamespace(metadata_cache=cache, group_coordinator=cluster.coordinator,
                                           authorizer=AllowAllAuthorizer()), version)


def txn_request(group: str, partitions: list[tuple[str, int, int]]) -> TxnOffsetCommitRequest:
    topics: dict[str, list[Any]] = {}
    for topic, index, value in partitions:
        topics.setdefault(topic, []).append(TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition(
            partition_index=index, committed_offset=value, committed_leader_epoch=-1, committed_metadata=None))
    return TxnOffsetCommitRequest(
        transactional_id="tx", group_id=group, producer_id=PID, producer_epoch=EPOCH, generation_id=-1,
        member_id="", group_instance_id=None,
        topics=[TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic(name=n, partitions=p) for n, p in topics.items()],
    )


def errors_of(response: Any) -> dict[tuple[str, int], int]:
    return {(t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions}


def test_txn_offset_commit_handler(tmp_path):
    """Unknown topics and partitions answer UNKNOWN_TOPIC_OR_PARTITION, the rest are committed;
    v0-v1 see COORDINATOR_NOT_AVAILABLE for COORDINATOR_LOAD_IN_PROGRESS."""

    async def scenario() -> None:
        cluster = await led(tmp_path)
        request = txn_request(GROUP, [("t", 0, 10), ("t", 7, 1), ("nope", 0, 1)])
        response = txn_offset_commit.handle(context(cluster, 3), request)
        assert errors_of(response) == {("t", 0): E.NONE, ("t", 7): E.UNKNOWN_TOPIC_OR_PARTITION,
                                       ("nope", 0): E.UNKNOWN_TOPIC_OR_PARTITION}
        assert fetched(cluster, T0, stable=True) == {T0: None}

        cluster.manager.hold()
        cluster.resign(G_PARTITION, 2)
        cluster.elect(G_PARTITION, 3)
        await cluster.manager.held()
        request = txn_request(GROUP, [("t", 0, 10)])
        assert errors_of(txn_offset_commit.handle(context(cluster, 2), request)) == {
            ("t", 0): E.COORDINATOR_LOAD_IN_PROGRESS,
        }
        assert errors_of(txn_offset_commit.handle(context(cluster, 1), request)) == {
            ("t", 0): E.COORDINATOR_NOT_AVAILABLE,
        }
        assert errors_of(txn_offset_commit.error_response(request, 0, E.COORDINATOR_LOAD_IN_PROGRESS)) == {
            ("t", 0): E.COORDINATOR_NOT_AVAILABLE,
        }
        await cluster.loaded()

    run(scenario)


def test_offset_fetch_require_stable(tmp_path):
    """OffsetFetch v7+ with RequireStable: UNSTABLE_OFFSET_COMMIT (88) and offset -1 for a
    partition with a pending commit; without it (or before v7), the committed offset."""

    async def scenario() -> None:
        cluster = await led(tmp_path)
        plain_commit(cluster, {T0: offset(5), T1: offset(6)})
        txn_commit(cluster, {T0: offset(10)})
        topics = [OffsetFetchRequest.OffsetFetchRequestTopic(name="t", partition_indexes=[0, 1])]

        def partitions(version: int, stable: bool) -> dict[int, tuple[int, int]]:
            request = OffsetFetchRequest(group_id=GROUP, topics=topics, require_stable=stable)
            response = offset_fetch.handle(context(cluster, version), request)
            return {p.partition_index: (p.committed_offset, p.error_code) for t in response.topics for p in t.partitions}

        assert partitions(7, True) == {0: (-1, E.UNSTABLE_OFFSET_COMMIT), 1: (6, E.NONE)}
        assert partitions(7, False) == {0: (5, E.NONE), 1: (6, E.NONE)}
        assert partitions(6, True) == {0: (5, E.NONE), 1: (6, E.NONE)}  # no RequireStable before v7

        group = OffsetFetchRequest.OffsetFetchRequestGroup(
            group_id=GROUP, topics=[OffsetFetchRequest.OffsetFetchRequestTopics(name="t", partition_indexes=[0, 1])])
        response = offset_fetch.handle(context(cluster, 8), OffsetFetchRequest(groups=[group], require_stable=True))
        [answer] = response.groups
        assert {p.partition_index: p.error_code for t in answer.topics for p in t.partitions} == {
            0: E.UNSTABLE_OFFSET_COMMIT, 1: E.NONE,
        }
        end_txn(cluster, PID, committed=True)
        assert partitions(7, True) == {0: (10, E.NONE), 1: (6, E.NONE)}

    run(scenario)


# --- loading ------------------------------------------------------------------------------------


def write_txn(topic: OffsetsTopic, index: int, pid: int, records: list[tuple[bytes, bytes | None]]) -> None:
    batch = _native.build_batch(records, NOW, producer_id=pid, producer_epoch=EPOCH, base_sequence=0,
                                transactional=True)
    topic.logs[index].append_as_leader(memoryview(bytearray(batch)), 0, NOW, AppendOrigin.COORDINATOR)


def test_load_completes_committed_drops_aborted_and_keeps_open_transactions(tmp_path):
    """In g's partition: producer 1 commits t-0 (committed), producer 2 commits t-1 (aborted),
    producer 3 commits u-0 (no marker yet); a plain commit of t-1 came before producer 2's. A
    committed transaction's offset older in the log than a plain commit does not replace it."""

    async def scenario() -> None:
        cluster = CoordinatorOverLogs(tmp_path)
        topic = cluster.topic
        topic.write(G_PARTITION, [commit(GROUP, 1, T0), commit(GROUP, 2, T1)])
        write_txn(topic, G_PARTITION, 1, [commit(GROUP, 100, T0)])
        write_txn(topic, G_PARTITION, 2, [commit(GROUP, 200, T1)])
        write_txn(topic, G_PARTITION, 3, [commit(GROUP, 300, U0)])
        write_txn(topic, G_PARTITION, 4, [commit(GROUP, 400, TopicPartition("u", 1))])
        topic.write(G_PARTITION, [commit(GROUP, 401, TopicPartition("u", 1))])  # after producer 4's
        marker(topic, G_PARTITION, 1, committed=True)
        marker(topic, G_PARTITION, 2, committed=False)
        marker(topic, G_PARTITION, 4, committed=True)
        write_txn(topic, G_PARTITION, 5, [commit("w", 5, T0)])  # w: a group with only pending offsets
        cluster.elect(G_PARTITION, 1)
        await cluster.loaded()

        u1 = TopicPartition("u", 1)
        assert fetched(cluster, T0, T1, U0, u1) == {T0: 100, T1: 2, U0: -1, u1: 401}
        assert fetched(cluster, T0, T1, U0, u1, stable=True) == {T0: 100, T1: 2, U0: None, u1: 401}
        assert set(cluster.group.pending_txn_offset_commits) == {3}
        pending = cluster.manager.get_group("w")  # same partition as g
        assert pending is not None and pending.is_state(GroupState.EMPTY) and not pending.offsets
        assert cluster.manager.is_group_open_for_producer(3, GROUP)

        end_txn(cluster, 3, committed=True)  # the open transaction commits after the load
        assert fetched(cluster, U0, stable=True) == {U0: 300}
        end_txn(cluster, 5, committed=False)
        assert pending.pending_txn_offset_commits == {}

        # Reloaded with every marker now in the log, the same offsets come back.
        cluster.resign(G_PARTITION, 2)
        cluster.elect(G_PARTITION, 3)
        await cluster.loaded()
        assert fetched(cluster, T0, T1, U0, u1, stable=True) == {T0: 100, T1: 2, U0: 300, u1: 401}
        assert cluster.manager.get_group("w") is None

    run(scenario)


def record(group: str, tp: TopicPartition, value: int | None) -> tuple[bytes, bytes | None]:
    key = OffsetCommitKey(group, tp.topic, tp.partition).encode()
    return key, None if value is None else OffsetAndMetadata(value, commit_timestamp=NOW).encode()


def batch(base: int, records: list[tuple[bytes, bytes | None]], pid: int = -1, transactional: bool = False) -> Any:
    return (base, pid, EPOCH if pid >= 0 else -1, transactional, -1,
            [(base + i, NOW, key, value) for i, (key, value) in enumerate(records)])


def control(base: int, pid: int, committed: bool) -> Any:
    return (base, pid, EPOCH, True, 1 if committed else 0, [])


def test_load_walk_of_batches():
    """The batch walk alone (as ``read_record_batches`` gives batches): tombstones in a
    transaction remove only that transaction's pending offset; a marker ends only its
    producer's transaction; a commit marker keeps a later plain commit; pending offsets carry
    their batch's offset."""
    load = _PartitionLoad()
    tp = offsets_tp(G_PARTITION)
    load.apply_batches([
        batch(0, [record(GROUP, T0, 1)]),
        batch(1, [record(GROUP, T0, 10), record(GROUP, T1, 11)], pid=7, transactional=True),
        batch(3, [record(GROUP, T1, None)], pid=7, transactional=True),  # tombstone inside the transaction
        batch(4, [record(GROUP, U0, 20)], pid=8, transactional=True),
        batch(5, [record(GROUP, T0, 2)]),  # plain, after producer 7's commit of t-0
        control(6, 7, committed=True),
        batch(7, [record(GROUP, T1, 12)], pid=9, transactional=True),
        control(8, 9, committed=False),
        batch(9, [record(GROUP, T1, 30)], pid=8, transactional=True),  # 8 again, still open
    ], tp)
    assert {t: r.offset.offset for t, r in load.offsets[GROUP].items()} == {T0: 2}
    assert load.pending == {8: {(GROUP, U0): CommitRecord(4, offset(20)), (GROUP, T1): CommitRecord(9, offset(30))}}
    load.rebuild()
    [group] = load.groups
    assert group.offsets == {T0: offset(2)} and group.offset_batch_offsets == {T0: 5}
    assert group.pending_txn_offset_commits == {8: {U0: CommitRecord(4, offset(20)), T1: CommitRecord(9, offset(30))}}
