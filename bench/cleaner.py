"""The log cleaner's cost: how fast pybroker compacts a dirty log, how much broker CPU that takes,
what a running clean does to another topic's produce latency, and how the cleaner's rate compares
with this machine's sequential read and write limits.

Usage::

    python bench/cleaner.py [--mb 256] [--sizes 100,1024] [--unique 0.01,0.5] [--runs 3]
                            [--latency-case 100:0.5] [--limits-mib 1024] [--limits-runs 3]

**Machine limits** (measured first, in the work dir, which holds the brokers' data dirs; every run
kept, medians and spread reported): sequential *write* with ``bench/seqwrite.py``, ``--limits-mib``
MiB in 1 MiB ``os.write`` calls, with no sync (the page-cache limit, timed until the last write
returns) and with one ``fdatasync`` at the end (the disk's limit: the cleaner ``fsync``s every
cleaned segment before swapping it in); sequential *read* of a freshly written file of the same
size in 1 MiB ``readinto`` calls, *cold* (after ``fdatasync`` the file's pages are dropped from the
page cache with ``posix_fadvise(DONTNEED)``, and ``fincore`` confirms how much stayed resident;
``/proc/sys/vm/drop_caches`` is not writable in this VM and is not needed) and *warm* (the same file
read again, now from the page cache). A cold read is a read from the virtual disk; whether the
host caches that disk is invisible from inside the VM.

**Cleaning** (one case = record size x fraction of unique keys; every case of every run on a fresh
pybroker, ``python -m pybroker serve`` on a free port of 127.0.0.1, stopped by PID): the broker
runs with ``log.cleaner.backoff.ms`` ``--backoff-ms`` (100, so a clean starts within 0.1 s of being
allowed; Kafka's 15,000 would only delay it) and ``log.cleaner.dedupe.buffer.size``
``--dedupe-buffer-mib`` MiB (Kafka's default 128: at 24 bytes a slot and load factor 0.9, about
5.0 million keys per pass). A topic ``dirty`` with 1 partition, ``cleanup.policy=compact``,
``segment.bytes`` ``--segment-mib`` MiB and ``min.cleanable.dirty.ratio=1`` (a dirty ratio is never
above 1: the cleaner leaves it alone) receives ``--mb`` MB of records of one of ``--sizes`` bytes (a
``--key-bytes`` key plus the value; N = MB / size records) from a confluent-kafka ``Producer``
(acks=all, linger.ms 5, no compression, no idempotence, so that the log holds what was sent). The
keys: U = fraction x N distinct keys, each used N / U times, in an order shuffled over the whole
log (seeded), so every segment holds old and latest versions. Then ``segment.ms`` is set to 1 and
one record with a key of its own is produced: the active segment rolls, and the whole dirty data
sits in closed, cleanable segments. The machine must then be quiet (``os.sync`` first, so the
produce's dirty pages are not written back during the clean). *Trigger*: IncrementalAlterConfigs
sets the topic's ``min.cleanable.dirty.ratio`` to 0; the clean ends when the broker log shows the
cleaner's summary for a dirty section that ends at the rolled segment (polled every 20 ms). A
clean whose offset map fills up ends early and the cleaner runs another pass at once: every pass's
summary is kept, and the number of passes reported.

Reported per case (medians over runs):

* **dirty MB**: bytes of the partition's closed segments at the trigger (MB = 10**6 bytes: the
  records plus their batch and record headers).
* **clean s**: from the cleaner's "Building offset map" log line to its summary line, summed over
  passes (broker log timestamps, 1 ms resolution); **dirty MB/s** = dirty MB / clean s, the
  figure the issue asks for. Also the cleaner's own summary figure (Kafka's "X MB of log processed
  in Y seconds (Z MB/sec)", there in MiB, converted here to MB), its map phase ("Indexed ... MB/sec"),
  and **wall MB/s**: dirty MB over trigger -> summary seen (adds the AlterConfigs round trip, up to
  one backoff and the polling).
* **size reduction**: 1 - bytes of the cleaned segments / dirty bytes (from the files), and the
  cleaner's records out of records in. A run fails unless the last pass wrote exactly U records
  (one per key: every record has a key and no tombstones are produced).
* **broker CPU s/GB**: CPU seconds of every thread of the broker's process group from the trigger
  to the summary (the scheduler's run time, ``/proc/<pid>/task/<tid>/schedstat``, to the
  nanosecond: a clean can last a few clock ticks; the tick-counted user+sys figure is kept in the
  JSON too), per GB of dirty log. The broker has no other load meanwhile.
* **page cache**: how much of the dirty segments was resident in the page cache at the trigger
  (``fincore``). Just produced, it normally all is: the clean reads from memory. ``--evict`` drops
  the segments' pages first (``posix_fadvise(DONTNEED)`` after the ``os.sync``), so that the clean
  reads the disk.
* The cleaner's rate as a fraction of each machine limit, and an I/O floor: the time the disk and
  page cache alone would need for what one pass moves (the dirty section read twice, by the map
  and by the copy, at the measured read rate for where it was; the cleaned segments written and
  ``fdatasync``-ed at the measured synced write rate).

**Produce latency during a clean** (``--latency-case`` SIZE:FRACTION, default the 100 B, 50 %
case; ``none`` skips it): once per run, a fresh broker is given that case's dirty log as above, but
of ``--latency-mb`` MB (512: a clean long enough for tens of thousands of records to be sent during
it), and a second, ordinary topic ``latency`` (1 partition). A confluent-kafka ``Producer`` (acks=all,
linger.ms ``--latency-linger-ms`` 0) in a thread of this process sends ``--latency-rate`` records/s
of ``--latency-size`` bytes to ``latency``, on a 1 ms tick, and serves its delivery reports between
ticks (``poll`` returns as soon as one is in). Latency = delivery report time - ``produce()``
time, per record. After ``--latency-warmup`` s, a *baseline* window of ``--latency-window`` s,
then the trigger: the *clean* window lasts until the summary. Records belong to the window in
which they were sent. Reported: count, rate achieved, p50, p99, p99.9 and max of each window,
delivery errors, and when the clean window's slowest records were sent against when the cleaner
swapped its segments in (broker log). The producer, the broker's event loop and the cleaner's thread share the 2 cores.

Before each case the machine must be quiet (``--quiet-cores``). Results:
``<out>/cleaner[-<tag>].{json,md,png}``; exit status 0 only if every run succeeded.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from array import array
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import confluent_kafka  # noqa: E402
import seqwrite  # noqa: E402
from broker_compare import REPO, wait_for_quiet  # noqa: E402
from brokers import (  # noqa: E402
    Broker,
    broker_command,
    broker_env,
    free_port,
    group_cpu_seconds,
    group_run_seconds,
    kb_to_mb,
    proc_status_kb,
    provenance_line,
    pybroker_import,
)
from confluent_kafka import KafkaError, Producer  # noqa: E402
from confluent_kafka.admin import (  # noqa: E402
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)
from harness import BenchRun  # noqa: E402

MIB = 1024 * 1024
DIRTY_TOPIC = "dirty"
LATENCY_TOPIC = "latency"
LOG_FILE = re.compile(r"(\d{20})\.log")
LOG_TIME = r"\[(?P<ts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\]"
BUILDING = re.compile(LOG_TIME + r" INFO Building offset map for (?P<tp>\S+) for (?P<segments>\d+) segments "
                      r"in offset range \[(?P<first>\d+), (?P<upper>\d+)\)\.")
SUMMARY = re.compile(
    LOG_TIME + r" INFO Log cleaner cleaned log (?P<tp>\S+) \(dirty section = \[(?P<first>\d+), (?P<end>\d+)\]\)\n"
    r"\t(?P<mib>[\d.]+) MB of log processed in (?P<s>[\d.]+) seconds \((?P<mib_s>[\d.]+) MB/sec\)\.\n"
    r"\tIndexed (?P<map_mib>[\d.]+) MB in (?P<map_s>[\d.]+) seconds \((?P<map_mib_s>[\d.]+) MB/sec, "
    r"(?P<map_pct>[\d.]+)% of total time\)\n"
    r"\tBuffer utilization: (?P<buffer_pct>[\d.]+)%\n"
    r"\tStart size: (?P<start_mib>[\d.]+) MB \((?P<start_records>\d+) messages\)\n"
    r"\tEnd size: (?P<end_mib>[\d.]+) MB \((?P<end_records>\d+) messages\)\n"
    r"\t(?P<reduction_pct>[-\d.]+)% size reduction \((?P<fewer_pct>[-\d.]+)% fewer messages\)")
SWAPPING = re.compile(LOG_TIME + r" INFO Swapping in cleaned segment \d+ for segment\(s\) .* in log (?P<tp>\S+) ")
UNCLEANABLE = re.compile(r"Marking its partition \((?P<tp>\S+)\) as uncleanable")
CLEAN_ABORTED = re.compile(r"Cleaning of (?P<tp>\S+) was aborted")
ROLL_KEY = b"~roll"


class NoTansu:
    tansu = None


# --------------------------------------------------------------------------- machine limits


def fincore_resident(paths: list[Path]) -> float | None:
    """Fraction of the files' bytes resident in the page cache (util-linux ``fincore``); None
    when it is not installed or fails."""
    tool = shutil.which("fincore")
    if tool is None or not paths:
        return None
    try:
        done = subprocess.run([tool, "--bytes", "--noheadings", "--raw", "--output", "RES,SIZE", *map(str, paths)],
                              capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        return None
    resident = size = 0
    for line in done.stdout.split("\n"):
        if line.strip():
            res, total = line.split()[:2]
            resident, size = resident + int(res), size + int(total)
    return resident / size if size else None


def evict(paths: list[Path]) -> None:
    """Drop the files' clean pages from the page cache (dirty ones must have been written)."""
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def read_file(path: Path, block_bytes: int = MIB) -> tuple[int, float]:
    """Read the file sequentially with ``readinto`` into one buffer: (bytes, seconds)."""
    buffer = bytearray(block_bytes)
    total = 0
    with open(path, "rb", buffering=0) as f:
        t0 = time.perf_counter()
        while n := f.readinto(buffer):
            total += n
        return total, time.perf_counter() - t0


def read_once(directory: Path, total_bytes: int) -> dict[str, Any]:
    """Write a file of ``total_bytes`` (random 1 MiB blocks), ``fdatasync`` it, drop it from the
    page cache, read it (cold), read it again (warm); the file is removed afterwards."""
    block = os.urandom(MIB)
    fd, name = tempfile.mkstemp(prefix="seqread-", suffix=".bin", dir=directory)
    path = Path(name)
    try:
        written = 0
        while written < total_bytes:
            written += os.write(fd, memoryview(block)[:min(MIB, total_bytes - written)])
        os.fdatasync(fd)
        os.close(fd)
        fd = -1
        evict([path])
        resident = fincore_resident([path])
        cold_bytes, cold_s = read_file(path)
        warm_bytes, warm_s = read_file(path)
    finally:
        if fd >= 0:
            os.close(fd)
        path.unlink(missing_ok=True)
    return {"bytes": total_bytes, "resident_before_cold": resident,
            "cold": {"elapsed_s": cold_s, "mb_per_s": cold_bytes / cold_s / 1e6},
            "warm": {"elapsed_s": warm_s, "mb_per_s": warm_bytes / warm_s / 1e6}}


def spread(rates: list[float]) -> dict[str, float]:
    return {"median_mb_per_s": statistics.median(rates), "min_mb_per_s": min(rates), "max_mb_per_s": max(rates)}


def measure_limits(directory: Path, args: argparse.Namespace) -> dict[str, Any]:
    """The four sequential limits of the work dir's filesystem, ``--limits-runs`` runs each."""
    total = args.limits_mib * MIB
    limits: dict[str, Any] = {}
    for name, sync in (("write_page_cache", "none"), ("write_synced", "end")):
        wait_for_quiet(args.quiet_cores, args.quiet_wait)
        limits[name] = seqwrite.measure(str(directory), total, MIB, args.limits_runs, sync)
    wait_for_quiet(args.quiet_cores, args.quiet_wait)
    reads = [read_once(directory, total) for _ in range(args.limits_runs)]
    for kind in ("cold", "warm"):
        limits[f"read_{kind}"] = {"directory": str(directory), "total_bytes": total, "block_bytes": MIB,
                                  "runs": [{"elapsed_s": r[kind]["elapsed_s"], "mb_per_s": r[kind]["mb_per_s"],
                                            **({"resident_before": r["resident_before_cold"]} if kind == "cold"
                                               else {})} for r in reads],
                                  **spread([r[kind]["mb_per_s"] for r in reads])}
    return limits


# --------------------------------------------------------------------------- broker side


def admin_call(bootstrap: str, what: str, *args: Any, timeout: float = 60) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 4})  # no notice of purged events at exit
    futures = getattr(admin, what)(*args)
    for future in futures.values():
        future.result(timeout)


def set_topic_config(bootstrap: str, topic: str, name: str, value: str) -> None:
    resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)])
    admin_call(bootstrap, "incremental_alter_configs", [resource])


def log_segments(directory: Path) -> dict[int, Path]:
    """Base offset -> path of the partition's live segment files (not .cleaned/.deleted/.swap)."""
    return {int(m[1]): directory / name for name in os.listdir(directory) if (m := LOG_FILE.fullmatch(name))}


def closed_segments(directory: Path, below: int) -> list[Path]:
    return [path for base, path in sorted(log_segments(directory).items()) if base < below]


def keys_in_order(records: int, unique: int, seed: int) -> array[int]:
    """Every key id of range(unique) used records/unique times (the first records % unique ids
    once more), shuffled over the whole log."""
    order = array("q", (i % unique for i in range(records)))
    random.Random(seed).shuffle(order)
    return order


def produce_dirty(bootstrap: str, size: int, key_bytes: int, order: array[int], timeout: float) -> dict[str, Any]:
    """The dirty log: one record per key id of ``order``, ``size`` bytes each (key + value)."""
    failed: list[str] = []

    def on_delivery(err: KafkaError | None, _msg: object) -> None:
        if err is not None:
            failed.append(err.str())

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "compression.type": "none",
                         "enable.idempotence": False, "on_delivery": on_delivery})
    key_format = b"%0" + str(key_bytes).encode() + b"d"
    value = b"v" * (size - key_bytes)
    t0 = time.perf_counter()
    for n, key_id in enumerate(order):
        while True:
            try:
                producer.produce(DIRTY_TOPIC, value, key_format % key_id, partition=0)
                break
            except BufferError:
                producer.poll(0.005)
        if n % 10000 == 0:
            producer.poll(0)
    left = producer.flush(timeout)
    elapsed = time.perf_counter() - t0
    if left or failed:
        raise RuntimeError(f"dirty log: {left} records undelivered, {len(failed)} failed ({failed[:3]})")
    return {"records": len(order), "seconds": elapsed, "msg_s": len(order) / elapsed}


def roll_active_segment(bootstrap: str, directory: Path, records: int, timeout: float) -> None:
    """segment.ms=1, then one record of its own key: the dirty data's last segment closes."""
    set_topic_config(bootstrap, DIRTY_TOPIC, "segment.ms", "1")
    time.sleep(0.01)  # the record's timestamp must be later than the segment's first one + 1 ms
    offsets: list[int] = []
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    producer.produce(DIRTY_TOPIC, b"r", ROLL_KEY, partition=0,
                     on_delivery=lambda err, msg: offsets.append(-1 if err else msg.offset()))
    if producer.flush(timeout) or offsets != [records]:
        raise RuntimeError(f"the rolling record got offset {offsets}, expected {records}")
    if max(log_segments(directory)) != records:
        raise RuntimeError(f"the active segment did not roll: segments {sorted(log_segments(directory))}")


def parse_log_time(ts: str) -> float:
    return dt.datetime.strptime(ts, "%Y-%m-%d %H:%M:%S,%f").timestamp()


def summary_fields(match: re.Match[str]) -> dict[str, Any]:
    """One pass's summary as numbers; Kafka's MB (MiB) also converted to MB (10**6 bytes)."""
    g = match.groupdict()
    out: dict[str, Any] = {"logged_at": parse_log_time(g["ts"]), "first": int(g["first"]), "end": int(g["end"])}
    for key in ("start_records", "end_records"):
        out[key] = int(g[key])
    for key in ("s", "map_s", "map_pct", "buffer_pct", "reduction_pct", "fewer_pct"):
        out[key] = float(g[key])
    for key in ("mib", "mib_s", "map_mib", "map_mib_s", "start_mib", "end_mib"):
        out[key.replace("mib", "mb")] = float(g[key]) * MIB / 1e6
    return out


class BrokerLog:
    """Reads what the broker wrote to its log since a mark."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.mark = path.stat().st_size

    def since_mark(self) -> str:
        with open(self.path, "rb") as f:
            f.seek(self.mark)
            return f.read().decode("utf-8", "replace")


def wait_for_clean(broker: Broker, broker_log: BrokerLog, records: int, timeout: float) -> tuple[float, str]:
    """Poll the broker log until a summary of ``dirty-0`` ends at ``records``; (time seen, log)."""
    tp = f"{DIRTY_TOPIC}-0"
    deadline = time.monotonic() + timeout
    while True:
        text = broker_log.since_mark()
        if any(int(m["end"]) >= records for m in SUMMARY.finditer(text) if m["tp"] == tp):
            return time.monotonic(), text
        if any(m["tp"] == tp for m in UNCLEANABLE.finditer(text)):
            raise RuntimeError(f"the cleaner marked {tp} uncleanable:\n{text[-3000:]}")
        if not broker.alive():
            raise RuntimeError("the broker exited during the clean")
        if time.monotonic() > deadline:
            raise RuntimeError(f"no summary of a clean up to offset {records} within {timeout:.0f} s")
        time.sleep(0.02)


# --------------------------------------------------------------------------- latency producer


class LatencyProducer(threading.Thread):
    """Sends ``rate`` records/s on a 1 ms tick until stopped; keeps (send time, report time,
    error) of every record (``time.monotonic``)."""

    def __init__(self, bootstrap: str, rate: float, size: int, linger_ms: float) -> None:
        super().__init__(name="latency-producer", daemon=True)
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": linger_ms,
                                  "compression.type": "none"})
        self.rate, self.value = rate, b"l" * size
        self.reports: list[tuple[float, float, str | None]] = []
        self.buffer_full = 0
        self._halt = threading.Event()
        self.exception: BaseException | None = None

    def _report(self, sent: float, err: KafkaError | None, _msg: object) -> None:
        self.reports.append((sent, time.monotonic(), None if err is None else err.str()))

    def run(self) -> None:
        try:
            interval, due = 1.0 / self.rate, time.monotonic()
            while not self._halt.is_set():
                now = time.monotonic()
                while due <= now:
                    try:
                        self.producer.produce(LATENCY_TOPIC, self.value, partition=0,
                                              on_delivery=lambda err, msg, sent=now: self._report(sent, err, msg))
                    except BufferError:
                        self.buffer_full += 1
                    due += interval
                if due < now - 1.0:  # fell far behind: do not burst
                    due = now
                self.producer.poll(0.001)
        except BaseException as exc:  # reported by the run
            self.exception = exc

    def stop(self, flush_timeout: float) -> int:
        """Stop sending; wait for outstanding reports; the number still unreported."""
        self._halt.set()
        self.join(30)
        return self.producer.flush(flush_timeout)


def percentile(ordered: list[float], q: float) -> float:
    """Nearest-rank percentile of a sorted list."""
    return ordered[min(len(ordered) - 1, max(0, int(-(-q * len(ordered) // 1)) - 1))]


def window_latencies(reports: list[tuple[float, float, str | None]], start: float, end: float) -> list[float]:
    """Latencies (ms, sorted) of the records sent in [start, end) that were delivered."""
    return sorted(1000 * (r[1] - r[0]) for r in reports if start <= r[0] < end and r[2] is None)


def window_stats(reports: list[tuple[float, float, str | None]], start: float, end: float) -> dict[str, Any]:
    sent = [r for r in reports if start <= r[0] < end]
    ok = window_latencies(reports, start, end)
    out: dict[str, Any] = {"seconds": end - start, "records": len(sent), "errors": len(sent) - len(ok),
                           "rate": len(sent) / (end - start) if end > start else 0.0}
    if ok:
        out.update(p50_ms=percentile(ok, 0.5), p99_ms=percentile(ok, 0.99), p999_ms=percentile(ok, 0.999),
                   max_ms=ok[-1], mean_ms=statistics.fmean(ok))
    return out


# --------------------------------------------------------------------------- one case


def run_case(run_no: int, size: int, unique: float, args: argparse.Namespace, workdir: Path, limits: dict[str, Any],
             latency: bool = False) -> dict[str, Any]:
    """A fresh broker, a dirty log of one case, one triggered clean (with the latency producer
    running during a baseline window and the clean, if ``latency``)."""
    name = f"{'latency-' if latency else ''}{size}b-{unique:g}"
    run_dir = workdir / f"run-{run_no}-{name}"
    run_dir.mkdir(parents=True)
    records = max(1, round((args.latency_mb if latency else args.mb) * 1e6 / size))
    keys = max(1, min(records, round(unique * records)))
    out: dict[str, Any] = {"run": run_no, "kind": "latency" if latency else "clean", "size": size, "unique": unique,
                           "records": records, "keys": keys, "ok": False}
    port = free_port()
    cmd = broker_command("pybroker", port, run_dir / "data", NoTansu(), args.python)
    cmd += ["--override", f"log.cleaner.backoff.ms={args.backoff_ms}",
            "--override", f"log.cleaner.dedupe.buffer.size={args.dedupe_buffer_mib * MIB}"]
    broker = Broker(cmd, broker_env("pybroker", args.add_repo_to_pythonpath), REPO, run_dir / "broker.log")
    producer: LatencyProducer | None = None
    try:
        broker.wait_ready(port, args.startup_timeout)
        bootstrap = f"127.0.0.1:{port}"
        topics = [NewTopic(DIRTY_TOPIC, 1, 1, config={
            "cleanup.policy": "compact", "segment.bytes": str(args.segment_mib * MIB),
            "min.cleanable.dirty.ratio": "1.0"})]
        if latency:
            topics.append(NewTopic(LATENCY_TOPIC, 1, 1))
        admin_call(bootstrap, "create_topics", topics)
        partition_dir = run_dir / "data" / f"{DIRTY_TOPIC}-0"
        out["produce"] = produce_dirty(bootstrap, size, args.key_bytes,
                                       keys_in_order(records, keys, args.seed + run_no), args.phase_timeout)
        roll_active_segment(bootstrap, partition_dir, records, args.phase_timeout)
        out["quiet"] = wait_for_quiet(args.quiet_cores, args.quiet_wait)
        dirty = closed_segments(partition_dir, records)
        out["dirty_segments"] = len(dirty)
        out["dirty_bytes"] = sum(path.stat().st_size for path in dirty)
        if args.evict:
            evict(dirty)
        out["resident_at_trigger"] = fincore_resident(dirty)
        if latency:
            producer = LatencyProducer(bootstrap, args.latency_rate, args.latency_size, args.latency_linger_ms)
            producer.start()
            time.sleep(args.latency_warmup)
            baseline_start = time.monotonic()
            time.sleep(args.latency_window)
        out["rss_before_mb"] = kb_to_mb(proc_status_kb(broker.pid, "VmRSS"))
        broker_log = BrokerLog(broker.log)
        cpu0, ticks0 = group_run_seconds(broker.pid), group_cpu_seconds(broker.pid)
        trigger_wall, trigger = time.time(), time.monotonic()
        set_topic_config(bootstrap, DIRTY_TOPIC, "min.cleanable.dirty.ratio", "0")
        out["alter_configs_s"] = time.monotonic() - trigger
        done, text = wait_for_clean(broker, broker_log, records, args.clean_timeout)
        cpu, ticks = group_run_seconds(broker.pid) - cpu0, group_cpu_seconds(broker.pid) - ticks0
        if producer is not None:
            left = producer.stop(args.phase_timeout)
            if producer.exception is not None:
                raise RuntimeError(f"latency producer: {producer.exception!r}")
            if left:
                raise RuntimeError(f"latency producer: {left} records unreported")
            out["latency"] = {"baseline": window_stats(producer.reports, baseline_start, trigger),
                              "clean": window_stats(producer.reports, trigger, done),
                              "buffer_full": producer.buffer_full}
            during = [r for r in producer.reports if trigger <= r[0] < done and r[2] is None]
            out["latency"]["slowest_during_clean"] = [
                {"sent_after_trigger_s": r[0] - trigger, "ms": 1000 * (r[1] - r[0])}
                for r in sorted(during, key=lambda r: r[0] - r[1])[:10]]
            out["latency_ms"] = {name: [round(v, 2) for v in window_latencies(producer.reports, start, end)]
                                 for name, start, end in (("baseline", baseline_start, trigger),
                                                          ("clean", trigger, done))}
            producer = None
        out["hwm_mb"] = kb_to_mb(proc_status_kb(broker.pid, "VmHWM"))
        tp = f"{DIRTY_TOPIC}-0"
        passes = [summary_fields(m) for m in SUMMARY.finditer(text) if m["tp"] == tp]
        starts = [parse_log_time(m["ts"]) for m in BUILDING.finditer(text) if m["tp"] == tp]
        if len(starts) != len(passes):
            raise RuntimeError(f"{len(starts)} cleans started, {len(passes)} summaries")
        for one_pass, started in zip(passes, starts, strict=True):
            one_pass["started_at"] = started
            one_pass["clean_s"] = one_pass["logged_at"] - started
        out["swaps_after_trigger_s"] = [parse_log_time(m["ts"]) - trigger_wall for m in SWAPPING.finditer(text)
                                        if m["tp"] == tp]
        out["aborted_cleans"] = sum(1 for m in CLEAN_ABORTED.finditer(text) if m["tp"] == tp)
        cleaned = closed_segments(partition_dir, records)
        clean_s = sum(p["clean_s"] for p in passes)
        dirty_mb = out["dirty_bytes"] / 1e6
        out.update(
            passes=passes,
            pass_count=len(passes),
            clean_s=clean_s,
            start_delay_s=passes[0]["started_at"] - trigger_wall,
            wall_s=done - trigger,
            dirty_mb_s=dirty_mb / clean_s if clean_s > 0 else None,
            wall_mb_s=dirty_mb / (done - trigger),
            summary_mb_s=summary_rate(passes),
            map_mb_s=statistics.median(p["map_mb_s"] for p in passes),
            map_share=sum(p["map_pct"] * p["clean_s"] for p in passes) / 100 / clean_s if clean_s > 0 else None,
            buffer_pct=max(p["buffer_pct"] for p in passes),
            cleaned_bytes=sum(path.stat().st_size for path in cleaned),
            cleaned_segments=len(cleaned),
            records_out=passes[-1]["end_records"],
            broker_cpu_s=cpu,
            broker_cpu_ticks_s=ticks,
            broker_cpu_s_per_gb=cpu / (out["dirty_bytes"] / 1e9),
        )
        out["size_reduction"] = 1 - out["cleaned_bytes"] / out["dirty_bytes"]
        out["io_floor_s"] = io_floor(out, limits)
        if out["records_out"] != keys:
            raise RuntimeError(f"the last pass kept {out['records_out']} records, expected one per key ({keys})")
        out["ok"] = True
    except Exception as exc:  # the run fails, the others go on
        out["error"] = f"{type(exc).__name__}: {exc}"
        out["broker_log_tail"] = broker.log_tail()
    finally:
        if producer is not None:
            producer.stop(5)
        broker.stop()
        if not args.keep_workdir:
            shutil.rmtree(run_dir, ignore_errors=True)
    return out


def summary_rate(passes: list[dict[str, Any]]) -> float | None:
    """The cleaner's own MB/s over every pass: its MB over its seconds, each pass's seconds taken as
    MB / (MB/sec) (the summary prints seconds to 0.1 s, the rate to 0.1 MB/s)."""
    seconds = sum(p["mb"] / p["mb_s"] for p in passes if p["mb_s"] > 0)
    return sum(p["mb"] for p in passes) / seconds if seconds > 0 else None


def io_floor(case: dict[str, Any], limits: dict[str, Any]) -> float | None:
    """Seconds the storage alone would need for one pass: read the dirty bytes twice (map, copy)
    from wherever they were (page cache or disk) and write the cleaned bytes with fdatasync."""
    if not limits:
        return None
    resident = case.get("resident_at_trigger")
    read = limits["read_warm" if resident is None or resident >= 0.5 else "read_cold"]["median_mb_per_s"]
    write = limits["write_synced"]["median_mb_per_s"]
    return 2 * case["dirty_bytes"] / 1e6 / read + case["cleaned_bytes"] / 1e6 / write


# --------------------------------------------------------------------------- summary, output


def median(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


CASE_METRICS = ("records", "keys", "dirty_bytes", "dirty_segments", "pass_count", "clean_s", "dirty_mb_s",
                "summary_mb_s", "wall_mb_s", "wall_s", "start_delay_s", "map_mb_s", "map_share", "buffer_pct",
                "size_reduction", "broker_cpu_s_per_gb", "resident_at_trigger", "io_floor_s", "hwm_mb")


def summarize(results: list[dict[str, Any]], limits: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    cases = []
    for size in args.sizes:
        for unique in args.unique:
            runs = [r for r in results if r["kind"] == "clean" and r["size"] == size and r["unique"] == unique]
            good = [r for r in runs if r["ok"]]
            entry: dict[str, Any] = {"size": size, "unique": unique, "successful_runs": len(good), "runs": len(runs)}
            entry.update({m: median([r.get(m) for r in good]) for m in CASE_METRICS})
            entry["records_out_of_in"] = median([r["records_out"] / r["records"] for r in good])
            entry["passes_each_run"] = [r["pass_count"] for r in good]
            if limits and entry["dirty_mb_s"]:
                entry["fraction_of_limits"] = {name: entry["dirty_mb_s"] / lim["median_mb_per_s"]
                                               for name, lim in limits.items()}
                entry["time_over_io_floor"] = (entry["clean_s"] / entry["io_floor_s"] if entry["io_floor_s"]
                                               else None)
            cases.append(entry)
    latency_runs = [r for r in results if r["kind"] == "latency" and r["ok"]]
    latency: dict[str, Any] = {"successful_runs": len(latency_runs),
                               "runs": sum(1 for r in results if r["kind"] == "latency")}
    for window in ("baseline", "clean"):
        latency[window] = {m: median([r["latency"][window].get(m) for r in latency_runs])
                           for m in ("records", "rate", "p50_ms", "p99_ms", "p999_ms", "max_ms", "errors", "seconds")}
    if latency_runs:
        latency["clean_dirty_mb_s"] = median([r["dirty_mb_s"] for r in latency_runs])
        latency["clean_s"] = median([r["clean_s"] for r in latency_runs])
    return {"cases": cases, "latency": latency, "successful_runs": sum(r["ok"] for r in results),
            "runs": len(results)}


def fmt(v: float | None, spec: str = ",.1f") -> str:
    return "n/a" if v is None else format(v, spec)


def pct(v: float | None, spec: str = ".0f") -> str:
    return "n/a" if v is None else format(100 * v, spec) + " %"


LIMIT_LABELS = {"write_page_cache": "write, page cache (no sync)", "write_synced": "write + fdatasync at end",
                "read_cold": "read, cold (evicted from the page cache)", "read_warm": "read, warm (page cache)"}


def render_markdown(result: dict[str, Any]) -> str:
    p, s, limits = result["parameters"], result["summary"], result["limits"]
    lines = [
        f"# Log cleaner: {p['mb']:g} MB dirty logs, records of {', '.join(map(str, p['sizes']))} B, "
        f"{', '.join(f'{u:.0%}' for u in p['unique'])} unique keys, {p['runs']} runs",
        "",
        provenance_line(result["provenance"]) + f" Finished {result['finished_at']}.",
        "",
        f"One pybroker per case, 1 partition, segment.bytes {p['segment_mib']} MiB, log.cleaner.dedupe.buffer.size "
        f"{p['dedupe_buffer_mib']} MiB, 1 cleaner thread, log.cleaner.backoff.ms {p['backoff_ms']}; records of "
        f"a {p['key_bytes']} B key and a value, confluent-kafka {result['versions']['confluent_kafka']}, no "
        f"compression. Medians of the successful runs. MB = 10^6 bytes of log (records and their headers); "
        f"dirty MB/s = dirty MB / clean s (cleaner's start to summary, every pass). "
        f"{'The dirty segments were evicted from the page cache before each clean.' if p['evict'] else ''}",
        "",
        "## Cleaning",
        "",
        "| record | unique keys | records | dirty MB | passes | clean s | dirty MB/s | cleaner's own MB/s | "
        "wall MB/s | map MB/s | map share | size reduction | records kept | broker CPU s/GB | in page cache | runs |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for c in s["cases"]:
        lines.append(
            f"| {c['size']} B | {c['unique']:.0%} | {fmt(c['records'], ',.0f')} | "
            f"{fmt(c['dirty_bytes'] and c['dirty_bytes'] / 1e6)} | "
            f"{'/'.join(map(str, c['passes_each_run'])) or 'n/a'} | {fmt(c['clean_s'], '.2f')} | "
            f"{fmt(c['dirty_mb_s'])} | {fmt(c['summary_mb_s'])} | {fmt(c['wall_mb_s'])} | {fmt(c['map_mb_s'])} | "
            f"{pct(c['map_share'])} | {pct(c['size_reduction'], '.1f')} | {pct(c['records_out_of_in'], '.1f')} | "
            f"{fmt(c['broker_cpu_s_per_gb'], '.2f')} | {pct(c['resident_at_trigger'])} | "
            f"{c['successful_runs']}/{c['runs']} |")
    lines += ["", "*passes*: clean passes in each run (a pass ends early when the offset map is full). "
              "*cleaner's own MB/s*: its summary line (\"MB of log processed\", converted from MiB). *wall MB/s*: "
              "dirty MB over trigger -> summary seen. *map share*: the part of the clean spent building the offset "
              "map. *in page cache*: dirty segments resident at the trigger (fincore).", ""]
    if limits:
        lines += ["## Against this machine's sequential limits", "",
                  f"{p['limits_mib']} MiB per run, {p['limits_runs']} runs each, 1 MiB calls, in the work dir "
                  f"({result['machine'].get('workdir_filesystem', '?')}).", "",
                  "| limit | median MB/s | min | max |", "|---|---:|---:|---:|"]
        for name, lim in limits.items():
            lines.append(f"| {LIMIT_LABELS[name]} | {fmt(lim['median_mb_per_s'], ',.0f')} | "
                         f"{fmt(lim['min_mb_per_s'], ',.0f')} | {fmt(lim['max_mb_per_s'], ',.0f')} |")
        resident = [r.get("resident_before") for r in limits["read_cold"]["runs"]]
        lines += ["", f"Page cache residency of the file before each cold read (fincore): "
                  f"{', '.join(pct(r, '.1f') for r in resident)}.", "",
                  "| record | unique keys | dirty MB/s | " + " | ".join(f"of {LIMIT_LABELS[n]}" for n in limits)
                  + " | clean s / I/O floor |",
                  "|---:|---:|---:|" + "---:|" * len(limits) + "---:|"]
        for c in s["cases"]:
            fractions = c.get("fraction_of_limits", {})
            lines.append(f"| {c['size']} B | {c['unique']:.0%} | {fmt(c['dirty_mb_s'])} | "
                         + " | ".join(pct(fractions.get(n), '.1f') for n in limits)
                         + f" | {fmt(c.get('time_over_io_floor'), '.1f')} |")
        lines += ["", "*I/O floor*: the time the storage alone needs for one pass: the dirty log read twice (map and "
                  "copy) at the read rate of where it was (page cache or disk), the cleaned log written at the "
                  "synced write rate.", ""]
    lat = s["latency"]
    if p["latency_case"]:
        size, unique = p["latency_case"]
        lines += [f"## Produce latency while a clean runs ({p['latency_mb']:g} MB of {size} B records, {unique:.0%} "
                  "unique keys)", "",
                  f"A second topic, {p['latency_rate']:,} records/s of {p['latency_size']} B, acks=all, linger.ms "
                  f"{p['latency_linger_ms']:g}; per-record latency = delivery report - produce(). Baseline: "
                  f"{p['latency_window']:g} s before the trigger; clean: the trigger to the summary (median "
                  f"{fmt(lat.get('clean_s'), '.2f')} s, {fmt(lat.get('clean_dirty_mb_s'))} dirty MB/s). Medians of "
                  f"{lat['successful_runs']}/{lat['runs']} runs.", "",
                  "| window | records | records/s | p50 ms | p99 ms | p99.9 ms | max ms | errors |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|"]
        for window in ("baseline", "clean"):
            w = lat[window]
            lines.append(f"| {window} | {fmt(w['records'], ',.0f')} | {fmt(w['rate'], ',.0f')} | "
                         f"{fmt(w['p50_ms'], '.2f')} | {fmt(w['p99_ms'], '.2f')} | {fmt(w['p999_ms'], '.2f')} | "
                         f"{fmt(w['max_ms'], '.2f')} | {fmt(w['errors'], '.0f')} |")
        lines.append("")
        for r in result["runs"]:
            if r["kind"] == "latency" and r["ok"]:
                slow = ", ".join(f"{x['ms']:.0f} ms at {x['sent_after_trigger_s']:.2f} s"
                                 for x in r["latency"]["slowest_during_clean"][:5])
                swaps = ", ".join(f"{t:.2f}" for t in r["swaps_after_trigger_s"])
                lines.append(f"- run {r['run']}: slowest records of the clean window (sent, after the trigger): "
                             f"{slow or 'none'}; cleaned segments swapped in at {swaps or 'n/a'} s; the clean "
                             f"started at {r['start_delay_s']:.2f} s and ended at {r['clean_s'] + r['start_delay_s']:.2f} s.")
        lines.append("")
    lines += ["## Runs", "",
              "| run | case | ok | produce msg/s | dirty MB | passes | clean s | dirty MB/s | wall s | start delay s "
              "| broker CPU s | size reduction | p99 baseline / clean ms | busy cores before |",
              "|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|"]
    for r in result["runs"]:
        case = f"{'latency, ' if r['kind'] == 'latency' else ''}{r['size']} B, {r['unique']:.0%}"
        if not r["ok"]:
            lines.append(f"| {r['run']} | {case} | FAILED: {str(r.get('error'))[:300]} | | | | | | | | | | | |")
            continue
        lat_cell = ""
        if "latency" in r:
            lat_cell = f"{fmt(r['latency']['baseline'].get('p99_ms'), '.2f')} / " \
                       f"{fmt(r['latency']['clean'].get('p99_ms'), '.2f')}"
        lines.append(f"| {r['run']} | {case} | yes | {fmt(r['produce']['msg_s'], ',.0f')} | "
                     f"{fmt(r['dirty_bytes'] / 1e6)} | {r['pass_count']} | {r['clean_s']:.3f} | "
                     f"{fmt(r['dirty_mb_s'])} | {r['wall_s']:.3f} | {r['start_delay_s']:.3f} | "
                     f"{r['broker_cpu_s']:.2f} | {pct(r['size_reduction'], '.1f')} | {lat_cell} | "
                     f"{r['quiet']['busy_cores']:.2f} |")
    return "\n".join(lines) + "\n"


def plot(result: dict[str, Any], path: Path) -> bool:
    """Dirty MB/s per case; produce latency distributions, baseline and during the clean."""
    s = result["summary"]
    if not s["successful_runs"]:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    latency_runs = [r for r in result["runs"] if r["kind"] == "latency" and r["ok"]]
    fig, axes = plt.subplots(1, 2 if latency_runs else 1, figsize=(11 if latency_runs else 6, 4), squeeze=False)
    left = axes[0][0]
    labels = [f"{c['size']} B\n{c['unique']:.0%} unique" for c in s["cases"]]
    bars = left.bar(labels, [c["dirty_mb_s"] or 0 for c in s["cases"]], color="tab:blue")
    left.bar_label(bars, fmt="%.0f", fontsize=8)
    left.set_ylabel("MB of dirty log / s")
    left.set_title("cleaning throughput (median)", fontsize=9)
    left.grid(axis="y", alpha=0.3)
    if latency_runs:
        right = axes[0][1]
        for window, color in (("baseline", "tab:green"), ("clean", "tab:red")):
            values = sorted(v for r in latency_runs for v in r["latency_ms"][window])
            if values:
                right.plot(values, [(i + 1) / len(values) for i in range(len(values))], color=color,
                           label=f"{window} ({len(values):,} records)")
        right.set_xscale("log")
        right.set_xlabel("produce latency, ms")
        right.set_ylabel("fraction of records")
        right.set_title("another topic's produce latency, every run", fontsize=9)
        right.grid(alpha=0.3)
        right.legend(fontsize=8)
    p = result["parameters"]
    fig.suptitle(f"pybroker log cleaner: {p['mb']:g} MB dirty logs, 1 partition, {p['runs']} runs", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


# --------------------------------------------------------------------------- main


def parse_case(text: str) -> tuple[int, float] | None:
    if text == "none":
        return None
    size, _, unique = text.partition(":")
    return int(size), float(unique)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--mb", type=float, default=256, help="MB of records (keys + values) per dirty log")
    ap.add_argument("--sizes", default="100,1024", help="record sizes (key + value), bytes")
    ap.add_argument("--unique", default="0.01,0.5", help="fractions of the records whose keys are distinct")
    ap.add_argument("--key-bytes", type=int, default=16, help="key size, bytes")
    ap.add_argument("--runs", type=int, default=3, help="runs; each runs every case on a fresh broker")
    ap.add_argument("--segment-mib", type=int, default=64, help="segment.bytes of the dirty topic, MiB")
    ap.add_argument("--dedupe-buffer-mib", type=int, default=128, help="log.cleaner.dedupe.buffer.size, MiB")
    ap.add_argument("--backoff-ms", type=int, default=100, help="log.cleaner.backoff.ms")
    ap.add_argument("--evict", action="store_true", help="drop the dirty segments from the page cache before a clean")
    ap.add_argument("--seed", type=int, default=16, help="seed of the key order (plus the run number)")
    ap.add_argument("--latency-case", default="100:0.5", help="SIZE:FRACTION of the case cleaned under a "
                    "produce load, or none")
    ap.add_argument("--latency-mb", type=float, default=512, help="MB of records of the dirty log cleaned under "
                    "the produce load (a longer clean: more records sent during it)")
    ap.add_argument("--latency-rate", type=float, default=5000, help="records/s of the latency producer")
    ap.add_argument("--latency-size", type=int, default=100, help="record size of the latency producer, bytes")
    ap.add_argument("--latency-linger-ms", type=float, default=0, help="linger.ms of the latency producer")
    ap.add_argument("--latency-warmup", type=float, default=2.0, help="seconds of load before the baseline window")
    ap.add_argument("--latency-window", type=float, default=10.0, help="baseline window, s")
    ap.add_argument("--limits-mib", type=int, default=1024, help="MiB per machine-limit run (0: not measured)")
    ap.add_argument("--limits-runs", type=int, default=3, help="runs of each machine limit")
    ap.add_argument("--clean-timeout", type=float, default=600.0, help="seconds allowed for a clean")
    ap.add_argument("--phase-timeout", type=float, default=600.0, help="seconds allowed for each produce phase")
    ap.add_argument("--startup-timeout", type=float, default=60.0, help="seconds for the broker to listen")
    ap.add_argument("--quiet-cores", type=float, default=0.3,
                    help="before each case, wait until the machine's busy CPU (1 s sample) is below this")
    ap.add_argument("--quiet-wait", type=float, default=60.0, help="longest wait for --quiet-cores, s")
    ap.add_argument("--out", default=str(REPO / "bench" / "results"), help="results directory")
    ap.add_argument("--tag", default="", help="suffix of the result files' name")
    ap.add_argument("--workdir", default=None, help="scratch dir (default: a new temp dir)")
    ap.add_argument("--keep-workdir", action="store_true", help="keep broker data dirs and logs")
    ap.add_argument("--python", default=sys.executable, help="interpreter that runs pybroker")
    args = ap.parse_args(argv)
    try:
        args.sizes = [int(v) for v in args.sizes.split(",") if v.strip()]
        args.unique = [float(v) for v in args.unique.split(",") if v.strip()]
        args.latency_case = parse_case(args.latency_case)
    except ValueError as e:
        ap.error(str(e))
    if (args.runs < 1 or args.mb <= 0 or not args.sizes or not args.unique or args.segment_mib < 1
            or args.dedupe_buffer_mib < 1 or args.limits_mib < 0 or args.limits_runs < 1 or args.latency_rate <= 0):
        ap.error("--runs, --mb, --sizes, --unique, --segment-mib, --dedupe-buffer-mib, --limits-runs and "
                 "--latency-rate must be positive")
    sizes = args.sizes + ([args.latency_case[0]] if args.latency_case else [])
    if min(sizes) <= args.key_bytes or not all(0 < u <= 1 for u in args.unique):
        ap.error("every record size must exceed --key-bytes, every --unique fraction be in (0, 1]")
    if args.latency_case and not 0 < args.latency_case[1] <= 1:
        ap.error("--latency-case: the fraction must be in (0, 1]")
    return args


def rotated(items: list[Any], by: int) -> list[Any]:
    return items[by % len(items):] + items[:by % len(items)]


def one_line(r: dict[str, Any]) -> str:
    head = f"[run {r['run']}] {'latency ' if r['kind'] == 'latency' else ''}{r['size']} B, {r['unique']:.0%} unique: "
    if not r["ok"]:
        return head + "FAILED " + str(r.get("error"))[:500]
    text = (f"{r['dirty_bytes'] / 1e6:,.1f} MB in {r['clean_s']:.2f} s = {r['dirty_mb_s']:,.1f} MB/s, "
            f"{r['pass_count']} pass(es), {r['size_reduction']:.1%} smaller, {r['broker_cpu_s_per_gb']:.2f} CPU s/GB")
    if "latency" in r:
        text += (f"; p99 {r['latency']['baseline'].get('p99_ms', 0):.2f} ms baseline, "
                 f"{r['latency']['clean'].get('p99_ms', 0):.2f} ms during the clean")
    return head + text


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    pyb = pybroker_import(args.python)
    args.add_repo_to_pythonpath = bool(pyb.get("add_repo_to_pythonpath"))
    results: list[dict[str, Any]] = []
    limits: dict[str, Any] = {}
    with BenchRun.start(__file__, argv, args, prefix="bench-cleaner-") as bench:
        if args.limits_mib:
            limits = measure_limits(bench.workdir, args)
            print("limits: " + ", ".join(f"{n} {v['median_mb_per_s']:,.0f} MB/s" for n, v in limits.items()),
                  flush=True)
        cases = [(size, unique) for size in args.sizes for unique in args.unique]
        for run_no in range(1, args.runs + 1):
            for size, unique in rotated(cases, run_no - 1):
                results.append(run_case(run_no, size, unique, args, bench.workdir, limits))
                print(one_line(results[-1]), flush=True)
            if args.latency_case:
                results.append(run_case(run_no, *args.latency_case, args, bench.workdir, limits, latency=True))
                print(one_line(results[-1]), flush=True)
    result: dict[str, Any] = {
        **bench.head(),
        "parameters": vars(args),
        "machine": bench.machine,
        "versions": {"confluent_kafka": confluent_kafka.__version__, "librdkafka": confluent_kafka.libversion()[0],
                     "pybroker_import": pyb, "python": sys.version.split()[0]},
        "limits": limits,
        "runs": results,
        "summary": summarize(results, limits, args),
    }
    bench.write("cleaner" + (f"-{args.tag}" if args.tag else ""), result, render_markdown, plot)
    return 0 if results and not bench.interrupted and all(r["ok"] for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
