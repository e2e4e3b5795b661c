"""KafkaZkClient against a real ZooKeeper: broker epochs, controller election and fencing,
topics, partition states, configs, deletion marks and producer-id blocks."""

import asyncio
import json
import uuid

import pytest

from pybroker.types import TopicPartition
from pybroker.zookeeper import znodes
from pybroker.zookeeper.client import (
    BadVersionError,
    ConnectionLoss,
    CreateOp,
    MultiOpError,
    NodeExistsError,
    SetDataOp,
)
from pybroker.zookeeper.kafka_zk_client import (
    BrokerIdInUseError,
    ControllerMovedError,
    KafkaZkClient,
    TopicExistsError,
)
from pybroker.zookeeper.znodes import (
    BrokerInfo,
    EndPoint,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    ReplicaAssignment,
)
from tests.zookeeper import chroot_for, connect, expire_session


@pytest.fixture
def connect_string(zookeeper, request):
    return chroot_for(zookeeper, request.node.name)


def run_with_clients(connect_string, count, scenario):
    """Run ``scenario(*kafka_zk_clients)`` with ``count`` sessions, all closed at the end."""
    async def run():
        sessions = [await connect(connect_string) for _ in range(count)]
        try:
            return await scenario(*(KafkaZkClient(s) for s in sessions))
        finally:
            for session in sessions:
                await session.close()

    return asyncio.run(run())


def broker_info(broker_id, port=9092):
    return BrokerInfo(broker_id, (EndPoint("127.0.0.1", port, "PLAINTEXT", "PLAINTEXT"),), timestamp_ms=1)


def test_top_level_paths_and_cluster_id(connect_string):
    async def scenario(a, b):
        await a.create_top_level_paths()
        await a.create_top_level_paths()  # idempotent
        for path in znodes.PERSISTENT_ZK_PATHS:
            assert await a.zk.exists(path) is not None, path
        assert await a.get_cluster_id() is None
        assert await a.get_or_create_cluster_id("first-id") == "first-id"
        assert await b.get_or_create_cluster_id("second-id") == "first-id"
        assert json.loads((await a.zk.get("/cluster/id"))[0]) == {"version": "1", "id": "first-id"}

    run_with_clients(connect_string, 2, scenario)


def test_broker_epoch_is_the_czxid_and_an_id_is_registered_once(connect_string):
    async def scenario(a, b):
        await a.create_top_level_paths()
        epoch = await a.register_broker(broker_info(1))
        data, stat = await a.zk.get("/brokers/ids/1")
        assert epoch == stat.czxid and stat.ephemeralOwner == a.zk.session_id
        assert json.loads(data)["endpoints"] == ["PLAINTEXT://127.0.0.1:9092"]
        assert await a.register_broker(broker_info(1)) == epoch  # ours already: same node

        with pytest.raises(BrokerIdInUseError, match="broker id 1 is already registered .* another broker running with this id"):
            await b.register_broker(broker_info(1, port=9093))
        epoch_2 = await b.register_broker(broker_info(2, port=9093))
        assert epoch_2 > epoch
        brokers = await b.get_all_brokers()
        assert {i: e for i, (_, e) in brokers.items()} == {1: epoch, 2: epoch_2}
        assert brokers[2][0] == broker_info(2, port=9093)
        assert await b.get_broker_ids() == [1, 2]
        assert await b.get_broker(3) is None

    run_with_clients(connect_string, 2, scenario)


def test_re_registration_after_session_expiry_gets_a_new_larger_epoch(connect_string):
    async def scenario(a, observer):
        await a.create_top_level_paths()
        epoch = await a.register_broker(broker_info(1))
        await expire_session(a.zk)
        assert await observer.get_broker(1) is None  # the expired session's ephemeral is gone
        new_epoch = await a.register_broker(broker_info(1))
        assert new_epoch > epoch
        assert (await observer.zk.exists("/brokers/ids/1")).ephemeralOwner == a.zk.session_id

    run_with_clients(connect_string, 2, scenario)


def test_a_registration_left_by_our_previous_session_is_replaced(connect_string):
    async def scenario(a, stale):
        await a.create_top_level_paths()
        stale_epoch = await stale.register_broker(broker_info(1))
        # As if ``stale``'s session had been ours before this one (ZOOKEEPER-2985: ZooKeeper
        # did not delete the node of an expired session): Kafka deletes and re-creates it.
        a._registration_session_id = stale.zk.session_id
        epoch = await a.register_broker(broker_info(1))
        assert epoch > stale_epoch
        assert (await a.zk.exists("/brokers/ids/1")).ephemeralOwner == a.zk.session_id

    run_with_clients(connect_string, 2, scenario)


def test_one_controller_wins_and_the_deposed_one_is_fenced(connect_string):
    async def scenario(first, second, observer):
        outcomes = await asyncio.gather(
            first.register_controller_and_increment_epoch(1),
            second.register_controller_and_increment_epoch(2),
            return_exceptions=True,
        )
        winners = [o for o in outcomes if not isinstance(o, BaseException)]
        assert len(winners) == 1 and sum(isinstance(o, ControllerMovedError) for o in outcomes) == 1
        epoch, epoch_zk_version = winners[0]
        assert epoch == 1 and epoch_zk_version == 1  # created with 0 at version 0, then set
        winner_id = 1 if not isinstance(outcomes[0], BaseException) else 2
        assert await observer.get_controller_id() == winner_id
        assert (await observer.zk.get("/controller_epoch"))[0] == b"1"
        controller_json = json.loads((await observer.zk.get("/controller"))[0])
        assert controller_json["version"] == 1 and controller_json["brokerid"] == winner_id

        old, new = (first, second) if winner_id == 1 else (second, first)
        with pytest.raises(ControllerMovedError):
            await new.register_controller_and_increment_epoch(3 - winner_id)

        # The controller's session ends: /controller goes, the other broker is elected.
        await expire_session(old.zk)
        assert await observer.get_controller_id() is None
        new_epoch, new_epoch_zk_version = await new.register_controller_and_increment_epoch(3 - winner_id)
        assert (new_epoch, new_epoch_zk_version) == (2, 2)

        with pytest.raises(ControllerMovedError):
            await old.controller_multi([CreateOp("/stale-write")], epoch_zk_version)
        assert await observer.zk.exists("/stale-write") is None
        assert await new.controller_multi([CreateOp("/fresh-write", b"x")], new_epoch_zk_version) == ["/fresh-write"]

        # A failing op inside a fenced multi is reported at its own index.
        with pytest.raises(MultiOpError) as failed:
            await new.controller_multi([CreateOp("/other"), SetDataOp("/fresh-write", b"y", 9)], new_epoch_zk_version)
        assert failed.value.index == 1 and isinstance(failed.value.error, BadVersionError)

    run_with_clients(connect_string, 3, scenario)


def test_a_controller_write_is_never_sent_in_a_session_other_than_the_elected_one(connect_string):
    """The epoch check alone would let this write through (nobody else has been elected, the
    epoch's zkVersion has not moved); the controllership went with the session, so it is refused
    (Kafka gets the same from its Expire event, handled before the new session)."""
    async def scenario(controller, observer):
        await observer.create_top_level_paths()
        _, epoch_zk_version = await controller.register_controller_and_increment_epoch(1)
        await controller.controller_multi([CreateOp("/before-expiry")], epoch_zk_version)
        await expire_session(controller.zk)
        assert await observer.get_controller_id() is None
        with pytest.raises(ControllerMovedError, match="session that won the controller election"):
            await controller.controller_multi([CreateOp("/after-expiry")], epoch_zk_version)
        assert await observer.zk.exists("/after-expiry") is None

        # Elected again in the new session, it writes again.
        _, epoch_zk_version = await controller.register_controller_and_increment_epoch(1)
        assert await controller.controller_multi([CreateOp("/re-elected")], epoch_zk_version) == ["/re-elected"]

    run_with_clients(connect_string, 2, scenario)


def test_a_controller_write_held_up_by_a_lost_connection_is_not_resent_in_a_new_session(connect_string):
    async def scenario(controller, observer):
        await observer.create_top_level_paths()
        _, epoch_zk_version = await controller.register_controller_and_increment_epoch(1)
        real_multi, attempts = controller.zk.multi, []

        async def multi(ops):
            attempts.append(ops)
            if len(attempts) == 1:  # the connection is lost, and the session expires meanwhile
                await expire_session(controller.zk)
                raise ConnectionLoss()
            return await real_multi(ops)

        controller.zk.multi = multi
        with pytest.raises(ControllerMovedError):
            await controller.controller_multi([CreateOp("/held-up")], epoch_zk_version)
        assert len(attempts) == 1 and await observer.zk.exists("/held-up") is None

    run_with_clients(connect_string, 2, scenario)


def lose_the_first_reply(zk_client):
    """The next multi reaches ZooKeeper and applies, but its reply is lost (ConnectionLoss)."""
    real_multi, lost = zk_client.zk.multi, []

    async def multi(ops):
        results = await real_multi(ops)
        if not lost:
            lost.append(ops)
            raise ConnectionLoss()
        return results

    zk_client.zk.multi = multi
    return lost


def test_requests_whose_reply_was_lost_are_resent_and_recognised_as_won(connect_string):
    async def scenario(zk_client):
        await zk_client.create_top_level_paths()
        lost = lose_the_first_reply(zk_client)
        # Resent, the election finds /controller naming us and the epoch it meant to write.
        assert await zk_client.register_controller_and_increment_epoch(1) == (1, 1)
        assert lost and await zk_client.get_controller_id() == 1

        lost = lose_the_first_reply(zk_client)
        # Resent, the registration finds its own ephemeral: the epoch is that node's czxid.
        epoch = await zk_client.register_broker(broker_info(1))
        assert lost and epoch == (await zk_client.zk.exists("/brokers/ids/1")).czxid

    run_with_clients(connect_string, 1, scenario)


def test_topics_and_partition_states(connect_string):
    async def scenario(controller, admin):
        await admin.create_top_level_paths()
        _, epoch_zk_version = await controller.register_controller_and_increment_epoch(1)
        topic_id = await admin.create_topic("t", {0: [1, 2], 1: [2, 1]}, {"retention.ms": "1000"})
        with pytest.raises(TopicExistsError, match="Topic 't' already exists."):
            await admin.create_topic("t", {0: [1]})
        assert await admin.get_topic_configs("t") == {"retention.ms": "1000"}  # untouched
        assert await admin.get_all_topics() == {"t"}
        assigned = (await controller.get_replica_assignment_and_topic_ids(["t", "missing"]))["t"]
        assert assigned.topic_id == topic_id
        assert assigned.assignment == {0: ReplicaAssignment((1, 2)), 1: ReplicaAssignment((2, 1))}

        tp0, tp1 = TopicPartition("t", 0), TopicPartition("t", 1)
        states = {
            tp0: LeaderIsrAndControllerEpoch(LeaderAndIsr(1, 0, (1, 2)), 1),
            tp1: LeaderIsrAndControllerEpoch(LeaderAndIsr(2, 0, (2, 1)), 1),
        }
        assert await controller.create_topic_partition_states(states, epoch_zk_version) == {tp0: 0, tp1: 0}
        again = await controller.create_topic_partition_states({tp0: states[tp0]}, epoch_zk_version)
        assert isinstance(again[tp0], NodeExistsError)
        read = await admin.get_topic_partition_states([tp0, tp1, TopicPartition("t", 9)])
        assert read == states

        # Conditional on the partition epoch: a stale epoch loses, the winner gets epoch 1.
        shrunk = LeaderAndIsr(1, 1, (1,), partition_epoch=0)
        result = await controller.update_leader_and_isr({tp0: shrunk}, 1, epoch_zk_version)
        assert result.finished_partitions == {tp0: LeaderAndIsr(1, 1, (1,), partition_epoch=1)}
        result = await controller.update_leader_and_isr(
            {tp0: LeaderAndIsr(2, 1, (2,), partition_epoch=0), tp1: LeaderAndIsr(2, 1, (2,), partition_epoch=0)},
            1, epoch_zk_version,
        )
        assert result.partitions_to_retry == [tp0] and result.finished_partitions[tp1].partition_epoch == 1
        raw = await controller.set_topic_partition_states({tp0: states[tp0]}, epoch_zk_version)
        assert isinstance(raw[tp0], BadVersionError)
        assert (await admin.get_topic_partition_states([tp0]))[tp0].leader_and_isr.partition_epoch == 1

        # A stale controller epoch zkVersion fences all of it.
        with pytest.raises(ControllerMovedError):
            await controller.update_leader_and_isr({tp1: LeaderAndIsr(1, 2, (1,), partition_epoch=1)}, 1, epoch_zk_version + 1)
        with pytest.raises(ControllerMovedError):
            await controller.set_topic_assignment("t", topic_id, {0: ReplicaAssignment((1,))}, epoch_zk_version + 1)

        await controller.set_topic_assignment(
            "t", topic_id, {**assigned.assignment, 2: ReplicaAssignment((1, 2))}, epoch_zk_version
        )
        assert sorted((await admin.get_topic_assignment("t")).assignment) == [0, 1, 2]

    run_with_clients(connect_string, 2, scenario)


def test_topic_config_changes_are_announced(connect_string):
    async def scenario(admin):
        await admin.create_top_level_paths()
        await admin.create_topic("t", {0: [1]})
        assert json.loads((await admin.zk.get("/config/topics/t"))[0]) == {"version": 1, "config": {}}
        path = await admin.change_topic_config("t", {"cleanup.policy": "compact"})
        assert path.startswith("/config/changes/config_change_") and len(path.rsplit("_", 1)[1]) == 10
        assert (await admin.zk.get(path))[0] == b'{"version":2,"entity_path":"topics/t"}'
        assert await admin.get_topic_configs("t") == {"cleanup.policy": "compact"}
        second = await admin.change_topic_config("t", {})
        assert second > path and await admin.get_topic_configs("t") == {}

    run_with_clients(connect_string, 1, scenario)


def test_topic_deletion_marks_and_removal(connect_string):
    async def scenario(controller, admin):
        await admin.create_top_level_paths()
        _, epoch_zk_version = await controller.register_controller_and_increment_epoch(1)
        await admin.create_topic("doomed", {0: [1]}, {"retention.ms": "1"})
        tp = TopicPartition("doomed", 0)
        await controller.create_topic_partition_states(
            {tp: LeaderIsrAndControllerEpoch(LeaderAndIsr(1, 0, (1,)), 1)}, epoch_zk_version
        )
        await admin.create_delete_topic_path("doomed")
        with pytest.raises(NodeExistsError):
            await admin.create_delete_topic_path("doomed")
        assert await admin.is_topic_marked_for_deletion("doomed")
        assert await controller.get_topic_deletions() == ["doomed"]
        with pytest.raises(TopicExistsError, match="marked for deletion"):
            await admin.create_topic("doomed", {0: [1]})

        with pytest.raises(ControllerMovedError):
            await controller.delete_topic_znode("doomed", epoch_zk_version + 1)
        await controller.delete_topic_znode("doomed", epoch_zk_version)
        await controller.delete_topic_configs(["doomed"], epoch_zk_version)
        await controller.delete_topic_deletions(["doomed", "never-marked"], epoch_zk_version)
        assert await admin.get_all_topics() == set()
        assert await admin.zk.exists("/config/topics/doomed") is None
        assert await admin.get_topic_deletions() == []
        assert await controller.delete_recursive("/brokers/topics/doomed", epoch_zk_version) is False

    run_with_clients(connect_string, 2, scenario)


def test_producer_id_blocks_never_overlap(connect_string):
    async def scenario(a, b):
        await a.create_top_level_paths()
        blocks = await asyncio.gather(*(c.allocate_producer_id_block(i) for i, c in enumerate([a, b] * 5)))
        starts = sorted(start for start, _ in blocks)
        assert starts == list(range(0, 10_000, 1000))
        assert all(end == start + 999 for start, end in blocks)
        latest = json.loads((await a.zk.get("/latest_producer_id_block"))[0])
        assert latest["block_start"] == "9000" and latest["block_end"] == "9999" and latest["version"] == 1

    run_with_clients(connect_string, 2, scenario)


def test_topic_ids_differ_per_topic(connect_string):
    async def scenario(admin):
        given = uuid.uuid4()
        assert await admin.create_topic("a", {0: [1]}, topic_id=given) == given
        other = await admin.create_topic("b", {0: [1]})
        assert other != given
        assert (await admin.get_topic_assignment("b")).topic_id == other

    run_with_clients(connect_string, 1, scenario)
