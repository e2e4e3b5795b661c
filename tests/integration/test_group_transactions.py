"""Transactional offset commits against a broker process, at the protocol level (KIP-98, KIP-447).

TxnOffsetCommit writes a producer's offsets pending; OffsetFetch v7+ with RequireStable answers
UNSTABLE_OFFSET_COMMIT for them, without it the previous committed offset. The transaction's end
is sent here as the transaction coordinator sends it: WriteTxnMarkers to the group's
``__consumer_offsets`` partition (a commit makes the offsets visible, an abort drops them). A
restart reloads it all from the log, an open transaction still pending. The last test does the
same with a confluent-kafka transactional producer (``send_offsets_to_transaction``), once the
broker has a transaction coordinator.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from pybroker.client.connection import BrokerConnection
from pybroker.common.errors import ErrorCode as E
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages import (
    InitProducerIdRequest,
    OffsetFetchRequest,
    TxnOffsetCommitRequest,
    WriteTxnMarkersRequest,
)
from pybroker.server.group.records import partition_for
from tests.conftest import wait_until
from tests.integration.test_group_protocol import (
    BROKER_OVERRIDES,
    OFFSETS_TOPIC,
    Session,
    create_topic,
    fetch_offsets,
    form_group,
    scenario,
)

UNSTABLE = E.UNSTABLE_OFFSET_COMMIT
OFFSETS_PARTITIONS = 50  # offsets.topic.num.partitions


@pytest.fixture
def group_id(request: pytest.FixtureRequest) -> str:
    return f"txn-{request.node.name}-{time.time_ns()}"


async def producer_id(conn: BrokerConnection) -> tuple[int, int]:
    response = await conn.send(ApiKey.INIT_PRODUCER_ID, InitProducerIdRequest(
        transactional_id=None, transaction_timeout_ms=60000, producer_id=-1, producer_epoch=-1))
    assert response.error_code == E.NONE, response
    return response.producer_id, response.producer_epoch


async def txn_commit(conn: BrokerConnection, group: str, pid: int, epoch: int, offsets: dict[tuple[str, int], int],
                     *, member_id: str = "", generation: int = -1, version: int = 3) -> dict[tuple[str, int], int]:
    by_topic: dict[str, list[Any]] = {}
    for (topic, partition), offset in offsets.items():
        by_topic.setdefault(topic, []).append(TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition(
            partition_index=partition, committed_offset=offset, committed_leader_epoch=-1, committed_metadata="tx"))
    request = TxnOffsetCommitRequest(
        transactional_id="txn", group_id=group, producer_id=pid, producer_epoch=epoch, generation_id=generation,
        member_id=member_id, group_instance_id=None,
        topics=[TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic(name=t, partitions=p) for t, p in by_topic.items()],
    )
    response = await conn.send(ApiKey.TXN_OFFSET_COMMIT, request, version=version)
    return {(t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions}


async def end_txn(conn: BrokerConnection, group: str, pid: int, epoch: int, commit: bool) -> None:
    """WriteTxnMarkers for the group's ``__consumer_offsets`` partition, as the transaction
    coordinator sends it."""
    index = partition_for(group, OFFSETS_PARTITIONS)
    response = await conn.send(ApiKey.WRITE_TXN_MARKERS, WriteTxnMarkersRequest(markers=[
        WriteTxnMarkersRequest.WritableTxnMarker(
            producer_id=pid, producer_epoch=epoch, transaction_result=commit, coordinator_epoch=0,
            topics=[WriteTxnMarkersRequest.WritableTxnMarkerTopic(name=OFFSETS_TOPIC, partition_indexes=[index])],
        )]))
    [marker] = response.markers
    assert [(t.name, p.partition_index, p.error_code) for t in marker.topics for p in t.partitions] == [
        (OFFSETS_TOPIC, index, E.NONE)]


async def seen(conn: BrokerConnection, group: str, topic: str, *, stable: bool, version: int = 7) -> dict[int, tuple[int, int]]:
    """``{partition: (offset, error)}`` of partitions 0 and 1, as OffsetFetch answers them."""
    if stable:
        wanted = [0, 1]
        if version >= 8:
            request = OffsetFetchRequest(require_stable=True, groups=[OffsetFetchRequest.OffsetFetchRequestGroup(
                group_id=group, topics=[OffsetFetchRequest.OffsetFetchRequestTopics(name=topic, partition_indexes=wanted)])])
            response = await conn.send(ApiKey.OFFSET_FETCH, request, version=version)
            topics = response.groups[0].topics
        else:
            request = OffsetFetchRequest(group_id=group, require_stable=True, topics=[
                OffsetFetchRequest.OffsetFetchRequestTopic(name=topic, partition_indexes=wanted)])
            response = await conn.send(ApiKey.OFFSET_FETCH, request, version=version)
            topics = response.topics
        return {p.partition_index: (p.committed_offset, p.error_code) for t in topics for p in t.partitions}
    error, offsets = await fetch_offsets(conn, group, [(topic, 0), (topic, 1)], version=version)
    assert error == E.NONE
    return {partition: (offset, code) for (_, partition), (offset, _, _, code) in offsets.items()}


def test_txn_offset_commit_is_visible_only_after_the_commit_marker(start_broker, topic_name):
    own = start_broker("txn-groups", **BROKER_OVERRIDES)
    group, open_group = "txn-group", "txn-open-group"
    state: dict[str, int] = {}

    async def before_restart(s: Session) -> None:
        conn = await s.conn()
        await create_topic(conn, topic_name, 2)
        pid, epoch = await producer_id(conn)
        state["pid"], state["epoch"] = pid, epoch
        assert await txn_commit(conn, group, pid, epoch, {(topic_name, 0): 10, (topic_name, 1): 11}) == {
            (topic_name, 0): E.NONE, (topic_name, 1): E.NONE}
        assert await txn_commit(conn, group, pid, epoch, {(topic_name, 5): 1}) == {
            (topic_name, 5): E.UNKNOWN_TOPIC_OR_PARTITION}
        assert await seen(conn, group, topic_name, stable=False) == {0: (-1, E.NONE), 1: (-1, E.NONE)}
        for version in (7, 8):
            assert await seen(conn, group, topic_name, stable=True, version=version) == {
                0: (-1, UNSTABLE), 1: (-1, UNSTABLE)}
        await end_txn(conn, group, pid, epoch, commit=True)
        assert await seen(conn, group, topic_name, stable=True) == {0: (10, E.NONE), 1: (11, E.NONE)}

        # The next transaction of the producer is aborted: its offsets never show.
        assert await txn_commit(conn, group, pid, epoch, {(topic_name, 0): 20}) == {(topic_name, 0): E.NONE}
        await end_txn(conn, group, pid, epoch, commit=False)
        assert await seen(conn, group, topic_name, stable=True) == {0: (10, E.NONE), 1: (11, E.NONE)}

        # One left open across the restart.
        assert await txn_commit(conn, open_group, pid, epoch, {(topic_name, 0): 30}) == {(topic_name, 0): E.NONE}

    async def after_restart(s: Session) -> None:
        conn = await s.conn()
        assert await seen(conn, group, topic_name, stable=True) == {0: (10, E.NONE), 1: (11, E.NONE)}
        assert await seen(conn, open_group, topic_name, stable=True) == {0: (-1, UNSTABLE), 1: (-1, E.NONE)}
        await end_txn(conn, open_group, state["pid"], state["epoch"], commit=True)
        assert await seen(conn, open_group, topic_name, stable=True) == {0: (30, E.NONE), 1: (-1, E.NONE)}

    scenario(own.bootstrap, before_restart)
    own.restart()
    scenario(own.bootstrap, after_restart)


def test_txn_offset_commit_v3_fences_another_generation(broker, group_id, topic_name):
    """KIP-447: a commit naming a member and generation must name the group's current ones."""

    async def body(s: Session) -> None:
        admin = await s.conn()
        await create_topic(admin, topic_name, 2)
        member = await s.member(group_id)
        await form_group(admin, [member])
        pid, epoch = await producer_id(admin)
        offsets = {(topic_name, 0): 5}
        assert await txn_commit(admin, group_id, pid, epoch, offsets, member_id=member.member_id,
                                generation=member.generation + 1) == {(topic_name, 0): E.ILLEGAL_GENERATION}
        assert await txn_commit(admin, group_id, pid, epoch, offsets, member_id="zombie",
                                generation=member.generation) == {(topic_name, 0): E.UNKNOWN_MEMBER_ID}
        assert await txn_commit(admin, group_id, pid, epoch, offsets, member_id=member.member_id,
                                generation=member.generation) == {(topic_name, 0): E.NONE}
        assert await txn_commit(admin, group_id, pid, epoch, offsets, version=2) == {(topic_name, 0): E.NONE}
        assert await txn_commit(admin, "", pid, epoch, offsets) == {(topic_name, 0): E.INVALID_GROUP_ID}
        # The log of __consumer_offsets checks the producer's epoch, as for any transactional batch.
        assert await txn_commit(admin, group_id, pid, epoch + 1, offsets) == {(topic_name, 0): E.NONE}
        assert await txn_commit(admin, group_id, pid, epoch, offsets) == {(topic_name, 0): E.INVALID_PRODUCER_EPOCH}

    scenario(broker.bootstrap, body)


# --- a real transactional producer -----------------------------------------------------------------


def test_send_offsets_to_transaction_with_confluent_kafka(broker, group_id, topic_name):
    """confluent-kafka's transactional producer: offsets sent with ``send_offsets_to_transaction``
    are the group's committed offsets (``Consumer.committed``) only after ``commit_transaction``,
    and never after ``abort_transaction``. The consumer reads read_uncommitted, so its OffsetFetch
    has no RequireStable (librdkafka sets it under read_committed, and retries UNSTABLE_OFFSET_COMMIT)
    and answers the committed offset while the transaction is open."""
    ck = pytest.importorskip("confluent_kafka")
    from confluent_kafka.admin import AdminClient, NewTopic

    if not asyncio.run(_advertises(broker.bootstrap, ApiKey.END_TXN)):
        pytest.skip("this broker has no transaction coordinator yet (EndTxn is not advertised)")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic_name, 1, 1)])[topic_name].result(timeout=30)
    producer = ck.Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": f"tx-{group_id}"})
    consumer = ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group_id,
                            "enable.auto.commit": False, "isolation.level": "read_uncommitted"})
    try:
        producer.init_transactions(30)
        metadata = consumer.consumer_group_metadata()

        def committed() -> int:
            return consumer.committed([ck.TopicPartition(topic_name, 0)], timeout=10)[0].offset

        producer.begin_transaction()
        producer.produce(topic_name, b"v", partition=0)
        producer.send_offsets_to_transaction([ck.TopicPartition(topic_name, 0, 7)], metadata, 30)
        assert committed() < 0  # OFFSET_INVALID: pending, not committed
        producer.commit_transaction(30)
        wait_until(lambda: committed() == 7, timeout=30, message="the offset committed by the transaction")

        producer.begin_transaction()
        producer.send_offsets_to_transaction([ck.TopicPartition(topic_name, 0, 9)], metadata, 30)
        assert committed() == 7
        producer.abort_transaction(30)
        assert committed() == 7
    finally:
        consumer.close()
        producer.flush(10)


async def _advertises(bootstrap: str, api_key: int) -> bool:
    host, port = bootstrap.split(":")
    connection = BrokerConnection(host, int(port))
    await connection.connect()
    try:
        return api_key in dict(connection.api_versions)
    finally:
        await connection.close()
