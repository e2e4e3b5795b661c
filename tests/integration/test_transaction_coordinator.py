"""The transaction coordinator on a single broker: FindCoordinator for a transactional id, a
confluent-kafka transactional producer's InitProducerId, fencing by a second instance, the admin
APIs (DescribeTransactions / ListTransactions over the raw protocol: confluent-kafka's AdminClient
has neither), the protocol's error answers, and a committed and an aborted transaction whose
markers reach the partition (read back with read_uncommitted: the records and no markers); in a
three-broker cluster, a transaction over partitions led by every broker, markers sent to each over
the network."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from pybroker.common.errors import ErrorCode
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages import (
    AddPartitionsToTxnRequest,
    DescribeTransactionsRequest,
    EndTxnRequest,
    FindCoordinatorRequest,
    InitProducerIdRequest,
    ListTransactionsRequest,
    MetadataRequest,
)
from pybroker.server.transaction.transaction_log import partition_for
from tests.conftest import broker_connection, find_coordinator_at, wait_until
from tests.integration import clients

TRANSACTION_STATE_TOPIC = "__transaction_state"


def raw(bootstrap: str, api_key: int, request: Any, version: int | None = None) -> Any:
    async def run() -> Any:
        connection = await broker_connection(bootstrap)
        try:
            return await connection.send(api_key, request, version=version)
        finally:
            await connection.close()

    return asyncio.run(run())


def describe(bootstrap: str, *transactional_ids: str) -> dict[str, Any]:
    response = raw(bootstrap, ApiKey.DESCRIBE_TRANSACTIONS, DescribeTransactionsRequest(transactional_ids=list(transactional_ids)))
    return {s.transactional_id: s for s in response.transaction_states}


def listed(bootstrap: str, states: list[str] | None = None, producer_ids: list[int] | None = None) -> Any:
    return raw(bootstrap, ApiKey.LIST_TRANSACTIONS,
               ListTransactionsRequest(state_filters=states or [], producer_id_filters=producer_ids or []))


def test_find_coordinator_for_a_transactional_id_creates_the_state_topic(broker):
    for version in (1, 3):
        response = find_coordinator_at(broker.bootstrap, "tx-find", key_type=1, version=version)
        assert (response.error_code, response.node_id, response.port) == (ErrorCode.NONE, 1, broker.port)
    response = raw(broker.bootstrap, ApiKey.FIND_COORDINATOR,
                   FindCoordinatorRequest(key_type=1, coordinator_keys=["a", "b"]), 4)
    assert [(c.key, c.error_code, c.node_id) for c in response.coordinators] == [
        ("a", ErrorCode.NONE, 1), ("b", ErrorCode.NONE, 1)]
    metadata = raw(broker.bootstrap, ApiKey.METADATA, MetadataRequest(topics=[
        MetadataRequest.MetadataRequestTopic(name=TRANSACTION_STATE_TOPIC)]), 9)
    (topic,) = metadata.topics
    assert (topic.error_code, topic.is_internal, len(topic.partitions)) == (ErrorCode.NONE, True, 50)


def test_init_transactions_and_fencing(broker, topic_name):
    from confluent_kafka import KafkaException, Producer

    txn_id = f"txn-{topic_name}"
    first = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": txn_id})
    first.init_transactions(30)
    (state,) = describe(broker.bootstrap, txn_id).values()
    assert (state.error_code, state.transaction_state, state.producer_epoch) == (ErrorCode.NONE, "Empty", 0)
    second = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": txn_id})
    second.init_transactions(30)
    (state,) = describe(broker.bootstrap, txn_id).values()
    assert state.producer_epoch == 1
    # The first instance is fenced at its next transactional call, fatally.
    first.begin_transaction()
    first.produce(topic_name, b"zombie")
    with pytest.raises(KafkaException) as raised:
        first.commit_transaction(30)
    assert raised.value.args[0].fatal()
    second.flush(1)


def test_describe_and_list_transactions(broker, topic_name):
    from confluent_kafka import Producer

    txn_id = f"txn-{topic_name}"
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": txn_id,
                         "transaction.timeout.ms": 45000})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic_name, b"open", partition=0)
    producer.flush(30)
    state = describe(broker.bootstrap, txn_id, "never-seen")
    ongoing = state[txn_id]
    assert (ongoing.error_code, ongoing.transaction_state, ongoing.transaction_timeout_ms) == (
        ErrorCode.NONE, "Ongoing", 45000)
    assert ongoing.transaction_start_time_ms > 0
    assert [(t.topic, list(t.partitions)) for t in ongoing.topics] == [(topic_name, [0])]
    assert state["never-seen"].error_code == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
    response = listed(broker.bootstrap, ["Ongoing", "NoSuchState"])
    assert response.error_code == ErrorCode.NONE and list(response.unknown_state_filters) == ["NoSuchState"]
    assert (txn_id, ongoing.producer_id, "Ongoing") in [
        (s.transactional_id, s.producer_id, s.transaction_state) for s in response.transaction_states]
    by_producer = listed(broker.bootstrap, producer_ids=[ongoing.producer_id])
    assert [s.transactional_id for s in by_producer.transaction_states] == [txn_id]
    producer.abort_transaction(30)
    wait_until(lambda: describe(broker.bootstrap, txn_id)[txn_id].transaction_state == "CompleteAbort",
               message="the abort to complete")


def test_protocol_errors(broker, topic_name):
    bootstrap = broker.bootstrap
    txn_id = f"txn-{topic_name}"
    find_coordinator_at(bootstrap, txn_id, key_type=1, version=1)
    too_long = raw(bootstrap, ApiKey.INIT_PRODUCER_ID,
                   InitProducerIdRequest(transactional_id=txn_id, transaction_timeout_ms=900001), 4)
    assert too_long.error_code == ErrorCode.INVALID_TRANSACTION_TIMEOUT
    init = raw(bootstrap, ApiKey.INIT_PRODUCER_ID,
               InitProducerIdRequest(transactional_id=txn_id, transaction_timeout_ms=60000), 4)
    assert init.error_code == ErrorCode.NONE
    end = raw(bootstrap, ApiKey.END_TXN, EndTxnRequest(transactional_id=txn_id, producer_id=init.producer_id,
                                                        producer_epoch=init.producer_epoch, committed=True), 3)
    assert end.error_code == ErrorCode.INVALID_TXN_STATE  # nothing to commit
    stale = EndTxnRequest(transactional_id=txn_id, producer_id=init.producer_id,
                          producer_epoch=init.producer_epoch + 1, committed=True)
    assert raw(bootstrap, ApiKey.END_TXN, stale, 1).error_code == ErrorCode.INVALID_PRODUCER_EPOCH
    assert raw(bootstrap, ApiKey.END_TXN, stale, 3).error_code == ErrorCode.PRODUCER_FENCED
    topic = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic
    add = AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=txn_id, v3_and_below_producer_id=init.producer_id,
        v3_and_below_producer_epoch=init.producer_epoch,
        v3_and_below_topics=[topic(name="no-such-topic", partitions=[0])],
    )
    response = raw(bootstrap, ApiKey.ADD_PARTITIONS_TO_TXN, add, 3)
    assert [(t.name, [p.partition_error_code for p in t.results_by_partition])
            for t in response.results_by_topic_v3_and_below] == [("no-such-topic", [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION])]
    unknown = EndTxnRequest(transactional_id=f"{txn_id}-unknown", producer_id=1, producer_epoch=0, committed=True)
    # An id of a partition this broker leads but never initialized.
    find_coordinator_at(bootstrap, unknown.transactional_id, key_type=1, version=1)
    assert raw(bootstrap, ApiKey.END_TXN, unknown, 3).error_code == ErrorCode.INVALID_PRODUCER_ID_MAPPING
    assert 0 <= partition_for(txn_id, 50) < 50


def test_committed_and_aborted_transactions_reach_the_partition(broker, topic_name):
    from confluent_kafka import Producer

    txn_id = f"txn-{topic_name}"
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": txn_id})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic_name, b"committed-1", partition=0)
    producer.produce(topic_name, b"committed-2", partition=0)
    producer.commit_transaction(30)
    producer.begin_transaction()
    producer.produce(topic_name, b"aborted", partition=0)
    producer.flush(30)  # sent before the abort (librdkafka drops what is unsent)
    producer.abort_transaction(30)
    producer.begin_transaction()
    producer.produce(topic_name, b"committed-3", partition=0)
    producer.commit_transaction(30)
    wait_until(lambda: describe(broker.bootstrap, txn_id)[txn_id].transaction_state == "CompleteCommit",
               message="the last commit to complete")
    # read_uncommitted: every record, aborted included; the markers take offsets but are no records.
    got = clients.consume_confluent(broker.bootstrap, topic_name, 4, **{"isolation.level": "read_uncommitted"})
    assert [v for _, _, v, _ in got] == [b"committed-1", b"committed-2", b"aborted", b"committed-3"]
    assert [o for o, _, _, _ in got] == [0, 1, 3, 5]


# --- a cluster: __transaction_state replicated, markers to other brokers over the network -------

@pytest.fixture
def cluster(zookeeper: Any, tmp_path: Any, request: Any) -> Any:
    """Three brokers; ``__transaction_state`` with replication factor 3 and min.isr 2."""
    from tests.integration.cluster import start_cluster
    from tests.zookeeper import chroot_for

    cluster = start_cluster(chroot_for(zookeeper, request.node.name), tmp_path,
                            **{"transaction.state.log.replication.factor": 3, "transaction.state.log.min.isr": 2})
    yield cluster
    cluster.kill()


def test_a_transaction_across_brokers_in_a_cluster(cluster, topic_name):
    from confluent_kafka import Producer
    from confluent_kafka.admin import NewTopic

    admin = cluster.admin()
    admin.create_topics([NewTopic(topic_name, num_partitions=3, replication_factor=1)])[topic_name].result(30)
    wait_until(lambda: len({leader for leader, _, _ in cluster.partitions(topic_name).values()}) == 3,
               message="the topic's partitions led by three brokers")
    txn_id = f"txn-{topic_name}"
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": txn_id})
    producer.init_transactions(30)
    for commit in (True, False):
        producer.begin_transaction()
        for partition in range(3):
            producer.produce(topic_name, f"{commit}-{partition}".encode(), partition=partition)
        producer.flush(30)
        (producer.commit_transaction if commit else producer.abort_transaction)(30)
    (leader, replicas, _isr) = cluster.partitions(TRANSACTION_STATE_TOPIC)[partition_for(txn_id, 50)]
    assert len(replicas) == 3
    coordinator = cluster.broker(leader).bootstrap
    wait_until(lambda: describe(coordinator, txn_id)[txn_id].transaction_state == "CompleteAbort",
               message="the abort to complete")
    for partition in range(3):
        # Every partition's leader wrote both markers: the committed record is visible, the
        # aborted one only to read_uncommitted; the markers take offsets 1 and 3.
        got = clients.consume_confluent(cluster.bootstrap, topic_name, 1, partition,
                                        **{"isolation.level": "read_committed"})
        assert [v for _, _, v, _ in got] == [f"True-{partition}".encode()]
        everything = clients.consume_confluent(cluster.bootstrap, topic_name, 2, partition,
                                               **{"isolation.level": "read_uncommitted"})
        assert [(o, v) for o, _, v, _ in everything] == [(0, f"True-{partition}".encode()),
                                                         (2, f"False-{partition}".encode())]
