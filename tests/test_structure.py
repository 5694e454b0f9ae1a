"""Code a newcomer can read: no function of the services (or of the ``ldpstream`` command)
longer than :data:`LIMIT` lines, from its ``def`` line to its last line (issue 27).  The
import cycles are checked with the layering (tests/test_layering.py)."""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("producer", "aggregator", "query_api", "gateway", "issuer", "ldpctl")
LIMIT = 80

# Functions allowed over the limit (issue 27): none left; an entry goes once its function
# is split, and none is added.
ALLOWED_LONG: set[str] = set()


def function_lengths(path: Path, rel: str) -> Iterator[tuple[str, int]]:
    """(``file::Class.function``, lines from ``def`` to the last line) of every function
    in a module, methods and nested functions included."""
    def walk(node: ast.AST, prefix: str) -> Iterator[tuple[str, int]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                name = f"{prefix}{child.name}"
                yield f"{rel}::{name}", (child.end_lineno or child.lineno) - child.lineno + 1
                yield from walk(child, f"{name}.")
            elif isinstance(child, ast.ClassDef):
                yield from walk(child, f"{prefix}{child.name}.")
            else:
                yield from walk(child, prefix)

    yield from walk(ast.parse(path.read_text(), str(path)), "")


@functools.cache
def long_functions(packages: tuple[str, ...], root: Path = ROOT) -> dict[str, int]:
    return {name: n for pkg in packages for path in sorted((root / pkg).rglob("*.py"))
            for name, n in function_lengths(path, path.relative_to(root).as_posix())
            if n > LIMIT}


def test_no_function_is_longer_than_the_limit() -> None:
    found = long_functions(PACKAGES)
    bad = sorted(f"{name}: {n} lines" for name, n in found.items() if name not in ALLOWED_LONG)
    assert not bad, f"functions over {LIMIT} lines (split them):\n" + "\n".join(bad)


def test_the_allow_list_only_holds_functions_still_too_long() -> None:
    # Once a function is split its entry must go, so the list only ever shrinks.
    stale = sorted(ALLOWED_LONG - set(long_functions(PACKAGES)))
    assert not stale, "split already, remove from ALLOWED_LONG: " + ", ".join(stale)


def test_the_length_check_counts_from_def_to_last_line(tmp_path: Path) -> None:
    # The check must be able to fail: a method of 81 lines is found, one of 80 is not,
    # and a nested function is named after its parent.
    body = "\n".join(f"        x{i} = {i}" for i in range(79))
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "m.py").write_text(
        f"class C:\n    def long(self):\n{body}\n        return x0\n"
        f"    def fits(self):\n{body}\n\n"
        "def outer():\n    def inner():\n        return 1\n    return inner\n")
    assert long_functions(("pkg",), tmp_path) == {"pkg/m.py::C.long": 81}
    names = dict(function_lengths(tmp_path / "pkg" / "m.py", "m.py"))
    assert names["m.py::C.fits"] == 80 and names["m.py::outer.inner"] == 2
