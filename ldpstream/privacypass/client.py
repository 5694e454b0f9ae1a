"""A device's side of issuance: fetch the key of (collection, window) from the issuer
directory, blind k TokenRequests for the challenge of (collection, window), get them signed,
finalize the tokens (used by the Python SDK and the tests).

The device computes the challenge itself (:func:`ldpstream.privacypass.scheme.challenge`)
and checks that the key it is given is the one of that (collection, window) in the
directory, so the issuer cannot tag its tokens.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from cryptography.hazmat.primitives.asymmetric import rsa

from . import scheme
from .tokens import (
    NK,
    TokenError,
    b64url,
    b64url_decode,
    begin_request,
    finalize_token,
    public_key_from_spki,
)

__all__ = ["IssuerClient", "IssuanceRefused", "TokenWallet", "device_credential",
           "CREDENTIAL_LABEL", "DIRECTORY_PATH", "REQUEST_TYPE", "RESPONSE_TYPE"]

CREDENTIAL_LABEL = b"ldpstream issuer credential v1"
DIRECTORY_PATH = "/.well-known/private-token-issuer-directory"
REQUEST_TYPE = "application/private-token-request"
RESPONSE_TYPE = "application/private-token-response"


def device_credential(device_secret: bytes) -> str:
    """``base64url(HMAC-SHA256(device_secret, "ldpstream issuer credential v1"))``: what the
    device shows the issuer (``X-LDP-Device``); one-way, so the secret stays on the device."""
    return b64url(hmac.new(device_secret, CREDENTIAL_LABEL, hashlib.sha256).digest())


class IssuanceRefused(Exception):
    """The issuer said no: ``status``, ``reason`` (e.g. ``quota``) and its detail."""

    def __init__(self, status: int, reason: str, detail: str) -> None:
        super().__init__(f"{status} {reason}: {detail}")
        self.status, self.reason, self.detail = status, reason, detail


@dataclass
class IssuerClient:
    """Gets tokens from ``url`` (the issuer's origin, e.g. ``http://127.0.0.1:8090``)."""

    url: str
    credential: str
    fleet_key: str | None = None
    timeout: float = 30.0
    _keys: dict[tuple[str, int], tuple[rsa.RSAPublicKey, bytes]] = field(default_factory=dict)
    issuer_name: str | None = None
    skew: int = scheme.DEFAULT_SKEW

    def _headers(self) -> dict[str, str]:
        h = {"X-LDP-Device": self.credential}
        if self.fleet_key:
            h["Authorization"] = f"Bearer {self.fleet_key}"
        return h

    def _http(self) -> Any:
        import httpx

        return httpx.Client(base_url=self.url.rstrip("/"), timeout=self.timeout)

    def key(self, collection: str, window: int) -> tuple[rsa.RSAPublicKey, bytes]:
        """The public key (and its SPKI) of (collection, window), from the directory."""
        hit = self._keys.get((collection, window))
        if hit is not None:
            return hit
        with self._http() as http:
            resp = http.get(DIRECTORY_PATH, params={"collection": collection})
        _raise(resp)
        doc = resp.json()
        self.issuer_name = str(doc.get("ldp-issuer-name") or scheme.DEFAULT_ISSUER_NAME)
        self.skew = int(doc.get("ldp-skew-seconds", scheme.DEFAULT_SKEW))
        for e in doc.get("token-keys", []):
            if e.get("token-type") != 2 or e.get("ldp-collection") != collection:
                continue
            spki = b64url_decode(str(e["token-key"]))
            self._keys[(collection, int(e["ldp-window"]))] = (public_key_from_spki(spki), spki)
        hit = self._keys.get((collection, window))
        if hit is None:
            raise IssuanceRefused(404, "no_key", f"the issuer directory has no key for "
                                  f"{collection!r} window {window}")
        return hit

    def tokens(self, collection: str, window: int, n: int) -> list[bytes]:
        """``n`` tokens for the reports of ``collection`` in ``window`` (epoch s)."""
        pk, spki = self.key(collection, window)
        assert self.issuer_name is not None
        ch = scheme.challenge(self.issuer_name, collection, window).encode()
        pending = [begin_request(pk, ch, spki=spki) for _ in range(n)]
        body = b"".join(r for r, _ in pending)
        with self._http() as http:
            resp = http.post("/token-request", params={"collection": collection,
                                                       "window": window},
                             content=body,
                             headers={**self._headers(), "Content-Type": REQUEST_TYPE,
                                      "Accept": RESPONSE_TYPE})
        _raise(resp)
        data = resp.content
        if len(data) != NK * n:
            raise TokenError(f"the issuer answered {len(data)} bytes for {n} tokens")
        return [finalize_token(pk, st, data[i * NK:(i + 1) * NK])
                for i, (_, st) in enumerate(pending)]

    def window_now(self, window_seconds: int, now: float | None = None) -> int:
        return scheme.window_of(time.time() if now is None else now, window_seconds)


class TokenWallet:
    """A device's tokens per (collection, window): obtained from the issuer when needed
    (the cadence's worth at once, never more than the quota), spent one per report, dropped
    when their window is over.

    In memory: tokens obtained and not spent before the app stops are lost for that window
    (the issuer counted them), which only ever lowers what the device reports.
    """

    def __init__(self, client: IssuerClient) -> None:
        self.client = client
        self.tokens: dict[tuple[str, int], list[bytes]] = {}
        self.obtained: dict[tuple[str, int], int] = {}

    def take(self, spec: Any, n: int, window: int) -> list[bytes]:
        """``n`` tokens for reports of ``spec`` in ``window``; :class:`IssuanceRefused`
        (``quota``) when the device already had its quota for that window."""
        k = (spec.id, window)
        have = self.tokens.setdefault(k, [])
        if len(have) < n:
            got = self.obtained.get(k, 0)
            want = max(n - len(have), min(spec.reports_per_window, spec.token_quota) - got)
            fresh = self.client.tokens(spec.id, window, want)
            self.obtained[k] = got + len(fresh)
            have += fresh
        out, self.tokens[k] = have[:n], have[n:]
        stale = [key for key in self.tokens
                 if key[0] == spec.id and key[1] < window - spec.window_seconds]
        for key in stale:
            self.tokens.pop(key, None)
            self.obtained.pop(key, None)
        return out


def _raise(resp: Any) -> None:
    if resp.status_code < 400:
        return
    try:
        body: Mapping[str, Any] = resp.json()
    except ValueError:
        body = {}
    raise IssuanceRefused(resp.status_code, str(body.get("reason", "error")),
                          str(body.get("detail", resp.text[:200])))
