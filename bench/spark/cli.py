"""Command line of ``python -m bench`` (and of ``bench/spark/run.py`` under spark-submit).

Subcommands:

* ``workload NAME|FILE.json [overrides]``: run a workload against the brokers, side by side;
* ``replay --trace PATH [--speed X | --max-rate]``: replay a trace against the brokers;
* ``record --bootstrap HOST:PORT --topics a,b --out PATH``: record topics into a trace;
* ``gen-trace --out PATH``: write a synthetic trace;
* ``list``: the workload presets.

``workload`` and ``replay`` write ``<out>/spark_<scenario>.json``, ``.md`` and PNG plots.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench.brokers import confirm_provenance, machine_info, provenance
from bench.spark.session import REPO

DEFAULT_OUT = REPO / "bench" / "results"


def _kv(items: list[str], what: str) -> dict[str, str]:
    out = {}
    for item in items:
        k, sep, v = item.partition("=")
        if not sep or not k:
            raise SystemExit(f"{what} {item!r}: use KEY=VALUE")
        out[k.strip()] = v.strip()
    return out


def _common_spark(ap: argparse.ArgumentParser) -> None:
    g = ap.add_argument_group("Spark")
    g.add_argument(
        "--master",
        default="local[*]",
        help="Spark master (ignored under spark-submit, which sets it)",
    )
    g.add_argument("--driver-memory", default="2g", help="spark.driver.memory (local sessions)")
    g.add_argument(
        "--spark-conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra Spark config (repeatable)",
    )


def _common_run(ap: argparse.ArgumentParser) -> None:
    g = ap.add_argument_group("brokers and runs")
    g.add_argument(
        "--brokers",
        default="pybroker,tansu",
        help="comma-separated: pybroker, tansu (started fresh per run on 127.0.0.1), "
        "pybroker-clusterN (N pybroker processes and ZooKeeper, fresh per run; topics with "
        "replication factor min(N, 3)), or NAME=HOST:PORT for a running broker",
    )
    g.add_argument(
        "--cluster",
        type=int,
        default=0,
        metavar="N",
        help="also run against a local N-broker cluster (adds pybroker-clusterN to --brokers)",
    )
    g.add_argument("--runs", type=int, default=1, help="runs per broker (alternating)")
    g.add_argument(
        "--client",
        choices=("pybroker", "confluent"),
        default="pybroker",
        help="client in the Spark tasks: format pybroker / ArrowProducer, or confluent-kafka",
    )
    g.add_argument("--out", default=str(DEFAULT_OUT), help="results directory")
    g.add_argument("--tag", default="", help="suffix for the result file names")
    g.add_argument("--workdir", default=None, help="scratch dir (default: a new temp dir)")
    g.add_argument("--keep-workdir", action="store_true", help="keep broker data and logs")
    g.add_argument(
        "--broker-override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra pybroker config for launched pybroker brokers (repeatable)",
    )
    g.add_argument(
        "--interval", type=float, default=0.5, help="high-watermark sampling interval, s"
    )
    g.add_argument(
        "--drain-timeout",
        type=float,
        default=10.0,
        help="latency consumers: give up after this many s without new records",
    )
    g.add_argument(
        "-C",
        dest="consumer_props",
        action="append",
        default=[],
        metavar="PROP=VAL",
        help="librdkafka property for the latency consumers (repeatable)",
    )
    g.add_argument("--no-progress", action="store_true", help="no progress line on stderr")
    g.add_argument("--no-plots", action="store_true", help="skip the PNG plots")


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python -m bench",
        description="Spark-driven load generation and trace replay against Kafka-compatible "
        "brokers, side by side (see bench/README.md).",
    )
    sub = ap.add_subparsers(dest="command", required=True)

    w = sub.add_parser(
        "workload",
        help="run a workload (preset or JSON file) against the brokers",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    w.add_argument("workload", help="preset name (see `list`) or a JSON file of Workload fields")
    g = w.add_argument_group("workload overrides")
    g.add_argument("--mode", choices=("batch", "tasks", "stream"))
    g.add_argument("--topics", type=int)
    g.add_argument("--partitions", type=int, help="partitions per topic")
    g.add_argument("--size", dest="message_size", type=int, help="value size, bytes")
    g.add_argument("--keys", help="none | uniform:K | roundrobin:K | zipf:K | hot:K:FRACTION")
    g.add_argument("--producers", type=int, help="producer tasks (Spark partitions)")
    g.add_argument("--consumers", type=int, help="end-to-end latency consumers (0 = none)")
    g.add_argument("--rate", type=float, help="target records/s over all producers (0 = max)")
    g.add_argument("--records", type=int, help="records per run")
    g.add_argument("--duration", dest="duration_s", type=float, help="seconds per run")
    g.add_argument("--warmup", dest="warmup_records", type=int, help="warm-up records")
    g.add_argument(
        "--delete-records-interval",
        dest="delete_records_interval_s",
        type=float,
        help="DeleteRecords every this many s during the load",
    )
    g.add_argument("--retention-sweep", action="store_const", const=True, default=None)
    g.add_argument(
        "-P",
        dest="producer_props",
        action="append",
        default=[],
        metavar="kafka.PROP=VAL",
        help="producer option, e.g. -P kafka.acks=1 -P kafka.compression.type=lz4",
    )
    _common_run(w)
    _common_spark(w)

    r = sub.add_parser(
        "replay",
        help="replay a Parquet trace against the brokers",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    r.add_argument("--trace", required=True, help="Parquet file or directory")
    pace = r.add_mutually_exclusive_group()
    pace.add_argument("--speed", type=float, default=1.0, help="x recorded pace")
    pace.add_argument("--max-rate", action="store_true", help="as fast as possible")
    r.add_argument("--tasks", type=int, default=2, help="replay tasks (keys are split by hash)")
    r.add_argument("--consumers", type=int, default=1, help="end-to-end latency consumers")
    r.add_argument(
        "--no-verify", action="store_true", help="skip the order-per-key check after the replay"
    )
    r.add_argument(
        "--any-partition",
        action="store_true",
        help="let the producer partition by key instead of using the recorded partitions",
    )
    r.add_argument(
        "-P", dest="producer_props", action="append", default=[], metavar="kafka.PROP=VAL"
    )
    _common_run(r)
    _common_spark(r)

    rec = sub.add_parser(
        "record",
        help="record topics of a running broker into a Parquet trace",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    rec.add_argument("--bootstrap", required=True, help="HOST:PORT")
    rec.add_argument("--topics", required=True, help="comma-separated topics")
    rec.add_argument("--out", required=True, help="Parquet output directory")
    rec.add_argument("--with-values", action="store_true", help="store values, not only sizes")
    rec.add_argument("--single-file", action="store_true", help="coalesce to one Parquet file")
    rec.add_argument(
        "--client",
        choices=("pybroker", "confluent"),
        default="pybroker",
        help="reader: format pybroker, or the confluent-kafka stand-in",
    )
    _common_spark(rec)

    gen = sub.add_parser(
        "gen-trace",
        help="write a synthetic trace",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    gen.add_argument("--out", required=True, help="Parquet file to write")
    gen.add_argument("--records", type=int, default=100_000)
    gen.add_argument("--keys", default="uniform:1000")
    gen.add_argument("--topics", default="trace", help="comma-separated topic names")
    gen.add_argument("--partitions", type=int, default=4)
    gen.add_argument("--size", default="100", help="value size, or LO-HI for uniform sizes")
    gen.add_argument("--rate", type=float, default=20_000, help="mean records/s (Poisson)")
    gen.add_argument("--seed", type=int, default=1)
    gen.add_argument("--with-values", action="store_true")

    sub.add_parser("list", help="list the workload presets")
    return ap


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    entry = "python -m bench" if sys.argv[0].endswith("__main__.py") else sys.argv[0]
    command = " ".join([entry, *(sys.argv[1:] if argv is None else argv)])
    if args.command == "list":
        return cmd_list()
    if args.command == "gen-trace":
        return cmd_gen_trace(args)
    if args.command == "record":
        return cmd_record(args)
    return cmd_run(args, command)


def cmd_list() -> int:
    from bench.spark.workloads import PRESETS

    for name, wl in PRESETS.items():
        print(f"{name:16} {wl.description}\n{'':16} {wl.summary()}")
    return 0


def cmd_gen_trace(args: argparse.Namespace) -> int:
    from bench.spark.trace import generate_trace

    size: int | tuple[int, int]
    if "-" in args.size:
        lo, hi = (int(x) for x in args.size.split("-", 1))
        size = (lo, hi)
    else:
        size = int(args.size)
    path = generate_trace(
        args.out,
        records=args.records,
        keys=args.keys,
        topics=[t for t in args.topics.split(",") if t],
        partitions=args.partitions,
        value_size=size,
        rate=args.rate,
        seed=args.seed,
        with_values=args.with_values,
    )
    print(f"wrote {path} ({args.records:,} records)")
    return 0


def _spark(args: argparse.Namespace) -> Any:
    from bench.spark import session

    return session.build(
        args.master, driver_memory=args.driver_memory, conf=_kv(args.spark_conf, "--spark-conf")
    )


def _fmt_or_exit(client: str) -> str:
    from bench.spark import session
    from bench.spark.runner import FORMATS

    if client == "pybroker" and session.FORMATS.get("pybroker"):
        raise SystemExit(
            f"format 'pybroker' is not usable: {session.FORMATS['pybroker']} (use --client confluent)"
        )
    return FORMATS[client]


def cmd_record(args: argparse.Namespace) -> int:
    from bench.spark.trace import record

    spark = _spark(args)
    try:
        fmt = _fmt_or_exit(args.client)
        topics = [t.strip() for t in args.topics.split(",") if t.strip()]
        stats = record(
            spark, fmt, args.bootstrap, topics, args.out, args.with_values, args.single_file
        )
        print(
            f"recorded {stats['records']:,} records ({stats['bytes']:,} value bytes) of "
            f"{stats['topics']} in {stats['seconds']:.1f} s -> {args.out}"
        )
    finally:
        spark.stop()
    return 0


def cmd_run(args: argparse.Namespace, command: str) -> int:
    from bench.spark import plots, results, runner, scenarios, session, targets
    from bench.spark.workloads import load, with_overrides

    try:
        wanted = [s for s in args.brokers.split(",") if s.strip()]
        if args.cluster:
            wanted.append(f"pybroker-cluster{args.cluster}")
        specs = [targets.TargetSpec.parse(s) for s in wanted]
    except ValueError as exc:
        raise SystemExit(str(exc)) from None
    names = [s.name for s in specs]
    if len(set(names)) != len(names):
        raise SystemExit("broker names must be unique")
    producer_options = _kv(args.producer_props, "-P")
    notes: list[str] = []
    stamp = provenance(Path(__file__).parent, [], command=command)
    if args.command == "workload":
        try:
            wl = with_overrides(
                load(args.workload),
                {
                    k: getattr(args, k)
                    for k in (
                        "mode",
                        "topics",
                        "partitions",
                        "message_size",
                        "keys",
                        "producers",
                        "consumers",
                        "rate",
                        "records",
                        "duration_s",
                        "warmup_records",
                        "delete_records_interval_s",
                        "retention_sweep",
                    )
                }
                | {"producer_options": producer_options},
            )
        except (ValueError, TypeError) as exc:
            raise SystemExit(str(exc)) from None
        scenario = wl.name
        params: dict[str, Any] = {"workload": wl.as_dict()}
        workload_summary = wl.summary()
    else:
        scenario = "replay"
        params = {
            "trace": args.trace,
            "speed": None if args.max_rate else args.speed,
            "tasks": args.tasks,
            "consumers": args.consumers,
            "verify": not args.no_verify,
            "keep_partitions": not args.any_partition,
            "producer_options": producer_options,
        }
    stem = f"spark_{scenario}" + (f"-{args.client}" if args.client != "pybroker" else "")
    stem += f"-{args.tag}" if args.tag else ""
    own_workdir = args.workdir is None
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="spark-bench-")).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    machine = machine_info()
    started = results.now_iso()
    spark = None
    try:
        tools = targets.Tools.locate(specs)
        spark = _spark(args)
        fmt = _fmt_or_exit(args.client)
        if args.command == "workload":
            lspec = scenarios.workload_load(wl)
        else:
            from bench.spark.trace import trace_stats

            stats = trace_stats(spark, args.trace)
            params["trace_stats"] = stats
            speed = params["speed"]
            workload_summary = (
                f"replay of {stats['records']:,} records over {len(stats['topics'])} topic(s) "
                f"({(stats['t_max_ms'] - stats['t_min_ms']) / 1000:.1f} s recorded) "
                + (f"at x{speed:g} pace" if speed else "at max rate")
                + f", {args.tasks} tasks, {args.consumers} latency consumer(s)"
            )
            lspec = scenarios.replay_load(
                args.trace,
                stats,
                speed,
                args.tasks,
                args.consumers,
                not args.no_verify,
                producer_options,
                not args.any_partition,
            )
        lspec.broker_overrides = _kv(args.broker_override, "--broker-override")
        opts = runner.Options(
            client=args.client,
            runs=args.runs,
            workdir=workdir,
            interval_s=args.interval,
            drain_timeout_s=args.drain_timeout,
            consumer_props=args.consumer_props,
            progress=not args.no_progress,
            keep_workdir=args.keep_workdir,
        )
        print(
            f"{scenario}: {workload_summary}; brokers {', '.join(names)}; client {args.client}",
            flush=True,
        )
        runs, interrupted = runner.run_all(spark, lspec, specs, tools, opts)
        versions = {**session.versions(spark), **tools.info}
    finally:
        if spark is not None:
            spark.stop()
        if own_workdir and not args.keep_workdir:
            shutil.rmtree(workdir, ignore_errors=True)
    machine["loadavg_end"] = list(os.getloadavg())
    summary = results.summarize(runs, names)
    if any(r.get("broker") == "tansu" for r in runs):
        notes.append(
            "Tansu 0.6 reports the last batch's base offset + 1 as the high watermark, so its "
            "throughput-over-time samples lag by up to one producer batch per partition; "
            "totals come from the producers' summaries."
        )
    for spec in specs:
        if spec.kind == "cluster":
            notes.append(
                f"{spec.name}: a fresh local cluster per run, {spec.nodes} pybroker processes and "
                f"ZooKeeper (bench/cluster.py), default broker settings; the run's topics have "
                f"replication factor {spec.replication_factor}; broker CPU and peak RSS are summed "
                "over its brokers."
            )
    notes += run_notes(runs)
    if any(r.get("produce", {}).get("summaries_missing") for r in runs):
        notes.append(
            "Some runs had no writer summaries; their record counts are the requested ones."
        )
    result: dict[str, Any] = {
        "scenario": scenario,
        "provenance": confirm_provenance(stamp),
        "interrupted": interrupted,
        "started_at": started,
        "finished_at": results.now_iso(),
        "client": args.client,
        "format": fmt,
        "brokers": names,
        "broker_specs": [s.__dict__ for s in specs],
        "params": params,
        "workload_summary": workload_summary,
        "machine": machine,
        "versions": versions,
        "runs": runs,
        "summary": summary,
        "notes": notes,
    }
    result["targets"] = evaluate_targets(result)
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    if not args.no_plots:
        try:
            result["plots"] = plots.write_all(out_dir, stem, result)
        except Exception as exc:  # plots are a convenience; keep the numbers
            notes.append(f"plots failed: {type(exc).__name__}: {exc}")
    jpath, mpath = results.write(out_dir, stem, result)
    print()
    print(mpath.read_text())
    print(f"wrote {jpath}, {mpath}" + "".join(f", {p}" for p in result.get("plots", [])))
    return 0 if runs and not interrupted and all(r.get("ok") for r in runs) else 1


def run_notes(runs: list[dict[str, Any]]) -> list[str]:
    """Per-run facts worth a line: incomplete consumption, DeleteRecords / sweep errors."""
    out = []
    for r in runs:
        head = f"{r['broker']} run {r['run']}: "
        lat = r.get("latency")
        if lat and r.get("produce") and lat.get("records", 0) < r["produce"]["records"]:
            out.append(
                head + f"the latency consumers received {lat['records']:,} of "
                f"{r['produce']['records']:,} records (nothing new for the drain timeout)"
            )
        for key, label in (
            ("delete_records", "DeleteRecords"),
            ("retention_sweep", "retention sweep"),
        ):
            err = (r.get(key) or {}).get("error")
            if err:
                out.append(head + f"{label} failed: {err}")
    return out


TARGET_MIN_RUNS = 3  # a target is judged on the median of at least this many runs


def evaluate_targets(result: dict[str, Any]) -> list[dict[str, Any]]:
    """The issue's throughput target, for the 100-byte batch workload: the median of at least
    TARGET_MIN_RUNS successful runs, with every run's rate shown."""
    wl = result["params"].get("workload")
    if not wl or wl["mode"] != "batch" or wl["message_size"] != 100 or "pybroker" not in result["brokers"]:
        return []
    rates = [r["produce"]["records_per_s"] for r in result["runs"]
             if r.get("broker") == "pybroker" and r.get("ok") and r.get("produce", {}).get("records_per_s")]
    target = (f"Spark batch write to one pybroker, {result['versions'].get('master')}, "
              "100 B values: >= 500k rec/s (job wall time)")
    runs = ", ".join(f"{x:,.0f}" for x in rates)
    if len(rates) < TARGET_MIN_RUNS:
        return [{"target": target, "value": f"runs: {runs or 'none'}", "pass": None,
                 "note": f"not judged: needs {TARGET_MIN_RUNS} successful runs or more (--runs)"}]
    median = statistics.median(rates)
    return [{"target": target, "value": f"median {median:,.0f} rec/s (runs: {runs})", "pass": median >= 500_000,
             "note": f"{sum(x >= 500_000 for x in rates)} of {len(rates)} runs at or above"}]
