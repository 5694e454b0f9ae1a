"""Unbiased means of bounded numbers: Piecewise Mechanism and Duchi et al.'s mechanism."""

from __future__ import annotations

import math

import numpy as np

from .._bounds import (
    EPSILON_MAX_64,
    EPSILON_MIN,
    EXACT_EPSILON_MAX_64,
    integer_in,
    real_in,
)
from .._state_sampling import check_distribution
from .._validate import as_rng, check_int
from ..base import Column, FloatArray, IntArray, State
from ..errors import ParameterError
from .base import NumericOracle

__all__ = ["PiecewiseMechanism", "Duchi"]

_LEVELS = 1 << 16  # fixed-point resolution of a PM report over [-C, C]


class _MeanOnly(NumericOracle):
    """A mechanism that estimates means only (no frequency capability)."""

    def _unit_mean(self, state: State) -> float:  # pragma: no cover - overridden
        raise NotImplementedError

    def mean(self, state: State) -> float:
        """Unbiased mean, in value units."""
        self.check_state(state)
        if state.n <= 0:
            raise ParameterError("cannot estimate a mean from an empty state (n = 0)")
        t = self._unit_mean(state)  # in [-1, 1] scale, unbiased
        return float(self.low + (t + 1) / 2 * (self.high - self.low))

    def _t_variance(self) -> float:  # pragma: no cover - overridden
        raise NotImplementedError

    def mean_variance(self, n: int) -> float:
        """Worst-case variance of :meth:`mean` from n reports (value units)."""
        n = check_int("n", n, low=1)
        return self._t_variance() / n * ((self.high - self.low) / 2) ** 2


class PiecewiseMechanism(_MeanOnly):
    r"""Piecewise Mechanism (Wang, Xiao, Yang, Zhao, Hui, Shin, Shin & Yu, ICDE 2019).

    For :math:`t \in [-1, 1]` and :math:`C = (e^{\varepsilon/2}+1)/(e^{\varepsilon/2}-1)`,
    the report is uniform on :math:`[\ell(t), r(t)]` with
    :math:`\ell(t) = \frac{C+1}{2}t - \frac{C-1}{2}`, :math:`r = \ell + C - 1`, with
    probability :math:`e^{\varepsilon/2}/(e^{\varepsilon/2}+1)`, else uniform on the rest
    of :math:`[-C, C]`.  Unbiased, with

    .. math:: \mathrm{Var}[y \mid t] = \frac{t^2}{e^{\varepsilon/2}-1}
              + \frac{e^{\varepsilon/2}+3}{3(e^{\varepsilon/2}-1)^2}.

    The device sends y in fixed point (2^16 levels over [-C, C], stochastic rounding:
    unbiased); the state is the sum of those integers.

    >>> import numpy as np, ldpcore
    >>> pm = ldpcore.make_oracle("pm", epsilon=1.0, bins=100, low=0.0, high=10.0)
    >>> x = np.random.default_rng(3).uniform(2, 4, 100_000)
    >>> st = pm.aggregate(pm.perturb(pm.to_bins(x), rng=4))
    >>> bool(abs(pm.mean(st) - x.mean()) < 4 * pm.mean_std_error(st.n))
    True
    """

    mechanism = "pm"
    epsilon_bounds = (EPSILON_MIN, 59.6)  # 1/(e^(ε/2)+1) drawn in float64
    domain_size_bounds = (2, 1 << 20)
    parameter_ranges = {"epsilon": real_in(epsilon_bounds), "bins": integer_in(domain_size_bounds),
                        "low": "finite real in [-1e300, 1e300]",
                        "high": "finite real in [-1e300, 1e300], > low"}

    @classmethod
    def exact_epsilon_max(cls) -> float:
        return 2 * EXACT_EPSILON_MAX_64

    def __init__(self, *, epsilon: float, domain_size: int | None = None,
                 bins: int | None = None, low: float = 0.0, high: float = 1.0) -> None:
        super().__init__(epsilon=epsilon, domain_size=domain_size, bins=bins, low=low,
                         high=high)
        h = math.exp(self.epsilon / 2)
        self.C = (h + 1) / (h - 1)
        self.p_band = h / (h + 1)

    @property
    def report_columns(self) -> tuple[Column, ...]:
        return (Column("y", "uint32", 0, _LEVELS),)

    @property
    def state_shape(self) -> tuple[int, ...]:
        return (1,)

    def perturb_t(self, t: FloatArray, rng: np.random.Generator) -> FloatArray:
        """The continuous report y in [-C, C] of values t in [-1, 1]."""
        c = self.C
        left = (c + 1) / 2 * t - (c - 1) / 2
        right = left + c - 1
        band = rng.random(t.size) < self.p_band
        s = rng.random(t.size)
        inside = left + s * (c - 1)
        rest = s * (c + 1)  # the outside has length 2C - (C - 1) = C + 1
        outside = np.where(rest < left + c, -c + rest, right + (rest - (left + c)))
        return np.where(band, inside, outside)

    def _perturb(self, values: IntArray, rng: np.random.Generator) -> dict[str, np.ndarray]:
        return self.report_columns_of_t(2 * self._unit_values(values, rng) - 1, rng)

    def report_columns_of_t(self, t: FloatArray, rng: np.random.Generator
                            ) -> dict[str, np.ndarray]:
        """The report columns of continuous values t in [-1, 1] (no binning): PM's y in
        fixed point.  Used by :mod:`ldpcore.multi` for exactly unbiased vector means."""
        y = self.perturb_t(t, rng)
        z = (y + self.C) / (2 * self.C) * _LEVELS
        zi = np.floor(z + rng.random(z.size))  # stochastic rounding keeps E[zi] = z
        return {"y": np.clip(zi, 0, _LEVELS).astype(np.uint32)}

    def report_pmf(self, distribution: FloatArray) -> FloatArray:
        r"""Exact distribution of one report's integer :math:`z_i \in [0, 2^{16}]` when the
        bin index is drawn from ``distribution`` (and the value uniformly in its bin).

        With :math:`z = (y + C)L/(2C)` and stochastic rounding,
        :math:`P(z_i = k) = \int f_Z(z)\,\Lambda(z - k)\,dz` (Λ the unit hat).  The
        density of y is :math:`f_Y(y) = q_o + (p_i - q_o)\,[F_\ell(y) - F_\ell(y - C + 1)]`
        (:math:`p_i = p_{band}/(C-1)`, :math:`q_o = (1-p_{band})/(C+1)`, :math:`F_\ell` the
        piecewise-linear CDF of the band's left end :math:`\ell(T)`), so :math:`f_Z` is
        piecewise linear: jumps :math:`J` at 0 and L, slope changes :math:`s_\kappa` at
        the images κ of the bin edges.  Writing f as steps and ramps,
        :math:`P(k) = f_Z(k) + \sum_{|k-\kappa|<1} \big[s_\kappa (1-|x|)^3/6\big]
        + \sum_{\text{jumps}} J\,[\Phi(x) - 1_{x \ge 0}]`, x = k − κ, with Φ the hat's
        CDF — exact, O(L + bins).
        """
        dist = check_distribution(distribution, self.domain_size)
        c, big = self.C, _LEVELS
        alpha, beta, width = (c + 1) / 2, (c - 1) / 2, c - 1
        p_in, q_out = self.p_band / (c - 1), (1 - self.p_band) / (c + 1)
        d = self.domain_size
        t_edges = -1 + 2 * np.arange(d + 1) / d
        cum = np.concatenate([[0.0], np.cumsum(dist)])
        scale = 2 * c / big  # dy/dz

        def f_ell(v: FloatArray) -> FloatArray:
            return np.asarray(np.interp((v + beta) / alpha, t_edges, cum), dtype=np.float64)

        k = np.arange(big + 1, dtype=np.float64)
        y = -c + scale * k
        pmf = (q_out + (p_in - q_out) * (f_ell(y) - f_ell(y - width))) * scale
        pmf[-1] = 0.0  # right-continuous f_Z: 0 beyond L
        # Slope changes of f_Y: the density of l(T) is pi_i/(alpha*dt) on bin i's image.
        dens = np.concatenate([[0.0], dist, [0.0]]) / (alpha * (2 / d))
        jump = np.diff(dens) * (p_in - q_out)  # at sigma_e = alpha t_e - beta, e = 0..d
        sigma = alpha * t_edges - beta
        kinks = np.concatenate([(sigma + c) / scale, (sigma + width + c) / scale])
        slopes = np.concatenate([jump, -jump]) * scale * scale  # d f_Z / dz changes
        base = np.floor(kinks).astype(np.int64)
        for off in (0, 1):
            kk = base + off
            x = kk - kinks
            ok = (np.abs(x) < 1) & (kk >= 0) & (kk <= big)
            np.add.at(pmf, kk[ok], slopes[ok] * (1 - np.abs(x[ok])) ** 3 / 6)
        pmf[0] -= q_out * scale / 2  # jump +q_o at z = 0:  Phi(0) - 1 = -1/2
        pmf[-1] += q_out * scale / 2  # jump -q_o at z = L: -q_o (Phi(0) - 1)
        pmf = np.clip(pmf, 0.0, None)
        out: FloatArray = pmf / pmf.sum()
        return out

    def sample_state(self, distribution: FloatArray, n: int,
                     rng: np.random.Generator | int | None = None) -> State:
        """A state distributed exactly as ``aggregate(perturb(values))`` for n bin indices
        i.i.d. from ``distribution``: the report counts per level are one multinomial
        draw over :meth:`report_pmf` (2^16 + 1 cells), the state their weighted sum.
        O(2^16 + bins) whatever n."""
        pmf = self.report_pmf(distribution)
        n = check_int("n", n, low=0)
        gen = as_rng(rng)
        if n == 0:
            return self.new_state()
        counts = gen.multinomial(n, pmf)
        total = int(counts @ np.arange(_LEVELS + 1, dtype=np.int64))
        return State(self.fingerprint, n, np.array([total], dtype=np.int64))

    def _aggregate(self, columns: dict[str, np.ndarray]) -> IntArray:
        return np.array([int(columns["y"].sum(dtype=np.int64))], dtype=np.int64)

    def _unit_mean(self, state: State) -> float:
        return float(state.counts[0] / state.n / _LEVELS * 2 * self.C - self.C)

    def _t_variance(self) -> float:
        h = math.exp(self.epsilon / 2)
        # worst case |t| = 1, plus the fixed-point rounding (at most 1/4 level²)
        return (1 / (h - 1) + (h + 3) / (3 * (h - 1) ** 2)
                + (2 * self.C / _LEVELS) ** 2 / 4)


class Duchi(_MeanOnly):
    r"""Duchi, Jordan & Wainwright's one-bit mechanism (JASA 2018), for t in [-1, 1].

    Reports :math:`\pm B`, :math:`B = (e^\varepsilon+1)/(e^\varepsilon-1)`, with
    :math:`P[+B] = \frac{(e^\varepsilon-1)t + e^\varepsilon + 1}{2(e^\varepsilon+1)}`;
    unbiased with :math:`\mathrm{Var} = B^2 - t^2 \le B^2`.

    >>> import ldpcore
    >>> o = ldpcore.make_oracle("duchi", epsilon=1.0, bins=2)
    >>> st = o.aggregate(o.perturb([1] * 50_000, rng=5))   # bin 1 of [0, 1]: mean 0.75
    >>> bool(abs(o.mean(st) - 0.75) < 4 * o.mean_std_error(st.n))
    True
    """

    mechanism = "duchi"
    epsilon_bounds = (EPSILON_MIN, EPSILON_MAX_64)
    domain_size_bounds = (2, 1 << 20)
    parameter_ranges = {"epsilon": real_in(epsilon_bounds), "bins": integer_in(domain_size_bounds),
                        "low": "finite real in [-1e300, 1e300]",
                        "high": "finite real in [-1e300, 1e300], > low"}

    def __init__(self, *, epsilon: float, domain_size: int | None = None,
                 bins: int | None = None, low: float = 0.0, high: float = 1.0) -> None:
        super().__init__(epsilon=epsilon, domain_size=domain_size, bins=bins, low=low,
                         high=high)
        e = math.exp(self.epsilon)
        self.B = (e + 1) / (e - 1)

    @property
    def report_columns(self) -> tuple[Column, ...]:
        return (Column("y", "uint8", 0, 1),)

    @property
    def state_shape(self) -> tuple[int, ...]:
        return (1,)

    def _perturb(self, values: IntArray, rng: np.random.Generator) -> dict[str, np.ndarray]:
        return self.report_columns_of_t(2 * self._unit_values(values, rng) - 1, rng)

    def report_columns_of_t(self, t: FloatArray, rng: np.random.Generator
                            ) -> dict[str, np.ndarray]:
        """The report column of continuous values t in [-1, 1] (no binning)."""
        e = math.exp(self.epsilon)
        plus = rng.random(t.size) < ((e - 1) * t + e + 1) / (2 * (e + 1))
        return {"y": plus.astype(np.uint8)}

    def _aggregate(self, columns: dict[str, np.ndarray]) -> IntArray:
        return np.array([int(columns["y"].sum(dtype=np.int64))], dtype=np.int64)

    def sample_state(self, distribution: FloatArray, n: int,
                     rng: np.random.Generator | int | None = None) -> State:
        r"""A state distributed exactly as ``aggregate(perturb(values))`` for n bin indices
        i.i.d. from ``distribution``: the count of +B reports is
        :math:`\mathrm{Bin}(n, \bar P)` with :math:`\bar P = \sum_i \pi_i
        \frac{(e^\varepsilon-1)\bar t_i + e^\varepsilon + 1}{2(e^\varepsilon+1)}`, exact
        because P[+B | t] is linear in t and :math:`\bar t_i` is bin i's centre in [-1, 1].
        O(bins).

        >>> import ldpcore
        >>> o = ldpcore.make_oracle("duchi", epsilon=1.0, bins=2)
        >>> o.sample_state([0.0, 1.0], 10**12, rng=1).n
        1000000000000
        """
        dist = check_distribution(distribution, self.domain_size)
        n = check_int("n", n, low=0)
        gen = as_rng(rng)
        e = math.exp(self.epsilon)
        t = 2 * (np.arange(self.domain_size) + 0.5) / self.domain_size - 1
        plus = float(dist @ (((e - 1) * t + e + 1) / (2 * (e + 1))))
        count = int(gen.binomial(n, min(max(plus, 0.0), 1.0))) if n else 0
        return State(self.fingerprint, n, np.array([count], dtype=np.int64))

    def _unit_mean(self, state: State) -> float:
        return float((2 * state.counts[0] / state.n - 1) * self.B)

    def _t_variance(self) -> float:
        return self.B**2
