"""Sequential-write ceiling of the filesystem that holds a broker's data dir.

Writes ``total_bytes`` of random data to a new file with fixed-size
``os.write`` calls (1 MiB by default), then calls ``os.fdatasync`` once, the
same shape as ``dd bs=1M conv=fdatasync``. The time runs from ``open`` to the
return of ``fdatasync``. The file is removed after every run. The result is the
median of ``runs`` runs, in decimal MB/s (1 MB = 10**6 bytes).

The random source is one ``os.urandom`` block reused for every write, so that
neither a zero-page trick nor Python-side data generation is measured.

Used by ``bench/broker_compare.py`` for the 64 KiB-record target; it can also be
run alone::

    python bench/seqwrite.py --dir /tmp --mib 1024 --runs 3
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


def write_once(directory: str, total_bytes: int, block_bytes: int = MIB) -> dict[str, float]:
    """Write ``total_bytes`` to a new file in ``directory`` and fdatasync it.

    Returns the elapsed seconds (write + fdatasync), the fdatasync part alone
    and the resulting MB/s.
    """
    block = os.urandom(block_bytes)
    fd, path = tempfile.mkstemp(prefix="seqwrite-", suffix=".bin", dir=directory)
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
        t1 = time.perf_counter()
        os.fdatasync(fd)
        t2 = time.perf_counter()
    finally:
        os.close(fd)
        os.unlink(path)
    elapsed = t2 - t0
    return {
        "bytes": float(total_bytes),
        "elapsed_s": elapsed,
        "fdatasync_s": t2 - t1,
        "mb_per_s": total_bytes / elapsed / 1e6,
    }


def measure(
    directory: str, total_bytes: int = 1024 * MIB, block_bytes: int = MIB, runs: int = 3
) -> dict[str, Any]:
    """Run :func:`write_once` ``runs`` times and return every run plus the median MB/s."""
    results = [write_once(directory, total_bytes, block_bytes) for _ in range(runs)]
    return {
        "directory": os.path.abspath(directory),
        "total_bytes": total_bytes,
        "block_bytes": block_bytes,
        "runs": results,
        "median_mb_per_s": statistics.median(r["mb_per_s"] for r in results),
    }


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point: print the measurement as JSON."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", default=tempfile.gettempdir(), help="directory to write in")
    ap.add_argument("--mib", type=int, default=1024, help="MiB written per run (default 1024)")
    ap.add_argument("--block-kib", type=int, default=1024, help="write size in KiB (default 1024)")
    ap.add_argument("--runs", type=int, default=3, help="number of runs (default 3)")
    args = ap.parse_args(argv)
    res = measure(args.dir, args.mib * MIB, args.block_kib * 1024, args.runs)
    res["loadavg"] = list(os.getloadavg())
    print(json.dumps(res, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
