"""A Spark Python data source backed by confluent-kafka: format ``benchconfluent``.

It takes the option names and schema of Spark's Kafka source/sink (like format ``pybroker``), so
the bench can run the same DataFrame job with either client:

* batch and streaming Arrow writers: every task sends its Arrow batches with
  ``ConfluentArrowProducer`` (one ``Producer.produce`` per record) and appends its summary as a
  JSON line to ``pybroker.writeSummaryPath`` when that option is set;
* a batch reader: one Spark partition per topic partition (``subscribe`` = comma-separated
  topics), from ``startingOffsets`` (earliest|latest) to ``endingOffsets`` (latest), as of
  planning time. It is the stand-in reader of ``record`` until format ``pybroker`` exists, and
  the ``--client confluent`` reader afterwards. A partition is read up to the end of the partition
  (EOF) at or after the planned end offset: Tansu 0.6 reports the last batch's base offset + 1 as
  the high watermark, so reading only to the planned end would drop records there.

The classes hold only their option dict; clients are made inside ``write()``/``read()``.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamArrowWriter,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.types import StructType

FORMAT = "benchconfluent"
KAFKA_SCHEMA = (
    "key binary, value binary, topic string, partition int, offset long, "
    "timestamp timestamp, timestampType int"
)
SUMMARY_PATH_OPTION = "pybroker.writesummarypath"  # option keys arrive lower-cased
READ_BATCH = 10_000
STALL_TIMEOUT_S = 30.0


@dataclass
class SummaryMessage(WriterCommitMessage):
    """A task's producer summary, shipped back to the commit runner."""

    summary: dict[str, Any] = field(default_factory=dict)


def append_summary(options: dict[str, str], summary: dict[str, Any]) -> None:
    """Append one JSON line to the summary file named by the options (if any)."""
    path = options.get(SUMMARY_PATH_OPTION)
    if path:
        line = json.dumps(summary) + "\n"
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.encode())  # one write per line: O_APPEND keeps lines whole
        finally:
            os.close(fd)


def _write_all(options: dict[str, str], iterator: Iterator[Any]) -> SummaryMessage:
    from bench.spark.producers import ConfluentArrowProducer

    producer = ConfluentArrowProducer(options)
    try:
        for batch in iterator:
            producer.write(batch)
        summary = producer.flush()
    finally:
        producer.close()
    append_summary(options, summary)
    return SummaryMessage(summary)


class ConfluentArrowWriter(DataSourceArrowWriter):
    """Batch write: each task produces its Arrow batches with confluent-kafka."""

    def __init__(self, options: dict[str, str]) -> None:
        self.options = options

    def write(self, iterator: Iterator[Any]) -> SummaryMessage:
        return _write_all(self.options, iterator)


class ConfluentStreamArrowWriter(DataSourceStreamArrowWriter):
    """Streaming write: the same per micro-batch task."""

    def __init__(self, options: dict[str, str]) -> None:
        self.options = options

    def write(self, iterator: Iterator[Any]) -> SummaryMessage:
        return _write_all(self.options, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        """Nothing to do: records are acked by the time ``write`` returns."""

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        """Nothing to undo (Kafka sinks are at-least-once)."""


@dataclass
class TopicPartitionRange(InputPartition):
    """Offsets [start, end) of one topic partition."""

    topic: str
    partition: int
    start: int
    end: int

    def __post_init__(self) -> None:
        super().__init__((self.topic, self.partition, self.start, self.end))


def _consumer_conf(options: dict[str, str]) -> dict[str, Any]:
    from bench.spark.producers import kafka_properties

    conf: dict[str, Any] = {
        "group.id": "bench-reader",
        "enable.auto.commit": False,
        "enable.partition.eof": True,
    }
    conf.update(kafka_properties(options))
    return conf


class ConfluentReader(DataSourceReader):
    """Batch read of ``subscribe`` topics between the planning-time offsets."""

    def __init__(self, options: dict[str, str], schema: StructType) -> None:
        self.options = options
        self.schema = schema

    def partitions(self) -> list[TopicPartitionRange]:
        from confluent_kafka import Consumer, TopicPartition

        topics = [t.strip() for t in self.options.get("subscribe", "").split(",") if t.strip()]
        if not topics:
            raise ValueError(f"format {FORMAT}: set the 'subscribe' option")
        starting = self.options.get("startingoffsets", "earliest")
        ending = self.options.get("endingoffsets", "latest")
        if starting not in ("earliest", "latest") or ending != "latest":
            raise ValueError(
                f"format {FORMAT}: startingOffsets earliest|latest, endingOffsets latest"
            )
        consumer = Consumer(_consumer_conf(self.options))
        try:
            meta = consumer.list_topics(timeout=30)
            out = []
            for topic in topics:
                if topic not in meta.topics or meta.topics[topic].error is not None:
                    raise ValueError(f"topic {topic!r} not found")
                for p in sorted(meta.topics[topic].partitions):
                    low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)
                    start = low if starting == "earliest" else high
                    if high > start:
                        out.append(TopicPartitionRange(topic, p, start, high))
            return out or [TopicPartitionRange("", -1, 0, 0)]
        finally:
            consumer.close()

    def read(self, partition: TopicPartitionRange) -> Iterator[Any]:
        import pyarrow as pa
        from confluent_kafka import Consumer, KafkaError, TopicPartition
        from pyspark.sql.pandas.types import to_arrow_schema

        if partition.partition < 0 or partition.end <= partition.start:
            return
        schema = to_arrow_schema(self.schema, timezone="UTC")
        consumer = Consumer(_consumer_conf(self.options))
        try:
            consumer.assign([TopicPartition(partition.topic, partition.partition, partition.start)])
            cols: dict[str, list[Any]] = {n: [] for n in schema.names}
            done = False
            last_progress = time.monotonic()
            while not done:
                for m in consumer.consume(READ_BATCH, timeout=1.0):
                    if m.error():
                        if m.error().code() != KafkaError._PARTITION_EOF:
                            raise RuntimeError(str(m.error()))
                        done = done or m.offset() >= partition.end
                        continue
                    ts_type, ts = m.timestamp()
                    cols["key"].append(m.key())
                    cols["value"].append(m.value())
                    cols["topic"].append(m.topic())
                    cols["partition"].append(m.partition())
                    cols["offset"].append(m.offset())
                    cols["timestamp"].append(ts * 1000)
                    cols["timestampType"].append(0 if ts_type == 1 else 1)
                    last_progress = time.monotonic()
                if cols["value"] and (len(cols["value"]) >= READ_BATCH or done):
                    yield pa.RecordBatch.from_arrays(
                        [pa.array(cols[n], type=schema.field(n).type) for n in schema.names],
                        schema=schema,
                    )
                    cols = {n: [] for n in schema.names}
                if not done and time.monotonic() - last_progress > STALL_TIMEOUT_S:
                    raise RuntimeError(
                        f"{partition.topic}-{partition.partition}: no records for "
                        f"{STALL_TIMEOUT_S:.0f} s before offset {partition.end}"
                    )
        finally:
            consumer.close()


class ConfluentKafkaSource(DataSource):
    """Format ``benchconfluent``: Spark's Kafka options and schema over confluent-kafka."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> str:
        return KAFKA_SCHEMA

    def _opts(self) -> dict[str, str]:
        return {k.lower(): str(v) for k, v in self.options.items()}

    def writer(self, schema: StructType, overwrite: bool) -> ConfluentArrowWriter:
        return ConfluentArrowWriter(self._opts())

    def streamWriter(self, schema: StructType, overwrite: bool) -> ConfluentStreamArrowWriter:  # noqa: N802
        return ConfluentStreamArrowWriter(self._opts())

    def reader(self, schema: StructType) -> ConfluentReader:
        return ConfluentReader(self._opts(), schema)
