"""The load itself: what Spark generates and how it is handed to the broker.

* ``batch_dataframe`` / ``stream_dataframe``: values and keys generated in the JVM
  (``spark.range`` or the ``rate`` source + SQL), written with ``df.write`` / ``writeStream``.
  Value ``i`` is the id left-padded with ``x`` to the message size, so values are distinct.
* ``BatchGenerator`` + ``run_producer_task``: values and keys generated in Python inside each
  Spark task as Arrow batches (numpy fills the value buffer: a 12-digit sequence number, then a
  filler) and sent with the in-task producer, paced to a target rate or as fast as possible.
  ``run_producer_tasks`` runs one such task per producer and returns their summaries.
"""

from __future__ import annotations

import time
from typing import Any

from bench.spark.keys import KeyDist, KeyTable

MAX_BATCH_RECORDS = 10_000
MAX_BATCH_BYTES = 4 * 1024 * 1024
PACE_TICK_S = 0.005  # paced tasks send a batch about every 5 ms
FILLER = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
SEQ_DIGITS = 12


# --------------------------------------------------------------------------- JVM generation


def value_sql(size: int, id_col: str = "id") -> str:
    """SQL for a distinct ``size``-byte binary value of row ``id_col``."""
    return f"cast(lpad(cast({id_col} as string), {size}, 'x') as binary)"


def topic_sql(topics: list[str], id_col: str = "id") -> str:
    """SQL spreading rows over ``topics`` round robin."""
    quoted = ", ".join("'" + t.replace("'", "''") + "'" for t in topics)
    return f"element_at(array({quoted}), cast({id_col} % {len(topics)} as int) + 1)"


def select_exprs(size: int, keys: KeyDist, topics: list[str], id_col: str) -> list[str]:
    """value, key (unless null keys) and topic (when several) columns."""
    exprs = [f"{value_sql(size, id_col)} as value"]
    if keys.kind != "none":
        exprs.append(f"{keys.key_sql(id_col)} as key")
    if len(topics) > 1:
        exprs.append(f"{topic_sql(topics, id_col)} as topic")
    return exprs


def batch_dataframe(
    spark: Any, records: int, partitions: int, size: int, keys: KeyDist, topics: list[str]
) -> Any:
    """``records`` rows in ``partitions`` Spark partitions, generated in the JVM."""
    df = spark.range(0, records, 1, numPartitions=partitions)
    return df.selectExpr(*select_exprs(size, keys, topics, "id"))


def stream_dataframe(
    spark: Any, rate: float, partitions: int, size: int, keys: KeyDist, topics: list[str]
) -> Any:
    """Spark's ``rate`` source at ``rate`` rows/s, mapped to value/key/topic."""
    df = (
        spark.readStream.format("rate")
        .option("rowsPerSecond", str(int(rate)))
        .option("numPartitions", str(partitions))
        .load()
    )
    return df.selectExpr(*select_exprs(size, keys, topics, "value"))


def sink_options(
    bootstrap: str, topics: list[str], producer_options: dict[str, str]
) -> dict[str, str]:
    """Writer options: bootstrap, the topic (when one), the producer properties."""
    opts = {"kafka.bootstrap.servers": bootstrap, **producer_options}
    if len(topics) == 1:
        opts["topic"] = topics[0]
    return opts


# --------------------------------------------------------------------------- Python generation


class BatchGenerator:
    """Arrow batches of ``size``-byte values (sequence number + filler), keys and topics."""

    def __init__(self, size: int, keys: KeyDist, topics: list[str], seed: int) -> None:
        import numpy as np
        import pyarrow as pa

        self.size = size
        self.template = np.frombuffer((FILLER * (size // len(FILLER) + 1))[:size], dtype=np.uint8)
        self.width = min(SEQ_DIGITS, size)
        self.powers = 10 ** np.arange(self.width - 1, -1, -1, dtype=np.int64)
        self.keys = KeyTable(keys) if keys.kind != "none" else None
        self.topics = pa.array(topics, type=pa.string()) if len(topics) > 1 else None
        self.rng = np.random.default_rng(seed)

    def batch(self, start: int, n: int) -> Any:
        """Records ``start .. start+n-1`` as a ``pyarrow.RecordBatch``."""
        import numpy as np
        import pyarrow as pa

        data = np.empty((n, self.size), dtype=np.uint8)
        data[:] = self.template
        seq = np.arange(start, start + n, dtype=np.int64)
        data[:, : self.width] = (seq[:, None] // self.powers) % 10 + 48
        offsets = np.arange(0, (n + 1) * self.size, self.size, dtype=np.int32)
        values = pa.Array.from_buffers(
            pa.binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data)]
        )
        arrays, names = [values], ["value"]
        if self.keys is not None:
            arrays.append(self.keys.keys(start, n, self.rng))
            names.append("key")
        if self.topics is not None:
            arrays.append(self.topics.take(pa.array(seq % len(self.topics))))
            names.append("topic")
        return pa.RecordBatch.from_arrays(arrays, names=names)


def batch_records(size: int, rate_per_task: float) -> int:
    """Records per batch: ~5 ms of a paced task's rate, or up to 10k / 4 MiB at max rate."""
    cap = max(1, min(MAX_BATCH_RECORDS, MAX_BATCH_BYTES // size))
    if rate_per_task <= 0:
        return cap
    return max(1, min(cap, round(rate_per_task * PACE_TICK_S)))


def task_share(total: int, index: int, tasks: int) -> int:
    """Task ``index``'s share of ``total`` records."""
    return total // tasks + (1 if index < total % tasks else 0)


def run_producer_task(index: int, tasks: int, spec: dict[str, Any]) -> dict[str, Any]:
    """One producer task: generate and send its share, paced to rate/tasks (0 = max rate).

    ``spec``: client, options, records (total, or None), duration_s (or None), rate (total),
    size, keys (a KeyDist spec), topics, seed. Returns the producer's summary plus timing.
    """
    from bench.spark.producers import make_producer

    rate = float(spec.get("rate") or 0.0) / tasks
    records = spec.get("records")
    mine = task_share(int(records), index, tasks) if records else None
    duration = spec.get("duration_s")
    gen = BatchGenerator(
        int(spec["size"]), KeyDist.parse(spec["keys"]), list(spec["topics"]), spec["seed"] + index
    )
    n_batch = batch_records(int(spec["size"]), rate)
    producer = make_producer(spec["client"], spec["options"])
    id_base = index * 10**9
    sent = 0
    behind_max = 0.0
    start_wall = time.time()
    t0 = time.monotonic()
    try:
        while True:
            now = time.monotonic()
            if mine is not None and sent >= mine:
                break
            if duration and now - t0 >= duration:
                break
            n = n_batch if mine is None else min(n_batch, mine - sent)
            if rate:
                due = t0 + sent / rate
                if due > now:
                    time.sleep(due - now)  # pacing to the target rate
                else:
                    behind_max = max(behind_max, now - due)
            producer.write(gen.batch(id_base + sent, n))
            sent += n
        send_s = time.monotonic() - t0
        summary = dict(producer.flush())
    finally:
        producer.close()
    summary.update(
        task=index,
        generated=sent,
        start_wall=start_wall,
        send_s=send_s,
        total_s=time.monotonic() - t0,
        max_behind_s=behind_max,
    )
    return summary


def run_producer_tasks(spark: Any, tasks: int, spec: dict[str, Any]) -> list[dict[str, Any]]:
    """Run ``tasks`` producer tasks as one Spark job; return their summaries."""

    def task(index: int, _rows: Any) -> Any:
        from bench.spark.generate import run_producer_task

        yield run_producer_task(index, tasks, spec)

    rdd = spark.sparkContext.parallelize(range(tasks), tasks)
    return list(rdd.mapPartitionsWithIndex(task).collect())
