"""Square Wave: numeric distributions under ε-LDP (Li, Wang, Lopuhaä-Zwakenberg,
Li & Škorić, "Estimating Numerical Distributions under Local Differential Privacy",
SIGMOD 2020)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .._bounds import EPSILON_MIN, PROB_FLOOR_64, SW_B_MIN, integer_in, real_in
from .._state_sampling import check_distribution, multinomial_cells
from .._validate import as_rng, check_float, check_int
from ..base import Column, FloatArray, FrequencyOracle, IntArray, State
from ..capabilities import DistributionEstimates
from ..errors import ParameterError
from .base import NumericOracle
from .em import Channel, SWChannel, em_reconstruct, sw_transition_matrix

__all__ = ["SquareWave", "sw_b"]

SW_MAX_OUT_BINS = 1 << 12
SW_MAX_CELLS = 1 << 22  # bins × out_bins: the transition matrix and its pseudo-inverse


def sw_b(epsilon: float) -> float:
    r"""The slides' (and paper's) choice of the half-width b, maximising mutual information:

    .. math:: b = \frac{\varepsilon e^\varepsilon - e^\varepsilon + 1}
                       {2 e^\varepsilon (e^\varepsilon - 1 - \varepsilon)}

    >>> round(sw_b(1.0), 4), round(sw_b(1e-4), 3), round(sw_b(20.0), 6)
    (0.2561, 0.5, 0.0)
    """
    e = math.exp(epsilon)
    if epsilon < 1e-3:  # series limit: numerator and denominator both vanish like ε²
        return 0.5 - epsilon / 6
    return (epsilon * e - e + 1) / (2 * e * (e - 1 - epsilon))


class SquareWave(NumericOracle, FrequencyOracle, DistributionEstimates):
    r"""Square Wave mechanism with EM/EMS reconstruction.

    A value :math:`v \in [0, 1]` (scaled from [low, high]) is reported as
    :math:`\tilde v \in [-b, 1+b]` with density

    .. math:: M_v(\tilde v) = p = \frac{e^\varepsilon}{2be^\varepsilon + 1} \text{ if }
              |\tilde v - v| \le b, \quad q = \frac{1}{2be^\varepsilon + 1} \text{ otherwise},

    which is ε-LDP since p/q = e^ε.  The device reports the index of the output bucket
    (``out_bins`` equal buckets of [-b, 1+b]; post-processing, so still ε-LDP).  The
    state is the bucket histogram; :meth:`distribution` is the EMS (default) or EM
    reconstruction over the ``bins`` input bins.

    * :meth:`estimate` is the *unbiased* inverse :math:`M^{+} c/n` (noisy: SW's channel is
      a blur); use :meth:`distribution` for a usable histogram.
    * :meth:`mean` is unbiased: :math:`E[\tilde v \mid v] = q(1+2b)/2 + 2b(p-q) v`, so
      :math:`\hat\mu = (\bar{\tilde v} - q(1+2b)/2) / (2b(p-q))` with
      :meth:`mean_variance` bounded by the worst-case per-report variance.
    * :meth:`cdf` and :meth:`quantile` read the reconstructed distribution.

    Parameters
    ----------
    epsilon : float
    bins : int
        Input bins of [low, high], in [2, 4096] (``domain_size`` is an alias; a
        collection passes it).
    low, high : float
        The interval.
    out_bins : int
        Output buckets of [-b, 1+b] (the report is an index < out_bins), in [2, 4096]
        with bins × out_bins <= 2^22 (the transition matrix and its pseudo-inverse).
    b : float or None
        Half-width; default :func:`sw_b`.  Allowed: [1000·2^-52, 10] and
        2be^ε + 1 <= 2^53/1000 (see :mod:`ldpcore.limits`).
    smoothing : bool
        EMS (True, default) or plain EM.

    Examples
    --------
    >>> import numpy as np, ldpcore
    >>> sw = ldpcore.make_oracle("sw", epsilon=2.0, bins=32, low=0.0, high=60.0)
    >>> rng = np.random.default_rng(1)
    >>> x = rng.normal(20, 5, 200_000).clip(0, 60)
    >>> st = sw.aggregate(sw.perturb(sw.to_bins(x), rng=rng))
    >>> bool(abs(sw.mean(st) - x.mean()) < 4 * sw.mean_std_error(st.n))
    True
    >>> round(float(sw.distribution(st).sum()), 6)
    1.0
    """

    mechanism = "sw"
    epsilon_bounds = (EPSILON_MIN, 31.8)  # b(ε) >= SW_B_MIN
    domain_size_bounds = (2, 1 << 12)
    parameter_ranges = {"epsilon": real_in(epsilon_bounds),
                        "bins": integer_in(domain_size_bounds),
                        "out_bins": "integer in [2, 4096], bins*out_bins <= 2^22",
                        "b": "real in [1000*2^-52, 10] with 2b e^eps + 1 <= 2^53/1000; "
                             "default b(eps)",
                        "smoothing": "boolean", "low": "finite real in [-1e300, 1e300]",
                        "high": "finite real in [-1e300, 1e300], > low"}

    @classmethod
    def exact_epsilon_max(cls) -> float:
        """The largest ε whose half-width :func:`sw_b` stays at least ``SW_B_MIN``."""
        lo, hi = 1.0, 100.0
        for _ in range(200):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if sw_b(mid) >= SW_B_MIN else (lo, mid)
        return lo

    def __init__(self, *, epsilon: float, domain_size: int | None = None,
                 bins: int | None = None, low: float = 0.0, high: float = 1.0,
                 out_bins: int = 1024, b: float | None = None, smoothing: bool = True) -> None:
        super().__init__(epsilon=epsilon, domain_size=domain_size, bins=bins, low=low,
                         high=high)
        self.out_bins = check_int("out_bins", out_bins, low=2,
                                  high=min(SW_MAX_OUT_BINS, SW_MAX_CELLS // self.domain_size))
        e = math.exp(self.epsilon)
        # b at least 1000 float64 steps of the unit interval, and the outside-band
        # probability 1/(2be^ε + 1) at least PROB_FLOOR_64 (see ldpcore.limits).
        b_max = min(10.0, (1 / PROB_FLOOR_64 - 1) / (2 * e))
        self.b = sw_b(self.epsilon) if b is None else check_float("b", b, low=SW_B_MIN,
                                                                  high=b_max)
        if not isinstance(smoothing, bool):
            raise ParameterError(f"smoothing must be True (EMS) or False (EM), got {smoothing!r}")
        self.smoothing = smoothing
        self.p = e / (2 * self.b * e + 1)
        self.q = 1.0 / (2 * self.b * e + 1)
        self._matrix: FloatArray | None = None
        self._pinv: FloatArray | None = None
        self._channel: FloatArray | Channel | None = None
        self._last_distribution: tuple[bytes, FloatArray] | None = None
        self._last_n = 0

    @property
    def params(self) -> dict[str, Any]:
        return {**super().params, "out_bins": self.out_bins, "b": self.b,
                "smoothing": self.smoothing}

    @property
    def report_columns(self) -> tuple[Column, ...]:
        return (Column("y", "uint16", 0, self.out_bins - 1),)

    @property
    def state_shape(self) -> tuple[int, ...]:
        return (self.out_bins,)

    # ---- device ------------------------------------------------------------------------
    def perturb_unit(self, u: Any, rng: np.random.Generator) -> IntArray:
        """Perturb unit values in [0, 1] into output bucket indices."""
        u = np.asarray(u, dtype=float)
        n, b = u.size, self.b
        near = rng.random(n) < 2 * b * self.p  # mass of the band [v-b, v+b]
        t = rng.random(n)
        # In the band: uniform on [v-b, v+b].  Outside: the rest has length exactly 1,
        # [-b, v-b) then (v+b, 1+b]; a uniform t in [0, 1) lands at -b+t or v+b+(t-v).
        y = np.where(near, u - b + 2 * b * t, np.where(t < u, -b + t, b + t))
        idx = np.floor((y + b) / (1 + 2 * b) * self.out_bins).astype(np.int64)
        return np.asarray(np.clip(idx, 0, self.out_bins - 1), dtype=np.int64)

    def _perturb(self, values: IntArray, rng: np.random.Generator) -> dict[str, np.ndarray]:
        return {"y": self.perturb_unit(self._unit_values(values, rng), rng).astype(np.uint16)}

    def sample_state(self, distribution: FloatArray, n: int,
                     rng: np.random.Generator | int | None = None) -> State:
        r"""A state distributed as ``aggregate(perturb(values))`` for n bin indices i.i.d.
        from ``distribution`` (over the ``bins`` input bins), in O(bins · out_bins).

        Reports are i.i.d. buckets with :math:`P(j) = (M\pi)_j`, M = :meth:`matrix`
        (a value is uniform in its bin, as on the device), so the bucket histogram is
        :math:`\mathrm{Multinomial}(n, M\pi)`.  Exact up to M's quadrature (the midpoint
        rule over sub-points of each bin; the same M the estimators assume).
        """
        dist = check_distribution(distribution, self.domain_size)
        n = check_int("n", n, low=0)
        gen = as_rng(rng)
        if n == 0:
            return self.new_state()
        return State(self.fingerprint, n, multinomial_cells(n, self.matrix() @ dist, gen))

    # ---- server ------------------------------------------------------------------------
    def _aggregate(self, columns: dict[str, np.ndarray]) -> IntArray:
        return np.bincount(columns["y"], minlength=self.out_bins).astype(np.int64)

    def matrix(self) -> FloatArray:
        """Transition matrix (out_bins × bins), computed once."""
        if self._matrix is None:
            self._matrix = sw_transition_matrix(self.p, self.q, self.b, self.domain_size,
                                                self.out_bins)
        return self._matrix

    def _em_channel(self) -> FloatArray | Channel:
        """M as EM applies it: :class:`~ldpcore.numeric.em.SWChannel` (O(bins + out_bins) a
        product, never formed) where it is faster and its rounding stays below 2^-27, else
        :meth:`matrix`."""
        if self._channel is None:
            d, out = self.domain_size, self.out_bins
            self._channel = (SWChannel(self.p, self.q, self.b, d, out)
                             if SWChannel.suits(self.p, self.q, d, out) else self.matrix())
        return self._channel

    def _pseudo_inverse(self) -> FloatArray:
        if self._pinv is None:
            self._pinv = np.asarray(np.linalg.pinv(self.matrix()), dtype=np.float64)
        return self._pinv

    def _estimate(self, counts: IntArray, n: int) -> FloatArray:
        return np.asarray(self._pseudo_inverse() @ (counts / n), dtype=float)

    def variance(self, n: int, frequency: float = 0.0) -> float:
        """Variance of one bin of the unbiased inverse :meth:`estimate`, at the uniform
        distribution (largest over bins): ``diag(P diag(Mx) Pᵀ)/n`` with P = M⁺."""
        n, _ = self._check_variance_args(n, frequency)
        mx = self.matrix() @ np.full(self.domain_size, 1.0 / self.domain_size)
        pinv = self._pseudo_inverse()
        return float(np.max((pinv**2) @ mx) / n)

    def distribution(self, state: State) -> FloatArray:
        """EMS (or EM) reconstruction of the input histogram over the ``bins`` bins.

        The last reconstruction is kept, keyed by the counts, so cdf/quantile/mean calls
        on one state run EM once; a new state with at least half and at most twice as many
        reports (the next flush of a live collection) starts EM from it, which converges to
        the same fixed point in tens of iterations instead of hundreds.  At 1,024 × 1,024
        cells EM applies M as :class:`~ldpcore.numeric.em.SWChannel` (not the 8 MB dense
        matrix) and mixes the start with 0.01 % of the uniform (not 0.1 %): a new version of
        the API bench's collection (n = 10^6, + 1,000 reports) costs 1.6 ms of CPU instead
        of 19.7 ms (median; 9.6 EM steps instead of 17.4), side by side in
        ``bench/sw_ems_version.py`` (SWChannel alone: 3.6 ms)."""
        self.check_state(state)
        key = state.counts.tobytes()
        cached = self._last_distribution
        if cached is None or cached[0] != key:
            near = (cached is not None and self._last_n > 0
                    and 0.5 <= state.n / self._last_n <= 2.0)
            dist = em_reconstruct(self._em_channel(), state.counts.astype(float),
                                  smoothing=self.smoothing,
                                  start=cached[1] if near and cached is not None else None)
            cached = self._last_distribution = (key, dist)
            self._last_n = state.n
        return cached[1].copy()

    def cdf(self, state: State) -> FloatArray:
        """Estimated P[X <= right edge of bin i] for every bin i."""
        return np.minimum(np.cumsum(self.distribution(state)), 1.0)

    def quantile(self, state: State, q: float) -> float:
        """Value x (in [low, high]) with estimated P[X <= x] = q, interpolated within bins."""
        q = check_float("q", q, low=0.0, high=1.0)
        c = np.concatenate([[0.0], self.cdf(state)])
        edges = self.low + np.arange(self.domain_size + 1) * self.width
        i = int(np.clip(np.searchsorted(c, q, side="left"), 1, self.domain_size))
        lo, hi = c[i - 1], c[i]
        frac = 0.0 if hi <= lo else (q - lo) / (hi - lo)
        return float(edges[i - 1] + np.clip(frac, 0.0, 1.0) * self.width)

    def mean(self, state: State, method: str = "unbiased") -> float:
        """Mean in value units: ``"unbiased"`` (linear in the reports) or ``"ems"``."""
        self.check_state(state)
        if state.n <= 0:
            raise ParameterError("cannot estimate a mean from an empty state (n = 0)")
        if method == "ems":
            return float(self.distribution(state) @ self.bin_centers())
        if method != "unbiased":
            raise ParameterError(f"method must be 'unbiased' or 'ems', got {method!r}")
        b = self.b
        centers = -b + (np.arange(self.out_bins) + 0.5) * (1 + 2 * b) / self.out_bins
        ybar = float(state.counts @ centers) / state.n
        u = (ybar - self.q * (1 + 2 * b) / 2) / (2 * b * (self.p - self.q))
        return float(self.from_unit(u))

    def mean_variance(self, n: int) -> float:
        r"""Upper bound: :math:`\max_v \mathrm{Var}[\tilde v \mid v] / (n (2b(p-q))^2)`,
        in value units."""
        n = check_int("n", n, low=1)
        b, p, q = self.b, self.p, self.q
        v = np.linspace(0, 1, 201)
        m1 = q * (1 + 2 * b) / 2 + (p - q) * 2 * b * v
        m2 = (q * ((1 + b) ** 3 + b**3) / 3
              + (p - q) * ((v + b) ** 3 - (v - b) ** 3) / 3)
        var_unit = float(np.max(m2 - m1**2)) / (n * (2 * b * (p - q)) ** 2)
        return var_unit * (self.high - self.low) ** 2
