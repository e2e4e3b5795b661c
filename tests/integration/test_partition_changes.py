"""KIP-253 on a real single broker: a topic grows and shrinks, and the broker tells clients so.

What a client observes: the counts in Metadata and ``topics describe``, the epoch boundaries of
PartitionLeaderEpochsForPartitions, the Produce/Fetch count check (only for clients that send a
count), a shrink marking partitions that are removed once DeleteRecords drained them, the
refusals (grow while a deletion is pending, shrink below the initial count or with ordered
delivery off), and ConsumerGroupPosition for a member of a consumer group.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

import pytest

from pybroker.client.admin import Admin, AdminError
from pybroker.client.connection import BrokerConnection
from pybroker.common.errors import ErrorCode
from pybroker.protocol import consumer_protocol
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages import (
    ConsumerGroupPositionRequest,
    FetchRequest,
    JoinGroupRequest,
    OffsetCommitRequest,
    PartitionLeaderEpochsForPartitionsRequest,
    ProduceRequest,
    SyncGroupRequest,
)
from pybroker.types import TopicPartition
from tests.conftest import broker_connection, wait_until
from tests.unit.batches import build_batch

BROKER_OVERRIDES = {"partition.deletion.check.interval.ms": 200}


def run(coro):
    return asyncio.run(coro)


connect = broker_connection


async def produce(connection: BrokerConnection, topic: str, partition: int, count: int = -1,
                  records: int = 1) -> tuple[ErrorCode, str | None]:
    batch = build_batch([(b"k%d" % i, b"v") for i in range(records)])
    response = await connection.send(ApiKey.PRODUCE, ProduceRequest(
        acks=1, timeout_ms=5000, topic_data=[ProduceRequest.TopicProduceData(
            name=topic, undeleted_partition_count=count,
            partition_data=[ProduceRequest.PartitionProduceData(index=partition, records=batch)])]))
    p = response.responses[0].partition_responses[0]
    return ErrorCode(p.error_code), p.error_message


async def fetch_error(connection: BrokerConnection, topic: str, partition: int, count: int) -> ErrorCode:
    F = FetchRequest
    response = await connection.send(ApiKey.FETCH, F(
        replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0, session_id=0,
        session_epoch=-1, forgotten_topics_data=[], rack_id="",
        topics=[F.FetchTopic(topic=topic, undeleted_partition_count=count, partitions=[F.FetchPartition(
            partition=partition, current_leader_epoch=-1, fetch_offset=0, log_start_offset=-1,
            partition_max_bytes=1 << 20)])]))
    return ErrorCode(response.responses[0].partitions[0].error_code)


async def epoch_maps(connection: BrokerConnection, topic: str, partitions: list[int]) -> dict[int, tuple[dict, dict]]:
    R = PartitionLeaderEpochsForPartitionsRequest
    response = await connection.send(ApiKey.PARTITION_LEADER_EPOCHS_FOR_PARTITIONS, R(
        topics=[R.RequestTopic(name=topic, partition_indexes=partitions)]))
    out = {}
    for p in response.topics[0].partitions:
        assert p.error_code == ErrorCode.NONE
        out[p.partition_index] = ({e.partition_index: e.leader_epoch for e in p.leader_epochs_after_creation},
                                  {e.partition_index: e.leader_epoch for e in p.leader_epochs_before_deletion})
    return out


async def counts(admin: Admin, topic: str) -> tuple[int, int | None, int | None]:
    [d] = await admin.describe_topics([topic])
    return len(d.partitions), d.initial_partition_count, d.undeleted_partition_count


def test_grow_then_shrink_drained_by_delete_records(broker, topic_name):
    async def scenario() -> None:
        async with Admin(broker.bootstrap) as admin:
            await admin.create_topic(topic_name, 3, 1)
            connection = await connect(broker.bootstrap)
            try:
                await admin.create_partitions(topic_name, 6)
                assert await counts(admin, topic_name) == (6, 3, 6)
                # The added partitions recorded the epochs (0) their elders had before the bump to 1.
                maps = await epoch_maps(connection, topic_name, [0, 3, 4, 5])
                assert maps[0] == ({}, {})
                assert all(maps[p] == ({0: 0, 1: 0, 2: 0}, {}) for p in (3, 4, 5))

                # The count check: only for a client that sends a count.
                assert (await produce(connection, topic_name, 1, count=3))[0] == ErrorCode.INVALID_PARTITION_METADATA
                assert (await produce(connection, topic_name, 1, count=6))[0] == ErrorCode.NONE
                assert (await produce(connection, topic_name, 1))[0] == ErrorCode.NONE
                assert await fetch_error(connection, topic_name, 1, 3) == ErrorCode.INVALID_PARTITION_METADATA
                assert await fetch_error(connection, topic_name, 1, 6) == ErrorCode.NONE
                for p in (4, 5):
                    assert (await produce(connection, topic_name, p, count=6, records=3))[0] == ErrorCode.NONE

                # Shrink to 4: partitions 4 and 5 are marked, the survivors' epochs (1, and 0 for 3) recorded.
                await admin.create_partitions(topic_name, 4)
                assert await counts(admin, topic_name) == (6, 3, 4)
                maps = await epoch_maps(connection, topic_name, [4, 5])
                assert maps[4] == maps[5] == ({0: 0, 1: 0, 2: 0}, {0: 1, 1: 1, 2: 1, 3: 0})
                # A marked partition takes no more records; it can still be read (drained).
                error, message = await produce(connection, topic_name, 5, count=4)
                assert error == ErrorCode.INVALID_PARTITION_METADATA and "marked for deletion" in message
                assert (await produce(connection, topic_name, 5))[0] == ErrorCode.NOT_LEADER_OR_FOLLOWER
                assert (await produce(connection, topic_name, 2, count=6))[0] == ErrorCode.INVALID_PARTITION_METADATA
                assert (await produce(connection, topic_name, 2, count=4))[0] == ErrorCode.NONE
                assert await fetch_error(connection, topic_name, 5, 4) == ErrorCode.NONE

                # Refused while the deletion is pending, or below the initial count: nothing changes.
                with pytest.raises(AdminError) as grow:
                    await admin.create_partitions(topic_name, 8)
                assert grow.value.error == ErrorCode.INVALID_PARTITIONS
                assert "marked for deletion" in str(grow.value)
                with pytest.raises(AdminError) as below:
                    await admin.create_partitions(topic_name, 2)
                assert below.value.error == ErrorCode.INVALID_PARTITIONS and "created with 3" in str(below.value)
                assert await counts(admin, topic_name) == (6, 3, 4)

                # Partition 4 drained is not removed while 5, above it, still holds records
                # (partition indexes stay contiguous).
                tp4, tp5 = TopicPartition(topic_name, 4), TopicPartition(topic_name, 5)
                await admin.delete_records({tp4: -1})
                await asyncio.sleep(0.6)  # three drain checks
                assert (await counts(admin, topic_name))[0] == 6
                await admin.delete_records({tp5: -1})

                async def removed() -> bool:
                    return await counts(admin, topic_name) == (4, 3, 4)
                await wait_async(removed, 15)
                # No marked partition left: the topic grows again.
                await admin.create_partitions(topic_name, 5)
                assert await counts(admin, topic_name) == (5, 3, 5)
                # the shrink had bumped them again
                assert (await epoch_maps(connection, topic_name, [4]))[4][0] == {0: 2, 1: 2, 2: 2, 3: 1}
            finally:
                await connection.close()

    run(scenario())


def test_shrink_needs_ordered_delivery(broker, topic_name):
    async def scenario() -> None:
        async with Admin(broker.bootstrap) as admin:
            await admin.create_topic(topic_name, 1, 1, {"enable.ordered.delivery": "false"})
            await admin.create_partitions(topic_name, 3)
            with pytest.raises(AdminError) as e:
                await admin.create_partitions(topic_name, 2)
            # Without KIP-253 the topic is Kafka's: every decrease refused with Kafka's text.
            assert e.value.error == ErrorCode.INVALID_PARTITIONS
            assert e.value.message == "Topic currently has 3 partitions, which is higher than the requested 2."
            # Without ordered delivery the broker does not check counts.
            connection = await connect(broker.bootstrap)
            try:
                assert (await produce(connection, topic_name, 0, count=1))[0] == ErrorCode.NONE
            finally:
                await connection.close()

    run(scenario())


def test_internal_topics_do_not_shrink(broker):
    async def scenario() -> None:
        async with Admin(broker.bootstrap) as admin:
            await admin.find_coordinator("g-internal")  # creates __consumer_offsets
            [d] = await admin.describe_topics(["__consumer_offsets"])
            with pytest.raises(AdminError) as e:
                await admin.create_partitions("__consumer_offsets", len(d.partitions) - 1)
            assert e.value.error == ErrorCode.INVALID_PARTITIONS

    run(scenario())


async def wait_async(condition, timeout: float) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not await condition():
        assert asyncio.get_running_loop().time() < deadline, "condition not met in time"
        await asyncio.sleep(0.1)


async def join_group(connection: BrokerConnection, group: str, topic: str, partitions: list[int]) -> tuple[str, int]:
    """One member joins ``group`` (consumer protocol) and assigns itself ``partitions``."""
    subscription = consumer_protocol.encode_subscription(consumer_protocol.ConsumerSubscription([topic]))
    member_id = ""
    for _ in range(2):  # the first JoinGroup hands out a member id (MEMBER_ID_REQUIRED)
        join = await connection.send(ApiKey.JOIN_GROUP, JoinGroupRequest(
            group_id=group, session_timeout_ms=10000, rebalance_timeout_ms=10000, member_id=member_id,
            protocol_type="consumer",
            protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=subscription)]))
        member_id = join.member_id
        if join.error_code == ErrorCode.NONE:
            break
        assert join.error_code == ErrorCode.MEMBER_ID_REQUIRED
    assignment = consumer_protocol.encode_assignment(consumer_protocol.ConsumerAssignment(
        [TopicPartition(topic, p) for p in partitions]))
    sync = await connection.send(ApiKey.SYNC_GROUP, SyncGroupRequest(
        group_id=group, generation_id=join.generation_id, member_id=member_id, protocol_type="consumer",
        protocol_name="range",
        assignments=[SyncGroupRequest.SyncGroupRequestAssignment(member_id=member_id, assignment=assignment)]))
    assert sync.error_code == ErrorCode.NONE
    return member_id, join.generation_id


def test_consumer_group_position(broker, topic_name):
    group = f"g-{topic_name}"

    async def scenario() -> None:
        async with Admin(broker.bootstrap) as admin:
            await admin.create_topic(topic_name, 2, 1)
            await admin.find_coordinator(group)  # this single broker
            connection = await connect(broker.bootstrap)
            try:
                member, generation = await join_group(connection, group, topic_name, [0])
                R = ConsumerGroupPositionRequest

                async def exchange(reports: dict[int, int], interested: list[int], generation_id: int = generation):
                    return await connection.send(ApiKey.CONSUMER_GROUP_POSITION, R(
                        group_id=group, generation_id=generation_id, member_id=member,
                        reported_positions=[R.ReportedTopic(name=topic_name, partitions=[
                            R.ReportedPartition(partition_index=p, position=pos) for p, pos in reports.items()])],
                        interested_topics=[R.InterestedTopic(name=topic_name, partition_indexes=interested)]))

                answer = await exchange({0: 7, 1: 3}, [0, 1])
                assert answer.error_code == ErrorCode.NONE
                # Partition 1 is not this member's: its report is refused and changes nothing.
                assert [(t.name, [(p.partition_index, p.error_code) for p in t.partitions]) for t in answer.report_errors] \
                    == [(topic_name, [(1, ErrorCode.INVALID_REQUEST)])]
                positions = {p.partition_index: p.position for t in answer.group_positions for p in t.partitions}
                assert positions == {0: 7, 1: -1}
                # A stale generation or an unknown member is refused as a heartbeat would be.
                assert (await exchange({}, [0], generation + 1)).error_code == ErrorCode.ILLEGAL_GENERATION
                unknown = await connection.send(ApiKey.CONSUMER_GROUP_POSITION, R(
                    group_id=group, generation_id=generation, member_id="nobody", reported_positions=[],
                    interested_topics=[]))
                assert unknown.error_code == ErrorCode.UNKNOWN_MEMBER_ID
                # A committed offset beyond the reported position is the group's position.
                C = OffsetCommitRequest
                committed = await connection.send(ApiKey.OFFSET_COMMIT, C(
                    group_id=group, generation_id_or_member_epoch=generation, member_id=member,
                    topics=[C.OffsetCommitRequestTopic(name=topic_name, partitions=[C.OffsetCommitRequestPartition(
                        partition_index=1, committed_offset=11, committed_leader_epoch=-1, committed_metadata="")])]))
                assert committed.topics[0].partitions[0].error_code == ErrorCode.NONE
                answer = await exchange({}, [1])
                assert {p.partition_index: p.position for t in answer.group_positions for p in t.partitions} == {1: 11}
            finally:
                await connection.close()

    run(scenario())


def test_api_versions_lists_the_kip_253_apis(broker):
    async def scenario() -> None:
        connection = await connect(broker.bootstrap)
        try:
            assert connection.version_for(ApiKey.CONSUMER_GROUP_POSITION) == 0
            assert connection.version_for(ApiKey.PARTITION_LEADER_EPOCHS_FOR_PARTITIONS) == 0
        finally:
            await connection.close()

    run(scenario())


def test_describe_shows_marked_partitions(broker, topic_name):
    async def scenario() -> None:
        async with Admin(broker.bootstrap) as admin:
            await admin.create_topic(topic_name, 2, 1)
            await admin.create_partitions(topic_name, 4)
            connection = await connect(broker.bootstrap)
            try:
                assert (await produce(connection, topic_name, 3, count=4))[0] == ErrorCode.NONE
            finally:
                await connection.close()

    run(scenario())
    shrink = subprocess.run([sys.executable, "-m", "pybroker", "topics", "alter", "--bootstrap-server", broker.bootstrap,
                             "--topic", topic_name, "--partitions", "3"], capture_output=True, text=True, timeout=60)
    assert shrink.returncode == 0 and shrink.stdout == f"Altered topic {topic_name}.\n", shrink.stderr
    done = subprocess.run([sys.executable, "-m", "pybroker", "topics", "describe", "--bootstrap-server",
                           broker.bootstrap, "--topic", topic_name], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].endswith("\tPartitionCount: 4\tReplicationFactor: 1\tConfigs: "
                             "\tInitialPartitionCount: 2\tUndeletedPartitionCount: 3"), lines[0]
    assert lines[4].endswith("\tPartition: 3\tLeader: 1\tReplicas: 1\tIsr: 1\tMarkedForDeletion: true"), lines[4]
    assert all("MarkedForDeletion" not in line for line in lines[1:4])


def test_grow_and_shrink_on_a_three_broker_cluster(zookeeper, tmp_path, request, topic_name):
    """The same on ZooKeeper: LeaderAndIsr carries the count to leaders on other brokers, the
    epoch maps live in the partition znodes, and the controller asks other brokers (ListOffsets)
    whether marked partitions are drained."""
    from tests.integration.cluster import start_cluster, zk_client
    from tests.zookeeper import chroot_for

    cluster = start_cluster(chroot_for(zookeeper, request.node.name), tmp_path,
                            **{"partition.deletion.check.interval.ms": 200})

    async def scenario() -> None:
        async with Admin(cluster.bootstrap) as admin:
            await admin.create_topic(topic_name, 3, 3)
            await admin.create_partitions(topic_name, 6)
            await admin.create_partitions(topic_name, 4)
            assert await counts(admin, topic_name) == (6, 3, 4)
            [described] = await admin.describe_topics([topic_name])
            for info in described.partitions:  # every leader, on whichever broker, checks counts
                connection = await connect(cluster.broker(info.leader).bootstrap)
                try:
                    expected = ErrorCode.NONE if info.partition < 4 else ErrorCode.INVALID_PARTITION_METADATA
                    assert (await produce(connection, topic_name, info.partition, count=4))[0] == expected
                    assert (await produce(connection, topic_name, info.partition, count=6))[0] == \
                        ErrorCode.INVALID_PARTITION_METADATA
                finally:
                    await connection.close()
            zk = zk_client(cluster.connect)
            try:
                data, _ = zk.get(f"/brokers/topics/{topic_name}/partitions/5")
                body = json.loads(data)
                assert body["leaderEpochAfterCreation"] == {"0": 0, "1": 0, "2": 0}
                assert body["leaderEpochBeforeDeletion"] == {"0": 1, "1": 1, "2": 1, "3": 0}
                assert json.loads(zk.get(f"/brokers/topics/{topic_name}")[0])["undeleted_partition_count"] == 4
                # Nothing to drain: the marked partitions are empty, so they go.
                async def removed() -> bool:
                    return await counts(admin, topic_name) == (4, 3, 4)
                await wait_async(removed, 20)
                assert zk.exists(f"/brokers/topics/{topic_name}/partitions/5") is None
                assert sorted(json.loads(zk.get(f"/brokers/topics/{topic_name}")[0])["partitions"]) == ["0", "1", "2", "3"]
            finally:
                zk.stop()
            # Each replica's log of a removed partition is deleted.
            for b in cluster.brokers:
                wait_until(lambda b=b: not any(b.data_dir.glob(f"{topic_name}-5*")), 15,
                           message=f"{b.data_dir} lost its replica of partition 5")

    try:
        run(scenario())
    finally:
        cluster.kill()
