"""GRR (k-RR): keeps the value with probability p, else a uniform other value."""

from __future__ import annotations

import math

import numpy as np

import ldpcore

from ..oracle_cases import assert_unbiased


def test_p_and_q_are_the_papers_and_their_ratio_is_e_to_the_epsilon() -> None:
    o = ldpcore.make_oracle("grr", epsilon=1.5, domain_size=5)
    e = math.exp(1.5)
    assert math.isclose(o.p, e / (e + 4)) and math.isclose(o.q, 1 / (e + 4))
    assert math.isclose(o.p / o.q, e)
    assert math.isclose(o.p + 4 * o.q, 1.0)


def test_reports_keep_the_value_with_probability_p_and_spread_the_rest_uniformly() -> None:
    n = 40_000
    o = ldpcore.make_oracle("grr", epsilon=1.0, domain_size=4)
    y = o.perturb(np.zeros(n, dtype=np.int64), rng=3).columns["y"]
    share = np.bincount(y, minlength=4) / n
    tol = 5 * math.sqrt(o.p * (1 - o.p) / n)
    assert abs(share[0] - o.p) < tol
    assert (np.abs(share[1:] - o.q) < 5 * math.sqrt(o.q / n)).all()


def test_estimates_are_unbiased_within_the_analytic_variance() -> None:
    o = ldpcore.make_oracle("grr", epsilon=1.0, domain_size=6)
    assert_unbiased(o, np.array([0.4, 0.2, 0.2, 0.1, 0.1, 0.0]), 20_000, seed=4)
