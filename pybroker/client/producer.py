"""The project's own asyncio producer: encoded record batches to partition leaders, pipelined.

Owns the path from "these batches belong to topic T, partition P" to acknowledged offsets:
partition leaders (looked up through an ``Admin``, which also owns the connections), Produce
requests per leader carrying up to ``max.request.size`` and at most one batch per partition (the
rule of Produce v3+), at most
``max.in.flight.requests.per.connection`` requests awaiting an answer per broker, ``acks``, and
the summary of what landed (records, bytes, first and last offset per partition).

It does not encode records: callers hand it whole magic-2 batches (the Spark writer builds them
with ``_native.encode_partitioned_batches``, once per Arrow batch), so nothing here is per record.

Ordering: a partition's batches go out in the order they were handed over, on one connection,
and a broker answers a connection's requests in order, so a partition's records land in order.
Each topic carries the partition count its records were partitioned with (KIP-253's
``UndeletedPartitionCount``), so a broker refuses them with INVALID_PARTITION_METADATA once the
topic's partitions have changed, rather than append them where the key no longer belongs.

A failed partition is not retried: resending behind requests already in flight could reorder it
(Kafka only allows that with idempotence). The error is raised by the next ``send`` or by
``flush`` instead, and the caller (a Spark task) fails and is retried as a whole.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field

from pybroker.client.admin import Admin, AdminError
from pybroker.client.connection import BrokerConnection
from pybroker.client.node import Node
from pybroker.client.properties import int_property
from pybroker.client.topic_layout import TopicLayout
from pybroker.common.errors import ErrorCode
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages import ProduceRequest
from pybroker.types import TopicPartition

ACKS = {"all": -1, "-1": -1, "1": 1, "0": 0}


class ProduceError(Exception):
    """A partition's records were not written; ``error`` is Kafka's error code."""

    def __init__(self, tp: TopicPartition, error: int, message: str | None = None) -> None:
        self.tp, self.error = tp, ErrorCode.for_code(error)
        super().__init__(f"producing to {tp.topic}-{tp.partition} failed: {self.error.name}"
                         + (f" ({message})" if message else ""))


@dataclass
class PartitionWritten:
    """What landed in one partition: record count and the first and last offset (-1 with acks=0)."""

    records: int = 0
    first_offset: int = -1
    last_offset: int = -1


@dataclass
class ProducerConfig:
    """Kafka's producer settings that this producer honours (Kafka's names and defaults)."""

    acks: int = -1  # acks=all
    max_request_size: int = 1048576  # max.request.size
    max_in_flight: int = 5  # max.in.flight.requests.per.connection
    request_timeout_ms: int = 30000  # request.timeout.ms
    client_id: str = "pybroker-producer"

    @classmethod
    def from_properties(cls, props: dict[str, str]) -> ProducerConfig:
        """From Kafka producer properties (unknown ones are ignored, as Kafka warns and ignores)."""
        acks = props.get("acks", "all").strip().lower()
        if acks not in ACKS:
            raise ValueError(f"Invalid value {acks} for configuration acks: String must be one of: all, -1, 0, 1")
        return cls(
            acks=ACKS[acks],
            max_request_size=int_property(props, "max.request.size", cls.max_request_size, 1),
            max_in_flight=int_property(props, "max.in.flight.requests.per.connection", cls.max_in_flight, 1),
            request_timeout_ms=int_property(props, "request.timeout.ms", cls.request_timeout_ms, 1),
            client_id=props.get("client.id", cls.client_id),
        )


LAST_OFFSET_DELTA_AT = 23  # batch header: baseOffset i64, batchLength i32, epoch i32, magic i8, crc u32, attributes i16


def record_count(batch: bytes) -> int:
    """Records in a magic-2 batch, from its header's lastOffsetDelta."""
    return int.from_bytes(batch[LAST_OFFSET_DELTA_AT:LAST_OFFSET_DELTA_AT + 4], "big", signed=True) + 1


@dataclass
class _Pending:
    """The next Produce request to one leader: at most one batch per partition (Kafka refuses
    more from Produce v3 on)."""

    batches: dict[TopicPartition, bytes] = field(default_factory=dict)
    size: int = 0


class Producer:
    """``Producer(admin, config)``; ``await send(tp, batches)`` ... ``await flush()``."""

    def __init__(self, admin: Admin, config: ProducerConfig | None = None) -> None:
        self.admin = admin
        self.config = config or ProducerConfig()
        self.written: dict[TopicPartition, PartitionWritten] = {}
        self.bytes_sent = 0
        self._layouts: dict[str, TopicLayout] = {}
        self._pending: dict[Node, _Pending] = {}
        self._in_flight: dict[Node, asyncio.Semaphore] = {}
        self._requests: set[asyncio.Task[None]] = set()
        self._failure: BaseException | None = None

    async def layout(self, topic: str) -> TopicLayout:
        """The topic's partitions and KIP-253 counts, read once (the broker may auto-create the
        topic, as Kafka's producer lets it)."""
        if topic not in self._layouts:
            self._layouts.update(await self.admin.topic_layouts([topic], auto_create=True))
        return self._layouts[topic]

    async def send(self, tp: TopicPartition, batches: Sequence[bytes]) -> None:
        """Queue ``batches`` (whole record batches, in order) for ``tp``. A request goes out when
        it would otherwise hold a second batch of a partition or exceed ``max.request.size``;
        sending waits while that leader already has ``max.in.flight.requests.per.connection``
        requests unanswered."""
        self._raise_failure()
        leader = await self._leader(tp)
        for batch in batches:
            pending = self._pending.get(leader)
            if pending is not None and (tp in pending.batches or pending.size + len(batch) > self.config.max_request_size):
                await self._dispatch(leader)
                pending = None
            if pending is None:
                pending = self._pending[leader] = _Pending()
            pending.batches[tp] = batch
            pending.size += len(batch)

    async def flush(self) -> dict[TopicPartition, PartitionWritten]:
        """Send everything queued and wait for every answer; raises the first ProduceError."""
        for leader in list(self._pending):
            await self._dispatch(leader)
        while self._requests:
            await asyncio.wait(list(self._requests))
        self._raise_failure()
        return self.written

    async def _leader(self, tp: TopicPartition) -> Node:
        partitions = (await self.layout(tp.topic)).leaders
        if tp.partition not in partitions:
            raise ProduceError(tp, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {tp.topic} has {len(partitions)} partitions")
        leader = partitions[tp.partition]
        if leader is None:
            known = self._layouts[tp.topic]
            fresh = (await self.admin.topic_layouts([tp.topic], auto_create=True))[tp.topic]
            if fresh.counts[:2] != known.counts[:2]:  # the caller partitioned with the old counts
                raise ProduceError(tp, ErrorCode.INVALID_PARTITION_METADATA,
                                   f"the partition count of {tp.topic} changed while writing")
            self._layouts[tp.topic] = fresh
            leader = fresh.leaders.get(tp.partition)
            if leader is None:
                raise ProduceError(tp, ErrorCode.LEADER_NOT_AVAILABLE)
        return leader

    async def _dispatch(self, leader: Node) -> None:
        pending = self._pending.pop(leader, None)
        if pending is None or not pending.batches:
            return
        semaphore = self._in_flight.setdefault(leader, asyncio.Semaphore(self.config.max_in_flight))
        await semaphore.acquire()
        connection = await self.admin.connection(leader)
        by_topic: dict[str, list[ProduceRequest.PartitionProduceData]] = {}
        for tp, batch in pending.batches.items():
            by_topic.setdefault(tp.topic, []).append(ProduceRequest.PartitionProduceData(index=tp.partition, records=batch))
        request = ProduceRequest(
            transactional_id=None, acks=self.config.acks, timeout_ms=self.config.request_timeout_ms,
            topic_data=[ProduceRequest.TopicProduceData(
                name=t, partition_data=parts, undeleted_partition_count=self._layouts[t].undeleted_partition_count,
            ) for t, parts in by_topic.items()],
        )
        self.bytes_sent += pending.size
        # The request is written to the socket now, in call order; only its answer is awaited later.
        counts = {tp: record_count(batch) for tp, batch in pending.batches.items()}
        task = asyncio.ensure_future(self._request(connection, request, counts, semaphore))
        self._requests.add(task)
        task.add_done_callback(self._requests.discard)

    async def _request(
        self, connection: BrokerConnection, request: ProduceRequest, counts: dict[TopicPartition, int],
        semaphore: asyncio.Semaphore,
    ) -> None:
        try:
            version = connection.version_for(ApiKey.PRODUCE)
            if self.config.acks == 0:
                await connection.send_without_response(ApiKey.PRODUCE, request, version)
                for tp, n in counts.items():
                    self.written.setdefault(tp, PartitionWritten()).records += n
                return
            timeout = self.config.request_timeout_ms / 1000 + 5
            response = await connection.send(ApiKey.PRODUCE, request, version, timeout=timeout)
            for topic in response.responses:
                for p in topic.partition_responses:
                    tp = TopicPartition(topic.name, p.index)
                    if p.error_code != ErrorCode.NONE:
                        raise ProduceError(tp, p.error_code, p.error_message)
                    done = self.written.setdefault(tp, PartitionWritten())
                    if done.first_offset < 0:
                        done.first_offset = p.base_offset
                    done.records += counts.get(tp, 0)
                    done.last_offset = p.base_offset + counts.get(tp, 0) - 1
        except (ProduceError, AdminError) as e:
            self._failure = self._failure or e
        except Exception as e:  # connection lost, timeout: every partition of the request failed
            self._failure = self._failure or ProduceError(next(iter(counts)), ErrorCode.NETWORK_EXCEPTION, str(e) or type(e).__name__)
        finally:
            semaphore.release()

    def _raise_failure(self) -> None:
        if self._failure is not None:
            raise self._failure
