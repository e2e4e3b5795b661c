"""Leader failover as a client sees it: a confluent-kafka producer with default settings, writing
continuously into an RF=3 partition of a 3-broker cluster, while the leader is killed (kill -9) or
stopped cleanly (SIGTERM).

Usage::

    python bench/cluster_failover.py [--runs 5] [--scenarios kill,term] [--session-timeout-ms 18000]

Every run has a fresh 3-broker cluster (``bench/cluster.py``; default broker settings, so
``zookeeper.session.timeout.ms`` is Kafka's 18000 unless ``--session-timeout-ms`` says otherwise)
and a 1-partition RF=3 topic led by a broker that is not the controller. A confluent-kafka
``Producer`` with default settings (librdkafka's: acks=all, retries without end within
``message.timeout.ms`` 300000, no idempotence; only ``error_cb`` and ``logger`` are set, to count
what surfaces) produces ``--size``-byte records at ``--rate`` records/s, each carrying its sequence
number, and serves its delivery reports continuously. After ``--warmup`` s of acknowledged records
the harness sends the leader SIGKILL (*kill*) or SIGTERM (*term*: controlled shutdown) by PID.

**Failover time** = from the signal to the first delivery report of a record acknowledged by the
new leader: the first successful report whose offset is at or past the first offset written in a
later leader epoch (every record's leader epoch is read back afterwards). Records acknowledged by
the old leader just before the signal do not count, nor does a record produced after the signal
that a retry later delivers; retried records produced before the signal do count (they are what a
client waits for). Also reported: the first successful report after the signal of any kind, when a
surviving broker's Metadata first named the new leader (polled every 20 ms), the longest gap
between successful reports, the errors passed to the delivery callback and to ``error_cb``, and,
from reading the partition back, that every acknowledged record is there (and how many were
written twice by retries).

Targets (median of at least 3 runs): kill -9 <= session timeout + 2 s; SIGTERM < 1 s with no error
in any delivery report. Results: ``<out>/cluster_failover.{json,md,png}``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import functools
import logging
import os
import shutil
import signal
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import confluent_kafka  # noqa: E402
from broker_compare import REPO, wait_for_quiet  # noqa: E402
from brokers import (  # noqa: E402
    provenance_line,
    pybroker_import,
)
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition  # noqa: E402
from harness import BenchRun  # noqa: E402

from bench.cluster import KAFKA_SESSION_TIMEOUT_MS, LocalCluster, pick_roles, start_zookeeper  # noqa: E402

TOPIC = "failover"
SCENARIOS = {"kill": signal.SIGKILL, "term": signal.SIGTERM}
KILL_MARGIN_S = 2.0
TERM_LIMIT_S = 1.0
MIN_JUDGED = 3


class ListLogHandler(logging.Handler):
    """Keeps librdkafka's log lines (``logger`` property) with their time."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[tuple[float, str, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append((time.monotonic(), record.levelname, record.getMessage()[:300]))


class ContinuousProducer(threading.Thread):
    """A default-settings confluent-kafka Producer sending ``rate`` records/s until stopped; every
    delivery report kept as (report time, sequence number, produce time, offset, error)."""

    def __init__(self, bootstrap: str, rate: float, size: int) -> None:
        super().__init__(name="producer", daemon=True)
        self.logs = ListLogHandler()
        logger = logging.getLogger(f"bench.failover.rdkafka.{id(self)}")
        logger.propagate = False
        logger.setLevel(logging.DEBUG)
        logger.addHandler(self.logs)
        self.error_events: list[tuple[float, str, str]] = []
        self.producer = Producer({"bootstrap.servers": bootstrap, "error_cb": self._on_error, "logger": logger})
        self.rate = rate
        self.size = size
        self.reports: list[tuple[float, int, float, int, str | None]] = []
        self.produced = 0
        self.buffer_full = 0
        self._halt = threading.Event()
        self.exception: BaseException | None = None

    def _on_error(self, err: KafkaError) -> None:
        self.error_events.append((time.monotonic(), err.name(), err.str()[:300]))

    def _on_delivery(self, seq: int, t_produce: float, err: KafkaError | None, msg: Any) -> None:
        self.reports.append((time.monotonic(), seq, t_produce,
                             msg.offset() if err is None else -1, None if err is None else f"{err.name()}: {err.str()}"))

    def value(self, seq: int) -> bytes:
        head = b"%012d" % seq
        return head + b"x" * max(0, self.size - len(head))

    def run(self) -> None:
        try:
            interval = 1.0 / self.rate
            due = time.monotonic()
            seq = 0
            while not self._halt.is_set():
                now = time.monotonic()
                if now < due:
                    self.producer.poll(due - now)
                    continue
                try:
                    self.producer.produce(TOPIC, self.value(seq), partition=0,
                                          on_delivery=functools.partial(self._on_delivery, seq, now))
                    seq += 1
                    self.produced = seq
                except BufferError:
                    self.buffer_full += 1
                    self.producer.poll(0.01)
                due += interval
                if due < now - 1.0:  # fell far behind (machine busy): do not burst
                    due = now
            self.producer.poll(0)
        except BaseException as exc:  # reported by the run
            self.exception = exc

    def stop(self, flush_timeout: float) -> int:
        """Stop producing, wait for outstanding reports; the records still unreported."""
        self._halt.set()
        self.join(30)
        return self.producer.flush(flush_timeout)

    def successes_since(self, t: float) -> int:
        return sum(1 for r in list(self.reports) if r[0] > t and r[4] is None)


def read_back(bootstrap: str, end: int, timeout: float) -> list[tuple[int, int, int]]:
    """(offset, leader epoch, sequence number) of every record of the partition."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-failover-readback",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    out = []
    try:
        consumer.assign([TopicPartition(TOPIC, 0, 0)])
        deadline = time.monotonic() + timeout
        while len(out) < end and time.monotonic() < deadline:
            for m in consumer.consume(10000, 1.0):
                if m.error():
                    continue
                out.append((m.offset(), m.leader_epoch() if m.leader_epoch() is not None else -1,
                            int(m.value()[:12])))
    finally:
        consumer.close()
    return out


def run_one(scenario: str, run_no: int, zk_connect: str, args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    run_dir = workdir / f"{scenario}-run{run_no}"
    out: dict[str, Any] = {"scenario": scenario, "run": run_no, "ok": False,
                           "started_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds")}
    quiet = wait_for_quiet(args.quiet_cores, args.quiet_wait)
    out.update(pre_busy_cores=quiet["busy_cores"], pre_wait_s=quiet["waited_s"], loadavg_before=list(os.getloadavg()))
    cluster = LocalCluster(f"{zk_connect}/cluster-failover-{scenario}-{run_no}", run_dir,
                           overrides={"zookeeper.session.timeout.ms": args.session_timeout_ms},
                           python=args.python, add_repo_to_pythonpath=args.add_repo_to_pythonpath)
    producer: ContinuousProducer | None = None
    try:
        out["cluster_start_s"] = cluster.start(args.startup_timeout)
        controller, leader, followers = pick_roles(cluster)
        out.update(controller=controller, leader=leader)
        cluster.create_topic(TOPIC, [[leader, *followers]])
        epoch = cluster.partitions(TOPIC)[0].leader_epoch
        out["leader_epoch_before"] = epoch
        producer = ContinuousProducer(cluster.bootstrap(), args.rate, args.size)
        producer.start()
        t_start = time.monotonic()
        while producer.successes_since(t_start) == 0 or time.monotonic() - t_start < args.warmup:
            if time.monotonic() - t_start > 60:
                raise RuntimeError("no record acknowledged within 60 s of warm-up")
            time.sleep(0.05)
        survivor = cluster.node(controller)
        t_signal = cluster.signal(leader, SCENARIOS[scenario])
        # Watch a surviving broker's Metadata for the new leader (the broker side of the failover).
        deadline = t_signal + args.session_timeout_ms / 1000 + args.failover_timeout
        t_elected = None
        while time.monotonic() < deadline:
            try:
                state = cluster.partitions(TOPIC, survivor)[0]
                if state.leader not in (-1, leader):
                    t_elected = time.monotonic()
                    out.update(new_leader=state.leader, leader_epoch_after=state.leader_epoch, isr_after=state.isr)
                    break
            except Exception:
                pass
            time.sleep(0.02)
        if t_elected is None:
            raise RuntimeError(f"no new leader in the metadata within {deadline - t_signal:.0f} s")
        out["metadata_new_leader_s"] = t_elected - t_signal
        # Then until records are acknowledged again, for --after s.
        while producer.successes_since(t_elected) == 0 and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(args.after)
        unreported = producer.stop(args.flush_timeout)
        t_end = time.monotonic()
        if producer.exception:
            raise RuntimeError(f"producer thread failed: {producer.exception!r}")
        old = cluster.node(leader).process
        assert old is not None
        try:
            out["old_leader_exit_code"] = old.proc.wait(30)
        except Exception:
            out["old_leader_exit_code"] = None
        out.update(evaluate(producer, t_signal, t_end, epoch, unreported))
        end = cluster.end_offsets(TOPIC)[0]
        records = read_back(cluster.bootstrap(), end, 60)
        out.update(check_records(records, producer, epoch, end, t_signal))
        out["ok"] = out.get("failover_s") is not None and out["acked_missing"] == 0
        if not out["ok"]:
            out["error"] = ("no record acknowledged by the new leader" if out.get("failover_s") is None
                            else f"{out['acked_missing']} acknowledged records missing")
    except Exception as exc:
        out["error"] = f"{type(exc).__name__}: {exc}"
        out["broker_log_tails"] = cluster.log_tails()
        if producer is not None and producer.is_alive():
            producer.stop(5)
    finally:
        out["exit_codes"] = cluster.stop()
        if not args.keep_workdir:
            shutil.rmtree(run_dir, ignore_errors=True)
    return out


def evaluate(producer: ContinuousProducer, t_signal: float, t_end: float, epoch: int, unreported: int) -> dict[str, Any]:
    reports = sorted(producer.reports)
    ok_times = [r[0] for r in reports if r[4] is None]
    errors = [r for r in reports if r[4] is not None]
    gaps = [b - a for a, b in zip(ok_times, ok_times[1:], strict=False)]
    after = [r[0] - t_signal for r in reports if r[4] is None and r[0] > t_signal]
    return {
        "produced": producer.produced,
        "reports": len(reports),
        "unreported_after_flush": unreported,
        "buffer_full": producer.buffer_full,
        "delivery_errors": len(errors),
        "delivery_error_kinds": sorted({r[4].split(":")[0] for r in errors if r[4]}),
        "delivery_error_examples": [r[4] for r in errors[:5]],
        "delivery_errors_after_signal": sum(1 for r in errors if r[0] > t_signal),
        "error_events": [[round(t - t_signal, 3), name, text] for t, name, text in producer.error_events],
        "log_lines_after_signal": [[round(t - t_signal, 3), level, text] for t, level, text in producer.logs.lines
                                   if t > t_signal][:50],
        "first_ack_after_signal_s": after[0] if after else None,
        "longest_ack_gap_s": max(gaps) if gaps else None,
        "produced_after_signal_window_s": t_end - t_signal,
        # raw: (report time since signal, seq, produce time since signal, offset, error)
        "raw_reports": [[round(r[0] - t_signal, 4), r[1], round(r[2] - t_signal, 4), r[3], r[4]] for r in reports],
    }


def check_records(records: list[tuple[int, int, int]], producer: ContinuousProducer, epoch: int, end: int,
                  t_signal: float) -> dict[str, Any]:
    """From the partition read back: where the next leader epoch starts, the failover time, and
    whether every acknowledged record is there."""
    new_epoch_start = next((o for o, e, _ in records if e > epoch), None)
    acked = [r for r in producer.reports if r[4] is None]
    first_new = None
    if new_epoch_start is not None:
        new_acks = [r for r in acked if r[3] >= new_epoch_start]
        first_new = min(new_acks, key=lambda r: r[0]) if new_acks else None
    seqs = [s for _, _, s in records]
    present = set(seqs)
    return {
        "high_watermark": end,
        "records_read": len(records),
        "new_epoch_start_offset": new_epoch_start,
        "failover_s": None if first_new is None else first_new[0] - t_signal,
        "failover_record": None if first_new is None else {"seq": first_new[1], "offset": first_new[3],
                                                           "produced_s": first_new[2] - t_signal},
        "acked_missing": sum(1 for r in acked if r[1] not in present),
        "duplicates": len(seqs) - len(present),
        "epochs": sorted({e for _, e, _ in records}),
    }


def summarize(runs: list[dict[str, Any]], scenarios: list[str]) -> dict[str, Any]:
    out = {}
    for sc in scenarios:
        good = [r for r in runs if r["scenario"] == sc and r.get("ok")]
        entry: dict[str, Any] = {"runs_ok": len(good),
                                 "runs_failed": sum(1 for r in runs if r["scenario"] == sc and not r.get("ok"))}
        for key in ("failover_s", "metadata_new_leader_s", "first_ack_after_signal_s", "longest_ack_gap_s"):
            values = [r[key] for r in good if r.get(key) is not None]
            if values:
                entry[key] = {"median": statistics.median(values), "min": min(values), "max": max(values),
                              "values": values}
        entry["delivery_errors"] = sum(r.get("delivery_errors", 0) for r in good)
        entry["error_events"] = sum(len(r.get("error_events", [])) for r in good)
        entry["acked_missing"] = sum(r.get("acked_missing", 0) for r in good)
        out[sc] = entry
    return out


def targets(summary: dict[str, Any], session_timeout_ms: int) -> list[dict[str, Any]]:
    res = []
    limit = session_timeout_ms / 1000 + KILL_MARGIN_S
    for sc, name, ok in (
        ("kill", f"kill -9 of the leader -> first ack by the new leader <= session timeout + {KILL_MARGIN_S:.0f} s "
                 f"({limit:g} s)", lambda e: e["failover_s"]["median"] <= limit),
        ("term", f"SIGTERM of the leader -> first ack by the new leader < {TERM_LIMIT_S:.0f} s, no delivery error",
         lambda e: e["failover_s"]["median"] < TERM_LIMIT_S and e["delivery_errors"] == 0),
    ):
        entry = summary.get(sc)
        if not entry or "failover_s" not in entry:
            res.append({"target": name, "value": "n/a", "result": "not measured", "note": ""})
            continue
        f = entry["failover_s"]
        value = (f"median {f['median']:.3f} s (runs {', '.join(f'{v:.3f}' for v in f['values'])}); "
                 f"delivery errors {entry['delivery_errors']}")
        result = ("PASS" if ok(entry) else "FAIL") if entry["runs_ok"] >= MIN_JUDGED else "not judged"
        note = f"{entry['runs_ok']} run(s)"
        if entry["runs_failed"]:
            note += f", {entry['runs_failed']} failed"
        if entry["acked_missing"]:
            note += f"; {entry['acked_missing']} acknowledged records missing"
        res.append({"target": name, "value": value, "result": result, "note": note})
    return res


def fmt(v: float | None, spec: str = ".2f") -> str:
    return "—" if v is None else format(v, spec)


def render_markdown(result: dict[str, Any]) -> str:
    par = result["parameters"]
    lines = [
        "# Leader failover as a confluent-kafka producer sees it (3 brokers, RF=3)",
        "",
        f"{provenance_line(result['provenance'])} Finished {result['finished_at']}; "
        f"{result['wall_s'] / 60:.1f} min. Machine: {result['machine']['nproc']} vCPU, "
        f"{result['machine']['platform']}; load average at start "
        f"{' / '.join(f'{x:.2f}' for x in result['machine']['loadavg_start'])}.",
        "",
        f"Every run: a fresh cluster of 3 pybroker processes and ZooKeeper (tickTime {par['zk_tick_ms']} ms: a "
        "session expires up to one tick after its timeout), default broker settings with "
        f"zookeeper.session.timeout.ms {par['session_timeout_ms']}; a 1-partition RF=3 topic led by a "
        f"non-controller broker. confluent-kafka {result['versions']['confluent_kafka']} (librdkafka "
        f"{result['versions']['librdkafka']}), default settings (acks=all), {par['rate']:g} records/s of "
        f"{par['size']} B. *Failover* = signal → the first delivery report of a record the new leader "
        "acknowledged (offset in the new leader epoch). *Metadata* = signal → a surviving broker names the new "
        "leader. *First ack* = the first successful report after the signal, of any leader.",
        "",
        "| scenario | runs | failover s, median (min-max) | metadata s | first ack s | longest ack gap s | "
        "delivery errors | error_cb events | acked records missing |",
        "|---|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for sc, e in result["summary"].items():
        f = e.get("failover_s")
        cell = f"{f['median']:.2f} ({f['min']:.2f}-{f['max']:.2f})" if f else "—"
        lines.append(
            f"| {sc} | {e['runs_ok']}/{e['runs_ok'] + e['runs_failed']} | {cell} | "
            f"{fmt((e.get('metadata_new_leader_s') or {}).get('median'))} | "
            f"{fmt((e.get('first_ack_after_signal_s') or {}).get('median'))} | "
            f"{fmt((e.get('longest_ack_gap_s') or {}).get('median'))} | {e['delivery_errors']} | "
            f"{e['error_events']} | {e['acked_missing']} |")
    lines += ["", "## Targets", "", "| target | value | result | note |", "|---|---|---|---|"]
    for t in result["targets"]:
        lines.append(f"| {t['target']} | {t['value']} | {t['result']} | {t['note']} |")
    lines += ["", "## Runs", "",
              "| scenario | run | busy cores before | failover s | metadata s | first ack s | longest gap s | "
              "produced | delivery errors | error_cb events | duplicates | old leader exit | status |",
              "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in result["runs"]:
        status = "ok" if r.get("ok") else "FAILED: " + str(r.get("error", "?")).replace("|", "/")[:160]
        events = ", ".join(sorted({e[1] for e in r.get("error_events", [])})) or "0"
        if r.get("error_events"):
            events = f"{len(r['error_events'])} ({events})"
        lines.append(
            f"| {r['scenario']} | {r['run']} | {r.get('pre_busy_cores', 0):.2f} | {fmt(r.get('failover_s'))} | "
            f"{fmt(r.get('metadata_new_leader_s'))} | {fmt(r.get('first_ack_after_signal_s'))} | "
            f"{fmt(r.get('longest_ack_gap_s'))} | {r.get('produced', '—')} | {r.get('delivery_errors', '—')} | "
            f"{events} | {r.get('duplicates', '—')} | {r.get('old_leader_exit_code', '—')} | {status} |")
    lines += ["", "Every delivery report (time since the signal, sequence number, offset, error) is in the JSON.",
              ""]
    return "\n".join(lines)


def plot(result: dict[str, Any], path: Path) -> bool:
    """Per scenario: acknowledged records over time since the signal, one line per run."""
    scenarios = [sc for sc in result["summary"] if any(r["scenario"] == sc and r.get("raw_reports")
                                                       for r in result["runs"])]
    if not scenarios:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(scenarios), figsize=(6 * len(scenarios), 4.2), squeeze=False)
    for ax, sc in zip(axes[0], scenarios, strict=True):
        for r in result["runs"]:
            if r["scenario"] != sc or not r.get("raw_reports"):
                continue
            times = [x[0] for x in r["raw_reports"] if x[4] is None]
            base = sum(1 for t in times if t <= 0)
            line, = ax.plot(times, [i + 1 - base for i in range(len(times))], lw=1, label=f"run {r['run']}")
            if r.get("failover_s") is not None:
                ax.axvline(r["failover_s"], color=line.get_color(), ls=":", lw=0.8)
        ax.axvline(0, color="k", lw=0.8)
        if sc == "kill":
            ax.axvline(result["parameters"]["session_timeout_ms"] / 1000, color="grey", ls="--", lw=0.8,
                       label="session timeout")
        ax.set_xlabel(f"s since {'SIGKILL' if sc == 'kill' else 'SIGTERM'} of the leader")
        ax.set_ylabel("records acknowledged since the signal")
        ax.set_title(f"{sc}: dotted = first ack by the new leader", fontsize=9)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle("pybroker, 3 brokers, RF=3: confluent-kafka producer with default settings", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--scenarios", default="kill,term", help="comma-separated: kill (SIGKILL), term (SIGTERM)")
    ap.add_argument("--runs", type=int, default=5, help="runs per scenario (alternating)")
    ap.add_argument("--session-timeout-ms", type=int, default=KAFKA_SESSION_TIMEOUT_MS,
                    help="the brokers' zookeeper.session.timeout.ms")
    ap.add_argument("--zk-tick-ms", type=int, default=2000, help="ZooKeeper tickTime")
    ap.add_argument("--rate", type=float, default=1000.0, help="records per second")
    ap.add_argument("--size", type=int, default=100, help="record size, bytes (at least 12)")
    ap.add_argument("--warmup", type=float, default=2.0, help="seconds of producing before the signal")
    ap.add_argument("--after", type=float, default=2.0,
                    help="seconds of producing after records are acknowledged again")
    ap.add_argument("--failover-timeout", type=float, default=30.0,
                    help="a run fails without a new leader within session timeout + this, s")
    ap.add_argument("--flush-timeout", type=float, default=60.0, help="seconds for the producer's final flush")
    ap.add_argument("--out", default=str(REPO / "bench" / "results"), help="results directory")
    ap.add_argument("--workdir", default=None, help="scratch dir (default: a new temp dir)")
    ap.add_argument("--keep-workdir", action="store_true", help="keep broker data dirs and logs")
    ap.add_argument("--startup-timeout", type=float, default=60.0, help="seconds for the cluster to form")
    ap.add_argument("--quiet-cores", type=float, default=0.3,
                    help="before each run, wait until the machine's busy CPU (1 s sample) is below this")
    ap.add_argument("--quiet-wait", type=float, default=60.0, help="longest wait for --quiet-cores, s")
    ap.add_argument("--python", default=sys.executable, help="interpreter that runs pybroker")
    args = ap.parse_args(argv)
    args.scenarios = [s.strip() for s in args.scenarios.split(",") if s.strip()]
    if not args.scenarios or any(s not in SCENARIOS for s in args.scenarios):
        ap.error(f"--scenarios: from {', '.join(SCENARIOS)}")
    if args.runs < 1 or args.rate <= 0 or args.size < 12:
        ap.error("--runs >= 1, --rate > 0, --size >= 12")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    pyb = pybroker_import(args.python)
    args.add_repo_to_pythonpath = bool(pyb.get("add_repo_to_pythonpath"))
    runs: list[dict[str, Any]] = []
    with BenchRun.start(__file__, argv, args, prefix="bench-cluster-failover-") as bench:
        zk = start_zookeeper(bench.workdir / "zookeeper", args.zk_tick_ms)
        try:
            for run_no in range(1, args.runs + 1):
                for sc in args.scenarios:
                    r = run_one(sc, run_no, zk.connect_string, args, bench.workdir)
                    runs.append(r)
                    print(one_line(r), flush=True)
        finally:
            zk.stop()
    summary = summarize(runs, args.scenarios)
    result: dict[str, Any] = {
        **bench.head(),
        "parameters": vars(args),
        "producer_settings": "confluent-kafka defaults; error_cb and logger set to observe",
        "machine": bench.machine,
        "versions": {"confluent_kafka": confluent_kafka.__version__, "librdkafka": confluent_kafka.libversion()[0],
                     "pybroker_import": pyb, "python": sys.version.split()[0]},
        "runs": runs,
        "summary": summary,
        "targets": targets(summary, args.session_timeout_ms),
    }
    bench.write("cluster_failover", result, render_markdown, plot)
    return 0 if runs and not bench.interrupted and all(r.get("ok") for r in runs) else 1


def one_line(r: dict[str, Any]) -> str:
    head = f"[{r['scenario']} run {r['run']}] "
    if not r.get("ok"):
        return head + "FAILED " + str(r.get("error"))
    return head + (f"failover {r['failover_s']:.2f} s (metadata {r['metadata_new_leader_s']:.2f} s, first ack "
                   f"{fmt(r.get('first_ack_after_signal_s'))} s), longest gap {fmt(r.get('longest_ack_gap_s'))} s, "
                   f"delivery errors {r['delivery_errors']}, error_cb {len(r['error_events'])}, "
                   f"duplicates {r['duplicates']}")


if __name__ == "__main__":
    raise SystemExit(main())
