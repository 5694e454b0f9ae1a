"""Count-mean sketches on every small domain, including those where rows k equal d."""

from __future__ import annotations

import math

import numpy as np
import pytest

import ldpcore


@pytest.mark.parametrize("mech", ["cms", "hcms"])
@pytest.mark.parametrize("d", range(2, 41))
def test_estimates_have_the_domain_shape_and_find_a_point_mass(mech: str, d: int) -> None:
    o = ldpcore.make_oracle(mech, epsilon=2.0, domain_size=d)
    v = d // 2
    n = 20_000
    est = o.estimate(o.aggregate(o.perturb(np.full(n, v), rng=d)))
    assert est.shape == (d,)
    assert abs(est[v] - 1.0) < 5 * math.sqrt(o.variance(n, 1.0))
    others = np.delete(est, v)
    assert np.all(np.abs(others) < 5 * math.sqrt(o.variance(n, 0.0)))


def test_the_case_where_sketch_rows_equal_the_domain_size() -> None:
    # d = 3 gives m = 2, r = 2 and k = 3 rows: the hash table must still be k × d.
    o = ldpcore.make_oracle("cms", epsilon=1.0, domain_size=3)
    assert o.k == o.domain_size == 3
    assert o._hash_table.shape == (3, 3)
