"""DeleteRecords on a 3-broker cluster with RF=3: LeaderOnly=false and true, with every follower up
and with one follower stopped (KIP-1343's case, in numbers).

Usage::

    python bench/cluster_delete_records.py [--requests 1000] [--stopped-requests 500] [--stopped-timeouts 10]

A fresh 3-broker cluster (``bench/cluster.py``; default broker settings, so
``replica.fetch.wait.max.ms`` 500 and ``zookeeper.session.timeout.ms`` 18000 unless
``--session-timeout-ms`` says otherwise) gets a 1-partition RF=3 topic led by a broker that is not
the controller, filled with small records (acks=all). Every DeleteRecords (v3) is sent by
``pybroker.client.admin.Admin.delete_records`` (a Metadata request, then DeleteRecords to the
leader), one at a time, each moving the log start offset one record further; its round trip as
the caller sees it is the latency. The admin client bootstraps from the leader alone: a stopped
broker accepts TCP connections but never answers.

1. **All followers up**: ``--requests`` pairs, LeaderOnly=false then LeaderOnly=true
   (``timeout_ms`` 30000).
2. **One follower stopped** (SIGSTOP; the follower that is not the controller): it stays
   registered until its ZooKeeper session expires, so it still counts as an alive replica that
   DeleteRecords with LeaderOnly=false waits for. The stopped time is cut into windows of at most
   ``--pause-window`` s and half the session timeout; in each, LeaderOnly=true requests
   (``--stopped-requests`` in all, ``timeout_ms`` 30000) alternate with LeaderOnly=false ones
   (``--stopped-timeouts`` in all, ``timeout_ms`` = ``--stopped-timeout-ms``), which must end with
   REQUEST_TIMED_OUT (error 7) after their timeout. Before SIGCONT the leader's Metadata must still
   list the follower as alive and not offline (else the window is marked invalid). After SIGCONT,
   one LeaderOnly=false request to the current offset measures how long the resumed follower takes
   to catch up.

Targets: LeaderOnly=false with every follower up p50 < 20 ms (Kafka is bounded by
``replica.fetch.wait.max.ms``, 500 ms); with one follower stopped, LeaderOnly=true p50 < 10 ms and
every LeaderOnly=false answered with error 7 once its timeout passed. Results:
``<out>/cluster_delete_records.{json,md,png}``.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from broker_compare import REPO, wait_for_quiet  # noqa: E402
from brokers import (  # noqa: E402
    provenance_line,
    pybroker_import,
)
from harness import BenchRun  # noqa: E402

from bench.cluster import KAFKA_SESSION_TIMEOUT_MS, LocalCluster, pick_roles, start_zookeeper  # noqa: E402
from pybroker.client.admin import Admin, AdminError  # noqa: E402
from pybroker.client.connection import BrokerConnection  # noqa: E402
from pybroker.protocol.api_keys import ApiKey  # noqa: E402
from pybroker.protocol.errors import ErrorCode  # noqa: E402
from pybroker.protocol.messages import ProduceRequest  # noqa: E402
from pybroker.types import TopicPartition  # noqa: E402

TOPIC = "delete-records"
LONG_TIMEOUT_MS = 30000
ALL_UP_FALSE_P50_MS = 20.0
STOPPED_TRUE_P50_MS = 10.0
CASES = {  # key -> label
    "up_false": "all up, LeaderOnly=false",
    "up_true": "all up, LeaderOnly=true",
    "stopped_true": "one follower stopped, LeaderOnly=true",
    "stopped_false": "one follower stopped, LeaderOnly=false",
    "resumed_false": "follower resumed, first LeaderOnly=false",
}


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def latency_summary(values: list[float]) -> dict[str, Any] | None:
    if not values:
        return None
    return {"n": len(values), "p50": percentile(values, 0.5), "p95": percentile(values, 0.95),
            "p99": percentile(values, 0.99), "max": max(values), "min": min(values), "mean": statistics.fmean(values)}


async def produce(port: int, records: int) -> None:
    """``records`` records of 16 B into the leader, acks=all, in batches of 1,000."""
    from pybroker import _native

    connection = BrokerConnection("127.0.0.1", port, "bench-delete-records")
    await connection.connect()
    try:
        left = records
        while left:
            n = min(left, 1000)
            batch = _native.build_batch([(None, b"x" * 16)] * n, int(time.time() * 1000))
            request = ProduceRequest(acks=-1, timeout_ms=30000, topic_data=[ProduceRequest.TopicProduceData(
                name=TOPIC, partition_data=[ProduceRequest.PartitionProduceData(index=0, records=batch)])])
            response = await connection.send(ApiKey.PRODUCE, request, timeout=60)
            errors = {p.error_code for t in response.responses for p in t.partition_responses}
            if errors != {ErrorCode.NONE}:
                raise RuntimeError(f"produce failed: {errors}")
            left -= n
    finally:
        await connection.close()


class Deleter:
    """Sequential DeleteRecords through one ``Admin``; every call recorded."""

    def __init__(self, admin: Admin) -> None:
        self.admin = admin
        self.tp = TopicPartition(TOPIC, 0)
        self.offset = 0
        self.calls: list[dict[str, Any]] = []

    async def call(self, case: str, leader_only: bool, timeout_ms: int, advance: bool = True) -> dict[str, Any]:
        if advance:
            self.offset += 1
        t0 = time.perf_counter()
        outcome = (await self.admin.delete_records({self.tp: self.offset}, leader_only=leader_only,
                                                   timeout_ms=timeout_ms))[self.tp]
        ms = (time.perf_counter() - t0) * 1000
        call: dict[str, Any] = {"case": case, "offset": self.offset, "leader_only": leader_only,
                                "timeout_ms": timeout_ms, "ms": ms}
        if isinstance(outcome, AdminError):
            call["error"] = int(outcome.error)
            call["message"] = str(outcome)[:200]
        else:
            call.update(error=0, low_watermark=outcome.low_watermark,
                        leader_log_start_offset=outcome.leader_log_start_offset)
        self.calls.append(call)
        return call


def follower_alive(cluster: LocalCluster, leader: int, follower: int) -> bool:
    """Whether the leader's Metadata still lists ``follower`` as a live broker, not offline."""
    md = cluster.metadata(cluster.node(leader), [TOPIC])
    brokers = {b.node_id for b in md.brokers}
    offline = {r for t in md.topics for p in t.partitions for r in (p.offline_replicas or [])}
    return follower in brokers and follower not in offline


async def measure(cluster: LocalCluster, leader: int, follower: int, args: argparse.Namespace,
                  out: dict[str, Any]) -> None:
    async with Admin(cluster.node(leader).address, client_id="bench-delete-records",
                     request_timeout=LONG_TIMEOUT_MS / 1000 + 5) as admin:
        d = Deleter(admin)
        out["calls"] = d.calls
        out["quiet_up"] = wait_for_quiet(args.quiet_cores, args.quiet_wait)
        for _ in range(args.requests):
            for case, leader_only in (("up_false", False), ("up_true", True)):
                call = await d.call(case, leader_only, LONG_TIMEOUT_MS)
                if call["error"]:
                    raise RuntimeError(f"{case}: {call}")
        out["quiet_stopped"] = wait_for_quiet(args.quiet_cores, args.quiet_wait)
        session_s = args.session_timeout_ms / 1000
        window_s = min(args.pause_window, session_s / 2)
        timeouts_per_window = max(1, int(window_s // (args.stopped_timeout_ms / 1000)))
        windows = max(1, math.ceil(args.stopped_timeouts / timeouts_per_window)) if args.stopped_timeouts else 1
        trues_left, falses_left = args.stopped_requests, args.stopped_timeouts
        out["windows"] = []
        for w in range(windows):
            n_false = min(falses_left, timeouts_per_window)
            n_true = math.ceil(trues_left / (windows - w))
            falses_left -= n_false
            trues_left -= n_true
            window: dict[str, Any] = {"false_requests": n_false, "true_requests": n_true}
            out["windows"].append(window)
            cluster.pause(follower)
            t_pause = time.monotonic()
            try:
                # LeaderOnly=true requests spread between the LeaderOnly=false ones.
                slices = [n_true * (i + 1) // (n_false + 1) - n_true * i // (n_false + 1) for i in range(n_false + 1)]
                for i, trues in enumerate(slices):
                    for _ in range(trues):
                        call = await d.call("stopped_true", True, LONG_TIMEOUT_MS)
                        if call["error"]:
                            raise RuntimeError(f"stopped_true: {call}")
                    if i < n_false:
                        await d.call("stopped_false", False, args.stopped_timeout_ms)
                window["alive_before_resume"] = await asyncio.to_thread(follower_alive, cluster, leader, follower)
            finally:
                window["stopped_s"] = time.monotonic() - t_pause
                cluster.resume(follower)
            window["valid"] = window["alive_before_resume"] and window["stopped_s"] < session_s
            call = await d.call("resumed_false", False, LONG_TIMEOUT_MS, advance=False)
            if call["error"]:
                raise RuntimeError(f"after resume: {call}")


def summarize(calls: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for case in CASES:
        mine = [c for c in calls if c["case"] == case]
        errors: dict[str, int] = {}
        for c in mine:
            errors[str(c["error"])] = errors.get(str(c["error"]), 0) + 1
        out[case] = {"latency_ms": latency_summary([c["ms"] for c in mine]), "errors": errors}
        if case == "stopped_false" and mine:
            out[case]["all_timed_out_after_timeout"] = all(
                c["error"] == ErrorCode.REQUEST_TIMED_OUT and c["ms"] >= c["timeout_ms"] for c in mine)
            out[case]["over_timeout_ms"] = latency_summary([c["ms"] - c["timeout_ms"] for c in mine])
        if case == "stopped_true" and mine:
            # LeaderOnly=true answers with the leader's log start offset while the low watermark lags.
            out[case]["low_watermark_behind"] = sum(1 for c in mine if c.get("low_watermark", 0) < c["offset"])
    return out


def targets(summary: dict[str, Any], windows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    res = []

    def add(target: str, value: str, result: str, note: str = "") -> None:
        res.append({"target": target, "value": value, "result": result, "note": note})

    up = summary["up_false"]["latency_ms"]
    name = f"all up, LeaderOnly=false: p50 < {ALL_UP_FALSE_P50_MS:.0f} ms"
    if up:
        add(name, f"p50 {up['p50']:.2f} ms, p95 {up['p95']:.2f} ms ({up['n']} requests)",
            "PASS" if up["p50"] < ALL_UP_FALSE_P50_MS else "FAIL",
            "Kafka: bounded by replica.fetch.wait.max.ms (500 ms)")
    else:
        add(name, "n/a", "not measured")
    valid = bool(windows) and all(w.get("valid") for w in windows)
    note = "" if valid else "a stop window outlasted the follower's registration: not judged"
    st = summary["stopped_true"]["latency_ms"]
    name = f"one follower stopped, LeaderOnly=true: p50 < {STOPPED_TRUE_P50_MS:.0f} ms"
    if st:
        add(name, f"p50 {st['p50']:.2f} ms, p95 {st['p95']:.2f} ms ({st['n']} requests)",
            ("PASS" if st["p50"] < STOPPED_TRUE_P50_MS else "FAIL") if valid else "not judged", note)
    else:
        add(name, "n/a", "not measured")
    sf = summary["stopped_false"]
    name = "one follower stopped, LeaderOnly=false: times out (error 7)"
    if sf["latency_ms"]:
        lat = sf["latency_ms"]
        add(name, f"errors {sf['errors']}, answered after p50 {lat['p50']:.0f} ms (max {lat['max']:.0f} ms)",
            ("PASS" if sf["all_timed_out_after_timeout"] else "FAIL") if valid else "not judged", note)
    else:
        add(name, "n/a", "not measured")
    return res


def render_markdown(result: dict[str, Any]) -> str:
    par = result["parameters"]
    lines = [
        "# DeleteRecords on a 3-broker cluster, RF=3: LeaderOnly=false / true (KIP-1343)",
        "",
        f"{provenance_line(result['provenance'])} Finished {result['finished_at']}; {result['wall_s']:.0f} s. "
        f"Machine: {result['machine']['nproc']} vCPU, {result['machine']['platform']}; load average at start "
        f"{' / '.join(f'{x:.2f}' for x in result['machine']['loadavg_start'])}.",
        "",
        f"A fresh cluster of 3 pybroker processes and ZooKeeper (tickTime {par['zk_tick_ms']} ms), default broker "
        f"settings (replica.fetch.wait.max.ms 500) and zookeeper.session.timeout.ms {par['session_timeout_ms']}; "
        "a 1-partition RF=3 topic led by a non-controller broker. Each request is one "
        "`pybroker.client.admin.Admin.delete_records` call (Metadata + DeleteRecords v3 to the leader) moving the "
        "log start offset one record; latency = the call's round trip. A stopped follower is SIGSTOPped: still "
        "registered, so still an alive replica to wait for.",
        "",
        "| case | requests | p50 ms | p95 ms | p99 ms | max ms | errors (code: count) |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    for case, label in CASES.items():
        s = result["summary"][case]
        lat = s["latency_ms"]
        if not lat:
            continue
        if case == "stopped_false":
            label += f" (timeout_ms {par['stopped_timeout_ms']})"
        lines.append(f"| {label} | {lat['n']} | {lat['p50']:.2f} | {lat['p95']:.2f} | {lat['p99']:.2f} | "
                     f"{lat['max']:.2f} | {', '.join(f'{k}: {v}' for k, v in s['errors'].items())} |")
    lines += ["", "Error 7 is REQUEST_TIMED_OUT. The LeaderOnly=true answers carry the leader's log start offset; "
              f"their low watermark was behind it in {result['summary']['stopped_true'].get('low_watermark_behind', 0)} "
              "of them (the stopped follower's log start offset).", "",
              "## Stop windows", "",
              "| window | LeaderOnly=true requests | LeaderOnly=false requests | stopped s | follower still alive in "
              "the leader's metadata at the end | valid |", "|---:|---:|---:|---:|---|---|"]
    for i, w in enumerate(result.get("windows", []), 1):
        lines.append(f"| {i} | {w['true_requests']} | {w['false_requests']} | {w.get('stopped_s', 0):.1f} | "
                     f"{w.get('alive_before_resume')} | {w.get('valid')} |")
    lines += ["", "## Targets", "", "| target | value | result | note |", "|---|---|---|---|"]
    for t in result["targets"]:
        lines.append(f"| {t['target']} | {t['value']} | {t['result']} | {t['note']} |")
    if result.get("error"):
        lines += ["", f"**Run failed**: {result['error']}"]
    lines += ["", "Every call (offset, latency, error, low watermark) is in the JSON.", ""]
    return "\n".join(lines)


def plot(result: dict[str, Any], path: Path) -> bool:
    """Latency distribution (empirical CDF, log x) of each case."""
    calls = result.get("calls") or []
    if not calls:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5))
    for case, label in CASES.items():
        values = sorted(c["ms"] for c in calls if c["case"] == case)
        if values:
            ax.step(values, [(i + 1) / len(values) for i in range(len(values))], where="post",
                    label=f"{label} (n={len(values)})")
    ax.axvline(ALL_UP_FALSE_P50_MS, color="grey", ls="--", lw=0.8)
    ax.axvline(STOPPED_TRUE_P50_MS, color="grey", ls=":", lw=0.8)
    ax.set_xscale("log")
    ax.set_xlabel("DeleteRecords round trip, ms (Admin.delete_records)")
    ax.set_ylabel("fraction of requests")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8, loc="lower right")
    ax.set_title("pybroker, 3 brokers, RF=3: DeleteRecords latency (targets dashed: 20 ms, dotted: 10 ms)",
                 fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--requests", type=int, default=1000, help="LeaderOnly=false/true pairs with every follower up")
    ap.add_argument("--stopped-requests", type=int, default=500,
                    help="LeaderOnly=true requests with one follower stopped")
    ap.add_argument("--stopped-timeouts", type=int, default=10,
                    help="LeaderOnly=false requests with one follower stopped")
    ap.add_argument("--stopped-timeout-ms", type=int, default=1000,
                    help="timeout_ms of the LeaderOnly=false requests with one follower stopped")
    ap.add_argument("--pause-window", type=float, default=6.0,
                    help="longest stop of the follower, s (also at most half the session timeout)")
    ap.add_argument("--session-timeout-ms", type=int, default=KAFKA_SESSION_TIMEOUT_MS,
                    help="the brokers' zookeeper.session.timeout.ms")
    ap.add_argument("--zk-tick-ms", type=int, default=2000, help="ZooKeeper tickTime")
    ap.add_argument("--out", default=str(REPO / "bench" / "results"), help="results directory")
    ap.add_argument("--workdir", default=None, help="scratch dir (default: a new temp dir)")
    ap.add_argument("--keep-workdir", action="store_true", help="keep broker data dirs and logs")
    ap.add_argument("--startup-timeout", type=float, default=60.0, help="seconds for the cluster to form")
    ap.add_argument("--quiet-cores", type=float, default=0.3,
                    help="before each phase, wait until the machine's busy CPU (1 s sample) is below this")
    ap.add_argument("--quiet-wait", type=float, default=60.0, help="longest wait for --quiet-cores, s")
    ap.add_argument("--python", default=sys.executable, help="interpreter that runs pybroker")
    args = ap.parse_args(argv)
    if args.requests < 1 or args.stopped_requests < 0 or args.stopped_timeouts < 0:
        ap.error("--requests must be >= 1, --stopped-requests and --stopped-timeouts >= 0")
    if args.stopped_timeout_ms / 1000 > min(args.pause_window, args.session_timeout_ms / 2000):
        ap.error("--stopped-timeout-ms must fit in a stop window (--pause-window, half the session timeout)")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    pyb = pybroker_import(args.python)
    measured: dict[str, Any] = {}
    error = None
    with BenchRun.start(__file__, argv, args, prefix="bench-cluster-delete-records-") as bench:
        zk = cluster = None
        try:
            zk = start_zookeeper(bench.workdir / "zookeeper", args.zk_tick_ms)
            cluster = LocalCluster(f"{zk.connect_string}/cluster-delete-records", bench.workdir / "cluster",
                                   overrides={"zookeeper.session.timeout.ms": args.session_timeout_ms},
                                   python=args.python, add_repo_to_pythonpath=bool(pyb.get("add_repo_to_pythonpath")))
            measured["cluster_start_s"] = cluster.start(args.startup_timeout)
            controller, leader, followers = pick_roles(cluster)
            follower = next(f for f in followers if f != controller)
            measured.update(controller=controller, leader=leader, stopped_follower=follower)
            cluster.create_topic(TOPIC, [[leader, *followers]])
            records = (2 * args.requests + args.stopped_requests + args.stopped_timeouts) + 100
            asyncio.run(produce(cluster.node(leader).port, records))
            measured["records"] = records
            asyncio.run(measure(cluster, leader, follower, args, measured))
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
            if cluster is not None:
                measured["broker_log_tails"] = cluster.log_tails()
        finally:
            if cluster is not None:
                measured["exit_codes"] = cluster.stop()
            if zk is not None:
                zk.stop()
    if bench.interrupted:
        error = "interrupted"
    calls = measured.pop("calls", [])
    summary = summarize(calls)
    result: dict[str, Any] = {
        **bench.head(),
        "error": error,
        "parameters": vars(args),
        "machine": bench.machine,
        "versions": {"pybroker_import": pyb, "python": sys.version.split()[0]},
        **measured,
        "summary": summary,
        "calls": calls,
    }
    result["targets"] = targets(summary, result.get("windows", []))
    bench.write("cluster_delete_records", result, render_markdown, plot)
    return 0 if error is None else 1


if __name__ == "__main__":
    raise SystemExit(main())
