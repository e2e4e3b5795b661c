"""Arrow record batches to Kafka topics, for Spark tasks: the synchronous face of the producer.

Owns turning one ``pyarrow.RecordBatch`` in the Spark Kafka sink's shape (``value``, optional
``key``, ``topic``, ``partition``, ``headers``) into produced records: the topic of each row (the
``topic`` option wins over the column, as in Spark), its partition (the ``partition`` column, else
Kafka's murmur2 of the key, else a sticky partition that moves on with every Arrow batch), and the
record batches themselves, built in Rust by ``_native.encode_partitioned_batches`` in one call per
topic and Arrow batch. The project's asyncio ``Producer`` sends them, pipelined, on an event loop
owned by this object (a ``BlockingClient``) and driven from the calling (task) thread.

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
        self._client = BlockingClient(parsed.bootstrap_servers, self.config.client_id, self.config.request_timeout_ms / 1000)
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
        partitions = await producer.partitions_for(topic)
        sticky = (self._sticky.get(topic, -1) + 1) % partitions
        self._sticky[topic] = sticky
        names = batch.schema.names
        encoded = _native.encode_partitioned_batches(
            binary_buffers(batch.column("value")),
            binary_buffers(batch.column("key")) if "key" in names else None,
            headers_buffers(batch.column("headers")) if "headers" in names else None,
            int32_buffers(batch.column("partition")) if "partition" in names else None,
            partitions,
            sticky,
            int(time.time() * 1000),
            self.batch_size,
            self.compression,
        )
        for partition, batches, _count in encoded:
            await producer.send(TopicPartition(topic, partition), batches)
        self.records += batch.num_rows
