"""Pure frequency oracles (Wang et al. 2017): one support probability for the own value.

A protocol is *pure* when each report supports a set of values, the true value with
probability :math:`p` and any other given value with probability :math:`q < p`.  With
:math:`C(v)` the number of reports supporting v, the one unbiased estimator is

.. math:: \\hat f(v) = \\frac{C(v)/n - q}{p - q}, \\qquad
          \\mathrm{Var}[\\hat f(v)] = \\frac{q(1-q)}{n(p-q)^2} + \\frac{f(v)(1-p-q)}{n(p-q)}

(Wang et al. 2017, Theorem 2; the variance holds when the supports of different
values are independent given the value, as for GRR and the unary encodings).
"""

from __future__ import annotations

from ..base import FloatArray, FrequencyOracle, IntArray

__all__ = ["PureOracle"]


class PureOracle(FrequencyOracle):
    """A frequency oracle whose state counts the reports supporting each value.

    Subclasses set ``p`` and ``q`` in their constructor.
    """

    p: float
    q: float

    def _estimate(self, counts: IntArray, n: int) -> FloatArray:
        return (counts / n - self.q) / (self.p - self.q)

    def _estimate_batch(self, counts: IntArray, n: int) -> FloatArray:
        return self._estimate(counts, n)

    def variance(self, n: int, frequency: float = 0.0) -> float:
        n, f = self._check_variance_args(n, frequency)
        p, q = self.p, self.q
        return q * (1 - q) / (n * (p - q) ** 2) + f * (1 - p - q) / (n * (p - q))
