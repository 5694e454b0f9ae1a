"""The confidence level of an answer's intervals (a module of its own: the estimation
layers of every collection kind use it, and import nothing of each other for it)."""

from __future__ import annotations

import math
from statistics import NormalDist

from .errors import QueryError

__all__ = ["z_value"]


def z_value(confidence: float) -> float:
    """Two-sided normal quantile for a confidence level in (0, 1).

    >>> round(z_value(0.95), 3)
    1.96
    """
    if not 0.0 < confidence < 1.0 or math.isnan(confidence):
        raise QueryError("confidence must be a number strictly between 0 and 1, "
                         f"got {confidence}", parameter="confidence")
    # From the tail: (1 + c) / 2 rounds to 1.0 for c within 2^-53 of 1 (inv_cdf refuses 1).
    return -NormalDist().inv_cdf((1.0 - confidence) / 2.0)
