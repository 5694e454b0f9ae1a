"""``ldpstream up``: the whole system on one machine, from one command.

Starts, in order: a Kafka broker and a Redis (AOF on) on free loopback ports, one
aggregator worker, the query API, the HTTP ingestion gateway (``ldpstream gateway``, on a
free port unless ``--no-gateway``), and one simulator per demo collection
(:mod:`producer.demo`) publishing at a steady rate, to Kafka or, with ``--via gateway``,
through the gateway.  Prints the
dashboard URL and example requests; Ctrl-C (or SIGTERM) stops every process,
children first, then the servers.

The broker is the embedded tansu (``--broker tansu``, the default: pip only, memory
storage) or Apache Kafka (``--broker kafka``: a single-node KRaft JVM from the jars
``scripts/bootstrap.sh`` fetches, its log on disk under the data directory, so with
``--data-dir`` it survives a restart of the stack).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from .servers import (
    BROKERS,
    KAFKA_VERSION,
    ManagedServer,
    _die_with_parent,
    free_port,
    start_broker,
    start_redis,
)

__all__ = ["add_up_parser", "run_stack"]

ROOT = Path(__file__).resolve().parents[2]


def add_up_parser(sub: Any) -> None:
    p = sub.add_parser("up", help="the whole embedded stack: broker, Redis, worker, API, "
                                  "simulated devices")
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
    p.add_argument("--via", choices=("kafka", "gateway"), default="kafka",
                   help="how the demo devices send: straight to Kafka (default) or through "
                        "the gateway's POST /v1/reports")
    p.add_argument("--broker", choices=BROKERS, default="tansu",
                   help="tansu: the embedded broker, memory storage (default); kafka: Apache "
                        "Kafka (KRaft, JDK + jars from scripts/bootstrap.sh)")
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


def _demo_collections() -> list[tuple[dict[str, Any], str]]:
    """The producer's demo collections, asked of ``python -m producer.demo`` (the shared
    layer runs services, it does not import them)."""
    out = subprocess.run([sys.executable, "-m", "producer.demo"], cwd=ROOT, check=True,
                         capture_output=True, text=True, timeout=60).stdout
    return [(spec, dist) for spec, dist in json.loads(out)]


def run_stack(args: argparse.Namespace) -> int:
    token = getattr(args, "admin_token", None)
    if token is not None and len(token) < 8:
        print("ldpstream up: --admin-token must be at least 8 characters", file=sys.stderr)
        return 2
    with_gateway = not getattr(args, "no_gateway", False)
    via = getattr(args, "via", "kafka")
    if via == "gateway" and not with_gateway:
        print("ldpstream up: --via gateway needs the gateway (drop --no-gateway)",
              file=sys.stderr)
        return 2
    temporary = args.data_dir is None
    work = Path(args.data_dir or tempfile.mkdtemp(prefix="ldpstream-up-"))
    work.mkdir(parents=True, exist_ok=True)
    logs = work / "logs"
    logs.mkdir(exist_ok=True)
    demos = _demo_collections()
    cfile = work / "collections.json"
    cfile.write_text(json.dumps({"collections": [spec for spec, _ in demos]}, indent=1))
    port = args.port if _port_free(args.port) else free_port()

    stop = {"now": False}

    def on_signal(signum: int, frame: Any) -> None:
        stop["now"] = True

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)

    servers: list[ManagedServer] = []
    children: list[tuple[str, subprocess.Popen[bytes]]] = []
    try:
        print(f"ldpstream up: working directory {work}", flush=True)
        broker = getattr(args, "broker", "tansu")
        started = time.monotonic()
        kafka = start_broker(broker, _mk(work / "kafka"))
        servers.append(kafka)
        took = time.monotonic() - started
        redis = start_redis(_mk(work / "redis"))
        servers.append(redis)
        if broker == "kafka":
            print(f"  broker  {kafka.bootstrap} (Apache Kafka {KAFKA_VERSION}, KRaft, log in "
                  f"{work / 'kafka' / 'data'}; up in {took:.1f} s)", flush=True)
        else:
            print(f"  broker  {kafka.bootstrap} (tansu, memory storage)", flush=True)
        print(f"  redis   {redis.url} (AOF in {work / 'redis'})", flush=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith("LDP_")}
        env.update({"LDP_KAFKA_BOOTSTRAP": kafka.bootstrap, "LDP_REDIS_URL": redis.url,
                    "LDP_COLLECTIONS_FILE": str(cfile), "LDP_API_PORT": str(port),
                    "LDP_API_HOST": "127.0.0.1", "PYTHONPATH": str(ROOT),
                    "LDP_METRICS_PORT": str(free_port())})
        if token:
            env["LDP_ADMIN_TOKEN"] = token
        py = sys.executable
        worker = _spawn([py, "-m", "aggregator"], env, logs / "aggregator.log")
        children.append(("aggregator", worker))
        api = _spawn([py, "-m", "ldpstream", "serve"], env, logs / "api.log")
        children.append(("api", api))
        base = f"http://127.0.0.1:{port}"
        gateway_url = None
        if with_gateway:
            gport = getattr(args, "gateway_port", None) or free_port()
            genv = {**env, "LDP_GATEWAY_HOST": "127.0.0.1", "LDP_GATEWAY_PORT": str(gport)}
            gw = _spawn([py, "-m", "ldpstream", "gateway"], genv, logs / "gateway.log")
            children.append(("gateway", gw))
            gateway_url = f"http://127.0.0.1:{gport}"
        _wait_http(base + "/readyz", 60, api)
        print(f"  worker  pid {worker.pid}, metrics on 127.0.0.1:{env['LDP_METRICS_PORT']}",
              flush=True)
        if gateway_url is not None:
            _wait_http(gateway_url + "/readyz", 60, gw)
            print(f"  gateway {gateway_url}/v1/reports (devices POST here; "
                  f"docs/gateway.md)", flush=True)
        if not args.no_simulate:
            for spec, dist in demos:
                sim = _spawn([py, "-m", "ldpstream", "simulate", "--collection", spec["id"],
                              "--collections-file", str(cfile), "--dist", dist,
                              "--reports", str(10**12), "--devices", "50000",
                              "--rate", str(args.rate), "--batch-size", "1,16,64",
                              "--no-progress",
                              *(["--gateway", gateway_url] if via == "gateway" and gateway_url
                                else [])], env, logs / f"simulate-{spec['id']}.log")
                children.append((f"simulate {spec['id']}", sim))
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
        while not stop["now"]:
            for name, proc in children:
                if proc.poll() is not None:
                    print(f"{name} exited with code {proc.returncode}; see {logs}",
                          flush=True)
                    stop["now"] = True
            time.sleep(0.5)
        print("\nstopping…", flush=True)
        return 0
    finally:
        for _, proc in reversed(children):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for _, proc in reversed(children):
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
        for server in reversed(servers):
            server.stop()
        if temporary and not getattr(args, "keep", False):
            shutil.rmtree(work, ignore_errors=True)  # --data-dir and --keep keep it
            print(f"stopped; removed {work}.", flush=True)
        else:
            print(f"stopped; logs and data kept in {work}.", flush=True)


def _mk(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path
