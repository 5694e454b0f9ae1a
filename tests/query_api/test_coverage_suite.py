"""Every default answer's 95 % interval: coverage >= 0.9 and not much wider than it must be.

For each collection kind and each default answer (frequencies, subsets, hierarchical
range and quantiles, means, set-valued item frequencies and item sums, a multi-attribute
collection's attribute and 2-way marginal, a memoized collection over several windows):
at least 50 independent collections with known truth, simulated at the state level and
answered by the service's own estimation code (``bench/answers_coverage.py``, which also
prints the table of docs/answers.md).  Coverage over all the intervals must be >= 0.9,
and the median ratio of an interval's width to its reference width (the analytic
interval at the truth; for quantiles the inversion of the true CDF's analytic band)
<= 1.5: an interval too wide to say anything fails as one that misses.  Fixed seeds.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

pytestmark = pytest.mark.slow

PATH = Path(__file__).resolve().parents[2] / "bench" / "answers_coverage.py"


def _suite() -> ModuleType:
    spec = importlib.util.spec_from_file_location("answers_coverage", PATH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look themselves up there
    spec.loader.exec_module(module)
    return module


SUITE = _suite()


@pytest.mark.parametrize("index", range(len(SUITE.CASES)),
                         ids=[f"{k}: {a}" for k, a, _, _ in SUITE.CASES])
def test_a_default_answer_covers_the_truth_without_being_too_wide(index: int) -> None:
    kind, answer, _, _ = SUITE.CASES[index]
    # One interval per collection for a mean: more collections for the same precision.
    trials = 100 if answer == "mean" else 50
    res = SUITE.run_case(index, trials)
    assert res.trials >= 50 and len(res.covered) >= 100
    assert res.coverage >= 0.9, (kind, answer, res.coverage)
    assert res.width_ratio <= 1.5, (kind, answer, res.width_ratio)
