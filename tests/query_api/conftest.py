"""Fixtures of the API tests: states produced by the real aggregator in a real Redis.

One module-scoped pipeline per test module: collections are declared in a file, a
worker subprocess consumes simulator traffic from the tansu broker and flushes into
Redis; the API under test then reads those states.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from aggregator.registry import load_state
from aggregator.servers import _die_with_parent, free_port, wait_port
from ldpcore.collection import CollectionSpec
from producer.sdk import Client
from producer.simulate import simulate

from ..integration.helpers import ROOT, WorkerProcess, wait_for, worker_env

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
]
REPORTS = {"os": 30_000, "latency": 40_000, "apps": 5_000}
DISTS = {"os": "zipf:1.5", "latency": "cauchy:100,20", "apps": "uniform"}


@pytest.fixture(scope="module")
def pipeline(kafka: Any, redis_server: Any, tmp_path_factory: pytest.TempPathFactory
             ) -> Iterator[dict[str, Any]]:
    import redis

    tmp = tmp_path_factory.mktemp("api")
    uid = uuid.uuid4().hex[:8]
    names = {"topic": f"reports-{uid}", "dlq": f"dlq-{uid}", "group": f"agg-{uid}",
             "prefix": f"api{uid}:"}
    cfile = tmp / "collections.json"
    cfile.write_text(json.dumps({"collections": SPECS}))
    specs = {s["id"]: CollectionSpec.from_dict(s) for s in SPECS}
    worker = WorkerProcess(worker_env(kafka, redis_server, names,
                                      LDP_COLLECTIONS_FILE=str(cfile)), tmp / "worker.log")
    worker.start()
    client = redis.Redis.from_url(redis_server.url)
    truth: dict[str, Any] = {}
    try:
        with Client(kafka.bootstrap, names["topic"]) as producer:
            for cid, spec in specs.items():
                res = simulate(spec, lambda b, spec=spec: producer.send(spec, b),
                               dist=DISTS[cid], reports=REPORTS[cid], batch_sizes=[500],
                               seed=7, progress=False)
                truth[cid] = res
        wait_for(lambda: all(load_state(client, specs[c], prefix=names["prefix"]).n
                             >= REPORTS[c] for c in specs), 90, "reports counted",
                 interval=0.3)
        yield {"names": names, "specs": specs, "truth": truth, "worker": worker,
               "redis_url": redis_server.url, "kafka": kafka, "tmp": tmp}
    finally:
        worker.stop()
        client.close()


def api_env(pipeline: dict[str, Any], **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LDP_")}
    env.update({"LDP_REDIS_URL": pipeline["redis_url"],
                "LDP_REDIS_PREFIX": pipeline["names"]["prefix"],
                "LDP_ADMIN_TOKEN": ADMIN, "LDP_STREAM_INTERVAL_S": "0.2",
                "PYTHONPATH": str(ROOT)})
    env.update(extra)
    return env


@pytest.fixture(scope="module")
def api_server(pipeline: dict[str, Any]) -> Iterator[str]:
    """``ldpstream serve`` as a real HTTP server (uvicorn) on a free loopback port."""
    port = free_port()
    log = open(pipeline["tmp"] / "api.log", "ab")  # noqa: SIM115 - closed below
    proc = subprocess.Popen([sys.executable, "-m", "ldpstream_cli",
                             "serve"], cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                            env=api_env(pipeline, LDP_API_PORT=str(port)),
                            preexec_fn=_die_with_parent)
    try:
        wait_port(port, 30, proc)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()
