"""Which offsets a Spark read covers: topic partitions, offset bounds, and their split into tasks.

Owns, on the planning side: the topic partitions a ``subscribe`` / ``subscribePattern`` /
``assign`` names (a pattern matches whole names and skips internal topics, as Kafka's consumer
does), their earliest and latest offsets (ListOffsets; at ``kafka.isolation.level=read_committed``
the latest is the last stable offset, so a range never waits for records of a transaction that
is still open), the start and end offset of each from
``startingOffsets`` / ``endingOffsets`` / ``startingOffsetsByTimestamp`` / ``startingTimestamp``
with Spark's rules (``-2`` earliest, ``-1`` latest, every partition named in a JSON spec), data
loss checks (``failOnDataLoss``), and cutting the ranges into input partitions
(``maxRecordsPerPartition``, ``minPartitions``) the way Spark's Kafka source does.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from pyspark.sql.datasource import InputPartition

from pybroker.client.admin import AdminError
from pybroker.common.errors import ErrorCode
from pybroker.spark.blocking import BlockingClient
from pybroker.spark.options import EARLIEST, LATEST, OffsetSpec, SourceOptions
from pybroker.types import TopicPartition

INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})


@dataclass(frozen=True)
class OffsetRange(InputPartition):
    """One Spark input partition: offsets ``[start, end)`` of one topic partition."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return self.end - self.start


class DataLossError(RuntimeError):
    """Records the query asked for are gone from the topic (``failOnDataLoss=true``)."""


def data_loss_message(tp: TopicPartition, wanted: int, earliest: int) -> str:
    return (
        f"Some data may have been lost because they are not available in Kafka any more: "
        f"{tp.topic}-{tp.partition} starts at offset {earliest}, but offset {wanted} was requested. "
        "If you want your query to continue running despite data loss, set the source option "
        "\"failOnDataLoss\" to \"false\"."
    )


def topic_partitions(client: BlockingClient, options: SourceOptions) -> list[TopicPartition]:
    """The partitions the query reads, in topic then partition order."""
    if options.assign is not None:
        return sorted(set(options.assign))
    if options.subscribe is not None:
        names = list(options.subscribe)
    else:
        pattern = re.compile(options.subscribe_pattern or "")
        names = [t for t in client.run(client.admin.list_topics()) if pattern.fullmatch(t) and t not in INTERNAL_TOPICS]
    out: list[TopicPartition] = []
    for name in names:
        try:
            leaders = client.run(client.admin.partition_leaders([name]))
        except AdminError as e:
            if e.error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                continue  # a subscribed topic that does not exist (yet) has nothing to read
            raise
        out.extend(TopicPartition(name, p) for p in leaders[name])
    return sorted(out)


def offset_bounds(
    client: BlockingClient, tps: list[TopicPartition], isolation_level: int = 0,
) -> tuple[dict[TopicPartition, int], dict[TopicPartition, int]]:
    """(earliest, latest) offset of each partition; ``isolation_level`` 1 (read_committed) makes
    the latest the last stable offset."""
    if not tps:
        return {}, {}
    earliest = client.run(client.admin.list_offsets(tps, "earliest", isolation_level))
    latest = client.run(client.admin.list_offsets(tps, "latest", isolation_level))
    return {tp: o.offset for tp, o in earliest.items()}, {tp: o.offset for tp, o in latest.items()}


def resolve(
    client: BlockingClient, spec: OffsetSpec, name: str, tps: list[TopicPartition],
    earliest: dict[TopicPartition, int], latest: dict[TopicPartition, int], isolation_level: int = 0,
) -> dict[TopicPartition, int]:
    """The concrete offset ``spec`` (option ``name``) means for each of ``tps``."""
    if spec.kind == "earliest":
        return dict(earliest)
    if spec.kind == "latest":
        return dict(latest)
    if spec.kind == "timestamps":
        return _by_timestamp(client, spec, tps, isolation_level)
    missing = [tp for tp in tps if tp not in spec.by_partition]
    if missing:
        raise ValueError(
            f"If {name} contains specific offsets, you must specify all TopicPartitions. "
            f"Use -1 for latest, -2 for earliest. Missing: {', '.join(f'{t.topic}-{t.partition}' for t in missing)}"
        )
    out = {}
    for tp in tps:
        offset = spec.by_partition[tp]
        out[tp] = earliest[tp] if offset == EARLIEST else latest[tp] if offset == LATEST else offset
    return out


def _by_timestamp(
    client: BlockingClient, spec: OffsetSpec, tps: list[TopicPartition], isolation_level: int,
) -> dict[TopicPartition, int]:
    out = {}
    for tp in tps:
        timestamp = spec.global_timestamp if spec.global_timestamp is not None else spec.by_partition.get(tp)
        if timestamp is None:
            raise ValueError(f"startingOffsetsByTimestamp must name every TopicPartition; missing {tp.topic}-{tp.partition}")
        listed = client.run(client.admin.list_offsets([tp], timestamp, isolation_level))[tp]
        if listed.offset < 0:
            raise ValueError(f"No offset matched from request of topic-partition {tp.topic}-{tp.partition} and timestamp {timestamp}.")
        out[tp] = listed.offset
    return out


def offset_ranges(
    tps: list[TopicPartition], start: dict[TopicPartition, int], end: dict[TopicPartition, int],
    earliest: dict[TopicPartition, int], fail_on_data_loss: bool,
) -> list[OffsetRange]:
    """One range per partition with records to read; checks for lost data and inverted ranges."""
    ranges = []
    for tp in tps:
        first, last = start[tp], end[tp]
        if first < earliest[tp]:
            if fail_on_data_loss:
                raise DataLossError(data_loss_message(tp, first, earliest[tp]))
            first = earliest[tp]
        if first > last:
            if fail_on_data_loss:
                raise ValueError(f"{tp.topic}-{tp.partition}'s offset was changed from {first} to {last}: "
                                 "the start offset is after the end offset")
            continue
        if first < last:
            ranges.append(OffsetRange(tp.topic, tp.partition, first, last))
    return ranges


def split(ranges: list[OffsetRange], min_partitions: int | None, max_records: int | None) -> list[OffsetRange]:
    """Cut ranges so that none holds more than ``max_records`` offsets and, if there are fewer
    than ``min_partitions`` ranges, larger ones are split in proportion to their size."""
    if max_records:
        ranges = [piece for r in ranges for piece in _pieces(r, math.ceil(r.size / max_records))]
    if min_partitions and len(ranges) < min_partitions:
        total = sum(r.size for r in ranges)
        if total:
            ranges = [piece for r in ranges for piece in _pieces(r, max(1, math.ceil(r.size / total * min_partitions)))]
    return ranges


def _pieces(r: OffsetRange, parts: int) -> list[OffsetRange]:
    parts = max(1, min(parts, r.size))
    bounds = [r.start + r.size * i // parts for i in range(parts + 1)]
    return [OffsetRange(r.topic, r.partition, a, b) for a, b in zip(bounds, bounds[1:], strict=False) if b > a]
