"""Plain ASGI middleware of the query service."""

from __future__ import annotations

import time
from typing import Any

from .metrics import ApiMetrics

__all__ = ["RequestMetrics", "HeadAsGet", "Cors"]

_UNTIMED = {"/v1/collections/{cid}/stream"}  # long-lived SSE: its duration is not latency


class RequestMetrics:
    """Observes ``ldp_api_request_seconds{route,method,status}`` for every HTTP request.

    A plain ASGI class (no per-request task as with ``BaseHTTPMiddleware``); the route
    label is the matched route's template, so ids do not explode the label space.
    """

    def __init__(self, app: Any, metrics: ApiMetrics) -> None:
        self.app = app
        self.metrics = metrics
        self._series: dict[tuple[str, str, int], Any] = {}  # (route, method, status) → child

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
                key = (path, scope["method"], status[0])
                series = self._series.get(key)
                if series is None:  # bounded: route templates x methods x statuses
                    series = self._series[key] = self.metrics.request_seconds.labels(
                        path, key[1], str(key[2]))
                series.observe(time.perf_counter() - t0)


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


_READ_METHODS = frozenset({"GET", "HEAD"})
_EXPOSE = b"X-Cache, X-State-Version, Retry-After"
_ALLOW_HEADERS = b"Accept, Authorization, Content-Type, Cache-Control, Last-Event-ID"


class Cors:
    """CORS for browsers on other origins (``LDP_CORS_ORIGINS``).

    Read routes (``GET``/``HEAD``: specs, answers, the stream) answer the listed origins
    (echoed, with ``Vary: Origin``), or any origin with ``*`` (``Access-Control-Allow-Origin:
    *``).  Every other method — the admin routes (``POST``/``DELETE /v1/collections``) — is
    allowed to listed origins only, never through ``*``.  A preflight ``OPTIONS`` (with
    ``Access-Control-Request-Method``) is answered here: 204 with the allowed methods and
    headers when the origin may make that request, else 204 without CORS headers (the
    browser then refuses).  No cookies are used: never ``Allow-Credentials``.
    """

    def __init__(self, app: Any, origins: tuple[str, ...]) -> None:
        self.app = app
        self.any = "*" in origins
        self.listed = {o.encode() for o in origins if o != "*"}

    def allow(self, origin: bytes, method: str) -> bytes | None:
        """The ``Access-Control-Allow-Origin`` value for ``origin`` making a ``method``
        request, or ``None`` (not allowed)."""
        if origin in self.listed:
            return origin
        if self.any and method in _READ_METHODS:
            return b"*"
        return None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or ())
        origin = headers.get(b"origin")
        if origin is None:
            await self.app(scope, receive, send)
            return
        method = scope["method"]
        wanted = headers.get(b"access-control-request-method")
        if method == "OPTIONS" and wanted is not None:
            await self._preflight(origin, wanted.decode("latin-1").strip().upper(), send)
            return
        allowed = self.allow(origin, method)
        extra = [(b"vary", b"Origin")]
        if allowed is not None:
            extra += [(b"access-control-allow-origin", allowed),
                      (b"access-control-expose-headers", _EXPOSE)]

        async def send_with_cors(message: Any) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", ()), *extra]}
            await send(message)

        await self.app(scope, receive, send_with_cors)

    async def _preflight(self, origin: bytes, wanted: str, send: Any) -> None:
        allowed = self.allow(origin, wanted)
        out = [(b"vary", b"Origin"), (b"content-length", b"0")]
        if allowed is not None:
            methods = (b"GET, HEAD, OPTIONS" if allowed == b"*"
                       else b"GET, HEAD, POST, DELETE, OPTIONS")
            out += [(b"access-control-allow-origin", allowed),
                    (b"access-control-allow-methods", methods),
                    (b"access-control-allow-headers", _ALLOW_HEADERS),
                    (b"access-control-max-age", b"600")]
        await send({"type": "http.response.start", "status": 204, "headers": out})
        await send({"type": "http.response.body", "body": b""})
