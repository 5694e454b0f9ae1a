"""The gateway's HTTP/1.1 server: an asyncio protocol over the ``httptools`` parser.

Why not an ASGI framework: at tens of thousands of tiny requests per second on one
core, the per-request cost of a framework (scope dicts, receive/send coroutines,
routing) is most of the budget.  Here one request costs one parser callback chain,
a dictionary lookup of the route, the body parse (:func:`gateway.parse.parse_body`)
and one pre-built response; the answer is a callback of the
:class:`~gateway.batcher.Batcher` (no task or future per request), and the answers
that become ready in one turn of the event loop leave in one write per connection.

HTTP features: keep-alive, pipelining (answers leave in request order),
``Content-Length`` or chunked bodies, ``Expect: 100-continue``, absolute-form targets,
HEAD, reading paused while a client does not read its answers.

Against hostile clients (see :class:`~gateway.config.Limits` and ``docs/gateway.md``), a
connection is
always in one phase with its own deadline, checked by a sweep (twice a second, and at
the next deadline when one comes sooner: deadlines hold to within 0.1 s):

* *open* (accepted, nothing received) and *head* (a request begun): the head must be
  complete ``head_timeout`` seconds after the connection opened or the request began,
  else 408 (a connection that sent nothing is closed without a word);
* *body*: the body must arrive at ``body_min_rate`` bytes/s, with a credit of
  ``body_grace`` seconds (a stall of the grace, or a slower average, gets 408);
* *idle* (keep-alive between requests): closed after ``idle_timeout``;
* *done* (answered with ``Connection: close``): the rest of the input is read and
  dropped for at most :data:`LINGER` seconds so the answer is not lost to a reset.

A head longer than ``max_head`` bytes or with more than ``max_headers`` fields gets 431,
a target longer than ``max_target`` 414, as soon as the limit is passed (the rest is
never read).  A POST to ``/v1/reports`` is authenticated when its head is complete
(:mod:`gateway.auth`), before any byte of its body is read or ``100 Continue`` sent;
the bodies being received share one budget of ``body_budget`` bytes (503 with
``Retry-After`` beyond it).  Early refusals answer at once and close the connection.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import json
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable
from http import HTTPStatus
from typing import Any, cast

import httptools

from ldpstream.catalogue import CatalogueUnavailable

from .auth import Authenticator, AuthError, FailureThrottle, IPNetwork, client_address
from .batcher import Batcher, Overloaded, Unavailable
from .config import Limits
from .parse import BodyError, Catalogue, UnknownCollection, media_type, parse_body

__all__ = ["GatewayServer", "Limits", "Stats"]

log = logging.getLogger("ldpstream.gateway")

REPORTS_PATH = b"/v1/reports"
_CORS_ALLOW_HEADERS = b"Authorization, Content-Type, X-LDP-Key, Idempotency-Key"
_WANTED = frozenset({b"content-type", b"content-length", b"origin", b"transfer-encoding",
                     b"expect", b"access-control-request-method", b"host", b"authorization",
                     b"x-ldp-key"})  # Authorization also carries Privacy Pass tokens

LINGER = 2.0
"""Seconds a connection answered with ``Connection: close`` keeps reading (and dropping)
its client's input before it is cut."""

SWEEP = 0.5
"""Seconds between two checks of the deadlines, at most ..."""

SWEEP_MIN = 0.1
"""... and at least (when a deadline is near): deadlines are kept to within this."""

# Connection phases (see the module docstring).
_OPEN, _IDLE, _HEAD, _BODY, _DONE = range(5)

try:  # glibc keeps freed heap pages; after a burst of large bodies, hand them back
    _malloc_trim: Callable[[int], int] | None = ctypes.CDLL(
        ctypes.util.find_library("c") or "libc.so.6").malloc_trim
except (OSError, AttributeError):  # pragma: no cover - not glibc
    _malloc_trim = None


class Stats:
    """Plain counters of the hot path (read by the metrics collector at scrape time)."""

    def __init__(self) -> None:
        self.requests: dict[tuple[str, int], int] = {}
        """(route, status) → requests answered."""
        self.rejected: dict[str, int] = {}
        """reason → requests refused with 4xx/5xx."""
        self.closed: dict[str, int] = {}
        """reason → connections closed without an answer (idle, no request, not reading)."""
        self.connections = 0

    def count(self, route: str, status: int) -> None:
        key = (route, status)
        self.requests[key] = self.requests.get(key, 0) + 1


def _status_line(code: int) -> bytes:
    return f"HTTP/1.1 {code} {HTTPStatus(code).phrase}\r\n".encode()


_STATUS = {c: _status_line(c) for c in (200, 202, 204, 400, 401, 403, 404, 405, 408, 411, 413,
                                         414, 415, 429, 431, 500, 503)}


class _Refusal(Exception):
    """Raised in a parser callback: answer ``error`` at once and close (``route`` for the
    request counter, ``retry_after`` for its header)."""

    def __init__(self, error: BodyError, route: str = "reports",
                 retry_after: int | None = None) -> None:
        super().__init__(error.reason)
        self.error, self.route, self.retry_after = error, route, retry_after


class Slot:
    """The answer of one request, in the order requests came on the connection."""

    __slots__ = ("data", "close", "head_only")

    def __init__(self, head_only: bool = False) -> None:
        self.data: bytes | None = None
        self.close = False
        self.head_only = head_only


class GatewayServer:
    """Routes, authentication, CORS, limits and the glue between the protocol and the batcher.

    Parameters
    ----------
    catalogue : callable
        Returns the current :class:`~gateway.parse.Catalogue`.
    lookup : async callable
        ``lookup(collection_id) -> bool``: look for one collection missing from the
        catalogue (True if the catalogue now has it); raises
        :class:`~ldpstream.catalogue.CatalogueUnavailable` when that cannot be told.
    known_absent : callable
        ``known_absent(collection_id) -> bool``: True if it was looked for a moment ago
        (answered 404 without a lookup).
    batcher : Batcher
    authenticator : Authenticator or None
        Called with the head of every POST to ``/v1/reports`` (None: no credential needed).
    throttle : FailureThrottle or None
        Failed authentications per client address.
    trusted_proxies : tuple of networks
        Peers whose ``X-Forwarded-For`` names the client.
    cors_origins : tuple of str
        ``("*",)``, a list of origins, or empty (no CORS headers).
    limits : Limits
        What one client may take (:meth:`gateway.config.GatewaySettings.limits`).
    retry_after : int
    ready : async callable
        ``ready() -> (ok, details)`` for ``/readyz``.
    metrics : callable
        ``metrics() -> (body, content_type)`` for ``/metrics``.
    """

    def __init__(self, *, catalogue: Callable[[], Catalogue],
                 lookup: Callable[[str], Awaitable[bool]], batcher: Batcher,
                 cors_origins: tuple[str, ...], retry_after: int,
                 ready: Callable[[], Awaitable[tuple[bool, dict[str, Any]]]],
                 metrics: Callable[[], tuple[bytes, str]],
                 known_absent: Callable[[str], bool] | None = None,
                 authenticator: Authenticator | None = None,
                 throttle: FailureThrottle | None = None,
                 trusted_proxies: tuple[IPNetwork, ...] = (),
                 limits: Limits) -> None:
        self.catalogue, self.lookup, self.batcher = catalogue, lookup, batcher
        self.known_absent = known_absent or (lambda cid: False)
        self.authenticator = authenticator
        self.throttle = throttle or FailureThrottle(burst=20, rate=1.0)
        self.trusted_proxies = trusted_proxies
        self.wanted = _WANTED | (authenticator.headers if authenticator else frozenset()) | (
            {b"x-forwarded-for"} if trusted_proxies else frozenset())
        self.cors_any = "*" in cors_origins
        self.cors_origins = {o.encode() for o in cors_origins if o != "*"}
        self.cors_on = bool(cors_origins)
        self.retry_after = retry_after
        self.ready, self.metrics = ready, metrics
        self.limits = limits
        # the limits again as plain attributes: the hot path reads them per request
        self.max_body, self.max_head = limits.max_body, limits.max_head
        self.max_headers, self.max_target = limits.max_headers, limits.max_target
        self.body_budget, self.body_grace = limits.body_budget, limits.body_grace
        self.seconds_per_byte = 1.0 / limits.body_min_rate
        self.max_connections = limits.max_connections
        self.body_buffered = 0
        """Bytes of bodies being received now (all connections)."""
        self.body_peak = 0
        self.clock = time.monotonic()
        """Monotonic time of the last read or sweep (read by the hot path instead of a
        clock call per request)."""
        self.stats = Stats()
        self.connections: set[HttpProtocol] = set()
        self._retry_header = f"Retry-After: {retry_after}\r\n".encode()
        self._sweeper: asyncio.TimerHandle | None = None
        self._sweeps = 0
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

    def error(self, exc: BodyError, origin: bytes | None, close: bool = False,
              extra: bytes = b"", retry_after: int | None = None) -> bytes:
        self.stats.rejected[exc.reason] = self.stats.rejected.get(exc.reason, 0) + 1
        if retry_after is not None:
            extra += b"Retry-After: %d\r\n" % retry_after
        elif exc.status in (429, 503):
            extra += self._retry_header
        if exc.www_authenticate:
            extra += b"WWW-Authenticate: " + exc.www_authenticate.encode() + b"\r\n"
        return self.response(exc.status, json.dumps(exc.body()).encode(), origin=origin,
                             extra=extra, close=close)

    def accepted(self, messages: int, reports: int, origin: bytes | None) -> bytes:
        body = b'{"accepted_messages":%d,"accepted_reports":%d}' % (messages, reports)
        return self.response(202, body, origin=origin)

    # ---- deadlines -------------------------------------------------------------------------
    def start_sweeper(self) -> None:
        loop = asyncio.get_running_loop()
        due = time.monotonic() + SWEEP

        def sweep() -> None:
            nonlocal due
            if time.monotonic() - due > 0.25 and due > 0:
                # The loop was busy for a while: let it read what came meanwhile before
                # anyone is judged (a client is not late because the gateway was).
                due = 0.0
                self._sweeper = loop.call_later(0.005, sweep)
                return
            wait = self.sweep()
            due = time.monotonic() + wait
            self._sweeper = loop.call_later(wait, sweep)
        self._sweeper = loop.call_later(SWEEP, sweep)

    def sweep(self) -> float:
        """Close or answer 408 every connection past its deadline; the seconds until the
        next sweep: :data:`SWEEP`, or less (not under :data:`SWEEP_MIN`) when a deadline
        comes sooner, so a deadline is kept to within ``SWEEP_MIN`` seconds."""
        now = self.clock = time.monotonic()
        lim = self.limits
        head_timeout, idle_timeout = lim.head_timeout, lim.idle_timeout
        soonest = now + SWEEP
        for conn in list(self.connections):
            phase = conn.phase
            if phase == _IDLE:
                if not conn.slots and not conn.out:
                    end = conn.began + idle_timeout
                    if now > end:
                        conn.drop("idle")
                    elif end < soonest:
                        soonest = end
            elif phase == _HEAD:
                end = conn.began + head_timeout
                if now > end:
                    conn.timeout("head_timeout", f"the request's head did not arrive within "
                                 f"{head_timeout:g} s (LDP_GATEWAY_HEAD_TIMEOUT)")
                elif end < soonest:
                    soonest = end
            elif phase == _BODY:
                credit = conn.body_credit(now, lim)
                if credit < 0:
                    conn.timeout("body_too_slow", f"the body came slower than "
                                 f"{lim.body_min_rate:g} bytes/s after a grace of "
                                 f"{lim.body_grace:g} s (LDP_GATEWAY_BODY_MIN_RATE, "
                                 "LDP_GATEWAY_BODY_GRACE)")
                elif now + credit < soonest:
                    soonest = now + credit
            elif phase == _OPEN:
                end = conn.began + head_timeout
                if now > end:
                    conn.drop("no_request")
                elif end < soonest:
                    soonest = end
            elif conn.linger_until and now > conn.linger_until:
                conn.abort()
            if conn.paused and now - conn.paused_at > idle_timeout:
                conn.drop("not_reading")  # it does not read its answers
        self._sweeps += 1
        if self._sweeps % 20 == 0:
            self.throttle.prune()
        if self.body_peak > (8 << 20) and self.body_buffered == 0:
            self.body_peak = 0
            if _malloc_trim is not None:  # the bodies are gone: give their pages back
                _malloc_trim(0)
        return min(SWEEP, max(SWEEP_MIN, soonest - now + 0.001))

    def stop_sweeper(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()

    def protocol(self) -> HttpProtocol:
        return HttpProtocol(self)

    # ---- writing ---------------------------------------------------------------------------
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
    """One client connection; also the :class:`~gateway.auth.RequestHead` of its current
    request (``method``, ``path``, ``headers``, ``client``)."""

    def __init__(self, server: GatewayServer) -> None:
        self.server = server
        self.parser = httptools.HttpRequestParser(self)
        self.transport: asyncio.Transport | None = None
        self.slots: deque[Slot] = deque()
        self.closing = False
        self.paused = False
        self.paused_at = 0.0
        self.out: list[bytes] = []
        self.phase = _OPEN
        self.began = server.clock
        """When the phase began (the connection, the request, the body, the last answer)."""
        self.held = 0
        """Bytes of the current body counted in the server's ``body_buffered``."""
        self.credit = 0.0
        self.swept = (0, 0, 0.0)  # (head number, body bytes, time) at the last sweep
        self.linger_until = 0.0
        self.head_bytes = 0
        self.heads = 0
        self.trusted = False
        """True once a request of this connection has authenticated (never throttled)."""
        self.principal: object = None
        self.peer = ""
        self.method = b""
        self.path = b""
        self.wanted = server.wanted
        # the fields of the current request (reset by on_message_begin)
        self.url = b""
        self.headers: dict[bytes, bytes] = {}
        self.nheaders = self.hosts = self.body_len = 0
        self.body: list[bytes] = []
        self.refused: bytes | None = None  # an answer decided before the body ended

    @property
    def client(self) -> str:
        """The client address (see :func:`gateway.auth.client_address`)."""
        srv = self.server
        return client_address(self.peer, self.headers.get(b"x-forwarded-for"),
                              srv.trusted_proxies)

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
            self.phase = _DONE
            return
        srv.connections.add(self)
        srv.stats.connections += 1
        self.began = srv.clock = time.monotonic()
        peer = transport.get_extra_info("peername")
        self.peer = str(peer[0]) if isinstance(peer, tuple) and peer else ""

    def connection_lost(self, exc: Exception | None) -> None:
        self.closing = True
        self.phase = _DONE
        self._release_body()
        self.server.connections.discard(self)

    def data_received(self, data: bytes) -> None:
        srv = self.server
        srv.clock = time.monotonic()
        self._read(data)
        if self.phase == _BODY and self.body_len != self.held:
            self._hold()  # a body goes on past this read: it now holds memory

    def _read(self, data: bytes) -> None:
        """Feed one read to the parser so that at most ``max_head`` bytes of a head reach it
        (the parser keeps a head whole): a read that starts in a head and holds more than
        that is fed in pieces (memoryview slices, no copies) cut at the end of the head; a
        head that does not end within the limit gets 431.  A head that follows the end of
        a body in the same read is bounded by the read (at most 256 KiB), then by the
        limit from the next read on."""
        srv = self.server
        pos, size = 0, len(data)
        view: memoryview | None = None
        while True:
            phase = self.phase
            if phase == _DONE:  # answered with Connection: close: dropped unread
                return
            rest = size - pos
            heads = self.heads
            if phase != _BODY:
                n = self.head_bytes + rest
                if n > srv.max_head:
                    # more than a head's worth: feed up to the end of this head (or up to
                    # the limit, then 431); what follows is its body or the next head
                    allowed = srv.max_head - self.head_bytes
                    end = data.find(b"\r\n\r\n", pos, pos + allowed)
                    stop = end + 4 if end >= 0 else pos + allowed
                    self.head_bytes = srv.max_head
                    if view is None:
                        view = memoryview(data)
                    if stop > pos:
                        self._feed(view[pos:stop])
                    pos = stop
                    if self.phase == _DONE:
                        return
                    if self.heads == heads:  # no head ended within the limit
                        self._refuse_now(self._head_refusal())
                        return
                    if pos >= size:
                        return
                    continue
                self.head_bytes = n
            # the rest of the read at once (the common case: it is small, or a body)
            self._feed(data if view is None else view[pos:])
            return

    def _feed(self, data: bytes | memoryview) -> None:
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserCallbackError as exc:
            cause = exc.__context__
            if isinstance(cause, _Refusal):
                self._refuse_now(cause)
            else:
                log.error("internal error reading a request: %r", cause)
                self._refuse_now(_Refusal(BodyError(500, "internal", "internal error"),
                                          "other"))
        except httptools.HttpParserUpgrade:
            self._refuse_now(_Refusal(BodyError(400, "upgrade", "protocol upgrades are not "
                                                "supported"), "other"))
        except httptools.HttpParserError as exc:
            self._refuse_now(_Refusal(BodyError(400, "bad_request", f"malformed HTTP: {exc}"),
                                      "other"))

    def pause_writing(self) -> None:  # the client does not read its answers: stop reading
        if self.transport is not None and not self.paused:
            self.paused = True
            self.paused_at = self.server.clock
            self.transport.pause_reading()

    def resume_writing(self) -> None:
        if self.transport is not None and self.paused:
            self.paused = False
            self.transport.resume_reading()

    def close(self) -> None:
        self.closing = True
        self.phase = _DONE
        if self.transport is not None:
            self.transport.close()

    def abort(self) -> None:
        self.closing = True
        self.phase = _DONE
        if self.transport is not None:
            self.transport.abort()

    def drop(self, reason: str) -> None:
        """Close without an answer (idle, never sent a request, does not read)."""
        closed = self.server.stats.closed
        closed[reason] = closed.get(reason, 0) + 1
        if reason == "not_reading":
            self.abort()  # its unread answers would hold a graceful close forever
        else:
            self.close()

    def timeout(self, reason: str, detail: str) -> None:
        """408 and close: the head or the body did not come in time."""
        route = "reports" if self.phase == _BODY and self.path == REPORTS_PATH else "other"
        self._refuse_now(_Refusal(BodyError(408, reason, detail), route))

    def body_credit(self, now: float, lim: Limits) -> float:
        """Seconds of credit left to the body being received (< 0: too slow): a token
        bucket of at most ``body_grace`` s, spent by time, earned at 1 s per
        ``body_min_rate`` bytes (updated here, at each sweep, not per read)."""
        heads, got, at = self.swept
        if heads != self.heads:  # a body not seen before: full credit from its start
            got, at, self.credit = 0, self.began, lim.body_grace
        size = self.body_len
        credit = self.credit - (now - at) + (size - got) / lim.body_min_rate
        self.credit = credit if credit < lim.body_grace else lim.body_grace
        self.swept = (self.heads, size, now)
        return self.credit

    def _hold(self) -> None:
        """Count the part of the current body received so far in the shared budget."""
        srv = self.server
        srv.body_buffered += self.body_len - self.held
        self.held = self.body_len
        if srv.body_buffered > srv.body_peak:
            srv.body_peak = srv.body_buffered
            if srv.body_buffered > srv.body_budget:
                self._refuse_now(_Refusal(_over_budget(srv)))

    def _release_body(self) -> None:
        if self.held:
            self.server.body_buffered -= self.held
            self.held = 0
        self.body = []

    def _refuse_now(self, refusal: _Refusal) -> None:
        """Answer ``refusal`` after the answers before it, then close; read nothing more."""
        if self.phase == _DONE:
            return
        self.phase = _DONE
        self._release_body()
        srv = self.server
        err = refusal.error
        try:
            head_only = self.parser.get_method() == b"HEAD"
        except httptools.HttpParserError:  # pragma: no cover - no request line yet
            head_only = False
        slot = Slot(head_only)
        self.slots.append(slot)
        srv.stats.count(refusal.route, err.status)
        self._fill(slot, srv.error(err, self.headers.get(b"origin"), close=True,
                                   retry_after=refusal.retry_after), True)

    # ---- parser callbacks -------------------------------------------------------------------
    def on_message_begin(self) -> None:
        # the fields of one request (set here, not in a helper: this runs per request)
        self.url = b""
        self.headers = {}
        self.nheaders = self.hosts = self.body_len = 0
        self.body = []
        self.refused = None
        if self.phase != _OPEN:  # a new connection's deadline runs from its opening
            self.began = self.server.clock
        self.phase = _HEAD

    def on_url(self, url: bytes) -> None:
        self.url += url  # its length is checked with the head's (bounded by max_head)

    def on_header(self, name: bytes, value: bytes) -> None:
        self.nheaders += 1
        name = name.lower()
        if name in self.wanted:
            if name == b"host":
                self.hosts += 1
            self.headers[name] = value

    def _head_refusal(self) -> _Refusal:
        """431 or 414: the head, its fields or its target is too long (the limit named)."""
        srv = self.server
        if len(self.url) > srv.max_target:
            return _Refusal(BodyError(414, "target_too_long", f"the request target is longer "
                                      f"than {srv.max_target} bytes (LDP_GATEWAY_MAX_TARGET)"),
                            "other")
        if self.nheaders > srv.max_headers:
            return _Refusal(BodyError(431, "too_many_headers", f"the request has more than "
                                      f"{srv.max_headers} header fields "
                                      "(LDP_GATEWAY_MAX_HEADERS)"), "other")
        return _Refusal(BodyError(431, "head_too_large", f"the request's head is longer than "
                                  f"{srv.max_head} bytes (LDP_GATEWAY_MAX_HEAD)"), "other")

    def on_headers_complete(self) -> None:
        srv = self.server
        self.heads += 1
        self.phase = _BODY
        self.head_bytes = 0
        self.began = srv.clock
        url = self.url
        if len(url) > srv.max_target or self.nheaders > srv.max_headers:
            raise self._head_refusal()
        method = self.method = self.parser.get_method()
        if url[:1] == b"/":
            q = url.find(b"?")
            path = self.path = url if q < 0 else url[:q]
        else:
            path = self.path = _origin_path(url)
        if self.hosts != 1 and (self.hosts or self.parser.get_http_version() != "1.0"):
            raise _Refusal(BodyError(400, "missing_host", "an HTTP/1.1 request needs exactly "
                                     "one Host header"), "other")
        if path != REPORTS_PATH or method != b"POST":
            self.refused = b""  # no other route reads a body: dropped as it comes
            return
        # A report: the lengths, the credential, the body budget, then 100 Continue, all
        # before any byte of the body is read.
        h = self.headers
        length = h.get(b"content-length")
        declared = 0
        if length is None:
            if b"chunked" not in h.get(b"transfer-encoding", b"").lower():
                self.refused = srv.error(BodyError(411, "length_required",
                                                   "a POST needs Content-Length (or chunked "
                                                   "transfer encoding)"), h.get(b"origin"))
                return
        elif length.isdigit():
            declared = int(length)
            if declared > srv.max_body:
                raise _Refusal(self._too_large(declared))
        if srv.authenticator is not None:
            self._authenticate(srv.authenticator)
        if srv.body_buffered + declared > srv.body_budget:
            raise _Refusal(_over_budget(srv))
        if b"expect" in h and h[b"expect"].lower() == b"100-continue" and not self.slots \
                and not self.out:
            assert self.transport is not None
            self.transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")

    def _authenticate(self, authenticator: Authenticator) -> None:
        throttle = self.server.throttle
        client = None
        if throttle.active and not self.trusted:
            client = self.client
            wait = throttle.wait(client)
            if wait > 0:
                raise _Refusal(BodyError(429, "auth_throttled", "too many failed "
                                         "authentications from this address; retry later"),
                               retry_after=throttle.retry_after(wait))
        try:
            self.principal = authenticator.authenticate(self)
        except AuthError as exc:
            throttle.failed(client or self.client)
            raise _Refusal(exc) from None
        self.trusted = True

    def _too_large(self, size: int) -> BodyError:
        return BodyError(413, "too_large", f"the body has {size} bytes or more, the limit is "
                         f"{self.server.max_body} (LDP_GATEWAY_MAX_BODY)")

    def on_body(self, body: bytes) -> None:
        if self.refused is not None:
            return
        size = self.body_len = self.body_len + len(body)
        if size > self.server.max_body:
            raise _Refusal(self._too_large(size))
        self.body.append(body)

    def on_message_complete(self) -> None:
        if self.closing:
            return
        srv = self.server
        self.phase = _IDLE  # idle from the last answer on (see write_out)
        if self.held:  # the body is whole: it leaves the budget (the batcher's queue bounds
            srv.body_buffered -= self.held  # it from here on)
            self.held = 0
        keep = self.parser.should_keep_alive()
        method, path = self.method, self.path
        slot = Slot(method == b"HEAD")
        self.slots.append(slot)
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
            self._fill(slot, srv.error(BodyError(405, "method", "use POST"), origin,
                                       extra=b"Allow: POST, OPTIONS\r\n"), not keep)
            return
        if path in _GET_ROUTES:
            if method != b"GET" and method != b"HEAD":
                srv.stats.count("other", 405)
                self._fill(slot, srv.error(BodyError(405, "method", "use GET"), origin,
                                           extra=b"Allow: GET, HEAD\r\n"), not keep)
            elif path == b"/healthz":
                srv.stats.count("healthz", 200)
                self._fill(slot, srv.response(200, b'{"status":"ok"}'), not keep)
            elif path == b"/metrics":
                body, ctype = srv.metrics()
                srv.stats.count("metrics", 200)
                self._fill(slot, srv.response(200, body, content_type=ctype.encode()),
                           not keep)
            else:
                asyncio.get_running_loop().create_task(self._readyz(slot, keep))
            return
        if path == b"*" and method == b"OPTIONS":
            srv.stats.count("other", 204)
            self._fill(slot, _STATUS[204] + b"Allow: GET, HEAD, POST, OPTIONS\r\n"
                       b"Content-Length: 0\r\n\r\n", not keep)
            return
        srv.stats.count("other", 404)
        self._fill(slot, srv.error(BodyError(404, "not_found", f"no route "
                                             f"{path.decode('latin-1')[:200]!r}"), origin),
                   not keep)

    # ---- routes -----------------------------------------------------------------------------
    def _preflight(self, origin: bytes | None) -> bytes:
        srv = self.server
        cors = srv.cors_headers(origin)
        if b"Allow-Origin" in cors:
            cors += (b"Access-Control-Allow-Methods: POST, OPTIONS\r\n"
                     b"Access-Control-Allow-Headers: " + _CORS_ALLOW_HEADERS + b"\r\n"
                     b"Access-Control-Max-Age: 600\r\n")
        return _STATUS[204] + cors + b"Content-Length: 0\r\n\r\n"

    async def _readyz(self, slot: Slot, keep: bool) -> None:
        ok, details = await self.server.ready()
        code = 200 if ok else 503
        self.server.stats.count("readyz", code)
        body = json.dumps({"status": "ready" if ok else "not ready", **details}).encode()
        self._fill(slot, self.server.response(code, body), not keep)

    def _post(self, slot: Slot, origin: bytes | None, keep: bool) -> None:
        srv = self.server
        if self.refused is not None:
            srv.stats.count("reports", int(self.refused[9:12]))
            self._fill(slot, self.refused, not keep)
            return
        if srv.stopping:
            self._refuse(slot, origin, keep, 503, "unavailable", "the gateway is stopping")
            return
        body = self.body[0] if len(self.body) == 1 else b"".join(self.body)
        try:
            self._submit(slot, origin, keep, body)
        except UnknownCollection as unknown:
            if srv.known_absent(unknown.collection):  # looked for a moment ago
                self._unknown(slot, origin, keep, unknown)
            else:
                asyncio.get_running_loop().create_task(
                    self._post_unknown(slot, origin, keep, body, unknown))

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

    def _unknown(self, slot: Slot, origin: bytes | None, keep: bool,
                 unknown: UnknownCollection) -> None:
        self._reject(slot, origin, keep, BodyError(
            404, "unknown_collection", f"collection {unknown.collection!r} is not in the "
            "catalogue", unknown.index))

    async def _post_unknown(self, slot: Slot, origin: bytes | None, keep: bool, body: bytes,
                            unknown: UnknownCollection) -> None:
        try:
            if not await self.server.lookup(unknown.collection):
                self._unknown(slot, origin, keep, unknown)
                return
            self._submit(slot, origin, keep, body)
        except UnknownCollection as again:
            self._unknown(slot, origin, keep, again)
        except CatalogueUnavailable as exc:  # Redis away: not the same as "unknown"
            self._refuse(slot, origin, keep, 503, "catalogue_unavailable", str(exc))

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
    def _fill(self, slot: Slot, data: bytes, close: bool) -> None:
        if slot.head_only:  # the answer to HEAD: the head of the GET's, no body
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
                self.phase = _DONE
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
            self._linger(transport)
        elif self.phase == _IDLE:
            self.began = self.server.clock  # idle from the last answer on

    def _linger(self, transport: asyncio.Transport) -> None:
        """Half-close after the last answer and drop the client's input a while, so that
        unread input does not turn the close into a reset that loses the answer."""
        if self.linger_until:
            return
        self.linger_until = self.server.clock + LINGER
        try:
            if transport.can_write_eof():
                transport.write_eof()
                return
        except (OSError, RuntimeError):  # pragma: no cover - already closing
            pass
        transport.close()


def _over_budget(srv: GatewayServer) -> BodyError:
    return BodyError(503, "body_budget", f"the gateway holds {srv.body_buffered} bytes of "
                     f"bodies being received, its budget is {srv.body_budget} "
                     "(LDP_GATEWAY_BODY_BUDGET); retry later")


def _origin_path(url: bytes) -> bytes:
    """The path of an absolute-form target (``http://host/path?query``, RFC 9112 §3.2.2),
    ``*`` for the asterisk form; anything else is not a path of ours."""
    scheme, sep, rest = url.partition(b"://")
    if not sep or scheme.lower() not in (b"http", b"https"):
        return url
    slash = rest.find(b"/")
    if slash < 0:
        return b"/"
    path = rest[slash:]
    q = path.find(b"?")
    return path if q < 0 else path[:q]


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
