"""Imports go one way: ldpcore ← ldpstream ← producer, aggregator, query_api, gateway, issuer."""

from __future__ import annotations

import ast
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
