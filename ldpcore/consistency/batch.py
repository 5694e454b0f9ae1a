r"""The consistency methods vectorised over many estimate vectors at once (rows of a matrix).

``postprocess_rows(est, method, ...)`` applies a method of
:func:`ldpcore.postprocess` to every row of an (R, d) matrix; the parametric
bootstrap of :mod:`ldpcore.intervals` post-processes hundreds of simulated
estimate vectors per answer, so the loops of the one-vector versions (Power's
exponent grid, MLE-Apx's support iteration, the sorts) run over all rows at once.
Each row gets the same result as the one-vector method (up to rounding; the Power
fit uses the expanded least-squares sums).

>>> import numpy as np
>>> est = np.array([[0.5, 0.3, 0.25, -0.05], [0.7, 0.1, 0.1, 0.1]])
>>> postprocess_rows(est, "norm-sub").round(3).tolist()
[[0.483, 0.283, 0.233, 0.0], [0.7, 0.1, 0.1, 0.1]]
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache

import numpy as np

from ..errors import ParameterError
from .base import FloatArray, need_sigma
from .clipping import cut_threshold
from .power import _GRID

__all__ = ["ROW_METHODS", "postprocess_rows", "simplex_projection_rows", "power_rows"]

ROW_METHODS: tuple[str, ...] = ("base", "base-pos", "post-pos", "base-cut", "norm", "norm-mul",
                                "norm-sub", "norm-cut", "mle-apx", "power", "power-ns")


def simplex_projection_rows(est: FloatArray) -> FloatArray:
    """Norm-Sub of every row: the Euclidean projection onto the probability simplex."""
    r, d = est.shape
    u = -np.sort(-est, axis=1)
    css = np.cumsum(u, axis=1) - 1.0
    j = np.arange(1, d + 1, dtype=np.float64)
    ok = u - css / j > 0
    rho = d - 1 - np.argmax(ok[:, ::-1], axis=1)
    theta = css[np.arange(r), rho] / (rho + 1)
    out: FloatArray = np.maximum(est - theta[:, None], 0.0)
    return out


def _norm_mul_rows(est: FloatArray) -> FloatArray:
    pos = np.maximum(est, 0.0)
    total = pos.sum(axis=1, keepdims=True)
    uniform = np.full_like(est, 1.0 / est.shape[1])
    out: FloatArray = np.where(total > 0, pos / np.where(total > 0, total, 1.0), uniform)
    return out


def _norm_cut_rows(est: FloatArray) -> FloatArray:
    pos = np.maximum(est, 0.0)
    order = np.argsort(-est, axis=1, kind="stable")
    ranked = np.take_along_axis(est, order, axis=1)
    kept = np.logical_and.accumulate((np.cumsum(ranked, axis=1) <= 1.0) & (ranked > 0), axis=1)
    cut = np.zeros_like(est)
    np.put_along_axis(cut, order, np.where(kept, ranked, 0.0), axis=1)
    out: FloatArray = np.where(pos.sum(axis=1, keepdims=True) <= 1.0, pos, cut)
    return out


def _mle_apx_rows(est: FloatArray, a: float, b: float) -> FloatArray:
    r, d = est.shape
    support = np.ones((r, d), dtype=bool)
    out = np.zeros_like(est)
    todo = np.arange(r)
    for _ in range(d):
        e, s = est[todo], support[todo]
        x = ((np.where(s, e, 0.0).sum(axis=1) - 1.0) / (s.sum(axis=1) * a + b))[:, None]
        f = (e - a * x) / (1.0 + b * x)
        negative = s & (f < 0)
        done = ~negative.any(axis=1)
        out[todo[done]] = np.where(s[done], f[done], 0.0)
        support[todo] = s & ~negative
        todo = todo[~done]
        if not todo.size:
            return out
    out[todo] = 0.0  # pragma: no cover - the largest estimate always stays
    out[todo, np.argmax(est[todo], axis=1)] = 1.0  # pragma: no cover
    return out


def _fit_exponents(est: FloatArray, sigma: float) -> FloatArray:
    """The power-law exponent of every row (least squares in log–log space, as in Power)."""
    d = est.shape[1]
    logr = np.log(np.arange(1, d + 1, dtype=np.float64))
    top = -np.sort(-est, axis=1)
    use = top > cut_threshold(d, sigma, alpha=1.0)
    w = use.astype(np.float64)
    logf = np.log(np.where(use, top, 1.0))
    s0, s1, s2 = w.sum(axis=1), (w * logf).sum(axis=1), (w * logf**2).sum(axis=1)
    t1, t2, x = w @ logr, w @ logr**2, (w * logf) @ logr
    law = -_GRID[:, None] * logr[None, :]
    big = law.max(axis=1, keepdims=True)
    logc = -(big[:, 0] + np.log(np.exp(law - big).sum(axis=1)))  # (G,)
    s, c = _GRID[None, :], logc[None, :]
    # sum_i w_i (log f_i - log C + s log i)^2, expanded
    err = (s2[:, None] + c**2 * s0[:, None] + s**2 * t2[:, None] - 2 * c * s1[:, None]
           + 2 * s * x[:, None] - 2 * s * c * t1[:, None])
    out: FloatArray = np.where(s0 >= 2, _GRID[np.argmin(err, axis=1)], _GRID[0])
    return out


@lru_cache(maxsize=4096)
def _prior_atoms(d: int, s: float) -> tuple[FloatArray, FloatArray]:
    """The power-law prior C·i^{-s} binned on Power's log grid: (values, log multiplicities)."""
    law = np.arange(1, d + 1, dtype=np.float64) ** -s
    prior = law / law.sum()
    edges = np.geomspace(prior.min(), prior.max() * (1 + 1e-12), 513)
    idx = np.clip(np.searchsorted(edges, prior, side="right") - 1, 0, 511)
    weight = np.bincount(idx, minlength=512).astype(np.float64)
    total = np.bincount(idx, weights=prior, minlength=512)
    keep = weight > 0
    return total[keep] / weight[keep], np.log(weight[keep])


def power_rows(est: FloatArray, *, variance: float | None) -> FloatArray:
    """Power (posterior mean under the fitted power-law prior) of every row.

    Rows are grouped by their fitted exponent, so each group's kernel has that prior's
    atoms only (no padding to the widest prior); the log-weights are formed in one buffer
    in place, and the posterior's two sums are a matrix product and a sum over it.
    """
    sigma = need_sigma("power", variance)
    r, d = est.shape
    exps = _fit_exponents(est, sigma)
    uniq, which = np.unique(exps, return_inverse=True)
    out = np.empty_like(est)
    half = -0.5 / sigma**2
    for g, s in enumerate(uniq):
        values, logw = _prior_atoms(d, float(s))
        rows = np.flatnonzero(which == g)
        step = max(1, (1 << 21) // (d * values.size))
        for start in range(0, rows.size, step):
            part = rows[start:start + step]
            # log w_k - (x - v_k)^2 / (2 sigma^2), less its maximum over k (stability).
            lw = np.subtract(est[part][:, :, None], values)
            np.square(lw, out=lw)
            lw *= half
            lw += logw
            lw -= lw.max(axis=2, keepdims=True)
            np.exp(lw, out=lw)
            out[part] = (lw @ values) / lw.sum(axis=2)
    return out


_ROWS_OF_ESTIMATES_ONLY: dict[str, Callable[[FloatArray], FloatArray]] = {
    "norm-mul": _norm_mul_rows, "norm-sub": simplex_projection_rows, "norm-cut": _norm_cut_rows}
"""The row methods (other than the one-line ones) that need nothing but the rows."""


def postprocess_rows(est: FloatArray, method: str, *, variance: float | None = None,
                     variance_slope: float = 0.0, alpha: float = 2.0) -> FloatArray:
    """Apply ``method`` (one of :data:`ROW_METHODS`) to every row of an (R, d) matrix.

    ``post-pos`` returns the rows unchanged (its clipping is per query answer);
    the other parameters are those of :func:`ldpcore.postprocess`.
    """
    arr = np.asarray(est, dtype=np.float64)
    if arr.ndim != 2 or arr.shape[1] < 2:
        raise ParameterError("est must be a 2-D array of shape (R, d) with d >= 2")
    if method in ("base", "post-pos"):
        return arr.copy()
    if method == "base-pos":
        return np.maximum(arr, 0.0)
    if method == "base-cut":
        t = cut_threshold(arr.shape[1], need_sigma("base-cut", variance), alpha)
        return np.where(arr >= t, arr, 0.0)
    if method == "norm":
        out: FloatArray = arr + (1.0 - arr.sum(axis=1, keepdims=True)) / arr.shape[1]
        return out
    if method in _ROWS_OF_ESTIMATES_ONLY:
        return _ROWS_OF_ESTIMATES_ONLY[method](arr)
    if method == "mle-apx":
        a = need_sigma("mle-apx", variance) ** 2
        b = float(variance_slope)
        if not np.isfinite(b) or b < -a:
            raise ParameterError(f"variance_slope must be a finite number > -variance, "
                                 f"got {b!r}")
        return _mle_apx_rows(arr, a, b)
    if method == "power":
        return power_rows(arr, variance=variance)
    if method == "power-ns":
        return simplex_projection_rows(power_rows(arr, variance=variance))
    raise ParameterError(f"method must be one of {list(ROW_METHODS)}, got {method!r}")
