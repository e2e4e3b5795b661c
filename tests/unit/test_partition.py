"""The leader-side answers of ``Partition`` and the Produce path of ``ReplicaManager``, on real logs
in a tmp dir with the mock clock (Kafka's ``PartitionTest`` and ``ReplicaManagerTest``).

- ``local_log``: NOT_LEADER_OR_FOLLOWER on a follower when the leader must answer, then the epoch
  fencing (FENCED_LEADER_EPOCH below the partition's epoch, UNKNOWN_LEADER_EPOCH above it);
- ``fetch_offset_for_timestamp``: the earliest, latest, max-timestamp and by-timestamp answers, a
  consumer bounded by the high watermark (read_committed: the last stable offset), a replica by
  the log end, and OFFSET_NOT_AVAILABLE from a new leader whose high watermark is short of its
  epoch's start;
- ``legacy_fetch_offsets_for_timestamp`` (ListOffsets v0) capped at the high watermark for a
  consumer, its segment times read with the mock clock's ``now``;
- ``last_offset_for_leader_epoch``: an epoch ends where the next one starts;
- KIP-890: ``maybe_start_transaction_verification`` and ``ReplicaManager.handle_produce_append``
  verifying a transaction's first batch with a coordinator, refusing what it does not verify;
- every ``KafkaError`` names its own code.
"""

from __future__ import annotations

import asyncio
import importlib
import pkgutil

import pytest

import pybroker
from pybroker.common.cluster import PartitionState
from pybroker.common.errors import ErrorCode, KafkaError
from pybroker.controller.requests import UpdateMetadata
from pybroker.log.log import Log
from pybroker.server.config import BrokerConfig
from pybroker.server.metadata_cache import MetadataCache
from pybroker.server.partition import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    READ_COMMITTED,
    Partition,
)
from pybroker.server.replica_manager import ProduceAppendResults, ReplicaManager
from pybroker.types import TopicPartition
from tests.mock_time import MockTime
from tests.unit.batches import build_batch

LOCAL, FOLLOWER = 1, 2
TP = TopicPartition("t", 0)
T0 = 1_700_000_000_000
READ_UNCOMMITTED = 0
TRANSACTIONAL = 0x10


def led(tmp_path, time: MockTime, epoch: int = 0, isr: tuple[int, ...] = (LOCAL,)) -> Partition:
    log = Log(str(tmp_path / str(TP)), TP, BrokerConfig().log_config({}))
    partition = Partition(TP, "AAAAAAAAAAAAAAAAAAAAAA", LOCAL, log, time=time)
    partition.make_leader(PartitionState(TP, 0, LOCAL, epoch, list(isr), 0, [LOCAL, FOLLOWER]), now_ms=0)
    return partition


def append(partition: Partition, count: int, base_timestamp: int = T0, **batch: int) -> None:
    records = [(f"k{i}".encode(), b"v") for i in range(count)]
    partition.append_records_to_leader(memoryview(bytearray(build_batch(records, base_timestamp=base_timestamp, **batch))),
                                       required_acks=1, now_ms=partition.time.milliseconds())


def code(call) -> ErrorCode:
    with pytest.raises(KafkaError) as raised:
        call()
    return raised.value.code


@pytest.fixture
def time() -> MockTime:
    return MockTime(wall_ms=T0 + 60_000)


def test_local_log_checks_leadership_then_the_epoch(tmp_path, time):
    partition = led(tmp_path, time, epoch=3)
    assert partition.local_log(3) is partition.log and partition.local_log(-1) is partition.log
    assert code(lambda: partition.local_log(2)) == ErrorCode.FENCED_LEADER_EPOCH
    assert code(lambda: partition.local_log(4)) == ErrorCode.UNKNOWN_LEADER_EPOCH
    partition.make_follower(PartitionState(TP, 0, FOLLOWER, 4, [FOLLOWER], 0, [LOCAL, FOLLOWER]))
    assert code(lambda: partition.local_log(4)) == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert partition.local_log(4, require_leader=False) is partition.log  # a debugging reader
    assert code(lambda: partition.local_log(5, require_leader=False)) == ErrorCode.UNKNOWN_LEADER_EPOCH


def test_offsets_for_timestamps_as_a_consumer_and_as_a_replica_see_them(tmp_path, time):
    partition = led(tmp_path, time, isr=(LOCAL, FOLLOWER))
    append(partition, 5, base_timestamp=T0)
    # The follower reports the five records: the high watermark moves to 5.
    partition.update_follower_fetch_state(FOLLOWER, fetch_offset=5, follower_log_start_offset=0, fetch_time_ms=0,
                                          leader_end_offset=5)
    append(partition, 5, base_timestamp=T0 + 100)  # not yet replicated: above the high watermark
    assert partition.high_watermark == 5 and partition.log.log_end_offset == 10

    def ask(timestamp: int, isolation: int | None = READ_UNCOMMITTED) -> tuple[int, int, int] | None:
        return partition.fetch_offset_for_timestamp(timestamp, isolation, -1, fetch_only_from_leader=True)

    assert ask(EARLIEST_TIMESTAMP) == (0, -1, 0)
    assert ask(LATEST_TIMESTAMP) == (5, -1, 0)
    assert ask(LATEST_TIMESTAMP, READ_COMMITTED) == (5, -1, 0)
    assert ask(LATEST_TIMESTAMP, None) == (10, -1, 0)
    assert ask(T0 + 2) == (2, T0 + 2, 0)
    assert ask(T0 + 100) is None  # at offset 5, which the consumer may not see yet
    assert ask(T0 + 100, None) == (5, T0 + 100, 0)
    assert ask(MAX_TIMESTAMP) is None  # the largest timestamp is at offset 9, above the high watermark
    assert ask(MAX_TIMESTAMP, None) == (9, T0 + 104, 0)


def test_a_new_leader_behind_its_epoch_start_cannot_say_where_the_log_ends(tmp_path, time):
    partition = led(tmp_path, time, isr=(LOCAL, FOLLOWER))
    append(partition, 4)
    assert partition.high_watermark == 0
    partition.make_leader(PartitionState(TP, 0, LOCAL, 1, [LOCAL, FOLLOWER], 1, [LOCAL, FOLLOWER]), now_ms=0)
    assert partition.leader_epoch_start_offset == 4
    latest = partition.fetch_offset_for_timestamp
    assert code(lambda: latest(LATEST_TIMESTAMP, READ_UNCOMMITTED, 1, True)) == ErrorCode.OFFSET_NOT_AVAILABLE
    assert code(lambda: latest(T0 + 1, READ_UNCOMMITTED, 1, True)) == ErrorCode.OFFSET_NOT_AVAILABLE
    assert latest(LATEST_TIMESTAMP, None, 1, True) == (4, -1, 1)  # a replica reads to the log end
    assert latest(EARLIEST_TIMESTAMP, READ_UNCOMMITTED, 1, True) == (0, -1, 0)


def test_legacy_offsets_stop_at_the_high_watermark_for_a_consumer(tmp_path, time):
    partition = led(tmp_path, time, isr=(LOCAL, FOLLOWER))
    append(partition, 3)
    offsets = partition.legacy_fetch_offsets_for_timestamp
    assert offsets(LATEST_TIMESTAMP, 10, is_from_consumer=False, fetch_only_from_leader=True) == [3, 0]
    assert offsets(LATEST_TIMESTAMP, 10, is_from_consumer=True, fetch_only_from_leader=True) == [0, 0]
    partition.make_follower(PartitionState(TP, 0, FOLLOWER, 1, [FOLLOWER], 0, [LOCAL, FOLLOWER]))
    assert code(lambda: offsets(LATEST_TIMESTAMP, 10, True, True)) == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert offsets(LATEST_TIMESTAMP, 10, is_from_consumer=False, fetch_only_from_leader=False) == [3, 0]


def test_an_epoch_ends_where_the_next_one_starts(tmp_path, time):
    partition = led(tmp_path, time)
    append(partition, 3)
    partition.make_leader(PartitionState(TP, 0, LOCAL, 2, [LOCAL], 1, [LOCAL, FOLLOWER]), now_ms=0)
    append(partition, 2)
    assert partition.last_offset_for_leader_epoch(2, 0) == (0, 3)
    assert partition.last_offset_for_leader_epoch(2, 1) == (0, 3)  # no epoch 1 here: epoch 0's end
    assert partition.last_offset_for_leader_epoch(-1, 2) == (2, 5)
    assert code(lambda: partition.last_offset_for_leader_epoch(1, 0)) == ErrorCode.FENCED_LEADER_EPOCH


# --- KIP-890 -----------------------------------------------------------------------------------

class Coordinator:
    """A transaction verifier answering from a table: partition → the coordinator's error."""

    def __init__(self, errors: dict[TopicPartition, ErrorCode]) -> None:
        self.errors = errors
        self.asked: list[tuple[str, int, int, list[TopicPartition]]] = []

    async def verify(self, transactional_id: str, producer_id: int, producer_epoch: int,
                     partitions: list[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
        self.asked.append((transactional_id, producer_id, producer_epoch, partitions))
        return {tp: self.errors.get(tp, ErrorCode.NONE) for tp in partitions}


async def _awaited(outcome):
    return await outcome


def transactional_batch(producer_id: int = 7, epoch: int = 0, sequence: int = 0) -> memoryview:
    return memoryview(bytearray(build_batch([(b"k", b"v")], producer_id=producer_id, producer_epoch=epoch,
                                            base_sequence=sequence, attributes=TRANSACTIONAL)))


class Logs:
    """The log manager's part in an append: no flush.messages here."""

    def maybe_flush_after_append(self, log: Log) -> None:
        return None


def manager_of(tmp_path, time: MockTime, *topics: str) -> ReplicaManager:
    manager = ReplicaManager(LOCAL, log_manager=Logs(), metadata_cache=MetadataCache(LOCAL), time=time)  # type: ignore[arg-type]
    manager.metadata_cache.update_metadata(UpdateMetadata(0, 1, -1, [], [], {}))
    for topic in topics:
        tp = TopicPartition(topic, 0)
        log = Log(str(tmp_path / str(tp)), tp, BrokerConfig().log_config({}))
        log.producer_state.verification_enabled = True
        partition = Partition(tp, "AAAAAAAAAAAAAAAAAAAAAA", LOCAL, log, time=time)
        partition.make_leader(PartitionState(tp, 0, LOCAL, 0, [LOCAL], 0, [LOCAL]), now_ms=0)
        manager.partitions[tp] = partition
    return manager


def test_a_verification_guard_until_the_transaction_is_open(tmp_path, time):
    partition = manager_of(tmp_path, time, "t").partitions[TP]
    guard = partition.maybe_start_transaction_verification(7, 0, time.milliseconds())
    assert guard is not None
    assert partition.maybe_start_transaction_verification(7, 0, time.milliseconds()) is guard  # under way
    partition.append_records_to_leader(transactional_batch(), required_acks=1, now_ms=time.milliseconds(),
                                       verification_guard=guard)
    assert partition.maybe_start_transaction_verification(7, 0, time.milliseconds()) is None  # open here
    assert partition.maybe_start_transaction_verification(7, 1, time.milliseconds()) is not None  # a new epoch


def test_produce_appends_what_the_coordinator_verified(tmp_path, time):
    manager = manager_of(tmp_path, time, "in", "out")
    coordinator = Coordinator({TopicPartition("out", 0): ErrorCode.INVALID_TXN_STATE})
    entries = [(TopicPartition("in", 0), transactional_batch()), (TopicPartition("out", 0), transactional_batch())]
    pending = manager.handle_produce_append(1, 30_000, "txn", entries, coordinator)
    assert not isinstance(pending, ProduceAppendResults)  # the coordinator is asked first
    done = asyncio.run(_awaited(pending))
    assert coordinator.asked == [("txn", 7, 0, [TopicPartition("in", 0), TopicPartition("out", 0)])]
    refused = done.unverified[TopicPartition("out", 0)]
    assert (refused.error, refused.error_message, refused.has_custom_error_message) == (
        ErrorCode.INVALID_TXN_STATE, "Partition was not added to the transaction", True)
    assert list(done.appended) == [TopicPartition("in", 0)] and done.appended[TopicPartition("in", 0)].error == 0
    assert manager.partitions[TopicPartition("out", 0)].log.log_end_offset == 0

    # The transaction is open on "in": its next batch goes straight to the log.
    again = manager.handle_produce_append(1, 30_000, "txn", [(TopicPartition("in", 0), transactional_batch(sequence=1))],
                                          coordinator)
    assert isinstance(again, ProduceAppendResults) and again.appended[TopicPartition("in", 0)].base_offset == 1
    assert len(coordinator.asked) == 1


def test_a_coordinator_that_cannot_tell_yet_makes_the_producer_retry(tmp_path, time):
    manager = manager_of(tmp_path, time, "t")
    coordinator = Coordinator({TP: ErrorCode.CONCURRENT_TRANSACTIONS})
    done = asyncio.run(_awaited(manager.handle_produce_append(-1, 30_000, "txn", [(TP, transactional_batch())],
                                                               coordinator)))
    refused = done.unverified[TP]
    assert refused.error == ErrorCode.NOT_ENOUGH_REPLICAS and refused.error.retriable
    assert refused.error_message.endswith("Underlying error: CONCURRENT_TRANSACTIONS")


def test_plain_batches_and_no_transactional_id_skip_verification(tmp_path, time):
    manager = manager_of(tmp_path, time, "t")
    coordinator = Coordinator({TP: ErrorCode.INVALID_TXN_STATE})
    plain = memoryview(bytearray(build_batch([(b"k", b"v")])))
    done = manager.handle_produce_append(1, 30_000, "txn", [(TP, plain)], coordinator)
    assert isinstance(done, ProduceAppendResults) and done.appended[TP].error == ErrorCode.NONE
    assert coordinator.asked == []
    # Without a transactional id a transactional batch is refused by the log, not verified.
    done = manager.handle_produce_append(1, 30_000, None, [(TP, transactional_batch(producer_id=8))], coordinator)
    assert isinstance(done, ProduceAppendResults) and done.appended[TP].error == ErrorCode.INVALID_TXN_STATE
    assert coordinator.asked == []


# --- one error type ------------------------------------------------------------------------------

def test_every_kafka_error_names_its_own_code():
    for module in pkgutil.walk_packages(pybroker.__path__, "pybroker."):
        if not module.name.startswith(("pybroker.spark", "pybroker.__main__")):
            importlib.import_module(module.name)
    unnamed = []
    pending = [KafkaError]
    while pending:
        kind = pending.pop()
        pending += kind.__subclasses__()
        if kind is not KafkaError and kind.code == ErrorCode.UNKNOWN_SERVER_ERROR and "__init__" not in vars(kind):
            unnamed.append(f"{kind.__module__}.{kind.__qualname__}")
    assert unnamed == []


def test_native_record_errors_are_kafka_errors():
    from pybroker import _native
    from pybroker.common.errors import CorruptRecordError, RecordTooLargeError

    with pytest.raises(CorruptRecordError) as corrupt:
        _native.validate_batches(b"\0" * 70, 1000)
    assert corrupt.value.code == ErrorCode.CORRUPT_MESSAGE and isinstance(corrupt.value, ValueError)
    batch = build_batch([(b"k", b"v" * 200)])
    with pytest.raises(RecordTooLargeError) as large:
        _native.validate_batches(batch, 100)
    assert large.value.code == ErrorCode.MESSAGE_TOO_LARGE
    assert _native.transactional_producer(transactional_batch(producer_id=9, epoch=2)) == (9, 2)
    assert _native.transactional_producer(batch) is None
    assert _native.transactional_producer(bytes(transactional_batch())[:60]) is None  # no whole header

