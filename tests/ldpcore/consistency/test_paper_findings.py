"""Wang et al. (2020)'s qualitative findings, on Zipf(1.5), d = 1024, n = 10^6, OLH."""

from __future__ import annotations

import numpy as np
import pytest

import ldpcore

D, N = 1024, 1_000_000


def olh_run(eps: float, seed: int) -> tuple[np.ndarray, np.ndarray, ldpcore.FrequencyOracle]:
    rng = np.random.default_rng(seed)
    w = 1.0 / np.arange(1, D + 1) ** 1.5
    values = rng.choice(D, size=N, p=w / w.sum())
    truth = np.bincount(values, minlength=D) / N
    o = ldpcore.make_oracle("olh", epsilon=eps, domain_size=D)
    return truth, o.estimate(o.aggregate(o.perturb(values, rng=rng))), o


def mse(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.mean((a - b) ** 2))


@pytest.fixture(scope="module")
def small_eps() -> tuple[np.ndarray, np.ndarray, ldpcore.FrequencyOracle]:
    return olh_run(0.5, seed=11)


def test_base_pos_about_halves_the_full_domain_mse(small_eps: tuple) -> None:
    truth, est, o = small_eps
    ratio = mse(ldpcore.postprocess(est, "base-pos"), truth) / mse(est, truth)
    # Most values are near 0: clipping removes the negative half of their noise (ratio ≈ 1/2).
    assert 0.35 < ratio < 0.65


def test_norm_sub_cuts_the_mse_by_an_order_of_magnitude_at_small_epsilon(
        small_eps: tuple) -> None:
    truth, est, o = small_eps
    ratio = mse(ldpcore.postprocess(est, "norm-sub"), truth) / mse(est, truth)
    assert ratio < 0.15


@pytest.mark.parametrize("method", ["base-cut", "mle-apx", "power-ns", "norm-cut"])
def test_consistent_methods_beat_base_on_the_full_domain(small_eps: tuple, method: str) -> None:
    truth, est, o = small_eps
    out = ldpcore.postprocess(est, method, n=N, variance=o.variance(N))
    assert mse(out, truth) < 0.5 * mse(est, truth)


@pytest.mark.slow
def test_norm_based_methods_win_on_large_random_subsets(small_eps: tuple) -> None:
    truth, est, o = small_eps
    rng = np.random.default_rng(3)
    subsets = [rng.choice(D, size=D // 2, replace=False) for _ in range(100)]
    err: dict[str, float] = {}
    for method in ("base", "base-pos", "post-pos", "norm", "norm-sub", "power-ns"):
        answers = [ldpcore.subset_query(est, s, method, n=N, variance=o.variance(N))
                   for s in subsets]
        err[method] = float(np.mean([(a - truth[s].sum()) ** 2
                                     for a, s in zip(answers, subsets, strict=True)]))
    best_norm = min(err["norm"], err["norm-sub"], err["power-ns"])
    assert best_norm < 0.5 * min(err["base"], err["post-pos"])
    assert err["base-pos"] > err["base"]  # positive bias accumulates over the set
