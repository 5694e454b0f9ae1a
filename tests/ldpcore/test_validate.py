"""ldpcore._validate: argument checks that name the argument and what is allowed."""

from __future__ import annotations

import numpy as np
import pytest

from ldpcore._validate import (
    as_rng,
    check_epsilon,
    check_float,
    check_int,
    check_values,
    require,
)
from ldpcore.errors import ParameterError, ReportError


@pytest.mark.parametrize("bad", [0, -1, float("nan"), float("inf"), "x", None])
def test_epsilon_must_be_finite_and_positive(bad: object) -> None:
    with pytest.raises(ParameterError, match="epsilon must be a finite real number > 0"):
        check_epsilon(bad)


def test_epsilon_within_its_bounds_comes_back_as_a_float() -> None:
    assert check_epsilon(2, low=0.5, high=3) == 2.0
    assert isinstance(check_epsilon(2), float)
    with pytest.raises(ParameterError, match=r"in \[0.5, 3\] for grr"):
        check_epsilon(4, low=0.5, high=3, context="for grr")


def test_integers_and_floats_name_the_argument() -> None:
    assert check_int("k", np.int64(3), low=1, high=5) == 3
    for bad in (True, 2.0, 0, 6):
        with pytest.raises(ParameterError, match=r"^k must be an integer in \[1, 5\]"):
            check_int("k", bad, low=1, high=5)
    assert check_float("b", 1, low=0, high=1) == 1.0
    with pytest.raises(ParameterError, match=r"b must be a finite real number in \(0, 1\]"):
        check_float("b", 0, low=0, high=1, low_open=True)


def test_values_are_a_1d_integer_array_inside_the_domain() -> None:
    assert check_values(2, 4).tolist() == [2]
    assert check_values(np.array([1.0, 3.0]), 4).dtype == np.int64
    assert check_values([], 4).size == 0
    with pytest.raises(ParameterError, match="found 4"):
        check_values([0, 4], 4)
    with pytest.raises(ParameterError, match="shape"):
        check_values([[1]], 4)
    with pytest.raises(ParameterError, match="dtype"):
        check_values([0.5], 4)


def test_rng_is_seeded_reused_or_from_the_os() -> None:
    g = np.random.default_rng(1)
    assert as_rng(g) is g
    assert as_rng(5).integers(1 << 30) == np.random.default_rng(5).integers(1 << 30)
    assert isinstance(as_rng(None), np.random.Generator)
    with pytest.raises(ParameterError, match="rng must be"):
        as_rng(True)


def test_require_raises_a_report_error() -> None:
    require(True, "fine")
    with pytest.raises(ReportError, match="broken"):
        require(False, "broken")
