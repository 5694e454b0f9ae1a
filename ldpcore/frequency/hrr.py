"""Hadamard randomized response (Cormode, Kulkarni & Srivastava 2019)."""

from __future__ import annotations

import numpy as np

from .._bounds import EPSILON_MAX_64, EPSILON_MIN
from .._transforms import fwht, hadamard_sign, next_pow2, sign_keep
from ..base import Column, FloatArray, FrequencyOracle, IntArray

__all__ = ["HRR"]


class HRR(FrequencyOracle):
    r"""Hadamard randomized response: one coefficient index and one perturbed bit per user.

    With D the next power of two >= d, a device samples :math:`j` uniformly from
    :math:`[D]`, computes :math:`H_D[j, x] \in \{\pm1\}` and keeps it with
    probability :math:`p = e^\varepsilon/(1+e^\varepsilon)` (flips it otherwise).
    The state counts reports per (j, sign); the unnormalised Hadamard coefficient
    :math:`\theta_j = \sum_x H[j,x] f(x)` is estimated without bias by

    .. math:: \hat\theta_j = \frac{D}{n}\,\frac{C[j,+] - C[j,-]}{2p-1},

    and :math:`\hat f = H_D \hat\theta / D` by one fast Walsh–Hadamard transform in
    :math:`O(D \log D)`.  Each report contributes :math:`Z = H[j,v]\,s/(2p-1)` to
    :math:`\hat f(v)` with :math:`Z^2 = (2p-1)^{-2}` and :math:`E[Z] = 1[x = v]`, so exactly

    .. math:: \mathrm{Var}[\hat f(v)] = \frac{1}{n}\Big(\frac{1}{(2p-1)^2} - f(v)\Big)
              = \frac{1}{n}\Big(\Big(\frac{e^\varepsilon+1}{e^\varepsilon-1}\Big)^2 - f(v)\Big).

    Examples
    --------
    >>> import ldpcore
    >>> o = ldpcore.make_oracle("hrr", epsilon=1.0, domain_size=100)
    >>> o.D, o.state_shape
    (128, (128, 2))
    """

    mechanism = "hrr"
    epsilon_bounds = (EPSILON_MIN, EPSILON_MAX_64)
    domain_size_bounds = (2, 1 << 24)

    def __init__(self, *, epsilon: float, domain_size: int) -> None:
        super().__init__(epsilon=epsilon, domain_size=domain_size)
        self.D = next_pow2(self.domain_size)
        self.p = sign_keep(self.epsilon)

    @property
    def report_columns(self) -> tuple[Column, ...]:
        return (Column.index("j", self.D), Column("b", "uint8", 0, 1))

    @property
    def state_shape(self) -> tuple[int, ...]:
        return (self.D, 2)

    def _perturb(self, values: IntArray, rng: np.random.Generator) -> dict[str, np.ndarray]:
        n = values.size
        j = rng.integers(0, self.D, size=n, dtype=np.int64)
        negative = hadamard_sign(j, values) < 0  # bit b = 1 encodes -1
        flip = rng.random(n) >= self.p
        b = (negative ^ flip).astype(np.uint8)
        return {"j": j.astype(self.report_columns[0].dtype), "b": b}

    def _aggregate(self, columns: dict[str, np.ndarray]) -> IntArray:
        flat = columns["j"].astype(np.int64) * 2 + columns["b"]
        return np.bincount(flat, minlength=2 * self.D).astype(np.int64).reshape(self.D, 2)

    def coefficients(self, counts: IntArray, n: int) -> FloatArray:
        r"""Unbiased unnormalised Hadamard coefficients :math:`\hat\theta_j`, shape (D,)."""
        diff = (counts[:, 0] - counts[:, 1]).astype(np.float64)
        out: FloatArray = self.D * diff / (n * (2 * self.p - 1))
        return out

    def _estimate(self, counts: IntArray, n: int) -> FloatArray:
        full: FloatArray = fwht(self.coefficients(counts, n)) / self.D
        return full[:self.domain_size]

    def _sample_counts(self, distribution: FloatArray, n: int, size: int,
                       rng: np.random.Generator) -> IntArray:
        # P(j, +) = [(1 - p) + (2p - 1)(1 + theta_j)/2] / D with theta = H f.
        f = np.zeros(self.D, dtype=np.float64)
        f[:self.domain_size] = distribution
        plus = ((1 - self.p) + (2 * self.p - 1) * (1.0 + fwht(f)) / 2.0) / self.D
        probs = np.clip(np.stack([plus, 1.0 / self.D - plus], axis=1).reshape(-1), 0.0, None)
        out = rng.multinomial(n, probs / probs.sum(), size=size)
        res: IntArray = out.reshape(size, self.D, 2).astype(np.int64)
        return res

    def _estimate_batch(self, counts: IntArray, n: int) -> FloatArray:
        diff = (counts[..., 0] - counts[..., 1]).astype(np.float64)
        coef = self.D * diff / (n * (2 * self.p - 1))
        out: FloatArray = fwht(coef)[:, :self.domain_size] / self.D
        return out

    def variance(self, n: int, frequency: float = 0.0) -> float:
        n, f = self._check_variance_args(n, frequency)
        return (1.0 / (2 * self.p - 1) ** 2 - f) / n
