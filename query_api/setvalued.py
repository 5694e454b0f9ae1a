"""Pure estimation layer of set-valued collections (no I/O): top items, top itemsets, sizes.

Item frequencies of a ``ps`` collection are the fraction of devices whose set
holds the item; they do not sum to 1, so the answers are the unbiased
estimates with analytic normal intervals (sum-to-one post-processing does not
apply).  In the ``frequencies`` phase of an SVIM/SVSM group the estimates carry
SVIM's truncation correction u, estimated from the group's ``sizes`` phase
(:func:`ldpcore.setvalued.protocols.truncation_correction`).  Truncation only
under-counts, so the uncorrected estimate is a lower bound in expectation; as
the correction is itself estimated, the interval is the hull of the uncorrected
and the corrected normal intervals (``interval: "analytic-hull"``).

Every answer states the ε a device spends (``epsilon_per_device``: the group's
``epsilon_total`` for a protocol phase, else the collection's ε), the padding
length and the reporting oracle with its (amplified) ε, and **what it estimates**:
``estimand`` (a code) and ``estimand_text`` (in words), see :func:`estimand`.  A device
whose set holds more than the padding length l items reports each of them with
probability 1/|set| instead of 1/l, so without a sizes phase the estimate is of
*truncated* holders (each such device counts l/|set| per item); ``under_count`` says so.
Standard errors use the effective sample size ``n_effective`` (memoized reports over
several windows, docs/longitudinal.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

import ldpcore
from ldpcore.capabilities import ItemsetSupport, SetItemFrequencies, SetSizeEstimates
from ldpcore.setvalued import phases

from .capabilities import require
from .confidence import z_value
from .errors import QueryError
from .parts import shared, state_digest

__all__ = ["top_items", "top_itemsets", "set_sizes", "epsilon_note", "estimand",
           "subset_answer"]

ESTIMANDS = {
    "holders": "the fraction of devices whose set holds the {what}",
    "holders-truncated": ("the fraction of devices whose set holds the {what}, where a device "
                          "whose set has more than l = {l} items counts l/|set| (exact when no "
                          "set is longer than l; an under-count of the {what}s in longer sets)"),
    "items-per-device": ("the mean number of the given items a device's set holds (the sum of "
                         "their frequencies), a device whose set has more than l = {l} items "
                         "counting l/|set| per item"),
    "set-sizes": ("the fraction of devices whose set holds each number of candidate {what}s "
                  "(capped at {l})"),
}
"""What a set-valued answer estimates: ``estimand`` codes and their words."""


def estimand(code: str, *, length: int, itemsets: bool = False,
             correction: float | None = None) -> dict[str, Any]:
    """The ``estimand``, ``estimand_text`` and ``under_count`` fields of an answer."""
    what = "itemset" if itemsets else "item"
    out: dict[str, Any] = {"estimand": code,
                           "estimand_text": ESTIMANDS[code].format(what=what, l=length)}
    if code == "holders":
        out["under_count"] = {
            "length": length, "correction": correction,
            "how": "sets longer than l are under-counted by the sizes phase's factor u; the "
                   "interval spans the uncorrected and the corrected estimate"}
    elif code in ("holders-truncated", "items-per-device"):
        out["under_count"] = {
            "length": length, "correction": None,
            "how": f"each {what} of a set longer than l = {length} counts l/|set|; the "
                   "interval covers this truncated quantity (a sizes phase — an svim "
                   "group — estimates the correction)"}
    return out


def epsilon_note(oracle: Any, protocol: Mapping[str, Any] | None) -> dict[str, Any]:
    """What a device spends: ``epsilon_per_device`` and how it is accounted."""
    if protocol is None:
        return {"epsilon_per_device": oracle.epsilon,
                "epsilon_accounting": "one report per device per window (memoized)"}
    how = ("each device reports to both phases at half the total"
           if protocol["name"] == "ldpminer" else
           "each device takes part in one phase of the group (fractions "
           f"{protocol.get('fractions')})")
    return {"epsilon_per_device": protocol["epsilon_total"], "epsilon_accounting": how,
            "protocol": dict(protocol)}


def _check_k(k: int) -> None:
    if k < 1:
        raise QueryError(f"k must be an integer >= 1, got {k}", parameter="k")


def _rows(names: Sequence[Any], raw: np.ndarray, raw_se: np.ndarray, u: float,
          z: float) -> list[dict[str, Any]]:
    rows = []
    for name, f, se in zip(names, raw, raw_se, strict=True):
        est, est_se = float(f) * u, float(se) * u
        rows.append({"label": name, "estimate": est, "std_error": est_se,
                     "uncorrected": float(f),
                     "ci_low": min(float(f) - z * float(se), est - z * est_se),
                     "ci_high": max(float(f) + z * float(se), est + z * est_se)})
    return rows


def _head(oracle: Any, u: float, sizes: Any, *, itemsets: bool = False) -> dict[str, Any]:
    out = {"method": "unbiased" if sizes is None else "unbiased-truncation-corrected",
           "interval": "analytic" if sizes is None else "analytic-hull",
           "correction": u, "length": oracle.length, "inner": oracle.inner.mechanism,
           "inner_epsilon": oracle.inner_epsilon,
           **estimand("holders-truncated" if sizes is None else "holders",
                      length=oracle.length, itemsets=itemsets,
                      correction=None if sizes is None else u)}
    if sizes is not None:
        out["note"] = ("u from the sizes phase; the interval spans the uncorrected "
                       "(a lower bound in expectation) and the corrected estimate")
    return out


def _widen(state: ldpcore.State, n_effective: float | None) -> float:
    """Factor from n to the effective sample size on a standard error (1 without it)."""
    if n_effective is None or n_effective >= state.n:
        return 1.0
    return float(np.sqrt(state.n / max(1.0, n_effective)))


def _ranked_rows(ans: Mapping[str, Any], values: str, names: Sequence[Any],
                 state: ldpcore.State, n_effective: float | None,
                 z: float) -> tuple[float, list[dict[str, Any]]]:
    """The correction u and the rows of a ranked phases answer (``ans[values]`` and its
    standard errors, uncorrected by u, errors widened to the effective sample size)."""
    u = float(ans["correction"])
    raw = np.asarray(ans[values]) / u
    raw_se = np.asarray(ans["std_errors"]) / u * _widen(state, n_effective)
    return u, _rows(names, raw, raw_se, u, z)


def _top_k(find: Any, capability: type, oracle: Any, state: ldpcore.State, k: int,
           sizes: tuple[Any, ldpcore.State] | None,
           confidence: float) -> tuple[dict[str, Any], float]:
    """A top-k route's checks (the capability, k, the confidence), then its answer by
    ``find`` (``phases.top_items``: route ``top-items``) and the z of its intervals."""
    require(oracle, capability, find.__name__.replace("_", "-"))
    _check_k(k)
    z = z_value(confidence)
    # Level-free: shared by the answers of one state at every level (read, not changed).
    phase = () if sizes is None else (sizes[0].fingerprint, state_digest(sizes[1]))
    return shared(find.__name__, oracle, state, (k, *phase),
                  lambda: find(oracle, state, k, sizes)), z


def top_items(oracle: Any, state: ldpcore.State, k: int, *, labels: Sequence[str] | None,
              confidence: float, sizes: tuple[Any, ldpcore.State] | None = None,
              protocol: Mapping[str, Any] | None = None,
              n_effective: float | None = None) -> dict[str, Any]:
    """The k items held by the most devices, with standard errors and intervals."""
    ans, z = _top_k(phases.top_items, SetItemFrequencies, oracle, state, k, sizes, confidence)
    items = ans["items"]
    names = [labels[i] if labels is not None else str(i) for i in items]
    u, rows = _ranked_rows(ans, "frequencies", names, state, n_effective, z)
    for row, i in zip(rows, items, strict=True):
        row["index"] = int(i)
    return {**_head(oracle, u, sizes), **epsilon_note(oracle, protocol), "k": k,
            "confidence": confidence, "items": rows,
            "of": len(oracle.candidates) if oracle.candidates is not None else oracle.domain_size}


def top_itemsets(oracle: Any, state: ldpcore.State, k: int, *, labels: Sequence[str] | None,
                 confidence: float, sizes: tuple[Any, ldpcore.State] | None = None,
                 protocol: Mapping[str, Any] | None = None,
                 n_effective: float | None = None) -> dict[str, Any]:
    """The k candidate itemsets held by the most devices, with intervals."""
    ans, z = _top_k(phases.top_itemsets, ItemsetSupport, oracle, state, k, sizes, confidence)
    names = [[labels[i] if labels is not None else str(i) for i in its]
             for its in ans["itemsets"]]
    u, rows = _ranked_rows(ans, "supports", names, state, n_effective, z)
    for row, its in zip(rows, ans["itemsets"], strict=True):
        row["items"] = row.pop("label")
        row["indices"] = list(its)
    return {**_head(oracle, u, sizes, itemsets=True), **epsilon_note(oracle, protocol),
            "k": k, "confidence": confidence, "itemsets": rows, "of": len(oracle.itemsets)}


def set_sizes(oracle: Any, state: ldpcore.State, *, confidence: float,
              quantile: float = 0.9, protocol: Mapping[str, Any] | None = None,
              n_effective: float | None = None) -> dict[str, Any]:
    """The set-size distribution (significant sizes, renormalised), the raw unbiased
    estimate of every size with its interval, and the ``quantile`` size."""
    require(oracle, SetSizeEstimates, "set-sizes")
    if not 0.0 < quantile <= 1.0:
        raise QueryError(f"q must be in (0, 1], got {quantile}", parameter="q")
    z = z_value(confidence)
    raw = oracle.raw_size_estimate(state)
    dist = oracle.size_distribution(state)
    rows = []
    widen = _widen(state, n_effective)
    for size, (f, p) in enumerate(zip(raw, dist, strict=True)):
        se = widen * float(np.sqrt(oracle.size_variance(state.n, float(np.clip(f, 0, 1)))))
        rows.append({"size": size, "estimate": float(f), "std_error": se,
                     "ci_low": float(f) - z * se, "ci_high": float(f) + z * se,
                     "distribution": float(p)})
    return {"method": "unbiased", "interval": "analytic", "confidence": confidence,
            "sizes": rows, "quantile": quantile,
            "quantile_size": oracle.size_percentile(state, quantile),
            "max_size": oracle.max_size, "inner": oracle.inner.mechanism,
            **estimand("set-sizes", length=oracle.max_size,
                       itemsets=oracle.itemsets is not None),
            **epsilon_note(oracle, protocol)}


def subset_answer(oracle: Any, state: ldpcore.State, indices: Sequence[int], *,
                  method: str, confidence: float,
                  n_effective: float | None = None) -> dict[str, Any]:
    """``/subset`` of a ``ps`` collection: the sum of the items' frequencies (the mean number
    of them per device) with its analytic interval (no simulation:
    :meth:`~ldpcore.setvalued.ps.PaddingSampling.subset_std_error`); ``base-pos`` clips
    the estimate at 0."""
    z = z_value(confidence)
    n = int(state.n if n_effective is None else max(1.0, min(state.n, n_effective)))
    est = float(oracle.estimate(state)[list(indices)].sum())
    se = float(oracle.subset_std_error(state, list(indices), n=n))
    lo, hi = est - z * se, est + z * se
    if method == "base-pos":
        est, lo, hi = max(est, 0.0), max(lo, 0.0), max(hi, 0.0)
    return {"method": method, "confidence": confidence, "interval": "analytic",
            "replicates": 0, "estimate": est, "std_error": se, "ci_low": lo, "ci_high": hi,
            **estimand("items-per-device", length=oracle.length)}
