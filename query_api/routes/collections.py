"""``/v1/collections``: list, read, register (admin) and delete (admin) collections."""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse

from ldpcore import ParameterError
from ldpcore.budget import BudgetError, check_collection
from ldpcore.collection import CollectionSpec
from ldpstream.access import split_private

from ..access import AccessDep, ReaderDep
from ..capabilities import queries_of
from ..deps import ServiceDep, SpecDep, require_admin
from ..errors import Conflict, NotFound, QueryError
from ..schemas import CollectionCreated, CollectionDetail, CollectionList, Deleted, errors
from ..store import CollectionConflict

router = APIRouter(prefix="/v1/collections", tags=["collections"])

LIST_LABELS = 50
"""Labels shown per collection in the list (the list says when it cut them)."""


def summary(spec: CollectionSpec) -> dict[str, Any]:
    """What a client needs to know of a collection to query it."""
    o = spec.oracle_spec
    domain = spec.domain.to_dict()
    if spec.domain.kind == "categories" and len(spec.domain.labels) > LIST_LABELS:
        # The list stays light; GET /v1/collections/{id} has them all.
        domain = domain | {"labels": list(spec.domain.labels)[:LIST_LABELS],
                           "labels_truncated": True, "label_count": len(spec.domain.labels)}
    return {"id": spec.id, "description": spec.description, "mechanism": o["mechanism"],
            "epsilon": o["epsilon"], "domain": domain,
            "domain_size": spec.domain.size, "fingerprint": spec.fingerprint,
            "queries": queries_of(spec)}


@router.get("", response_model=None, responses={200: {"model": CollectionList}, **errors(503)})
async def list_collections(svc: ServiceDep, reader: ReaderDep,
                           access: AccessDep) -> dict[str, Any]:
    """Every collection the reader may read, with its mechanism, ε and the queries it
    answers."""
    specs = await svc.call(svc.store.all())
    private = await svc.call(access.private())
    return {"collections": [summary(s) for s in specs if reader.may_read(s.id, s.id in private)]}


@router.post("", status_code=201, dependencies=[Depends(require_admin)], response_model=None,
             responses={201: {"model": CollectionCreated, "description": "registered"},
                        200: {"model": CollectionCreated, "description": "already there"},
                        **errors(400, 401, 403, 409, 503)},
             openapi_extra={"requestBody": {"required": True, "content": {
                 "application/json": {"schema": {"type": "object"}}}}})
async def create_collection(request: Request, svc: ServiceDep, access: AccessDep) -> Any:
    """Register a collection spec (admin). 201 created, 200 if the same spec exists.

    ``"private": true`` in the body marks it private (``false`` public; absent: unchanged).
    """
    try:
        raw = await request.json()
    except ValueError:
        raise QueryError("the body must be a JSON collection spec", parameter="body") from None
    try:
        raw, private = split_private(raw)
        spec = CollectionSpec.from_dict(raw)
    except ParameterError as exc:
        raise QueryError(f"invalid collection spec: {exc}", parameter="body") from None
    try:
        check_collection(spec, await svc.call(svc.fleet.budget()))
    except BudgetError as exc:
        raise QueryError(str(exc), parameter=exc.field) from None
    # Marked before it exists, so a private collection is never readable for a moment.
    newly = private is True and await svc.call(access.mark(spec.id, True))
    try:
        created = await svc.call(svc.store.register(spec))
    except CollectionConflict as exc:
        if newly:
            await svc.call(access.mark(spec.id, False))
        raise Conflict(str(exc), parameter="id") from None
    if private is False:
        await svc.call(access.mark(spec.id, False))
    svc.fleet.invalidate()  # the device's daily spend changed
    body = {"spec": json.loads(spec.to_json()), "created": created}
    return JSONResponse(body, status_code=201 if created else 200)


@router.get("/{cid}", response_model=None,
            responses={200: {"model": CollectionDetail}, **errors(404, 503)})
async def get_collection(spec: SpecDep) -> dict[str, Any]:
    """The full spec with its fingerprint (what devices need to report)."""
    return {"spec": json.loads(spec.to_json()), **summary(spec),
            "domain": spec.domain.to_dict()}


@router.delete("/{cid}", dependencies=[Depends(require_admin)], response_model=None,
               responses={200: {"model": Deleted}, **errors(401, 403, 404, 503)})
async def delete_collection(cid: str, svc: ServiceDep, access: AccessDep) -> dict[str, Any]:
    """Remove a collection, its stored states and its private mark (admin)."""
    deleted = await svc.call(svc.store.delete(cid))
    await svc.call(access.mark(cid, False))  # refresh the cached set
    if not deleted:
        raise NotFound(f"no collection {cid!r}", parameter="id")
    svc.fleet.invalidate()
    return {"deleted": cid}
