"""Imports go one way: ldpcore ← ldpstream ← producer / aggregator / query_api / gateway /
issuer ← ldpctl (the ``ldpstream`` command and the local stack), and no module imports itself
back through others (no import cycle inside a package)."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SERVICES = {"producer", "aggregator", "query_api", "gateway", "issuer"}
TOP = "ldpctl"
OURS = {"ldpcore", "ldpstream", TOP} | SERVICES
# What each package may import from ours (besides itself).
ALLOWED = {"ldpcore": set(), "ldpstream": {"ldpcore"},
           **{s: {"ldpcore", "ldpstream"} for s in SERVICES},
           TOP: {"ldpcore", "ldpstream"} | SERVICES}
# `python -m ldpstream` keeps working: this one file of the shared layer runs the top floor's
# CLI, and nothing imports it (test_the_alias_is_only_run_never_imported).
ALIAS = Path("ldpstream/__main__.py")


def imported_packages(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.add(node.module.split(".")[0])
    return out & OURS


def run_as_module(path: Path) -> set[str]:
    """The packages of ours a module runs as ``python -m PKG…`` or imports by name
    (``importlib.import_module("PKG…")``): dependencies the import statements do not show."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.List | ast.Tuple):
            words = [e.value if isinstance(e, ast.Constant) else None for e in node.elts]
            out |= {str(b).split(".")[0] for a, b in zip(words, words[1:], strict=False)
                    if a == "-m" and isinstance(b, str)}
        elif (isinstance(node, ast.Call) and node.args
              and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)
              and getattr(node.func, "attr", getattr(node.func, "id", None))
              in ("import_module", "__import__", "run_module")):
            out.add(node.args[0].value.split(".")[0])
    return out & OURS


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_imports_only_go_down(package: str) -> None:
    bad = []
    for path in sorted((ROOT / package).rglob("*.py")):
        rel = path.relative_to(ROOT)
        allowed = ALLOWED[package] | ({TOP} if rel == ALIAS else set())
        for dep in imported_packages(path) - {package} - allowed:
            bad.append(f"{rel} imports {dep}")
    assert not bad, "\n".join(bad)


def test_the_shared_layer_runs_no_service() -> None:
    # Starting a service as `python -m aggregator` (or the CLI, which reaches every service)
    # ties the shared layer to it as much as an import does: that is the top floor's job.
    bad = [f"{path.relative_to(ROOT)} runs {dep}"
           for pkg in ("ldpcore", "ldpstream") for path in sorted((ROOT / pkg).rglob("*.py"))
           for dep in run_as_module(path) - ALLOWED[pkg] - {"ldpcore"}]
    assert not bad, "\n".join(bad)


def test_the_alias_is_only_run_never_imported() -> None:
    # The shared layer's one arrow to the top floor stays an entry point: it names the CLI
    # and nothing else, and no module imports it (so no code of the shared layer reaches up).
    assert imported_packages(ROOT / ALIAS) == {TOP}
    graph = import_graph(frozenset(OURS))
    assert not [m for m, deps in graph.items() if "ldpstream.__main__" in deps]


def test_the_checks_see_upward_arrows(tmp_path: Path) -> None:
    # What the old layout did must fail here: a CLI in the shared layer importing a service
    # lazily, and a dev tool starting one with `python -m`.
    probe = tmp_path / "probe.py"
    probe.write_text("def run():\n    from aggregator.app import main\n    return main()\n")
    assert imported_packages(probe) == {"aggregator"}
    probe.write_text("import importlib, subprocess, sys\n"
                     "subprocess.run([sys.executable, '-m', 'producer.demo'])\n"
                     "importlib.import_module('gateway.app')\n")
    assert run_as_module(probe) == {"producer", "gateway"}


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


# The packages held to no cycle (issue 27): every floor, the top one included.
ACYCLIC = ("ldpcore", "ldpstream", "producer", "aggregator", "query_api", "gateway", "issuer",
           "ldpctl")


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
