"""Plain ASGI middleware of the query service."""

from __future__ import annotations

import time
from typing import Any

from .metrics import ApiMetrics

__all__ = ["RequestMetrics", "HeadAsGet"]

_UNTIMED = {"/v1/collections/{cid}/stream"}  # long-lived SSE: its duration is not latency


class RequestMetrics:
    """Observes ``ldp_api_request_seconds{route,method,status}`` for every HTTP request.

    A plain ASGI class (no per-request task as with ``BaseHTTPMiddleware``); the route
    label is the matched route's template, so ids do not explode the label space.
    """

    def __init__(self, app: Any, metrics: ApiMetrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = [500]

        async def send_wrapper(message: Any) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            await send(message)

        t0 = time.perf_counter()
        try:
            await self.app(scope, receive, send_wrapper)
        finally:
            path = getattr(scope.get("route"), "path", "unmatched")
            if path not in _UNTIMED:
                self.metrics.request_seconds.labels(path, scope["method"], str(status[0])
                                                    ).observe(time.perf_counter() - t0)


class HeadAsGet:
    """Answers ``HEAD`` as the ``GET`` of the same URL, without the body (RFC 9110 §9.3.2)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "HEAD":
            await self.app(scope, receive, send)
            return

        async def send_headers_only(message: Any) -> None:
            if message["type"] == "http.response.body":
                if not message.get("more_body", False):
                    await send({"type": "http.response.body", "body": b""})
                return
            await send(message)

        if scope["path"].endswith("/stream"):  # an endless body: answer the headers only
            await send({"type": "http.response.start", "status": 200,
                        "headers": [(b"content-type", b"text/event-stream")]})
            await send({"type": "http.response.body", "body": b""})
            return
        await self.app(dict(scope, method="GET"), receive, send_headers_only)
