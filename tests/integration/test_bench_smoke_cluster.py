"""The benchmark scripts that start clusters still run (as test_bench_smoke.py runs the others)."""

from __future__ import annotations

import pytest

from tests.integration.bench_runs import result, run

pytestmark = pytest.mark.timeout(300)


def test_cluster_replication(tmp_path):
    # One record size: each size starts its own clusters (the suite's slowest smoke test with two).
    run(tmp_path, "bench/cluster_replication.py", "--sizes", "65536", "--records", "300", "--runs", "1",
        "--quiet-wait", "0")
    data = result(tmp_path, "cluster_replication")
    assert [(r["size"], r["ok"]) for r in data["runs"]] == [(65536, True)], data["runs"]
    for r in data["runs"]:
        assert [r["phases"][name]["replicas"] for name in ("rf1-acks1", "rf3-acksall")] == \
            [[r["leader"]], [r["leader"], *(n for n in (1, 2, 3) if n != r["leader"])]]
        assert all(p["high_watermark"] == 300 and p["broker_cpu_s"] > 0 for p in r["phases"].values())
    assert {t["result"] for t in data["targets"]} == {"not judged"}  # one run pair is not enough
    assert (tmp_path / "cluster_replication.png").exists()


def test_cluster_delete_records(tmp_path):
    run(tmp_path, "bench/cluster_delete_records.py", "--requests", "20", "--stopped-requests", "10",
        "--stopped-timeouts", "2", "--stopped-timeout-ms", "300", "--session-timeout-ms", "6000", "--quiet-wait", "0")
    data = result(tmp_path, "cluster_delete_records")
    summary = data["summary"]
    assert summary["up_false"]["errors"] == {"0": 20} and summary["up_true"]["errors"] == {"0": 20}
    assert summary["stopped_true"]["errors"] == {"0": 10}
    assert summary["stopped_false"]["errors"] == {"7": 2} and summary["stopped_false"]["all_timed_out_after_timeout"]
    assert summary["resumed_false"]["errors"] == {"0": len(data["windows"])}
    assert all(w["valid"] for w in data["windows"])
    assert data["stopped_follower"] not in (data["leader"], data["controller"])
    assert {t["result"] for t in data["targets"]} <= {"PASS", "FAIL"}
    assert (tmp_path / "cluster_delete_records.png").exists()


def test_cluster_failover(tmp_path):
    run(tmp_path, "bench/cluster_failover.py", "--runs", "1", "--session-timeout-ms", "3000", "--zk-tick-ms", "500",
        "--rate", "200", "--warmup", "0.5", "--after", "0.5", "--quiet-wait", "0")
    data = result(tmp_path, "cluster_failover")
    assert [(r["scenario"], r["ok"]) for r in data["runs"]] == [("kill", True), ("term", True)], data["runs"]
    for r in data["runs"]:
        assert r["failover_s"] > 0 and r["acked_missing"] == 0 and r["new_leader"] != r["leader"]
        assert r["new_epoch_start_offset"] is not None and r["leader_epoch_after"] > r["leader_epoch_before"]
    kill = data["runs"][0]
    # Not before the session could expire: the dead broker's session was last touched by its
    # ping, sent every third of the 3 s timeout, so at the earliest 3 - 1 = 2 s after the kill.
    assert kill["failover_s"] >= kill["metadata_new_leader_s"] > 2.0
    assert {t["result"] for t in data["targets"]} == {"not judged"}
    assert (tmp_path / "cluster_failover.png").exists()


def test_ordered_delivery(tmp_path):
    run(tmp_path, "bench/ordered_delivery.py", "--rate", "200", "--keys", "20", "--warmup", "3", "--step", "4",
        "--window", "2", "--repeats", "1", "--quiet-wait", "0")
    data = result(tmp_path, "ordered_delivery")
    assert [(r["mode"], r["ok"]) for r in data["runs"]] == [("ordered", True), ("unordered", True)], data["runs"]
    ordered, unordered = data["runs"]
    assert ordered["violations"] == 0 and ordered["missing"] == 0 == unordered["missing"]
    assert [c["applied"] for c in ordered["changes"]] == [True, True, True]
    assert [c["applied"] for c in unordered["changes"]] == [True, True, False]  # Kafka cannot shrink
    assert "removed_s" in ordered["changes"][2]
    assert (tmp_path / "ordered_delivery.png").exists()
