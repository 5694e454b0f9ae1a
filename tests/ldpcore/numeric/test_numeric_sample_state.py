"""sample_state of the numeric oracles (Square Wave, Duchi, PM): like aggregate(perturb(...))."""

from __future__ import annotations

import numpy as np
import pytest

import ldpcore


def skewed(d: int) -> np.ndarray:
    return np.asarray(np.random.default_rng(3).dirichlet(np.full(d, 0.5)))


@pytest.mark.slow
@pytest.mark.parametrize("mech", ["sw", "duchi", "pm"])
def test_sampled_states_match_real_ones_in_mean_and_variance(mech: str) -> None:
    d, n, runs = 32, 3000, 300
    o = ldpcore.make_oracle(mech, epsilon=1.0, bins=d, low=0.0, high=10.0, **(
        {"out_bins": 64} if mech == "sw" else {}))
    dist = skewed(d)
    rng = np.random.default_rng(5)

    def stat(st: ldpcore.State) -> np.ndarray:
        parts = [o.mean(st)]  # type: ignore[attr-defined]
        if mech == "sw":
            parts += list(o.estimate(st)[::6])
        return np.array(parts)

    real = np.array([stat(o.aggregate(o.perturb(rng.choice(d, size=n, p=dist), rng=rng)))
                     for _ in range(runs)])
    sampled = np.array([stat(o.sample_state(dist, n, rng)) for _ in range(runs)])  # type: ignore
    va, vb = real.var(axis=0, ddof=1), sampled.var(axis=0, ddof=1)
    z = (real.mean(axis=0) - sampled.mean(axis=0)) / np.sqrt((va + vb) / runs)
    assert np.abs(z).max() < 4.0
    assert np.all(np.abs(np.log(vb / va)) < 4 * np.sqrt(4 / (runs - 1)))
    # The unbiased mean of sampled states centres on the true mean (values uniform in bins).
    true_mean = float(dist @ o.bin_centers())  # type: ignore[attr-defined]
    assert abs(sampled[:, 0].mean() - true_mean) < 4 * np.sqrt(vb[0] / runs)


def test_duchi_sampled_state_is_one_binomial_and_any_n_is_fast() -> None:
    o = ldpcore.make_oracle("duchi", epsilon=0.5, bins=4)
    st = o.sample_state(np.array([0.1, 0.2, 0.3, 0.4]), 10**12, rng=1)  # type: ignore
    assert st.n == 10**12 and st.counts.shape == (1,)
    assert abs(o.mean(st) - 0.625) < 1e-4  # type: ignore[attr-defined]


def test_sw_sample_state_validates_and_handles_zero_reports() -> None:
    o = ldpcore.make_oracle("sw", epsilon=1.0, bins=8)
    assert o.sample_state(np.full(8, 1 / 8), 0) == o.new_state()  # type: ignore[attr-defined]
    with pytest.raises(ldpcore.ParameterError, match="distribution"):
        o.sample_state(np.full(4, 1 / 4), 10)  # type: ignore[attr-defined]


@pytest.mark.parametrize(("eps", "d"), [(0.2, 100), (1.0, 16), (3.0, 3), (1.0, 70_000)])
def test_pm_report_pmf_has_the_mechanisms_exact_mean_and_matches_real_reports(
        eps: float, d: int) -> None:
    o = ldpcore.make_oracle("pm", epsilon=eps, bins=d)
    dist = skewed(d)
    pmf = o.report_pmf(dist)  # type: ignore[attr-defined]
    levels = 2**16
    assert pmf.shape == (levels + 1,) and pmf.min() >= 0 and pmf.sum() == pytest.approx(1)
    # PM is unbiased and the rounding too: E[z] = (E[t] + C) / (2C) · L exactly.
    t_mean = float(dist @ (2 * (np.arange(d) + 0.5) / d - 1))
    want = (t_mean + o.C) / (2 * o.C) * levels  # type: ignore[attr-defined]
    assert float(np.arange(levels + 1) @ pmf) == pytest.approx(want, rel=1e-12)
    # Goodness of fit against 400k real reports, pooled into 128 cells of 512 levels:
    # chi-square with 127 d.f. (mean 127, s.d. 15.9); 5 s.d.
    n = 400_000
    rng = np.random.default_rng(2)
    z = o.perturb(rng.choice(d, size=n, p=dist), rng=rng).columns["y"].astype(np.int64)
    seen = np.bincount(z, minlength=levels + 1)
    expect, got = pmf[:-1].reshape(128, -1).sum(1), seen[:-1].reshape(128, -1).sum(1)
    expect[-1] += pmf[-1]
    got[-1] += seen[-1]
    chi2 = float(((got - n * expect) ** 2 / (n * expect)).sum())
    assert chi2 < 127 + 5 * np.sqrt(2 * 127)
