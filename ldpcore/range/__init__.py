"""Range queries, prefixes, quantiles and CDFs over an ordered domain [0, D).

``hh`` (hierarchical histograms) and ``haar`` (HaarHRR) follow Cormode,
Kulkarni & Srivastava, "Answering Range Queries Under Local Differential
Privacy", VLDB 2019; :class:`FlatRange` answers the same queries from any plain
frequency oracle for comparison.
"""

from __future__ import annotations

from .base import RangeMixin
from .flat import FlatRange
from .haar import HaarHRR
from .hh import HierarchicalHistogram

__all__ = ["RangeMixin", "FlatRange", "HaarHRR", "HierarchicalHistogram"]
