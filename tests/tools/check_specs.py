"""Cross-check our specs against Kafka's own JSON message definitions.

    python tests/tools/check_specs.py [DIR]

For every request/response in `pybroker.protocol.specs` it reads ``<Name>.json`` from DIR
(default: ``tests/data/kafka-messages``, Kafka's files kept as test data, with KIP-1343's v3
applied to DeleteRecords; see the README there) and compares, field by field and recursively:
order, snake_case names, types, versions, nullable versions, tagged versions and tags, defaults,
ignorable and mapKey flags and struct names (a struct Kafka lists in ``commonStructs`` is compared
wherever a field uses it); our ``extension`` fields (private tags, such as KIP-253's counts) are
left out, plus the API key and flexible versions, and that our supported
range lies inside Kafka's valid range. Differences are printed; the exit status is 1 if there are
any. ``tests/unit/test_specs_match_kafka.py`` runs it in the test suite; point DIR at a Kafka
checkout's ``clients/src/main/resources/common/message`` to compare with another Kafka version
(``--skip`` leaves out specs that differ on purpose there, such as DeleteRecords v3).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from pybroker.protocol.api_keys import PRIVATE_API_KEY_START  # noqa: E402
from pybroker.protocol.schema import Field, VersionRange, snake_case
from pybroker.protocol.specs import REQUESTS, RESPONSES  # noqa: E402
from pybroker.types import ZERO_UUID

INTS = ("int8", "int16", "int32", "int64", "uint16")
KEPT = Path(__file__).resolve().parents[1] / "data" / "kafka-messages"


def load(directory: Path, name: str) -> dict[str, Any]:
    text = (directory / f"{name}.json").read_text()
    return json.loads(re.sub(r"^\s*//.*$", "", text, flags=re.M))


def kafka_default(f: dict[str, Any]) -> Any:
    t, d = f["type"], f.get("default")
    if d is None:
        if t.startswith("[]"):
            return []
        return {"float64": 0.0, "bool": False, "string": "", "bytes": b"", "records": None,
                "uuid": ZERO_UUID}.get(t, 0 if t in INTS else None)
    if d == "null":
        return None
    if t in INTS:
        return int(d, 0) if isinstance(d, str) else int(d)
    if t == "bool":
        return d in ("true", True)
    if t == "float64":
        return float(d)
    return d


def same_range(a: VersionRange, b: VersionRange) -> bool:
    return a == b or (a.empty and b.empty)


def compare(path: str, theirs: list[dict[str, Any]], ours: tuple[Field, ...],
            common: dict[str, Any], errors: list[str]) -> None:
    ours = tuple(f for f in ours if f.extension is None)  # this project's own tagged fields
    by_name = {snake_case(f["name"]): f for f in theirs}
    if list(by_name) != [f.name for f in ours]:
        errors.append(f"{path}: fields {list(by_name)} vs ours {[f.name for f in ours]}")
    for f in ours:
        k = by_name.get(f.name)
        if k is None:
            continue
        p = f"{path}.{f.name}"
        if k["type"] != f.type:
            errors.append(f"{p}: type {k['type']} vs {f.type}")
        for key, mine in (("versions", f.versions), ("nullableVersions", f.nullable_versions),
                          ("taggedVersions", f.tagged_versions)):
            if not same_range(VersionRange.parse(k.get(key)), mine):
                errors.append(f"{p}: {key} {k.get(key)} vs {mine}")
        if k.get("tag") != f.tag:
            errors.append(f"{p}: tag {k.get('tag')} vs {f.tag}")
        if bool(k.get("ignorable", False)) != f.ignorable:
            errors.append(f"{p}: ignorable {k.get('ignorable', False)} vs {f.ignorable}")
        if bool(k.get("mapKey", False)) != f.map_key:
            errors.append(f"{p}: mapKey {k.get('mapKey', False)} vs {f.map_key}")
        if f.struct is None or f.is_array:
            d = kafka_default(k)
            if d != f.default or type(d) is not type(f.default):
                errors.append(f"{p}: default {d!r} vs {f.default!r}")
        sub = k.get("fields")
        elem = k["type"].removeprefix("[]")
        if sub is None and elem in common:
            sub = common[elem]["fields"]
        if (sub is None) != (f.struct is None):
            errors.append(f"{p}: struct-ness differs")
        elif sub is not None and f.struct is not None:
            if f.struct.name != elem:
                errors.append(f"{p}: struct {elem} vs {f.struct.name}")
            compare(p, sub, f.struct.fields, common, errors)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("json_dir", type=Path, nargs="?", default=KEPT)
    parser.add_argument("--skip", nargs="*", default=[], help="message names to leave out")
    args = parser.parse_args(argv)
    errors: list[str] = []
    checked = 0
    for registry in (REQUESTS, RESPONSES):
        for key, msg in sorted(registry.items()):
            if msg.name in args.skip or key >= PRIVATE_API_KEY_START:  # ours alone: Kafka has no definition
                continue
            k = load(args.json_dir, msg.name)
            checked += 1
            if k["apiKey"] != key:
                errors.append(f"{msg.name}: api key {k['apiKey']} vs {key}")
            if not same_range(VersionRange.parse(k["flexibleVersions"]), msg.flexible_versions):
                errors.append(f"{msg.name}: flexible {k['flexibleVersions']} vs {msg.flexible_versions}")
            valid = VersionRange.parse(k["validVersions"])
            if msg.min_version < valid.lo or (valid.hi is not None and msg.max_version > valid.hi):
                errors.append(f"{msg.name}: our {msg.valid_versions} is outside Kafka's {valid}")
            common = {s["name"]: s for s in k.get("commonStructs", [])}
            compare(msg.name, k["fields"], msg.fields, common, errors)
    print("\n".join(errors) if errors else f"{checked} specs match Kafka's definitions")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
