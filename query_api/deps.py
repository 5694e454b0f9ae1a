"""Typed FastAPI dependencies shared by the routers."""

from __future__ import annotations

import hmac
import time
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Query, Request
from fastapi.responses import Response

from ldpcore.collection import CollectionSpec

from .access import ReadAccess
from .domain import TIME_PATTERN, parse_time
from .errors import Forbidden, Unauthorized, unknown_collection
from .service import Service

__all__ = ["ServiceDep", "SpecDep", "WindowDep", "Window", "Confidence", "require_admin",
           "answer_response"]


async def get_service(request: Request) -> Service:
    """The app's :class:`Service` (created by the lifespan).

    The dependencies are ``async def`` although they do not await: FastAPI runs a plain
    ``def`` dependency on a worker thread, a thread hop per dependency per request."""
    svc: Service = request.app.state.service
    return svc


ServiceDep = Annotated[Service, Depends(get_service)]


async def get_spec(cid: str, request: Request) -> CollectionSpec:
    """The collection named in the path, or 404 (also for a private one the reader may not
    read: the same answer as an unknown id).

    The service, the access list and the reader are taken from the app here rather than
    as dependencies of their own: FastAPI solves a sub-dependency's whole tree wherever it
    is named before it looks in its per-request cache, and this one is named by every
    route and by :func:`get_window` (15 dependency nodes a request instead of 6)."""
    svc: Service = request.app.state.service
    access: ReadAccess = request.app.state.access
    reader = access.reader(request.headers.get("authorization", ""))
    if not await svc.call(access.visible(reader, cid)):
        raise unknown_collection(cid)
    return await svc.spec(cid)


SpecDep = Annotated[CollectionSpec, Depends(get_spec)]


@dataclass(frozen=True)
class Window:
    """The time range a query covers: windows overlapping ``[since, until)`` (epoch s).

    ``raw`` is the range as asked (``("-1h", None)``): the key under which a query's
    ``auto`` choice is kept while the range slides with the clock.  A range that holds no
    window — empty (since not before until), in the future, older than the retention —
    is answered with n = 0, not refused.
    """

    since: float | None
    until: float | None
    raw: tuple[str | None, str | None] = (None, None)


async def get_window(
        since: Annotated[str | None, Query(
            pattern=TIME_PATTERN,
            description="start: epoch seconds, ISO 8601, 'now' or relative (-1h, -7d); "
                        "windows overlapping [since, until) count")] = None,
        until: Annotated[str | None, Query(
            pattern=TIME_PATTERN,
            description="end (exclusive): same forms as since")] = None) -> Window:
    now = time.time()
    return Window(parse_time(since, "since", now), parse_time(until, "until", now),
                  (since, until))


WindowDep = Annotated[Window, Depends(get_window)]

Confidence = Annotated[float, Query(gt=0, lt=1, description="confidence level of the intervals")]


async def require_admin(request: Request, svc: ServiceDep) -> None:
    """Admin routes need ``Authorization: Bearer $LDP_ADMIN_TOKEN`` (401/403 otherwise)."""
    token_set = svc.settings.admin_token
    if token_set is None:
        raise Forbidden("admin routes are disabled: start the API with LDP_ADMIN_TOKEN set")
    auth = request.headers.get("authorization", "")
    scheme, _, token = auth.partition(" ")
    if scheme.lower() != "bearer" or not token:
        raise Unauthorized("send 'Authorization: Bearer <LDP_ADMIN_TOKEN>'",
                           parameter="Authorization")
    if not hmac.compare_digest(token.encode(), token_set.encode()):
        raise Forbidden("the bearer token is not the admin token", parameter="Authorization")


def answer_response(body: bytes, cache: str, tag: str) -> Response:
    """An encoded answer with its cache status (hit, miss, stale) and state version."""
    return Response(body, media_type="application/json",
                    headers={"X-Cache": cache, "X-State-Version": tag})
