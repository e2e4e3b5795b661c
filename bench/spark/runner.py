"""One scenario against several brokers, side by side: the run loop and a run's measurements.

For run 1..N and each broker in turn (runs alternate between brokers): start the broker fresh
(or connect to the given address), create the run's topics, warm up (Spark's Python workers and
the client), start the latency consumers and wait until they fetch, start the high-watermark
sampler (and the DeleteRecords loop when asked), run the load (one Spark job, or a streaming
query), wait until the consumers have received every produced record, stop the helpers, run the
retention sweep when asked, run the scenario's check (e.g. order per key after a replay), and
stop the broker. Each run's raw data goes into the result; a failed run is recorded and the
loop goes on. Ctrl-C / SIGTERM stop the brokers and keep the partial results.
"""

from __future__ import annotations

import os
import time
import traceback
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.brokers import sigterm_as_interrupt
from bench.spark import admin_ops, targets
from bench.spark.latency import LatencyConsumers
from bench.spark.monitor import OffsetSampler, Progress, sampler_summary
from bench.spark.stats import active_rate

FORMATS = {"pybroker": "pybroker", "confluent": "benchconfluent"}


@dataclass
class RunContext:
    """What a scenario's callables get for one run."""

    spark: Any
    broker: targets.Running
    client: str
    fmt: str
    topics: dict[str, int]  # topic -> partitions
    workdir: Path
    run_no: int

    @property
    def partitions(self) -> list[tuple[str, int]]:
        return [(t, p) for t, n in self.topics.items() for p in range(n)]


@dataclass
class LoadSpec:
    """A scenario for the run loop."""

    name: str
    topics: Callable[[str], dict[str, int]]  # run tag -> {topic: partitions}
    # returns at least records; value_bytes (payload for MB/s) or bytes (the writer's count)
    produce: Callable[[RunContext], dict[str, Any]]
    warmup: Callable[[RunContext], None] | None = None
    consumers: int = 0
    total_records: int | None = None  # for the progress line
    duration_s: float | None = None
    delete_records_interval_s: float | None = None
    delete_records_keep: int = 10_000
    retention_sweep: bool = False
    check: Callable[[RunContext], dict[str, Any]] | None = None  # after the load
    broker_overrides: dict[str, str] = field(default_factory=dict)


@dataclass
class Options:
    """Run-loop options from the command line."""

    client: str = "pybroker"
    runs: int = 1
    workdir: Path = Path("/tmp")
    interval_s: float = 0.5
    drain_timeout_s: float = 30.0
    consumer_props: list[str] = field(default_factory=list)
    progress: bool = True
    keep_workdir: bool = False


def run_all(
    spark: Any, load: LoadSpec, specs: list[targets.TargetSpec], tools: targets.Tools, opts: Options
) -> tuple[list[dict[str, Any]], bool]:
    """Every run of every broker; returns (runs, interrupted)."""
    runs: list[dict[str, Any]] = []
    try:
        with sigterm_as_interrupt():
            for run_no in range(1, opts.runs + 1):
                for spec in specs:
                    r = run_one(spark, load, spec, tools, opts, run_no)
                    runs.append(r)
                    print(one_line(r), flush=True)
    except KeyboardInterrupt:
        print("interrupted: writing partial results", flush=True)
        return runs, True
    return runs, False


def run_one(
    spark: Any,
    load: LoadSpec,
    spec: targets.TargetSpec,
    tools: targets.Tools,
    opts: Options,
    run_no: int,
) -> dict[str, Any]:
    """One run on one broker; never raises except KeyboardInterrupt."""
    record: dict[str, Any] = {
        "broker": spec.name,
        "run": run_no,
        "ok": False,
        "loadavg_before": list(os.getloadavg()),
    }
    helpers: list[Callable[[], Any]] = []
    try:
        with targets.running(
            spec, tools, opts.workdir, load.broker_overrides, keep=opts.keep_workdir
        ) as b:
            record.update(bootstrap=b.bootstrap, startup_s=b.startup_s)
            tag = f"{spec.name}-r{run_no}-{uuid.uuid4().hex[:6]}"
            ctx = RunContext(
                spark, b, opts.client, FORMATS[opts.client], load.topics(tag), opts.workdir, run_no
            )
            record["topics"] = ctx.topics
            record["create_topics_s"] = create_topics(b.bootstrap, ctx.topics, b.replication_factor)
            if load.warmup:
                t = time.perf_counter()
                load.warmup(ctx)
                record["warmup_s"] = time.perf_counter() - t
            consumers = None
            if load.consumers:
                consumers = LatencyConsumers(
                    b.bootstrap, ctx.partitions, load.consumers, opts.workdir, opts.consumer_props
                )
                helpers.append(consumers.stop)
                consumers.wait_ready()
            progress = (
                Progress(f"{spec.name} run {run_no}", load.total_records, load.duration_s)
                if opts.progress
                else None
            )
            sampler = OffsetSampler(b.bootstrap, ctx.partitions, opts.interval_s, progress)
            sampler.start_and_wait()
            helpers.append(sampler.stop)
            dr_loop = None
            if load.delete_records_interval_s:
                dr_loop = admin_ops.DeleteRecordsLoop(
                    b.bootstrap,
                    ctx.partitions,
                    load.delete_records_interval_s,
                    load.delete_records_keep,
                )
                dr_loop.start()
                helpers.append(dr_loop.stop)
            cpu0 = b.cpu_seconds()
            job_wall = time.time()
            t0 = time.monotonic()
            produce = load.produce(ctx)
            job_s = time.monotonic() - t0
            produce["job_s"] = job_s
            produce["records_per_s"] = produce["records"] / job_s if job_s > 0 else None
            value_bytes = produce.get("value_bytes", produce.get("bytes", 0))
            produce["mb_per_s"] = value_bytes / job_s / 1e6 if job_s > 0 else None
            record["job_start_wall"] = job_wall
            if consumers:
                record["consumers_complete"] = consumers.wait_for(
                    produce["records"], opts.drain_timeout_s
                )
                record["drain_s"] = time.monotonic() - t0 - job_s
                helpers.remove(consumers.stop)
                record["latency"] = consumers.stop()
            if dr_loop:
                helpers.remove(dr_loop.stop)
                dr_loop.stop()
                record["delete_records"] = dr_loop.result()
            helpers.remove(sampler.stop)
            sampler.stop()
            if progress:
                progress.close()
            cpu1 = b.cpu_seconds()
            record["broker_cpu_s"] = None if cpu0 is None or cpu1 is None else cpu1 - cpu0
            record["broker_peak_rss_mb"] = b.peak_rss_mb()
            shift = sampler.t0 - t0  # samples relative to the job start
            samples = sampler_summary(sampler)
            samples["samples"] = [[round(t + shift, 3), n] for t, n in samples["samples"]]
            record["samples"] = samples
            produce["active"] = active_rate(samples["samples"])
            record["produce"] = produce
            if load.retention_sweep:
                record["retention_sweep"] = admin_ops.retention_sweep(b.bootstrap, ctx.partitions)
            if load.check:
                record["check"] = load.check(ctx)
            b.check_alive()
            record["ok"] = bool(record.get("check", {}).get("ok", True))
            if not record["ok"]:
                record["error"] = "check failed: " + str(record["check"].get("error"))
    except KeyboardInterrupt:
        record["error"] = "interrupted"
        raise
    except Exception as exc:
        record["error"] = f"{type(exc).__name__}: {exc}"
        record["traceback"] = traceback.format_exc(limit=8)
    finally:
        for stop in reversed(helpers):
            try:
                stop()
            except Exception:  # best effort: the run already failed
                pass
    return record


def create_topics(bootstrap: str, topics: dict[str, int], replication_factor: int = 1) -> float:
    """Create the topics (one request per partition count); return the seconds taken."""
    by_count: dict[int, list[str]] = {}
    for name, n in topics.items():
        by_count.setdefault(n, []).append(name)
    return sum(
        admin_ops.create_topics(bootstrap, names, n, replication_factor=replication_factor)
        for n, names in by_count.items()
    )


def one_line(r: dict[str, Any]) -> str:
    """Progress line for one finished run."""
    head = f"[{r['broker']} run {r['run']}] "
    if not r.get("ok"):
        return head + "FAILED " + str(r.get("error"))
    p = r["produce"]
    parts = [f"{p['records']:,} records in {p['job_s']:.2f} s = {p['records_per_s']:,.0f} rec/s"]
    if p.get("active"):
        parts.append(f"broker-side {p['active']['records_per_s']:,.0f} rec/s")
    lat = (r.get("latency") or {}).get("latency_ms") or {}
    if lat:
        parts.append(
            f"e2e p50 {lat['p50_ms']:.1f} / p99 {lat['p99_ms']:.1f} / p99.9 {lat['p99.9_ms']:.1f} ms"
        )
    dr = r.get("delete_records") or {}
    if dr:
        d = dr.get("latency_ms") or {}
        parts.append(
            f"DeleteRecords error {dr['error']}"
            if dr.get("error")
            else f"DeleteRecords p50 {d.get('p50_ms', 0):.2f} ms ({dr['requests']} requests)"
        )
    sw = r.get("retention_sweep")
    if sw:
        parts.append(
            f"sweep error {sw['error']}"
            if sw.get("error")
            else f"sweep {sw['delete_records_ms']:.1f} ms"
        )
    if r.get("check"):
        parts.append(f"check {r['check'].get('summary', r['check'].get('ok'))}")
    return head + ", ".join(parts)
