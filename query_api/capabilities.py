"""Which routes a collection answers, from its mechanism's capabilities (``isinstance``).

A route a collection cannot answer is a 409 that names the mechanisms that can and
the routes this collection does answer.
"""

from __future__ import annotations

from typing import Any

from ldpcore.capabilities import (
    AttributeEstimates,
    DistributionEstimates,
    FrequencyEstimates,
    HeavyHitterSearch,
    ItemsetSupport,
    MeanEstimates,
    RangeQueries,
    SetItemFrequencies,
    SetSizeEstimates,
)
from ldpcore.collection import CollectionSpec
from ldpcore.registry import mechanisms_with, oracle_class

from .errors import Unsupported

__all__ = ["queries_of", "require", "routes_of", "ROUTES"]

ROUTES: dict[type, tuple[str, ...]] = {
    FrequencyEstimates: ("frequencies", "subset", "heavy-hitters"),
    RangeQueries: ("range", "quantiles", "cdf", "histogram"),
    MeanEstimates: ("mean",),
    DistributionEstimates: ("quantiles", "cdf", "histogram"),
    HeavyHitterSearch: ("heavy-hitters",),
    AttributeEstimates: ("attributes",),
    SetItemFrequencies: ("top-items",),
    ItemsetSupport: ("top-itemsets",),
    SetSizeEstimates: ("set-sizes",),
}
"""Capability → the estimate routes it serves."""


def routes_of(cls: type) -> list[str]:
    return sorted({r for cap, routes in ROUTES.items() if issubclass(cls, cap) for r in routes})


def queries_of(spec: CollectionSpec) -> list[str]:
    """The estimate routes this collection answers."""
    cls = oracle_class(spec.oracle_spec["mechanism"])
    return routes_of(cls) if isinstance(cls, type) else []


def require(oracle: Any, capability: type, what: str) -> None:
    """Raise :class:`Unsupported` (409) unless ``oracle`` has ``capability``."""
    if isinstance(oracle, capability):
        return
    names = ", ".join(sorted(mechanisms_with(capability))) or "none in this build"
    instead = routes_of(type(oracle))
    hint = (f"; this collection answers /{', /'.join(instead)}" if instead else "")
    raise Unsupported(f"{what} queries need a collection whose mechanism supports them "
                      f"({names}); this one uses {oracle.mechanism!r}{hint}")
