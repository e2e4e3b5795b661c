"""KIP-253 under a steady keyed load: what ordered partition changes cost, against the same load
without ordered delivery.

Usage::

    python bench/ordered_delivery.py [--rate 1000] [--keys 200] [--repeats 3] [--step 15]

Each run starts a fresh single pybroker (default settings) and creates topic ``orders`` with
``--initial`` (4) partitions, with ``enable.ordered.delivery`` true (**ordered**) or false
(**unordered**); runs alternate between the two modes, ``--repeats`` times each. In the bench
process the project's ``KafkaProducer`` (``linger.ms`` 5, acks=all) sends ``--rate`` keyed
records per second, ``--keys`` keys in turn, each value carrying its key, its per-key sequence
number and its send time; a group of ``--consumers`` of the project's ``KafkaConsumer`` s
delivers them; with ``--slow-poll-ms`` one of them is slow (at most 50 records per poll, then a
pause), so the partitions it owns lag behind and gates wait for them. Both modes use the same clients with the same settings (``metadata.max.age.ms``
1000, ``heartbeat.interval.ms`` 1000, ``auto.commit.interval.ms`` 1000, the rest Kafka's
defaults), and the producer partitions by linear hashing in both. What differs is only what
``enable.ordered.delivery`` switches: the brokers' count check on Produce and Fetch, and the
consumers' gates (with their ConsumerGroupPosition exchange).

After ``--warmup`` s the topic changes every ``--step`` s: it grows to 8, then to 16, then shrinks
to 8. After the shrink a drainer deletes each marked partition's records (DeleteRecords to the
high watermark) once the group's committed offset has reached its end, and the controller removes
the drained partitions (``partition.deletion.check.interval.ms`` 1000). Without ordered delivery
a shrink is refused (INVALID_PARTITIONS: Kafka cannot delete partitions), so the unordered run
goes on at 16 partitions, and its third column is the same load with no change.

Measured, per change: the **gate wait** of every partition the change gates (the partitions it
creates; for the shrink, the survivors that take a marked partition's keys), from the first
assignment of that partition after the change to the consumer's ``on_partition_key_assigned``
for it, and from the change itself; the **end-to-end latency** (send to delivery, first delivery
of each record) of the records sent and the **throughput** (first deliveries per second) in the
``--window`` s before the change, the ``--window`` s from it, and the ``--window`` s after those;
for the shrink, the time until every marked partition was drained and removed. Every run also
counts order violations (a key's record delivered before an earlier one of the same key) and
records that never arrived. Results: ``<out>/ordered_delivery[-<tag>].{json,md,png}``.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import statistics
import struct
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from broker_compare import REPO, Broker, broker_command, broker_env, free_port, wait_for_quiet  # noqa: E402
from brokers import provenance_line, pybroker_import  # noqa: E402
from cluster_delete_records import latency_summary  # noqa: E402
from harness import BenchRun  # noqa: E402

from pybroker import _native  # noqa: E402
from pybroker.client.admin import Admin, AdminError  # noqa: E402
from pybroker.client.kafka_consumer import (  # noqa: E402
    ConsumerRebalanceListener,
    KafkaConsumer,
    PartitionKeyRebalanceListener,
)
from pybroker.client.kafka_producer import KafkaProducer  # noqa: E402
from pybroker.types import TopicPartition  # noqa: E402

TOPIC = "orders"
MODES = ("ordered", "unordered")
CHANGES = ((8, "grow 4 -> 8"), (16, "grow 8 -> 16"), (8, "shrink 16 -> 8"))
PHASES = ("before", "during", "after")
VALUE_HEAD = struct.Struct(">IIq")  # key, per-key sequence number, send time (monotonic ns)
CLIENT_SETTINGS = {"metadata.max.age.ms": 1000, "heartbeat.interval.ms": 1000, "auto.commit.interval.ms": 1000}
BIN_S = 0.5  # time series resolution
SLOW_MAX_POLL_RECORDS = 50  # the slow member's max.poll.records


@dataclass
class Observations:
    """Everything one run saw, in seconds since the load started."""

    t0: float
    sent: int = 0
    send_errors: int = 0
    per_key_sent: dict[int, int] = field(default_factory=dict)
    # first delivery of each record: (delivered at, sent at, key, seq, partition)
    delivered: list[tuple[float, float, int, int, int]] = field(default_factory=list)
    redelivered: int = 0
    violations: int = 0
    assigned: list[tuple[float, int, int]] = field(default_factory=list)  # (t, consumer, partition)
    opened: list[tuple[float, int, int]] = field(default_factory=list)  # on_partition_key_assigned
    changes: list[dict[str, Any]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # a client task that failed
    _last_seq: dict[int, int] = field(default_factory=dict)

    def now(self) -> float:
        return time.monotonic() - self.t0

    def deliver(self, consumer: int, partition: int, value: bytes) -> None:
        key, seq, sent_ns = VALUE_HEAD.unpack_from(value)
        last = self._last_seq.get(key, -1)
        if seq <= last:
            self.redelivered += 1  # a rebalance delivers again from the committed offset
            return
        if seq != last + 1:
            self.violations += 1
        self._last_seq[key] = seq
        self.delivered.append((self.now(), sent_ns / 1e9 - self.t0, key, seq, partition))

    def missing(self) -> int:
        return sum(n - (self._last_seq.get(k, -1) + 1) for k, n in self.per_key_sent.items())


class Listener(ConsumerRebalanceListener, PartitionKeyRebalanceListener):
    """One consumer's rebalance and gate callbacks, timestamped."""

    def __init__(self, seen: Observations, consumer: int) -> None:
        self.seen, self.consumer = seen, consumer

    def on_partitions_assigned(self, partitions: list[TopicPartition]) -> None:
        now = self.seen.now()
        self.seen.assigned += [(now, self.consumer, tp.partition) for tp in partitions]

    def on_partition_key_assigned(self, partitions: list[TopicPartition]) -> None:
        now = self.seen.now()
        self.seen.opened += [(now, self.consumer, tp.partition) for tp in partitions]


async def produce(bootstrap: str, seen: Observations, args: argparse.Namespace, stop: asyncio.Event) -> None:
    """``args.rate`` records per second, keys in turn, on an absolute schedule."""
    padding = b"\0" * max(args.size - VALUE_HEAD.size, 0)
    keys = [b"key-%d" % k for k in range(args.keys)]

    def done(future: asyncio.Future[Any]) -> None:
        if future.cancelled() or future.exception() is not None:
            seen.send_errors += 1

    async with KafkaProducer({"bootstrap.servers": bootstrap, "client.id": "bench-producer",
                              "metadata.max.age.ms": CLIENT_SETTINGS["metadata.max.age.ms"]}) as producer:
        start = time.monotonic()
        while not stop.is_set():
            due = int((time.monotonic() - start) * args.rate)
            while seen.sent < due:
                key = seen.sent % args.keys
                seq = seen.per_key_sent.get(key, 0)
                value = VALUE_HEAD.pack(key, seq, time.monotonic_ns()) + padding
                (await producer.send(TOPIC, value, key=keys[key])).add_done_callback(done)
                seen.per_key_sent[key] = seq + 1
                seen.sent += 1
            await asyncio.sleep(0.005)
        await producer.flush()


async def consume(bootstrap: str, seen: Observations, number: int, stop: asyncio.Event, slow_poll_ms: float) -> None:
    """One group member; with ``slow_poll_ms`` it takes at most ``SLOW_MAX_POLL_RECORDS`` per poll
    and pauses that long after each, like an application that processes in batches."""
    config = {"bootstrap.servers": bootstrap, "group.id": "bench", "client.id": f"bench-consumer-{number}",
              "auto.offset.reset": "earliest", **CLIENT_SETTINGS}
    if slow_poll_ms:
        config["max.poll.records"] = SLOW_MAX_POLL_RECORDS
    listener = Listener(seen, number)
    async with KafkaConsumer(config) as consumer:
        consumer.subscribe([TOPIC], listener, listener)
        while not stop.is_set():
            for record in await consumer.poll(100):
                seen.deliver(number, record.partition, record.value)
            if slow_poll_ms:
                await asyncio.sleep(slow_poll_ms / 1000)


async def drain_and_remove(admin: Admin, seen: Observations, change: dict[str, Any], count: int, total: int) -> None:
    """Delete each marked partition's records once the group has consumed them all, then wait for
    the controller to remove the partitions."""
    marked = [TopicPartition(TOPIC, p) for p in range(count, total)]
    drained: dict[int, float] = {}
    while len(drained) < len(marked):
        committed = await admin.list_group_offsets("bench", marked)
        ends = await admin.list_offsets(marked, "latest")
        done = [tp for tp in marked if tp.partition not in drained and tp in committed
                and committed[tp].offset >= ends[tp].offset]
        if done:
            await admin.delete_records(dict.fromkeys(done, -1))
            drained.update(dict.fromkeys((tp.partition for tp in done), seen.now()))
        await asyncio.sleep(0.25)
    change["drained_s"] = max(drained.values())
    while len((await admin.describe_topics([TOPIC]))[0].partitions) != count:
        await asyncio.sleep(0.1)
    change["removed_s"] = seen.now()


async def run_load(bootstrap: str, mode: str, args: argparse.Namespace) -> Observations:
    seen = Observations(time.monotonic())
    stop_producing, stop_consuming = asyncio.Event(), asyncio.Event()
    async with Admin(bootstrap) as admin:
        await admin.create_topic(TOPIC, args.initial, 1, {"enable.ordered.delivery": str(mode == "ordered").lower()})
        seen.t0 = time.monotonic()
        tasks = [asyncio.ensure_future(consume(bootstrap, seen, n, stop_consuming, args.slow_poll_ms if n == 0 else 0))
                 for n in range(args.consumers)]
        producing = asyncio.ensure_future(produce(bootstrap, seen, args, stop_producing))
        drainer: asyncio.Future[None] | None = None
        try:
            partitions = args.initial
            for number, (count, label) in enumerate(CHANGES):
                await asyncio.sleep(max(args.warmup + number * args.step - seen.now(), 0))
                change: dict[str, Any] = {"label": label, "from": partitions, "to": count, "at_s": seen.now()}
                try:
                    await admin.create_partitions(TOPIC, count)
                    change["applied"] = True
                except AdminError as e:
                    change.update(applied=False, refused=str(e))
                change["answered_s"] = seen.now()
                seen.changes.append(change)
                if change["applied"] and count < partitions:
                    drainer = asyncio.ensure_future(drain_and_remove(admin, seen, change, count, partitions))
                if change["applied"]:
                    partitions = count
            await asyncio.sleep(max(args.warmup + len(CHANGES) * args.step - seen.now(), 0))
            stop_producing.set()
            await producing
            deadline = time.monotonic() + args.drain_timeout
            while len(seen.delivered) < seen.sent - seen.send_errors and time.monotonic() < deadline:
                await asyncio.sleep(0.1)
            if drainer is not None:
                await asyncio.wait_for(drainer, max(deadline - time.monotonic(), 1))
        finally:
            stop_producing.set()
            stop_consuming.set()
            outcomes = await asyncio.gather(producing, *tasks, return_exceptions=True)
            seen.errors += [repr(e) for e in outcomes if isinstance(e, BaseException)]
            if drainer is not None and not drainer.done():
                drainer.cancel()
    return seen


def gated_partitions(change: dict[str, Any], initial: int) -> list[int]:
    """The partitions a change gates: those it creates, or the survivors taking a marked
    partition's keys (linear hashing's split source of each marked partition)."""
    if change["to"] > change["from"]:
        return list(range(change["from"], change["to"]))
    hashing = _native.LinearHashing(initial, change["from"])
    return sorted({hashing.split_source(q) for q in range(change["to"], change["from"])})


def evaluate(seen: Observations, args: argparse.Namespace) -> dict[str, Any]:
    """Per change: gate waits and the three phases; the time series for the plot."""
    changes = []
    for index, change in enumerate(seen.changes):
        t, w = change["at_s"], args.window
        next_at = seen.changes[index + 1]["at_s"] if index + 1 < len(seen.changes) else float("inf")
        out = dict(change)
        waits, from_change = [], []
        if change["applied"]:
            for p in gated_partitions(change, args.initial):
                first_assigned = min((a for a, _, q in seen.assigned if q == p and t <= a < next_at), default=None)
                first_open = min((o for o, _, q in seen.opened if q == p and t <= o < next_at), default=None)
                if first_assigned is not None and first_open is not None and first_open >= first_assigned:
                    waits.append((first_open - first_assigned) * 1000)
                    from_change.append((first_open - t) * 1000)
        out["gate_wait_ms"] = waits
        out["gate_open_after_change_ms"] = from_change
        for name, lo in zip(PHASES, (t - w, t, t + w), strict=True):
            latencies = [(d - s) * 1000 for d, s, *_ in seen.delivered if lo <= s < lo + w]
            deliveries = sum(1 for d, *_ in seen.delivered if lo <= d < lo + w)
            out[name] = {"latency_ms": latency_summary(latencies), "throughput": deliveries / w}
        changes.append(out)
    end = max((d for d, *_ in seen.delivered), default=0.0)
    bins = int(end / BIN_S) + 1
    by_bin: list[list[float]] = [[] for _ in range(bins)]
    delivered_per_bin = [0] * bins
    for d, s, *_ in seen.delivered:
        by_bin[min(int(s / BIN_S), bins - 1)].append((d - s) * 1000)
        delivered_per_bin[int(d / BIN_S)] += 1
    return {
        "sent": seen.sent, "send_errors": seen.send_errors, "delivered": len(seen.delivered),
        "redelivered": seen.redelivered, "missing": seen.missing(), "violations": seen.violations,
        "client_errors": seen.errors,
        "assigned": seen.assigned, "opened": seen.opened,
        "changes": changes,
        "series": {
            "bin_s": BIN_S,
            "latency_p50_ms": [statistics.median(b) if b else None for b in by_bin],
            "latency_p99_ms": [sorted(b)[min(len(b) - 1, int(0.99 * len(b)))] if b else None for b in by_bin],
            "throughput": [n / BIN_S for n in delivered_per_bin],
        },
    }


def run_one(mode: str, repeat: int, args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    quiet = wait_for_quiet(args.quiet_cores, args.quiet_wait)
    run_dir = workdir / f"{mode}-{repeat}"
    run_dir.mkdir(parents=True)
    port = free_port()
    broker = Broker(broker_command("pybroker", port, run_dir / "data", None, args.python),  # type: ignore[arg-type]
                    broker_env("pybroker", args.add_repo_to_pythonpath), run_dir, run_dir / "broker.log")
    result: dict[str, Any] = {"mode": mode, "repeat": repeat, "quiet": quiet}
    try:
        broker.wait_ready(port, args.startup_timeout)
        seen = asyncio.run(run_load(f"127.0.0.1:{port}", mode, args))
        result.update(evaluate(seen, args))
        result["ok"] = (result["missing"] == 0 and result["send_errors"] == 0 and not result["client_errors"]
                        and (mode == "unordered" or result["violations"] == 0))
    except Exception as e:  # noqa: BLE001 (the run is reported as failed, with the broker's log)
        result.update(ok=False, error=repr(e), broker_log=broker.log_tail(3000))
    finally:
        result["broker_exit_code"] = broker.stop()
    return result


def pooled(runs: list[dict[str, Any]], mode: str, index: int, key: str) -> list[float]:
    return [x for r in runs if r["mode"] == mode and r.get("ok") for x in r["changes"][index][key]]


def summarize(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per change and mode: gate waits pooled over the runs; per phase the latency of the pooled
    records and the mean throughput."""
    out = []
    for index, (count, label) in enumerate(CHANGES):
        row: dict[str, Any] = {"label": label, "to": count}
        for mode in MODES:
            mine = [r for r in runs if r["mode"] == mode and r.get("ok") and len(r["changes"]) > index]
            if not mine:
                continue
            changes = [r["changes"][index] for r in mine]
            entry: dict[str, Any] = {
                "runs": len(mine), "applied": all(c["applied"] for c in changes),
                "gate_wait_ms": latency_summary(pooled(mine, mode, index, "gate_wait_ms")),
                "gate_open_after_change_ms": latency_summary(pooled(mine, mode, index, "gate_open_after_change_ms")),
            }
            for phase in PHASES:
                lat = [c[phase]["latency_ms"] for c in changes if c[phase]["latency_ms"]]
                entry[phase] = {
                    "latency_p50_ms": statistics.median(x["p50"] for x in lat) if lat else None,
                    "latency_p99_ms": statistics.median(x["p99"] for x in lat) if lat else None,
                    "latency_max_ms": max(x["max"] for x in lat) if lat else None,
                    "throughput": statistics.fmean(c[phase]["throughput"] for c in changes),
                }
            drained = [c["drained_s"] - c["at_s"] for c in changes if "drained_s" in c]
            removed = [c["removed_s"] - c["at_s"] for c in changes if "removed_s" in c]
            if drained:
                entry["drained_after_s"] = statistics.median(drained)
                entry["removed_after_s"] = statistics.median(removed)
            refused = {c.get("refused") for c in changes if not c["applied"]}
            if refused:
                entry["refused"] = sorted(refused)
            row[mode] = entry
        out.append(row)
    return out


def fmt(v: float | None, spec: str = ".1f") -> str:
    return "-" if v is None else format(v, spec)


def render_markdown(result: dict[str, Any]) -> str:
    p = result["parameters"]
    lines = [
        "# Ordered partition changes (KIP-253) under a steady keyed load",
        "",
        f"{provenance_line(result['provenance'])} Finished {result['finished_at']}; {result['wall_s']:.0f} s. "
        f"Machine: {result['machine']['nproc']} vCPU, {result['machine']['platform']}; load average at start "
        f"{' / '.join(f'{x:.2f}' for x in result['machine']['loadavg_start'])}.",
        "",
        f"One pybroker broker (default settings), topic `{TOPIC}` created with {p['initial']} partitions; "
        f"{p['rate']:.0f} keyed records/s of {p['size']} B over {p['keys']} keys from the project's producer, "
        f"{p['consumers']} consumers of the project's in one group"
        + (f" (consumer 0 slow: at most {SLOW_MAX_POLL_RECORDS} records per poll, then a {p['slow_poll_ms']:.0f} ms pause)"
           if p["slow_poll_ms"] else "")
        + f"; the topic changes every {p['step']:.0f} s "
        f"after {p['warmup']:.0f} s of load. {p['repeats']} runs per mode, alternating. Phases are "
        f"{p['window']:.0f} s long: before the change, from it, after those. Latency: send to first delivery, "
        "medians over the runs of each run's p50/p99 (of records sent in the phase); throughput: first "
        "deliveries per second, mean over the runs.",
        "",
        "## Gate waits (ordered)",
        "",
        "Per gated partition (created by the change; for the shrink, survivors taking a marked "
        "partition's keys): from its first assignment after the change to `on_partition_key_assigned`, "
        "and from the change itself; pooled over the runs.",
        "",
        "| change | gates | wait p50 ms | wait p99 ms | wait max ms | from the change p50 ms | p99 ms |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for row in result["summary"]:
        e = row.get("ordered")
        if not e or not e["gate_wait_ms"]:
            lines.append(f"| {row['label']} | 0 | - | - | - | - | - |")
            continue
        w, c = e["gate_wait_ms"], e["gate_open_after_change_ms"]
        lines.append(f"| {row['label']} | {w['n']} | {fmt(w['p50'])} | {fmt(w['p99'])} | {fmt(w['max'])} "
                     f"| {fmt(c['p50'])} | {fmt(c['p99'])} |")
    lines += [
        "",
        "## Latency and throughput before, during and after each change",
        "",
        "| change | mode | phase | latency p50 ms | p99 ms | max ms | records/s |",
        "|---|---|---|---:|---:|---:|---:|",
    ]
    for row in result["summary"]:
        for mode in MODES:
            e = row.get(mode)
            if not e:
                continue
            shown = mode if e["applied"] else f"{mode} (refused: no change)"
            for phase in PHASES:
                x = e[phase]
                lines.append(f"| {row['label']} | {shown} | {phase} | {fmt(x['latency_p50_ms'])} "
                             f"| {fmt(x['latency_p99_ms'])} | {fmt(x['latency_max_ms'])} | {fmt(x['throughput'], '.0f')} |")
    lines += ["", "## The shrink: drained by DeleteRecords, then removed", ""]
    shrink = result["summary"][-1]
    ordered = shrink.get("ordered", {})
    if "drained_after_s" in ordered:
        lines.append(f"After the shrink, the last marked partition was drained (consumed by the group, then "
                     f"DeleteRecords to its end) {ordered['drained_after_s']:.1f} s later and the partitions were "
                     f"removed {ordered['removed_after_s']:.1f} s after the shrink (medians over the runs).")
    if shrink.get("unordered", {}).get("refused"):
        lines.append("")
        lines.append(f"Without ordered delivery the shrink is refused: `{shrink['unordered']['refused'][0]}`.")
    lines += [
        "",
        "## Runs",
        "",
        "| mode | run | ok | sent | delivered | again (rebalances) | missing | order violations | send errors |",
        "|---|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in result["runs"]:
        lines.append(f"| {r['mode']} | {r['repeat']} | {r.get('ok')} | {r.get('sent', '-')} | {r.get('delivered', '-')} "
                     f"| {r.get('redelivered', '-')} | {r.get('missing', '-')} | {r.get('violations', '-')} "
                     f"| {r.get('send_errors', '-')} |")
        if r.get("error"):
            lines.append(f"|  |  | error: {r['error']} |  |  |  |  |  |  |")
    stem = "ordered_delivery" + (f"-{p['tag']}" if p["tag"] else "")
    lines += ["", f"Every run's gate waits, phases and time series are in `{stem}.json`; "
              f"`{stem}.png` plots the first run of each mode.", ""]
    return "\n".join(lines)


def plot(result: dict[str, Any], path: Path) -> bool:
    """Throughput and latency over time for the first good run of each mode, the changes marked;
    the gate waits of every run."""
    first = {mode: next((r for r in result["runs"] if r["mode"] == mode and r.get("ok")), None) for mode in MODES}
    if not any(first.values()):
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (thr, lat, gates) = plt.subplots(3, 1, figsize=(10, 10), gridspec_kw={"height_ratios": [1, 1.2, 0.8]})
    colors = {"ordered": "tab:blue", "unordered": "tab:orange"}
    for mode, r in first.items():
        if r is None:
            continue
        s = r["series"]
        times = [i * s["bin_s"] for i in range(len(s["throughput"]))]
        thr.plot(times, s["throughput"], color=colors[mode], lw=1, label=mode)
        p99 = [(t, v) for t, v in zip(times, s["latency_p99_ms"], strict=True) if v is not None]
        p50 = [(t, v) for t, v in zip(times, s["latency_p50_ms"], strict=True) if v is not None]
        lat.plot(*zip(*p99, strict=True), color=colors[mode], lw=1, label=f"{mode} p99")
        lat.plot(*zip(*p50, strict=True), color=colors[mode], lw=1, ls=":", label=f"{mode} p50")
        for c in r["changes"]:
            for ax in (thr, lat):
                ax.axvline(c["at_s"], color=colors[mode], ls="--", lw=0.7, alpha=0.6)
    for c in (first["ordered"] or first["unordered"])["changes"]:
        thr.annotate(c["label"], (c["at_s"], 0), xytext=(3, 3), textcoords="offset points", fontsize=7)
    thr.set_ylabel("first deliveries / s")
    thr.set_title(f"{result['parameters']['rate']:.0f} keyed records/s, one broker: throughput "
                  f"({result['parameters']['consumers']} consumers)", fontsize=9)
    lat.set_yscale("log")
    lat.set_ylabel("send -> delivery, ms (by send time)")
    lat.set_xlabel("s since the load started (dashed: a change)")
    for ax in (thr, lat):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    labels, samples = [], []
    for index, (_, label) in enumerate(CHANGES):
        labels.append(label)
        samples.append(pooled(result["runs"], "ordered", index, "gate_wait_ms"))
    gates.boxplot([s or [0.0] for s in samples], orientation="horizontal", tick_labels=labels, whis=(0, 100))
    for y, s in enumerate(samples, start=1):
        gates.scatter(s, [y] * len(s), s=8, color="tab:blue", alpha=0.6, zorder=3)
    gates.set_xlabel("gate wait, ms (first assignment after the change -> on_partition_key_assigned), every run")
    gates.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--rate", type=float, default=1000.0, help="keyed records per second")
    ap.add_argument("--keys", type=int, default=200, help="distinct keys, sent in turn")
    ap.add_argument("--size", type=int, default=100, help="record value size, bytes (at least 16)")
    ap.add_argument("--consumers", type=int, default=3, help="consumers in the group")
    ap.add_argument("--initial", type=int, default=4, help="partitions the topic is created with")
    ap.add_argument("--warmup", type=float, default=10.0, help="seconds of load before the first change")
    ap.add_argument("--step", type=float, default=15.0, help="seconds between changes (and after the last)")
    ap.add_argument("--window", type=float, default=5.0, help="length of each phase, seconds")
    ap.add_argument("--repeats", type=int, default=3, help="runs per mode (alternating)")
    ap.add_argument("--slow-poll-ms", type=float, default=0.0,
                    help=f"make consumer 0 slow: at most {SLOW_MAX_POLL_RECORDS} records per poll, then a pause this long")
    ap.add_argument("--tag", default="", help="suffix of the result files' name")
    ap.add_argument("--drain-timeout", type=float, default=60.0, help="seconds allowed to deliver everything at the end")
    ap.add_argument("--quiet-cores", type=float, default=0.3, help="wait for a machine using fewer cores than this")
    ap.add_argument("--quiet-wait", type=float, default=60.0, help="seconds to wait for it at most")
    ap.add_argument("--startup-timeout", type=float, default=60.0)
    ap.add_argument("--out", default=str(REPO / "bench" / "results"), help="results directory")
    ap.add_argument("--workdir", default=None, help="scratch directory (default: a new temporary one)")
    ap.add_argument("--keep-workdir", action="store_true")
    ap.add_argument("--python", default=sys.executable, help="interpreter that runs pybroker")
    args = ap.parse_args(argv)
    if args.rate <= 0 or args.keys < 1 or args.size < VALUE_HEAD.size or args.consumers < 1 or args.repeats < 1:
        ap.error(f"--rate > 0, --keys >= 1, --size >= {VALUE_HEAD.size}, --consumers >= 1, --repeats >= 1")
    if args.initial != 4:
        ap.error("--initial: the changes (4 -> 8 -> 16 -> 8) are written for 4")
    if 2 * args.window > args.step or args.window > args.warmup:
        ap.error("--window: two windows must fit in --step, one in --warmup")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    args.add_repo_to_pythonpath = bool(pybroker_import(args.python).get("add_repo_to_pythonpath"))
    runs: list[dict[str, Any]] = []
    with BenchRun.start(__file__, argv, args, prefix="bench-ordered-delivery-") as bench:
        for repeat in range(1, args.repeats + 1):
            for mode in MODES:
                r = run_one(mode, repeat, args, bench.workdir)
                runs.append(r)
                print(one_line(r), flush=True)
    result: dict[str, Any] = {
        **bench.head(),
        "parameters": {k: v for k, v in vars(args).items() if k != "add_repo_to_pythonpath"},
        "client_settings": CLIENT_SETTINGS,
        "machine": bench.machine,
        "runs": runs,
        "summary": summarize(runs),
    }
    bench.write("ordered_delivery" + (f"-{args.tag}" if args.tag else ""), result, render_markdown, plot)
    return 0 if runs and not bench.interrupted and all(r.get("ok") for r in runs) else 1


def one_line(r: dict[str, Any]) -> str:
    head = f"[{r['mode']} run {r['repeat']}] "
    if "error" in r:
        return head + "FAILED " + r["error"]
    waits = [f"{c['label']}: {fmt(statistics.median(c['gate_wait_ms'])) if c['gate_wait_ms'] else '-'} ms"
             for c in r["changes"]]
    return head + (f"sent {r['sent']}, delivered {r['delivered']}, missing {r['missing']}, violations "
                   f"{r['violations']}, send errors {r['send_errors']}; median gate waits " + ", ".join(waits))


if __name__ == "__main__":
    raise SystemExit(main())
