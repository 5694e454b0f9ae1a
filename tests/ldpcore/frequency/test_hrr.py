"""HRR (Cormode et al. 2018): one Hadamard coefficient's sign, flipped w.p. 1 - p."""

from __future__ import annotations

import numpy as np

import ldpcore
from ldpcore._transforms import fwht

from ..oracle_cases import assert_unbiased


def test_the_state_is_a_count_per_coefficient_and_sign() -> None:
    o = ldpcore.make_oracle("hrr", epsilon=1.0, domain_size=100)
    assert o.D == 128 and o.state_shape == (128, 2)
    st = o.aggregate(o.perturb(np.arange(100), rng=1))
    assert st.counts.sum() == 100


def test_coefficients_are_the_hadamard_transform_of_the_frequencies_in_expectation() -> None:
    o = ldpcore.make_oracle("hrr", epsilon=3.0, domain_size=8)
    truth = np.array([0.3, 0.3, 0.1, 0.1, 0.1, 0.1, 0.0, 0.0])
    theta = fwht(truth)
    n = 200_000
    st = o.sample_state(truth, n, rng=3)
    coef = o.coefficients(st.counts, n)
    # Each coefficient is D·(±1 w.p. …)/(n(2p-1)): variance at most D²/(n(2p-1)²)/D per j.
    sd = np.sqrt(o.D / (n * (2 * o.p - 1) ** 2))
    assert (np.abs(coef - theta) < 5 * sd).all()


def test_estimates_are_unbiased_within_the_analytic_variance() -> None:
    o = ldpcore.make_oracle("hrr", epsilon=1.0, domain_size=12)
    assert_unbiased(o, np.full(12, 1 / 12), 20_000, seed=6)
