"""Settings of the HTTP ingestion gateway, read once from ``LDP_…`` environment variables.

A bad value fails at start-up with :class:`ConfigError` naming the variable.

===========================  ========================  ==========================================
variable                     default                   meaning
===========================  ========================  ==========================================
LDP_KAFKA_BOOTSTRAP          127.0.0.1:9092            Kafka bootstrap servers (comma separated)
LDP_REDIS_URL                redis://127.0.0.1:6379/0  Redis holding the collection catalogue
LDP_REDIS_PREFIX             ldp:                      prefix of every Redis key
LDP_REPORTS_TOPIC            ldp-reports               topic the accepted reports go to
LDP_TOPIC_PARTITIONS         4                         partitions if the gateway creates the topic
LDP_TOPIC_REPLICATION        1                         replication if the gateway creates it
LDP_TOPIC_MIN_ISR            0 (broker default)        its min.insync.replicas then
LDP_GATEWAY_HOST             127.0.0.1                 bind address (0.0.0.0 in containers)
LDP_GATEWAY_PORT             8080                      port (0: a free one, printed at start)
LDP_GATEWAY_KEYS             (unset: no keys)          device API keys ``fleet:key,fleet:key``
LDP_GATEWAY_KEYS_FILE        (unset)                   file of ``fleet:key`` lines (``#`` comments)
LDP_GATEWAY_OPEN             (unset: loopback only)    ``true``: run without device keys or
                                                       tokens on any address (demos: anyone who
                                                       reaches it may post); ``false``: never
LDP_GATEWAY_CORS_ORIGINS     ``*``                     origins allowed by CORS (comma separated,
                                                       ``*`` = any; empty string = CORS off);
                                                       unset: ``LDP_CORS_ORIGINS`` if set
LDP_GATEWAY_MAX_BODY         4194304                   largest request body in bytes (else 413)
LDP_GATEWAY_MAX_HEAD         16384                     largest request head (request line and
                                                       headers) in bytes (else 431)
LDP_GATEWAY_MAX_HEADERS      100                       most header fields (else 431)
LDP_GATEWAY_MAX_TARGET       8192                      longest request target (URL) in bytes
                                                       (else 414)
LDP_GATEWAY_HEAD_TIMEOUT     10                        seconds for a request's head, from the
                                                       connection or the request's first byte
                                                       (else 408 and close)
LDP_GATEWAY_BODY_MIN_RATE    1024                      bytes/s a body must keep up ...
LDP_GATEWAY_BODY_GRACE       5                         ... with this many seconds of credit
                                                       (else 408 and close)
LDP_GATEWAY_IDLE_TIMEOUT     75                        seconds a keep-alive connection may wait
                                                       for its next request
LDP_GATEWAY_BODY_BUDGET      67108864                  bytes of request bodies being received,
                                                       all connections together (else 503)
LDP_GATEWAY_AUTH_FAIL_BURST  20                        failed authentications an address may
                                                       have at once ...
LDP_GATEWAY_AUTH_FAIL_RATE   1                         ... and earns back per second (else 429)
LDP_GATEWAY_TRUSTED_PROXIES  (unset)                   CIDRs of proxies whose X-Forwarded-For
                                                       names the client (comma separated)
LDP_GATEWAY_LINGER_MS        5                         longest wait of an accepted report before
                                                       its batch goes to Kafka
LDP_GATEWAY_BATCH_BYTES      1000000                   a collection's Kafka message is cut at
                                                       this many bytes (and sent at once)
LDP_GATEWAY_QUEUE_BYTES      67108864                  message bytes accepted but not yet
                                                       acknowledged by the broker; beyond: 429
LDP_GATEWAY_ACK_TIMEOUT_MS   10000                     no broker acknowledgement within this: 503
LDP_GATEWAY_RETRY_AFTER      1                         seconds in ``Retry-After`` of 429/503
LDP_GATEWAY_CATALOG_REFRESH  5                         seconds between re-reads of the catalogue
LDP_GATEWAY_MAX_CONNECTIONS  10000                     open connections beyond this are closed
LDP_GATEWAY_IDEMPOTENCY_TTL_S  86400                   seconds an ``Idempotency-Key`` and its
                                                       answer are remembered (the window in
                                                       which a retried request counts once)
LDP_GATEWAY_TOKENS           off                       Privacy Pass tokens: ``required`` (one per
                                                       report), ``optional`` (checked when sent)
                                                       or ``off`` (docs/privacy-pass.md)
LDP_GATEWAY_TOKEN_VERIFIER   auto                      RSASSA-PSS verification of the tokens:
                                                       ``gmpy2`` (GMP, the least CPU),
                                                       ``openssl`` (cryptography) or ``auto``
                                                       (gmpy2 if installed); same answers
LDP_TOKEN_ISSUER_NAME        ldpstream                 issuer_name of the token challenges
LDP_TOKEN_SKEW_SECONDS       30                        a spent token is remembered this long
                                                       after its window's end
===========================  ========================  ==========================================

Kafka SASL/TLS and Redis TLS/credentials: see :mod:`ldpstream.connections`.

Closed by default: with neither device keys nor ``LDP_GATEWAY_TOKENS=required`` the
gateway starts only on a loopback address (what ``ldpstream up`` does) or with
``LDP_GATEWAY_OPEN=true``; otherwise start-up fails naming these variables.  The access
mode (``keys``, ``tokens`` or ``open``) is printed at start-up and stated on ``/readyz``.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from ldpstream.envconfig import KafkaRedisSettings, read_kafka_redis
from ldpstream.privacypass.scheme import DEFAULT_ISSUER_NAME, DEFAULT_SKEW, env_issuer_name
from ldpstream.settings import (
    ConfigError,
    env_bool,
    env_file,
    env_float,
    env_int,
    env_origins,
    key_digest,
    parse_keys,
)

__all__ = ["ConfigError", "GatewaySettings", "Limits", "parse_keys", "key_digest",
           "access_mode", "is_loopback"]


def is_loopback(host: str) -> bool:
    """True if ``host`` is a loopback address (only this machine can connect).

    >>> is_loopback("127.0.0.1"), is_loopback("::1"), is_loopback("0.0.0.0")
    (True, True, False)
    """
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name: it may resolve anywhere
        return False


def access_mode(env: Mapping[str, str], host: str, keys: Mapping[bytes, str], *,
                tokens_required: bool = False) -> str:
    """``keys``, ``tokens`` or ``open``; ConfigError when the gateway would be open where it
    must not be (see the module docstring).  ``tokens_required``: the gateway verifies a
    Privacy Pass token on every report (the token redemption passes its own setting).

    >>> access_mode({}, "127.0.0.1", {}), access_mode({}, "0.0.0.0", {b"k": "fleet"})
    ('open', 'keys')
    >>> access_mode({"LDP_GATEWAY_OPEN": "true"}, "0.0.0.0", {})
    'open'
    >>> access_mode({}, "0.0.0.0", {})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ldpstream.settings.ConfigError: the gateway would accept reports from anyone ...
    """
    raw = (env.get("LDP_GATEWAY_OPEN") or "").strip().lower()
    opened = None if raw == "" else env_bool(env, "LDP_GATEWAY_OPEN", False)
    if keys:
        return "keys"
    if tokens_required:
        return "tokens"
    if opened or (opened is None and is_loopback(host)):
        return "open"
    where = (f"on {host} (not a loopback address)" if opened is None
             else "and LDP_GATEWAY_OPEN is false")
    raise ConfigError(f"the gateway would accept reports from anyone who reaches it {where}: "
                      "set device keys (LDP_GATEWAY_KEYS or LDP_GATEWAY_KEYS_FILE) or "
                      "LDP_GATEWAY_TOKENS=required, or LDP_GATEWAY_OPEN=true to run it open "
                      "on purpose (demos)")


@dataclass(frozen=True)
class Limits:
    """What one client may take, as the server reads it (:meth:`GatewaySettings.limits`;
    the variables are in the module docstring)."""

    max_body: int = 4 << 20
    """Largest body (413)."""
    max_head: int = 16384
    """Largest request line + headers, in bytes (431)."""
    max_headers: int = 100
    """Most header fields (431)."""
    max_target: int = 8192
    """Longest request target (414)."""
    head_timeout: float = 10.0
    """Seconds from the connection (or the request's first byte) to the end of its head."""
    body_min_rate: int = 1024
    """Bytes per second a body must keep up, after ..."""
    body_grace: float = 5.0
    """... this many seconds of credit."""
    idle_timeout: float = 75.0
    """Seconds a keep-alive connection may wait for its next request."""
    body_budget: int = 64 << 20
    """Bytes of bodies being received, all connections together (503 beyond)."""
    max_connections: int = 10_000
    """Open connections beyond this are closed."""


@dataclass(frozen=True)
class GatewaySettings(KafkaRedisSettings, Limits):
    """Gateway settings (see the module docstring for the variables; Kafka, Redis and the
    reports topic: :class:`~ldpstream.envconfig.KafkaRedisSettings`; what one client may
    take: :class:`Limits`)."""

    host: str = "127.0.0.1"
    port: int = 8080
    cors_origins: tuple[str, ...] = ("*",)
    # the way to Kafka: batches, the send queue, the broker's acknowledgements
    linger_ms: float = 5.0
    batch_bytes: int = 1_000_000  # under the 1 MB message.max.bytes of a default topic
    queue_bytes: int = 64 << 20
    ack_timeout_ms: int = 10_000
    retry_after: int = 1
    catalog_refresh: float = 5.0
    # who may post: device keys or tokens, failed authentications, proxies
    keys: dict[bytes, str] = field(default_factory=dict, repr=False)
    auth_fail_burst: int = 20
    auth_fail_rate: float = 1.0
    trusted_proxies: tuple[str, ...] = ()
    tokens: str = "off"
    token_verifier: str = "auto"
    token_issuer_name: str = DEFAULT_ISSUER_NAME
    token_skew: int = DEFAULT_SKEW
    idempotency_ttl_s: int = 86_400
    access: str = "open"
    """``keys``, ``tokens`` or ``open`` (:func:`access_mode`)."""

    def limits(self) -> Limits:
        """The limits the server holds each client to (the :class:`Limits` part of these
        settings)."""
        return Limits(**{f.name: getattr(self, f.name) for f in fields(Limits)})

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> GatewaySettings:
        """Read and validate every variable from ``env`` (default ``os.environ``)."""
        env = os.environ if env is None else env
        shared = read_kafka_redis(env)
        keys = _device_keys(env)
        # LDP_GATEWAY_CORS_ORIGINS wins; else the origins the query API allows; else any.
        origins = env_origins(env, "LDP_GATEWAY_CORS_ORIGINS", "LDP_CORS_ORIGINS",
                              default=("*",))
        host = env.get("LDP_GATEWAY_HOST") or cls.host
        tokens = _tokens_mode(env)
        access = access_mode(env, host, keys, tokens_required=tokens == "required")
        return cls(
            **shared,
            host=host,
            port=env_int(env, "LDP_GATEWAY_PORT", cls.port, 0, 65535),
            keys=keys,
            cors_origins=origins,
            **_sizes(env),
            **_timeouts(env),
            **_abuse_limits(env),
            linger_ms=env_float(env, "LDP_GATEWAY_LINGER_MS", cls.linger_ms, 0.0, 10_000.0),
            ack_timeout_ms=env_int(env, "LDP_GATEWAY_ACK_TIMEOUT_MS", cls.ack_timeout_ms,
                                   100, 600_000),
            retry_after=env_int(env, "LDP_GATEWAY_RETRY_AFTER", cls.retry_after, 1, 3600),
            catalog_refresh=env_float(env, "LDP_GATEWAY_CATALOG_REFRESH", cls.catalog_refresh,
                                      0.1, 3600.0),
            tokens=tokens,
            token_verifier=_token_verifier(env),
            token_issuer_name=env_issuer_name(env),
            token_skew=env_int(env, "LDP_TOKEN_SKEW_SECONDS", DEFAULT_SKEW, 0, 3600),
            idempotency_ttl_s=env_int(env, "LDP_GATEWAY_IDEMPOTENCY_TTL_S",
                                      cls.idempotency_ttl_s, 60, 30 * 86_400),
            access=access,
        )

    def access_note(self) -> str:
        """What start-up and ``/readyz`` say about who may post."""
        if self.access == "keys":
            return f"device keys of {len(set(self.keys.values()))} fleets required"
        if self.access == "tokens":
            return "a Privacy Pass token required per report"
        if is_loopback(self.host):
            return "OPEN on loopback: no device keys, no tokens (only this machine can post)"
        return (f"OPEN: no device keys, no tokens, anyone who reaches {self.host} may post "
                "reports (LDP_GATEWAY_OPEN=true)")

def _device_keys(env: Mapping[str, str]) -> dict[bytes, str]:
    """``LDP_GATEWAY_KEYS`` and the lines of ``LDP_GATEWAY_KEYS_FILE``: digest -> fleet."""
    keys = parse_keys(env.get("LDP_GATEWAY_KEYS") or "", "LDP_GATEWAY_KEYS")
    kfile = env_file(env, "LDP_GATEWAY_KEYS_FILE")
    if kfile is not None:
        with open(kfile) as fh:
            for digest, fleet in parse_keys(fh.read(), "LDP_GATEWAY_KEYS_FILE").items():
                if digest in keys and keys[digest] != fleet:
                    raise ConfigError(f"LDP_GATEWAY_KEYS_FILE: fleet {fleet!r} shares a "
                                      f"key with fleet {keys[digest]!r} of "
                                      "LDP_GATEWAY_KEYS")
                keys[digest] = fleet
    return keys


def _sizes(env: Mapping[str, str]) -> dict[str, Any]:
    """The byte bounds: a body, a Kafka message, the send queue, all bodies being received,
    a request's head and target (each checked against those it must fit in)."""
    d = GatewaySettings
    max_body = env_int(env, "LDP_GATEWAY_MAX_BODY", d.max_body, 64, 1 << 30)
    batch_bytes = env_int(env, "LDP_GATEWAY_BATCH_BYTES", d.batch_bytes, 1024, 16 << 20)
    queue_bytes = env_int(env, "LDP_GATEWAY_QUEUE_BYTES", d.queue_bytes, 1 << 16, 1 << 34)
    if queue_bytes < max_body:
        raise ConfigError(f"LDP_GATEWAY_QUEUE_BYTES ({queue_bytes}) must be at least "
                          f"LDP_GATEWAY_MAX_BODY ({max_body})")
    body_budget = env_int(env, "LDP_GATEWAY_BODY_BUDGET", d.body_budget, 1 << 16, 1 << 40)
    if body_budget < max_body:
        raise ConfigError(f"LDP_GATEWAY_BODY_BUDGET ({body_budget}) must be at least "
                          f"LDP_GATEWAY_MAX_BODY ({max_body})")
    max_head = env_int(env, "LDP_GATEWAY_MAX_HEAD", d.max_head, 1024, 1 << 20)
    max_target = env_int(env, "LDP_GATEWAY_MAX_TARGET", d.max_target, 64, 1 << 20)
    if max_target >= max_head:
        raise ConfigError(f"LDP_GATEWAY_MAX_TARGET ({max_target}) must be smaller than "
                          f"LDP_GATEWAY_MAX_HEAD ({max_head}): the target is part of the "
                          "head")
    return {"max_body": max_body, "batch_bytes": batch_bytes, "queue_bytes": queue_bytes,
            "body_budget": body_budget, "max_head": max_head, "max_target": max_target,
            "max_headers": env_int(env, "LDP_GATEWAY_MAX_HEADERS", d.max_headers, 8, 10_000)}


def _timeouts(env: Mapping[str, str]) -> dict[str, Any]:
    """How slow a client may be: its head, its body's rate and grace, an idle connection."""
    d = GatewaySettings
    return {"head_timeout": env_float(env, "LDP_GATEWAY_HEAD_TIMEOUT", d.head_timeout, 0.1,
                                      3600.0),
            "body_min_rate": env_int(env, "LDP_GATEWAY_BODY_MIN_RATE", d.body_min_rate, 1,
                                     1 << 30),
            "body_grace": env_float(env, "LDP_GATEWAY_BODY_GRACE", d.body_grace, 0.1, 3600.0),
            "idle_timeout": env_float(env, "LDP_GATEWAY_IDLE_TIMEOUT", d.idle_timeout, 0.1,
                                      86_400.0)}


def _abuse_limits(env: Mapping[str, str]) -> dict[str, Any]:
    """Connections at once, failed authentications per address, and the proxies whose
    ``X-Forwarded-For`` names the client."""
    d = GatewaySettings
    proxies = tuple(p.strip() for p in (env.get("LDP_GATEWAY_TRUSTED_PROXIES") or ""
                                        ).split(",") if p.strip())
    for p in proxies:
        try:
            ipaddress.ip_network(p, strict=False)
        except ValueError:
            raise ConfigError("LDP_GATEWAY_TRUSTED_PROXIES must be IP addresses or CIDR "
                              f"networks (comma separated), got {p!r}") from None
    return {"max_connections": env_int(env, "LDP_GATEWAY_MAX_CONNECTIONS", d.max_connections,
                                       1, 1_000_000),
            "auth_fail_burst": env_int(env, "LDP_GATEWAY_AUTH_FAIL_BURST", d.auth_fail_burst, 1,
                                       1_000_000),
            "auth_fail_rate": env_float(env, "LDP_GATEWAY_AUTH_FAIL_RATE", d.auth_fail_rate,
                                        0.001, 1_000_000.0),
            "trusted_proxies": proxies}


def _tokens_mode(env: Mapping[str, str]) -> str:
    mode = (env.get("LDP_GATEWAY_TOKENS") or "off").strip().lower()
    if mode not in ("required", "optional", "off"):
        raise ConfigError(f"LDP_GATEWAY_TOKENS must be required, optional or off, got {mode!r}")
    return mode


def _token_verifier(env: Mapping[str, str]) -> str:
    from ldpstream.privacypass.blindrsa import BACKENDS, default_backend

    name = (env.get("LDP_GATEWAY_TOKEN_VERIFIER") or "auto").strip().lower()
    if name not in BACKENDS:
        raise ConfigError(f"LDP_GATEWAY_TOKEN_VERIFIER must be {', '.join(BACKENDS[:-1])} or "
                          f"{BACKENDS[-1]}, got {name!r}")
    if name == "gmpy2" and default_backend() != "gmpy2":
        raise ConfigError("LDP_GATEWAY_TOKEN_VERIFIER=gmpy2 needs the gmpy2 package "
                          "(pip install gmpy2), or set it to auto or openssl")
    return name
