"""Finite fields GF(q) for q prime or q = 2^b (b <= 16), vectorised over numpy arrays.

Used by the sketch mechanisms' projective hash families.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

__all__ = ["Field", "projective_points"]

IntArray = npt.NDArray[np.int64]


def _primitive_poly(b: int) -> int:
    """Smallest polynomial of degree b over GF(2) for which x generates GF(2^b)*."""
    q = 1 << b
    for poly in range(q | 1, 2 * q, 2):
        x, seen = 1, 0
        for _ in range(q - 1):
            x <<= 1
            if x & q:
                x ^= poly
            seen += 1
            if x == 1:
                break
        if x == 1 and seen == q - 1:
            return poly
    raise ValueError(f"no primitive polynomial of degree {b}")  # pragma: no cover


class Field:
    """GF(q): ``add`` and ``mul`` on int64 arrays of elements in [0, q)."""

    def __init__(self, q: int) -> None:
        self.q = q
        self.binary = q > 2 and q & (q - 1) == 0
        if not self.binary and not (q >= 2 and all(q % k for k in range(2, int(q**0.5) + 1))):
            raise ValueError(f"GF(q) needs q prime or a power of two, got {q}")
        if self.binary:
            b = q.bit_length() - 1
            poly = _primitive_poly(b)
            exp = np.zeros(2 * q, dtype=np.int64)
            x = 1
            for i in range(q - 1):
                exp[i] = x
                x <<= 1
                if x & q:
                    x ^= poly
            exp[q - 1:2 * (q - 1)] = exp[:q - 1]
            log = np.zeros(q, dtype=np.int64)
            log[exp[:q - 1]] = np.arange(q - 1)
            self._exp, self._log = exp, log

    def add(self, a: IntArray, b: IntArray) -> IntArray:
        out: IntArray = np.bitwise_xor(a, b) if self.binary else (a + b) % self.q
        return out

    def mul(self, a: IntArray, b: IntArray) -> IntArray:
        if not self.binary:
            out: IntArray = (a * b) % self.q
            return out
        prod = self._exp[self._log[a] + self._log[b]]
        res: IntArray = np.where((a == 0) | (b == 0), 0, prod)
        return res


def projective_points(q: int, r: int) -> IntArray:
    """Points of PG(r−1, q): vectors of GF(q)^r whose first nonzero coordinate is 1.

    There are (q^r − 1)/(q − 1) of them; for every nonzero w exactly
    (q^(r−1) − 1)/(q − 1) satisfy ⟨a, w⟩ = 0, so a hash h_a(x) = ⟨a, x⟩ drawn
    uniformly from them collides on any pair x ≠ x' with the same probability
    κ = (q^(r−1) − 1)/(q^r − 1).
    """
    pts = []
    for lead in range(r):
        tail = r - lead - 1
        grid = np.indices((q,) * tail).reshape(tail, -1).T if tail else np.zeros((1, 0), int)
        block = np.zeros((grid.shape[0], r), dtype=np.int64)
        block[:, lead] = 1
        block[:, lead + 1:] = grid
        pts.append(block)
    return np.concatenate(pts)
