"""Partition reassignment (KIP-455) in the controller, over the in-memory multi-broker store and
recording channels of test_controller: Kafka 3.6's onPartitionReassignment steps (U, A, B), the
leader move, the removed replicas stopped then deleted, cancellation, a replaced reassignment,
failover mid-reassignment, deletion waiting for a reassignment, ListPartitionReassignments, and
Kafka's per-partition errors and messages. The requests each broker receives are asserted."""

from __future__ import annotations

import uuid

from pybroker.common.errors import ErrorCode
from pybroker.common.topic import FullReplicaAssignment
from pybroker.controller.local_store import LocalStore
from pybroker.controller.requests import LeaderAndIsr, StopReplica, UpdateMetadata
from pybroker.types import TopicPartition
from tests.unit.test_controller import (
    T0,
    alter,
    broker,
    leader_and_isr,
    proposal,
    run_cluster,
    settle,
    successor,
)


def stops(sent: list[tuple[int, object]]) -> list[tuple[int, TopicPartition, bool]]:
    """Every StopReplica partition sent, in order: (broker, partition, delete)."""
    return [(b, p.topic_partition, p.delete) for b, r in sent if isinstance(r, StopReplica) for p in r.partitions]


def leader_and_isr_states(sent, broker_id):
    return [s for b, r in sent if b == broker_id and isinstance(r, LeaderAndIsr) for s in r.partition_states]


async def create(store, controller, assignment: list[list[int]]) -> None:
    await store.create_topic("t", uuid.uuid4(), assignment, {})
    await settle(controller)


async def reassign(controller, targets):
    answer = await controller.alter_partition_reassignments(targets)
    await settle(controller)
    return answer


def stored(store, index=0) -> FullReplicaAssignment:
    return store._topics["t"].full_assignment(index)


def test_growing_rf1_to_rf3_adds_replicas_then_completes_when_they_join_the_isr(tmp_path):
    async def scenario(store, controller, recorder):
        await create(store, controller, [[1]])
        recorder.take()
        answer = await reassign(controller, {T0: [1, 2, 3]})
        assert answer.error == ErrorCode.NONE and answer.results == {T0: (ErrorCode.NONE, None)}
        # U: RS = TRS + ORS, AR = [2, 3] in the store and the context
        assert stored(store) == FullReplicaAssignment((1, 2, 3), (2, 3), ())
        assert controller.context.topics["t"].full_assignment(0) == stored(store)
        # A: leader epoch + 1, LeaderAndIsr with the new RS to every replica of RS
        sent = recorder.take()
        assert leader_and_isr(sent) == {b: {T0: (1, 1, [1])} for b in (1, 2, 3)}
        state = leader_and_isr_states(sent, 2)[0]
        assert (state.replicas, state.adding_replicas, state.removing_replicas) == ([1, 2, 3], [2, 3], [])
        assert stops(sent) == []
        listed = await controller.list_partition_reassignments(None)
        assert listed.reassignments == {T0: FullReplicaAssignment((1, 2, 3), (2, 3), ())}
        # One new replica in sync: not complete yet
        await alter(controller, 1, proposal(T0, 1, [1, 2], 1))
        assert stored(store).is_being_reassigned
        recorder.take()
        # Both in sync: B (leader 1 stays, its epoch bumped with RS = TRS), the store gets [1, 2, 3]
        await alter(controller, 1, proposal(T0, 1, [1, 2, 3], 2))
        sent = recorder.take()
        assert leader_and_isr(sent) == {b: {T0: (1, 2, [1, 2, 3])} for b in (1, 2, 3)}
        assert leader_and_isr_states(sent, 1)[0].adding_replicas == []
        assert stops(sent) == []
        assert stored(store) == FullReplicaAssignment((1, 2, 3))
        assert update_metadata_partition(sent, T0).replicas == [1, 2, 3]
        assert (await controller.list_partition_reassignments(None)).reassignments == {}

    run_cluster(tmp_path, scenario)


def update_metadata_partition(sent, tp):
    states = [s for _, r in sent if isinstance(r, UpdateMetadata) for s in r.partition_states if s.topic_partition == tp]
    return states[-1]


def test_moving_away_from_the_leader_elects_a_target_replica_and_deletes_the_removed_one(tmp_path):
    async def scenario(store, controller, recorder):
        await create(store, controller, [[1, 2]])
        recorder.take()
        await reassign(controller, {T0: [2, 3]})
        assert stored(store) == FullReplicaAssignment((2, 3, 1), (3,), (1,))
        sent = recorder.take()
        assert leader_and_isr(sent) == {b: {T0: (1, 1, [1, 2])} for b in (1, 2, 3)}
        # Metadata shows the full RS while the move runs
        assert update_metadata_partition(sent, T0).replicas == [2, 3, 1]
        await alter(controller, 1, proposal(T0, 1, [1, 2, 3], 1))
        sent = recorder.take()
        received = leader_and_isr(sent)
        # B3: leader 1 is not in TRS: the first live in-sync replica of TRS (2) leads, ISR unchanged,
        # told to TRS only; B4: 1 leaves the ISR (epoch + 1), TRS told again.
        assert received[2] == received[3] == {T0: (2, 3, [2, 3])}
        assert [s.leader_epoch for s in leader_and_isr_states(sent, 2)] == [2, 3]
        assert 1 not in received
        # B4, B5: StopReplica without then with deletion to the removed replica
        assert stops(sent) == [(1, T0, False), (1, T0, True)]
        p = controller.context.topics["t"].partitions[0]
        assert (p.replicas, p.leader, p.isr) == ([2, 3], 2, [2, 3])
        assert stored(store) == FullReplicaAssignment((2, 3))
        assert store._topics["t"].partitions[0].replicas == [2, 3]
        assert update_metadata_partition(sent, T0).replicas == [2, 3]

    run_cluster(tmp_path, scenario)


def test_shrinking_to_replicas_already_in_sync_completes_at_once(tmp_path):
    async def scenario(store, controller, recorder):
        await create(store, controller, [[1, 2, 3]])
        recorder.take()
        answer = await reassign(controller, {T0: [2, 1]})
        assert answer.results == {T0: (ErrorCode.NONE, None)}
        sent = recorder.take()
        assert stops(sent) == [(3, T0, False), (3, T0, True)]
        assert stored(store) == FullReplicaAssignment((2, 1))
        p = controller.context.topics["t"].partitions[0]
        assert (p.replicas, p.leader, p.isr) == ([2, 1], 1, [1, 2])

    run_cluster(tmp_path, scenario)


def test_cancelling_reverts_to_the_original_replicas_and_deletes_the_adding_ones(tmp_path):
    async def scenario(store, controller, recorder):
        await create(store, controller, [[1]])
        await reassign(controller, {T0: [1, 2, 3]})
        await alter(controller, 1, proposal(T0, 1, [1, 2], 1))
        recorder.take()
        answer = await reassign(controller, {T0: None})
        assert answer.results == {T0: (ErrorCode.NONE, None)}
        sent = recorder.take()
        assert stops(sent) == [(2, T0, False), (3, T0, False), (2, T0, True), (3, T0, True)]
        p = controller.context.topics["t"].partitions[0]
        assert (p.replicas, p.leader, p.isr) == ([1], 1, [1])
        assert stored(store) == FullReplicaAssignment((1,))
        assert (await controller.list_partition_reassignments([T0])).reassignments == {}
        # Nothing left to cancel
        answer = await reassign(controller, {T0: None})
        assert answer.results == {T0: (ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, "No partition reassignment is in progress.")}

    run_cluster(tmp_path, scenario)


def test_a_new_reassignment_replaces_the_one_under_way(tmp_path):
    async def scenario(store, controller, recorder):
        await create(store, controller, [[1]])
        await reassign(controller, {T0: [1, 2]})
        recorder.take()
        await reassign(controller, {T0: [1, 3]})
        # ORS stays [1]; the replica 2 that was being added is stopped and deleted
        assert stored(store) == FullReplicaAssignment((1, 3), (3,), ())
        sent = recorder.take()
        assert stops(sent) == [(2, T0, False), (2, T0, True)]
        assert set(leader_and_isr(sent)) == {1, 3}

    run_cluster(tmp_path, scenario)


def test_errors_are_kafkas(tmp_path):
    async def scenario(store, controller, recorder):
        await create(store, controller, [[1, 2]])
        unknown, missing = TopicPartition("t", 7), TopicPartition("nope", 0)
        answer = await reassign(controller, {
            T0: [], TopicPartition("t", 1): [1, 1], TopicPartition("t", 2): [1, -1],
            TopicPartition("t", 3): [1, 4, 5], unknown: [1, 2], missing: None,
        })
        assert answer.results == {
            T0: (ErrorCode.INVALID_REPLICA_ASSIGNMENT, "Empty replica list specified in partition reassignment."),
            TopicPartition("t", 1): (ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                     "Duplicate replica ids in partition reassignment replica list: ArrayBuffer(1, 1)"),
            TopicPartition("t", 2): (ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                     "Invalid broker id in replica list: ArrayBuffer(1, -1)"),
            TopicPartition("t", 3): (ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                     "Replica assignment has brokers that are not alive. Replica list: "
                                     "ArrayBuffer(1, 4, 5), live broker list: Set(1, 2, 3)"),
            unknown: (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist."),
            missing: (ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, "No partition reassignment is in progress."),
        }
        assert not stored(store).is_being_reassigned
        # A topic queued for deletion is refused (Kafka: UNKNOWN_TOPIC_OR_PARTITION)
        controller.context.topics_being_deleted.add("t")
        answer = await reassign(controller, {T0: [2, 3]})
        assert answer.results == {T0: (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist.")}
        controller.context.topics_being_deleted.discard("t")
        # Only the active controller answers
        controller._resign()
        answer = await reassign(controller, {T0: [2, 3]})
        assert (answer.error, answer.results) == (ErrorCode.NOT_CONTROLLER, {})
        assert (await controller.list_partition_reassignments(None)).error == ErrorCode.NOT_CONTROLLER

    run_cluster(tmp_path, scenario)


def test_a_new_controller_resumes_a_reassignment_from_the_store(tmp_path):
    async def scenario(store, controller, recorder):
        await create(store, controller, [[1, 2]])
        await reassign(controller, {T0: [2, 3]})
        await controller.shutdown()
        # The file alone carries the reassignment (a fresh store reads it back)
        reread = LocalStore(str(tmp_path), "test-cluster")
        assert reread._topics["t"].full_assignment(0) == FullReplicaAssignment((2, 3, 1), (3,), (1,))
        await reread.close()
        recorder.take()
        async with successor(store, recorder) as new:
            sent = recorder.take()
            assert new.context.topics["t"].full_assignment(0) == FullReplicaAssignment((2, 3, 1), (3,), (1,))
            # resumed (phase A again): leader epoch + 1 to every replica of RS
            assert {b: s[T0][1] for b, s in leader_and_isr(sent).items()} == {1: 2, 2: 2, 3: 2}
            assert (await new.list_partition_reassignments(None)).reassignments.keys() == {T0}
            epoch = new.context.topics["t"].partitions[0].partition_epoch
            await alter(new, 1, proposal(T0, 2, [1, 2, 3], epoch))
            sent = recorder.take()
            assert stops(sent) == [(1, T0, False), (1, T0, True)]
            assert stored(store) == FullReplicaAssignment((2, 3))
            p = new.context.topics["t"].partitions[0]
            assert (p.leader, p.isr) == (2, [2, 3])

    run_cluster(tmp_path, scenario)


def test_a_target_broker_coming_back_resumes_and_deletion_waits_for_the_reassignment(tmp_path):
    async def scenario(store, controller, recorder):
        await create(store, controller, [[1]])
        await reassign(controller, {T0: [1, 3]})
        store.unregister(3)
        await settle(controller)
        await store.mark_topic_for_deletion("t")
        await settle(controller)
        recorder.take()
        assert "t" in controller.context.topics  # waits for the reassignment
        await store.register_broker(broker(3))
        await settle(controller)
        sent = recorder.take()
        assert leader_and_isr(sent)[3][T0][1] == 2  # resumed: leader epoch + 1 again
        assert "t" in controller.context.topics
        epoch = controller.context.topics["t"].partitions[0].partition_epoch
        await alter(controller, 1, proposal(T0, 2, [1, 3], epoch))
        await settle(controller)  # the deletion's StopReplica answers
        await settle(controller)
        # completed, then the deletion went ahead
        assert "t" not in controller.context.topics

    run_cluster(tmp_path, scenario)


def test_a_single_broker_reassigns_rf1_to_itself(tmp_path):
    """The zero-config broker's own case: [1] → [1] answers NONE and changes nothing but the
    leader epoch; another broker is not alive."""
    async def scenario(store, controller, recorder):
        for b in (2, 3):
            store.unregister(b)
        await settle(controller)
        await create(store, controller, [[1]])
        recorder.take()
        assert (await reassign(controller, {T0: [1]})).results == {T0: (ErrorCode.NONE, None)}
        assert stored(store) == FullReplicaAssignment((1,))
        assert leader_and_isr(recorder.take()) == {1: {T0: (1, 1, [1])}}
        answer = await reassign(controller, {T0: [2]})
        assert answer.results[T0][0] == ErrorCode.INVALID_REPLICA_ASSIGNMENT

    run_cluster(tmp_path, scenario)
