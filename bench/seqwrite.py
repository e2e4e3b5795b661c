"""Sequential-write ceilings of the filesystem that holds a broker's data dir.

Writes ``total_bytes`` of random data to a new file with fixed-size ``os.write`` calls (1 MiB by
default) and times it from ``open`` on, in one of three sync modes:

* ``none``: no sync; the time ends when the last write returns. The page-cache ceiling, the
  one to hold a broker against when it leaves flushing to the OS (Kafka's default).
* ``each``: ``fdatasync`` after every write; the time ends when the last one returns. The synced
  ceiling for a broker that fsyncs every append (``log.flush.interval.messages=1``).
* ``end``: one ``fdatasync`` after the last write (``dd bs=1M conv=fdatasync``).

The file is removed after every run. Results are in decimal MB/s (1 MB = 10**6 bytes), every run
kept, with the median and the spread (min, max): on a VM the same command varies several-fold
from run to run. The random source is one ``os.urandom`` block reused for every write, so that
neither a zero-page trick nor Python-side data generation is measured.

Used by ``bench/broker_compare.py`` for the 64 KiB-record targets; it can also be run alone::

    python bench/seqwrite.py --dir /tmp --mib 1024 --runs 3 --sync none
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from typing import Any

MIB = 1024 * 1024
SYNC_MODES = ("none", "each", "end")


def write_once(directory: str, total_bytes: int, block_bytes: int = MIB, sync: str = "end") -> dict[str, float]:
    """Write ``total_bytes`` to a new file in ``directory`` with the given sync mode.

    Returns the elapsed seconds, the part spent in fdatasync and the resulting MB/s.
    """
    if sync not in SYNC_MODES:
        raise ValueError(f"sync must be one of {SYNC_MODES}, not {sync!r}")
    block = os.urandom(block_bytes)
    fd, path = tempfile.mkstemp(prefix="seqwrite-", suffix=".bin", dir=directory)
    synced = 0.0
    try:
        t0 = time.perf_counter()
        written = 0
        while written < total_bytes:
            n = min(block_bytes, total_bytes - written)
            view = memoryview(block)[:n]
            while view:
                k = os.write(fd, view)
                view = view[k:]
            written += n
            if sync == "each":
                s0 = time.perf_counter()
                os.fdatasync(fd)
                synced += time.perf_counter() - s0
        if sync == "end":
            s0 = time.perf_counter()
            os.fdatasync(fd)
            synced += time.perf_counter() - s0
        elapsed = time.perf_counter() - t0
    finally:
        os.close(fd)
        os.unlink(path)
    return {
        "bytes": float(total_bytes),
        "elapsed_s": elapsed,
        "fdatasync_s": synced,
        "mb_per_s": total_bytes / elapsed / 1e6,
    }


def measure(
    directory: str, total_bytes: int = 1024 * MIB, block_bytes: int = MIB, runs: int = 3, sync: str = "end"
) -> dict[str, Any]:
    """Run :func:`write_once` ``runs`` times; every run, the median and the spread of MB/s."""
    results = [write_once(directory, total_bytes, block_bytes, sync) for _ in range(runs)]
    rates = [r["mb_per_s"] for r in results]
    return {
        "directory": os.path.abspath(directory),
        "sync": sync,
        "total_bytes": total_bytes,
        "block_bytes": block_bytes,
        "runs": results,
        "median_mb_per_s": statistics.median(rates),
        "min_mb_per_s": min(rates),
        "max_mb_per_s": max(rates),
    }


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point: print the measurement as JSON."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", default=tempfile.gettempdir(), help="directory to write in")
    ap.add_argument("--mib", type=int, default=1024, help="MiB written per run (default 1024)")
    ap.add_argument("--block-kib", type=int, default=1024, help="write size in KiB (default 1024)")
    ap.add_argument("--runs", type=int, default=3, help="number of runs (default 3)")
    ap.add_argument("--sync", choices=SYNC_MODES, default="end", help="when to fdatasync (default end)")
    args = ap.parse_args(argv)
    res = measure(args.dir, args.mib * MIB, args.block_kib * 1024, args.runs, args.sync)
    res["loadavg"] = list(os.getloadavg())
    print(json.dumps(res, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
