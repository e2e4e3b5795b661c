"""The producers used inside Spark tasks: pybroker's ``ArrowProducer`` or confluent-kafka.

Both have the interface of ``pybroker.spark.producer.ArrowProducer``: built from the writer's
option dict (``kafka.bootstrap.servers``, ``topic``, ``kafka.*`` producer properties),
``write(batch)`` sends a ``pyarrow.RecordBatch`` (columns ``value`` and optional ``key``,
``topic``, ``partition``) asynchronously, ``flush()`` waits for every ack and returns the summary
``{"records", "bytes", "partitions", "seconds"}``, ``close()`` releases the client.

``ConfluentArrowProducer`` is the ``--client confluent`` variant: one ``Producer.produce`` call
per record (librdkafka batches them), delivery reports only for failures
(``delivery.report.only.error``), so ``partitions`` in its summary is empty. The record
timestamp is CreateTime = the time of ``produce()``, as librdkafka sets it.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any, Protocol

CLIENTS = ("pybroker", "confluent")

# librdkafka's defaults differ from the Java client's; these keep the comparison about the
# client's per-record cost, not its queue limits.
CONFLUENT_DEFAULTS = {
    "queue.buffering.max.messages": 1_000_000,
    "queue.buffering.max.kbytes": 1_048_576,
    "delivery.report.only.error": True,
}


class ArrowProducerLike(Protocol):
    """What a task needs from a producer."""

    def write(self, batch: Any) -> None: ...

    def flush(self) -> dict[str, Any]: ...

    def close(self) -> None: ...


def kafka_properties(options: Mapping[str, str]) -> dict[str, str]:
    """The ``kafka.``-prefixed options without the prefix (Spark's Kafka sink convention)."""
    return {
        k[len("kafka.") :]: str(v) for k, v in options.items() if k.lower().startswith("kafka.")
    }


class ConfluentArrowProducer:
    """Arrow batches -> confluent-kafka ``Producer.produce`` per record."""

    def __init__(self, options: Mapping[str, str]) -> None:
        from confluent_kafka import Producer

        opts = {k.lower(): v for k, v in options.items()}
        self.topic = opts.get("topic")
        self.errors: list[str] = []
        conf: dict[str, Any] = {**CONFLUENT_DEFAULTS, **kafka_properties(opts)}
        conf["on_delivery"] = self._on_delivery
        conf["error_cb"] = self._on_error
        self._producer = Producer(conf)
        self.records = 0
        self.bytes = 0
        self._t0 = time.perf_counter()

    def _on_delivery(self, err: Any, msg: Any) -> None:
        if err is not None and len(self.errors) < 20:
            self.errors.append(f"{msg.topic()}-{msg.partition()}: {err}")

    def _on_error(self, err: Any) -> None:
        if getattr(err, "fatal", lambda: False)() and len(self.errors) < 20:
            self.errors.append(str(err))

    def write(self, batch: Any) -> None:
        """Produce every row of ``batch``."""
        names = batch.schema.names
        values = batch.column(names.index("value")).to_pylist()
        keys = batch.column(names.index("key")).to_pylist() if "key" in names else None
        topics = batch.column(names.index("topic")).to_pylist() if "topic" in names else None
        parts = batch.column(names.index("partition")).to_pylist() if "partition" in names else None
        produce = self._producer.produce
        poll = self._producer.poll
        topic = self.topic
        for i, value in enumerate(values):
            kwargs: dict[str, Any] = {}
            if keys is not None and keys[i] is not None:
                kwargs["key"] = keys[i]
            if parts is not None and parts[i] is not None:
                kwargs["partition"] = parts[i]
            t = topic if topic else topics[i] if topics is not None else None
            if t is None:
                raise ValueError("no topic: set the 'topic' option or give a topic column")
            while True:
                try:
                    produce(t, value, **kwargs)
                    break
                except BufferError:  # local queue full: serve delivery reports until there is room
                    poll(0.05)
            self.bytes += len(value) if value is not None else 0
        self.records += len(values)
        poll(0)

    def flush(self) -> dict[str, Any]:
        """Wait for every delivery; raise if any failed."""
        left = self._producer.flush(120)
        if left:
            raise RuntimeError(f"{left} records not delivered after 120 s")
        if self.errors:
            raise RuntimeError("delivery failed: " + "; ".join(self.errors))
        return {
            "records": self.records,
            "bytes": self.bytes,
            "partitions": {},
            "seconds": time.perf_counter() - self._t0,
        }

    def close(self) -> None:
        """Nothing to release beyond the Producer object itself."""
        self._producer = None


def make_producer(client: str, options: Mapping[str, str]) -> ArrowProducerLike:
    """The in-task producer of ``client`` (``pybroker`` or ``confluent``)."""
    if client == "confluent":
        return ConfluentArrowProducer(options)
    if client == "pybroker":
        from pybroker.spark.producer import ArrowProducer

        return ArrowProducer(dict(options))
    raise ValueError(f"unknown client {client!r} (one of {', '.join(CLIENTS)})")


def pybroker_spark_available() -> str | None:
    """None if ``pybroker.spark`` (data source + ArrowProducer) imports, else the reason."""
    try:
        import pybroker.spark  # noqa: F401
        from pybroker.spark.producer import ArrowProducer  # noqa: F401
    except Exception as exc:  # ImportError or anything the half-written module raises
        return f"{type(exc).__name__}: {exc}"
    return None
