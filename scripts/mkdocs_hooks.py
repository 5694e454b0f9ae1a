"""MkDocs hooks (mkdocs.yml): the site is laid out like the repository.

Pages keep the paths they have in the repository (README.md is the home page,
docs/architecture.md stays docs/architecture.md), so every relative link works the same on
the site as in a checkout, and ``mkdocs build --strict`` checks all of them: the files
the pages link to (bench/results/*.md, sdks/README.md, CHANGELOG.md, pictures, …) are
added to the site as they are found.  The query API's OpenAPI document is generated into
docs/openapi.json at build time (scripts/gen_docs.py), for the page that embeds it.
"""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

START = ["README.md", "CHANGELOG.md"]  # besides every file under docs/
# [text](target) and <img src="target">: the links a page can hold to another file.
_LINK = re.compile(r"\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)|src=\"([^\"]+)\"")
_SKIP = (".venv", ".tools", "node_modules", "site")


def _targets(page: Path) -> list[Path]:
    """Files of the repository that a Markdown page links to (relative links only)."""
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)  # not in code blocks
    out = []
    for m in _LINK.finditer(text):
        target = (m.group(1) or m.group(2)).split("#", 1)[0]
        if not target or re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("/"):
            continue
        path = (page.parent / target).resolve()
        if path.is_file() and ROOT in path.parents and not any(
                part in _SKIP for part in path.relative_to(ROOT).parts):
            out.append(path)
    return out


def on_files(files: Files, config: MkDocsConfig) -> Files:
    site = Files([])
    use_urls = config.use_directory_urls
    todo = [ROOT / p for p in START] + sorted((ROOT / "docs").rglob("*"))
    seen: set[Path] = set()
    while todo:
        path = todo.pop(0)
        if path in seen or not path.is_file():
            continue
        seen.add(path)
        rel = path.relative_to(ROOT).as_posix()
        site.append(File(rel, str(ROOT), config.site_dir, use_urls))
        if path.suffix == ".md":
            todo += _targets(path)
    spec = importlib.util.spec_from_file_location("gen_docs", ROOT / "scripts" / "gen_docs.py")
    assert spec is not None and spec.loader is not None
    gen_docs = sys.modules["gen_docs"] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen_docs)
    site.append(File.generated(config, "docs/openapi.json",
                               content=json.dumps(gen_docs.openapi(), indent=1)))
    return site
