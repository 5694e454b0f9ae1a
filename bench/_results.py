"""Where benchmark scripts write their Markdown results, and their common options."""

from __future__ import annotations

import argparse
from pathlib import Path

RESULTS_DIR = Path(__file__).parent / "results"


def write_results(name: str, lines: list[str]) -> Path:
    """Write ``lines`` to bench/results/NAME.md and say where."""
    RESULTS_DIR.mkdir(exist_ok=True)
    path = RESULTS_DIR / f"{name}.md"
    path.write_text("\n".join(lines) + "\n")
    print(f"written to {path}")
    return path


def bench_parser(doc: str | None, *, n: int, runs: int,
                 quick: tuple[int, int] | None = None) -> argparse.ArgumentParser:
    """A parser with ``--n`` (devices) and ``--runs``; with ``quick``, a ``--quick`` flag
    that sets (n, runs) to it (read by :func:`parse_bench_args`)."""
    ap = argparse.ArgumentParser(description=(doc or "").split("\n")[0])
    ap.add_argument("--n", type=int, default=n)
    ap.add_argument("--runs", type=int, default=runs)
    if quick is not None:
        ap.add_argument("--quick", action="store_true")
        ap.set_defaults(quick_sizes=quick)
    return ap


def parse_bench_args(ap: argparse.ArgumentParser) -> argparse.Namespace:
    """The parsed options, ``--quick`` applied."""
    args = ap.parse_args()
    if getattr(args, "quick", False):
        args.n, args.runs = args.quick_sizes
    return args
