r"""Power and PowerNS: least expected squared error under a fitted power law (Jia & Gong 2019).

Following Wang et al. (2020, Section IV-E): the estimates are modelled as
:math:`\tilde f_v = f_v + N(0, \sigma^2)` with the true frequencies following a
power law.  The law :math:`f_{(i)} = C i^{-s}` (:math:`C = 1/\sum_{i\le d}
i^{-s}`) is fitted by least squares in log–log space to the sorted estimates
that stand above the noise (:math:`> F^{-1}(1-1/d)\,\sigma`, about one false
positive expected); its d values form the prior, and
each value gets the posterior mean, which minimises the expected squared error:

.. math:: \hat f_v = \frac{\sum_i f_{(i)}\,\phi((\tilde f_v - f_{(i)})/\sigma)}
                          {\sum_i \phi((\tilde f_v - f_{(i)})/\sigma)}.

The prior is binned on a log grid (≤ 512 distinct values with multiplicities) so
the cost is O(512·d).  PowerNS applies Norm-Sub afterwards.
"""

from __future__ import annotations

import numpy as np

from .base import FloatArray, need_sigma
from .clipping import cut_threshold
from .normalize import norm_sub

__all__ = ["fit_power_law", "power", "power_ns"]

_GRID = np.linspace(0.05, 4.0, 400)


def fit_power_law(est: FloatArray, sigma: float) -> tuple[float, FloatArray]:
    """Exponent s and the d prior frequencies C·i^{-s}, fitted to the estimates above noise."""
    d = est.size
    ranks = np.arange(1, d + 1, dtype=np.float64)
    top = np.sort(est)[::-1]
    use = top > cut_threshold(d, sigma, alpha=1.0)
    if use.sum() < 2:  # nothing stands out of the noise: fall back to the flattest law
        s = float(_GRID[0])
    else:
        logr, logf = np.log(ranks[use]), np.log(top[use])
        best, s = np.inf, float(_GRID[0])
        for cand in _GRID:
            law = -cand * np.log(ranks)
            logc = -np.log(np.exp(law).sum())
            err = float(np.sum((logf - (logc - cand * logr)) ** 2))
            if err < best:
                best, s = err, float(cand)
    law = ranks ** -s
    return s, law / law.sum()


def power(est: FloatArray, *, variance: float | None) -> FloatArray:
    """Posterior mean of each frequency under the fitted power-law prior."""
    sigma = need_sigma("power", variance)
    _, prior = fit_power_law(est, sigma)
    # Bin the prior on a log grid: value = mean of the bin, weight = multiplicity.
    edges = np.geomspace(prior.min(), prior.max() * (1 + 1e-12), 513)
    idx = np.clip(np.searchsorted(edges, prior, side="right") - 1, 0, 511)
    weight = np.bincount(idx, minlength=512).astype(np.float64)
    total = np.bincount(idx, weights=prior, minlength=512)
    keep = weight > 0
    values, weight = total[keep] / weight[keep], weight[keep]
    z = (est[:, None] - values[None, :]) / sigma
    # Subtract the row maximum of the log-likelihood for numerical stability.
    logw = np.log(weight)[None, :] - 0.5 * z**2
    logw -= logw.max(axis=1, keepdims=True)
    w = np.exp(logw)
    out: FloatArray = (w @ values) / w.sum(axis=1)
    return out


def power_ns(est: FloatArray, *, variance: float | None) -> FloatArray:
    """Power followed by Norm-Sub."""
    return norm_sub(power(est, variance=variance))
