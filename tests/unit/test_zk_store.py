"""ZooKeeperStore against a real ZooKeeper: registration and broker epochs, election and fencing,
topics and partition states in Kafka's JSON, config notifications, deletion, session expiry,
and two controllers over two stores."""

import asyncio
import json
import uuid

import pytest

from pybroker.common.cluster import BrokerEndpoint, LiveBroker
from pybroker.common.topic import (
    PartitionAssignment,
    TopicExistsError,
    UnknownTopicError,
    topic_id_to_string,
)
from pybroker.controller.channel import ControllerChannelManager
from pybroker.controller.controller import Controller
from pybroker.controller.requests import ControlResponse, LeaderAndIsr, UpdateMetadata
from pybroker.controller.store import (
    ControllerMovedError,
    PartitionEpochConflictError,
    StoreListener,
)
from pybroker.controller.zk_store import (
    CHANGE_EXPIRATION_MS,
    BrokerIdInUseError,
    InconsistentClusterIdError,
    ZooKeeperStore,
)
from pybroker.scheduler import SYSTEM_TIME
from pybroker.types import TopicPartition
from tests.mock_time import MockTime
from tests.zookeeper import SESSION_TIMEOUT_MS, chroot_for, expire_session, wait_for


@pytest.fixture
def connect_string(zookeeper, request):
    return chroot_for(zookeeper, request.node.name)


def broker(broker_id, port=None, rack=None):
    endpoint = BrokerEndpoint("PLAINTEXT", "127.0.0.1", port or 9090 + broker_id, "PLAINTEXT")
    return LiveBroker(broker_id, (endpoint,), rack)


class Recorder:
    """A StoreListener that records its callbacks."""

    def __init__(self):
        self.events = []
        self.listener = StoreListener(
            on_brokers_changed=lambda: self.events.append("brokers"),
            on_topics_changed=lambda names: self.events.append("topics"),
            on_topic_deletions=lambda: self.events.append("deletions"),
            on_controller_changed=lambda: self.events.append("controller"),
            on_topic_configs_changed=lambda name: self.events.append(("configs", name)),
            on_broker_registered=lambda epoch: self.events.append(("registered", epoch)),
            on_connection_suspended=lambda: self.events.append("suspended"),
            on_connection_resumed=lambda: self.events.append("resumed"),
            on_session_expired=lambda: self.events.append("expired"),
        )

    def count(self, event):
        return self.events.count(event)


async def open_store(connect_string, broker_id, listener=None, time=SYSTEM_TIME):
    return await ZooKeeperStore.connect(
        connect_string, SESSION_TIMEOUT_MS, 10000, broker_id, "cluster-A", listener, time
    )


def run_with_stores(connect_string, count, scenario):
    """Run ``scenario(*(store, recorder) pairs)`` with stores for brokers 1..count."""
    async def run():
        recorders = [Recorder() for _ in range(count)]
        stores = []
        try:
            for i, recorder in enumerate(recorders):
                stores.append(await open_store(connect_string, i + 1, recorder.listener))
            return await scenario(*zip(stores, recorders, strict=True))
        finally:
            for store in stores:
                await store.close()

    return asyncio.run(run())


async def raw(store, path):
    data, _ = await store.zk.get(path)
    assert b" " not in data, data  # compact JSON, as Kafka's Jackson writes it
    return json.loads(data)


def test_cluster_id_is_created_once_and_checked(connect_string):
    async def scenario(first, second):
        store, _ = first
        assert store.cluster_id == "cluster-A" == second[0].cluster_id
        other = await ZooKeeperStore.connect(connect_string, SESSION_TIMEOUT_MS, 10000, 3, "cluster-B")
        try:
            assert other.cluster_id == "cluster-A"
            other.check_cluster_id(None)
            other.check_cluster_id("cluster-A")
            with pytest.raises(InconsistentClusterIdError, match="doesn't match stored clusterId"):
                other.check_cluster_id("cluster-B")
        finally:
            await other.close()
        assert await raw(store, "/cluster/id") == {"version": "1", "id": "cluster-A"}

    run_with_stores(connect_string, 2, scenario)


def test_registration_election_failover_and_fencing(connect_string):
    async def scenario(first, second):
        (a, a_rec), (b, _) = first, second
        epoch_a = await a.register_broker(broker(1, rack="r1"))
        epoch_b = await b.register_broker(broker(2))
        assert epoch_b > epoch_a and a.broker_epoch == epoch_a
        assert await b.live_brokers() == {1: (broker(1, rack="r1"), epoch_a), 2: (broker(2), epoch_b)}
        registration = await raw(a, "/brokers/ids/1")
        assert registration["endpoints"] == ["PLAINTEXT://127.0.0.1:9091"]
        assert registration["rack"] == "r1" and registration["version"] == 5
        await wait_for(lambda: a_rec.count("brokers") >= 1, message="a sees broker 2 register")

        # Another session with the same broker id is refused.
        intruder = await open_store(connect_string, 1)
        try:
            with pytest.raises(BrokerIdInUseError, match="broker id 1 is already registered"):
                await intruder.register_broker(broker(1))
        finally:
            await intruder.close()

        outcomes = await asyncio.gather(a.try_become_controller(1), b.try_become_controller(2))
        assert sorted(outcomes, key=str) == [1, None]
        winner_id = 1 if outcomes[0] == 1 else 2
        (winner, _), (loser, loser_rec) = (first, second) if winner_id == 1 else (second, first)
        loser_id = 3 - winner_id
        assert await loser.controller_id() == winner_id
        assert await loser.try_become_controller(loser_id) is None
        assert await winner.try_become_controller(winner_id) == 1  # elected already

        before = loser_rec.count("controller")
        await winner.close()  # its session ends: /controller and /brokers/ids/<id> vanish
        await wait_for(lambda: loser_rec.count("controller") > before, message="controller change")
        assert await loser.controller_id() is None
        assert await loser.try_become_controller(loser_id) == 2
        assert await loser.controller_id() == loser_id
        assert (await loser.zk.get("/controller_epoch"))[0] == b"2"
        assert set(await loser.live_brokers()) == {loser_id}
        with pytest.raises(ControllerMovedError):
            await loser.write_partition_states(1, {})

    run_with_stores(connect_string, 2, scenario)


def test_topics_are_stored_in_kafkas_format_and_seen_by_other_stores(connect_string):
    async def scenario(first, second):
        (a, _), (b, b_rec) = first, second
        topic_id = uuid.uuid4()
        await a.create_topic("t", topic_id, [[1, 2], [2, 1]], {"cleanup.policy": "compact"})
        assert a.topic_configs("t") == {"cleanup.policy": "compact"}
        await wait_for(lambda: b_rec.count("topics") >= 1, message="b sees the topic")
        await wait_for(lambda: b.topic_configs("t") == {"cleanup.policy": "compact"})
        assert ("configs", "t") in b_rec.events
        assert await b.topic_names() == {"t"}
        topic = (await b.read_topics(["t", "missing"]))["t"]
        assert topic.topic_id == topic_id and topic.configs == {"cleanup.policy": "compact"}
        assert topic.partitions == [
            PartitionAssignment([1, 2], leader=-1, leader_epoch=-1),
            PartitionAssignment([2, 1], leader=-1, leader_epoch=-1),
        ]
        assert await raw(a, "/brokers/topics/t") == {
            "version": 3, "partitions": {"0": [1, 2], "1": [2, 1]},
            "adding_replicas": {}, "removing_replicas": {}, "topic_id": topic_id_to_string(topic_id),
            "initial_partition_count": 2, "undeleted_partition_count": 2,
        }
        assert await raw(a, "/config/topics/t") == {"version": 1, "config": {"cleanup.policy": "compact"}}

        with pytest.raises(TopicExistsError):
            await b.create_topic("t", uuid.uuid4(), [[1]], {})

        before = b_rec.count("topics")
        await a.add_partitions("t", [[1, 2], [2, 1], [1, 2]])
        await wait_for(lambda: b_rec.count("topics") > before, message="b sees the new partition")
        topic = (await b.read_topics(["t"]))["t"]
        assert topic.topic_id == topic_id and [p.replicas for p in topic.partitions] == [[1, 2], [2, 1], [1, 2]]
        # KIP-253: the count the topic was created with stays; producers now use all three.
        assert (topic.initial_partition_count, topic.undeleted_partition_count) == (2, 3)
        assert (await raw(a, "/brokers/topics/t"))["undeleted_partition_count"] == 3
        with pytest.raises(UnknownTopicError):
            await a.add_partitions("missing", [[1]])

    run_with_stores(connect_string, 2, scenario)


def test_partition_states_are_created_then_updated_by_partition_epoch(connect_string):
    async def scenario(first):
        a, _ = first
        await a.register_broker(broker(1))
        await a.create_topic("t", uuid.uuid4(), [[1, 2], [2, 1]], {})
        epoch = await a.try_become_controller(1)
        topic = (await a.read_topics(["t"]))["t"]
        assert [p.leader_epoch for p in topic.partitions] == [-1, -1]

        states = {0: PartitionAssignment([1, 2], 1, 0, [1, 2], 0, epoch),
                  1: PartitionAssignment([2, 1], 2, 0, [2, 1], 0, epoch)}
        await a.write_partition_states(epoch, {"t": states})
        assert [s.partition_epoch for s in states.values()] == [0, 0]
        assert await raw(a, "/brokers/topics/t/partitions/0/state") == {
            "version": 1, "leader": 1, "leader_epoch": 0, "isr": [1, 2], "controller_epoch": 1,
        }

        # An update names the partition epoch it was decided on; the new one is written back.
        shrunk = PartitionAssignment([1, 2], 1, 0, [1], partition_epoch=0)
        await a.write_partition_states(epoch, {"t": {0: shrunk}})
        assert shrunk.partition_epoch == 1 and shrunk.controller_epoch == epoch
        # A decision based on the old state loses, as a BADVERSION does in Kafka; the other
        # partition of the same call is written.
        stale = PartitionAssignment([1, 2], 2, 1, [2], partition_epoch=0)
        other = PartitionAssignment([2, 1], 2, 1, [2], partition_epoch=0)
        with pytest.raises(PartitionEpochConflictError) as conflict:
            await a.write_partition_states(epoch, {"t": {0: stale, 1: other}})
        assert conflict.value.partitions == [("t", 0)] and other.partition_epoch == 1
        topic = (await a.read_topics(["t"]))["t"]
        assert topic.partitions == [
            PartitionAssignment([1, 2], 1, 0, [1], partition_epoch=1, controller_epoch=1),
            PartitionAssignment([2, 1], 2, 1, [2], partition_epoch=1, controller_epoch=1),
        ]

    run_with_stores(connect_string, 1, scenario)


def test_creating_partition_states_keeps_existing_ones_and_is_fenced_even_when_all_exist(connect_string):
    """Kafka's createTopicPartitionStatesRaw: a creation does not look at what was read; a state
    that exists is kept (NODEEXISTS, reported as a conflict), and a deposed controller's
    creation fails with ControllerMovedError even when there is nothing left to create."""
    async def scenario(first, second):
        a, b = first[0], second[0]
        await a.register_broker(broker(1))
        await a.create_topic("t", uuid.uuid4(), [[1, 2], [2, 1]], {})
        epoch = await a.try_become_controller(1)
        assert [p.leader_epoch for p in (await a.read_topics(["t"]))["t"].partitions] == [-1, -1]
        await a.write_partition_states(epoch, {"t": {0: PartitionAssignment([1, 2], 2, 0, [2, 1])}})
        await a.write_partition_states(epoch, {"t": {0: PartitionAssignment([1, 2], 2, 3, [2], partition_epoch=0)}})

        created = PartitionAssignment([2, 1], 2, 0, [2, 1])
        with pytest.raises(PartitionEpochConflictError) as conflict:
            await a.create_partition_states(epoch, {"t": {0: PartitionAssignment([1, 2], 1, 0, [1, 2]), 1: created}})
        assert conflict.value.partitions == [("t", 0)]
        assert (created.partition_epoch, created.controller_epoch) == (0, epoch)
        assert (await a.read_topics(["t"]))["t"].partitions == [
            PartitionAssignment([1, 2], 2, 3, [2], partition_epoch=1, controller_epoch=1),
            PartitionAssignment([2, 1], 2, 0, [2, 1], partition_epoch=0, controller_epoch=1),
        ]

        # Another controller is elected (epoch 2): every creation of the old one is fenced.
        await a.zk.delete("/controller")
        assert await b.try_become_controller(2) == 2
        with pytest.raises(ControllerMovedError, match="zkVersion"):
            await a.create_partition_states(epoch, {"t": {0: PartitionAssignment([1, 2], 1, 0, [1, 2])}})
        await b.create_partition_states(2, {})  # nothing to create: no write
        assert (await raw(a, "/brokers/topics/t/partitions/0/state"))["controller_epoch"] == 1

    run_with_stores(connect_string, 2, scenario)


def test_leader_epochs_after_creation_live_in_the_partition_znode(connect_string):
    """KIP-253: an added partition's ``leaderEpochAfterCreation`` is the data of its partition
    znode; the added partition's state is created after it, beside it."""
    async def scenario(first):
        a, _ = first
        await a.register_broker(broker(1))
        await a.create_topic("t", uuid.uuid4(), [[1]], {})
        epoch = await a.try_become_controller(1)
        await a.read_topics(["t"])
        await a.write_partition_states(epoch, {"t": {0: PartitionAssignment([1], 1, 0, [1])}})
        await a.add_partitions("t", [[1], [1], [1]])
        topic = (await a.read_topics(["t"]))["t"]
        topic.leader_epochs_after_creation = {1: {0: 0}, 2: {0: 0}}
        await a.record_leader_epochs(epoch, topic, [1, 2])
        assert await raw(a, "/brokers/topics/t/partitions/1") == {"version": 1, "leaderEpochAfterCreation": {"0": 0}}
        topic = (await a.read_topics(["t"]))["t"]
        assert topic.leader_epochs_after_creation == {1: {0: 0}, 2: {0: 0}}
        await a.write_partition_states(epoch, {"t": {1: PartitionAssignment([1], 1, 0, [1]),
                                                     2: PartitionAssignment([1], 1, 0, [1])}})
        assert (await raw(a, "/brokers/topics/t/partitions/1/state"))["leader"] == 1
        assert (await a.read_topics(["t"]))["t"].leader_epochs_after_creation == {1: {0: 0}, 2: {0: 0}}

        # A shrink to 2 marks partition 2: its znode gets leaderEpochBeforeDeletion beside the other map.
        await a.shrink_partitions("t", 2)
        topic = (await a.read_topics(["t"]))["t"]
        assert (topic.undeleted_partition_count, topic.marked_for_deletion) == (2, range(2, 3))
        topic.leader_epochs_before_deletion = {2: {0: 1, 1: 0}}
        await a.record_leader_epochs(epoch, topic, [2])
        assert await raw(a, "/brokers/topics/t/partitions/2") == {
            "version": 1, "leaderEpochAfterCreation": {"0": 0}, "leaderEpochBeforeDeletion": {"0": 1, "1": 0}}
        assert (await a.read_topics(["t"]))["t"].leader_epochs_before_deletion == {2: {0: 1, 1: 0}}

        # Drained: removed from the topic znode, its znodes gone.
        await a.remove_partitions(epoch, "t", 2)
        topic = (await a.read_topics(["t"]))["t"]
        assert (len(topic.partitions), topic.undeleted_partition_count, topic.leader_epochs_before_deletion) == (2, 2, {})
        assert await a.zk.exists("/brokers/topics/t/partitions/2") is None

    run_with_stores(connect_string, 1, scenario)


def test_config_changes_reach_other_stores(connect_string):
    async def scenario(first, second):
        (a, _), (b, b_rec) = first, second
        await a.create_topic("t", uuid.uuid4(), [[1]], {})
        await wait_for(lambda: ("configs", "t") in b_rec.events, message="b reads the new topic's configs")
        before = b_rec.count(("configs", "t"))
        await a.set_topic_configs("t", {"retention.ms": "1000"})
        assert a.topic_configs("t") == {"retention.ms": "1000"}
        await wait_for(lambda: b.topic_configs("t") == {"retention.ms": "1000"}, message="b's cache")
        assert b_rec.count(("configs", "t")) > before
        changes = await a.zk.get_children("/config/changes")
        assert changes == ["config_change_0000000000"]
        assert await raw(a, "/config/changes/config_change_0000000000") == {
            "version": 2, "entity_path": "topics/t",
        }
        with pytest.raises(UnknownTopicError):
            await a.set_topic_configs("missing", {})
        # A store connecting later starts from the current configs.
        late = await open_store(connect_string, 3)
        try:
            assert late.topic_configs("t") == {"retention.ms": "1000"}
        finally:
            await late.close()

    run_with_stores(connect_string, 2, scenario)


def test_config_change_notifications_older_than_15_minutes_are_purged(connect_string):
    """Kafka's ZkNodeChangeNotificationListener: each time the notifications are processed, the
    ones created more than changeExpirationMs (15 min) ago are deleted; by the store's clock
    (a MockTime here) against the znodes' ctime."""
    async def run():
        writer = await open_store(connect_string, 1)
        clock = MockTime()
        follower = await open_store(connect_string, 2, time=clock)
        try:
            await writer.create_topic("t", uuid.uuid4(), [[1]], {})
            for value in ("1", "2"):
                await writer.set_topic_configs("t", {"retention.ms": value})
                await asyncio.sleep(0.005)  # distinct ctimes (ZooKeeper's clock, in ms)
            await wait_for(lambda: follower.topic_configs("t") == {"retention.ms": "2"})
            first, second = sorted(await writer.zk.get_children("/config/changes"))
            second_ctime = (await writer.zk.exists(f"/config/changes/{second}")).ctime

            # The second notification is exactly 15 min old: only the first one goes.
            clock.advance(second_ctime + CHANGE_EXPIRATION_MS - clock.milliseconds())
            await writer.set_topic_configs("t", {"retention.ms": "3"})
            await wait_for(lambda: follower.topic_configs("t") == {"retention.ms": "3"})
            remaining = await wait_for_children(writer, lambda c: first not in c)
            assert second in remaining and len(remaining) == 2

            # One ms later it goes too; the newest one stays.
            clock.advance(1)
            await writer.set_topic_configs("t", {"retention.ms": "4"})
            await wait_for(lambda: follower.topic_configs("t") == {"retention.ms": "4"})
            remaining = await wait_for_children(writer, lambda c: second not in c)
            assert len(remaining) == 2 and all(c > second for c in remaining)

            # A store that connects later purges at start-up, with its own clock.
            late_clock = MockTime(wall_ms=clock.milliseconds() + CHANGE_EXPIRATION_MS + 60_000)
            late = await open_store(connect_string, 3, time=late_clock)
            await late.close()
            assert await writer.zk.get_children("/config/changes") == []
            # The sequence goes on: later notifications are still followed.
            await writer.set_topic_configs("t", {"retention.ms": "5"})
            await wait_for(lambda: follower.topic_configs("t") == {"retention.ms": "5"})
        finally:
            await follower.close()
            await writer.close()

    asyncio.run(run())


async def wait_for_children(store, condition):
    found = []

    async def poll():
        while not condition(children := await store.zk.get_children("/config/changes")):
            await asyncio.sleep(0.01)
        found.extend(children)

    await asyncio.wait_for(poll(), 10)
    return sorted(found)


def test_deletion_marker_and_topic_removal(connect_string):
    async def scenario(first, second):
        (a, a_rec), (b, b_rec) = first, second
        await a.create_topic("t", uuid.uuid4(), [[1]], {"retention.ms": "5"})
        epoch = await b.try_become_controller(2)
        await b.write_partition_states(epoch, {"t": {0: PartitionAssignment([1], 1, 0, [1])}})
        await a.mark_topic_for_deletion("t")
        await a.mark_topic_for_deletion("t")  # marked already: fine
        with pytest.raises(UnknownTopicError):
            await a.mark_topic_for_deletion("missing")
        await wait_for(lambda: b_rec.count("deletions") >= 1, message="b sees the marker")
        assert await b.topics_marked_for_deletion() == {"t"}
        with pytest.raises(TopicExistsError):
            await a.create_topic("t", uuid.uuid4(), [[1]], {})

        before = a_rec.count("topics")
        await b.remove_topic(epoch, "t")
        for path in ("/brokers/topics/t", "/config/topics/t", "/admin/delete_topics/t"):
            assert await a.zk.exists(path) is None, path
        await wait_for(lambda: a_rec.count("topics") > before, message="a sees the topic go")
        await wait_for(lambda: a.topic_configs("t") == {})
        assert await a.topic_names() == set()
        with pytest.raises(ControllerMovedError):
            await a.remove_topic(epoch, "t")  # a is not the controller

    run_with_stores(connect_string, 2, scenario)


def test_session_expiry_re_registers_and_re_arms_the_watches(connect_string):
    async def scenario(first, second):
        (a, a_rec), (b, b_rec) = first, second
        old_epoch = await a.register_broker(broker(1))
        await b.register_broker(broker(2))
        assert await a.try_become_controller(1) == 1
        await a.create_topic("t", uuid.uuid4(), [[1]], {})
        await a.read_topics(["t"])

        b_controller = b_rec.count("controller")
        await expire_session(a.zk)
        await wait_for(lambda: any(isinstance(e, tuple) and e[0] == "registered" for e in a_rec.events),
                       message="a registers again")
        new_epoch = next(e[1] for e in a_rec.events if isinstance(e, tuple) and e[0] == "registered")
        assert new_epoch > old_epoch and a.broker_epoch == new_epoch
        await wait_for(lambda: all(a_rec.count(e) >= 1 for e in ("controller", "brokers", "topics")),
                       message="a's callbacks after the new session")
        assert (await b.live_brokers())[1] == (broker(1), new_epoch)

        # /controller went with the old session: b is elected, and a's writes are fenced.
        await wait_for(lambda: b_rec.count("controller") > b_controller, message="b sees /controller go")
        assert await b.try_become_controller(2) == 2
        state = PartitionAssignment([1], 1, 0, [1])
        with pytest.raises(ControllerMovedError):
            await a.write_partition_states(1, {"t": {0: state}})
        assert await b.zk.exists("/brokers/topics/t/partitions/0/state") is None

        # a's watches work in the new session.
        topics = a_rec.count("topics")
        await b.create_topic("u", uuid.uuid4(), [[2]], {"retention.ms": "7"})
        await wait_for(lambda: a_rec.count("topics") > topics, message="a sees the new topic")
        await wait_for(lambda: a.topic_configs("u") == {"retention.ms": "7"})
        await b.set_topic_configs("u", {"retention.ms": "8"})
        await wait_for(lambda: a.topic_configs("u") == {"retention.ms": "8"})

    run_with_stores(connect_string, 2, scenario)


def test_session_states_reach_the_listener_and_an_expiry_voids_the_election_at_once(connect_string):
    async def scenario(only):
        store, recorder = only
        await store.register_broker(broker(1))
        assert await store.try_become_controller(1) == 1
        await store.create_topic("t", uuid.uuid4(), [[1]], {})
        await store.read_topics(["t"])
        events_before = len(recorder.events)
        await expire_session(store.zk)
        await wait_for(lambda: "resumed" in recorder.events[events_before:], message="connected again")
        session_events = [e for e in recorder.events[events_before:] if e in ("suspended", "expired", "resumed")]
        assert session_events == ["suspended", "expired", "resumed"]
        # No other controller has been elected, yet this store's election is void: its session
        # (and /controller with it) is gone.
        with pytest.raises(ControllerMovedError, match="not the controller"):
            await store.write_partition_states(1, {"t": {0: PartitionAssignment([1], 1, 0, [1])}})
        assert await store.zk.exists("/brokers/topics/t/partitions/0/state") is None
        assert await store.try_become_controller(1) == 2  # elected again, in the new session

    run_with_stores(connect_string, 1, scenario)


class FakeChannel:
    def __init__(self, broker_id, sent):
        self.broker_id = broker_id
        self.sent = sent

    async def send(self, request):
        self.sent.append((self.broker_id, request))
        return ControlResponse()

    async def close(self):
        pass


def test_two_controllers_over_zookeeper(connect_string):
    async def run():
        sent = {1: [], 2: []}
        stores, controllers = {}, {}
        try:
            for broker_id in (1, 2):
                listener = StoreListener()
                store = await open_store(connect_string, broker_id, listener)
                stores[broker_id] = store
                channels = ControllerChannelManager(
                    lambda b, s=sent[broker_id]: FakeChannel(b.broker_id, s))
                controllers[broker_id] = Controller(broker_id, store, channels)
                controllers[broker_id].listener(listener)
                await store.register_broker(broker(broker_id))
            for controller in controllers.values():
                controller.start()
            for controller in controllers.values():
                await controller.idle()
            active = [c for c in controllers.values() if c.active]
            assert len(active) == 1
            active = active[0]
            standby = controllers[3 - active.broker_id]
            assert active.context.epoch == 1

            topic_id = uuid.uuid4()
            await stores[standby.broker_id].create_topic("t", topic_id, [[1, 2], [2, 1]], {})

            def requests(kind):
                return [(b, r) for b, r in sent[active.broker_id] if isinstance(r, kind)
                        and any(s.topic_partition.topic == "t" for s in r.partition_states)]

            await wait_for(lambda: len(requests(LeaderAndIsr)) == 2, message="LeaderAndIsr to both")
            await active.idle()
            await active.channels.flush()
            for to, request in requests(LeaderAndIsr):
                states = {s.topic_partition.partition: s for s in request.partition_states}
                assert {p: (s.leader, s.isr, s.is_new) for p, s in states.items()} == {
                    0: (1, [1, 2], True), 1: (2, [2, 1], True)}, to
                assert request.topic_ids == {"t": topic_id} and request.controller_epoch == 1
            assert sorted(to for to, _ in requests(LeaderAndIsr)) == [1, 2]
            assert sorted(to for to, _ in requests(UpdateMetadata)) == [1, 2]
            for p, leader, isr in ((0, 1, [1, 2]), (1, 2, [2, 1])):
                assert await raw(stores[1], f"/brokers/topics/t/partitions/{p}/state") == {
                    "version": 1, "leader": leader, "leader_epoch": 0, "isr": isr, "controller_epoch": 1,
                }
            assert not standby.active and sent[standby.broker_id] == []

            # The active controller's broker goes away: the other one takes over with epoch 2.
            await active.shutdown()
            await stores.pop(active.broker_id).close()
            await wait_for(lambda: standby.active, message="the standby is elected")
            await standby.idle()
            assert standby.context.epoch == 2
            assert set(standby.context.topics["t"].partitions[0].replicas) == {1, 2}
        finally:
            for controller in controllers.values():
                await controller.shutdown()
            for store in stores.values():
                await store.close()

    asyncio.run(run())


@pytest.mark.parametrize("first", ["new", "old"])
@pytest.mark.parametrize("change", ["topic", "partition"])
def test_a_deposed_controller_that_has_not_noticed_is_fenced_by_the_epoch(connect_string, change, first):
    """Two Controllers over two stores. The active one does not hear that /controller changed
    (its notification is late); the other is elected with epoch 2. Then a topic is created
    (``change="topic"``) or a partition added to one both know (``"partition"``), and the two
    controllers hear of it one after the other, each one's notification held until the other
    has acted: with ``first="new"`` the deposed controller reads the partition state its
    successor already wrote, with ``first="old"`` none. Either way it acts on every partition
    new to it, as Kafka's onNewPartitionCreation does, whatever state it read: a fenced write
    (the state's creation, or first the KIP-253 epoch bump of the topic's other partitions)
    fails with ControllerMovedError (the /controller_epoch zkVersion moved on), it resigns, and
    only the new controller's decisions are in ZooKeeper and reach the brokers."""
    async def run():
        sent = {1: [], 2: []}
        stores, controllers = {}, {}
        try:
            for broker_id in (1, 2):
                listener = StoreListener()
                stores[broker_id] = store = await open_store(connect_string, broker_id, listener)
                channels = ControllerChannelManager(lambda b, s=sent[broker_id]: FakeChannel(b.broker_id, s))
                controllers[broker_id] = Controller(broker_id, store, channels)
                controllers[broker_id].listener(listener)
                await store.register_broker(broker(broker_id))
                controllers[broker_id].start()
                await controllers[broker_id].idle()
            old = next(c for c in controllers.values() if c.active)
            new = controllers[3 - old.broker_id]
            assert old.context.epoch == 1
            if change == "partition":
                await stores[1].create_topic("t", uuid.uuid4(), [[1, 2]], {})
                await wait_for(lambda: "t" in old.context.topics, message="the controller knows the topic")
                await old.idle()
                assert old.context.topics["t"].partitions[0].leader_epoch == 0
            stores[old.broker_id].listener.on_controller_changed = lambda: None  # deaf to the change

            # /controller goes (as when an operator forces a re-election): the other one wins.
            await stores[new.broker_id].zk.delete("/controller")
            await wait_for(lambda: new.active, message="the other controller is elected")
            await new.idle()
            assert new.context.epoch == 2 and old.active and old.context.epoch == 1
            await old.channels.flush()
            sent[old.broker_id].clear()

            # Both hear of the change, in the order the test chooses.
            held = {}
            for c in (old, new):
                listener = stores[c.broker_id].listener
                held[c] = (listener.on_topics_changed, [])
                listener.on_topics_changed = held[c][1].append

            def deliver(c):
                notify, names = held[c]
                stores[c.broker_id].listener.on_topics_changed = notify
                for n in names:
                    notify(n)

            if change == "topic":
                await stores[new.broker_id].create_topic("t", uuid.uuid4(), [[1, 2]], {})
                index = 0
            else:
                await stores[new.broker_id].add_partitions("t", [[1, 2], [2, 1]])
                index = 1
            state_path = f"/brokers/topics/t/partitions/{index}/state"
            await wait_for(lambda: held[old][1] and held[new][1], message="both stores saw the change")
            if first == "new":
                deliver(new)
                await new.idle()
                assert await stores[1].zk.exists(state_path)
                deliver(old)
                await old.idle()
                assert not old.active, "the deposed controller resigns"
            else:
                deliver(old)
                await old.idle()
                assert not old.active, "the deposed controller resigns"
                assert not await stores[1].zk.exists(state_path)
                deliver(new)
                await new.idle()
            assert new.active
            leader = 1 if change == "topic" else 2
            assert await raw(stores[1], state_path) == {
                "version": 1, "leader": leader, "leader_epoch": 0, "isr": [leader, 3 - leader], "controller_epoch": 2,
            }
            if change == "partition":  # KIP-253: the other partition's leader epoch was bumped, by epoch 2
                assert await raw(stores[1], "/brokers/topics/t/partitions/0/state") == {
                    "version": 1, "leader": 1, "leader_epoch": 1, "isr": [1, 2], "controller_epoch": 2,
                }
            await old.channels.flush()
            assert not [r for _, r in sent[old.broker_id]
                        if any(s.topic_partition.topic == "t" for s in getattr(r, "partition_states", []))]
            await new.channels.flush()
            assert [r for _, r in sent[new.broker_id]
                    if any(s.topic_partition == TopicPartition("t", index) for s in getattr(r, "partition_states", []))]
            with pytest.raises(ControllerMovedError, match="zkVersion"):
                await stores[old.broker_id].write_partition_states(
                    1, {"t": {0: PartitionAssignment([1, 2], 2, 1, [2], partition_epoch=0)}})
        finally:
            for controller in controllers.values():
                await controller.shutdown()
            for store in stores.values():
                await store.close()

    asyncio.run(run())


def test_the_controller_whose_session_expires_resigns_and_one_is_elected_again(connect_string):
    async def run():
        stores, controllers = {}, {}
        try:
            for broker_id in (1, 2):
                listener = StoreListener()
                stores[broker_id] = store = await open_store(connect_string, broker_id, listener)
                channels = ControllerChannelManager(lambda b: FakeChannel(b.broker_id, []))
                controllers[broker_id] = Controller(broker_id, store, channels)
                controllers[broker_id].listener(listener)
                await store.register_broker(broker(broker_id))
                controllers[broker_id].start()
                await controllers[broker_id].idle()
            active = next(c for c in controllers.values() if c.active)
            await expire_session(stores[active.broker_id].zk)

            def one_active_at_epoch_2():
                return [c.context.epoch for c in controllers.values() if c.active] == [2]

            await wait_for(one_active_at_epoch_2, message="exactly one controller, epoch 2")
            elected = next(c for c in controllers.values() if c.active)
            assert await stores[1].controller_id() == elected.broker_id
            live = await stores[1].live_brokers()
            assert set(live) == {1, 2} and live[active.broker_id][1] == stores[active.broker_id].broker_epoch
        finally:
            for controller in controllers.values():
                await controller.shutdown()
            for store in stores.values():
                await store.close()

    asyncio.run(run())
