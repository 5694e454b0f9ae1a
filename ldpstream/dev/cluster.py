"""The servers of a replicated cluster on one machine: what :mod:`ldpctl.cluster` (``ldpstream
up --cluster``, the failover tests, ``ldpstream bench freshness|scaling``) starts under the
services, and the Redis Cluster of ``ldpstream bench redis-layout``.

* **Kafka** (:class:`KafkaCluster`): three Apache Kafka brokers in KRaft mode, each one JVM
  combining broker and controller (a quorum of three voters), from the jars
  ``scripts/bootstrap.sh`` fetches.  Every broker has three loopback listeners: ``CLIENT``
  (what services and devices use: PLAINTEXT, or SASL_SSL with SCRAM-SHA-256 when the
  cluster is secured), ``INTERNAL`` (replication, PLAINTEXT on loopback) and
  ``CONTROLLER``.  Defaults: replication factor 3 and ``min.insync.replicas=2`` for every
  topic (the offsets and transaction logs too), unclean leader election off.
* **Redis with Sentinel** (:class:`RedisSentinels`): a primary and one replica (AOF,
  ``appendfsync always``), and three ``redis-server --sentinel`` processes (the same
  binary as Debian's ``redis-sentinel``) watching master :data:`MASTER_NAME` with a
  quorum of 2 and a 1 s down-after time.  Services find the primary with
  ``LDP_REDIS_SENTINELS`` + ``LDP_REDIS_MASTER_NAME`` (:mod:`ldpstream.connections`).
* **Redis Cluster** (:class:`RedisClusterNodes`): three primaries
  (``--cluster-enabled yes``) joined by ``redis-cli --cluster create``.
* **Secrets** (:func:`make_secrets`): a CA made here with ``openssl``, one certificate for
  127.0.0.1, a SCRAM user for Kafka and an ACL user for Redis (the ``default`` user off).

The services on top of these servers (:class:`ldpctl.cluster.LocalCluster`) live on the top
floor: this module starts servers, never a service.

Every process is a child of the caller, killed with it (``PR_SET_PDEATHSIG``), stopped by
PID.  Nothing listens beyond 127.0.0.1.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .servers import (
    LOOPBACK,
    KafkaBroker,
    ManagedServer,
    ServerError,
    free_port,
    random_cluster_id,
    redis_binary,
    start_redis,
    stop_together,
    wait_port,
)

__all__ = ["CLUSTER_KAFKA_CONFIG", "MASTER_NAME", "KafkaCluster", "RedisClusterNodes",
           "RedisSentinels", "Secrets", "make_secrets"]

#: The master name the Sentinels monitor (``LDP_REDIS_MASTER_NAME``'s default too).
MASTER_NAME = "ldp"

#: Broker settings of the 3-broker cluster (besides the listeners).
CLUSTER_KAFKA_CONFIG = {
    "default.replication.factor": "3",
    "min.insync.replicas": "2",
    "offsets.topic.replication.factor": "3",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "unclean.leader.election.enable": "false",
    # a leader whose follower stops fetching drops it from the ISR after 10 s (default 30)
    "replica.lag.time.max.ms": "10000",
    # the controller notices a killed broker within 3 s (KafkaBroker's session settings)
    "controlled.shutdown.enable": "true",
}


def _openssl(*args: str, cwd: Path) -> None:
    done = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, timeout=60,
                          check=False)
    if done.returncode != 0:
        raise ServerError(f"openssl {args[0]} failed: {done.stderr.decode(errors='replace')}")


@dataclass(frozen=True)
class Secrets:
    """TLS files and credentials of a secured local cluster."""

    directory: Path
    kafka_user: str = "ldp"
    kafka_password: str = field(default="", repr=False)
    redis_user: str = "ldp"
    redis_password: str = field(default="", repr=False)

    @property
    def ca(self) -> Path:
        return self.directory / "ca.crt"

    @property
    def cert(self) -> Path:
        return self.directory / "server.crt"

    @property
    def key(self) -> Path:
        return self.directory / "server.key"

    @property
    def keystore(self) -> Path:
        """Kafka's PEM keystore: the private key (PKCS#8) and the certificate."""
        return self.directory / "keystore.pem"

    def kafka_env(self) -> dict[str, str]:
        """``LDP_KAFKA_…`` settings of a client of the secured brokers."""
        return {"LDP_KAFKA_SECURITY_PROTOCOL": "SASL_SSL",
                "LDP_KAFKA_SASL_MECHANISM": "SCRAM-SHA-256",
                "LDP_KAFKA_SASL_USERNAME": self.kafka_user,
                "LDP_KAFKA_SASL_PASSWORD": self.kafka_password,
                "LDP_KAFKA_SSL_CAFILE": str(self.ca)}

    def redis_env(self) -> dict[str, str]:
        """``LDP_REDIS_…`` credentials and CA of a client of the secured Redis."""
        return {"LDP_REDIS_USERNAME": self.redis_user,
                "LDP_REDIS_PASSWORD": self.redis_password,
                "LDP_REDIS_TLS_CA_FILE": str(self.ca)}

    def kafka_python(self) -> dict[str, Any]:
        """kafka-python keyword arguments (admin clients of tests and tools)."""
        return {"security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-256",
                "sasl_plain_username": self.kafka_user,
                "sasl_plain_password": self.kafka_password, "ssl_cafile": str(self.ca)}


def make_secrets(directory: Path) -> Secrets:
    """A CA, a certificate for 127.0.0.1 signed by it, and random passwords."""
    directory.mkdir(parents=True, exist_ok=True)
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "30", "-subj",
             "/CN=ldpstream-local-ca", "-keyout", "ca.key", "-out", "ca.crt", cwd=directory)
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1",
             "-keyout", "server.key", "-out", "server.csr", cwd=directory)
    (directory / "ext.cnf").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    _openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
             "-CAcreateserial", "-days", "30", "-extfile", "ext.cnf", "-out", "server.crt",
             cwd=directory)
    _openssl("pkcs8", "-topk8", "-nocrypt", "-in", "server.key", "-out", "server.pk8",
             cwd=directory)
    (directory / "keystore.pem").write_text((directory / "server.pk8").read_text()
                                            + (directory / "server.crt").read_text())
    for f in ("ca.key", "server.key", "server.pk8", "keystore.pem"):
        os.chmod(directory / f, 0o600)
    return Secrets(directory, kafka_password=secrets.token_urlsafe(18),
                   redis_password=secrets.token_urlsafe(18))


class ClusterBroker(KafkaBroker):
    """One broker of :class:`KafkaCluster` (reaches its own client listener securely)."""

    secrets: Secrets | None = None

    def admin_config(self) -> dict[str, Any]:
        return self.secrets.kafka_python() if self.secrets is not None else {}


class KafkaCluster:
    """``size`` Apache Kafka brokers, each broker + controller, one KRaft quorum.

    ``bootstrap`` lists every client listener.  :meth:`start` starts the brokers
    together (a controller needs a quorum to come up) and returns once each lists
    itself; :meth:`broker` gives one by node id (1-based) to kill or restart it.
    """

    def __init__(self, workdir: Path, size: int = 3, *, heap: str = "256m",
                 config: dict[str, str] | None = None, secrets: Secrets | None = None,
                 startup_timeout: float = 180.0) -> None:
        self.workdir, self.size, self.secrets = workdir, size, secrets
        cid = random_cluster_id()
        taken: set[int] = set()

        def fresh() -> int:  # free_port may hand out one port twice in a row
            while (port := free_port()) in taken:
                pass
            taken.add(port)
            return port

        ports = [(fresh(), fresh(), fresh()) for _ in range(size)]
        voters = ",".join(f"{i + 1}@{LOOPBACK}:{c}" for i, (_, _, c) in enumerate(ports))
        client_proto = "SASL_SSL" if secrets else "PLAINTEXT"
        self.brokers: list[ClusterBroker] = []
        for i, (client, internal, controller) in enumerate(ports):
            rf, isr = str(min(3, size)), str(min(2, size))
            settings = {
                **CLUSTER_KAFKA_CONFIG,
                "default.replication.factor": rf, "offsets.topic.replication.factor": rf,
                "transaction.state.log.replication.factor": rf,
                "min.insync.replicas": isr, "transaction.state.log.min.isr": isr,
                "controller.quorum.voters": voters,
                "listeners": f"CLIENT://{LOOPBACK}:{client},INTERNAL://{LOOPBACK}:{internal},"
                             f"CONTROLLER://{LOOPBACK}:{controller}",
                "advertised.listeners": f"CLIENT://{LOOPBACK}:{client},"
                                        f"INTERNAL://{LOOPBACK}:{internal}",
                "inter.broker.listener.name": "INTERNAL",
                "listener.security.protocol.map": f"CONTROLLER:PLAINTEXT,INTERNAL:PLAINTEXT,"
                                                  f"CLIENT:{client_proto}",
                **(config or {}),
            }
            fmt: list[str] = []
            if secrets is not None:
                settings.update({
                    "sasl.enabled.mechanisms": "SCRAM-SHA-256",
                    "listener.name.client.scram-sha-256.sasl.jaas.config":
                        "org.apache.kafka.common.security.scram.ScramLoginModule required;",
                    "listener.name.client.ssl.keystore.type": "PEM",
                    "listener.name.client.ssl.keystore.location": str(secrets.keystore),
                })
                fmt = ["--add-scram", f"SCRAM-SHA-256=[name={secrets.kafka_user},"
                                      f"password={secrets.kafka_password}]"]
            wd = workdir / f"broker-{i + 1}"
            wd.mkdir(parents=True, exist_ok=True)
            b = ClusterBroker(wd, client, controller_port=controller, heap=heap,
                              config=settings, startup_timeout=startup_timeout,
                              node_id=i + 1, cluster_id=cid, format_args=fmt)
            b.secrets = secrets
            self.brokers.append(b)

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers)

    @property
    def live_bootstrap(self) -> str:
        """The client listeners of the brokers running now (all of them if none is)."""
        live = [b.bootstrap for b in self.brokers if b.proc is not None and b.proc.poll() is None]
        return ",".join(live) or self.bootstrap

    def broker(self, node_id: int) -> ClusterBroker:
        return self.brokers[node_id - 1]

    def start(self) -> KafkaCluster:
        """Format every log (in parallel), start every JVM, wait until each lists itself.

        The JVMs are spawned from this thread (a child dies with the thread that spawned
        it), and together: a controller waits for a quorum of the others.
        """
        errors: list[BaseException] = []

        def fmt(b: ClusterBroker) -> None:
            try:
                b._format()
            except BaseException as exc:  # noqa: BLE001 - re-raised below
                errors.append(exc)

        threads = [threading.Thread(target=fmt, args=(b,)) for b in self.brokers]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise errors[0]
        for b in self.brokers:
            if b.proc is None or b.proc.poll() is not None:
                b.spawn()
        try:
            deadline = time.monotonic() + self.brokers[0].startup_timeout
            for b in self.brokers:
                wait_port(b.port, max(5.0, deadline - time.monotonic()), b.proc)
                b._wait_metadata(deadline - time.monotonic())
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        stop_together(self.brokers)

    def admin(self) -> Any:
        """A kafka-python admin client of the brokers running now."""
        from kafka import KafkaAdminClient

        return KafkaAdminClient(bootstrap_servers=self.live_bootstrap,
                                request_timeout_ms=10000,
                                **(self.secrets.kafka_python() if self.secrets else {}))

    def describe(self, topic: str, attempts: int = 10) -> list[dict[str, Any]]:
        """The topic's partitions in the metadata of a running broker (retried: a broker
        that just died may still be named as a node to ask)."""
        last: Exception | None = None
        for _ in range(attempts):
            try:
                admin = self.admin()
                try:
                    return [p for t in admin.describe_topics([topic])
                            for p in t.get("partitions", [])]
                finally:
                    admin.close()
            except Exception as exc:  # noqa: BLE001 - ask again
                last = exc
                time.sleep(0.5)
        raise ServerError(f"no metadata of {topic}: {last}")

    def leaders(self, topic: str) -> dict[int, int]:
        """partition -> node id of its leader (from the metadata of a running broker)."""
        return {_pget(p, "partition_index", "partition"): _pget(p, "leader_id", "leader")
                for p in self.describe(topic)}

    def in_sync(self, topic: str) -> dict[int, list[int]]:
        """partition -> node ids of its in-sync replicas."""
        return {_pget(p, "partition_index", "partition"):
                sorted(int(r) for r in (p.get("isr_nodes") or p.get("isr") or []))
                for p in self.describe(topic)}


def _pget(d: dict[str, Any], *names: str) -> int:
    """A partition field of kafka-python's metadata (its names changed between versions)."""
    for n in names:
        if n in d:
            return int(d[n])
    raise KeyError(names[0])


def redis_tls_args(s: Secrets, port: int) -> list[str]:
    """``redis-server`` arguments: TLS only, on ``port``, with the certificate of ``s``."""
    return ["--port", "0", "--tls-port", str(port), "--tls-cert-file", str(s.cert),
            "--tls-key-file", str(s.key), "--tls-ca-cert-file", str(s.ca),
            "--tls-auth-clients", "no", "--tls-replication", "yes"]


def _redis_acl_args(s: Secrets) -> list[str]:
    # the ldp user may do everything; the unauthenticated default user nothing
    # (one argv word per token: redis-server joins the words after an option into its line)
    return ["--user", s.redis_user, "on", f">{s.redis_password}", "~*", "&*", "+@all",
            "--user", "default", "off", "--masteruser", s.redis_user,
            "--masterauth", s.redis_password]


class RedisSentinels:
    """A Redis primary, one replica and three Sentinels watching :data:`MASTER_NAME`.

    ``down_after_ms``: how long the primary must be silent before a Sentinel calls it
    down; then two Sentinels agree and one promotes the replica (1–3 s here).
    """

    def __init__(self, workdir: Path, *, secrets: Secrets | None = None,
                 master: str = MASTER_NAME, down_after_ms: int = 1000,
                 sentinels: int = 3) -> None:
        self.workdir, self.secrets, self.master = workdir, secrets, master
        self.down_after_ms = down_after_ms
        self.nodes: list[ManagedServer] = []
        self.sentinels: list[ManagedServer] = []
        self._count = sentinels

    def _node_args(self, port: int) -> list[str]:
        args: list[str] = []
        if self.secrets is not None:
            args += redis_tls_args(self.secrets, port) + _redis_acl_args(self.secrets)
        return args

    @property
    def url(self) -> str:
        """``LDP_REDIS_URL`` of the services (only its scheme and database matter)."""
        return ("rediss" if self.secrets else "redis") + "://127.0.0.1/0"

    @property
    def sentinel_addresses(self) -> str:
        """``LDP_REDIS_SENTINELS``."""
        return ",".join(f"{LOOPBACK}:{s.port}" for s in self.sentinels)

    def env(self) -> dict[str, str]:
        """The ``LDP_REDIS_…`` settings of a service using this group."""
        out = {"LDP_REDIS_URL": self.url, "LDP_REDIS_SENTINELS": self.sentinel_addresses,
               "LDP_REDIS_MASTER_NAME": self.master}
        if self.secrets is not None:
            out.update(self.secrets.redis_env())
        return out

    def start(self) -> RedisSentinels:
        ports = [free_port(), free_port()]
        for i, port in enumerate(ports):
            wd = self.workdir / f"redis-{i + 1}"
            wd.mkdir(parents=True, exist_ok=True)
            extra = self._node_args(port)
            if i == 1:
                extra += ["--replicaof", LOOPBACK, str(ports[0])]
            self.nodes.append(start_redis(wd, port, extra=extra))
        for i in range(self._count):
            wd = self.workdir / f"sentinel-{i + 1}"
            wd.mkdir(parents=True, exist_ok=True)
            port = free_port()
            conf = [f"port {port}", f"bind {LOOPBACK}", f"dir {wd}",
                    f"sentinel monitor {self.master} {LOOPBACK} {ports[0]} 2",
                    f"sentinel down-after-milliseconds {self.master} {self.down_after_ms}",
                    f"sentinel failover-timeout {self.master} 10000",
                    f"sentinel parallel-syncs {self.master} 1"]
            if self.secrets is not None:
                s = self.secrets
                conf = [c for c in conf if not c.startswith("port ")]
                conf += ["port 0", f"tls-port {port}", f"tls-cert-file {s.cert}",
                         f"tls-key-file {s.key}", f"tls-ca-cert-file {s.ca}",
                         "tls-auth-clients no", "tls-replication yes",
                         f"sentinel auth-user {self.master} {s.redis_user}",
                         f"sentinel auth-pass {self.master} {s.redis_password}"]
            (wd / "sentinel.conf").write_text("\n".join(conf) + "\n")
            argv = [redis_binary(), str(wd / "sentinel.conf"), "--sentinel"]
            self.sentinels.append(ManagedServer("sentinel", argv, port, wd).start())
        self.wait_replicas(1, 30)
        return self

    def stop(self) -> None:
        stop_together(self.sentinels)
        stop_together(self.nodes)

    def client(self, port: int, **kw: Any) -> Any:
        """A plain client of one node (``port``), or of a Sentinel."""
        import redis

        if self.secrets is not None:
            kw.update(ssl=True, ssl_ca_certs=str(self.secrets.ca))
            if port not in {s.port for s in self.sentinels}:
                kw.update(username=self.secrets.redis_user, password=self.secrets.redis_password)
        return redis.Redis(host=LOOPBACK, port=port, socket_timeout=5, **kw)

    def primary_port(self) -> int:
        """The port of the primary as the Sentinels see it now (the first one that answers)."""
        last: Exception | None = None
        for s in self.sentinels:
            if s.proc is None:
                continue
            c = self.client(s.port)
            try:
                host, port = c.sentinel_get_master_addr_by_name(self.master)
                return int(port)
            except Exception as exc:  # noqa: BLE001 - ask the next one
                last = exc
            finally:
                c.close()
        raise ServerError(f"no Sentinel named the primary: {last}")

    def node(self, port: int) -> ManagedServer:
        return next(n for n in self.nodes if n.port == port)

    def primary(self) -> ManagedServer:
        return self.node(self.primary_port())

    def replica(self) -> ManagedServer:
        p = self.primary_port()
        return next(n for n in self.nodes if n.port != p)

    def wait_replicas(self, count: int, timeout: float) -> None:
        """Until the primary reports ``count`` connected replicas in sync (online)."""
        deadline = time.monotonic() + timeout
        info: dict[str, Any] = {}
        while time.monotonic() < deadline:
            with contextlib.suppress(Exception):
                c = self.client(self.primary_port())
                try:
                    info = c.info("replication")
                finally:
                    c.close()
                online = [v for k, v in info.items() if k.startswith("slave")
                          and isinstance(v, dict) and v.get("state") == "online"]
                if info.get("role") == "master" and len(online) >= count:
                    return
            time.sleep(0.2)
        raise ServerError(f"the Redis primary has not {count} replica(s) in sync after "
                          f"{timeout:.0f} s: {info}")

    def wait_failover(self, old_port: int, timeout: float = 60.0) -> int:
        """Until the Sentinels name a primary other than ``old_port`` that answers as one."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with contextlib.suppress(Exception):
                port = self.primary_port()
                if port != old_port:
                    c = self.client(port)
                    try:
                        if c.info("replication").get("role") == "master":
                            return port
                    finally:
                        c.close()
            time.sleep(0.1)
        raise ServerError(f"no failover away from port {old_port} in {timeout:.0f} s")


def _cluster_port(taken: set[int]) -> int:
    """A free loopback port whose cluster bus port (+10000) is free too; Redis refuses a
    port above 55535 (a free port from the kernel often is)."""
    import random
    import socket

    rng = random.SystemRandom()
    for _ in range(200):
        port = rng.randrange(20000, 30000)
        if port in taken or port + 10000 in taken:
            continue
        try:
            for p in (port, port + 10000):
                with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                    s.bind((LOOPBACK, p))
        except OSError:
            continue
        return port
    raise ServerError("no free port pair (port, port + 10000) below 30000 for Redis Cluster")


class RedisClusterNodes:
    """A Redis Cluster of ``size`` primaries (no replicas) on loopback ports."""

    def __init__(self, workdir: Path, size: int = 3) -> None:
        self.workdir, self.size = workdir, size
        self.nodes: list[ManagedServer] = []

    @property
    def addresses(self) -> str:
        """``LDP_REDIS_CLUSTER``."""
        return ",".join(f"{LOOPBACK}:{n.port}" for n in self.nodes)

    def start(self) -> RedisClusterNodes:
        taken: set[int] = set()
        for i in range(self.size):
            wd = self.workdir / f"node-{i + 1}"
            wd.mkdir(parents=True, exist_ok=True)
            port = _cluster_port(taken)
            taken.add(port)
            self.nodes.append(start_redis(wd, port, extra=[
                "--cluster-enabled", "yes", "--cluster-config-file", str(wd / "nodes.conf"),
                "--cluster-node-timeout", "2000"]))
        cli = str(Path(redis_binary()).with_name("redis-cli"))
        done = subprocess.run([cli, "--cluster", "create",
                               *[f"{LOOPBACK}:{n.port}" for n in self.nodes],
                               "--cluster-replicas", "0", "--cluster-yes"],
                              capture_output=True, timeout=60, check=False,
                              stdin=subprocess.DEVNULL)
        if done.returncode != 0:
            self.stop()
            raise ServerError("redis-cli --cluster create failed: "
                              + (done.stdout + done.stderr).decode(errors="replace")[-1500:])
        import redis

        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            states = []
            for n in self.nodes:
                c = redis.Redis(host=LOOPBACK, port=n.port, socket_timeout=5)
                try:
                    info = c.execute_command("CLUSTER INFO")  # type: ignore[no-untyped-call]
                    states.append(info.get("cluster_state"))
                finally:
                    c.close()
            if all(s == "ok" for s in states):
                return self
            time.sleep(0.2)
        self.stop()
        raise ServerError("the Redis Cluster did not reach cluster_state:ok in 30 s")

    def stop(self) -> None:
        for n in self.nodes:
            n.stop()
