"""Workload specs (OpenMessaging-Benchmark-like) and the built-in presets.

A workload says what load to put on a broker, not which broker: topics and partitions, message
size, key distribution, producers (Spark tasks), consumers (end-to-end latency consumers), a target
rate or max rate, how long, the producer options, and whether to measure DeleteRecords /
retention-sweep latencies. ``mode`` says how Spark generates the load:

* ``batch``   ``spark.range(...)`` with JVM-generated values, written by ``df.write.format(...)``
              (Arrow hand-off to the Python writer in each task); max rate; ``records`` bound.
* ``tasks``   ``producers`` Spark tasks generate Arrow batches in Python and send them with the
              in-task producer, paced to ``rate`` (0 = max rate); ``records`` or ``duration_s``.
* ``stream``  Spark's ``rate`` source at ``rate`` rows/s -> ``writeStream.format(...)``
              (micro-batches every ``trigger_s``); ``duration_s`` bound.

A workload can be a preset name, a JSON file with these field names, and CLI overrides.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.spark.keys import KeyDist

MODES = ("batch", "tasks", "stream")
# The same explicit settings for both in-task clients (OpenMessaging Benchmark's Kafka driver also
# uses 1 MiB batches): the Java client's batch.size default (16 KiB, which pybroker's ArrowProducer
# follows) and librdkafka's (1,000,000 B) differ, and 16 KiB batches cost the broker ~4x the CPU.
DEFAULT_PRODUCER_OPTIONS = {
    "kafka.acks": "all",
    "kafka.linger.ms": "5",
    "kafka.batch.size": "1048576",
}


@dataclass
class Workload:
    """One load shape. ``rate`` is records/s over all producers; 0 means as fast as possible."""

    name: str
    description: str = ""
    mode: str = "batch"
    topics: int = 1
    partitions: int = 2
    message_size: int = 100
    keys: str = "none"
    producers: int = 2
    consumers: int = 0
    rate: float = 0.0
    records: int | None = None
    duration_s: float | None = None
    trigger_s: float = 1.0
    producer_options: dict[str, str] = field(default_factory=lambda: dict(DEFAULT_PRODUCER_OPTIONS))
    warmup_records: int = 20_000
    delete_records_interval_s: float | None = None  # periodic DeleteRecords while producing
    delete_records_keep: int = 10_000  # ... up to high watermark - keep, per partition
    retention_sweep: bool = False  # after producing: one DeleteRecords(-1) over every partition

    def validate(self) -> Workload:
        """Raise ValueError for an inconsistent spec; return self."""
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, not {self.mode!r}")
        KeyDist.parse(self.keys)
        for name in ("topics", "partitions", "message_size", "producers"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1")
        if self.consumers < 0 or self.rate < 0:
            raise ValueError("consumers and rate must be >= 0")
        if self.mode == "batch":
            if not self.records:
                raise ValueError("batch mode needs records")
            if self.rate:
                raise ValueError(
                    "batch mode is max rate: use mode tasks or stream for a target rate"
                )
        if self.mode == "stream" and (not self.rate or not self.duration_s):
            raise ValueError("stream mode needs rate and duration_s")
        if self.mode == "tasks" and not (self.records or self.duration_s):
            raise ValueError("tasks mode needs records or duration_s")
        if self.mode == "tasks" and not self.rate and not self.records:
            raise ValueError("tasks mode at max rate needs records")
        return self

    @property
    def key_dist(self) -> KeyDist:
        return KeyDist.parse(self.keys)

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def summary(self) -> str:
        """One line describing the load."""
        bound = (f"{self.records:,} records" if self.records else f"{self.duration_s:g} s") + (
            f" at {self.rate:,.0f} rec/s" if self.rate else " at max rate"
        )
        return (
            f"{self.mode}: {self.topics} topic(s) x {self.partitions} partitions, "
            f"{self.message_size} B values, keys {self.keys}, {self.producers} producer task(s), "
            f"{self.consumers} latency consumer(s), {bound}"
        )


PRESETS: dict[str, Workload] = {
    w.name: w
    for w in [
        Workload(
            "batch-100b",
            "Spark batch write, 100 B values, max rate (the >= 500k rec/s target on local[2])",
            records=2_000_000,
        ),
        Workload(
            "batch-1k",
            "Spark batch write, 1 KiB values, max rate",
            message_size=1024,
            records=500_000,
        ),
        Workload(
            "batch-64k",
            "Spark batch write, 64 KiB values, max rate (512 MiB)",
            message_size=65536,
            records=8192,
            warmup_records=200,
        ),
        Workload(
            "tasks-max-100b",
            "Python-generated batches in tasks, 100 B, max rate (no JVM hand-off)",
            mode="tasks",
            records=2_000_000,
        ),
        Workload(
            "rate-100b",
            "100 B at 50k rec/s for 30 s, 1000 uniform keys, 4 partitions, e2e latency",
            mode="tasks",
            partitions=4,
            keys="uniform:1000",
            rate=50_000,
            duration_s=30,
            consumers=1,
        ),
        Workload(
            "rate-1k",
            "1 KiB at 20k rec/s for 30 s, zipf keys, 4 partitions, e2e latency",
            mode="tasks",
            partitions=4,
            message_size=1024,
            keys="zipf:10000",
            rate=20_000,
            duration_s=30,
            consumers=1,
        ),
        Workload(
            "rate-64k",
            "64 KiB at 500 rec/s (~33 MB/s) for 30 s, e2e latency",
            mode="tasks",
            message_size=65536,
            rate=500,
            duration_s=30,
            consumers=1,
            warmup_records=200,
        ),
        Workload(
            "stream-100b",
            "Spark rate source -> writeStream, 100 B at 20k rec/s for 30 s, e2e latency",
            mode="stream",
            rate=20_000,
            duration_s=30,
            consumers=1,
        ),
        Workload(
            "delete-records",
            "100 B at 20k rec/s for 20 s on 4 partitions; DeleteRecords every 0.5 s; retention sweep",
            mode="tasks",
            partitions=4,
            keys="roundrobin:64",
            rate=20_000,
            duration_s=20,
            consumers=1,
            delete_records_interval_s=0.5,
            retention_sweep=True,
        ),
    ]
}


def load(name_or_file: str) -> Workload:
    """A preset by name, or a workload from a JSON file (fields as in ``Workload``)."""
    if name_or_file in PRESETS:
        return dataclasses.replace(PRESETS[name_or_file])
    path = Path(name_or_file)
    if path.is_file():
        data = json.loads(path.read_text())
        data.setdefault("name", path.stem)
        return Workload(**data)
    raise ValueError(f"no preset or file {name_or_file!r}; presets: {', '.join(PRESETS)}")


def with_overrides(wl: Workload, overrides: dict[str, Any]) -> Workload:
    """``wl`` with the non-None ``overrides`` applied (producer options are merged)."""
    changes = {k: v for k, v in overrides.items() if v is not None and k != "producer_options"}
    out = dataclasses.replace(wl, **changes)
    extra = overrides.get("producer_options") or {}
    out.producer_options = {**wl.producer_options, **extra}
    if changes.get("duration_s") and "records" not in changes and wl.mode != "batch":
        out.records = None  # a duration given on the command line bounds the run by time
    if changes.get("records") and "duration_s" not in changes:
        out.duration_s = None if out.mode == "tasks" else out.duration_s
    return out.validate()
