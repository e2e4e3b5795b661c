"""Replication cost on a 3-broker cluster: RF=3 with acks=all against RF=1 with acks=1, same client.

Usage::

    python bench/cluster_replication.py [--sizes 100,65536] [--runs 5]

For every run and record size, a fresh 3-broker cluster (``bench/cluster.py``: one ZooKeeper for
the whole script, a chroot and fresh data dirs per cluster, default broker settings) gets two
1-partition topics led by the same broker (not the controller): ``rf1`` (that broker alone) and
``rf3`` (the three brokers, the leader first). Into each, kcat (the client and records file of
``bench/broker_compare.py``: Debian's kcat on the confluent-kafka wheel's librdkafka 2.16,
linger.ms=5) produces the same ``--records`` records of ``size`` bytes: ``-X acks=1`` into rf1,
``-X acks=all`` into rf3. The order of the two alternates from run to run. Each phase is timed
from kcat's start to its exit (kcat exits once every record is acknowledged), after the quiet
gate; its high watermark must then equal ``--records``. Before the gate, ``sync`` writes back what
the previous phase left dirty (3 GiB after an RF=3 phase of 1 GiB: enough for the kernel to
throttle the next writer). Broker CPU is the scheduler run time of
the three brokers' process groups over the phase, summed (per broker in the JSON).

Reported per size: records/s and MB/s of each, the broker CPU seconds per GB of payload, and the
run-pair ratio RF=3 acks=all / RF=1 acks=1 with its median and a distribution-free interval.
Target: the median ratio >= 0.5 (Kafka's published figure: 421,823 against 821,557 records/s of
100 B, 3x synchronous replication against none, Jay Kreps, "Benchmarking Apache Kafka", 2014),
judged on at least 3 run pairs. Results: ``<out>/cluster_replication.{json,md,png}``.

Guest memory. On these machines (a Firecracker VM whose balloon device reports free memory to the
host), memory left free for a few seconds goes back to the host, and touching it again costs the
writer page faults into the hypervisor: writing 1 GiB into the page cache then costs 1-2 CPU s
instead of about 0.2. An RF=3 phase writes three times the pages of an RF=1 phase, so measured
that way the ratio would mostly be the hypervisor's. By default (``--warm-memory-mib``, 4 GiB)
every phase is therefore preceded, right after its quiet gate, by touching that much anonymous
memory and freeing it, so that both configurations write into memory the guest holds;
``--warm-memory-mib 0`` measures without it. The cost of a 1 GiB page-cache write with and without
the warm-up is measured once at the start and reported (``page_cache_write``).

The bound on this machine. Three brokers and the client share 2 cores, so both phases are bound by
CPU, and RF=3 adds for each follower at least the leader's ``sendfile`` of the bytes over loopback
and the follower's receive and page-cache write. That least cost is measured once with no broker
code (``replica_copy``: a blocking ``sendfile`` loop to a thread that ``recv_into``s a 1 MiB buffer
and ``write``s it to a file; no CRC, no protocol). Per run pair, the best ratio any implementation
could reach here is then bounded by RF=1's wall time over (the client's CPU in the RF=3 phase +
RF=1's broker CPU + two such copies) / cores; the median of that bound is reported beside the
target. The client's own CPU is taken as measured with acks=all: it holds every record until the
acknowledgement, and does more work than with acks=1.
"""

from __future__ import annotations

import argparse
import datetime as dt
import mmap
import os
import shutil
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from broker_compare import (  # noqa: E402
    REPO,
    Tools,
    children_cpu_seconds,
    default_records,
    make_records_file,
    median_interval,
    setup_tools,
    system_busy_seconds,
    wait_for_quiet,
)
from brokers import (  # noqa: E402
    provenance_line,
    pybroker_import,
)
from harness import BenchRun  # noqa: E402

from bench.cluster import LocalCluster, pick_roles, start_zookeeper  # noqa: E402

CONFIGS = {  # name -> (replication factor, acks)
    "rf1-acks1": (1, "1"),
    "rf3-acksall": (3, "all"),
}
RATIO_TARGET = 0.5
KAFKA_REFERENCE = "Kafka: 421,823 / 821,557 records/s = 0.51 (100 B, 3x sync replication vs none; Kreps 2014)"
MIN_JUDGED = 3
MIB = 1 << 20


def write_back_dirty_pages() -> float:
    """``sync``: the previous phase's dirty pages written back, so that a phase neither competes
    with that writeback nor is throttled by the kernel's dirty-page limits; seconds."""
    t0 = time.perf_counter()
    os.sync()
    return time.perf_counter() - t0


def warm_guest_memory(mib: int) -> float:
    """Touch ``mib`` MiB of anonymous memory and free it (see "Guest memory" above); seconds."""
    t0 = time.perf_counter()
    if mib > 0:
        with mmap.mmap(-1, mib * MIB, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | mmap.MAP_POPULATE):
            pass
    return time.perf_counter() - t0


def page_cache_write_cost(workdir: Path, warm_mib: int, idle_s: float = 8.0) -> dict[str, float]:
    """CPU seconds (user + system, this process) to write 1 GiB into a new file (page cache, no sync)
    after ``idle_s`` idle seconds (cold: the guest has given its free memory back) and again
    right after a warm-up of ``warm_mib`` MiB."""
    block = b"\x5a" * MIB
    out: dict[str, float] = {}
    for mode in ("cold", "warm"):
        time.sleep(idle_s)
        if mode == "warm":
            warm_guest_memory(max(warm_mib, 1024))
        path = workdir / f"page-cache-{mode}.bin"
        c0 = os.times()
        with open(path, "wb", buffering=0) as f:
            for _ in range(1024):
                f.write(block)
        c1 = os.times()
        path.unlink()
        out[f"{mode}_cpu_s_per_gib"] = (c1.user - c0.user) + (c1.system - c0.system)
    return out


def produce_phase(cluster: LocalCluster, tools: Tools, topic: str, acks: str, records_file: Path, records: int,
                  size: int, run_dir: Path, timeout: float) -> dict[str, Any]:
    """kcat produces the records file into ``topic`` partition 0 with ``acks``; timed, with the
    brokers' CPU over the phase."""
    cmd = [tools.kcat, "-P", "-b", cluster.bootstrap(), "-t", topic, "-p", "0", "-X", f"acks={acks}",
           "-l", str(records_file)]
    cpu0 = cluster.cpu_by_node()
    child0 = children_cpu_seconds()
    busy0 = system_busy_seconds()
    err_path = run_dir / f"{topic}.err"
    with open(err_path, "wb") as err:
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, env=tools.client_env(), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=err)
        try:
            rc: int | None = p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(30)
            rc = None
        wall = time.perf_counter() - t0
    cpu1 = cluster.cpu_by_node()
    busy = system_busy_seconds() - busy0
    client_cpu = children_cpu_seconds() - child0
    by_node = {n: cpu1[n] - cpu0[n] for n in cpu1 if n in cpu0}
    broker_cpu = sum(by_node.values())
    payload = records * size
    out: dict[str, Any] = {
        "command": cmd, "wall_s": wall, "rc": rc, "records": records, "size": size,
        "records_per_s": records / wall, "mb_per_s": payload / wall / 1e6,
        "broker_cpu_s": broker_cpu, "broker_cpu_s_by_node": by_node,
        "broker_cpu_s_per_gb": broker_cpu / (payload / 1e9),
        "client_cpu_s": client_cpu, "other_cpu_s": busy - broker_cpu - client_cpu,
        "stderr_tail": err_path.read_bytes()[-1500:].decode("utf-8", "replace"),
    }
    errors = []
    if rc != 0:
        errors.append("kcat timed out" if rc is None else f"kcat exit code {rc}")
    if len(by_node) != len(cluster.nodes):
        errors.append("a broker died")
    else:
        end = cluster.end_offsets(topic)[0]
        out["high_watermark"] = end
        if end != records:
            errors.append(f"high watermark {end}, expected {records}")
    out["ok"] = not errors
    if errors:
        out["error"] = "; ".join(errors)
    return out


def replica_copy_cost(workdir: Path, warm_mib: int, mib: int = 1024) -> dict[str, float]:
    """CPU seconds per GiB of the least work one follower adds (see "The bound" above): a
    ``sendfile`` of a page-cached file over loopback, and on the other end ``recv_into`` a 1 MiB
    buffer and ``write`` into a new file, each timed by its own thread's CPU clock."""
    source, sink = workdir / "replica-copy.src", workdir / "replica-copy.dst"
    block = b"\xa5" * MIB
    with open(source, "wb") as f:
        for _ in range(mib):
            f.write(block)
    total = mib * MIB
    received: dict[str, float] = {}
    listener = socket.create_server(("127.0.0.1", 0))

    def receive() -> None:
        conn, _ = listener.accept()
        buf = bytearray(MIB)
        view = memoryview(buf)
        t0 = time.thread_time()
        with conn, open(sink, "wb", buffering=0) as out:
            got = 0
            while got < total:
                n = conn.recv_into(buf)
                if not n:
                    break
                out.write(view[:n])
                got += n
        received["cpu_s"] = time.thread_time() - t0
        received["bytes"] = got

    warm_guest_memory(warm_mib)
    thread = threading.Thread(target=receive)
    thread.start()
    with socket.create_connection(listener.getsockname()) as conn, open(source, "rb") as src:
        t0 = time.thread_time()
        sent = 0
        while sent < total:
            sent += os.sendfile(conn.fileno(), src.fileno(), sent, total - sent)
        send_cpu = time.thread_time() - t0
    thread.join()
    listener.close()
    source.unlink()
    sink.unlink()
    gib = total / (1 << 30)
    if received.get("bytes") != total:
        raise RuntimeError(f"replica copy: received {received.get('bytes')} of {total} bytes")
    return {"send_cpu_s_per_gib": send_cpu / gib, "receive_write_cpu_s_per_gib": received["cpu_s"] / gib}


def ratio_bound(run: dict[str, Any], copy: dict[str, float], cores: int) -> float:
    """The best RF=3/RF=1 ratio reachable in this run pair (see "The bound" above)."""
    rf1, rf3 = run["phases"]["rf1-acks1"], run["phases"]["rf3-acksall"]
    gib = rf1["records"] * rf1["size"] / (1 << 30)
    floor_cpu = rf3["client_cpu_s"] + rf1["broker_cpu_s"] + 2 * gib * (
        copy["send_cpu_s_per_gib"] + copy["receive_write_cpu_s_per_gib"])
    return rf1["wall_s"] / (floor_cpu / cores)


def run_one(run_no: int, size: int, records: int, records_file: Path, zk_connect: str, tools: Tools,
            args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    """One fresh cluster, both configurations produced into it (order alternating by run)."""
    run_dir = workdir / f"run{run_no}-{size}"
    out: dict[str, Any] = {"run": run_no, "size": size, "records": records, "ok": False,
                           "started_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), "phases": {}}
    order = list(CONFIGS) if run_no % 2 else list(reversed(CONFIGS))
    out["order"] = order
    cluster = LocalCluster(f"{zk_connect}/cluster-replication-{run_no}-{size}", run_dir,
                           python=args.python, add_repo_to_pythonpath=args.add_repo_to_pythonpath)
    try:
        out["cluster_start_s"] = cluster.start(args.startup_timeout)
        controller, leader, followers = pick_roles(cluster)
        out.update(controller=controller, leader=leader)
        for name in order:
            rf, acks = CONFIGS[name]
            replicas = [leader, *followers[: rf - 1]]
            cluster.create_topic(name, [replicas])
            sync_s = write_back_dirty_pages()
            quiet = wait_for_quiet(args.quiet_cores, args.quiet_wait)
            warm_s = warm_guest_memory(args.warm_memory_mib)
            phase = produce_phase(cluster, tools, name, acks, records_file, records, size, run_dir,
                                  args.phase_timeout)
            phase.update(replicas=replicas, acks=acks, pre_busy_cores=quiet["busy_cores"], sync_s=sync_s, warm_s=warm_s,
                         pre_wait_s=quiet["waited_s"], loadavg_before=list(os.getloadavg()))
            out["phases"][name] = phase
            if not phase["ok"]:
                raise RuntimeError(f"{name}: {phase['error']}")
        out["peak_rss_mb"] = cluster.rss_mb("VmHWM")
        out["ok"] = True
    except Exception as exc:
        out["error"] = f"{type(exc).__name__}: {exc}"
        out["broker_log_tails"] = cluster.log_tails()
    finally:
        out["exit_codes"] = cluster.stop()
        if not args.keep_workdir:
            shutil.rmtree(run_dir, ignore_errors=True)
    return out


def summarize(runs: list[dict[str, Any]], sizes: list[int], copy: dict[str, float] | None,
              cores: int) -> dict[str, Any]:
    """Per size: each configuration's medians (and spread), the run-pair ratio and its bound."""
    out: dict[str, Any] = {}
    for size in sizes:
        good = [r for r in runs if r["size"] == size and r.get("ok")]
        entry: dict[str, Any] = {"runs_ok": len(good), "runs_failed": sum(1 for r in runs if r["size"] == size
                                                                           and not r.get("ok"))}
        for name in CONFIGS:
            phases = [r["phases"][name] for r in good]
            if phases:
                entry[name] = {key: {"median": statistics.median(p[key] for p in phases),
                                     "min": min(p[key] for p in phases), "max": max(p[key] for p in phases)}
                               for key in ("records_per_s", "mb_per_s", "broker_cpu_s_per_gb", "broker_cpu_s")}
        ratios = [r["phases"]["rf3-acksall"]["records_per_s"] / r["phases"]["rf1-acks1"]["records_per_s"]
                  for r in good]
        if ratios:
            entry["ratio"] = {**median_interval(ratios), "ratios": ratios}
            cpu = [r["phases"]["rf3-acksall"]["broker_cpu_s_per_gb"] / r["phases"]["rf1-acks1"]["broker_cpu_s_per_gb"]
                   for r in good]
            entry["cpu_ratio"] = {**median_interval(cpu), "ratios": cpu}
            if copy:
                bounds = [ratio_bound(r, copy, cores) for r in good]
                entry["ratio_bound"] = {"median": statistics.median(bounds), "bounds": bounds}
        out[str(size)] = entry
    return out


def targets(summary: dict[str, Any]) -> list[dict[str, Any]]:
    res = []
    for size, entry in summary.items():
        name = f"{int(size):,} B: throughput RF=3 acks=all / RF=1 acks=1 >= {RATIO_TARGET}"
        ratio = entry.get("ratio")
        if not ratio:
            res.append({"target": name, "value": "n/a", "result": "not measured", "note": "no successful run"})
            continue
        value = (f"median {ratio['median']:.2f} ({ratio['coverage']:.0%} interval {ratio['low']:.2f}-"
                 f"{ratio['high']:.2f})")
        if ratio["n"] < MIN_JUDGED:
            result = "not judged"
        else:
            result = "PASS" if ratio["median"] >= RATIO_TARGET else "FAIL"
        bound = entry.get("ratio_bound")
        reach = f"; best reachable on this machine: {bound['median']:.2f} (see the bound)" if bound else ""
        res.append({"target": name, "value": value, "result": result,
                    "note": f"{ratio['n']} run pair(s){reach}; {KAFKA_REFERENCE}"})
    return res


def render_markdown(result: dict[str, Any]) -> str:
    par = result["parameters"]
    lines = [
        "# Replication cost on a 3-broker cluster: RF=3 acks=all vs RF=1 acks=1",
        "",
        f"{provenance_line(result['provenance'])} Finished {result['finished_at']}; "
        f"{result['wall_s'] / 60:.1f} min. Machine: {result['machine']['nproc']} vCPU, "
        f"{result['machine']['platform']}; load average at start "
        f"{' / '.join(f'{x:.2f}' for x in result['machine']['loadavg_start'])}.",
        "",
        "Every run: a fresh cluster of 3 pybroker processes and ZooKeeper (tickTime "
        f"{par['zk_tick_ms']} ms) on this machine, default broker settings; two 1-partition topics led by the "
        "same broker (not the controller), RF=1 and RF=3; kcat (librdkafka 2.16, linger.ms=5) produces the "
        "same records into each, `-X acks=1` and `-X acks=all`, order alternating, each phase after `sync` "
        "(the previous phase's dirty pages written back) and a quiet gate. Broker CPU = the three "
        "brokers' CPU over the phase, summed; MB = 10^6 bytes of record payload.",
        "",
        _memory_line(result),
        "",
        "| size | records | configuration | records/s | MB/s | broker CPU s/GB (3 brokers) | runs |",
        "|---:|---:|---|---:|---:|---:|---:|",
    ]
    for size, entry in result["summary"].items():
        records = next((r["records"] for r in result["runs"] if str(r["size"]) == size), 0)
        for name in CONFIGS:
            s = entry.get(name)
            if not s:
                continue
            lines.append(
                f"| {int(size):,} B | {records:,} | {name} | {s['records_per_s']['median']:,.0f} "
                f"({s['records_per_s']['min']:,.0f}-{s['records_per_s']['max']:,.0f}) | "
                f"{s['mb_per_s']['median']:,.1f} | {s['broker_cpu_s_per_gb']['median']:.2f} "
                f"({s['broker_cpu_s_per_gb']['min']:.2f}-{s['broker_cpu_s_per_gb']['max']:.2f}) | "
                f"{entry['runs_ok']}/{entry['runs_ok'] + entry['runs_failed']} |")
    lines += ["", "Medians over the runs (min-max in brackets).", "",
              "## RF=3 acks=all / RF=1 acks=1, run by run", "",
              "| size | throughput ratios | median | interval (coverage) | CPU s/GB ratios | median |",
              "|---:|---|---:|---|---|---:|"]
    for size, entry in result["summary"].items():
        r, c = entry.get("ratio"), entry.get("cpu_ratio")
        if r and c:
            lines.append(f"| {int(size):,} B | {', '.join(f'{x:.2f}' for x in r['ratios'])} | {r['median']:.2f} | "
                         f"{r['low']:.2f}-{r['high']:.2f} ({r['coverage']:.0%}) | "
                         f"{', '.join(f'{x:.2f}' for x in c['ratios'])} | {c['median']:.2f} |")
    lines += _bound_lines(result)
    lines += ["", "## Targets", "", "| target | value | result | note |", "|---|---|---|---|"]
    for t in result["targets"]:
        lines.append(f"| {t['target']} | {t['value']} | {t['result']} | {t['note']} |")
    lines += ["", "## Runs", "",
              "*CPU by broker*: leader first, then the followers (s over the phase). *other CPU s*: machine-wide "
              "busy CPU minus brokers and kcat during the phase (the harness, ZooKeeper, anything else).", "",
              "| size | run | configuration | busy cores before | records/s | MB/s | CPU s/GB | CPU by broker (s) | "
              "kcat CPU s | other CPU s | status |",
              "|---:|---:|---|---:|---:|---:|---:|---|---:|---:|---|"]
    for r in result["runs"]:
        if not r["phases"]:
            lines.append(f"| {r['size']:,} | {r['run']} | — | — | — | — | — | — | — | — | "
                         f"FAILED: {str(r.get('error', '?')).replace('|', '/')[:160]} |")
        for name in r.get("order", []):
            p = r["phases"].get(name)
            if not p:
                continue
            by = p["broker_cpu_s_by_node"]
            order = [r["leader"], *[n for n in sorted(by, key=int) if int(n) != r["leader"]]]
            cpu = " / ".join(f"{by.get(n, by.get(str(n), 0.0)):.2f}" for n in order)
            status = "ok" if p["ok"] else "FAILED: " + str(p.get("error")).replace("|", "/")[:120]
            lines.append(f"| {r['size']:,} | {r['run']} | {name} | {p['pre_busy_cores']:.2f} | "
                         f"{p['records_per_s']:,.0f} | {p['mb_per_s']:,.1f} | {p['broker_cpu_s_per_gb']:.2f} | "
                         f"{cpu} | {p['client_cpu_s']:.2f} | {p['other_cpu_s']:.2f} | {status} |")
    lines += ["", "Versions: " + "; ".join(f"{k}: {v}" for k, v in result["versions"].items() if v), ""]
    return "\n".join(lines)


def _bound_lines(result: dict[str, Any]) -> list[str]:
    copy = result["machine"].get("replica_copy")
    if not copy:
        return []
    lines = ["", "## The bound on this machine", "",
             f"The least work one follower adds, measured with no broker code: the leader's `sendfile` over loopback "
             f"{copy['send_cpu_s_per_gib']:.2f} CPU s/GiB, the follower's receive and page-cache write "
             f"{copy['receive_write_cpu_s_per_gib']:.2f} CPU s/GiB. With the brokers and the client on "
             f"{result['machine']['nproc']} cores, no implementation's RF=3 phase can take less than (the client's CPU "
             "in that phase + RF=1's broker CPU + two such copies) / cores, so each run pair's ratio is bounded by "
             "RF=1's wall time over that. The client's CPU is the one measured with acks=all (it keeps every record "
             "until acknowledged):",
             "", "| size | bound per run pair | median bound | measured median |", "|---:|---|---:|---:|"]
    for size, entry in result["summary"].items():
        b, r = entry.get("ratio_bound"), entry.get("ratio")
        if b and r:
            lines.append(f"| {int(size):,} B | {', '.join(f'{x:.2f}' for x in b['bounds'])} | {b['median']:.2f} | "
                         f"{r['median']:.2f} |")
    return lines


def _memory_line(result: dict[str, Any]) -> str:
    mib = result["parameters"]["warm_memory_mib"]
    cost = result["machine"].get("page_cache_write", {})
    measured = (f" Writing 1 GiB into the page cache cost {cost['cold_cpu_s_per_gib']:.2f} CPU s after 8 idle "
                f"seconds and {cost['warm_cpu_s_per_gib']:.2f} CPU s right after a warm-up, on this machine."
                if cost else "")
    if mib:
        return (f"Guest memory: {mib:,} MiB touched and freed right before every phase, so that both "
                "configurations write into memory the VM holds (free memory goes back to the host after a "
                f"few seconds, and touching it again is paid by the writer).{measured}")
    return f"Guest memory: no warm-up (`--warm-memory-mib 0`): page-cache writes pay the VM's cold-memory cost.{measured}"


def plot(result: dict[str, Any], path: Path) -> bool:
    """Per size: MB/s and broker CPU s/GB of both configurations, every run as a dot."""
    sizes = [s for s, e in result["summary"].items() if e.get("ratio")]
    if not sizes:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, len(sizes), figsize=(5.2 * len(sizes), 7), squeeze=False)
    for col, size in enumerate(sizes):
        runs = [r for r in result["runs"] if str(r["size"]) == size and r.get("ok")]
        for row, (key, label) in enumerate((("mb_per_s", "produce MB/s"),
                                            ("broker_cpu_s_per_gb", "broker CPU s per GB (3 brokers)"))):
            ax = axes[row][col]
            for i, name in enumerate(CONFIGS):
                values = [r["phases"][name][key] for r in runs]
                ax.bar(i, statistics.median(values), color=("tab:blue", "tab:orange")[i], alpha=0.6)
                ax.plot([i] * len(values), values, "k.", alpha=0.7)
            ax.set_xticks(range(len(CONFIGS)), ["RF=1 acks=1", "RF=3 acks=all"])
            ax.set_ylabel(label)
            ax.grid(axis="y", alpha=0.3)
            if row == 0:
                ratio = result["summary"][size]["ratio"]["median"]
                ax.set_title(f"{int(size):,} B records: ratio {ratio:.2f}", fontsize=10)
    fig.suptitle("pybroker, 3-broker cluster, kcat producer (median bar, runs as dots)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--sizes", default="100,65536", help="record sizes in bytes, comma-separated")
    ap.add_argument("--records", type=int, default=None,
                    help="records per phase (default: 1,000,000, or 1 GiB of payload for big records)")
    ap.add_argument("--runs", type=int, default=5, help="runs (fresh clusters) per size")
    ap.add_argument("--out", default=str(REPO / "bench" / "results"), help="results directory")
    ap.add_argument("--tag", default="", help="suffix of the result files' name")
    ap.add_argument("--workdir", default=None, help="scratch dir (default: a new temp dir)")
    ap.add_argument("--keep-workdir", action="store_true", help="keep broker data dirs and logs")
    ap.add_argument("--zk-tick-ms", type=int, default=2000, help="ZooKeeper tickTime")
    ap.add_argument("--startup-timeout", type=float, default=60.0, help="seconds for the cluster to form")
    ap.add_argument("--phase-timeout", type=float, default=600.0, help="seconds for one produce phase")
    ap.add_argument("--quiet-cores", type=float, default=0.3,
                    help="before each phase, wait until the machine's busy CPU (1 s sample) is below this")
    ap.add_argument("--quiet-wait", type=float, default=60.0, help="longest wait for --quiet-cores, s")
    ap.add_argument("--warm-memory-mib", type=int, default=4096,
                    help="before each phase, touch and free this much memory (0: off; see the docstring)")
    ap.add_argument("--kcat", default="kcat", help="kcat binary")
    ap.add_argument("--any-librdkafka", action="store_true", help="do not insist on librdkafka 2.16")
    ap.add_argument("--python", default=sys.executable, help="interpreter that runs pybroker")
    args = ap.parse_args(argv)
    args.sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    if not args.sizes or min(args.sizes) < 1 or args.runs < 1 or (args.records is not None and args.records < 1):
        ap.error("--sizes, --records and --runs must be >= 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    pyb = pybroker_import(args.python)
    args.add_repo_to_pythonpath = bool(pyb.get("add_repo_to_pythonpath"))
    runs: list[dict[str, Any]] = []
    tools: Tools | None = None
    with BenchRun.start(__file__, argv, args, prefix="bench-cluster-replication-") as bench:
        workdir = bench.workdir
        tools = setup_tools(workdir, args.kcat, False, args.any_librdkafka)
        bench.machine["page_cache_write"] = page_cache_write_cost(workdir, args.warm_memory_mib)
        bench.machine["replica_copy"] = replica_copy_cost(workdir, args.warm_memory_mib)
        files = {}
        for size in args.sizes:
            records = args.records or default_records(size)
            files[size] = (workdir / f"records-{size}.txt", records)
            make_records_file(files[size][0], records, size)
        zk = start_zookeeper(workdir / "zookeeper", args.zk_tick_ms)
        try:
            for run_no in range(1, args.runs + 1):
                for size in args.sizes:
                    path, records = files[size]
                    r = run_one(run_no, size, records, path, zk.connect_string, tools, args, workdir)
                    runs.append(r)
                    print(one_line(r), flush=True)
        finally:
            zk.stop()
    summary = summarize(runs, args.sizes, bench.machine.get("replica_copy"), bench.machine["nproc"])
    result: dict[str, Any] = {
        **bench.head(),
        "parameters": vars(args),
        "configs": {name: {"replication_factor": rf, "acks": acks} for name, (rf, acks) in CONFIGS.items()},
        "machine": bench.machine,
        "versions": {"kcat": tools.kcat_version if tools else None, "librdkafka_file": tools.librdkafka if tools else None,
                     "pybroker_import": pyb, "python": sys.version.split()[0]},
        "runs": runs,
        "summary": summary,
        "targets": targets(summary),
    }
    bench.write(f"cluster_replication{'-' + args.tag if args.tag else ''}", result, render_markdown, plot)
    return 0 if runs and not bench.interrupted and all(r.get("ok") for r in runs) else 1


def one_line(r: dict[str, Any]) -> str:
    head = f"[{r['size']} B run {r['run']}] "
    if not r.get("ok"):
        return head + "FAILED " + str(r.get("error"))
    parts = [f"{name} {p['records_per_s']:,.0f} rec/s {p['mb_per_s']:.1f} MB/s CPU {p['broker_cpu_s_per_gb']:.2f} s/GB"
             for name, p in r["phases"].items()]
    ratio = r["phases"]["rf3-acksall"]["records_per_s"] / r["phases"]["rf1-acks1"]["records_per_s"]
    return head + "; ".join(parts) + f"; ratio {ratio:.2f}"


if __name__ == "__main__":
    raise SystemExit(main())
