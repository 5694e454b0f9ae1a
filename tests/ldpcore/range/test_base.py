"""ldpcore.range.base: what every range oracle answers from its leaves (RangeMixin)."""

from __future__ import annotations

import numpy as np
import pytest

import ldpcore
from ldpcore.errors import ParameterError, StateError
from ldpcore.range.base import check_range_method


def test_the_range_method_is_checked_by_name() -> None:
    assert check_range_method("consistent") == "consistent"
    with pytest.raises(ParameterError, match=r"method must be one of \['unbiased', "):
        check_range_method("x")


@pytest.mark.parametrize("mech", ["hh", "haar"])
def test_ranges_prefixes_cdf_and_histogram_agree_with_the_leaves(mech: str) -> None:
    o = ldpcore.make_oracle(mech, epsilon=2.0, domain_size=16)
    st = o.aggregate(o.perturb(np.random.default_rng(1).integers(0, 16, 4000), rng=2))
    leaves = o.leaves(st)
    np.testing.assert_allclose(o.histogram(st), leaves)
    np.testing.assert_allclose(o.cdf(st), np.cumsum(leaves))
    assert o.range_query(st, 3, 9) == pytest.approx(leaves[3:10].sum())
    assert o.prefix(st, 5) == pytest.approx(leaves[:6].sum())
    cons = o.leaves(st, method="consistent")
    assert (cons >= 0).all() and cons.sum() == pytest.approx(1.0)
    assert 0 <= o.quantile(st, 0.5, method="consistent") < 16


def test_a_range_outside_the_domain_or_an_empty_state_is_refused() -> None:
    o = ldpcore.make_oracle("hh", epsilon=1.0, domain_size=8)
    st = o.aggregate(o.perturb([1, 2, 3], rng=1))
    with pytest.raises(ParameterError):
        o.range_query(st, 5, 8)
    with pytest.raises(ParameterError):
        o.range_query(st, 4, 2)
    with pytest.raises(StateError, match="empty state"):
        o.cdf(o.new_state())
