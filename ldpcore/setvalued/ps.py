r"""Padding-and-sampling oracles: item frequencies (``ps``), itemset supports (``psi``) and
set sizes (``setsize``).

All three take a batch of *sets* on the device (:meth:`SetValued.perturb_sets`)
and keep the additive state of the frequency oracle that carries the report,
so aggregation, the wire format and the Kafka message format are those of GRR /
OLH.  See :mod:`ldpcore.setvalued.base` for the padding, the sampling and the
privacy amplification (Wang, Li & Jha, IEEE S&P 2018, §IV; Qin et al. CCS 2016).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .._bounds import (
    EPSILON_MAX_64,
    EPSILON_MIN,
    EXACT_EPSILON_MAX_64,
    ranges,
)
from .._validate import check_int
from ..base import Column, FloatArray, FrequencyOracle, IntArray, Mechanism, Reports, State
from ..capabilities import ItemsetSupport, SetItemFrequencies, SetSizeEstimates
from ..errors import ParameterError, StateError
from .base import (
    SetBatch,
    SetValued,
    check_candidates,
    check_itemsets,
    choose_inner,
    padded_sample,
    ps_variance,
    support_probabilities,
)

__all__ = ["PaddingSampling", "PaddingSamplingItemsets", "SetSize", "MAX_LENGTH"]

MAX_LENGTH = 4096
"""Largest padding length l (ε' = ln(l(e^ε-1)+1) stays within GRR's ε range)."""


def _exact_padded_epsilon_max() -> float:
    """The largest ε whose amplified ε' = ln(l(e^ε − 1) + 1) at l = MAX_LENGTH stays within
    GRR's float64 bound (GRR runs at ε')."""
    return math.log(math.expm1(EXACT_EPSILON_MAX_64) / MAX_LENGTH + 1)


class _InnerReports(SetValued, Mechanism):
    """A set-valued mechanism whose reports and state are those of its ``inner`` oracle."""

    inner: FrequencyOracle

    @property
    def report_columns(self) -> tuple[Column, ...]:
        return self.inner.report_columns

    @property
    def state_shape(self) -> tuple[int, ...]:
        return self.inner.state_shape

    def _validate_columns(self, columns: dict[str, np.ndarray]) -> None:
        self.inner._validate_columns(columns)


class _Padded(_InnerReports):
    """Shared core: entries ``[0, m)`` per device, padded to l, one sampled, inner oracle."""

    def _setup(self, *, length: int, inner: str, entries: int) -> None:
        self.length = check_int("length", length, low=1, high=MAX_LENGTH)
        self.entries = entries
        self.inner = choose_inner(epsilon=self.epsilon, size=entries + self.length,
                                  length=self.length, inner=inner)
        self._p, self._q = support_probabilities(self.inner)

    @property
    def inner_epsilon(self) -> float:
        """ε of the inner oracle: the amplified ε' for GRR, ε for OLH."""
        return float(self.inner.epsilon)

    def _entries(self, batch: SetBatch) -> SetBatch:
        return batch

    def _perturb(self, values: IntArray, rng: np.random.Generator) -> dict[str, np.ndarray]:
        return self._perturb_columns(SetBatch.from_any(values, self.domain_size), rng)

    def _perturb_columns(self, batch: SetBatch, rng: np.random.Generator
                         ) -> dict[str, np.ndarray]:
        sample = padded_sample(self._entries(batch), self.length, rng)
        return self.inner._perturb(sample, rng)

    def _perturb_batch(self, batch: SetBatch, rng: np.random.Generator) -> Reports:
        return Reports(self.mechanism, self.fingerprint, self._perturb_columns(batch, rng))

    def _aggregate(self, columns: dict[str, np.ndarray]) -> IntArray:
        return self.inner._aggregate(columns)

    def _entry_estimates(self, counts: IntArray, n: int) -> FloatArray:
        est: FloatArray = self.length * self.inner._estimate(counts, n)[:self.entries]
        return est

    def _variance(self, n: int, frequency: float) -> float:
        n, f = self._check_variance_args(n, frequency)
        return ps_variance(self._p, self._q, self.length, n, f)


class PaddingSampling(_Padded, FrequencyOracle, SetItemFrequencies):
    r"""Padding-and-sampling frequency oracle over item sets (PSFO; S&P 2018, §IV).

    Each device pads its set (or its intersection with ``candidates``) to
    ``length`` l, samples one entry and reports it with GRR at
    :math:`\varepsilon' = \ln(l(e^\varepsilon-1)+1)` or OLH at ε, whichever has
    the smaller variance (``inner="auto"``).  The estimate of item x is

    .. math:: \hat f(x) = l \cdot \hat f_{inner}(x),

    the fraction of devices holding x (unbiased when every set has at most l
    items); :meth:`variance` is :func:`~ldpcore.setvalued.base.ps_variance`.
    Estimates of different items sum to the mean set size, not to 1.

    With ``candidates`` (item indices, e.g. from an earlier phase) only those
    items are reported: the estimate of every other item is exactly 0.

    Parameters
    ----------
    epsilon : float
        Privacy of one report (the whole device-side randomiser).
    domain_size : int
        Number of items d.
    length : int
        Padding length l in [1, 4096] (default 1: sample one item, no padding).
    inner : {"auto", "grr", "olh"}
        The reporting oracle; the spec names the resolved one.
    candidates : list of int, optional
        Distinct item indices to restrict the sets to.

    Examples
    --------
    >>> import ldpcore
    >>> o = ldpcore.make_oracle("ps", epsilon=2.0, domain_size=8, length=3)
    >>> o.inner.mechanism, round(o.inner_epsilon, 3)
    ('grr', 3.004)
    >>> sets = [[0, 1], [0], [0, 2, 5]] * 2000
    >>> est = o.estimate(o.aggregate(o.perturb_sets(sets, rng=1)))
    >>> bool(abs(est[0] - 1.0) < 4 * o.std_error(6000, 1.0))
    True
    """

    mechanism = "ps"
    # GRR's amplified ε' = ln(l(e^ε-1)+1) stays within its 29.8 for every l <= MAX_LENGTH.
    epsilon_bounds = (EPSILON_MIN, 21.5)
    domain_size_bounds = (2, 1 << 22)  # items; the inner oracle sees d + l values
    parameter_ranges = ranges(epsilon_bounds, domain_size_bounds, " (items)",
                              length="integer l in [1, 4096] (padding length)",
                              inner="one of auto, grr (at eps' = ln(l(e^eps-1)+1)), olh (at eps)",
                              candidates="optional non-empty list of distinct item indices "
                                         "in [0, d)")

    @classmethod
    def exact_epsilon_max(cls) -> float:
        return _exact_padded_epsilon_max()

    def __init__(self, *, epsilon: float, domain_size: int, length: int = 1,
                 inner: str = "auto", candidates: list[int] | None = None) -> None:
        super().__init__(epsilon=epsilon, domain_size=domain_size)
        self.candidates = (None if candidates is None
                           else check_candidates(candidates, self.domain_size))
        m = self.domain_size if self.candidates is None else len(self.candidates)
        self._setup(length=length, inner=inner, entries=m)

    @property
    def params(self) -> dict[str, Any]:
        out: dict[str, Any] = {"length": self.length, "inner": self.inner.mechanism}
        if self.candidates is not None:
            out["candidates"] = list(self.candidates)
        return out

    def _entries(self, batch: SetBatch) -> SetBatch:
        return batch if self.candidates is None else batch.restrict(self.candidates)

    def _estimate(self, counts: IntArray, n: int) -> FloatArray:
        est = self._entry_estimates(counts, n)
        if self.candidates is None:
            return est
        out = np.zeros(self.domain_size)
        out[np.asarray(self.candidates)] = est
        return out

    def variance(self, n: int, frequency: float = 0.0) -> float:
        return self._variance(n, frequency)

    def subset_std_error(self, state: State, indices: Any, n: int | None = None) -> float:
        r"""Analytic standard error of :math:`\sum_{x \in S} \hat f(x)` for this state.

        The sum is :math:`l/(p-q)\,(\bar Y - |S'|q)` with :math:`Y_i` the number of the
        items' entries :math:`S'` report i supports.  With GRR inside, :math:`Y_i` is a
        Bernoulli of mean :math:`P_S`, estimated by the reports in :math:`S'`, so the
        variance is :math:`l^2 P_S(1 - P_S) / (n (p - q)^2)` (i.i.d. reports: an upper
        bound for a fixed population).  With OLH inside it is the inner oracle's exact
        :meth:`~ldpcore.frequency.lh.LocalHashing.subset_variance` at the Norm-Sub fit of
        the padded entries, times :math:`l^2`.  ``n`` (default the state's) may be an
        effective sample size.  O(state size): no simulation.

        >>> import ldpcore
        >>> o = ldpcore.make_oracle("ps", epsilon=2.0, domain_size=6, length=3, inner="grr")
        >>> st = o.aggregate(o.perturb_sets([[0, 1], [2], [0, 4, 5]] * 1000, rng=1))
        >>> 0 < o.subset_std_error(st, [0, 1]) < o.std_error(3000, 0.6) + o.std_error(3000, 0.3)
        True
        """
        from ..intervals import fit_distribution

        self.check_state(state)
        if state.n <= 0:
            raise StateError("cannot estimate from an empty state (n = 0)")
        size = int(state.n if n is None else n)
        idx = np.asarray(indices, dtype=np.int64)
        if self.candidates is not None:  # items outside the candidates are exactly 0
            where = {c: i for i, c in enumerate(self.candidates)}
            idx = np.array([where[int(x)] for x in idx if int(x) in where], dtype=np.int64)
        if idx.size == 0:
            return 0.0
        inner, length = self.inner, self.length
        inner_state = State(inner.fingerprint, state.n, state.counts)
        exact = getattr(inner, "subset_variance", None)
        if exact is not None:
            var = float(exact(size, idx, fit_distribution(inner, inner_state)))
            return float(length * math.sqrt(max(var, 0.0)))
        share = float(np.clip(state.counts.reshape(-1)[idx].sum() / state.n, 0.0, 1.0))
        return float(length * math.sqrt(share * (1 - share) / size) / (self._p - self._q))

    @classmethod
    def _unit_test_params(cls) -> list[dict[str, Any]]:
        return [{"domain_size": 6}, {"domain_size": 37, "length": 4},
                {"domain_size": 64, "length": 2, "inner": "olh"}]


class PaddingSamplingItemsets(_Padded, ItemsetSupport):
    r"""Padding-and-sampling over candidate *itemsets* (SVSM's last phase, S&P 2018 §VI).

    A device's entries are the candidate itemsets contained in its set; it pads
    them to ``length`` l, samples one and reports it as :class:`PaddingSampling`
    does.  :meth:`itemset_support` estimates the fraction of devices whose set
    contains each itemset, :math:`l \cdot \hat f_{inner}(j)`, with variance
    :func:`~ldpcore.setvalued.base.ps_variance`.

    Parameters
    ----------
    epsilon, domain_size, length, inner
        As for :class:`PaddingSampling`.
    itemsets : list of lists of int, optional
        The candidate itemsets; default: every single item (then this is ``ps``).

    Examples
    --------
    >>> import ldpcore
    >>> o = ldpcore.make_oracle("psi", epsilon=2.0, domain_size=4, length=2,
    ...                         itemsets=[[0, 1], [2, 3]])
    >>> sup, se = o.itemset_support(o.aggregate(o.perturb_sets([[0, 1, 2]] * 4000, rng=3)))
    >>> bool(abs(sup[0] - 1.0) < 4 * se[0]), bool(abs(sup[1]) < 4 * se[1])
    (True, True)
    """

    mechanism = "psi"
    epsilon_bounds = (EPSILON_MIN, 21.5)  # as ps
    domain_size_bounds = (2, 1 << 22)
    parameter_ranges = ranges(epsilon_bounds, domain_size_bounds, " (items)",
                              length="integer l in [1, 4096] (padding length)",
                              inner="one of auto, grr (at eps' = ln(l(e^eps-1)+1)), olh (at eps)",
                              itemsets="non-empty list of distinct itemsets (non-empty lists of "
                                       "distinct item indices in [0, d)); default every single "
                                       "item")

    @classmethod
    def exact_epsilon_max(cls) -> float:
        return _exact_padded_epsilon_max()

    def __init__(self, *, epsilon: float, domain_size: int, length: int = 1,
                 inner: str = "auto", itemsets: list[list[int]] | None = None) -> None:
        super().__init__(epsilon=epsilon, domain_size=domain_size)
        self.itemsets = ([[i] for i in range(self.domain_size)] if itemsets is None
                         else check_itemsets(itemsets, self.domain_size))
        self._setup(length=length, inner=inner, entries=len(self.itemsets))

    @property
    def params(self) -> dict[str, Any]:
        return {"length": self.length, "inner": self.inner.mechanism,
                "itemsets": [list(x) for x in self.itemsets]}

    def _entries(self, batch: SetBatch) -> SetBatch:
        return batch.itemsets(self.itemsets)

    def itemset_support(self, state: State) -> tuple[FloatArray, FloatArray]:
        """(support, standard error) of every candidate itemset, in the order of ``itemsets``."""
        self.check_state(state)
        if state.n <= 0:
            raise StateError("cannot estimate from an empty state (n = 0)")
        est = self._entry_estimates(state.counts, state.n)
        se = np.array([np.sqrt(self._variance(state.n, float(np.clip(f, 0.0, 1.0))))
                       for f in est])
        return est, se

    def support_variance(self, n: int, support: float = 0.0) -> float:
        """Analytic variance of one itemset's support estimate from n reports."""
        return self._variance(n, support)

    @classmethod
    def _unit_test_params(cls) -> list[dict[str, Any]]:
        return [{"domain_size": 6, "length": 2, "itemsets": [[0, 1], [2], [3, 4, 5]]},
                {"domain_size": 37, "length": 3}]


class SetSize(_InnerReports, SetSizeEstimates):
    r"""Set sizes :math:`\min(|v \cap C|, L_{max})` through a frequency oracle (SVIM phase 2).

    Each device reports the number of ``candidates`` (or of candidate
    ``itemsets``) it holds, capped at ``max_size``, with the adaptive frequency
    oracle (:func:`ldpcore.recommend`) over the ``max_size + 1`` sizes at ε.
    :meth:`size_distribution` keeps the sizes whose estimate is significant —
    above :math:`z\,\sigma_0`, with :math:`\sigma_0` the oracle's standard error at
    f = 0 and z the one-sided normal quantile at 5 % Bonferroni-corrected over the
    ``max_size + 1`` sizes — and renormalises them.  Norm-Sub (Wang et al. 2020)
    would keep the noise of the many (nearly) empty large sizes and inflate the
    mean size, hence SVIM's correction (twofold at ε = 0.5 on ``bench/svim.py``'s
    data); Norm-Cut can drop a true size whose noisy neighbours overshoot.
    :meth:`size_percentile` is its quantile — SVIM
    pads the last phase to the 90th percentile (S&P 2018, §V).

    Parameters
    ----------
    epsilon, domain_size
        As for :class:`PaddingSampling`.
    max_size : int, optional
        Cap :math:`L_{max}` in [1, 4096]; default the number of candidates
        (itemsets) or ``min(d, 64)``.
    candidates : list of int, optional
    itemsets : list of lists of int, optional
        At most one of the two; default every item.
    inner : str
        A frequency mechanism name or ``"auto"`` (resolved in the spec).

    Examples
    --------
    >>> import ldpcore
    >>> o = ldpcore.make_oracle("setsize", epsilon=2.0, domain_size=10, max_size=4)
    >>> st = o.aggregate(o.perturb_sets([[0], [1, 2], [1, 2, 3, 4, 5]] * 3000, rng=2))
    >>> [round(float(x), 1) for x in o.size_distribution(st)]
    [0.0, 0.3, 0.3, 0.0, 0.3]
    >>> o.size_percentile(st, 0.9)
    4
    """

    mechanism = "setsize"
    epsilon_bounds = (EPSILON_MIN, EPSILON_MAX_64)
    domain_size_bounds = (2, 1 << 22)
    parameter_ranges = ranges(epsilon_bounds, domain_size_bounds, " (items)",
                              max_size="integer in [1, 4096]; default the number of candidates or "
                                       "itemsets, else min(d, 64)",
                              candidates="optional list of distinct item indices in [0, d)",
                              itemsets="optional list of itemsets (not with candidates)",
                              inner="a frequency mechanism or auto (resolved by recommend)")

    def __init__(self, *, epsilon: float, domain_size: int, max_size: int | None = None,
                 candidates: list[int] | None = None, itemsets: list[list[int]] | None = None,
                 inner: str = "auto") -> None:
        from ..frequency.adaptive import recommend
        from ..registry import make_frequency_oracle

        super().__init__(epsilon=epsilon, domain_size=domain_size)
        if candidates is not None and itemsets is not None:
            raise ParameterError("give candidates or itemsets, not both")
        self.candidates = (None if candidates is None
                           else check_candidates(candidates, self.domain_size))
        self.itemsets = None if itemsets is None else check_itemsets(itemsets, self.domain_size)
        default = (len(self.candidates) if self.candidates is not None
                   else len(self.itemsets) if self.itemsets is not None
                   else min(self.domain_size, 64))
        self.max_size = check_int("max_size", default if max_size is None else max_size,
                                  low=1, high=MAX_LENGTH)
        if not isinstance(inner, str):
            raise ParameterError(f"inner must be a mechanism name or 'auto', got {inner!r}")
        name = (recommend(epsilon=self.epsilon, domain_size=self.max_size + 1)
                if inner == "auto" else inner)
        self.inner = make_frequency_oracle(name, epsilon=self.epsilon,
                                           domain_size=self.max_size + 1)

    @property
    def params(self) -> dict[str, Any]:
        out: dict[str, Any] = {"max_size": self.max_size, "inner": self.inner.mechanism}
        if self.candidates is not None:
            out["candidates"] = list(self.candidates)
        if self.itemsets is not None:
            out["itemsets"] = [list(x) for x in self.itemsets]
        return out

    def sizes(self, sets: Any) -> IntArray:
        """The value each device reports (before perturbation): its capped count."""
        batch = SetBatch.from_any(sets, self.domain_size)
        if self.candidates is not None:
            batch = batch.restrict(self.candidates)
        elif self.itemsets is not None:
            batch = batch.itemsets(self.itemsets)
        out: IntArray = np.minimum(batch.lengths, self.max_size)
        return out

    def _perturb(self, values: IntArray, rng: np.random.Generator) -> dict[str, np.ndarray]:
        return self.inner._perturb(self.sizes(values), rng)

    def _perturb_batch(self, batch: SetBatch, rng: np.random.Generator) -> Reports:
        cols = self.inner._perturb(self.sizes(batch), rng)
        return Reports(self.mechanism, self.fingerprint, cols)

    def _aggregate(self, columns: dict[str, np.ndarray]) -> IntArray:
        return self.inner._aggregate(columns)

    def raw_size_estimate(self, state: State) -> FloatArray:
        """The inner oracle's unbiased estimate of every size 0..max_size."""
        self.check_state(state)
        if state.n <= 0:
            raise StateError("cannot estimate from an empty state (n = 0)")
        return self.inner._estimate(state.counts, state.n)

    def size_distribution(self, state: State) -> FloatArray:
        from statistics import NormalDist

        raw = self.raw_size_estimate(state)
        z = NormalDist().inv_cdf(1 - 0.05 / raw.size)
        kept = np.where(raw > z * math.sqrt(self.inner.variance(state.n)), raw, 0.0)
        if not np.any(kept > 0):  # nothing significant: the single most likely size
            kept = np.zeros_like(raw)
            kept[int(np.argmax(raw))] = 1.0
        out: FloatArray = kept / kept.sum()
        return out

    def size_variance(self, n: int, frequency: float = 0.0) -> float:
        """Analytic variance of one size's raw estimate (the inner oracle's)."""
        return self.inner.variance(n, frequency)

    def size_percentile(self, state: State, q: float = 0.9) -> int:
        """Smallest size L >= 1 whose estimated CDF reaches q."""
        cdf = np.cumsum(self.size_distribution(state))
        return max(1, int(np.searchsorted(cdf, q - 1e-12)))

    @classmethod
    def _unit_test_params(cls) -> list[dict[str, Any]]:
        return [{"domain_size": 6}, {"domain_size": 37, "max_size": 5, "candidates": [0, 3, 9]},
                {"domain_size": 64, "itemsets": [[0, 1], [2]]}]

