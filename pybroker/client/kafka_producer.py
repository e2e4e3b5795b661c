"""The project's record-level asyncio producer (Kafka's ``KafkaProducer``), KIP-253 aware.

Owns ``send(topic, value, key, headers, partition)`` → a future of `RecordMetadata`, and
everything between it and the acknowledgement:

- **Partitioning** at ``send`` time: an explicit partition as given; a keyed record by KIP-253's
  linear hashing over the topic's (initial, undeleted) partition counts (``TopicLayout``, native
  ``LinearHashing``; Kafka's ``murmur2 % n`` while the counts are equal); an unkeyed record to a
  sticky partition among the *undeleted* ones only (never one marked for deletion), which moves
  on each time its batch is sent.
- **Accumulation** (Kafka's ``RecordAccumulator``): per partition a queue of batches; a record is
  appended to the open batch (`RecordColumns`, Arrow buffers) until it reaches ``batch.size``;
  a batch is ready when full, when ``linger.ms`` passed since its first record, or on
  ``flush``/``close``. ``buffer.memory`` bounds what waits; ``send`` blocks up to
  ``max.block.ms`` beyond it.
- **Sending** (Kafka's ``Sender``, one background task): ready batches go, encoded natively (one
  ``encode_partitioned_batches`` call per batch), in one Produce request per leader up to
  ``max.request.size``, at most ``max.in.flight.requests.per.connection`` requests per leader and
  at most one batch per partition in flight, so a partition's records can never overtake each
  other. Each topic carries the producer's ``UndeletedPartitionCount`` (Produce v9+).
- **Recovery**: a retriable error on a topic (INVALID_PARTITION_METADATA when the leader's count
  differs, a leadership change, a lost connection) stops sending that topic; once none of its
  requests is in flight, its metadata is fetched again and every record not yet acknowledged
  is partitioned again with the new counts, in the order it was sent, then sending resumes. A
  key's records produced before the producer saw a new count are thus all written (under the
  old count, before the leader's epoch bump) ahead of those produced after it. Records still not
  acknowledged after ``delivery.timeout.ms`` fail with ``KafkaTimeoutError``; non-retriable
  errors fail their batch with `ProduceError`.

- **Transactions** (with ``transactional.id``, KIP-98): ``init_transactions``,
  ``begin_transaction``, ``send``, ``send_offsets_to_transaction``, ``commit_transaction``,
  ``abort_transaction``, as Kafka's producer has them. The transaction's state, producer id and
  epoch, sequence numbers and coordinator requests are `TransactionManager`'s; here, batches
  carry the producer id, epoch and sequence and the transactional attribute, a partition's
  batches wait until AddPartitionsToTxn added it, Produce requests carry the transactional id,
  and a batch retried after a retriable error keeps its sequence (the leader drops a duplicate).
  A batch that fails makes the transaction abortable; then, and while aborting, batches not yet
  sent fail with `TransactionAbortedError`. Records not yet sent are partitioned again after a
  KIP-253 count change as without transactions, but a batch that may already be written cannot
  move: the transaction becomes abortable. ``close`` aborts an ongoing transaction.

Not done: idempotence without transactions (``enable.idempotence`` alone is taken as false),
per-record timestamps (a batch's records share the time its first record was appended), and
``partitioner.class`` (the KIP-253 partitioner is the only one).
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pybroker.client.admin import LEADERSHIP_ERRORS, Admin, AdminError
from pybroker.client.connection import KafkaClientError
from pybroker.client.consumer_coordinator import ConsumerGroupMetadata
from pybroker.client.node import Node
from pybroker.client.producer import ACKS, ProduceError
from pybroker.client.properties import int_property
from pybroker.client.record_columns import BATCH_OVERHEAD, HeaderList, RecordColumns
from pybroker.client.security import PLAINTEXT, ClientSecurity, security_from_properties
from pybroker.client.topic_layout import TopicLayout
from pybroker.client.transaction_manager import (
    TransactionAbortedError,
    TransactionError,
    TransactionManager,
    TransactionState,
    TransactionStateError,
)
from pybroker.common.errors import ErrorCode
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages import ProduceRequest
from pybroker.scheduler import SYSTEM_TIME, Time
from pybroker.types import TopicPartition

log = logging.getLogger(__name__)

COMPRESSION_CODES = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
COUNT_FIELD_PRODUCE_VERSION = 9  # the first Produce version with tagged fields (UndeletedPartitionCount)
MAX_IN_FLIGHT_FOR_IDEMPOTENCE = 5  # Kafka's limit for an idempotent (and so a transactional) producer
# Produce answers after which a transactional batch may have been appended although it failed.
MAYBE_WRITTEN_ERRORS = frozenset({ErrorCode.NETWORK_EXCEPTION, ErrorCode.REQUEST_TIMED_OUT})

__all__ = ["ConsumerGroupMetadata", "KafkaProducer", "KafkaProducerConfig", "KafkaTimeoutError", "RecordMetadata",
           "TransactionAbortedError", "TransactionError", "TransactionStateError"]


class KafkaTimeoutError(Exception):
    """A record was not acknowledged within ``delivery.timeout.ms``, or ``send`` could not queue
    it within ``max.block.ms``."""


@dataclass(frozen=True)
class RecordMetadata:
    """Where an acknowledged record landed (offset -1 with acks=0)."""

    topic: str
    partition: int
    offset: int
    timestamp: int


@dataclass
class KafkaProducerConfig:
    """Kafka's producer settings that this producer honours (Kafka's names and defaults)."""

    bootstrap_servers: str = "localhost:9092"  # bootstrap.servers
    client_id: str = "pybroker-producer"  # client.id
    acks: int = -1  # acks=all
    linger_ms: int = 5  # linger.ms (Kafka 4.0's default)
    batch_size: int = 16384  # batch.size
    max_request_size: int = 1048576  # max.request.size
    buffer_memory: int = 33554432  # buffer.memory
    max_block_ms: int = 60000  # max.block.ms
    compression: int = 0  # compression.type=none
    max_in_flight: int = 5  # max.in.flight.requests.per.connection
    request_timeout_ms: int = 30000  # request.timeout.ms
    delivery_timeout_ms: int = 120000  # delivery.timeout.ms
    retry_backoff_ms: int = 100  # retry.backoff.ms
    metadata_max_age_ms: int = 300000  # metadata.max.age.ms
    transactional_id: str | None = None  # transactional.id (implies enable.idempotence)
    transaction_timeout_ms: int = 60000  # transaction.timeout.ms
    security: ClientSecurity = PLAINTEXT  # security.protocol, ssl.*, sasl.mechanism, sasl.jaas.config

    @classmethod
    def from_properties(cls, props: Mapping[str, object]) -> KafkaProducerConfig:
        """From Kafka producer properties (unknown ones are ignored, as Kafka warns and ignores)."""
        text = {k: str(v) for k, v in props.items()}
        acks = text.get("acks", "all").strip().lower()
        if acks not in ACKS:
            raise ValueError(f"Invalid value {acks} for configuration acks: String must be one of: all, -1, 0, 1")
        compression = text.get("compression.type", "none").strip().lower()
        if compression not in COMPRESSION_CODES:
            raise ValueError(f"Invalid value {compression} for configuration compression.type: "
                             "String must be one of: none, gzip, snappy, lz4, zstd")
        transactional_id = text.get("transactional.id") or None
        idempotence = text.get("enable.idempotence", "").strip().lower()
        max_in_flight = int_property(text, "max.in.flight.requests.per.connection", cls.max_in_flight, 1)
        if transactional_id is not None:
            if idempotence == "false":
                raise ValueError("Cannot set a transactional.id without also enabling idempotence.")
            if ACKS[acks] != -1:
                raise ValueError("Must set acks to all in order to use the idempotent producer. "
                                 "Otherwise we cannot guarantee idempotence.")
            if max_in_flight > MAX_IN_FLIGHT_FOR_IDEMPOTENCE:
                raise ValueError("Must set max.in.flight.requests.per.connection to at most 5 to use the "
                                 "idempotent producer.")
        elif idempotence == "true":
            log.warning("enable.idempotence=true without transactional.id is not supported by this producer: "
                        "records are sent without idempotence")
        return cls(
            bootstrap_servers=text.get("bootstrap.servers", cls.bootstrap_servers),
            client_id=text.get("client.id", cls.client_id),
            acks=ACKS[acks],
            linger_ms=int_property(text, "linger.ms", cls.linger_ms, 0),
            batch_size=int_property(text, "batch.size", cls.batch_size, 0),
            max_request_size=int_property(text, "max.request.size", cls.max_request_size, 1),
            buffer_memory=int_property(text, "buffer.memory", cls.buffer_memory, 0),
            max_block_ms=int_property(text, "max.block.ms", cls.max_block_ms, 0),
            compression=COMPRESSION_CODES[compression],
            max_in_flight=max_in_flight,
            request_timeout_ms=int_property(text, "request.timeout.ms", cls.request_timeout_ms, 0),
            delivery_timeout_ms=int_property(text, "delivery.timeout.ms", cls.delivery_timeout_ms, 0),
            retry_backoff_ms=int_property(text, "retry.backoff.ms", cls.retry_backoff_ms, 0),
            metadata_max_age_ms=int_property(text, "metadata.max.age.ms", cls.metadata_max_age_ms, 0),
            transactional_id=transactional_id,
            transaction_timeout_ms=int_property(text, "transaction.timeout.ms", cls.transaction_timeout_ms, 1),
            security=security_from_properties(text),
        )


class _Record:
    """A record from ``send`` until it is acknowledged or fails."""

    __slots__ = ("sequence", "key", "value", "headers", "explicit", "future", "created_ms", "size")

    def __init__(self, sequence: int, key: bytes | None, value: bytes | None, headers: HeaderList | None,
                 explicit: int | None, future: asyncio.Future[RecordMetadata], created_ms: float) -> None:
        self.sequence, self.key, self.value, self.headers = sequence, key, value, headers
        self.explicit, self.future, self.created_ms = explicit, future, created_ms
        self.size = 0


class _Batch:
    """Records of one partition that go out together, in send order."""

    __slots__ = ("tp", "records", "columns", "created_ms", "encoded", "timestamp", "base_sequence", "maybe_written")

    def __init__(self, tp: TopicPartition, created_ms: float) -> None:
        self.tp = tp
        self.records: list[_Record] = []
        self.columns = RecordColumns()
        self.created_ms = created_ms
        self.encoded: bytes | None = None
        self.timestamp = -1
        self.base_sequence = -1  # a transactional batch's, once encoded
        self.maybe_written = False  # sent, and the leader's answer did not say it was not appended

    def append(self, record: _Record) -> None:
        record.size = self.columns.append(record.key, record.value, record.headers)
        self.records.append(record)


class _Topic:
    """The producer's state of one topic."""

    def __init__(self, layout: TopicLayout) -> None:
        self.layout = layout
        self.queues: dict[int, deque[_Batch]] = {}
        self.in_flight: dict[int, _Batch] = {}  # partition -> its batch awaiting an answer
        self.recovering = False  # a retriable error was seen: stop, drain, refresh, re-partition
        self.failed: list[_Batch] = []  # batches answered with a retriable error, to send again
        self.sticky = -1
        self.last_error: ErrorCode | None = None
        self.retry_at = 0.0  # monotonic ms: recover no earlier (retry.backoff.ms after the error)

    def next_sticky(self) -> int:
        undeleted = self.layout.undeleted_partition_count
        if undeleted <= 1:
            self.sticky = 0
        else:
            choice = random.randrange(undeleted - 1) if self.sticky >= 0 else random.randrange(undeleted)
            self.sticky = choice + 1 if 0 <= self.sticky <= choice else choice
        return self.sticky


def _retrieve(task: asyncio.Task[Any]) -> None:
    """Mark a background task's exception as seen (its caller may have stopped waiting)."""
    if not task.cancelled():
        task.exception()


class KafkaProducer:
    """``async with KafkaProducer({"bootstrap.servers": "host:port"}) as producer:``
    ``future = await producer.send("topic", b"value", key=b"k")``; ``metadata = await future``.

    With ``transactional.id``: ``await producer.init_transactions()`` once, then per transaction
    ``producer.begin_transaction()``, ``send`` ..., optionally ``await
    producer.send_offsets_to_transaction(offsets, consumer.group_metadata())``, and ``await
    producer.commit_transaction()`` (or ``abort_transaction()``). A `TransactionError` with
    ``fatal`` false (e.g. a record failed) means: abort the transaction; with ``fatal`` true
    (`ProducerFencedError`, ...): close the producer.

    ``admin`` (an ``Admin`` or a stand-in with ``topic_layouts``, ``connection`` and
    ``reset_connection``, and ``find_coordinator`` / ``forget_coordinator`` for transactions)
    and ``time`` are injectable for tests; by default the producer opens its own ``Admin`` on
    ``bootstrap.servers``.
    """

    def __init__(self, config: Mapping[str, object] | KafkaProducerConfig | None = None, *,
                 admin: Any = None, time: Time = SYSTEM_TIME) -> None:
        self.config = config if isinstance(config, KafkaProducerConfig) else KafkaProducerConfig.from_properties(config or {})
        self._own_admin = admin is None
        self.admin = admin if admin is not None else Admin(
            self.config.bootstrap_servers, client_id=self.config.client_id,
            request_timeout=self.config.request_timeout_ms / 1000 + 5, security=self.config.security)
        self.time = time
        self._topics: dict[str, _Topic] = {}
        self._sequence = 0
        self._buffered = 0  # bytes of records not yet acknowledged
        self._wakeup = asyncio.Event()
        self._metadata_due = 0.0  # monotonic ms: when the topics' metadata is looked up again
        self._space = asyncio.Event()
        self._flushing = 0
        self._closing = False
        self._sender: asyncio.Task[None] | None = None
        self._requests: set[asyncio.Task[None]] = set()
        self._in_flight: dict[Node, int] = {}
        self._layout_locks: dict[str, asyncio.Lock] = {}
        self._txn: TransactionManager | None = None
        if self.config.transactional_id is not None:
            self._txn = TransactionManager(self.config.transactional_id, self.config.transaction_timeout_ms,
                                           self.config.retry_backoff_ms, self.admin,
                                           self.config.request_timeout_ms / 1000 + 5)
        self._txn_call_pending: tuple[str, asyncio.Task[None]] | None = None  # a call that timed out, resumable

    # --- lifecycle -------------------------------------------------------------------------------

    async def start(self) -> None:
        if self._own_admin:
            await self.admin.connect()
        self._sender = asyncio.ensure_future(self._run())

    async def __aenter__(self) -> KafkaProducer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self, timeout: float | None = None) -> None:
        """Send everything queued, wait for the answers (up to ``timeout`` seconds, default
        without limit), then stop. Records still unsent after the timeout fail. An ongoing
        transaction is aborted first, as Kafka's producer does on close."""
        if self._sender is None:
            return
        txn = self._txn
        if txn is not None and txn.has_ongoing_transaction() and not txn.is_completing():
            log.info("transactional id %s: aborting the incomplete transaction on close", txn.transactional_id)
            try:
                async with asyncio.timeout(timeout):
                    await self.abort_transaction()
            except (TransactionError, KafkaTimeoutError, TimeoutError) as e:
                log.warning("transactional id %s: the abort on close failed: %s", txn.transactional_id, e)
        self._closing = True
        self._wakeup.set()
        try:
            async with asyncio.timeout(timeout):
                await asyncio.shield(self._sender)
        except TimeoutError:
            self._sender.cancel()
            self._fail_all(KafkaTimeoutError("the producer was closed before these records were sent"))
        finally:
            for task in list(self._requests):
                task.cancel()
            if self._txn_call_pending is not None:
                self._txn_call_pending[1].cancel()
            self._sender = None
            if self._own_admin:
                await self.admin.close()

    # --- the API ---------------------------------------------------------------------------------

    async def partitions_for(self, topic: str) -> TopicLayout:
        """The topic's layout (partitions, counts) as the producer knows it."""
        return (await self._topic(topic)).layout

    async def send(
        self, topic: str, value: bytes | None, key: bytes | None = None,
        headers: HeaderList | None = None, partition: int | None = None,
    ) -> asyncio.Future[RecordMetadata]:
        """Queue a record; returns a future of its `RecordMetadata`. Waits for the topic's
        metadata the first time (a broker may auto-create the topic) and while ``buffer.memory``
        is used up (at most ``max.block.ms``)."""
        self._require_running()
        if self._txn is not None:
            self._txn.fail_if_not_ready_for_send()
        state = await self._topic(topic)
        if partition is not None and not 0 <= partition < state.layout.partition_count:
            raise ValueError(f"partition {partition} of topic {topic} does not exist "
                             f"(it has {state.layout.partition_count} partitions)")
        await self._wait_for_space()
        future: asyncio.Future[RecordMetadata] = asyncio.get_running_loop().create_future()
        self._sequence += 1
        record = _Record(self._sequence, key, value, headers, partition, future, self.time.monotonic_ms())
        self._append(state, record)
        return future

    async def send_and_wait(
        self, topic: str, value: bytes | None, key: bytes | None = None,
        headers: HeaderList | None = None, partition: int | None = None,
    ) -> RecordMetadata:
        return await (await self.send(topic, value, key, headers, partition))

    def _require_running(self) -> None:
        if self._sender is None or self._closing:
            raise RuntimeError("the producer is not running (start() it, or use 'async with')")

    async def flush(self) -> None:
        """Send every queued record now and wait until each is acknowledged or failed."""
        self._flushing += 1
        try:
            while True:
                futures = [r.future for state in self._topics.values()
                           for r in [*self._pending_records(state),
                                     *(r for b in state.in_flight.values() for r in b.records)]
                           if not r.future.done()]
                if not futures:
                    return
                self._wakeup.set()
                await asyncio.wait(futures)
        finally:
            self._flushing -= 1

    # --- transactions ----------------------------------------------------------------------------

    @property
    def transaction_state(self) -> TransactionState | None:
        """The transactional state (Kafka's TransactionManager states); None without ``transactional.id``."""
        return self._txn.state if self._txn is not None else None

    @property
    def producer_id_and_epoch(self) -> tuple[int, int]:
        """``(producer id, epoch)``; ``(-1, -1)`` before ``init_transactions`` or without transactions."""
        return (self._txn.producer_id, self._txn.producer_epoch) if self._txn is not None else (-1, -1)

    def _require_txn(self) -> TransactionManager:
        if self._txn is None:
            raise TransactionStateError("Transactional method invoked on a non-transactional producer.")
        self._require_running()
        return self._txn

    async def init_transactions(self) -> None:
        """Kafka's ``initTransactions``: find the transaction coordinator and get a producer id and
        epoch for ``transactional.id`` (fencing older producers with it; the coordinator completes
        their open transaction first). Call once, before the first transaction."""
        txn = self._require_txn()
        await self._transactional_call("init_transactions", TransactionState.INITIALIZING, txn.begin_init,
                                       txn.init_producer_id)

    def begin_transaction(self) -> None:
        """Kafka's ``beginTransaction``: records sent from now on belong to the transaction."""
        self._require_txn().begin_transaction()

    async def send_offsets_to_transaction(
        self, offsets: Mapping[TopicPartition, int], group_metadata: ConsumerGroupMetadata | str,
    ) -> None:
        """Kafka's ``sendOffsetsToTransaction``: commit the consumer group's ``offsets`` (each the
        next offset to consume) as part of the transaction: AddOffsetsToTxn to the transaction
        coordinator, then TxnOffsetCommit to the group's coordinator. ``group_metadata`` is the
        consumer's ``group_metadata()`` (its generation, member id and instance id let the
        coordinator refuse offsets from a member that lost its partitions, KIP-447) or a group id
        (not fenced by generation)."""
        txn = self._require_txn()
        group = group_metadata if isinstance(group_metadata, ConsumerGroupMetadata) else ConsumerGroupMetadata(group_metadata)
        txn.check_send_offsets()
        await self._transactional_call("send_offsets_to_transaction", None, None,
                                       lambda: txn.send_offsets(dict(offsets), group))

    async def commit_transaction(self) -> None:
        """Kafka's ``commitTransaction``: send every record of the transaction and wait for it,
        then EndTxn(commit). Raises `TransactionError` (not fatal) when a record failed: abort
        then."""
        txn = self._require_txn()

        async def commit() -> None:
            await self.flush()
            await txn.end_transaction(commit=True)

        await self._transactional_call("commit_transaction", TransactionState.COMMITTING_TRANSACTION,
                                       txn.begin_commit, commit)

    async def abort_transaction(self) -> None:
        """Kafka's ``abortTransaction``: records not yet sent fail with `TransactionAbortedError`,
        those in flight are waited for, then EndTxn(abort); after an abortable error with a
        coordinator that can, the epoch is bumped (KIP-360)."""
        txn = self._require_txn()

        async def abort() -> None:
            self._wakeup.set()  # the sender fails what is not sent yet
            await self.flush()
            await txn.end_transaction(commit=False)

        await self._transactional_call("abort_transaction", TransactionState.ABORTING_TRANSACTION,
                                       txn.begin_abort, abort)

    async def _transactional_call(self, name: str, target: TransactionState | None, begin: Callable[[], None] | None,
                                  run: Callable[[], Awaitable[None]]) -> None:
        """Run a transactional call, waiting at most ``max.block.ms``. As in Kafka, a call that
        timed out goes on: calling it again waits for the same one (or gives its outcome)."""
        txn = self._require_txn()
        pending = self._txn_call_pending
        if target is not None and pending is not None and pending[0] == name and (
                pending[1].done() or txn.state == target):
            task = pending[1]
        else:
            if begin is not None:
                begin()
            task = asyncio.ensure_future(run())
            task.add_done_callback(_retrieve)
            if target is not None:
                self._txn_call_pending = (name, task)
        try:
            async with asyncio.timeout(self.config.max_block_ms / 1000):
                await asyncio.shield(task)
        except TimeoutError:
            if task.done():  # the call itself timed out
                raise
            raise KafkaTimeoutError(f"Timeout expired after {self.config.max_block_ms} ms while awaiting "
                                    f"{name}") from None
        finally:
            if task.done() and self._txn_call_pending is not None and self._txn_call_pending[1] is task:
                self._txn_call_pending = None

    def _transaction_housekeeping(self) -> None:
        """The sender's part of a transaction: in an error state or aborting, fail what is not
        sent; else start AddPartitionsToTxn for partitions new to the transaction."""
        txn = self._txn
        assert txn is not None
        if txn.has_error() or txn.state == TransactionState.ABORTING_TRANSACTION:
            self._abort_unsent(txn)
        elif txn.has_partitions_to_add():
            task = txn.start_add_partitions()
            task.add_done_callback(self._added_partitions)

    def _added_partitions(self, task: asyncio.Task[None]) -> None:
        if not task.cancelled() and task.exception() is not None:
            log.info("AddPartitionsToTxn failed: %s", task.exception())
        self._wakeup.set()

    def _abort_unsent(self, txn: TransactionManager) -> None:
        last = txn.last_error
        reason = f": {last}" if last is not None else ""
        for state in self._topics.values():
            batches = [*state.failed, *(b for queue in state.queues.values() for b in queue)]
            if not batches:
                continue
            state.failed, state.queues = [], {}
            for batch in batches:
                error = TransactionAbortedError(f"Failing batch since transaction was aborted{reason}",
                                                last.error if last else None)
                if batch.encoded is not None and batch.base_sequence >= 0:
                    if batch.maybe_written:
                        txn.batch_failed(batch.tp, batch.base_sequence, error, None, maybe_written=True)
                    else:
                        txn.batch_unsent(batch.tp, batch.base_sequence)
                futures = [r.future for r in batch.records]
                self._complete(batch, exception=error)
                for future in futures:  # the application aborted: not awaiting these is no mistake
                    future.exception()

    # --- accumulating ----------------------------------------------------------------------------

    async def _topic(self, topic: str) -> _Topic:
        state = self._topics.get(topic)
        if state is None:
            async with self._layout_locks.setdefault(topic, asyncio.Lock()):
                state = self._topics.get(topic)
                if state is None:
                    layouts = await self.admin.topic_layouts([topic], auto_create=True)
                    state = self._topics[topic] = _Topic(layouts[topic])
        return state

    def _partition_for(self, state: _Topic, record: _Record) -> int:
        if record.explicit is not None:
            return record.explicit
        if record.key is not None:
            return state.layout.partition_for_key(record.key)
        return state.sticky if state.sticky >= 0 else state.next_sticky()

    def _append(self, state: _Topic, record: _Record) -> None:
        partition = self._partition_for(state, record)
        if self._txn is not None:
            self._txn.maybe_add_partition(TopicPartition(state.layout.name, partition))
        queue = state.queues.setdefault(partition, deque())
        batch = queue[-1] if queue else None
        if batch is None or batch.encoded is not None or (
                batch.records and batch.columns.size + BATCH_OVERHEAD >= self.config.batch_size):
            batch = _Batch(TopicPartition(state.layout.name, partition), record.created_ms)
            queue.append(batch)
        batch.append(record)
        self._buffered += record.size
        full = batch.columns.size + BATCH_OVERHEAD >= self.config.batch_size
        if full and record.key is None and record.explicit is None and partition == state.sticky:
            state.next_sticky()  # Kafka's sticky partitioner moves on after batch.size bytes
        if len(batch.records) == 1 or len(queue) > 1 or full or self.config.linger_ms == 0:
            self._wakeup.set()  # a new batch starts its linger timer; a full one is ready now

    async def _wait_for_space(self) -> None:
        if self._buffered < self.config.buffer_memory:
            return
        try:
            async with asyncio.timeout(self.config.max_block_ms / 1000):
                while self._buffered >= self.config.buffer_memory:
                    self._space.clear()
                    await self._space.wait()
        except TimeoutError:
            raise KafkaTimeoutError(f"buffer.memory ({self.config.buffer_memory} bytes) still full after "
                                    f"max.block.ms ({self.config.max_block_ms} ms)") from None

    def _pending_records(self, state: _Topic) -> list[_Record]:
        out = [r for queue in state.queues.values() for batch in queue for r in batch.records if not r.future.done()]
        out += [r for batch in state.failed for r in batch.records if not r.future.done()]
        return out

    # --- sending ---------------------------------------------------------------------------------

    async def _run(self) -> None:
        """The sender: drain ready batches, recover topics, until closed with nothing left."""
        while True:
            self._wakeup.clear()
            now = self.time.monotonic_ms()
            self._expire(now)
            if self._txn is not None:
                self._transaction_housekeeping()
            if now >= self._metadata_due:
                await self._refresh_metadata(now)
            for state in list(self._topics.values()):
                if state.recovering and not state.in_flight and state.retry_at <= now:
                    await self._recover(state)
            next_due = await self._drain(now)
            idle = not any(not task.done() for task in self._requests) and not any(
                state.queues or state.failed or state.in_flight for state in self._topics.values())
            if self._closing and idle:
                return
            due = self._metadata_due if next_due is None else min(next_due, self._metadata_due)
            timeout = max(due - self.time.monotonic_ms(), 1) / 1000
            if any(state.recovering for state in self._topics.values()):
                timeout = min(timeout or 1.0, self.config.retry_backoff_ms / 1000 or 0.01)
            # A timer sets the event rather than a timeout cancelling the wait: nothing to race.
            timer = None if timeout is None else asyncio.get_running_loop().call_later(timeout, self._wakeup.set)
            await self._wakeup.wait()
            if timer is not None:
                timer.cancel()

    def _ready(self, batch: _Batch, queue: deque[_Batch], now: float) -> float | None:
        """0 when ``batch`` may go now, else when it will be (monotonic ms), None: not by itself."""
        if len(queue) > 1 or self._closing or self._flushing or batch.encoded is not None:
            return 0
        if batch.columns.size + BATCH_OVERHEAD >= self.config.batch_size:
            return 0
        due = batch.created_ms + self.config.linger_ms
        return 0 if due <= now else due

    async def _drain(self, now: float) -> float | None:
        """Send every ready batch (one per partition not in flight), grouped by leader; returns when
        the next batch becomes ready by linger."""
        requests: dict[Node, list[_Batch]] = {}
        next_due: float | None = None
        txn = self._txn
        for state in self._topics.values():
            if state.recovering:
                continue
            for partition, queue in list(state.queues.items()):
                if not queue or partition in state.in_flight:
                    continue
                if txn is not None and not txn.send_allowed(queue[0].tp):
                    continue  # not in the transaction yet: AddPartitionsToTxn first
                ready = self._ready(queue[0], queue, now)
                if ready:
                    next_due = ready if next_due is None else min(next_due, ready)
                    continue
                leader = state.layout.leaders.get(partition)
                if leader is None:
                    state.recovering = True
                    state.retry_at = now + self.config.retry_backoff_ms
                    break
                requests.setdefault(leader, []).append(queue[0])
        for leader, batches in requests.items():
            while batches and self._in_flight.get(leader, 0) < self.config.max_in_flight:
                taken: list[_Batch] = []
                size = 0
                while batches:
                    batch = batches[0]
                    encoded = self._encode(batch)
                    if taken and size + len(encoded) > self.config.max_request_size:
                        break
                    taken.append(batches.pop(0))
                    size += len(encoded)
                self._dispatch(leader, taken)
        return next_due

    def _encode(self, batch: _Batch) -> bytes:
        if batch.encoded is None:
            batch.timestamp = self.time.milliseconds()
            txn = self._txn
            if txn is None:
                batch.encoded = batch.columns.encode(batch.timestamp, self.config.compression)
            else:
                batch.base_sequence = txn.next_sequence(batch.tp, len(batch.records))
                batch.encoded = batch.columns.encode(batch.timestamp, self.config.compression, txn.producer_id,
                                                     txn.producer_epoch, batch.base_sequence, transactional=True)
        return batch.encoded

    def _dispatch(self, leader: Node, batches: list[_Batch]) -> None:
        by_topic: dict[str, list[_Batch]] = {}
        for batch in batches:
            state = self._topics[batch.tp.topic]
            queue = state.queues[batch.tp.partition]
            queue.popleft()
            if not queue:
                del state.queues[batch.tp.partition]
            state.in_flight[batch.tp.partition] = batch
            if batch.records and batch.records[0].explicit is None and batch.records[0].key is None \
                    and batch.tp.partition == state.sticky:
                state.next_sticky()  # Kafka's sticky partitioner moves on once a batch is sent
            by_topic.setdefault(batch.tp.topic, []).append(batch)
        self._in_flight[leader] = self._in_flight.get(leader, 0) + 1
        task = asyncio.ensure_future(self._request(leader, by_topic))
        self._requests.add(task)
        task.add_done_callback(self._requests.discard)

    async def _request(self, leader: Node, by_topic: dict[str, list[_Batch]]) -> None:
        # per partition: error, base offset, log append time, error message
        outcome: dict[TopicPartition, tuple[int, int, int, str | None]] = {}
        try:
            connection = await self.admin.connection(leader)
            version = connection.version_for(ApiKey.PRODUCE)
            request = ProduceRequest(
                transactional_id=self.config.transactional_id, acks=self.config.acks,
                timeout_ms=self.config.request_timeout_ms,
                topic_data=[ProduceRequest.TopicProduceData(
                    name=topic,
                    partition_data=[ProduceRequest.PartitionProduceData(index=b.tp.partition, records=b.encoded)
                                    for b in batches],
                    undeleted_partition_count=self._topics[topic].layout.undeleted_partition_count,
                ) for topic, batches in by_topic.items()],
            )
            if self.config.acks == 0:
                await connection.send_without_response(ApiKey.PRODUCE, request, version)
                outcome = {b.tp: (ErrorCode.NONE, -1, -1, None) for bs in by_topic.values() for b in bs}
            else:
                response = await connection.send(ApiKey.PRODUCE, request, version,
                                                 timeout=self.config.request_timeout_ms / 1000 + 5)
                for topic in response.responses:
                    for p in topic.partition_responses:
                        outcome[TopicPartition(topic.name, p.index)] = (
                            p.error_code, p.base_offset, p.log_append_time_ms, p.error_message)
        except (KafkaClientError, OSError, TimeoutError) as e:
            log.info("produce request to %s failed: %s", leader, e or type(e).__name__)
            await self.admin.reset_connection(leader)  # every partition: NETWORK_EXCEPTION, retried
        except Exception as e:  # an unexpected failure fails these records, not the producer
            log.exception("produce request to %s failed", leader)
            outcome = {b.tp: (ErrorCode.UNKNOWN_SERVER_ERROR, -1, -1, f"{type(e).__name__}: {e}")
                       for bs in by_topic.values() for b in bs}
        finally:
            self._in_flight[leader] -= 1
        txn = self._txn
        for topic, batches in by_topic.items():
            state = self._topics[topic]
            for batch in batches:
                state.in_flight.pop(batch.tp.partition, None)
                error, base_offset, append_time, message = outcome.get(
                    batch.tp, (ErrorCode.NETWORK_EXCEPTION, -1, -1, None))
                if txn is not None and error in MAYBE_WRITTEN_ERRORS:
                    batch.maybe_written = True
                if error == ErrorCode.NONE or (txn is not None and error == ErrorCode.DUPLICATE_SEQUENCE_NUMBER):
                    self._complete(batch, base_offset=base_offset, append_time=append_time)
                elif ErrorCode.for_code(error).retriable or error in LEADERSHIP_ERRORS:
                    state.failed.append(batch)
                    state.recovering = True
                    state.last_error = ErrorCode.for_code(error)
                    state.retry_at = self.time.monotonic_ms() + self.config.retry_backoff_ms
                else:
                    failure = ProduceError(batch.tp, error, message)
                    if txn is not None:
                        txn.batch_failed(batch.tp, batch.base_sequence, TransactionError(str(failure), failure.error),
                                         failure.error, batch.maybe_written)
                    self._complete(batch, exception=failure)
        self._wakeup.set()

    def _complete(self, batch: _Batch, base_offset: int = -1, append_time: int = -1,
                  exception: BaseException | None = None) -> None:
        timestamp = append_time if append_time >= 0 else batch.timestamp
        for index, record in enumerate(batch.records):
            self._buffered -= record.size
            if record.future.done():
                continue
            if exception is not None:
                record.future.set_exception(exception)
            else:
                offset = base_offset + index if base_offset >= 0 else -1
                record.future.set_result(RecordMetadata(batch.tp.topic, batch.tp.partition, offset, timestamp))
        batch.records = []
        self._space.set()

    # --- recovering ------------------------------------------------------------------------------

    async def _refresh_metadata(self, now: float) -> None:
        """Every ``metadata.max.age.ms``, as Kafka's producer does: a topic whose partitions,
        counts or leaders changed is recovered (re-partitioned with the new counts), so a topic
        without ordered delivery, where no leader refuses a stale count, still takes its new
        partitions."""
        self._metadata_due = now + self.config.metadata_max_age_ms
        topics = [name for name, state in self._topics.items() if not state.recovering]
        if not topics:
            return
        try:
            layouts = await self.admin.topic_layouts(topics, auto_create=False)
        except (AdminError, KafkaClientError, OSError, TimeoutError) as e:
            log.info("metadata refresh of %s failed: %s", topics, e)
            return
        for name, layout in layouts.items():
            state = self._topics[name]
            if (layout.counts, layout.leaders) != (state.layout.counts, state.layout.leaders):
                state.recovering, state.retry_at = True, now

    async def _recover(self, state: _Topic) -> None:
        """Nothing of the topic is in flight: look its metadata up again and partition every record
        not yet acknowledged again, in send order."""
        topic = state.layout.name
        try:
            layout = (await self.admin.topic_layouts([topic], auto_create=False))[topic]
        except (AdminError, KafkaClientError, OSError, TimeoutError) as e:
            log.info("metadata of topic %s not available yet: %s", topic, e)
            state.retry_at = self.time.monotonic_ms() + self.config.retry_backoff_ms
            return  # stays recovering; tried again after retry.backoff.ms
        if layout.counts != state.layout.counts:
            log.info("topic %s: partition counts (initial, undeleted, all) %s -> %s; re-partitioning %d records",
                     topic, state.layout.counts, layout.counts, len(self._pending_records(state)))
        records = sorted(self._pending_records(state), key=lambda r: r.sequence)
        stuck = self._stuck_batches(state, layout) if self._txn is not None else []
        if stuck:
            kept = {id(r) for batch in stuck for r in batch.records}
            records = [r for r in records if id(r) not in kept]
        state.layout = layout
        state.queues.clear()
        state.failed.clear()
        state.recovering = False
        for batch in stuck:  # first in their partitions: they keep their sequence numbers
            state.queues.setdefault(batch.tp.partition, deque()).append(batch)
        if state.sticky >= layout.undeleted_partition_count:
            state.sticky = -1
        for record in records:
            self._buffered -= record.size
            if record.explicit is not None and record.explicit >= layout.partition_count:
                record.future.set_exception(ProduceError(
                    TopicPartition(topic, record.explicit), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    f"topic {topic} now has {layout.partition_count} partitions"))
                continue
            self._append(state, record)
        self._wakeup.set()

    def _stuck_batches(self, state: _Topic, layout: TopicLayout) -> list[_Batch]:
        """Of a transactional topic being recovered: the encoded batches that may already be
        written, which must be sent again as they are (same partition, same sequence). The other
        encoded ones give their sequences back (their records are partitioned again). If the
        counts changed, batches that may be written cannot follow their keys: they fail and the
        transaction becomes abortable."""
        txn = self._txn
        assert txn is not None
        stuck = []
        for batch in [*state.failed, *(queue[0] for queue in state.queues.values() if queue)]:
            if batch.encoded is None or batch.base_sequence < 0:
                continue
            if batch.maybe_written:
                stuck.append(batch)
            else:
                txn.batch_unsent(batch.tp, batch.base_sequence)
        if stuck and layout.counts != state.layout.counts:
            for batch in stuck:
                error = TransactionError(
                    f"the partition counts of topic {layout.name} changed ({state.layout.counts} -> {layout.counts}) "
                    f"while records to {batch.tp} that may be written were not acknowledged: abort the transaction",
                    ErrorCode.INVALID_PARTITION_METADATA)
                txn.batch_failed(batch.tp, batch.base_sequence, error, None, maybe_written=True)
                self._complete(batch, exception=error)
            return []
        return stuck

    def _expire(self, now: float) -> None:
        """Fail the batches (not in flight) whose first record is older than delivery.timeout.ms,
        as Kafka's accumulator expires batches."""
        limit = now - self.config.delivery_timeout_ms
        for state in self._topics.values():
            expired = [b for b in state.failed if b.created_ms <= limit]
            for partition, queue in list(state.queues.items()):
                while queue and queue[0].created_ms <= limit:
                    expired.append(queue.popleft())
                if not queue:
                    del state.queues[partition]
            if not expired:
                continue
            state.failed = [b for b in state.failed if b.created_ms > limit]
            error = state.last_error.name if state.last_error else "not sent yet"
            for batch in expired:
                timeout = KafkaTimeoutError(f"records to {batch.tp} not acknowledged within delivery.timeout.ms "
                                            f"({self.config.delivery_timeout_ms} ms; last error: {error})")
                if self._txn is not None:
                    self._txn.batch_failed(batch.tp, batch.base_sequence, TransactionError(str(timeout)), None,
                                           batch.maybe_written)
                self._complete(batch, exception=timeout)

    def _fail_all(self, error: BaseException) -> None:
        for state in self._topics.values():
            for record in self._pending_records(state):
                record.future.set_exception(error)
            state.queues.clear()
            state.failed.clear()

