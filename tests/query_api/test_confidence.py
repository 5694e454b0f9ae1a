"""query_api.confidence: the normal quantile of an answer's confidence level."""

from __future__ import annotations

import math
from statistics import NormalDist

import pytest

from query_api.confidence import z_value
from query_api.errors import QueryError


@pytest.mark.parametrize("c", [0.5, 0.9, 0.95, 0.999])
def test_z_leaves_half_of_the_rest_in_each_tail(c: float) -> None:
    z = z_value(c)
    assert NormalDist().cdf(z) - NormalDist().cdf(-z) == pytest.approx(c)


def test_a_level_next_to_one_still_has_a_finite_z() -> None:
    z = z_value(1 - 2**-53)
    assert math.isfinite(z) and z > 8


@pytest.mark.parametrize("bad", [0.0, 1.0, -0.1, 1.5, float("nan")])
def test_a_level_outside_zero_one_is_a_400_naming_confidence(bad: float) -> None:
    with pytest.raises(QueryError, match="strictly between 0 and 1") as err:
        z_value(bad)
    assert err.value.parameter == "confidence" and err.value.status == 400
