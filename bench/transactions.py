"""Transactions' cost on one broker: a transactional producer committing every 100 / 1,000 / 10,000
records against the idempotent producer, and read_committed against read_uncommitted consume.

Usage::

    python bench/transactions.py [--records 500000] [--size 100] [--partitions 4] [--runs 3]
                                 [--commit-every 100,1000,10000] [--consume-records 1000000]

Every run starts a fresh pybroker (``python -m pybroker serve``, default settings, a free port on
127.0.0.1, stopped by PID) and measures, in an order that rotates from run to run:

* **Produce**, one mode at a time, each into a topic of its own (``--partitions`` partitions),
  with a confluent-kafka ``Producer`` and librdkafka's defaults (acks=all, linger.ms 5):
  *idempotent* (``enable.idempotence=true``, flushed at the end) and *txn-K* for every K of
  ``--commit-every`` (``transactional.id``; ``init_transactions`` untimed, then begin, K records,
  ``commit_transaction``, until ``--records``). Records are ``--size`` bytes, sent round-robin
  over the partitions, so every transaction writes every partition and its commit sends one marker
  to each. Timed from the first ``produce`` to the end of the last commit (or flush). Reported:
  records/s, MB/s of payload, the broker's CPU seconds per GB, and the commit's latency as the
  client sees it (``commit_transaction``, which includes flushing the transaction's records): its
  mean, percentiles, and how many commits took 15 ms or more (librdkafka waits 20 ms before it
  retries an AddPartitionsToTxn answered CONCURRENT_TRANSACTIONS, which the coordinator answers,
  as Kafka's does, while the previous transaction's markers are still being written).
* **Consume**, of one topic of ``--consume-records`` records written in transactions of
  ``--consume-txn`` records, every ``--abort-every``-th of them aborted: a confluent-kafka
  ``Consumer`` assigned every partition from the beginning reads to the end of each, once with
  ``isolation.level=read_committed`` and once with ``read_uncommitted``, with librdkafka's
  defaults except ``fetch.queue.backoff.ms=10`` (by default librdkafka stops fetching for a whole
  second whenever the Python loop falls ``queued.min.messages`` behind, which would make the
  figure that pause). Reported: records delivered/s (bound by the client's per-record work), the
  log's MB/s (every written record's payload, the aborted ones included, over the time) and the
  broker's CPU per GB of log, the figure of the broker's own cost. A run fails unless
  read_committed delivered exactly the committed records and read_uncommitted all of them.

Before each phase the machine must be quiet (``--quiet-cores``). Medians over the runs. Results:
``<out>/transactions.{json,md,png}``; exit status 0 only if every run succeeded.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import confluent_kafka  # noqa: E402
from broker_compare import REPO, wait_for_quiet  # noqa: E402
from brokers import (  # noqa: E402
    Broker,
    broker_command,
    broker_env,
    free_port,
    group_cpu_seconds,
    provenance_line,
    pybroker_import,
)
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402
from harness import BenchRun  # noqa: E402

ISOLATION_LEVELS = ("read_committed", "read_uncommitted")


class NoTansu:
    tansu = None


def produce_all(producer: Producer, topic: str, partitions: int, value: bytes, start: int, count: int) -> None:
    """``count`` records, round-robin over the partitions from record ``start``; waits for room
    in librdkafka's queue when it is full."""
    for i in range(start, start + count):
        while True:
            try:
                producer.produce(topic, value, partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.005)
        if i % 1000 == 0:
            producer.poll(0)


def delivery_counter() -> tuple[dict[str, int], Any]:
    counts = {"ok": 0, "failed": 0}

    def on_delivery(err: KafkaError | None, _msg: object) -> None:
        counts["failed" if err is not None else "ok"] += 1

    return counts, on_delivery


def run_produce(bootstrap: str, broker: Broker, topic: str, mode: str, args: argparse.Namespace) -> dict[str, Any]:
    """One produce mode: ``idempotent`` or ``txn-K``."""
    counts, on_delivery = delivery_counter()
    config: dict[str, Any] = {"bootstrap.servers": bootstrap, "on_delivery": on_delivery}
    commit_every = int(mode.split("-")[1]) if mode.startswith("txn-") else None
    if commit_every is None:
        config["enable.idempotence"] = True
    else:
        config["transactional.id"] = f"bench-{topic}"
    producer = Producer(config)
    value = b"x" * args.size
    commits: list[float] = []
    if commit_every is not None:
        producer.init_transactions(60)
    cpu0, t0 = group_cpu_seconds(broker.pid), time.perf_counter()
    if commit_every is None:
        produce_all(producer, topic, args.partitions, value, 0, args.records)
        left = producer.flush(args.phase_timeout)
        if left:
            raise RuntimeError(f"{left} records not delivered within {args.phase_timeout} s")
    else:
        for start in range(0, args.records, commit_every):
            producer.begin_transaction()
            produce_all(producer, topic, args.partitions, value, start, min(commit_every, args.records - start))
            c0 = time.perf_counter()
            producer.commit_transaction(args.phase_timeout)
            commits.append(time.perf_counter() - c0)
    elapsed = time.perf_counter() - t0
    cpu = group_cpu_seconds(broker.pid) - cpu0
    if counts != {"ok": args.records, "failed": 0}:
        raise RuntimeError(f"deliveries: {counts}, expected {args.records} ok")
    payload = args.records * args.size
    result: dict[str, Any] = {
        "mode": mode, "seconds": elapsed, "msg_s": args.records / elapsed, "mb_s": payload / elapsed / 1e6,
        "broker_cpu_s": cpu, "broker_cpu_s_per_gb": cpu / (payload / 1e9), "transactions": len(commits),
    }
    if commits:
        ordered = sorted(commits)
        result["commit_ms"] = {"mean": 1000 * statistics.fmean(ordered), "p50": 1000 * statistics.median(ordered),
                               "p99": 1000 * ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))],
                               "max": 1000 * ordered[-1]}
        result["commits_15ms_or_more"] = sum(1 for c in ordered if c >= 0.015)
    return result


def write_consume_topic(bootstrap: str, topic: str, args: argparse.Namespace) -> dict[str, int]:
    """Transactions of ``--consume-txn`` records, every ``--abort-every``-th aborted."""
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"bench-{topic}"})
    producer.init_transactions(60)
    value = b"x" * args.size
    committed = aborted = 0
    for n, start in enumerate(range(0, args.consume_records, args.consume_txn), start=1):
        count = min(args.consume_txn, args.consume_records - start)
        producer.begin_transaction()
        produce_all(producer, topic, args.partitions, value, start, count)
        if args.abort_every and n % args.abort_every == 0:
            producer.flush(args.phase_timeout)
            producer.abort_transaction(args.phase_timeout)
            aborted += count
        else:
            producer.commit_transaction(args.phase_timeout)
            committed += count
    return {"committed": committed, "aborted": aborted}


def run_consume(bootstrap: str, broker: Broker, topic: str, isolation: str, written: dict[str, int],
                args: argparse.Namespace) -> dict[str, Any]:
    """Read every partition from the beginning to its end (partition EOF) at ``isolation``."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{topic}-{isolation}",
                         "enable.auto.commit": False, "enable.partition.eof": True, "isolation.level": isolation,
                         "fetch.queue.backoff.ms": 10})
    delivered, ended = 0, set()
    try:
        cpu0, t0 = group_cpu_seconds(broker.pid), time.perf_counter()
        consumer.assign([TopicPartition(topic, p, 0) for p in range(args.partitions)])
        deadline = t0 + args.phase_timeout
        while len(ended) < args.partitions:
            if time.perf_counter() > deadline:
                raise RuntimeError(f"{isolation}: {delivered} records, {len(ended)} partitions ended "
                                   f"after {args.phase_timeout} s")
            for message in consumer.consume(10000, 0.5):
                error = message.error()
                if error is None:
                    delivered += 1
                elif error.code() == KafkaError._PARTITION_EOF:
                    ended.add(message.partition())
                else:
                    raise KafkaException(error)
        elapsed = time.perf_counter() - t0
        cpu = group_cpu_seconds(broker.pid) - cpu0
    finally:
        consumer.close()
    expected = written["committed"] + (written["aborted"] if isolation == "read_uncommitted" else 0)
    if delivered != expected:
        raise RuntimeError(f"{isolation} delivered {delivered} records, expected {expected}")
    log_bytes = args.consume_records * args.size
    return {"isolation": isolation, "seconds": elapsed, "records": delivered, "msg_s": delivered / elapsed,
            "log_mb_s": log_bytes / elapsed / 1e6, "broker_cpu_s": cpu,
            "broker_cpu_s_per_gb": cpu / (log_bytes / 1e9)}


def create_topics(bootstrap: str, names: list[str], partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(name, partitions, 1) for name in names]).values():
        future.result(60)


def rotated(items: list[str], by: int) -> list[str]:
    return items[by % len(items):] + items[:by % len(items)]


def run_one(run_no: int, args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    """A fresh broker; every produce mode, then the consume topic read at both isolation levels."""
    run_dir = workdir / f"run-{run_no}"
    run_dir.mkdir(parents=True)
    port = free_port()
    cmd = broker_command("pybroker", port, run_dir / "data", NoTansu(), args.python)
    broker = Broker(cmd, broker_env("pybroker", args.add_repo_to_pythonpath), REPO, run_dir / "broker.log")
    run: dict[str, Any] = {"run": run_no, "ok": False, "produce": [], "consume": []}
    try:
        broker.wait_ready(port, args.startup_timeout)
        bootstrap = f"127.0.0.1:{port}"
        modes = rotated(["idempotent", *(f"txn-{k}" for k in args.commit_every)], run_no - 1)
        create_topics(bootstrap, [f"produce-{m}" for m in modes] + ["consume"], args.partitions)
        for mode in modes:
            quiet = wait_for_quiet(args.quiet_cores, args.quiet_wait)
            run["produce"].append({**run_produce(bootstrap, broker, f"produce-{mode}", mode, args), "quiet": quiet})
        run["consume_written"] = write_consume_topic(bootstrap, "consume", args)
        for isolation in rotated(list(ISOLATION_LEVELS), run_no - 1):
            quiet = wait_for_quiet(args.quiet_cores, args.quiet_wait)
            run["consume"].append({**run_consume(bootstrap, broker, "consume", isolation, run["consume_written"], args),
                                   "quiet": quiet})
        run["ok"] = True
    except Exception as exc:  # the run fails, the others go on
        run["error"] = f"{type(exc).__name__}: {exc}"
        run["broker_log_tail"] = broker.log_tail()
    finally:
        broker.stop()
    return run


def median_of(runs: list[dict[str, Any]], phase: str, key: str, name: str, metric: str) -> float | None:
    values = [p[metric] for r in runs if r["ok"] for p in r[phase] if p[key] == name]
    return statistics.median(values) if values else None


def summarize(runs: list[dict[str, Any]], args: argparse.Namespace) -> dict[str, Any]:
    modes = ["idempotent", *(f"txn-{k}" for k in args.commit_every)]
    produce = {m: {metric: median_of(runs, "produce", "mode", m, metric)
                   for metric in ("msg_s", "mb_s", "broker_cpu_s_per_gb")} for m in modes}
    for m in modes[1:]:
        for stat in ("mean", "p50"):
            values = [p["commit_ms"][stat] for r in runs if r["ok"] for p in r["produce"] if p["mode"] == m]
            produce[m][f"commit_{stat}_ms"] = statistics.median(values) if values else None
        slow = [p["commits_15ms_or_more"] / p["transactions"] for r in runs if r["ok"] for p in r["produce"]
                if p["mode"] == m]
        produce[m]["commits_15ms_or_more"] = statistics.median(slow) if slow else None
        base, own = produce["idempotent"]["msg_s"], produce[m]["msg_s"]
        produce[m]["vs_idempotent"] = own / base if base and own else None
    consume = {i: {metric: median_of(runs, "consume", "isolation", i, metric)
                   for metric in ("msg_s", "log_mb_s", "broker_cpu_s_per_gb")} for i in ISOLATION_LEVELS}
    return {"produce": produce, "consume": consume, "successful_runs": sum(r["ok"] for r in runs), "runs": len(runs)}


def fmt(v: float | None, spec: str = ",.0f") -> str:
    return "n/a" if v is None else format(v, spec)


def render_markdown(result: dict[str, Any]) -> str:
    p, s = result["parameters"], result["summary"]
    lines = [
        f"# Transactions: {p['records']:,} records x {p['size']} B, {p['partitions']} partitions, "
        f"{p['runs']} runs",
        "",
        provenance_line(result["provenance"]) + f" Finished {result['finished_at']}.",
        "",
        f"One pybroker with default settings; confluent-kafka {result['versions']['confluent_kafka']} (librdkafka "
        f"{result['versions']['librdkafka']}) with its defaults. Medians of {s['successful_runs']}/{s['runs']} "
        "successful runs. MB = 10^6 bytes of record payload.",
        "",
        "## Produce",
        "",
        "| producer | msg/s | MB/s | vs idempotent | commit mean / p50 ms | commits >= 15 ms | broker CPU s/GB |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for mode, m in s["produce"].items():
        label = "idempotent" if mode == "idempotent" else f"transactional, commit every {int(mode[4:]):,}"
        commit = "" if mode == "idempotent" else (f"{fmt(m.get('commit_mean_ms'), '.2f')} / "
                                                   f"{fmt(m.get('commit_p50_ms'), '.2f')}")
        slow = "" if mode == "idempotent" else f"{fmt(100 * (m.get('commits_15ms_or_more') or 0), '.0f')} %"
        lines.append(f"| {label} | {fmt(m['msg_s'])} | {fmt(m['mb_s'], '.1f')} | "
                     f"{fmt(m.get('vs_idempotent'), '.2f')} | {commit} | {slow} | "
                     f"{fmt(m['broker_cpu_s_per_gb'], '.2f')} |")
    lines += [
        "",
        f"## Consume ({p['consume_records']:,} records in transactions of {p['consume_txn']:,}, every "
        f"{p['abort_every']}th aborted; fetch.queue.backoff.ms=10)",
        "",
        "| isolation.level | records delivered/s | log MB/s | broker CPU s/GB of log |",
        "|---|---:|---:|---:|",
    ]
    for isolation, m in s["consume"].items():
        lines.append(f"| {isolation} | {fmt(m['msg_s'])} | {fmt(m['log_mb_s'], '.1f')} | "
                     f"{fmt(m['broker_cpu_s_per_gb'], '.2f')} |")
    lines += ["", "## Runs", "",
              "| run | phase | msg/s | s | broker CPU s | commit mean / p50 / p99 / max ms | commits >= 15 ms "
              "| busy cores before |",
              "|---:|---|---:|---:|---:|---|---:|---:|"]
    for r in result["runs"]:
        if not r["ok"]:
            lines.append(f"| {r['run']} | FAILED: {r.get('error')} | | | | | | |")
            continue
        for ph in r["produce"] + r["consume"]:
            c = ph.get("commit_ms")
            commit = f"{c['mean']:.2f} / {c['p50']:.2f} / {c['p99']:.2f} / {c['max']:.2f}" if c else ""
            slow = f"{ph['commits_15ms_or_more']} of {ph['transactions']}" if c else ""
            lines.append(f"| {r['run']} | {ph.get('mode') or ph.get('isolation')} | {fmt(ph['msg_s'])} | "
                         f"{ph['seconds']:.2f} | {ph['broker_cpu_s']:.2f} | {commit} | {slow} | "
                         f"{ph['quiet']['busy_cores']:.2f} |")
    return "\n".join(lines) + "\n"


def plot(result: dict[str, Any], path: Path) -> bool:
    """Median produce and consume throughput, one bar per producer and per isolation level."""
    s = result["summary"]
    if not s["successful_runs"]:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8), gridspec_kw={"width_ratios": [2, 1]})
    names = list(s["produce"])
    left.bar(names, [s["produce"][n]["msg_s"] or 0 for n in names], color="tab:blue")
    left.set_ylabel("records/s")
    left.set_title("produce: idempotent vs transactional (commit every K)", fontsize=9)
    right.bar(list(s["consume"]), [s["consume"][n]["msg_s"] or 0 for n in s["consume"]], color="tab:green")
    right.set_title("consume: records delivered/s (client-bound)", fontsize=9)
    for ax in (left, right):
        ax.grid(axis="y", alpha=0.3)
        ax.tick_params(axis="x", labelsize=8)
    p = result["parameters"]
    fig.suptitle(f"pybroker, 1 broker: {p['records']:,} x {p['size']} B over {p['partitions']} partitions, "
                 f"confluent-kafka defaults", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--records", type=int, default=500_000, help="records per produce mode")
    ap.add_argument("--consume-records", type=int, default=1_000_000, help="records in the consume topic")
    ap.add_argument("--size", type=int, default=100, help="record size, bytes")
    ap.add_argument("--partitions", type=int, default=4, help="partitions of every topic")
    ap.add_argument("--runs", type=int, default=3, help="runs, each on a fresh broker")
    ap.add_argument("--commit-every", default="100,1000,10000", help="transaction sizes, records")
    ap.add_argument("--consume-txn", type=int, default=1000, help="records per transaction of the consume topic")
    ap.add_argument("--abort-every", type=int, default=10, help="every N-th transaction of the consume topic aborted")
    ap.add_argument("--phase-timeout", type=float, default=600.0, help="seconds allowed for each phase")
    ap.add_argument("--startup-timeout", type=float, default=60.0, help="seconds for the broker to listen")
    ap.add_argument("--quiet-cores", type=float, default=0.3,
                    help="before each phase, wait until the machine's busy CPU (1 s sample) is below this")
    ap.add_argument("--quiet-wait", type=float, default=60.0, help="longest wait for --quiet-cores, s")
    ap.add_argument("--out", default=str(REPO / "bench" / "results"), help="results directory")
    ap.add_argument("--workdir", default=None, help="scratch dir (default: a new temp dir)")
    ap.add_argument("--keep-workdir", action="store_true", help="keep broker data dirs and logs")
    ap.add_argument("--python", default=sys.executable, help="interpreter that runs pybroker")
    args = ap.parse_args(argv)
    args.commit_every = [int(k) for k in args.commit_every.split(",") if k.strip()]
    if (args.runs < 1 or args.records < 1 or args.consume_records < 1 or args.size < 1 or args.partitions < 1 or args.consume_txn < 1
            or args.abort_every < 0 or not args.commit_every or min(args.commit_every) < 1):
        ap.error("--runs, --records, --consume-records, --size, --partitions, --consume-txn and every "
                 "--commit-every must be >= 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    pyb = pybroker_import(args.python)
    args.add_repo_to_pythonpath = bool(pyb.get("add_repo_to_pythonpath"))
    runs: list[dict[str, Any]] = []
    with BenchRun.start(__file__, argv, args, prefix="bench-transactions-") as bench:
        for run_no in range(1, args.runs + 1):
            r = run_one(run_no, args, bench.workdir)
            runs.append(r)
            print(one_line(r), flush=True)
    result: dict[str, Any] = {
        **bench.head(),
        "parameters": vars(args),
        "machine": bench.machine,
        "versions": {"confluent_kafka": confluent_kafka.version()[0], "librdkafka": confluent_kafka.libversion()[0],
                     "pybroker_import": pyb, "python": sys.version.split()[0]},
        "runs": runs,
        "summary": summarize(runs, args),
    }
    bench.write("transactions", result, render_markdown, plot)
    return 0 if runs and not bench.interrupted and all(r["ok"] for r in runs) else 1


def one_line(r: dict[str, Any]) -> str:
    head = f"[run {r['run']}] "
    if not r["ok"]:
        return head + "FAILED " + str(r.get("error"))
    return head + ", ".join([f"{p['mode']} {p['msg_s']:,.0f} msg/s" for p in r["produce"]]
                            + [f"{c['isolation']} {c['msg_s']:,.0f} msg/s" for c in r["consume"]])


if __name__ == "__main__":
    raise SystemExit(main())
