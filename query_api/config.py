"""Configuration of the query service, read once from ``LDP_…`` environment variables.

A bad value fails at start-up with a :class:`ConfigError` naming the variable.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from ldpstream.envconfig import RedisSettings, read_redis
from ldpstream.settings import ConfigError, env_float, env_int, env_origins

__all__ = ["ConfigError", "ApiSettings"]

MiB = 1 << 20  # the unit of the cache bounds' variables


@dataclass(frozen=True)
class ApiSettings(RedisSettings):
    """Settings of ``ldpstream serve``.

    ==========================  ==========================  ========================================
    variable                    default                     meaning
    ==========================  ==========================  ========================================
    LDP_REDIS_URL               redis://127.0.0.1:6379/0    Redis holding collections and states
    LDP_REDIS_PREFIX            ldp:                        prefix of every Redis key
    LDP_ADMIN_TOKEN             (unset: admin routes off)   bearer token for POST/DELETE collections
    LDP_API_HOST                127.0.0.1                   bind address
    LDP_API_PORT                8000                        bind port
    LDP_STREAM_INTERVAL_S       1.0                         SSE poll interval for state changes
    LDP_VERSION_TTL_MS          50                          re-read state versions this often
    LDP_ANSWER_CACHE_MB         64                          encoded answers kept (MiB, LRU)
    LDP_STATE_CACHE_MB          256                         summed states kept (MiB, LRU), with
                                                            the parts their answers share
    LDP_MAX_STALE_MS            2000                        serve a previous version's answer this
                                                            long while the new one is computed
    LDP_ESTIMATE_THREADS        2                           threads per answer kind (each kind has
                                                            its own pool: a slow kind never blocks
                                                            the others)
    LDP_AUTO_REFRESH_S          300                         make a kept ``auto`` choice again after
                                                            this long (in the background)
    LDP_AUTO_REFRESH_FACTOR     1.25                        … or at once when n leaves [n0/f, n0·f]
    LDP_READ_TOKENS             (unset: reads are open)     file of SHA-256 hashes of read tokens,
                                                            re-read on change (ldpstream.access)
    LDP_API_METRICS_PORT        0 (on the API's port)       serve /metrics on this port instead
    LDP_API_METRICS_HOST        LDP_API_HOST                bind address of that port
    LDP_CORS_ORIGINS            (unset: CORS off)           browser origins (comma separated
                                                            http(s)://host[:port]; ``*`` = any,
                                                            for the read routes only)
    ==========================  ==========================  ========================================

    ``LDP_CACHE_ENTRIES`` (a count bound) is gone: set it and start-up fails naming the
    two byte bounds above.

    Redis credentials and TLS files: ``LDP_REDIS_PASSWORD`` etc., see
    :mod:`ldpstream.connections`.
    """

    admin_token: str | None = None
    host: str = "127.0.0.1"
    port: int = 8000
    stream_interval_s: float = 1.0
    answer_cache_bytes: int = 64 * MiB
    state_cache_bytes: int = 256 * MiB
    version_ttl_s: float = 0.05
    max_stale_s: float = 2.0
    estimate_threads: int = 2
    auto_refresh_s: float = 300.0
    auto_refresh_factor: float = 1.25
    cors_origins: tuple[str, ...] = ()
    read_tokens: str | None = None
    metrics_port: int = 0
    metrics_host: str = "127.0.0.1"

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> ApiSettings:
        """Read the settings from ``env`` (default ``os.environ``), validating each."""
        env = os.environ if env is None else env
        shared = read_redis(env)
        token = env.get("LDP_ADMIN_TOKEN") or None
        if token is not None and len(token) < 8:
            raise ConfigError("LDP_ADMIN_TOKEN must be at least 8 characters")
        if "LDP_CACHE_ENTRIES" in env:
            raise ConfigError("LDP_CACHE_ENTRIES is no longer read: the query API's caches are "
                              "bounded in bytes; set LDP_ANSWER_CACHE_MB (default 64) and "
                              "LDP_STATE_CACHE_MB (default 256) instead")
        return cls(
            **shared,
            admin_token=token,
            host=env.get("LDP_API_HOST", cls.host),
            port=env_int(env, "LDP_API_PORT", cls.port, 1, 65535),
            stream_interval_s=env_float(env, "LDP_STREAM_INTERVAL_S", cls.stream_interval_s,
                                     0.05, 60.0),
            answer_cache_bytes=env_int(env, "LDP_ANSWER_CACHE_MB", 64, 1, 1 << 20) * MiB,
            state_cache_bytes=env_int(env, "LDP_STATE_CACHE_MB", 256, 1, 1 << 20) * MiB,
            version_ttl_s=env_int(env, "LDP_VERSION_TTL_MS", 50, 0, 60_000) / 1000,
            max_stale_s=env_int(env, "LDP_MAX_STALE_MS", 2000, 0, 3_600_000) / 1000,
            estimate_threads=env_int(env, "LDP_ESTIMATE_THREADS", 2, 1, 64),
            auto_refresh_s=env_float(env, "LDP_AUTO_REFRESH_S", 300.0, 1.0, 86_400.0),
            auto_refresh_factor=env_float(env, "LDP_AUTO_REFRESH_FACTOR", 1.25, 1.0, 100.0),
            cors_origins=env_origins(env, "LDP_CORS_ORIGINS"),
            read_tokens=_read_tokens(env),
            metrics_port=env_int(env, "LDP_API_METRICS_PORT", 0, 0, 65535),
            metrics_host=(env.get("LDP_API_METRICS_HOST") or env.get("LDP_API_HOST")
                          or cls.metrics_host),
        )


def _read_tokens(env: Mapping[str, str]) -> str | None:
    """``LDP_READ_TOKENS``: the token file, read once now so a bad one fails at start-up."""
    from ldpstream.access import TokenFile

    path = env.get("LDP_READ_TOKENS") or None
    if path is not None:
        TokenFile(path)
    return path
