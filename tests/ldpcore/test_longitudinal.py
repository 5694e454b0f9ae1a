"""Longitudinal collection: spec fields, two-level composed channels, multi-window maths."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ldpcore
from ldpcore import ParameterError, Reports, State
from ldpcore.audit import audit
from ldpcore.collection import CollectionSpec
from ldpcore.longitudinal import (
    POLICIES,
    TWO_LEVEL_MECHANISMS,
    TwoLevel,
    effective_sample_size,
    epsilon_spent,
    multiwindow_variance,
    repeat_bound,
)

OS = {"id": "os", "oracle": {"mechanism": "grr", "epsilon": 1.0},
      "domain": {"kind": "categories", "labels": ["linux", "mac", "win"]}}
APP = {"id": "app-version", "description": "app version in use (OLH, Zipf)",
       "oracle": {"mechanism": "olh", "epsilon": 1.0},
       "domain": {"kind": "categories",
                  "labels": [f"v{a}.{b}" for a in range(1, 9) for b in range(8)]},
       "window_seconds": 300, "min_reports": 2000}
LATENCY = {"id": "latency-ms", "description": "request latency in ms (hierarchical histogram)",
           "oracle": {"mechanism": "hh", "epsilon": 1.0},
           "domain": {"kind": "integers", "low": 0, "high": 1023},
           "window_seconds": 300, "min_reports": 2000}
# Fingerprints computed with the code before the longitudinal fields existed.
FINGERPRINTS = {"os": "4efe4ea8a8f767eb", "app-version": "6765b59f9369aefb",
                "latency-ms": "c27fa77806231e72"}

EPS_INF, EPS_1 = 2.0, 1.5


# ---- spec --------------------------------------------------------------------------------
@pytest.mark.parametrize("raw", [OS, APP, LATENCY], ids=lambda r: r["id"])
def test_existing_specs_keep_their_fingerprint(raw: dict[str, Any]) -> None:
    spec = CollectionSpec.from_dict(raw)
    assert spec.fingerprint == FINGERPRINTS[raw["id"]]
    assert spec.memoization == "permanent" and spec.reports_per_window == 1
    assert spec.epsilon_1 is None
    assert not {"memoization", "epsilon_1", "reports_per_window"} & set(spec.to_dict())
    # Declaring the defaults explicitly is the same spec.
    explicit = CollectionSpec.from_dict({**raw, "memoization": "permanent",
                                         "reports_per_window": 1})
    assert explicit.fingerprint == spec.fingerprint and explicit == spec


def test_longitudinal_fields_change_the_fingerprint_and_round_trip() -> None:
    base = CollectionSpec.from_dict(OS)
    variants = [CollectionSpec.from_dict({**OS, "memoization": "none"}),
                CollectionSpec.from_dict({**OS, "memoization": "two-level", "epsilon_1": 0.5}),
                CollectionSpec.from_dict({**OS, "memoization": "two-level", "epsilon_1": 0.7}),
                CollectionSpec.from_dict({**OS, "reports_per_window": 3})]
    fps = {base.fingerprint, *(v.fingerprint for v in variants)}
    assert len(fps) == 5
    for v in variants:
        again = CollectionSpec.from_dict(json.loads(v.to_json()))
        assert again == v and again.fingerprint == v.fingerprint


def test_two_level_spec_estimates_with_the_composed_channel() -> None:
    spec = CollectionSpec.from_dict({**OS, "memoization": "two-level", "epsilon_1": 0.5})
    tl = spec.two_level()
    assert isinstance(tl, TwoLevel) and tl.epsilon_inf == 1.0 and tl.epsilon_1 == 0.5
    est = spec.estimation_oracle()
    assert est.fingerprint == spec.oracle().fingerprint  # the same state takes the reports
    assert math.isclose(est.variance(100), tl.variance(100))
    assert est.variance(100) > spec.oracle().variance(100)
    assert CollectionSpec.from_dict(OS).two_level() is None


@pytest.mark.parametrize("extra,match", [
    ({"memoization": "sometimes"}, r"memoization must be one of \['none', 'permanent', "
                                   r"'two-level'\]"),
    ({"memoization": 3}, "memoization must be one of"),
    ({"memoization": "two-level"}, "needs epsilon_1"),
    ({"memoization": "two-level", "epsilon_1": 0},
     r"epsilon_1 must be a finite real number in \(0.0, 100.0\]"),
    ({"memoization": "two-level", "epsilon_1": 1000}, "epsilon_1 must be"),
    ({"memoization": "two-level", "epsilon_1": float("inf")}, "epsilon_1 must be"),
    ({"memoization": "two-level", "epsilon_1": True}, "epsilon_1 must be"),
    ({"memoization": "two-level", "epsilon_1": "1"}, "epsilon_1 must be"),
    ({"epsilon_1": 1.0}, "epsilon_1 is only allowed with memoization 'two-level'"),
    ({"memoization": "permanent", "epsilon_1": 1.0}, "only allowed"),
    ({"reports_per_window": 0}, r"reports_per_window must be an integer in \[1, 1000000\]"),
    ({"reports_per_window": 2.0}, "reports_per_window must be an integer"),
    ({"reports_per_window": None}, "reports_per_window must be an integer"),
])
def test_bad_longitudinal_fields_are_refused_naming_key_and_allowed_values(
        extra: dict[str, Any], match: str) -> None:
    with pytest.raises(ParameterError, match=match):
        CollectionSpec.from_dict({**OS, **extra})


@pytest.mark.parametrize("mech", ["hr", "ss", "hh", "hcms"])
def test_two_level_is_refused_for_mechanisms_whose_reports_do_not_compose(mech: str) -> None:
    raw = {**OS, "oracle": {"mechanism": mech, "epsilon": 1.0}, "memoization": "two-level",
           "epsilon_1": 1.0}
    if mech == "hh":
        raw["domain"] = {"kind": "integers", "low": 0, "high": 15}
    with pytest.raises(ParameterError, match=f"needs a mechanism in .*got '{mech}'"):
        CollectionSpec.from_dict(raw)


_json = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 10**6) | st.floats(allow_nan=True)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                max_size=4),
    max_leaves=12)


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(memo=_json | st.sampled_from(POLICIES), eps1=_json, per=_json,
       oracle=st.dictionaries(st.text(max_size=10) | st.integers(), _json, max_size=3)
       | st.sampled_from([{"mechanism": "grr", "epsilon": 1.0}, {"mechanism": "oue"}]),
       drop=st.sets(st.sampled_from(["memoization", "epsilon_1", "reports_per_window",
                                     "oracle"])))
def test_from_dict_turns_any_malformed_longitudinal_input_into_parameter_error(
        memo: Any, eps1: Any, per: Any, oracle: Any, drop: set[str]) -> None:
    raw = {**OS, "memoization": memo, "epsilon_1": eps1, "reports_per_window": per,
           "oracle": oracle}
    for k in drop:
        raw.pop(k)
    try:
        CollectionSpec.from_dict(raw)
    except ParameterError:
        pass


def test_from_dict_refuses_non_string_oracle_parameter_names() -> None:
    with pytest.raises(ParameterError, match="oracle parameter names must be strings"):
        CollectionSpec.from_dict({**OS, "oracle": {"mechanism": "grr", "epsilon": 1.0, 1: 2}})


# ---- composed channels: privacy ------------------------------------------------------------
def _two_level(mech: str, d: int = 3) -> TwoLevel:
    return TwoLevel(ldpcore.make_oracle(mech, epsilon=EPS_INF, domain_size=d), epsilon_1=EPS_1)


def _two_reports(tl: TwoLevel) -> Any:
    """Two reports of the same device (one permanent answer): one audited output."""
    def perturb(values: np.ndarray, rng: np.random.Generator) -> Reports:
        z = tl.memoize(values, rng=rng)
        a, b = tl.rerandomize(z, rng=rng), tl.rerandomize(z, rng=rng)
        cols = {**{k + "0": v for k, v in a.columns.items()},
                **{k + "1": v for k, v in b.columns.items()}}
        return Reports(a.mechanism, a.fingerprint, cols)
    return perturb


@pytest.mark.parametrize("mech", TWO_LEVEL_MECHANISMS)
def test_one_report_satisfies_the_composed_epsilon_and_spends_it(mech: str) -> None:
    tl = _two_level(mech)
    assert tl.epsilon_report < min(EPS_INF, EPS_1)
    res = audit(tl.perturb, epsilon=tl.epsilon_report, domain_size=3, trials=40_000, seed=1)
    assert not res.violated and res.tight, res
    # The audit has power: half the composed ε is caught.
    loud = audit(tl.perturb, epsilon=tl.epsilon_report / 2, domain_size=3, trials=40_000, seed=2)
    assert loud.violated, loud


@pytest.mark.parametrize("mech", TWO_LEVEL_MECHANISMS)
def test_repeated_reports_stay_within_epsilon_inf_but_exceed_one_report(mech: str) -> None:
    tl = _two_level(mech)
    pair = _two_reports(tl)
    res = audit(pair, epsilon=tl.epsilon_inf, domain_size=3, trials=40_000, seed=3)
    assert not res.violated, res
    # Two reports leak more than one: their worst ratio is measurably above ε_report.
    assert res.observed > tl.epsilon_report, res


@pytest.mark.parametrize("mech", TWO_LEVEL_MECHANISMS)
def test_permanent_answers_satisfy_epsilon_inf(mech: str) -> None:
    tl = _two_level(mech)
    res = audit(tl.memoize, epsilon=tl.epsilon_inf, domain_size=3, trials=40_000, seed=4)
    assert not res.violated and res.tight, res


def test_two_level_refuses_other_mechanisms_and_bad_epsilon_1() -> None:
    with pytest.raises(ParameterError, match="subset"):
        TwoLevel(ldpcore.make_oracle("ss", epsilon=1.0, domain_size=8), epsilon_1=1.0)
    with pytest.raises(ParameterError, match="epsilon_1 must be a finite real number in"):
        TwoLevel(ldpcore.make_oracle("grr", epsilon=1.0, domain_size=8), epsilon_1=-1.0)


# ---- composed channels: statistics -----------------------------------------------------------
D, N_DEV, M_REP, RUNS = 4, 200, 8, 500
FREQS = np.array([0.4, 0.3, 0.2, 0.1])


@pytest.mark.slow
@pytest.mark.parametrize("mech", TWO_LEVEL_MECHANISMS)
def test_two_level_estimates_are_unbiased_with_the_correlated_variance(mech: str) -> None:
    """N_DEV devices each send M_REP re-randomized reports of one permanent answer.

    Over RUNS independent runs (fixed population, fixed seed) the mean estimate is
    within 4.5 analytic s.d. of the truth and the sample variance within 5 s.d. of
    the multi-window variance (relative s.d. of a sample variance: sqrt(2/(R-1)));
    the variance that treats every report as independent is refused.
    """
    tl = _two_level(mech, D)
    values = np.repeat(np.arange(D), (FREQS * N_DEV).astype(int))
    rng = np.random.default_rng(11)
    z = tl.memoize(np.tile(values, RUNS), rng=rng)
    oracle = tl.oracle
    counts = np.zeros((RUNS, *oracle.state_shape), dtype=np.int64)
    for _ in range(M_REP):
        r = tl.rerandomize(z, rng=rng)
        for i in range(RUNS):
            counts[i] += oracle.aggregate(r[slice(i * N_DEV, (i + 1) * N_DEV)]).counts
    n = N_DEV * M_REP
    est = np.stack([tl.estimate(State(oracle.fingerprint, n, c)) for c in counts])
    tol_ratio = 5 * math.sqrt(2 / (RUNS - 1))
    naive_ratios = []
    for v in range(D):
        var = multiwindow_variance(tl, [N_DEV] * M_REP, "two-level", frequency=FREQS[v])
        assert abs(est[:, v].mean() - FREQS[v]) < 4.5 * math.sqrt(var / RUNS), (v, mech)
        ratio = est[:, v].var(ddof=1) / var
        assert abs(ratio - 1) < tol_ratio, (v, ratio)
        naive_ratios.append(est[:, v].var(ddof=1) / tl.variance(n, FREQS[v]))
    assert np.mean(naive_ratios) > 1 + tol_ratio, naive_ratios


@pytest.mark.parametrize("mech", TWO_LEVEL_MECHANISMS)
def test_two_level_perturb_is_the_composed_channel(mech: str) -> None:
    """Fresh two-stage reports and the composed oracle's one-stage reports agree in law."""
    tl = _two_level(mech, D)
    values = np.repeat(np.arange(D), 5000)
    a = tl.oracle.aggregate(tl.perturb(values, rng=5)).counts.astype(float)
    b = tl.oracle.aggregate(tl.composed.perturb(values, rng=6)).counts.astype(float)
    # Each cell is a sum of independent Bernoullis: compare within 5 s.d. of the difference.
    sd = np.sqrt(a + b + 1)
    assert np.all(np.abs(a - b) < 5 * sd)


def test_correlation_is_between_none_and_permanent() -> None:
    for mech in TWO_LEVEL_MECHANISMS:
        tl = _two_level(mech, D)
        for f in (0.0, 0.3, 1.0):
            assert 0 < tl.correlation(f) < 1, (mech, f)
    # The limits: an almost noiseless instantaneous channel makes reports identical.
    sharp = TwoLevel(ldpcore.make_oracle("grr", epsilon=1.0, domain_size=4), epsilon_1=40.0)
    assert sharp.correlation(0.2) == pytest.approx(1.0, abs=1e-9)


# ---- multi-window maths ----------------------------------------------------------------------
def test_repeat_bound_is_reached_by_nested_populations() -> None:
    rng = np.random.default_rng(0)
    for _ in range(50):
        k = int(rng.integers(1, 6))
        counts = rng.integers(0, 30, size=k)
        # Nested: device i reports in every window whose count exceeds i.
        m = np.array([(counts > i).sum() for i in range(int(counts.max(initial=0)))])
        assert repeat_bound(counts) == int((m ** 2).sum())
    assert repeat_bound([10, 10], reports_per_window=3) == 3 * 40


def test_effective_sample_size_per_policy() -> None:
    assert effective_sample_size([300, 300, 300], "none") == 900
    assert effective_sample_size([300, 300, 300], "permanent") == 300
    assert effective_sample_size([300, 100], "permanent") < 300  # max is not conservative
    assert effective_sample_size([300, 300], "two-level", correlation=0.0) == 600
    assert effective_sample_size([300, 300], "two-level") == 300  # ρ unknown: conservative
    assert effective_sample_size([300, 300], "permanent", reports_per_window=2) == 150
    assert effective_sample_size([], "permanent") == 0.0


@pytest.mark.parametrize("call,match", [
    (lambda: effective_sample_size([1, 2], "always"), "memoization must be one of"),
    (lambda: effective_sample_size([1, -2]), "window_counts must be integers >= 0"),
    (lambda: effective_sample_size([[1]]), "window_counts must be a 1-D"),
    (lambda: effective_sample_size([1.5]), "window_counts must be a 1-D sequence of integers"),
    (lambda: effective_sample_size([1], "two-level", correlation=2), "correlation must be"),
    (lambda: repeat_bound([1], reports_per_window=0), "reports_per_window must be"),
    (lambda: multiwindow_variance(ldpcore.make_oracle("grr", epsilon=1.0, domain_size=3), [0]),
     "at least one report"),
    (lambda: multiwindow_variance(ldpcore.make_oracle("grr", epsilon=1.0, domain_size=3), [5],
                                  "two-level"), "needs the TwoLevel"),
    (lambda: epsilon_spent("two-level", epsilon=1.0, reports=3), "needs epsilon_report"),
])
def test_multiwindow_functions_refuse_bad_arguments(call: Any, match: str) -> None:
    with pytest.raises(ParameterError, match=match):
        call()


def test_epsilon_spent_over_time() -> None:
    tl = _two_level("grr")
    assert epsilon_spent("none", epsilon=1.0, reports=24 * 7) == 168
    assert epsilon_spent("permanent", epsilon=1.0, reports=168, distinct_values=3) == 3
    assert epsilon_spent("two-level", epsilon=EPS_INF, reports=1,
                         epsilon_report=tl.epsilon_report) == tl.epsilon_report
    assert epsilon_spent("two-level", epsilon=EPS_INF, reports=100,
                         epsilon_report=tl.epsilon_report) == EPS_INF


COVER_RUNS, COVER_DEVICES, COVER_WINDOWS = 400, 600, 6


def _coverage(policy: str, tl: TwoLevel | None, seed: int) -> tuple[float, float]:
    """Devices come and go over windows (presence 0.8, churn 0.15); each reports once per
    window.  Returns (coverage of the multi-window interval, of the naive n = reports one)."""
    oracle = tl.oracle if tl is not None else ldpcore.make_oracle("grr", epsilon=1.0,
                                                                  domain_size=D)
    rng = np.random.default_rng(seed)
    hit = naive_hit = total = 0
    for _ in range(COVER_RUNS):
        values = list(rng.choice(D, size=COVER_DEVICES, p=FREQS))
        alive = np.arange(COVER_DEVICES)
        reports: list[np.ndarray] = []
        window_counts = []
        for w in range(COVER_WINDOWS):
            if w:
                gone = rng.random(alive.size) < 0.15
                fresh = np.arange(len(values), len(values) + int(gone.sum()))
                values.extend(rng.choice(D, size=fresh.size, p=FREQS))
                alive = np.concatenate([alive[~gone], fresh])
            present = alive[rng.random(alive.size) < 0.8]
            reports.append(present)
            window_counts.append(present.size)
        who = np.concatenate(reports)
        vals = np.asarray(values)
        if policy == "permanent":
            answers = oracle.perturb(vals, rng=rng).columns["y"]
            y = answers[who]
        else:
            assert tl is not None
            z = tl.memoize(vals, rng=rng)
            y = tl.rerandomize(z[who], rng=rng).columns["y"]
        n = who.size
        counts = np.bincount(y, minlength=D)
        truth = np.bincount(vals[who], minlength=D) / n
        est_oracle = tl if tl is not None else oracle
        est = est_oracle.estimate(State(oracle.fingerprint, n, counts))
        for v in range(D):
            f = float(np.clip(est[v], 0, 1))
            var = multiwindow_variance(est_oracle, window_counts, policy, frequency=f)
            naive = est_oracle.variance(n, f)
            hit += abs(est[v] - truth[v]) <= 1.96 * math.sqrt(var)
            naive_hit += abs(est[v] - truth[v]) <= 1.96 * math.sqrt(naive)
            total += 1
    return hit / total, naive_hit / total


@pytest.mark.slow
def test_multiwindow_intervals_cover_with_permanent_memoization() -> None:
    cover, naive = _coverage("permanent", None, seed=21)
    print(f"permanent memoization: coverage {cover:.3f}, naive (n = reports) {naive:.3f}")
    assert cover >= 0.93
    assert naive < 0.80


@pytest.mark.slow
def test_multiwindow_intervals_cover_with_two_level_memoization() -> None:
    tl = TwoLevel(ldpcore.make_oracle("grr", epsilon=2.0, domain_size=D), epsilon_1=2.0)
    cover, naive = _coverage("two-level", tl, seed=22)
    print(f"two-level memoization: coverage {cover:.3f}, naive (n = reports) {naive:.3f}")
    assert cover >= 0.93
    assert naive < 0.90


def test_spec_multiwindow_helpers_follow_the_declared_policy_and_cadence() -> None:
    counts = [300, 300, 300]
    perm = CollectionSpec.from_dict(OS)
    assert perm.effective_sample_size(counts) == 300
    assert math.isclose(perm.multiwindow_variance(counts, 0.2), perm.oracle().variance(300, 0.2))
    none = CollectionSpec.from_dict({**OS, "memoization": "none"})
    assert none.effective_sample_size(counts) == 900
    twice = CollectionSpec.from_dict({**OS, "reports_per_window": 2})
    assert twice.effective_sample_size(counts) == 150
    tl_spec = CollectionSpec.from_dict({**OS, "memoization": "two-level", "epsilon_1": 1.0})
    tl = tl_spec.two_level()
    assert tl is not None
    assert 300 < tl_spec.effective_sample_size(counts, 0.2) < 900
    assert math.isclose(tl_spec.multiwindow_variance(counts, 0.2),
                        multiwindow_variance(tl, counts, "two-level", frequency=0.2))
    assert math.isclose(tl_spec.multiwindow_variance(counts, 0.2),
                        tl.variance(1, 0.2) / tl_spec.effective_sample_size(counts, 0.2))
