"""The project's own asyncio fetcher: one partition's records, as raw batches, from its leader.

Owns sending Fetch requests for a partition at an offset to that partition's leader (found and
connected through an ``Admin``), with Kafka's consumer settings (``fetch.max.wait.ms``,
``fetch.min.bytes``, ``fetch.max.bytes``, ``max.partition.fetch.bytes``, ``isolation.level``),
looking the leader up again after a leadership error, and reporting what the broker said about
the partition (high watermark, log start offset, error).

It returns the records field untouched: whole batches, possibly followed by a partial one, as a
Kafka broker sends them. Decoding is the caller's (the Spark reader turns them into Arrow columns
with ``_native.decode_record_batches``, once per fetched buffer). With
``isolation.level=read_committed`` it also returns the partition's aborted transactions
(``(producer_id, first_offset)`` pairs, empty when there are none) for the decoder to drop their
records; ``aborted_ranges`` and ``drop_ranges`` apply the same rule, per batch, to records
already decoded as tuples (the group consumer's).
"""

from __future__ import annotations

import asyncio
import bisect
import heapq
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

from pybroker.client.admin import LEADERSHIP_ERRORS, RETRY_BACKOFF_S, Admin, AdminError
from pybroker.client.node import Node
from pybroker.client.properties import int_property
from pybroker.common.errors import ErrorCode
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages import FetchRequest
from pybroker.types import TopicPartition

READ_UNCOMMITTED, READ_COMMITTED = 0, 1
ISOLATION_LEVELS = {"read_uncommitted": READ_UNCOMMITTED, "read_committed": READ_COMMITTED}
ABORT_MARKER = 0  # ControlRecordType ABORT (COMMIT is 1)

R = TypeVar("R", bound=tuple)


@dataclass
class FetcherConfig:
    """Kafka's consumer fetch settings (Kafka's names and defaults)."""

    max_wait_ms: int = 500  # fetch.max.wait.ms
    min_bytes: int = 1  # fetch.min.bytes
    max_bytes: int = 52428800  # fetch.max.bytes
    max_partition_bytes: int = 1048576  # max.partition.fetch.bytes
    isolation_level: int = 0  # isolation.level=read_uncommitted

    @classmethod
    def from_properties(cls, props: dict[str, str]) -> FetcherConfig:
        """From Kafka consumer properties (unknown ones are ignored)."""
        level = props.get("isolation.level", "read_uncommitted")
        if level not in ISOLATION_LEVELS:
            raise ValueError(f"Invalid value {level} for configuration isolation.level: "
                             "String must be one of: read_committed, read_uncommitted")

        return cls(
            max_wait_ms=int_property(props, "fetch.max.wait.ms", cls.max_wait_ms, 0),
            min_bytes=int_property(props, "fetch.min.bytes", cls.min_bytes, 0),
            max_bytes=int_property(props, "fetch.max.bytes", cls.max_bytes, 0),
            max_partition_bytes=int_property(props, "max.partition.fetch.bytes", cls.max_partition_bytes, 0),
            isolation_level=ISOLATION_LEVELS[level],
        )


@dataclass
class FetchedPartition:
    """One partition's part of a Fetch response."""

    records: bytes | memoryview
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    # read_committed: the AbortedTransactions as (producer_id, first_offset); None: read_uncommitted
    aborted_transactions: list[tuple[int, int]] | None = None


class FetchError(Exception):
    """The broker refused the fetch for this partition (``error`` is Kafka's error code)."""

    def __init__(self, tp: TopicPartition, offset: int, error: int) -> None:
        self.tp, self.offset, self.error = tp, offset, ErrorCode.for_code(error)
        super().__init__(f"fetching {tp.topic}-{tp.partition} at offset {offset} failed: {self.error.name}")


class Fetcher:
    """``await Fetcher(admin).fetch(tp, offset)`` → FetchedPartition."""

    def __init__(self, admin: Admin, config: FetcherConfig | None = None, retry_timeout_s: float = 30.0) -> None:
        self.admin = admin
        self.config = config or FetcherConfig()
        self.retry_timeout_s = retry_timeout_s
        self._leaders: dict[TopicPartition, Node] = {}

    async def fetch(self, tp: TopicPartition, offset: int, max_wait_ms: int | None = None) -> FetchedPartition:
        """Records of ``tp`` from ``offset`` on; may be empty after ``max_wait_ms`` (default
        ``fetch.max.wait.ms``). Raises FetchError, e.g. OFFSET_OUT_OF_RANGE."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.retry_timeout_s
        while True:
            leader = await self._leader(tp)
            connection = await self.admin.connection(leader)
            wait = self.config.max_wait_ms if max_wait_ms is None else max_wait_ms
            request = FetchRequest(
                replica_id=-1, max_wait_ms=wait, min_bytes=self.config.min_bytes, max_bytes=self.config.max_bytes,
                isolation_level=self.config.isolation_level, session_id=0, session_epoch=-1,
                topics=[FetchRequest.FetchTopic(topic=tp.topic, partitions=[FetchRequest.FetchPartition(
                    partition=tp.partition, fetch_offset=offset, partition_max_bytes=self.config.max_partition_bytes,
                )])],
                forgotten_topics_data=[],
            )
            response = await connection.send(ApiKey.FETCH, request, timeout=wait / 1000 + 30)
            error = response.error_code
            part = None
            for topic in response.responses:
                for p in topic.partitions:
                    if p.partition_index == tp.partition:
                        part = p
            if error == ErrorCode.NONE and part is not None:
                error = part.error_code
            if error == ErrorCode.NONE and part is not None:
                aborted = None
                if self.config.isolation_level == READ_COMMITTED:
                    aborted = [(a.producer_id, a.first_offset) for a in part.aborted_transactions or ()]
                return FetchedPartition(part.records or b"", part.high_watermark, part.last_stable_offset,
                                        part.log_start_offset, aborted)
            if error in LEADERSHIP_ERRORS and loop.time() + RETRY_BACKOFF_S < deadline:
                self._leaders.pop(tp, None)
                await asyncio.sleep(RETRY_BACKOFF_S)
                continue
            raise FetchError(tp, offset, error if part is not None else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)

    async def _leader(self, tp: TopicPartition) -> Node:
        leader = self._leaders.get(tp)
        if leader is None:
            partitions = (await self.admin.partition_leaders([tp.topic]))[tp.topic]
            if tp.partition not in partitions:
                raise AdminError(f"partition {tp}", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            leader = partitions[tp.partition]
            if leader is None:
                raise AdminError(f"partition {tp}", ErrorCode.LEADER_NOT_AVAILABLE)
            self._leaders[tp] = leader
        return leader


def aborted_ranges(producer_batches: Sequence[tuple], aborted_transactions: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """The ``(first_offset, last_offset)`` of every batch a read_committed consumer skips, in log
    order: Kafka's ``CompletedFetch`` rule over ``ReplicatedRecordsInfo.producer_batches`` (every
    batch with a producer id, markers included) and the Fetch response's aborted transactions.
    An aborted transaction counts from the first batch whose last offset reaches its first
    offset; an ABORT marker of the producer ends it; a transactional batch of a producer in an
    aborted transaction is skipped. One step per batch, none per record."""
    pending = sorted((first, producer_id) for producer_id, first in aborted_transactions)
    aborted: set[int] = set()
    out: list[tuple[int, int]] = []
    for batch in producer_batches:
        producer_id, first, last, transactional, control_type = batch[0], batch[4], batch[5], batch[7], batch[8]
        while pending and pending[0][0] <= last:
            aborted.add(heapq.heappop(pending)[1])
        if control_type == ABORT_MARKER:
            aborted.discard(producer_id)
        elif transactional and producer_id in aborted:
            out.append((first, last))
    return out


def drop_ranges(records: list[R], ranges: Sequence[tuple[int, int]]) -> list[R]:
    """``records`` (tuples whose first item is the offset, ascending) without those whose offset
    falls in one of ``ranges`` (ascending ``(first, last)``, inclusive); list slices, one
    bisection per range."""
    if not ranges or not records:
        return records
    out: list[R] = []
    start = 0
    for first, last in ranges:
        low = bisect.bisect_left(records, first, lo=start, key=lambda r: r[0])
        high = bisect.bisect_right(records, last, lo=low, key=lambda r: r[0])
        out.extend(records[start:low])
        start = high
    out.extend(records[start:])
    return out
