r"""Methods that enforce summing to one (Wang et al. 2020, Section IV-B/C).

* ``norm``: add :math:`(1 - \sum_v \tilde f_v)/d` to every estimate.
* ``norm-mul``: clip negatives, then rescale to sum 1.
* ``norm-sub``: :math:`\max(\tilde f_v + \delta, 0)` with δ such that the result
  sums to 1 — the Euclidean projection onto the probability simplex, i.e. the
  constrained-least-squares solution (Appendix A).  Computed exactly by the
  sort-based algorithm in :math:`O(d \log d)`.
* ``norm-cut``: if the positive estimates sum to at most 1 clip negatives;
  otherwise zero every estimate below the smallest θ with
  :math:`\sum_{\tilde f_v \ge \theta} \tilde f_v \le 1`.
"""

from __future__ import annotations

import numpy as np

from .base import FloatArray

__all__ = ["norm", "norm_mul", "norm_sub", "norm_cut", "simplex_projection"]


def norm(est: FloatArray) -> FloatArray:
    """Shift every estimate by the same amount so they sum to 1."""
    out: FloatArray = est + (1.0 - est.sum()) / est.size
    return out


def norm_mul(est: FloatArray) -> FloatArray:
    """Clip negatives to 0 and rescale to sum 1 (uniform if nothing is positive)."""
    pos = np.maximum(est, 0.0)
    total = pos.sum()
    if total <= 0:
        return np.full(est.size, 1.0 / est.size)
    out: FloatArray = pos / total
    return out


def simplex_projection(est: FloatArray) -> FloatArray:
    """Euclidean projection onto {f >= 0, sum f = 1} (Held et al. / Duchi et al. 2008)."""
    u = np.sort(est)[::-1]
    css = np.cumsum(u) - 1.0
    j = np.arange(1, est.size + 1)
    rho = int(np.nonzero(u - css / j > 0)[0][-1])
    theta = css[rho] / (rho + 1)
    out: FloatArray = np.maximum(est - theta, 0.0)
    return out


def norm_sub(est: FloatArray) -> FloatArray:
    """Norm-Sub: add one δ to all estimates and clip at 0 so the total is 1."""
    return simplex_projection(est)


def norm_cut(est: FloatArray) -> FloatArray:
    """Norm-Cut: keep the largest estimates whose total stays within 1, zero the rest."""
    pos = np.maximum(est, 0.0)
    if pos.sum() <= 1.0:
        return pos
    order = np.argsort(-est, kind="stable")
    ranked = est[order]
    # The kept set is a prefix of the positive estimates in decreasing order.
    kept = np.logical_and.accumulate((np.cumsum(ranked) <= 1.0) & (ranked > 0))
    out = np.zeros_like(est)
    idx = order[kept]
    out[idx] = est[idx]
    return out
