"""Test helper: a transaction coordinator over real ``__transaction_state`` logs, a fake metadata
cache, a fake marker sender and a mock clock. No broker, no sockets, no sleeps.

``TxnTopic`` plays the replica manager as the state manager sees it (every partition of
``__transaction_state`` is a log in a temporary directory; an append goes straight to it, acks=all
met at once, unless the test injects errors or holds the appends). ``FakeSender`` records each
WriteTxnMarkers request and answers only when the test says so. The clock and the scheduler are
``MockTime`` / ``MockScheduler``: back-offs, the timeout abort and the id expiration run when the
test advances the clock.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from pybroker import _native
from pybroker.common.cluster import BrokerEndpoint, LiveBroker
from pybroker.common.errors import ErrorCode
from pybroker.log.log import AppendOrigin
from pybroker.protocol.messages import WriteTxnMarkersRequest, WriteTxnMarkersResponse
from pybroker.server.replica_manager import PartitionAppendResult
from pybroker.server.transaction import transaction_log
from pybroker.server.transaction.coordinator import InitProducerIdResult, TransactionCoordinator
from pybroker.server.transaction.marker_channel import TransactionMarkerChannelManager
from pybroker.server.transaction.metadata import TransactionMetadata, TransactionResult
from pybroker.server.transaction.state_manager import TransactionConfig, TransactionStateManager
from pybroker.server.transaction.transaction_log import TRANSACTION_STATE_TOPIC
from pybroker.types import TopicPartition
from tests.mock_time import MockScheduler, MockTime
from tests.unit.replica_logs import make_log

TXN_PARTITIONS = 4
T0 = 1_700_000_000_000
TIMEOUT_MS = 60_000


def txn_tp(index: int) -> TopicPartition:
    return TopicPartition(TRANSACTION_STATE_TOPIC, index)


def ids_in(index: int, count: int = 1) -> list[str]:
    """``count`` transactional ids whose partition is ``index``."""
    found = []
    n = 0
    while len(found) < count:
        candidate = f"txn-{n}"
        if transaction_log.partition_for(candidate, TXN_PARTITIONS) == index:
            found.append(candidate)
        n += 1
    return found


class FakeMetadata:
    """The metadata cache as the coordinator reads it: partition leaders and live brokers."""

    def __init__(self) -> None:
        self.brokers = {i: LiveBroker(i, (BrokerEndpoint("PLAINTEXT", "127.0.0.1", 9000 + i),)) for i in (1, 2, 3)}
        self.leaders: dict[TopicPartition, int] = {}
        self.counts = {TRANSACTION_STATE_TOPIC: TXN_PARTITIONS}

    def partition_count(self, topic: str) -> int | None:
        return self.counts.get(topic)

    def partition(self, tp: TopicPartition) -> Any:
        return SimpleNamespace(leader=self.leaders[tp]) if tp in self.leaders else None

    def alive_broker(self, broker_id: int) -> LiveBroker | None:
        return self.brokers.get(broker_id)

    def contains(self, tp: TopicPartition) -> bool:
        return tp in self.leaders


class TxnTopic:
    """``__transaction_state`` as logs; the replica manager's ``append_records`` over them."""

    def __init__(self, path: Path, metadata: FakeMetadata) -> None:
        self.metadata_cache = metadata
        self.logs = {i: make_log(path, f"{TRANSACTION_STATE_TOPIC}-{i}") for i in range(TXN_PARTITIONS)}
        self.errors: list[ErrorCode] = []  # the errors of the next appends, in order
        self.hold = False  # appends answer only at release()
        self.held: list[tuple[asyncio.Future[dict[TopicPartition, PartitionAppendResult]], dict]] = []
        self.timeouts: list[int] = []

    def get_partition(self, tp: TopicPartition) -> Any:
        if tp.topic != TRANSACTION_STATE_TOPIC:
            return None
        return SimpleNamespace(log=self.logs[tp.partition])

    def append_records(self, acks: int, timeout_ms: int, entries: list[tuple[TopicPartition, memoryview]],
                       internal_topics_allowed: bool = False,
                       origin: AppendOrigin = AppendOrigin.CLIENT) -> Any:
        assert acks == -1 and internal_topics_allowed and origin == AppendOrigin.COORDINATOR
        self.timeouts.append(timeout_ms)
        results = {}
        for tp, records in entries:
            if self.errors:
                results[tp] = PartitionAppendResult(self.errors.pop(0))
                continue
            info = self.logs[tp.partition].append_as_leader(records, 0, T0, origin)
            results[tp] = PartitionAppendResult(base_offset=info.first_offset)
        if self.hold:
            future = asyncio.get_running_loop().create_future()
            self.held.append((future, results))
            return future
        return results

    def release(self) -> None:
        held, self.held = self.held, []
        for future, results in held:
            future.set_result(results)

    def records(self, index: int) -> list[tuple[str, TransactionMetadata | None]]:
        """Every record of the partition, decoded: (transactional id, metadata or None)."""
        log = self.logs[index]
        out = []
        position = log.log_start_offset
        while position < log.log_end_offset:
            data = log.read(position, 1 << 20, log.log_end_offset, True)
            for _offset, _ts, key, value in _native.read_records(data):
                decoded = transaction_log.read_key(key)
                out.append((decoded.transactional_id, transaction_log.read_value(decoded.transactional_id, value)))
            position = _native.validate_batches(data, len(data)).last_offset + 1
        return out


@dataclass
class Sent:
    broker_id: int
    request: WriteTxnMarkersRequest
    future: asyncio.Future[WriteTxnMarkersResponse]

    def markers(self) -> list[tuple[int, int, bool, int, list[TopicPartition]]]:
        """(producer id, epoch, commit, coordinator epoch, partitions) of each marker."""
        return [
            (m.producer_id, m.producer_epoch, m.transaction_result, m.coordinator_epoch,
             [TopicPartition(t.name, p) for t in m.topics for p in t.partition_indexes])
            for m in self.request.markers
        ]

    def answer(self, errors: dict[TopicPartition, ErrorCode] | None = None) -> None:
        """Answer every partition NONE, or as ``errors`` says."""
        errors = errors or {}
        self.future.set_result(WriteTxnMarkersResponse(markers=[
            WriteTxnMarkersResponse.WritableTxnMarkerResult(producer_id=m.producer_id, topics=[
                WriteTxnMarkersResponse.WritableTxnMarkerTopicResult(name=t.name, partitions=[
                    WriteTxnMarkersResponse.WritableTxnMarkerPartitionResult(
                        partition_index=p, error_code=errors.get(TopicPartition(t.name, p), ErrorCode.NONE))
                    for p in t.partition_indexes
                ]) for t in m.topics
            ]) for m in self.request.markers
        ]))

    def fail(self) -> None:
        self.future.set_exception(ConnectionResetError("connection lost"))


class FakeSender:
    """Records WriteTxnMarkers requests; each waits for the test to answer it."""

    def __init__(self) -> None:
        self.sent: list[Sent] = []
        self.closed = False

    async def send(self, destination: LiveBroker, request: WriteTxnMarkersRequest) -> WriteTxnMarkersResponse:
        future: asyncio.Future[WriteTxnMarkersResponse] = asyncio.get_running_loop().create_future()
        self.sent.append(Sent(destination.broker_id, request, future))
        return await future

    def unanswered(self) -> list[Sent]:
        return [s for s in self.sent if not s.future.done()]

    async def close(self) -> None:
        self.closed = True


class Harness:
    """A coordinator, its state manager and marker channel, over ``TxnTopic`` and ``FakeSender``."""

    def __init__(self, path: Path, **config: Any) -> None:
        self.time = MockTime(T0)
        self.scheduler = MockScheduler(self.time)
        self.metadata = FakeMetadata()
        self.topic = TxnTopic(path, self.metadata)
        self.config = TransactionConfig(**{"transaction_log_num_partitions": TXN_PARTITIONS, **config})
        self.created: list[tuple[str, int, int, dict]] = []
        self.manager = TransactionStateManager(1, self.topic, self._create_topic, self.config,  # type: ignore[arg-type]
                                               self.scheduler, self.time)
        self.sender = FakeSender()
        self.channel = TransactionMarkerChannelManager(1, self.metadata, self.manager, self.sender,  # type: ignore[arg-type]
                                                       self.scheduler)
        self.next_producer_id = 1000
        self.coordinator = TransactionCoordinator(1, self.config, self.manager, self.channel, self._allocate,
                                                  self.scheduler, self.time)
        self.coordinator.startup()

    async def __aenter__(self) -> Harness:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.coordinator.shutdown()

    async def _create_topic(self, *args: Any) -> None:
        self.created.append(args)
        self.metadata.counts[TRANSACTION_STATE_TOPIC] = args[1]

    async def _allocate(self) -> int:
        producer_id = self.next_producer_id
        self.next_producer_id += 1
        return producer_id

    async def elect(self, *indexes: int, epoch: int = 0) -> None:
        for index in indexes or range(TXN_PARTITIONS):
            self.coordinator.on_election(index, epoch)
        await self.loaded()

    async def loaded(self) -> None:
        deadline = asyncio.get_running_loop().time() + 10
        while self.manager.loading_partitions or self.manager._loads:
            assert asyncio.get_running_loop().time() < deadline, "loads did not finish"
            await asyncio.sleep(0.001)
        await self.settle()

    async def settle(self) -> None:
        """Let the loop run what is ready (marker sends, answers) without moving the clock."""
        for _ in range(10):
            await asyncio.sleep(0)

    async def advance(self, ms: float) -> None:
        await self.scheduler.advance(ms)
        await self.settle()

    def metadata_of(self, transactional_id: str) -> TransactionMetadata:
        lookup = self.manager.get_transaction_state(transactional_id)
        assert lookup is not None and not isinstance(lookup, ErrorCode), lookup
        return lookup.transaction_metadata

    async def init(self, transactional_id: str | None, timeout_ms: int = TIMEOUT_MS,
                   expected: tuple[int, int] | None = None) -> InitProducerIdResult:
        return await self.coordinator.handle_init_producer_id(transactional_id, timeout_ms, expected)

    def add(self, transactional_id: str, producer_id: int, epoch: int, *partitions: TopicPartition) -> list[ErrorCode]:
        """AddPartitionsToTxn; the answers so far (one once the append is done)."""
        answers: list[ErrorCode] = []
        self.coordinator.handle_add_partitions_to_transaction(transactional_id, producer_id, epoch, partitions,
                                                              answers.append)
        return answers

    def end(self, transactional_id: str, producer_id: int, epoch: int, commit: bool = True) -> list[ErrorCode]:
        answers: list[ErrorCode] = []
        self.coordinator.handle_end_transaction(
            transactional_id, producer_id, epoch, TransactionResult.COMMIT if commit else TransactionResult.ABORT,
            answers.append,
        )
        return answers

    def leads(self, leaders: dict[TopicPartition, int]) -> None:
        self.metadata.leaders.update(leaders)


def run(scenario: Callable[[], Any]) -> Any:
    return asyncio.run(scenario())
