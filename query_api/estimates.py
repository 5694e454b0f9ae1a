"""Pure estimation layer of the query service (no I/O): state in, JSON-able answer out.

Every answer states n, ε, mechanism and method; confidence intervals come from
the analytic variance of the unbiased estimator (for biased post-processing
methods the same standard error is reported and the interval is centred on the
post-processed value — the usual plug-in interval, labelled as such).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import NormalDist
from typing import Any

import numpy as np

import ldpcore
from ldpcore.capabilities import (
    DistributionEstimates,
    FrequencyEstimates,
    HeavyHitterSearch,
    MeanEstimates,
    RangeQueries,
)
from ldpcore.numeric.base import NumericOracle

from .capabilities import require
from .errors import QueryError

__all__ = [
    "z_value",
    "frequencies",
    "subset",
    "range_answer",
    "quantiles",
    "cdf",
    "mean",
    "histogram",
    "heavy_hitters",
    "default_method",
]


def z_value(confidence: float) -> float:
    """Two-sided normal quantile for a confidence level in (0, 1)."""
    if not 0.0 < confidence < 1.0 or math.isnan(confidence):
        raise QueryError("confidence must be a number strictly between 0 and 1, "
                         f"got {confidence}", parameter="confidence")
    return NormalDist().inv_cdf((1.0 + confidence) / 2.0)


def _methods() -> tuple[str, ...]:
    return tuple(ldpcore.POSTPROCESS_METHODS)


def method_names() -> tuple[str, ...]:
    """Every value the ``method`` parameter accepts."""
    return _methods()


def default_method(task: str = "full") -> str:
    """The paper's guideline (Wang et al. 2020) for a task, via ldpcore."""
    return str(ldpcore.guideline(task))


def _check_method(method: str) -> str:
    allowed = _methods()
    if method not in allowed:
        raise QueryError(f"method must be one of {list(allowed)}, got {method!r}",
                         parameter="method")
    return method


def _postprocess(oracle: ldpcore.FrequencyOracle, raw: np.ndarray, n: int,
                 method: str) -> np.ndarray:
    if method == "base":
        return raw
    out: np.ndarray = ldpcore.postprocess(raw, method, n=n, variance=oracle.variance(n))
    return out


def _need_frequencies(oracle: Any, what: str) -> None:
    require(oracle, FrequencyEstimates, what)


def frequencies(oracle: ldpcore.FrequencyOracle, state: ldpcore.State, *,
                labels: Sequence[str] | None, method: str, confidence: float,
                top: int | None = None) -> dict[str, Any]:
    """Per-label estimate, standard error and confidence interval."""
    _need_frequencies(oracle, "frequency")
    method = _check_method(method)
    z = z_value(confidence)
    n = state.n
    raw = oracle.estimate(state)
    est = _postprocess(oracle, raw, n, method)
    clipped = np.clip(raw, 0.0, 1.0)
    se = np.sqrt([oracle.variance(n, float(f)) for f in clipped])
    order = np.argsort(-est, kind="stable") if top is not None else np.arange(est.size)
    if top is not None:
        if top < 1:
            raise QueryError(f"top must be an integer >= 1, got {top}", parameter="top")
        order = order[:top]
    names = list(labels) if labels is not None else [str(i) for i in range(est.size)]
    rows = [{"label": names[i], "index": int(i), "estimate": float(est[i]),
             "std_error": float(se[i]), "ci_low": float(est[i] - z * se[i]),
             "ci_high": float(est[i] + z * se[i])} for i in order]
    return {"method": method, "confidence": confidence, "estimates": rows,
            "sum": float(est.sum())}


def subset(oracle: ldpcore.FrequencyOracle, state: ldpcore.State, indices: Sequence[int], *,
           method: str, confidence: float) -> dict[str, Any]:
    """Frequency of a set of values (set-value query), any post-processing method."""
    _need_frequencies(oracle, "subset")
    method = _check_method(method)
    z = z_value(confidence)
    n = state.n
    raw = oracle.estimate(state)
    value = float(ldpcore.subset_query(raw, list(indices), method, n=n,
                                       variance=oracle.variance(n)))
    # Var of a sum of estimates ~ sum of variances (covariances of a frequency oracle's
    # estimates are O(1/n·d) and ignored); exact for independent-bit encodings.
    se = math.sqrt(sum(oracle.variance(n, float(np.clip(raw[i], 0, 1))) for i in indices))
    return {"method": method, "confidence": confidence, "estimate": value, "std_error": se,
            "ci_low": value - z * se, "ci_high": value + z * se}


def range_answer(oracle: Any, state: ldpcore.State, low: int, high: int, *,
                 confidence: float) -> dict[str, Any]:
    """Fraction of reports with a value in [low, high] (inclusive)."""
    require(oracle, RangeQueries, "range")
    fn = oracle.range_query
    d = oracle.domain_size
    if not 0 <= low <= high < d:
        raise QueryError(f"low and high must satisfy 0 <= low <= high < {d}, got low={low}, "
                         f"high={high}", parameter="low" if low < 0 or low > high else "high")
    z = z_value(confidence)
    value = float(fn(state, low, high))
    se = math.sqrt(float(oracle.range_variance(state.n, low, high)))
    return {"low": low, "high": high, "estimate": value, "std_error": se,
            "ci_low": value - z * se, "ci_high": value + z * se, "confidence": confidence}


def quantiles(oracle: Any, state: ldpcore.State, qs: Sequence[float]) -> dict[str, Any]:
    """Quantiles (domain indices for range oracles, values for numeric ones)."""
    if not isinstance(oracle, DistributionEstimates):
        require(oracle, RangeQueries, "quantile")
    fn = oracle.quantile
    for q in qs:
        if not 0.0 <= q <= 1.0:
            raise QueryError(f"q must be in [0, 1], got {q}", parameter="q")
    return {"quantiles": [{"q": q, "value": _num(fn(state, q))} for q in qs]}


def _num(x: Any) -> float | int:
    return int(x) if isinstance(x, (int, np.integer)) else float(x)


def cdf(oracle: Any, state: ldpcore.State) -> dict[str, Any]:
    """Cumulative distribution over the ordered domain."""
    if not isinstance(oracle, DistributionEstimates):
        require(oracle, RangeQueries, "cdf")
    fn = oracle.cdf
    values = np.asarray(fn(state), dtype=float)
    return {"cdf": values.tolist()}


def mean(oracle: Any, state: ldpcore.State, *, confidence: float) -> dict[str, Any]:
    """Mean of a numeric collection, with its analytic standard error where available."""
    require(oracle, MeanEstimates, "mean")
    fn = oracle.mean
    z = z_value(confidence)
    value = float(fn(state))
    out: dict[str, Any] = {"estimate": value, "confidence": confidence}
    se = math.sqrt(float(oracle.mean_variance(state.n)))
    out.update(std_error=se, ci_low=value - z * se, ci_high=value + z * se)
    return out


def histogram(oracle: Any, state: ldpcore.State) -> dict[str, Any]:
    """Reconstructed distribution over bins (numeric) or leaf frequencies (range)."""
    if isinstance(oracle, DistributionEstimates):
        values = np.asarray(oracle.distribution(state), dtype=float)
        return {"bins": values.tolist()}
    require(oracle, RangeQueries, "histogram")
    return {"bins": np.asarray(oracle.estimate(state), dtype=float).tolist()}


def heavy_hitters(oracle: Any, state: ldpcore.State, k: int, *,
                  labels: Sequence[str] | None, offset: int = 0) -> dict[str, Any]:
    """Top-k values: PEM's candidate search, or the top of a frequency oracle's estimates."""
    if k < 1:
        raise QueryError(f"k must be an integer >= 1, got {k}", parameter="k")
    if not isinstance(oracle, HeavyHitterSearch):
        _need_frequencies(oracle, "heavy-hitters")
    else:
        hh = oracle.heavy_hitters
        keep = oracle.keep
        if k > keep:
            raise QueryError(f"k must be at most {keep} (the candidates this collection "
                             f"keeps), got {k}", parameter="k")
        rows = [{"value": _num(r[0]) + offset, "estimate": float(r[1]),
                 "std_error": float(r[2])} for r in hh(state, k)]
        return {"k": k, "heavy_hitters": rows}
    est = oracle.estimate(state)
    order = np.argsort(-est, kind="stable")[:k]
    names = list(labels) if labels is not None else [str(i) for i in range(est.size)]
    rows = [{"value": names[i], "index": int(i), "estimate": float(est[i]),
             "std_error": oracle.std_error(state.n, float(np.clip(est[i], 0, 1)))}
            for i in order]
    return {"k": k, "heavy_hitters": rows}


def numeric_summary(oracle: Any, state: ldpcore.State, *,
                    confidence: float) -> dict[str, Any]:
    """What the live view shows of a numeric collection: the reconstructed histogram
    (bins labelled by their centres), its CDF, and the mean with its interval."""
    m = mean(oracle, state, confidence=confidence)
    row = {"label": "mean", "index": 0, "estimate": m["estimate"],
           "std_error": m.get("std_error", 0.0), "ci_low": m.get("ci_low", m["estimate"]),
           "ci_high": m.get("ci_high", m["estimate"])}
    if not isinstance(oracle, DistributionEstimates) or not isinstance(oracle, NumericOracle):
        return {"method": "unbiased", "estimates": [row], "mean": m}
    values = np.asarray(oracle.distribution(state), dtype=float)
    centers = oracle.bin_centers()
    rows = [{"label": f"{c:.4g}", "index": i, "estimate": float(v), "std_error": 0.0,
             "ci_low": float(v), "ci_high": float(v)}
            for i, (c, v) in enumerate(zip(centers, values, strict=True))]
    method = "ems" if getattr(oracle, "smoothing", True) else "em"
    return {"method": method, "estimates": rows, "cdf": np.cumsum(values).tolist(),
            "mean": m}


def heavy_hitter_rows(oracle: Any, state: ldpcore.State, k: int, *, confidence: float,
                      offset: int = 0) -> dict[str, Any]:
    """The live view of a heavy-hitter collection: its top k as labelled rows."""
    z = z_value(confidence)
    keep = oracle.keep if isinstance(oracle, HeavyHitterSearch) else k
    hh = heavy_hitters(oracle, state, min(k, keep), labels=None,
                       offset=offset)["heavy_hitters"]
    rows = [{"label": str(r["value"]), "index": i, "estimate": r["estimate"],
             "std_error": r["std_error"], "ci_low": r["estimate"] - z * r["std_error"],
             "ci_high": r["estimate"] + z * r["std_error"]} for i, r in enumerate(hh)]
    return {"method": oracle.mechanism, "estimates": rows}
