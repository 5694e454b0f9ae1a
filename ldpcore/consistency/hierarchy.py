r"""Consistent, non-negative estimates on a B-ary hierarchy: exact weighted least squares.

This is the problem HH-ADMM solves (lecture slides, "Improvement on HH", after Lee,
Wang & Kifer, KDD 2015): given noisy estimates :math:`y_v` of every node of a B-ary
tree over the leaves :math:`[0, B^h)`, find node values :math:`x_v` minimising

.. math:: \tfrac12 \sum_{l=1}^{h} w_l \sum_{v \in \text{level } l} (x_v - y_v)^2
          \quad\text{s.t.}\quad x_v = \sum_{u \in child(v)} x_u,\ x_{\text{leaf}} \ge 0,\
          \sum_{\text{leaves}} x = 1,\ x_{\text{leaf}} = 0 \text{ beyond } D,

with :math:`w_l = 1/\sigma_l^2` the precision of a level-l node estimate.  Rather than
ADMM (iterative, approximate) we solve it *exactly* by dynamic programming on the tree.
Let :math:`F_v(s)` be the least cost of v's subtree given :math:`x_v = s`; it is convex
and piecewise quadratic, and its conjugate's derivative :math:`s_v(\mu) =
\arg\min_{s\ge0} F_v(s) - \mu s` is convex, piecewise linear, non-decreasing:

* leaf: :math:`s(\mu) = \max(0,\ y + \mu / w_h)` (one breakpoint at :math:`-w_h y`);
* internal node: its children share one multiplier λ for the sum constraint, so their
  total is :math:`S(\lambda) = \sum_u s_u(\lambda)` (the breakpoint lists merge), and
  stationarity :math:`w_v(s - y_v) + \lambda = \mu` maps every breakpoint
  :math:`\lambda_k \mapsto \mu_k = \lambda_k + w_v (S(\lambda_k) - y_v)` and every slope
  :math:`\sigma \mapsto \sigma / (1 + w_v \sigma)`;
* root: λ₀ solves :math:`S(\lambda_0) = 1`; then top-down every node gets
  :math:`\lambda_v = \mu_v - w_v(s_v(\mu_v) - y_v)` from its parent's
  :math:`\mu_v = \lambda_{p(v)}`, and the leaves are :math:`\max(0, y + \lambda_{p}/w_h)`.

Each leaf contributes one breakpoint to every ancestor, so a level costs one row-wise
merge of D breakpoints: :math:`O(h D \log B)` time, no iteration, exact up to rounding.
Without the non-negativity constraint this reduces to the two-stage constrained
inference of Hay et al. (Cormode et al. 2019, Section 4.5) with per-level weights.
"""

from __future__ import annotations

import numpy as np

from ..errors import ParameterError
from .base import FloatArray

__all__ = ["tree_nonneg_wls"]


def _merge(m: FloatArray, ds: FloatArray, rows: int, width: int) -> tuple[FloatArray, FloatArray]:
    """Pad children rows with empty (+inf) rows and merge every B of them into one sorted row."""
    have = m.shape[0] * m.shape[1]
    need = rows * width
    if have < need:
        m = np.concatenate([m.reshape(-1), np.full(need - have, np.inf)])
        ds = np.concatenate([ds.reshape(-1), np.zeros(need - have)])
    m = m.reshape(rows, width)
    order = np.argsort(m, axis=1, kind="stable")  # B sorted runs per row: a merge
    order += (np.arange(rows) * width)[:, None]
    flat = order.reshape(-1)
    return m.reshape(-1)[flat].reshape(rows, width), ds.reshape(-1)[flat].reshape(rows, width)


def _steps(x: FloatArray) -> FloatArray:
    """``np.diff(x, axis=1, prepend=0.0)`` (the same operations, without its overhead)."""
    out = np.empty_like(x)
    out[:, :1] = x[:, :1] - 0.0
    np.subtract(x[:, 1:], x[:, :-1], out=out[:, 1:])
    return out


def _values_at_breakpoints(m: FloatArray, slope: FloatArray) -> FloatArray:
    """S at each breakpoint of a convex PL function that is 0 before its first breakpoint."""
    with np.errstate(invalid="ignore"):  # inf - inf between padding breakpoints
        gaps = m[:, 1:] - m[:, :-1]  # np.diff's operation without its overhead
    gaps = np.where(np.isfinite(gaps), gaps, 0.0)
    s = np.zeros_like(m)
    np.cumsum(slope[:, :-1] * gaps, axis=1, out=s[:, 1:])
    return s


def tree_nonneg_wls(levels: list[FloatArray], weights: list[float] | FloatArray,
                    fanout: int, domain_size: int) -> FloatArray:
    r"""Leaves of the exact non-negative, consistent weighted least-squares fit.

    Parameters
    ----------
    levels : list of arrays
        Node estimates, level 1 (B nodes) first, level h (the :math:`B^h` leaves) last.
    weights : sequence of float
        Precision :math:`w_l \ge 0` of each level's estimates (0: level unobserved);
        the leaf level's must be > 0.
    fanout : int
        B >= 2.
    domain_size : int
        D <= B^h real leaves; leaves beyond D are fixed at 0.

    Returns
    -------
    array of shape (D,)
        Non-negative leaves summing to 1; internal nodes are their block sums.

    Examples
    --------
    >>> import numpy as np
    >>> y = [np.array([0.6, 0.4]), np.array([0.5, 0.2, 0.45, -0.05])]
    >>> tree_nonneg_wls(y, [1.0, 1.0], 2, 4).round(4).tolist()
    [0.45, 0.15, 0.4, 0.0]

    (Every positive leaf has the same gradient −0.1 of the objective, the zero leaf
    +0.1 >= −0.1: the KKT conditions.)
    """
    b, h, d = int(fanout), len(levels), int(domain_size)
    w = np.asarray(weights, dtype=np.float64)
    if b < 2 or h < 1 or w.shape != (h,) or not b**h >= d >= 1:
        raise ParameterError(f"need fanout >= 2, one weight per level and 1 <= domain_size <= "
                             f"fanout**levels; got fanout={b}, {h} levels, {w.shape[0]} "
                             f"weights, domain_size={d}")
    if not (np.all(np.isfinite(w)) and np.all(w >= 0) and w[-1] > 0):
        raise ParameterError(f"weights must be finite and >= 0 with the leaf level's > 0, "
                             f"got {w.tolist()}")
    for lv, y in enumerate(levels, start=1):
        if np.shape(y) != (b**lv,):
            raise ParameterError(f"level {lv} must have {b**lv} estimates, got {np.shape(y)}")
    real = [-(-d // b ** (h - lv)) for lv in range(1, h + 1)]  # nodes touching [0, D)
    wl = float(w[-1])
    y_leaf = np.asarray(levels[-1], dtype=np.float64)[:d]
    # Leaf functions: breakpoint -w y, slope 1/w after it.
    m: FloatArray = (-wl * y_leaf).reshape(-1, 1)
    ds: FloatArray = np.full((d, 1), 1.0 / wl)
    stored: list[tuple[FloatArray, FloatArray]] = [(np.empty(0), np.empty(0))] * h
    for lv in range(h - 1, 0, -1):  # internal levels, bottom-up
        rows, width = real[lv - 1], b ** (h - lv)
        m, ds = _merge(m, ds, rows, width)
        slope = np.cumsum(ds, axis=1)
        s = _values_at_breakpoints(m, slope)
        wv, yv = float(w[lv - 1]), np.asarray(levels[lv - 1], dtype=np.float64)[:rows, None]
        finite = np.isfinite(m)
        m = np.where(finite, m + wv * (s - yv), np.inf)
        new_slope = slope / (1.0 + wv * slope)
        ds = _steps(new_slope)
        # s_v(mu) = max(0, max_k a_k + slope_k mu): a convex PL function is the max of its pieces.
        a = np.where(finite, s - new_slope * np.where(finite, m, 0.0), -np.inf)
        stored[lv - 1] = (a, new_slope)
    m, ds = _merge(m, ds, 1, m.size)
    slope = np.cumsum(ds, axis=1)[0]
    s = _values_at_breakpoints(m, slope[None, :])[0]
    m = m[0]
    k = int(np.searchsorted(np.where(np.isfinite(m), s, np.inf), 1.0, side="right")) - 1
    lam = np.array([m[k] + (1.0 - s[k]) / slope[k]])  # the root's multiplier
    for lv in range(1, h):  # top-down
        rows = real[lv - 1]
        mu = np.repeat(lam, b)[:rows]
        a, sl = stored[lv - 1]
        sv = np.maximum(0.0, (a + sl * mu[:, None]).max(axis=1))
        lam = mu - float(w[lv - 1]) * (sv - np.asarray(levels[lv - 1], dtype=np.float64)[:rows])
    mu = np.repeat(lam, b)[:d]
    leaves: FloatArray = np.maximum(0.0, y_leaf + mu / wl)
    total = leaves.sum()
    return leaves / total if total > 0 else np.full(d, 1.0 / d)
