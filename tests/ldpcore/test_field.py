"""ldpcore._field: GF(q) arithmetic and the projective points of the sketch hashes."""

from __future__ import annotations

import numpy as np
import pytest

from ldpcore._field import Field, projective_points


@pytest.mark.parametrize("q", [2, 5, 7, 8, 16])
def test_every_nonzero_element_has_a_multiplicative_inverse(q: int) -> None:
    f = Field(q)
    a, c = np.meshgrid(np.arange(q), np.arange(q))
    prod = f.mul(a.ravel(), c.ravel()).reshape(q, q)
    # Each nonzero row of the multiplication table is a permutation of the field.
    for row in prod[1:]:
        assert sorted(row[1:].tolist()) == list(range(1, q))
    assert (prod[0] == 0).all()
    # Addition is a group: x + x = 0 in characteristic 2, x + (q - x) = 0 for primes.
    x = np.arange(q)
    neg = x if f.binary else (q - x) % q
    assert (f.add(x, neg) == 0).all()


def test_a_q_that_is_neither_prime_nor_a_power_of_two_is_refused() -> None:
    with pytest.raises(ValueError, match="prime or a power of two"):
        Field(6)


@pytest.mark.parametrize(("q", "r"), [(2, 3), (3, 2), (5, 3)])
def test_projective_points_count_and_lead_with_one(q: int, r: int) -> None:
    pts = projective_points(q, r)
    assert len(pts) == (q**r - 1) // (q - 1)
    assert len({tuple(p) for p in pts}) == len(pts)
    for p in pts:
        assert p[np.nonzero(p)[0][0]] == 1
