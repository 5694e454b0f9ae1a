"""Range-query interface shared by every range-capable oracle."""

from __future__ import annotations

from abc import abstractmethod

import numpy as np

from .._validate import check_float, check_int
from ..base import FloatArray, State
from ..capabilities import RangeQueries
from ..errors import ParameterError

__all__ = ["RangeMixin"]


class RangeMixin(RangeQueries):
    """``range_query``, ``prefix``, ``quantile``, ``cdf`` on top of ``_prefixes``.

    Subclasses provide :meth:`cdf` (all prefix answers at once, vectorised) and
    may override :meth:`range_query` with a cheaper decomposition.
    """

    domain_size: int

    def _check_range(self, lo: int, hi: int) -> tuple[int, int]:
        d = self.domain_size
        lo = check_int("lo", lo, low=0, high=d - 1)
        hi = check_int("hi", hi, low=0, high=d - 1)
        if lo > hi:
            raise ParameterError(f"lo must be <= hi, got lo={lo}, hi={hi}")
        return lo, hi

    @abstractmethod
    def cdf(self, state: State) -> FloatArray:
        """Estimated P[X <= x] for every x in [0, D)."""

    def range_query(self, state: State, lo: int, hi: int) -> float:
        """Estimated fraction of values in [lo, hi] (inclusive)."""
        lo, hi = self._check_range(lo, hi)
        c = self.cdf(state)
        return float(c[hi] - (c[lo - 1] if lo > 0 else 0.0))

    def prefix(self, state: State, x: int) -> float:
        """Estimated fraction of values <= x."""
        x = check_int("x", x, low=0, high=self.domain_size - 1)
        return float(self.cdf(state)[x])

    def quantile(self, state: State, q: float) -> int:
        """Smallest domain index x with prefix(x) >= q (binary search over prefix answers)."""
        q = check_float("q", q, low=0.0, high=1.0)
        c = np.maximum.accumulate(self.cdf(state))  # monotone, so the search is well defined
        idx = int(np.searchsorted(c, q, side="left"))
        return min(idx, self.domain_size - 1)

    @abstractmethod
    def range_variance(self, n: int, lo: int, hi: int) -> float:
        """Analytic upper bound on the variance of ``range_query`` from n reports."""
