"""Who may read: the read-token dependency of the read routers and private collections.

``require_reader`` is applied to every read router (``app.include_router(...,
dependencies=[Depends(require_reader)])``).  Without ``LDP_READ_TOKENS`` it lets every
request through as an anonymous reader; with it, a request needs ``Authorization:
Bearer <token>`` (or HTTP Basic with the token as the password, which is what
oauth2-proxy's ``--basic-auth-password`` sends) whose SHA-256 the token file lists
(:mod:`ldpstream.access`), else 401.  The admin token reads everything.

A *private* collection (Redis set ``P private``) is visible only to a token naming it
(or ``*``): to every other reader — anonymous ones included — its id answers exactly as
an unknown id (404 with the same body), it is left out of ``GET /v1/collections`` and of
``/metrics``.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import time
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import Depends, Request

from ldpstream.access import TokenFile, TokenScope
from ldpstream.storage import Keys

from .config import ApiSettings
from .errors import Forbidden, NotFound, Unauthorized

__all__ = ["Reader", "ReadAccess", "ReaderDep", "require_reader", "AccessDep"]

PRIVATE_TTL = 1.0
"""Seconds the set of private collections is cached (the admin routes refresh it)."""

_CHALLENGE = 'Bearer realm="ldpstream"'


class ReadUnauthorized(Unauthorized):
    """401 with the RFC 6750 challenge."""

    def __init__(self, message: str, error: str | None = None) -> None:
        super().__init__(message, parameter="Authorization")
        self.headers = {"WWW-Authenticate": _CHALLENGE + (f', error="{error}"' if error
                                                          else "")}


@dataclass(frozen=True)
class Reader:
    """Who is reading: a token's scope, or None for an anonymous reader (reads open)."""

    scope: TokenScope | None = None

    @property
    def everything(self) -> bool:
        return self.scope is not None and self.scope.everything

    def may_read(self, cid: str, private: bool) -> bool:
        if self.scope is None:
            return not private
        return self.scope.may_read(cid, private)


class ReadAccess:
    """The token file and the private-collection set of one app (owned by its lifespan)."""

    def __init__(self, settings: ApiSettings, redis: Any, prefix: str) -> None:
        self.tokens = TokenFile(settings.read_tokens) if settings.read_tokens else None
        self.admin_token = settings.admin_token
        self.metrics_port = settings.metrics_port
        self.redis, self.key = redis, Keys.for_client(redis, prefix).private
        self._private: tuple[float, frozenset[str]] | None = None

    @property
    def required(self) -> bool:
        """True when read routes need a token (``LDP_READ_TOKENS`` is set)."""
        return self.tokens is not None

    def reader(self, authorization: str) -> Reader:
        """The reader of an ``Authorization`` header value (401 when tokens are on and it
        does not carry one the token file lists)."""
        token = _token_of(authorization)
        if token and self.admin_token and hmac.compare_digest(token.encode(),
                                                              self.admin_token.encode()):
            return Reader(TokenScope(everything=True))
        if self.tokens is None:
            return Reader()
        if not token:
            raise ReadUnauthorized("this API needs a read token: send 'Authorization: Bearer "
                                   "<token>'")
        scope = self.tokens.lookup(token)
        if scope is None:
            raise ReadUnauthorized("the bearer token is not a valid read token",
                                   error="invalid_token")
        return Reader(scope)

    async def private(self) -> frozenset[str]:
        """The ids of the private collections (cached :data:`PRIVATE_TTL` s)."""
        now = time.monotonic()
        if self._private is not None and now - self._private[0] < PRIVATE_TTL:
            return self._private[1]
        raw = await self.redis.smembers(self.key)
        ids = frozenset(k.decode() if isinstance(k, bytes) else str(k) for k in raw)
        self._private = (now, ids)
        return ids

    async def visible(self, reader: Reader, cid: str) -> bool:
        return reader.may_read(cid, cid in await self.private())

    async def mark(self, cid: str, private: bool) -> bool:
        """Set or clear the private mark; True if it changed."""
        changed = await (self.redis.sadd(self.key, cid) if private
                         else self.redis.srem(self.key, cid))
        self._private = None
        return bool(changed)

    def check_metrics(self, reader: Reader) -> None:
        """``/metrics`` on the API's port: 404 when it has its own port; with read tokens
        on, only for a token of scope ``*`` (it names every collection)."""
        if self.metrics_port:
            raise NotFound("/metrics is served on its own port (LDP_API_METRICS_PORT)")
        if self.required and not reader.everything:
            raise Forbidden("/metrics needs a read token of scope '*'",
                            parameter="Authorization")


def _token_of(authorization: str) -> str:
    """The token of ``Bearer <t>`` or of ``Basic base64(user:<t>)``; empty if none."""
    scheme, _, value = authorization.strip().partition(" ")
    scheme, value = scheme.lower(), value.strip()
    if scheme == "bearer":
        return value
    if scheme == "basic" and value:
        try:
            decoded = base64.b64decode(value, validate=True).decode()
        except (binascii.Error, UnicodeDecodeError):
            return ""
        return decoded.partition(":")[2]
    return ""


async def get_access(request: Request) -> ReadAccess:
    access: ReadAccess = request.app.state.access
    return access


AccessDep = Annotated[ReadAccess, Depends(get_access)]


async def require_reader(request: Request) -> Reader:
    """The request's reader (401 when a read token is needed and missing or unknown).  The
    access list is the app's (not an :data:`AccessDep`: one dependency node less on every
    request)."""
    access: ReadAccess = request.app.state.access
    return access.reader(request.headers.get("authorization", ""))


ReaderDep = Annotated[Reader, Depends(require_reader)]
