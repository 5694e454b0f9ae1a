r"""Methods that enforce non-negativity only (Wang et al. 2020, Section IV-A).

* ``base-pos``: :math:`\max(\tilde f_v, 0)`.
* ``post-pos``: the vector is left as is; each *query answer* is clipped at 0
  (see :func:`ldpcore.subset_query`), so a single-value query equals
  Base-Pos while set queries keep the unbiased sum until it is negative.
* ``base-cut``: zero every estimate below :math:`T = F^{-1}(1 - \alpha/d)\,\sigma`
  (α = 2 as in the paper: about two false positives expected among the zeros).
"""

from __future__ import annotations

from statistics import NormalDist

import numpy as np

from .base import FloatArray, need_sigma

__all__ = ["base_pos", "post_pos", "base_cut", "cut_threshold"]


def base_pos(est: FloatArray) -> FloatArray:
    """Clip negative estimates to 0."""
    out: FloatArray = np.maximum(est, 0.0)
    return out


def post_pos(est: FloatArray) -> FloatArray:
    """Identity on the vector (clipping happens per query answer)."""
    return est.copy()


def cut_threshold(d: int, sigma: float, alpha: float = 2.0) -> float:
    """:math:`F^{-1}(1 - \\alpha/d)\\,\\sigma`, with α/d capped at 1/2 for tiny domains."""
    tail = min(alpha / d, 0.5)
    return NormalDist().inv_cdf(1.0 - tail) * sigma


def base_cut(est: FloatArray, *, variance: float | None, alpha: float = 2.0) -> FloatArray:
    """Zero the estimates below the sensitivity threshold."""
    t = cut_threshold(est.size, need_sigma("base-cut", variance), alpha)
    out: FloatArray = np.where(est >= t, est, 0.0)
    return out
