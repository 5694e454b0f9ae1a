"""Local hashing (BLH, OLH) with an exactly-universal linear hash family over GF(g)."""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from .._bounds import EPSILON_MAX_64, EPSILON_MIN, ranges
from .._transforms import fwht
from .._validate import check_int
from ..base import Column, FloatArray, FrequencyOracle, IntArray, own, owned
from ..errors import ParameterError

__all__ = ["LocalHashing", "BLH", "OLH", "is_prime", "nearest_prime", "olh_variance"]

MAX_STATE_CELLS = 1 << 24


_MR_BASES = (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37)


SUBSET_WEIGHTS_KEPT = 16
"""Sets whose :meth:`LocalHashing.subset_variance` weights an oracle keeps."""

SUBSET_WEIGHTS_MAX_D = 1 << 16
"""Weights are kept up to this domain size (two d-vectors per set: 1 MiB at most)."""

SUPPORT_INDEX_MAX = 1 << 20
"""The support transform's gather indices are kept per oracle up to this many (8 MiB)."""

SMALL_G = 5
"""Up to this g the transform applies the g-point DFT matrix axis by axis (about 2x faster
than ``rfftn`` at g = 3; slower from g = 7)."""


def is_prime(x: int) -> bool:
    r"""Primality by deterministic Miller–Rabin: exact for every x < 3.3·10^24.

    The first twelve primes as bases decide every x < 318665857834031151167461
    (Sorenson & Webster 2015), so a prime search near :math:`e^{29.8}` takes
    microseconds instead of trial division to :math:`\sqrt x`.

    >>> [x for x in range(30) if is_prime(x)]
    [2, 3, 5, 7, 11, 13, 17, 19, 23, 29]
    >>> is_prime(2**61 - 1), is_prime(3215031751)
    (True, False)
    """
    if x < 2:
        return False
    for p in _MR_BASES:
        if x % p == 0:
            return x == p
    if x >= 318665857834031151167461:
        raise ValueError(f"is_prime is exact below 3.2e23, got {x}")  # pragma: no cover
    d, s = x - 1, 0
    while d % 2 == 0:
        d //= 2
        s += 1
    for a in _MR_BASES:
        y = pow(a, d, x)
        if y in (1, x - 1):
            continue
        for _ in range(s - 1):
            y = y * y % x
            if y == x - 1:
                break
        else:
            return False
    return True


@functools.lru_cache(maxsize=4096)
def nearest_prime(x: float) -> int:
    """The prime nearest to x (the smaller one on a tie), at least 2.

    Cached: OLH's default g halves a chain of primes from :math:`e^\varepsilon + 1`,
    the same chain for every level of a hierarchy and every oracle of that ε.

    >>> nearest_prime(4.0), nearest_prime(9.5), nearest_prime(math.exp(29.8) + 1) > 8e12
    (3, 11, True)
    """
    lo = max(2, math.floor(x))
    while not is_prime(lo) and lo > 2:
        lo -= 1
    hi = max(2, math.ceil(x))
    while not is_prime(hi):
        hi += 1
    return lo if x - lo <= hi - x else hi


def olh_variance(n: int, f: float, p: float, g: int) -> float:
    r"""Variance of a local-hashing estimate when collisions happen with probability
    :math:`q^* = 1/g`: :math:`\frac{q^*(1-q^*)}{n(p-q^*)^2} + \frac{f(1-p-q^*)}{n(p-q^*)}`.

    >>> round(olh_variance(1000, 0.0, 0.5, 4), 6)
    0.003
    """
    q = 1.0 / g
    return q * (1 - q) / (n * (p - q) ** 2) + f * (1 - p - q) / (n * (p - q))


def _digits_needed(g: int, d: int) -> int:
    r = 1
    while g**r < d:
        r += 1
    return r


class LocalHashing(FrequencyOracle):
    r"""Local hashing with the linear family :math:`h_a(x) = \langle a, x \rangle \bmod g`.

    Values are written as r base-g digits (:math:`g^r \ge d`, g prime).  A device
    draws :math:`a` uniformly from :math:`GF(g)^r` and reports
    :math:`(a, t)` where t is :math:`h_a(x)` passed through GRR over
    :math:`[g]` (kept with :math:`p = e^\varepsilon/(e^\varepsilon+g-1)`).

    For :math:`x \ne x'`, :math:`P_a[h_a(x) = h_a(x')] = 1/g` *exactly*, so the
    support count :math:`S(v) = \#\{(a,t): h_a(v) = t\}` gives the exactly
    unbiased OLH estimator of Wang et al. (USENIX Security 2017)

    .. math:: \hat f(v) = \frac{S(v)/n - 1/g}{p - 1/g}, \qquad
              \mathrm{Var}[\hat f(v)] = \frac{q'(1-q')}{n(p-q')^2}
                                        + \frac{f(v)(1-p-q')}{n(p-q')},\ q' = 1/g,

    with no extra error from a finite sample of random hash functions.  (The
    usual affine family adds a uniform :math:`b`; reporting :math:`y - b` is a
    post-processing that makes b cancel, so the linear family is equivalent.)

    The state is the count table :math:`C[a, t]` of shape :math:`(g^r, g)`: one
    increment per report.  Estimation evaluates :math:`S(v) = \sum_a C[a, \langle
    a, v\rangle]` for all v at once with an (r+1)-dimensional DFT over
    :math:`\mathbb{Z}_g` (Vilenkin–Chrestenson transform) in
    :math:`O(g^{r+1} r \log g)`, independent of n; for g = 2 this is the fast
    Walsh–Hadamard transform.
    """

    g: int

    def _setup(self, g: int) -> None:
        self.g = g
        self.r = _digits_needed(g, self.domain_size)
        self.n_hashes = g**self.r
        cells = self.n_hashes * g
        if cells > MAX_STATE_CELLS:
            raise ParameterError(
                f"g={g} with domain_size={self.domain_size} needs a state of {cells} cells "
                f"(> {MAX_STATE_CELLS}); choose a smaller prime g, or use 'grr' (better when "
                f"d < 3e^epsilon + 2)")
        e = math.exp(self.epsilon)
        self.p = e / (e + g - 1)
        self.q = 1.0 / (e + g - 1)
        self._weights = g ** np.arange(self.r, dtype=np.int64)

    @property
    def params(self) -> dict[str, Any]:
        return {"g": self.g}

    @property
    def report_columns(self) -> tuple[Column, ...]:
        a_dtype = "uint32" if self.n_hashes > 2**16 else "uint16"
        t_dtype = "uint8" if self.g <= 256 else "uint16"
        return (Column("a", a_dtype, 0, self.n_hashes - 1), Column("t", t_dtype, 0, self.g - 1))

    @property
    def state_shape(self) -> tuple[int, ...]:
        return (self.n_hashes, self.g)

    def hash_values(self, a: IntArray, x: IntArray) -> IntArray:
        """:math:`h_a(x) = \\sum_j a_j x_j \\bmod g` over base-g digits (vectorised)."""
        g = self.g
        acc = np.zeros(np.broadcast(a, x).shape, dtype=np.int64)
        aa, xx = a.astype(np.int64), x.astype(np.int64)
        for _ in range(self.r):
            acc += (aa % g) * (xx % g)
            aa //= g
            xx //= g
        out: IntArray = acc % g
        return out

    def _perturb(self, values: IntArray, rng: np.random.Generator) -> dict[str, np.ndarray]:
        n, g = values.size, self.g
        a = rng.integers(0, self.n_hashes, size=n, dtype=np.int64)
        h = self.hash_values(a, values)
        keep = rng.random(n) < self.p
        t = np.where(keep, h, (h + rng.integers(1, g, size=n)) % g) if g > 1 else h
        cols = self.report_columns
        return {"a": a.astype(cols[0].dtype), "t": t.astype(cols[1].dtype)}

    def _aggregate(self, columns: dict[str, np.ndarray]) -> IntArray:
        flat = columns["a"].astype(np.int64) * self.g + columns["t"].astype(np.int64)
        return np.bincount(flat, minlength=self.n_hashes * self.g).astype(np.int64).reshape(
            self.state_shape)

    def support(self, counts: IntArray | FloatArray) -> FloatArray:
        """:math:`S(v) = \\sum_a C[a, h_a(v)]` for every v in [0, d), via the g-ary transform."""
        g, d = self.g, self.domain_size
        if g == 2:
            # C[a, t] -> sum_a (-1)^{<a,v>} (C[a,0] - C[a,1]) = 2 S(v) - n.
            diff = (counts[:, 0] - counts[:, 1]).astype(np.float64)
            n = float(counts.sum())
            out: FloatArray = (fwht(diff)[:d] + n) / 2.0
            return out
        res: FloatArray = self._support_rows(counts[None])[0]
        return res

    def _support_rows(self, counts: IntArray | FloatArray) -> FloatArray:
        r"""S(v) for every row of counts (size, g^r, g), g >= 3, by the real g-ary DFT.

        :math:`S(v) = \frac1g\sum_{k} \hat C(k\,\mathrm{digits}(v), -k)`; the counts are
        real, so the terms for k and g - k are conjugate: only the transform's half
        ``rfftn`` computes (t-frequencies 0 … g//2) is needed, each term but k = 0 (and
        k = g/2 for even g) counted twice.
        """
        g, r, d = self.g, self.r, self.domain_size
        size, half = counts.shape[0], g // 2 + 1
        if g <= SMALL_G:
            # pocketfft is slow along many axes of 3 or 5: apply the g-point DFT matrix to
            # the leading hash axis and rotate it to the back, r times (the axes return
            # in order behind the t axis).
            x = np.fft.rfft(counts.reshape(size, g**r, g).astype(np.float64), axis=-1)
            dft = np.exp(-2j * np.pi * np.outer(np.arange(g), np.arange(g)) / g)
            rest = g ** (r - 1) * half
            for _ in range(r):
                x = np.matmul(dft, x.reshape(size, g, rest)).transpose(0, 2, 1)
            spec = x.reshape(size, half, g**r).transpose(0, 2, 1).reshape(size, -1)
        else:
            spec = np.fft.rfftn(counts.reshape((size,) + (g,) * (r + 1)).astype(np.float64),
                                axes=tuple(range(1, r + 2))).reshape(size, -1)
        total = np.repeat(spec[:, :1].real, d, axis=1)  # k = 0: every report, n
        for k, idx in enumerate(self._support_index(), start=1):
            total += (1.0 if 2 * k == g else 2.0) * spec[:, idx].real
        res: FloatArray = total / g
        return res

    def _support_index(self) -> list[IntArray]:
        """For k = 1 … g//2, where each value's term sits in the flattened half spectrum
        (depends on the oracle alone: kept while the g//2 arrays of d indices hold at most
        :data:`SUPPORT_INDEX_MAX` entries)."""
        kept: list[IntArray] | None = self.__dict__.get("_support_index_kept")
        if kept is not None:
            return kept
        g, r, d = self.g, self.r, self.domain_size
        half = g // 2 + 1
        v = np.arange(d, dtype=np.int64)
        digits = np.stack([(v // g**j) % g for j in range(r)], axis=1)  # (d, r)
        # Digit j of the hash index sits on axis r-1-j: hash index sum_j w_j g^j, t last.
        strides = g ** np.arange(r, dtype=np.int64) * half
        out: list[IntArray] = [((-k * digits) % g) @ strides + k for k in range(1, half)]
        for idx in out:
            idx.setflags(write=False)
        if (half - 1) * d <= SUPPORT_INDEX_MAX:
            self.__dict__["_support_index_kept"] = out
        return out

    def hashed_mass(self, distribution: FloatArray) -> FloatArray:
        r""":math:`F_a(t) = \sum_v f(v)\,[h_a(v) = t]` for every hash a, shape (g^r, g).

        By the g-ary DFT: :math:`\hat F_a(k) = \hat f(k a)`, so
        :math:`F_a(t) = \frac1g\sum_k \omega^{kt} \hat f(k a)` in :math:`O(g^{r+1})`.
        """
        g, r = self.g, self.r
        f = np.zeros(self.n_hashes, dtype=np.float64)
        f[:self.domain_size] = distribution
        # C order of (g,)*r puts digit j on axis r-1-j, for f and for the spectrum alike.
        spec = np.fft.fftn(f.reshape((g,) * r)).reshape(-1)
        a = np.arange(self.n_hashes, dtype=np.int64)
        digits = np.stack([(a // g**j) % g for j in range(r)], axis=1)
        w = g ** np.arange(r, dtype=np.int64)
        t = np.arange(g)
        out = np.zeros((self.n_hashes, g), dtype=np.float64)
        for k in range(g):
            idx = ((k * digits) % g) @ w
            out += (spec[idx][:, None] * np.exp(2j * np.pi * k * t / g)[None, :]).real
        res: FloatArray = np.clip(out / g, 0.0, None)
        return res

    def _sample_counts(self, distribution: FloatArray, n: int, size: int,
                       rng: np.random.Generator) -> IntArray:
        # One report is one cell (a, t): P(a, t) = (q + (p - q) F_a(t)) / g^r.
        probs = (self.q + (self.p - self.q) * self.hashed_mass(distribution)).reshape(-1)
        out = rng.multinomial(n, probs / probs.sum(), size=size)
        res: IntArray = out.reshape(size, *self.state_shape).astype(np.int64)
        return res

    def _estimate(self, counts: IntArray, n: int) -> FloatArray:
        q = 1.0 / self.g
        return (self.support(counts) / n - q) / (self.p - q)

    def _estimate_batch(self, counts: IntArray, n: int) -> FloatArray:
        g, d = self.g, self.domain_size
        if g == 2:
            diff = (counts[..., 0] - counts[..., 1]).astype(np.float64)
            support = (fwht(diff)[:, :d] + n) / 2.0
        else:
            support = self._support_rows(counts)
        q = 1.0 / g
        out: FloatArray = (support / n - q) / (self.p - q)
        return out

    def variance(self, n: int, frequency: float = 0.0) -> float:
        n, f = self._check_variance_args(n, frequency)
        return olh_variance(n, f, self.p, self.g)

    def subset_variance(self, n: int, indices: Any, distribution: Any) -> float:
        r"""Variance of :math:`\sum_{v\in S}\hat f(v)` for a population distributed as f.

        Estimates of collinear values are correlated under the linear hash family
        (:math:`h_a(2v) = 2h_a(v)`; value 0 hashes to 0 under every a), so the sum of
        the variances is not the variance of the sum.  One report in cell (a, t) adds
        :math:`Y_S = (N_a(t) - |S|/g)/(p - 1/g)` with :math:`N_a(t) = \#\{v \in S:
        h_a(v) = t\}`; over the cells' probabilities P (:meth:`hashed_mass`) the
        variance for n i.i.d. reports is :math:`\mathrm{Var}_P(Y_S)/n`, and the
        population's share of it, :math:`f_S(1-f_S)/n`, is taken out (fixed
        population, as :meth:`variance`).

        >>> import ldpcore, numpy as np
        >>> o = ldpcore.make_oracle("olh", epsilon=1.0, domain_size=9)
        >>> f = np.full(9, 1 / 9)
        >>> round(o.subset_variance(1000, [4], f) / o.variance(1000, 1 / 9), 9)
        1.0
        """
        n = self._check_variance_args(n, 0.0)[0]
        f = self.check_distribution(distribution)
        idx = np.asarray(indices, dtype=np.int64)
        # Over the cells' probabilities P(a, t) = (q + (p - q) F_a(t)) / g^r, with
        # F_a(t) = sum_v f(v) [h_a(v) = t]: E[Y^k] = (q sum Y^k + (p - q) f . W_k) / g^r,
        # W_k(v) = sum_a Y_S(a, h_a(v))^k depending on the oracle and S alone (kept).
        sum1, sum2, w1, w2 = self._subset_weights(idx)
        scale = (self.p - self.q) / self.n_hashes
        mean = self.q * sum1 / self.n_hashes + scale * float(f @ w1)
        second = self.q * sum2 / self.n_hashes + scale * float(f @ w2)
        f_s = float(f[idx].sum())
        out: float = max(second - mean**2 - f_s * (1 - f_s), 0.0) / n
        return out

    def _subset_weights(self, idx: np.ndarray) -> tuple[float, float, FloatArray, FloatArray]:
        r"""For the set S = ``idx``: :math:`\sum_{a,t} Y_S`, :math:`\sum_{a,t} Y_S^2` and, per
        value v, :math:`W_k(v) = \sum_a Y_S(a, h_a(v))^k` (k = 1, 2; the support transform
        of :math:`Y_S^k`), kept for the latest :data:`SUBSET_WEIGHTS_KEPT` sets while they
        fit :data:`SUBSET_WEIGHTS_MAX_D` (a live service asks the same sets of every state)."""
        key = idx.tobytes()
        kept: dict[bytes, tuple[float, float, FloatArray, FloatArray]] | None = owned(
            self, "_subset_weights_kept")
        if kept is None:  # not a copy's: p and q may differ (ldpcore.longitudinal)
            kept = {}
            own(self, "_subset_weights_kept", kept)
        hit = kept.get(key)
        if hit is not None:
            return hit
        g = self.g
        a = np.arange(self.n_hashes, dtype=np.int64)
        flat = (a[:, None] * g + self.hash_values(a[:, None], idx[None, :])).reshape(-1)
        hits = np.bincount(flat, minlength=self.n_hashes * g).reshape(self.n_hashes, g)
        y: FloatArray = (hits - idx.size / g) / np.float64(self.p - 1.0 / g)
        y2: FloatArray = y**2
        w1, w2 = self.support(y), self.support(y2)
        w1.setflags(write=False)
        w2.setflags(write=False)
        out = (float(y.sum()), float(y2.sum()), w1, w2)
        if self.domain_size <= SUBSET_WEIGHTS_MAX_D:
            while len(kept) >= SUBSET_WEIGHTS_KEPT:
                kept.pop(next(iter(kept)))
            kept[key] = out
        return out


class BLH(LocalHashing):
    """Binary local hashing: g = 2 (estimation by the fast Walsh–Hadamard transform).

    Examples
    --------
    >>> import ldpcore
    >>> o = ldpcore.make_oracle("blh", epsilon=1.0, domain_size=1000)
    >>> o.state_shape
    (1024, 2)
    >>> st = o.aggregate(o.perturb([7] * 20_000, rng=3))
    >>> abs(float(o.estimate(st)[7]) - 1.0) < 5 * o.std_error(20_000, 1.0)
    True
    """

    mechanism = "blh"
    epsilon_bounds = (EPSILON_MIN, EPSILON_MAX_64)
    domain_size_bounds = (2, 1 << 23)
    parameter_ranges = ranges(epsilon_bounds, domain_size_bounds, " (state 2^(r+1) <= 2^24)")

    def __init__(self, *, epsilon: float, domain_size: int) -> None:
        super().__init__(epsilon=epsilon, domain_size=domain_size)
        self._setup(2)

    @property
    def params(self) -> dict[str, Any]:
        return {}  # g = 2 is implied by the mechanism


class OLH(LocalHashing):
    r"""Optimized local hashing: g = the prime nearest :math:`e^\varepsilon + 1` by default.

    Parameters
    ----------
    g : int, optional
        Hash range, a prime >= 2.  The default is the prime nearest
        :math:`e^\varepsilon + 1` (Wang et al.'s optimum), lowered if needed so the
        state :math:`g^{r+1}` stays within 2^24 cells.

    Examples
    --------
    >>> import ldpcore
    >>> o = ldpcore.make_oracle("olh", epsilon=1.0, domain_size=1024)
    >>> o.g, o.r, o.state_shape
    (3, 7, (2187, 3))
    """

    mechanism = "olh"
    epsilon_bounds = (EPSILON_MIN, EPSILON_MAX_64)
    domain_size_bounds = (2, 1 << 23)
    parameter_ranges = ranges(epsilon_bounds, domain_size_bounds,
                              g="prime in [2, 65536] with g^(r+1) <= 2^24 cells, g^r >= d; "
                                "default the prime nearest e^eps + 1, halved until the state "
                                "fits")

    def __init__(self, *, epsilon: float, domain_size: int, g: int | None = None) -> None:
        super().__init__(epsilon=epsilon, domain_size=domain_size)
        if g is None:
            g = nearest_prime(math.exp(self.epsilon) + 1)
            while g > 2 and g ** (_digits_needed(g, self.domain_size) + 1) > MAX_STATE_CELLS:
                g = nearest_prime(g / 2)
        else:
            g = check_int("g", g, low=2, high=1 << 16)
            if not is_prime(g):
                raise ParameterError(f"g must be a prime in [2, 65536] (the hash family is "
                                     f"linear over GF(g)), got {g}")
        self._setup(g)
