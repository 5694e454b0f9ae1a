"""The fleet policy in the catalogue: the per-device daily privacy budget.

The policy lives in Redis beside the collections (``P fleet``: JSON ``{"budget":
{"epsilon_per_day": 8, "values_per_day": 1}}``, :attr:`ldpstream.storage.Keys.fleet`).
It is set by a collections file's top-level ``budget:`` (registered by the aggregator at
start-up) or by ``PUT /v1/fleet`` (admin).  The maths is :mod:`ldpcore.budget`; this
module reads and writes the policy and builds what ``GET /v1/fleet`` and every answer
state.  A token issuer reads the same key (:func:`read_budget`) and charges
:func:`ldpcore.budget.token_charge` per token.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from ldpcore.budget import (
    FleetBudget,
    check_collection,
    collection_daily_spend,
    device_daily_spend,
    epsilon_per_report,
    reports_per_day,
)
from ldpcore.collection import CollectionSpec

from .storage import DEFAULT_PREFIX, Keys

__all__ = ["parse_policy", "policy_json", "read_budget", "write_budget", "check_fleet",
           "collection_budget", "fleet_summary", "answer_budget"]


def parse_policy(raw: Any) -> FleetBudget:
    """The budget of a stored policy (bytes/str JSON, or None when none is stored)."""
    if raw is None:
        return FleetBudget()
    text = raw.decode() if isinstance(raw, bytes) else str(raw)
    return FleetBudget.from_dict(json.loads(text).get("budget"))


def policy_json(budget: FleetBudget) -> str:
    return json.dumps({"budget": budget.to_dict() if budget.epsilon_per_day is not None
                       else None}, sort_keys=True)


def read_budget(redis: Any, prefix: str = DEFAULT_PREFIX) -> FleetBudget:
    """The fleet's budget from Redis (sync client); no budget when none is set."""
    return parse_policy(redis.get(Keys(prefix).fleet))


def write_budget(redis: Any, budget: FleetBudget, prefix: str = DEFAULT_PREFIX) -> None:
    redis.set(Keys(prefix).fleet, policy_json(budget))


def check_fleet(specs: Iterable[CollectionSpec], budget: FleetBudget) -> None:
    """Raise :class:`ldpcore.budget.BudgetError` naming the first collection one report of
    which alone exceeds ``budget``."""
    for spec in specs:
        check_collection(spec, budget)


def collection_budget(spec: CollectionSpec, budget: FleetBudget) -> dict[str, Any]:
    """What one device spends on ``spec`` (per report, per day), for ``GET /v1/fleet``."""
    return {"id": spec.id, "memoization": spec.memoization,
            "epsilon": float(spec.oracle_spec["epsilon"]),
            "epsilon_per_report": round(epsilon_per_report(spec), 6),
            "reports_per_day": reports_per_day(spec),
            "epsilon_per_day": round(collection_daily_spend(
                spec, values_per_day=budget.values_per_day), 6)}


def fleet_summary(specs: list[CollectionSpec], budget: FleetBudget,
                  shown: set[str] | None = None) -> dict[str, Any]:
    """The body of ``GET /v1/fleet``: the budget, what one device demands and can spend
    per day (over every collection), and the collections in ``shown`` (default all)."""
    demand = device_daily_spend(specs, values_per_day=budget.values_per_day)
    return {
        "budget": budget.to_dict() if budget.epsilon_per_day is not None else None,
        "device_epsilon_per_day": round(budget.can_spend(demand), 6),
        "demand_epsilon_per_day": round(demand, 6),
        "within_budget": budget.epsilon_per_day is None or demand <= budget.epsilon_per_day,
        "day": "UTC",
        "composition": "basic (ε adds up across reports and collections)",
        "enforced_by": "each device's ledger (SDK) stops reporting once the day's budget "
                       "is spent; a token issuer charges every token against it",
        "collections": [collection_budget(s, budget) for s in specs
                        if shown is None or s.id in shown],
    }


def answer_budget(spec: CollectionSpec, summary: dict[str, Any]) -> dict[str, Any]:
    """The ``budget`` object every answer carries: the fleet's budget, what one device can
    spend per day over the fleet, and on this collection."""
    budget = summary["budget"]
    values = budget["values_per_day"] if budget else 1
    return {"epsilon_per_day": budget["epsilon_per_day"] if budget else None,
            "device_epsilon_per_day": summary["device_epsilon_per_day"],
            "collection_epsilon_per_day": round(collection_daily_spend(
                spec, values_per_day=values), 6)}
