"""Generalized randomized response (k-RR, direct encoding)."""

from __future__ import annotations

import math

import numpy as np

from .._bounds import EPSILON_MAX_64, EPSILON_MIN
from ..base import FloatArray, IntArray
from .categorical import CategoricalOracle
from .pure import PureOracle

__all__ = ["GRR"]


class GRR(PureOracle, CategoricalOracle):
    r"""Generalized randomized response (Kairouz et al. 2014; Wang et al. 2017 "DE").

    A user with value :math:`v` reports :math:`y = v` with probability
    :math:`p = e^\varepsilon / (e^\varepsilon + d - 1)`, and otherwise one of the
    other :math:`d-1` values uniformly (each with :math:`q = 1/(e^\varepsilon+d-1)`).
    The state is the histogram :math:`C` of reports and the unbiased estimator is

    .. math:: \hat f(v) = \frac{C(v)/n - q}{p - q}

    with variance (Wang et al. 2017, Eq. 2, divided by :math:`n^2`)

    .. math:: \mathrm{Var}[\hat f(v)] = \frac{q(1-q)}{n(p-q)^2} + \frac{f(v)(1-p-q)}{n(p-q)}.

    Parameters
    ----------
    epsilon : float
        Privacy parameter, finite and > 0.
    domain_size : int
        d >= 2.

    Examples
    --------
    >>> import ldpcore
    >>> o = ldpcore.make_oracle("grr", epsilon=2.0, domain_size=3)
    >>> round(o.p, 4), round(o.q, 4)
    (0.787, 0.1065)
    >>> st = o.aggregate(o.perturb([0] * 1000, rng=7))
    >>> float(o.estimate(st).sum())
    1.0
    """

    mechanism = "grr"
    epsilon_bounds = (EPSILON_MIN, EPSILON_MAX_64)
    domain_size_bounds = (2, 1 << 24)

    def __init__(self, *, epsilon: float, domain_size: int) -> None:
        super().__init__(epsilon=epsilon, domain_size=domain_size)
        e = math.exp(self.epsilon)
        self.p = e / (e + self.domain_size - 1)
        self.q = 1.0 / (e + self.domain_size - 1)

    @property
    def output_size(self) -> int:
        return self.domain_size

    def _perturb(self, values: IntArray, rng: np.random.Generator) -> dict[str, np.ndarray]:
        n, d = values.size, self.domain_size
        keep = rng.random(n) < self.p
        # A uniform draw among the other d-1 values: shift by 1..d-1 modulo d.
        other = (values + rng.integers(1, d, size=n)) % d
        y = np.where(keep, values, other)
        return {"y": y.astype(self.report_columns[0].dtype)}

    def _output_probs(self, distribution: FloatArray) -> FloatArray:
        # One report is y with P(y) = q + (p - q) f(y).
        out: FloatArray = self.q + (self.p - self.q) * distribution
        return out
