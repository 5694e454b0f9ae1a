"""The word-stream reference perturbation (ldpcore.reference) is distributed as ``perturb``.

For every mechanism (small parameters, a skewed input distribution), N reports from
:func:`perturb_reference` and N from numpy's ``perturb`` go through a two-sample
chi-square test of homogeneity over the distinct reports (cells with few expected
reports pooled); the test fails only below p = 1e-6, so a correct pair fails once in a
million runs, while a wrong draw order (a biased coin, a shifted uniform) is caught.
The PEM hash pool and the CMS/HCMS hashes are compared with ldpcore's own.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from scipy import stats

import ldpcore
from ldpcore._field import _primitive_poly
from ldpcore.longitudinal import TwoLevel
from ldpcore.reference import (
    NumpyWords,
    WordStream,
    below,
    pcg64_words,
    pem_hash_pool,
    perturb_reference,
    rerandomize_reference,
    sketch_hash,
    uniform,
)

N = 12_000
P_FAIL = 1e-6

CASES: list[tuple[str, dict[str, Any]]] = [
    ("grr", {"epsilon": 1.0, "domain_size": 5}),
    ("sue", {"epsilon": 1.0, "domain_size": 3}),
    ("oue", {"epsilon": 1.0, "domain_size": 4}),
    ("blh", {"epsilon": 1.0, "domain_size": 5}),
    ("olh", {"epsilon": 2.0, "domain_size": 5}),
    ("hr", {"epsilon": 1.0, "domain_size": 5}),
    ("hrr", {"epsilon": 1.0, "domain_size": 5}),
    ("ss", {"epsilon": 1.0, "domain_size": 6, "subset_size": 2}),
    ("cms", {"epsilon": 2.0, "domain_size": 6, "m": 3}),
    ("hcms", {"epsilon": 2.0, "domain_size": 6, "m": 4}),
    ("hh", {"epsilon": 1.0, "domain_size": 8, "fanout": 2}),
    ("hh", {"epsilon": 1.0, "domain_size": 4, "fanout": 2, "base": "oue"}),
    ("haar", {"epsilon": 1.0, "domain_size": 8}),
    ("sw", {"epsilon": 1.0, "bins": 4, "out_bins": 8}),
    ("duchi", {"epsilon": 1.0, "bins": 4}),
    ("pem", {"epsilon": 2.0, "bits": 4, "keep": 2, "eta": 1, "pool": 4}),
]


def _homogeneity_p(a: list[bytes], b: list[bytes]) -> float:
    keys = sorted(set(a) | set(b))
    idx = {k: i for i, k in enumerate(keys)}
    ca = np.bincount([idx[k] for k in a], minlength=len(keys)).astype(float)
    cb = np.bincount([idx[k] for k in b], minlength=len(keys)).astype(float)
    small = (ca + cb) < 10
    if small.any():
        ca = np.append(ca[~small], ca[small].sum())
        cb = np.append(cb[~small], cb[small].sum())
    table = np.stack([ca, cb])
    table = table[:, table.sum(axis=0) > 0]
    if table.shape[1] < 2:
        return 1.0
    return float(stats.chi2_contingency(table, correction=False).pvalue)


def _values(oracle: ldpcore.Mechanism, seed: int) -> np.ndarray:
    d = min(oracle.domain_size, 16)
    weights = np.arange(1, d + 1, dtype=float)
    return np.random.default_rng(seed).choice(d, size=N, p=weights / weights.sum())


@pytest.mark.parametrize(("mech", "params"), CASES, ids=[f"{m}-{i}" for i, (m, _) in
                                                         enumerate(CASES)])
def test_reference_perturbation_is_distributed_as_numpy_perturb(mech: str,
                                                                 params: dict[str, Any]) -> None:
    o = ldpcore.make_oracle(mech, **params)
    values = _values(o, 1)
    ref = perturb_reference(o, values, NumpyWords(2)).row_keys()
    fast = o.perturb(values, rng=3).row_keys()
    assert _homogeneity_p(ref, fast) > P_FAIL


def test_pm_reference_mean_is_unbiased_within_the_analytic_error() -> None:
    # PM has 2^16 + 1 report levels: compare the mean (its estimand) instead of cells.
    o = ldpcore.make_oracle("pm", epsilon=1.0, bins=4, low=0.0, high=1.0)
    values = _values(o, 4)
    st = o.aggregate(perturb_reference(o, values, NumpyWords(5)))
    truth = float(((values + 0.5) / 4).mean())
    z = stats.norm.isf(P_FAIL / 2)
    assert abs(o.mean(st) - truth) < z * o.mean_std_error(N)


@pytest.mark.parametrize("mech", ["grr", "oue", "olh", "hrr"])
def test_reference_rerandomize_is_distributed_as_two_level(mech: str) -> None:
    tl = TwoLevel(ldpcore.make_oracle(mech, epsilon=2.0, domain_size=4), epsilon_1=1.0)
    values = _values(tl.oracle, 6)
    z = tl.memoize(values, rng=7)
    ref = rerandomize_reference(tl, z, NumpyWords(8)).row_keys()
    fast = tl.rerandomize(z, rng=9).row_keys()
    assert _homogeneity_p(ref, fast) > P_FAIL


def test_primitives_follow_the_documented_word_arithmetic() -> None:
    assert uniform(WordStream([0xFFFFFFFF, 0xFFFFFFFF])) == 1 - 2.0**-53
    assert uniform(WordStream([32, 64])) == (2**26 + 1) / 2.0**53
    src = WordStream([0xFFFFFFFF, 10])  # 2^32 - 1 >= 3 * floor(2^32 / 3): rejected
    assert below(src, 3) == 1 and src.used == 2


def test_pcg64_port_replays_numpy_default_rng() -> None:
    for seed in (0, 1, 2**40 + 3):
        want = np.random.default_rng(seed).integers(0, 2**63, size=6, dtype=np.uint64)
        assert [w >> 1 for w in pcg64_words(seed, 6)] == want.tolist()
    o = ldpcore.make_oracle("pem", epsilon=2.0, bits=12, keep=4, eta=3, pool=16, hash_seed=9)
    a, b = pem_hash_pool(9, len(o.lengths), 16)
    assert a == o._a.reshape(-1).tolist() and b == o._b.reshape(-1).tolist()


@pytest.mark.parametrize(("mech", "m", "d"), [("cms", 7, 40), ("hcms", 8, 300),
                                              ("hcms", 2, 10)])
def test_sketch_hash_matches_the_oracles_table(mech: str, m: int, d: int) -> None:
    o: Any = ldpcore.make_oracle(mech, epsilon=1.0, domain_size=d, m=m)
    poly = _primitive_poly(m.bit_length() - 1) if m > 2 and mech == "hcms" else 0
    table = o._hash_table
    assert all(sketch_hash(m, o.r, poly, j, x) == table[j, x]
               for j in range(o.k) for x in range(d))


SET_CASES: list[tuple[str, dict[str, Any]]] = [
    ("ps", {"epsilon": 1.0, "domain_size": 5, "length": 2}),
    ("ps", {"epsilon": 1.0, "domain_size": 6, "length": 3, "inner": "olh",
            "candidates": [5, 0, 2]}),
    ("psi", {"epsilon": 1.0, "domain_size": 4, "length": 2,
             "itemsets": [[0, 1], [2], [1, 3]]}),
    ("setsize", {"epsilon": 1.0, "domain_size": 5, "max_size": 3, "candidates": [0, 1, 2, 4]}),
    ("setsize", {"epsilon": 2.0, "domain_size": 4, "itemsets": [[0, 1], [2, 3]],
                 "inner": "oue"}),
]


def _sets(d: int, seed: int) -> list[list[int]]:
    """N sets with item x held with probability (x + 1) / (d + 1): sizes 0..d, skewed."""
    member = np.random.default_rng(seed).random((N, d)) < (np.arange(d) + 1) / (d + 1)
    return [np.flatnonzero(row).tolist() for row in member]


@pytest.mark.parametrize(("mech", "params"), SET_CASES,
                         ids=[f"{m}-{i}" for i, (m, _) in enumerate(SET_CASES)])
def test_reference_set_perturbation_is_distributed_as_perturb_sets(
        mech: str, params: dict[str, Any]) -> None:
    o: Any = ldpcore.make_oracle(mech, **params)
    sets = _sets(o.domain_size, 10)
    ref = perturb_reference(o, sets, NumpyWords(11)).row_keys()
    fast = o.perturb_sets(sets, rng=12).row_keys()
    assert _homogeneity_p(ref, fast) > P_FAIL


def test_padded_sampling_draws_each_entry_and_dummy_as_documented() -> None:
    # s = 2 entries padded to l = 4: t = below(4) = 3 >= s, so a dummy m + below(4).
    from ldpcore.reference import padded_entry

    src = WordStream([3, 1])
    assert padded_entry(src, [7, 9], 10, 4) == 11 and src.used == 2
    # s = 5 > l = 2: t = below(5) = 4 picks the last entry, one word.
    src = WordStream([4])
    assert padded_entry(src, [1, 2, 3, 4, 5], 10, 2) == 5 and src.used == 1


MULTI_CASES: list[dict[str, Any]] = [
    {"sample": 2, "attributes": [{"name": "a", "mechanism": "grr", "domain_size": 3},
                                 {"name": "b", "mechanism": "duchi", "bins": 4},
                                 {"name": "c", "mechanism": "oue", "domain_size": 3}]},
    {"sample": 1, "attributes": [{"name": "a", "mechanism": "grr", "domain_size": 2},
                                 {"name": "b", "mechanism": "olh", "domain_size": 3}],
     "pairs": [["a", "b"]]},
    {"sample": 3, "attributes": [{"name": "a", "mechanism": "hrr", "domain_size": 4},
                                 {"name": "b", "mechanism": "sw", "bins": 3, "out_bins": 4},
                                 {"name": "c", "mechanism": "grr", "domain_size": 2}]},
]


@pytest.mark.parametrize("params", MULTI_CASES, ids=[f"multi-{i}" for i in range(3)])
def test_reference_multi_perturbation_is_distributed_as_perturb_attributes(
        params: dict[str, Any]) -> None:
    o: Any = ldpcore.make_oracle("multi", epsilon=2.0, **params)
    rng = np.random.default_rng(13)
    rows = np.stack([rng.choice(d, size=N, p=np.arange(1, d + 1) / (d * (d + 1) / 2))
                     for d in o._radix], axis=1)
    ref = perturb_reference(o, rows.tolist(), NumpyWords(14)).row_keys()
    fast = o.perturb_attributes(rows, rng=15).row_keys()
    assert _homogeneity_p(ref, fast) > P_FAIL


def test_reference_vector_perturbation_is_distributed_as_perturb_vectors() -> None:
    o: Any = ldpcore.make_oracle("vector", epsilon=2.0, dimensions=3, sample=2, base="duchi")
    x = np.random.default_rng(16).uniform(-1.2, 1.0, size=(N, 3)) * [1.0, 0.5, -0.8]
    ref = perturb_reference(o, x.tolist(), NumpyWords(17)).row_keys()
    fast = o.perturb_vectors(x, rng=18).row_keys()
    assert _homogeneity_p(ref, fast) > P_FAIL


def test_reference_pm_vector_means_are_unbiased_within_the_analytic_error() -> None:
    o: Any = ldpcore.make_oracle("vector", epsilon=2.0, dimensions=2, sample=1)
    x = np.random.default_rng(19).uniform(-1.0, 1.0, size=(N, 2)) * [0.9, 0.3] + [0.0, 0.5]
    st = o.aggregate(perturb_reference(o, x.tolist(), NumpyWords(20)))
    z = stats.norm.isf(P_FAIL / 4)
    assert np.all(np.abs(o.means(st) - x.mean(axis=0)) < z * np.sqrt(o.mean_variances(st)))


def test_question_sampling_is_a_partial_fisher_yates_shuffle() -> None:
    from ldpcore.reference import sample_questions

    src = WordStream([2, 0])  # i = 0: j = 0 + 2, swap -> [2, 1, 0]; i = 1: j = 1 + 0
    assert sample_questions(src, 3, 2) == [1, 2] and src.used == 2
