"""Range queries, prefixes and quantiles of HH, HaarHRR and flat oracles (Cormode et al. 2019)."""

from __future__ import annotations

import numpy as np
import pytest

import ldpcore
from ldpcore.range import FlatRange

D, N, R = 256, 100_000, 30


def cauchy_values(d: int, n: int, seed: int) -> np.ndarray:
    """The paper's workload: Cauchy centred at 0.4·D with height D/10, clipped to [0, D)."""
    rng = np.random.default_rng(seed)
    out = np.empty(0, dtype=np.int64)
    while out.size < n:
        x = np.round(0.4 * d + (d / 10) * rng.standard_cauchy(2 * n)).astype(np.int64)
        out = np.concatenate([out, x[(x >= 0) & (x < d)]])
    return out[:n]


@pytest.fixture(scope="module")
def workload() -> tuple[np.ndarray, np.ndarray, list[tuple[int, int]]]:
    values = cauchy_values(D, N, seed=1)
    truth = np.cumsum(np.bincount(values, minlength=D)) / N
    rng = np.random.default_rng(2)
    ranges = []
    for length in (1, 4, 16, 64, 128, 200):
        for lo in rng.integers(0, D - length + 1, size=8):
            ranges.append((int(lo), int(lo + length - 1)))
    return values, truth, ranges


def true_range(truth: np.ndarray, lo: int, hi: int) -> float:
    return float(truth[hi] - (truth[lo - 1] if lo else 0.0))


def squared_errors(oracle: object, values: np.ndarray, truth: np.ndarray,
                   ranges: list[tuple[int, int]], seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    inner = oracle.oracle if isinstance(oracle, FlatRange) else oracle
    out = np.empty((R, len(ranges)))
    for r in range(R):
        st = inner.aggregate(inner.perturb(values, rng=rng))
        out[r] = [(oracle.range_query(st, lo, hi) - true_range(truth, lo, hi)) ** 2
                  for lo, hi in ranges]
    return out


@pytest.mark.slow
@pytest.mark.parametrize("spec", [
    {"mechanism": "hh", "fanout": 4, "consistency": False},
    {"mechanism": "hh", "fanout": 4, "consistency": True},
    {"mechanism": "hh", "fanout": 8, "consistency": True, "base": "oue"},
    {"mechanism": "haar"},
], ids=["hh4", "hh4-ci", "hh8-ci-oue", "haar"])
def test_range_answers_are_unbiased_and_within_the_analytic_bound(workload: tuple,
                                                                 spec: dict) -> None:
    values, truth, ranges = workload
    oracle = ldpcore.make_oracle(epsilon=1.0, domain_size=D, **spec)
    err = squared_errors(oracle, values, truth, ranges, seed=3)
    bound = np.array([oracle.range_variance(N, lo, hi) for lo, hi in ranges])  # type: ignore
    # Mean squared error over R runs: chi-square-like, relative s.d. sqrt(2/R) ≈ 26 %;
    # the bound must hold for every range up to 2 of those s.d. (a worst-case bound is
    # usually far from tight, so this still has teeth against a wrong constant).
    assert np.all(err.mean(axis=0) <= bound * (1 + 2 * np.sqrt(2 / R)))


@pytest.mark.slow
def test_constrained_inference_never_hurts_and_helps_on_long_ranges(workload: tuple) -> None:
    values, truth, ranges = workload
    plain = ldpcore.make_oracle("hh", epsilon=1.0, domain_size=D, fanout=4, consistency=False)
    ci = ldpcore.make_oracle("hh", epsilon=1.0, domain_size=D, fanout=4, consistency=True)
    # Same seed: the same reports, only the post-processing differs.
    e_plain = squared_errors(plain, values, truth, ranges, seed=5).mean(axis=0)
    e_ci = squared_errors(ci, values, truth, ranges, seed=5).mean(axis=0)
    assert e_ci.sum() < e_plain.sum()
    lengths = np.array([hi - lo + 1 for lo, hi in ranges])
    long = lengths >= 64
    assert e_plain[long].mean() / e_ci[long].mean() > 1.5


@pytest.mark.slow
def test_flat_loses_beyond_short_ranges(workload: tuple) -> None:
    values, truth, ranges = workload
    flat = FlatRange(ldpcore.make_oracle("oue", epsilon=1.0, domain_size=D))
    hh = ldpcore.make_oracle("hh", epsilon=1.0, domain_size=D, fanout=4)
    lengths = np.array([hi - lo + 1 for lo, hi in ranges])
    e_flat = squared_errors(flat, values, truth, ranges, seed=7).mean(axis=0)
    e_hh = squared_errors(hh, values, truth, ranges, seed=7).mean(axis=0)
    assert e_flat[lengths == 1].mean() < e_hh[lengths == 1].mean()
    assert e_flat[lengths >= 64].mean() > 3 * e_hh[lengths >= 64].mean()


def test_prefix_queries_cost_less_than_arbitrary_ranges() -> None:
    o = ldpcore.make_oracle("hh", epsilon=1.0, domain_size=D, fanout=4, consistency=False)
    values = cauchy_values(D, N, seed=9)
    truth = np.cumsum(np.bincount(values, minlength=D)) / N
    rng = np.random.default_rng(10)
    prefix_err, range_err = [], []
    for _ in range(R):
        st = o.aggregate(o.perturb(values, rng=rng))
        cdf = o.cdf(st)
        prefix_err.append(np.mean((cdf - truth) ** 2))
        mids = [(lo, lo + 127) for lo in range(1, 128, 9)]
        range_err.append(np.mean([(o.range_query(st, lo, hi) - true_range(truth, lo, hi)) ** 2
                                  for lo, hi in mids]))
    assert np.mean(prefix_err) < np.mean(range_err)


def test_cdf_agrees_with_range_queries_and_quantiles_find_the_median() -> None:
    values = cauchy_values(D, 400_000, seed=11)
    true_median = int(np.median(values))
    for spec in ({"mechanism": "hh"}, {"mechanism": "haar"}):
        o = ldpcore.make_oracle(epsilon=2.0, domain_size=D, **spec)
        st = o.aggregate(o.perturb(values, rng=12))
        cdf = o.cdf(st)
        assert o.prefix(st, 100) == pytest.approx(cdf[100])
        assert o.range_query(st, 10, 100) == pytest.approx(cdf[100] - cdf[9], abs=1e-9)
        assert abs(o.quantile(st, 0.5) - true_median) <= 3
        assert o.quantile(st, 0.0) <= o.quantile(st, 0.5) <= o.quantile(st, 1.0) <= D - 1


def test_consistent_hh_leaves_sum_to_one_and_nonnegative_option_holds() -> None:
    values = cauchy_values(D, 50_000, seed=13)
    o = ldpcore.make_oracle("hh", epsilon=0.5, domain_size=D, nonnegative=True)
    st = o.aggregate(o.perturb(values, rng=1))
    leaves = o.estimate(st)
    assert leaves.min() >= 0 and leaves.sum() == pytest.approx(1.0)
    nodes = o.node_estimates(st)
    for upper, lower in zip(nodes, nodes[1:], strict=False):
        np.testing.assert_allclose(lower.reshape(-1, o.fanout).sum(axis=1), upper, atol=1e-12)


def test_haar_leaf_variance_is_close_to_its_bound_at_moderate_epsilon() -> None:
    o = ldpcore.make_oracle("haar", epsilon=1.0, domain_size=64)
    values = np.random.default_rng(1).integers(0, 64, 20_000)
    rng = np.random.default_rng(2)
    est = np.stack([o.estimate(o.aggregate(o.perturb(values, rng=rng))) for _ in range(300)])
    ratio = est.var(axis=0, ddof=1).mean() / o.variance(20_000)
    assert 0.75 < ratio < 1.1


def test_large_domains_scale() -> None:
    for spec in ({"mechanism": "hh", "base": "hrr"}, {"mechanism": "haar"},
                 {"mechanism": "hh", "base": "olh", "fanout": 16}):
        o = ldpcore.make_oracle(epsilon=1.0, domain_size=2**16, **spec)
        values = np.random.default_rng(0).integers(0, 2**15, 200_000)
        st = o.aggregate(o.perturb(values, rng=1))
        assert st.counts.size < 64 * 2**16
        assert abs(o.range_query(st, 0, 2**15 - 1) - 1.0) < 5 * o.range_variance(
            st.n, 0, 2**15 - 1) ** 0.5


@pytest.mark.parametrize(("params", "match"), [
    ({"fanout": 1}, "fanout"), ({"base": "hr"}, "base"), ({"consistency": "yes"}, "consistency"),
])
def test_bad_hh_parameters_are_rejected(params: dict, match: str) -> None:
    with pytest.raises(ldpcore.ParameterError, match=match):
        ldpcore.make_oracle("hh", epsilon=1.0, domain_size=100, **params)


def test_bad_range_arguments_are_rejected() -> None:
    o = ldpcore.make_oracle("haar", epsilon=1.0, domain_size=100)
    st = o.aggregate(o.perturb([1, 2, 3], rng=1))
    with pytest.raises(ldpcore.ParameterError, match="lo"):
        o.range_query(st, 5, 4)
    with pytest.raises(ldpcore.ParameterError, match="hi"):
        o.range_query(st, 0, 100)
    with pytest.raises(ldpcore.ParameterError, match="q"):
        o.quantile(st, 1.5)


@pytest.mark.slow
@pytest.mark.parametrize("consistency", [False, True])
@pytest.mark.parametrize(("d", "b"), [(64, 4), (100, 3), (256, 16), (1000, 8)])
def test_cdf_answers_each_prefix_with_the_same_nodes_as_range_query(
        consistency: bool, d: int, b: int) -> None:
    o = ldpcore.make_oracle("hh", epsilon=1.0, domain_size=d, fanout=b,
                            consistency=consistency)
    st = o.aggregate(o.perturb(np.random.default_rng(1).integers(0, d, 20_000), rng=2))
    cdf = o.cdf(st)
    prefixes = np.array([o.range_query(st, 0, x) for x in range(d)])
    np.testing.assert_allclose(cdf, prefixes, atol=1e-12)
    if b ** o.height == d:  # the whole padded domain is the root: exactly 1
        assert cdf[-1] == 1.0


def test_answers_of_one_state_estimate_its_levels_once_and_equal_a_fresh_oracles() -> None:
    # A live API asks range, cdf, quantiles and histogram of each new state: the per-level
    # estimates (a transform per level) are made once per state, never reused for another.
    o = ldpcore.make_oracle("hh", epsilon=1.0, domain_size=D)
    s1 = o.aggregate(o.perturb(cauchy_values(D, 20_000, seed=3), rng=1))
    s2 = s1 + o.aggregate(o.perturb(cauchy_values(D, 2_000, seed=4), rng=2))
    made = []
    levels = o._raw_levels_of

    def counted(state: ldpcore.State) -> list[np.ndarray]:
        made.append(state.n)
        return levels(state)

    o._raw_levels_of = counted  # type: ignore[method-assign]
    for s in (s1, s2):
        got = [o.range_query(s, 3, D // 2), o.range_query(s, 3, D // 2, method="consistent"),
               o.cdf(s), o.cdf(s, "consistent"), o.leaves(s), o.estimate(s)]
        nodes = o.node_estimates(s)
        nodes[0][:] = 7.0  # a caller's copy: the kept nodes stay as they were
        fresh = ldpcore.make_oracle("hh", epsilon=1.0, domain_size=D)
        want = [fresh.range_query(s, 3, D // 2),
                fresh.range_query(s, 3, D // 2, method="consistent"), fresh.cdf(s),
                fresh.cdf(s, "consistent"), fresh.leaves(s), fresh.estimate(s)]
        for a, b in zip([*got, o.cdf(s)], [*want, want[2]], strict=True):
            np.testing.assert_array_equal(a, b)
    assert made == [s1.n, s2.n]


def test_unbiased_cdf_from_kept_decompositions_equals_a_fresh_oracles_bit_for_bit() -> None:
    o = ldpcore.make_oracle("hh", epsilon=1.0, domain_size=100, fanout=3)
    states = [o.aggregate(o.perturb(np.random.default_rng(k).integers(0, 100, 3_000), rng=k))
              for k in (1, 2)]
    for st in states + states:  # the second time from the kept decompositions
        fresh = ldpcore.make_oracle("hh", epsilon=1.0, domain_size=100, fanout=3)
        assert np.array_equal(o.cdf(st), fresh.cdf(st))
