"""ldpcore._bounds: the numeric floors the mechanisms' ranges derive from."""

from __future__ import annotations

import math

from ldpcore import _bounds as b


def test_the_exact_epsilon_bounds_keep_the_smallest_probability_above_its_floor() -> None:
    for eps_max, floor in ((b.EXACT_EPSILON_MAX_64, b.PROB_FLOOR_64),
                           (b.EXACT_EPSILON_MAX_32, b.PROB_FLOOR_32)):
        assert math.isclose(1 / (math.exp(eps_max) + 1), floor, rel_tol=1e-9)
    assert b.EPSILON_MIN < b.EPSILON_MAX_64 <= b.EXACT_EPSILON_MAX_64
    assert b.DEFAULT_EPSILON_RANGE == (b.EPSILON_MIN, b.EPSILON_MAX_64)


def test_intervals_read_as_text() -> None:
    assert b.real_in((0.5, 2.0)) == "real in [0.5, 2.0]"
    assert b.integer_in(b.DEFAULT_DOMAIN_RANGE) == f"integer in [2, {2**31 - 1}]"
