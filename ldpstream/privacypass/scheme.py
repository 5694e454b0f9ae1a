"""How ldpstream uses Privacy Pass: one token per report, bound to (collection, window).

**The challenge.**  A report of collection ``c`` counted in the window starting at ``w``
(epoch seconds, :func:`ldpcore.collection.window_start`) carries a token for the
TokenChallenge (RFC 9577 §2.1)::

    token_type         = 0x0002
    issuer_name        = the issuer's name (LDP_TOKEN_ISSUER_NAME, default "ldpstream")
    redemption_context = SHA-256("ldpstream-token-v1" 0x00 c 0x00 decimal(w))
    origin_info        = c

Every device computes it from public values, so the issuer cannot hand out tagged
challenges, and the gateway knows which challenge a report must carry.

**Keys: one per (collection, window).**  A blind signature hides the challenge from the
issuer (that is the point), so a single issuer key could not stop a device from
spending the tokens it was granted "for" another collection or window on the one it
wants to poison.  The issuer therefore signs the tokens of ``(c, w)`` with a key used
for nothing else: the key epoch is the collection's window.  A key is created (by the
first issuer replica that needs it; ``SET NX``) when a device first asks for ``(c, w)``,
its private half expires at the window's end plus the skew, its public record stays
``KEY_MEMORY`` seconds longer so that late tokens are refused as *expired* rather than
*unknown*.  The gateway, holding the public records, refuses a token whose key belongs
to another collection (``token_collection``) or window (``token_window``), and one whose
challenge names anything else than its key's (collection, window).

Redis layout (prefix ``P``, default ``ldp:``):

=====================================  =============================================
``P pp:pk:{c}:{w}``                    JSON :class:`KeyRecord` (public), PEXPIREAT
                                       window end + skew + KEY_MEMORY
``P pp:sk:{c}:{w}``                    PKCS#8 PEM of the private key (encrypted with
                                       LDP_ISSUER_KEY_PASSWORD when set), PEXPIREAT
                                       window end + skew
``P pp:q:{device}:{c}:{w}``            tokens issued to one device for (c, w),
                                       PEXPIREAT window end + skew
``P pp:spent:{c}:{w}:{nonce}``         a redeemed token (gateway, ``SET NX``),
                                       PEXPIREAT window end + skew
=====================================  =============================================

On a Redis Cluster (``PPKeys(…, sharded=True)``) the public, private and spent keys are
``P {pp}pk:…``, ``P {pp}sk:…`` and ``P {pp}spent:…``: one hash tag, so the gateway's
spend script (a batch's tokens of any collections and windows) and the key reads stay
in one slot.  Quota keys are single-key calls and keep their names.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass

from ldpstream.settings import ConfigError

from .tokens import TokenChallenge, b64url, b64url_decode, public_key_from_spki, token_key_id

__all__ = ["DEFAULT_ISSUER_NAME", "DEFAULT_SKEW", "KEY_MEMORY", "CONTEXT_LABEL",
           "redemption_context", "challenge", "KeyRecord", "PPKeys", "window_of",
           "env_issuer_name"]

DEFAULT_ISSUER_NAME = "ldpstream"
DEFAULT_SKEW = 30
"""Seconds of clock skew tolerated at a window's edges (LDP_TOKEN_SKEW_SECONDS)."""
KEY_MEMORY = 86_400
"""Seconds a public key record outlives its window (so its tokens are 'expired')."""
CONTEXT_LABEL = b"ldpstream-token-v1"


def window_of(now: float, window_seconds: int) -> int:
    """Start (epoch s) of the window of length ``window_seconds`` holding ``now``."""
    t = int(now)
    return t - t % window_seconds


def redemption_context(collection: str, window: int) -> bytes:
    """``SHA-256("ldpstream-token-v1" 0x00 collection 0x00 decimal(window))``."""
    return hashlib.sha256(CONTEXT_LABEL + b"\0" + collection.encode("ascii") + b"\0"
                          + str(int(window)).encode("ascii")).digest()


def challenge(issuer_name: str, collection: str, window: int) -> TokenChallenge:
    """The TokenChallenge of the reports of ``collection`` in the window starting at
    ``window``."""
    return TokenChallenge(issuer_name.encode("ascii"), redemption_context(collection, window),
                          collection.encode("ascii"))


@dataclass(frozen=True)
class KeyRecord:
    """The public half of the issuer key of one (collection, window)."""

    collection: str
    window: int
    window_seconds: int
    token_key: str
    """base64url (padded, as in the issuer directory) of the RSASSA-PSS SPKI."""

    @property
    def spki(self) -> bytes:
        return b64url_decode(self.token_key)

    @property
    def key_id(self) -> bytes:
        return token_key_id(self.spki)

    @property
    def end(self) -> int:
        return self.window + self.window_seconds

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, raw: str | bytes) -> KeyRecord:
        d = json.loads(raw)
        rec = cls(str(d["collection"]), int(d["window"]), int(d["window_seconds"]),
                  str(d["token_key"]))
        public_key_from_spki(rec.spki)  # a record the gateway cannot use is refused here
        return rec

    @classmethod
    def of(cls, collection: str, window: int, window_seconds: int, spki: bytes) -> KeyRecord:
        return cls(collection, window, window_seconds, b64url(spki, pad=True))


class PPKeys:
    """Names of the Privacy Pass keys in Redis (see the module docstring)."""

    def __init__(self, prefix: str, sharded: bool = False) -> None:
        self.prefix = prefix
        self._pp = f"{prefix}{{pp}}" if sharded else f"{prefix}pp:"

    def _window(self, kind: str, collection: str, window: int) -> str:
        """A key of one (collection, window), under the Privacy Pass hash tag."""
        return f"{self._pp}{kind}:{collection}:{window}"

    def public(self, collection: str, window: int) -> str:
        return self._window("pk", collection, window)

    def secret(self, collection: str, window: int) -> str:
        return self._window("sk", collection, window)

    def spent(self, collection: str, window: int, nonce: bytes) -> str:
        return f"{self._window('spent', collection, window)}:{nonce.hex()}"

    def quota(self, device: str, collection: str, window: int) -> str:
        return f"{self.prefix}pp:q:{device}:{collection}:{window}"


def env_issuer_name(env: Mapping[str, str]) -> str:
    """``LDP_TOKEN_ISSUER_NAME``: printable ASCII without spaces (it is in every challenge)."""
    name = env.get("LDP_TOKEN_ISSUER_NAME") or DEFAULT_ISSUER_NAME
    if not (name.isascii() and name.isprintable()) or " " in name or len(name) > 255:
        raise ConfigError(f"LDP_TOKEN_ISSUER_NAME must be printable ASCII without spaces "
                          f"(≤ 255), got {name!r}")
    return name
