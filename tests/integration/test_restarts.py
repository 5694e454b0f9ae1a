"""Restarts of Redis (from its AOF) and of the broker (tansu memory storage loses the topic).

The Redis restart runs on every broker.  The broker restart here is tansu's (Apache
Kafka's, which keeps its log, is in ``test_apache_kafka.py``).

Broker restart, documented behaviour: the embedded tansu keeps topics in memory, so a
restart loses the log *and* the consumer group's committed offsets; producers recreate
the topic and offsets start again at 0, below the Redis watermarks.  The worker
notices (Redis has a watermark, Kafka has no committed offset, and the first message
was produced after the flush that set the watermark), logs an ERROR naming the
partition, counts ``ldp_offset_resets_total``, and counts the new log from its
start: reports sent before and after the restart are each counted exactly once.
Reports still in flight in the lost log at the moment of the restart are lost with it
(that is the broker's durability, not the aggregator's); with a persistent Kafka
nothing is lost.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ldpcore.collection import CollectionSpec
from ldpstream.dev.servers import start_broker, start_redis
from ldpstream.storage import CollectionCatalogue, load_state
from producer.sdk import Client
from producer.simulate import simulate

from .helpers import WorkerProcess, wait_for, worker_env

pytestmark = pytest.mark.integration

SPEC = CollectionSpec.from_dict({"id": "hr", "oracle": {"mechanism": "grr", "epsilon": 1.0},
                                 "domain": {"kind": "integers", "low": 0, "high": 31}})


def publish(bootstrap: str, topic: str, reports: int, seed: int) -> Any:
    with Client(bootstrap, topic) as client:
        n = [0]

        def send(batch: Any) -> None:
            client.send(SPEC, batch, partition=n[0] % 4)
            n[0] += 1
        return simulate(SPEC, send, dist="uniform", reports=reports, batch_sizes=[1, 100, 400],
                        seed=seed).state


@pytest.fixture
def own_redis(local_backend: None, tmp_path: Path) -> Any:
    """A Redis of this test only (the test restarts it)."""
    r = start_redis(tmp_path)
    try:
        yield r
    finally:
        r.stop()


@pytest.fixture
def own_tansu(local_backend: None, tmp_path: Path) -> Any:
    """A tansu broker of this test only (the test restarts it)."""
    k = start_broker("tansu", tmp_path)
    try:
        yield k
    finally:
        k.stop()


def _start(k: Any, r: Any, names: dict[str, str], tmp_path: Path) -> tuple[Any, WorkerProcess]:
    """A Redis client of ``r`` and a worker counting SPEC (registered first)."""
    import redis

    rc = redis.Redis.from_url(r.url, socket_timeout=5)
    CollectionCatalogue(rc, names["prefix"]).register(SPEC)
    return rc, WorkerProcess(worker_env(k, r, names), tmp_path / "w.log").start()


def _counted(rc: Any, names: dict[str, str], n: int, what: str, timeout: float = 60) -> None:
    wait_for(lambda: load_state(rc, SPEC, prefix=names["prefix"]).n >= n, timeout, what)


def test_redis_restart_from_aof_keeps_state_and_counting_resumes(
        kafka: Any, own_redis: Any, ldp_names: dict[str, str], tmp_path: Path) -> None:
    import redis

    k, r = kafka, own_redis
    rc, worker = _start(k, r, ldp_names, tmp_path)
    try:
        first = publish(k.bootstrap, ldp_names["topic"], 20_000, 1)
        _counted(rc, ldp_names, first.n, "first part counted")
        r.stop()                                  # worker keeps its delta while Redis is down
        during = publish(k.bootstrap, ldp_names["topic"], 10_000, 2)
        r.start()                                 # same port, same AOF
        rc = redis.Redis.from_url(r.url, socket_timeout=5)
        after = publish(k.bootstrap, ldp_names["topic"], 10_000, 3)
        expected = first + during + after
        _counted(rc, ldp_names, expected.n, "everything counted after the Redis restart")
        assert load_state(rc, SPEC, prefix=ldp_names["prefix"]) == expected
        assert worker.alive(), worker.output()
    finally:
        assert worker.stop() == 0, worker.output()


@pytest.mark.brokers("tansu")
def test_broker_restart_loses_the_topic_and_the_worker_recovers_and_says_so(
        broker: str, own_tansu: Any, redis_server: Any, ldp_names: dict[str, str],
        tmp_path: Path) -> None:
    k, r = own_tansu, redis_server
    rc, worker = _start(k, r, ldp_names, tmp_path)
    try:
        before = publish(k.bootstrap, ldp_names["topic"], 20_000, 4)
        _counted(rc, ldp_names, before.n, "counted before the broker restart")
        k.restart()                               # memory storage: the topic is gone
        after = publish(k.bootstrap, ldp_names["topic"], 8_000, 5)
        expected = before + after
        try:
            _counted(rc, ldp_names, expected.n, "the new log counted after the broker restart",
                     90)
        except AssertionError as exc:  # the worker's log says where it stood
            raise AssertionError(f"{exc}\n{worker.output()[-6000:]}") from None
        assert load_state(rc, SPEC, prefix=ldp_names["prefix"]) == expected
        wait_for(lambda: "the broker lost its log" in worker.output(), 10, "the worker's ERROR")
        assert worker.alive(), worker.output()
    finally:
        assert worker.stop() == 0, worker.output()
