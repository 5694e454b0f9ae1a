"""Redemption of Privacy Pass tokens at the gateway (``LDP_GATEWAY_TOKENS``).

Every report of a message carries one token (type 2, RFC 9578) for the challenge of its
(collection, window) (:mod:`ldpstream.privacypass.scheme`).  Per batch of requests
(:meth:`TokenGate.redeem`, called by the batcher after the values were validated):

1. **keys**: the public key of each token is looked up by its ``token_key_id``; unknown
   ids make the gate read the key records of every collection's previous, current and
   next windows from Redis (at most once a second per collection; a batch that met an
   unknown key waits for a read begun after it, at most a second, before refusing it);
2. **verify** each token: signature (``token_signature``; RSASSA-PSS by the key's
   :class:`~ldpstream.privacypass.blindrsa.PSSVerifier`, built once per key: gmpy2's
   ``powmod`` where it is installed, else OpenSSL), the key's collection
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
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from ldpstream.privacypass import blindrsa, scheme
from ldpstream.privacypass.tokens import (
    TOKEN_LEN,
    VARIANT,
    TokenError,
    public_key_from_spki,
    www_authenticate,
)
from ldpstream.storage import is_cluster

from .parse import BodyError

if TYPE_CHECKING:
    from .batcher import Request

__all__ = ["TokenGate", "MODES", "REASONS"]

log = logging.getLogger("ldpstream.gateway")

MODES = ("off", "optional", "required")

_BY_STATUS: dict[int, dict[str, str]] = {
    400: {"token_malformed": "a token that is not a type 2 token (bad base64url, length, type)",
          "token_count": "a message whose tokens are not one per report"},
    401: {"token_missing": "a report carries no token (LDP_GATEWAY_TOKENS=required)"},
    403: {"token_key": "a token signed with a key the issuer never published",
          "token_signature": "a token whose signature does not verify (forged, altered)",
          "token_collection": "a token for another collection",
          "token_window": "a token for another window (not yet open, or its challenge names "
                          "another window than its key)",
          "token_key_expired": "a token whose key's window is over",
          "token_challenge": "a token for a challenge that is not this gateway's"},
    409: {"token_replayed": "a token redeemed before"},
}
REASONS = {reason: (status, meaning) for status, group in _BY_STATUS.items()
           for reason, meaning in group.items()}
"""Why a token is refused: reason -> (HTTP status, meaning)."""

_SPEND = """
local g = tonumber(ARGV[1])
local runs = 2 + g
local expiry = {}
local k = 1
for r = 1, tonumber(ARGV[runs]) do
  local e = ARGV[runs + 2 * r]
  for j = 1, tonumber(ARGV[runs + 2 * r - 1]) do expiry[k] = e; k = k + 1 end
end
local out = {}
k = 1
for i = 1, g do
  local size = tonumber(ARGV[1 + i])
  local bad = 0
  for j = 0, size - 1 do
    if redis.call('EXISTS', KEYS[k + j]) == 1 then bad = j + 1; break end
  end
  if bad == 0 then
    for j = 0, size - 1 do
      local ok = redis.call('SET', KEYS[k + j], '1', 'NX', 'PXAT', expiry[k + j])
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
"""KEYS: the spend keys of every request, in order; ARGV: the number of requests g, each
one's count of keys, then the expiries (ms) of all keys run-length encoded: the number
of runs, then (length, expiry) per run (a batch's tokens share a few windows).  Answers
per request 0, or 1 + the position of its first token seen before (none of its tokens
is then spent)."""


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
    verifier : {"auto", "gmpy2", "openssl"}
        The RSASSA-PSS backend (:class:`ldpstream.privacypass.blindrsa.PSSVerifier`):
        ``auto`` is gmpy2 where it is installed.  The same answers; gmpy2 costs less CPU.
    """

    def __init__(self, redis: Any, prefix: str, *, mode: str, issuer_name: str, skew: int,
                 window_seconds: Any, collection_ids: Any = tuple,
                 clock: Any = time.time, verifier: str = "auto") -> None:
        if mode not in ("optional", "required"):
            raise ValueError(f"mode must be optional or required, got {mode!r}")
        if verifier not in blindrsa.BACKENDS:
            raise ValueError(f"verifier must be one of {', '.join(blindrsa.BACKENDS)}, "
                             f"got {verifier!r}")
        self.verifier = blindrsa.default_backend() if verifier == "auto" else verifier
        self.redis, self.names, self.mode = redis, scheme.PPKeys(prefix, is_cluster(redis)), mode
        self.issuer_name, self.skew, self.clock = issuer_name, skew, clock
        self.window_seconds, self.collection_ids = window_seconds, collection_ids
        self.keys: dict[bytes, tuple[scheme.KeyRecord,
                                     Callable[[Sequence[bytes], Sequence[bytes]], list[bool]],
                                     str, int, int, bytes, bytes, int]] = {}
        """key id → (record, its ``verify_many(messages, signatures)``, collection, window start,
        end, the challenge digest of its (collection, window), spend-key prefix, spend
        expiry in ms): all a token needs, computed once per key."""
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
        verify = blindrsa.PSSVerifier(public_key_from_spki(rec.spki), VARIANT,
                                      backend=self.verifier).verify_many
        self.keys[rec.key_id] = (rec, verify, rec.collection, rec.window, rec.end, expected,
                                 spent, (rec.end + self.skew) * 1000)
        self.by_window[(rec.collection, rec.window)] = rec
        for w in (rec.window - rec.window_seconds, rec.window, rec.end):
            digest = scheme.challenge(self.issuer_name, rec.collection, w).digest()
            self.challenges[digest] = (rec.collection, w)

    async def load(self, collections: Iterable[str], now: float,
                   seen: float | None = None) -> None:
        """Read the key records of these collections' previous, current and next windows
        (each collection at most once a second; concurrent batches wait for one read).

        ``seen`` (monotonic): when the caller met a key it does not know.  A read begun
        after that moment answers it; otherwise one is made, waiting out the rest of the
        second if needed, so a key the issuer published just after the last read (a new
        window's) is never refused as unknown.  Without ``seen`` a collection read less
        than a second ago is not read again.
        """
        if self._load_lock is None:
            self._load_lock = asyncio.Lock()
        async with self._load_lock:
            await self._load(collections, now, seen)

    async def _load(self, collections: Iterable[str], now: float,
                    seen: float | None = None) -> None:
        names = []
        wanted = [cid for cid in dict.fromkeys(collections)
                  if self.window_seconds(cid) is not None]
        if seen is not None:
            stale = [self._loaded.get(cid, -2.0) for cid in wanted]
            stale = [t for t in stale if t < seen]
            if stale:  # a read that began before the key was met: one more, within a second
                await asyncio.sleep(max(0.0, max(stale) + 1.0 - time.monotonic()))
        mono = time.monotonic()
        for cid in wanted:
            ws = self.window_seconds(cid)
            last = self._loaded.get(cid, -2.0)
            if ws is None or (seen is not None and last >= seen) or (
                    seen is None and mono - last < 1.0):
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
            self.keys = {k: v for k, v in self.keys.items() if v[4] + 86_400 > now}

    # ---- one message --------------------------------------------------------------------------
    def check(self, cid: str, tokens: Sequence[bytes], index: int, now: float,
              messages: int = 1) -> list[tuple[bytes, int]]:
        """The (spend key, expiry ms) of each token of one message, or the BodyError of
        its first bad token.

        ``messages`` > 1: a merged message of that many frames (:class:`Message`), the
        tokens evenly theirs in order (a refusal names the frame of its token).  Raises
        :class:`_UnknownKey` on a key id not loaded yet (the caller loads and retries).

        The hot path of a relay's batch: slices of the token instead of a decoded object,
        the signatures of each key verified in one call of its precomputed verifier, one
        comparison for collection, window and challenge."""
        keys = self.keys
        found = [keys.get(t[66:98]) for t in tokens]
        # up to the first token that is malformed or of a key not loaded: the answer is
        # the first bad token's, as if they were checked one by one
        stop = len(tokens)
        for j, (t, f) in enumerate(zip(tokens, found, strict=True)):
            if f is None or len(t) != TOKEN_LEN or t[:2] != b"\x00\x02":
                stop = j
                break
        valid = self._signatures(tokens[:stop], found[:stop])
        out: list[tuple[bytes, int]] = []
        append = out.append
        for j in range(stop):
            t, f = tokens[j], found[j]
            assert f is not None  # (stop)
            rec, _, coll, start, end, expected, prefix, expiry = f
            if not valid[j]:
                raise _refuse("token_signature", "the token's signature does not verify",
                              index + j * messages // len(tokens))
            if coll == cid and start <= now < end and t[34:66] == expected:
                append((prefix + t[2:34], expiry))  # the common case
                continue
            self._why(t, cid, rec, index + j * messages // len(tokens), now)
        if stop < len(tokens):
            t = tokens[stop]
            at = index + stop * messages // len(tokens)
            if len(t) != TOKEN_LEN or t[:2] != b"\x00\x02":
                raise _refuse("token_malformed", f"a type 2 token is {TOKEN_LEN} bytes "
                              "starting 0x0002", at)
            raise _UnknownKey(at)
        return out

    @staticmethod
    def _signatures(tokens: Sequence[bytes], found: Sequence[Any]) -> list[bool]:
        """Whether each token's authenticator signs its first 98 bytes under its key (all
        of one key in one ``verify_many``)."""
        if not tokens:
            return []
        first = found[0]
        if all(f is first for f in found):  # a relay's batch: one key
            return list(first[1]([t[:98] for t in tokens], [t[98:] for t in tokens]))
        out = [False] * len(tokens)
        by_key: dict[int, list[int]] = {}
        for j, f in enumerate(found):
            by_key.setdefault(id(f), []).append(j)
        for js in by_key.values():
            got = found[js[0]][1]([tokens[j][:98] for j in js], [tokens[j][98:] for j in js])
            for j, ok in zip(js, got, strict=True):
                out[j] = ok
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
        groups: list[tuple[Request, list[tuple[bytes, int]], list[tuple[int, int, int, int]]]]
        seen = time.monotonic()
        groups, later = self._check_all(reqs, now, retry=False)
        if later:  # a new window's key, or one of another collection: read them all, retry
            await self.load([m.entry.cid for r in later for m in r.messages]
                            + list(self.collection_ids()), now, seen)
            more, _ = self._check_all(later, now, retry=True)
            groups += more
        await self._challenge_missing(reqs, now)
        if not groups:
            return []
        keys: list[bytes] = []
        runs: list[int] = []
        last, run = -1, 0
        for _, s, _ in groups:
            for k, e in s:
                keys.append(k)
                if e == last:
                    run += 1
                else:
                    if run:
                        runs += (run, last)
                    last, run = e, 1
        runs += (run, last)
        bad = await self._spend(keys=keys, args=[len(groups), *[len(s) for _, s, _ in groups],
                                                 len(runs) // 2, *runs])
        spent: list[bytes] = []
        for (req, s, where), b in zip(groups, bad, strict=True):
            b = int(b)
            if b:
                self._count("token_replayed")
                req.error = _refuse("token_replayed", "this token was redeemed before",
                                    _owner(where, b - 1))
            else:
                spent += [k for k, _ in s]
                self.verified += len(s)
        return spent

    def _check_all(self, reqs: Iterable[Request], now: float, *, retry: bool
                   ) -> tuple[list[tuple[Request, list[tuple[bytes, int]],
                                         list[tuple[int, int, int, int]]]], list[Request]]:
        """Check the tokens of each standing request: (request, its spends, where its
        tokens came from) per request that passed, and the requests that met a key not
        loaded yet (``retry``: refused ``token_key`` instead)."""
        groups = []
        later: list[Request] = []
        required = self.required
        for req in reqs:
            if req.error is not None:
                continue
            spends: list[tuple[bytes, int]] = []
            # (first spend, message index, frames, tokens) per message with tokens
            where: list[tuple[int, int, int, int]] = []
            try:
                idx = 0
                for m in req.messages:
                    if m.tokens is None:
                        if required:
                            raise _refuse("token_missing", "this gateway needs one Privacy "
                                          "Pass token per report (docs/privacy-pass.md)", idx)
                    else:
                        if len(m.tokens) != m.n:
                            raise _refuse("token_count", f"{len(m.tokens)} token(s) for "
                                          f"{m.n} report(s)", idx)
                        if m.tokens:
                            where.append((len(spends), idx, m.messages, len(m.tokens)))
                            spends += self.check(m.entry.cid, m.tokens, idx, now, m.messages)
                    idx += m.messages
            except _UnknownKey as unknown:
                if not retry:
                    later.append(req)
                    continue
                self._count("token_key")
                req.error = _refuse("token_key", "the token's key is not one the issuer "
                                    "published", unknown.index)
                continue
            except BodyError as exc:
                self._count(exc.reason)
                req.error = exc
                continue
            if spends:
                groups.append((req, spends, where))
        return groups, later

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


class _UnknownKey(Exception):
    """A token's key id is not among the loaded keys (yet)."""

    def __init__(self, index: int) -> None:
        super().__init__(index)
        self.index = index


def _owner(where: Sequence[tuple[int, int, int, int]], position: int) -> int:
    """The message index of a request's ``position``-th spent token."""
    for first, idx, frames, count in reversed(where):
        if position >= first:
            return idx + (position - first) * frames // count
    raise IndexError(position)
