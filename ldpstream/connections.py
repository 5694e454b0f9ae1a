"""How services reach Kafka and Redis on real infrastructure: SASL/TLS and Redis TLS/passwords.

Read once from ``LDP_…`` variables, shared by the aggregator, the query API and the
simulator.  Secrets never appear in ``repr`` (settings get logged).

================================  =============  ==============================================
variable                          default        meaning
================================  =============  ==============================================
LDP_KAFKA_SECURITY_PROTOCOL       PLAINTEXT      PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL
LDP_KAFKA_SASL_MECHANISM          PLAIN          PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (SASL_*)
LDP_KAFKA_SASL_USERNAME           (unset)        SASL user (required with SASL_*)
LDP_KAFKA_SASL_PASSWORD           (unset)        SASL password (required with SASL_*)
LDP_KAFKA_SSL_CAFILE              (system CAs)   PEM bundle to verify the brokers (SSL, SASL_SSL)
LDP_KAFKA_SSL_CERTFILE            (unset)        client certificate for mutual TLS
LDP_KAFKA_SSL_KEYFILE             (unset)        its private key
LDP_KAFKA_SSL_CHECK_HOSTNAME      true           verify the broker's host name
LDP_REDIS_PASSWORD                (unset)        Redis password (overrides one in the URL)
LDP_REDIS_USERNAME                (unset)        Redis ACL user
LDP_REDIS_TLS_CA_FILE             (system CAs)   PEM bundle to verify Redis (rediss:// URLs)
LDP_REDIS_TLS_CERT_FILE           (unset)        client certificate for mutual TLS
LDP_REDIS_TLS_KEY_FILE            (unset)        its private key
LDP_REDIS_SENTINELS               (unset)        host:port[,host:port…] of Redis Sentinels: the
                                                 services ask them for the primary of
                                                 LDP_REDIS_MASTER_NAME (and follow a failover)
LDP_REDIS_MASTER_NAME             ldp            the master name the Sentinels monitor
LDP_REDIS_CLUSTER                 (unset)        host:port[,host:port…] of Redis Cluster nodes
                                                 (seeds; the client learns the others)
================================  =============  ==============================================

With ``LDP_REDIS_SENTINELS`` or ``LDP_REDIS_CLUSTER`` the host and port of
``LDP_REDIS_URL`` are not used; its scheme (``rediss://`` = TLS, also towards the
Sentinels), user, password and database still are, and so are the variables above.
The two cannot be set together.  docs/cluster.md tells how to run either.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .settings import ConfigError, env_bool, env_file, env_hostports

__all__ = ["KafkaSecurity", "RedisOptions", "DEFAULT_MASTER_NAME"]

DEFAULT_MASTER_NAME = "ldp"

_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


@dataclass(frozen=True)
class KafkaSecurity:
    """Security settings of every Kafka client (consumer, producer, admin, simulator)."""

    protocol: str = "PLAINTEXT"
    sasl_mechanism: str = "PLAIN"
    sasl_username: str | None = None
    sasl_password: str | None = field(default=None, repr=False)
    ssl_cafile: str | None = None
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None
    ssl_check_hostname: bool = True

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> KafkaSecurity:
        """Read and validate the ``LDP_KAFKA_SECURITY_…``/``SASL_…``/``SSL_…`` variables."""
        env = os.environ if env is None else env
        protocol = (env.get("LDP_KAFKA_SECURITY_PROTOCOL") or "PLAINTEXT").upper()
        if protocol not in _PROTOCOLS:
            raise ConfigError(f"LDP_KAFKA_SECURITY_PROTOCOL must be one of {', '.join(_PROTOCOLS)}"
                              f", got {protocol!r}")
        mechanism = (env.get("LDP_KAFKA_SASL_MECHANISM") or "PLAIN").upper()
        if mechanism not in _MECHANISMS:
            raise ConfigError(f"LDP_KAFKA_SASL_MECHANISM must be one of {', '.join(_MECHANISMS)}"
                              f", got {mechanism!r}")
        user = env.get("LDP_KAFKA_SASL_USERNAME") or None
        password = env.get("LDP_KAFKA_SASL_PASSWORD") or None
        if protocol.startswith("SASL_"):
            for name, value in (("LDP_KAFKA_SASL_USERNAME", user),
                                ("LDP_KAFKA_SASL_PASSWORD", password)):
                if value is None:
                    raise ConfigError(f"{name} is required when LDP_KAFKA_SECURITY_PROTOCOL "
                                      f"is {protocol}")
        cert = env_file(env, "LDP_KAFKA_SSL_CERTFILE")
        key = env_file(env, "LDP_KAFKA_SSL_KEYFILE")
        if (cert is None) != (key is None):
            raise ConfigError("LDP_KAFKA_SSL_CERTFILE and LDP_KAFKA_SSL_KEYFILE go together")
        return cls(protocol=protocol, sasl_mechanism=mechanism, sasl_username=user,
                   sasl_password=password, ssl_cafile=env_file(env, "LDP_KAFKA_SSL_CAFILE"),
                   ssl_certfile=cert, ssl_keyfile=key,
                   ssl_check_hostname=env_bool(env, "LDP_KAFKA_SSL_CHECK_HOSTNAME", True))

    @property
    def uses_tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        return self.protocol.startswith("SASL_")

    def _common(self) -> dict[str, Any]:
        # The protocol and SASL keywords are spelled the same by both Kafka clients.
        kw: dict[str, Any] = {"security_protocol": self.protocol}
        if self.uses_sasl:
            kw.update(sasl_mechanism=self.sasl_mechanism, sasl_plain_username=self.sasl_username,
                      sasl_plain_password=self.sasl_password)
        return kw

    def aiokafka(self) -> dict[str, Any]:
        """Keyword arguments for aiokafka's consumer, producer and admin client."""
        kw = self._common()
        if self.uses_tls:
            from aiokafka.helpers import create_ssl_context

            ctx = create_ssl_context(cafile=self.ssl_cafile, certfile=self.ssl_certfile,
                                     keyfile=self.ssl_keyfile)
            ctx.check_hostname = self.ssl_check_hostname
            kw["ssl_context"] = ctx
        return kw

    def kafka_python(self) -> dict[str, Any]:
        """Keyword arguments for kafka-python's ``KafkaProducer`` (device SDK, simulator)."""
        kw = self._common()
        if self.uses_tls:
            kw.update(ssl_cafile=self.ssl_cafile, ssl_certfile=self.ssl_certfile,
                      ssl_keyfile=self.ssl_keyfile, ssl_check_hostname=self.ssl_check_hostname)
        return kw


@dataclass(frozen=True)
class RedisOptions:
    """How to reach Redis: credentials, TLS files, and Sentinels or Cluster nodes if any.

    :meth:`connect` and :meth:`connect_async` build the client every service uses
    (sync ``redis.Redis`` / ``redis.asyncio.Redis`` for one server or a Sentinel-managed
    primary, ``RedisCluster`` for a cluster).
    """

    username: str | None = None
    password: str | None = field(default=None, repr=False)
    tls_ca_file: str | None = None
    tls_cert_file: str | None = None
    tls_key_file: str | None = None
    sentinels: tuple[tuple[str, int], ...] = ()
    master_name: str = DEFAULT_MASTER_NAME
    cluster_nodes: tuple[tuple[str, int], ...] = ()

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, *,
                 url: str = "redis://") -> RedisOptions:
        """Read ``LDP_REDIS_PASSWORD``/``USERNAME``/``TLS_…``; TLS files need a rediss:// URL."""
        env = os.environ if env is None else env
        ca = env_file(env, "LDP_REDIS_TLS_CA_FILE")
        cert = env_file(env, "LDP_REDIS_TLS_CERT_FILE")
        key = env_file(env, "LDP_REDIS_TLS_KEY_FILE")
        if (cert is None) != (key is None):
            raise ConfigError("LDP_REDIS_TLS_CERT_FILE and LDP_REDIS_TLS_KEY_FILE go together")
        if (ca or cert) and not url.startswith("rediss://"):
            raise ConfigError("LDP_REDIS_TLS_* files need LDP_REDIS_URL to start with "
                              f"rediss://, got {url!r}")
        sentinels = env_hostports(env, "LDP_REDIS_SENTINELS")
        nodes = env_hostports(env, "LDP_REDIS_CLUSTER")
        if sentinels and nodes:
            raise ConfigError("LDP_REDIS_SENTINELS and LDP_REDIS_CLUSTER cannot both be set "
                              "(a Redis Cluster fails over by itself)")
        master = env.get("LDP_REDIS_MASTER_NAME") or DEFAULT_MASTER_NAME
        if any(c.isspace() for c in master):
            raise ConfigError(f"LDP_REDIS_MASTER_NAME must have no spaces, got {master!r}")
        return cls(username=env.get("LDP_REDIS_USERNAME") or None,
                   password=env.get("LDP_REDIS_PASSWORD") or None,
                   tls_ca_file=ca, tls_cert_file=cert, tls_key_file=key,
                   sentinels=sentinels, master_name=master, cluster_nodes=nodes)

    @property
    def mode(self) -> str:
        """``"sentinel"``, ``"cluster"`` or ``"single"`` (one URL)."""
        return "sentinel" if self.sentinels else "cluster" if self.cluster_nodes else "single"

    def kwargs(self) -> dict[str, Any]:
        """Extra keyword arguments for ``from_url`` (only the ones that are set)."""
        kw: dict[str, Any] = {}
        if self.username is not None:
            kw["username"] = self.username
        if self.password is not None:
            kw["password"] = self.password
        if self.tls_ca_file is not None:
            kw["ssl_ca_certs"] = self.tls_ca_file
        if self.tls_cert_file is not None:
            kw.update(ssl_certfile=self.tls_cert_file, ssl_keyfile=self.tls_key_file)
        return kw

    def _node_kwargs(self, url: str) -> dict[str, Any]:
        """Connection settings of every node (Sentinel mode, Cluster mode): the URL's
        user, password, database and TLS, overridden by the ``LDP_REDIS_…`` ones."""
        from urllib.parse import unquote, urlparse

        u = urlparse(url)
        kw: dict[str, Any] = {}
        if u.username:
            kw["username"] = unquote(u.username)
        if u.password:
            kw["password"] = unquote(u.password)
        db = (u.path or "/").strip("/")
        if db.isdigit() and self.mode != "cluster":
            kw["db"] = int(db)
        if u.scheme == "rediss":
            kw["ssl"] = True
        kw.update(self.kwargs())
        return kw

    def connect(self, url: str, **client: Any) -> Any:
        """A sync client: ``redis.Redis`` (one URL, or the primary the Sentinels name,
        re-asked after every connection error) or ``redis.cluster.RedisCluster``."""
        import redis
        from redis.cluster import ClusterNode, RedisCluster
        from redis.sentinel import Sentinel

        return self._client(url, client, redis.Redis, ClusterNode, RedisCluster, Sentinel)

    def connect_async(self, url: str, **client: Any) -> Any:
        """The ``redis.asyncio`` counterpart of :meth:`connect`."""
        import redis.asyncio as aredis
        from redis.asyncio.cluster import ClusterNode, RedisCluster
        from redis.asyncio.sentinel import Sentinel

        return self._client(url, client, aredis.Redis, ClusterNode, RedisCluster, Sentinel)

    def _client(self, url: str, client: dict[str, Any], redis_cls: Any, node_cls: Any,
                cluster_cls: Any, sentinel_cls: Any) -> Any:
        """One client of this mode, from the sync or the asyncio classes of redis-py."""
        if self.mode == "single":
            return redis_cls.from_url(url, **client, **self.kwargs())
        node = {**self._node_kwargs(url), **client}
        if self.mode == "cluster":
            node.pop("health_check_interval", None)
            nodes = [node_cls(h, p) for h, p in self.cluster_nodes]
            return cluster_cls(startup_nodes=nodes, **node)
        sentinel = sentinel_cls(list(self.sentinels),
                                sentinel_kwargs=self._sentinel_kwargs(node), **node)
        return sentinel.master_for(self.master_name)

    @staticmethod
    def _sentinel_kwargs(node: Mapping[str, Any]) -> dict[str, Any]:
        # Sentinels speak TLS when the nodes do (same CA), and need no password of theirs.
        keep = ("ssl", "ssl_ca_certs", "ssl_certfile", "ssl_keyfile", "socket_timeout",
                "socket_connect_timeout")
        return {k: v for k, v in node.items() if k in keep}
