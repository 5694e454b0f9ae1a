"""The whole replicated system on one machine: the servers of :mod:`ldpstream.dev.cluster`
(three KRaft brokers, Redis with Sentinel, optionally secured), then two workers (default
engine), two query API replicas and two gateways, each a child process with its own log and
free port.  What ``ldpstream up --cluster``, the failover tests and ``ldpstream bench
freshness|scaling`` start.

Every process is a child of the caller, killed with it (``PR_SET_PDEATHSIG``), stopped by
PID.  Nothing listens beyond 127.0.0.1.  The services run as processes, not as calls: a
failover test kills one with SIGKILL, and each has its own event loop, log and port.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ldpstream.dev.cluster import KafkaCluster, RedisSentinels, Secrets, make_secrets
from ldpstream.dev.servers import (
    LOOPBACK,
    ManagedServer,
    ServerError,
    _die_with_parent,
    free_port,
    start_redis,
)

from . import demo

__all__ = ["LocalCluster", "Service", "local_cluster", "run_cluster"]

ROOT = Path(__file__).resolve().parents[1]


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

    def is_ready(self) -> bool:
        """One look: ``ready_url`` answers 200 now (true of a service without one)."""
        if self.ready_url is None:
            return True
        try:
            with urllib.request.urlopen(self.ready_url, timeout=2) as r:  # noqa: S310
                return bool(r.status == 200)
        except OSError:  # refused, timed out, or an HTTP error status (503 while starting)
            return False

    def wait_ready(self, timeout: float = 120.0) -> None:
        if self.ready_url is None:
            return
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.alive():
                tail = self.log.read_text(errors="replace")[-2000:] if self.log.exists() else ""
                raise ServerError(f"{self.name} exited while starting; log: {tail}")
            if self.is_ready():
                return
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
            return Service(f"api-{i}", [py, "-m", "ldpctl", "serve"], env,
                           logs / f"api-{i}.log", f"http://{LOOPBACK}:{port}/readyz",
                           f"http://{LOOPBACK}:{port}")
        env.update(LDP_GATEWAY_HOST=LOOPBACK, LDP_GATEWAY_PORT=str(port))
        return Service(f"gateway-{i}", [py, "-m", "ldpctl", "gateway"], env,
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
        self._stop_services(timeout=10.0)
        servers = [*(self.kafka.brokers if self.kafka else []),
                   *((self.redis.sentinels + self.redis.nodes) if self.redis else []),
                   *([self.single_redis] if self.single_redis else [])]
        for m in servers:
            m.kill()

    def _stop_services(self, timeout: float = 20.0) -> None:
        """SIGTERM every service at once (the workers flush as they go), then reap each."""
        services = [s for group in reversed(list(self.services.values())) for s in group]
        for s in services:
            if s.proc is not None and s.proc.poll() is None:
                s.proc.send_signal(signal.SIGTERM)
        for s in services:
            s.stop(timeout)

    def stop(self) -> None:
        self._stop_services()
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


def _print_cluster(cluster: LocalCluster, secure: bool) -> None:
    """Where the servers and services of a started cluster are."""
    assert cluster.kafka is not None and cluster.redis is not None
    proto = "SASL_SSL + SCRAM-SHA-256" if secure else "PLAINTEXT"
    print(f"  kafka     {cluster.kafka.bootstrap} (3 KRaft brokers, {proto}, RF 3, "
          "min.insync.replicas 2)", flush=True)
    print(f"  redis     primary :{cluster.redis.primary_port()}, replica, Sentinels "
          f"{cluster.redis.sentinel_addresses} (master {cluster.redis.master}"
          f"{', TLS + ACL user' if secure else ''})", flush=True)
    for kind in ("worker", "api", "gateway"):
        for s in cluster.services[kind]:
            print(f"  {s.name:<9} {s.base_url}", flush=True)
    if cluster.secrets is not None:
        print(f"  secrets   {cluster.secrets.directory} (CA, SCRAM and ACL passwords in "
              "the services' environment)", flush=True)


def _print_memory(cluster: LocalCluster, took: float, work: Path) -> None:
    """Start-up time, resident memory (brokers, Redis + Sentinels), dashboards, logs."""
    rss = cluster.rss_mb()
    print(f"\nUp in {took:.0f} s; resident memory {sum(rss.values()):.0f} MB "
          f"(brokers {sum(v for k, v in rss.items() if k.startswith('kafka')):.0f}, "
          f"Redis + Sentinels "
          f"{sum(v for k, v in rss.items() if k.startswith(('redis', 'sentinel'))):.0f})",
          flush=True)
    print(f"Dashboards: {', '.join(str(s.base_url) + '/' for s in cluster.services['api'])}",
          flush=True)
    print(f"Logs in {work / 'logs'}. Ctrl-C stops everything.", flush=True)


def _wait_cluster(cluster: LocalCluster, stop: dict[str, bool]) -> None:
    """Until a signal, or until a service exits (which ends the run)."""
    while not stop["now"]:
        for group in cluster.services.values():
            for s in group:
                if not s.alive():
                    print(f"{s.name} exited; see {s.log}", flush=True)
                    stop["now"] = True
        time.sleep(0.5)


def run_cluster(args: Any) -> int:
    """``ldpstream up --cluster``: the replicated system, demo devices, until Ctrl-C."""
    work, temporary = demo.open_workdir(args.data_dir, "ldpstream-cluster-")
    demos, cfile = demo.write_demo_collections(work, round(args.retention_hours * 3600))
    stop = demo.stop_on_signals()
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
        _print_cluster(cluster, args.secure)
        gws = [s.base_url for s in cluster.services["gateway"]]
        if not args.no_simulate:
            senv = cluster.service_env()
            for i, (spec, dist) in enumerate(demos):
                gateway = str(gws[i % len(gws)]) if args.via == "gateway" else None
                sims.append(Service(
                    f"simulate-{spec['id']}",
                    demo.simulate_argv(spec["id"], dist, cfile, args.rate, gateway), senv,
                    work / "logs" / f"simulate-{spec['id']}.log").start())
        _print_memory(cluster, took, work)
        _wait_cluster(cluster, stop)
        print("\nstopping…", flush=True)
        return 0
    finally:
        for s in sims:
            s.stop()
        cluster.stop()
        demo.close_workdir(work, temporary, args.keep)
