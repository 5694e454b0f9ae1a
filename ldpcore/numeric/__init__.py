"""Numeric values on an interval [low, high]: distributions, means and quantiles.

* ``sw``: Square Wave (Li et al., SIGMOD 2020) with EM / EMS reconstruction of the
  distribution; CDF, quantiles, an unbiased mean.
* ``pm``: Piecewise Mechanism (Wang et al., ICDE 2019) and ``duchi`` (Duchi, Jordan &
  Wainwright 2018): unbiased means with an analytic variance.

Values reach an oracle as bin indices in ``[0, bins)`` (a collection's interval domain
bins them); the device draws a point uniformly inside its bin before perturbing, so
the mechanisms see a continuous value and the server's transition matrices assume
exactly that.
"""

from __future__ import annotations

from .base import NumericOracle, ks_distance, wasserstein_distance
from .em import em_reconstruct, sw_transition_matrix
from .mean import Duchi, PiecewiseMechanism
from .sw import SquareWave

__all__ = ["NumericOracle", "SquareWave", "PiecewiseMechanism", "Duchi", "em_reconstruct",
           "sw_transition_matrix", "wasserstein_distance", "ks_distance"]
