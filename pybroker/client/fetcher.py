"""The project's own asyncio fetcher: one partition's records, as raw batches, from its leader.

Owns sending Fetch requests for a partition at an offset to that partition's leader (found and
connected through an ``Admin``), with Kafka's consumer settings (``fetch.max.wait.ms``,
``fetch.min.bytes``, ``fetch.max.bytes``, ``max.partition.fetch.bytes``, ``isolation.level``),
looking the leader up again after a leadership error, and reporting what the broker said about
the partition (high watermark, log start offset, error).

It returns the records field untouched: whole batches, possibly followed by a partial one, as a
Kafka broker sends them. Decoding is the caller's (the Spark reader turns them into Arrow columns
with ``_native.decode_record_batches``, once per fetched buffer).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from pybroker.client.admin import LEADERSHIP_ERRORS, RETRY_BACKOFF_S, Admin, AdminError, Node
from pybroker.client.properties import int_property
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages import FetchRequest
from pybroker.types import TopicPartition

ISOLATION_LEVELS = {"read_uncommitted": 0, "read_committed": 1}


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
                return FetchedPartition(part.records or b"", part.high_watermark, part.last_stable_offset, part.log_start_offset)
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
