"""Square Wave: the channel, EM/EMS reconstruction, the unbiased mean, quantiles, privacy."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from scipy import stats

import ldpcore
from ldpcore.audit import audit
from ldpcore.base import Reports
from ldpcore.errors import ParameterError
from ldpcore.numeric import SquareWave, ks_distance, sw_transition_matrix, wasserstein_distance
from ldpcore.numeric.sw import sw_b


def _sw(**kw: object) -> SquareWave:
    params = {"epsilon": 1.0, "bins": 32, **kw}
    o = ldpcore.make_oracle("sw", **params)
    assert isinstance(o, SquareWave)
    return o


def test_b_follows_the_slides_formula_and_limits() -> None:
    for eps in (0.1, 0.5, 1.0, 2.0, 4.0):
        e = math.exp(eps)
        assert sw_b(eps) == pytest.approx((eps * e - e + 1) / (2 * e * (e - 1 - eps)))
    assert sw_b(1e-6) == pytest.approx(0.5, abs=1e-5)
    assert sw_b(30.0) < 1e-10
    o = _sw(epsilon=1.0)
    assert o.p / o.q == pytest.approx(math.e)
    assert o.q * (1 + 2 * o.b) + (o.p - o.q) * 2 * o.b == pytest.approx(1.0)  # a density


def test_reports_of_one_value_follow_the_square_wave_density() -> None:
    o = _sw(epsilon=1.0, out_bins=40)
    rng = np.random.default_rng(11)
    n = 200_000
    idx = o.perturb_unit(np.full(n, 0.3), rng)
    # expected bucket probabilities for the point value v = 0.3
    edges = np.linspace(-o.b, 1 + o.b, o.out_bins + 1)
    overlap = np.clip(np.minimum(edges[1:], 0.3 + o.b) - np.maximum(edges[:-1], 0.3 - o.b), 0, None)
    expected = o.q * (edges[1] - edges[0]) + (o.p - o.q) * overlap
    assert expected.sum() == pytest.approx(1.0)
    observed = np.bincount(idx, minlength=o.out_bins)
    chi2 = stats.chisquare(observed, expected * n)
    assert chi2.pvalue > 1e-3


def test_transition_matrix_matches_perturbation_of_binned_values() -> None:
    o = _sw(epsilon=2.0, bins=8, out_bins=24)
    m = o.matrix()
    assert m.shape == (24, 8)
    np.testing.assert_allclose(m.sum(axis=0), 1.0)
    rng = np.random.default_rng(5)
    n = 100_000
    for i in (0, 3, 7):
        rep = o.perturb(np.full(n, i), rng=rng)
        observed = np.bincount(rep.columns["y"], minlength=24)
        assert stats.chisquare(observed, m[:, i] * n).pvalue > 1e-3


def test_matrix_columns_are_the_average_of_point_channels() -> None:
    p, q, b, bins, out = 0.7, 0.2, 0.25, 4, 10
    m = sw_transition_matrix(p, q, b, bins, out)
    edges = np.linspace(-b, 1 + b, out + 1)
    for i in range(bins):  # brute force: 20,000 values spread over bin i
        v = (i + (np.arange(20_000) + 0.5) / 20_000) / bins
        ov = np.clip(np.minimum(edges[1:, None], v + b) - np.maximum(edges[:-1, None], v - b),
                     0, None)
        col = (q * (edges[1] - edges[0]) + (p - q) * ov).mean(axis=1)
        np.testing.assert_allclose(m[:, i], col / col.sum(), atol=1e-4)


def test_unbiased_estimate_and_its_variance() -> None:
    o = _sw(epsilon=2.0, bins=6, out_bins=12)
    truth = np.array([0.05, 0.1, 0.4, 0.25, 0.15, 0.05])
    n, runs = 20_000, 300
    rng = np.random.default_rng(21)
    values = np.repeat(np.arange(6), (truth * n).astype(int))
    ests = np.array([o.estimate(o.aggregate(o.perturb(values, rng=rng))) for _ in range(runs)])
    var = o.variance(n)
    # unbiased: the mean of the runs sits within 4 standard errors of the truth
    np.testing.assert_array_less(np.abs(ests.mean(0) - truth), 4 * math.sqrt(var / runs))
    # variance(n) is the uniform-distribution value of the worst bin: same order as observed
    assert 0.3 * var < ests.var(0).max() < 2.0 * var


def test_mean_is_unbiased_with_variance_below_the_bound() -> None:
    o = _sw(epsilon=1.0, bins=50, low=10.0, high=20.0)
    rng = np.random.default_rng(3)
    n, runs = 10_000, 200
    x = rng.beta(5, 2, n) * 10 + 10
    bins = o.to_bins(x)
    binned_mean = float(o.bin_centers()[bins].mean())  # jitter is uniform in the bin
    means = np.array([o.mean(o.aggregate(o.perturb(bins, rng=rng))) for _ in range(runs)])
    bound = o.mean_variance(n)
    assert abs(means.mean() - binned_mean) < 4 * math.sqrt(bound / runs)
    chi_hi = stats.chi2.ppf(0.999, runs - 1) / (runs - 1)
    assert means.var(ddof=1) <= bound * chi_hi


@pytest.mark.slow
@pytest.mark.parametrize("eps", [1.0, 2.0])
def test_ems_beats_em_beats_the_raw_inverse_on_a_smooth_distribution(eps: float) -> None:
    # Li et al. 2020, Section 6: run to convergence, EM fits the noise, smoothing does not;
    # the raw inverse of the channel is useless.
    o_ems = _sw(epsilon=eps, bins=256)
    o_em = _sw(epsilon=eps, bins=256, smoothing=False)
    rng = np.random.default_rng(8)
    x = rng.beta(5, 2, 100_000)
    bins = o_ems.to_bins(x)
    truth = np.bincount(bins, minlength=256) / bins.size
    rep = o_ems.perturb(bins, rng=rng)
    st = o_ems.aggregate(rep)
    st_em = o_em.aggregate(Reports("sw", o_em.fingerprint, rep.columns))
    ems, em = o_ems.distribution(st), o_em.distribution(st_em)
    raw = np.clip(o_ems.estimate(st), 0, None)
    w = [wasserstein_distance(truth, e, bin_width=1 / 256) for e in (ems, em, raw)]
    assert w[0] < w[1] < w[2]
    assert w[0] < 0.01 and ks_distance(truth, ems) < 0.03
    assert ems.sum() == pytest.approx(1.0) and np.all(ems >= 0)


def test_quantiles_are_monotone_values_close_to_the_truth() -> None:
    o = _sw(epsilon=2.0, bins=64, low=0.0, high=100.0)
    rng = np.random.default_rng(9)
    x = rng.beta(2, 5, 200_000) * 100
    st = o.aggregate(o.perturb(o.to_bins(x), rng=rng))
    qs = [0.1, 0.25, 0.5, 0.75, 0.9]
    est = [o.quantile(st, q) for q in qs]
    assert est == sorted(est) and all(0 <= v <= 100 for v in est)
    true = np.quantile(x, qs)
    # quantile error |F(x̂_q) - q| (Li et al.'s metric), F the empirical CDF
    qerr = [abs(float(np.mean(x <= e)) - q) for e, q in zip(est, qs, strict=True)]
    assert max(qerr) < 0.03, (est, true)
    assert o.cdf(st)[-1] == pytest.approx(1.0)


@pytest.mark.parametrize(("kw", "named"), [
    ({"bins": None}, "bins"), ({"bins": 1}, "bins"), ({"low": 1.0, "high": 1.0}, "high"),
    ({"out_bins": 1}, "out_bins"), ({"smoothing": "yes"}, "smoothing"),
    ({"epsilon": 0.0}, "epsilon"), ({"b": -1.0}, "b"),
])
def test_bad_parameters_are_refused_naming_them(kw: dict[str, object], named: str) -> None:
    params: dict[str, object] = {"epsilon": 1.0, "bins": 8, **kw}
    if params["bins"] is None:
        del params["bins"]
    with pytest.raises(ParameterError, match=named):
        ldpcore.make_oracle("sw", **params)


def _unit_audit_perturb(o: SquareWave):  # type: ignore[no-untyped-def]
    def perturb(values: np.ndarray, rng: np.random.Generator) -> Reports:
        # exact values 0, 0.5, 1 (no bin jitter): the likelihood ratio can reach e^ε
        idx = o.perturb_unit(values / 2.0, rng)
        return Reports("sw", o.fingerprint, {"y": idx.astype(np.uint16)})
    return perturb


def test_square_wave_satisfies_its_epsilon_and_spends_it() -> None:
    o = _sw(epsilon=1.0, out_bins=12)
    result = audit(_unit_audit_perturb(o), epsilon=1.0, domain_size=3, trials=60_000, seed=1)
    assert not result.violated and result.tight, result


def test_audit_catches_square_wave_at_twice_epsilon() -> None:
    o = _sw(epsilon=2.0, out_bins=12)
    result = audit(_unit_audit_perturb(o), epsilon=1.0, domain_size=3, trials=60_000, seed=2)
    assert result.violated, result


def test_binned_perturbation_is_also_within_epsilon() -> None:
    o = _sw(epsilon=1.0, bins=3, out_bins=12)
    result = audit(o.perturb, epsilon=1.0, domain_size=3, trials=60_000, seed=3)
    assert not result.violated, result


def test_interval_collections_hand_their_interval_to_numeric_oracles() -> None:
    from ldpcore.collection import CollectionSpec

    spec = CollectionSpec.from_dict({
        "id": "minutes", "oracle": {"mechanism": "sw", "epsilon": 1.0},
        "domain": {"kind": "interval", "low": 0.0, "high": 60.0, "bins": 128}})
    o = spec.oracle()
    assert (o.low, o.high, o.domain_size) == (0.0, 60.0, 128)
    assert spec.oracle_spec["low"] == 0.0 and spec.oracle_spec["high"] == 60.0
    with pytest.raises(ParameterError, match="interval domain"):
        CollectionSpec.from_dict({"id": "c", "oracle": {"mechanism": "pm", "epsilon": 1.0},
                                  "domain": {"kind": "categories", "labels": ["a", "b"]}})
    with pytest.raises(ParameterError, match="oracle.low"):
        CollectionSpec.from_dict({"id": "c", "oracle": {"mechanism": "sw", "epsilon": 1.0,
                                                        "low": 5.0},
                                  "domain": {"kind": "interval", "low": 0.0, "high": 1.0,
                                             "bins": 4}})


@pytest.fixture
def em_steps(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """EM/EMS steps taken (``em._em_step`` calls), counted into the one entry."""
    from ldpcore.numeric import em

    calls = [0]
    step = em._em_step

    def counted(*a: object, **k: object) -> object:
        calls[0] += 1
        return step(*a, **k)  # type: ignore[arg-type]

    monkeypatch.setattr(em, "_em_step", counted)
    return calls


def _smooth_case(bins: int) -> tuple[Any, np.ndarray, np.ndarray]:
    """A Square Wave oracle of ``bins`` bins, a smooth truth and the channel matrix."""
    o = ldpcore.make_oracle("sw", epsilon=1.0, bins=bins, low=0.0, high=1.0)
    x = (np.arange(bins) + 0.5) / bins
    return o, x * (1 - x) ** 4 / (x * (1 - x) ** 4).sum(), o.matrix()


@pytest.mark.parametrize("bins", [32, 256])
def test_accelerated_ems_reaches_the_plain_fixed_point_in_fewer_steps(
        bins: int, em_steps: list[int]) -> None:
    from ldpcore.numeric import em

    o, truth, m = _smooth_case(bins)
    c = o.sample_state(truth, 200_000, rng=4).counts.astype(float)
    em_steps[0] = 0
    plain = em.em_reconstruct(m, c, accelerate=False)
    slow, em_steps[0] = em_steps[0], 0
    fast = em.em_reconstruct(m, c)
    fast_steps = em_steps[0]
    warm = em.em_reconstruct(m, c + o.sample_state(truth, 2000, rng=5).counts, start=fast)

    def ll(v: np.ndarray) -> float:
        return float(c @ np.log(m @ v))

    assert fast_steps * 2 < slow  # at least 2x fewer EM steps (4-5x at 1,024 bins)
    assert 0.5 * np.abs(fast - plain).sum() < 0.01 and ll(fast) >= ll(plain) - 1e-6 * c.sum()
    assert 0.5 * np.abs(warm - fast).sum() < 0.01


def test_warm_started_ems_along_a_chain_of_flushes_stays_at_the_cold_answer(
        em_steps: list[int]) -> None:
    # Under a live stream each flush's reconstruction starts from the previous one: it
    # must stay within the stopping rule's distance of a cold start (TV < 0.01, as above)
    # however many flushes are chained, and take a few steps where a cold start takes ~130.
    from ldpcore.numeric import em

    o, truth, m = _smooth_case(256)
    c = o.sample_state(truth, 200_000, rng=4).counts.astype(float)
    warm = em.em_reconstruct(m, c)
    warm_steps = []
    for k in range(10):
        c = c + o.sample_state(truth, 500, rng=10 + k).counts
        em_steps[0] = 0
        warm = em.em_reconstruct(m, c, start=warm)
        warm_steps.append(em_steps[0])
    em_steps[0] = 0
    cold = em.em_reconstruct(m, c)
    cold_steps = em_steps[0]
    assert 0.5 * np.abs(warm - cold).sum() < 0.01
    # a few SQUAREM rounds (4 steps each), not ~20 steps lowering tails the start lifted
    assert sorted(warm_steps)[len(warm_steps) // 2] * 10 < cold_steps, (warm_steps, cold_steps)
