"""Multi-attribute reports (ldpcore.multi.MultiAttribute): sampling, unbiased per-attribute
estimates with their analytic variances, validation of specs and reports."""

from __future__ import annotations

import math

import numpy as np
import pytest

import ldpcore
from ldpcore import wire
from ldpcore.base import Reports
from ldpcore.errors import ParameterError, ReportError
from ldpcore.multi import MultiAttribute

Z = 4.0  # two-sided normal quantile of every statistical check below (false alarm ≈ 6e-5)

ATTRS = [{"name": "os", "mechanism": "grr", "domain_size": 4},
         {"name": "lang", "mechanism": "olh", "domain_size": 6},
         {"name": "age", "mechanism": "pm", "bins": 16, "low": 0.0, "high": 80.0}]
P_OS = np.array([0.5, 0.3, 0.15, 0.05])
P_LANG = np.array([0.4, 0.2, 0.2, 0.1, 0.05, 0.05])


def make(sample: int = 1, epsilon: float = 2.0) -> MultiAttribute:
    o = ldpcore.make_oracle("multi", epsilon=epsilon, attributes=ATTRS, sample=sample)
    assert isinstance(o, MultiAttribute)
    return o


def population(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.stack([rng.choice(4, n, p=P_OS), rng.choice(6, n, p=P_LANG),
                     rng.integers(4, 12, n)], axis=1)  # age bins 4..11: [20, 60)


@pytest.mark.parametrize("sample", [1, 2, 3])
def test_each_report_answers_exactly_k_attributes_each_at_epsilon_over_k(sample: int) -> None:
    o = make(sample)
    assert all(o.attribute(a).epsilon == pytest.approx(2.0 / sample) for a in o.attribute_names)
    n = 30_000
    st = o.aggregate(o.perturb_attributes(population(n, 1), rng=2))
    n_j = o.attribute_counts(st)
    assert n_j.sum() == sample * n
    p = sample / 3  # n_j ~ Bin(n, k/m)
    if sample < 3:
        assert np.all(np.abs(n_j - n * p) <= Z * math.sqrt(n * p * (1 - p)))
    else:
        assert np.all(n_j == n)


@pytest.mark.parametrize("sample", [1, 3])
def test_per_attribute_estimates_are_unbiased_within_their_analytic_variance(sample: int
                                                                            ) -> None:
    o, n, runs = make(sample), 20_000, 12
    vals = population(n, 3)
    f_os = np.bincount(vals[:, 0], minlength=4) / n
    f_lang = np.bincount(vals[:, 1], minlength=6) / n
    age = o.attribute("age")
    rng = np.random.default_rng(4)
    err_os, err_lang, err_age = [], [], []
    for _ in range(runs):
        st = o.aggregate(o.perturb_attributes(vals, rng=rng))
        err_os.append(o.attribute_frequencies(st, "os") - f_os)
        err_lang.append(o.attribute_frequencies(st, "lang") - f_lang)
        # the jittered mean of bins 4..11 of [0, 80) is the bin centres' mean
        err_age.append(o.attribute_mean(st, "age") - float(
            age.bin_centers()[vals[:, 2]].mean()))  # type: ignore[attr-defined]
    # The estimators are unbiased; averaged over the runs their error has variance
    # (expected) Var_j(eps/k, n) m/k / runs, plus the sampling spread of n_j (small).
    for errs, name, f in ((err_os, "os", f_os), (err_lang, "lang", f_lang)):
        mean_err = np.mean(errs, axis=0)
        sd = np.sqrt([o.attribute_variance(name, n, float(x)) / runs for x in f])
        assert np.all(np.abs(mean_err) <= Z * sd), (name, mean_err / sd)
    sd_age = math.sqrt(o.attribute_mean_variance("age", n) / runs)
    assert abs(np.mean(err_age)) <= Z * sd_age


def test_the_empirical_variance_matches_the_analytic_one() -> None:
    o, n, runs = make(1, epsilon=1.0), 6_000, 150
    vals = population(n, 5)
    rng = np.random.default_rng(6)
    est = np.array([o.attribute_frequencies(o.aggregate(o.perturb_attributes(vals, rng=rng)),
                                            "os") for _ in range(runs)])
    f = np.bincount(vals[:, 0], minlength=4) / n
    # Var given n_j is Var(eps, n_j); over n_j ~ Bin(n, 1/3) it is E[1/n_j] ≈ (3/n)(1 + 2/n).
    want = np.array([o.attribute_variance("os", n, float(x)) for x in f])
    ratio = est.var(axis=0, ddof=1) / want
    assert np.all(np.abs(ratio - 1) <= Z * math.sqrt(2 / (runs - 1))), ratio


def test_partitioning_users_beats_splitting_epsilon_empirically() -> None:
    n, runs = 6_000, 30
    vals = population(n, 7)
    f = np.bincount(vals[:, 1], minlength=6) / n
    mse = {}
    for k in (1, 3):
        o, rng = make(k, epsilon=1.0), np.random.default_rng(8 + k)
        errs = [o.attribute_frequencies(o.aggregate(o.perturb_attributes(vals, rng=rng)),
                                        "lang") - f for _ in range(runs)]
        mse[k] = float(np.mean(np.square(errs)))
    # Analytic: 3 Var_olh(1) vs Var_olh(1/3) — a factor of about 3.
    want = ldpcore.multi.sample_variances("olh", epsilon=1.0, n=n, attributes=3,
                                          domain_size=6)
    assert want[3] / want[1] > 2.5
    assert mse[3] / mse[1] > 1.8, mse


def test_wire_round_trip_and_json_records_name_attribute_columns() -> None:
    o = make(2)
    reps = o.perturb_attributes(population(50, 9), rng=10)
    assert wire.decode(o, wire.encode(reps)) == reps
    rec = wire.to_records(reps)[0]
    assert len(rec["attrs"]) == 2  # the indices of the two sampled attributes
    assert set(rec) == {"mechanism", "fingerprint", "attrs", "os.y", "lang.a", "lang.t", "age.y"}
    assert wire.from_records(o, wire.to_records(reps)) == reps


def test_a_report_marking_the_wrong_number_of_attributes_is_rejected() -> None:
    o = make(1)
    reps = o.perturb_attributes(population(20, 11), rng=12)
    cols = {k: v.copy() for k, v in reps.columns.items()}
    cols["attrs"][0, 0] = 0b011
    with pytest.raises(ReportError, match="exactly 1 of the 3") as err:
        o.aggregate(Reports(reps.mechanism, reps.fingerprint, cols))
    assert err.value.reason == "out_of_range"


def test_a_report_with_a_value_for_an_unsampled_attribute_is_rejected() -> None:
    o = make(1)
    reps = o.perturb_attributes(population(20, 13), rng=14)
    row = int(np.flatnonzero(reps.columns["attrs"][:, 0] != 0b001)[0])
    cols = {k: v.copy() for k, v in reps.columns.items()}
    cols["os.y"][row] = 1
    with pytest.raises(ReportError, match="'os.y' is nonzero .* did not sample attribute 'os'"):
        wire.decode(o, wire.encode(Reports(reps.mechanism, reps.fingerprint, cols)))


def test_mixed_radix_perturb_and_tuple_perturb_agree() -> None:
    o = make(2)
    vals = population(100, 15)
    assert o.perturb(o.combine(vals), rng=3) == o.perturb_attributes(vals, rng=3)
    assert np.array_equal(o.split(o.combine(vals)), vals)


@pytest.mark.parametrize("attributes,sample,match", [
    (None, 1, "attributes must be a non-empty list"),
    ([], 1, "attributes must be a non-empty list"),
    ([{"name": "a", "mechanism": "grr", "domain_size": 3}] * 2, 1, "distinct.*'a'"),
    ([{"name": "1a", "mechanism": "grr", "domain_size": 3}], 1, r"attributes\[0\].name"),
    ([{"name": "a", "domain_size": 3}], 1, r"attributes\[0\] \(a\) needs a 'mechanism'"),
    ([{"name": "a", "mechanism": "grr", "domain_size": 3, "epsilon": 1}], 1, "derived"),
    ([{"name": "a", "mechanism": "grr", "domain_size": 1}], 1,
     r"attributes\[0\] \(a\): domain_size"),
    ([{"name": "a", "mechanism": "pem", "bits": 8}], 1, "cannot be an attribute"),
    ([{"name": "a", "mechanism": "grr", "domain_size": 3}], 2, r"sample must be .*\[1, 1\]"),
])
def test_bad_specs_are_parameter_errors_naming_the_problem(attributes: object, sample: int,
                                                           match: str) -> None:
    with pytest.raises(ParameterError, match=match):
        ldpcore.make_oracle("multi", epsilon=1.0, attributes=attributes, sample=sample)


def test_beyond_2_to_the_62_value_tuples_are_perturbed_per_attribute_only() -> None:
    attrs = [{"name": f"a{i}", "mechanism": "grr", "domain_size": 1 << 20} for i in range(4)]
    o = ldpcore.make_oracle("multi", epsilon=1.0, attributes=attrs)
    assert isinstance(o, MultiAttribute) and o.domain_size == 1 << 62 and not o.mixed_radix
    st = o.aggregate(o.perturb_attributes([[1, 2, 3, 4]], rng=1))
    assert st.n == 1 and o.attribute_counts(st).sum() == 1
    with pytest.raises(ParameterError, match="multiply to more than 2\\^62"):
        o.perturb([5], rng=1)
    assert ldpcore.make_oracle(**o.spec) == o


def test_values_outside_an_attributes_domain_name_the_attribute() -> None:
    o = make(1)
    with pytest.raises(ParameterError, match="attribute 'lang'.*\\[0, 6\\), found 6"):
        o.perturb_attributes([[0, 6, 3]], rng=1)
    with pytest.raises(ParameterError, match=r"\(n, 3\) array"):
        o.perturb_attributes([[0, 1]], rng=1)


@pytest.mark.parametrize("epsilon", [1.0, 6.0])
def test_the_effective_size_covers_the_sampling_term_for_every_frequency(epsilon: float
                                                                         ) -> None:
    o, n, n_j = make(1, epsilon=epsilon), 30_000, 10_000
    for name in ("os", "lang"):
        sub = o.attribute(name)
        ne = o.attribute_effective_size(name, n, n_j)
        assert ne < n_j
        for f in np.linspace(0, 1, 37):
            full = o.attribute_variance(name, n, float(f), reports=n_j)
            assert sub.variance(1, float(f)) / ne >= full * (1 - 1e-6)  # type: ignore[attr-defined]
    ne_age = o.attribute_effective_size("age", n, n_j)
    assert o.attribute("age").mean_variance(1) / ne_age == pytest.approx(  # type: ignore[attr-defined]
        o.attribute_mean_variance("age", n, reports=n_j))
    assert make(3).attribute_effective_size("os", n, n) == n  # every report answers it


@pytest.mark.slow
def test_intervals_at_the_effective_size_cover_the_population_frequencies() -> None:
    # At ε = 6 the oracle's noise is small and which third of the devices answered an
    # attribute dominates: intervals from the oracle's variance at n_j alone cover the
    # frequency among all n devices far too rarely; at the effective size they cover it.
    from ldpcore import intervals

    o, n, runs = make(1, epsilon=6.0), 3_000, 300
    vals = population(n, 17)
    f = np.bincount(vals[:, 0], minlength=4) / n
    rng = np.random.default_rng(18)
    hit_eff = hit_raw = 0.0
    for _ in range(runs):
        st = o.aggregate(o.perturb_attributes(vals, rng=rng))
        sub, part = o.attribute("os"), o.attribute_state(st, "os")
        ne = o.attribute_effective_size("os", n, part.n)
        eff = intervals.answer(sub, part, method="base", confidence=0.95, n_effective=ne)
        raw = intervals.answer(sub, part, method="base", confidence=0.95)
        hit_eff += float(np.mean((eff.low <= f) & (f <= eff.high)))
        hit_raw += float(np.mean((raw.low <= f) & (f <= raw.high)))
    # 300 runs × 4 values: the coverage's standard error is about 0.006 at 0.95
    assert hit_eff / runs >= 0.93, hit_eff / runs
    assert hit_raw / runs < 0.6, hit_raw / runs


def test_a_declared_pair_gives_an_unbiased_two_way_marginal() -> None:
    o = ldpcore.make_oracle("multi", epsilon=2.0, attributes=ATTRS[:2],
                            pairs=[["os", "lang"]])
    assert isinstance(o, MultiAttribute)
    assert o.attribute_names == ("os", "lang", "os*lang")
    assert o.input_names == ("os", "lang") and o.attribute("os*lang").domain_size == 24
    assert ldpcore.make_oracle(**o.spec) == o
    n, runs = 20_000, 10
    vals = population(n, 19)[:, :2]
    joint = np.bincount(vals[:, 0] * 6 + vals[:, 1], minlength=24).reshape(4, 6) / n
    rng = np.random.default_rng(20)
    tables = [o.marginal(o.aggregate(o.perturb_attributes(vals, rng=rng)), "os", "lang")
              for _ in range(runs)]
    sd = np.sqrt([o.attribute_variance("os*lang", n, float(f)) / runs for f in joint.ravel()])
    assert np.all(np.abs(np.mean(tables, axis=0).ravel() - joint.ravel()) <= Z * sd)
    with pytest.raises(ParameterError, match="not a declared pair"):
        o.marginal(o.new_state(), "lang", "os")


@pytest.mark.parametrize("pairs,match", [
    ([["os", "os"]], "two different attributes"),
    ([["os", "nope"]], "two different attributes"),
    ([["os", "lang"], ["lang", "os"]], "declared twice"),
    ([{"attributes": ["os", "lang"], "mechanism": "pm", "bins": 24}], "frequency oracle"),
    ("os*lang", "pairs must be a list"),
])
def test_bad_pairs_are_parameter_errors(pairs: object, match: str) -> None:
    with pytest.raises(ParameterError, match=match):
        ldpcore.make_oracle("multi", epsilon=1.0, attributes=ATTRS, pairs=pairs)
