"""Hadamard response (Acharya et al. 2019): one index of a K = 2^k code, inside S_v w.p. p."""

from __future__ import annotations

import math

import numpy as np

import ldpcore
from ldpcore._transforms import hadamard_sign

from ..oracle_cases import assert_unbiased


def test_the_code_length_is_the_next_power_of_two_above_d() -> None:
    for d, k in ((3, 4), (4, 8), (1000, 1024)):
        o = ldpcore.make_oracle("hr", epsilon=1.0, domain_size=d)
        assert o.K == k and o.state_shape == (k,)


def test_a_report_lands_inside_its_values_half_with_probability_p() -> None:
    n = 40_000
    o = ldpcore.make_oracle("hr", epsilon=1.0, domain_size=7)
    v = np.full(n, 5, dtype=np.int64)
    y = o.perturb(v, rng=2).columns["y"].astype(np.int64)
    inside = (hadamard_sign(v + 1, y) > 0).mean()
    assert abs(inside - o.p) < 5 * math.sqrt(o.p * (1 - o.p) / n)


def test_estimates_are_unbiased_within_the_analytic_variance() -> None:
    o = ldpcore.make_oracle("hr", epsilon=2.0, domain_size=10)
    truth = np.r_[0.5, np.full(9, 0.5 / 9)]
    assert_unbiased(o, truth, 20_000, seed=5)
