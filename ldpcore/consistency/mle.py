r"""MLE-Apx: the approximate maximum-likelihood consistent estimate (Wang et al. 2020, App. B).

Each estimate is modelled as Gaussian with mean :math:`f_v` and variance
:math:`a + b f_v` (:math:`a` = the variance at f = 0, :math:`b` its slope in f).
Dropping the log-determinant term, the MLE under non-negativity and sum-to-one
solves :math:`\min \sum_v (\tilde f_v - f_v)^2/(a + b f_v)`.  The KKT conditions
give, on the support P, one common :math:`x = (\tilde f_v - f_v)/(a + b f_v)`,
hence

.. math:: x = \frac{\sum_{v\in P}\tilde f_v - 1}{|P|\,a + b}, \qquad
          f_v = \frac{\tilde f_v - a x}{1 + b x},

a hybrid of Norm-Sub (subtract :math:`ax`) and Norm-Mul (divide by
:math:`1+bx`).  Starting from P = all values, values whose solution is negative
are set to 0 and removed, until none is (at most d rounds).  With b = 0 this is
exactly Norm-Sub.
"""

from __future__ import annotations

import numpy as np

from ..errors import ParameterError
from .base import FloatArray, need_sigma

__all__ = ["mle_apx"]


def mle_apx(est: FloatArray, *, variance: float | None,
            variance_slope: float = 0.0) -> FloatArray:
    """Approximate MLE under the consistency constraints (Appendix B iteration)."""
    a = need_sigma("mle-apx", variance) ** 2
    b = float(variance_slope)
    if not np.isfinite(b) or b < -a:
        raise ParameterError(f"variance_slope must be a finite number > -variance, got {b!r}")
    support = np.ones(est.size, dtype=bool)
    out = np.zeros_like(est)
    for _ in range(est.size):
        x = (est[support].sum() - 1.0) / (support.sum() * a + b)
        f = (est - a * x) / (1.0 + b * x)
        negative = support & (f < 0)
        if not negative.any():
            out[support] = f[support]
            return out
        support &= ~negative
        if not support.any():  # pragma: no cover - the largest estimate always stays
            break
    out[np.argmax(est)] = 1.0
    return out
