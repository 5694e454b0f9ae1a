"""Generated documentation: the configuration reference and the query API's OpenAPI document.

``python scripts/gen_docs.py`` rewrites docs/configuration.md from the code; ``--check`` only
says whether the checked-in page is current (tests/test_docs.py runs the same check).

The configuration reference cannot drift from the code: every settings class of the
services (a class with a ``from_env`` classmethod) reads an :class:`~ldpstream.settings.
EnvRecorder`, which notes each ``LDP_…`` variable it reads with the default and allowed
values its reader enforces; the meaning of each variable comes from the table in the
docstring next to that code.  A variable read without a row in such a table, or a row of
a variable no code reads, stops the script with the file to fix.

The OpenAPI document (:func:`openapi`) is the query API's own ``/openapi.json``; the
documentation site embeds it at build time (``scripts/mkdocs_hooks.py``).
"""

from __future__ import annotations

import argparse
import ast
import importlib
import json
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from ldpstream.dev.generated import write_or_check  # noqa: E402
from ldpstream.settings import ConfigError, EnvRecorder  # noqa: E402

CONFIG_PAGE = ROOT / "docs" / "configuration.md"
# The packages whose settings classes are read, and the name each service goes by.
SERVICES = {"aggregator": "worker", "query_api": "API", "gateway": "gateway", "issuer": "issuer",
            "producer": "simulate"}
SHARED = "ldpstream"
_VAR = re.compile(r"^LDP_[A-Z0-9_]+$")


@dataclass
class Variable:
    name: str
    used_by: list[str] = field(default_factory=list)
    facts: dict[str, Any] = field(default_factory=dict)
    doc_default: str = ""
    meaning: str = ""
    documented_in: str = ""


def _modules(package: str) -> Iterator[tuple[str, Path]]:
    for path in sorted((ROOT / package).rglob("*.py")):
        rel = path.relative_to(ROOT).with_suffix("")
        parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
        yield ".".join(parts), path


def settings_classes(package: str) -> list[tuple[str, str]]:
    """(module, class name) of every class of ``package`` that defines ``from_env``."""
    out = []
    for mod, path in _modules(package):
        tree = ast.parse(path.read_text(), str(path))
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and any(
                    isinstance(f, ast.FunctionDef) and f.name == "from_env" for f in node.body):
                out.append((mod, node.name))
    return out


def _code_literals(path: Path, cls_name: str) -> list[str]:
    """``LDP_…`` names that appear as whole string constants in a class's code (docstrings
    excluded): the variables it reads only in some configurations."""
    tree: ast.AST = next(n for n in ast.parse(path.read_text(), str(path)).body
                         if isinstance(n, ast.ClassDef) and n.name == cls_name)
    docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                  if isinstance(n, (ast.ClassDef, ast.FunctionDef))
                  and n.body and isinstance(n.body[0], ast.Expr)
                  and isinstance(n.body[0].value, ast.Constant)}
    # `"LDP_OLD" in env` only asks whether a retired variable is still set (to refuse it).
    probes = {id(n.left) for n in ast.walk(tree) if isinstance(n, ast.Compare)
              and all(isinstance(op, (ast.In, ast.NotIn)) for op in n.ops)}
    return [n.value for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str)
            and id(n) not in docstrings | probes and _VAR.match(n.value)]


def environ_reads(path: Path) -> Iterator[tuple[str, Any]]:
    """(variable, default) of each ``os.environ.get("LDP_…"[, default])`` in a module."""
    for n in ast.walk(ast.parse(path.read_text(), str(path))):
        if (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                and n.func.attr in ("get", "getenv") and n.args
                and isinstance(n.args[0], ast.Constant) and isinstance(n.args[0].value, str)
                and _VAR.match(n.args[0].value)):
            default = n.args[1].value if len(n.args) > 1 and isinstance(
                n.args[1], ast.Constant) else None
            yield n.args[0].value, default


def from_env_calls(path: Path) -> set[str]:
    """Names of the classes whose ``from_env`` a module calls (``KafkaSecurity.from_env()``)."""
    return {n.func.value.id for n in ast.walk(ast.parse(path.read_text(), str(path)))
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
            and n.func.attr == "from_env" and isinstance(n.func.value, ast.Name)}


def docstring_rows(text: str) -> Iterator[tuple[str, str, str]]:
    """(variable, default, meaning) of the reStructuredText simple tables in ``text``
    whose first column holds ``LDP_…`` names; continuation lines join the meaning."""
    lines = [ln.strip("\n") for ln in text.splitlines()]
    i = 0
    while i < len(lines):
        border = lines[i].strip()
        if not (border.startswith("=") and set(border) <= {"=", " "} and " " in border):
            i += 1
            continue
        indent = len(lines[i]) - len(lines[i].lstrip())
        cols = [(m.start() + indent, m.end() + indent) for m in re.finditer(r"=+", border)]
        # header, border, rows ..., border
        j, row = i + 3, None
        while j < len(lines) and lines[j].strip() and not set(lines[j].strip()) <= {"=", " "}:
            cells = [lines[j][a:(cols[k + 1][0] if k + 1 < len(cols) else None)].strip()
                     for k, (a, _) in enumerate(cols)]
            if cells[0]:
                if row is not None:
                    yield row
                row = (cells[0], cells[1], cells[-1])
            elif row is not None:
                row = (row[0], row[1], f"{row[2]} {cells[-1]}".strip())
            j += 1
        if row is not None:
            yield row
        i = j + 1


def _fmt_default(value: Any) -> str:
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def collect() -> dict[str, Variable]:
    """Every variable the services read, with what the code and its docs say."""
    found: dict[str, Variable] = {}
    docs: dict[str, tuple[str, str, str]] = {}
    shared: dict[str, list[str]] = {}  # shared settings class -> the variables it reads

    def read(name: str, user: str | None, facts: dict[str, Any]) -> None:
        var = found.setdefault(name, Variable(name))
        for key, value in facts.items():
            var.facts.setdefault(key, value)
        if user and user not in var.used_by:
            var.used_by.append(user)

    def document(text: str, where: str) -> None:
        for var, default, meaning in docstring_rows(text):
            if _VAR.match(var):
                docs.setdefault(var, (default, meaning, where))

    # The services' settings first: their reading order (shared classes included) is the
    # order of the page.
    for package in [*SERVICES, SHARED]:
        user = SERVICES.get(package)
        for mod, cls_name in settings_classes(package):
            module = importlib.import_module(mod)
            cls = getattr(module, cls_name)
            document(module.__doc__ or "", mod)
            document(cls.__doc__ or "", f"{mod}.{cls_name}")
            env = EnvRecorder()
            try:
                cls.from_env(env)
            except ConfigError:
                pass  # a required variable: what it read so far, and its literals, count
            path = Path(module.__file__ or "")
            names = list(env.read) + [v for v in _code_literals(path, cls_name)
                                     if v not in env.read]
            if package == SHARED:
                shared[cls_name] = names
            for name in names:
                read(name, user, env.read.get(name, {}))
    # Plain reads, and shared settings used outside a settings class (the CLI's flags).
    for package, user in SERVICES.items():
        for mod, path in _modules(package):
            reads = list(environ_reads(path))
            calls = from_env_calls(path) & set(shared)
            if reads or calls:
                document(importlib.import_module(mod).__doc__ or "", mod)
            for name, default in reads:
                read(name, user, {"default": default})
            for cls_name in calls:
                for name in shared[cls_name]:
                    read(name, user, {})
    problems = []
    for name, var in found.items():
        if name not in docs:
            problems.append(f"{name} is read by the code but has no row in a docstring "
                            "table (add one next to the code that reads it)")
            continue
        var.doc_default, var.meaning, var.documented_in = docs[name]
    for name, (_, _, where) in docs.items():
        if name not in found:
            problems.append(f"{name} is documented in {where} but no code reads it")
    if problems:
        raise SystemExit("scripts/gen_docs.py: the settings and their docs disagree:\n  "
                         + "\n  ".join(problems))
    return found


def _rst(text: str) -> str:
    return text.replace("``", "`")


def _default(var: Variable) -> str:
    doc = _rst(var.doc_default)
    if doc.startswith("(") and doc.endswith(")"):
        doc = doc[1:-1]  # "(system CAs)", "(unset: admin routes off)"
    code = _fmt_default(var.facts["default"]) if "default" in var.facts else None
    if code is None or (code == "unset" and doc):
        return doc or "unset"
    # Keep the docstring's gloss ("0 (off)") when it starts with the code's value.
    return doc if doc.split(" ")[0].strip("`") == code else code


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def configuration_page() -> str:
    """The text of docs/configuration.md."""
    variables = collect()
    sections: dict[str, list[Variable]] = {}
    for var in variables.values():
        key = "Shared by the services" if len(var.used_by) > 1 else (
            var.used_by[0] if var.used_by else "Shared by the services")
        sections.setdefault(key, []).append(var)
    titles = {"Shared by the services": "Shared by the services",
              "worker": "Worker (`ldpstream aggregate`)", "API": "Query API (`ldpstream serve`)",
              "gateway": "Gateway (`ldpstream gateway`)",
              "simulate": "Simulated devices (`ldpstream simulate`)"}
    out = [
        "# Configuration reference",
        "",
        "<!-- Generated by `python scripts/gen_docs.py` from the services' settings classes; "
        "do not edit: change the docstring table next to the code, then rerun it. -->",
        "",
        "Every service reads its settings once, at start-up, from `LDP_…` environment "
        "variables. A bad value stops it at once (exit status 2) with a message naming the "
        "variable and what it allows; secrets never appear in logged settings.",
        "",
        "This page is generated by `python scripts/gen_docs.py` from the settings classes "
        "themselves (each `from_env` reads a recording environment, so the variables, "
        "defaults and allowed values are the code's) and the tables in their docstrings "
        "(the meaning); `tests/test_docs.py` fails when it is out of date.",
        "",
    ]
    order = ["Shared by the services", "worker", "API", "gateway", "simulate"]
    for key in order + sorted(set(sections) - set(order)):
        if key not in sections:
            continue
        out += [f"## {titles.get(key, key)}", "",
                "| variable | default | allowed | used by | meaning |",
                "|---|---|---|---|---|"]
        for var in sections[key]:
            default = _default(var)
            if not default.startswith(("`", "unset", "system")):
                value, _, gloss = default.partition(" ")
                default = f"`{value}` {gloss}".strip()
            out.append(f"| `{var.name}` | {_cell(default)} | "
                       f"{_cell(str(var.facts.get('allowed', '')))} | "
                       f"{', '.join(var.used_by)} | {_cell(_rst(var.meaning))} |")
        out.append("")
    out += ["## Removed settings", "",
            "Set one of these and the service refuses to start, naming its replacement.", "",
            "| variable | removed in favour of |", "|---|---|"]
    out += [f"| `{name}` | {why} |" for name, why in REMOVED.items()]
    out.append("")
    return "\n".join(out)


REMOVED = {
    "LDP_CACHE_ENTRIES": "`LDP_ANSWER_CACHE_MB` and `LDP_STATE_CACHE_MB` (the query API's "
                         "caches are bounded in bytes, not entries)",
}
"""Variables that were read once and are refused now (start-up fails naming them)."""


def openapi() -> dict[str, Any]:
    """The query API's OpenAPI document, as ``GET /openapi.json`` serves it."""
    from prometheus_client import CollectorRegistry

    from query_api.app import create_app
    from query_api.config import ApiSettings

    schema: dict[str, Any] = create_app(ApiSettings(), registry=CollectorRegistry()).openapi()
    return schema


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true",
                    help="exit 1 if docs/configuration.md is not what the code generates")
    ap.add_argument("--openapi", metavar="FILE", help="also write the OpenAPI document here")
    args = ap.parse_args(argv)
    files = {CONFIG_PAGE: configuration_page()}
    if args.openapi and not args.check:
        files[Path(args.openapi)] = json.dumps(openapi(), indent=1) + "\n"
    return write_or_check(files, check=args.check, command="python scripts/gen_docs.py")


if __name__ == "__main__":
    sys.exit(main())
