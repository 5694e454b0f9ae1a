"""``Idempotency-Key`` on ``POST /v1/reports``: a retried request is counted once.

Semantics of draft-ietf-httpapi-idempotency-key-header: the client puts a unique key on
each request (``Idempotency-Key: "8e03978e-40d5-43e8-bc93-6894a57f9324"``, a structured
string; a bare token is taken too) and reuses it, with the same body, when it retries.

* first request of a key: processed as any request; a 202 is remembered for
  ``LDP_GATEWAY_IDEMPOTENCY_TTL_S`` (any other answer is forgotten: a retry is processed
  again);
* the same key and body again: the remembered answer, with ``Idempotent-Replayed: true``;
* the same key while the first request is still in flight: 409 ``idempotency_in_flight``
  (``Retry-After``);
* the same key with another body: 422 ``idempotency_key_reused``;
* a malformed key (empty, over 255 characters, not visible ASCII): 400 ``idempotency_key``.

Keys are scoped by the device key's fleet (no fleet without device keys) and kept in
Redis as ``P idem:{digest}``, ``digest`` = SHA-256 of scope and key; the *fingerprint*
of a request is the SHA-256 of its media type and body.

Why this is enough for exactly once: the gateway's marker and the broker's log cannot
change together.  If the gateway dies after the broker acknowledged a request but before
the marker says so, the marker stays "in flight" until it expires (the longest a request
can be in flight), and the retry after that is processed again.  So the Kafka records of
a keyed request are never merged with other requests' and carry the header
``ldp-request: <digest>.<part>.<expiry ms>``: the worker counts each (collection,
digest, part) once, whatever the number of copies in the log (see
:meth:`aggregator.accumulator.Accumulator.process`).  Device retries of a request that
reached the log are therefore counted once, answered or not.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from typing import Any

from ldpstream.storage import DEFAULT_PREFIX

from .parse import BodyError, UnknownCollection

__all__ = ["IdempotentPosts", "IdempotencyStore", "fingerprint", "parse_key",
           "request_digest", "MAX_KEY_LENGTH"]

log = logging.getLogger("ldpstream.gateway")

MAX_KEY_LENGTH = 255
REPLAYED = b"Idempotent-Replayed: true\r\n"

_BEGIN = """
-- KEYS[1] = marker; ARGV = fingerprint, in-flight ms.  The marker as it was (nil: new).
local v = redis.call('GET', KEYS[1])
if v then return v end
redis.call('SET', KEYS[1], 'p ' .. ARGV[1], 'PX', ARGV[2])
return false
"""
_FINISH = """
-- KEYS[1] = marker; ARGV = fingerprint, done value, window ms
local v = redis.call('GET', KEYS[1])
if v and v ~= 'p ' .. ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
return 1
"""
_ABANDON = """
-- KEYS[1] = marker; ARGV = fingerprint
if redis.call('GET', KEYS[1]) == 'p ' .. ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


def parse_key(raw: bytes) -> str:
    """The key of an ``Idempotency-Key`` header value, or :class:`BodyError` 400.

    >>> parse_key(b'"8e03978e-40d5"'), parse_key(b'abc-1')
    ('8e03978e-40d5', 'abc-1')
    >>> try:
    ...     parse_key(b'""')
    ... except BodyError as exc:
    ...     print(exc.status, exc.reason)
    400 idempotency_key
    """
    value = raw.strip()
    if len(value) >= 2 and value[:1] == b'"' and value[-1:] == b'"':
        value = value[1:-1]
    if not 1 <= len(value) <= MAX_KEY_LENGTH or any(
            b < 0x20 or b > 0x7E or b in (0x22, 0x5C) for b in value):
        raise BodyError(400, "idempotency_key",
                        f"Idempotency-Key must be 1 to {MAX_KEY_LENGTH} visible ASCII characters "
                        "(a quoted string or a token)")
    return value.decode("ascii")


def request_digest(scope: str, key: str) -> str:
    """The Redis and Kafka name of a key within its scope (the fleet; "" without keys).

    >>> request_digest("", "k") == request_digest("", "k") != request_digest("f", "k")
    True
    """
    return hashlib.sha256(f"{scope}\0{key}".encode()).hexdigest()[:32]


def fingerprint(content_type: bytes | None, body: bytes) -> str:
    """What makes two requests with one key "the same": media type and body."""
    h = hashlib.sha256((content_type or b"").split(b";")[0].strip().lower())
    h.update(b"\0")
    h.update(body)
    return h.hexdigest()[:32]


class IdempotencyStore:
    """The markers of ``P idem:{digest}`` (an async ``redis.asyncio`` client).

    ``ttl_s``: how long a 202 is remembered; ``inflight_s``: how long a request may stay
    unanswered (then its marker expires, and a retry is processed again).
    """

    def __init__(self, redis: Any, prefix: str = DEFAULT_PREFIX, *, ttl_s: float,
                 inflight_s: float) -> None:
        self.redis, self.prefix = redis, prefix
        self.ttl_ms, self.inflight_ms = int(ttl_s * 1000), int(inflight_s * 1000)
        self._begin = redis.register_script(_BEGIN)
        self._finish = redis.register_script(_FINISH)
        self._abandon = redis.register_script(_ABANDON)

    def key(self, digest: str) -> str:
        return f"{self.prefix}idem:{digest}"

    async def begin(self, digest: str, fp: str) -> tuple[str, tuple[int, bytes] | None]:
        """``("new", None)`` (now in flight), ``("replay", (status, body))``,
        ``("in_flight", None)`` or ``("mismatch", None)``."""
        old = await self._begin(keys=[self.key(digest)], args=[fp, self.inflight_ms])
        if old is None:
            return "new", None
        old = old if isinstance(old, bytes) else str(old).encode()
        kind, _, rest = old.partition(b" ")
        theirs, _, rest = rest.partition(b" ")
        if theirs.decode() != fp:
            return "mismatch", None
        if kind == b"p":
            return "in_flight", None
        status, _, body = rest.partition(b" ")
        return "replay", (int(status), body)

    async def finish(self, digest: str, fp: str, status: int, body: bytes) -> None:
        done = b"d " + fp.encode() + b" " + str(status).encode() + b" " + body
        await self._finish(keys=[self.key(digest)], args=[fp, done, self.ttl_ms])

    async def abandon(self, digest: str, fp: str) -> None:
        await self._abandon(keys=[self.key(digest)], args=[fp])


class IdempotentPosts:
    """Runs a ``POST /v1/reports`` that carries an ``Idempotency-Key`` on one connection
    (:class:`gateway.server.HttpProtocol`): check the marker, then process the request as
    any other with its Kafka records tagged, and remember a 202 before it is sent."""

    def __init__(self, store: IdempotencyStore) -> None:
        self.store = store
        self.replayed = 0
        self._tasks: set[asyncio.Task[None]] = set()

    def start(self, conn: Any, slot: Any, origin: bytes | None, keep: bool, body: bytes,
              raw_key: bytes, scope: str) -> None:
        task = asyncio.get_running_loop().create_task(
            self.post(conn, slot, origin, keep, body, raw_key, scope))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def post(self, conn: Any, slot: Any, origin: bytes | None, keep: bool, body: bytes,
                   raw_key: bytes, scope: str) -> None:
        srv = conn.server
        try:
            digest = request_digest(scope, parse_key(raw_key))
        except BodyError as exc:
            conn._reject(slot, origin, keep, exc)
            return
        fp = fingerprint(conn.headers.get(b"content-type"), body)
        try:
            state, answer = await self.store.begin(digest, fp)
        except Exception as exc:  # noqa: BLE001 - Redis away: no promise can be kept
            log.warning("idempotency marker unreadable: %r", exc)
            conn._refuse(slot, origin, keep, 503, "unavailable",
                         "the idempotency keys cannot be read (Redis)")
            return
        if state == "replay":
            assert answer is not None
            self.replayed += 1
            srv.stats.count("reports", answer[0])
            conn._fill(slot, srv.response(answer[0], answer[1], origin=origin, extra=REPLAYED),
                       not keep)
            return
        if state == "in_flight":
            conn._reject(slot, origin, keep, BodyError(
                409, "idempotency_in_flight", "a request with this Idempotency-Key is still "
                "being processed; retry after Retry-After seconds"))
            return
        if state == "mismatch":
            conn._reject(slot, origin, keep, BodyError(
                422, "idempotency_key_reused", "this Idempotency-Key was used for a "
                "different request (another body or media type)"))
            return
        expires = int((time.time() * 1000) + self.store.ttl_ms)
        slot.dedup = f"{digest}.{{part}}.{expires}"

        def answered(data: bytes, close: bool) -> None:
            task = asyncio.get_running_loop().create_task(
                self._remember(conn, slot, digest, fp, data, close))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        slot.hook = answered
        try:
            conn._submit(slot, origin, keep, body)
        except UnknownCollection as unknown:
            await conn._post_unknown(slot, origin, keep, body, unknown)

    async def _remember(self, conn: Any, slot: Any, digest: str, fp: str, data: bytes,
                        close: bool) -> None:
        status = int(data[9:12])
        try:
            if status == 202:
                await self.store.finish(digest, fp, status, data[data.index(b"\r\n\r\n") + 4:])
            else:
                await self.store.abandon(digest, fp)
        except Exception as exc:  # noqa: BLE001 - the marker expires by itself
            log.warning("idempotency marker not updated: %r", exc)
        conn._fill(slot, data, close)
