"""Empirical ε audit of every frequency oracle (see ldpcore.audit).

On a domain of 3 values (not a power of two, so padded transforms are exercised)
each mechanism must show no significant likelihood ratio above e^ε, must spend
its budget (the worst ratio is consistent with e^ε), and the same mechanism run
at 2ε must be caught.
"""

from __future__ import annotations

import pytest

from ldpcore.audit import audit

from .oracle_cases import available, make

EPS = 1.0
D = 3
TRIALS = 60_000


@pytest.mark.parametrize("mech", available())
def test_mechanism_satisfies_its_epsilon_and_spends_it(mech: str) -> None:
    oracle = make(mech, epsilon=EPS, domain_size=D, small=True)
    result = audit(oracle.perturb, epsilon=EPS, domain_size=D, trials=TRIALS, seed=1)
    assert not result.violated, result
    assert result.tight, result


@pytest.mark.parametrize("mech", available())
def test_audit_catches_the_mechanism_run_at_twice_epsilon(mech: str) -> None:
    loud = make(mech, epsilon=2 * EPS, domain_size=D, small=True)
    result = audit(loud.perturb, epsilon=EPS, domain_size=D, trials=TRIALS, seed=2)
    assert result.violated, result
