"""Count mean sketch (Apple 2017) and its Hadamard variant, with an exact hash family."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .._bounds import (
    EPSILON_MAX_64,
    EPSILON_MIN,
    EXACT_EPSILON_MAX_32,
    MAX_HASH_CELLS,
    MAX_STATE_CELLS,
    ranges,
)
from .._field import Field, projective_points
from .._transforms import fwht, hadamard_sign
from .._validate import check_int
from ..base import Column, FloatArray, FrequencyOracle, IntArray
from ..errors import ParameterError
from .lh import is_prime
from .unary import bit_counts

__all__ = ["ProjectiveSketch", "CMS", "HCMS"]

MAX_ROWS = 1 << 16


class ProjectiveSketch(FrequencyOracle):
    r"""Base of CMS/HCMS: k public hash functions into [m] with exactly uniform collisions.

    Values are written as r digits over the field GF(m) (:math:`m^r \ge d`) and
    row j of the sketch hashes with :math:`h_j(x) = \langle a_j, x\rangle`, where
    :math:`a_1..a_k` are the :math:`k = (m^r-1)/(m-1)` points of the projective
    space PG(r−1, m).  Every pair :math:`x \ne v` then collides in *exactly* the
    same fraction :math:`\kappa = (m^{r-1}-1)/(m^r-1)` of rows, so with
    :math:`T(v)` Apple's debiased sketch sum, :math:`E[T(v)] = n f(v) +
    n(1-f(v))\kappa` and

    .. math:: \hat f(v) = \frac{T(v)/n - \kappa}{1 - \kappa}

    is exactly unbiased: no fixed collision error, unlike k randomly seeded
    hashes.  (Apple's m/(m−1) correction is the same formula with κ ≈ 1/m.)  The
    price is that k follows from m and d; it is reported in :attr:`k`.
    """

    m: int

    def _setup(self, m: int) -> None:
        self.m = m
        r = 1
        while m**r < self.domain_size:
            r += 1
        self.r = r
        self.k = (m**r - 1) // (m - 1)
        if self.k > MAX_ROWS:  # pragma: no cover - implied by MAX_HASH_CELLS
            raise ParameterError(f"m={m} with domain_size={self.domain_size} needs "
                                 f"k={self.k} sketch rows (> {MAX_ROWS}); choose a larger m")
        if self.k * self.domain_size * r > MAX_HASH_CELLS:
            raise ParameterError(
                f"m={m} with domain_size={self.domain_size} needs a hash table of k·d·r = "
                f"{self.k * self.domain_size * r} entries (allowed: at most {MAX_HASH_CELLS}); "
                f"choose m near sqrt(domain_size) or a larger m")
        cells = self.k * (m + 1) * (2 if self.mechanism == "hcms" else 1)
        if cells > MAX_STATE_CELLS:
            raise ParameterError(f"m={m} with domain_size={self.domain_size} needs a state of "
                                 f"{cells} cells (allowed: at most {MAX_STATE_CELLS}); choose a "
                                 f"smaller m")
        self.field = Field(m)
        self.kappa = (m ** (r - 1) - 1) / (m**r - 1)
        self.points = projective_points(m, r)  # (k, r)
        self._table: IntArray | None = None

    @property
    def _hash_table(self) -> IntArray:
        """h_j(v) for every row j and value v, shape (k, d): built on first use, so that
        construction stays cheap (at most MAX_HASH_CELLS entries)."""
        if self._table is None:
            m, r = self.m, self.r
            v = np.arange(self.domain_size, dtype=np.int64)
            digits = np.stack([(v // m**i) % m for i in range(r)], axis=1)  # (d, r)
            self._table = self.hash_values(np.arange(self.k), digits, outer=True)
        return self._table

    def hash_values(self, rows: IntArray, digits: IntArray, *, outer: bool = False) -> IntArray:
        """h_j(x): pairwise for rows (n,) and digit vectors (n, r), or with ``outer`` the
        full table for rows (k,) × values (d, r).  (Explicit: k may equal d.)"""
        a = self.points[rows]
        if outer:
            a, digits = a[:, None, :], digits[None, :, :]
        acc = np.zeros(np.broadcast_shapes(a.shape, digits.shape)[:-1], dtype=np.int64)
        for i in range(self.r):
            acc = self.field.add(acc, self.field.mul(a[..., i], digits[..., i]))
        return acc

    def _digits(self, values: IntArray) -> IntArray:
        return np.stack([(values // self.m**i) % self.m for i in range(self.r)], axis=1)

    @property
    def params(self) -> dict[str, Any]:
        return {"m": self.m}

    def _row_sums(self, per_row_cell: FloatArray) -> FloatArray:
        """Σ_j X[j, h_j(v)] for every v, given X of shape (k, m)."""
        out: FloatArray = np.take_along_axis(per_row_cell, self._hash_table, axis=1).sum(axis=0)
        return out

    def _from_sums(self, t: FloatArray, n: int) -> FloatArray:
        out: FloatArray = (t / n - self.kappa) / (1 - self.kappa)
        return out

    def hashed_mass(self, distribution: FloatArray) -> FloatArray:
        """:math:`G_j(t) = \\sum_v f(v)[h_j(v) = t]` for every row j, shape (k, m)."""
        k, m = self.k, self.m
        flat = (np.arange(k, dtype=np.int64)[:, None] * m + self._hash_table).reshape(-1)
        weights = np.broadcast_to(distribution[None, :], self._hash_table.shape).reshape(-1)
        out: FloatArray = np.bincount(flat, weights=weights,
                                      minlength=k * m).astype(np.float64).reshape(k, m)
        return out


class CMS(ProjectiveSketch):
    r"""Apple's private count mean sketch (Apple Differential Privacy Team, 2017).

    A device draws a row j, one-hot encodes :math:`h_j(x)` as a ±1 vector of length
    m and flips every coordinate with probability :math:`1/(e^{\varepsilon/2}+1)`;
    it reports j and the m signs as bits.  With :math:`c = (e^{\varepsilon/2}+1)/
    (e^{\varepsilon/2}-1)`, :math:`B[j,l]` the number of +1 at (j, l) and
    :math:`n_j` the reports in row j, Apple's debiased sum is
    :math:`T(v) = \sum_j c\,B[j,h_j(v)] - n_j (c-1)/2`.  Each report adds
    :math:`Y = (1 + c\,s)/2` with :math:`s = \pm1`, so (fixed population)

    .. math:: \mathrm{Var}[\hat f(v)] = \frac{c^2 - (1-2\kappa)^2
              + f(v)\,[(1-2\kappa)^2 - 1]}{4n(1-\kappa)^2}.

    Parameters
    ----------
    m : int, optional
        Sketch width, a prime in [2, 65536]; default the smallest prime >= sqrt(d) (so
        r = 2 and k = m + 1 rows).  Allowed: the state k(m+1) within 2^26 cells and the
        hash table k·d·r within 2^22 entries (see :mod:`ldpcore.limits`).

    Examples
    --------
    >>> import ldpcore
    >>> o = ldpcore.make_oracle("cms", epsilon=2.0, domain_size=1000)
    >>> o.m, o.r, o.k, o.state_shape  # k = m + 1 rows of m + 1 cells
    (37, 2, 38, (38, 38))
    """

    mechanism = "cms"
    epsilon_bounds = (EPSILON_MIN, 19.4)  # flip 1/(e^(ε/2)+1) drawn in float32
    domain_size_bounds = (2, 1 << 13)
    parameter_ranges = ranges(epsilon_bounds, domain_size_bounds,
                              m="prime in [2, 65536]; k (m+1) <= 2^26 and k*d*r <= 2^22 "
                                "(k = (m^r-1)/(m-1))")

    @classmethod
    def exact_epsilon_max(cls) -> float:
        return 2 * EXACT_EPSILON_MAX_32

    def __init__(self, *, epsilon: float, domain_size: int, m: int | None = None) -> None:
        super().__init__(epsilon=epsilon, domain_size=domain_size)
        if m is None:
            m = max(2, math.isqrt(self.domain_size - 1) + 1)
            while not is_prime(m):
                m += 1
        else:
            m = check_int("m", m, low=2, high=1 << 16)
            if not is_prime(m):
                raise ParameterError(f"m must be a prime in [2, 65536], got {m}")
        self._setup(m)
        h = math.exp(self.epsilon / 2)
        self.flip = 1 / (h + 1)
        self.c = (h + 1) / (h - 1)

    @property
    def report_columns(self) -> tuple[Column, ...]:
        return (Column.index("j", self.k),
                Column("bits", "uint8", bits=self.m))

    @property
    def state_shape(self) -> tuple[int, ...]:
        return (self.k, self.m + 1)  # m bit counts, then the row's report count

    def _perturb(self, values: IntArray, rng: np.random.Generator) -> dict[str, np.ndarray]:
        n, m = values.size, self.m
        j = rng.integers(0, self.k, size=n, dtype=np.int64)
        hot = self.hash_values(j, self._digits(values))
        bits = rng.random((n, m), dtype=np.float32) < np.float32(self.flip)  # flipped -1s
        keep = rng.random(n) >= self.flip
        bits[np.arange(n), hot] = keep
        return {"j": j.astype(self.report_columns[0].dtype),
                "bits": np.packbits(bits, axis=1, bitorder="little")}

    def _aggregate(self, columns: dict[str, np.ndarray]) -> IntArray:
        j = columns["j"].astype(np.int64)
        out = np.zeros(self.state_shape, dtype=np.int64)
        order = np.argsort(j, kind="stable")
        bounds = np.searchsorted(j[order], np.arange(self.k + 1))
        packed = columns["bits"][order]
        for row in np.flatnonzero(np.diff(bounds)):
            chunk = packed[bounds[row]:bounds[row + 1]]
            out[row, :self.m] = bit_counts(chunk, self.m)
        out[:, self.m] = np.diff(bounds)
        return out

    def _sample_counts(self, distribution: FloatArray, n: int, size: int,
                       rng: np.random.Generator) -> IntArray:
        # Rows are uniform; within row j the hot cell is h_j(x) ~ G_j; given the hot
        # counts every bit is independent: 1 w.p. 1 - flip at the hot cell, flip elsewhere.
        k, m = self.k, self.m
        rows = rng.multinomial(n, np.full(k, 1.0 / k), size=size)  # (size, k)
        mass = np.clip(self.hashed_mass(distribution), 0.0, None)
        mass /= mass.sum(axis=1, keepdims=True)
        hot = rng.multinomial(rows, mass)  # (size, k, m)
        ones = rng.binomial(hot, 1.0 - self.flip) + rng.binomial(rows[..., None] - hot, self.flip)
        out = np.empty((size, k, m + 1), dtype=np.int64)
        out[..., :m] = ones
        out[..., m] = rows
        return out

    def _estimate(self, counts: IntArray, n: int) -> FloatArray:
        b = counts[:, :self.m].astype(np.float64)
        nj = counts[:, self.m].astype(np.float64)
        t = self.c * self._row_sums(b) - (self.c - 1) / 2 * nj.sum()
        return self._from_sums(t, n)

    def variance(self, n: int, frequency: float = 0.0) -> float:
        n, f = self._check_variance_args(n, frequency)
        s = (1 - 2 * self.kappa) ** 2
        return float((self.c**2 - s + f * (s - 1)) / (4 * n * (1 - self.kappa) ** 2))


class HCMS(ProjectiveSketch):
    r"""Hadamard count mean sketch (Apple 2017): one sketch row, one Hadamard coefficient, one bit.

    A device draws a row j and a coefficient :math:`l \in [m]`, computes
    :math:`w = H_m[l, h_j(x)] \in \{\pm1\}` and flips it with probability
    :math:`1/(e^\varepsilon+1)`.  With :math:`c = (e^\varepsilon+1)/(e^\varepsilon-1)`
    each report contributes :math:`Y = c\,\tilde w\,H_m[l, h_j(v)]` to :math:`T(v)`,
    an unbiased indicator of :math:`h_j(x) = h_j(v)` with :math:`Y^2 = c^2`, so

    .. math:: \mathrm{Var}[\hat f(v)] = \frac{c^2 - \kappa^2 + f(v)(\kappa^2 - 1)}
              {n(1-\kappa)^2}.

    :math:`T` for all v takes one fast Walsh–Hadamard transform per row.

    Parameters
    ----------
    m : int, optional
        Sketch width, a power of two in [2, 4096] (hashing is linear over GF(m));
        default the smallest power of two >= sqrt(d).

    Examples
    --------
    >>> import ldpcore
    >>> o = ldpcore.make_oracle("hcms", epsilon=2.0, domain_size=1000)
    >>> o.m, o.k, o.state_shape
    (32, 33, (33, 32, 2))
    """

    mechanism = "hcms"
    epsilon_bounds = (EPSILON_MIN, EPSILON_MAX_64)
    domain_size_bounds = (2, 1 << 13)
    parameter_ranges = ranges(epsilon_bounds, domain_size_bounds,
                              m="power of two in [2, 4096]; 2 k m <= 2^26 and k*d*r <= 2^22")

    def __init__(self, *, epsilon: float, domain_size: int, m: int | None = None) -> None:
        super().__init__(epsilon=epsilon, domain_size=domain_size)
        if m is None:
            m = 2
            while m * m < self.domain_size:
                m *= 2
        else:
            m = check_int("m", m, low=2, high=1 << 12)
            if m & (m - 1):
                raise ParameterError(f"m must be a power of two in [2, 4096], got {m}")
        self._setup(m)
        e = math.exp(self.epsilon)
        self.keep = e / (e + 1)
        self.c = (e + 1) / (e - 1)

    @property
    def report_columns(self) -> tuple[Column, ...]:
        return (Column.index("j", self.k),
                Column.index("l", self.m),
                Column("b", "uint8", 0, 1))

    @property
    def state_shape(self) -> tuple[int, ...]:
        return (self.k, self.m, 2)

    def _perturb(self, values: IntArray, rng: np.random.Generator) -> dict[str, np.ndarray]:
        n = values.size
        j = rng.integers(0, self.k, size=n, dtype=np.int64)
        lcol = rng.integers(0, self.m, size=n, dtype=np.int64)
        negative = hadamard_sign(lcol, self.hash_values(j, self._digits(values))) < 0
        b = (negative ^ (rng.random(n) >= self.keep)).astype(np.uint8)
        cols = self.report_columns
        return {"j": j.astype(cols[0].dtype), "l": lcol.astype(cols[1].dtype), "b": b}

    def _aggregate(self, columns: dict[str, np.ndarray]) -> IntArray:
        flat = (columns["j"].astype(np.int64) * self.m + columns["l"]) * 2 + columns["b"]
        size = self.k * self.m * 2
        return np.bincount(flat, minlength=size).astype(np.int64).reshape(self.state_shape)

    def _cell_probs(self, distribution: FloatArray) -> FloatArray:
        """P(j, l, b) of one report, shape (k, m, 2): P(j, l, +) = [(1 - keep) + (2 keep - 1)
        (1 + theta_jl)/2] / (k m) with theta_jl = sum_t G_j(t) H_m[l, t]."""
        k, m = self.k, self.m
        theta = fwht(self.hashed_mass(distribution))  # (k, m)
        plus = ((1 - self.keep) + (2 * self.keep - 1) * (1.0 + theta) / 2.0) / (k * m)
        out: FloatArray = np.clip(np.stack([plus, 1.0 / (k * m) - plus], axis=-1), 0.0, None)
        return out

    def subset_variance(self, n: int, indices: Any, distribution: Any) -> float:
        r"""Variance of :math:`\sum_{v\in S}\hat f(v)` for a population distributed as f.

        Values that share sketch cells have correlated estimates.  A report in cell
        (j, l, ±) adds :math:`Y_S = (\pm c\,\sum_{v\in S} H_m[l, h_j(v)] -
        |S|\kappa)/(1-\kappa)`; over the cells' probabilities the variance for n i.i.d.
        reports is :math:`\mathrm{Var}(Y_S)/n`, less the population's share
        :math:`f_S(1-f_S)/n` (fixed population, as :meth:`variance`).
        """
        n = self._check_variance_args(n, 0.0)[0]
        f = self.check_distribution(distribution)
        idx = np.asarray(indices, dtype=np.int64)
        k, m = self.k, self.m
        rows = np.repeat(np.arange(k, dtype=np.int64), idx.size)
        hits = np.bincount(rows * m + self._hash_table[:, idx].reshape(-1),
                           minlength=k * m).reshape(k, m).astype(np.float64)
        signed = self.c * fwht(hits)  # (k, m): c * sum_{v in S} H[l, h_j(v)]
        y = (np.stack([signed, -signed], axis=-1) - idx.size * self.kappa) / (1 - self.kappa)
        probs = self._cell_probs(f)
        mean = float((probs * y).sum())
        f_s = float(f[idx].sum())
        return max(float((probs * y**2).sum()) - mean**2 - f_s * (1 - f_s), 0.0) / n

    def _sample_counts(self, distribution: FloatArray, n: int, size: int,
                       rng: np.random.Generator) -> IntArray:
        # One report is one cell (j, l, b), with the probabilities of _cell_probs.
        k, m = self.k, self.m
        probs = self._cell_probs(distribution).reshape(-1)
        out = rng.multinomial(n, probs / probs.sum(), size=size)
        res: IntArray = out.reshape(size, k, m, 2).astype(np.int64)
        return res

    def _estimate(self, counts: IntArray, n: int) -> FloatArray:
        diff = (counts[..., 0] - counts[..., 1]).astype(np.float64)  # (k, m)
        t = self.c * self._row_sums(fwht(diff))
        return self._from_sums(t, n)

    def _estimate_batch(self, counts: IntArray, n: int) -> FloatArray:
        spec = fwht((counts[..., 0] - counts[..., 1]).astype(np.float64))  # (R, k, m)
        rows = np.arange(self.k)[:, None]
        t = self.c * spec[:, rows, self._hash_table].sum(axis=1)
        return self._from_sums(t, n)

    def variance(self, n: int, frequency: float = 0.0) -> float:
        n, f = self._check_variance_args(n, frequency)
        k2 = self.kappa**2
        return float((self.c**2 - k2 + f * (k2 - 1)) / (n * (1 - self.kappa) ** 2))

