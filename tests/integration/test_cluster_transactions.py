"""Transactions on a cluster: confluent-kafka, aiokafka and kafka-python transactional producers
committing and aborting across partitions led by two brokers; and on three brokers, the
coordinator's broker killed with SIGKILL:

- in the middle of a transaction (its partitions led by every broker): the replicated
  ``__transaction_state`` lets the new coordinator take over, and the producer commits there;
- in the middle of a commit, after EndTxn was answered and before the markers were written (the
  partition's leader is stopped, so they cannot be): the new coordinator loads PrepareCommit,
  sends the markers itself, and the transaction completes."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import NewTopic

from pybroker.server.group.records import partition_for
from tests.conftest import wait_until
from tests.integration import clients
from tests.integration.cluster import start_cluster
from tests.integration.test_transaction_coordinator import describe
from tests.integration.test_transactions import PRODUCERS, READ_UNCOMMITTED, values
from tests.zookeeper import chroot_for

TXN_PARTITIONS = 5
READ_COMMITTED: dict[str, object] = {"isolation.level": "read_committed"}

pytestmark = pytest.mark.broker_log_allows(r"Sending \w+ to broker \d+ failed", r"WriteTxnMarkers", r"marker")


@pytest.fixture
def cluster(zookeeper, tmp_path, request):
    cluster = start_cluster(
        chroot_for(zookeeper, request.node.name), tmp_path,
        **{"transaction.state.log.replication.factor": 3, "transaction.state.log.min.isr": 2,
           "transaction.state.log.num.partitions": TXN_PARTITIONS},
    )
    yield cluster
    cluster.kill()


@pytest.mark.parametrize("producer", list(PRODUCERS))
def test_each_client_commits_and_aborts_across_two_brokers(zookeeper, tmp_path, request, topic_name, producer):
    cluster = start_cluster(
        chroot_for(zookeeper, request.node.name), tmp_path, nodes=2,
        **{"transaction.state.log.replication.factor": 2, "transaction.state.log.min.isr": 1,
           "transaction.state.log.num.partitions": TXN_PARTITIONS},
    )
    try:
        admin = cluster.admin()
        admin.create_topics([NewTopic(topic_name, 2, replica_assignment=[[1], [2]])])[topic_name].result(30)
        wait_until(lambda: [leader for leader, _, _ in cluster.partitions(topic_name).values()] == [1, 2], timeout=30)
        # Committed, aborted, committed: partition 0 on broker 1, partition 1 on broker 2.
        PRODUCERS[producer](cluster.bootstrap, topic_name, f"txn-{topic_name}")
        for partition in (0, 1):
            committed = values("c1", partition) + values("c2", partition)
            got = clients.consume_confluent(cluster.bootstrap, topic_name, 10, partition, **READ_COMMITTED)
            assert [v for _, _, v, _ in got] == committed, partition
            got = clients.consume_kcat(cluster.bootstrap, topic_name, 10, partition, isolation_level="read_committed")
            assert [v for _, _, v, _ in got] == committed, partition
            everything = clients.consume_confluent(cluster.bootstrap, topic_name, 15, partition, **READ_UNCOMMITTED)
            assert [v for _, _, v, _ in everything] == (values("c1", partition) + values("ab", partition)
                                                       + values("c2", partition)), partition
    finally:
        cluster.kill()


def test_transaction_survives_kill_9_of_its_coordinator(cluster, topic_name):
    admin = cluster.admin()
    admin.create_topics([NewTopic(topic_name, 3, 3)])[topic_name].result(timeout=30)
    wait_until(lambda: len(cluster.partitions(topic_name)) == 3, timeout=30)
    txn_id = f"txn-{topic_name}"
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": txn_id,
                         "transaction.timeout.ms": 60_000})
    producer.init_transactions(60)
    producer.begin_transaction()
    for partition in range(3):
        for i in range(10):
            producer.produce(topic_name, value=f"a-{partition}-{i}".encode(), partition=partition)
    producer.flush(30)

    coordinator, _, _ = cluster.partitions("__transaction_state")[partition_for(txn_id, TXN_PARTITIONS)]
    cluster.broker(coordinator).kill()
    producer.commit_transaction(90)  # finds the new coordinator, which loaded the transaction

    survivors = ",".join(b.bootstrap for b in cluster.brokers if b.alive)
    for partition in range(3):
        got = clients.consume_confluent(survivors, topic_name, 10, partition, timeout=60, **READ_COMMITTED)
        assert [v for _, _, v, _ in got] == [f"a-{partition}-{i}".encode() for i in range(10)]

    # The next transaction, aborted on the new coordinator, stays invisible.
    producer.begin_transaction()
    producer.produce(topic_name, value=b"aborted", partition=0)
    producer.flush(30)
    producer.abort_transaction(60)
    producer.begin_transaction()
    producer.produce(topic_name, value=b"last", partition=0)
    producer.commit_transaction(60)
    got = clients.consume_confluent(survivors, topic_name, 11, 0, timeout=60, **READ_COMMITTED)
    assert [v for _, _, v, _ in got][-1:] == [b"last"] and b"aborted" not in [v for _, _, v, _ in got]


def test_commit_completes_when_its_coordinator_dies_before_the_markers(zookeeper, tmp_path, request, topic_name):
    # __transaction_state on two of the three brokers; the data partition on the third, which is
    # stopped during the commit so that the markers cannot be written.
    cluster = start_cluster(
        chroot_for(zookeeper, request.node.name), tmp_path,
        **{"transaction.state.log.replication.factor": 2, "transaction.state.log.min.isr": 1,
           "transaction.state.log.num.partitions": TXN_PARTITIONS},
    )
    try:
        txn_id = f"txn-{topic_name}"
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": txn_id,
                             "transaction.timeout.ms": 60_000})
        producer.init_transactions(60)
        coordinator, replicas, _ = cluster.partitions("__transaction_state")[partition_for(txn_id, TXN_PARTITIONS)]
        (successor,) = set(replicas) - {coordinator}
        (leader,) = {1, 2, 3} - set(replicas)
        admin = cluster.admin()
        admin.create_topics([NewTopic(topic_name, 1, replica_assignment=[[leader]])])[topic_name].result(30)
        wait_until(lambda: cluster.partitions(topic_name).get(0, (-1,))[0] == leader, timeout=30)

        producer.begin_transaction()
        for i in range(10):
            producer.produce(topic_name, value=f"r-{i}".encode(), partition=0)
        producer.flush(30)
        cluster.broker(leader).pause()
        try:
            producer.commit_transaction(30)  # answered once PrepareCommit is in the replicated log
            assert describe(cluster.broker(coordinator).bootstrap, txn_id)[txn_id].transaction_state == "PrepareCommit"
            cluster.broker(coordinator).kill()

            def loaded_by_successor() -> bool:
                state = describe(cluster.broker(successor).bootstrap, txn_id)[txn_id]
                return state.error_code == 0 and state.transaction_state == "PrepareCommit"

            wait_until(loaded_by_successor, timeout=60, interval=0.2, message="the successor loading PrepareCommit")
        finally:
            cluster.broker(leader).resume()

        def completed() -> bool:
            return describe(cluster.broker(successor).bootstrap, txn_id)[txn_id].transaction_state == "CompleteCommit"

        wait_until(completed, timeout=60, interval=0.2, message="the successor writing the markers")
        got = clients.consume_confluent(cluster.bootstrap, topic_name, 10, timeout=60, **READ_COMMITTED)
        assert [v for _, _, v, _ in got] == [f"r-{i}".encode() for i in range(10)]

        # The producer goes on with the new coordinator.
        producer.begin_transaction()
        producer.produce(topic_name, value=b"next", partition=0)
        producer.commit_transaction(60)
        got = clients.consume_confluent(cluster.bootstrap, topic_name, 11, timeout=60, **READ_COMMITTED)
        assert [v for _, _, v, _ in got][-1] == b"next"
    finally:
        cluster.kill()
