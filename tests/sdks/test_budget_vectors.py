"""The shared privacy-budget vectors (sdks/vectors/budget) are what the Python SDK does, and
they say something: every step's ε is what the day's ledger gained, refusals cost nothing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from .conftest import load_script

ROOT = Path(__file__).resolve().parents[2]
VECTORS = ROOT / "sdks" / "vectors" / "budget"


def _generator() -> Any:
    return load_script(VECTORS / "generate.py", "budget_vectors")


def test_the_committed_vectors_are_what_the_python_sdk_does() -> None:
    assert (VECTORS / "ledger.json").read_text() == _generator().generate(), (
        "stale: run sdks/vectors/budget/generate.py")


def test_each_made_report_adds_its_cost_and_a_refused_one_nothing() -> None:
    cases = json.loads((VECTORS / "ledger.json").read_text())["cases"]
    refused = made = 0
    for c in cases:
        spent: dict[int, float] = {}
        for s in c["steps"]:
            day = int(s["now"] // 86_400)
            before = spent.get(day, 0.0)
            assert s["spent"] == pytest.approx(before + (s["cost"] if s["made"] else 0.0))
            refused += not s["made"]  # by the budget, or by the cadence
            made += s["made"]
            spent[day] = s["spent"]
        assert all(v <= c["budget"] * (1 + 1e-9) for v in spent.values())
    assert refused >= 8 and made >= 40
