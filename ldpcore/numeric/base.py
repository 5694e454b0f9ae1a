"""What every numeric oracle shares: the interval, bins, unit scaling, distance metrics."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .._validate import check_float, check_int
from ..base import FloatArray, IntArray, Mechanism
from ..capabilities import MeanEstimates
from ..errors import ParameterError

__all__ = ["NumericOracle", "wasserstein_distance", "ks_distance"]


class NumericOracle(Mechanism, MeanEstimates):
    """An ε-LDP mechanism for values in ``[low, high]``, binned into ``domain_size`` bins.

    Subclasses perturb a *unit* value ``u`` in [0, 1]; :meth:`_unit_values` turns bin
    indices into such values (uniform inside the bin, drawn on the device).

    Every numeric oracle estimates a mean (:class:`~ldpcore.capabilities.MeanEstimates`);
    ``sw`` also reconstructs the distribution and is a :class:`FrequencyOracle` over
    the bins.
    """

    def __init__(self, *, epsilon: float, domain_size: int | None = None,
                 bins: int | None = None, low: float = 0.0, high: float = 1.0) -> None:
        if domain_size is None and bins is None:
            raise ParameterError("give bins (or domain_size): the number of bins of [low, high]")
        if domain_size is not None and bins is not None and domain_size != bins:
            raise ParameterError(f"bins ({bins}) and domain_size ({domain_size}) disagree")
        lo, hi = self.domain_size_bounds
        d = check_int("bins", bins if bins is not None else domain_size, low=lo, high=hi)
        super().__init__(epsilon=epsilon, domain_size=d)
        self.low = check_float("low", low, low=-1e300, high=1e300)
        self.high = check_float("high", high, low=-1e300, high=1e300)
        if not self.high > self.low:
            raise ParameterError(f"high must be > low, got low={low!r}, high={high!r}")

    @property
    def params(self) -> dict[str, Any]:
        return {"low": self.low, "high": self.high}

    @property
    def width(self) -> float:
        """Width of one bin in value units."""
        return (self.high - self.low) / self.domain_size

    def bin_centers(self) -> FloatArray:
        """Centre of every bin, in value units."""
        return np.asarray(self.low + (np.arange(self.domain_size) + 0.5) * self.width,
                          dtype=np.float64)

    def to_unit(self, x: Any) -> FloatArray:
        """Values in [low, high] → [0, 1] (clipped)."""
        return np.clip((np.asarray(x, dtype=float) - self.low) / (self.high - self.low), 0, 1)

    def from_unit(self, u: Any) -> FloatArray:
        """[0, 1] → value units."""
        return self.low + np.asarray(u, dtype=float) * (self.high - self.low)

    def to_bins(self, x: Any) -> IntArray:
        """Raw values in [low, high] → bin indices (what a collection's domain does)."""
        u = self.to_unit(x)
        return np.minimum((u * self.domain_size).astype(np.int64), self.domain_size - 1)

    def _unit_values(self, values: IntArray, rng: np.random.Generator) -> FloatArray:
        return (values + rng.random(values.size)) / self.domain_size

    def mean_std_error(self, n: int) -> float:
        """Standard error of :meth:`mean` from n reports (value units)."""
        return math.sqrt(self.mean_variance(n))

    def mean_variance(self, n: int) -> float:  # pragma: no cover - overridden
        raise NotImplementedError


def _cdf(x: Any) -> FloatArray:
    p = np.clip(np.asarray(x, dtype=float), 0, None)
    total = p.sum()
    return np.cumsum(p / total) if total > 0 else np.zeros_like(p)


def wasserstein_distance(x: Any, y: Any, *, bin_width: float = 1.0) -> float:
    r"""1-D Wasserstein (earth mover's) distance of two histograms on the same bins.

    :math:`W_1 = w \sum_v |P(x, v) - P(y, v)|` with P the cumulative sums (Li et al. 2020,
    Section 6); ``bin_width`` w gives it value units.

    >>> wasserstein_distance([1, 0, 0], [0, 0, 1])
    2.0
    """
    return float(np.abs(_cdf(x) - _cdf(y)).sum() * bin_width)


def ks_distance(x: Any, y: Any) -> float:
    """Kolmogorov–Smirnov distance: the largest gap of the two CDFs.

    >>> ks_distance([1, 0, 0, 1], [0, 1, 0, 1])
    0.5
    """
    return float(np.abs(_cdf(x) - _cdf(y)).max())
