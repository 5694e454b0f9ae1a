"""What the issuer does, apart from HTTP: keys per (collection, window), quota counts, and
signing.

* :class:`KeyManager`: the RSA-2048 key of one (collection, window), created by the first
  replica that needs it (``SET NX``; key generation runs off the event loop), kept in
  Redis until the window's end plus the skew (layout: :mod:`ldpstream.privacypass.scheme`).
* :class:`Quotas`: tokens given to one device for one (collection, window), reserved
  atomically (one Lua script: never more than the quota, whatever the concurrency),
  released if signing fails.  Counts live in Redis with a TTL, so a restarted issuer
  keeps them.
* :func:`sign_requests`: ``BlindSign`` of each TokenRequest — the issuer sees blinded
  messages only, never the token it signs.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from ldpcore.collection import CollectionSpec
from ldpstream.privacypass import scheme
from ldpstream.privacypass.tokens import (
    TOKEN_REQUEST_LEN,
    TokenError,
    TokenRequest,
    issue,
    spki_der,
)
from ldpstream.storage import Keys, is_cluster

__all__ = ["IssuanceError", "KeyManager", "Quotas", "SpecCache", "sign_requests",
           "decode_requests", "IssuerKey"]

log = logging.getLogger("ldpstream.issuer")


class IssuanceError(Exception):
    """A token request the issuer refuses: HTTP ``status``, machine ``reason``."""

    def __init__(self, status: int, reason: str, detail: str,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(detail)
        self.status, self.reason, self.detail = status, reason, detail
        self.headers = headers or {}


@dataclass(frozen=True)
class IssuerKey:
    """The key pair of one (collection, window) and its public record."""

    sk: rsa.RSAPrivateKey
    record: scheme.KeyRecord


class KeyManager:
    """Keys per (collection, window); see the module docstring."""

    def __init__(self, redis: Any, prefix: str, *, skew: int,
                 password: bytes | None = None) -> None:
        self.redis, self.skew, self.password = redis, skew, password
        self.keys = scheme.PPKeys(prefix, is_cluster(redis))
        self._cache: dict[tuple[str, int], IssuerKey] = {}
        self._locks: dict[tuple[str, int], asyncio.Lock] = {}
        self.created = 0

    def _encryption(self) -> serialization.KeySerializationEncryption:
        if self.password:
            return serialization.BestAvailableEncryption(self.password)
        return serialization.NoEncryption()

    def _load(self, pem: bytes) -> rsa.RSAPrivateKey:
        sk = serialization.load_pem_private_key(pem, password=self.password)
        if not isinstance(sk, rsa.RSAPrivateKey) or sk.key_size != 2048:
            raise RuntimeError("a stored issuer key is not RSA-2048")
        return sk

    async def get(self, spec: CollectionSpec, window: int) -> IssuerKey:
        """The key of (spec.id, window), created if no replica made it yet."""
        k = (spec.id, window)
        hit = self._cache.get(k)
        if hit is not None:
            return hit
        lock = self._locks.setdefault(k, asyncio.Lock())
        async with lock:
            hit = self._cache.get(k)
            if hit is not None:
                return hit
            end = window + spec.window_seconds
            sk_name = self.keys.secret(spec.id, window)
            pem = await self.redis.get(sk_name)
            if pem is None:
                loop = asyncio.get_running_loop()
                fresh = await loop.run_in_executor(
                    None, lambda: rsa.generate_private_key(public_exponent=65537,
                                                           key_size=2048))
                data = fresh.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           self._encryption())
                if await self.redis.set(sk_name, data, nx=True, pxat=(end + self.skew) * 1000):
                    self.created += 1
                    log.info("new issuer key for %s window %d", spec.id, window)
                    sk = fresh
                else:  # another replica was first: use its key
                    pem = await self.redis.get(sk_name)
                    if pem is None:
                        raise IssuanceError(503, "unavailable", "the issuer key vanished")
                    sk = self._load(pem)
            else:
                sk = self._load(pem)
            record = scheme.KeyRecord.of(spec.id, window, spec.window_seconds,
                                         spki_der(sk.public_key()))
            # the public record before any token is signed with it (the gateway needs it)
            await self.redis.set(self.keys.public(spec.id, window), record.to_json(),
                                 pxat=(end + self.skew + scheme.KEY_MEMORY) * 1000)
            key = IssuerKey(sk, record)
            if len(self._cache) > 4096:
                now = time.time()
                self._cache = {c: v for c, v in self._cache.items()
                               if v.record.end + self.skew > now}
            self._cache[k] = key
            self._locks.pop(k, None)
            return key

    async def published(self, collection: str, windows: Sequence[int]
                        ) -> list[scheme.KeyRecord]:
        """The public records of ``collection`` that exist for ``windows`` (no creation)."""
        if not windows:
            return []
        raw = await self.redis.mget([self.keys.public(collection, w) for w in windows])
        out = []
        for r in raw:
            if r is not None:
                try:
                    out.append(scheme.KeyRecord.from_json(r))
                except (ValueError, KeyError, TokenError):
                    log.warning("unreadable key record of %s", collection)
        return out


_RESERVE = """
local cur = tonumber(redis.call('GET', KEYS[1]) or '0')
local n = tonumber(ARGV[1])
if cur + n > tonumber(ARGV[2]) then return {0, cur} end
redis.call('INCRBY', KEYS[1], n)
redis.call('PEXPIREAT', KEYS[1], ARGV[3])
return {1, cur + n}
"""


class Quotas:
    """Per-device token counts per (collection, window), in Redis with a TTL."""

    def __init__(self, redis: Any, prefix: str, *, skew: int) -> None:
        self.redis, self.keys, self.skew = redis, scheme.PPKeys(prefix), skew
        self._script = redis.register_script(_RESERVE)

    async def reserve(self, device: str, spec: CollectionSpec, window: int, n: int) -> int:
        """Reserve ``n`` tokens; the device's count after it, or :class:`IssuanceError` 429
        ``quota`` (nothing reserved) when that would pass the collection's quota."""
        k = spec.token_quota
        end = window + spec.window_seconds
        ok, cur = await self._script(keys=[self.keys.quota(device, spec.id, window)],
                                     args=[n, k, (end + self.skew) * 1000])
        if not int(ok):
            left = max(0, k - int(cur))
            retry = max(1, int(end - time.time()))
            raise IssuanceError(429, "quota", f"this device may get {k} token(s) per window of "
                                f"{spec.id!r}; {left} left in window {window}, {n} asked",
                                {"Retry-After": str(retry)})
        return int(cur)

    async def release(self, device: str, spec: CollectionSpec, window: int, n: int) -> None:
        await self.redis.decrby(self.keys.quota(device, spec.id, window), n)


class SpecCache:
    """Collection specs read from the Redis catalogue, each kept ``ttl`` seconds."""

    def __init__(self, redis: Any, prefix: str, ttl: float = 5.0) -> None:
        self.redis, self.key, self.ttl = redis, Keys.for_client(redis, prefix).collections, ttl
        self._cache: dict[str, tuple[float, CollectionSpec | None]] = {}

    async def get(self, cid: str) -> CollectionSpec | None:
        now = time.monotonic()
        hit = self._cache.get(cid)
        if hit is not None and now - hit[0] < self.ttl:
            return hit[1]
        raw = await self.redis.hget(self.key, cid)
        spec = None if raw is None else CollectionSpec.from_dict(json.loads(raw))
        if len(self._cache) > 10_000:
            self._cache.clear()
        self._cache[cid] = (now, spec)
        return spec

    async def ids(self) -> list[str]:
        return sorted(k.decode() if isinstance(k, bytes) else str(k)
                      for k in await self.redis.hkeys(self.key))


def decode_requests(body: bytes, key: IssuerKey, quota: int) -> list[TokenRequest]:
    """A body of one or more concatenated TokenRequests for ``key``, or the 400."""
    if not body or len(body) % TOKEN_REQUEST_LEN:
        raise IssuanceError(400, "malformed", f"the body must be one or more TokenRequests of "
                            f"{TOKEN_REQUEST_LEN} bytes, got {len(body)} bytes")
    n = len(body) // TOKEN_REQUEST_LEN
    if n > quota:
        raise IssuanceError(400, "too_many", f"{n} TokenRequests, but the quota is {quota} "
                            "per window")
    out = []
    for i in range(n):
        try:
            req = TokenRequest.decode(body[i * TOKEN_REQUEST_LEN:(i + 1) * TOKEN_REQUEST_LEN])
        except TokenError as exc:
            raise IssuanceError(400, "malformed", f"TokenRequest {i}: {exc}") from None
        if req.truncated_token_key_id != key.record.key_id[-1]:
            raise IssuanceError(400, "token_key", f"TokenRequest {i} names another key than "
                                f"the one of {key.record.collection!r} window "
                                f"{key.record.window}")
        out.append(req)
    return out


def sign_requests(key: IssuerKey, requests: Sequence[TokenRequest]) -> bytes:
    """Concatenated TokenResponses (``BlindSign`` of each blinded message)."""
    try:
        return b"".join(issue(key.sk, r) for r in requests)
    except ValueError as exc:  # BlindRSAError: a blinded message out of range
        raise IssuanceError(400, "malformed", f"a blinded message cannot be signed: {exc}") \
            from None
