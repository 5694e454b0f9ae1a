"""Hook: the fleet's per-device daily ε budget at issuance (issue #28, fleet budget).

The issuer does not issue tokens beyond a device's daily ε budget.  The budget itself
(the fleet policy ``budget: {epsilon_per_day: …}`` and what one report of a collection
spends, memoization included) is computed in the shared layer by the fleet-budget work;
until that lands, :func:`daily_epsilon_hook` answers None and no ε is counted here.  When
it exists, this hook calls it and the issuer keeps ``P pp:eps:{device}:{day}`` (ε
granted per device and UTC day, with a TTL) next to the quota counts.
"""

from __future__ import annotations

from ldpcore.collection import CollectionSpec

__all__ = ["daily_epsilon_hook"]


def daily_epsilon_hook(spec: CollectionSpec, tokens: int) -> tuple[float, float] | None:
    """(ε these ``tokens`` would spend, the fleet's ε per device per day), or None while
    the shared fleet budget is not available (then the issuer counts no ε)."""
    try:
        from ldpstream import budget  # type: ignore[attr-defined]  # the fleet-budget work
    except ImportError:
        return None
    fn = getattr(budget, "issuer_epsilon", None)
    if fn is None:
        return None
    result: tuple[float, float] | None = fn(spec, tokens)
    return result
