"""ldpcore.intervals: honest intervals for every method, and method="auto"."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

import ldpcore
from ldpcore import intervals
from ldpcore.base import owned
from ldpcore.consistency.batch import ROW_METHODS, postprocess_rows
from ldpcore.intervals import answer, choose_method, method_answers

ZIPF16 = np.arange(1, 17) ** -1.2 / (np.arange(1, 17) ** -1.2).sum()


@pytest.mark.parametrize("method", ROW_METHODS)
def test_row_methods_equal_the_one_vector_methods(method: str) -> None:
    rng = np.random.default_rng(4)
    d, var = 40, 0.02**2
    f = np.arange(1, d + 1) ** -1.0 / (np.arange(1, d + 1) ** -1.0).sum()
    est = f + rng.normal(0, 0.02, size=(25, d))
    kw = {"variance_slope": var / 2} if method == "mle-apx" else {}
    rows = postprocess_rows(est, method, variance=var, **kw)
    one = np.stack([ldpcore.postprocess(e, method, n=100, variance=var, **kw) for e in est])
    np.testing.assert_allclose(rows, one, atol=1e-12)


def test_post_pos_clips_each_answer_not_the_vector() -> None:
    est = np.array([[0.6, 0.5, -0.05, -0.05]])
    assert method_answers(est, "post-pos", np.array([2, 3]), variance=1e-4)[0, 0] == 0.0
    assert method_answers(est, "post-pos", np.array([1, 2]), variance=1e-4)[0, 0] == \
        pytest.approx(0.45)
    assert method_answers(est, "post-pos", None, variance=1e-4)[0].tolist() == \
        [0.6, 0.5, 0.0, 0.0]


def test_base_keeps_the_analytic_normal_interval() -> None:
    o = ldpcore.make_oracle("oue", epsilon=1.0, domain_size=16)
    s = o.sample_state(ZIPF16, 5_000, rng=1)
    a = answer(o, s, method="base", confidence=0.9)
    raw = o.estimate(s)
    se = np.sqrt([o.variance(5_000, float(np.clip(x, 0, 1))) for x in raw])
    z = 1.6448536269514722
    assert a.interval == "analytic" and a.replicates == 0
    np.testing.assert_allclose(a.estimate, raw)
    np.testing.assert_allclose(a.low, raw - z * se)
    np.testing.assert_allclose(a.high, raw + z * se)
    b = answer(o, s, method="base", indices=[0, 3])
    assert b.std_error is not None and b.low is not None
    # A sum: the analytic sum of variances, or the simulated variance where larger.
    summed = math.sqrt(se[0] ** 2 + se[3] ** 2)
    if b.interval == "analytic":
        assert b.std_error[0] == pytest.approx(summed)
    else:
        assert b.interval == "normal (simulated standard error)"
        assert summed < b.std_error[0] < 1.2 * summed
    assert b.low[0] == pytest.approx(raw[[0, 3]].sum() - 1.959963984540054 * b.std_error[0])


def test_answers_are_deterministic_per_state_and_name_the_method() -> None:
    o = ldpcore.make_oracle("grr", epsilon=1.0, domain_size=16)
    s = o.sample_state(ZIPF16, 4_000, rng=2)
    a, b = answer(o, s), answer(o, s.copy())
    assert a.method == b.method and a.method in ldpcore.POSTPROCESS_METHODS
    assert a.low is not None and b.low is not None
    np.testing.assert_array_equal(a.low, b.low)
    assert choose_method(o, s) == a.method
    assert set(a.mse) >= {"base", "norm-sub", "power-ns"}
    assert a.mse[a.method] <= a.mse["base"]
    other = answer(o, o.sample_state(ZIPF16, 4_000, rng=3))
    assert other.low is not None and not np.array_equal(other.low, a.low)


def test_every_method_gets_an_interval_inside_zero_one() -> None:
    o = ldpcore.make_oracle("hr", epsilon=1.0, domain_size=16)
    s = o.sample_state(ZIPF16, 3_000, rng=4)
    for m in ldpcore.POSTPROCESS_METHODS:
        for idx in (None, [0, 1], [14, 15]):
            a = answer(o, s, method=m, indices=idx)
            assert a.method == m and a.low is not None and a.high is not None
            if m != "base":
                assert a.interval == "bootstrap"
            elif idx is None:
                assert a.interval == "analytic"
            else:  # a sum: the simulated standard error where it exceeds the analytic one
                assert a.interval in ("analytic", "normal (simulated standard error)")
            if m != "base":
                assert np.all((0 <= a.low) & (a.low <= a.high) & (a.high <= 1))


def test_a_biased_subset_answer_gets_an_interval_that_holds_its_bias() -> None:
    # The case: power-ns on a fixed set of top values is far below the truth.
    o = ldpcore.make_oracle("grr", epsilon=1.0, domain_size=32)
    f = np.arange(1, 33) ** -1.0 / (np.arange(1, 33) ** -1.0).sum()
    rng = np.random.default_rng(7)
    vals = rng.choice(32, size=20_000, p=f)
    truth = np.bincount(vals, minlength=32)[[0, 1]].sum() / vals.size
    s = o.aggregate(o.perturb(vals, rng=rng))
    a = answer(o, s, method="power-ns", indices=[0, 1])
    assert a.low is not None and a.high is not None and a.std_error is not None
    plug_in_se = answer(o, s, method="base", indices=[0, 1]).std_error
    assert plug_in_se is not None
    # The plug-in interval the API used to serve (point ± 1.96 analytic se) misses ...
    assert abs(a.estimate[0] - truth) > 1.96 * plug_in_se[0]
    # ... the bootstrap interval holds the truth.
    assert a.low[0] <= truth <= a.high[0]


def test_no_interval_is_given_when_the_bootstrap_is_over_budget() -> None:
    o = ldpcore.make_oracle("ss", epsilon=1.0, domain_size=2048)
    s = o.aggregate(o.perturb(np.arange(300) % 7, rng=1))
    assert not intervals.can_simulate(o, s.n, intervals.DEFAULT_REPLICATES)
    named = answer(o, s, method="norm-sub")
    assert named.low is None and named.high is None and named.interval is None
    assert named.reason is not None and "budget" in named.reason
    auto = answer(o, s)
    assert auto.method == "base" and auto.interval == "analytic"
    assert auto.reason is not None and "auto kept base" in auto.reason


def test_bad_arguments_are_refused() -> None:
    o = ldpcore.make_oracle("grr", epsilon=1.0, domain_size=4)
    s = o.sample_state([0.25] * 4, 100, rng=1)
    with pytest.raises(ldpcore.ParameterError, match="method"):
        answer(o, s, method="magic")
    with pytest.raises(ldpcore.ParameterError, match="indices"):
        answer(o, s, indices=[0, 4])
    with pytest.raises(ldpcore.ParameterError, match="confidence"):
        answer(o, s, confidence=1.0)
    with pytest.raises(ldpcore.StateError):
        answer(o, o.new_state())


def test_generic_bootstrap_interval_covers_a_state_function() -> None:
    o = ldpcore.make_oracle("oue", epsilon=1.0, domain_size=16)
    s = o.sample_state(ZIPF16, 5_000, rng=9)

    def top_two(state: ldpcore.State) -> np.ndarray:
        return np.sort(ldpcore.postprocess(o.estimate(state), "norm-sub"))[-2:].sum()

    point, low, high = intervals.bootstrap_interval(
        o, s, top_two, lambda f: np.sort(f)[-2:].sum(), replicates=100)
    assert low[0] <= point[0] <= high[0] and high[0] - low[0] < 0.2
    assert low[0] <= ZIPF16[:2].sum() <= high[0]


def test_a_tilted_world_holds_the_set_total_and_keeps_proportions() -> None:
    f = np.array([0.5, 0.3, 0.2, 0.0])
    w = intervals._tilted(f, np.array([1, 3]), 0.6)
    assert w[[1, 3]].sum() == pytest.approx(0.6) and w.sum() == pytest.approx(1.0)
    assert w[3] == 0.0 and w[0] / w[2] == pytest.approx(2.5)  # shapes kept inside and out
    empty = intervals._tilted(f, np.array([3]), 0.1)  # no mass to rescale: spread evenly
    assert empty[3] == pytest.approx(0.1) and empty[:3].sum() == pytest.approx(0.9)


# Statlog (Australian credit) attribute A5: 14 values, n = 690 applicants.
STATLOG_A5 = np.array([53, 30, 59, 51, 10, 54, 38, 146, 64, 25, 78, 3, 41, 38]) / 690


@pytest.mark.slow
def test_auto_subset_answer_is_not_worse_than_base_at_statlog_size() -> None:
    """GRR, ε = 1, n = 690, the top-2 set of Statlog's A5 (truth 0.325, se ≈ 0.12).

    The regression: each value's estimate has a standard error (0.085) larger than most
    frequencies, so the Norm-Sub fit is much sparser than the truth; where noise made
    the set's estimate low, every fitted world favoured methods that shrink it further
    (Power, Norm-Mul), and ``auto`` was 6.8 ± 1.5 % worse than ``base`` here (600
    collections, these seeds: 4.5 standard errors).  Now a subset candidate must also
    beat base with the set's frequency at both ends of its interval.

    Tolerance: the paired mean of SE_auto − SE_base over the collections may exceed 0
    by at most 3 of its own Monte-Carlo standard errors (one-sided, ≈ 0.1 % false alarm).
    """
    o = ldpcore.make_oracle("grr", epsilon=1.0, domain_size=14)
    idx = np.argsort(-STATLOG_A5, kind="stable")[:2]
    truth = STATLOG_A5[idx].sum()
    rng = np.random.default_rng(14)
    collections = 600
    diff = np.empty(collections)
    for t in range(collections):
        s = o.sample_state(STATLOG_A5, 690, rng=rng)
        auto = answer(o, s, indices=idx)
        base = o.estimate(s)[idx].sum()
        diff[t] = (auto.estimate[0] - truth) ** 2 - (base - truth) ** 2
    se = diff.std(ddof=1) / math.sqrt(collections)
    assert diff.mean() <= 3 * se, (diff.mean(), se)


# ---- coverage ------------------------------------------------------------------------------
COLLECTIONS, N_REPORTS = 300, 4_000
TOP, MID, TAIL = 0, 8, 15
TOPK, ARBITRARY = [0, 1], [1, 8, 15]


@pytest.mark.slow
@pytest.mark.parametrize("mechanism", ["grr", "oue", "olh", "hr"])
def test_default_intervals_cover_the_truth_at_their_level(mechanism: str) -> None:
    """300 independent collections of 4,000 reports (Zipf 1.2 over 16 values, ε = 1): each
    default (auto) 95 % interval holds the population's true frequency in ≥ 93 % of them.

    With exact 95 % coverage a cell falls below 93 % with probability ≈ 6 %: the seed
    was first 2024, where OLH's top-2 cell got 0.92 although, over those 300 populations,
    even the unbiased sum with its exact standard error (``subset_variance`` at the true
    f) covers only 0.913 (over 600 of that stream 0.938; seeds 7 and 8: 0.947 and 0.950).
    The coverage table of ``bench/defaults.py`` (600 collections, another seed) is the
    independent check.
    """
    o = ldpcore.make_oracle(mechanism, epsilon=1.0, domain_size=16)
    rng = np.random.default_rng(7)
    hits = dict.fromkeys(("top", "middle", "tail", "top-2", "arbitrary"), 0)
    for _ in range(COLLECTIONS):
        vals = rng.choice(16, size=N_REPORTS, p=ZIPF16)
        truth = np.bincount(vals, minlength=16) / N_REPORTS
        s = o.aggregate(o.perturb(vals, rng=rng))
        full = answer(o, s)
        assert full.low is not None and full.high is not None
        for name, i in (("top", TOP), ("middle", MID), ("tail", TAIL)):
            hits[name] += bool(full.low[i] <= truth[i] <= full.high[i])
        for name, idx in (("top-2", TOPK), ("arbitrary", ARBITRARY)):
            a = answer(o, s, indices=idx)
            assert a.low is not None and a.high is not None
            hits[name] += bool(a.low[0] <= truth[idx].sum() <= a.high[0])
    coverage = {k: v / COLLECTIONS for k, v in hits.items()}
    assert min(coverage.values()) >= 0.93, coverage


@pytest.mark.parametrize("mechanism", ["olh", "blh", "hcms"])
def test_subset_variance_includes_the_covariances_of_shared_hashes(mechanism: str) -> None:
    o = ldpcore.make_oracle(mechanism, epsilon=1.0, domain_size=16)
    n, size = 4_000, 4_000
    sims = o.estimate_counts(o.sample_counts(ZIPF16, n, size=size, rng=8), n)
    for idx in ([0, 1], [0, 1, 2, 3], [1, 8, 15]):
        f_s = ZIPF16[idx].sum()
        # Simulated populations vary by f_S(1 - f_S)/n on top of the fixed-population part.
        simulated = sims[:, idx].sum(axis=1).var(ddof=1) - f_s * (1 - f_s) / n
        exact = o.subset_variance(n, idx, ZIPF16)
        assert abs(simulated / exact - 1) <= 4.5 * math.sqrt(2 / size) * 1.1, (idx, simulated)
    summed = sum(o.variance(n, float(ZIPF16[i])) for i in (0, 1, 2, 3))
    if mechanism == "blh":  # over GF(2) no two values are collinear: additive
        assert o.subset_variance(n, [0, 1, 2, 3], ZIPF16) == pytest.approx(summed)
    else:  # collinear values (OLH) or shared sketch cells (HCMS) correlate
        assert o.subset_variance(n, [0, 1, 2, 3], ZIPF16) > 1.05 * summed


def test_normal_draws_have_the_exact_draws_spread_and_are_used_for_big_states() -> None:
    o = ldpcore.make_oracle("olh", epsilon=1.0, domain_size=64)
    assert math.prod(o.state_shape) > intervals.EXACT_CELLS_PER_VALUE * 64
    f = np.arange(1, 65) ** -1.1 / (np.arange(1, 65) ** -1.1).sum()
    n = 20_000
    rng = np.random.default_rng(5)
    normal = intervals.simulated_estimates(o, f, n, 400, rng)
    exact = o.estimate_counts(o.sample_counts(f, n, size=400, rng=rng), n)
    # Same centre (within 4 Monte-Carlo standard errors) and spread (within 15 %) per value.
    sd = exact.std(axis=0, ddof=1)
    assert np.all(np.abs(normal.mean(axis=0) - f) < 4 * sd / math.sqrt(400))
    ratio = normal.std(axis=0, ddof=1) / sd
    assert 0.85 < float(np.median(ratio)) < 1.15 and np.all((ratio > 0.7) & (ratio < 1.3))
    # Small states and small n stay exact.
    g = ldpcore.make_oracle("grr", epsilon=1.0, domain_size=64)
    assert not intervals._normal_draws(g, n) and not intervals._normal_draws(o, 500)


@pytest.mark.parametrize("mechanism", ["hh", "olh", "grr", "haar"])
def test_value_variances_equal_one_call_per_value(mechanism: str) -> None:
    # The vectorised path (a quadratic in f) must give what oracle.variance gives per value.
    o = ldpcore.make_oracle(mechanism, epsilon=1.0, domain_size=64)
    f = np.random.default_rng(5).dirichlet(np.full(64, 0.3))
    for n in (1, 1000, 10**6, 1000, 7, 1, 10**6):  # again: from the kept quadratics
        want = np.array([o.variance(n, float(x)) for x in f])
        np.testing.assert_allclose(intervals._value_variances(o, n, f), want, rtol=1e-12)
    assert len(owned(o, "_variance_polynomials")) <= 4


def test_kept_errors_on_a_nearby_state_give_the_fresh_interval_rescaled() -> None:
    # A later version of the same query (n up by 2 %): the kept errors, rescaled by
    # sqrt(n0/n), give the interval a fresh simulation gives, to bootstrap noise.
    o = ldpcore.make_oracle("olh", epsilon=1.0, domain_size=64)
    f = np.arange(1, 65) ** -1.2 / (np.arange(1, 65) ** -1.2).sum()
    s1 = o.sample_state(f, 50_000, rng=3)
    s2 = s1 + o.sample_state(f, 1_000, rng=4)
    kept = intervals.prepare(o, s1, method="norm-sub")
    reused = intervals.prepare_kept(o, s2, kept)
    fresh = intervals.prepare(o, s2, method="norm-sub")
    assert reused.simulated_at_n == 50_000 and fresh.simulated_at_n is None
    assert reused.method == "norm-sub" and reused.n == 51_000
    np.testing.assert_array_equal(reused.point, fresh.point)  # the point is this state's
    assert reused.errors is not None and kept.errors is not None
    assert reused.errors is kept.errors  # shared, not copied: rescaled at .at()
    assert reused.error_scale == pytest.approx(math.sqrt(50_000 / 51_000))
    a, b = reused.at(0.95), fresh.at(0.95)
    assert a.simulated_at_n == 50_000 and a.low is not None and b.low is not None
    width_a, width_b = a.high - a.low, b.high - b.low  # type: ignore[operator]
    assert abs(float(np.median(width_a / width_b)) - 1.0) < 0.1
    # Chained: errors kept from a kept answer are still those of n0, rescaled once.
    s3 = s2 + o.sample_state(f, 1_000, rng=5)
    again = intervals.prepare_kept(o, s3, reused)
    assert again.simulated_at_n == 50_000 and again.errors is kept.errors
    assert again.error_scale == pytest.approx(math.sqrt(50_000 / 52_000))
    copied = dataclasses.replace(again, errors=kept.errors * again.error_scale,
                                 error_scale=1.0)  # the rescaled errors, written out
    for a, b in ((again.at(0.9).low, copied.at(0.9).low),
                 (again.at(0.9).high, copied.at(0.9).high)):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-15)  # type: ignore[arg-type]


def test_kept_analytic_answer_is_prepared_afresh() -> None:
    o = ldpcore.make_oracle("olh", epsilon=1.0, domain_size=16)
    s = o.sample_state(ZIPF16, 20_000, rng=3)
    base = intervals.prepare(o, s, method="base")
    again = intervals.prepare_kept(o, s, base)
    assert again.simulated_at_n is None and again.kind == "analytic"
    np.testing.assert_array_equal(again.raw_se, base.raw_se)


def test_the_answers_of_one_state_share_one_estimate_and_stay_those_of_a_fresh_oracle(
        ) -> None:
    o = ldpcore.make_oracle("olh", epsilon=1.0, domain_size=64)
    fresh = ldpcore.make_oracle("olh", epsilon=1.0, domain_size=64)
    f = np.arange(1, 65) ** -1.1 / (np.arange(1, 65) ** -1.1).sum()
    s = o.sample_state(f, 50_000, rng=4)
    calls = []
    inner = o._estimate
    o._estimate = lambda c, n: calls.append(n) or inner(c, n)  # type: ignore[method-assign]
    # A copy of the state (another object, the same content) is the same state.
    copy = ldpcore.State(s.fingerprint, s.n, s.counts.copy())
    got = [intervals.prepare(o, s, method="base"),
           intervals.prepare(o, copy, method="base", indices=[1, 5]),
           intervals.prepare(o, s, method="norm-sub", indices=[0, 2], replicates=20)]
    assert len(calls) == 1
    want = [intervals.prepare(fresh, s, method="base"),
            intervals.prepare(fresh, s, method="base", indices=[1, 5]),
            intervals.prepare(fresh, s, method="norm-sub", indices=[0, 2], replicates=20)]
    for a, b in zip(got, want, strict=True):
        for name in ("point", "raw_answer", "raw_se", "errors", "bias", "near"):
            x, y = getattr(a, name), getattr(b, name)
            assert (x is None and y is None) or np.array_equal(x, y), name
    # Shared, so read-only: an answer cannot change another's estimate.
    assert not intervals._Head.of(o, s, None, None).raw.flags.writeable
    # Counts changed in place make another state: estimated again, not the kept one.
    s.counts[0, 0] += 500
    changed = intervals.prepare(o, s, method="base")
    assert len(calls) == 2
    assert np.array_equal(changed.point, fresh.estimate(s))
