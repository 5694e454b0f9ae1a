"""Piecewise Mechanism and Duchi et al.: unbiased means, exact variances, privacy."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

import ldpcore
from ldpcore.audit import audit
from ldpcore.base import Reports
from ldpcore.errors import ParameterError
from ldpcore.numeric import Duchi, PiecewiseMechanism


def _pm_var(eps: float, t: float) -> float:
    h = math.exp(eps / 2)
    return t * t / (h - 1) + (h + 3) / (3 * (h - 1) ** 2)


@pytest.mark.parametrize("t", [-1.0, 0.0, 0.4, 1.0])
def test_pm_report_is_unbiased_with_the_papers_variance(t: float) -> None:
    o = ldpcore.make_oracle("pm", epsilon=1.0, bins=2)
    assert isinstance(o, PiecewiseMechanism)
    n = 400_000
    y = o.perturb_t(np.full(n, t), np.random.default_rng(17))
    var = _pm_var(1.0, t)
    assert np.all(np.abs(y) <= o.C + 1e-12)
    assert abs(y.mean() - t) < 4 * math.sqrt(var / n)
    # sample variance vs the formula: its SE is about var * sqrt(2/n) (tails are bounded)
    assert abs(y.var() - var) < 6 * var * math.sqrt(2 / n) + 0.01 * var


@pytest.mark.parametrize("mech", ["pm", "duchi"])
def test_mean_is_unbiased_and_within_the_worst_case_variance(mech: str) -> None:
    o = ldpcore.make_oracle(mech, epsilon=1.0, bins=100, low=-5.0, high=5.0)
    rng = np.random.default_rng(23)
    x = rng.normal(1.0, 1.5, 5_000).clip(-5, 5)
    bins = o.to_bins(x)
    target = float(o.bin_centers()[bins].mean())
    runs = 400
    means = np.array([o.mean(o.aggregate(o.perturb(bins, rng=rng))) for _ in range(runs)])
    bound = o.mean_variance(bins.size)
    assert abs(means.mean() - target) < 4 * math.sqrt(bound / runs)
    assert means.var(ddof=1) <= bound * stats.chi2.ppf(0.999, runs - 1) / (runs - 1)
    # the bound is not vacuous: the observed variance is of its order
    assert means.var(ddof=1) > 0.2 * bound


def test_pm_beats_duchi_at_large_epsilon_and_loses_at_small() -> None:
    # Wang et al. 2019, Section III: PM's worst-case variance is below Duchi's for ε > 1.29.
    for eps, pm_better in ((0.5, False), (2.0, True), (4.0, True)):
        pm = ldpcore.make_oracle("pm", epsilon=eps, bins=2)
        du = ldpcore.make_oracle("duchi", epsilon=eps, bins=2)
        assert (pm.mean_variance(1000) < du.mean_variance(1000)) is pm_better


def test_mean_only_mechanisms_have_no_frequency_capability() -> None:
    from ldpcore.capabilities import FrequencyEstimates, MeanEstimates
    from ldpcore.registry import make_frequency_oracle

    o = ldpcore.make_oracle("duchi", epsilon=1.0, bins=4)
    assert isinstance(o, Duchi) and isinstance(o, MeanEstimates)
    assert not isinstance(o, FrequencyEstimates) and not hasattr(o, "estimate")
    with pytest.raises(ParameterError, match="does not estimate frequencies"):
        make_frequency_oracle("pm", epsilon=1.0, bins=4)
    with pytest.raises(ParameterError, match="bins"):
        ldpcore.make_oracle("pm", epsilon=1.0)


def test_pm_state_is_additive() -> None:
    o = ldpcore.make_oracle("pm", epsilon=1.0, bins=8)
    a = o.aggregate(o.perturb(np.arange(8), rng=1))
    b = o.aggregate(o.perturb(np.arange(8)[::-1], rng=2))
    both = o.aggregate(Reports.concat([o.perturb(np.arange(8), rng=1),
                                       o.perturb(np.arange(8)[::-1], rng=2)]))
    assert a + b == both


def _t_perturb(o: PiecewiseMechanism | Duchi, buckets: int):  # type: ignore[no-untyped-def]
    def perturb(values: np.ndarray, rng: np.random.Generator) -> Reports:
        t = values.astype(float) - 1.0  # inputs -1, 0, 1 exactly
        if isinstance(o, PiecewiseMechanism):
            y = o.perturb_t(t, rng)
            col = np.minimum(((y + o.C) / (2 * o.C) * buckets).astype(np.int64), buckets - 1)
        else:
            e = math.exp(o.epsilon)
            col = (rng.random(t.size) < ((e - 1) * t + e + 1) / (2 * (e + 1))).astype(np.int64)
        return Reports(o.mechanism, o.fingerprint, {"y": col.astype(np.uint32)})
    return perturb


@pytest.mark.parametrize("mech", ["pm", "duchi"])
def test_mechanism_satisfies_its_epsilon_and_spends_it(mech: str) -> None:
    o = ldpcore.make_oracle(mech, epsilon=1.0, bins=3)
    result = audit(_t_perturb(o, 12), epsilon=1.0, domain_size=3, trials=60_000, seed=1)
    assert not result.violated and result.tight, result


@pytest.mark.parametrize("mech", ["pm", "duchi"])
def test_audit_catches_the_mechanism_at_twice_epsilon(mech: str) -> None:
    o = ldpcore.make_oracle(mech, epsilon=2.0, bins=3)
    result = audit(_t_perturb(o, 12), epsilon=1.0, domain_size=3, trials=60_000, seed=2)
    assert result.violated, result


@pytest.mark.parametrize("mech", ["pm", "duchi"])
def test_device_path_with_bin_jitter_is_within_epsilon(mech: str) -> None:
    o = ldpcore.make_oracle(mech, epsilon=1.0, bins=3)

    def perturb(values: np.ndarray, rng: np.random.Generator) -> Reports:
        rep = o.perturb(values, rng=rng)
        if mech == "pm":  # coarsen the fixed-point report (post-processing) for counting
            y = rep.columns["y"].astype(np.int64) * 12 // (1 << 16)
            return Reports("pm", o.fingerprint, {"y": np.minimum(y, 11).astype(np.uint32)})
        return rep

    result = audit(perturb, epsilon=1.0, domain_size=3, trials=60_000, seed=3)
    assert not result.violated, result


@pytest.mark.parametrize("mech", ["sw", "pm", "duchi"])
def test_reports_round_trip_through_the_wire_format(mech: str) -> None:
    o = ldpcore.make_oracle(mech, epsilon=1.0, bins=16, low=0.0, high=8.0)
    rep = o.perturb(np.arange(16).repeat(50), rng=3)
    back = ldpcore.wire.decode(o, ldpcore.wire.encode(rep))
    assert back == rep
    assert o.aggregate(back) == o.aggregate(rep)
