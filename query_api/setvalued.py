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
length and the reporting oracle with its (amplified) ε.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

import ldpcore
from ldpcore.capabilities import ItemsetSupport, SetItemFrequencies, SetSizeEstimates
from ldpcore.setvalued import phases

from .capabilities import require
from .errors import QueryError
from .estimates import z_value

__all__ = ["top_items", "top_itemsets", "set_sizes", "epsilon_note"]


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


def _head(oracle: Any, u: float, sizes: Any) -> dict[str, Any]:
    out = {"method": "unbiased" if sizes is None else "unbiased-truncation-corrected",
           "interval": "analytic" if sizes is None else "analytic-hull",
           "correction": u, "length": oracle.length, "inner": oracle.inner.mechanism,
           "inner_epsilon": oracle.inner_epsilon}
    if sizes is not None:
        out["note"] = ("u from the sizes phase; the interval spans the uncorrected "
                       "(a lower bound in expectation) and the corrected estimate")
    return out


def top_items(oracle: Any, state: ldpcore.State, k: int, *, labels: Sequence[str] | None,
              confidence: float, sizes: tuple[Any, ldpcore.State] | None = None,
              protocol: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The k items held by the most devices, with standard errors and intervals."""
    require(oracle, SetItemFrequencies, "top-items")
    _check_k(k)
    z = z_value(confidence)
    ans = phases.top_items(oracle, state, k, sizes)
    u = float(ans["correction"])
    items = ans["items"]
    raw = np.asarray(ans["frequencies"]) / u
    raw_se = np.asarray(ans["std_errors"]) / u
    names = [labels[i] if labels is not None else str(i) for i in items]
    rows = _rows(names, raw, raw_se, u, z)
    for row, i in zip(rows, items, strict=True):
        row["index"] = int(i)
    return {**_head(oracle, u, sizes), **epsilon_note(oracle, protocol), "k": k,
            "confidence": confidence, "items": rows,
            "of": len(oracle.candidates) if oracle.candidates is not None else oracle.domain_size}


def top_itemsets(oracle: Any, state: ldpcore.State, k: int, *, labels: Sequence[str] | None,
                 confidence: float, sizes: tuple[Any, ldpcore.State] | None = None,
                 protocol: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The k candidate itemsets held by the most devices, with intervals."""
    require(oracle, ItemsetSupport, "top-itemsets")
    _check_k(k)
    z = z_value(confidence)
    ans = phases.top_itemsets(oracle, state, k, sizes)
    u = float(ans["correction"])
    raw = np.asarray(ans["supports"]) / u
    raw_se = np.asarray(ans["std_errors"]) / u
    names = [[labels[i] if labels is not None else str(i) for i in its]
             for its in ans["itemsets"]]
    rows = _rows(names, raw, raw_se, u, z)
    for row, its in zip(rows, ans["itemsets"], strict=True):
        row["items"] = row.pop("label")
        row["indices"] = list(its)
    return {**_head(oracle, u, sizes), **epsilon_note(oracle, protocol), "k": k,
            "confidence": confidence, "itemsets": rows, "of": len(oracle.itemsets)}


def set_sizes(oracle: Any, state: ldpcore.State, *, confidence: float,
              quantile: float = 0.9, protocol: Mapping[str, Any] | None = None
              ) -> dict[str, Any]:
    """The set-size distribution (significant sizes, renormalised), the raw unbiased
    estimate of every size with its interval, and the ``quantile`` size."""
    require(oracle, SetSizeEstimates, "set-sizes")
    if not 0.0 < quantile <= 1.0:
        raise QueryError(f"q must be in (0, 1], got {quantile}", parameter="q")
    z = z_value(confidence)
    raw = oracle.raw_size_estimate(state)
    dist = oracle.size_distribution(state)
    rows = []
    for size, (f, p) in enumerate(zip(raw, dist, strict=True)):
        se = float(np.sqrt(oracle.size_variance(state.n, float(np.clip(f, 0, 1)))))
        rows.append({"size": size, "estimate": float(f), "std_error": se,
                     "ci_low": float(f) - z * se, "ci_high": float(f) + z * se,
                     "distribution": float(p)})
    return {"method": "unbiased", "interval": "analytic", "confidence": confidence,
            "sizes": rows, "quantile": quantile,
            "quantile_size": oracle.size_percentile(state, quantile),
            "max_size": oracle.max_size, "inner": oracle.inner.mechanism,
            **epsilon_note(oracle, protocol)}
