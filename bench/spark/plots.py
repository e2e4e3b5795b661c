"""PNG plots of a scenario (matplotlib, Agg backend): throughput over time and latency bars.

* ``<stem>_throughput.png``: acked records/s over time (from the high-watermark samples), one
  line per broker and run, time 0 = the start of the Spark job.
* ``<stem>_latency.png``: end-to-end p50 / p99 / p99.9 (median over runs) per broker, log scale.
* ``<stem>_latency_time.png``: per-second end-to-end p50 and p99 over time, per broker (run 1).

A plot is skipped when no run has the data for it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.spark.stats import rates

COLORS = ("tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown")


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def write_all(out_dir: Path, stem: str, result: dict[str, Any]) -> list[str]:
    """Write every plot that has data; return their paths."""
    out = []
    for fn in (throughput, latency_bars, latency_over_time):
        path = fn(out_dir, stem, result)
        if path:
            out.append(str(path))
    return out


def _color(brokers: list[str], name: str) -> str:
    return COLORS[brokers.index(name) % len(COLORS)] if name in brokers else "black"


def throughput(out_dir: Path, stem: str, result: dict[str, Any]) -> Path | None:
    runs = [r for r in result["runs"] if (r.get("samples") or {}).get("samples")]
    if not runs:
        return None
    plt = _plt()
    fig, ax = plt.subplots(figsize=(9, 4.5))
    styles = ("-", "--", ":", "-.")
    for r in runs:
        series = rates(r["samples"]["samples"])
        if not series:
            continue
        t = [s[0] for s in series]
        y = [s[1] / 1000 for s in series]
        ax.plot(
            t,
            y,
            styles[(r["run"] - 1) % len(styles)],
            color=_color(result["brokers"], r["broker"]),
            label=f"{r['broker']} run {r['run']}",
        )
    ax.set_xlabel("seconds since the Spark job started")
    ax.set_ylabel("acked records/s (thousands)")
    ax.set_title(f"{result['scenario']}: produce throughput ({result['client']} client in tasks)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path = out_dir / f"{stem}_throughput.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def latency_bars(out_dir: Path, stem: str, result: dict[str, Any]) -> Path | None:
    brokers = [
        b for b in result["brokers"] if result["summary"][b]["median"].get("e2e_p50_ms") is not None
    ]
    if not brokers:
        return None
    plt = _plt()
    keys = (("e2e_p50_ms", "p50"), ("e2e_p99_ms", "p99"), ("e2e_p99.9_ms", "p99.9"))
    fig, ax = plt.subplots(figsize=(7, 4.5))
    width = 0.8 / len(brokers)
    for i, b in enumerate(brokers):
        med = result["summary"][b]["median"]
        vals = [max(med.get(k) or 0.0, 0.1) for k, _ in keys]
        xs = [j + i * width for j in range(len(keys))]
        bars = ax.bar(xs, vals, width, label=b, color=_color(result["brokers"], b))
        for bar, v in zip(bars, vals, strict=True):
            ax.annotate(
                f"{v:.1f}",
                (bar.get_x() + bar.get_width() / 2, v),
                ha="center",
                va="bottom",
                fontsize=8,
            )
    ax.set_xticks([j + width * (len(brokers) - 1) / 2 for j in range(len(keys))])
    ax.set_xticklabels([label for _, label in keys])
    ax.set_yscale("log")
    ax.set_ylabel("end-to-end latency, ms (log scale)")
    ax.set_title(f"{result['scenario']}: record timestamp -> consumer receipt")
    ax.grid(alpha=0.3, axis="y")
    ax.legend()
    fig.tight_layout()
    path = out_dir / f"{stem}_latency.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def latency_over_time(out_dir: Path, stem: str, result: dict[str, Any]) -> Path | None:
    firsts: dict[str, dict[str, Any]] = {}
    for r in result["runs"]:
        buckets = (r.get("latency") or {}).get("per_second") or []
        if r.get("ok") and buckets and r["broker"] not in firsts:
            firsts[r["broker"]] = r
    if not firsts:
        return None
    plt = _plt()
    fig, ax = plt.subplots(figsize=(9, 4.5))
    for b, r in firsts.items():
        buckets = r["latency"]["per_second"]
        t0 = r.get("job_start_wall") or buckets[0][0]
        t = [bk[0] - t0 for bk in buckets]
        color = _color(result["brokers"], b)
        ax.plot(t, [bk[2] for bk in buckets], "-", color=color, label=f"{b} p50")
        ax.plot(t, [bk[3] for bk in buckets], "--", color=color, label=f"{b} p99")
    ax.set_yscale("log")
    ax.set_xlabel("seconds since the Spark job started")
    ax.set_ylabel("end-to-end latency, ms (log scale)")
    ax.set_title(f"{result['scenario']}: end-to-end latency per second (run 1)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path = out_dir / f"{stem}_latency_time.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
