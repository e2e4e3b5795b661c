"""End-to-end latency consumers: confluent-kafka in child processes, and their driver-side handle.

A consumer process (``python -m bench.spark.latency``) is assigned its share of the run's
partitions from the beginning, and for every record computes ``receive time - record timestamp``
(ms; the record timestamp is CreateTime, set by the producer when the batch is built). The
receive time is taken when ``poll()`` returns a record; the records librdkafka already queued
behind it are taken at once with ``consume(timeout=0)`` and share that receive time. It prints
``ready`` once every partition's start offset is resolved (fetching has begun), then ``count N`` every 0.5 s; on
``stop`` (stdin) or EOF it writes its count and errors as JSON to ``--out`` and the raw latencies
and receive times to ``--out``.npz, and exits; the driver computes the percentiles and the
per-second buckets over all consumers.

``LatencyConsumers`` starts C such processes (partition i goes to consumer i mod C), waits until
they are ready, tracks their counts, and stops them once they have together received the
expected number of records (or nothing arrived for ``idle_timeout`` seconds).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from bench.spark.session import REPO

COUNT_EVERY_S = 0.5
READY_TIMEOUT_S = 20.0


# --------------------------------------------------------------------------- child process


def consume_main(argv: list[str] | None = None) -> int:
    """The consumer process."""
    ap = argparse.ArgumentParser(description="end-to-end latency consumer (bench)")
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--partitions", required=True, help="JSON [[topic, partition], ...]")
    ap.add_argument("--out", required=True)
    ap.add_argument("-C", dest="props", action="append", default=[], metavar="PROP=VAL")
    args = ap.parse_args(argv)

    import numpy as np
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    conf: dict[str, Any] = {
        "bootstrap.servers": args.bootstrap,
        "group.id": f"bench-latency-{uuid.uuid4().hex[:8]}",
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
    }
    for p in args.props:
        k, _, v = p.partition("=")
        conf[k] = v
    consumer = Consumer(conf)
    stop = threading.Event()

    def read_stdin() -> None:
        for line in sys.stdin:
            if line.strip() == "stop":
                break
        stop.set()

    threading.Thread(target=read_stdin, daemon=True).start()
    parts = [TopicPartition(t, p, OFFSET_BEGINNING) for t, p in json.loads(args.partitions)]
    consumer.assign(parts)
    # ready = every partition's start offset is resolved, so fetching has begun
    deadline = time.monotonic() + READY_TIMEOUT_S
    early: list[Any] = []
    while time.monotonic() < deadline:
        m = consumer.poll(0.05)
        if m is not None:
            early.append(m)
        if all(tp.offset >= 0 for tp in consumer.position(parts)):
            break
    print("ready", flush=True)
    lat_chunks: list[Any] = []
    recv_chunks: list[Any] = []
    errors: list[str] = []
    count = 0
    last_report = time.monotonic()
    first_wall = None
    pending = early
    while not stop.is_set():
        # poll() returns as soon as one record is there; consume(timeout=0) then takes what is
        # already queued without waiting (consume(N, timeout) alone would wait to fill N)
        first = consumer.poll(0.1) if not pending else pending.pop(0)
        now_ms = time.time() * 1000.0
        msgs = [first, *pending, *consumer.consume(10_000, timeout=0)] if first is not None else []
        pending = []
        if msgs:
            ts = []
            for m in msgs:
                if m.error():
                    if len(errors) < 20:
                        errors.append(str(m.error()))
                    continue
                ts.append(m.timestamp()[1])
            if ts:
                first_wall = first_wall or now_ms
                lat_chunks.append(now_ms - np.asarray(ts, dtype=np.float64))
                recv_chunks.append(np.full(len(ts), now_ms))
                count += len(ts)
        if time.monotonic() - last_report >= COUNT_EVERY_S:
            print(f"count {count}", flush=True)
            last_report = time.monotonic()
    consumer.close()
    lat = np.concatenate(lat_chunks) if lat_chunks else np.zeros(0)
    recv = np.concatenate(recv_chunks) if recv_chunks else np.zeros(0)
    np.savez(args.out + ".npz", latency=lat, receive=recv)
    Path(args.out).write_text(json.dumps({"records": count, "errors": errors}))
    print(f"count {count}", flush=True)
    return 0


def latency_result(lat: Any, recv: Any) -> dict[str, Any]:
    """Percentiles over all records, and per wall-clock second [second, count, p50, p99, max]."""
    import numpy as np

    from bench.spark.stats import LATENCY_PERCENTILES

    out: dict[str, Any] = {"latency_ms": {}, "per_second": []}
    if not len(lat):
        return out
    qs = np.percentile(lat, LATENCY_PERCENTILES, method="inverted_cdf")
    out["latency_ms"] = {
        "count": int(len(lat)),
        "min_ms": float(lat.min()),
        "mean_ms": float(lat.mean()),
        **{f"p{q:g}_ms": float(v) for q, v in zip(LATENCY_PERCENTILES, qs, strict=True)},
        "max_ms": float(lat.max()),
    }
    sec = np.floor(recv / 1000.0).astype(np.int64)
    order = np.argsort(sec, kind="stable")
    sec, lat = sec[order], lat[order]
    bounds = np.flatnonzero(np.diff(sec)) + 1
    for chunk_sec, chunk in zip(np.split(sec, bounds), np.split(lat, bounds), strict=True):
        p50, p99 = np.percentile(chunk, [50, 99], method="inverted_cdf")
        out["per_second"].append(
            [int(chunk_sec[0]), int(len(chunk)), float(p50), float(p99), float(chunk.max())]
        )
    return out


# --------------------------------------------------------------------------- driver side


class LatencyConsumers:
    """C consumer processes over the run's partitions."""

    def __init__(
        self,
        bootstrap: str,
        partitions: list[tuple[str, int]],
        consumers: int,
        workdir: Path,
        props: list[str] | None = None,
    ) -> None:
        self.procs: list[subprocess.Popen[str]] = []
        self.outs: list[Path] = []
        self.counts: list[int] = []
        self._last_progress = time.monotonic()
        self._changed = threading.Condition()
        self._ready: list[threading.Event] = []
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
        n = max(1, min(consumers, len(partitions)))
        for i in range(n):
            share = partitions[i::n]
            out = workdir / f"latency-{uuid.uuid4().hex[:8]}.json"
            cmd = [
                sys.executable,
                "-m",
                "bench.spark.latency",
                "--bootstrap",
                bootstrap,
                "--partitions",
                json.dumps(share),
                "--out",
                str(out),
            ]
            for p in props or []:
                cmd += ["-C", p]
            proc = subprocess.Popen(
                cmd,
                env=env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
                bufsize=1,
            )
            self.procs.append(proc)
            self.outs.append(out)
            self.counts.append(0)
            ready = threading.Event()
            self._ready.append(ready)
            threading.Thread(target=self._pump, args=(i, proc, ready), daemon=True).start()

    def _pump(self, i: int, proc: subprocess.Popen[str], ready: threading.Event) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            line = line.strip()
            if line == "ready":
                ready.set()
            elif line.startswith("count "):
                with self._changed:
                    n = int(line.split()[1])
                    if n != self.counts[i]:
                        self._last_progress = time.monotonic()
                    self.counts[i] = n
                    self._changed.notify_all()
        ready.set()  # EOF: the process ended (wait_ready checks that)
        with self._changed:
            self._changed.notify_all()

    def wait_ready(self, timeout: float = 60.0) -> None:
        for i, ev in enumerate(self._ready):
            if not ev.wait(timeout) or self.procs[i].poll() is not None:
                raise RuntimeError(f"latency consumer {i} did not start")

    @property
    def received(self) -> int:
        with self._changed:
            return sum(self.counts)

    def wait_for(self, expected: int, idle_timeout: float = 20.0) -> bool:
        """Wait until ``expected`` records arrived, or none arrived for ``idle_timeout`` s, or a
        consumer died. True if all arrived."""
        with self._changed:
            while True:
                if sum(self.counts) >= expected:
                    return True
                if any(p.poll() is not None for p in self.procs):
                    return False
                before = sum(self.counts)
                # woken by every count report (each consumer reports every COUNT_EVERY_S)
                self._changed.wait(idle_timeout)
                if sum(self.counts) == before and sum(self.counts) < expected:
                    # a report came without progress, or the wait timed out: check for idleness
                    if not self._progressed_within(idle_timeout):
                        return False

    def _progressed_within(self, seconds: float) -> bool:
        return time.monotonic() - self._last_progress < seconds

    def stop(self) -> dict[str, Any]:
        """Stop every consumer (by PID if it does not exit) and merge their results."""
        import numpy as np

        for p in self.procs:
            try:
                assert p.stdin is not None
                p.stdin.write("stop\n")
                p.stdin.flush()
                p.stdin.close()
            except (BrokenPipeError, OSError):
                pass
        results, lats, recvs = [], [], []
        for p, out in zip(self.procs, self.outs, strict=True):
            try:
                p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=10)
            raw = Path(str(out) + ".npz")
            if out.exists() and raw.exists():
                results.append(json.loads(out.read_text()))
                with np.load(raw) as z:
                    lats.append(z["latency"])
                    recvs.append(z["receive"])
            else:
                results.append({"records": 0, "errors": [f"exit code {p.returncode}, no result"]})
            out.unlink(missing_ok=True)
            raw.unlink(missing_ok=True)
        merged: dict[str, Any] = {
            "records": sum(r.get("records", 0) for r in results),
            "consumers": len(results),
            "per_consumer_records": [r.get("records", 0) for r in results],
            "errors": [e for r in results for e in r.get("errors", [])],
        }
        lat = np.concatenate(lats) if lats else np.zeros(0)
        recv = np.concatenate(recvs) if recvs else np.zeros(0)
        merged.update(latency_result(lat, recv))
        return merged


if __name__ == "__main__":
    raise SystemExit(consume_main())
