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


def em_reconstruct(m: FloatArray, counts: FloatArray, *, smoothing: bool = True,
                   tol: float = 1e-8, max_iter: int = 5000) -> FloatArray:
    r"""Maximum-likelihood input histogram x (sums to 1) given output ``counts`` ~ M x.

    EM (Li et al. 2020, Algorithm 1): :math:`x_i \leftarrow x_i \sum_j n_j M_{ji} /
    (M x)_j`, normalised; with ``smoothing`` (EMS) each M-step is followed by binomial
    smoothing.  Stops when the mean log-likelihood per report improves by less than
    ``tol`` (EMS is not monotone in likelihood, so also when it stops improving).

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
    prev = -np.inf
    for _ in range(max_iter):
        mx = m @ x
        ll = float(c @ np.log(np.maximum(mx, 1e-300))) / n
        if ll - prev < tol:
            break
        prev = ll
        x = x * (m.T @ (c / np.maximum(mx, 1e-300)))
        x /= x.sum()
        if smoothing:
            x = _smooth(x)
    return x
