"""Errors of the query service; each maps to a JSON 4xx response naming the parameter."""

from __future__ import annotations

__all__ = ["QueryError", "NotFound", "NotEnoughReports", "Unsupported", "Unauthorized",
           "Forbidden", "Conflict", "Unavailable"]


class QueryError(ValueError):
    """A bad query parameter (HTTP 400 or 422)."""

    status = 400

    def __init__(self, message: str, *, parameter: str | None = None) -> None:
        super().__init__(message)
        self.parameter = parameter


class NotFound(QueryError):
    """The collection does not exist (HTTP 404)."""

    status = 404


class Unsupported(QueryError):
    """The collection's mechanism cannot answer this query (HTTP 409)."""

    status = 409


class NotEnoughReports(QueryError):
    """Fewer reports than the collection's minimum (HTTP 409, with both numbers)."""

    status = 409

    def __init__(self, have: int, need: int) -> None:
        super().__init__(f"not enough reports yet: {have} received, {need} needed before "
                         "estimates are served")
        self.have = have
        self.need = need


class Unauthorized(QueryError):
    """No or a malformed bearer token on an admin route (HTTP 401)."""

    status = 401


class Forbidden(QueryError):
    """A wrong admin token, or admin routes switched off (HTTP 403)."""

    status = 403


class Conflict(QueryError):
    """A collection id registered with another spec (HTTP 409)."""

    status = 409


class Unavailable(QueryError):
    """Redis is unreachable (HTTP 503)."""

    status = 503
