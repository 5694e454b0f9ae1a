"""Settings of ``ldpstream issuer``, read once from ``LDP_…`` variables (a bad value stops
it at start-up naming the variable).

==============================  ========================  =======================================
variable                        default                   meaning
==============================  ========================  =======================================
LDP_REDIS_URL, LDP_REDIS_PREFIX redis://127.0.0.1:6379/0  catalogue, keys and quota counts
LDP_ISSUER_HOST                 127.0.0.1                 bind address (0.0.0.0 in containers)
LDP_ISSUER_PORT                 8090                      port (0: a free one, printed)
LDP_ISSUER_KEYS                 (unset)                   fleet keys ``fleet:key,…`` of the
                                                          default attester (as LDP_GATEWAY_KEYS)
LDP_ISSUER_KEYS_FILE            (unset)                   file of ``fleet:key`` lines
LDP_ISSUER_OPEN                 false                     start with no fleet key (any device
                                                          credential is a device): demos only
LDP_ISSUER_ATTESTER             fleet-key                 ``module:factory`` of another attester
LDP_ISSUER_APP_LOGIN_SECRET     (unset)                   secret of ``issuer.attest:app_login``
LDP_ISSUER_KEY_PASSWORD         (unset)                   encrypts the private keys in Redis
LDP_ISSUER_PREFETCH_WINDOWS     1                         windows ahead a device may get tokens
                                                          for (0: the current window only)
LDP_TOKEN_ISSUER_NAME           ldpstream                 issuer_name of every TokenChallenge
LDP_TOKEN_SKEW_SECONDS          30                        clock skew tolerated at window edges
==============================  ========================  =======================================
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ldpstream.envconfig import RedisSettings, read_redis
from ldpstream.privacypass.scheme import DEFAULT_ISSUER_NAME, DEFAULT_SKEW, env_issuer_name
from ldpstream.settings import ConfigError, env_bool, env_file, env_int, parse_keys

from .attest import Attester, FleetKeyAttester, load_attester

__all__ = ["IssuerSettings"]


@dataclass(frozen=True)
class IssuerSettings(RedisSettings):
    host: str = "127.0.0.1"
    port: int = 8090
    issuer_name: str = DEFAULT_ISSUER_NAME
    skew: int = DEFAULT_SKEW
    prefetch_windows: int = 1
    key_password: bytes | None = field(default=None, repr=False)
    attester: Attester = field(default_factory=lambda: FleetKeyAttester({}), repr=False)
    attester_name: str = "fleet key + device credential"

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> IssuerSettings:
        env = os.environ if env is None else env
        # the plain settings first (all read, whatever the attester check says)
        plain: dict[str, Any] = dict(
            **read_redis(env),
            host=env.get("LDP_ISSUER_HOST") or cls.host,
            port=env_int(env, "LDP_ISSUER_PORT", cls.port, 0, 65535),
            issuer_name=env_issuer_name(env),
            skew=env_int(env, "LDP_TOKEN_SKEW_SECONDS", DEFAULT_SKEW, 0, 3600),
            prefetch_windows=env_int(env, "LDP_ISSUER_PREFETCH_WINDOWS", 1, 0, 24),
        )
        password = env.get("LDP_ISSUER_KEY_PASSWORD") or None
        spec = env.get("LDP_ISSUER_ATTESTER") or ""
        if spec:
            attester: Attester = load_attester(spec, env)
            name = spec
        else:
            keys = parse_keys(env.get("LDP_ISSUER_KEYS") or "", "LDP_ISSUER_KEYS")
            kfile = env_file(env, "LDP_ISSUER_KEYS_FILE")
            if kfile is not None:
                with open(kfile) as fh:
                    keys.update(parse_keys(fh.read(), "LDP_ISSUER_KEYS_FILE"))
            if not keys and not env_bool(env, "LDP_ISSUER_OPEN", False):
                raise ConfigError("LDP_ISSUER_KEYS (or LDP_ISSUER_KEYS_FILE) is empty: the "
                                  "issuer would give tokens to anyone; set fleet keys, another "
                                  "LDP_ISSUER_ATTESTER, or LDP_ISSUER_OPEN=true for a demo")
            attester = FleetKeyAttester(keys)
            fleets = len(set(keys.values()))
            name = (f"fleet key ({fleets} fleets) + device credential" if keys
                    else "OPEN: device credential only (LDP_ISSUER_OPEN)")
        return cls(key_password=password.encode() if password else None, attester=attester,
                   attester_name=name, **plain)
