"""Percentiles, rates over time and number formatting shared by the Spark bench modules."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

LATENCY_PERCENTILES = (50.0, 99.0, 99.9)


def percentile(sorted_values: Sequence[float], q: float) -> float | None:
    """The ``q``-th percentile (0-100) of already sorted values, nearest-rank; None if empty."""
    if not sorted_values:
        return None
    rank = max(1, math.ceil(q / 100.0 * len(sorted_values)))
    return float(sorted_values[min(rank, len(sorted_values)) - 1])


def summarize_latencies(values_ms: Sequence[float]) -> dict[str, Any]:
    """count, min, mean, p50/p99/p99.9 and max of latencies in ms."""
    s = sorted(values_ms)
    out: dict[str, Any] = {"count": len(s)}
    if not s:
        return out
    out["min_ms"] = float(s[0])
    out["mean_ms"] = float(sum(s) / len(s))
    for q in LATENCY_PERCENTILES:
        out[f"p{q:g}_ms"] = percentile(s, q)
    out["max_ms"] = float(s[-1])
    return out


def rates(samples: Sequence[Sequence[float]]) -> list[list[float]]:
    """[[t_mid, records/s], ...] from cumulative [[t, total], ...] samples."""
    out = []
    for (t0, n0), (t1, n1) in zip(samples, samples[1:], strict=False):
        if t1 > t0:
            out.append([round((t0 + t1) / 2, 3), (n1 - n0) / (t1 - t0)])
    return out


def active_rate(samples: Sequence[Sequence[float]]) -> dict[str, float] | None:
    """Records/s between the first and the last sample at which the total changed.

    This drops the job's start-up (Spark planning, Python workers) and the tail after the last
    record, so it is the broker-side rate while records were arriving.
    """
    changes = [i for i in range(1, len(samples)) if samples[i][1] != samples[i - 1][1]]
    if not changes:
        return None
    first, last = changes[0] - 1, changes[-1]
    t0, n0 = samples[first]
    t1, n1 = samples[last]
    if t1 <= t0:
        return None
    return {"start_s": t0, "end_s": t1, "records": n1 - n0, "records_per_s": (n1 - n0) / (t1 - t0)}


def fmt_int(x: float | None) -> str:
    """1234567.8 -> '1,234,568'; None -> '—'."""
    return "—" if x is None else f"{x:,.0f}"


def fmt_ms(x: float | None) -> str:
    """A latency in ms with sensible precision; None -> '—'."""
    if x is None:
        return "—"
    return f"{x:,.0f}" if x >= 100 else f"{x:.1f}" if x >= 10 else f"{x:.2f}"
