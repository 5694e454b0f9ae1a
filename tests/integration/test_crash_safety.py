"""kill -9 at random moments, restarts and rebalances: the final state is still exact."""

from __future__ import annotations

import random
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from ldpcore.collection import CollectionSpec
from ldpstream.storage import CollectionCatalogue, load_state
from producer.sdk import Client
from producer.simulate import SimulationResult, simulate

from .helpers import WorkerProcess, wait_for, worker_env

# each engine on one broker in CI (tests/integration/conftest.py); LDP_FAULTS_FULL=1: all four
pytestmark = [pytest.mark.integration, pytest.mark.diagonal]

SPEC = CollectionSpec.from_dict({"id": "olh", "oracle": {"mechanism": "olh", "epsilon": 1.5},
                                 "domain": {"kind": "integers", "low": 0, "high": 99}})


class Publisher(threading.Thread):
    """Publishes in the background at a bounded rate, so the stream lasts a while."""

    def __init__(self, bootstrap: str, topic: str, reports: int, rate: float) -> None:
        super().__init__(daemon=True)
        self.args = (bootstrap, topic, reports, rate)
        self.result: SimulationResult | None = None
        self.error: BaseException | None = None

    def run(self) -> None:
        bootstrap, topic, reports, rate = self.args
        try:
            with Client(bootstrap, topic) as client:
                n = [0]

                def send(batch: Any) -> None:
                    client.send(SPEC, batch, partition=n[0] % 4)
                    n[0] += 1
                self.result = simulate(SPEC, send, dist="geometric:0.05", reports=reports,
                                       batch_sizes=[1, 33, 250, 700], seed=5, rate=rate)
        except BaseException as exc:  # surfaced by the test
            self.error = exc


def finish(pub: Publisher, redis_client: Any, prefix: str) -> None:
    pub.join(120)
    assert pub.error is None and pub.result is not None, pub.error
    expected = pub.result.state
    wait_for(lambda: load_state(redis_client, SPEC, prefix=prefix).n >= expected.n, 90,
             "every report counted")
    time.sleep(0.5)  # anything counted twice would show up now
    assert load_state(redis_client, SPEC, prefix=prefix) == expected


def test_kill_9_at_random_moments_then_restart_keeps_counts_exact(
        kafka: Any, redis_server: Any, redis_client: Any, ldp_names: dict[str, str],
        tmp_path: Path) -> None:
    CollectionCatalogue(redis_client, ldp_names["prefix"]).register(SPEC)
    env = worker_env(kafka, redis_server, ldp_names, LDP_FLUSH_INTERVAL_MS="50")
    rnd = random.Random(2024)
    pub = Publisher(kafka.bootstrap, ldp_names["topic"], 150_000, rate=15_000)
    worker = WorkerProcess(env, tmp_path / "w.log").start()
    pub.start()
    try:
        for _ in range(4):
            time.sleep(rnd.uniform(0.8, 2.5))
            worker.kill9()
            worker = WorkerProcess(env, tmp_path / "w.log").start()
        finish(pub, redis_client, ldp_names["prefix"])
    finally:
        assert worker.stop() == 0, worker.output()


def test_two_workers_with_crash_and_rebalance_keep_counts_exact(
        kafka: Any, redis_server: Any, redis_client: Any, ldp_names: dict[str, str],
        tmp_path: Path) -> None:
    CollectionCatalogue(redis_client, ldp_names["prefix"]).register(SPEC)
    env = worker_env(kafka, redis_server, ldp_names, LDP_FLUSH_INTERVAL_MS="50")
    a = WorkerProcess(env, tmp_path / "a.log").start()
    b = WorkerProcess(env, tmp_path / "b.log").start()
    pub = Publisher(kafka.bootstrap, ldp_names["topic"], 150_000, rate=15_000)
    pub.start()
    c: WorkerProcess | None = None
    try:
        time.sleep(2.0)
        a.kill9()                      # b takes over a's partitions after the session timeout
        time.sleep(1.5)
        c = WorkerProcess(env, tmp_path / "c.log").start()   # rebalance: c joins
        time.sleep(3.0)
        assert b.stop() == 0, b.output()                      # graceful leave: rebalance again
        finish(pub, redis_client, ldp_names["prefix"])
    finally:
        for w in (a, b, c):
            if w is not None:
                w.stop()
