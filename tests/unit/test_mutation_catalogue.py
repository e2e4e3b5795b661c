"""The mutation catalogue (tests/tools/mutations.py) still applies to the code: every edit's text
occurs exactly once in its file, and every test it names exists. The catalogue is run by hand;
this keeps it from rotting silently as the code it mutates moves."""

from __future__ import annotations

import re

import pytest

from tests.tools import mutations

REPO = mutations.REPO


@pytest.mark.parametrize("mutation", mutations.MUTATIONS, ids=lambda m: m.name)
def test_mutation_applies(mutation) -> None:
    text = (REPO / mutation.path).read_text()
    for old, _ in mutation.edits:
        assert text.count(old) == 1, f"{old!r} occurs {text.count(old)} times in {mutation.path}"
    for target in mutation.tests:
        if target.startswith("-") or not target.startswith("tests/"):
            continue  # pytest options, e.g. -k expressions
        path, _, name = target.partition("::")
        assert (REPO / path).exists(), path
        if name:
            assert re.search(rf"def {re.escape(name)}\b", (REPO / path).read_text()), target
