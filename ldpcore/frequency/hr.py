"""Hadamard response (Acharya, Sun & Zhang 2019), as described by Le & Zia."""

from __future__ import annotations

import numpy as np

from .._bounds import EPSILON_MAX_64, EPSILON_MIN
from .._transforms import fwht, hadamard_sign, next_pow2, sign_keep
from ..base import FloatArray, IntArray
from .categorical import CategoricalOracle

__all__ = ["HR"]


class HR(CategoricalOracle):
    r"""Hadamard response: one symbol of :math:`[K]` per report, K = next power of two > d.

    Value v owns the set :math:`S_v = \{y : H_K[v+1, y] = +1\}` of size K/2 (row 0,
    all ones, is unused).  The device reports a uniform element of :math:`S_v`
    with probability :math:`p = e^\varepsilon/(e^\varepsilon+1)` and a uniform
    element of its complement otherwise, so every output has likelihood ratio at
    most :math:`e^\varepsilon`.  For :math:`u \ne v` the sets :math:`S_u, S_v`
    meet in exactly K/4 symbols, hence :math:`P[y \in S_v] = 1/2 + f(v)(p - 1/2)`
    and, with :math:`c(v)` the number of reports in :math:`S_v`,

    .. math:: \hat f(v) = \frac{2(e^\varepsilon+1)}{e^\varepsilon-1}
              \Big(\frac{c(v)}{n} - \frac12\Big), \qquad
              \mathrm{Var}[\hat f(v)] = \frac{1}{4n(p - 1/2)^2} - \frac{f(v)}{n}

    (the n·f(v) holders of v are each inside with probability p, everyone else
    with probability 1/2).

    All :math:`c(v)` come from one fast Walsh–Hadamard transform of the K report
    counts: :math:`c(v) = (n + (H_K C)[v+1]) / 2`.

    Examples
    --------
    >>> import ldpcore
    >>> o = ldpcore.make_oracle("hr", epsilon=1.0, domain_size=1000)
    >>> o.K, o.report_columns[0].high
    (1024, 1023)
    """

    mechanism = "hr"
    epsilon_bounds = (EPSILON_MIN, EPSILON_MAX_64)
    domain_size_bounds = (2, 1 << 24)

    def __init__(self, *, epsilon: float, domain_size: int) -> None:
        super().__init__(epsilon=epsilon, domain_size=domain_size)
        self.K = next_pow2(self.domain_size + 1)
        self.p = sign_keep(self.epsilon)

    @property
    def output_size(self) -> int:
        return self.K

    def _perturb(self, values: IntArray, rng: np.random.Generator) -> dict[str, np.ndarray]:
        n = values.size
        row = values + 1
        z = rng.integers(0, self.K, size=n, dtype=np.int64)
        inside = hadamard_sign(row, z) > 0
        want = rng.random(n) < self.p
        # Flipping the lowest set bit of the row index in z flips H[row, z]: a bijection
        # between S_v and its complement, so the result stays uniform on the chosen side.
        lowbit = row & -row
        y = np.where(inside == want, z, z ^ lowbit)
        return {"y": y.astype(self.report_columns[0].dtype)}

    def _estimate(self, counts: IntArray, n: int) -> FloatArray:
        spectrum = fwht(counts.astype(np.float64))
        inside = (n + spectrum[1:self.domain_size + 1]) / 2.0
        return (inside / n - 0.5) / (self.p - 0.5)

    def _output_probs(self, distribution: FloatArray) -> FloatArray:
        # P(y) = (2/K) [(1 - p) + (2p - 1) P(y in S_x)], P(y in S_x) = (1 + (H u)(y)) / 2
        # with u(v + 1) = f(v).
        u = np.zeros(self.K, dtype=np.float64)
        u[1:self.domain_size + 1] = distribution
        inside = (1.0 + fwht(u)) / 2.0
        out: FloatArray = np.clip(2.0 / self.K * ((1 - self.p) + (2 * self.p - 1) * inside),
                                  0.0, None)
        return out

    def _estimate_batch(self, counts: IntArray, n: int) -> FloatArray:
        spectrum = fwht(counts.astype(np.float64))
        inside = (n + spectrum[:, 1:self.domain_size + 1]) / 2.0
        out: FloatArray = (inside / n - 0.5) / (self.p - 0.5)
        return out

    def variance(self, n: int, frequency: float = 0.0) -> float:
        n, f = self._check_variance_args(n, frequency)
        return 1.0 / (4 * n * (self.p - 0.5) ** 2) - f / n
