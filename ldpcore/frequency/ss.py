"""Subset selection (k-subset; Wang et al. 2016, Ye & Barg 2018)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .._validate import check_int
from ..base import Column, FloatArray, FrequencyOracle, IntArray
from ..errors import ReportError
from .unary import _BIT_TABLE, bit_counts

__all__ = ["SS"]

_CHUNK = 1 << 14


class SS(FrequencyOracle):
    r"""Subset selection: each device reports a set of k values.

    With probability :math:`p = k e^\varepsilon / (k e^\varepsilon + d - k)` the set
    contains the true value plus k−1 others drawn uniformly; otherwise it is k
    values drawn uniformly from the d−1 others.  A value :math:`u \ne x` is then in
    the set with probability :math:`q = [p(k-1) + (1-p)k]/(d-1)`, and with
    :math:`C(v)` the number of sets containing v

    .. math:: \hat f(v) = \frac{C(v)/n - q}{p - q}, \qquad
              \mathrm{Var}[\hat f(v)] = \frac{q(1-q) + f(v)\,[p(1-p) - q(1-q)]}{n(p-q)^2}.

    The report is a d-bit mask with exactly k ones, so it carries no order.

    Parameters
    ----------
    subset_size : int, optional
        k in [1, d−1]; default :math:`\max(1, \mathrm{round}(d/(e^\varepsilon+1)))`,
        the variance-optimal size (Wang et al. 2016).

    Examples
    --------
    >>> import ldpcore
    >>> o = ldpcore.make_oracle("ss", epsilon=1.0, domain_size=100)
    >>> o.k
    27
    >>> int(o.perturb([5], rng=1).columns["bits"].sum() > 0)
    1
    """

    mechanism = "ss"

    def __init__(self, *, epsilon: float, domain_size: int,
                 subset_size: int | None = None) -> None:
        super().__init__(epsilon=epsilon, domain_size=domain_size)
        d = self.domain_size
        e = math.exp(self.epsilon)
        if subset_size is None:
            subset_size = min(d - 1, max(1, round(d / (e + 1))))
        self.k = check_int("subset_size", subset_size, low=1, high=d - 1)
        k = self.k
        self.p = k * e / (k * e + d - k)
        self.q = (self.p * (k - 1) + (1 - self.p) * k) / (d - 1)

    @property
    def params(self) -> dict[str, Any]:
        return {"subset_size": self.k}

    @property
    def report_columns(self) -> tuple[Column, ...]:
        return (Column("bits", "uint8", bits=self.domain_size),)

    @property
    def state_shape(self) -> tuple[int, ...]:
        return (self.domain_size,)

    def _perturb(self, values: IntArray, rng: np.random.Generator) -> dict[str, np.ndarray]:
        d, k = self.domain_size, self.k
        width = (d + 7) // 8
        out = np.empty((values.size, width), dtype=np.uint8)
        n_others = d - 1
        for start in range(0, values.size, _CHUNK):
            v = values[start:start + _CHUNK]
            m = v.size
            rows = np.arange(m)
            # Floyd's algorithm, vectorised over rows: a uniform k-subset of the d-1 other
            # values in k steps (O(k) work per report instead of sorting d keys).  All
            # draws t_j ~ U{0..j} are made at once from uniforms (float64 when d is large,
            # so that the floor stays uniform).
            bound = np.arange(n_others - k, n_others) + 1
            dt = np.float32 if n_others < (1 << 16) else np.float64
            draws = (rng.random((m, k), dtype=dt) * bound.astype(dt)).astype(np.int64)
            np.minimum(draws, bound - 1, out=draws)  # guard the rounding of u*(j+1) up to j+1
            taken = np.zeros(m * n_others, dtype=bool)
            base = rows * n_others
            chosen = np.empty((m, k), dtype=np.int64)
            for step in range(k):
                t = draws[:, step]
                pick = np.where(taken[base + t], bound[step] - 1, t)
                taken[base + pick] = True
                chosen[:, step] = pick
            chosen += chosen >= v[:, None]  # index among the others -> value in [0, d)
            # Including the true value: it replaces a uniform member of the k-subset,
            # leaving a uniform (k-1)-subset of the others beside it.
            include = rng.random(m) < self.p
            slot = rng.integers(0, k, size=m)
            chosen[rows, slot] = np.where(include, v, chosen[rows, slot])
            bits = np.zeros((m, d), dtype=bool)
            bits[rows[:, None], chosen] = True
            out[start:start + m] = np.packbits(bits, axis=1, bitorder="little")
        return {"bits": out}

    def _validate_columns(self, columns: dict[str, np.ndarray]) -> None:
        ones = _BIT_TABLE.sum(axis=1)[columns["bits"]].sum(axis=1)
        if ones.size and (ones.min() != self.k or ones.max() != self.k):
            raise ReportError(f"column 'bits' must hold exactly subset_size={self.k} ones per "
                              "report")

    def _aggregate(self, columns: dict[str, np.ndarray]) -> IntArray:
        return bit_counts(columns["bits"], self.domain_size)

    def _estimate(self, counts: IntArray, n: int) -> FloatArray:
        return (counts / n - self.q) / (self.p - self.q)

    def variance(self, n: int, frequency: float = 0.0) -> float:
        n, f = self._check_variance_args(n, frequency)
        p, q = self.p, self.q
        return (q * (1 - q) + f * (p * (1 - p) - q * (1 - q))) / (n * (p - q) ** 2)
