"""The transactional KafkaProducer (and its TransactionManager) against a fake broker that is also
the transaction and group coordinator: the state machine, AddPartitionsToTxn batching before a
partition's first batch, producer id / epoch / sequences / transactional bit on every batch,
retries of coordinator errors, fatal and abortable errors, KIP-360's epoch bump, offsets in a
transaction, and calls that outlive max.block.ms."""

from __future__ import annotations

import asyncio

import pytest

from pybroker import _native
from pybroker.client.admin import AdminError
from pybroker.client.connection import KafkaClientError
from pybroker.client.consumer_coordinator import CommitFailedError, ConsumerGroupMetadata
from pybroker.client.kafka_producer import KafkaProducer, KafkaProducerConfig, KafkaTimeoutError
from pybroker.client.node import Node
from pybroker.client.producer import ProduceError
from pybroker.client.transaction_manager import (
    ProducerFencedError,
    TransactionAbortedError,
    TransactionError,
    TransactionState,
    TransactionStateError,
)
from pybroker.common.errors import ErrorCode
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages import (
    AddOffsetsToTxnResponse,
    AddPartitionsToTxnResponse,
    EndTxnResponse,
    InitProducerIdResponse,
    ProduceResponse,
    TxnOffsetCommitResponse,
)
from pybroker.types import TopicPartition
from tests.unit.test_kafka_producer import NODE, FakeBroker

TXN_NODE = Node(2, "txn-coordinator", 9092)
GROUP_NODE = Node(3, "group-coordinator", 9092)
PRODUCER_ID = 4000


class FakeTxnBroker(FakeBroker):
    """Partition leader, transaction coordinator and group coordinator in one. Checks what a
    Kafka broker checks of a transactional producer (sequences per partition, its epoch) and
    what the coordinator expects (partitions added before their batches, EndTxn last)."""

    def __init__(self, topic: str = "t", partitions: int = 2) -> None:
        super().__init__(topic, partitions, partitions)
        self.calls: list[tuple[str, object]] = []  # (api name, request) in arrival order
        self.errors: dict[int, list[int]] = {}  # api key -> error codes for its next requests
        self.find_errors: list[int] = []  # FindCoordinator: errors before an answer
        self.init_version = 4  # InitProducerId version the coordinator offers (3+: epoch bumps)
        self.epoch = -1
        self.added: set[TopicPartition] = set()
        self.sequences: dict[TopicPartition, int] = {}  # next expected sequence
        self.last_batch: dict[TopicPartition, tuple[int, int]] = {}  # (first sequence, base offset)
        self.open: list[tuple[int, int, bytes | None, bytes | None]] = []  # (partition, offset, key, value)
        self.committed: list[tuple[int, bytes | None, bytes | None]] = []
        self.aborted: list[tuple[int, bytes | None, bytes | None]] = []
        self.pending_offsets: dict[TopicPartition, int] = {}
        self.group_offsets: dict[TopicPartition, int] = {}
        self.violations: list[str] = []
        self.lose_next_answer = False  # append the next Produce, then fail the connection

    # the Admin face
    async def find_coordinator(self, key: str, key_type: int = 0) -> Node:
        self.calls.append(("FindCoordinator", (key, key_type)))
        if self.find_errors:
            raise AdminError(f"key {key}", self.find_errors.pop(0))
        return TXN_NODE if key_type == 1 else GROUP_NODE

    def forget_coordinator(self, key: str, key_type: int = 0) -> None:
        self.calls.append(("Forget", (key, key_type)))

    # the BrokerConnection face
    def version_for(self, api_key: int, max_wanted: int | None = None) -> int:
        version = {ApiKey.PRODUCE: 9, ApiKey.INIT_PRODUCER_ID: self.init_version, ApiKey.ADD_PARTITIONS_TO_TXN: 4,
                   ApiKey.ADD_OFFSETS_TO_TXN: 3, ApiKey.END_TXN: 3, ApiKey.TXN_OFFSET_COMMIT: 3}[api_key]
        return min(version, max_wanted) if max_wanted is not None else version

    def _error(self, api_key: int) -> ErrorCode:
        queue = self.errors.get(api_key)
        return ErrorCode.for_code(queue.pop(0)) if queue else ErrorCode.NONE

    async def send(self, api_key: int, request: object, version: int, timeout: float = 30) -> object:
        await asyncio.sleep(0)
        name = ApiKey(api_key).name
        self.calls.append((name, request))
        if api_key == ApiKey.PRODUCE:
            return self._produce(request)
        error = self._error(api_key)
        if api_key == ApiKey.INIT_PRODUCER_ID:
            if error == ErrorCode.NONE:
                if request.producer_id >= 0 and (request.producer_id, request.producer_epoch) != (PRODUCER_ID, self.epoch):
                    self.violations.append(f"epoch bump with {request.producer_id}/{request.producer_epoch}")
                self._end(commit=False)  # a new epoch aborts what is open
                self.epoch += 1
                self.sequences.clear()
            return InitProducerIdResponse(error_code=error, producer_id=PRODUCER_ID, producer_epoch=self.epoch)
        if api_key == ApiKey.ADD_PARTITIONS_TO_TXN:
            if version > 3:
                self.violations.append(f"AddPartitionsToTxn v{version}")
            partitions = [TopicPartition(t.name, p) for t in request.v3_and_below_topics for p in t.partitions]
            if error == ErrorCode.NONE:
                self.added.update(partitions)
            return AddPartitionsToTxnResponse(results_by_topic_v3_and_below=[
                AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult(name=tp.topic, results_by_partition=[
                    AddPartitionsToTxnResponse.AddPartitionsToTxnPartitionResult(
                        partition_index=tp.partition, partition_error_code=error)]) for tp in partitions])
        if api_key == ApiKey.ADD_OFFSETS_TO_TXN:
            return AddOffsetsToTxnResponse(error_code=error)
        if api_key == ApiKey.TXN_OFFSET_COMMIT:
            parts = [(TopicPartition(t.name, p.partition_index), p.committed_offset) for t in request.topics for p in t.partitions]
            if error == ErrorCode.NONE:
                self.pending_offsets.update(parts)
            return TxnOffsetCommitResponse(topics=[TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic(
                name=tp.topic, partitions=[TxnOffsetCommitResponse.TxnOffsetCommitResponsePartition(
                    partition_index=tp.partition, error_code=error)]) for tp, _ in parts])
        if api_key == ApiKey.END_TXN:
            if error == ErrorCode.NONE:
                self._end(request.committed)
            return EndTxnResponse(error_code=error)
        raise AssertionError(f"unexpected {name}")

    def _end(self, commit: bool) -> None:
        records = [(p, k, v) for p, _, k, v in self.open]
        (self.committed if commit else self.aborted).extend(records)
        if commit:
            self.group_offsets.update(self.pending_offsets)
        self.open.clear()
        self.pending_offsets.clear()
        self.added.clear()

    def _produce(self, request: object) -> ProduceResponse:
        forced = self.fail_next.pop(0) if self.fail_next else ErrorCode.NONE
        responses = []
        for topic in request.topic_data:
            parts = []
            for p in topic.partition_data:
                tp = TopicPartition(topic.name, p.index)
                records = bytes(p.records)
                info = _native.validate_batches(records, 1 << 30)
                error, base = forced, len(self.logs.get(p.index, []))
                if error == ErrorCode.NONE and topic.undeleted_partition_count not in (-1, self.layout.undeleted_partition_count):
                    error = ErrorCode.INVALID_PARTITION_METADATA
                if error == ErrorCode.NONE:
                    if request.transactional_id != "tx" or not info.is_transactional or info.producer_id != PRODUCER_ID:
                        self.violations.append(f"{tp}: not a transactional batch of the producer")
                    if tp not in self.added:
                        self.violations.append(f"{tp}: written before AddPartitionsToTxn")
                    expected = self.sequences.get(tp, 0)
                    if info.producer_epoch != self.epoch:
                        error = ErrorCode.INVALID_PRODUCER_EPOCH
                    elif self.last_batch.get(tp, (None,))[0] == info.base_sequence and info.base_sequence < expected:
                        base = self.last_batch[tp][1]  # a duplicate: answered with its offsets, not appended
                        parts.append(ProduceResponse.PartitionProduceResponse(index=p.index, error_code=0, base_offset=base))
                        continue
                    elif info.base_sequence != expected:
                        error = ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
                if error == ErrorCode.NONE:
                    decoded = _native.read_records(records)
                    self.sequences[tp] = info.base_sequence + len(decoded)
                    self.last_batch[tp] = (info.base_sequence, base)
                    for i, (_, _, k, v) in enumerate(decoded):
                        self.logs.setdefault(p.index, []).append((k, v))
                        self.open.append((p.index, base + i, k, v))
                parts.append(ProduceResponse.PartitionProduceResponse(index=p.index, error_code=error, base_offset=base))
            responses.append(ProduceResponse.TopicProduceResponse(name=topic.name, partition_responses=parts))
        if self.lose_next_answer:
            self.lose_next_answer = False
            raise KafkaClientError("connection lost")
        return ProduceResponse(responses=responses)

    def names(self) -> list[str]:
        return [name for name, _ in self.calls if name not in ("FindCoordinator", "Forget")]


def txn_producer(broker: FakeTxnBroker, **props: object) -> KafkaProducer:
    return KafkaProducer({"linger.ms": 0, "retry.backoff.ms": 1, "transactional.id": "tx", **props}, admin=broker)


def run(coroutine: object) -> object:
    return asyncio.run(coroutine)  # type: ignore[arg-type]


def test_config():
    config = KafkaProducerConfig.from_properties({"transactional.id": "tx"})
    assert (config.transactional_id, config.transaction_timeout_ms) == ("tx", 60000)
    assert KafkaProducerConfig.from_properties({"transactional.id": "tx", "transaction.timeout.ms": "900"}).transaction_timeout_ms == 900
    assert KafkaProducerConfig().transactional_id is None
    with pytest.raises(ValueError, match="without also enabling idempotence"):
        KafkaProducerConfig.from_properties({"transactional.id": "tx", "enable.idempotence": "false"})
    with pytest.raises(ValueError, match="acks to all"):
        KafkaProducerConfig.from_properties({"transactional.id": "tx", "acks": "1"})
    with pytest.raises(ValueError, match="at most 5"):
        KafkaProducerConfig.from_properties({"transactional.id": "tx", "max.in.flight.requests.per.connection": "6"})


def test_commit_across_partitions_then_a_second_transaction():
    broker = FakeTxnBroker(partitions=2)

    async def scenario() -> None:
        async with txn_producer(broker, **{"linger.ms": 20}) as p:
            assert p.transaction_state == TransactionState.UNINITIALIZED
            await p.init_transactions()
            assert p.transaction_state == TransactionState.READY
            assert p.producer_id_and_epoch == (PRODUCER_ID, 0)
            p.begin_transaction()
            first = [await p.send("t", b"a%d" % i, partition=i % 2) for i in range(6)]
            await p.commit_transaction()
            assert [f.result().offset for f in first] == [0, 0, 1, 1, 2, 2]
            assert p.transaction_state == TransactionState.READY
            p.begin_transaction()
            second = [await p.send("t", b"b%d" % i, partition=0) for i in range(2)]
            await p.commit_transaction()
            assert [f.result().offset for f in second] == [3, 4]

    run(scenario())
    assert broker.violations == []
    init = next(r for n, r in broker.calls if n == "INIT_PRODUCER_ID")
    assert (init.transactional_id, init.transaction_timeout_ms, init.producer_id) == ("tx", 60000, -1)
    assert ("FindCoordinator", ("tx", 1)) in broker.calls
    # Both partitions in one AddPartitionsToTxn (batched, as Kafka's TransactionManager does), before any Produce.
    names = broker.names()
    assert names[:3] == ["INIT_PRODUCER_ID", "ADD_PARTITIONS_TO_TXN", "PRODUCE"]
    adds = [r for n, r in broker.calls if n == "ADD_PARTITIONS_TO_TXN"]
    assert sorted(p for t in adds[0].v3_and_below_topics for p in t.partitions) == [0, 1]
    assert (adds[0].v3_and_below_transactional_id, adds[0].v3_and_below_producer_id) == ("tx", PRODUCER_ID)
    ends = [r for n, r in broker.calls if n == "END_TXN"]
    assert [e.committed for e in ends] == [True, True]
    assert names.index("END_TXN") > max(i for i, n in enumerate(names[:names.index("END_TXN")]) if n == "PRODUCE")
    assert sorted(v for _, _, v in broker.committed) == sorted([b"a%d" % i for i in range(6)] + [b"b0", b"b1"])
    assert broker.sequences == {TopicPartition("t", 0): 5, TopicPartition("t", 1): 3}  # sequences go on across transactions


def test_abort_fails_unsent_records_and_nothing_is_ended_when_nothing_joined():
    broker = FakeTxnBroker()

    async def scenario() -> None:
        async with txn_producer(broker) as p:
            await p.init_transactions()
            p.begin_transaction()
            await p.abort_transaction()  # nothing was sent: no EndTxn, as in Kafka
            assert "END_TXN" not in broker.names()
            p.begin_transaction()
            written = await p.send_and_wait("t", b"written", partition=0)
            broker.fail_next = [ErrorCode.NOT_LEADER_OR_FOLLOWER] * 1000  # what follows stays unsent
            futures = [await p.send("t", b"x%d" % i, partition=1) for i in range(3)]
            await asyncio.sleep(0.05)
            await p.abort_transaction()
            for future in futures:
                with pytest.raises(TransactionAbortedError):
                    future.result()
            assert written.offset == 0
            broker.fail_next = []
            p.begin_transaction()
            await p.send_and_wait("t", b"next", partition=1)
            await p.commit_transaction()

    run(scenario())
    assert [e.committed for n, e in broker.calls if n == "END_TXN"] == [False, True]
    assert [v for _, _, v in broker.aborted] == [b"written"]
    assert [v for _, _, v in broker.committed] == [b"next"]
    assert broker.violations == []


def test_failed_send_makes_commit_raise_then_abort_bumps_the_epoch():
    broker = FakeTxnBroker()

    async def scenario() -> None:
        async with txn_producer(broker) as p:
            await p.init_transactions()
            p.begin_transaction()
            await p.send_and_wait("t", b"ok", partition=0)
            broker.fail_next = [ErrorCode.MESSAGE_TOO_LARGE]
            bad = await p.send("t", b"too large", partition=0)
            with pytest.raises(ProduceError, match="MESSAGE_TOO_LARGE"):
                await bad
            with pytest.raises(TransactionError, match="error state") as raised:
                await p.commit_transaction()
            assert not raised.value.fatal
            assert p.transaction_state == TransactionState.ABORTABLE_ERROR
            with pytest.raises(TransactionError, match="Cannot perform send"):
                await p.send("t", b"refused")
            await p.abort_transaction()
            assert p.transaction_state == TransactionState.READY
            assert p.producer_id_and_epoch == (PRODUCER_ID, 1)  # KIP-360: bumped with the current id and epoch
            p.begin_transaction()
            await p.send_and_wait("t", b"after", partition=0)
            await p.commit_transaction()

    run(scenario())
    names = broker.names()
    aborted_at = [i for i, n in enumerate(names) if n == "END_TXN"][0]
    assert names[aborted_at + 1] == "INIT_PRODUCER_ID"
    bump = [r for n, r in broker.calls if n == "INIT_PRODUCER_ID"][1]
    assert (bump.producer_id, bump.producer_epoch) == (PRODUCER_ID, 0)
    assert [v for _, _, v in broker.committed] == [b"after"]
    assert broker.violations == []  # the new epoch starts at sequence 0


def test_without_epoch_bumps_a_refused_batch_gives_its_sequence_back():
    broker = FakeTxnBroker()
    broker.init_version = 2  # a coordinator before KIP-360

    async def scenario() -> None:
        async with txn_producer(broker) as p:
            await p.init_transactions()
            p.begin_transaction()
            broker.fail_next = [ErrorCode.MESSAGE_TOO_LARGE]
            with pytest.raises(ProduceError):
                await p.send_and_wait("t", b"too large", partition=0)
            await p.abort_transaction()
            assert p.producer_id_and_epoch == (PRODUCER_ID, 0)  # no bump
            p.begin_transaction()
            await p.send_and_wait("t", b"after", partition=0)
            await p.commit_transaction()

    run(scenario())
    assert broker.names().count("INIT_PRODUCER_ID") == 1
    assert broker.violations == [] and [v for _, _, v in broker.committed] == [b"after"]


def test_coordinator_errors_are_retried():
    broker = FakeTxnBroker()
    broker.find_errors = [ErrorCode.COORDINATOR_NOT_AVAILABLE]
    broker.errors = {
        ApiKey.INIT_PRODUCER_ID: [ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.NOT_COORDINATOR,
                                  ErrorCode.CONCURRENT_TRANSACTIONS],
        ApiKey.ADD_PARTITIONS_TO_TXN: [ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.COORDINATOR_NOT_AVAILABLE],
        ApiKey.END_TXN: [ErrorCode.NOT_COORDINATOR, ErrorCode.CONCURRENT_TRANSACTIONS],
    }

    async def scenario() -> None:
        async with txn_producer(broker) as p:
            await p.init_transactions()
            p.begin_transaction()
            await p.send("t", b"v", partition=0)
            await p.commit_transaction()

    run(scenario())
    names = broker.names()
    assert names.count("INIT_PRODUCER_ID") == 4 and names.count("ADD_PARTITIONS_TO_TXN") == 3
    assert names.count("END_TXN") == 3 and names.count("PRODUCE") == 1
    assert sum(1 for n, key in broker.calls if n == "Forget" and key == ("tx", 1)) == 3
    assert [v for _, _, v in broker.committed] == [b"v"] and broker.violations == []


@pytest.mark.parametrize(("api", "error", "fenced"), [
    (ApiKey.END_TXN, ErrorCode.PRODUCER_FENCED, True),
    (ApiKey.END_TXN, ErrorCode.INVALID_PRODUCER_EPOCH, True),
    (ApiKey.ADD_PARTITIONS_TO_TXN, ErrorCode.INVALID_PRODUCER_EPOCH, True),
    (ApiKey.END_TXN, ErrorCode.INVALID_TXN_STATE, False),
    (ApiKey.ADD_PARTITIONS_TO_TXN, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, False),
])
def test_fatal_errors(api: int, error: int, fenced: bool):
    broker = FakeTxnBroker()
    broker.errors = {api: [error]}

    async def scenario() -> None:
        async with txn_producer(broker) as p:
            await p.init_transactions()
            p.begin_transaction()
            future = await p.send("t", b"v", partition=0)
            with pytest.raises(ProducerFencedError if fenced else TransactionError) as raised:
                await p.commit_transaction()
            assert raised.value.fatal
            assert p.transaction_state == TransactionState.FATAL_ERROR
            if not fenced:
                assert error.name in str(raised.value)
            with pytest.raises(ProducerFencedError if fenced else TransactionError):
                p.begin_transaction()
            with pytest.raises(ProducerFencedError if fenced else TransactionError):
                await p.abort_transaction()
            with pytest.raises(TransactionError):
                await p.send("t", b"refused")
            if api == ApiKey.ADD_PARTITIONS_TO_TXN:
                with pytest.raises(TransactionError):
                    await future  # never sent

    run(scenario())
    assert broker.violations == []


def test_init_producer_id_fenced_or_unauthorized_is_fatal():
    for error, kind in [(ErrorCode.PRODUCER_FENCED, ProducerFencedError),
                        (ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, TransactionError)]:
        broker = FakeTxnBroker()
        broker.errors = {ApiKey.INIT_PRODUCER_ID: [error]}

        async def scenario(kind: type[Exception] = kind, broker: FakeTxnBroker = broker) -> None:
            async with txn_producer(broker) as p:
                with pytest.raises(kind):
                    await p.init_transactions()
                assert p.transaction_state == TransactionState.FATAL_ERROR

        run(scenario())
    broker = FakeTxnBroker()
    broker.find_errors = [ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED]

    async def unauthorized() -> None:
        async with txn_producer(broker) as p:
            with pytest.raises(TransactionError, match="TRANSACTIONAL_ID_AUTHORIZATION_FAILED"):
                await p.init_transactions()

    run(unauthorized())


def test_calls_in_the_wrong_state():
    broker = FakeTxnBroker()

    async def scenario() -> None:
        async with KafkaProducer({"linger.ms": 0}, admin=broker) as plain:
            with pytest.raises(TransactionStateError, match="non-transactional"):
                await plain.init_transactions()
        async with txn_producer(broker) as p:
            with pytest.raises(TransactionStateError, match="init_transactions"):
                await p.send("t", b"v")
            with pytest.raises(TransactionStateError, match="init_transactions"):
                p.begin_transaction()
            await p.init_transactions()
            with pytest.raises(TransactionStateError, match="Invalid transition"):
                await p.init_transactions()
            with pytest.raises(TransactionStateError, match="in state READY"):
                await p.send("t", b"v")
            with pytest.raises(TransactionStateError, match="not in an active transaction"):
                await p.send_offsets_to_transaction({TopicPartition("in", 0): 1}, "g")
            with pytest.raises(TransactionStateError, match="Invalid transition"):
                await p.commit_transaction()
            p.begin_transaction()
            with pytest.raises(TransactionStateError):
                p.begin_transaction()

    run(scenario())


def test_send_offsets_to_transaction_commits_with_the_transaction():
    broker = FakeTxnBroker()
    group = ConsumerGroupMetadata("g", generation_id=7, member_id="member-1")

    async def scenario() -> None:
        async with txn_producer(broker) as p:
            await p.init_transactions()
            p.begin_transaction()
            await p.send("t", b"out", partition=0)
            await p.send_offsets_to_transaction({TopicPartition("in", 0): 5, TopicPartition("in", 1): 9}, group)
            assert broker.group_offsets == {}  # not before the commit
            await p.commit_transaction()
            p.begin_transaction()  # offsets alone make a transaction too
            await p.send_offsets_to_transaction({TopicPartition("in", 0): 6}, "g")
            await p.abort_transaction()

    run(scenario())
    assert broker.group_offsets == {TopicPartition("in", 0): 5, TopicPartition("in", 1): 9}
    add = next(r for n, r in broker.calls if n == "ADD_OFFSETS_TO_TXN")
    assert (add.transactional_id, add.producer_id, add.producer_epoch, add.group_id) == ("tx", PRODUCER_ID, 0, "g")
    commits = [r for n, r in broker.calls if n == "TXN_OFFSET_COMMIT"]
    assert (commits[0].generation_id, commits[0].member_id, commits[0].group_instance_id) == (7, "member-1", None)
    assert (commits[1].generation_id, commits[1].member_id) == (-1, "")
    assert ("FindCoordinator", ("g", 0)) in broker.calls
    names = broker.names()
    assert names.index("ADD_OFFSETS_TO_TXN") < names.index("TXN_OFFSET_COMMIT") < names.index("END_TXN")
    assert [e.committed for n, e in broker.calls if n == "END_TXN"] == [True, False]


def test_offsets_of_an_old_generation_make_the_transaction_abortable():
    broker = FakeTxnBroker()
    broker.errors = {ApiKey.TXN_OFFSET_COMMIT: [ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.ILLEGAL_GENERATION]}

    async def scenario() -> None:
        async with txn_producer(broker) as p:
            await p.init_transactions()
            p.begin_transaction()
            with pytest.raises(TransactionError, match="ILLEGAL_GENERATION") as raised:
                await p.send_offsets_to_transaction({TopicPartition("in", 0): 5}, ConsumerGroupMetadata("g", 3, "m"))
            assert isinstance(raised.value.__cause__, CommitFailedError) and not raised.value.fatal
            assert p.transaction_state == TransactionState.ABORTABLE_ERROR
            await p.abort_transaction()
            assert p.transaction_state == TransactionState.READY

    run(scenario())
    assert broker.names().count("TXN_OFFSET_COMMIT") == 2 and broker.group_offsets == {}


def test_a_lost_answer_is_retried_with_the_same_sequence():
    """The leader appended the batch but the answer was lost: the batch goes again unchanged and
    the leader answers the duplicate with its first offsets; nothing is written twice."""
    broker = FakeTxnBroker()

    async def scenario() -> None:
        async with txn_producer(broker) as p:
            await p.init_transactions()
            p.begin_transaction()
            broker.lose_next_answer = True
            first = await p.send_and_wait("t", b"once", partition=0)
            second = await p.send_and_wait("t", b"then", partition=0)
            await p.commit_transaction()
            assert (first.offset, second.offset) == (0, 1)

    run(scenario())
    assert broker.logs[0] == [(None, b"once"), (None, b"then")] and broker.violations == []
    sequences = [_native.validate_batches(bytes(r.topic_data[0].partition_data[0].records), 1 << 20).base_sequence
                 for n, r in broker.calls if n == "PRODUCE"]
    assert sequences == [0, 0, 1]


def test_kip253_count_change_in_a_transaction_repartitions_unwritten_records():
    """The topic grows while the producer still has its old count: the leader refuses the batch
    (not written), its sequence is given back, the records are partitioned again and their new
    partitions join the transaction."""
    broker = FakeTxnBroker(partitions=2)
    keys = [b"k%d" % i for i in range(20)]

    async def scenario() -> list[int]:
        async with txn_producer(broker, **{"linger.ms": 20}) as p:
            await p.init_transactions()
            p.begin_transaction()
            await p.send_and_wait("t", b"first", key=keys[0])
            broker.set_counts(2, 4)
            futures = [await p.send("t", b"v", key=k) for k in keys]
            await p.commit_transaction()
            return [f.result().partition for f in futures]

    partitions = run(scenario())
    refused = [r for n, r in broker.calls if n == "PRODUCE" and r.topic_data[0].undeleted_partition_count == 2]
    assert len(refused) == 2  # "first", then the batch the leader refused
    added = {p for n, r in broker.calls if n == "ADD_PARTITIONS_TO_TXN" for t in r.v3_and_below_topics for p in t.partitions}
    assert set(partitions) <= added and max(partitions) >= 2  # new partitions joined the transaction
    hashing = _native.LinearHashing(2, 4)
    assert partitions == [hashing.partition_for_key(k) for k in keys]
    assert broker.violations == [] and len(broker.committed) == 21


def test_a_timed_out_call_goes_on_and_can_be_awaited_again():
    broker = FakeTxnBroker()
    broker.errors = {ApiKey.INIT_PRODUCER_ID: [ErrorCode.CONCURRENT_TRANSACTIONS] * 40}

    async def scenario() -> None:
        async with txn_producer(broker, **{"max.block.ms": 20, "retry.backoff.ms": 5}) as p:
            with pytest.raises(KafkaTimeoutError, match="init_transactions"):
                await p.init_transactions()
            assert p.transaction_state == TransactionState.INITIALIZING
            broker.errors.clear()
            await p.init_transactions()  # waits for the same InitProducerId
            assert p.transaction_state == TransactionState.READY
            p.begin_transaction()
            await p.send("t", b"v", partition=0)
            broker.errors = {ApiKey.END_TXN: [ErrorCode.CONCURRENT_TRANSACTIONS] * 10}
            with pytest.raises(KafkaTimeoutError, match="commit_transaction"):
                await p.commit_transaction()
            while p.transaction_state != TransactionState.READY:  # it went on meanwhile
                await asyncio.sleep(0.01)
            await p.commit_transaction()  # gives the outcome of the call that timed out

    run(scenario())
    assert broker.names().count("INIT_PRODUCER_ID") >= 2
    assert [e.committed for n, e in broker.calls if n == "END_TXN"] == [True] * 11
    assert [v for _, _, v in broker.committed] == [b"v"]


def test_close_aborts_an_ongoing_transaction():
    broker = FakeTxnBroker()

    async def scenario() -> None:
        p = txn_producer(broker)
        await p.start()
        await p.init_transactions()
        p.begin_transaction()
        await p.send_and_wait("t", b"v", partition=1)
        await p.close()

    run(scenario())
    assert [e.committed for n, e in broker.calls if n == "END_TXN"] == [False]
    assert [v for _, _, v in broker.aborted] == [b"v"]


def test_batches_carry_the_transactional_attribute():
    broker = FakeTxnBroker()

    async def scenario() -> None:
        async with txn_producer(broker, **{"compression.type": "gzip"}) as p:
            await p.init_transactions()
            p.begin_transaction()
            for i in range(3):
                await p.send("t", b"v%d" % i, key=b"k", headers=[("h", b"1")], partition=1)
            await p.commit_transaction()

    run(scenario())
    produce = next(r for n, r in broker.calls if n == "PRODUCE")
    assert produce.transactional_id == "tx"
    batch = bytes(produce.topic_data[0].partition_data[0].records)
    info = _native.validate_batches(batch, 1 << 20)  # CRC checked
    assert (info.is_transactional, info.producer_id, info.producer_epoch, info.base_sequence, info.compression) == (
        True, PRODUCER_ID, 0, 0, 1)
    decoded = _native.decode_record_batches(batch, 0, -1, True)
    assert decoded.count == 3 and decoded.header_key_data == b"hhh"
    assert NODE != TXN_NODE
