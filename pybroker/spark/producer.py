"""Arrow record batches to Kafka topics, for Spark tasks: the synchronous face of the producer.

Owns turning one ``pyarrow.RecordBatch`` in the Spark Kafka sink's shape (``value``, optional
``key``, ``topic``, ``partition``, ``headers``) into produced records: the topic of each row (the
``topic`` option wins over the column, as in Spark), its partition (the ``partition`` column, else
the key's partition, else a sticky partition that moves on with every Arrow batch), and the
record batches themselves, built in Rust by ``_native.encode_partitioned_batches`` in one call per
topic and Arrow batch. The project's asyncio ``Producer`` sends them, pipelined, on an event loop
owned by this object (a ``BlockingClient``) and driven from the calling (task) thread.

Partitions follow KIP-253 (docs/ordered-partition-changes.md): a key's partition is linear
hashing over the topic's (initial, undeleted) partition counts, which is Kafka's murmur2 % N
until the topic's partition count first changes; keyless rows and keys only go to undeleted
partitions, and a ``partition`` column naming a partition marked for deletion is refused. The
layout is read once per writer (a Spark task) and its count goes with every request, so a
partition change made while a task writes fails that task with INVALID_PARTITION_METADATA and
Spark's retry of the task partitions with the new layout (at least once, as Spark's Kafka sink
always is).

Kafka producer properties come from the ``kafka.``-prefixed options: ``acks``,
``compression.type``, ``batch.size``, ``max.request.size``,
``max.in.flight.requests.per.connection``, ``request.timeout.ms``, ``client.id``. ``linger.ms``
is accepted and has nothing to do: every record of an Arrow batch is in hand at once.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from pybroker import _native
from pybroker.client.producer import Producer, ProducerConfig
from pybroker.client.properties import int_property
from pybroker.client.topic_layout import TopicLayout
from pybroker.spark.arrow import binary_buffers, headers_buffers, int32_buffers
from pybroker.spark.blocking import BlockingClient
from pybroker.spark.options import sink_options
from pybroker.types import TopicPartition

COMPRESSION_CODES = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
DEFAULT_BATCH_SIZE = 16384  # Kafka's batch.size


def _batch_size(props: dict[str, str]) -> int:
    return max(int_property(props, "batch.size", DEFAULT_BATCH_SIZE, 0), 1)  # 0 disables batching: one record per batch


def _compression(props: dict[str, str]) -> int:
    name = props.get("compression.type", "none").strip().lower()
    if name not in COMPRESSION_CODES:
        raise ValueError(f"Invalid value {name} for configuration compression.type: "
                         "String must be one of: none, gzip, snappy, lz4, zstd")
    return COMPRESSION_CODES[name]


class ArrowProducer:
    """``ArrowProducer(options)``; ``write(batch)`` as often as needed; ``flush()``; ``close()``.

    ``options`` are the data source's options (``kafka.bootstrap.servers``, ``topic``,
    ``kafka.*``). ``write`` returns once the batch's requests are on their way; ``flush`` waits
    for every acknowledgement and returns the summary; both raise on a failed partition.
    """

    def __init__(self, options: Mapping[str, str]) -> None:
        parsed = sink_options(options)
        self.default_topic = parsed.topic
        self.config = ProducerConfig.from_properties(parsed.kafka)
        self.batch_size = _batch_size(parsed.kafka)
        self.compression = _compression(parsed.kafka)
        self.records = 0
        self.started = time.monotonic()
        self._client = BlockingClient(parsed.bootstrap_servers, self.config.client_id, self.config.request_timeout_ms / 1000,
                                      kafka=parsed.kafka)
        self._producer = Producer(self._client.admin, self.config)
        self._sticky: dict[str, int] = {}

    def write(self, batch: pa.RecordBatch) -> None:
        """Produce every row of ``batch``."""
        if batch.num_rows:
            self._client.run(self._write(batch))

    def flush(self) -> dict[str, Any]:
        """Wait for every acknowledgement; the summary of what was written."""
        written = self._client.run(self._producer.flush())
        return {
            "records": self.records,
            "bytes": self._producer.bytes_sent,
            "partitions": {f"{tp.topic}-{tp.partition}": [w.first_offset, w.last_offset] for tp, w in sorted(written.items())},
            "seconds": round(time.monotonic() - self.started, 6),
        }

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> ArrowProducer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def _write(self, batch: pa.RecordBatch) -> None:
        producer = self._producer
        names = batch.schema.names
        if "value" not in names:
            raise ValueError("Required attribute 'value' not found")
        if self.default_topic is not None or "topic" not in names:
            if self.default_topic is None:
                raise ValueError("topic option required when no 'topic' attribute is present. "
                                 "Use the topic option for setting a topic.")
            await self._write_topic(producer, self.default_topic, batch)
            return
        topics = batch.column("topic")
        if topics.null_count:
            raise ValueError("null topic present in the data. Use the topic option for setting a topic.")
        distinct = pc.unique(topics).to_pylist()
        if len(distinct) == 1:
            await self._write_topic(producer, distinct[0], batch)
            return
        for topic in distinct:
            await self._write_topic(producer, topic, batch.filter(pc.equal(topics, topic)))

    async def _write_topic(self, producer: Producer, topic: str, batch: pa.RecordBatch) -> None:
        layout = await producer.layout(topic)
        writable = layout.undeleted_partition_count
        sticky = (self._sticky.get(topic, -1) + 1) % writable
        self._sticky[topic] = sticky
        names = batch.schema.names
        if "partition" in names:
            _refuse_marked_partitions(layout, batch.column("partition"))
        encoded = _native.encode_partitioned_batches(
            binary_buffers(batch.column("value")),
            binary_buffers(batch.column("key")) if "key" in names else None,
            headers_buffers(batch.column("headers")) if "headers" in names else None,
            int32_buffers(batch.column("partition")) if "partition" in names else None,
            writable,
            sticky,
            int(time.time() * 1000),
            self.batch_size,
            self.compression,
            initial_partitions=layout.initial_partition_count,
        )
        for partition, batches, _count in encoded:
            await producer.send(TopicPartition(topic, partition), batches)
        self.records += batch.num_rows


def _refuse_marked_partitions(layout: TopicLayout, partitions: pa.Array) -> None:
    """A ``partition`` column may not name a partition marked for deletion (KIP-253): it only
    drains from now on. One vectorised max per Arrow batch."""
    highest = pc.max(partitions).as_py()
    if highest is not None and layout.undeleted_partition_count <= highest < layout.partition_count:
        raise ValueError(f"partition {highest} of topic {layout.name} is marked for deletion "
                         f"(partitions {layout.undeleted_partition_count}..{layout.partition_count - 1}); "
                         "no records may be written to it")
