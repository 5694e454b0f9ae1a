"""Fixtures of the API tests: states produced by the real aggregator in a real Redis.

One module-scoped pipeline per test module: collections are declared in a file, a
worker subprocess consumes simulator traffic from the tansu broker and flushes into
Redis; the API under test then reads those states.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ldpcore.collection import CollectionSpec
from ldpstream.dev.servers import _die_with_parent, free_port, wait_port
from ldpstream.storage import load_state
from producer.sdk import Client
from producer.simulate import simulate

from ..integration.helpers import ROOT, counting_worker, wait_for

ADMIN = "test-admin-token-123"

SPECS: list[dict[str, Any]] = [
    {"id": "os", "description": "operating system",
     "oracle": {"mechanism": "grr", "epsilon": 2.0},
     "domain": {"kind": "categories", "labels": ["linux", "mac", "win", "bsd", "other"]},
     "min_reports": 1000},
    {"id": "latency", "description": "latency in ms",
     "oracle": {"mechanism": "hh", "epsilon": 2.0, "fanout": 4},
     "domain": {"kind": "integers", "low": 0, "high": 255}, "min_reports": 1000},
    {"id": "apps", "oracle": {"mechanism": "olh", "epsilon": 1.0},
     "domain": {"kind": "integers", "low": 0, "high": 99}, "min_reports": 10_000_000},
    {"id": "session", "description": "session length in minutes",
     "oracle": {"mechanism": "sw", "epsilon": 2.0},
     "domain": {"kind": "interval", "low": 0.0, "high": 60.0, "bins": 64}, "min_reports": 1000},
    {"id": "load", "description": "CPU load in percent",
     "oracle": {"mechanism": "pm", "epsilon": 2.0},
     "domain": {"kind": "interval", "low": 0.0, "high": 100.0, "bins": 100},
     "min_reports": 1000},
    {"id": "urls", "description": "visited URLs, hashed to 24-bit keys (PEM)",
     "oracle": {"mechanism": "pem", "epsilon": 4.0, "keep": 16, "eta": 6, "pool": 64},
     "domain": {"kind": "integers", "low": 1000, "high": 1000 + 2**24 - 1},
     "min_reports": 1000},
]
REPORTS = {"os": 30_000, "latency": 40_000, "apps": 5_000, "session": 30_000, "load": 30_000,
           "urls": 60_000}
DISTS = {"os": "zipf:1.5", "latency": "cauchy:100,20", "apps": "uniform",
         "session": "geometric:0.08", "load": "cauchy:40,10"}


@pytest.fixture(scope="module")
def pipeline(kafka: Any, redis_server: Any, tmp_path_factory: pytest.TempPathFactory
             ) -> Iterator[dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("api")
    specs = {s["id"]: CollectionSpec.from_dict(s) for s in SPECS}
    with counting_worker(kafka, redis_server, tmp, SPECS, "api") as (names, worker, client):
        truth: dict[str, Any] = {}
        with Client(kafka.bootstrap, names["topic"]) as producer:
            for cid, spec in specs.items():
                if cid == "urls":  # 2^24 values: devices draw Zipf keys themselves
                    truth[cid] = publish_zipf_keys(producer, spec, REPORTS[cid], seed=7)
                    continue
                res = simulate(spec, lambda b, spec=spec: producer.send(spec, b),
                               dist=DISTS[cid], reports=REPORTS[cid], batch_sizes=[500],
                               seed=7, progress=False)
                truth[cid] = res
        wait_for(lambda: all(load_state(client, specs[c], prefix=names["prefix"]).n
                             >= REPORTS[c] for c in specs), 90, "reports counted",
                 interval=0.3)
        yield {"names": names, "specs": specs, "truth": truth, "worker": worker,
               "redis_url": redis_server.url, "kafka": kafka, "tmp": tmp}


def publish_zipf_keys(producer: Client, spec: CollectionSpec, n: int, seed: int
                      ) -> dict[int, float]:
    """Zipf(1.5) keys over the collection's 2^24 integers; returns their true frequencies."""
    import numpy as np

    rng = np.random.default_rng(seed)
    r = rng.zipf(1.5, size=3 * n)
    r = r[r < 2**24][:n].astype(np.uint64)
    keys = ((r * np.uint64(2654435761)) ^ np.uint64(0x5BD1E995)) & np.uint64(2**24 - 1)
    oracle = spec.oracle()
    for start in range(0, n, 5_000):
        producer.send(spec, oracle.perturb(keys[start:start + 5_000], rng=rng))
    u, c = np.unique(keys, return_counts=True)
    low = int(spec.domain.low)
    return {int(k) + low: float(v) / n for k, v in zip(u, c, strict=True)}


@contextlib.contextmanager
def serving_api(redis_url: str, prefix: str, log: Path, **settings: str) -> Iterator[int]:
    """``ldpstream serve`` as a real HTTP server (uvicorn) over ``prefix`` on a free loopback
    port, with ``settings`` (``LDP_…``) on top; yields the port."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("LDP_")}
    env.update({"LDP_REDIS_URL": redis_url, "LDP_REDIS_PREFIX": prefix,
                "LDP_API_PORT": str(port), "PYTHONPATH": str(ROOT), **settings})
    with open(log, "ab") as out:
        proc = subprocess.Popen([sys.executable, "-m", "ldpstream", "serve"], cwd=ROOT,
                                stdout=out, stderr=subprocess.STDOUT, env=env,
                                preexec_fn=_die_with_parent)
    try:
        wait_port(port, 30, proc)
        yield port
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


@pytest.fixture(scope="module")
def api_server(pipeline: dict[str, Any]) -> Iterator[str]:
    """``ldpstream serve`` over the pipeline's states (admin token ADMIN)."""
    with serving_api(pipeline["redis_url"], pipeline["names"]["prefix"],
                     pipeline["tmp"] / "api.log", LDP_ADMIN_TOKEN=ADMIN,
                     LDP_STREAM_INTERVAL_S="0.2") as port:
        yield f"http://127.0.0.1:{port}"


# Collections of the broker-free API tests (``redis_api``): states written straight into
# Redis by the aggregator's flush script (tests/query_api/states.py), no worker.
SMALL_SPECS: list[dict[str, Any]] = [
    {"id": "os", "oracle": {"mechanism": "oue", "epsilon": 2.0},
     "domain": {"kind": "categories", "labels": ["linux", "mac", "win", "bsd", "other"]},
     "min_reports": 100},
    {"id": "lat", "oracle": {"mechanism": "hh", "epsilon": 2.0, "fanout": 4},
     "domain": {"kind": "integers", "low": 0, "high": 63}, "min_reports": 100},
    {"id": "load", "oracle": {"mechanism": "pm", "epsilon": 2.0},
     "domain": {"kind": "interval", "low": 0.0, "high": 100.0, "bins": 20},
     "min_reports": 100},
    {"id": "few", "oracle": {"mechanism": "grr", "epsilon": 1.0},
     "domain": {"kind": "categories", "labels": ["a", "b"]}, "min_reports": 10_000},
]
SMALL_DISTS = {"os": "zipf:1.5", "lat": "uniform", "load": "uniform", "few": "uniform"}


@pytest.fixture(scope="module")
def redis_api(redis_server: Any) -> Iterator[Any]:
    """A query API (TestClient, admin token ADMIN) over SMALL_SPECS with 5,000 simulated
    reports each in the current window, under a prefix of its own."""
    import time

    import redis
    from fastapi.testclient import TestClient
    from prometheus_client import CollectorRegistry

    from query_api.app import create_app
    from query_api.config import ApiSettings

    from .states import register, simulated_state, write_window

    prefix = f"ra{uuid.uuid4().hex[:8]}:"
    client = redis.Redis.from_url(redis_server.url)
    specs = [CollectionSpec.from_dict(s) for s in SMALL_SPECS]
    register(client, prefix, *specs)
    for i, spec in enumerate(specs):
        start = int(time.time()) // spec.window_seconds * spec.window_seconds
        write_window(client, prefix, spec, start,
                     simulated_state(spec, SMALL_DISTS[spec.id], 5000, seed=i))
    client.close()
    settings = ApiSettings(redis_url=redis_server.url, redis_prefix=prefix, admin_token=ADMIN)
    with TestClient(create_app(settings, registry=CollectorRegistry())) as api:
        api.redis_url, api.prefix = redis_server.url, prefix  # type: ignore[attr-defined]
        yield api
