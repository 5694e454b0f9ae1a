"""Numerical vectors in [-1, 1]^d (ldpcore.multi.NumericVector, Wang et al. ICDE 2019):
both estimators unbiased, their variances as stated, Algorithm 4's k."""

from __future__ import annotations

import math

import numpy as np
import pytest

import ldpcore
from ldpcore.errors import ParameterError
from ldpcore.multi import NumericVector, recommended_sample

Z = 4.0


def make(**kw: object) -> NumericVector:
    o = ldpcore.make_oracle("vector", **kw)
    assert isinstance(o, NumericVector)
    return o


@pytest.mark.parametrize("base,sample", [("pm", 1), ("pm", 2), ("duchi", 1), ("duchi", 4)])
def test_both_estimators_are_unbiased_within_their_variance(base: str, sample: int) -> None:
    o, n, runs = make(epsilon=2.0, dimensions=4, sample=sample, base=base), 10_000, 20
    rng = np.random.default_rng(1)
    x = np.clip(rng.normal([-0.6, 0.0, 0.3, 0.9], 0.2, size=(n, 4)), -1, 1)
    truth = x.mean(axis=0)
    ratio, scaled = [], []
    for _ in range(runs):
        st = o.aggregate(o.perturb_vectors(x, rng=rng))
        ratio.append(o.means(st) - truth)
        scaled.append(o.scaled_means(st) - truth)
    assert np.all(np.abs(np.mean(ratio, axis=0)) <= Z * math.sqrt(o.mean_variance(n) / runs))
    assert np.all(np.abs(np.mean(scaled, axis=0))
                  <= Z * math.sqrt(o.scaled_mean_variance(n) / runs))


def test_pm_at_the_worst_case_has_exactly_the_stated_variances() -> None:
    # half the t_j at -1, half at +1: PM's per-report variance is at its maximum and so
    # is the population variance S^2 = n/(n-1) · 1 of the sampling term, so the worst-case
    # formulas are exact (the ratio one given n_j, the scaled one unconditionally).
    o, n, runs = make(epsilon=1.0, dimensions=3), 3_000, 300
    x = np.where(np.arange(n)[:, None] % 2 == 0, 1.0, -1.0) * np.ones((1, 3))
    rng = np.random.default_rng(2)
    states = [o.aggregate(o.perturb_vectors(x, rng=rng)) for _ in range(runs)]
    ratio = np.array([o.means(s) for s in states])
    scaled = np.array([o.scaled_means(s) for s in states])
    cond = np.mean([o.mean_variances(s) for s in states], axis=0)
    tol = Z * math.sqrt(2 / (runs - 1))
    assert np.all(np.abs(ratio.var(axis=0, ddof=1) / cond - 1) <= tol)
    assert np.all(np.abs(scaled.var(axis=0, ddof=1) / o.scaled_mean_variance(n) - 1) <= tol)
    # with every t = 1 (no spread) the ratio form removes the noise of n_j that the
    # scaled form keeps: (d/k - 1) t^2 / n of it
    gap = o.scaled_mean_variance(n) - o.attribute_mean_variance("x0", n, spread=0.0)
    assert gap == pytest.approx((3 - 1) / n, rel=1e-3)


def test_sample_auto_is_algorithm_4s_k() -> None:
    assert recommended_sample(1.0, 5) == 1 and recommended_sample(7.5, 5) == 3
    assert make(epsilon=7.5, dimensions=5, sample="auto").sample == 3
    spec = make(epsilon=7.5, dimensions=5, sample="auto").spec
    assert spec["sample"] == 3 and ldpcore.make_oracle(**spec).sample == 3


def test_a_sampled_dimension_gets_epsilon_over_k() -> None:
    o = make(epsilon=3.0, dimensions=6, sample=3, base="duchi")
    assert {o.attribute(a).epsilon for a in o.attribute_names} == {1.0}


@pytest.mark.parametrize("kw,match", [
    ({"epsilon": 1.0}, "needs dimensions"),
    ({"epsilon": 1.0, "dimensions": 65}, r"dimensions must be .*\[1, 64\]"),
    ({"epsilon": 1.0, "dimensions": 3, "base": "sw"}, "base must be one of"),
    ({"epsilon": 1.0, "dimensions": 3, "sample": 4}, r"sample must be .*\[1, 3\]"),
])
def test_bad_vector_parameters_are_parameter_errors(kw: dict[str, object], match: str) -> None:
    with pytest.raises(ParameterError, match=match):
        ldpcore.make_oracle("vector", **kw)


def test_vectors_of_the_wrong_shape_or_not_finite_are_refused() -> None:
    o = make(epsilon=1.0, dimensions=3)
    with pytest.raises(ParameterError, match=r"\(n, 3\)"):
        o.perturb_vectors(np.zeros((2, 4)))
    with pytest.raises(ParameterError, match="finite"):
        o.perturb_vectors([[0.0, np.nan, 0.0]])
