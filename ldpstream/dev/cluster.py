"""A replicated cluster on one machine: what ``ldpstream up --cluster``, the failover tests and
``ldpstream bench cluster`` start.

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
* **Services** (:class:`LocalCluster`): the servers above, then two workers (default
  engine), two query API replicas and two gateways, each a child process with its own
  log and free port.

Every process is a child of the caller, killed with it (``PR_SET_PDEATHSIG``), stopped by
PID.  Nothing listens beyond 127.0.0.1.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .servers import (
    LOOPBACK,
    KafkaBroker,
    ManagedServer,
    ServerError,
    _die_with_parent,
    free_port,
    random_cluster_id,
    redis_binary,
    start_redis,
    stop_together,
    wait_port,
)

__all__ = ["CLUSTER_KAFKA_CONFIG", "MASTER_NAME", "KafkaCluster", "LocalCluster",
           "RedisClusterNodes", "RedisSentinels", "Secrets", "Service", "make_secrets"]

ROOT = Path(__file__).resolve().parents[2]

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


def _redis_tls_args(s: Secrets, port: int) -> list[str]:
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
            args += _redis_tls_args(self.secrets, port) + _redis_acl_args(self.secrets)
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


@dataclass
class Service:
    """One service process (``python -m …``); ``ready_url`` answers 200 once it serves."""

    name: str
    argv: list[str]
    env: dict[str, str]
    log: Path
    ready_url: str | None = None
    base_url: str | None = None
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    def start(self) -> Service:
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(self.argv, cwd=ROOT, env=self.env, stdout=out,
                                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         preexec_fn=_die_with_parent)
        return self

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill9(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def stop(self, timeout: float = 20.0) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)

    def wait_ready(self, timeout: float = 120.0) -> None:
        if self.ready_url is None:
            return
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.alive():
                tail = self.log.read_text(errors="replace")[-2000:] if self.log.exists() else ""
                raise ServerError(f"{self.name} exited while starting; log: {tail}")
            try:
                with urllib.request.urlopen(self.ready_url, timeout=2) as r:  # noqa: S310
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.2)
        raise ServerError(f"{self.name}: {self.ready_url} not ready in {timeout:.0f} s")


@dataclass
class LocalCluster:
    """The whole replicated system on one machine (see the module docstring).

    Parameters
    ----------
    workdir
        Logs, broker logs, AOFs, secrets.
    secure
        Kafka SASL_SSL + SCRAM and Redis TLS + an ACL user (else plaintext on loopback).
    workers, apis, gateways
        How many of each service (2, 2, 2).
    env
        Extra ``LDP_…`` settings of every service (topic, prefix, collections file…).
    partitions
        Partitions of the reports topic the workers create.
    """

    workdir: Path
    secure: bool = False
    workers: int = 2
    apis: int = 2
    gateways: int = 2
    env: dict[str, str] = field(default_factory=dict)
    partitions: int = 12
    engine: str = "faust"
    kafka_heap: str = "256m"
    #: brokers of the Kafka cluster (1 for the one-broker figures of the benchmarks)
    brokers: int = 3
    #: Redis primary + replica + Sentinels (else one Redis, as ``ldpstream up``)
    sentinel: bool = True
    single_redis: ManagedServer | None = None
    secrets: Secrets | None = None
    kafka: KafkaCluster | None = None
    redis: RedisSentinels | None = None
    services: dict[str, list[Service]] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)

    def start_servers(self) -> LocalCluster:
        t0 = time.monotonic()
        self.workdir.mkdir(parents=True, exist_ok=True)
        if self.secure and self.secrets is None:
            self.secrets = make_secrets(self.workdir / "secrets")
        self.kafka = KafkaCluster(self.workdir / "kafka", self.brokers, heap=self.kafka_heap,
                                  secrets=self.secrets)
        # Redis first: it is quick, and the brokers take the rest of the time
        if self.sentinel:
            self.redis = RedisSentinels(self.workdir / "redis", secrets=self.secrets).start()
        else:
            wd = self.workdir / "redis"
            wd.mkdir(parents=True, exist_ok=True)
            self.single_redis = start_redis(wd)
        self.timings["redis"] = time.monotonic() - t0
        self.kafka.start()
        self.timings["servers"] = time.monotonic() - t0
        return self

    def service_env(self) -> dict[str, str]:
        """The environment every service starts with."""
        assert self.kafka is not None, "start_servers first"
        env = {k: v for k, v in os.environ.items() if not k.startswith("LDP_")}
        env.update({"LDP_KAFKA_BOOTSTRAP": self.kafka.bootstrap,
                    "LDP_TOPIC_PARTITIONS": str(self.partitions),
                    "LDP_TOPIC_REPLICATION": str(min(3, self.brokers)),
                    "LDP_TOPIC_MIN_ISR": str(min(2, self.brokers)),
                    "LDP_ENGINE": self.engine, "PYTHONPATH": str(ROOT)})
        if self.redis is not None:
            env.update(self.redis.env())
        elif self.single_redis is not None:
            env["LDP_REDIS_URL"] = self.single_redis.url
        if self.secrets is not None:
            env.update(self.secrets.kafka_env())
        env.update(self.env)
        return env

    def redis_client(self) -> Any:
        """A sync Redis client reaching the state the way the services do."""
        from ldpstream.connections import RedisOptions

        env = self.service_env()
        url = env["LDP_REDIS_URL"]
        return RedisOptions.from_env(env, url=url).connect(url, socket_timeout=10,
                                                           socket_connect_timeout=5)

    def kafka_config(self) -> dict[str, Any]:
        """kafka-python settings of a client of the brokers (security when secured)."""
        return self.secrets.kafka_python() if self.secrets is not None else {}

    def _make(self, kind: str, i: int) -> Service:
        logs = self.workdir / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        env = self.service_env()
        py = sys.executable
        port = free_port()
        if kind == "worker":
            env["LDP_METRICS_PORT"] = str(port)
            return Service(f"worker-{i}", [py, "-m", "aggregator"], env,
                           logs / f"worker-{i}.log", f"http://{LOOPBACK}:{port}/healthz",
                           f"http://{LOOPBACK}:{port}")
        if kind == "api":
            env.update(LDP_API_HOST=LOOPBACK, LDP_API_PORT=str(port))
            return Service(f"api-{i}", [py, "-m", "ldpstream", "serve"], env,
                           logs / f"api-{i}.log", f"http://{LOOPBACK}:{port}/readyz",
                           f"http://{LOOPBACK}:{port}")
        env.update(LDP_GATEWAY_HOST=LOOPBACK, LDP_GATEWAY_PORT=str(port))
        return Service(f"gateway-{i}", [py, "-m", "ldpstream", "gateway"], env,
                       logs / f"gateway-{i}.log", f"http://{LOOPBACK}:{port}/readyz",
                       f"http://{LOOPBACK}:{port}")

    def start_services(self) -> LocalCluster:
        t0 = time.monotonic()
        counts = {"worker": self.workers, "api": self.apis, "gateway": self.gateways}
        # the first worker creates the topics (RF 3, min ISR 2) before the gateways ask
        for kind, n in counts.items():
            self.services[kind] = [self._make(kind, i + 1).start() for i in range(n)]
        for group in self.services.values():
            for s in group:
                s.wait_ready()
        self.timings["services"] = time.monotonic() - t0
        return self

    def start(self) -> LocalCluster:
        self.start_servers()
        try:
            self.start_services()
        except BaseException:
            self.stop()
            raise
        return self

    def kill(self) -> None:
        """Stop the services together, then SIGKILL the servers: a test's teardown, where
        nothing is kept (a graceful :meth:`stop` waits for each broker's controlled
        shutdown in turn, and the last ones, without a quorum, for their stop timeout)."""
        services = [s for group in self.services.values() for s in group if s.alive()]
        for s in services:  # a service's own children go with a graceful stop
            assert s.proc is not None
            s.proc.send_signal(signal.SIGTERM)
        for s in services:
            s.stop(timeout=10.0)
        servers = [*(self.kafka.brokers if self.kafka else []),
                   *((self.redis.sentinels + self.redis.nodes) if self.redis else []),
                   *([self.single_redis] if self.single_redis else [])]
        for m in servers:
            m.kill()

    def stop(self) -> None:
        # every service at once (the workers flush as they go), then the servers
        for group in reversed(list(self.services.values())):
            for s in group:
                if s.proc is not None and s.proc.poll() is None:
                    s.proc.send_signal(signal.SIGTERM)
        for group in reversed(list(self.services.values())):
            for s in group:
                s.stop()
        if self.redis is not None:
            self.redis.stop()
        if self.single_redis is not None:
            self.single_redis.stop()
        if self.kafka is not None:
            self.kafka.stop()

    def rss_mb(self) -> dict[str, float]:
        """Resident memory (MB) of each process of the cluster, read from /proc."""
        out: dict[str, float] = {}

        def rss(pid: int | None) -> float:
            if pid is None:
                return 0.0
            with contextlib.suppress(OSError):
                for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1]) / 1024
            return 0.0

        if self.kafka is not None:
            for b in self.kafka.brokers:
                out[f"kafka-{b.node_id}"] = rss(b.pid)
        if self.redis is not None:
            for i, n in enumerate(self.redis.nodes):
                out[f"redis-{i + 1}"] = rss(n.pid)
            for i, sen in enumerate(self.redis.sentinels):
                out[f"sentinel-{i + 1}"] = rss(sen.pid)
        if self.single_redis is not None:
            out["redis"] = rss(self.single_redis.pid)
        for group in self.services.values():
            for svc in group:
                out[svc.name] = rss(None if svc.proc is None else svc.proc.pid)
        return out


@contextlib.contextmanager
def local_cluster(workdir: Path, **options: Any) -> Iterator[LocalCluster]:
    """Context manager: a started :class:`LocalCluster`, stopped on exit."""
    cluster = LocalCluster(workdir, **options).start()
    try:
        yield cluster
    finally:
        cluster.stop()


def wait_http(url: str, timeout: float) -> None:
    """Until ``url`` answers 200 (raises ServerError after ``timeout``)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2) as r:  # noqa: S310 - loopback
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.2)
    raise ServerError(f"{url} did not answer 200 within {timeout:.0f} s")


__all__ += ["local_cluster", "wait_http", "wait_port"]


def run_cluster(args: Any) -> int:
    """``ldpstream up --cluster``: the replicated system, demo devices, until Ctrl-C."""
    import json
    import shutil
    import tempfile

    from .stack import _demo_collections, _with_retention

    temporary = args.data_dir is None
    work = Path(args.data_dir or tempfile.mkdtemp(prefix="ldpstream-cluster-"))
    work.mkdir(parents=True, exist_ok=True)
    demos = _with_retention(_demo_collections(), round(args.retention_hours * 3600))
    cfile = work / "collections.json"
    cfile.write_text(json.dumps({"collections": [spec for spec, _ in demos]}, indent=1))
    stop = {"now": False}

    def on_signal(signum: int, frame: Any) -> None:
        stop["now"] = True

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    env = {"LDP_COLLECTIONS_FILE": str(cfile)}
    if args.release_interval > 0:
        env["LDP_RELEASE_INTERVAL_MS"] = str(int(args.release_interval * 1000))
    if args.admin_token:
        env["LDP_ADMIN_TOKEN"] = args.admin_token
    cluster = LocalCluster(work, secure=args.secure, env=env)
    sims: list[Service] = []
    t0 = time.monotonic()
    try:
        print(f"ldpstream up --cluster: working directory {work}", flush=True)
        cluster.start()
        took = time.monotonic() - t0
        assert cluster.kafka is not None and cluster.redis is not None
        proto = "SASL_SSL + SCRAM-SHA-256" if args.secure else "PLAINTEXT"
        print(f"  kafka     {cluster.kafka.bootstrap} (3 KRaft brokers, {proto}, RF 3, "
              "min.insync.replicas 2)", flush=True)
        print(f"  redis     primary :{cluster.redis.primary_port()}, replica, Sentinels "
              f"{cluster.redis.sentinel_addresses} (master {cluster.redis.master}"
              f"{', TLS + ACL user' if args.secure else ''})", flush=True)
        for kind in ("worker", "api", "gateway"):
            for s in cluster.services[kind]:
                print(f"  {s.name:<9} {s.base_url}", flush=True)
        if cluster.secrets is not None:
            print(f"  secrets   {cluster.secrets.directory} (CA, SCRAM and ACL passwords in "
                  "the services' environment)", flush=True)
        gws = [s.base_url for s in cluster.services["gateway"]]
        if not args.no_simulate:
            senv = cluster.service_env()
            for i, (spec, dist) in enumerate(demos):
                via = ["--gateway", str(gws[i % len(gws)])] if args.via == "gateway" else []
                sims.append(Service(
                    f"simulate-{spec['id']}",
                    [sys.executable, "-m", "ldpstream", "simulate", "--collection", spec["id"],
                     "--collections-file", str(cfile), "--dist", dist, "--reports", str(10**12),
                     "--devices", "50000", "--rate", str(args.rate), "--batch-size", "1,16,64",
                     "--no-progress", *via], senv,
                    work / "logs" / f"simulate-{spec['id']}.log").start())
        rss = cluster.rss_mb()
        print(f"\nUp in {took:.0f} s; resident memory {sum(rss.values()):.0f} MB "
              f"(brokers {sum(v for k, v in rss.items() if k.startswith('kafka')):.0f}, "
              f"Redis + Sentinels "
              f"{sum(v for k, v in rss.items() if k.startswith(('redis', 'sentinel'))):.0f})",
              flush=True)
        print(f"Dashboards: {', '.join(str(s.base_url) + '/' for s in cluster.services['api'])}",
              flush=True)
        print(f"Logs in {work / 'logs'}. Ctrl-C stops everything.", flush=True)
        while not stop["now"]:
            for group in cluster.services.values():
                for s in group:
                    if not s.alive():
                        print(f"{s.name} exited; see {s.log}", flush=True)
                        stop["now"] = True
            time.sleep(0.5)
        print("\nstopping…", flush=True)
        return 0
    finally:
        for s in sims:
            s.stop()
        cluster.stop()
        if temporary and not args.keep:
            shutil.rmtree(work, ignore_errors=True)
            print(f"stopped; removed {work}.", flush=True)
        else:
            print(f"stopped; logs and data kept in {work}.", flush=True)
