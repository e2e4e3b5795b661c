"""The committed benchmark results say where they came from and are not stale: every JSON in
bench/results has a provenance stamp of a clean commit, its .md beside it, and (where the commit
is in this clone's history) no later change to the script that wrote it (bench/check_results.py)."""

from __future__ import annotations

import json

from bench import check_results


def test_committed_results_have_clean_provenance_and_are_not_stale(capsys):
    status = check_results.main([])
    assert status == 0, capsys.readouterr().out


def test_the_check_fails_a_dirty_or_unstamped_result(tmp_path, capsys):
    stamp = {"command": "python bench/delete_records.py", "script": "bench/delete_records.py",
             "commit": "0" * 40, "dirty": True, "script_commit": "0" * 40}
    (tmp_path / "dirty.json").write_text(json.dumps({"provenance": stamp}))
    (tmp_path / "dirty.md").write_text("x")
    (tmp_path / "bare.json").write_text(json.dumps({"command": "python bench/x.py"}))
    assert check_results.main(["--results", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "dirty.json: produced with uncommitted changes" in out
    assert "bare.json: no provenance stamp" in out
