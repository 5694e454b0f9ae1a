"""Unbiasedness and analytic variance of every frequency oracle, with fixed seeds.

The same skewed population of n reports is perturbed R times with independent
seeds.  For every value v:

* unbiasedness: the mean of the R estimates lies within z·sqrt(Var/R) of the
  true f_v, with z the two-sided normal quantile Bonferroni-corrected over the
  d values at family-wise level 1e-3;
* variance: the empirical variance over R runs, pooled over the zero-frequency
  values and over all values, is within ±15 % of ``variance(n, f_v)`` summed the
  same way.  With R = 300 a single sample variance has relative s.d.
  sqrt(2/(R-1)) ≈ 8.2 %; pooling over ≥ 3 values (weakly correlated) brings it to
  ≤ 4.7 %, so ±15 % is a > 3σ band that still catches a wrong formula (a missing
  f-term or a factor 2 is > 20 %).
"""

from __future__ import annotations

from statistics import NormalDist

import numpy as np
import pytest

import ldpcore

from .oracle_cases import NOT_F_ONLY_VARIANCE, STAT_PARAMS, available, make

R = 300
N = 4000
CASES = [(1.0, 16), (2.0, 37), (0.5, 100), (4.0, 8)]  # ε=4: the f-terms dominate


def population(d: int, n: int) -> np.ndarray:
    """A Zipf(1.2)-shaped population over the lower half of [0, d); the upper half is empty."""
    half = d // 2
    w = 1.0 / np.arange(1, half + 1) ** 1.2
    counts = np.floor(w / w.sum() * n).astype(int)
    counts[0] += n - counts.sum()
    return np.repeat(np.arange(half), counts)


@pytest.mark.slow
@pytest.mark.parametrize("mech", [m for m in available() if m not in NOT_F_ONLY_VARIANCE])
@pytest.mark.parametrize(("eps", "d"), CASES, ids=[f"eps{e}-d{d}" for e, d in CASES])
def test_estimates_are_unbiased_with_the_analytic_variance(mech: str, eps: float, d: int) -> None:
    oracle = make(mech, epsilon=eps, domain_size=d, **STAT_PARAMS.get(mech, {}))
    values = population(d, N)
    f = np.bincount(values, minlength=d) / N
    rng = np.random.default_rng(20261122)
    est = np.empty((R, d))
    for r in range(R):
        est[r] = oracle.estimate(oracle.aggregate(oracle.perturb(values, rng=rng)))

    var = np.array([oracle.variance(N, float(fv)) for fv in f])
    z = NormalDist().inv_cdf(1 - 1e-3 / (2 * d))
    bias = np.abs(est.mean(axis=0) - f)
    worst = int(np.argmax(bias / np.sqrt(var / R)))
    assert np.all(bias <= z * np.sqrt(var / R)), (
        f"value {worst}: mean {est.mean(axis=0)[worst]:.5f} vs f {f[worst]:.5f}")

    emp = est.var(axis=0, ddof=1)
    zero = f == 0
    assert emp[zero].sum() / var[zero].sum() == pytest.approx(1.0, abs=0.15)
    assert emp.sum() / var.sum() == pytest.approx(1.0, abs=0.15)


def test_population_is_skewed_with_empty_half() -> None:
    f = np.bincount(population(16, N), minlength=16) / N
    assert f.sum() == pytest.approx(1.0)
    assert np.all(f[8:] == 0) and f[0] > 3 * f[7] > 0


def test_the_variance_check_catches_a_wrong_formula() -> None:
    """Negative control: GRR with its variance halved fails the ±15 % band."""
    oracle = ldpcore.make_oracle("grr", epsilon=1.0, domain_size=16)
    values = population(16, N)
    rng = np.random.default_rng(1)
    est = np.stack([oracle.estimate(oracle.aggregate(oracle.perturb(values, rng=rng)))
                    for _ in range(R)])
    f = np.bincount(values, minlength=16) / N
    wrong = np.array([oracle.variance(N, float(fv)) / 2 for fv in f])
    assert est.var(axis=0, ddof=1).sum() / wrong.sum() > 1.15
