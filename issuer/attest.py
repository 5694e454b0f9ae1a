"""Attesters: how a device proves it belongs to the fleet before it gets tokens.

An attester looks at the headers of a token request and answers the *device id* the
issuer counts quotas against (an opaque string, stored only as a Redis key with a TTL),
or raises :class:`AttestationError` (401/403).  It never sees the TokenRequests, and the
issuer never links a device id to a token: the signatures are blind.

Pluggable: ``LDP_ISSUER_ATTESTER=module:factory`` names a callable taking the settings'
environment mapping and returning an :class:`Attester`.  Shipped:

* :class:`FleetKeyAttester` (the default): the fleet key (``Authorization: Bearer`` or
  ``X-LDP-Key``, as at the gateway) plus a per-device credential ``X-LDP-Device``
  (base64url, 16–64 bytes; the SDKs derive it from their device secret with
  ``HMAC-SHA256(secret, "ldpstream issuer credential v1")``, so the memo secret itself
  never leaves the device).  Device id = SHA-256(fleet ‖ credential).  It bounds what an
  honest app does; it does not stop someone who extracted the fleet key from inventing
  devices (each new credential is a new device): that needs a platform attester.
* :class:`AppLoginAttester` (``issuer.attest:app_login``): the worked example of an
  app's own login: the app's backend hands a signed-in user a session token
  ``user_id.expiry.hmac`` (HMAC-SHA256 with ``LDP_ISSUER_APP_LOGIN_SECRET``); the device
  id is the user id, so one account is one device however many installs it has.

Play Integrity or App Attest follow the same shape (docs/privacy-pass.md): the device
sends its verdict / assertion in a header; the attester verifies it (Google's
``decodeIntegrityToken`` answer, or Apple's assertion against the attested key) and
answers a stable id from it.
"""

from __future__ import annotations

import hashlib
import hmac
import importlib
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from ldpstream.privacypass.tokens import TokenError, b64url_decode
from ldpstream.settings import ConfigError, key_digest

__all__ = ["Attester", "AttestationError", "FleetKeyAttester", "AppLoginAttester",
           "app_login", "load_attester"]



class AttestationError(Exception):
    """The device is not one of the fleet: HTTP ``status`` (401 or 403) and ``reason``."""

    def __init__(self, status: int, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.status, self.reason, self.detail = status, reason, detail


@runtime_checkable
class Attester(Protocol):
    """Headers (lower-case names) of a token request → the device id to count against."""

    def attest(self, headers: Mapping[str, str]) -> str: ...


def _bearer(headers: Mapping[str, str]) -> str | None:
    auth = headers.get("authorization", "")
    if auth[:7].lower() == "bearer ":
        return auth[7:].strip()
    return headers.get("x-ldp-key")


@dataclass(frozen=True)
class FleetKeyAttester:
    """Fleet key + per-device credential (see the module docstring).  ``keys`` maps the
    SHA-256 of each fleet key to its fleet (:func:`ldpstream.settings.parse_keys`); empty
    means no fleet key is asked (an open issuer, for ``ldpstream up`` on loopback)."""

    keys: Mapping[bytes, str]

    def attest(self, headers: Mapping[str, str]) -> str:
        fleet = ""
        if self.keys:
            key = _bearer(headers)
            if not key:
                raise AttestationError(401, "missing_key", "a fleet key is required "
                                       "(Authorization: Bearer <key> or X-LDP-Key)")
            found = self.keys.get(key_digest(key))
            if found is None:
                raise AttestationError(403, "wrong_key", "the fleet key is not known")
            fleet = found
        raw = headers.get("x-ldp-device")
        if not raw:
            raise AttestationError(401, "missing_device", "X-LDP-Device (the device's "
                                   "base64url credential) is required")
        try:
            cred = b64url_decode(raw.strip())
        except TokenError:
            raise AttestationError(400, "bad_device", "X-LDP-Device must be base64url") \
                from None
        if not 16 <= len(cred) <= 64:
            raise AttestationError(400, "bad_device", "X-LDP-Device must hold 16 to 64 bytes")
        return hashlib.sha256(fleet.encode() + b"\0" + cred).hexdigest()[:40]


@dataclass(frozen=True)
class AppLoginAttester:
    """An app's own login: ``Authorization: Bearer <user_id>.<expiry>.<hmac>`` issued by
    the app's backend with a shared secret (see the module docstring)."""

    secret: bytes
    now: float | None = None  # tests

    @staticmethod
    def session_token(secret: bytes, user_id: str, expiry: int) -> str:
        """What the app's backend hands a signed-in user."""
        mac = hmac.new(secret, f"{user_id}.{expiry}".encode(), hashlib.sha256).hexdigest()
        return f"{user_id}.{expiry}.{mac}"

    def attest(self, headers: Mapping[str, str]) -> str:
        token = _bearer(headers)
        if not token:
            raise AttestationError(401, "missing_key", "a session token is required")
        user, _, rest = token.partition(".")
        expiry, _, mac = rest.partition(".")
        if not user or not expiry.isdigit() or not mac:
            raise AttestationError(403, "wrong_key", "malformed session token")
        good = hmac.new(self.secret, f"{user}.{expiry}".encode(), hashlib.sha256).hexdigest()
        if not hmac.compare_digest(good, mac):
            raise AttestationError(403, "wrong_key", "the session token is not valid")
        if int(expiry) < (time.time() if self.now is None else self.now):
            raise AttestationError(403, "expired", "the session token has expired")
        return "user:" + hashlib.sha256(user.encode()).hexdigest()[:40]


def app_login(env: Mapping[str, str]) -> Attester:
    """Factory of :class:`AppLoginAttester` (``LDP_ISSUER_ATTESTER=issuer.attest:app_login``)."""
    secret = env.get("LDP_ISSUER_APP_LOGIN_SECRET") or ""
    if len(secret) < 16:
        raise ConfigError("LDP_ISSUER_APP_LOGIN_SECRET must hold at least 16 characters for "
                          "issuer.attest:app_login")
    return AppLoginAttester(secret.encode())


def load_attester(spec: str, env: Mapping[str, str]) -> Attester:
    """``module:factory`` → the attester the factory builds from ``env``."""
    mod, sep, name = spec.partition(":")
    if not sep or not mod or not name:
        raise ConfigError(f"LDP_ISSUER_ATTESTER must be module:factory, got {spec!r}")
    try:
        factory = getattr(importlib.import_module(mod), name)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"LDP_ISSUER_ATTESTER {spec!r} cannot be loaded: {exc}") from None
    att = factory(env)
    if not isinstance(att, Attester):
        raise ConfigError(f"LDP_ISSUER_ATTESTER {spec!r} did not return an attester "
                          "(an object with attest(headers) -> device id)")
    return att
