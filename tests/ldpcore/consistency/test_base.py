"""ldpcore.consistency.base: the argument checks every post-processing method shares."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ldpcore.consistency.base import as_estimates, need_n, need_sigma
from ldpcore.errors import ParameterError


def test_estimates_are_a_finite_vector_of_at_least_two() -> None:
    assert as_estimates([0.5, 0.5]).dtype == np.float64
    for bad in ([1.0], [[0.5, 0.5]], "ab", [0.1, float("nan")]):
        with pytest.raises(ParameterError, match="estimates must be"):
            as_estimates(bad)


def test_sigma_is_the_root_of_a_positive_variance_and_names_the_method() -> None:
    assert need_sigma("power", 0.04) == pytest.approx(0.2)
    with pytest.raises(ParameterError, match="'power' needs variance="):
        need_sigma("power", None)
    with pytest.raises(ParameterError, match="variance must be a finite number > 0"):
        need_sigma("power", -1.0)
    with pytest.raises(ParameterError):
        need_sigma("power", math.inf)


def test_n_is_a_positive_integer() -> None:
    assert need_n("m", np.int64(5)) == 5
    for bad in (None, 0, True, 2.5):
        with pytest.raises(ParameterError, match="'m' needs n="):
            need_n("m", bad)  # type: ignore[arg-type]
