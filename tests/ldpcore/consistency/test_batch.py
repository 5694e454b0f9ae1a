"""Each consistency method keeps the promises of Wang et al. (2020), Table I."""

from __future__ import annotations

import numpy as np
import pytest

import ldpcore
from ldpcore.consistency import METHODS

SIGMA2 = 1e-4


@pytest.fixture
def noisy() -> np.ndarray:
    rng = np.random.default_rng(5)
    truth = 1.0 / np.arange(1, 201) ** 1.3
    truth /= truth.sum()
    return truth + rng.normal(0, np.sqrt(SIGMA2), size=truth.size)


def run(est: np.ndarray, method: str) -> np.ndarray:
    return ldpcore.postprocess(est, method, n=10_000, variance=SIGMA2)


NON_NEGATIVE = ["base-pos", "base-cut", "norm-mul", "norm-sub", "norm-cut", "mle-apx", "power",
                "power-ns"]
SUM_TO_ONE = ["norm", "norm-mul", "norm-sub", "mle-apx", "power-ns"]


def test_the_eleven_names_are_exactly_the_papers() -> None:
    assert set(METHODS) == {"base", "base-pos", "post-pos", "base-cut", "norm", "norm-mul",
                            "norm-sub", "norm-cut", "mle-apx", "power", "power-ns"}
    assert ldpcore.POSTPROCESS_METHODS == METHODS


@pytest.mark.parametrize("method", NON_NEGATIVE)
def test_non_negativity(noisy: np.ndarray, method: str) -> None:
    assert run(noisy, method).min() >= 0


@pytest.mark.parametrize("method", SUM_TO_ONE)
def test_sum_to_one(noisy: np.ndarray, method: str) -> None:
    assert run(noisy, method).sum() == pytest.approx(1.0, abs=1e-9)


def test_norm_cut_sums_to_at_most_one_and_only_zeroes_small_values(noisy: np.ndarray) -> None:
    out = run(noisy, "norm-cut")
    assert out.sum() <= 1.0 + 1e-12
    kept = out > 0
    assert np.all(out[kept] == noisy[kept])
    assert noisy[kept].min() >= noisy[~kept].max()


@pytest.mark.parametrize("method", [m for m in METHODS if m != "base"])
def test_order_is_preserved(noisy: np.ndarray, method: str) -> None:
    out = run(noisy, method)
    order = np.argsort(noisy)
    assert np.all(np.diff(out[order]) >= -1e-12), method


def test_norm_sub_is_the_euclidean_simplex_projection(noisy: np.ndarray) -> None:
    """Checked against bisection on the shift δ of max(x + δ, 0) (an independent algorithm)."""
    lo, hi = -1.0, 1.0
    for _ in range(200):
        mid = (lo + hi) / 2
        if np.maximum(noisy + mid, 0).sum() > 1:
            hi = mid
        else:
            lo = mid
    expected = np.maximum(noisy + lo, 0)
    np.testing.assert_allclose(run(noisy, "norm-sub"), expected, atol=1e-12)
    # and it is the closest point: no random simplex point is nearer
    rng = np.random.default_rng(0)
    best = np.sum((run(noisy, "norm-sub") - noisy) ** 2)
    for _ in range(200):
        p = rng.dirichlet(np.ones(noisy.size))
        assert np.sum((p - noisy) ** 2) >= best


def test_mle_apx_approaches_norm_sub_at_large_n() -> None:
    o = ldpcore.make_oracle("oue", epsilon=1.0, domain_size=64)
    values = np.random.default_rng(1).zipf(1.5, size=400_000) % 64
    for n in (400_000,):
        st = o.aggregate(o.perturb(values[:n], rng=2))
        est = o.estimate(st)
        slope = o.variance(n, 1.0) - o.variance(n, 0.0)
        mle = ldpcore.postprocess(est, "mle-apx", n=n, variance=o.variance(n),
                                  variance_slope=slope)
        ns = ldpcore.postprocess(est, "norm-sub")
        assert np.abs(mle - ns).max() < 0.1 * np.sqrt(o.variance(n))
        assert mle.sum() == pytest.approx(1.0)


def test_mle_apx_with_zero_slope_is_norm_sub(noisy: np.ndarray) -> None:
    np.testing.assert_allclose(run(noisy, "mle-apx"), run(noisy, "norm-sub"), atol=1e-12)


def test_post_pos_clips_query_answers_not_the_vector() -> None:
    est = np.array([0.6, 0.5, -0.05, -0.05])
    assert np.array_equal(ldpcore.postprocess(est, "post-pos"), est)
    assert ldpcore.subset_query(est, [2, 3], "post-pos") == 0.0
    assert ldpcore.subset_query(est, [1, 2], "post-pos") == pytest.approx(0.45)
    assert ldpcore.subset_query(est, [2], "base-pos") == 0.0
    assert ldpcore.subset_query(est, [0, 1, 2, 3], "norm-sub") == pytest.approx(1.0)


def test_base_cut_threshold_follows_the_paper() -> None:
    from statistics import NormalDist

    d = 1000
    est = np.linspace(-0.01, 0.05, d)
    t = NormalDist().inv_cdf(1 - 2 / d) * np.sqrt(SIGMA2)
    out = ldpcore.postprocess(est, "base-cut", variance=SIGMA2)
    assert np.all(out[est < t] == 0) and np.all(out[est >= t] == est[est >= t])


def test_guideline_follows_the_papers_conclusion() -> None:
    assert ldpcore.guideline("full") == "base-cut"
    assert ldpcore.guideline("frequent") == "norm"
    assert ldpcore.guideline("set") == "power-ns"
    with pytest.raises(ldpcore.ParameterError, match="task"):
        ldpcore.guideline("everything")


@pytest.mark.parametrize(("args", "kwargs", "match"), [
    (([0.5, 0.5], "nope"), {}, "method"),
    (([0.5, np.nan], "norm"), {}, "finite"),
    (([0.5], "norm"), {}, "1-D"),
    (([0.5, 0.5], "base-cut"), {}, "variance"),
    (([0.5, 0.5], "mle-apx"), {"variance": 0.1}, "n="),
    (([0.5, 0.5], "power"), {"variance": -1.0}, "variance"),
    (([0.5, 0.5], "norm"), {"alpha": 3}, "unknown parameter"),
])
def test_bad_arguments_are_parameter_errors(args: tuple, kwargs: dict, match: str) -> None:
    with pytest.raises(ldpcore.ParameterError, match=match):
        ldpcore.postprocess(*args, **kwargs)


def test_subset_query_validates_indices() -> None:
    with pytest.raises(ldpcore.ParameterError, match="indices"):
        ldpcore.subset_query([0.5, 0.5], [2], "base")
    with pytest.raises(ldpcore.ParameterError, match="distinct"):
        ldpcore.subset_query([0.5, 0.5], [0, 0], "base")


def test_power_rows_equal_the_posterior_mean_computed_plainly() -> None:
    # The vectorised Power (rows grouped by exponent, in-place kernel) against the
    # posterior mean written out row by row from the same fitted prior atoms.
    from ldpcore.consistency.batch import _fit_exponents, _prior_atoms, power_rows

    rng = np.random.default_rng(11)
    d, sigma = 300, 0.01
    truth = 1.0 / np.arange(1, d + 1) ** rng.uniform(0.6, 1.6, size=(40, 1))
    est = truth / truth.sum(axis=1, keepdims=True) + rng.normal(0, sigma, size=(40, d))
    exps = _fit_exponents(est, sigma)
    assert np.unique(exps).size > 3  # several exponent groups are exercised
    want = np.empty_like(est)
    for i, (row, s) in enumerate(zip(est, exps, strict=True)):
        values, logw = _prior_atoms(d, float(s))
        for j, x in enumerate(row):
            w = np.exp(logw - 0.5 * ((x - values) / sigma) ** 2
                       - np.max(logw - 0.5 * ((x - values) / sigma) ** 2))
            want[i, j] = (w * values).sum() / w.sum()
    np.testing.assert_allclose(power_rows(est, variance=sigma**2), want, rtol=1e-9,
                               atol=1e-15)
