"""Reading topics as a Spark stream: offsets, read limits and ``Trigger.AvailableNow``.

Owns the streaming source's offsets, which are Spark's Kafka source offsets: a JSON object
``{"topic": {"partition": offset}}``, each offset the next one to read. The first micro-batch
starts from ``startingOffsets`` (default ``latest``); partitions that appear later start at their
earliest offset. ``maxOffsetsPerTrigger`` caps a micro-batch, shared out in proportion to each
partition's backlog as Spark does (a small backlog still gets at least one record);
``Trigger.AvailableNow`` stops at the latest offsets seen when the query started. At
``kafka.isolation.level=read_committed`` "latest" is the last stable offset, so a micro-batch
never ends inside an open transaction. Each micro-batch's ranges are read by
``reader.read_range`` in tasks.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

import pybroker.spark.planning as planning
from pybroker.spark.blocking import BlockingClient
from pybroker.spark.options import SourceOptions
from pybroker.spark.reader import read_range
from pybroker.types import TopicPartition

Offsets = dict[str, dict[str, int]]


def to_json(offsets: dict[TopicPartition, int]) -> Offsets:
    out: Offsets = {}
    for tp, offset in sorted(offsets.items()):
        out.setdefault(tp.topic, {})[str(tp.partition)] = offset
    return out


def from_json(offsets: Offsets) -> dict[TopicPartition, int]:
    return {TopicPartition(topic, int(p)): int(o) for topic, parts in offsets.items() for p, o in parts.items()}


def rate_limit(start: dict[TopicPartition, int], latest: dict[TopicPartition, int], limit: int) -> dict[TopicPartition, int]:
    """End offsets reading at most ``limit`` records in all, shared by backlog."""
    backlog = {tp: latest[tp] - start.get(tp, latest[tp]) for tp in latest}
    total = sum(size for size in backlog.values() if size > 0)
    if total <= limit:
        return dict(latest)
    out = {}
    for tp, end in latest.items():
        begin = start.get(tp, end)
        size = backlog[tp]
        if size <= 0:
            out[tp] = begin
            continue
        share = limit * (size / total)
        out[tp] = min(end, begin + (math.ceil(share) if share < 1 else math.floor(share)))
    return out


class KafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream.format("pybroker")``."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self.available_now: dict[TopicPartition, int] | None = None

    def _latest(self) -> tuple[dict[TopicPartition, int], dict[TopicPartition, int]]:
        with BlockingClient(self.options.bootstrap_servers, "pybroker-spark-planner", kafka=self.options.kafka) as client:
            tps = planning.topic_partitions(client, self.options)
            return planning.offset_bounds(client, tps, self.options.isolation_level)

    def initialOffset(self) -> Offsets:  # noqa: N802 (Spark's names)
        o = self.options
        with BlockingClient(o.bootstrap_servers, "pybroker-spark-planner", kafka=o.kafka) as client:
            tps = planning.topic_partitions(client, o)
            earliest, latest = planning.offset_bounds(client, tps, o.isolation_level)
            return to_json(planning.resolve(client, o.starting, "startingOffsets", tps, earliest, latest,
                                            o.isolation_level))

    def prepareForTriggerAvailableNow(self) -> None:  # noqa: N802
        self.available_now = self._latest()[1]

    def getDefaultReadLimit(self) -> ReadLimit:  # noqa: N802
        if self.options.max_offsets_per_trigger:
            return ReadMaxRows(self.options.max_offsets_per_trigger)
        return ReadAllAvailable()

    def latestOffset(self, start: Offsets, limit: ReadLimit) -> Offsets:  # noqa: N802
        begin = from_json(start)
        earliest, latest = self._latest()
        if self.available_now is not None:
            latest = {tp: min(offset, self.available_now.get(tp, earliest[tp])) for tp, offset in latest.items()}
        begin = {tp: begin.get(tp, earliest[tp]) for tp in latest}
        if isinstance(limit, ReadMaxRows):
            latest = rate_limit(begin, latest, limit.max_rows)
        # Never move a partition backwards (its log may have been truncated under us).
        return to_json({tp: max(offset, begin[tp]) for tp, offset in latest.items()})

    def reportLatestOffset(self) -> Offsets:  # noqa: N802
        return to_json(self._latest()[1])

    def partitions(self, start: Offsets, end: Offsets) -> Sequence[InputPartition]:
        first, last = from_json(start), from_json(end)
        tps = sorted(last)
        with BlockingClient(self.options.bootstrap_servers, "pybroker-spark-planner", kafka=self.options.kafka) as client:
            earliest, _ = planning.offset_bounds(client, tps, self.options.isolation_level)
        first = {tp: first.get(tp, earliest[tp]) for tp in tps}
        ranges = planning.offset_ranges(tps, first, last, earliest, self.options.fail_on_data_loss)
        return planning.split(ranges, self.options.min_partitions, self.options.max_records_per_partition)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, planning.OffsetRange)
        return read_range(self.options, partition)

    def commit(self, end: Offsets) -> None:
        """Nothing to do: Spark's checkpoint holds the offsets (no consumer group is used)."""
