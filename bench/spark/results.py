"""Results of a Spark bench scenario: the JSON document, the markdown table, machine info.

``bench/results/spark_<scenario>.json`` holds the command, parameters, machine, versions and
every run's raw data (task summaries, high-watermark samples, latency buckets, DeleteRecords
calls); ``.md`` holds medians per broker side by side, any target checks, and a per-run table.
"""

from __future__ import annotations

import datetime as dt
import json
import statistics
from pathlib import Path
from typing import Any

from bench.brokers import provenance_line
from bench.spark.stats import fmt_int, fmt_ms

MB = 1e6

# (key in flat(run), label, formatter)
METRICS: list[tuple[str, str, Any]] = [
    ("records", "records produced", fmt_int),
    ("records_per_s", "produce rec/s (job wall time)", fmt_int),
    ("mb_per_s", "produce MB/s (job wall time)", lambda x: "—" if x is None else f"{x:,.1f}"),
    ("active_records_per_s", "broker-side rec/s while records arrived", fmt_int),
    ("job_s", "Spark job wall s", lambda x: "—" if x is None else f"{x:.2f}"),
    ("e2e_p50_ms", "end-to-end p50 ms", fmt_ms),
    ("e2e_p99_ms", "end-to-end p99 ms", fmt_ms),
    ("e2e_p99.9_ms", "end-to-end p99.9 ms", fmt_ms),
    ("e2e_max_ms", "end-to-end max ms", fmt_ms),
    ("consumed", "records consumed (latency consumers)", fmt_int),
    ("dr_p50_ms", "DeleteRecords p50 ms", fmt_ms),
    ("dr_p99_ms", "DeleteRecords p99 ms", fmt_ms),
    ("sweep_ms", "retention sweep: DeleteRecords(-1) ms", fmt_ms),
    ("sweep_visible_ms", "retention sweep: start offsets visible ms", fmt_ms),
    ("broker_cpu_s", "broker CPU s (load phase)", lambda x: "—" if x is None else f"{x:.2f}"),
    ("broker_peak_rss_mb", "broker peak RSS MB", lambda x: "—" if x is None else f"{x:,.1f}"),
]


def flat(run: dict[str, Any]) -> dict[str, float | None]:
    """The numbers of one run that the tables show."""
    prod = run.get("produce") or {}
    lat = (run.get("latency") or {}).get("latency_ms") or {}
    dr = (run.get("delete_records") or {}).get("latency_ms") or {}
    sweep = run.get("retention_sweep") or {}
    active = prod.get("active") or {}
    return {
        "records": prod.get("records"),
        "records_per_s": prod.get("records_per_s"),
        "mb_per_s": prod.get("mb_per_s"),
        "active_records_per_s": active.get("records_per_s"),
        "job_s": prod.get("job_s"),
        "e2e_p50_ms": lat.get("p50_ms"),
        "e2e_p99_ms": lat.get("p99_ms"),
        "e2e_p99.9_ms": lat.get("p99.9_ms"),
        "e2e_max_ms": lat.get("max_ms"),
        "consumed": (run.get("latency") or {}).get("records"),
        "dr_p50_ms": dr.get("p50_ms"),
        "dr_p99_ms": dr.get("p99_ms"),
        "sweep_ms": sweep.get("delete_records_ms"),
        "sweep_visible_ms": sweep.get("start_offsets_visible_ms"),
        "broker_cpu_s": run.get("broker_cpu_s"),
        "broker_peak_rss_mb": run.get("broker_peak_rss_mb"),
    }


def summarize(runs: list[dict[str, Any]], brokers: list[str]) -> dict[str, Any]:
    """Per broker: successful/failed run counts and the median of each metric."""
    out: dict[str, Any] = {}
    for b in brokers:
        ok = [flat(r) for r in runs if r["broker"] == b and r.get("ok")]
        med: dict[str, float | None] = {}
        for key, _, _ in METRICS:
            vals = [f[key] for f in ok if f[key] is not None]
            med[key] = statistics.median(vals) if vals else None
        out[b] = {
            "runs_ok": len(ok),
            "runs_failed": sum(1 for r in runs if r["broker"] == b and not r.get("ok")),
            "median": med,
        }
    return out


def now_iso() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def write(out_dir: Path, stem: str, result: dict[str, Any]) -> tuple[Path, Path]:
    """Write ``<stem>.json`` and ``<stem>.md``; return their paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    jpath = out_dir / f"{stem}.json"
    mpath = out_dir / f"{stem}.md"
    jpath.write_text(json.dumps(result, indent=1, default=str) + "\n")
    mpath.write_text(render_markdown(result))
    return jpath, mpath


def render_markdown(result: dict[str, Any]) -> str:
    """Medians side by side, targets, per-run rows."""
    brokers = result["brokers"]
    summ = result["summary"]
    m = result["machine"]
    v = result["versions"]
    lines = [
        f"# Spark bench: {result['scenario']}",
        "",
        provenance_line(result["provenance"]) + f" Finished {result['finished_at']}.",
        "",
        f"Workload: {result['workload_summary']}. Client in tasks: **{result['client']}** "
        f"(format `{result['format']}`). Spark {v.get('spark')} `{v.get('master')}`, "
        f"Java {v.get('java', '?')}, pyarrow {v.get('pyarrow')}, librdkafka {v.get('librdkafka', '?')}.",
        f"Machine: {m['nproc']} vCPU ({m['cpu']}), kernel {m['kernel']}, load average at start "
        f"{' / '.join(f'{x:.2f}' for x in m['loadavg_start'])}, at end "
        f"{' / '.join(f'{x:.2f}' for x in m.get('loadavg_end', []))}.",
        "",
        "Medians over successful runs (MB = 10^6 bytes of record values).",
        "",
        "| metric | " + " | ".join(brokers) + " |",
        "|---|" + "---:|" * len(brokers),
    ]
    for key, label, fmt in METRICS:
        row = [summ.get(b, {}).get("median", {}).get(key) for b in brokers]
        if all(x is None for x in row):
            continue
        lines.append(f"| {label} | " + " | ".join(fmt(x) for x in row) + " |")
    lines.append(
        "| successful runs | "
        + " | ".join(
            f"{summ[b]['runs_ok']}/{summ[b]['runs_ok'] + summ[b]['runs_failed']}" for b in brokers
        )
        + " |"
    )
    if result.get("targets"):
        lines += ["", "## Targets", "", "| target | value | result | note |", "|---|---|---|---|"]
        for t in result["targets"]:
            verdict = {True: "PASS", False: "FAIL", None: "not evaluated"}[t["pass"]]
            lines.append(f"| {t['target']} | {t['value']} | {verdict} | {t.get('note', '')} |")
    notes = result.get("notes") or []
    if notes:
        lines += ["", "## Notes", ""] + [f"* {n}" for n in notes]
    lines += [
        "",
        "## Runs",
        "",
        "| broker | run | load (1m) | records | job s | rec/s | broker-side rec/s | e2e p50 / p99 / p99.9 ms | status |",
        "|---|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    for r in result["runs"]:
        f = flat(r)
        e2e = " / ".join(fmt_ms(f[k]) for k in ("e2e_p50_ms", "e2e_p99_ms", "e2e_p99.9_ms"))
        status = (
            "ok"
            if r.get("ok")
            else "FAILED: " + " ".join(str(r.get("error", "?")).split())[:200].replace("|", "/")
        )
        job_s = "—" if f["job_s"] is None else f"{f['job_s']:.2f}"
        lines.append(
            f"| {r['broker']} | {r['run']} | {r.get('loadavg_before', [0])[0]:.2f} | "
            f"{fmt_int(f['records'])} | {job_s} | "
            f"{fmt_int(f['records_per_s'])} | {fmt_int(f['active_records_per_s'])} | {e2e} | {status} |"
        )
    plots = result.get("plots") or []
    if plots:
        lines += ["", "Plots: " + ", ".join(f"[{Path(p).name}]({Path(p).name})" for p in plots)]
    lines.append("")
    return "\n".join(lines)
