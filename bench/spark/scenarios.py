"""Workloads as run-loop scenarios: the Spark jobs of the ``batch``, ``tasks`` and ``stream`` modes.

* ``batch``:  ``df.write.format(fmt).mode("append")`` of a JVM-generated DataFrame; the tasks'
  summaries come back through ``pybroker.writeSummaryPath`` (one JSON line per task).
* ``tasks``:  one Spark job of ``producers`` tasks, each generating and sending its share with
  the in-task producer (``generate.run_producer_task``), paced or at max rate.
* ``stream``: ``writeStream.format(fmt)`` of Spark's ``rate`` source for ``duration_s``, micro-
  batches every ``trigger_s``; records = the summaries' total, else the query's input rows.

The warm-up runs the same client on a separate topic, so Spark's Python workers, imports and
connections are up before the measured job.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import uuid
from pathlib import Path
from typing import Any

from bench.spark import admin_ops, generate
from bench.spark.runner import LoadSpec, RunContext
from bench.spark.workloads import Workload

SUMMARY_OPTION = "pybroker.writeSummaryPath"


def read_summaries(path: Path) -> list[dict[str, Any]]:
    """The JSON lines a writer appended (none if the file does not exist)."""
    if not path.exists():
        return []
    return [json.loads(ln) for ln in path.read_text().splitlines() if ln.strip()]


def totals(summaries: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "records": sum(int(s.get("records", 0)) for s in summaries),
        "bytes": sum(int(s.get("bytes", 0)) for s in summaries),
        "tasks": summaries,
    }


def batch_write(ctx: RunContext, wl: Workload, records: int, topics: list[str]) -> dict[str, Any]:
    """One ``df.write`` job of ``records`` JVM-generated rows."""
    summary_path = ctx.workdir / f"summary-{uuid.uuid4().hex[:8]}.jsonl"
    df = generate.batch_dataframe(
        ctx.spark, records, wl.producers, wl.message_size, wl.key_dist, topics
    )
    opts = generate.sink_options(ctx.broker.bootstrap, topics, wl.producer_options)
    opts[SUMMARY_OPTION] = str(summary_path)
    df.write.format(ctx.fmt).mode("append").options(**opts).save()
    summaries = read_summaries(summary_path)
    summary_path.unlink(missing_ok=True)
    out = totals(summaries)
    if not summaries:  # the writer did not report: count what was asked for
        out.update(records=records, bytes=records * wl.message_size, summaries_missing=True)
    return out


def tasks_write(
    ctx: RunContext, wl: Workload, topics: list[str], records: int | None, duration: float | None
) -> dict[str, Any]:
    """One job of ``wl.producers`` producer tasks."""
    spec = {
        "client": ctx.client,
        "options": generate.sink_options(ctx.broker.bootstrap, topics, wl.producer_options),
        "records": records,
        "duration_s": duration,
        "rate": wl.rate,
        "size": wl.message_size,
        "keys": wl.keys,
        "topics": topics,
        "seed": ctx.run_no * 1000,
    }
    summaries = generate.run_producer_tasks(ctx.spark, wl.producers, spec)
    out = totals(summaries)
    out["max_behind_s"] = max((s.get("max_behind_s", 0.0) for s in summaries), default=0.0)
    return out


def stream_write(ctx: RunContext, wl: Workload, topics: list[str]) -> dict[str, Any]:
    """The rate source -> writeStream for ``duration_s``."""
    summary_path = ctx.workdir / f"summary-{uuid.uuid4().hex[:8]}.jsonl"
    checkpoint = Path(tempfile.mkdtemp(prefix="checkpoint-", dir=ctx.workdir))
    sdf = generate.stream_dataframe(
        ctx.spark, wl.rate, wl.producers, wl.message_size, wl.key_dist, topics
    )
    opts = generate.sink_options(ctx.broker.bootstrap, topics, wl.producer_options)
    opts[SUMMARY_OPTION] = str(summary_path)
    query = (
        sdf.writeStream.format(ctx.fmt)
        .options(**opts)
        .option("checkpointLocation", str(checkpoint))
        .trigger(processingTime=f"{wl.trigger_s:g} seconds")
        .start()
    )
    try:
        query.awaitTermination(wl.duration_s)  # returns after duration_s unless the query fails
        if query.exception() is not None:
            raise RuntimeError(f"streaming query failed: {query.exception()}")
    finally:
        progress = list(query.recentProgress)
        # stopping cancels the micro-batch in flight, which Spark logs as ERRORs: expected here
        ctx.spark.sparkContext.setLogLevel("FATAL")
        try:
            query.stop()
        finally:
            ctx.spark.sparkContext.setLogLevel("ERROR")
        shutil.rmtree(checkpoint, ignore_errors=True)
    summaries = read_summaries(summary_path)
    summary_path.unlink(missing_ok=True)
    out = totals(summaries)
    input_rows = sum(int(p.get("numInputRows", 0)) for p in progress)
    out["query_input_rows"] = input_rows
    out["micro_batches"] = len(progress)
    if not summaries:
        out.update(records=input_rows, bytes=input_rows * wl.message_size, summaries_missing=True)
    return out


def workload_load(wl: Workload) -> LoadSpec:
    """The run-loop scenario of workload ``wl``."""

    def topics(tag: str) -> dict[str, int]:
        return {f"{wl.name}-{tag}-{i}": wl.partitions for i in range(wl.topics)}

    def produce(ctx: RunContext) -> dict[str, Any]:
        names = list(ctx.topics)
        if wl.mode == "batch":
            out = batch_write(ctx, wl, int(wl.records or 0), names)
        elif wl.mode == "tasks":
            out = tasks_write(ctx, wl, names, wl.records, wl.duration_s)
        else:
            out = stream_write(ctx, wl, names)
        out["value_bytes"] = out["records"] * wl.message_size
        return out

    def warmup(ctx: RunContext) -> None:
        if not wl.warmup_records:
            return
        name = f"warmup-{uuid.uuid4().hex[:8]}"
        admin_ops.create_topics(
            ctx.broker.bootstrap,
            [name],
            wl.partitions,
            replication_factor=ctx.broker.replication_factor,
        )
        if wl.mode == "tasks":
            tasks_write(ctx, wl, [name], wl.warmup_records, None)
        else:
            batch_write(ctx, wl, wl.warmup_records, [name])

    return LoadSpec(
        name=wl.name,
        topics=topics,
        produce=produce,
        warmup=warmup,
        consumers=wl.consumers,
        total_records=wl.records if wl.mode != "stream" else None,
        duration_s=wl.duration_s,
        delete_records_interval_s=wl.delete_records_interval_s,
        delete_records_keep=wl.delete_records_keep,
        retention_sweep=wl.retention_sweep,
    )


def replay_load(
    trace: str,
    stats: dict[str, Any],
    speed: float | None,
    tasks: int,
    consumers: int,
    verify: bool,
    producer_options: dict[str, str],
    keep_partitions: bool = True,
) -> LoadSpec:
    """The run-loop scenario of replaying ``trace`` (see ``bench.spark.trace``)."""
    from bench.spark import trace as tr

    src = sorted(stats["topics"])

    def topics(tag: str) -> dict[str, int]:
        return {f"replay-{tag}-{i}": stats["topics"][t] for i, t in enumerate(src)}

    def topic_map(ctx: RunContext) -> dict[str, str]:
        return dict(zip(src, ctx.topics, strict=True))

    def produce(ctx: RunContext) -> dict[str, Any]:
        return tr.replay(
            ctx.spark,
            trace,
            ctx.broker.bootstrap,
            topic_map(ctx),
            speed=speed,
            client=ctx.client,
            tasks=tasks,
            producer_options=producer_options,
            keep_partitions=keep_partitions,
            create_topics=False,
            stats=stats,
        )

    def warmup(ctx: RunContext) -> None:
        tr.replay_in_order(
            ctx.spark,
            ctx.broker.bootstrap,
            ctx.workdir,
            records=2_000,
            client=ctx.client,
            tasks=tasks,
            replication_factor=ctx.broker.replication_factor,
        )

    def check(ctx: RunContext) -> dict[str, Any]:
        return tr.verify_order(ctx.broker.bootstrap, trace, topic_map(ctx))

    span_s = max(0.0, (stats["t_max_ms"] - stats["t_min_ms"]) / 1000.0)
    return LoadSpec(
        name="replay",
        topics=topics,
        produce=produce,
        warmup=warmup,
        consumers=consumers,
        total_records=stats["records"],
        duration_s=span_s / speed if speed else None,
        check=check if verify else None,
    )
