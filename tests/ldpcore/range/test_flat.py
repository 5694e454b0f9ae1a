"""ldpcore.range.flat: range queries answered by summing a flat oracle's estimates."""

from __future__ import annotations

import numpy as np
import pytest

import ldpcore
from ldpcore.range.flat import FlatRange


def test_a_range_is_the_sum_of_its_estimates_and_its_variance_adds_up() -> None:
    o = ldpcore.make_oracle("oue", epsilon=1.0, domain_size=16)
    flat = FlatRange(o)
    st = o.aggregate(o.perturb(np.arange(16).repeat(50), rng=1))
    assert flat.range_query(st, 2, 9) == pytest.approx(o.estimate(st)[2:10].sum())
    # Unbiased estimates are independent-ish: the range variance is the sum of 8 leaves'.
    assert flat.range_variance(800, 2, 9) == pytest.approx(8 * o.variance(800), rel=0.3)
    assert flat.range_variance(800, 0, 15) > flat.range_variance(800, 0, 1)


def test_the_consistent_fit_is_norm_sub_of_the_estimates() -> None:
    o = ldpcore.make_oracle("grr", epsilon=0.5, domain_size=8)
    flat = FlatRange(o)
    st = o.aggregate(o.perturb(np.zeros(200, dtype=np.int64), rng=2))
    leaves = flat.leaves(st, method="consistent")
    assert (leaves >= 0).all() and leaves.sum() == pytest.approx(1.0)
