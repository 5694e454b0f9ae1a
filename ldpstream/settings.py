"""Parsing of ``LDP_…`` environment variables: one typed reader per kind, failing loudly.

Every reader raises :class:`ConfigError` with a message naming the variable and what is
allowed, so a bad deployment fails at start-up instead of misbehaving later.

Given an :class:`EnvRecorder` instead of ``os.environ``, the readers also note each
variable's default and allowed values: ``scripts/gen_docs.py`` builds the configuration
reference (docs/configuration.md) that way from the services' own ``from_env``.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

__all__ = ["ConfigError", "env_int", "env_float", "env_bool", "env_name", "env_file",
           "env_origins",
           "env_redis_url", "env_redis_prefix", "env_bootstrap", "DEFAULT_REDIS_URL",
           "DEFAULT_BOOTSTRAP", "EnvRecorder", "parse_keys", "key_digest", "env_hostports",
           "env_min_isr"]

DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"
DEFAULT_BOOTSTRAP = "127.0.0.1:9092"

T = TypeVar("T", int, float)


class ConfigError(ValueError):
    """A configuration variable is malformed (the message names it)."""


class EnvRecorder(Mapping[str, str]):
    """An environment that remembers which variables were read, and what the readers of
    this module say of each (default, allowed values).

    >>> env = EnvRecorder({"LDP_X_MS": "5"})
    >>> env_int(env, "LDP_X_MS", 200, 1, 1000), env.get("LDP_Y", "a")
    (5, 'a')
    >>> env.read["LDP_X_MS"], env.read["LDP_Y"]
    ({'default': 200, 'allowed': 'an integer in [1, 1000]'}, {'default': 'a'})
    """

    def __init__(self, env: Mapping[str, str] | None = None) -> None:
        self._env = dict(env or {})
        self.read: dict[str, dict[str, Any]] = {}

    def __getitem__(self, key: str) -> str:
        self.read.setdefault(key, {})
        return self._env[key]

    def get(self, key: str, default: Any = None) -> Any:
        note = self.read.setdefault(key, {})
        if default is not None:
            note.setdefault("default", default)
        return self._env.get(key, default)

    def __contains__(self, key: object) -> bool:
        # Asking whether a variable is set (e.g. to refuse a retired one) is not reading it.
        return key in self._env

    def __iter__(self) -> Iterator[str]:
        return iter(self._env)

    def __len__(self) -> int:
        return len(self._env)

    def note(self, key: str, **facts: Any) -> None:
        self.read.setdefault(key, {}).update(facts)


def _note(env: Mapping[str, str], key: str, **facts: Any) -> None:
    if isinstance(env, EnvRecorder):
        env.note(key, **facts)


def _number(env: Mapping[str, str], key: str, default: T, low: T, high: T,
            parse: Callable[[str], T], kind: str) -> T:
    _note(env, key, default=default, allowed=f"{kind} in [{low}, {high}]")
    raw = env.get(key)
    if raw is None or raw == "":
        return default
    try:
        value = parse(raw)
    except ValueError:
        raise ConfigError(f"{key} must be {kind} in [{low}, {high}], got {raw!r}") from None
    if not low <= value <= high:
        raise ConfigError(f"{key} must be {kind} in [{low}, {high}], got {raw!r}")
    return value


def env_int(env: Mapping[str, str], key: str, default: int, low: int, high: int) -> int:
    """Integer in ``[low, high]``; ``default`` when unset or empty."""
    return _number(env, key, default, low, high, int, "an integer")


def env_float(env: Mapping[str, str], key: str, default: float, low: float,
              high: float) -> float:
    """Number in ``[low, high]``; ``default`` when unset or empty."""
    return _number(env, key, default, low, high, float, "a number")


def env_bool(env: Mapping[str, str], key: str, default: bool) -> bool:
    """``true/false`` (also 1/0, yes/no, on/off); ``default`` when unset or empty."""
    _note(env, key, default=default, allowed="true or false")
    raw = (env.get(key) or "").strip().lower()
    if raw == "":
        return default
    if raw in ("1", "true", "yes", "on"):
        return True
    if raw in ("0", "false", "no", "off"):
        return False
    raise ConfigError(f"{key} must be true or false, got {raw!r}")


def env_name(env: Mapping[str, str], key: str, default: str) -> str:
    """A Kafka-style name: letters, digits, ``.``, ``_`` and ``-``."""
    _note(env, key, default=default, allowed="letters, digits, '.', '_' or '-'")
    value = env.get(key) or default
    if not value.replace("-", "").replace("_", "").replace(".", "").isalnum():
        raise ConfigError(f"{key} must be letters, digits, '.', '_' or '-', got {value!r}")
    return value


def env_file(env: Mapping[str, str], key: str) -> str | None:
    """Path of an existing file, or ``None`` when unset."""
    _note(env, key, default=None, allowed="the path of a readable file")
    path = env.get(key) or None
    if path is not None and not os.path.isfile(path):
        raise ConfigError(f"{key} {path!r} is not a readable file")
    return path


def env_redis_url(env: Mapping[str, str]) -> str:
    """``LDP_REDIS_URL``: a ``redis://``, ``rediss://`` or ``unix://`` URL; unset or empty
    means :data:`DEFAULT_REDIS_URL` (the same for every service)."""
    _note(env, "LDP_REDIS_URL", default=DEFAULT_REDIS_URL,
          allowed="a redis://, rediss:// or unix:// URL")
    url = env.get("LDP_REDIS_URL") or DEFAULT_REDIS_URL
    if not url.startswith(("redis://", "rediss://", "unix://")):
        raise ConfigError(f"LDP_REDIS_URL must start with redis://, rediss:// or unix://, "
                          f"got {url!r}")
    return url


def env_redis_prefix(env: Mapping[str, str]) -> str:
    """``LDP_REDIS_PREFIX``: non-empty, no spaces; unset or empty means ``ldp:``."""
    from .storage import DEFAULT_PREFIX

    _note(env, "LDP_REDIS_PREFIX", default=DEFAULT_PREFIX, allowed="non-empty, no spaces")
    prefix = env.get("LDP_REDIS_PREFIX") or DEFAULT_PREFIX
    if any(c.isspace() for c in prefix):
        raise ConfigError(f"LDP_REDIS_PREFIX must be non-empty without spaces, got {prefix!r}")
    if ("LDP_REDIS_CLUSTER" in env and env["LDP_REDIS_CLUSTER"].strip()
            and ("{" in prefix or "}" in prefix)):
        raise ConfigError(f"LDP_REDIS_PREFIX must have no braces with LDP_REDIS_CLUSTER (they "
                          f"would change the keys' hash tags), got {prefix!r}")
    return prefix


def env_origins(env: Mapping[str, str], *keys: str, default: tuple[str, ...] = ()
                ) -> tuple[str, ...]:
    """CORS origins from the first of ``keys`` that is set (``LDP_GATEWAY_CORS_ORIGINS``
    before ``LDP_CORS_ORIGINS``): comma separated ``*`` or ``http(s)://host[:port]``; an
    empty value means none (CORS off); none set means ``default``."""
    for key in keys:
        raw = env.get(key)
        if raw is None:
            continue
        origins = tuple(o.strip().rstrip("/") for o in raw.split(",") if o.strip())
        for o in origins:
            scheme, sep, rest = o.partition("://")
            if o != "*" and (scheme not in ("http", "https") or not sep or not rest
                             or "/" in rest):
                raise ConfigError(f"{key} must be '*' or http(s)://host[:port] origins "
                                  f"(comma separated), got {o!r}")
        return origins
    return default


def env_bootstrap(env: Mapping[str, str]) -> str:
    """``LDP_KAFKA_BOOTSTRAP``: ``host:port[,host:port…]``; unset or empty means
    :data:`DEFAULT_BOOTSTRAP`."""
    _note(env, "LDP_KAFKA_BOOTSTRAP", default=DEFAULT_BOOTSTRAP,
          allowed="host:port[,host:port…]")
    boot = env.get("LDP_KAFKA_BOOTSTRAP") or DEFAULT_BOOTSTRAP
    for hp in boot.split(","):
        host, _, port = hp.strip().rpartition(":")
        if not host or not port.isdigit():
            raise ConfigError(f"LDP_KAFKA_BOOTSTRAP must be host:port[,host:port…], got {boot!r}")
    return boot


def key_digest(key: str) -> bytes:
    """What the gateway keeps of a device key: its SHA-256 (lookups compare digests)."""
    return hashlib.sha256(key.encode()).digest()


def parse_keys(text: str, source: str) -> dict[bytes, str]:
    """``fleet:key`` entries (comma or newline separated, ``#`` comments) → digest → fleet.

    >>> sorted(parse_keys("a:k1, b:k2", "LDP_GATEWAY_KEYS").values())
    ['a', 'b']
    >>> parse_keys("nokey", "LDP_GATEWAY_KEYS")
    Traceback (most recent call last):
    ...
    ldpstream.settings.ConfigError: LDP_GATEWAY_KEYS: entry 'nokey' must be fleet:key
    """
    out: dict[bytes, str] = {}
    for line in text.replace(",", "\n").splitlines():
        entry = line.split("#", 1)[0].strip()
        if not entry:
            continue
        fleet, sep, key = entry.partition(":")
        fleet, key = fleet.strip(), key.strip()
        if not sep or not fleet or not key:
            raise ConfigError(f"{source}: entry {entry!r} must be fleet:key")
        if any(c.isspace() for c in key):
            raise ConfigError(f"{source}: the key of fleet {fleet!r} has white space")
        digest = key_digest(key)
        if digest in out:
            raise ConfigError(f"{source}: fleets {out[digest]!r} and {fleet!r} share a key")
        out[digest] = fleet
    return out

def env_hostports(env: Mapping[str, str], key: str) -> tuple[tuple[str, int], ...]:
    """``host:port[,host:port…]`` as (host, port) pairs; empty when unset.

    >>> env_hostports({"X": "a:1, b:2"}, "X")
    (('a', 1), ('b', 2))
    """
    raw = (env.get(key) or "").strip()
    if not raw:
        return ()
    out = []
    for hp in raw.split(","):
        host, _, port = hp.strip().rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ConfigError(f"{key} must be host:port[,host:port…], got {raw!r}")
        out.append((host, int(port)))
    return tuple(out)


def env_min_isr(env: Mapping[str, str], replication: int) -> int:
    """``LDP_TOPIC_MIN_ISR``: ``min.insync.replicas`` of the topics a service creates, in
    ``[1, replication]``; unset or 0 leaves the broker's default."""
    isr = env_int(env, "LDP_TOPIC_MIN_ISR", 0, 0, 32)
    if isr > replication:
        raise ConfigError(f"LDP_TOPIC_MIN_ISR ({isr}) must be at most LDP_TOPIC_REPLICATION "
                          f"({replication})")
    return isr
