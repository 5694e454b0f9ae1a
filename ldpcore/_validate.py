"""Argument validation shared by every constructor (messages name the allowed domain)."""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np
import numpy.typing as npt

from .errors import ParameterError, ReportError

__all__ = ["check_epsilon", "check_int", "check_float", "check_values", "as_rng"]


def _as_float(value: Any) -> float | None:
    """``float(value)`` for a real number (not bool), None for anything else or an overflow."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return None
    try:
        return float(value)
    except (OverflowError, ValueError, TypeError):
        return None


def check_epsilon(epsilon: Any, *, low: float = 0.0, high: float = math.inf,
                  context: str = "") -> float:
    """Return ``epsilon`` as a float in ``[low, high]`` (``(0, inf)`` by default), or raise.

    ``context`` (e.g. ``"for mechanism 'olh'"``) is added to the message.

    >>> check_epsilon(1, low=0.001, high=29.8)
    1.0
    >>> check_epsilon(30.0, low=0.001, high=29.8, context="for mechanism 'grr'")
    Traceback (most recent call last):
    ...
    ldpcore.errors.ParameterError: epsilon must be a finite real number in [0.001, 29.8] \
for mechanism 'grr', got 30.0
    """
    if low > 0.0 or high < math.inf:
        allowed = f"a finite real number in [{low}, {high}]"
    else:
        allowed = "a finite real number > 0"
    if context:
        allowed += " " + context
    value = _as_float(epsilon)
    if (value is None or not math.isfinite(value) or value <= 0.0 or value < low
            or value > high):
        raise ParameterError(f"epsilon must be {allowed}, got {epsilon!r}")
    return value


def check_int(name: str, value: Any, *, low: int, high: int | None = None) -> int:
    """Return ``value`` as an int in ``[low, high]`` or raise naming ``name``."""
    allowed = f"an integer >= {low}" if high is None else f"an integer in [{low}, {high}]"
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ParameterError(f"{name} must be {allowed}, got {value!r}")
    out = int(value)
    if out < low or (high is not None and out > high):
        raise ParameterError(f"{name} must be {allowed}, got {value!r}")
    return out


def check_float(
    name: str, value: Any, *, low: float, high: float, low_open: bool = False
) -> float:
    """Return ``value`` as a finite float in ``[low, high]`` (``(low, high]`` if low_open)."""
    bracket = "(" if low_open else "["
    allowed = f"a finite real number in {bracket}{low}, {high}]"
    out = _as_float(value)
    if (out is None or not math.isfinite(out) or out > high or out < low
            or (low_open and out == low)):
        raise ParameterError(f"{name} must be {allowed}, got {value!r}")
    return out


def check_values(values: Any, domain_size: int) -> npt.NDArray[np.int64]:
    """Validate a batch of true values: a 1-D integer array with entries in ``[0, d)``."""
    arr = np.asarray(values)
    if arr.ndim == 0:
        arr = arr.reshape(1)
    if arr.ndim != 1:
        raise ParameterError(f"values must be a 1-D array of integers in [0, {domain_size}), "
                             f"got an array of shape {arr.shape}")
    if arr.size == 0:
        return np.zeros(0, dtype=np.int64)
    if arr.dtype.kind not in "iu":
        if arr.dtype.kind == "f" and np.all(np.isfinite(arr)) and np.all(arr == np.floor(arr)):
            arr = arr.astype(np.int64)
        else:
            raise ParameterError(
                f"values must be integers in [0, {domain_size}), got dtype {arr.dtype}"
            )
    lo, hi = int(arr.min()), int(arr.max())
    if lo < 0 or hi >= domain_size:
        bad = lo if lo < 0 else hi
        raise ParameterError(f"values must be integers in [0, {domain_size}), found {bad}")
    return arr.astype(np.int64, copy=False)


def as_rng(rng: np.random.Generator | int | None) -> np.random.Generator:
    """Return a Generator: OS entropy when ``rng`` is None, else seeded/reused."""
    if isinstance(rng, np.random.Generator):
        return rng
    if rng is None:
        return np.random.default_rng()  # seeds from OS entropy (SeedSequence())
    if isinstance(rng, bool) or not isinstance(rng, numbers.Integral):
        raise ParameterError(f"rng must be None, an int seed or a numpy Generator, got {rng!r}")
    return np.random.default_rng(int(rng))


def require(cond: bool, message: str) -> None:
    """Raise ReportError(message) unless ``cond``."""
    if not cond:
        raise ReportError(message)
