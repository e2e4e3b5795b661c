"""Many-partitions benchmark: produce throughput and broker CPU against the partition count,
topic creation (and what it does to another client's produce latency), and start-up.

Usage::

    python bench/partitions.py [--partitions 1,10,100,1000,10000] [--records 1000000] [--size 100]
                               [--runs 3] [--control-of 1000] [--reference-partitions 10,1000]
                               [--create 1000,10000] [--startup-partitions 10000]

Every broker is a fresh ``python -m pybroker serve`` with default settings on 127.0.0.1:<free
port> and a fresh data dir under the work dir (as in ``bench/brokers.py``), in its own process
group, stopped by PID (SIGTERM, SIGKILL after a grace period), also on errors and SIGTERM/Ctrl-C.
The clients are confluent-kafka (librdkafka): an AdminClient for CreateTopics and Metadata
(``list_topics``), Producers as described below.

1. **Throughput sweep.** For every P in ``--partitions`` and run 1..``--runs``: a fresh broker,
   a topic of P partitions (CreateTopics, then Metadata until every partition has a leader), then
   ``--records`` records of ``--size`` bytes from one Producer with ``linger.ms=50`` (otherwise
   librdkafka's defaults, so acks=all), record i sent to partition i % P explicitly, then
   ``flush()``. The producer fetches the topic's metadata before the clock starts; the clock runs
   from the first ``produce()`` to the end of ``flush()``. Measured: records/s, the broker's CPU
   seconds over that interval (the scheduler's run time of every thread of its process group, in
   ns: ``group_run_seconds``), per million records, the Produce requests the client sent (its
   statistics, ``statistics.interval.ms=1000``: librdkafka puts one partition in a request, so the
   requests grow with P), the CPU per request, and the broker's RSS (VmRSS) after the run.
   Reported: median and min-max over the runs.

   The control: librdkafka puts one partition in each Produce request, so the request size falls
   as P grows, and the CPU per record with it. Right after the sweep's runs at P=``--control-of``
   (default 1,000), P=10 runs again (``--runs`` times) with ``batch.num.messages`` set to the
   median records per request measured there: requests of the same size at both P. The CPU
   target's ratio is then the product of a request-size factor (control / P=10) and a partition
   factor (P=1,000 / control). The reference: the sweep's runs at ``--reference-partitions``
   against Tansu (``brokers.find_tansu``; a Kafka broker in Rust, its log in memory), as the same
   requests' cost in a broker written in Rust.
2. **Creation.** One fresh broker holding a 1-partition topic ``latency``, to which a probe (a
   child process: a Producer with ``linger.ms=0``, acks=1) sends one ``--size`` B record at a time,
   each after the previous one was delivered, and records each latency. For every N in
   ``--create``: after a quiet baseline window (no creation), CreateTopics of N partitions is sent;
   measured: the time until its response, and until a Metadata request lists all N partitions with
   a leader. Reported: those times and the probe's p50/p99/max latency during the creation
   (sends from CreateTopics to all-led) and during an equally long window just before it.
3. **Start-up.** A fresh broker gets a topic of ``--startup-partitions`` partitions and
   ``--records`` records spread over them as in 1. It is stopped with SIGTERM (the time to exit
   is recorded), started again on the same data dir and port, measured until ready (its port
   accepts a connection AND a Metadata request lists every partition with a leader), its RSS read
   at that moment and the records it holds counted (ListOffsets latest, summed). Then it is killed
   with SIGKILL (unclean) and started and measured again.

Targets (PASS/FAIL; a target on medians is judged on at least 3 runs, else "not judged"; a target
whose partition count was not run is "not measured"): throughput at P=1,000 >= 50 % of P=10;
broker CPU per record at P=1,000 <= 3x that of P=10; a topic of 10,000 partitions created (all
led) in < 10 s; start-up with 10,000 partitions < 10 s after a clean stop; RSS of a broker holding
10,000 partitions < 500 MB (the highest reading: sweep P=10,000, start-up before the stop and after
each restart).

Before each measurement the machine is synced and the script waits for it to be quiet
(``wait_for_quiet`` of ``broker_compare.py``, capped by ``--quiet-wait``). Results:
``<out>/partitions.json`` (every run's raw figures, the probe's samples, parameters, machine,
versions, provenance), ``partitions.md`` (tables and targets) and ``partitions.png`` (records/s and
CPU s per million records against P). The exit code is 0 only if every measurement succeeded.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import select
import shutil
import signal
import statistics
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import confluent_kafka
from confluent_kafka import KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

sys.path.insert(0, str(Path(__file__).resolve().parent))
from broker_compare import fmt_load, wait_for_quiet  # noqa: E402
from brokers import (  # noqa: E402
    REPO,
    Broker,
    broker_command,
    broker_env,
    find_tansu,
    free_port,
    group_cpu_split,
    group_run_seconds,
    kb_to_mb,
    proc_status_kb,
    provenance_line,
    pybroker_import,
)
from harness import BenchRun  # noqa: E402

SWEEP_PRODUCER_CONF = {"linger.ms": 50}  # otherwise librdkafka's defaults (acks=all)
STATISTICS_INTERVAL_MS = 1000  # the sweep's producer reports its request counts this often (its report
# lists every partition: at P=10,000 one costs the producer tens of ms)
PROBE_PRODUCER_CONF = {"linger.ms": 0, "acks": 1}
SWEEP_TOPIC = "sweep"
LATENCY_TOPIC = "latency"
STARTUP_TOPIC = "startup"
METADATA_POLL_S = 0.05  # pause between Metadata requests while waiting for leaders
TARGET_MIN_RUNS = 3  # a target on medians is judged on at least this many runs
TARGET_PARTITIONS = 10_000
THROUGHPUT_FLOOR = 0.5  # records/s at P=1,000 >= this x P=10
CPU_CEILING = 3.0  # CPU per record at P=1,000 <= this x P=10
CONTROL_PARTITIONS = 10  # the control run: this P with the request size of --control-of's
CREATE_LIMIT_S = 10.0
STARTUP_LIMIT_S = 10.0
RSS_LIMIT_MB = 500.0  # decimal MB
TIMEOUT_CODES = (KafkaError.REQUEST_TIMED_OUT, KafkaError._TIMED_OUT)
SLOW_SAMPLE_MS = 10.0  # probe records at least this slow are kept one by one in the JSON
MAX_SLOW_SAMPLES = 2000
LOG_PATTERN = re.compile(r"\b(ERROR|CRITICAL|WARN|WARNING|Traceback)\b")

# The creation measurement's latency probe: one record at a time to partition 0 of the topic,
# each sent when the previous one was delivered. Prints "ready" after its first delivery; when its
# stdin closes it stops and prints one JSON line with every sample as [send time (CLOCK_MONOTONIC,
# shared by the processes of a machine), latency s].
PROBE_CODE = textwrap.dedent(
    """
    import json, sys, threading, time
    from confluent_kafka import Producer

    bootstrap, topic, size, conf = sys.argv[1], sys.argv[2], int(sys.argv[3]), json.loads(sys.argv[4])
    stop = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
    producer = Producer({"bootstrap.servers": bootstrap, **conf})
    value = b"x" * size
    samples, errors, unfinished, outcome = [], [], None, []
    while not stop.is_set():
        outcome.clear()
        t0 = time.monotonic()
        producer.produce(topic, value, partition=0, on_delivery=lambda err, msg: outcome.append(err))
        while not outcome and not stop.is_set():
            producer.poll(0.1)
        t1 = time.monotonic()
        if not outcome:
            unfinished = [t0, t1 - t0]
        elif outcome[0] is None:
            if not samples:
                print("ready", flush=True)
            samples.append([round(t0, 6), round(t1 - t0, 6)])
        else:
            errors.append([round(t0, 6), str(outcome[0])])
    producer.flush(5)
    print(json.dumps({"samples": samples, "errors": errors, "unfinished": unfinished}), flush=True)
    """
)


# --------------------------------------------------------------------------- broker


class PyBroker:
    """pybroker processes on one data dir and port, one after the other (start, stop, kill,
    start again); every process is stopped by PID when the ``with`` block ends. With ``name``
    "tansu" the processes are the reference broker instead (its log kept in memory)."""

    def __init__(self, run_dir: Path, args: argparse.Namespace, name: str = "pybroker") -> None:
        self.name = name
        self.run_dir = run_dir
        self.data_dir = run_dir / "data"
        self.args = args
        self.port = free_port()
        self.broker: Broker | None = None
        self.processes: list[dict[str, Any]] = []  # one entry per process started
        self.tails: dict[str, str] = {}  # the logs' last lines, kept when the run dir goes

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def __enter__(self) -> PyBroker:
        shutil.rmtree(self.run_dir, ignore_errors=True)
        self.data_dir.mkdir(parents=True)
        return self

    def start(self, label: str) -> dict[str, Any]:
        """Start a broker process; return once its port accepts a connection."""
        cmd = broker_command(self.name, self.port, self.data_dir, self.args, self.args.python)
        env = broker_env(self.name, bool(self.args.pybroker_import.get("add_repo_to_pythonpath")))
        t0 = time.monotonic()
        self.broker = Broker(cmd, env, self.run_dir, self.run_dir / f"broker-{label}.log")
        info: dict[str, Any] = {"label": label, "pid": self.broker.pid, "command": cmd,
                                "started_at_monotonic": t0}
        self.processes.append(info)
        self.broker.wait_ready(self.port, self.args.startup_timeout)
        info["port_open_s"] = time.monotonic() - t0
        return info

    def start_with_topic(self, label: str, topic: str, partitions: int) -> dict[str, Any]:
        """Start a broker process and create ``topic`` on it; returns ``create_topic``'s figures
        (the admin client it used is gone when this returns)."""
        self.start(label)
        return create_topic(admin_client(self.bootstrap), topic, partitions, self.args.create_timeout)

    def rss_mb(self) -> float:
        """VmRSS of the broker process, MB (10^6 bytes)."""
        assert self.broker is not None
        return kb_to_mb(proc_status_kb(self.broker.pid, "VmRSS"))

    def cpu_s(self) -> float:
        """CPU seconds of the broker's process group so far (its threads' run time, in ns)."""
        assert self.broker is not None
        return group_run_seconds(self.broker.pid)

    def cpu_split(self) -> tuple[float, float]:
        """(user, system) CPU seconds of the broker's process group so far, in 10 ms ticks."""
        assert self.broker is not None
        return group_cpu_split(self.broker.pid)

    def stop(self) -> dict[str, Any]:
        """SIGTERM (SIGKILL after --stop-timeout s); how long the exit took, and its code."""
        assert self.broker is not None
        broker, self.broker = self.broker, None
        t0 = time.monotonic()
        code = broker.stop(grace=self.args.stop_timeout)
        info = self.processes[-1]
        info.update(stop_s=time.monotonic() - t0, exit_code=code, killed=code == -signal.SIGKILL)
        info["log"] = scan_log(broker.log)
        return info

    def kill(self) -> dict[str, Any]:
        """SIGKILL the broker process by PID (an unclean stop), then clean up as ``stop``."""
        assert self.broker is not None
        os.kill(self.broker.pid, signal.SIGKILL)
        self.broker.proc.wait(timeout=30)
        info = self.stop()
        info["sigkill"] = True
        return info

    def __exit__(self, *exc: object) -> None:
        if self.broker is not None:
            self.stop()
        self.tails = self.log_tails()
        # The run dir stays until the whole benchmark ends (the workdir goes then): removing
        # thousands of files here would slow the next run's file creation (an ext4 mounted
        # with `discard` issues the discards at its journal commits).

    def log_tails(self, n: int = 3000) -> dict[str, str]:
        """Last ``n`` characters of every process's log."""
        tails = {}
        for info in self.processes:
            path = self.run_dir / f"broker-{info['label']}.log"
            try:
                tails[info["label"]] = path.read_bytes()[-n:].decode("utf-8", "replace")
            except OSError:
                pass
        return tails


def scan_log(path: Path, limit: int = 10) -> dict[str, Any]:
    """Number of lines and of warning/error lines in a broker log, and the first few of those."""
    try:
        text = path.read_bytes().decode("utf-8", "replace")
    except OSError:
        return {"lines": 0, "matches": 0, "sample": []}
    hits = [ln for ln in text.splitlines() if LOG_PATTERN.search(ln)]
    return {"lines": text.count("\n"), "matches": len(hits), "sample": [h[:300] for h in hits[:limit]]}


# --------------------------------------------------------------------------- clients


def admin_client(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


def wait_until_led(admin: AdminClient, topic: str, partitions: int, deadline: float) -> int:
    """Send Metadata requests for ``topic`` until it lists ``partitions`` partitions, each with a
    leader; return how many requests it took. TimeoutError at ``deadline`` (monotonic)."""
    requests, last = 0, "no answer"
    while True:
        requests += 1
        try:
            md = admin.list_topics(topic=topic, timeout=max(0.5, min(5.0, deadline - time.monotonic())))
            found = md.topics.get(topic)
            if found is None or found.error is not None:
                last = f"topic error {found.error if found else 'not listed'}"
            else:
                led = sum(1 for p in found.partitions.values() if p.leader >= 0 and p.error is None)
                if len(found.partitions) == partitions and led == partitions:
                    return requests
                last = f"{len(found.partitions)} partitions listed, {led} with a leader"
        except KafkaException as exc:
            last = str(exc)
        if time.monotonic() >= deadline:
            raise TimeoutError(f"Metadata for {topic!r} after {requests} requests: {last}")
        time.sleep(METADATA_POLL_S)


def create_topic(admin: AdminClient, topic: str, partitions: int, timeout: float) -> dict[str, Any]:
    """CreateTopics, then Metadata until every partition has a leader. Times from the send."""
    t0 = time.monotonic()
    futures = admin.create_topics(
        [NewTopic(topic, num_partitions=partitions, replication_factor=1)],
        operation_timeout=timeout,
        request_timeout=timeout + 5,
    )
    try:
        futures[topic].result(timeout=timeout + 10)
    except KafkaException as exc:
        error = exc.args[0] if exc.args else None
        if isinstance(error, KafkaError) and error.code() in TIMEOUT_CODES:
            raise TimeoutError(f"CreateTopics {topic!r}: {error}") from exc
        raise
    t_response = time.monotonic()
    requests = wait_until_led(admin, topic, partitions, t0 + timeout)
    t_led = time.monotonic()
    return {
        "partitions": partitions,
        "t0_monotonic": t0,
        "response_s": t_response - t0,
        "all_led_s": t_led - t0,
        "metadata_requests": requests,
    }


def produce_round_robin(
    broker: PyBroker, topic: str, partitions: int, records: int, size: int, timeout: float,
    conf: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """``records`` records of ``size`` bytes, record i to partition i % ``partitions``, then
    flush(); time and the broker's CPU from the first produce() to the end of flush(), and the
    Produce requests the producer sent (from its statistics). ``conf`` adds producer settings to
    the sweep's."""
    statistics: list[dict[str, Any]] = []
    producer = Producer({
        "bootstrap.servers": broker.bootstrap, **SWEEP_PRODUCER_CONF, **(conf or {}),
        "statistics.interval.ms": STATISTICS_INTERVAL_MS,
        "stats_cb": lambda text: statistics.append(json.loads(text)),
    })
    errors: list[str] = []
    delivered = 0

    def on_delivery(err: Any, _msg: Any) -> None:
        nonlocal delivered
        if err is None:
            delivered += 1
        elif len(errors) < 20:
            errors.append(str(err))

    producer.list_topics(topic=topic, timeout=30)  # connection and topic metadata before the clock
    value = b"x" * size
    buffer_full = 0
    cpu0, split0 = broker.cpu_s(), broker.cpu_split()
    t0 = time.monotonic()
    for i in range(records):
        while True:
            try:
                producer.produce(topic, value, partition=i % partitions, on_delivery=on_delivery)
                break
            except BufferError:  # queue.buffering.max.messages reached: serve deliveries
                buffer_full += 1
                producer.poll(0.01)
    deadline = t0 + timeout
    while producer.flush(0.5) > 0:  # in slices, so that Ctrl-C is seen
        if time.monotonic() > deadline:
            raise TimeoutError(f"flush: {len(producer)} records undelivered after {timeout:.0f}s")
    elapsed = time.monotonic() - t0
    cpu, split1 = broker.cpu_s() - cpu0, broker.cpu_split()
    user, system = split1[0] - split0[0], split1[1] - split0[1]
    if delivered != records:
        raise RuntimeError(f"{records - delivered} of {records} records failed: {errors[:3]}")
    requests = produce_requests_sent(producer, statistics)
    return {
        "records": records,
        "size": size,
        "produce_s": elapsed,
        "records_per_s": records / elapsed,
        "broker_cpu_s": cpu,
        "broker_cpu_s_per_m_records": cpu / records * 1e6,
        "produce_requests": requests,
        "records_per_request": records / requests,
        "broker_cpu_us_per_request": cpu / requests * 1e6,
        "broker_user_ticks_s": user,
        "broker_system_ticks_s": system,
        "broker_kernel_share": system / (user + system) if user + system else None,
        "broker_kernel_us_per_request": cpu * system / (user + system) / requests * 1e6 if user + system else None,
        "broker_user_us_per_request": cpu * user / (user + system) / requests * 1e6 if user + system else None,
        "buffer_full_retries": buffer_full,
    }


def produce_requests_sent(producer: Producer, statistics: list[dict[str, Any]]) -> int:
    """Produce requests the producer sent, summed over its brokers, from a statistics report
    emitted after every record was delivered (waits for one)."""
    statistics.clear()
    deadline = time.monotonic() + 10 * STATISTICS_INTERVAL_MS / 1000
    while not statistics:
        if time.monotonic() > deadline:
            raise TimeoutError("the producer emitted no statistics")
        producer.poll(STATISTICS_INTERVAL_MS / 1000)
    brokers = statistics[-1]["brokers"].values()
    return sum(int(b.get("req", {}).get("Produce", 0)) for b in brokers)


def count_records(admin: AdminClient, topic: str, partitions: int, timeout: float) -> int:
    """Sum of the partitions' high watermarks (ListOffsets latest)."""
    futures = admin.list_offsets(
        {TopicPartition(topic, p): OffsetSpec.latest() for p in range(partitions)},
        request_timeout=timeout,
    )
    return sum(f.result(timeout=timeout + 5).offset for f in futures.values())


class LatencyProbe:
    """The creation measurement's second client: a child process (PROBE_CODE), stopped by PID."""

    def __init__(self, bootstrap: str, size: int, log_dir: Path) -> None:
        self.stderr_path = log_dir / "probe.stderr"
        self.stderr_text = ""  # its tail, read when it stops
        self._stderr = open(self.stderr_path, "wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-c", PROBE_CODE, bootstrap, LATENCY_TOPIC, str(size),
             json.dumps(PROBE_PRODUCER_CONF)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            start_new_session=True,
        )

    def wait_ready(self, timeout: float) -> None:
        """Until the probe's first record is delivered."""
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        if not ready or self.proc.stdout.readline().strip() != b"ready":
            raise RuntimeError(f"latency probe not ready within {timeout:.0f}s: {self.stderr_tail()}")

    def stop(self) -> dict[str, Any]:
        """Close its stdin (it stops and reports); SIGKILL by PID if it does not exit in 30 s."""
        try:
            out, _ = self.proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.communicate()
            return {"samples": [], "errors": ["probe did not stop; killed"], "unfinished": None}
        finally:
            self._stderr.close()
            self.stderr_text = self.stderr_tail()
        lines = out.decode().strip().splitlines()
        if self.proc.returncode != 0 or not lines:
            raise RuntimeError(f"latency probe exited with {self.proc.returncode}: {self.stderr_text}")
        return dict(json.loads(lines[-1]))

    def stderr_tail(self, n: int = 1500) -> str:
        try:
            return self.stderr_path.read_bytes()[-n:].decode("utf-8", "replace")
        except OSError:
            return ""


# --------------------------------------------------------------------------- measurements


def quiet_gate(out: dict[str, Any], args: argparse.Namespace) -> None:
    """Sync, wait for a quiet machine (capped), and record it in ``out``."""
    quiet = wait_for_quiet(args.quiet_cores, args.quiet_wait)
    out["pre_run_busy_cores"] = quiet["busy_cores"]
    out["pre_run_wait_s"] = quiet["waited_s"]
    out["loadavg_before"] = list(os.getloadavg())


def record_failure(out: dict[str, Any], exc: Exception) -> None:
    out["ok"] = False
    out["error"] = f"{type(exc).__name__}: {exc}"
    out["timed_out"] = isinstance(exc, TimeoutError)


def note_failure(out: dict[str, Any], broker: PyBroker) -> None:
    """After a measurement that did not succeed (error, or interrupted): the broker logs' tails."""
    if not out.get("ok"):
        out.setdefault("error", "interrupted")
        out["broker_log_tails"] = broker.tails


def measure_sweep_run(
    out: dict[str, Any], partitions: int, args: argparse.Namespace, workdir: Path,
    broker_name: str = "pybroker", conf: dict[str, Any] | None = None,
) -> None:
    """Sweep, one run: fresh broker, a topic of ``partitions`` partitions, the produce phase
    (``conf`` added to the producer's settings), the broker's RSS afterwards. Fills ``out``."""
    out.update(partitions=partitions, broker_name=broker_name, producer_conf=conf or {}, ok=False)
    run_dir = workdir / f"{out.get('variant', 'sweep')}-{partitions}-{out['run']}"
    broker = PyBroker(run_dir, args, broker_name)
    out["broker"] = broker.processes
    try:
        with broker:
            out["create"] = broker.start_with_topic("sweep", SWEEP_TOPIC, partitions)
            quiet_gate(out, args)
            out.update(produce_round_robin(broker, SWEEP_TOPIC, partitions, args.records, args.size,
                                           args.produce_timeout, conf))
            out["rss_mb_after"] = broker.rss_mb()
            out["ok"] = True
    except Exception as exc:
        record_failure(out, exc)
    finally:
        note_failure(out, broker)


def matched_batch(sweep_runs: list[dict[str, Any]], partitions: int) -> int | None:
    """The median records per Produce request of the sweep's successful runs at ``partitions``."""
    sizes = [r["records_per_request"] for r in sweep_runs if r["partitions"] == partitions and r.get("ok")]
    return max(1, round(statistics.median(sizes))) if sizes else None


def measure_control(out: dict[str, Any], sweep_runs: list[dict[str, Any]], args: argparse.Namespace,
                    workdir: Path) -> None:
    """The control: P=10 again, with librdkafka's batch.num.messages capping every request at
    the records per request the sweep measured at P=``--control-of``. Equal request sizes at
    both P separate what the partition count costs from what the client's request shape costs.
    Fills ``out``."""
    batch = matched_batch(sweep_runs, args.control_of)
    out.update(of=args.control_of, partitions=CONTROL_PARTITIONS, batch_num_messages=batch, runs=[])
    if batch is None:
        out["error"] = f"no successful sweep run at P={args.control_of} to take the request size from"
        return
    for run_no in range(1, args.runs + 1):
        run: dict[str, Any] = {"run": run_no, "variant": "control"}
        out["runs"].append(run)
        measure_sweep_run(run, CONTROL_PARTITIONS, args, workdir, conf={"batch.num.messages": batch})
        print(one_line_sweep(run), flush=True)
    out["summary"] = summarize_sweep(out["runs"], [CONTROL_PARTITIONS])


def measure_reference(out: dict[str, Any], args: argparse.Namespace, workdir: Path) -> None:
    """The sweep's runs at ``--reference-partitions`` against Tansu, a Rust broker, with its
    log in memory: what the same client's requests cost a broker written in Rust. Fills ``out``."""
    out.update(broker="tansu", storage="memory", version=args.tansu_version, binary=args.tansu,
               package=args.tansu_package, runs=[])
    for p in args.reference_partitions:
        for run_no in range(1, args.runs + 1):
            run: dict[str, Any] = {"run": run_no, "variant": "reference"}
            out["runs"].append(run)
            measure_sweep_run(run, p, args, workdir, broker_name="tansu")
            print(one_line_sweep(run), flush=True)
    out["summary"] = summarize_sweep(out["runs"], args.reference_partitions)


def cpu_ratio_parts(result: dict[str, Any]) -> dict[str, float] | None:
    """The CPU target's ratio (CPU per record, P=1,000 over P=10, medians) as the product of two
    factors: the request size (P=10 with P=1,000's request size, over P=10) and the partition
    count at equal request size (P=1,000 over that control). None without the three medians."""
    summary, control = result["sweep"]["summary"], result.get("control", {})
    metric = "broker_cpu_s_per_m_records"
    low = (summary.get(str(CONTROL_PARTITIONS)) or {}).get(metric)
    high = (summary.get(str(control.get("of"))) or {}).get(metric)
    matched = (control.get("summary", {}).get(str(CONTROL_PARTITIONS)) or {}).get(metric)
    if not (low and high and matched) or low["median"] == 0 or matched["median"] == 0:
        return None
    return {"request_size": matched["median"] / low["median"], "partitions": high["median"] / matched["median"],
            "total": high["median"] / low["median"]}


def cpu_budget_per_request(result: dict[str, Any]) -> dict[str, Any] | None:
    """The broker CPU per request that the CPU target leaves at P=``--control-of`` (the ceiling
    times P=10's CPU per record times P=``--control-of``'s records per request), what a request
    cost there in the kernel and in user space, and Tansu's user space there (medians; Tansu's
    None when not measured). None without pybroker's figures."""
    summary, of = result["sweep"]["summary"], result["parameters"]["control_of"]
    low, high = summary.get(str(CONTROL_PARTITIONS)), summary.get(str(of))
    if not (low and high and low["broker_cpu_s_per_m_records"] and high["records_per_request"]
            and high.get("broker_kernel_us_per_request") and high.get("broker_user_us_per_request")):
        return None
    low_s_per_m = low["broker_cpu_s_per_m_records"]["median"]
    records = high["records_per_request"]["median"]
    tansu = (result["reference"].get("summary") or {}).get(str(of)) or {}
    return {"low_s_per_m": low_s_per_m, "records_per_request": records,
            "budget_us": CPU_CEILING * low_s_per_m * records,
            "kernel_us": high["broker_kernel_us_per_request"]["median"],
            "user_us": high["broker_user_us_per_request"]["median"],
            "tansu_user_us": (tansu.get("broker_user_us_per_request") or {}).get("median")}


def window_stats(samples: list[list[float]], start: float, end: float, t0: float) -> dict[str, Any] | None:
    """The probe's records sent in [start, end): latency percentiles (ms), a histogram of all of
    them (quarter-octave buckets: upper bound ms -> count), and every one slower than
    SLOW_SAMPLE_MS as [send time - t0 (s), latency ms]."""
    window = [(t, lat * 1000) for t, lat in samples if start <= t < end]
    if not window:
        return None
    ms = [x for _, x in window]
    buckets: dict[float, int] = {}
    for x in ms:
        upper = 2 ** (math.ceil(math.log2(max(x, 1e-3)) * 4) / 4)
        buckets[upper] = buckets.get(upper, 0) + 1
    slow = [[round(t - t0, 4), round(x, 3)] for t, x in window if x >= SLOW_SAMPLE_MS]
    return {
        "n": len(ms),
        "window_s": end - start,
        "mean": statistics.fmean(ms),
        "p50": percentile(ms, 0.50),
        "p90": percentile(ms, 0.90),
        "p99": percentile(ms, 0.99),
        "p999": percentile(ms, 0.999),
        "max": max(ms),
        "histogram_ms": {f"{upper:.4g}": buckets[upper] for upper in sorted(buckets)},
        f"slow_samples_over_{SLOW_SAMPLE_MS:g}ms": slow[:MAX_SLOW_SAMPLES],
        "slow_samples": len(slow),
    }


def baseline_wait(partitions: int, done: list[dict[str, Any]], args: argparse.Namespace) -> float:
    """Seconds to leave without creation before creating ``partitions`` partitions: at least
    --baseline, and 1.2x the creation time extrapolated (quadratically, in case it grows faster
    than the partition count) from the previous creation, so that the baseline window can be as
    long as the creation (capped at --create-timeout)."""
    wait = args.baseline
    if done and "all_led_s" in done[-1]:
        estimate = done[-1]["all_led_s"] * (partitions / done[-1]["partitions"]) ** 2 * 1.2
        wait = max(wait, min(estimate, args.create_timeout))
    return wait


def measure_creation(out: dict[str, Any], args: argparse.Namespace, workdir: Path) -> None:
    """Creation: one fresh broker; topics of each --create size, with the latency probe running."""
    out.update(ok=False, creations=[])
    broker = PyBroker(workdir / "create", args)
    out["broker"] = broker.processes
    probe: LatencyProbe | None = None
    try:
        with broker:
            broker.start("create")
            admin = admin_client(broker.bootstrap)
            create_topic(admin, LATENCY_TOPIC, 1, args.create_timeout)
            probe = LatencyProbe(broker.bootstrap, args.size, broker.run_dir)
            try:
                probe.wait_ready(30)
                quiet_since = time.monotonic()
                for n in args.create:
                    wait = baseline_wait(n, out["creations"], args)
                    time.sleep(max(0.0, quiet_since + wait - time.monotonic()))
                    entry: dict[str, Any] = {"partitions": n, "baseline_since_monotonic": quiet_since}
                    out["creations"].append(entry)
                    entry.update(create_topic(admin, f"created-{n}", n, args.create_timeout))
                    entry["rss_mb_after"] = broker.rss_mb()
                    quiet_since = time.monotonic()
            finally:
                probe_out = probe.stop()
                out["probe_errors"] = probe_out["errors"]
                out["probe_unfinished"] = probe_out["unfinished"]
            del admin
            samples = probe_out["samples"]
            if probe_out["unfinished"]:
                samples.append(probe_out["unfinished"])  # a lower bound of its latency
            for entry in out["creations"]:
                if "all_led_s" not in entry:
                    continue
                t0, length = entry["t0_monotonic"], entry["all_led_s"]
                base_start = max(entry["baseline_since_monotonic"], t0 - length)
                entry["latency_ms"] = {
                    "baseline": window_stats(samples, base_start, t0, t0),
                    "creation": window_stats(samples, t0, t0 + length, t0),
                }
                entry["baseline_shorter_than_creation"] = t0 - base_start < length - 1e-6
            out["probe_records"] = len(samples)
            out["ok"] = len(out["creations"]) == len(args.create) and not probe_out["errors"]
            if probe_out["errors"]:
                out["error"] = f"{len(probe_out['errors'])} probe delivery error(s): {probe_out['errors'][:3]}"
    except Exception as exc:
        record_failure(out, exc)
    finally:
        note_failure(out, broker)
        if probe is not None and probe.stderr_text.strip():
            out["probe_stderr"] = probe.stderr_text


def measure_restart(broker: PyBroker, label: str, args: argparse.Namespace) -> dict[str, Any]:
    """Start the broker on its data dir again; time until ready, RSS then, records held."""
    partitions = args.startup_partitions
    info = broker.start(label)
    admin = admin_client(broker.bootstrap)
    t0 = info["started_at_monotonic"]
    info["metadata_requests"] = wait_until_led(admin, STARTUP_TOPIC, partitions, t0 + args.startup_timeout)
    info["ready_s"] = time.monotonic() - t0
    info["rss_mb"] = broker.rss_mb()
    try:
        info["records_found"] = count_records(admin, STARTUP_TOPIC, partitions, 60)
    except Exception as exc:  # informational: the records count is not the measurement
        info["records_found_error"] = f"{type(exc).__name__}: {exc}"
    del admin
    return info


def measure_startup(out: dict[str, Any], args: argparse.Namespace, workdir: Path) -> None:
    """Start-up: fill a broker, stop it cleanly and restart, then kill -9 and restart."""
    partitions = args.startup_partitions
    out.update(partitions=partitions, records=args.records, ok=False)
    broker = PyBroker(workdir / "startup", args)
    out["broker"] = broker.processes
    try:
        with broker:
            out["create"] = broker.start_with_topic("initial", STARTUP_TOPIC, partitions)
            out["produce"] = produce_round_robin(broker, STARTUP_TOPIC, partitions, args.records,
                                                 args.size, args.produce_timeout)
            out["rss_mb_before_stop"] = broker.rss_mb()
            stop = broker.stop()
            out["clean_stop"] = {"stop_s": stop["stop_s"], "exit_code": stop["exit_code"],
                                 "killed_after_grace": stop["killed"]}
            quiet_gate(out.setdefault("clean_restart_gate", {}), args)
            out["clean_restart"] = measure_restart(broker, "clean-restart", args)
            broker.kill()
            quiet_gate(out.setdefault("unclean_restart_gate", {}), args)
            out["unclean_restart"] = measure_restart(broker, "unclean-restart", args)
            out["ok"] = not stop["killed"]
            if stop["killed"]:
                out["error"] = f"the broker did not exit within {args.stop_timeout:.0f}s of SIGTERM"
    except Exception as exc:
        record_failure(out, exc)
    finally:
        note_failure(out, broker)


# --------------------------------------------------------------------------- summary


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (as bench/delete_records.py)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))]


def stats(values: list[float]) -> dict[str, Any] | None:
    if not values:
        return None
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "n": len(values)}


def summarize_sweep(runs: list[dict[str, Any]], partition_counts: list[int]) -> dict[str, Any]:
    """Per P: runs, ok runs, and median/min/max of records/s, CPU s per M records, RSS."""
    summary: dict[str, Any] = {}
    for p in partition_counts:
        ok = [r for r in runs if r["partitions"] == p and r.get("ok")]
        summary[str(p)] = {
            "runs": sum(1 for r in runs if r["partitions"] == p),
            "ok": len(ok),
            "records_per_s": stats([r["records_per_s"] for r in ok]),
            "broker_cpu_s_per_m_records": stats([r["broker_cpu_s_per_m_records"] for r in ok]),
            "produce_requests": stats([r["produce_requests"] for r in ok]),
            "records_per_request": stats([r["records_per_request"] for r in ok]),
            "broker_cpu_us_per_request": stats([r["broker_cpu_us_per_request"] for r in ok]),
            "broker_kernel_share": stats([r["broker_kernel_share"] for r in ok if r.get("broker_kernel_share") is not None]),
            "broker_kernel_us_per_request": stats([r["broker_kernel_us_per_request"] for r in ok
                                                   if r.get("broker_kernel_us_per_request") is not None]),
            "broker_user_us_per_request": stats([r["broker_user_us_per_request"] for r in ok
                                                 if r.get("broker_user_us_per_request") is not None]),
            "rss_mb_after": stats([r["rss_mb_after"] for r in ok]),
        }
    return summary


def targets(result: dict[str, Any]) -> list[dict[str, Any]]:
    """The issue's targets: PASS, FAIL, not judged (fewer than 3 runs) or not measured."""
    rows: list[dict[str, Any]] = []
    summary = result["sweep"]["summary"]

    def add(target: str, verdict: str, value: str, note: str = "") -> None:
        rows.append({"target": target, "result": verdict, "value": value, "note": note})

    def ratio_target(target: str, metric: str, limit: float, higher_is_better: bool, fmt: str) -> None:
        low, high = summary.get("10"), summary.get("1000")
        if low is None or high is None:
            add(target, "not measured", "—", "needs P=10 and P=1000 in --partitions")
            return
        a, b = low[metric], high[metric]
        if a is None or b is None:
            failed = any(r.get("error") not in (None, "interrupted") for r in result["sweep"]["runs"]
                         if r["partitions"] in (10, 1000))
            add(target, "FAIL" if failed else "not measured", "—",
                f"successful runs: P=10 {low['ok']}/{low['runs']}, P=1000 {high['ok']}/{high['runs']}")
            return
        if a["median"] == 0:
            add(target, "not judged", "—", "the P=10 median is 0")
            return
        ratio = b["median"] / a["median"]
        value = f"{ratio:.2f}x (P=1000 median {fmt.format(b['median'])}, P=10 median {fmt.format(a['median'])})"
        n = min(a["n"], b["n"])
        if n < TARGET_MIN_RUNS or low["ok"] != low["runs"] or high["ok"] != high["runs"]:
            verdict = "not judged"
            note = f"needs {TARGET_MIN_RUNS} successful runs or more of each (P=10: {a['n']}/{low['runs']}, P=1000: {b['n']}/{high['runs']})"
        else:
            verdict = "PASS" if (ratio >= limit if higher_is_better else ratio <= limit) else "FAIL"
            note = f"medians of {a['n']} and {b['n']} runs"
        add(target, verdict, value, note)

    ratio_target(f"throughput at P=1,000 >= {THROUGHPUT_FLOOR:.0%} of P=10", "records_per_s",
                 THROUGHPUT_FLOOR, True, "{:,.0f} records/s")
    ratio_target(f"broker CPU per record at P=1,000 <= {CPU_CEILING:g}x P=10",
                 "broker_cpu_s_per_m_records", CPU_CEILING, False, "{:.2f} CPU s per M records")
    parts = cpu_ratio_parts(result)
    if parts is not None and result["control"]["of"] == 1000:
        rows[-1]["note"] += (f"; = {parts['request_size']:.2f}x for the request size times "
                             f"{parts['partitions']:.2f}x for the partitions at equal request size "
                             "(see the control)")

    name = f"a topic of {TARGET_PARTITIONS:,} partitions created (all led) in < {CREATE_LIMIT_S:g} s"
    creation = result["creation"]
    entry = next((c for c in creation.get("creations", []) if c["partitions"] == TARGET_PARTITIONS), None)
    if entry is None:
        add(name, "not measured", "—", creation.get("error", f"{TARGET_PARTITIONS} not in --create"))
    elif "all_led_s" in entry:
        add(name, "PASS" if entry["all_led_s"] < CREATE_LIMIT_S else "FAIL", f"{entry['all_led_s']:.2f} s",
            f"CreateTopics answered after {entry['response_s']:.2f} s")
    elif creation.get("timed_out"):
        add(name, "FAIL", f"not led within {result['parameters']['create_timeout']:g} s", creation["error"])
    else:
        add(name, "not measured", "—", creation.get("error", ""))

    name = f"start-up with {TARGET_PARTITIONS:,} partitions < {STARTUP_LIMIT_S:g} s after a clean stop"
    startup = result["startup"]
    restart = startup.get("clean_restart", {})
    if startup.get("partitions") != TARGET_PARTITIONS:
        add(name, "not measured", "—", f"--startup-partitions is not {TARGET_PARTITIONS}")
    elif "ready_s" in restart:
        add(name, "PASS" if restart["ready_s"] < STARTUP_LIMIT_S else "FAIL", f"{restart['ready_s']:.2f} s",
            f"port open after {restart['port_open_s']:.2f} s")
    elif "clean_stop" in startup and startup.get("error") not in (None, "interrupted"):
        add(name, "FAIL", "not ready", startup["error"])  # the restart failed or timed out
    else:
        add(name, "not measured", "—", startup.get("error", ""))

    name = f"RSS with {TARGET_PARTITIONS:,} partitions < {RSS_LIMIT_MB:g} MB"
    readings = [(f"sweep P={TARGET_PARTITIONS} run {r['run']}", r["rss_mb_after"])
                for r in result["sweep"]["runs"] if r["partitions"] == TARGET_PARTITIONS and r.get("ok")]
    if startup.get("partitions") == TARGET_PARTITIONS:
        if "rss_mb_before_stop" in startup:
            readings.append(("start-up broker before the stop", startup["rss_mb_before_stop"]))
        for key in ("clean_restart", "unclean_restart"):
            if "rss_mb" in startup.get(key, {}):
                readings.append((key.replace("_", " "), startup[key]["rss_mb"]))
    if readings:
        where, worst = max(readings, key=lambda x: x[1])
        add(name, "PASS" if worst < RSS_LIMIT_MB else "FAIL", f"{worst:.1f} MB",
            f"highest of {len(readings)} readings ({where})")
    else:
        add(name, "not measured", "—", f"no broker with {TARGET_PARTITIONS:,} partitions measured")
    return rows


# --------------------------------------------------------------------------- output


def fmt_range(s: dict[str, Any] | None, fmt: str) -> str:
    if not s:
        return "—"
    if s["n"] == 1:
        return fmt.format(s["median"])
    return f"{fmt.format(s['median'])} ({fmt.format(s['min'])}–{fmt.format(s['max'])})"


def num(value: float | None, fmt: str = "{:.2f}") -> str:
    """A number for a table cell, or "—" when it was not measured."""
    return "—" if value is None else fmt.format(value)


def fmt_latency(s: dict[str, Any] | None) -> str:
    if not s:
        return "—"
    return f"{s['p50']:.2f} / {s['p99']:.2f} / {s['max']:.2f} (n={s['n']:,})"


def render_markdown(result: dict[str, Any]) -> str:
    """The .md report: the sweep, creation and start-up tables, the targets, failures."""
    par, m, v = result["parameters"], result["machine"], result["versions"]
    sweep, creation, startup = result["sweep"], result["creation"], result["startup"]
    lines = [
        "# Many-partitions benchmark: throughput, topic creation, start-up",
        "",
        provenance_line(result["provenance"])
        + f" Finished {result['finished_at']} (wall time {result['wall_s'] / 60:.1f} min)"
        + (" **Interrupted: partial results.**" if result["interrupted"] else "."),
        "",
        "One pybroker per measurement group (Tansu for the reference runs), default settings, fresh data "
        "dir, on 127.0.0.1. "
        f"Clients: confluent-kafka {v['confluent_kafka']} (librdkafka {v['librdkafka']}). "
        f"Machine: {m['nproc']} vCPU ({m['cpu']}), kernel {m['kernel']}, load average at start "
        f"{fmt_load(m['loadavg_start'])}, at end {fmt_load(m['loadavg_end'])}.",
        "",
        "## Throughput against the partition count",
        "",
        f"{par['records']:,} records of {par['size']} B per run, one Producer with linger.ms=50 "
        "(otherwise default: acks=all), record i to partition i % P; timed from the first produce() "
        "to the end of flush(). A fresh broker per run. Broker CPU: the run time of every thread of "
        "its process group over that interval (schedstat, ns). Produce requests: as the producer's "
        "statistics count them (librdkafka sends one partition per request). RSS: VmRSS after the "
        f"run. Median (min–max) over {par['runs']} run(s) per P; MB = 10^6 bytes.",
        "",
        "| P | records/s | broker CPU s per M records | Produce requests | broker CPU µs per request | RSS MB | ok runs |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for p, s in sweep["summary"].items():
        lines.append(
            f"| {int(p):,} | {fmt_range(s['records_per_s'], '{:,.0f}')} | "
            f"{fmt_range(s['broker_cpu_s_per_m_records'], '{:.3f}')} | "
            f"{fmt_range(s.get('produce_requests'), '{:,.0f}')} | "
            f"{fmt_range(s.get('broker_cpu_us_per_request'), '{:.0f}')} | "
            f"{fmt_range(s['rss_mb_after'], '{:.1f}')} | {s['ok']}/{s['runs']} |"
        )
    lines += render_cpu_ratio(result)
    lines += [
        "",
        "## Topic creation",
        "",
        "CreateTopics sent → its response, and → a Metadata request lists every partition with a "
        f"leader. Meanwhile a second client (its own process, a Producer with linger.ms=0, acks=1) "
        f"sends one {par['size']} B record at a time to a 1-partition topic, each after the previous "
        "one was delivered: its latency (ms, p50 / p99 / max) for the records sent during the "
        "creation, and during an equally long window just before it (no creation).",
        "",
        "| partitions | CreateTopics answered s | all partitions led s | latency before (baseline) ms | latency during creation ms | RSS after MB |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for c in creation.get("creations", []):
        lat = c.get("latency_ms", {})
        base = lat.get("baseline") or {}
        short = f" (window only {base['window_s']:.1f} s)" if c.get("baseline_shorter_than_creation") else ""
        lines.append(
            f"| {c['partitions']:,} | {num(c.get('response_s'))} | {num(c.get('all_led_s'))} | "
            f"{fmt_latency(lat.get('baseline'))}{short} | {fmt_latency(lat.get('creation'))} | "
            f"{num(c.get('rss_mb_after'), '{:.1f}')} |"
        )
    if not creation.get("creations"):
        lines.append("| — | not run | | | | |")
    lines += ["", "## Start-up", ""]
    if startup.get("partitions"):
        produce, stop = startup.get("produce", {}), startup.get("clean_stop", {})
        lines += [
            f"A broker with a topic of {startup['partitions']:,} partitions and {startup['records']:,} "
            f"records of {par['size']} B spread over them (produced at "
            f"{num(produce.get('records_per_s'), '{:,.0f}')} records/s; RSS before the stop "
            f"{num(startup.get('rss_mb_before_stop'), '{:.1f}')} MB). Clean stop: SIGTERM → exit in "
            f"{num(stop.get('stop_s'))} s (exit code {stop.get('exit_code', '—')}). Ready = the port accepts a "
            "connection and a Metadata request lists every partition with a leader; time from "
            "process start. Records found: the sum of ListOffsets latest.",
            "",
            "| restart after | port open s | ready s | RSS when ready MB | records found |",
            "|---|---:|---:|---:|---:|",
        ]
        for key, label in (("clean_restart", "clean stop (SIGTERM)"), ("unclean_restart", "kill -9")):
            r = startup.get(key)
            if r is None:
                lines.append(f"| {label} | — | — | — | — |")
                continue
            found = r.get("records_found")
            found_text = f"{found:,}" if found is not None else r.get("records_found_error", "—")
            lines.append(
                f"| {label} | {num(r.get('port_open_s'))} | {num(r.get('ready_s'))} | "
                f"{num(r.get('rss_mb'), '{:.1f}')} | {found_text} |"
            )
    else:
        lines.append("Not run.")
    lines += ["", "## Targets", "", "| target | value | result | note |", "|---|---|---|---|"]
    for t in result["targets"]:
        lines.append(f"| {t['target']} | {t['value']} | {t['result']} | {t['note']} |")
    lines += [
        "",
        "## Sweep runs",
        "",
        "| runs | P | run | records/s | produce s | broker CPU s | Produce requests | RSS MB | topic led after s | load (1m) | status |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    labelled = [("sweep", r) for r in sweep["runs"]]
    labelled += [("control", r) for r in result["control"].get("runs", [])]
    labelled += [("Tansu", r) for r in result["reference"].get("runs", [])]
    for label, r in labelled:
        status = "ok" if r.get("ok") else "FAILED: " + str(r.get("error", "?")).replace("|", "/")[:200]
        if r.get("ok"):
            lines.append(
                f"| {label} | {r['partitions']:,} | {r['run']} | {r['records_per_s']:,.0f} | {r['produce_s']:.3f} | "
                f"{r['broker_cpu_s']:.3f} | {r['produce_requests']:,} | {r['rss_mb_after']:.1f} | "
                f"{r['create']['all_led_s']:.2f} | "
                f"{r['loadavg_before'][0]:.2f} | {status} |"
            )
        else:
            lines.append(f"| {label} | {r['partitions']:,} | {r['run']} | — | — | — | — | — | — | — | {status} |")
    failures = [(name, g) for name, g in (("creation", creation), ("start-up", startup), ("control", result["control"]))
                if g.get("error")]
    failures += [(f"{label} P={r['partitions']} run {r['run']}", r) for label, r in labelled if r.get("error")]
    lines += ["", "## Failures and broker logs", ""]
    for name, g in failures:
        lines.append(f"* **{name}**: {str(g['error'])[:300]}")
    processes = [p for _, r in labelled for p in r.get("broker", [])]
    processes += creation.get("broker", []) + startup.get("broker", [])
    flagged = sum(p.get("log", {}).get("matches", 0) for p in processes)
    lines.append(f"* {len(processes)} broker process(es); {flagged} warning/error line(s) in their logs.")
    seen: set[str] = set()
    for p in processes:
        for s in p.get("log", {}).get("sample", []):
            key = re.sub(r"\d+", "N", s[s.find("]") + 1:])[:120]
            if key not in seen and len(seen) < 8:
                seen.add(key)
                lines.append(f"  * {p['label']}: `{s[:240].replace('`', chr(39))}`")
    lines += ["", "Every raw figure (per run, per creation, the probe's latencies) is in `partitions.json`.", ""]
    return "\n".join(lines)


def render_cpu_ratio(result: dict[str, Any]) -> list[str]:
    """The section on the CPU target's ratio: the control, the reference broker, their factors."""
    sweep, control, reference = result["sweep"]["summary"], result["control"], result["reference"]
    if not control and not reference:
        return []
    lines = ["", "## Where the CPU ratio comes from", ""]
    if control:
        lines.append(
            f"librdkafka puts one partition in each Produce request, so at P={control['of']:,} a request "
            f"carries far fewer records than at P={CONTROL_PARTITIONS}. The control runs P={CONTROL_PARTITIONS} "
            f"again with `batch.num.messages` = {control.get('batch_num_messages') or '—'}, the median "
            f"records per request at P={control['of']:,}: the same client and settings otherwise, so "
            "both runs send requests of the same size and differ only in the partitions they go to."
        )
    if reference:
        lines += [""] if control else []
        lines.append(
            f"The reference is Tansu (`{reference.get('version')}`), a Kafka broker written in Rust, with its "
            "log kept in memory (it writes no files), under the same sweep runs."
        )
    lines += [
        "",
        "| broker | P | producer settings | records/s | broker CPU s per M records | records per request | broker CPU µs per request | of which kernel | kernel µs per request | ok runs |",
        "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    rows: list[tuple[str, int, str, dict[str, Any]]] = []  # broker, P, producer settings, summary
    if control:
        for p in (CONTROL_PARTITIONS, control["of"]):
            if str(p) in sweep:
                rows.append(("pybroker", p, "linger.ms=50", sweep[str(p)]))
            if p == CONTROL_PARTITIONS and control.get("summary"):
                rows.append(("pybroker (control)", p,
                             f"linger.ms=50, batch.num.messages={control['batch_num_messages']}",
                             control["summary"][str(p)]))
    for p, s in (reference.get("summary") or {}).items():
        rows.append(("Tansu", int(p), "linger.ms=50", s))
    for name, p, conf, s in rows:
        lines.append(
            f"| {name} | {p:,} | {conf} | {fmt_range(s['records_per_s'], '{:,.0f}')} | "
            f"{fmt_range(s['broker_cpu_s_per_m_records'], '{:.3f}')} | "
            f"{fmt_range(s.get('records_per_request'), '{:,.0f}')} | "
            f"{fmt_range(s.get('broker_cpu_us_per_request'), '{:.0f}')} | "
            f"{fmt_range(s.get('broker_kernel_share'), '{:.0%}')} | "
            f"{fmt_range(s.get('broker_kernel_us_per_request'), '{:.0f}')} | {s['ok']}/{s['runs']} |"
        )
    parts = cpu_ratio_parts(result)
    if parts is not None:
        lines += [
            "",
            f"CPU per record, medians: P={control['of']:,} / P={CONTROL_PARTITIONS} = {parts['total']:.2f}x = "
            f"{parts['request_size']:.2f}x (the request size alone: control / P={CONTROL_PARTITIONS}) × "
            f"{parts['partitions']:.2f}x (the partitions at equal request size: P={control['of']:,} / control).",
        ]
    budget = cpu_budget_per_request(result)
    if budget is not None:
        lines += [""]
        left, tansu = budget["budget_us"] - budget["kernel_us"], budget["tansu_user_us"]
        lines.append(
            f"The target allows a request at P={control['of']:,} {budget['budget_us']:.1f} µs of broker CPU "
            f"({CPU_CEILING:g} × P={CONTROL_PARTITIONS}'s {budget['low_s_per_m']:.3f} s per M records × "
            f"{budget['records_per_request']:.0f} records per request). The kernel spends "
            f"{budget['kernel_us']:.1f} µs on one (receiving it, writing its batch, sending the answer, "
            "waking for the next), "
            + (f"which leaves {left:.1f} µs for all the broker does in user space" if left > 0
               else "more than the target allows for the whole request")
            + f"; pybroker spends {budget['user_us']:.1f} µs in user space"
            + (f", Tansu {tansu:.1f} µs" if tansu is not None else "")
            + ". (Kernel and user space split a run's CPU by the broker's stime and utime, counted in "
            "10 ms ticks.)"
        )
    ref, top = reference.get("summary") or {}, result["parameters"]["control_of"] or 1000
    low, high = (ref.get(str(p), {}).get("broker_cpu_s_per_m_records") for p in (CONTROL_PARTITIONS, top))
    if low and high and low["median"]:
        lines += ["", f"Tansu, P={top:,} / P={CONTROL_PARTITIONS}: {high['median'] / low['median']:.2f}x."]
    return lines


def plot(result: dict[str, Any], path: Path) -> bool:
    """records/s and broker CPU s per M records against P (log x), median with min–max bars."""
    rows = [(int(p), s) for p, s in result["sweep"]["summary"].items() if s["records_per_s"]]
    if not rows:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ps = [p for p, _ in rows]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for ax, metric, label, scale in (
        (axes[0], "records_per_s", "records/s (thousands)", 1e-3),
        (axes[1], "broker_cpu_s_per_m_records", "broker CPU s per million records", 1.0),
    ):
        med = [s[metric]["median"] * scale for _, s in rows]
        low = [(s[metric]["median"] - s[metric]["min"]) * scale for _, s in rows]
        high = [(s[metric]["max"] - s[metric]["median"]) * scale for _, s in rows]
        ax.errorbar(ps, med, yerr=[low, high], marker="o", capsize=4)
        ax.set_xscale("log")
        ax.set_xlabel("partitions (P)")
        ax.set_ylabel(label)
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3, which="both")
    par = result["parameters"]
    fig.suptitle(f"pybroker, {par['records']:,} x {par['size']} B records round-robin over P partitions "
                 f"(median, min–max of {par['runs']} run(s))", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


# --------------------------------------------------------------------------- main


def int_list(text: str) -> list[int]:
    """"1,10,100" -> [1, 10, 100]; "" -> [] (the measurement is skipped)."""
    values = [int(x) for x in text.split(",") if x.strip()]
    if any(v < 1 for v in values):
        raise argparse.ArgumentTypeError("partition counts must be >= 1")
    return values


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0].replace("\n", " "),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    ap.add_argument("--partitions", type=int_list, default="1,10,100,1000,10000",
                    help="partition counts of the throughput sweep ('' skips it)")
    ap.add_argument("--records", type=int, default=1_000_000,
                    help="records per sweep run, and in the start-up broker")
    ap.add_argument("--size", type=int, default=100, help="record size in bytes")
    ap.add_argument("--runs", type=int, default=3, help="sweep runs per partition count (a fresh broker each)")
    ap.add_argument("--control-of", type=int, default=1000,
                    help=f"after the sweep, run P={CONTROL_PARTITIONS} again with the records per Produce "
                    "request measured at this P (0 skips it)")
    ap.add_argument("--reference-partitions", type=int_list, default="10,1000",
                    help="partition counts of the sweep run against Tansu as well ('' skips it)")
    ap.add_argument("--create", type=int_list, default="1000,10000",
                    help="partition counts of the creation measurement ('' skips it)")
    ap.add_argument("--startup-partitions", type=int, default=10_000,
                    help="partitions of the start-up broker (0 skips it)")
    ap.add_argument("--baseline", type=float, default=5.0,
                    help="shortest quiet window before each creation, seconds (longer when the "
                    "previous creation predicts a longer one)")
    ap.add_argument("--create-timeout", type=float, default=120.0,
                    help="seconds for a topic's creation, until every partition is led")
    ap.add_argument("--produce-timeout", type=float, default=600.0, help="seconds for a produce phase")
    ap.add_argument("--startup-timeout", type=float, default=120.0,
                    help="seconds for a broker to be ready (port, and Metadata on a restart)")
    ap.add_argument("--stop-timeout", type=float, default=60.0,
                    help="seconds a broker has to exit after SIGTERM before SIGKILL")
    ap.add_argument("--quiet-cores", type=float, default=0.3,
                    help="before each measurement, wait until the machine's busy CPU is below this many cores")
    ap.add_argument("--quiet-wait", type=float, default=60.0,
                    help="longest wait for --quiet-cores, in seconds (then the measurement starts anyway)")
    ap.add_argument("--out", default=str(REPO / "bench" / "results"), help="results directory")
    ap.add_argument("--workdir", default=None, help="scratch dir for data dirs and logs (default: a new temp dir)")
    ap.add_argument("--keep-workdir", action="store_true", help="keep broker data dirs and logs")
    ap.add_argument("--python", default=sys.executable, help="interpreter that runs pybroker")
    args = ap.parse_args(argv)
    if args.records < 1 or args.size < 1 or args.runs < 1 or args.startup_partitions < 0 or args.control_of < 0:
        ap.error("--records, --size and --runs must be >= 1, --startup-partitions and --control-of >= 0")
    if args.control_of and args.control_of not in args.partitions:
        ap.error(f"--control-of {args.control_of} is not in --partitions")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    args.pybroker_import = pybroker_import(args.python)
    args.tansu = args.tansu_version = args.tansu_package = None
    if args.reference_partitions:
        args.tansu, args.tansu_package = find_tansu()
        done = subprocess.run([args.tansu, "--version"], capture_output=True, text=True, timeout=30)
        args.tansu_version = done.stdout.strip()
    sweep_runs: list[dict[str, Any]] = []
    control: dict[str, Any] = {}
    reference: dict[str, Any] = {}
    creation: dict[str, Any] = {}
    startup: dict[str, Any] = {}
    with BenchRun.start(__file__, argv, args, prefix="bench-partitions-") as bench:
        workdir = bench.workdir
        print(f"workdir {workdir}, load {fmt_load(bench.machine['loadavg_start'])}", flush=True)
        for p in args.partitions:
            for run_no in range(1, args.runs + 1):
                out: dict[str, Any] = {"run": run_no}
                sweep_runs.append(out)
                measure_sweep_run(out, p, args, workdir)
                print(one_line_sweep(out), flush=True)
            if p == args.control_of:  # next to the runs it is compared with
                measure_control(control, sweep_runs, args, workdir)
        if args.reference_partitions:
            measure_reference(reference, args, workdir)
        if args.create:
            quiet_gate(creation, args)
            measure_creation(creation, args, workdir)
            for c in creation["creations"]:
                print(one_line_creation(c), flush=True)
            if creation.get("error"):
                print(f"[creation] FAILED {creation['error']}", flush=True)
        if args.startup_partitions:
            quiet_gate(startup, args)
            measure_startup(startup, args, workdir)
            print(one_line_startup(startup), flush=True)

    parameters = {k: v for k, v in vars(args).items() if k != "pybroker_import" and not k.startswith("tansu")}
    result: dict[str, Any] = {
        **bench.head(),
        "parameters": parameters,
        "client_settings": {"sweep_producer": SWEEP_PRODUCER_CONF, "probe_producer": PROBE_PRODUCER_CONF},
        "machine": bench.machine,
        "versions": {
            "confluent_kafka": confluent_kafka.__version__,
            "librdkafka": confluent_kafka.libversion()[0],
            "pybroker_import": args.pybroker_import,
            "python": sys.version.split()[0],
        },
        "sweep": {"runs": sweep_runs, "summary": summarize_sweep(sweep_runs, args.partitions)},
        "control": control,
        "reference": reference,
        "creation": creation,
        "startup": startup,
    }
    result["targets"] = targets(result)
    bench.write("partitions", result, render_markdown, plot, to_json)
    runs = sweep_runs + control.get("runs", []) + reference.get("runs", [])
    ok = (all(r.get("ok") for r in runs) and "error" not in control
          and all(g.get("ok", True) for g in (creation, startup)))
    return 0 if ok and not bench.interrupted else 1

def to_json(result: dict[str, Any]) -> str:
    """Indented JSON with every list of numbers on one line."""
    text = json.dumps(result, indent=1)
    return re.sub(r"\[\n\s*([-0-9.e, \n]+?)\n\s*\]", lambda m: "[" + " ".join(m.group(1).split()) + "]", text) + "\n"


def one_line_sweep(r: dict[str, Any]) -> str:
    head = f"[{r.get('variant', 'sweep')} {r['broker_name']} P={r['partitions']} run {r['run']}] "
    if not r.get("ok"):
        return head + "FAILED " + str(r.get("error"))
    return head + (f"{r['records_per_s']:,.0f} records/s, broker CPU {r['broker_cpu_s_per_m_records']:.2f} s "
                   f"per M records, RSS {r['rss_mb_after']:.1f} MB")


def one_line_creation(c: dict[str, Any]) -> str:
    head = f"[create {c['partitions']}] "
    if "all_led_s" not in c:
        return head + "not completed"
    lat = c.get("latency_ms", {})
    return head + (f"answered {c['response_s']:.2f} s, all led {c['all_led_s']:.2f} s; probe p99 "
                   f"{(lat.get('creation') or {}).get('p99', float('nan')):.2f} ms "
                   f"(baseline {(lat.get('baseline') or {}).get('p99', float('nan')):.2f} ms)")


def one_line_startup(s: dict[str, Any]) -> str:
    head = f"[startup {s['partitions']} partitions] "
    parts = [f"{label} ready {s[key]['ready_s']:.2f} s, RSS {s[key]['rss_mb']:.1f} MB"
             for key, label in (("clean_restart", "clean"), ("unclean_restart", "kill -9")) if key in s]
    text = head + "; ".join(parts)
    return text + (f" FAILED {s['error']}" if s.get("error") else "")


if __name__ == "__main__":
    raise SystemExit(main())
