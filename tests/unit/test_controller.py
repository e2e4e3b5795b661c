"""The controller's state changes over an in-memory multi-broker store and recording channels:
new partitions, broker failure (offline election, ISR removal, "an ISR never becomes empty"),
broker start-up, unclean election, topic deletion, leaders' ISR changes (AlterPartition),
ElectLeaders (preferred and unclean) and the automatic preferred-leader rebalance on a mock
clock. Kafka's rules as cluster.md §2.4-2.5, §2.10 and §2.11 state them; the requests each broker
would receive are asserted, in order."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator

from pybroker.common.cluster import BrokerEndpoint, LiveBroker
from pybroker.common.errors import ErrorCode
from pybroker.common.topic import PartitionAssignment
from pybroker.controller.alter_partition import (
    AlterPartition,
    AlterPartitionAnswer,
    IsrProposal,
    PartitionResult,
)
from pybroker.controller.channel import ControllerChannelManager
from pybroker.controller.controller import (
    AUTO_REBALANCE_FIRST_DELAY_MS,
    AutoLeaderRebalance,
    Controller,
)
from pybroker.controller.election import ElectionType
from pybroker.controller.local_store import LocalStore
from pybroker.controller.requests import ControlResponse, LeaderAndIsr, StopReplica, UpdateMetadata
from pybroker.controller.store import StoreListener
from pybroker.types import TopicPartition
from tests.mock_time import MockScheduler, MockTime


class ClusterStore(LocalStore):
    """LocalStore with several brokers, which tests register and unregister."""

    def __init__(self, directory: str) -> None:
        super().__init__(directory, "test-cluster", StoreListener())
        self.epochs: dict[int, int] = {}
        self._next_epoch = 100
        self.controller: int | None = None

    async def try_become_controller(self, broker_id: int) -> int | None:
        if self.controller not in (None, broker_id):
            return None
        self.controller = broker_id
        return await super().try_become_controller(broker_id)

    async def controller_id(self) -> int | None:
        return self.controller

    async def register_broker(self, broker: LiveBroker) -> int:
        self._next_epoch += 1
        self._brokers[broker.broker_id] = broker
        self.epochs[broker.broker_id] = self._next_epoch
        self.listener.on_brokers_changed()
        return self._next_epoch

    def unregister(self, broker_id: int) -> None:
        del self._brokers[broker_id]
        del self.epochs[broker_id]
        self.listener.on_brokers_changed()

    async def live_brokers(self) -> dict[int, tuple[LiveBroker, int]]:
        return {b: (broker, self.epochs[b]) for b, broker in self._brokers.items()}


class Recorder:
    """What every broker received, as (broker, request)."""

    def __init__(self) -> None:
        self.sent: list[tuple[int, object]] = []
        # per-partition errors a broker answers a LeaderAndIsr with (KIP-112 tests)
        self.leader_and_isr_errors: dict[int, dict[TopicPartition, ErrorCode]] = {}

    def connect(self, broker: LiveBroker) -> RecordingChannel:
        return RecordingChannel(broker.broker_id, self)

    def take(self) -> list[tuple[int, object]]:
        sent, self.sent = self.sent, []
        return sent


class RecordingChannel:
    def __init__(self, broker_id: int, recorder: Recorder) -> None:
        self.broker_id, self.recorder = broker_id, recorder

    async def send(self, request: object) -> ControlResponse:
        self.recorder.sent.append((self.broker_id, request))
        errors = self.recorder.leader_and_isr_errors.get(self.broker_id, {})
        if isinstance(request, LeaderAndIsr) and errors:
            mine = {s.topic_partition for s in request.partition_states}
            return ControlResponse(partition_errors={tp: e for tp, e in errors.items() if tp in mine})
        return ControlResponse()

    async def close(self) -> None:
        pass


def broker(broker_id: int) -> LiveBroker:
    return LiveBroker(broker_id, (BrokerEndpoint("PLAINTEXT", "127.0.0.1", 9000 + broker_id),))


async def settle(controller: Controller) -> None:
    await controller.idle()
    await controller.channels.flush()


def leader_and_isr(sent: list[tuple[int, object]]) -> dict[int, dict[TopicPartition, tuple[int, int, list[int]]]]:
    """Per broker: partition → (leader, leader epoch, ISR) of the LeaderAndIsr it received."""
    out: dict[int, dict[TopicPartition, tuple[int, int, list[int]]]] = {}
    for broker_id, request in sent:
        if isinstance(request, LeaderAndIsr):
            for s in request.partition_states:
                out.setdefault(broker_id, {})[s.topic_partition] = (s.leader, s.leader_epoch, s.isr)
    return out


def update_metadata_to(sent: list[tuple[int, object]]) -> set[int]:
    return {b for b, r in sent if isinstance(r, UpdateMetadata)}


def run_cluster(tmp_path, scenario, **controller_options) -> None:
    async def main() -> None:
        store = ClusterStore(str(tmp_path))
        recorder = Recorder()
        controller = Controller(1, store, ControllerChannelManager(recorder.connect), **controller_options)
        controller.listener(store.listener)
        for b in (1, 2, 3):
            await store.register_broker(broker(b))
        controller.start()
        await settle(controller)
        recorder.take()
        try:
            await scenario(store, controller, recorder)
        finally:
            await controller.shutdown()
            await store.close()

    asyncio.run(main())


T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)


@contextlib.asynccontextmanager
async def successor(store: ClusterStore, recorder: Recorder) -> AsyncIterator[Controller]:
    """A new controller on ``store`` (the first one was shut down), settled; shut down after."""
    controller = Controller(1, store, ControllerChannelManager(recorder.connect))
    controller.listener(store.listener)
    controller.start()
    await settle(controller)
    try:
        yield controller
    finally:
        await controller.shutdown()


async def create(store: ClusterStore, controller: Controller, configs: dict[str, str] | None = None) -> None:
    await store.create_topic("t", uuid.uuid4(), [[1, 2, 3], [2, 3, 1]], configs or {})
    await settle(controller)


def test_new_partitions_lead_on_their_first_live_replica(tmp_path):
    async def scenario(store, controller, recorder):
        await create(store, controller)
        sent = recorder.take()
        received = leader_and_isr(sent)
        assert received[1] == {T0: (1, 0, [1, 2, 3]), T1: (2, 0, [2, 3, 1])}
        assert received[2] == received[3] == received[1]
        assert update_metadata_to(sent) == {1, 2, 3}
        # LeaderAndIsr before UpdateMetadata, per broker
        for b in (1, 2, 3):
            kinds = [type(r).__name__ for x, r in sent if x == b]
            assert kinds == ["LeaderAndIsr", "UpdateMetadata"]

    run_cluster(tmp_path, scenario)


def test_a_new_topic_whose_state_exists_already_keeps_it(tmp_path):
    """Every partition new to the controller is created, whatever was read for it (Kafka's
    onNewPartitionCreation), so that a deposed controller's attempt is fenced. One that turns out
    to have a state already (NODEEXISTS) keeps it untouched: the controller takes it as it is
    and sends it to the partition's live replicas (not as new), as a failover sends the states
    it finds; the others are created as usual."""
    async def scenario(store, controller, recorder):
        held: list[object] = []
        notify, store.listener.on_topics_changed = store.listener.on_topics_changed, held.append
        await store.create_topic("t", uuid.uuid4(), [[1, 2, 3], [2, 3, 1]], {})
        await store.create_partition_states(controller.context.epoch, {"t": {0: PartitionAssignment(
            [1, 2, 3], 3, 4, [3, 1])}})
        store.listener.on_topics_changed = notify
        for names in held:
            notify(names)
        await settle(controller)
        assert controller.active
        sent = recorder.take()
        received = leader_and_isr(sent)
        assert received[1] == received[2] == received[3] == {T0: (3, 4, [3, 1]), T1: (2, 0, [2, 3, 1])}
        is_new = {s.topic_partition: s.is_new for _, r in sent if isinstance(r, LeaderAndIsr) for s in r.partition_states}
        assert is_new == {T0: False, T1: True}
        assert update_metadata_to(sent) == {1, 2, 3}
        stored = (await store.read_topics(["t"]))["t"].partitions
        assert [(p.leader, p.leader_epoch, p.isr, p.partition_epoch) for p in stored] == [
            (3, 4, [3, 1], 0), (2, 0, [2, 3, 1], 0)]
        assert controller.context.topics["t"].partitions == stored

    run_cluster(tmp_path, scenario)


def test_an_expansion_bumps_the_existing_partitions_and_records_their_epochs(tmp_path):
    """KIP-253: partitions added to a topic record the leader epoch each existing partition had,
    and those partitions move to the next epoch (same leader and ISR), so that a consumer of an
    added partition can wait until the partition it splits from is consumed past that epoch."""
    async def scenario(store, controller, recorder):
        await create(store, controller)
        await store.add_partitions("t", [[1, 2, 3], [2, 3, 1], [3, 1, 2]])
        await settle(controller)
        received = leader_and_isr(recorder.take())
        assert received[1] == {T0: (1, 1, [1, 2, 3]), T1: (2, 1, [2, 3, 1]), TopicPartition("t", 2): (3, 0, [3, 1, 2])}
        topic = (await store.read_topics(["t"]))["t"]
        assert topic.leader_epochs_after_creation == {2: {0: 0, 1: 0}}
        assert (topic.initial_partition_count, topic.undeleted_partition_count) == (2, 3)
        assert [p.leader_epoch for p in topic.partitions] == [1, 1, 0]

        # A second expansion records the epochs as they are then, and bumps all three.
        await store.add_partitions("t", [[1, 2, 3], [2, 3, 1], [3, 1, 2], [1, 2, 3]])
        await settle(controller)
        topic = (await store.read_topics(["t"]))["t"]
        assert topic.leader_epochs_after_creation == {2: {0: 0, 1: 0}, 3: {0: 1, 1: 1, 2: 0}}
        assert [p.leader_epoch for p in topic.partitions] == [2, 2, 1, 0]
        assert controller.context.topics["t"].leader_epochs_after_creation == topic.leader_epochs_after_creation

    run_cluster(tmp_path, scenario)


def test_a_shrink_records_the_survivors_epochs_then_bumps_every_partition(tmp_path):
    """KIP-253: partitions a shrink marks for deletion record the epoch every survivor had, and
    every partition moves to the next epoch with LeaderAndIsr carrying the new count, so that
    each leader refuses producers of the old count from then on; nothing is removed while the
    marked partitions hold records."""
    sizes: dict[TopicPartition, tuple[int, int]] = {}

    async def log_offsets(leader, partitions):
        return {tp: sizes.get(tp, (0, 5)) for tp in partitions}

    async def scenario(store, controller, recorder):
        await create(store, controller)
        await store.add_partitions("t", [[1, 2, 3], [2, 3, 1], [3, 1, 2], [1, 2, 3]])
        await settle(controller)
        recorder.take()
        await store.shrink_partitions("t", 2)
        await settle(controller)
        sent = recorder.take()
        received = leader_and_isr(sent)
        assert received[1] == {T0: (1, 2, [1, 2, 3]), T1: (2, 2, [2, 3, 1]),
                               TopicPartition("t", 2): (3, 1, [3, 1, 2]), TopicPartition("t", 3): (1, 1, [1, 2, 3])}
        counts = {s.undeleted_partition_count for _, r in sent if isinstance(r, LeaderAndIsr) for s in r.partition_states}
        assert counts == {2}
        topic = (await store.read_topics(["t"]))["t"]
        assert topic.leader_epochs_before_deletion == {2: {0: 1, 1: 1}, 3: {0: 1, 1: 1}}
        assert (topic.undeleted_partition_count, len(topic.partitions)) == (2, 4)
        # The brokers' caches learn the maps (for PartitionLeaderEpochsForPartitions).
        cached = [s for _, r in sent if isinstance(r, UpdateMetadata) for s in r.partition_states
                  if s.topic_partition == TopicPartition("t", 3)]
        assert cached and all(s.leader_epochs_before_deletion == {0: 1, 1: 1} for s in cached)
        assert cached[0].leader_epochs_after_creation == {0: 0, 1: 0}

        # Drained from the tail: 3 first, then 2; a drained 2 below an undrained 3 waits.
        sizes[TopicPartition("t", 2)] = (5, 5)
        await scheduler.advance(1000)
        await asyncio.sleep(0.05)
        await settle(controller)
        assert len((await store.read_topics(["t"]))["t"].partitions) == 4
        sizes[TopicPartition("t", 3)] = (9, 9)
        await scheduler.advance(1000)
        await asyncio.sleep(0.05)
        await settle(controller)
        topic = (await store.read_topics(["t"]))["t"]
        assert (len(topic.partitions), topic.undeleted_partition_count, topic.leader_epochs_before_deletion) == (2, 2, {})
        assert topic.leader_epochs_after_creation == {}
        sent = recorder.take()
        stops = {(b, p.topic_partition.partition) for b, r in sent if isinstance(r, StopReplica)
                 for p in r.partitions if p.delete}
        assert stops == {(b, p) for b in (1, 2, 3) for p in (2, 3)}
        gone = {s.topic_partition.partition for _, r in sent if isinstance(r, UpdateMetadata)
                for s in r.partition_states if s.leader == -2}
        assert gone == {2, 3}

    scheduler = MockScheduler(MockTime())
    run_cluster(tmp_path, scenario, scheduler=scheduler, log_offsets=log_offsets)


def test_a_failover_after_a_shrink_was_recorded_bumps_the_survivors(tmp_path):
    """Maps recorded but the survivors not bumped (the controller died in between): the next
    controller bumps them, and keeps the recorded epochs (never a later one)."""
    async def scenario(store, controller, recorder):
        await create(store, controller)
        await store.add_partitions("t", [[1, 2, 3], [2, 3, 1], [3, 1, 2]])
        await settle(controller)
        await controller.shutdown()
        await store.shrink_partitions("t", 2)
        topic = (await store.read_topics(["t"]))["t"]
        topic.leader_epochs_before_deletion = {2: {0: 1, 1: 1}}
        await store.record_leader_epochs(1, topic, [2])
        async with successor(store, recorder):
            topic = (await store.read_topics(["t"]))["t"]
            assert [p.leader_epoch for p in topic.partitions] == [2, 2, 1]
            assert topic.leader_epochs_before_deletion == {2: {0: 1, 1: 1}}

    run_cluster(tmp_path, scenario)


def test_a_failover_between_the_bump_and_the_creation_bumps_again(tmp_path):
    """Added partitions found without a state by a new controller are an expansion too: the
    existing partitions are bumped (again) and their epochs of then recorded."""
    async def scenario(store, controller, recorder):
        await create(store, controller)
        await controller.shutdown()  # the controller dies; the expansion is written meanwhile
        await store.add_partitions("t", [[1, 2, 3], [2, 3, 1], [3, 1, 2]])
        async with successor(store, recorder):
            topic = (await store.read_topics(["t"]))["t"]
            assert [p.leader_epoch for p in topic.partitions] == [1, 1, 0]
            assert topic.leader_epochs_after_creation == {2: {0: 0, 1: 0}}

    run_cluster(tmp_path, scenario)


def test_a_topic_change_reads_only_the_topics_it_concerns(tmp_path):
    """Kafka's TopicChange / PartitionModifications: a new topic, or partitions added to one,
    makes the controller read that topic, not every topic of the cluster."""
    async def scenario(store, controller, recorder):
        for name in ("a", "b", "c"):
            await store.create_topic(name, uuid.uuid4(), [[1, 2, 3]], {})
        await settle(controller)
        recorder.take()
        reads: list[set[str]] = []
        read_topics = store.read_topics

        async def recording(names):
            reads.append(set(names))
            return await read_topics(names)

        store.read_topics = recording
        await store.create_topic("d", uuid.uuid4(), [[2, 3, 1]], {})
        await settle(controller)
        await store.add_partitions("b", [[1, 2, 3], [3, 1, 2]])
        await settle(controller)
        assert reads == [{"d"}, {"b"}]
        assert len(controller.context.topics["b"].partitions) == 2
        b = controller.context.topics["b"]
        assert (b.initial_partition_count, b.undeleted_partition_count) == (1, 2)  # KIP-253's counts
        # b-0's leader epoch is bumped by the expansion (KIP-253), b-1 starts at epoch 0.
        assert leader_and_isr(recorder.take())[3] == {
            TopicPartition("d", 0): (2, 0, [2, 3, 1]), TopicPartition("b", 0): (1, 1, [1, 2, 3]),
            TopicPartition("b", 1): (3, 0, [3, 1, 2])}

    run_cluster(tmp_path, scenario)


def test_a_dead_leader_is_replaced_by_the_first_live_in_sync_replica(tmp_path):
    async def scenario(store, controller, recorder):
        await create(store, controller)
        recorder.take()
        store.unregister(2)
        await settle(controller)
        sent = recorder.take()
        received = leader_and_isr(sent)
        # t-1 was led by 2: broker 3 is next in assignment order; ISR shrinks to the live members
        assert received[3][T1] == (3, 1, [3, 1])
        # t-0 keeps its leader; 2 leaves its ISR (epoch +1)
        assert received[1][T0] == (1, 1, [1, 3])
        assert 2 not in received and update_metadata_to(sent) == {1, 3}
        state = controller.context.topics["t"].partitions
        assert (state[1].leader, state[1].leader_epoch, state[1].isr) == (3, 1, [3, 1])
        assert state[1].partition_epoch == 1  # one write after the creation

    run_cluster(tmp_path, scenario)


def test_an_isr_never_becomes_empty(tmp_path):
    async def scenario(store, controller, recorder):
        await create(store, controller)
        for b in (2, 3):
            store.unregister(b)
            await settle(controller)
        recorder.take()
        # Broker 1 is the controller's own broker: model its loss through the store alone.
        store.unregister(1)
        await settle(controller)
        state = controller.context.topics["t"].partitions
        assert (state[0].leader, state[0].isr) == (-1, [1])
        assert (state[1].leader, state[1].isr) == (-1, [1])

    run_cluster(tmp_path, scenario)


def test_a_restarted_broker_follows_and_a_leaderless_partition_elects_it(tmp_path):
    async def scenario(store, controller, recorder):
        await store.create_topic("solo", uuid.uuid4(), [[2]], {})
        await settle(controller)
        store.unregister(2)
        await settle(controller)
        assert controller.context.topics["solo"].partitions[0].leader == -1
        recorder.take()
        await store.register_broker(broker(2))
        await settle(controller)
        sent = recorder.take()
        solo = TopicPartition("solo", 0)
        # 2 gets the whole metadata, then the (leaderless) state, then leads again at a new epoch
        assert any(isinstance(r, UpdateMetadata) and r.partition_states for b, r in sent if b == 2)
        assert leader_and_isr(sent)[2][solo][0] == 2
        assert controller.context.topics["solo"].partitions[0].leader == 2

    run_cluster(tmp_path, scenario)


def test_unclean_election_only_where_the_topic_allows_it(tmp_path):
    async def scenario(store, controller, recorder):
        for name, unclean in (("clean", "false"), ("unclean", "true")):
            await store.create_topic(name, uuid.uuid4(), [[2, 3]], {"unclean.leader.election.enable": unclean})
            await settle(controller)
        # 3 drops out of the ISRs (it dies), comes back (not in sync), then the leader 2 dies.
        store.unregister(3)
        await settle(controller)
        await store.register_broker(broker(3))
        await settle(controller)
        store.unregister(2)
        await settle(controller)
        topics = controller.context.topics
        assert (topics["clean"].partitions[0].leader, topics["clean"].partitions[0].isr) == (-1, [2])
        assert (topics["unclean"].partitions[0].leader, topics["unclean"].partitions[0].isr) == (3, [3])

    run_cluster(tmp_path, scenario)


def test_topic_deletion_stops_and_deletes_every_replica(tmp_path):
    async def scenario(store, controller, recorder):
        await create(store, controller)
        recorder.take()
        await store.mark_topic_for_deletion("t")
        await settle(controller)
        await settle(controller)  # the StopReplica answers come back as an event
        sent = recorder.take()
        stops = {b: r for b, r in sent if isinstance(r, StopReplica)}
        assert set(stops) == {1, 2, 3}
        assert all(p.delete and p.leader_epoch == -2 for r in stops.values() for p in r.partitions)
        deleting = [r for _, r in sent if isinstance(r, UpdateMetadata) and r.partition_states]
        assert deleting and all(s.leader == -2 for r in deleting for s in r.partition_states)
        assert "t" not in controller.context.topics and await store.topic_names() == set()

    run_cluster(tmp_path, scenario)


# --- AlterPartition (cluster.md §2.11) -----------------------------------------------------------


def proposal(tp: TopicPartition, leader_epoch: int, isr: list[int], partition_epoch: int, recovery: int = 0):
    return IsrProposal(tp, leader_epoch, tuple(isr), partition_epoch, recovery)


async def alter(controller: Controller, broker_id: int, *proposals: IsrProposal, epoch: int | None = None,
                version: int = 1) -> AlterPartitionAnswer:
    """AlterPartition from ``broker_id`` with its registered broker epoch (unless ``epoch``)."""
    if epoch is None:
        epoch = controller.context.broker_epochs[broker_id]
    answer = await controller.alter_partition(AlterPartition(broker_id, epoch, tuple(proposals)), version)
    await settle(controller)
    return answer


def test_alter_partition_shrink_is_written_and_announced_without_a_new_leader_epoch(tmp_path):
    async def scenario(store, controller, recorder):
        await create(store, controller)
        recorder.take()
        # t-0: leader 1, leader epoch 0, ISR [1, 2, 3], partition epoch 0
        answer = await alter(controller, 1, proposal(T0, 0, [1, 2], 0))
        assert answer.error == ErrorCode.NONE
        assert answer.partitions == {T0: PartitionResult(ErrorCode.NONE, 1, 0, (1, 2), 1)}
        stored = (await store.read_topics(["t"]))["t"].partitions[0]
        assert (stored.leader, stored.leader_epoch, stored.isr, stored.partition_epoch) == (1, 0, [1, 2], 1)
        cached = controller.context.topics["t"].partitions[0]
        assert (cached.isr, cached.partition_epoch) == ([1, 2], 1)
        sent = recorder.take()
        assert not leader_and_isr(sent)  # UpdateMetadata only, as Kafka
        assert update_metadata_to(sent) == {1, 2, 3}
        states = [s for _, r in sent if isinstance(r, UpdateMetadata) for s in r.partition_states]
        assert {(s.topic_partition, tuple(s.isr), s.partition_epoch, s.leader_epoch) for s in states} == {
            (T0, (1, 2), 1, 0)}
        # ... and the expansion back, based on the new partition epoch
        answer = await alter(controller, 1, proposal(T0, 0, [1, 2, 3], 1))
        assert answer.partitions[T0] == PartitionResult(ErrorCode.NONE, 1, 0, (1, 2, 3), 2)


async def spin() -> None:
    """Let every ready task run a few steps (what a paused controller must not use to act)."""
    for _ in range(20):
        await asyncio.sleep(0)


def test_a_controller_that_lost_its_store_connection_acts_on_nothing_until_it_is_back(tmp_path):
    async def scenario(store, controller, recorder):
        store.listener.on_connection_suspended()
        await store.create_topic("t", uuid.uuid4(), [[1, 2, 3], [2, 3, 1]], {})
        await spin()
        assert recorder.take() == [] and controller.active
        assert "t" not in controller.context.topics
        store.listener.on_connection_resumed()
        await settle(controller)
        assert leader_and_isr(recorder.take())[1] == {T0: (1, 0, [1, 2, 3]), T1: (2, 0, [2, 3, 1])}

    run_cluster(tmp_path, scenario)


def test_alter_partition_top_level_fences(tmp_path):
    async def scenario(store, controller, recorder):
        await create(store, controller)
        recorder.take()
        stale = await alter(controller, 1, proposal(T0, 0, [1, 2], 0), epoch=controller.context.broker_epochs[1] - 1)
        assert stale == AlterPartitionAnswer(ErrorCode.STALE_BROKER_EPOCH)
        newer = await alter(controller, 1, proposal(T0, 0, [1, 2], 0), epoch=controller.context.broker_epochs[1] + 1)
        assert newer.error == ErrorCode.STALE_BROKER_EPOCH  # Kafka: any epoch but the registered one
        unknown = await alter(controller, 7, proposal(T0, 0, [1, 2], 0), epoch=5)
        assert unknown.error == ErrorCode.STALE_BROKER_EPOCH
        assert controller.context.topics["t"].partitions[0].partition_epoch == 0
        assert recorder.take() == []
        controller.active = False  # another broker won the election
        assert (await alter(controller, 1, proposal(T0, 0, [1, 2], 0))).error == ErrorCode.NOT_CONTROLLER


def test_a_controller_whose_session_expired_resigns_at_once_and_sends_nothing(tmp_path):
    async def scenario(store, controller, recorder):
        store.listener.on_connection_suspended()
        await store.create_topic("t", uuid.uuid4(), [[1, 2, 3], [2, 3, 1]], {})
        store.unregister(3)
        await spin()
        store.listener.on_session_expired()  # Kafka's Expire: before the events queued meanwhile
        assert not controller.active
        store.listener.on_connection_resumed()
        await settle(controller)
        assert recorder.take() == []
        # The store's re-registration and watches then make it run the election again.
        store.listener.on_controller_changed()
        await settle(controller)
        assert controller.active and controller.context.epoch == 2
        assert leader_and_isr(recorder.take())[1] == {T0: (1, 0, [1, 2]), T1: (2, 0, [2, 1])}

    run_cluster(tmp_path, scenario)


def test_alter_partition_per_partition_checks(tmp_path):
    async def scenario(store, controller, recorder):
        await create(store, controller)
        # Move t-0 to leader epoch 1, partition epoch 1: broker 3 dies (leaves the ISR), comes back.
        store.unregister(3)
        await settle(controller)
        await store.register_broker(broker(3))
        await settle(controller)
        p = controller.context.topics["t"].partitions[0]
        assert (p.leader, p.leader_epoch, p.isr, p.partition_epoch) == (1, 1, [1, 2], 1)
        recorder.take()
        E = ErrorCode
        cases = [
            (proposal(TopicPartition("nope", 0), 1, [1], 1), E.UNKNOWN_TOPIC_OR_PARTITION),
            (proposal(TopicPartition("t", 9), 1, [1], 1), E.UNKNOWN_TOPIC_OR_PARTITION),
            (proposal(T0, 0, [1, 2, 3], 1), E.FENCED_LEADER_EPOCH),       # older leader epoch
            (proposal(T0, 2, [1, 2, 3], 1), E.NOT_CONTROLLER),            # newer: this controller is stale
            (proposal(T0, 1, [1, 2, 3], 2), E.NOT_CONTROLLER),
            (proposal(T0, 1, [1, 2, 3], 0), E.INVALID_UPDATE_VERSION),    # older partition epoch
            (proposal(T0, 1, [1, 2, 3], 1, recovery=1), E.INVALID_REQUEST),  # RECOVERED -> RECOVERING
            (proposal(T0, 1, [2, 3], 1), E.INVALID_REQUEST),              # the ISR lost its leader
            (proposal(T0, 1, [1, 2, 2], 1), E.INVALID_REQUEST),           # not a set
            (proposal(T0, 1, [1, 2, 4], 1), E.INVALID_REQUEST),           # not a replica
        ]
        for sent, expected in cases:
            answer = await alter(controller, 1, sent)
            assert answer.partitions == {sent.topic_partition: PartitionResult(expected)}, sent
        # a proposal from a broker that does not lead t-0 (2 follows it)
        answer = await alter(controller, 2, proposal(T0, 1, [1, 2], 1))
        assert answer.partitions[T0].error == E.INVALID_REQUEST
        p = controller.context.topics["t"].partitions[0]
        assert (p.leader_epoch, p.isr, p.partition_epoch) == (1, [1, 2], 1)
        stored = (await store.read_topics(["t"]))["t"].partitions[0]
        assert (stored.isr, stored.partition_epoch) == ([1, 2], 1)
        # UpdateMetadata for the known partitions asked about, none for unknown ones
        sent = recorder.take()
        assert not leader_and_isr(sent)
        assert {s.topic_partition for _, r in sent if isinstance(r, UpdateMetadata) for s in r.partition_states} == {T0}

    run_cluster(tmp_path, scenario)


def test_alter_partition_to_the_current_state_answers_it_even_with_a_stale_partition_epoch(tmp_path):
    async def scenario(store, controller, recorder):
        await create(store, controller)
        first = await alter(controller, 1, proposal(T0, 0, [1, 2], 0))
        assert first.partitions[T0].partition_epoch == 1
        # the same proposal again (a retry whose first answer was lost): idempotent, no write
        again = await alter(controller, 1, proposal(T0, 0, [1, 2], 0))
        assert again.partitions[T0] == PartitionResult(ErrorCode.NONE, 1, 0, (1, 2), 1)
        assert controller.context.topics["t"].partitions[0].partition_epoch == 1
        assert (await store.read_topics(["t"]))["t"].partitions[0].partition_epoch == 1

    run_cluster(tmp_path, scenario)


def test_alter_partition_rejects_brokers_that_are_not_alive_or_shutting_down(tmp_path):
    async def scenario(store, controller, recorder):
        await create(store, controller)
        # t-1: leader 2, ISR [2, 3, 1]; 3 dies, leaves the ISR (epochs 1/1); it may not come back in
        store.unregister(3)
        await settle(controller)
        p = controller.context.topics["t"].partitions[1]
        assert (p.leader, p.leader_epoch, p.isr, p.partition_epoch) == (2, 1, [2, 1], 1)
        answer = await alter(controller, 2, proposal(T1, 1, [2, 1, 3], 1))
        assert answer.partitions[T1].error == ErrorCode.OPERATION_NOT_ATTEMPTED  # v0-1
        answer = await alter(controller, 2, proposal(T1, 1, [2, 1, 3], 1), version=2)
        assert answer.partitions[T1].error == ErrorCode.INELIGIBLE_REPLICA  # v2+ (KIP-841)
        # a broker in controlled shutdown is not eligible either (t-0: leader 1, ISR [1, 2])
        assert await alter(controller, 1, proposal(T0, 1, [1], 1)) == AlterPartitionAnswer(
            ErrorCode.NONE, {T0: PartitionResult(ErrorCode.NONE, 1, 1, (1,), 2)})
        controller.context.shutting_down.add(2)
        answer = await alter(controller, 1, proposal(T0, 1, [1, 2], 2))
        assert answer.partitions[T0].error == ErrorCode.OPERATION_NOT_ATTEMPTED
        controller.context.shutting_down.discard(2)
        answer = await alter(controller, 1, proposal(T0, 1, [1, 2], 2))
        assert answer.partitions[T0] == PartitionResult(ErrorCode.NONE, 1, 1, (1, 2), 3)
        p0 = controller.context.topics["t"].partitions[0]
        assert (p0.leader_epoch, p0.isr, p0.partition_epoch) == (1, [1, 2], 3)

    run_cluster(tmp_path, scenario)


def test_alter_partition_batch_and_a_partition_epoch_conflict_in_the_store(tmp_path):
    async def scenario(store, controller, recorder):
        await create(store, controller)
        # t-1's state moved on in the store behind the controller's back (a concurrent writer)
        stored = (await store.read_topics(["t"]))["t"].partitions[1]
        stored.isr = [2, 3]
        await store.write_partition_states(controller.context.epoch, {"t": {1: stored}})
        answer = await alter(controller, 1, proposal(T0, 0, [1, 3], 0))
        answer_2 = await alter(controller, 2, proposal(T1, 0, [2, 1], 0))
        assert answer.partitions[T0] == PartitionResult(ErrorCode.NONE, 1, 0, (1, 3), 1)
        assert answer_2.partitions[T1].error == ErrorCode.INVALID_UPDATE_VERSION
        # the controller read t-1 again: the next proposal based on it goes through
        p1 = controller.context.topics["t"].partitions[1]
        assert (p1.isr, p1.partition_epoch) == ([2, 3], 1)
        recorder.take()
        both = await alter(controller, 1, proposal(T0, 0, [1, 3, 2], 1))
        assert both.partitions[T0].partition_epoch == 2
        answer = await controller.alter_partition(AlterPartition(2, controller.context.broker_epochs[2], (
            proposal(T1, 0, [2, 3, 1], 1), proposal(TopicPartition("t", 5), 0, [2], 0))), 1)
        await settle(controller)
        assert answer.partitions == {
            T1: PartitionResult(ErrorCode.NONE, 2, 0, (2, 3, 1), 2),
            TopicPartition("t", 5): PartitionResult(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        }
# --- ElectLeaders and the automatic rebalance --------------------------------------------------


async def set_state(store: ClusterStore, controller: Controller, topic: str, index: int,
                    leader: int | None = None, isr: list[int] | None = None) -> None:
    """Change a partition's stored state behind the elections, as an accepted AlterPartition
    (an ISR that grew back once a follower caught up) would: the partition epoch moves on."""
    p = controller.context.topics[topic].partitions[index]
    new = PartitionAssignment(list(p.replicas), p.leader if leader is None else leader, p.leader_epoch,
                              list(p.isr if isr is None else isr), p.partition_epoch, p.controller_epoch)
    await store.write_partition_states(controller.context.epoch, {topic: {index: new}})
    controller.context.topics[topic].partitions[index] = new


def state_of(controller: Controller, topic: str, index: int) -> tuple[int, int, list[int]]:
    p = controller.context.topics[topic].partitions[index]
    return p.leader, p.leader_epoch, p.isr


def errors(outcomes) -> dict[TopicPartition, ErrorCode]:
    return {tp: outcome.error for tp, outcome in outcomes.items()}


def test_preferred_election_needs_the_preferred_replica_in_sync(tmp_path):
    async def scenario(store, controller, recorder):
        await create(store, controller)
        store.unregister(1)  # t-0 moves to 2; 1 leaves both ISRs
        await settle(controller)
        await store.register_broker(broker(1))  # back as a follower, not in sync
        await settle(controller)
        assert state_of(controller, "t", 0) == (2, 1, [2, 3])
        recorder.take()
        missing, other = TopicPartition("t", 9), TopicPartition("nope", 0)
        outcomes = await controller.elect_leaders([T0, T1, missing, other], ElectionType.PREFERRED)
        assert errors(outcomes) == {
            T0: ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE, T1: ErrorCode.ELECTION_NOT_NEEDED,
            missing: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, other: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        }
        await settle(controller)
        assert recorder.take() == []  # nothing decided, nothing sent
        # 1 caught up and is in the ISR again: the preferred election moves t-0 back to it
        await set_state(store, controller, "t", 0, isr=[2, 3, 1])
        outcomes = await controller.elect_leaders([T0], ElectionType.PREFERRED)
        assert errors(outcomes) == {T0: ErrorCode.NONE}
        assert outcomes[T0].election.leader_and_isr.leader == 1
        await settle(controller)
        assert state_of(controller, "t", 0) == (1, 2, [2, 3, 1])  # leader epoch +1, ISR kept
        sent = recorder.take()
        # LeaderAndIsr to every assigned replica, UpdateMetadata to every live broker
        assert {b: r[T0] for b, r in leader_and_isr(sent).items()} == {b: (1, 2, [2, 3, 1]) for b in (1, 2, 3)}
        assert update_metadata_to(sent) == {1, 2, 3}
        stored = (await store.read_topics(["t"]))["t"].partitions[0]
        assert (stored.leader, stored.leader_epoch) == (1, 2)
        outcomes = await controller.elect_leaders([T0], ElectionType.PREFERRED)
        assert errors(outcomes) == {T0: ErrorCode.ELECTION_NOT_NEEDED}

    run_cluster(tmp_path, scenario)


def test_unclean_election_elects_a_replica_outside_the_isr(tmp_path):
    async def scenario(store, controller, recorder):
        await store.create_topic("solo", uuid.uuid4(), [[2, 3]], {})
        await settle(controller)
        solo = TopicPartition("solo", 0)
        store.unregister(3)  # ISR [2]
        await settle(controller)
        store.unregister(2)  # leaderless, ISR [2] (never empty)
        await settle(controller)
        await store.register_broker(broker(3))  # live, but not in sync: no clean leader
        await settle(controller)
        assert state_of(controller, "solo", 0)[0] == -1
        outcomes = await controller.elect_leaders([solo], ElectionType.PREFERRED)
        assert errors(outcomes) == {solo: ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE}
        recorder.take()
        outcomes = await controller.elect_leaders([solo], ElectionType.UNCLEAN)
        assert errors(outcomes) == {solo: ErrorCode.NONE}
        await settle(controller)
        leader, epoch, isr = state_of(controller, "solo", 0)
        assert (leader, isr) == (3, [3])
        assert leader_and_isr(recorder.take())[3][solo] == (3, epoch, [3])
        # a live leader: nothing to do
        outcomes = await controller.elect_leaders([solo], ElectionType.UNCLEAN)
        assert errors(outcomes) == {solo: ErrorCode.ELECTION_NOT_NEEDED}

    run_cluster(tmp_path, scenario)


def test_an_election_is_decided_again_when_the_stored_state_moved_on(tmp_path):
    async def scenario(store, controller, recorder):
        await create(store, controller)
        await set_state(store, controller, "t", 0, leader=2)
        # Someone else wrote the state meanwhile (its partition epoch moved on, the ISR shrank):
        stored = (await store.read_topics(["t"]))["t"].partitions[0]
        stored.isr = [1, 2]
        await store.write_partition_states(controller.context.epoch, {"t": {0: stored}})
        outcomes = await controller.elect_leaders([T0], ElectionType.PREFERRED)
        assert errors(outcomes) == {T0: ErrorCode.NONE}
        await settle(controller)
        leader, _, isr = state_of(controller, "t", 0)
        assert (leader, isr) == (1, [1, 2])  # decided again on the fresh state
        assert (await store.read_topics(["t"]))["t"].partitions[0].leader == 1

    run_cluster(tmp_path, scenario)


def test_only_the_active_controller_elects(tmp_path):
    async def scenario(store, controller, recorder):
        await create(store, controller)
        other = Controller(2, store, ControllerChannelManager(recorder.connect))
        other.start()
        await other.idle()
        try:
            assert not other.active
            outcomes = await other.elect_leaders([T0, T1], ElectionType.PREFERRED)
            assert errors(outcomes) == {T0: ErrorCode.NOT_CONTROLLER, T1: ErrorCode.NOT_CONTROLLER}
        finally:
            await other.shutdown()

    run_cluster(tmp_path, scenario)


def run_rebalance(tmp_path, scenario, check_interval_ms: int = 300_000) -> None:
    time = MockTime()
    scheduler = MockScheduler(time)

    async def with_scheduler(store, controller, recorder):
        await scenario(store, controller, recorder, scheduler)

    run_cluster(tmp_path, with_scheduler, auto_leader_rebalance=AutoLeaderRebalance(check_interval_ms, 10),
                scheduler=scheduler)


async def tick(scheduler: MockScheduler, controller: Controller, ms: float) -> None:
    await scheduler.advance(ms)
    await settle(controller)


def test_auto_rebalance_checks_five_seconds_after_failover_then_every_interval(tmp_path):
    async def scenario(store, controller, recorder, scheduler):
        assert [t.due_ms for t in scheduler.tasks("auto-leader-rebalance-task")] == [AUTO_REBALANCE_FIRST_DELAY_MS]
        await create(store, controller)
        await set_state(store, controller, "t", 0, leader=2)  # 1 is in sync but does not lead
        await tick(scheduler, controller, AUTO_REBALANCE_FIRST_DELAY_MS - 1)
        assert state_of(controller, "t", 0)[0] == 2
        await tick(scheduler, controller, 1)
        assert state_of(controller, "t", 0)[:2] == (1, 1)
        # one check, then the next one an interval later
        assert [t.due_ms for t in scheduler.tasks("auto-leader-rebalance-task")] == [AUTO_REBALANCE_FIRST_DELAY_MS + 1000]
        await set_state(store, controller, "t", 1, leader=3)
        await tick(scheduler, controller, 999)
        assert state_of(controller, "t", 1)[0] == 3
        await tick(scheduler, controller, 1)
        assert state_of(controller, "t", 1)[0] == 2

    run_rebalance(tmp_path, scenario, check_interval_ms=1000)


def test_auto_rebalance_only_above_the_imbalance_percentage(tmp_path):
    async def scenario(store, controller, recorder, scheduler):
        await store.create_topic("many", uuid.uuid4(), [[1, 2]] * 10, {})
        await settle(controller)
        # 1 of broker 1's 10 preferred partitions led elsewhere: 10 %, not above the threshold
        await set_state(store, controller, "many", 0, leader=2)
        await tick(scheduler, controller, AUTO_REBALANCE_FIRST_DELAY_MS)
        assert state_of(controller, "many", 0)[0] == 2
        # 2 of 10: 20 %; both move back
        await set_state(store, controller, "many", 1, leader=2)
        await tick(scheduler, controller, 300_000)
        assert [state_of(controller, "many", i)[0] for i in range(10)] == [1] * 10

    run_rebalance(tmp_path, scenario)


def test_auto_rebalance_skips_preferred_replicas_out_of_sync_and_stops_on_resignation(tmp_path):
    async def scenario(store, controller, recorder, scheduler):
        await create(store, controller)
        await set_state(store, controller, "t", 0, leader=2, isr=[2, 3])  # 1 not in sync
        await tick(scheduler, controller, AUTO_REBALANCE_FIRST_DELAY_MS)
        assert state_of(controller, "t", 0)[0] == 2
        assert scheduler.tasks("auto-leader-rebalance-task")
        controller._resign()
        assert scheduler.tasks("auto-leader-rebalance-task") == []

    run_rebalance(tmp_path, scenario)


def test_no_auto_rebalance_unless_configured(tmp_path):
    async def scenario(store, controller, recorder):
        assert controller.auto_leader_rebalance is None and controller._rebalance_task is None


def test_a_new_controller_takes_the_replicas_of_unregistered_brokers_offline(tmp_path):
    """Failover (Kafka's replica state machine start-up): a partition led by a broker that is not
    registered gets a new leader from the live ISR; replicas on such brokers leave the ISRs
    (leader epoch +1); a sole replica's partition keeps its ISR and has leader -1."""
    async def scenario(store, controller, recorder):
        await create(store, controller)
        await store.create_topic("solo", uuid.uuid4(), [[3]], {})
        await settle(controller)
        await controller.shutdown()
        store.controller = None  # its session, and /controller with it, is gone
        store.unregister(1)
        store.unregister(3)
        recorder.take()
        successor = Controller(2, store, ControllerChannelManager(recorder.connect))
        successor.listener(store.listener)
        successor.start()
        try:
            await settle(successor)
            topics = successor.context.topics
            states = {(name, i): (p.leader, p.leader_epoch, p.isr)
                      for name in ("t", "solo") for i, p in enumerate(topics[name].partitions)}
            # t-0 elects 2 (one write); t-1 loses 1 and 3 one broker at a time, as Kafka's
            # OfflineReplica transitions go per broker (two writes).
            assert states == {("t", 0): (2, 1, [2]), ("t", 1): (2, 2, [2]), ("solo", 0): (-1, 1, [3])}
            stored = await store.read_topics(["solo"])
            assert (stored["solo"].partitions[0].leader, stored["solo"].partitions[0].isr) == (-1, [3])
            assert {b for b, _ in recorder.take()} == {2}
        finally:
            await successor.shutdown()

    run_cluster(tmp_path, scenario)


def offline_replicas_announced(sent: list[tuple[int, object]], tp: TopicPartition) -> dict[int, list[int]]:
    """Per broker: the offline replicas of ``tp`` in the last UpdateMetadata it received."""
    out: dict[int, list[int]] = {}
    for broker_id, request in sent:
        if isinstance(request, UpdateMetadata):
            for s in request.partition_states:
                if s.topic_partition == tp:
                    out[broker_id] = s.offline_replicas
    return out


def test_replicas_on_a_failed_log_dir_stay_offline_until_their_broker_registers_again(tmp_path):
    """KIP-112 in the controller: broker 2 answers the LeaderAndIsr of a log dir event with
    KAFKA_STORAGE_ERROR for t-1, which it leads. t-1 elects 3, 2 leaves its ISR, and its
    replica is offline in every broker's metadata (t-0's replica on 2 is not); no election,
    unclean ones included, picks it; registering again (a restart) forgets it."""
    async def scenario(store, controller, recorder):
        await create(store, controller, {"unclean.leader.election.enable": "true"})
        recorder.leader_and_isr_errors[2] = {T1: ErrorCode.KAFKA_STORAGE_ERROR}
        events: set[int] = set()

        async def take_log_dir_events(controller_epoch: int) -> set[int]:
            taken = set(events)
            events.clear()
            return taken

        store.take_log_dir_events = take_log_dir_events
        recorder.take()
        events.add(2)
        store.listener.on_log_dir_event()
        for _ in range(2):  # the event, then the answers' event
            await settle(controller)
        sent = recorder.take()
        ctx = controller.context
        assert ctx.replicas_on_offline_dirs == {2: {T1}}
        state = ctx.topics["t"].partitions
        assert (state[1].leader, state[1].isr) == (3, [3, 1])
        assert (state[0].leader, state[0].isr) == (1, [1, 2, 3])
        assert offline_replicas_announced(sent, T1) == {1: [2], 2: [2], 3: [2]}
        assert ctx.state(ctx.topics["t"], 0).offline_replicas == []
        # A preferred election cannot pick 2's replica; neither can an unclean one.
        outcomes = await controller.elect_leaders([T1], ElectionType.PREFERRED)
        assert errors(outcomes) == {T1: ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE}
        for b in (3, 1):
            store.unregister(b)
            await settle(controller)
        assert (state[1].leader, state[1].isr) == (-1, [1])
        # 2 restarts with its dir repaired: forgotten, and the unclean election now takes it.
        recorder.leader_and_isr_errors.clear()
        store.unregister(2)
        await settle(controller)
        await store.register_broker(broker(2))
        await settle(controller)
        assert ctx.replicas_on_offline_dirs == {}
        assert state[1].leader == 2
        assert ctx.state(ctx.topics["t"], 1).offline_replicas == [3, 1]

    run_cluster(tmp_path, scenario)
