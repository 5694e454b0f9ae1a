"""Range queries, prefixes, quantiles and CDFs over an ordered domain [0, D).

``hh`` (hierarchical histograms) and ``haar`` (HaarHRR) follow Cormode,
Kulkarni & Srivastava, "Answering Range Queries Under Local Differential
Privacy", VLDB 2019; :class:`FlatRange` answers the same queries from any plain
frequency oracle for comparison.

Every query (``cdf``, ``range_query``, ``prefix``, ``quantile``, ``leaves``) takes
``method="unbiased"`` (default: the linear unbiased estimate) or ``"consistent"``
(non-negative leaves summing to 1, every node the sum of its children: for ``hh`` the
exact solution of HH-ADMM's weighted least squares,
:func:`ldpcore.consistency.hierarchy.tree_nonneg_wls`).  ``hh`` and ``haar`` also
have ``sample_state``: a state distributed exactly as ``aggregate(perturb(values))``
for values drawn from a distribution, in O(state) time (parametric bootstrap).
"""

from __future__ import annotations

from .base import RANGE_METHODS, RangeMixin
from .flat import FlatRange
from .haar import HaarHRR
from .hh import HierarchicalHistogram

__all__ = ["RANGE_METHODS", "RangeMixin", "FlatRange", "HaarHRR", "HierarchicalHistogram"]
