"""Expectation maximisation for distributions behind a known noisy channel (SW's EM/EMS)."""

from __future__ import annotations

import numpy as np

from ..base import FloatArray

__all__ = ["sw_transition_matrix", "em_reconstruct"]

_MAX_CELLS = 1 << 23  # sub-sampling budget of the transition-matrix integral


def sw_transition_matrix(p: float, q: float, b: float, bins: int, out_bins: int) -> FloatArray:
    r"""``M[j, i]`` = P(report in output bucket j | value uniform in input bin i) for SW.

    Input bins split [0, 1]; output buckets split [-b, 1+b].  For a value v,
    :math:`P(j \mid v) = q\,w + (p - q)\,|B_j \cap [v-b, v+b]|`; the average over v in
    the bin is taken with the midpoint rule on enough sub-points that the error is far
    below sampling noise (the integrand is piecewise linear in v).
    """
    edges = np.linspace(-b, 1 + b, out_bins + 1)
    w = edges[1] - edges[0]
    sub = int(max(4, min(64, _MAX_CELLS // max(1, bins * out_bins))))
    m = np.zeros((out_bins, bins))
    # chunk over input bins to bound memory
    step = max(1, _MAX_CELLS // (sub * out_bins))
    for start in range(0, bins, step):
        stop = min(bins, start + step)
        v = ((np.arange(start * sub, stop * sub) + 0.5) / (bins * sub))[None, :]
        overlap = np.clip(np.minimum(edges[1:, None], v + b) - np.maximum(edges[:-1, None], v - b),
                          0.0, None)
        probs = q * w + (p - q) * overlap  # (out_bins, (stop-start)*sub)
        m[:, start:stop] = probs.reshape(out_bins, stop - start, sub).mean(axis=2)
    m /= m.sum(axis=0, keepdims=True)  # each column is a distribution (exact up to rounding)
    return m


def _smooth(x: FloatArray) -> FloatArray:
    # Binomial [1/4, 1/2, 1/4] smoothing (Li et al. 2020, EMS); edges keep their mass share.
    out = 0.5 * x
    out[1:] += 0.25 * x[:-1]
    out[:-1] += 0.25 * x[1:]
    out[0] += 0.25 * x[0]
    out[-1] += 0.25 * x[-1]
    return out


def _em_step(m: FloatArray, c: FloatArray, n: float, x: FloatArray,
             smoothing: bool) -> tuple[FloatArray, float]:
    """One EM (EMS) step from x, and the mean log-likelihood of x itself (same product)."""
    mx = np.maximum(m @ x, 1e-300)
    ll = float(c @ np.log(mx)) / n
    y = x * ((c / mx) @ m)  # = Mᵀ(c / Mx); as a row times M it runs 2–3× faster
    y /= y.sum()
    return (_smooth(y) if smoothing else y), ll


def em_reconstruct(m: FloatArray, counts: FloatArray, *, smoothing: bool = True,
                   tol: float = 1e-8, max_iter: int = 5000,
                   start: FloatArray | None = None, accelerate: bool = True) -> FloatArray:
    r"""Maximum-likelihood input histogram x (sums to 1) given output ``counts`` ~ M x.

    EM (Li et al. 2020, Algorithm 1): :math:`x_i \leftarrow x_i \sum_j n_j M_{ji} /
    (M x)_j`, normalised; with ``smoothing`` (EMS) each M-step is followed by binomial
    smoothing.  Stops when the mean log-likelihood per report improves by less than
    ``tol`` (EMS is not monotone in likelihood, so also when it stops improving).

    ``accelerate`` (default) runs the same map F (one EM/EMS step) with SQUAREM
    (Varadhan & Roland, *Scand. J. Stat.* 2008, scheme S3): from x, :math:`r = F(x) - x`,
    :math:`v = F(F(x)) - 2F(x) + x`, :math:`\alpha = \min(-\|r\|/\|v\|, -1)`, the
    extrapolated
    :math:`x - 2\alpha r + \alpha^2 v` (clipped at 0, renormalised) is stabilised by one
    more F and kept only if its likelihood is at least F(x)'s.  Same fixed point, 4–5×
    fewer matrix products (1,024 × 1,024 cells: 0.8 s → 0.2 s).  ``start`` (default
    uniform) is the first x: a nearby state's reconstruction converges in fewer steps.
    Plain EM's multiplicative steps cannot revive a 0, so there it is mixed with 5 % of
    the uniform; EMS's smoothing spreads mass to every neighbour at each step, so its
    start is taken nearly as is (0.1 % of the uniform): the next flush's reconstruction
    (0.1 % more reports) then stops within the stopping rule's distance of the cold one
    in a few steps instead of ~85 (tests/ldpcore/numeric/test_sw.py holds the total
    variation between them below 0.01, also along a chain of flushes).

    >>> import numpy as np
    >>> m = np.array([[0.9, 0.1], [0.1, 0.9]])
    >>> np.round(em_reconstruct(m, np.array([820.0, 180.0]), smoothing=False), 3)
    array([0.9, 0.1])
    """
    c = np.asarray(counts, dtype=float)
    n = c.sum()
    d = m.shape[1]
    x = np.full(d, 1.0 / d)
    if n <= 0:
        return x
    if start is not None and start.shape == (d,) and np.all(np.isfinite(start)):
        mix = 0.001 if smoothing else 0.05
        x = ((1.0 - mix) * np.clip(start, 0.0, None) / max(float(start.sum()), 1e-300)
             + mix * x)
    prev = -np.inf
    steps = 0
    while steps < max_iter:
        x1, ll = _em_step(m, c, n, x, smoothing)
        steps += 1
        if ll - prev < tol:
            break
        prev = ll
        if not accelerate:
            x = x1
            continue
        x2, ll1 = _em_step(m, c, n, x1, smoothing)
        r, v = x1 - x, x2 - 2 * x1 + x
        nv = float(np.linalg.norm(v))
        if nv == 0.0:
            x = x2
            continue
        alpha = min(-float(np.linalg.norm(r)) / nv, -1.0)
        xp = np.clip(x - 2 * alpha * r + alpha * alpha * v, 0.0, None)
        total = float(xp.sum())
        xp = xp / total if total > 0 and np.isfinite(total) else x2
        x3, llp = _em_step(m, c, n, xp, smoothing)
        steps += 2
        x = x3 if llp >= ll1 else x2
    return x
