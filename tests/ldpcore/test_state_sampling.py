"""sample_state: a state distributed exactly as aggregate(perturb(values)), without reports."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

import ldpcore
from ldpcore._state_sampling import hrr_cell_probs, local_hashing_cell_probs
from ldpcore._transforms import hadamard_sign


def skewed(d: int, seed: int = 3) -> np.ndarray:
    return np.asarray(np.random.default_rng(seed).dirichlet(np.full(d, 0.4)))


# ---- the output distributions are exact ------------------------------------------------------

def test_hrr_cell_probabilities_match_the_mechanism_definition() -> None:
    o = ldpcore.make_oracle("hrr", epsilon=1.3, domain_size=12)
    pi = skewed(12)
    j = np.arange(o.D)[:, None]
    negative = hadamard_sign(j, np.arange(12)[None, :]) < 0  # true bit b = 1 encodes -1
    brute = np.stack([((~negative) * o.p + negative * (1 - o.p)) @ pi,
                      (negative * o.p + (~negative) * (1 - o.p)) @ pi], axis=1) / o.D
    np.testing.assert_allclose(hrr_cell_probs(pi, o.p), brute, atol=1e-15)


@pytest.mark.parametrize(("eps", "d"), [(0.3, 50), (1.0, 20), (2.5, 30), (4.0, 200)])
def test_local_hashing_cell_probabilities_match_the_hash_family(eps: float, d: int) -> None:
    o = ldpcore.make_oracle("olh", epsilon=eps, domain_size=d)
    pi = skewed(d)
    h = o.hash_values(np.arange(o.n_hashes)[:, None], np.arange(d)[None, :])  # type: ignore
    brute = np.stack([((h == t) * o.p + (h != t) * o.q) @ pi for t in range(o.g)],  # type: ignore
                     axis=1) / o.n_hashes  # type: ignore[attr-defined]
    np.testing.assert_allclose(local_hashing_cell_probs(pi, o.g, o.r, o.p), brute,  # type: ignore
                               atol=1e-15)


@pytest.mark.parametrize("d", [16, 13])
def test_haar_cell_probabilities_match_the_mechanism_definition(d: int) -> None:
    o = ldpcore.make_oracle("haar", epsilon=0.8, domain_size=d)
    pi = skewed(d)
    brute = np.zeros(int(o._offsets[-1]))  # type: ignore[attr-defined]
    x = np.arange(d)
    for lv in range(1, o.height + 1):  # type: ignore[attr-defined]
        width = o.padded >> lv  # type: ignore[attr-defined]
        j = np.arange(width)[:, None]
        b0 = ((hadamard_sign(j, (x >> lv)[None, :]) < 0) ^ (((x >> (lv - 1)) & 1) == 1)[None, :])
        for b in (0, 1):
            keep = np.where(b0 == b, o.p, 1 - o.p)  # type: ignore[attr-defined]
            cells = o._offsets[lv - 1] + np.arange(width) * 2 + b  # type: ignore[attr-defined]
            brute[cells] = keep @ pi / width / o.height  # type: ignore[attr-defined]
    np.testing.assert_allclose(o._cell_probs(pi), brute, atol=1e-15)  # type: ignore


# ---- sampled states behave like real ones ------------------------------------------------------

def compare_estimates(o: object, stat: Callable[[ldpcore.State], np.ndarray],
                      dist: np.ndarray, n: int, runs: int) -> tuple[float, np.ndarray]:
    """Largest |z| of the mean difference and the variance ratios (sampled / real)."""
    rng = np.random.default_rng(11)
    d = dist.size
    real = np.array([stat(o.aggregate(o.perturb(rng.choice(d, size=n, p=dist), rng=rng)))  # type: ignore
                     for _ in range(runs)])
    sampled = np.array([stat(o.sample_state(dist, n, rng)) for _ in range(runs)])  # type: ignore
    va, vb = real.var(axis=0, ddof=1), sampled.var(axis=0, ddof=1)
    z = (real.mean(axis=0) - sampled.mean(axis=0)) / np.sqrt((va + vb) / runs)
    return float(np.abs(z).max()), vb / va


SAMPLER_CASES = [("hh", {"base": "hrr", "fanout": 4}), ("hh", {"base": "olh", "fanout": 4}),
                 ("hh", {"base": "oue", "fanout": 4}), ("hh", {"base": "grr", "fanout": 4}),
                 ("haar", {})]


@pytest.mark.slow
@pytest.mark.parametrize(("mech", "params"), SAMPLER_CASES,
                         ids=[f"{m}-{p.get('base', '')}" for m, p in SAMPLER_CASES])
def test_estimates_from_sampled_states_match_real_ones_in_mean_and_variance(
        mech: str, params: dict) -> None:
    d, n, runs = 60, 2000, 250
    o = ldpcore.make_oracle(mech, epsilon=1.0, domain_size=d, **params)
    points = np.arange(4, d, 8)

    def stat(st: ldpcore.State) -> np.ndarray:
        return np.concatenate([o.cdf(st)[points], o.leaves(st)[points],  # type: ignore
                               o.cdf(st, method="consistent")[points]])  # type: ignore

    zmax, ratio = compare_estimates(o, stat, skewed(d), n, runs)
    # 24 statistics: under equality each z is ~N(0, 1); 4 bounds the max at p ≈ 1.5e-3.
    assert zmax < 4.0
    # log of a ratio of two sample variances has s.d. ≈ sqrt(4/(runs-1)) = 0.127;
    # 4 s.d. per statistic, and their mean within 4 s.d. of the mean of 24 (≥ 0.127/√24).
    sd = np.sqrt(4 / (runs - 1))
    assert np.all(np.abs(np.log(ratio)) < 4 * sd)
    assert abs(np.log(ratio).mean()) < 4 * sd / np.sqrt(ratio.size) * 2  # correlated: ×2


def test_sampled_hh_leaf_variance_is_the_analytic_one() -> None:
    # Without constrained inference, hh's leaf variance is exact (HierarchicalHistogram.variance).
    d, n, runs = 64, 5000, 400
    o = ldpcore.make_oracle("hh", epsilon=1.0, domain_size=d, fanout=4, consistency=False)
    dist = skewed(d)
    rng = np.random.default_rng(4)
    est = np.array([o.estimate(o.sample_state(dist, n, rng)) for _ in range(runs)])
    want = np.array([o.variance(n, float(f)) for f in dist])
    got = est.var(axis=0, ddof=1)
    # Per leaf, var/analytic has s.d. sqrt(2/(runs-1)) = 0.071; the mean over 64 leaves
    # (positively correlated through the levels) is held to 4 of the per-leaf s.d.
    assert abs((got / want).mean() - 1) < 4 * np.sqrt(2 / (runs - 1)) / 2
    assert np.all(np.abs(got / want - 1) < 5 * np.sqrt(2 / (runs - 1)))
    z = (est.mean(axis=0) - dist) / np.sqrt(want / runs)
    assert np.abs(z).max() < 4.5  # 64 leaves


# ---- contract -----------------------------------------------------------------------------------

@pytest.mark.parametrize(("mech", "params"), [("hh", {}), ("hh", {"base": "olh"}),
                                              ("hh", {"base": "oue"}), ("haar", {})])
def test_sampled_states_have_the_state_layout_and_any_n_is_fast(mech: str, params: dict) -> None:
    o = ldpcore.make_oracle(mech, epsilon=1.0, domain_size=300, **params)
    st = o.sample_state(skewed(300), 10**12, rng=1)
    assert st.fingerprint == o.fingerprint and st.counts.shape == o.state_shape
    assert st.n == 10**12 == int(st.counts[-o.height:].sum())  # type: ignore[attr-defined]
    assert st.counts.min() >= 0
    assert o.sample_state(skewed(300), 10**6, rng=7) == o.sample_state(skewed(300), 10**6, rng=7)
    empty = o.sample_state(skewed(300), 0, rng=1)
    assert empty == o.new_state()
    o.cdf(st, method="consistent")  # estimable


@pytest.mark.parametrize("mech", ["hh", "haar"])
def test_sample_state_validates_its_arguments(mech: str) -> None:
    o = ldpcore.make_oracle(mech, epsilon=1.0, domain_size=8)
    good = np.full(8, 1 / 8)
    for bad in (np.full(7, 1 / 7), np.array([1.5, -0.5] + [0.0] * 6), np.full(8, 0.2),
                np.array([np.nan] * 8)):
        with pytest.raises(ldpcore.ParameterError, match="distribution"):
            o.sample_state(bad, 10)  # type: ignore[attr-defined]
    with pytest.raises(ldpcore.ParameterError, match="n"):
        o.sample_state(good, -1)  # type: ignore[attr-defined]
    with pytest.raises(ldpcore.ParameterError, match="rng"):
        o.sample_state(good, 10, rng="x")  # type: ignore[attr-defined]
