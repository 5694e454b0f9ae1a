"""Padding-and-sampling oracles over item sets: unbiasedness, variance, privacy, inputs."""

from __future__ import annotations

from statistics import NormalDist

import numpy as np
import pytest

import ldpcore
from ldpcore.audit import audit
from ldpcore.base import Reports
from ldpcore.frequency.lh import OLH
from ldpcore.setvalued.base import SetBatch, amplified_epsilon, padded_sample
from ldpcore.setvalued.ps import PaddingSampling

R = 200
D = 12
L = 3


def population(n: int) -> list[list[int]]:
    """Sets of sizes 0..3 (all within l = 3), skewed towards the low items."""
    rng = np.random.default_rng(5)
    out = []
    for _ in range(n):
        size = int(rng.integers(0, 4))
        out.append(sorted(set(rng.choice(6, size=size, p=[.4, .2, .15, .1, .1, .05]).tolist())))
    return out


@pytest.mark.parametrize("inner", ["grr", "olh"])
def test_padded_estimates_are_unbiased_with_the_analytic_variance(inner: str) -> None:
    o = ldpcore.make_oracle("ps", epsilon=1.0, domain_size=D, length=L, inner=inner)
    assert isinstance(o, PaddingSampling)
    sets = population(3000)
    batch = SetBatch.from_any(sets, D)
    f = np.bincount(batch.items, minlength=D) / len(sets)
    rng = np.random.default_rng(20261123)
    est = np.stack([o.estimate(o.aggregate(o.perturb_sets(batch, rng=rng))) for _ in range(R)])
    var = np.array([o.variance(len(sets), float(x)) for x in f])
    z = NormalDist().inv_cdf(1 - 1e-3 / (2 * D))
    assert np.all(np.abs(est.mean(axis=0) - f) <= z * np.sqrt(var / R))
    # Pooled over all 12 items, the sample variance is within ±15 % (> 3σ at R = 200).
    assert est.var(axis=0, ddof=1).sum() / var.sum() == pytest.approx(1.0, abs=0.15)


def test_grr_runs_at_the_amplified_epsilon_and_olh_at_epsilon() -> None:
    grr = ldpcore.make_oracle("ps", epsilon=1.0, domain_size=D, length=4, inner="grr")
    olh = ldpcore.make_oracle("ps", epsilon=1.0, domain_size=D, length=4, inner="olh")
    assert isinstance(grr, PaddingSampling) and isinstance(olh, PaddingSampling)
    assert grr.inner_epsilon == pytest.approx(np.log(4 * (np.e - 1) + 1))
    assert olh.inner_epsilon == 1.0
    auto = ldpcore.make_oracle("ps", epsilon=1.0, domain_size=D, length=4)
    assert auto.spec["inner"] == ("grr" if grr.variance(1) <= olh.variance(1) else "olh")
    big = ldpcore.make_oracle("ps", epsilon=1.0, domain_size=4096, length=1)
    assert big.spec["inner"] == "olh"  # GRR's variance grows with d


SETS = [[0, 1], [2, 3], [0], [], [1, 2, 3], [3]]


def _set_perturb(o: PaddingSampling):  # type: ignore[no-untyped-def]
    def perturb(values: np.ndarray, rng: np.random.Generator) -> Reports:
        return o.perturb_sets([SETS[int(v)] for v in values], rng=rng)
    return perturb


def test_padded_grr_satisfies_epsilon_over_sets_and_spends_it() -> None:
    o = ldpcore.make_oracle("ps", epsilon=1.0, domain_size=4, length=2, inner="grr")
    assert isinstance(o, PaddingSampling)
    res = audit(_set_perturb(o), epsilon=1.0, domain_size=len(SETS), trials=40_000, seed=3)
    assert not res.violated and res.tight, res


def test_audit_catches_padded_grr_at_twice_epsilon() -> None:
    o = ldpcore.make_oracle("ps", epsilon=2.0, domain_size=4, length=2, inner="grr")
    assert isinstance(o, PaddingSampling)
    assert audit(_set_perturb(o), epsilon=1.0, domain_size=len(SETS), trials=40_000,
                 seed=4).violated


def test_olh_at_the_amplified_epsilon_is_caught() -> None:
    """Why OLH runs at ε: sets whose items collide under a hash leak e^ε', not e^ε."""
    eps, length, d = 1.0, 2, 20
    inner = OLH(epsilon=amplified_epsilon(eps, length), domain_size=d + length)
    pairs = [[0, 5], [1, 2]]  # 0 and 5 collide under the 5 hashes a = (a0, 0) of GF(5)^2

    def perturb(values: np.ndarray, rng: np.random.Generator) -> Reports:
        batch = SetBatch.from_any([pairs[int(v)] for v in values], d)
        return Reports("olh", inner.fingerprint,
                       inner._perturb(padded_sample(batch, length, rng), rng))

    assert audit(perturb, epsilon=eps, domain_size=2, trials=60_000, seed=1).violated
    fair = ldpcore.make_oracle("ps", epsilon=eps, domain_size=d, length=length, inner="olh")
    assert isinstance(fair, PaddingSampling)
    res = audit(lambda v, rng: fair.perturb_sets([pairs[int(x)] for x in v], rng=rng),
                epsilon=eps, domain_size=2, trials=60_000, seed=1)
    assert not res.violated, res


def test_padded_sample_draws_items_and_dummies_with_the_stated_probabilities() -> None:
    batch = SetBatch.from_any([[0, 1]] * 20_000 + [[0, 1, 2, 3, 4, 5]] * 20_000, 6)
    out = padded_sample(batch, 4, np.random.default_rng(1))
    small, large = out[:20_000], out[20_000:]
    # |v| = 2 <= l = 4: each item 1/4, a dummy (values 6..9) 1/2.
    assert np.mean(small == 0) == pytest.approx(0.25, abs=0.015)
    assert np.mean(small >= 6) == pytest.approx(0.5, abs=0.015)
    # |v| = 6 > l: every item 1/6, never a dummy.
    assert np.all(large < 6) and np.mean(large == 5) == pytest.approx(1 / 6, abs=0.015)


def test_candidates_restrict_the_sets_and_zero_the_other_items() -> None:
    o = ldpcore.make_oracle("ps", epsilon=2.0, domain_size=8, length=2, candidates=[5, 1])
    st = o.aggregate(o.perturb_sets([[1, 5, 7]] * 5000, rng=2))
    est = o.estimate(st)
    assert est[[0, 2, 3, 4, 6, 7]].tolist() == [0.0] * 6
    se = o.std_error(5000, 1.0)
    assert abs(est[1] - 1) < 4 * se and abs(est[5] - 1) < 4 * se


@pytest.mark.parametrize("bad", [[[0, 9]], [["a"]], "abc", [[0.5]], np.zeros((2, 3))])
def test_bad_sets_are_parameter_errors(bad: object) -> None:
    o = ldpcore.make_oracle("ps", epsilon=1.0, domain_size=8)
    with pytest.raises(ldpcore.ParameterError):
        o.perturb_sets(bad, rng=1)  # type: ignore[attr-defined]


def test_sets_in_every_input_form_give_the_same_batch() -> None:
    lists = SetBatch.from_any([[2, 0], [], [1, 1]], 3)
    matrix = SetBatch.from_any(np.array([[1, 0, 1], [0, 0, 0], [0, 1, 0]]), 3)
    assert lists.to_lists() == matrix.to_lists() == [[0, 2], [], [1]]
    assert SetBatch.from_any(np.array([2, 0]), 3).to_lists() == [[2], [0]]
    assert lists[np.array([2, 0])].to_lists() == [[1], [0, 2]]


@pytest.mark.parametrize("params", [{"length": 0}, {"length": 5000}, {"inner": "oue"},
                                    {"candidates": []}, {"candidates": [1, 1]},
                                    {"candidates": [9]}])
def test_bad_parameters_name_the_parameter(params: dict[str, object]) -> None:
    with pytest.raises(ldpcore.ParameterError, match=next(iter(params))):
        ldpcore.make_oracle("ps", epsilon=1.0, domain_size=8, **params)


def test_itemset_supports_are_unbiased_within_their_error() -> None:
    o = ldpcore.make_oracle("psi", epsilon=2.0, domain_size=6, length=3,
                            itemsets=[[0, 1], [1, 2], [4]])
    sets = [[0, 1, 2]] * 3000 + [[0, 1]] * 3000 + [[5]] * 4000
    sup, se = o.itemset_support(o.aggregate(o.perturb_sets(sets, rng=8)))  # type: ignore
    truth = np.array([0.6, 0.3, 0.0])
    assert np.all(np.abs(sup - truth) < 4 * se), (sup, se)


def test_set_sizes_recover_the_size_distribution_and_its_percentile() -> None:
    o = ldpcore.make_oracle("setsize", epsilon=2.0, domain_size=10, candidates=[0, 1, 2, 3],
                            max_size=4)
    sets = [[0]] * 5000 + [[0, 1, 9]] * 3000 + [[0, 1, 2, 3, 4]] * 2000
    st = o.aggregate(o.perturb_sets(sets, rng=6))
    dist = o.size_distribution(st)  # type: ignore[attr-defined]
    assert dist == pytest.approx([0, 0.5, 0.3, 0, 0.2], abs=0.04)
    assert o.size_percentile(st, 0.9) == 4  # type: ignore[attr-defined]
    assert o.size_percentile(st, 0.5) == 1  # type: ignore[attr-defined]
