"""Where benchmark scripts write their Markdown results."""

from __future__ import annotations

from pathlib import Path

RESULTS_DIR = Path(__file__).parent / "results"


def write_results(name: str, lines: list[str]) -> Path:
    """Write ``lines`` to bench/results/NAME.md and say where."""
    RESULTS_DIR.mkdir(exist_ok=True)
    path = RESULTS_DIR / f"{name}.md"
    path.write_text("\n".join(lines) + "\n")
    print(f"written to {path}")
    return path
