"""One invocation of a benchmark script: the frame every result shares.

Owns what every script did the same way around its own measurements: the provenance stamp taken
at the start (``brokers.provenance``), the scratch directory (``--workdir`` or a new temporary
one, removed at the end unless given or ``--keep-workdir``), the results directory, the start
time and machine description, SIGTERM and Ctrl-C turned into "interrupted: writing partial
results", the result's common head (provenance confirmed at the end, interrupted, start, finish,
wall time) and writing ``<out>/<stem>.{json,md[,png]}``.

    with BenchRun.start(__file__, argv, args, prefix="bench-cluster-failover-") as run:
        ... measure, using run.workdir ...
    result = {**run.head(), "parameters": vars(args), "machine": run.machine, ...}
    run.write("cluster_failover", result, render_markdown, plot)
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from brokers import confirm_provenance, machine_info, provenance, sigterm_as_interrupt  # noqa: E402


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


@dataclass
class BenchRun:
    """A script's run: where it works and writes, and what its result starts with."""

    stamp: dict[str, Any]
    workdir: Path
    out_dir: Path
    machine: dict[str, Any]
    started_at: str = field(default_factory=_now)
    interrupted: bool = False
    _t0: float = field(default_factory=time.monotonic)

    @classmethod
    @contextmanager
    def start(cls, script: str, argv: list[str] | None, args: Any, prefix: str) -> Iterator[BenchRun]:
        """Stamp, create the directories, describe the machine; run the block with SIGTERM as
        Ctrl-C, and end an interrupted block quietly (``interrupted`` is then set); remove an own
        scratch directory. ``args`` needs ``out``, ``workdir`` and ``keep_workdir``."""
        stamp = provenance(script, list(argv if argv is not None else sys.argv[1:]))
        own_workdir = args.workdir is None
        workdir = Path(args.workdir or tempfile.mkdtemp(prefix=prefix)).resolve()
        workdir.mkdir(parents=True, exist_ok=True)
        out_dir = Path(args.out)
        out_dir.mkdir(parents=True, exist_ok=True)
        run = cls(stamp, workdir, out_dir, machine_info(workdir))
        try:
            with sigterm_as_interrupt():
                try:
                    yield run
                except KeyboardInterrupt:
                    run.interrupted = True
                    print("interrupted: writing partial results", flush=True)
        finally:
            if own_workdir and not args.keep_workdir:
                shutil.rmtree(workdir, ignore_errors=True)
            run.machine["loadavg_end"] = list(os.getloadavg())

    def head(self) -> dict[str, Any]:
        """The result's first keys: provenance (checked again now), interrupted, times."""
        return {
            "provenance": confirm_provenance(self.stamp),
            "interrupted": self.interrupted,
            "started_at": self.started_at,
            "finished_at": _now(),
            "wall_s": time.monotonic() - self._t0,
        }

    def write(
        self,
        stem_name: str,
        result: dict[str, Any],
        render: Callable[[dict[str, Any]], str],
        plot: Callable[[dict[str, Any], Path], bool] | None = None,
        to_json: Callable[[dict[str, Any]], str] = lambda r: json.dumps(r, indent=1) + "\n",
    ) -> Path:
        """Write ``<out>/<stem_name>.json``, ``.md`` (printed too) and, if ``plot`` draws one,
        ``.png``; returns the stem."""
        stem = self.out_dir / stem_name
        stem.with_suffix(".json").write_text(to_json(result))
        md = render(result)
        stem.with_suffix(".md").write_text(md)
        plotted = plot is not None and plot(result, stem.with_suffix(".png"))
        print()
        print(md)
        print(f"wrote {stem}.json, {stem}.md" + (f", {stem}.png" if plotted else ""))
        return stem
