"""Running a benchmark script for the bench smoke tests (tests/integration/test_bench_smoke*.py):
once, with tiny parameters, into a temp dir, and reading back the JSON it wrote."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO


def run(tmp_path: Path, *args: str) -> str:
    done = subprocess.run([sys.executable, *args, "--out", str(tmp_path)], cwd=REPO, capture_output=True,
                          text=True, timeout=280, stdin=subprocess.DEVNULL)
    # The tail is long enough for a failed run's error line, brokers' log tails included.
    assert done.returncode == 0, f"{' '.join(args)} failed:\n{done.stdout[-15000:]}\n{done.stderr[-5000:]}"
    return done.stdout


def result(tmp_path: Path, stem: str) -> dict:
    assert (tmp_path / f"{stem}.md").read_text().strip()
    data = json.loads((tmp_path / f"{stem}.json").read_text())
    assert set(data["provenance"]) >= {"command", "script", "commit", "dirty", "script_commit"}
    return data
