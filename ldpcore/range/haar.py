"""HaarHRR: Haar wavelet coefficients reported with Hadamard randomized response."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .._state_sampling import check_distribution, hrr_cell_probs, multinomial_cells
from .._transforms import fwht, hadamard_sign, next_pow2
from .._validate import as_rng, check_int
from ..base import Column, FloatArray, FrequencyOracle, IntArray, State
from ..consistency.normalize import simplex_projection
from ..errors import ReportError
from .base import RangeMixin

__all__ = ["HaarHRR"]


class HaarHRR(RangeMixin, FrequencyOracle):
    r"""HaarHRR (Cormode, Kulkarni & Srivastava 2019, Section 4.6).

    Over :math:`D = 2^h` (padded), the node at height :math:`l \in \{1..h\}`
    covering leaves of x holds the detail :math:`+1` if x is in its left half and
    :math:`-1` otherwise; level l is the signed one-hot vector over its
    :math:`D_l = 2^{h-l}` nodes.  A user samples l uniformly and reports it with
    HRR: a coefficient index :math:`j \in [D_l]` and the bit
    :math:`s\,H[j, k]` kept with probability :math:`p = e^\varepsilon/(e^\varepsilon+1)`.
    The server inverts each level by a fast Walsh–Hadamard transform, giving
    unbiased details :math:`\hat w_l` (left minus right mass), and the leaves
    follow from the inverse Haar transform
    :math:`\hat f(x) = 1/D + \sum_l \mathrm{sign}_l(x)\,\hat w_l[x \gg l] / 2^l`.
    No post-processing is needed for consistency: the coefficients are not redundant.
    ``method="consistent"`` in the queries (:class:`~ldpcore.range.base.RangeMixin`)
    adds non-negativity and total 1 by a leaf projection (:meth:`_fit_consistent`).

    With :math:`V_F = ((e^\varepsilon+1)/(e^\varepsilon-1))^2/n` (HRR), each
    :math:`\hat w_l` has variance at most :math:`h V_F`, so a range answer has
    variance :math:`V_r \le \tfrac12 h^2 V_F` whatever its length (Eq. (3)),
    and a leaf at most :math:`h V_F \sum_l 4^{-l}`.

    Examples
    --------
    >>> import ldpcore
    >>> o = ldpcore.make_oracle("haar", epsilon=1.0, domain_size=1000)
    >>> o.height, o.padded
    (10, 1024)
    """

    mechanism = "haar"

    def __init__(self, *, epsilon: float, domain_size: int) -> None:
        super().__init__(epsilon=epsilon, domain_size=domain_size)
        self.padded = next_pow2(self.domain_size)
        self.height = self.padded.bit_length() - 1
        e = math.exp(self.epsilon)
        self.p = e / (e + 1)
        sizes = [2 * (self.padded >> lv) for lv in range(1, self.height + 1)]
        self._offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)

    @property
    def params(self) -> dict[str, Any]:
        return {}

    @property
    def report_columns(self) -> tuple[Column, ...]:
        top = max(1, self.padded // 2)
        dtype = "uint16" if top <= 2**16 else "uint32"
        return (Column("level", "uint8", 1, self.height), Column("j", dtype, 0, top - 1),
                Column("b", "uint8", 0, 1))

    @property
    def state_shape(self) -> tuple[int, ...]:
        return (int(self._offsets[-1]) + self.height,)

    def _perturb(self, values: IntArray, rng: np.random.Generator) -> dict[str, np.ndarray]:
        n, h = values.size, self.height
        level = rng.integers(1, h + 1, size=n)
        width = np.right_shift(self.padded, level)
        j = rng.integers(0, width)
        node = np.right_shift(values, level)
        right = np.right_shift(values, level - 1) & 1  # 1: x in the node's right half
        negative = (hadamard_sign(j, node) < 0) ^ (right == 1)
        b = (negative ^ (rng.random(n) >= self.p)).astype(np.uint8)
        cols = self.report_columns
        return {"level": level.astype(np.uint8), "j": j.astype(cols[1].dtype), "b": b}

    def sample_state(self, distribution: FloatArray, n: int,
                     rng: np.random.Generator | int | None = None) -> State:
        r"""A state distributed exactly as ``aggregate(perturb(values))`` for n values i.i.d.
        from ``distribution`` (over [0, D)), in O(D) time whatever n.

        A report is a cell (level l, j, b) with probability
        :math:`rac1h\,P_{HRR}(j, b)` where the level's HRR sees the signed details
        :math:`d_l[v] = \pi(	ext{left half of } v) - \pi(	ext{right half})` (see
        :func:`ldpcore._state_sampling.hrr_cell_probs`); the reports are i.i.d., so the
        state (cell counts, and level counts as their block sums) is one multinomial draw.

        >>> import numpy as np, ldpcore
        >>> o = ldpcore.make_oracle("haar", epsilon=1.0, domain_size=100)
        >>> st = o.sample_state(np.full(100, 0.01), 10**9, rng=1)
        >>> st.n, int(st.counts[o._offsets[-1]:].sum())
        (1000000000, 1000000000)
        """
        dist = check_distribution(distribution, self.domain_size)
        n = check_int("n", n, low=0)
        gen = as_rng(rng)
        pad = np.zeros(self.padded)
        pad[:self.domain_size] = dist
        probs = np.empty(int(self._offsets[-1]))
        for lv in range(1, self.height + 1):
            halves = pad.reshape(self.padded >> lv, 2, -1).sum(axis=2)
            cells = hrr_cell_probs(halves[:, 0] - halves[:, 1], self.p)
            probs[self._offsets[lv - 1]:self._offsets[lv]] = cells.reshape(-1) / self.height
        out = np.zeros(self.state_shape, dtype=np.int64)
        if n:
            out[:self._offsets[-1]] = multinomial_cells(n, probs, gen)
            out[self._offsets[-1]:] = [out[self._offsets[lv - 1]:self._offsets[lv]].sum()
                                       for lv in range(1, self.height + 1)]
        return State(self.fingerprint, n, out)

    def _validate_columns(self, columns: dict[str, np.ndarray]) -> None:
        width = np.right_shift(self.padded, columns["level"].astype(np.int64))
        if columns["j"].size and np.any(columns["j"] >= width):
            raise ReportError("column 'j' exceeds the number of nodes of its level")

    def _aggregate(self, columns: dict[str, np.ndarray]) -> IntArray:
        level = columns["level"].astype(np.int64)
        flat = self._offsets[level - 1] + columns["j"].astype(np.int64) * 2 + columns["b"]
        out = np.zeros(self.state_shape, dtype=np.int64)
        out[:self._offsets[-1]] = np.bincount(flat, minlength=int(self._offsets[-1]))
        out[self._offsets[-1]:] = np.bincount(level, minlength=self.height + 1)[1:]
        return out

    def details(self, counts: IntArray) -> list[FloatArray]:
        """Unbiased Haar details (left minus right mass) per level, level 1 first."""
        n_level = counts[self._offsets[-1]:]
        out = []
        for lv in range(1, self.height + 1):
            block = counts[self._offsets[lv - 1]:self._offsets[lv]].reshape(-1, 2)
            nl, width = int(n_level[lv - 1]), block.shape[0]
            if nl == 0:
                out.append(np.zeros(width))
                continue
            theta = width * (block[:, 0] - block[:, 1]) / (nl * (2 * self.p - 1))
            out.append(fwht(theta) / width)
        return out

    def _leaves(self, counts: IntArray) -> FloatArray:
        x = np.arange(self.padded)
        f = np.full(self.padded, 1.0 / self.padded)
        for lv, w in enumerate(self.details(counts), start=1):
            sign = 1.0 - 2.0 * (np.right_shift(x, lv - 1) & 1)
            f += sign * w[np.right_shift(x, lv)] / 2**lv
        return f

    def _estimate(self, counts: IntArray, n: int) -> FloatArray:
        return self._leaves(counts)[:self.domain_size]

    def _unbiased_cdf(self, state: State) -> FloatArray:
        self._check_range_state(state)
        out: FloatArray = np.cumsum(self._leaves(state.counts))[:self.domain_size]
        return out

    def _unbiased_leaves(self, state: State) -> FloatArray:
        return self.estimate(state)

    def _fit_consistent(self, state: State) -> FloatArray:
        r"""Euclidean projection of the real leaves onto the probability simplex.

        The Haar reconstruction is already tree-consistent (every node is the sum of its
        leaves, the padded total is 1), so only non-negativity, zero padding and total 1
        are missing.  Every leaf estimate has the same variance
        :math:`V = h V_F \sum_l 4^{-l}` (each leaf has one ancestor per level), so the
        variance-weighted least-squares fit of the leaves,
        :math:`\min_f \sum_x (f_x - \hat f_x)^2 / V` over
        :math:`\{f \ge 0, \sum_{x<D} f_x = 1\}`, is the plain simplex projection
        :math:`f_x = \max(\hat f_x - \theta, 0)` (Wang et al. 2020's Norm-Sub), exact
        in :math:`O(D \log D)`.  It weighs leaves only: it ignores the covariance of
        leaves sharing ancestors (the full generalised least squares in the Haar
        coefficients' metric is not what is computed)."""
        return simplex_projection(self._leaves(state.counts)[:self.domain_size])

    def _vf(self, n: int) -> float:
        return 1.0 / (n * (2 * self.p - 1) ** 2)

    def variance(self, n: int, frequency: float = 0.0) -> float:
        r"""Upper bound on a leaf's variance, :math:`h V_F \sum_{l=1}^h 4^{-l}`.

        Exact variance depends on the masses of the leaf's ancestors, not only on
        its own frequency; the bound is attained up to those O(1/c²) terms.
        """
        n, _ = self._check_variance_args(n, frequency)
        h = self.height
        return h * self._vf(n) * sum(4.0**-lv for lv in range(1, h + 1))

    def range_variance(self, n: int, lo: int, hi: int) -> float:
        self._check_range(lo, hi)
        n = check_int("n", n, low=1)
        return 0.5 * self.height**2 * self._vf(n)
