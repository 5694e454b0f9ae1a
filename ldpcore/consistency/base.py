"""Input validation and the method registry of the consistency post-processing."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

from ..errors import ParameterError

__all__ = ["FloatArray", "Method", "as_estimates", "need_sigma", "need_n"]

FloatArray = npt.NDArray[np.float64]
Method = Callable[..., FloatArray]


def as_estimates(estimates: Any) -> FloatArray:
    """A finite 1-D float array with at least 2 entries, or ParameterError."""
    arr = np.asarray(estimates, dtype=np.float64) if not isinstance(estimates, str) else None
    if arr is None or arr.ndim != 1 or arr.size < 2:
        raise ParameterError("estimates must be a 1-D array of at least 2 finite numbers")
    if not np.all(np.isfinite(arr)):
        raise ParameterError("estimates must be finite (no NaN or infinity)")
    return arr


def need_sigma(method: str, variance: float | None) -> float:
    """σ from the (f = 0) variance of one estimate, required by threshold/likelihood methods."""
    if variance is None:
        raise ParameterError(f"method {method!r} needs variance= (the variance of one "
                             "estimate, e.g. oracle.variance(n)), a finite number > 0")
    v = float(variance)
    if not np.isfinite(v) or v <= 0:
        raise ParameterError(f"variance must be a finite number > 0, got {variance!r}")
    return float(np.sqrt(v))


def need_n(method: str, n: int | None) -> int:
    """The number of reports, required by methods whose model depends on it."""
    if n is None or isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ParameterError(f"method {method!r} needs n= (the number of reports), an integer "
                             f">= 1, got {n!r}")
    return int(n)
