"""The pure-protocol estimator and variance shared by GRR, SUE, OUE and SS."""

from __future__ import annotations

import numpy as np
import pytest

import ldpcore
from ldpcore.frequency.pure import PureOracle


@pytest.mark.parametrize("mech", ["grr", "sue", "oue", "ss"])
def test_the_estimate_inverts_the_support_probabilities(mech: str) -> None:
    o = ldpcore.make_oracle(mech, epsilon=1.0, domain_size=8)
    assert isinstance(o, PureOracle)
    # C(v)/n = q + (p - q) f(v) exactly: the estimate gives f back, for one or many states.
    f = np.array([0.5, 0.25, 0.125, 0.125, 0, 0, 0, 0])
    n = 1000
    counts = (o.q + (o.p - o.q) * f) * n
    assert np.allclose(o._estimate(counts, n), f)
    assert np.allclose(o._estimate_batch(np.stack([counts, counts]), n), [f, f])


@pytest.mark.parametrize("mech", ["grr", "sue", "oue"])
def test_the_variance_is_wang_et_al_theorem_2(mech: str) -> None:
    o = ldpcore.make_oracle(mech, epsilon=2.0, domain_size=8)
    p, q, n, f = o.p, o.q, 500, 0.3
    want = q * (1 - q) / (n * (p - q) ** 2) + f * (1 - p - q) / (n * (p - q))
    assert o.variance(n, f) == pytest.approx(want, rel=1e-12)
