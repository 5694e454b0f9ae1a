"""Subset selection samples every k-subset with the probability the mechanism promises."""

from __future__ import annotations

import math
from collections import Counter
from itertools import combinations

import numpy as np
from scipy import stats

import ldpcore


def test_reports_are_uniform_over_subsets_with_and_without_the_true_value() -> None:
    d, k, n = 6, 3, 120_000
    o = ldpcore.make_oracle("ss", epsilon=1.0, domain_size=d, subset_size=k)
    bits = np.unpackbits(o.perturb(np.zeros(n, dtype=np.int64), rng=11).columns["bits"],
                         axis=1, bitorder="little")[:, :d]
    assert np.all(bits.sum(axis=1) == k)
    seen = Counter(tuple(np.flatnonzero(row)) for row in bits)
    with_v = [s for s in combinations(range(d), k) if 0 in s]
    without = [s for s in combinations(range(d), k) if 0 not in s]
    n_with = sum(seen[s] for s in with_v)
    # P(the true value is in the set) = p; binomial tolerance of 5 s.d.
    assert abs(n_with / n - o.p) < 5 * math.sqrt(o.p * (1 - o.p) / n)
    # Given inclusion (or not), every subset equally likely: chi-square at level 1e-4.
    for group, total in ((with_v, n_with), (without, n - n_with)):
        observed = [seen[s] for s in group]
        expected = [total / len(group)] * len(group)
        assert stats.chisquare(observed, expected).pvalue > 1e-4


def test_large_domains_keep_exactly_k_members() -> None:
    o = ldpcore.make_oracle("ss", epsilon=0.5, domain_size=40_000, subset_size=9_000)
    bits = o.perturb(np.arange(300) * 97, rng=2).columns["bits"]
    ones = np.unpackbits(bits, axis=1, bitorder="little").sum(axis=1)
    assert np.all(ones == 9_000)
