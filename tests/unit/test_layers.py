"""The layer order of docs/architecture.md, enforced: every ``import`` of pybroker/ (top-level,
inside a function or under ``TYPE_CHECKING`` alike) goes to a package on a lower floor or to its
own package, and no module reaches itself through imports."""

from __future__ import annotations

import ast
from pathlib import Path

import pybroker

#: The floors of docs/architecture.md, bottom up. A top-level module counts as its own unit;
#: ``__init__`` is the package itself (``__version__``).
FLOORS: dict[str, int] = {
    "types": 0, "scheduler": 0, "child_process": 0, "jvm_collections": 0, "_native": 0, "__init__": 0,
    "common": 1,
    "log": 2, "protocol": 2, "zookeeper": 2,
    "security": 3, "metrics": 3,
    "network": 4,
    "client": 5,
    "controller": 6, "spark": 6,
    "replication": 7,
    "server": 8,
    "cli": 9,
    "__main__": 10,
}

def _unit(module: str) -> str:
    """The floor unit of a ``pybroker.…`` module name: its package, or the top-level module."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _imports(tree: ast.AST) -> list[str]:
    """Every pybroker module an import names (``from pybroker import _native`` names _native)."""
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module == "pybroker":
            found += [f"pybroker.{a.name}" if a.name != "__version__" else "pybroker" for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("pybroker."):
            found.append(node.module)  # type: ignore[arg-type]
        elif isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.startswith("pybroker")]
    return found


def upward_imports() -> set[str]:
    """``<file> -> <module>`` for every import to the same floor or above, another package."""
    root = Path(pybroker.__file__).parent
    upward = set()
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root)
        source = _unit("pybroker." + ".".join(relative.with_suffix("").parts))
        for module in _imports(ast.parse(path.read_text())):
            target = _unit(module)
            if target != source and FLOORS[target] >= FLOORS[source]:
                upward.add(f"{relative.as_posix()} -> {module.removeprefix('pybroker.')}")
    return upward


def test_every_package_has_a_floor():
    root = Path(pybroker.__file__).parent
    units = {p.name for p in root.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    units |= {p.stem for p in root.glob("*.py")} | {"_native"}
    assert units == set(FLOORS)


def test_imports_only_go_down():
    assert sorted(upward_imports()) == []


def test_the_drawing_lists_every_package():
    drawing = (Path(pybroker.__file__).parent.parent / "docs" / "architecture.md").read_text()
    missing = [unit for unit in FLOORS if unit not in ("__init__", "__main__", "_native")
               and f"`{unit}/`" not in drawing and f"`{unit}.py`" not in drawing]
    assert missing == []


def _module_graph() -> dict[str, set[str]]:
    """Module → the pybroker modules it imports (deferred imports too; ``from pkg import mod``
    names both the package and the module)."""
    root = Path(pybroker.__file__).parent
    paths = {}
    for path in root.rglob("*.py"):
        parts = ("pybroker", *path.relative_to(root).with_suffix("").parts)
        paths[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph: dict[str, set[str]] = {name: set() for name in paths}
    for name, path in paths.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("pybroker"):
                targets = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                continue
            graph[name] |= {t for t in targets if t in paths and t != name}
    return graph


def test_no_import_circles():
    """No module reaches itself through imports, deferred ones counted (Tarjan's strongly
    connected components of the module graph)."""
    graph = _module_graph()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in graph[node]:
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    assert circles == []


def test_handlers_ask_the_partition_not_its_log():
    """No module under ``server/apis/`` reaches a partition's ``Log``: the leader-side answers
    (reads, offsets by timestamp, epoch end offsets, producer states, verification) are the
    partition's and the replica manager's."""
    apis = Path(pybroker.__file__).parent / "server" / "apis"
    touches = sorted(
        f"{path.name}:{node.lineno}"
        for path in apis.glob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Attribute) and node.attr == "log"
    )
    assert touches == []
