"""``/v1/fleet``: the fleet's per-device daily privacy budget and what each collection costs.

``GET`` (a read route) states the budget, what one device demands and can spend per day
over every collection, and each readable collection's share (:mod:`ldpstream.fleet`);
``PUT`` (admin) sets or removes the budget, refusing one that a registered collection's
single report would exceed.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Request

from ldpcore.budget import BudgetError, FleetBudget
from ldpstream.fleet import check_fleet

from ..access import AccessDep, ReaderDep
from ..deps import ServiceDep, require_admin
from ..errors import QueryError
from ..schemas import errors

router = APIRouter(prefix="/v1/fleet", tags=["fleet"])


@router.get("", response_model=None, responses=errors(503))
async def get_fleet(svc: ServiceDep, reader: ReaderDep, access: AccessDep) -> dict[str, Any]:
    """The budget (``epsilon_per_day`` per device, null: none), what one device can spend
    per day (``device_epsilon_per_day``: the collections' sum, capped by the budget its
    ledger enforces) and each collection's ε per report and per day."""
    budget, specs, summary = await svc.call(svc.fleet.current())
    private = await svc.call(access.private())
    shown = {s.id for s in specs if reader.may_read(s.id, s.id in private)}
    out = dict(summary)
    out["collections"] = [c for c in summary["collections"] if c["id"] in shown]
    return out


@router.put("", dependencies=[Depends(require_admin)], response_model=None,
            responses=errors(400, 401, 403, 503),
            openapi_extra={"requestBody": {"required": True, "content": {
                "application/json": {"schema": {"type": "object"}}}}})
async def put_fleet(request: Request, svc: ServiceDep) -> dict[str, Any]:
    """Set the fleet policy (admin): ``{"budget": {"epsilon_per_day": 8}}`` or
    ``{"budget": null}``.  400 (naming the collection) if one report of a registered
    collection alone would exceed it."""
    try:
        raw = await request.json()
    except ValueError:
        raise QueryError("the body must be JSON {\"budget\": {...} | null}",
                         parameter="body") from None
    if not isinstance(raw, dict) or set(raw) != {"budget"}:
        raise QueryError("the body must be {\"budget\": {\"epsilon_per_day\": …, "
                         "\"values_per_day\": …} | null}", parameter="body")
    try:
        budget = FleetBudget.from_dict(raw["budget"])
    except BudgetError as exc:
        raise QueryError(str(exc), parameter=exc.field) from None
    try:
        check_fleet(await svc.call(svc.store.all()), budget)
    except BudgetError as exc:  # a registered collection does not fit: the budget is at fault
        raise QueryError(str(exc), parameter="budget.epsilon_per_day") from None
    await svc.call(svc.fleet.set_budget(budget))
    _, _, summary = await svc.call(svc.fleet.current())
    return dict(summary)
