"""Prefix-extending method (PEM) for heavy hitters over a 2^bits domain."""

from __future__ import annotations

import hashlib
import math
from typing import Any

import numpy as np
import numpy.typing as npt

from .._bounds import EPSILON_MAX_64, EPSILON_MIN, MAX_STATE_CELLS, real_in
from .._validate import check_epsilon, check_int
from ..base import Column, FloatArray, IntArray, Mechanism, Reports, State
from ..capabilities import HeavyHitterSearch
from ..errors import ParameterError, StateError
from ..frequency.lh import olh_variance

__all__ = ["PEM", "key_of", "pem_schedule"]

Keys = npt.NDArray[Any]
"""Values or prefixes of the 2^bits domain (uint64 arrays)."""


def key_of(data: bytes | str, bits: int = 32) -> int:
    """Map a byte string (or text) to a ``bits``-bit key (BLAKE2b prefix), for PEM domains.

    >>> key_of("hello", 16) == key_of(b"hello", 16) < 2**16
    True
    """
    raw = data.encode() if isinstance(data, str) else bytes(data)
    return int.from_bytes(hashlib.blake2b(raw, digest_size=8).digest(), "big") >> (64 - bits)


def pem_schedule(bits: int, keep: int, eta: int) -> list[int]:
    r"""Prefix lengths reported by the groups: the first enumerates every prefix of
    :math:`s_0 = \eta + \lceil\log_2 \mathrm{keep}\rceil` bits, each later group extends the
    ``keep`` best prefixes by the same number of bits (at most ``eta``), ending at ``bits``.

    >>> pem_schedule(32, 64, 8)
    [14, 20, 26, 32]
    >>> pem_schedule(10, 64, 8)
    [10]
    """
    s0 = min(bits, eta + max(0, math.ceil(math.log2(keep))))
    if s0 == bits:
        return [bits]
    steps = math.ceil((bits - s0) / eta)
    inc = math.ceil((bits - s0) / steps)
    lengths = [s0 + i * inc for i in range(steps)] + [bits]
    return sorted(set(lengths))


class PEM(Mechanism, HeavyHitterSearch):
    r"""Prefix-extending heavy hitters with optimized local hashing (OLH) per group.

    Each device joins one of G groups uniformly at random (sampling, not budget
    splitting: every report is ε-LDP).  Group i reports the top ``lengths[i]`` bits of its
    value through OLH: it draws a seed index s from a public pool of ``pool`` hash
    functions of the group, hashes its prefix to :math:`[g]` with
    :math:`g = \mathrm{round}(e^\varepsilon + 1)` (lowered if needed so the state
    G × pool × g stays within 2^26 cells and g <= 2^16), and keeps the hash with probability
    :math:`p = e^\varepsilon / (e^\varepsilon + g - 1)` (else another value of [g],
    uniformly).  The state holds, per group, the count of every (seed, hashed value)
    pair: G × pool × g integers, whatever n is.

    The server enumerates the prefixes of the first group, keeps the ``keep`` largest,
    extends them by the next group's extra bits, estimates again, and so on.  The
    support count of a candidate is :math:`S(v) = \sum_s C[s, h_s(v)]` and

    .. math:: \hat f(v) = \frac{S(v)/n_i - 1/g}{p - 1/g}.

    With a finite pool, two values collide under a fraction :math:`\kappa(u, v)` of the
    seeds rather than exactly 1/g, which biases :math:`\hat f(v)` by
    :math:`\frac{g}{g-1}\sum_{u \ne v} f(u)(\kappa(u, v) - 1/g)`.  The server knows
    :math:`\kappa` for every pair of candidates, so it removes the bias due to the
    heaviest candidates at every level and, at the last level, solves the linear system
    over all kept candidates; what remains is the pool term of the uncounted tail (zero
    mean over the public pool, small because tail values are rare).

    Parameters
    ----------
    epsilon : float
    bits : int
        Values are integers in :math:`[0, 2^{bits})`, bits in [4, 62] (``domain_size``
        = 2^bits is accepted instead).
    keep : int
        Candidate prefixes kept per level (default 64; about 3k for top-k queries).
    eta : int
        At most this many bits are added per level (candidates per level:
        keep × 2^eta; the slides' advice: as many as the server can evaluate).
    pool : int
        Hash functions per group in the public pool.
    hash_seed : int
        Seed of the public pool (part of the spec and fingerprint).

    Examples
    --------
    >>> import numpy as np, ldpcore
    >>> o = ldpcore.make_oracle("pem", epsilon=4.0, bits=20, keep=16, eta=6)
    >>> o.lengths
    [10, 15, 20]
    >>> rng = np.random.default_rng(0)
    >>> x = np.where(rng.random(60_000) < 0.5, 777_777, rng.integers(0, 2**20, 60_000))
    >>> top = o.heavy_hitters(o.aggregate(o.perturb(x, rng=rng)), 1)
    >>> top[0][0], abs(top[0][1] - 0.5) < 4 * top[0][2]
    (777777, True)
    """

    mechanism = "pem"
    epsilon_bounds = (EPSILON_MIN, EPSILON_MAX_64)
    domain_size_bounds = (16, 1 << 62)  # 2^bits
    parameter_ranges = {
        "epsilon": real_in(epsilon_bounds), "bits": "integer in [4, 62] (domain_size = 2^bits)",
        "keep": "integer in [1, 4096]", "eta": "integer in [1, 16], keep*2^eta <= 2^22",
        "pool": "integer in [1, 4096]", "hash_seed": "integer in [0, 2^63-1]",
        "g (derived)": "round(e^eps + 1), lowered so groups*pool*g <= 2^26 and g <= 65536"}

    @classmethod
    def _unit_test_params(cls) -> list[dict[str, Any]]:
        return [{"bits": 8, "keep": 4, "eta": 2, "pool": 8}]

    def __init__(self, *, epsilon: float, bits: int | None = None,
                 domain_size: int | None = None, keep: int = 64, eta: int = 8,
                 pool: int = 256, hash_seed: int = 0) -> None:
        lo, hi = self.epsilon_bounds
        self.epsilon = check_epsilon(epsilon, low=lo, high=hi, context="for mechanism 'pem'")
        if bits is None:
            if domain_size is None:
                raise ParameterError("give bits (values are integers in [0, 2^bits))")
            d = check_int("domain_size", domain_size, low=16, high=2**62)
            if d & (d - 1):
                raise ParameterError(f"domain_size must be a power of two, got {d}")
            bits = d.bit_length() - 1
        self.bits = check_int("bits", bits, low=4, high=62)
        if domain_size is not None and domain_size != 2**self.bits:
            raise ParameterError(f"domain_size {domain_size} != 2^bits = {2**self.bits}")
        self.domain_size = 2**self.bits
        self.keep = check_int("keep", keep, low=1, high=4096)
        self.eta = check_int("eta", eta, low=1, high=16)
        if self.keep * 2**self.eta > 1 << 22:
            raise ParameterError(f"keep × 2^eta must be at most 2^22 candidates per level, "
                                 f"got {self.keep} × 2^{self.eta}")
        self.pool = check_int("pool", pool, low=1, high=4096)
        self.hash_seed = check_int("hash_seed", hash_seed, low=0, high=2**63 - 1)
        self.lengths = pem_schedule(self.bits, self.keep, self.eta)
        e = math.exp(self.epsilon)
        # OLH's optimum g = round(e^ε + 1), lowered so that the "y" report column (uint16)
        # and the state (groups × pool × g <= MAX_STATE_CELLS) stay bounded: any g >= 2 is
        # ε-LDP with p = e^ε / (e^ε + g - 1), only less accurate.
        g_cap = max(2, min(1 << 16, MAX_STATE_CELLS // (len(self.lengths) * self.pool)))
        self.g = int(min(g_cap, max(2, round(e + 1))))
        self.p = e / (e + self.g - 1)
        rng = np.random.default_rng(self.hash_seed)
        groups = len(self.lengths)
        # multiply-add-shift hashing: odd multipliers, random offsets, one per (group, seed)
        self._a = rng.integers(0, 2**63, size=(groups, self.pool), dtype=np.uint64) * 2 + 1
        self._b = rng.integers(0, 2**63, size=(groups, self.pool), dtype=np.uint64)

    @property
    def params(self) -> dict[str, Any]:
        return {"bits": self.bits, "keep": self.keep, "eta": self.eta, "pool": self.pool,
                "hash_seed": self.hash_seed}

    @property
    def spec(self) -> dict[str, Any]:
        return {"mechanism": self.mechanism, "epsilon": self.epsilon, **self.params}

    @property
    def report_columns(self) -> tuple[Column, ...]:
        return (Column("group", "uint8", 0, len(self.lengths) - 1),
                Column("seed", "uint16", 0, self.pool - 1),
                Column("y", "uint16", 0, self.g - 1))

    @property
    def state_shape(self) -> tuple[int, ...]:
        return (len(self.lengths), self.pool, self.g)

    # ---- hashing -------------------------------------------------------------------------
    def hash(self, group: int | IntArray, seed: IntArray, prefix: Keys) -> IntArray:
        """:math:`h_s(v)` in [g]: ((a·v + b) mod 2^64) >> 32, scaled to [g]."""
        with np.errstate(over="ignore"):
            x = self._a[group, seed] * prefix.astype(np.uint64) + self._b[group, seed]
        hi = x >> np.uint64(32)
        return np.asarray((hi * np.uint64(self.g)) >> np.uint64(32), dtype=np.int64)

    # ---- device -------------------------------------------------------------------------
    def perturb(self, values: Any, rng: np.random.Generator | int | None = None) -> Reports:
        """Perturb integers in [0, 2^bits) (int64 or uint64 arrays, or Python ints)."""
        from .._validate import as_rng

        arr = np.atleast_1d(np.asarray(values))
        if arr.ndim != 1 or (arr.size and arr.dtype.kind not in "iu"):
            raise ParameterError(f"values must be a 1-D array of integers in [0, 2^{self.bits})")
        if arr.size and (int(arr.min()) < 0 or int(arr.max()) >= self.domain_size):
            raise ParameterError(f"values must be integers in [0, 2^{self.bits})")
        cols = self._perturb(arr.astype(np.uint64), as_rng(rng))
        return Reports(self.mechanism, self.fingerprint, cols)

    def _perturb(self, values: Keys, rng: np.random.Generator) -> dict[str, np.ndarray]:
        n = values.size
        group = rng.integers(0, len(self.lengths), size=n)
        seed = rng.integers(0, self.pool, size=n)
        shift = (self.bits - np.asarray(self.lengths))[group].astype(np.uint64)
        prefix = values.astype(np.uint64) >> shift
        h = self.hash(group, seed, prefix)
        keep = rng.random(n) < self.p
        other = (h + rng.integers(1, self.g, size=n)) % self.g
        y = np.where(keep, h, other)
        return {"group": group.astype(np.uint8), "seed": seed.astype(np.uint16),
                "y": y.astype(np.uint16)}

    # ---- server -------------------------------------------------------------------------
    def _aggregate(self, columns: dict[str, np.ndarray]) -> IntArray:
        flat = ((columns["group"].astype(np.int64) * self.pool + columns["seed"]) * self.g
                + columns["y"])
        size = len(self.lengths) * self.pool * self.g
        return np.bincount(flat, minlength=size).reshape(self.state_shape).astype(np.int64)

    def variance(self, n: int, frequency: float = 0.0) -> float:
        """Variance of one estimate from a group of ``n`` reports (OLH's, with q* = 1/g)."""
        n, f = self._check_variance_args(n, frequency)
        return olh_variance(n, f, self.p, self.g)

    def _raw(self, counts: IntArray, group: int, prefixes: Keys) -> tuple[FloatArray, int]:
        n = int(counts[group].sum())
        if n == 0:
            raise StateError(f"group {group} has no reports yet")
        seeds = np.arange(self.pool)
        table = counts[group]
        support = np.zeros(prefixes.size)
        for start in range(0, prefixes.size, 4096):  # bounded memory
            chunk = prefixes[start:start + 4096]
            h = self.hash(group, seeds[None, :], chunk[:, None])
            support[start:start + 4096] = table[seeds[None, :], h].sum(axis=1)
        qs = 1.0 / self.g
        return (support / n - qs) / (self.p - qs), n

    def _kappa(self, group: int, rows: Keys, cols: Keys) -> FloatArray:
        """Fraction of the pool's seeds under which each (row, col) pair collides."""
        seeds = np.arange(self.pool)
        hc = self.hash(group, seeds[None, :], cols[:, None])  # (C, S)
        out = np.empty((rows.size, cols.size))
        for start in range(0, rows.size, 256):
            hr = self.hash(group, seeds[None, :], rows[start:start + 256, None])
            out[start:start + 256] = (hr[:, None, :] == hc[None, :, :]).mean(axis=2)
        return out

    def _debias(self, group: int, prefixes: Keys, est: FloatArray,
                heavy: int) -> FloatArray:
        # subtract the pool bias caused by the `heavy` largest candidates
        top = np.argsort(-est)[:heavy]
        kap = self._kappa(group, prefixes, prefixes[top])  # (C, H)
        gain = self.g / (self.g - 1)
        corr = (kap - 1.0 / self.g) * est[top][None, :]
        corr[top, np.arange(top.size)] = 0.0  # a candidate does not bias itself
        return np.asarray(est - gain * corr.sum(axis=1), dtype=float)

    def candidates(self, state: State) -> tuple[Keys, FloatArray, int]:
        """Run the prefix extension: the kept full-length values, their debiased
        estimates and the size n of the last group."""
        self.check_state(state)
        counts = state.counts
        prefixes = np.arange(2 ** self.lengths[0], dtype=np.uint64)
        for i, length in enumerate(self.lengths):
            if i > 0:
                extra = length - self.lengths[i - 1]
                ext = np.arange(2**extra, dtype=np.uint64)
                prefixes = ((prefixes[:, None] << np.uint64(extra)) | ext[None, :]).ravel()
            raw, n = self._raw(counts, i, prefixes)
            est = self._debias(i, prefixes, raw, heavy=min(self.keep, raw.size))
            top = np.argsort(-est, kind="stable")[:self.keep]
            prefixes, raw = prefixes[top], raw[top]
        return self._solve(len(self.lengths) - 1, prefixes, raw, n)

    def _solve(self, group: int, prefixes: Keys, est: FloatArray,
               n: int) -> tuple[Keys, FloatArray, int]:
        # last level: among the kept candidates, E[f̂] = A f with
        # A = I + g/(g-1) (κ - 1/g) off the diagonal.
        off = 1 - np.eye(prefixes.size)
        a = 1 - off + self.g / (self.g - 1) * (self._kappa(group, prefixes, prefixes)
                                               - 1.0 / self.g) * off
        return prefixes, np.asarray(np.linalg.solve(a, est), dtype=float), n

    def heavy_hitters(self, state: State, k: int) -> list[tuple[int, float, float]]:
        """The k most frequent values: (value, estimated frequency, standard error)."""
        k = check_int("k", k, low=1, high=self.keep)
        cand, f, n = self.candidates(state)
        order = np.argsort(-f, kind="stable")[:k]
        return [(int(cand[i]), float(f[i]),
                 math.sqrt(self.variance(n, float(np.clip(f[i], 0.0, 1.0)))))
                for i in order]

    def frequency_of(self, state: State, values: Any) -> FloatArray:
        """Unbiased OLH estimates of given full-length values from the last group
        (exact-1/g collision model; no candidate search)."""
        self.check_state(state)
        vals = np.atleast_1d(np.asarray(values)).astype(np.uint64)
        est, _ = self._raw(state.counts, len(self.lengths) - 1, vals)
        return est
