"""Operations: ``/healthz``, ``/readyz``, ``/metrics`` and the dashboard at ``/``."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from ..access import AccessDep
from ..deps import ServiceDep
from ..errors import Unavailable
from ..metrics import CollectionSample
from ..schemas import Status, errors

router = APIRouter(tags=["operations"])

STATIC = Path(__file__).resolve().parent.parent / "static"


@router.get("/healthz", response_model=None, responses={200: {"model": Status}})
async def healthz() -> dict[str, str]:
    """Liveness: the process answers."""
    return {"status": "ok"}


@router.get("/readyz", response_model=None,
            responses={200: {"model": Status}, **errors(503)})
async def readyz(svc: ServiceDep) -> Any:
    """Readiness: Redis answers a PING."""
    try:
        await svc.call(svc.store.ping())
    except Unavailable as exc:
        return JSONResponse({"error": {"status": 503, "message": str(exc)}}, status_code=503,
                            headers={"Retry-After": str(exc.retry_after)})
    return {"status": "ready"}


async def _collection_samples(svc: Any) -> list[CollectionSample]:
    specs = await svc.call(svc.store.all())
    versions = await asyncio.gather(*(svc.call(svc.store.version(s, None, None))
                                      for s in specs))
    return [CollectionSample(s.id, v.n, float(s.oracle_spec["epsilon"]), v.last_flush_ms)
            for s, v in zip(specs, versions, strict=True)]


class PrometheusResponse(Response):
    media_type = CONTENT_TYPE_LATEST


@router.get("/metrics", response_class=PrometheusResponse, responses={200: {"content": {
    CONTENT_TYPE_LATEST: {"schema": {"type": "string"}}}, "description": "Prometheus text"}})
async def metrics(request: Request, svc: ServiceDep, access: AccessDep) -> PrometheusResponse:
    """Prometheus text exposition, with every collection's n, ε and staleness read now.

    With ``LDP_API_METRICS_PORT`` it is served there instead (404 here); with read tokens
    on, it needs a token of scope ``*``; private collections appear only to such a token.
    """
    reader = access.reader(request.headers.get("authorization", ""))
    access.check_metrics(reader)
    return await render_metrics(svc, include_private=reader.everything, access=access)


async def render_metrics(svc: Any, *, include_private: bool,
                         access: Any = None) -> PrometheusResponse:
    """The exposition, with the per-collection gauges read now; without
    ``include_private``, every series labelled with a private collection is left out."""
    with contextlib.suppress(Unavailable, asyncio.TimeoutError):  # the gauge says so
        svc.metrics.collections.update(await asyncio.wait_for(_collection_samples(svc), 2.0))
    text = generate_latest(svc.metrics.registry)
    if not include_private:
        hidden = await svc.call(access.private())
        if hidden:
            marks = tuple(f'collection="{cid}"'.encode() for cid in hidden)
            text = b"".join(line for line in text.splitlines(keepends=True)
                            if not any(m in line for m in marks))
    return PrometheusResponse(text)


@router.get("/", include_in_schema=False)
async def dashboard() -> HTMLResponse:
    return HTMLResponse((STATIC / "index.html").read_text())
