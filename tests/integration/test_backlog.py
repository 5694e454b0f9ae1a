"""A worker started on a backlog much larger than one poll keeps its partitions.

Kafka moves a consumer's partitions away when it has not polled for the max poll
interval.  Faust stops polling while its stream buffer is full, and a Faust worker
that left its group that way never joined again (the client rejoins only from a poll):
on a long backlog at full CPU it stopped counting for good.  The records taken per poll
are now bounded by the interval (``WorkerSettings.poll_records``); this test runs with a
1 s interval so the backlog is many polls long.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ldpcore.collection import CollectionSpec
from ldpcore.message import encode_message
from ldpstream.storage import CollectionCatalogue, load_state
from producer.sdk import Client
from producer.simulate import simulate

from .helpers import WorkerProcess, wait_for, worker_env

pytestmark = pytest.mark.integration

SPEC = CollectionSpec.from_dict({"id": "backlog", "oracle": {"mechanism": "grr", "epsilon": 1.0},
                                 "domain": {"kind": "integers", "low": 0, "high": 7}})
MESSAGES = 60_000


@pytest.mark.brokers("tansu")  # the engines' polling is at stake, not the broker
def test_a_backlog_of_many_polls_is_counted_without_leaving_the_group(
        kafka: Any, redis_server: Any, ldp_names: dict[str, str], tmp_path: Path) -> None:
    import redis

    rc = redis.Redis.from_url(redis_server.url, socket_timeout=5)
    CollectionCatalogue(rc, ldp_names["prefix"]).register(SPEC)
    with Client(kafka.bootstrap, ldp_names["topic"]) as client:
        batch: list[bytes] = []
        one = simulate(SPEC, lambda b: batch.append(b), dist="uniform", reports=4,
                       batch_sizes=[4], seed=7).state
        value = encode_message(SPEC, batch[0])
        for i in range(MESSAGES):
            client.send_raw(SPEC.id.encode(), value, partition=i % 4)
        client.flush()
    worker = WorkerProcess(worker_env(kafka, redis_server, ldp_names,
                                      LDP_MAX_POLL_INTERVAL_MS="1000"),
                           tmp_path / "w.log").start()
    try:
        wait_for(lambda: load_state(rc, SPEC, prefix=ldp_names["prefix"]).n >= MESSAGES * one.n,
                 180, "the whole backlog counted", interval=0.5)
        state = load_state(rc, SPEC, prefix=ldp_names["prefix"])
        assert state.n == MESSAGES * one.n
        assert worker.alive(), worker.output()
    finally:
        assert worker.stop() == 0, worker.output()
