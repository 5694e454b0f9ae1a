"""Coverage table of the served 95 % intervals (the coverage part of ``bench/defaults.py``).

Run from the repository root::

    .venv/bin/python bench/coverage.py [--collections 600] [--out PATH]
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from defaults import RESULTS, main  # noqa: E402

if __name__ == "__main__":
    main(["--part", "coverage", "--out", str(RESULTS / "coverage.md"), *sys.argv[1:]])
