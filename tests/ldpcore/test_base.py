"""FrequencyOracle.sample_state: simulated states match perturb + aggregate in distribution.

For n values drawn i.i.d. from f, every estimate has mean f(v) and variance
``oracle.variance(n, f(v)) + f(v)(1 - f(v))/n`` (the mechanism's variance for a fixed
population, plus the multinomial spread of the population; exact because every
variance here is linear in f).  Each mechanism's sampler is checked against that and
against real perturb + aggregate, with tolerances from those variances.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

import ldpcore
from ldpcore.base import FrequencyOracle

MECHANISMS = ["grr", "sue", "oue", "blh", "olh", "hr", "hrr", "ss", "cms", "hcms"]
D, N = 10, 2_000
F = np.array([0.3, 0.2, 0.15, 0.1, 0.08, 0.07, 0.05, 0.05, 0.0, 0.0])
SAMPLED, PERTURBED = 2_000, 200
Z = 4.5  # per entry; 10 entries × 2 checks per mechanism: a false failure is < 1e-4


def iid_variance(oracle: FrequencyOracle) -> np.ndarray:
    return np.array([oracle.variance(N, float(f)) + f * (1 - f) / N for f in F])


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_sampled_states_have_the_estimators_mean_and_variance(mechanism: str) -> None:
    oracle = ldpcore.make_oracle(mechanism, epsilon=1.0, domain_size=D)
    est = oracle.estimate_counts(oracle.sample_counts(F, N, size=SAMPLED, rng=11), N)
    var = iid_variance(oracle)
    assert np.all(np.abs(est.mean(axis=0) - F) <= Z * np.sqrt(var / SAMPLED))
    # The sample variance of R draws has relative standard deviation ≈ sqrt(2/(R-1)).
    rel = Z * math.sqrt(2 / (SAMPLED - 1))
    assert np.all(np.abs(est.var(axis=0, ddof=1) / var - 1) <= rel)


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_sampled_states_agree_with_perturb_and_aggregate(mechanism: str) -> None:
    oracle = ldpcore.make_oracle(mechanism, epsilon=1.0, domain_size=D)
    rng = np.random.default_rng(5)
    real = np.stack([oracle.estimate(oracle.aggregate(oracle.perturb(
        rng.choice(D, size=N, p=F), rng=rng))) for _ in range(PERTURBED)])
    sim = oracle.estimate_counts(oracle.sample_counts(F, N, size=PERTURBED, rng=6), N)
    var = iid_variance(oracle)
    se_diff = np.sqrt(2 * var / PERTURBED)
    assert np.all(np.abs(real.mean(axis=0) - sim.mean(axis=0)) <= Z * se_diff)
    # Ratio of two sample variances of R draws: log-ratio sd ≈ sqrt(4/(R-1)).
    ratio = np.log(sim.var(axis=0, ddof=1) / real.var(axis=0, ddof=1))
    assert np.all(np.abs(ratio) <= Z * math.sqrt(4 / (PERTURBED - 1)))


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_sample_state_is_a_state_of_the_oracle_and_reproducible(mechanism: str) -> None:
    oracle = ldpcore.make_oracle(mechanism, epsilon=2.0, domain_size=D)
    a = oracle.sample_state(F, 500, rng=3)
    assert a == oracle.sample_state(F, 500, rng=3)
    assert a.n == 500 and a.fingerprint == oracle.fingerprint
    assert a.counts.shape == oracle.state_shape and a.counts.min() >= 0
    assert np.isfinite(oracle.estimate(a)).all()


def test_the_generic_sampler_perturbs_and_matches_the_channel_sampler() -> None:
    oracle = ldpcore.make_oracle("grr", epsilon=1.0, domain_size=D)
    slow = oracle.estimate_counts(
        FrequencyOracle._sample_counts(oracle, F, N, PERTURBED, np.random.default_rng(1)), N)
    var = iid_variance(oracle)
    assert np.all(np.abs(slow.mean(axis=0) - F) <= Z * np.sqrt(var / PERTURBED))
    assert oracle.sample_cost(N) == 2 * D  # the channel sampler: state size + d


def test_a_distribution_that_is_not_a_probability_vector_is_refused() -> None:
    oracle = ldpcore.make_oracle("grr", epsilon=1.0, domain_size=3)
    for bad in ([0.5, 0.5], [0.5, 0.6, -0.1], [0.2, 0.2, 0.2], [np.nan, 0.5, 0.5]):
        with pytest.raises(ldpcore.ParameterError, match="distribution"):
            oracle.sample_state(bad, 10, rng=1)
    with pytest.raises(ldpcore.ParameterError, match="n must be"):
        oracle.sample_state([1.0, 0.0, 0.0], -1, rng=1)


def test_local_hashing_pushes_the_distribution_through_every_hash() -> None:
    oracle = ldpcore.make_oracle("olh", epsilon=1.5, domain_size=20)
    f = np.random.default_rng(2).dirichlet(np.ones(20))
    mass = oracle.hashed_mass(f)
    a = np.arange(oracle.n_hashes)
    brute = np.zeros_like(mass)
    for v in range(20):
        np.add.at(brute, (a, oracle.hash_values(a, np.full_like(a, v))), f[v])
    np.testing.assert_allclose(mass, brute, atol=1e-12)


def test_estimate_is_made_once_per_state_and_each_caller_gets_its_own_copy() -> None:
    from ldpcore.base import KEPT_ESTIMATES, owned

    o = ldpcore.make_oracle("olh", epsilon=1.0, domain_size=32)
    s = o.sample_state(np.full(32, 1 / 32), 20_000, rng=2)
    calls = []
    inner = o._estimate
    o._estimate = lambda c, n: calls.append(n) or inner(c, n)  # type: ignore[method-assign]
    first = o.estimate(s)
    first[:] = 7.0  # the caller's copy: the kept estimate is not changed
    again = o.estimate(ldpcore.State(s.fingerprint, s.n, s.counts.copy()))
    assert len(calls) == 1 and np.array_equal(again, inner(s.counts, s.n))
    assert not o.kept_estimate(s).raw.flags.writeable
    # Counts changed in place are another state: estimated again.
    s.counts[0, 0] += 100
    assert np.array_equal(o.estimate(s), inner(s.counts, s.n)) and len(calls) == 2
    # Only the latest states are kept.
    for k in range(KEPT_ESTIMATES + 2):
        o.estimate(o.sample_state(np.full(32, 1 / 32), 1000 + k, rng=k))
    assert len(owned(o, "_kept_estimates")) == KEPT_ESTIMATES


def test_a_copy_with_other_probabilities_keeps_nothing_of_the_original() -> None:
    # ldpcore.longitudinal's composed channel is a shallow copy with other p and q: the
    # estimate, variances and subset weights the original kept are not the copy's.
    import copy

    from ldpcore import intervals

    o: Any = ldpcore.make_oracle("olh", epsilon=1.0, domain_size=32)
    f = np.full(32, 1 / 32)
    s = o.sample_state(f, 20_000, rng=3)
    n = s.n
    for oracle in (o, o):  # made, then kept
        mine = (oracle.estimate(s), intervals._value_variances(oracle, n, f),
                oracle.subset_variance(n, [1, 2], f))
    c: Any = copy.copy(o)
    c.p, c.q = 0.9, 0.05
    twin: Any = ldpcore.make_oracle("olh", epsilon=1.0, domain_size=32)
    twin.p, twin.q = 0.9, 0.05  # the same probabilities, nothing kept before
    assert np.array_equal(c.estimate(s), twin.estimate(s))
    assert np.array_equal(intervals._value_variances(c, n, f),
                          intervals._value_variances(twin, n, f))
    assert c.subset_variance(n, [1, 2], f) == twin.subset_variance(n, [1, 2], f)
    assert not np.array_equal(c.estimate(s), mine[0])
    # The original still has its own.
    assert np.array_equal(o.estimate(s), mine[0])
    assert o.subset_variance(n, [1, 2], f) == mine[2]
