"""The controller's state changes over an in-memory multi-broker store and recording channels:
new partitions, broker failure (offline election, ISR removal, "an ISR never becomes empty"),
broker start-up, unclean election, topic deletion. Kafka's rules as cluster.md §2.4-2.5 states
them; the requests each broker would receive are asserted, in order."""

from __future__ import annotations

import asyncio
import uuid

from pybroker.controller.channel import ControllerChannelManager
from pybroker.controller.controller import Controller
from pybroker.controller.local_store import LocalStore
from pybroker.controller.requests import (
    BrokerEndpoint,
    ControlResponse,
    LeaderAndIsr,
    LiveBroker,
    StopReplica,
    UpdateMetadata,
)
from pybroker.controller.store import StoreListener
from pybroker.types import TopicPartition


class ClusterStore(LocalStore):
    """LocalStore with several brokers, which tests register and unregister."""

    def __init__(self, directory: str) -> None:
        super().__init__(directory, "test-cluster", StoreListener())
        self.epochs: dict[int, int] = {}
        self._next_epoch = 100

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


def run_cluster(tmp_path, scenario) -> None:
    async def main() -> None:
        store = ClusterStore(str(tmp_path))
        recorder = Recorder()
        controller = Controller(1, store, ControllerChannelManager(recorder.connect))
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


def test_a_new_controller_takes_the_replicas_of_unregistered_brokers_offline(tmp_path):
    """Failover (Kafka's replica state machine start-up): a partition led by a broker that is not
    registered gets a new leader from the live ISR; replicas on such brokers leave the ISRs
    (leader epoch +1); a sole replica's partition keeps its ISR and has leader -1."""
    async def scenario(store, controller, recorder):
        await create(store, controller)
        await store.create_topic("solo", uuid.uuid4(), [[3]], {})
        await settle(controller)
        await controller.shutdown()
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
