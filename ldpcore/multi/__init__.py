"""Several values per device: multi-attribute reports and numerical vectors.

* :class:`MultiAttribute` (``"multi"``): m attributes, each with its own oracle; a
  report answers k sampled attributes at ε/k (k = 1 partitions the users, k = m
  splits ε).
* :class:`NumericVector` (``"vector"``): vectors in [-1, 1]^d, k sampled dimensions
  with PM or Duchi at ε/k (Wang et al., ICDE 2019).
* :func:`sample_variances`: the analytic comparison of partitioning and splitting.
"""

from __future__ import annotations

from .attributes import MAX_ATTRIBUTES, MultiAttribute
from .compare import sample_variances
from .vector import NumericVector, recommended_sample

__all__ = ["MultiAttribute", "NumericVector", "sample_variances", "recommended_sample",
           "MAX_ATTRIBUTES"]
