"""Range-query interface shared by every range-capable oracle."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from .._validate import check_float, check_int
from ..base import FloatArray, State
from ..capabilities import RangeQueries
from ..errors import ParameterError, StateError

__all__ = ["RangeMixin", "LevelBlocks", "RANGE_METHODS", "check_range_method"]

RANGE_METHODS: tuple[str, ...] = ("unbiased", "consistent")


def check_range_method(method: Any) -> str:
    """Validate a range oracle's estimation ``method`` (one of :data:`RANGE_METHODS`)."""
    if not isinstance(method, str) or method not in RANGE_METHODS:
        raise ParameterError(f"method must be one of {list(RANGE_METHODS)}, got {method!r}")
    return method


class LevelBlocks:
    """State layout of an oracle whose devices each report at one uniform level 1..height.

    The state is the levels' blocks of cells one after the other (block ``lv`` at
    ``_offsets[lv-1]:_offsets[lv]``), then the number of reports at each level.
    """

    height: int
    _offsets: npt.NDArray[np.int64]

    def _lay_out_levels(self, sizes: Sequence[int]) -> None:
        """Place blocks of these sizes (level 1 first)."""
        self._offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)

    @property
    def state_shape(self) -> tuple[int, ...]:
        return (int(self._offsets[-1]) + self.height,)

    def _draw_levels(self, n: int, rng: np.random.Generator) -> npt.NDArray[np.int64]:
        """The level of each of n reports, uniform on 1..height."""
        return rng.integers(1, self.height + 1, size=n)


class RangeMixin(RangeQueries):
    """``range_query``, ``prefix``, ``quantile``, ``cdf`` and ``leaves`` with a ``method``.

    Every query takes ``method``:

    * ``"unbiased"`` (default): the oracle's linear, unbiased estimate (today's answers;
      may be negative, exceed 1, and give a non-monotone CDF);
    * ``"consistent"``: answers read off one non-negative histogram over [0, D) that sums
      to 1 (:meth:`leaves`), so the CDF is non-decreasing in [0, 1] and ends at exactly 1,
      a range is in [0, 1] (the whole domain is 1), and quantiles are monotone in q.
      Biased (it is a projection), usually more accurate.

    Subclasses provide :meth:`_unbiased_cdf`, :meth:`_unbiased_leaves` and
    :meth:`_fit_consistent` (cached per state by :meth:`_consistent_leaves`), and may
    override :meth:`range_query` with a cheaper decomposition for the unbiased method.
    ``method`` is a query-time choice: it is not a constructor parameter, so it never
    enters the spec or the fingerprint.
    """

    domain_size: int

    def _check_range(self, lo: int, hi: int) -> tuple[int, int]:
        d = self.domain_size
        lo = check_int("lo", lo, low=0, high=d - 1)
        hi = check_int("hi", hi, low=0, high=d - 1)
        if lo > hi:
            raise ParameterError(f"lo must be <= hi, got lo={lo}, hi={hi}")
        return lo, hi

    @staticmethod
    def _check_nonempty(state: State) -> None:
        if state.n <= 0:
            raise StateError("cannot estimate from an empty state (n = 0)")

    @abstractmethod
    def _unbiased_cdf(self, state: State) -> FloatArray:
        """Unbiased P[X <= x] for every x in [0, D)."""

    @abstractmethod
    def _unbiased_leaves(self, state: State) -> FloatArray:
        """Unbiased frequency of every x in [0, D)."""

    @abstractmethod
    def _fit_consistent(self, state: State) -> FloatArray:
        """Non-negative frequencies over [0, D) summing to 1 (uncached; state checked)."""

    def _check_range_state(self, state: State) -> None:
        """Raise StateError unless ``state`` is a non-empty state of this oracle."""
        check = getattr(self, "check_state", None)
        if check is not None:
            check(state)
        self._check_nonempty(state)

    def _per_state(self, name: str, state: State, make: Callable[[], Any]) -> Any:
        """``make()`` for ``state``, kept for the last state asked under ``name`` (a
        one-entry cache keyed by the state's fingerprint, n and counts: a live API asks
        cdf, range, quantiles and histogram of the same state).  The value is shared:
        callers do not modify it."""
        memo: dict[str, tuple[str, int, Any, Any]] = self.__dict__.setdefault(
            "_state_memo", {})
        cached = memo.get(name)
        if (cached is not None and cached[0] == state.fingerprint and cached[1] == state.n
                and np.array_equal(cached[2], state.counts)):
            return cached[3]
        value = make()
        memo[name] = (state.fingerprint, state.n, state.counts.copy(), value)
        return value

    def _consistent_leaves(self, state: State) -> FloatArray:
        """The consistent leaves, computed once per state (:meth:`_per_state`)."""
        self._check_range_state(state)

        def fit() -> FloatArray:
            leaves = self._fit_consistent(state)
            leaves.setflags(write=False)
            return leaves

        out: FloatArray = self._per_state("consistent", state, fit)
        return out

    def leaves(self, state: State, method: str = "unbiased") -> FloatArray:
        """Estimated frequency of every x in [0, D) (the histogram) under ``method``."""
        if check_range_method(method) == "consistent":
            return self._consistent_leaves(state).copy()
        return self._unbiased_leaves(state)

    def histogram(self, state: State, method: str = "unbiased") -> FloatArray:
        """Alias of :meth:`leaves`."""
        return self.leaves(state, method)

    def cdf(self, state: State, method: str = "unbiased") -> FloatArray:
        """Estimated P[X <= x] for every x in [0, D) under ``method``."""
        if check_range_method(method) == "unbiased":
            return self._unbiased_cdf(state)
        out: FloatArray = np.minimum(np.cumsum(self._consistent_leaves(state)), 1.0)
        out[-1] = 1.0  # the leaves sum to 1 up to rounding; the CDF ends at exactly 1
        return out

    def range_query(self, state: State, lo: int, hi: int, method: str = "unbiased") -> float:
        """Estimated fraction of values in [lo, hi] (inclusive)."""
        lo, hi = self._check_range(lo, hi)
        c = self.cdf(state, method)
        out = float(c[hi] - (c[lo - 1] if lo > 0 else 0.0))
        return max(out, 0.0) if method == "consistent" else out  # rounding below 0

    def prefix(self, state: State, x: int, method: str = "unbiased") -> float:
        """Estimated fraction of values <= x."""
        x = check_int("x", x, low=0, high=self.domain_size - 1)
        return float(self.cdf(state, method)[x])

    def quantile(self, state: State, q: float, method: str = "unbiased") -> int:
        """Smallest domain index x with prefix(x) >= q (binary search over prefix answers)."""
        q = check_float("q", q, low=0.0, high=1.0)
        c = np.maximum.accumulate(self.cdf(state, method))  # monotone: the search is defined
        idx = int(np.searchsorted(c, q, side="left"))
        return min(idx, self.domain_size - 1)

    @abstractmethod
    def range_variance(self, n: int, lo: int, hi: int) -> float:
        """Analytic upper bound on the variance of ``range_query`` from n reports."""
