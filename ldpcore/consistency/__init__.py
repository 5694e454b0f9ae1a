"""Consistency post-processing of frequency estimates (Wang et al., NDSS 2020).

The functions are re-exported at the top level: ``ldpcore.postprocess``,
``ldpcore.subset_query``, ``ldpcore.guideline``.

Post-processing costs no privacy.  ``postprocess(est, method, ...)`` applies one
of the paper's ten methods (or ``base``, the identity); ``subset_query`` answers
set-value queries under any of them; ``guideline`` gives the paper's advice.

>>> import numpy as np, ldpcore
>>> est = np.array([0.5, 0.3, 0.25, -0.05])
>>> ldpcore.postprocess(est, "norm-sub").round(3).tolist()
[0.483, 0.283, 0.233, 0.0]
>>> float(ldpcore.subset_query(est, [3], "post-pos"))
0.0
>>> ldpcore.guideline("set")
'power-ns'
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..errors import ParameterError
from .base import FloatArray, as_estimates, need_n
from .clipping import base_cut, base_pos, post_pos
from .mle import mle_apx
from .normalize import norm, norm_cut, norm_mul, norm_sub, simplex_projection
from .power import power, power_ns

__all__ = ["METHODS", "postprocess", "subset_query", "guideline", "simplex_projection"]

METHODS: tuple[str, ...] = ("base", "base-pos", "post-pos", "base-cut", "norm", "norm-mul",
                            "norm-sub", "norm-cut", "mle-apx", "power", "power-ns")

_GUIDE = {"full": "base-cut", "single": "base-cut", "frequent": "norm", "top": "norm",
          "set": "power-ns", "subset": "power-ns"}


def guideline(task: str) -> str:
    """The paper's recommended method (Section VI) for a query task.

    ``"full"``/``"single"`` (full-domain or single-value queries) → ``base-cut``;
    ``"frequent"``/``"top"`` (the most frequent values) → ``norm``;
    ``"set"``/``"subset"`` (set-value queries) → ``power-ns``.
    """
    if task not in _GUIDE:
        raise ParameterError(f"task must be one of {sorted(_GUIDE)}, got {task!r}")
    return _GUIDE[task]


_OF_ESTIMATES_ONLY: dict[str, Callable[[FloatArray], FloatArray]] = {
    "base-pos": base_pos, "post-pos": post_pos, "norm": norm, "norm-mul": norm_mul,
    "norm-sub": norm_sub, "norm-cut": norm_cut}
"""The methods that need nothing but the estimates."""


def postprocess(estimates: Any, method: str, *, n: int | None = None,
                variance: float | None = None, **params: Any) -> FloatArray:
    """Apply a consistency method to a vector of unbiased frequency estimates.

    Parameters
    ----------
    estimates : array of shape (d,)
        Unbiased estimates (fractions), e.g. ``oracle.estimate(state)``.
    method : str
        One of :data:`METHODS`.
    n : int, optional
        Number of reports (checked where the method's model uses it: ``mle-apx``).
    variance : float, optional
        Variance of one estimate at f = 0, ``oracle.variance(n)``; needed by
        ``base-cut``, ``mle-apx``, ``power`` and ``power-ns``.
    params
        ``alpha`` for ``base-cut`` (default 2); ``variance_slope`` for ``mle-apx``
        (``oracle.variance(n, 1) - oracle.variance(n, 0)``; default 0).
    """
    est = as_estimates(estimates)
    allowed: dict[str, set[str]] = {"base-cut": {"alpha"}, "mle-apx": {"variance_slope"}}
    extra = set(params) - allowed.get(method, set())
    if method not in METHODS:
        raise ParameterError(f"method must be one of {list(METHODS)}, got {method!r}")
    if extra:
        raise ParameterError(f"unknown parameter(s) {sorted(extra)} for method {method!r}; "
                             f"allowed: {sorted(allowed.get(method, set()))}")
    if method == "base":
        return est.copy()
    if method in _OF_ESTIMATES_ONLY:
        return _OF_ESTIMATES_ONLY[method](est)
    if method == "base-cut":
        return base_cut(est, variance=variance, alpha=float(params.get("alpha", 2.0)))
    if method == "mle-apx":
        need_n(method, n)
        return mle_apx(est, variance=variance,
                       variance_slope=float(params.get("variance_slope", 0.0)))
    if method == "power":
        return power(est, variance=variance)
    return power_ns(est, variance=variance)


def subset_query(estimates: Any, indices: Sequence[int] | np.ndarray, method: str, *,
                 n: int | None = None, variance: float | None = None, **params: Any) -> float:
    """Frequency of a set of values under ``method``.

    For ``post-pos`` the raw estimates are summed and the answer clipped at 0;
    for every other method the post-processed vector is summed.
    """
    est = as_estimates(estimates)
    idx = np.asarray(indices)
    if idx.ndim != 1 or idx.dtype.kind not in "iu" and idx.size:
        raise ParameterError("indices must be a 1-D sequence of integers")
    if idx.size and (idx.min() < 0 or idx.max() >= est.size):
        raise ParameterError(f"indices must lie in [0, {est.size})")
    if idx.size != np.unique(idx).size:
        raise ParameterError("indices must be distinct")
    if method == "post-pos":
        return max(float(est[idx].sum()), 0.0)
    vec = postprocess(est, method, n=n, variance=variance, **params)
    return float(vec[idx].sum())
