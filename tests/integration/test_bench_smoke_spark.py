"""The Spark benchmark scripts still run (as test_bench_smoke.py runs the others)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import REPO
from tests.integration.bench_runs import result, run

pytestmark = pytest.mark.timeout(300)


def test_spark_workload(tmp_path):
    run(tmp_path, "-m", "bench", "workload", "batch-100b", "--records", "2000", "--runs", "1",
        "--brokers", "pybroker", "--master", "local[2]", "--no-progress")
    data = result(tmp_path, "spark_batch-100b")
    assert [r["ok"] for r in data["runs"]] == [True]
    assert (tmp_path / "spark_batch-100b_throughput.png").exists()


def test_spark_replay_against_a_cluster(tmp_path):
    trace = tmp_path / "trace.parquet"
    subprocess.run([sys.executable, "-m", "bench", "gen-trace", "--out", str(trace), "--records", "2000",
                    "--rate", "2000", "--keys", "uniform:50"], cwd=REPO, check=True, capture_output=True, timeout=120)
    run(tmp_path, "-m", "bench", "replay", "--trace", str(trace), "--speed", "4", "--runs", "1",
        "--brokers", "pybroker-cluster3", "--master", "local[2]", "--no-progress", "--no-plots")
    data = result(tmp_path, "spark_replay")
    assert [(r["broker"], r["ok"]) for r in data["runs"]] == [("pybroker-cluster3", True)], data["runs"]
    assert data["runs"][0]["check"]["ok"]
    assert any("3 pybroker processes" in note for note in data["notes"])
