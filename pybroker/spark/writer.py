"""Writing Spark DataFrames to topics: the batch and streaming Arrow writers.

Owns the Spark side of a write: each task's ``write`` feeds its Arrow batches to an
``ArrowProducer`` and returns a ``KafkaCommitMessage`` (records, bytes, first and last offset per
partition, seconds); ``commit`` / ``abort`` run in a Python worker the JVM starts for them (not in
the driver's Python), so they log the totals and, when the ``pybroker.writeSummaryPath`` option
names a file, append each task's summary there as one JSON line for the driver to read.

Delivery is at least once, as with Spark's Kafka sink: a task that fails after some records were
acknowledged is retried from its start.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)

from pybroker.spark.options import SinkOptions
from pybroker.spark.producer import ArrowProducer

log = logging.getLogger(__name__)


@dataclass
class KafkaCommitMessage(WriterCommitMessage):
    """What one task wrote: ``partitions`` maps ``"topic-partition"`` to ``[first, last]`` offset."""

    task: int = -1
    records: int = 0
    bytes: int = 0
    partitions: dict[str, list[int]] = field(default_factory=dict)
    seconds: float = 0.0


def _write_task(options: dict[str, str], batches: Iterator[pa.RecordBatch]) -> KafkaCommitMessage:
    from pyspark import TaskContext

    context = TaskContext.get()
    with ArrowProducer(options) as producer:
        for batch in batches:
            producer.write(batch)
        summary = producer.flush()
    return KafkaCommitMessage(task=context.partitionId() if context else -1, **summary)


def _record(sink: SinkOptions, messages: list[WriterCommitMessage | None], outcome: str, batch_id: int | None = None) -> None:
    done = [m for m in messages if isinstance(m, KafkaCommitMessage)]
    records = sum(m.records for m in done)
    where = f" (micro-batch {batch_id})" if batch_id is not None else ""
    log.info("%s write%s: %d records from %d of %d tasks", outcome, where, records, len(done), len(messages))
    if sink.summary_path:
        with open(sink.summary_path, "a", encoding="utf-8") as out:
            for m in done:
                line = {"outcome": outcome, **asdict(m)}
                if batch_id is not None:
                    line["batch_id"] = batch_id
                out.write(json.dumps(line) + "\n")


class KafkaBatchWriter(DataSourceArrowWriter):
    """``df.write.format("pybroker")``: every task produces its rows."""

    def __init__(self, options: dict[str, str], sink: SinkOptions) -> None:
        self.options, self.sink = options, sink

    def write(self, iterator: Iterator[pa.RecordBatch]) -> KafkaCommitMessage:
        return _write_task(self.options, iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        _record(self.sink, messages, "committed")

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        _record(self.sink, messages, "aborted")


class KafkaStreamWriter(DataSourceStreamArrowWriter):
    """``df.writeStream.format("pybroker")``: every micro-batch's tasks produce their rows."""

    def __init__(self, options: dict[str, str], sink: SinkOptions) -> None:
        self.options, self.sink = options, sink

    def write(self, iterator: Iterator[pa.RecordBatch]) -> KafkaCommitMessage:
        return _write_task(self.options, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803 (Spark's name)
        _record(self.sink, messages, "committed", batchId)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        _record(self.sink, messages, "aborted", batchId)
