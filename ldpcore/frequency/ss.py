"""Subset selection (k-subset; Wang et al. 2016, Ye & Barg 2018)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .._bounds import EPSILON_MAX_64, EPSILON_MIN, PROB_FLOOR_64, ranges
from .._validate import check_int
from ..base import FloatArray, IntArray
from ..errors import ReportError
from .unary import _BIT_TABLE, BitmaskOracle

__all__ = ["SS"]


class SS(BitmaskOracle):
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
        k in [1, d−1], and k·e^ε/(d−k) at most about 2^53/1000 (the kernel's float64
        resolution, see :mod:`ldpcore.limits`); default
        :math:`\max(1, \mathrm{round}(d/(e^\varepsilon+1)))`, the variance-optimal size
        (Wang et al. 2016).

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
    epsilon_bounds = (EPSILON_MIN, EPSILON_MAX_64)
    domain_size_bounds = (2, 1 << 20)
    parameter_ranges = ranges(epsilon_bounds, domain_size_bounds, " (d-bit reports)",
                              subset_size="integer k in [1, d-1] with (d-k)/(k e^eps + d-k) >= "
                                          "1000*2^-53")

    def __init__(self, *, epsilon: float, domain_size: int,
                 subset_size: int | None = None) -> None:
        super().__init__(epsilon=epsilon, domain_size=domain_size)
        d = self.domain_size
        e = math.exp(self.epsilon)
        if subset_size is None:
            subset_size = min(d - 1, max(1, round(d / (e + 1))))
        # The kernel compares a float64 uniform with p: keep 1 - p = (d-k)/(ke^ε + d-k)
        # at least PROB_FLOOR_64 (ldpcore.limits), i.e. k <= d(1-F)/(F e^ε + 1 - F).
        fl = PROB_FLOOR_64
        k_max = min(d - 1, max(1, math.floor(d * (1 - fl) / (fl * e + 1 - fl))))
        self.k = check_int("subset_size", subset_size, low=1, high=k_max)
        k = self.k
        self.p = k * e / (k * e + d - k)
        self.q = (self.p * (k - 1) + (1 - self.p) * k) / (d - 1)

    @property
    def params(self) -> dict[str, Any]:
        return {"subset_size": self.k}

    def _mask_rows(self) -> int:
        # Chunks of ~1 MiB of mask keep the scattered writes in cache.
        return max(64, (1 << 20) // self.domain_size)

    def _sample_masks(self, values: IntArray, rng: np.random.Generator) -> np.ndarray:
        """Exactly-k masks: the true value w.p. p, the rest uniform among the others.

        Draws i.i.d. uniform "other" values and keeps the first distinct ones until
        the set has k members.  The set of the first j distinct values of an i.i.d.
        uniform sequence is a uniform j-subset (exchangeability), and drawing in
        rounds of exactly the current deficit never overshoots, so the rounds realise
        that sequential rule with O(k) vectorised work per report (duplicates are
        about k²/2d per round and shrink geometrically).
        """
        d, k = self.domain_size, self.k
        m = values.size
        dt: type[np.integer[Any]] = np.int16 if d <= (1 << 15) else np.int64
        vals = values.astype(dt)
        include = rng.random(m) < self.p
        bits = np.zeros((m, d), dtype=bool)
        flat = bits.reshape(-1)
        offs = np.arange(m, dtype=np.int64) * d
        draws = rng.integers(0, d - 1, size=(m, k), dtype=dt)
        draws += draws >= vals[:, None]  # index among the d-1 others -> value
        draws[include, 0] = vals[include]  # those rows draw only k-1 others
        flat[(draws + offs[:, None]).reshape(-1)] = True
        active = np.flatnonzero(np.count_nonzero(bits, axis=1) < k)
        while active.size:
            deficit = k - np.count_nonzero(bits[active], axis=1)
            keep = deficit > 0
            active, deficit = active[keep], deficit[keep]
            if not active.size:
                break
            r = int(deficit.max())
            draws = rng.integers(0, d - 1, size=(active.size, r), dtype=dt)
            draws += draws >= vals[active, None]
            flat[(draws + offs[active, None])[np.arange(r) < deficit[:, None]]] = True
        return bits

    def _validate_columns(self, columns: dict[str, np.ndarray]) -> None:
        ones = _BIT_TABLE.sum(axis=1)[columns["bits"]].sum(axis=1)
        if ones.size and (ones.min() != self.k or ones.max() != self.k):
            raise ReportError(f"column 'bits' must hold exactly subset_size={self.k} ones per "
                              "report")

    def sample_cost(self, n: int) -> int:
        """O(d·k) binomial draws per simulated state, whatever n."""
        return 4 * self.domain_size * (self.k + 1)

    def _sample_counts(self, distribution: FloatArray, n: int, size: int,
                       rng: np.random.Generator) -> IntArray:
        r"""Exact counts in O(d·k) binomial draws (vectorised over the draws), whatever n.

        A report under ``distribution`` is a mixture: with probability
        :math:`\lambda = (p - k/d)/(1 - k/d)` a uniform k-subset that must contain
        x ~ f, otherwise a uniform k-subset of [d] (both give the same set law as
        SS).  The sets are then revealed value by value: a report that still needs
        j members among the r values left takes the current value with probability
        j/r, or (j-1)/(r-1) while its x lies ahead; x is the current value with
        probability f(u)/F(≥u), independently of j.  Groups of reports by (j, x
        ahead or not) move by binomial draws.
        """
        d, k = self.domain_size, self.k
        lam = (self.p - k / d) / (1 - k / d)
        tail = np.cumsum(distribution[::-1])[::-1]
        incl = rng.binomial(n, min(max(lam, 0.0), 1.0), size=size)
        ahead = np.zeros((size, k + 1), dtype=np.int64)  # must still take x (x ahead)
        free = np.zeros((size, k + 1), dtype=np.int64)
        ahead[:, k] = incl
        free[:, k] = n - incl
        j = np.arange(k + 1, dtype=np.float64)
        out = np.zeros((size, d), dtype=np.int64)
        for u in range(d):
            r = d - u
            here = distribution[u] / tail[u] if tail[u] > 0 else 0.0
            conv = rng.binomial(ahead, min(here, 1.0))
            rest = ahead - conv
            p_ahead = np.clip((j - 1) / (r - 1), 0.0, 1.0) if r > 1 else np.zeros(k + 1)
            take_a = rng.binomial(rest, p_ahead)
            take_f = rng.binomial(free, np.clip(j / r, 0.0, 1.0))
            out[:, u] = conv.sum(axis=1) + take_a.sum(axis=1) + take_f.sum(axis=1)
            ahead = rest - take_a
            ahead[:, :-1] += take_a[:, 1:]
            free = free - take_f
            free[:, :-1] += take_f[:, 1:] + conv[:, 1:]
        return out

    def variance(self, n: int, frequency: float = 0.0) -> float:
        n, f = self._check_variance_args(n, frequency)
        p, q = self.p, self.q
        return (q * (1 - q) + f * (p * (1 - p) - q * (1 - q))) / (n * (p - q) ** 2)
