"""Empirical ε audit (ldpcore.audit) of the multi-attribute and vector mechanisms.

The audit runs over the mixed-radix domain of value tuples, so the pairs that differ
in every attribute are included: with k sampled attributes at ε/k each, their
likelihood ratio reaches e^ε (tight) and never more; the same mechanism declared at
2ε is caught.  Discrete outputs only (GRR, OUE, Duchi): PM's 2^16 + 1 levels are too
many cells to observe; vectors are audited at the corners of the cube.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

import ldpcore
from ldpcore.audit import audit
from ldpcore.base import Reports
from ldpcore.multi import NumericVector

EPS = 1.0
TRIALS = 40_000
CASES = {
    "multi-k1": ("multi", {"attributes": [{"name": "a", "mechanism": "grr", "domain_size": 2},
                                          {"name": "b", "mechanism": "grr", "domain_size": 3}]}),
    "multi-k2": ("multi", {"sample": 2, "attributes": [
        {"name": "a", "mechanism": "grr", "domain_size": 2},
        {"name": "b", "mechanism": "oue", "domain_size": 2}]}),
    "multi-pair-k1": ("multi", {"pairs": [["a", "b"]], "attributes": [
        {"name": "a", "mechanism": "grr", "domain_size": 2},
        {"name": "b", "mechanism": "grr", "domain_size": 2}]}),
    "vector-duchi-k1": ("vector", {"dimensions": 2, "base": "duchi"}),
    "vector-duchi-k2": ("vector", {"dimensions": 2, "sample": 2, "base": "duchi"}),
}


def corners(o: ldpcore.Mechanism) -> Callable[[np.ndarray, np.random.Generator], Reports]:
    """For a vector: input i is the corner of [-1, 1]^d whose bits are i's (where Duchi's
    ratio reaches e^(ε/k) per dimension), perturbed without binning; else o.perturb."""
    if not isinstance(o, NumericVector):
        return o.perturb
    d = o.dimensions

    def perturb(values: np.ndarray, rng: np.random.Generator) -> Reports:
        bits = (values[:, None] >> np.arange(d)[None, :]) & 1
        return o.perturb_vectors(2.0 * bits - 1, rng=rng)
    return perturb


@pytest.mark.parametrize("case", sorted(CASES))
def test_multi_attribute_report_satisfies_epsilon_and_spends_it(case: str) -> None:
    mech, params = CASES[case]
    o = ldpcore.make_oracle(mech, epsilon=EPS, **params)
    result = audit(corners(o), epsilon=EPS, domain_size=o.domain_size, trials=TRIALS, seed=1)
    assert not result.violated, result
    assert result.tight, result


@pytest.mark.parametrize("case", sorted(CASES))
def test_audit_catches_the_multi_attribute_report_at_twice_epsilon(case: str) -> None:
    mech, params = CASES[case]
    loud = ldpcore.make_oracle(mech, epsilon=2 * EPS, **params)
    result = audit(corners(loud), epsilon=EPS, domain_size=loud.domain_size, trials=TRIALS,
                   seed=2)
    assert result.violated, result
