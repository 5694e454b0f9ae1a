"""Imports go one way: ldpcore ← ldpstream ← producer / aggregator / query_api / gateway /
issuer, and no module imports itself back through others (no import cycle inside a package)."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SERVICES = {"producer", "aggregator", "query_api", "gateway", "issuer"}
OURS = {"ldpcore", "ldpstream"} | SERVICES
# What each package may import from ours (besides itself).
ALLOWED = {"ldpcore": set(), "ldpstream": {"ldpcore"},
           **{s: {"ldpcore", "ldpstream"} for s in SERVICES}}
# The CLI entry point sits above everything: it runs the verb asked for (lazily).
ENTRY_POINTS = {Path("ldpstream/cli.py")}


def imported_packages(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.add(node.module.split(".")[0])
    return out & OURS


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_imports_only_go_down(package: str) -> None:
    bad = []
    for path in sorted((ROOT / package).rglob("*.py")):
        rel = path.relative_to(ROOT)
        if rel in ENTRY_POINTS:
            continue
        for dep in imported_packages(path) - {package} - ALLOWED[package]:
            bad.append(f"{rel} imports {dep}")
    assert not bad, "\n".join(bad)


def test_there_are_no_top_level_modules_besides_the_packages() -> None:
    import tomllib

    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "py-modules" not in cfg["tool"].get("setuptools", {})
    found = set(cfg["tool"]["setuptools"]["packages"]["find"]["include"])
    assert found == {f"{p}*" for p in OURS}


# ---- no import cycles ---------------------------------------------------------------------
def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@functools.cache
def import_graph(packages: frozenset[str]) -> dict[str, set[str]]:
    """Module → the modules of ours it imports.  Every import counts: at module level, inside
    functions (lazy) and under ``if TYPE_CHECKING`` — each ties the two modules together."""
    paths = {module_name(p): p for pkg in packages for p in (ROOT / pkg).rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for mod, path in paths.items():
        base = mod.split(".") if path.name == "__init__.py" else mod.split(".")[:-1]
        deps = graph.setdefault(mod, set())
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                deps |= {a.name for a in node.names if a.name in paths}
            elif isinstance(node, ast.ImportFrom):
                up = base[:len(base) - node.level + 1] if node.level else []
                target = ".".join(up + ([node.module] if node.module else []))
                for alias in node.names:
                    sub = f"{target}.{alias.name}"
                    if sub in paths:
                        deps.add(sub)
                    elif target in paths:
                        deps.add(target)
        deps.discard(mod)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle (a → … → a) through each strongly connected group of modules."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[set[str]] = []

    def visit(v: str) -> None:  # Tarjan
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = set()
            while True:
                w = stack.pop()
                group.add(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(group)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    out = []
    for group in groups:
        start = min(group)
        path, seen = [start], {start}
        while True:  # walk inside the group until a module repeats
            nxt = min(w for w in graph[path[-1]] if w in group)
            if nxt in seen:
                out.append(path[path.index(nxt):] + [nxt])
                break
            path.append(nxt)
            seen.add(nxt)
    return out


# The packages held to no cycle; the services join when theirs are gone (issue 27).
ACYCLIC = ("ldpcore", "producer")


@pytest.mark.parametrize("package", ACYCLIC)
def test_no_import_cycles(package: str) -> None:
    found = cycles(import_graph(frozenset({package})))
    assert not found, "import cycles:\n" + "\n".join(" -> ".join(c) for c in found)


def test_the_cycle_finder_sees_every_kind_of_import() -> None:
    # The check above must be able to fail: a cycle is found, and the graph holds imports
    # made at module level, inside a function and under TYPE_CHECKING.
    graph = {"p.a": {"p.b"}, "p.b": {"p.c"}, "p.c": {"p.a"}, "p.d": {"p.a"}}
    assert cycles(graph) == [["p.a", "p.b", "p.c", "p.a"]]
    g = import_graph(frozenset({"ldpcore"}))
    assert "ldpcore.base" in g["ldpcore.registry"]
    assert "ldpcore.registry" in g["ldpcore.range.hh"]
    assert "ldpcore.state" in g["ldpcore.capabilities"]
