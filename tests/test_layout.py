"""The tests mirror the code: every module with logic has its test file.

``pkg/sub/name.py`` is tested in ``tests/pkg/sub/test_name.py`` (a leading underscore of a
private module dropped: ``ldpcore/_field.py`` → ``tests/ldpcore/test_field.py``).  A module
has logic when it defines a function or a class at top level; ``__init__`` and
``__main__`` are re-exports and entry points.  Tests across modules (a real broker, Redis
and the services together) live beside them in ``tests/integration``, ``tests/cluster``,
``tests/sdks`` and ``tests/deploy``.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("ldpcore", "ldpstream", "producer", "aggregator", "query_api", "gateway",
            "issuer", "ldpctl")

# Modules with logic and no mirrored test file, each with the reason (none today).
ALLOWED_MISSING: dict[str, str] = {}


# A top-level definition starts a line (ruff keeps the code formatted so).
TOP_LEVEL_DEF = re.compile(r"^(?:async def|def|class) ", re.MULTILINE)


@lru_cache(maxsize=1)
def modules_with_logic() -> tuple[Path, ...]:
    out = []
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            if path.name in ("__init__.py", "__main__.py"):
                continue
            if TOP_LEVEL_DEF.search(path.read_text(encoding="utf-8")):
                out.append(path.relative_to(ROOT))
    return tuple(out)


def mirrored_test(module: Path) -> Path:
    return Path("tests") / module.parent / f"test_{module.stem.lstrip('_')}.py"


def test_every_module_with_logic_has_its_mirrored_test_file() -> None:
    missing = [f"{m} -> {mirrored_test(m)}" for m in modules_with_logic()
               if not (ROOT / mirrored_test(m)).exists()
               and m.as_posix() not in ALLOWED_MISSING]
    assert not missing, "modules without their test file:\n" + "\n".join(missing)


def test_the_allow_list_names_modules_that_still_lack_their_file() -> None:
    mods = {m.as_posix() for m in modules_with_logic()}
    for module in ALLOWED_MISSING:
        assert module in mods, f"{module} is gone: drop it from ALLOWED_MISSING"


def test_the_mirror_rule() -> None:
    assert mirrored_test(Path("ldpcore/frequency/grr.py")) == Path(
        "tests/ldpcore/frequency/test_grr.py")
    assert mirrored_test(Path("ldpcore/_field.py")) == Path("tests/ldpcore/test_field.py")
