"""ldpcore.setvalued.base: set batches, padding and sampling (Wang et al. 2018, LDPMiner)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ldpcore.errors import ParameterError
from ldpcore.setvalued.base import (
    SetBatch,
    amplified_epsilon,
    check_candidates,
    check_itemsets,
    padded_sample,
    ps_variance,
)


def test_a_batch_keeps_its_sets_and_restricts_them_to_candidates() -> None:
    b = SetBatch.from_any([[1, 2], [3], []], 5)
    assert b.lengths.tolist() == [2, 1, 0] and b.owners.tolist() == [0, 0, 1]
    assert b.to_lists() == [[1, 2], [3], []]
    assert b.restrict([1, 3]).to_lists() == [[0], [1], []]  # indices among the candidates
    assert b.itemsets([[1, 2], [3]]).to_lists() == [[0], [1], []]


def test_padding_to_l_samples_each_item_with_one_over_max_size_l() -> None:
    n, length = 60_000, 4
    b = SetBatch.from_any([[0, 1]] * n, 3)
    out = padded_sample(b, length, np.random.default_rng(1))
    share = np.bincount(out, minlength=3 + length) / n
    tol = 5 * math.sqrt(0.25 / n)
    assert abs(share[0] - 0.25) < tol and abs(share[1] - 0.25) < tol and share[2] == 0
    assert abs(share[3:].sum() - 0.5) < tol  # (l - |v|)/l of dummies


def test_amplification_and_the_variance_reduce_to_the_plain_oracle_at_l_1() -> None:
    assert amplified_epsilon(1.0, 1) == pytest.approx(1.0)
    assert amplified_epsilon(1.0, 4) == pytest.approx(math.log(4 * math.expm1(1.0) + 1))
    p, q, n = 0.5, 0.25, 100
    assert ps_variance(p, q, 1, n, 0.0) == pytest.approx(q * (1 - q) / (n * (p - q) ** 2))
    assert ps_variance(p, q, 3, n, 0.1) > ps_variance(p, q, 1, n, 0.1)


def test_candidates_and_itemsets_are_validated() -> None:
    assert check_candidates([3, 1], 5) == [3, 1]
    assert check_itemsets([[2, 1], [4]], 5) == [[1, 2], [4]]
    for bad in ([], [1, 1], [5], "ab"):
        with pytest.raises(ParameterError, match="candidates"):
            check_candidates(bad, 5)
    with pytest.raises(ParameterError, match="itemsets must be distinct"):
        check_itemsets([[1, 2], [2, 1]], 5)
