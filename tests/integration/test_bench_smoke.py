"""Every benchmark script still runs: each one once, with tiny parameters, into a temp dir.

The figures of such runs mean nothing; what is checked is that the script completes, starts and
stops its brokers, and writes its JSON (with a provenance stamp) and markdown. The committed
results themselves are checked by tests/unit/test_bench_results.py. The Spark and multi-broker
scripts are in test_bench_smoke_spark.py and test_bench_smoke_cluster.py (three modules, so that
the xdist workers take them in parallel).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import REPO
from tests.integration.bench_runs import result, run

pytestmark = pytest.mark.timeout(300)


def test_broker_compare_100_bytes_against_tansu(tmp_path):
    run(tmp_path, "bench/broker_compare.py", "--records", "3000", "--runs", "2", "--settle", "0",
        "--quiet-wait", "0")
    data = result(tmp_path, "broker_compare-100")
    assert [r["ok"] for r in data["runs"]] == [True] * 4
    assert data["versus"]["consume_msgs_per_s"]["verdict"] in ("win", "tie", "loss")
    assert all(r["kcat_consume"]["queue_backoffs"] >= 0 for r in data["runs"])


def test_broker_compare_64_kib_with_the_synced_variant_and_ceilings(tmp_path):
    run(tmp_path, "bench/broker_compare.py", "--size", "65536", "--records", "64", "--runs", "1",
        "--brokers", "pybroker", "--synced", "--settle", "0", "--quiet-wait", "0",
        "--seqwrite-runs", "1", "--seqwrite-mib", "8", "--tag", "smoke")
    data = result(tmp_path, "broker_compare-65536-smoke")
    assert [r["broker"] for r in data["runs"]] == ["pybroker", "pybroker-synced"]
    assert {t["result"] for t in data["targets"] if "ceiling" in t["target"]} <= {"PASS", "FAIL"}
    assert data["ceilings"]["page_cache"]["runs"] and data["ceilings"]["synced"]["runs"]


def test_seqwrite(tmp_path):
    done = subprocess.run([sys.executable, "bench/seqwrite.py", "--dir", str(tmp_path), "--mib", "4", "--runs", "2",
                           "--sync", "each"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    measured = json.loads(done.stdout)
    assert measured["sync"] == "each" and len(measured["runs"]) == 2
    assert measured["min_mb_per_s"] <= measured["median_mb_per_s"] <= measured["max_mb_per_s"]


def test_delete_records(tmp_path):
    run(tmp_path, "bench/delete_records.py", "--requests", "20", "--partitions", "10", "--sweeps", "1")
    assert result(tmp_path, "delete_records")["summary"]["latency_ms"]["n"] == 20


def test_transactions(tmp_path):
    run(tmp_path, "bench/transactions.py", "--records", "3000", "--runs", "1", "--commit-every", "100,1000",
        "--consume-records", "3000", "--consume-txn", "500", "--abort-every", "3", "--quiet-wait", "0")
    data = result(tmp_path, "transactions")
    [run_] = data["runs"]
    assert run_["ok"], run_
    assert sorted(p["mode"] for p in run_["produce"]) == ["idempotent", "txn-100", "txn-1000"]
    assert [p["transactions"] for p in sorted(run_["produce"], key=lambda p: p["mode"])] == [0, 30, 3]
    assert run_["consume_written"] == {"committed": 2000, "aborted": 1000}
    assert {c["isolation"]: c["records"] for c in run_["consume"]} == {"read_committed": 2000,
                                                                       "read_uncommitted": 3000}
    assert (tmp_path / "transactions.png").exists()


def test_group_rebalance(tmp_path):
    run(tmp_path, "bench/group_rebalance.py", "--brokers", "pybroker", "--scenarios", "first,graceful-hb300",
        "--runs", "1", "--graceful-hb300-runs", "1", "--settle", "0.5", "--quiet-wait", "0")
    assert all(r["ok"] for r in result(tmp_path, "group_rebalance")["runs"])


def test_partitions(tmp_path):
    run(tmp_path, "bench/partitions.py", "--partitions", "10,100", "--records", "2000", "--runs", "1",
        "--control-of", "100", "--reference-partitions", "10", "--create", "50", "--startup-partitions", "50",
        "--baseline", "0.5", "--quiet-wait", "0")
    data = result(tmp_path, "partitions")
    assert [(r["partitions"], r["ok"]) for r in data["sweep"]["runs"]] == [(10, True), (100, True)]
    runs = data["sweep"]["runs"] + data["control"]["runs"] + data["reference"]["runs"]
    assert all(r["produce_requests"] > 0 and r["broker_cpu_s"] > 0 for r in runs)
    # The control sends requests of P=100's size: batch.num.messages caps every request at it.
    assert data["control"]["batch_num_messages"] == round(data["sweep"]["runs"][1]["records_per_request"])
    assert data["control"]["runs"][0]["records_per_request"] <= data["control"]["batch_num_messages"]
    assert [(r["broker_name"], r["partitions"]) for r in data["reference"]["runs"]] == [("tansu", 10)]
    assert data["creation"]["ok"] and data["creation"]["creations"][0]["latency_ms"]["creation"]["n"] > 0
    assert data["startup"]["ok"] and data["startup"]["unclean_restart"]["records_found"] == 2000
    assert {t["result"] for t in data["targets"]} <= {"PASS", "FAIL", "not judged", "not measured"}
    assert (tmp_path / "partitions.png").exists()


def test_micro(tmp_path):
    run(tmp_path, "bench/micro.py", "--repeat", "1", "--mib", "8", "--ops", "200")
    result(tmp_path, "micro")


def test_cleaner(tmp_path):
    # A 1 MiB offset map holds about 39,000 keys: the 50 % case's 50,000 keys need two passes.
    run(tmp_path, "bench/cleaner.py", "--mb", "10", "--sizes", "100", "--unique", "0.01,0.5", "--dedupe-buffer-mib", "1",
        "--latency-mb", "2", "--latency-warmup", "0.2", "--latency-window", "1", "--runs", "1", "--limits-mib", "4",
        "--limits-runs", "1", "--quiet-wait", "0")
    data = result(tmp_path, "cleaner")
    assert [(r["kind"], r["unique"], r["ok"]) for r in data["runs"]] == \
        [("clean", 0.01, True), ("clean", 0.5, True), ("latency", 0.5, True)], data["runs"]
    few, half, latency = data["runs"]
    assert (few["pass_count"], half["pass_count"]) == (1, 2)
    assert [r["records_out"] for r in data["runs"]] == [1000, 50000, 10000]
    assert all(r["dirty_mb_s"] > 0 and r["broker_cpu_s"] > 0 and 0.45 < r["size_reduction"] < 1 for r in data["runs"])
    assert latency["latency"]["baseline"]["records"] > 0 and latency["latency"]["clean"]["errors"] == 0
    assert set(data["limits"]) == {"write_page_cache", "write_synced", "read_cold", "read_warm"}
    assert [c["dirty_mb_s"] is not None for c in data["summary"]["cases"]] == [True, True]
    assert (tmp_path / "cleaner.png").exists()


def test_security(tmp_path):
    run(tmp_path, "bench/security.py", "--records", "500", "--size", "512", "--runs", "1", "--connections", "5",
        "--quiet-wait", "0")
    data = result(tmp_path, "security")
    (only,) = data["runs"]
    assert only["ok"], only
    assert set(only["throughput"]) == {"PLAINTEXT", "SSL", "SASL_PLAINTEXT SCRAM-SHA-256", "SASL_SSL SCRAM-SHA-256"}
    assert all(case["consume"]["records_received"] == 500 for case in only["throughput"].values())
    assert all(c["connections"] == 5 and c["p50_ms"] > 0 for c in only["connections"].values())
    assert (tmp_path / "security.png").exists()
