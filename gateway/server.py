"""The gateway's HTTP/1.1 server: an asyncio protocol over the ``httptools`` parser.

Why not an ASGI framework: at tens of thousands of tiny requests per second on one
core, the per-request cost of a framework (scope dicts, receive/send coroutines,
routing) is most of the budget.  Here one request costs one parser callback chain,
a dictionary lookup of the route, the body parse (:func:`gateway.parse.parse_body`)
and one pre-built response; the answer is a callback of the
:class:`~gateway.batcher.Batcher` (no task or future per request), and the answers
that become ready in one turn of the event loop leave in one write per connection.

HTTP features: keep-alive, pipelining (answers leave in request order),
``Content-Length`` or chunked bodies, ``Expect: 100-continue``, 411 for a POST without
a length, 413 as soon as a declared or received length passes the limit (then the
connection closes), idle connections closed after ``idle_timeout`` seconds, at most
``max_connections`` connections, reading paused while a client does not read its
answers.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable
from http import HTTPStatus
from typing import Any, cast

import httptools

from .batcher import Batcher, Overloaded, Unavailable
from .parse import BodyError, Catalogue, UnknownCollection, media_type, parse_body

__all__ = ["GatewayServer", "Stats"]

log = logging.getLogger("ldpstream.gateway")

REPORTS_PATH = b"/v1/reports"
_CORS_ALLOW_HEADERS = b"Authorization, Content-Type, X-LDP-Key"
_WANTED = {b"content-type", b"content-length", b"authorization", b"x-ldp-key", b"origin",
           b"transfer-encoding", b"expect", b"access-control-request-method"}


class Stats:
    """Plain counters of the hot path (read by the metrics collector at scrape time)."""

    def __init__(self) -> None:
        self.requests: dict[tuple[str, int], int] = {}
        """(route, status) → requests answered."""
        self.rejected: dict[str, int] = {}
        """reason → requests refused with 4xx/5xx."""
        self.connections = 0

    def count(self, route: str, status: int) -> None:
        key = (route, status)
        self.requests[key] = self.requests.get(key, 0) + 1


def _status_line(code: int) -> bytes:
    return f"HTTP/1.1 {code} {HTTPStatus(code).phrase}\r\n".encode()


_STATUS = {c: _status_line(c) for c in (200, 202, 204, 400, 401, 403, 404, 405, 411, 413,
                                         415, 429, 500, 503)}


class Slot:
    """The answer of one request, in the order requests came on the connection."""

    __slots__ = ("data", "close")

    def __init__(self) -> None:
        self.data: bytes | None = None
        self.close = False


class GatewayServer:
    """Routes, authentication, CORS and the glue between the protocol and the batcher.

    Parameters
    ----------
    catalogue : callable
        Returns the current :class:`~gateway.parse.Catalogue`.
    lookup : async callable
        ``lookup(collection_id) -> bool``: re-read one collection from Redis (True if the
        catalogue now has it).
    batcher : Batcher
    keys : dict
        SHA-256 digest of a device key → fleet; empty: no key needed.
    cors_origins : tuple of str
        ``("*",)``, a list of origins, or empty (no CORS headers).
    max_body : int
    retry_after : int
    ready : async callable
        ``ready() -> (ok, details)`` for ``/readyz``.
    metrics : callable
        ``metrics() -> (body, content_type)`` for ``/metrics``.
    """

    def __init__(self, *, catalogue: Callable[[], Catalogue],
                 lookup: Callable[[str], Awaitable[bool]], batcher: Batcher,
                 keys: dict[bytes, str], cors_origins: tuple[str, ...], max_body: int,
                 retry_after: int, ready: Callable[[], Awaitable[tuple[bool, dict[str, Any]]]],
                 metrics: Callable[[], tuple[bytes, str]], max_connections: int = 10_000,
                 idle_timeout: float = 75.0) -> None:
        self.catalogue, self.lookup, self.batcher = catalogue, lookup, batcher
        self.keys = keys
        self.cors_any = "*" in cors_origins
        self.cors_origins = {o.encode() for o in cors_origins if o != "*"}
        self.cors_on = bool(cors_origins)
        self.max_body, self.retry_after = max_body, retry_after
        self.ready, self.metrics = ready, metrics
        self.max_connections, self.idle_timeout = max_connections, idle_timeout
        self.stats = Stats()
        self.connections: set[HttpProtocol] = set()
        self._retry_header = f"Retry-After: {retry_after}\r\n".encode()
        self._sweeper: asyncio.TimerHandle | None = None
        self._dirty: list[HttpProtocol] = []
        self._write_scheduled = False
        self.stopping = False
        """Set at shutdown: new requests get 503 (``unavailable``) while the queued ones
        are answered."""

    # ---- responses -------------------------------------------------------------------------
    def cors_headers(self, origin: bytes | None) -> bytes:
        if not self.cors_on or origin is None:
            return b""
        if self.cors_any:
            return (b"Access-Control-Allow-Origin: *\r\n"
                    b"Access-Control-Expose-Headers: Retry-After, WWW-Authenticate\r\n")
        if origin in self.cors_origins:
            return (b"Access-Control-Allow-Origin: " + origin + b"\r\nVary: Origin\r\n"
                    b"Access-Control-Expose-Headers: Retry-After, WWW-Authenticate\r\n")
        return b"Vary: Origin\r\n"

    def response(self, status: int, body: bytes, *, origin: bytes | None = None,
                 content_type: bytes = b"application/json", extra: bytes = b"",
                 close: bool = False) -> bytes:
        head = _STATUS.get(status) or _status_line(status)
        return b"".join((
            head, b"Content-Type: ", content_type, b"\r\nContent-Length: ",
            str(len(body)).encode(), b"\r\n", self.cors_headers(origin), extra,
            b"Connection: close\r\n\r\n" if close else b"\r\n", body))

    def error(self, exc: BodyError, origin: bytes | None, close: bool = False) -> bytes:
        self.stats.rejected[exc.reason] = self.stats.rejected.get(exc.reason, 0) + 1
        extra = self._retry_header if exc.status in (429, 503) else b""
        if exc.status == 405:
            extra += b"Allow: POST, OPTIONS\r\n"
        if exc.www_authenticate:
            extra += b"WWW-Authenticate: " + exc.www_authenticate.encode() + b"\r\n"
        return self.response(exc.status, json.dumps(exc.body()).encode(), origin=origin,
                             extra=extra, close=close)

    def accepted(self, messages: int, reports: int, origin: bytes | None) -> bytes:
        body = b'{"accepted_messages":%d,"accepted_reports":%d}' % (messages, reports)
        return self.response(202, body, origin=origin)

    # ---- requests ---------------------------------------------------------------------------
    def authenticate(self, authorization: bytes | None, x_key: bytes | None) -> None:
        if not self.keys:
            return
        key: bytes | None = None
        if authorization is not None:
            scheme, _, token = authorization.strip().partition(b" ")
            if scheme.lower() == b"bearer" and token.strip():
                key = token.strip()
        if key is None and x_key is not None and x_key.strip():
            key = x_key.strip()
        if key is None:
            raise BodyError(401, "missing_key", "this gateway needs a device key: "
                            "'Authorization: Bearer <key>' or 'X-LDP-Key: <key>'")
        import hashlib

        if hashlib.sha256(key).digest() not in self.keys:
            raise BodyError(403, "wrong_key", "the device key is not one of this gateway's")

    def start_sweeper(self) -> None:
        loop = asyncio.get_running_loop()

        def sweep() -> None:
            now = time.monotonic()
            for conn in list(self.connections):
                if not conn.slots and now - conn.last_active > self.idle_timeout:
                    conn.close()
            self._sweeper = loop.call_later(5.0, sweep)
        self._sweeper = loop.call_later(5.0, sweep)

    def stop_sweeper(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()

    def protocol(self) -> HttpProtocol:
        return HttpProtocol(self)

    def schedule_write(self, conn: HttpProtocol) -> None:
        """Have ``conn`` write its ready answers at the end of this loop turn."""
        self._dirty.append(conn)
        if not self._write_scheduled:
            self._write_scheduled = True
            asyncio.get_running_loop().call_soon(self._write_all)

    def write_pending(self) -> None:
        """Write every ready answer now (at shutdown, before the connections close)."""
        self._write_all()

    def _write_all(self) -> None:
        self._write_scheduled = False
        dirty, self._dirty = self._dirty, []
        for conn in dirty:
            conn.write_out()


class HttpProtocol(asyncio.Protocol):
    """One client connection."""

    def __init__(self, server: GatewayServer) -> None:
        self.server = server
        self.parser = httptools.HttpRequestParser(self)
        self.transport: asyncio.Transport | None = None
        self.slots: deque[Slot] = deque()
        self.last_active = time.monotonic()
        self.closing = False
        self.paused = False
        self.out: list[bytes] = []
        self._reset()

    def _reset(self) -> None:
        self.url = b""
        self.headers: dict[bytes, bytes] = {}
        self.body: list[bytes] = []
        self.body_len = 0
        self.refused: bytes | None = None  # an answer decided before the body ended

    # ---- asyncio.Protocol -------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass
        srv = self.server
        transport = self.transport
        if len(srv.connections) >= srv.max_connections:
            transport.write(srv.error(BodyError(503, "too_many_connections",
                                                "too many open connections"), None, True))
            transport.close()
            self.closing = True
            return
        srv.connections.add(self)
        srv.stats.connections += 1

    def connection_lost(self, exc: Exception | None) -> None:
        self.closing = True
        self.server.connections.discard(self)

    def data_received(self, data: bytes) -> None:
        if self.closing:
            return
        self.last_active = time.monotonic()
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._fail(400, "upgrade", "protocol upgrades are not supported")
        except httptools.HttpParserError as exc:
            self._fail(400, "bad_request", f"malformed HTTP: {exc}")

    def pause_writing(self) -> None:  # the client does not read its answers: stop reading
        if self.transport is not None and not self.paused:
            self.paused = True
            self.transport.pause_reading()

    def resume_writing(self) -> None:
        if self.transport is not None and self.paused:
            self.paused = False
            self.transport.resume_reading()

    def close(self) -> None:
        self.closing = True
        if self.transport is not None:
            self.transport.close()

    def _fail(self, status: int, reason: str, detail: str) -> None:
        slot = Slot()
        self.slots.append(slot)
        self._fill(slot, self.server.error(BodyError(status, reason, detail), None, True), True)
        self.server.stats.count("other", status)

    # ---- parser callbacks -------------------------------------------------------------------
    def on_message_begin(self) -> None:
        self._reset()

    def on_url(self, url: bytes) -> None:
        self.url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        name = name.lower()
        if name in _WANTED:
            self.headers[name] = value

    def on_headers_complete(self) -> None:
        h = self.headers
        if self.parser.get_method() != b"POST":
            return
        length = h.get(b"content-length")
        chunked = b"chunked" in h.get(b"transfer-encoding", b"").lower()
        origin = h.get(b"origin")
        srv = self.server
        if length is None and not chunked:
            self.refused = srv.error(BodyError(411, "length_required",
                                               "a POST needs Content-Length (or chunked "
                                               "transfer encoding)"), origin)
            return
        if length is not None and length.strip().isdigit() and int(length) > srv.max_body:
            self._too_large(int(length))
            return
        if h.get(b"expect", b"").lower() == b"100-continue" and not self.slots and not self.out:
            assert self.transport is not None
            self.transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")

    def _too_large(self, size: int) -> None:
        self.refused = self.server.error(BodyError(
            413, "too_large", f"the body has {size} bytes or more, the limit is "
            f"{self.server.max_body} (LDP_GATEWAY_MAX_BODY)"), self.headers.get(b"origin"),
            close=True)
        # Answer now and close: the rest of the body is never read.
        slot = Slot()
        self.slots.append(slot)
        self.server.stats.count("reports", 413)
        self._fill(slot, self.refused, True)

    def on_body(self, body: bytes) -> None:
        if self.refused is not None:
            return
        self.body_len += len(body)
        if self.body_len > self.server.max_body:
            self.body.clear()
            self._too_large(self.body_len)
            return
        self.body.append(body)

    def on_message_complete(self) -> None:
        if self.closing:
            return
        keep = self.parser.should_keep_alive()
        slot = Slot()
        self.slots.append(slot)
        method = self.parser.get_method()
        url = self.url
        q = url.find(b"?")
        path = url if q < 0 else url[:q]
        srv = self.server
        origin = self.headers.get(b"origin")
        if path == REPORTS_PATH:
            if method == b"POST":
                self._post(slot, origin, keep)
                return
            if method == b"OPTIONS":
                srv.stats.count("preflight", 204)
                self._fill(slot, self._preflight(origin), not keep)
                return
            srv.stats.count("reports", 405)
            self._fill(slot, srv.error(BodyError(405, "method", "use POST"), origin), not keep)
            return
        if method not in (b"GET", b"HEAD"):
            srv.stats.count("other", 404 if path not in _GET_ROUTES else 405)
            err = (BodyError(404, "not_found", f"no route {path.decode('latin-1')!r}")
                   if path not in _GET_ROUTES else BodyError(405, "method", "use GET"))
            self._fill(slot, srv.error(err, origin), not keep)
            return
        if path == b"/healthz":
            srv.stats.count("healthz", 200)
            self._fill(slot, srv.response(200, b'{"status":"ok"}'), not keep,
                       head=method == b"HEAD")
        elif path == b"/metrics":
            body, ctype = srv.metrics()
            srv.stats.count("metrics", 200)
            self._fill(slot, srv.response(200, body, content_type=ctype.encode()), not keep,
                       head=method == b"HEAD")
        elif path == b"/readyz":
            asyncio.get_running_loop().create_task(self._readyz(slot, keep, method == b"HEAD"))
        else:
            srv.stats.count("other", 404)
            self._fill(slot, srv.error(BodyError(404, "not_found",
                                                 f"no route {path.decode('latin-1')!r}"),
                                       origin), not keep)

    # ---- routes -----------------------------------------------------------------------------
    def _preflight(self, origin: bytes | None) -> bytes:
        srv = self.server
        cors = srv.cors_headers(origin)
        if b"Allow-Origin" in cors:
            cors += (b"Access-Control-Allow-Methods: POST, OPTIONS\r\n"
                     b"Access-Control-Allow-Headers: " + _CORS_ALLOW_HEADERS + b"\r\n"
                     b"Access-Control-Max-Age: 600\r\n")
        return _STATUS[204] + cors + b"Content-Length: 0\r\n\r\n"

    async def _readyz(self, slot: Slot, keep: bool, head: bool) -> None:
        ok, details = await self.server.ready()
        code = 200 if ok else 503
        self.server.stats.count("readyz", code)
        body = json.dumps({"status": "ready" if ok else "not ready", **details}).encode()
        self._fill(slot, self.server.response(code, body), not keep, head=head)

    def _post(self, slot: Slot, origin: bytes | None, keep: bool) -> None:
        srv = self.server
        if self.refused is not None:
            status = int(self.refused[9:12])
            srv.stats.count("reports", status)
            if status == 413:  # already answered when the limit was passed
                self.slots.pop()
                return
            self._fill(slot, self.refused, not keep)
            return
        if srv.stopping:
            self._refuse(slot, origin, keep, 503, "unavailable", "the gateway is stopping")
            return
        h = self.headers
        body = self.body[0] if len(self.body) == 1 else b"".join(self.body)
        try:
            srv.authenticate(h.get(b"authorization"), h.get(b"x-ldp-key"))
            self._submit(slot, origin, keep, body)
        except UnknownCollection as unknown:
            asyncio.get_running_loop().create_task(
                self._post_unknown(slot, origin, keep, body, unknown))
        except BodyError as exc:
            self._reject(slot, origin, keep, exc)

    def _submit(self, slot: Slot, origin: bytes | None, keep: bool, body: bytes) -> None:
        """Parse the body and queue its messages, or answer why not.

        :class:`UnknownCollection` propagates: the catalogue may have to be read first.
        """
        srv = self.server
        try:
            msgs = parse_body(_media_type(self.headers.get(b"content-type")), body,
                              srv.catalogue(), self.headers.get(b"authorization"))
            srv.batcher.submit(msgs, len(body),
                               lambda result: self._answered(slot, origin, keep, result))
        except BodyError as exc:
            self._reject(slot, origin, keep, exc)
        except Overloaded as exc:
            self._refuse(slot, origin, keep, 429, "overloaded", str(exc))
        except Unavailable as exc:
            self._refuse(slot, origin, keep, 503, "unavailable", str(exc))

    def _reject(self, slot: Slot, origin: bytes | None, keep: bool, exc: BodyError) -> None:
        self.server.stats.count("reports", exc.status)
        self._fill(slot, self.server.error(exc, origin), not keep)

    def _refuse(self, slot: Slot, origin: bytes | None, keep: bool, status: int, reason: str,
                detail: str) -> None:
        self._reject(slot, origin, keep, BodyError(status, reason, detail))

    async def _post_unknown(self, slot: Slot, origin: bytes | None, keep: bool, body: bytes,
                            unknown: UnknownCollection) -> None:
        srv = self.server
        try:
            if not await srv.lookup(unknown.collection):
                raise BodyError(404, "unknown_collection", f"collection {unknown.collection!r}"
                                " is not in the catalogue", unknown.index)
            self._submit(slot, origin, keep, body)
        except UnknownCollection as again:
            self._reject(slot, origin, keep, BodyError(
                404, "unknown_collection", f"collection {again.collection!r} is not in the "
                "catalogue", again.index))
        except BodyError as exc:
            self._reject(slot, origin, keep, exc)
        except Exception as exc:  # Redis down: the catalogue cannot be read
            log.warning("catalogue lookup failed: %r", exc)
            self._refuse(slot, origin, keep, 503, "unavailable",
                         f"the collection catalogue cannot be read: {type(exc).__name__}")

    def _answered(self, slot: Slot, origin: bytes | None, keep: bool,
                  result: tuple[int, int] | BaseException) -> None:
        srv = self.server
        if not isinstance(result, BaseException):
            srv.stats.count("reports", 202)
            self._fill(slot, srv.accepted(result[0], result[1], origin), not keep)
            return
        exc = result
        if isinstance(exc, BodyError):
            srv.stats.count("reports", exc.status)
            self._fill(slot, srv.error(exc, origin), not keep)
        elif isinstance(exc, Unavailable):
            self._refuse(slot, origin, keep, 503, "unavailable", str(exc))
        else:
            log.error("internal error answering a request: %r", exc)
            self._refuse(slot, origin, keep, 500, "internal", "internal error")

    # ---- ordered writing --------------------------------------------------------------------
    def _fill(self, slot: Slot, data: bytes, close: bool, head: bool = False) -> None:
        if head:
            data = data[:data.index(b"\r\n\r\n") + 4]
        slot.data, slot.close = data, close
        slots = self.slots
        if self.transport is None or self.closing:
            slots.clear()
            return
        out = self.out
        was_empty = not out
        while slots and slots[0].data is not None:
            s = slots.popleft()
            out.append(s.data)  # type: ignore[arg-type]
            if s.close:
                self.closing = True  # nothing more is read or answered
                slots.clear()
                break
        if was_empty and out:
            self.server.schedule_write(self)

    def write_out(self) -> None:
        """Write the answers that became ready (called once per loop turn)."""
        out, self.out = self.out, []
        transport = self.transport
        if transport is None or not out:
            return
        transport.write(out[0] if len(out) == 1 else b"".join(out))
        if self.closing:
            transport.close()


_GET_ROUTES = {b"/healthz", b"/readyz", b"/metrics"}
_MTYPES: dict[bytes | None, str | None] = {}


def _media_type(raw: bytes | None) -> str | None:
    """:func:`~gateway.parse.media_type`, remembered for the few header values clients send."""
    try:
        return _MTYPES[raw]
    except KeyError:
        mt = media_type(raw)
        if len(_MTYPES) < 256:
            _MTYPES[raw] = mt
        return mt
