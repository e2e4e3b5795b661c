"""Checks that every committed benchmark result says where it came from, and is not stale.

    python bench/check_results.py [--results bench/results]

For every ``*.json`` result: a ``provenance`` stamp (``bench/brokers.py`` ``provenance``) with the
command, a full commit id and ``dirty`` false (the code measured is exactly that commit), its
``.md`` beside it, and, when the commit is in this clone's history, no later commit that changed
the script that wrote it (a result whose script changed since must be produced again). Later
changes to the broker itself (``pybroker/``, ``rust/``) are reported as information: whether they
matter is for whoever reads the figures. Exit status 1 if any result fails a check.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from brokers import REPO, git  # noqa: E402

FULL_COMMIT = re.compile(r"[0-9a-f]{40}")


def check(path: Path) -> tuple[list[str], list[str]]:
    """(problems, notes) of one result file."""
    problems: list[str] = []
    notes: list[str] = []
    stamp = json.loads(path.read_text()).get("provenance")
    if not isinstance(stamp, dict):
        return [f"{path.name}: no provenance stamp"], notes
    commit, script = stamp.get("commit", ""), stamp.get("script", "")
    if not FULL_COMMIT.fullmatch(commit):
        problems.append(f"{path.name}: commit {commit!r} is not a full commit id")
    if stamp.get("dirty") is not False:
        problems.append(f"{path.name}: produced with uncommitted changes (dirty: {stamp.get('dirty')})")
    if not stamp.get("command"):
        problems.append(f"{path.name}: no command")
    if not path.with_suffix(".md").exists():
        problems.append(f"{path.name}: no {path.with_suffix('.md').name} beside it")
    if not (REPO / script).exists():
        problems.append(f"{path.name}: its script {script!r} does not exist")
    if problems:
        return problems, notes
    if git("cat-file", "-t", commit) != "commit":
        notes.append(f"{path.name}: commit {commit[:12]} is not in this clone; staleness not checked")
        return problems, notes
    changed = git("log", "--format=%h", f"{commit}..HEAD", "--", script).split()
    if changed:
        problems.append(f"{path.name}: stale, {script} changed since {commit[:12]} (in {', '.join(changed)})")
    broker = git("log", "--format=%h", f"{commit}..HEAD", "--", "pybroker", "rust").split()
    if broker:
        notes.append(f"{path.name}: {len(broker)} later commit(s) changed pybroker/ or rust/")
    return problems, notes


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--results", type=Path, default=REPO / "bench" / "results")
    args = ap.parse_args(argv)
    files = sorted(args.results.glob("*.json"))
    problems: list[str] = []
    for path in files:
        found, notes = check(path)
        problems += found
        for note in notes:
            print(f"note: {note}")
    for problem in problems:
        print(f"FAIL: {problem}")
    print(f"{len(files)} result files, {len(problems)} problem(s)")
    return 1 if problems or not files else 0


if __name__ == "__main__":
    raise SystemExit(main())
