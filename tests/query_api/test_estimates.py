"""Coverage of the served intervals for ranges, CDF points, quantiles, histogram bins and means.

Many independent simulated collections (fixed seeds): a population of devices, the real
perturbation and aggregation, then the answer the API serves by default
(:mod:`query_api.estimates`, pure, no I/O).  Each 95 % interval must hold the
population's truth in at least 93 % of the collections.  Frequencies and subsets are
covered by tests/ldpcore/test_intervals.py (the bootstrap of ldpcore.intervals).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import ldpcore
from query_api import estimates as E
from query_api import parts as P

RUNS = 300
LEVEL = 0.93  # the bar for a 95 % interval over RUNS collections (binomial s.e. 1.3 %)


def _skewed(d: int) -> np.ndarray:
    p = np.exp(-np.arange(d) / (d / 5)) + 0.2 * np.exp(-((np.arange(d) - 0.7 * d) ** 2) / 8)
    return p / p.sum()


def _covered(rows: list[bool]) -> float:
    return float(np.mean(rows))


@pytest.fixture(scope="module")
def range_runs() -> dict[str, float]:
    d, n = 32, 20_000
    o = ldpcore.make_oracle("hh", epsilon=1.0, domain_size=d, fanout=4)
    p = _skewed(d)
    hits: dict[str, list[bool]] = {k: [] for k in (
        "range", "range-unbiased", "cdf-point", "median", "q90", "bin-top", "bin-tail")}
    for run in range(RUNS):
        rng = np.random.default_rng(1000 + run)
        values = rng.choice(d, size=n, p=p)
        truth = np.bincount(values, minlength=d) / n
        st = o.aggregate(o.perturb(values, rng=rng))
        for key, method in (("range", None), ("range-unbiased", "unbiased")):
            r = E.range_answer(o, st, 4, 11, confidence=0.95, method=method)
            hits[key].append(r["ci_low"] <= truth[4:12].sum() <= r["ci_high"])
        c = E.cdf(o, st, confidence=0.95)
        cum = np.cumsum(truth)
        hits["cdf-point"].append(c["ci_low"][15] <= cum[15] <= c["ci_high"][15])
        qs = E.quantiles(o, st, [0.5, 0.9], confidence=0.95)["quantiles"]
        for q, key in ((0.5, "median"), (0.9, "q90")):
            true_q = int(np.searchsorted(cum, q - 1e-12))
            row = next(x for x in qs if x["q"] == q)
            hits[key].append(row["ci_low"] <= true_q <= row["ci_high"])
        h = E.histogram(o, st, confidence=0.95)
        for i, key in ((0, "bin-top"), (d - 3, "bin-tail")):
            hits[key].append(h["ci_low"][i] <= truth[i] <= h["ci_high"][i])
    return {k: _covered(v) for k, v in hits.items()}


@pytest.mark.slow
@pytest.mark.parametrize("what", ["range", "range-unbiased", "cdf-point", "median", "q90",
                                  "bin-top", "bin-tail"])
def test_range_answers_cover_the_truth_at_their_level(range_runs: dict[str, float],
                                                      what: str) -> None:
    assert range_runs[what] >= LEVEL, range_runs


@pytest.fixture(scope="module")
def mean_runs() -> dict[str, float]:
    bins, n = 32, 5_000
    hits: dict[str, list[bool]] = {"sw": [], "pm": [], "duchi": []}
    oracles: dict[str, Any] = {m: ldpcore.make_oracle(m, epsilon=1.0, bins=bins, low=0.0,
                                                      high=10.0) for m in hits}
    p = _skewed(bins)
    for run in range(RUNS):
        rng = np.random.default_rng(5000 + run)
        values = rng.choice(bins, size=n, p=p)
        for m, o in oracles.items():
            # The device draws its value uniformly inside its bin: the truth is the mean of
            # the bins' centres (the draw's own spread is in the estimator's variance).
            truth = float(o.bin_centers()[values].mean())
            r = E.mean(o, o.aggregate(o.perturb(values, rng=rng)), confidence=0.95)
            hits[m].append(r["ci_low"] <= truth <= r["ci_high"])
    return {k: _covered(v) for k, v in hits.items()}


@pytest.mark.slow
@pytest.mark.parametrize("mechanism", ["sw", "pm", "duchi"])
def test_means_cover_the_truth_at_their_level(mean_runs: dict[str, float],
                                              mechanism: str) -> None:
    assert mean_runs[mechanism] >= LEVEL, mean_runs


def test_consistent_range_answers_are_coherent() -> None:
    o = ldpcore.make_oracle("hh", epsilon=0.5, domain_size=64)
    rng = np.random.default_rng(3)
    st = o.aggregate(o.perturb(rng.choice(64, size=3000, p=_skewed(64)), rng=rng))
    c = np.asarray(E.cdf(o, st)["cdf"])
    assert np.all(np.diff(c) >= -1e-12) and c[0] >= 0 and abs(c[-1] - 1) < 1e-9
    h = np.asarray(E.histogram(o, st)["bins"])
    assert np.all(h >= 0) and abs(h.sum() - 1) < 1e-9
    qs = [r["value"] for r in E.quantiles(o, st, [0.1, 0.25, 0.5, 0.75, 0.9])["quantiles"]]
    assert qs == sorted(qs)
    whole = E.range_answer(o, st, 0, 63, confidence=0.95)
    assert abs(whole["estimate"] - 1) < 1e-9 and whole["ci_high"] <= 1.0


def test_the_effective_sample_size_widens_every_interval() -> None:
    o = ldpcore.make_oracle("hh", epsilon=1.0, domain_size=32)
    rng = np.random.default_rng(4)
    st = o.aggregate(o.perturb(rng.choice(32, size=8000, p=_skewed(32)), rng=rng))
    full = E.range_answer(o, st, 2, 9, confidence=0.95)
    quarter = E.range_answer(o, st, 2, 9, confidence=0.95, n_effective=2000)
    assert quarter["std_error"] == pytest.approx(2 * full["std_error"])
    g = ldpcore.make_oracle("grr", epsilon=1.0, domain_size=8)
    sg = g.aggregate(g.perturb(rng.integers(0, 8, 8000), rng=rng))
    a = E.frequencies(g, sg, labels=None, method="base", confidence=0.95)["estimates"][0]
    b = E.frequencies(g, sg, labels=None, method="base", confidence=0.95,
                      n_effective=2000)["estimates"][0]
    assert b["std_error"] == pytest.approx(2 * a["std_error"], rel=1e-6)


def test_a_state_named_by_its_version_is_found_without_hashing_its_counts() -> None:
    from query_api.cache import ByteLRU, size_of_state

    o = ldpcore.make_oracle("olh", epsilon=1.0, domain_size=64)
    rng = np.random.default_rng(5)
    s = o.aggregate(o.perturb(rng.integers(0, 64, 5000), rng=rng))
    memo = ByteLRU(1 << 24, getsizeof=size_of_state)
    shared, named = P.SHARED.set(memo), P.STATE_KEY.set((s, ("version", "c", "v1", s.n)))
    try:
        assert P.state_digest(s) == ("version", "c", "v1", s.n)
        # Another state (a bucket of a series, a sub-state) is named by its content.
        copy = ldpcore.State(s.fingerprint, s.n, s.counts.copy())
        assert isinstance(P.state_digest(copy), bytes)
        a = E.frequencies(o, s, labels=None, method="norm-sub", confidence=0.9)
        b = E.frequencies(o, s, labels=None, method="norm-sub", confidence=0.99)
        assert len(memo) == 1 and a["estimates"] != b["estimates"]  # one part, two levels
    finally:
        P.STATE_KEY.reset(named)
        P.SHARED.reset(shared)
    alone = E.frequencies(o, s, labels=None, method="norm-sub", confidence=0.9)
    assert alone == a  # the part kept under the version is the state's own


def test_only_gives_the_rows_of_those_values_as_the_whole_answer_states_them() -> None:
    o = ldpcore.make_oracle("olh", epsilon=1.0, domain_size=64)
    sw = ldpcore.make_oracle("sw", epsilon=1.0, low=0.0, high=1.0, bins=16)
    rng = np.random.default_rng(6)
    for oracle, values in ((o, rng.integers(0, 64, 4000)), (sw, rng.integers(0, 16, 4000))):
        s = oracle.aggregate(oracle.perturb(values, rng=rng))
        whole = E.frequencies(oracle, s, labels=None, method="auto", confidence=0.9)
        some = E.frequencies(oracle, s, labels=None, method="auto", confidence=0.9,
                             top=2, only=[7, 3, 12])
        assert some["estimates"] == [whole["estimates"][i] for i in (7, 3, 12)]
        assert some["sum"] == whole["sum"]
