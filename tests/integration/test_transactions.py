"""Transactions end to end with real clients (KIP-98): transactional producers of confluent-kafka,
aiokafka and kafka-python commit and abort across partitions; read_committed consumers of all
four clients see exactly the committed records, read_uncommitted ones see everything; a zombie
producer is fenced by a new instance; the coordinator aborts an expired transaction; the
aborted-transaction index and producer snapshots survive a restart; a consume-transform-produce
process killed with SIGKILL in the middle of a transaction, then started again, leaves every input
record transformed exactly once; bad input gets Kafka's errors and appends nothing."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import threading
import time

import pytest

from pybroker import _native
from pybroker.client.admin import Admin
from pybroker.common.errors import ErrorCode
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages import InitProducerIdRequest, ProduceRequest
from pybroker.types import TopicPartition
from tests.conftest import (
    REPO,
    broker_connection,
    find_coordinator,
    find_coordinator_at,
    wait_until,
)
from tests.integration import clients

BROKER_OVERRIDES = {"num.partitions": 2, "group.initial.rebalance.delay.ms": 0}
READ_COMMITTED: dict[str, object] = {"isolation.level": "read_committed"}
READ_UNCOMMITTED: dict[str, object] = {"isolation.level": "read_uncommitted"}  # librdkafka's default is committed
CONSUMERS = {
    "confluent": lambda b, t, n, p: clients.consume_confluent(b, t, n, p, **READ_COMMITTED),
    "kcat": lambda b, t, n, p: clients.consume_kcat(b, t, n, p, isolation_level="read_committed"),
    "aiokafka": lambda b, t, n, p: clients.consume_aiokafka(b, t, n, p, isolation_level="read_committed", timeout=5),
    "kafka-python": lambda b, t, n, p: clients.consume_kafka_python(
        b, t, n, p, isolation_level="read_committed", timeout=5),
}


def values(prefix: str, partition: int, count: int = 5) -> list[bytes]:
    return [f"{prefix}-p{partition}-{i}".encode() for i in range(count)]


# --- one committed, one aborted, one committed transaction, per producing client ------------------

def transactions_confluent(bootstrap: str, topic: str, txn_id: str) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id})
    producer.init_transactions(30)
    for prefix, commit in (("c1", True), ("ab", False), ("c2", True)):
        producer.begin_transaction()
        for partition in (0, 1):
            for value in values(prefix, partition):
                producer.produce(topic, value=value, partition=partition)
        producer.flush(30)
        (producer.commit_transaction if commit else producer.abort_transaction)(30)


def transactions_aiokafka(bootstrap: str, topic: str, txn_id: str) -> None:
    from aiokafka import AIOKafkaProducer

    async def run() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=txn_id)
        await producer.start()
        try:
            for prefix, commit in (("c1", True), ("ab", False), ("c2", True)):
                await producer.begin_transaction()
                for partition in (0, 1):
                    for value in values(prefix, partition):
                        await producer.send_and_wait(topic, value=value, partition=partition)
                await (producer.commit_transaction() if commit else producer.abort_transaction())
        finally:
            await producer.stop()

    asyncio.run(run())


def transactions_kafka_python(bootstrap: str, topic: str, txn_id: str) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=txn_id)
    try:
        producer.init_transactions()
        for prefix, commit in (("c1", True), ("ab", False), ("c2", True)):
            producer.begin_transaction()
            futures = [producer.send(topic, value=value, partition=partition)
                       for partition in (0, 1) for value in values(prefix, partition)]
            producer.flush(timeout=30)
            for future in futures:
                future.get(timeout=30)
            (producer.commit_transaction if commit else producer.abort_transaction)()
    finally:
        producer.close(timeout=10)


PRODUCERS = {
    "confluent": transactions_confluent,
    "aiokafka": transactions_aiokafka,
    "kafka-python": transactions_kafka_python,
}


@pytest.mark.parametrize("producer", list(PRODUCERS))
def test_read_committed_consumers_see_exactly_the_committed_records(broker, topic_name, producer):
    PRODUCERS[producer](broker.bootstrap, topic_name, f"txn-{topic_name}")
    for partition in (0, 1):
        committed = values("c1", partition) + values("c2", partition)
        for name, consume in CONSUMERS.items():
            got = consume(broker.bootstrap, topic_name, len(committed), partition)
            assert [v for _, _, v, _ in got] == committed, (name, partition)
        # read_uncommitted sees the aborted records too (the markers are never records).
        everything = clients.consume_confluent(broker.bootstrap, topic_name, 15, partition, **READ_UNCOMMITTED)
        assert [v for _, _, v, _ in everything] == values("c1", partition) + values("ab", partition) + committed[5:]


def test_list_offsets_and_fetch_stop_at_the_last_stable_offset(broker, topic_name):
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": f"txn-{topic_name}"})
    producer.init_transactions(30)
    producer.begin_transaction()
    for value in values("open", 0, 3):
        producer.produce(topic_name, value=value, partition=0)
    producer.flush(30)
    clients.produce_confluent(broker.bootstrap, topic_name, [(None, b"plain")])

    async def latest(isolation_level: int) -> int:
        async with Admin(broker.bootstrap) as admin:
            tp = TopicPartition(topic_name, 0)
            return (await admin.list_offsets([tp], "latest", isolation_level))[tp].offset

    # The open transaction starts at 0: read_committed ends there, read_uncommitted at the end.
    assert asyncio.run(latest(1)) == 0
    assert asyncio.run(latest(0)) == 4
    assert clients.consume_kcat(broker.bootstrap, topic_name, 1, isolation_level="read_committed") == []
    producer.commit_transaction(30)
    wait_until(lambda: asyncio.run(latest(1)) == 5, message="the LSO passes the committed transaction")
    got = clients.consume_confluent(broker.bootstrap, topic_name, 4, **READ_COMMITTED)
    assert [v for _, _, v, _ in got] == values("open", 0, 3) + [b"plain"]


def test_zombie_producer_is_fenced_and_its_open_transaction_aborted(broker, topic_name):
    from confluent_kafka import KafkaException, Producer

    txn_id = f"txn-{topic_name}"
    zombie = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": txn_id})
    zombie.init_transactions(30)
    zombie.begin_transaction()
    zombie.produce(topic_name, value=b"zombie", partition=0)
    zombie.flush(30)
    successor = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": txn_id})
    successor.init_transactions(30)  # bumps the epoch, aborting the zombie's transaction
    successor.begin_transaction()
    successor.produce(topic_name, value=b"successor", partition=0)
    successor.commit_transaction(30)
    with pytest.raises(KafkaException) as raised:
        zombie.commit_transaction(30)
    assert raised.value.args[0].fatal() or raised.value.args[0].txn_requires_abort()
    got = clients.consume_confluent(broker.bootstrap, topic_name, 1, **READ_COMMITTED)
    assert [v for _, _, v, _ in got] == [b"successor"]


def test_consume_transform_produce_survives_kill_9_of_the_transform(broker, topic_name):
    from confluent_kafka.admin import AdminClient, NewTopic

    source, sink, per_partition = f"{topic_name}-in", f"{topic_name}-out", 600
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for future in admin.create_topics([NewTopic(source, 2, 1), NewTopic(sink, 2, 1)]).values():
        future.result(30)
    inputs = {p: [f"{p}-{i}".encode() for i in range(per_partition)] for p in (0, 1)}
    for partition, records in inputs.items():
        clients.produce_confluent(broker.bootstrap, source, [(None, v) for v in records], partition)

    def transform(*extra: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, "-m", "tests.integration.eos_transform", broker.bootstrap, source, sink,
             f"g-{topic_name}", f"txn-{topic_name}", *extra],
            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, text=True)

    first = transform("--hang-after", "3")
    watchdog = threading.Timer(120, first.kill)  # the loop below ends even if the transform hangs early
    watchdog.start()
    try:
        for line in first.stdout:  # three committed transactions, then one left open
            if line.strip() == "open":
                break
        else:
            raise AssertionError(f"the transform exited with {first.wait()} before opening its fourth transaction")
        first.send_signal(signal.SIGKILL)
    finally:
        watchdog.cancel()
        first.kill()
        first.wait()
        first.stdout.close()

    second = transform()  # fences the first's transactional id: its open transaction is aborted
    try:
        for partition, records in inputs.items():
            got = clients.consume_confluent(broker.bootstrap, sink, per_partition, partition, timeout=90,
                                            **READ_COMMITTED)
            assert [v for _, _, v, _ in got] == [b"T:" + v for v in records], partition
            # Nothing beyond them: one more is never read committed.
            more = clients.consume_confluent(broker.bootstrap, sink, 1, partition, offset=got[-1][0] + 1, timeout=2,
                                             **READ_COMMITTED)
            assert more == [], partition
    finally:
        second.kill()
        second.wait()
        second.stdout.close()
    # The killed transaction's records are in the log, aborted: read_uncommitted sees duplicates.
    written = sum(len(clients.consume_confluent(broker.bootstrap, sink, 10 * per_partition, p, timeout=3,
                                                **READ_UNCOMMITTED)) for p in (0, 1))
    assert written > 2 * per_partition


def test_expired_transaction_is_aborted_by_the_coordinator(start_broker, topic_name):
    from confluent_kafka import Producer

    broker = start_broker(**{"num.partitions": 1, "transaction.abort.timed.out.transaction.cleanup.interval.ms": 100})
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": f"txn-{topic_name}",
                         "transaction.timeout.ms": 1000})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic_name, value=b"forgotten", partition=0)
    producer.flush(30)
    clients.produce_confluent(broker.bootstrap, topic_name, [(None, b"after")])
    # Nothing is readable committed until the coordinator aborts the expired transaction.
    got = clients.consume_confluent(broker.bootstrap, topic_name, 1, timeout=30, **READ_COMMITTED)
    assert [v for _, _, v, _ in got] == [b"after"]
    got = clients.consume_confluent(broker.bootstrap, topic_name, 2, **READ_UNCOMMITTED)
    assert [v for _, _, v, _ in got] == [b"forgotten", b"after"]


def test_aborted_index_and_open_transactions_survive_a_restart(start_broker, topic_name):
    from confluent_kafka import Producer

    broker = start_broker(**{"num.partitions": 1})
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": f"txn-{topic_name}"})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic_name, value=b"aborted", partition=0)
    producer.abort_transaction(30)
    producer.begin_transaction()
    producer.produce(topic_name, value=b"committed", partition=0)
    producer.commit_transaction(30)
    got = clients.consume_kcat(broker.bootstrap, topic_name, 1, isolation_level="read_committed")
    assert [v for _, _, v, _ in got] == [b"committed"]
    producer.begin_transaction()
    producer.produce(topic_name, value=b"open", partition=0)
    producer.flush(30)
    assert broker.stop() == 0
    broker.start()
    got = clients.consume_kcat(broker.bootstrap, topic_name, 2, isolation_level="read_committed")
    assert [v for _, _, v, _ in got] == [b"committed"]
    got = clients.consume_kafka_python(broker.bootstrap, topic_name, 2, timeout=3, isolation_level="read_committed")
    assert [v for _, _, v, _ in got] == [b"committed"]
    producer.commit_transaction(30)
    got = clients.consume_confluent(broker.bootstrap, topic_name, 2, **READ_COMMITTED)
    assert [v for _, _, v, _ in got] == [b"committed", b"open"]


# --- bad input ----------------------------------------------------------------------------------

def produce_raw(bootstrap: str, topic: str, batch: bytes, transactional_id: str | None = None) -> ErrorCode:
    async def run() -> ErrorCode:
        connection = await broker_connection(bootstrap)
        try:
            request = ProduceRequest(transactional_id=transactional_id, acks=-1, timeout_ms=10000, topic_data=[
                ProduceRequest.TopicProduceData(name=topic, partition_data=[
                    ProduceRequest.PartitionProduceData(index=0, records=batch)])])
            response = await connection.send(ApiKey.PRODUCE, request, version=9)
            return ErrorCode(response.responses[0].partition_responses[0].error_code)
        finally:
            await connection.close()

    return asyncio.run(run())


def init_producer_id(bootstrap: str, transactional_id: str) -> tuple[int, int]:
    """FindCoordinator (creating ``__transaction_state``), then InitProducerId, retried while
    the coordinator loads."""
    async def run() -> tuple[int, int]:
        connection = await broker_connection(bootstrap)
        try:
            await find_coordinator(connection, transactional_id, key_type=1, version=4)
            while True:
                response = await connection.send(ApiKey.INIT_PRODUCER_ID, InitProducerIdRequest(
                    transactional_id=transactional_id, transaction_timeout_ms=60000), version=4)
                if response.error_code == ErrorCode.NONE:
                    return response.producer_id, response.producer_epoch
                assert response.error_code in (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                                               ErrorCode.CONCURRENT_TRANSACTIONS), response
                await asyncio.sleep(0.05)
        finally:
            await connection.close()

    return asyncio.run(run())


def test_transactional_batch_for_a_partition_not_in_the_transaction_is_refused(broker, topic_name):
    # KIP-890: the leader asks the coordinator; the partition was never added (no AddPartitionsToTxn).
    clients.produce_confluent(broker.bootstrap, topic_name, [(None, b"first")])
    producer_id, epoch = init_producer_id(broker.bootstrap, f"txn-{topic_name}")
    batch = _native.build_batch([(None, b"sneaky")], int(time.time() * 1000), producer_id=producer_id,
                                producer_epoch=epoch, base_sequence=0, transactional=True)
    assert produce_raw(broker.bootstrap, topic_name, batch, f"txn-{topic_name}") == ErrorCode.INVALID_TXN_STATE
    assert [v for _, _, v, _ in clients.consume_confluent(broker.bootstrap, topic_name, 2, timeout=3,
                                                          **READ_UNCOMMITTED)] == [b"first"]


def test_markers_and_transactional_batches_from_clients_are_refused(broker, start_broker, topic_name):
    marker = _native.build_control_batch(4242, 0, 0, True, int(time.time() * 1000))
    transactional = _native.build_batch([(None, b"x")], int(time.time() * 1000), producer_id=4242, producer_epoch=0,
                                        base_sequence=0, transactional=True)
    clients.produce_confluent(broker.bootstrap, topic_name, [(None, b"first")])
    # Before __transaction_state exists the leader cannot verify anything (NOT_ENOUGH_REPLICAS, as
    # Kafka's answers): a lookup of the id's coordinator has it created.
    find_coordinator_at(broker.bootstrap, "someone", key_type=1)
    # A marker is a transactional batch: its producer id is unknown to the coordinator (KIP-890).
    assert produce_raw(broker.bootstrap, topic_name, marker, "someone") == ErrorCode.INVALID_PRODUCER_ID_MAPPING
    # Transactional records need the request's transactional id (Kafka's authorization check).
    assert produce_raw(broker.bootstrap, topic_name, transactional) == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    got = clients.consume_confluent(broker.bootstrap, topic_name, 2, timeout=3, **READ_UNCOMMITTED)
    assert [v for _, _, v, _ in got] == [b"first"]
    # Without verification the log itself refuses a client's control batch.
    unverified = start_broker(**{"transaction.partition.verification.enable": False})
    clients.produce_confluent(unverified.bootstrap, topic_name, [(None, b"first")])
    assert produce_raw(unverified.bootstrap, topic_name, marker, "someone") == ErrorCode.INVALID_RECORD
    got = clients.consume_confluent(unverified.bootstrap, topic_name, 2, timeout=3, **READ_UNCOMMITTED)
    assert [v for _, _, v, _ in got] == [b"first"]
