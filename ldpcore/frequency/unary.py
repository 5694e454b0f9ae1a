"""Unary encodings: symmetric (SUE, basic RAPPOR) and optimized (OUE)."""

from __future__ import annotations

import math
from abc import abstractmethod

import numpy as np

from .._bounds import EPSILON_MIN, EXACT_EPSILON_MAX_32, ranges
from ..base import Column, FloatArray, IntArray
from .pure import PureOracle

__all__ = ["BitmaskOracle", "UnaryEncoding", "SUE", "OUE", "bit_counts"]

# Bits per byte, for a 256-entry lookup table that turns packed bytes into bit counts.
_BIT_TABLE = np.unpackbits(np.arange(256, dtype=np.uint8)[:, None], axis=1,
                           bitorder="little").astype(np.int64)
_CHUNK = 1 << 14


_LANES = np.uint64(0x0101010101010101)
_SWAR_ROWS = 255  # rows summed per block: each byte lane of a uint64 then stays <= 255


def _bit_counts_swar(packed: np.ndarray) -> IntArray:
    """Bit counts by SIMD-within-a-register: bit k of 8 bytes at once, per uint64 word.

    ``(word >> k) & 0x0101…01`` leaves bit k of each byte in that byte's lowest bit;
    summing 255 such words cannot carry between bytes, so the sum's bytes are the
    counts.  About 2.5× the per-byte-column bincount on large batches.
    """
    n, w = packed.shape
    pad = (-w) % 8
    if pad:
        packed = np.concatenate([packed, np.zeros((n, pad), dtype=np.uint8)], axis=1)
    words = np.ascontiguousarray(packed).view(np.uint64)
    nw = words.shape[1]
    full = n - n % _SWAR_ROWS
    blocks, rest = words[:full].reshape(-1, _SWAR_ROWS, nw), words[full:]
    counts = np.empty((8, nw * 8), dtype=np.int64)  # [bit k of a byte][byte]
    for k in range(8):
        sh = np.uint64(k)
        block = ((blocks >> sh) & _LANES).sum(axis=1, dtype=np.uint64)
        tail = ((rest >> sh) & _LANES).sum(axis=0, dtype=np.uint64)
        counts[k] = (block.view(np.uint8).reshape(-1, nw * 8).sum(axis=0, dtype=np.int64)
                     + tail.view(np.uint8))
    return counts.T.reshape(-1)[:w * 8]


def bit_counts(packed: np.ndarray, nbits: int) -> IntArray:
    """Number of reports with each bit set, from little-endian packed bitmasks (n, width).

    >>> bits = np.packbits(np.eye(3, 10, dtype=np.uint8), axis=1, bitorder="little")
    >>> bit_counts(np.concatenate([bits] * 300), 10).tolist()
    [300, 300, 300, 0, 0, 0, 0, 0, 0, 0]
    """
    if packed.shape[0] >= 4 * _SWAR_ROWS and np.little_endian:
        return _bit_counts_swar(packed)[:nbits]
    counts = np.zeros(packed.shape[1] * 8, dtype=np.int64)
    for byte in range(packed.shape[1]):
        # One bincount per byte column, then a 256x8 table: O(n) per byte, no unpacking.
        counts[byte * 8:(byte + 1) * 8] = np.bincount(packed[:, byte], minlength=256) @ _BIT_TABLE
    return counts[:nbits]


class BitmaskOracle(PureOracle):
    """A pure oracle whose report is the d-bit mask of the values it supports.

    The mask is packed little-endian and the state is the per-bit count of ones.
    Subclasses draw the masks (:meth:`_sample_masks`), :meth:`_mask_rows` reports
    at a time.
    """

    @property
    def report_columns(self) -> tuple[Column, ...]:
        return (Column("bits", "uint8", bits=self.domain_size),)

    @property
    def state_shape(self) -> tuple[int, ...]:
        return (self.domain_size,)

    def _mask_rows(self) -> int:
        """Reports per chunk of masks (bounds the boolean (rows, d) scratch)."""
        return _CHUNK

    @abstractmethod
    def _sample_masks(self, values: IntArray, rng: np.random.Generator) -> np.ndarray:
        """Boolean masks, shape (len(values), d), one perturbed report per value."""

    def _perturb(self, values: IntArray, rng: np.random.Generator) -> dict[str, np.ndarray]:
        out = np.empty((values.size, (self.domain_size + 7) // 8), dtype=np.uint8)
        chunk = self._mask_rows()
        for start in range(0, values.size, chunk):
            bits = self._sample_masks(values[start:start + chunk], rng)
            out[start:start + bits.shape[0]] = np.packbits(bits, axis=1, bitorder="little")
        return {"bits": out}

    def _aggregate(self, columns: dict[str, np.ndarray]) -> IntArray:
        return bit_counts(columns["bits"], self.domain_size)


class UnaryEncoding(BitmaskOracle):
    r"""Unary encoding with keep probability p and flip-on probability q (Wang et al. 2017).

    A value v is one-hot encoded into d bits; bit v is reported as 1 with
    probability p, every other bit as 1 with probability q.  The state is the
    per-bit count of ones C, and

    .. math:: \hat f(v) = \frac{C(v)/n - q}{p - q}, \qquad
              \mathrm{Var}[\hat f(v)] = \frac{q(1-q)}{n(p-q)^2} + \frac{f(v)(1-p-q)}{n(p-q)}.

    The report is a d-bit mask packed little-endian.
    """

    def _sample_masks(self, values: IntArray, rng: np.random.Generator) -> np.ndarray:
        m = values.size
        # float32 uniforms halve the cost; q and p are far from float32 resolution.
        bits = rng.random((m, self.domain_size), dtype=np.float32) < np.float32(self.q)
        bits[np.arange(m), values] = rng.random(m) < self.p
        return bits

    def _sample_counts(self, distribution: FloatArray, n: int, size: int,
                       rng: np.random.Generator) -> IntArray:
        # Bits are independent given the value: the c(v) holders of v set bit v w.p. p,
        # the n - c(v) others w.p. q.
        holders = rng.multinomial(n, distribution, size=size)
        out: IntArray = (rng.binomial(holders, self.p)
                         + rng.binomial(n - holders, self.q)).astype(np.int64)
        return out


class SUE(UnaryEncoding):
    r"""Symmetric unary encoding (basic one-time RAPPOR, Erlingsson et al. 2014).

    :math:`p = e^{\varepsilon/2}/(e^{\varepsilon/2}+1)`, :math:`q = 1 - p`.

    Examples
    --------
    >>> import ldpcore
    >>> o = ldpcore.make_oracle("sue", epsilon=2.0, domain_size=10)
    >>> round(o.p, 4), round(o.q, 4), round(o.p + o.q, 12)
    (0.7311, 0.2689, 1.0)
    >>> o.perturb([3, 9], rng=1).columns["bits"].shape
    (2, 2)
    """

    mechanism = "sue"
    epsilon_bounds = (EPSILON_MIN, 19.4)  # flip 1/(e^(ε/2)+1) drawn in float32
    domain_size_bounds = (2, 1 << 24)
    parameter_ranges = ranges(epsilon_bounds, domain_size_bounds, " (d-bit reports)")

    @classmethod
    def exact_epsilon_max(cls) -> float:
        return 2 * EXACT_EPSILON_MAX_32

    def __init__(self, *, epsilon: float, domain_size: int) -> None:
        super().__init__(epsilon=epsilon, domain_size=domain_size)
        h = math.exp(self.epsilon / 2)
        self.p = h / (h + 1)
        self.q = 1 / (h + 1)


class OUE(UnaryEncoding):
    r"""Optimized unary encoding (Wang et al. 2017).

    :math:`p = 1/2`, :math:`q = 1/(e^\varepsilon+1)`: the unary encoding with the
    least variance at f = 0, :math:`4e^\varepsilon/(n(e^\varepsilon-1)^2)`.

    Examples
    --------
    >>> import ldpcore
    >>> o = ldpcore.make_oracle("oue", epsilon=1.0, domain_size=100)
    >>> round(o.variance(1000), 6) == round(4 * math.e / (1000 * (math.e - 1) ** 2), 6)
    True
    """

    mechanism = "oue"
    epsilon_bounds = (EPSILON_MIN, 9.7)  # flip-on q = 1/(e^ε+1) drawn in float32
    domain_size_bounds = (2, 1 << 24)
    parameter_ranges = ranges(epsilon_bounds, domain_size_bounds, " (d-bit reports)")

    @classmethod
    def exact_epsilon_max(cls) -> float:
        return EXACT_EPSILON_MAX_32

    def __init__(self, *, epsilon: float, domain_size: int) -> None:
        super().__init__(epsilon=epsilon, domain_size=domain_size)
        self.p = 0.5
        self.q = 1 / (math.exp(self.epsilon) + 1)
