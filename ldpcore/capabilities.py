"""What a mechanism can answer, as types: check with ``isinstance``, never ``hasattr``.

Every mechanism is a :class:`~ldpcore.base.Mechanism` (perturb, validate,
aggregate into an additive state).  What it can *estimate* from that state is
declared by the capabilities it inherits:

* :class:`FrequencyEstimates`: the frequency of every value of ``[0, d)`` with an
  analytic variance (every :class:`~ldpcore.base.FrequencyOracle`);
* :class:`RangeQueries`: ranges, prefixes, the CDF and quantiles of an ordered
  domain (``hh``, ``haar``);
* :class:`MeanEstimates`: the mean of values in an interval with its variance
  (``sw``, ``pm``, ``duchi``);
* :class:`DistributionEstimates`: a reconstructed distribution over an interval's
  bins, its CDF and quantiles in value units (``sw``);
* :class:`HeavyHitterSearch`: the most frequent values of a domain too large to
  enumerate (``pem``);
* :class:`AttributeEstimates`: several attributes per report, each estimated by its
  own oracle from its own sub-state (``multi``, ``vector``; :mod:`ldpcore.multi`).
* :class:`SetItemFrequencies`: the fraction of devices whose *set* holds each
  item (``ps``; the fractions sum to the mean set size, not to 1);
* :class:`ItemsetSupport`: the support of candidate itemsets of set-valued data
  (``psi``);
* :class:`SetSizeEstimates`: the distribution of set sizes (``setsize``).

>>> import ldpcore
>>> from ldpcore.capabilities import FrequencyEstimates, RangeQueries, capabilities_of
>>> isinstance(ldpcore.make_oracle("hh", epsilon=1.0, domain_size=64), RangeQueries)
True
>>> capabilities_of(ldpcore.make_oracle("pm", epsilon=1.0, bins=8))
['mean']
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .state import FloatArray, State

__all__ = [
    "FrequencyEstimates",
    "RangeQueries",
    "MeanEstimates",
    "DistributionEstimates",
    "HeavyHitterSearch",
    "AttributeEstimates",
    "ItemsetSupport",
    "SetItemFrequencies",
    "SetSizeEstimates",
    "CAPABILITIES",
    "capabilities_of",
]


class FrequencyEstimates(ABC):
    """Estimates the frequency of every value of ``[0, domain_size)``."""

    @abstractmethod
    def estimate(self, state: State) -> FloatArray:
        """Unbiased frequency estimates, shape ``(domain_size,)``."""

    @abstractmethod
    def variance(self, n: int, frequency: float = 0.0) -> float:
        """Analytic variance of one frequency estimate from ``n`` reports."""


class RangeQueries(ABC):
    """Answers range queries over an ordered domain ``[0, domain_size)``."""

    @abstractmethod
    def cdf(self, state: State) -> FloatArray:
        """``F[i]`` = estimated fraction of values ``<= i``."""

    @abstractmethod
    def range_query(self, state: State, lo: int, hi: int) -> float:
        """Estimated fraction of values in ``[lo, hi]``."""

    @abstractmethod
    def quantile(self, state: State, q: float) -> int:
        """Smallest index whose CDF reaches ``q``."""

    @abstractmethod
    def range_variance(self, n: int, lo: int, hi: int) -> float:
        """Variance of :meth:`range_query` from ``n`` reports."""


class MeanEstimates(ABC):
    """Estimates the mean of values in an interval ``[low, high]``."""

    @abstractmethod
    def mean(self, state: State) -> float:
        """Estimated mean, in value units."""

    @abstractmethod
    def mean_variance(self, n: int) -> float:
        """(Worst-case) variance of :meth:`mean` from ``n`` reports."""


class DistributionEstimates(ABC):
    """Reconstructs the distribution of values over an interval's bins."""

    @abstractmethod
    def distribution(self, state: State) -> FloatArray:
        """Estimated probability of every bin (non-negative, sums to 1)."""

    @abstractmethod
    def cdf(self, state: State) -> FloatArray:
        """The cumulative distribution over the bins."""

    @abstractmethod
    def quantile(self, state: State, q: float) -> float:
        """The ``q``-quantile in value units."""


class HeavyHitterSearch(ABC):
    """Finds the most frequent values of a domain too large to enumerate."""

    keep: int
    """At most this many heavy hitters can be asked for."""

    @abstractmethod
    def heavy_hitters(self, state: State, k: int) -> list[tuple[int, float, float]]:
        """The top ``k`` as (value, estimated frequency, standard error)."""


class AttributeEstimates(ABC):
    """Reports answer sampled attributes; each attribute has its own oracle and sub-state."""

    @property
    @abstractmethod
    def attribute_names(self) -> tuple[str, ...]:
        """The attributes, in declaration order."""

    @abstractmethod
    def attribute(self, name: str) -> Any:
        """The oracle (a :class:`~ldpcore.base.Mechanism`) of attribute ``name``."""

    @abstractmethod
    def attribute_state(self, state: State, name: str) -> State:
        """The sub-state of attribute ``name`` (its oracle's estimators apply to it)."""

    @abstractmethod
    def attribute_counts(self, state: State) -> Any:
        """How many reports answered each attribute (an int array, declaration order)."""


class SetItemFrequencies(ABC):
    """Estimates, per item, the fraction of devices whose set holds it (set-valued data).

    Estimates need not sum to 1 (they sum to the mean set size), so sum-to-one
    post-processing does not apply; answers are the unbiased estimates.
    """

    length: int
    """The padding length l (items per device the estimates account for)."""


class ItemsetSupport(ABC):
    """Estimates the support (fraction of devices holding it) of candidate itemsets."""

    itemsets: list[list[int]]
    """The candidate itemsets, in the order of the estimates."""

    @abstractmethod
    def itemset_support(self, state: State) -> tuple[FloatArray, FloatArray]:
        """(support, standard error) of every candidate itemset."""


class SetSizeEstimates(ABC):
    """Estimates the distribution of set sizes of set-valued data."""

    max_size: int

    @abstractmethod
    def size_distribution(self, state: State) -> FloatArray:
        """Estimated probability of every size ``0 .. max_size`` (non-negative, sums to 1)."""

    @abstractmethod
    def size_percentile(self, state: State, q: float = 0.9) -> int:
        """Smallest size >= 1 whose estimated CDF reaches ``q``."""


CAPABILITIES: dict[str, type] = {
    "frequencies": FrequencyEstimates,
    "ranges": RangeQueries,
    "mean": MeanEstimates,
    "distribution": DistributionEstimates,
    "heavy_hitters": HeavyHitterSearch,
    "attributes": AttributeEstimates,
    "set_items": SetItemFrequencies,
    "itemsets": ItemsetSupport,
    "set_sizes": SetSizeEstimates,
}
"""Capability name → type, in a stable order (names are what services show)."""


def capabilities_of(mechanism: Any) -> list[str]:
    """Names of the capabilities of a mechanism instance or class."""
    cls = mechanism if isinstance(mechanism, type) else type(mechanism)
    return [name for name, cap in CAPABILITIES.items() if issubclass(cls, cap)]
