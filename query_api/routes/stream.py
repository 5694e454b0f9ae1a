"""``/v1/collections/{cid}/stream``: Server-Sent Events whenever the stored state changes."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Annotated, Any

import numpy as np
from fastapi import APIRouter, Header, Query, Request
from fastapi.responses import StreamingResponse

import ldpcore
from ldpcore.capabilities import (
    AttributeEstimates,
    DistributionEstimates,
    HeavyHitterSearch,
    MeanEstimates,
    RangeQueries,
)

from .. import estimates as E
from ..deps import Confidence, ServiceDep, SpecDep
from ..domain import index_offset, labels_of
from ..errors import NotEnoughReports, QueryError, Unavailable
from ..schemas import errors
from .estimates import Method, _method

router = APIRouter(prefix="/v1", tags=["estimates"])


class EventStreamResponse(StreamingResponse):
    media_type = "text/event-stream"


def live_view(o: Any, s: ldpcore.State, *, labels: list[str] | None, method: str,
              confidence: float, top: int | None, offset: int,
              n_effective: float | None = None, choice: Any = None) -> dict[str, Any]:
    """What the dashboard shows of a collection, by its mechanism's capabilities."""
    if isinstance(o, AttributeEstimates):  # several attributes: their report counts (the
        # per-attribute estimates are under /attributes/{name}/…)
        return {"attributes": [{"name": a, "n": int(c)} for a, c in
                               zip(o.attribute_names, o.attribute_counts(s), strict=True)]}
    if isinstance(o, MeanEstimates):  # numeric: distribution (if any) and mean
        return E.numeric_summary(o, s, confidence=confidence, n_effective=n_effective)
    if isinstance(o, HeavyHitterSearch) or not isinstance(o, ldpcore.FrequencyOracle):
        return E.heavy_hitter_rows(o, s, top or 20, confidence=confidence, offset=offset)
    if isinstance(o, RangeQueries) and not isinstance(o, DistributionEstimates):
        # A range collection: the consistent histogram and CDF, with their intervals.
        hist = E.histogram(o, s, confidence=confidence, n_effective=n_effective)
        names = labels or [str(i) for i in range(o.domain_size)]
        rows = [{"label": names[i], "index": i, "estimate": v, "std_error": None,
                 "ci_low": hist["ci_low"][i], "ci_high": hist["ci_high"][i]}
                for i, v in enumerate(hist["bins"])]
        if top is not None:
            rows = sorted(rows, key=lambda r: -r["estimate"])[:top]
        c = E.cdf(o, s, confidence=confidence, n_effective=n_effective)
        d = o.domain_size
        pts = np.unique(np.round(np.arange(64) * (d - 1) / 63).astype(int))
        se = E._prefix_se(o, E._n(s, n_effective), pts)
        return {"method": hist["method"], "interval": hist["interval"], "estimates": rows,
                "cdf": c["cdf"], "cdf_points": c["points"], "cdf_low": c["ci_low"],
                "cdf_high": c["ci_high"],
                "cdf_se": [[int(i), float(e)] for i, e in zip(pts, se, strict=True)]}
    return E.frequencies(o, s, labels=labels, method=method, confidence=confidence, top=top,
                         n_effective=n_effective, choice=choice)


@router.get("/collections/{cid}/stream", response_class=EventStreamResponse,
            responses={200: {"content": {"text/event-stream": {"schema": {"type": "string"}}},
                             "description": "events: estimates, waiting, error"},
                       **errors(400, 404, 503)})
async def stream(request: Request, svc: ServiceDep, spec: SpecDep,
                 last_event_id: Annotated[str | None, Header(
                     description="resume: the id (state version) of the last event seen; "
                                 "the next event comes when the state has changed")] = None,
                 method: Method = None,
                 confidence: Confidence = 0.95,
                 top: Annotated[int | None, Query(ge=1, description="only the top k")] = None
                 ) -> EventStreamResponse:
    """Server-Sent Events: an ``estimates`` event whenever the stored state changes.

    Each event's ``id:`` is the state version it describes; a client that reconnects
    with ``Last-Event-ID`` gets no event until the state differs from that one.
    """
    m = _method(method, "full")
    labels = labels_of(spec)
    offset = index_offset(spec)

    slot = svc.choices.slot((spec.fingerprint, (None, None), "full"))

    def compute(o: Any, s: ldpcore.State, ne: float) -> dict[str, Any]:
        return live_view(o, s, labels=labels, method=m, confidence=confidence, top=top,
                         offset=offset, n_effective=ne, choice=slot)

    async def events() -> AsyncIterator[bytes]:
        last: str | None = last_event_id
        idle = 0.0
        yield b"retry: 2000\n\n"
        while not await request.is_disconnected():
            try:
                version = await svc.call(svc.store.version(spec, None, None))
                if version.tag != last:
                    last = version.tag
                    try:
                        body, _, _ = await svc.answer(spec, "stream", (m, confidence, top),
                                                      None, None, compute, version=version,
                                                      allow_stale=False)
                        yield (b"id: " + version.tag.encode() + b"\nevent: estimates\ndata: "
                               + body + b"\n\n")
                    except NotEnoughReports as exc:
                        data = {"have": exc.have, "need": exc.need, "message": str(exc),
                                "n": exc.have, "n_effective": round(
                                    svc.effective_n(spec, version, exc.have), 1),
                                "state_version": version.tag}
                        yield f"event: waiting\ndata: {json.dumps(data)}\n\n".encode()
                    idle = 0.0
            except Unavailable as exc:
                yield f"event: error\ndata: {json.dumps({'message': str(exc)})}\n\n".encode()
            except QueryError as exc:  # cannot answer at all: say why, end the stream
                yield f"event: error\ndata: {json.dumps({'message': str(exc)})}\n\n".encode()
                return
            idle += svc.settings.stream_interval_s
            if idle >= 15:
                idle = 0.0
                yield b": keep-alive\n\n"
            await asyncio.sleep(svc.settings.stream_interval_s)

    return EventStreamResponse(events(), media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
