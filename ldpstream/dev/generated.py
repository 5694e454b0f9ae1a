"""Files generated from the code (docs/configuration.md, the SDK vectors): rewrite them,
or with ``--check`` only compare, in one way for every generator.

>>> import tempfile
>>> out = Path(tempfile.mkdtemp()) / "a.json"
>>> write_or_check({out: "{}\\n"}, check=True, command="python gen.py")
1
>>> write_or_check({out: "{}\\n"}, check=False, command="python gen.py")
0
>>> write_or_check({out: "{}\\n"}, check=True, command="python gen.py")
0
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path

__all__ = ["write_or_check"]


def write_or_check(files: Mapping[Path, str], *, check: bool, command: str) -> int:
    """Write each ``path: text`` of ``files`` (0), or with ``check`` write nothing and
    return 1 with a line on stderr naming the files that differ (or are missing) and the
    ``command`` that rewrites them (0 when none does)."""
    if check:
        stale = [str(p) for p, text in files.items() if not p.exists() or p.read_text() != text]
        if stale:
            print(f"{', '.join(stale)} out of date: run {command}", file=sys.stderr)
            return 1
        return 0
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return 0
