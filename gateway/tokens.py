"""Redemption of Privacy Pass tokens at the gateway (``LDP_GATEWAY_TOKENS``).

Every report of a message carries one token (type 2, RFC 9578) for the challenge of its
(collection, window) (:mod:`ldpstream.privacypass.scheme`).  Per batch of requests
(:meth:`TokenGate.redeem`, called by the batcher after the values were validated):

1. **keys**: the public key of each token is looked up by its ``token_key_id``; unknown
   ids make the gate read the key records of every collection's previous, current and
   next windows from Redis (at most once a second per collection);
2. **verify** each token: signature (``token_signature``), the key's collection
   (``token_collection``), its window — over: ``token_key_expired``, not yet open:
   ``token_window`` — and the challenge digest, which must be the one of the key's
   (collection, window) (another window: ``token_window``, another collection:
   ``token_collection``, anything else: ``token_challenge``);
3. **spend** the tokens of every request still standing in one Lua script: a request
   whose token was seen before (``SET NX`` fails) is refused ``token_replayed`` and none
   of its tokens is spent; the others are kept until their window's end plus the skew.

All refusals refuse the whole request (as any bad message does) before anything reaches
Kafka.  Tokens never leave the gateway: messages are re-encoded without them.  The batch
is produced with the Kafka timestamp of the moment its tokens were checked, so each
report is counted in the window its token names.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from ldpstream.privacypass import scheme
from ldpstream.privacypass.tokens import (
    TOKEN_LEN,
    VARIANT,
    TokenError,
    public_key_from_spki,
    www_authenticate,
)

from .parse import BodyError

if TYPE_CHECKING:
    from .batcher import Request

__all__ = ["TokenGate", "MODES", "REASONS"]

log = logging.getLogger("ldpstream.gateway")

MODES = ("off", "optional", "required")

REASONS = {
    "token_missing": (401, "a report carries no token (LDP_GATEWAY_TOKENS=required)"),
    "token_malformed": (400, "a token that is not a type 2 token (bad base64url, length, "
                             "type)"),
    "token_count": (400, "a message whose tokens are not one per report"),
    "token_key": (403, "a token signed with a key the issuer never published"),
    "token_signature": (403, "a token whose signature does not verify (forged, altered)"),
    "token_collection": (403, "a token for another collection"),
    "token_window": (403, "a token for another window (not yet open, or its challenge "
                          "names another window than its key)"),
    "token_key_expired": (403, "a token whose key's window is over"),
    "token_challenge": (403, "a token for a challenge that is not this gateway's"),
    "token_replayed": (409, "a token redeemed before"),
}

_SPEND = """
local g = tonumber(ARGV[1])
local out = {}
local k = 1
for i = 1, g do
  local size = tonumber(ARGV[1 + i])
  local bad = 0
  for j = 0, size - 1 do
    if redis.call('EXISTS', KEYS[k + j]) == 1 then bad = j + 1; break end
  end
  if bad == 0 then
    for j = 0, size - 1 do
      local ok = redis.call('SET', KEYS[k + j], '1', 'NX', 'PXAT', ARGV[1 + g + k + j])
      if not ok then
        bad = j + 1
        for m = 0, j - 1 do redis.call('DEL', KEYS[k + m]) end
        break
      end
    end
  end
  out[i] = bad
  k = k + size
end
return out
"""


_PSS = padding.PSS(mgf=padding.MGF1(hashes.SHA384()), salt_length=VARIANT.salt_length)
_SHA384 = hashes.SHA384()


def _refuse(reason: str, detail: str, index: int) -> BodyError:
    return BodyError(REASONS[reason][0], reason, detail, index)


class TokenGate:
    """Verifies and spends the tokens of a batch (see the module docstring).

    Parameters
    ----------
    redis : redis.asyncio.Redis
    prefix : str
        ``LDP_REDIS_PREFIX``.
    mode : {"optional", "required"}
    issuer_name : str
        ``LDP_TOKEN_ISSUER_NAME`` (in every challenge).
    skew : int
        Seconds a spent token is remembered after its window's end.
    window_seconds : callable
        ``window_seconds(collection_id) -> int | None`` from the catalogue.
    """

    def __init__(self, redis: Any, prefix: str, *, mode: str, issuer_name: str, skew: int,
                 window_seconds: Any, collection_ids: Any = tuple,
                 clock: Any = time.time) -> None:
        if mode not in ("optional", "required"):
            raise ValueError(f"mode must be optional or required, got {mode!r}")
        self.redis, self.names, self.mode = redis, scheme.PPKeys(prefix), mode
        self.issuer_name, self.skew, self.clock = issuer_name, skew, clock
        self.window_seconds, self.collection_ids = window_seconds, collection_ids
        self.keys: dict[bytes, tuple[scheme.KeyRecord, rsa.RSAPublicKey, int, int, bytes,
                                     bytes, int]] = {}
        """key id → (record, public key, window start, end, the challenge digest of its
        (collection, window), spend-key prefix, spend expiry in ms)."""
        self.challenges: dict[bytes, tuple[str, int]] = {}
        self._loaded: dict[str, float] = {}
        self._load_lock: asyncio.Lock | None = None
        self.by_window: dict[tuple[str, int], scheme.KeyRecord] = {}
        self._spend = redis.register_script(_SPEND)
        self.verified = 0
        self.refused: dict[str, int] = {}

    @property
    def required(self) -> bool:
        return self.mode == "required"

    # ---- keys -------------------------------------------------------------------------------
    def add_record(self, rec: scheme.KeyRecord) -> None:
        if rec.key_id in self.keys:
            return
        expected = scheme.challenge(self.issuer_name, rec.collection, rec.window).digest()
        spent = self.names.spent(rec.collection, rec.window, b"").encode()
        self.keys[rec.key_id] = (rec, public_key_from_spki(rec.spki), rec.window, rec.end,
                                 expected, spent, (rec.end + self.skew) * 1000)
        self.by_window[(rec.collection, rec.window)] = rec
        for w in (rec.window - rec.window_seconds, rec.window, rec.end):
            digest = scheme.challenge(self.issuer_name, rec.collection, w).digest()
            self.challenges[digest] = (rec.collection, w)

    async def load(self, collections: Iterable[str], now: float) -> None:
        """Read the key records of these collections' previous, current and next windows
        (each collection at most once a second; concurrent batches wait for one read)."""
        if self._load_lock is None:
            self._load_lock = asyncio.Lock()
        async with self._load_lock:
            await self._load(collections, now)

    async def _load(self, collections: Iterable[str], now: float) -> None:
        names = []
        mono = time.monotonic()
        for cid in dict.fromkeys(collections):
            ws = self.window_seconds(cid)
            if ws is None or mono - self._loaded.get(cid, -2.0) < 1.0:
                continue
            self._loaded[cid] = mono
            w = scheme.window_of(now, ws)
            names += [self.names.public(cid, w + d * ws) for d in (-1, 0, 1)]
        if not names:
            return
        for raw in await self.redis.mget(names):
            if raw is None:
                continue
            try:
                self.add_record(scheme.KeyRecord.from_json(raw))
            except (ValueError, KeyError, TokenError) as exc:
                log.warning("an issuer key record is unreadable: %r", exc)
        if len(self.keys) > 50_000:  # old windows: forget them (they are expired anyway)
            self.keys = {k: v for k, v in self.keys.items() if v[3] + 86_400 > now}

    # ---- one message --------------------------------------------------------------------------
    def check(self, cid: str, tokens: Sequence[bytes], index: int, now: float
              ) -> list[tuple[bytes, int]]:
        """The (spend key, expiry ms) of each token of one message, or the BodyError.

        The hot path of a relay's batch: slices of the token instead of a decoded object,
        one OpenSSL RSASSA-PSS verification, a dict lookup for the challenge."""
        out = []
        keys = self.keys
        for t in tokens:
            if len(t) != TOKEN_LEN or t[:2] != b"\x00\x02":
                raise _refuse("token_malformed", f"a type 2 token is {TOKEN_LEN} bytes "
                              "starting 0x0002", index)
            found = keys.get(t[66:98])
            if found is None:
                raise _refuse("token_key", "the token's key is not one the issuer published",
                              index)
            rec, pk, start, stop, expected, prefix, expiry = found
            try:
                pk.verify(t[98:], t[:98], _PSS, _SHA384)
            except InvalidSignature:
                raise _refuse("token_signature", "the token's signature does not verify",
                              index) from None
            if rec.collection == cid and start <= now < stop and t[34:66] == expected:
                out.append((prefix + t[2:34], expiry))  # the common case
                continue
            self._why(t, cid, rec, index, now)
        return out

    def _why(self, t: bytes, cid: str, rec: scheme.KeyRecord, index: int, now: float) -> None:
        """Raise the refusal of a token with a good signature that does not fit ``cid`` now."""
        if rec.collection != cid:
            raise _refuse("token_collection", f"a token of collection "
                          f"{rec.collection!r} on a report of {cid!r}", index)
        if now >= rec.end:
            raise _refuse("token_key_expired", f"the token's key served window "
                          f"{rec.window}, over since {int(now - rec.end)} s", index)
        if now < rec.window:
            raise _refuse("token_window", f"the token is for window {rec.window}, which "
                          f"opens in {int(rec.window - now) + 1} s", index)
        named = self.challenges.get(t[34:66])
        if named is None:
            named = self._name(t[34:66], cid, rec, now)
        if named is not None and named[0] == cid:
            raise _refuse("token_window", f"the token's challenge names window "
                          f"{named[1]}, its key window {rec.window}", index)
        if named is not None:
            raise _refuse("token_collection", f"the token's challenge names "
                          f"collection {named[0]!r}", index)
        raise _refuse("token_challenge", "the token's challenge is not the one of "
                      f"{cid!r} window {rec.window} at issuer {self.issuer_name!r}", index)

    def _name(self, digest: bytes, cid: str, rec: scheme.KeyRecord, now: float
              ) -> tuple[str, int] | None:
        """Which (collection, window) a challenge digest names, searched among this
        collection's nearby windows and every collection's current ones (refusals only)."""
        cands = [(cid, rec.window + k * rec.window_seconds) for k in range(-3, 4)]
        for other in self.collection_ids():
            ws = self.window_seconds(other)
            if ws is not None:
                w = scheme.window_of(now, ws)
                cands += [(other, w - ws), (other, w), (other, w + ws)]
        for c, w in cands:
            if scheme.challenge(self.issuer_name, c, w).digest() == digest:
                return c, w
        return None

    # ---- a batch ------------------------------------------------------------------------------
    async def redeem(self, reqs: Sequence[Request], now_ms: int) -> list[bytes]:
        """Verify and spend the tokens of ``reqs`` (those without ``error``); refused ones
        get ``error`` set.  Returns the spend keys written (to release if the batch fails)."""
        now = now_ms / 1000.0
        unknown = any(_kid(t) not in self.keys for r in reqs if r.error is None
                      for m in r.messages if m.tokens for t in m.tokens)
        if unknown:  # a new window's key, or one of another collection: read them all
            await self.load([m.entry.cid for r in reqs for m in r.messages]
                            + list(self.collection_ids()), now)
        groups: list[tuple[Request, list[tuple[bytes, int]], list[int]]] = []
        for req in reqs:
            if req.error is not None:
                continue
            spends: list[tuple[bytes, int]] = []
            owners: list[int] = []
            try:
                idx = 0
                for m in req.messages:
                    if m.tokens is None:
                        if self.required:
                            raise _refuse("token_missing", "this gateway needs one Privacy "
                                          "Pass token per report (docs/privacy-pass.md)", idx)
                    else:
                        if len(m.tokens) != m.n:
                            raise _refuse("token_count", f"{len(m.tokens)} token(s) for "
                                          f"{m.n} report(s)", idx)
                        got = self.check(m.entry.cid, m.tokens, idx, now)
                        spends += got
                        owners += [idx] * len(got)
                    idx += m.messages
            except BodyError as exc:
                self._count(exc.reason)
                req.error = exc
                continue
            if spends:
                groups.append((req, spends, owners))
        await self._challenge_missing(reqs, now)
        if not groups:
            return []
        keys = [k for _, s, _ in groups for k, _ in s]
        args = [len(groups), *[len(s) for _, s, _ in groups], *[e for _, s, _ in groups
                                                                  for _, e in s]]
        bad = await self._spend(keys=keys, args=args)
        spent: list[bytes] = []
        for (req, s, owners), b in zip(groups, bad, strict=True):
            b = int(b)
            if b:
                self._count("token_replayed")
                req.error = _refuse("token_replayed", "this token was redeemed before",
                                    owners[b - 1])
            else:
                spent += [k for k, _ in s]
                self.verified += len(s)
        return spent

    async def _challenge_missing(self, reqs: Sequence[Request], now: float) -> None:
        """``WWW-Authenticate: PrivateToken challenge=…, token-key=…`` (RFC 9577 §2.1) on
        each ``token_missing`` refusal: the challenge and key of that collection's window."""
        for req in reqs:
            err = req.error
            if err is None or err.reason != "token_missing" or err.index is None:
                continue
            idx, cid = 0, None
            for m in req.messages:
                if idx == err.index:
                    cid = m.entry.cid
                idx += m.messages
            ws = None if cid is None else self.window_seconds(cid)
            if cid is None or ws is None:
                continue
            w = scheme.window_of(now, ws)
            rec = self.by_window.get((cid, w))
            if rec is None:
                await self.load([cid], now)
                rec = self.by_window.get((cid, w))
            if rec is not None:
                ch = scheme.challenge(self.issuer_name, cid, w).encode()
                err.www_authenticate = www_authenticate(ch, rec.spki,
                                                        max_age=max(1, int(rec.end - now)))

    async def release(self, spent: Sequence[bytes]) -> None:
        """Forget spent tokens of a batch the broker did not take (the device may retry)."""
        if spent:
            await self.redis.delete(*spent)

    def _count(self, reason: str) -> None:
        self.refused[reason] = self.refused.get(reason, 0) + 1


def _kid(t: bytes) -> bytes:
    """The token_key_id bytes of an encoded token (whatever its validity)."""
    return t[66:98]
