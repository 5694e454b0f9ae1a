"""Errors of the query service; each maps to a JSON 4xx response naming the parameter."""

from __future__ import annotations

import re

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

__all__ = ["QueryError", "NotFound", "NotEnoughReports", "Unsupported", "Unauthorized",
           "Forbidden", "Conflict", "Unavailable", "error_response", "install_error_handlers",
           "unknown_collection"]


class QueryError(ValueError):
    """A bad query parameter (HTTP 400 or 422)."""

    status = 400

    def __init__(self, message: str, *, parameter: str | None = None) -> None:
        super().__init__(message)
        self.parameter = parameter

    def __init_subclass__(cls, *, status: int | None = None, **kwargs: object) -> None:
        # each kind of error names its HTTP status in its class line
        super().__init_subclass__(**kwargs)
        if status is not None:
            cls.status = status


class NotFound(QueryError, status=404):
    """The collection does not exist (HTTP 404)."""


class Unsupported(QueryError, status=409):
    """The collection's mechanism cannot answer this query (HTTP 409)."""


class NotEnoughReports(QueryError, status=409):
    """Fewer reports than the collection's minimum (HTTP 409, with both numbers)."""

    def __init__(self, have: int, need: int) -> None:
        super().__init__(f"not enough reports yet: {have} received, {need} needed before "
                         "estimates are served")
        self.have = have
        self.need = need


class Unauthorized(QueryError, status=401):
    """No or a malformed bearer token on an admin route (HTTP 401)."""


class Forbidden(QueryError, status=403):
    """A wrong admin token, or admin routes switched off (HTTP 403)."""


class Conflict(QueryError, status=409):
    """A collection id registered with another spec (HTTP 409)."""


class Unavailable(QueryError, status=503):
    """Redis is unreachable (HTTP 503 with ``Retry-After``): during a Sentinel failover the
    primary is away for a few seconds, and an answer from the replica could be older than
    one already served (docs/cluster.md)."""

    retry_after = 1


def unknown_collection(cid: str) -> NotFound:
    """The one 404 of an unknown id — also what a private id answers to those who may not
    read it, so the two cannot be told apart."""
    return NotFound(f"no collection {cid!r}; GET /v1/collections lists them", parameter="id")


def error_response(status: int, message: str, parameter: str | None = None,
                   **extra: object) -> JSONResponse:
    """The JSON error body every failure uses: ``{"error": {status, message, parameter}}``."""
    body: dict[str, object] = {"status": status, "message": message}
    if parameter is not None:
        body["parameter"] = parameter
    body.update(extra)
    return JSONResponse({"error": body}, status_code=status)


def _allowed_methods(request: Request) -> list[str]:
    """Methods the OpenAPI document declares for the request's path (any template)."""
    methods: set[str] = set()
    for template, ops in request.app.openapi().get("paths", {}).items():
        pattern = "^" + re.sub(r"\\\{[^/]+?\\\}", "[^/]+", re.escape(template)) + "$"
        if re.match(pattern, request.url.path):
            methods |= {m.upper() for m in ops if m.isalpha()}
    if "GET" in methods:
        methods.add("HEAD")  # answered by the HeadAsGet middleware
    return sorted(methods)


def install_error_handlers(app: FastAPI) -> None:
    """Map typed errors, validation failures and routing errors to JSON 4xx answers."""

    @app.exception_handler(QueryError)
    async def _query_error(request: Request, exc: QueryError) -> JSONResponse:
        extra = {"have": exc.have, "need": exc.need} if isinstance(exc, NotEnoughReports) else {}
        resp = error_response(exc.status, str(exc), exc.parameter, **extra)
        if isinstance(exc, Unavailable):
            resp.headers["Retry-After"] = str(exc.retry_after)
        resp.headers.update(getattr(exc, "headers", None) or {})  # e.g. WWW-Authenticate
        return resp

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {}
        loc = [str(x) for x in first.get("loc", ()) if x not in ("query", "path", "body")]
        param = ".".join(loc) or None
        return error_response(400, f"parameter {param!r}: {first.get('msg', 'invalid')} "
                                   f"(got {first.get('input')!r})", param)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        msg = str(exc.detail)
        if exc.status_code == 404:
            msg = f"no route {request.url.path!r}; see /openapi.json"
        elif exc.status_code == 405:
            msg = f"method {request.method} is not allowed on {request.url.path!r}"
        resp = error_response(exc.status_code, msg)
        for k, v in (exc.headers or {}).items():
            resp.headers[k] = v
        if exc.status_code == 405:  # every method of every route on this path
            resp.headers["Allow"] = ", ".join(_allowed_methods(request))
        return resp
