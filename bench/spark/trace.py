"""Traces: record a topic into Parquet, generate a synthetic one, replay one, verify the replay.

A trace is Parquet (a file or a Spark output directory) with the columns ``timestamp`` (ms),
``topic``, ``partition``, ``offset``, ``key`` (binary, nullable), ``value_size`` and, with
``--with-values``, ``value``.

* ``record``: ``spark.read.format(fmt)`` of the topics (earliest -> latest) -> Parquet.
* ``generate_trace``: a synthetic trace (Poisson arrivals at a rate, a key distribution, sizes).
* ``replay_load`` / ``replay``: the trace is repartitioned by key (all records of a key in one
  task; null keys spread by offset), sorted by (timestamp, topic, partition, offset) within each
  task, and sent by the in-task producer into the mapped topics and the recorded partitions, at
  the recorded pace (record i is due at start + (ts_i - ts_0) / speed) or at max rate. Without
  recorded values, value i is a 16-byte id (topic index, partition, offset, big-endian) padded
  with a filler to the recorded size (at least 16 bytes), so the order can be checked.
* ``verify_order``: consumes the mapped topics and checks that, for every (topic, partition,
  key), the records arrived exactly in trace order (same ids, or same values), none missing.
* ``replay_in_order``: generate a small trace, replay it, verify (the test's entry point).
"""

from __future__ import annotations

import json
import struct
import time
import uuid
import zlib
from collections import defaultdict
from pathlib import Path
from typing import Any

from bench.spark.keys import KeyDist, KeyTable

ID_BYTES = 16
REPLAY_LEAD_S = 1.0  # the replay clock starts this long after the job is submitted
MAX_CHUNK = 10_000
FILLER = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
TRACE_COLUMNS = ("timestamp", "topic", "partition", "offset", "key", "value_size")


# --------------------------------------------------------------------------- record


def record(
    spark: Any,
    fmt: str,
    bootstrap: str,
    topics: list[str],
    out: str,
    with_values: bool = False,
    single_file: bool = False,
) -> dict[str, Any]:
    """Read ``topics`` from earliest to latest with format ``fmt`` and write the trace."""
    t0 = time.perf_counter()
    df = (
        spark.read.format(fmt)
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", ",".join(topics))
        .option("startingOffsets", "earliest")
        .option("endingOffsets", "latest")
        .load()
    )
    cols = [
        "unix_millis(timestamp) as timestamp",
        "topic",
        "partition",
        "offset",
        "key",
        "cast(length(value) as int) as value_size",
    ]
    if with_values:
        cols.append("value")
    out_df = df.selectExpr(*cols)
    if single_file:
        out_df = out_df.coalesce(1)
    out_df.write.mode("overwrite").parquet(out)
    stats = trace_stats(spark, out)
    stats.update(path=out, seconds=time.perf_counter() - t0, format=fmt, with_values=with_values)
    return stats


def trace_stats(spark: Any, path: str) -> dict[str, Any]:
    """Records, bytes, time span and partitions per topic of a trace (one Spark job)."""
    df = spark.read.parquet(str(path))
    rows = (
        df.groupBy("topic")
        .agg({"partition": "max", "timestamp": "min", "value_size": "sum", "offset": "count"})
        .collect()
    )
    topics = {r["topic"]: int(r["max(partition)"]) + 1 for r in rows}
    t_min = min((int(r["min(timestamp)"]) for r in rows), default=0)
    t_max_row = df.agg({"timestamp": "max"}).collect()[0][0]
    return {
        "records": sum(int(r["count(offset)"]) for r in rows),
        "bytes": sum(int(r["sum(value_size)"] or 0) for r in rows),
        "topics": topics,
        "t_min_ms": t_min,
        "t_max_ms": int(t_max_row) if t_max_row is not None else t_min,
        "has_values": "value" in df.columns,
    }


# --------------------------------------------------------------------------- generate


def generate_trace(
    path: str | Path,
    records: int = 10_000,
    keys: str = "uniform:100",
    topics: list[str] | tuple[str, ...] = ("trace",),
    partitions: int = 4,
    value_size: int | tuple[int, int] = 100,
    rate: float = 5_000.0,
    seed: int = 1,
    with_values: bool = False,
    start_ms: int | None = None,
) -> Path:
    """Write a synthetic trace to ``path`` (one Parquet file) and return the path.

    Arrivals are Poisson at ``rate`` records/s; keys follow ``keys`` (see ``bench.spark.keys``);
    a keyed record goes to partition crc32(key) mod ``partitions`` of topic crc32(key) mod
    len(topics), a null-keyed one round robin; sizes are fixed or uniform in [lo, hi].
    """
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    dist = KeyDist.parse(keys)
    t0 = int(time.time() * 1000) if start_ms is None else start_ms
    ts = t0 + np.floor(np.cumsum(rng.exponential(1000.0 / rate, records))).astype(np.int64)
    key_arr = KeyTable(dist).keys(0, records, rng)
    key_list = key_arr.to_pylist()
    if dist.kind == "none":
        slot = np.arange(records, dtype=np.int64)
    else:
        crc = {k: zlib.crc32(k) for k in set(key_list)}
        slot = np.array([crc[k] for k in key_list], dtype=np.int64)
    topic_idx = slot % len(topics)
    part = (slot // len(topics)) % partitions
    offsets = np.zeros(records, dtype=np.int64)
    counters: dict[tuple[int, int], int] = defaultdict(int)
    for i, tp in enumerate(zip(topic_idx.tolist(), part.tolist(), strict=True)):
        offsets[i] = counters[tp]
        counters[tp] += 1
    if isinstance(value_size, tuple):
        sizes = rng.integers(value_size[0], value_size[1] + 1, records, dtype=np.int64)
    else:
        sizes = np.full(records, value_size, dtype=np.int64)
    cols: dict[str, Any] = {
        "timestamp": pa.array(ts, pa.int64()),
        "topic": pa.array([topics[i] for i in topic_idx.tolist()], pa.string()),
        "partition": pa.array(part.astype(np.int32), pa.int32()),
        "offset": pa.array(offsets, pa.int64()),
        "key": key_arr,
        "value_size": pa.array(sizes.astype(np.int32), pa.int32()),
    }
    if with_values:
        cols["value"] = pa.array(
            [
                (b"v%d-" % i + FILLER * (int(s) // len(FILLER) + 1))[: int(s)]
                for i, s in enumerate(sizes)
            ],
            pa.binary(),
        )
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table(cols), path)
    return path


# --------------------------------------------------------------------------- replay (tasks)


def synth_values(topic_idx: Any, partition: Any, offset: Any, sizes: Any) -> Any:
    """Binary values: a 16-byte id (topic index u32, partition u32, offset i64, big-endian)
    followed by a filler up to the size (at least 16 bytes)."""
    import numpy as np
    import pyarrow as pa

    n = len(sizes)
    sizes = np.maximum(np.asarray(sizes, dtype=np.int64), ID_BYTES)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(sizes, out=offsets[1:])
    total = int(offsets[-1])
    filler = np.frombuffer(FILLER, dtype=np.uint8)
    data = np.resize(filler, total)
    ids = np.zeros(n, dtype=[("t", ">u4"), ("p", ">u4"), ("o", ">i8")])
    ids["t"], ids["p"], ids["o"] = topic_idx, partition, offset
    id_bytes = ids.view(np.uint8).reshape(n, ID_BYTES)
    data[(offsets[:-1, None] + np.arange(ID_BYTES)).ravel()] = id_bytes.ravel()
    if total >= 2**31:
        raise ValueError(f"{n} values of {total} bytes: more than 2 GiB in one Arrow batch")
    return pa.Array.from_buffers(
        pa.binary(), n, [None, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(data)]
    )


def decode_id(value: bytes) -> tuple[int, int, int]:
    """(topic index, partition, offset) of a synthesized value."""
    return struct.unpack(">IIq", value[:ID_BYTES])


def replay_partition(batches: Any, cfg: dict[str, Any]) -> Any:
    """mapInArrow body: send this task's (sorted) trace rows; yield one summary row."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    from pyspark import TaskContext

    from bench.spark.producers import make_producer

    ctx = TaskContext.get()
    task = ctx.partitionId() if ctx else -1
    src_topics = pa.array(cfg["src_topics"], pa.string())
    dst_topics = pa.array(cfg["dst_topics"], pa.string())
    speed = cfg["speed"]
    start, t_min = cfg["start_wall"], cfg["t_min_ms"]
    producer = make_producer(cfg["client"], cfg["options"])
    sent = 0
    max_behind = 0.0
    t0 = time.monotonic()
    try:
        for batch in batches:
            if batch.num_rows == 0:
                continue
            tidx = pc.index_in(batch.column("topic"), value_set=src_topics)
            if cfg["has_values"] and "value" in batch.schema.names:
                values = batch.column("value")
            else:
                values = synth_values(
                    np.asarray(tidx.fill_null(0)),
                    np.asarray(batch.column("partition")),
                    np.asarray(batch.column("offset")),
                    np.asarray(batch.column("value_size")),
                )
            arrays = [values, batch.column("key"), dst_topics.take(tidx)]
            names = ["value", "key", "topic"]
            if cfg["keep_partitions"]:
                arrays.append(batch.column("partition").cast(pa.int32()))
                names.append("partition")
            out = pa.RecordBatch.from_arrays(arrays, names=names)
            if not speed:
                for i in range(0, out.num_rows, MAX_CHUNK):
                    producer.write(out.slice(i, MAX_CHUNK))
                sent += out.num_rows
                continue
            due = start + (np.asarray(batch.column("timestamp")) - t_min) / 1000.0 / speed
            i = 0
            while i < len(due):
                now = time.time()
                if due[i] > now:
                    time.sleep(due[i] - now)  # pacing: wait for the next record's recorded time
                    now = time.time()
                else:
                    max_behind = max(max_behind, now - due[i])
                k = min(int(np.searchsorted(due, now, side="right")), i + MAX_CHUNK)
                producer.write(out.slice(i, k - i))
                sent += k - i
                i = k
        summary = dict(producer.flush())
    finally:
        producer.close()
    summary.update(task=task, generated=sent, send_s=time.monotonic() - t0, max_behind_s=max_behind)
    yield pa.RecordBatch.from_pylist(
        [{"task": task, "summary": json.dumps(summary)}],
        schema=pa.schema([("task", pa.int32()), ("summary", pa.string())]),
    )


def replay(
    spark: Any,
    trace: str | Path,
    bootstrap: str,
    topic_map: dict[str, str] | None = None,
    speed: float | None = 1.0,
    client: str = "pybroker",
    tasks: int = 2,
    producer_options: dict[str, str] | None = None,
    keep_partitions: bool = True,
    create_topics: bool = True,
    stats: dict[str, Any] | None = None,
    replication_factor: int = 1,
) -> dict[str, Any]:
    """Replay ``trace`` into ``bootstrap`` (``speed`` None or 0 = max rate); return totals.

    ``topic_map`` maps recorded topics to target topics (default: the same names). With
    ``create_topics`` the targets are created with the recorded partition counts (and
    ``replication_factor``).
    """
    from pyspark.sql import functions as F

    from bench.spark import admin_ops

    stats = stats or trace_stats(spark, str(trace))
    src = sorted(stats["topics"])
    topic_map = topic_map or {t: t for t in src}
    dst = [topic_map[t] for t in src]
    if create_topics:
        by_count: dict[int, list[str]] = defaultdict(list)
        for t in src:
            by_count[stats["topics"][t]].append(topic_map[t])
        for n, names in by_count.items():
            admin_ops.create_topics(bootstrap, names, n, replication_factor=replication_factor)
    opts = {"kafka.bootstrap.servers": bootstrap, "kafka.acks": "all", **(producer_options or {})}
    df = spark.read.parquet(str(trace))
    has_values = "value" in df.columns
    route = F.coalesce(F.col("key"), F.col("offset").cast("string").cast("binary"))
    df = df.repartition(tasks, route).sortWithinPartitions(
        "timestamp", "topic", "partition", "offset"
    )
    cfg = {
        "src_topics": src,
        "dst_topics": dst,
        "speed": speed or 0.0,
        "t_min_ms": stats["t_min_ms"],
        "client": client,
        "options": opts,
        "has_values": has_values,
        "keep_partitions": keep_partitions,
    }

    t0 = time.perf_counter()
    cfg["start_wall"] = time.time() + REPLAY_LEAD_S

    def body(batches: Any) -> Any:
        from bench.spark.trace import replay_partition

        return replay_partition(batches, cfg)

    rows = df.mapInArrow(body, "task int, summary string").collect()
    summaries = [json.loads(r["summary"]) for r in rows]
    return {
        "records": sum(s.get("records", 0) for s in summaries),
        "bytes": sum(s.get("bytes", 0) for s in summaries),
        "value_bytes": stats["bytes"],
        "tasks": summaries,
        "max_behind_s": max((s.get("max_behind_s", 0.0) for s in summaries), default=0.0),
        "replay_s": time.perf_counter() - t0,
        "topic_map": topic_map,
        "trace": stats,
        "speed": speed or None,
    }


# --------------------------------------------------------------------------- verify


def expected_sequences(trace: str | Path, topic_map: dict[str, str]) -> tuple[dict, int, bool]:
    """{(dst topic, partition, key): [id or value, ...]} in trace order, record count, has values."""
    import pyarrow.parquet as pq

    table = pq.read_table(str(trace))
    has_values = "value" in table.column_names
    table = table.sort_by(
        [
            ("timestamp", "ascending"),
            ("topic", "ascending"),
            ("partition", "ascending"),
            ("offset", "ascending"),
        ]
    )
    src = sorted(set(table.column("topic").to_pylist()))
    index = {t: i for i, t in enumerate(src)}
    seqs: dict[tuple[str, int, bytes | None], list[Any]] = defaultdict(list)
    topics = table.column("topic").to_pylist()
    parts = table.column("partition").to_pylist()
    keys = table.column("key").to_pylist()
    offs = table.column("offset").to_pylist()
    vals = table.column("value").to_pylist() if has_values else None
    for i, (t, p, k, o) in enumerate(zip(topics, parts, keys, offs, strict=True)):
        if k is None:
            continue  # null keys carry no order
        ident = vals[i] if vals is not None else (index[t], p, o)
        seqs[(topic_map.get(t, t), p, k)].append(ident)
    return seqs, table.num_rows, has_values


def consume_all(
    bootstrap: str, topics: list[str], expected: int, timeout: float = 60.0
) -> list[Any]:
    """Every record of ``topics`` from the beginning, until ``expected`` arrived and every
    partition reported its end, or ``timeout`` seconds passed without new records."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-verify-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    try:
        meta = c.list_topics(timeout=30)
        tps = [
            TopicPartition(t, p, OFFSET_BEGINNING)
            for t in topics
            for p in sorted(meta.topics[t].partitions)
        ]
        c.assign(tps)
        out: list[Any] = []
        at_end: set[tuple[str, int]] = set()
        last = time.monotonic()
        while time.monotonic() - last < timeout:
            for m in c.consume(10_000, timeout=0.5):
                if m.error():
                    if m.error().code() == KafkaError._PARTITION_EOF:
                        at_end.add((m.topic(), m.partition()))
                        continue
                    raise RuntimeError(str(m.error()))
                at_end.discard((m.topic(), m.partition()))
                out.append((m.topic(), m.partition(), m.key(), m.value()))
                last = time.monotonic()
            if len(out) >= expected and len(at_end) == len(tps):
                break
        return out
    finally:
        c.close()


def verify_order(
    bootstrap: str, trace: str | Path, topic_map: dict[str, str], timeout: float = 60.0
) -> dict[str, Any]:
    """Check the replayed topics against the trace, per (topic, partition, key)."""
    seqs, total, has_values = expected_sequences(trace, topic_map)
    got = consume_all(bootstrap, sorted(set(topic_map.values())), total, timeout)
    actual: dict[tuple[str, int, bytes | None], list[Any]] = defaultdict(list)
    null_keys = 0
    for t, p, k, v in got:
        if k is None:
            null_keys += 1
            continue
        actual[(t, p, k)].append(v if has_values else decode_id(v))
    bad = [g for g, s in seqs.items() if actual.get(g) != s]
    extra = [g for g in actual if g not in seqs]
    first_bad = None
    if bad:
        g = bad[0]
        exp, act = seqs[g], actual.get(g, [])
        at = next(
            (i for i, (a, b) in enumerate(zip(exp, act, strict=False)) if a != b),
            min(len(exp), len(act)),
        )
        first_bad = {
            "group": [g[0], g[1], g[2].decode("latin-1") if g[2] else None],
            "expected_len": len(exp),
            "actual_len": len(act),
            "first_difference_at": at,
        }
    ok = not bad and not extra and len(got) == total
    return {
        "ok": ok,
        "records_expected": total,
        "records_consumed": len(got),
        "null_key_records": null_keys,
        "keyed_groups": len(seqs),
        "groups_out_of_order_or_incomplete": len(bad),
        "unexpected_groups": len(extra),
        "first_bad_group": first_bad,
        "compared": "values" if has_values else "ids",
        "summary": f"{len(seqs) - len(bad)}/{len(seqs)} key groups in order, {len(got)}/{total} records",
        "error": None
        if ok
        else f"{len(bad)} key groups differ, {len(got)}/{total} records consumed",
    }


def replay_in_order(
    spark: Any,
    bootstrap: str,
    workdir: str | Path,
    records: int = 5_000,
    keys: str = "uniform:50",
    partitions: int = 3,
    speed: float | None = None,
    client: str = "pybroker",
    tasks: int = 2,
    replication_factor: int = 1,
) -> dict[str, Any]:
    """Generate a small trace, replay it into fresh topics, and verify order per key."""
    tag = uuid.uuid4().hex[:6]
    path = generate_trace(
        Path(workdir) / f"trace-{tag}.parquet",
        records=records,
        keys=keys,
        topics=(f"src-{tag}",),
        partitions=partitions,
        rate=max(1000.0, records / 2.0),
    )
    topic_map = {f"src-{tag}": f"replay-{tag}"}
    result = replay(
        spark,
        path,
        bootstrap,
        topic_map,
        speed=speed,
        client=client,
        tasks=tasks,
        replication_factor=replication_factor,
    )
    check = verify_order(bootstrap, path, topic_map)
    check["replay"] = {k: result[k] for k in ("records", "replay_s", "max_behind_s")}
    return check
