"""What only a real, durable broker allows: Apache Kafka (``broker=kafka``) only.

* A broker restart keeps the log (and the group's committed offsets): the worker
  resumes where Redis says, nothing is lost and nothing counted twice, while a
  producer keeps publishing across the outage.
* A rebalance decided by Kafka's group coordinator: a second worker joins mid-stream
  (the coordinator splits the partitions between the two), then leaves gracefully (all
  partitions go back to the first); the count stays exact.
* The SDK's idempotent producer (``enable_idempotence=True``, ``acks=all``): a proxy
  loses Produce responses after the broker appended the batch; the SDK's retries leave
  every message in the log exactly once (a non-idempotent producer, under the same
  faults, duplicates), and the aggregate equals what was sent.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import pytest

from ldpcore.collection import CollectionSpec
from ldpstream.dev.servers import KafkaBroker
from ldpstream.storage import CollectionCatalogue, load_state, read_watermarks
from producer.sdk import Client
from producer.simulate import simulate

from .helpers import (
    ProduceResponseDropper,
    Publisher,
    WorkerProcess,
    group_assignment,
    log_offsets,
    wait_for,
    worker_env,
)

pytestmark = [pytest.mark.integration, pytest.mark.brokers("kafka")]

SPEC = CollectionSpec.from_dict({"id": "ak", "oracle": {"mechanism": "olh", "epsilon": 1.5},
                                 "domain": {"kind": "integers", "low": 0, "high": 99}})


def counted(redis_client: Any, prefix: str) -> Any:
    return load_state(redis_client, SPEC, prefix=prefix)


def assert_exact(redis_client: Any, prefix: str, expected: Any, timeout: float = 90,
                 *workers: WorkerProcess | None, where: tuple[str, str] | None = None) -> None:
    """The Redis state equals ``expected``; on failure, say where the difference comes from.

    ``where`` = (bootstrap, topic) adds the log's end offsets and the Redis watermarks.
    """
    try:
        wait_for(lambda: counted(redis_client, prefix).n >= expected.n, timeout,
                 f"{expected.n} reports counted")
        time.sleep(0.5)  # anything counted twice would show up now
        assert counted(redis_client, prefix) == expected
    except AssertionError as exc:
        about = f"counted {counted(redis_client, prefix).n} of {expected.n}"
        if where is not None:
            about += (f"; log end offsets {log_offsets(*where)[1]}, Redis watermarks "
                      f"{read_watermarks(redis_client, where[1], prefix)}")
        logs = "".join(f"\n--- worker {i} ---\n{w.output()[-6000:]}"
                       for i, w in enumerate(workers) if w is not None)
        raise AssertionError(f"{exc} ({about}){logs}") from None


@pytest.fixture
def own_kafka(broker: str, local_backend: None, tmp_path: Path) -> Any:
    """An Apache Kafka broker of this test only (the test restarts it)."""
    k = KafkaBroker(tmp_path / "kafka").start()
    try:
        yield k
    finally:
        k.stop()


def test_kafka_restart_keeps_the_log_and_the_count_stays_exact_across_it(
        own_kafka: KafkaBroker, redis_server: Any, redis_client: Any,
        ldp_names: dict[str, str], tmp_path: Path) -> None:
    k, prefix, topic = own_kafka, ldp_names["prefix"], ldp_names["topic"]
    CollectionCatalogue(redis_client, prefix).register(SPEC)
    worker = WorkerProcess(worker_env(k, redis_server, ldp_names), tmp_path / "w.log").start()
    pub = Publisher(k.bootstrap, topic, SPEC, 60_000, rate=12_000, seed=21)
    try:
        pub.start()
        wait_for(lambda: counted(redis_client, prefix).n > 0, 60, "the worker counting")
        time.sleep(0.5)
        k.stop()                 # clean shutdown mid-stream; the producer keeps sending
        time.sleep(1.0)
        k.start()                # same ports, same log directory
        result = pub.finish()
        assert_exact(redis_client, prefix, result.state, 90, worker, where=(k.bootstrap, topic))
        first, end = log_offsets(k.bootstrap, topic)
        assert first == [0, 0, 0, 0]                      # the log from before is still there
        assert sum(end) == result.messages                # ... each message once
        wms = read_watermarks(redis_client, topic, prefix)
        assert sum(w + 1 for w in wms.values()) == result.messages
        assert "the broker lost its log" not in worker.output()
        assert worker.alive(), worker.output()
    finally:
        if pub.ident is not None:
            pub.join(30)
        assert worker.stop() == 0, worker.output()


def test_a_worker_joining_and_leaving_mid_stream_rebalances_through_kafkas_coordinator(
        kafka: Any, redis_server: Any, redis_client: Any, ldp_names: dict[str, str],
        tmp_path: Path) -> None:
    prefix, topic, group = ldp_names["prefix"], ldp_names["topic"], ldp_names["group"]
    CollectionCatalogue(redis_client, prefix).register(SPEC)
    env = worker_env(kafka, redis_server, ldp_names, LDP_FLUSH_INTERVAL_MS="50")
    a = WorkerProcess(env, tmp_path / "a.log").start()
    b: WorkerProcess | None = None
    every = {0, 1, 2, 3}
    pub = Publisher(kafka.bootstrap, topic, SPEC, 100_000, rate=12_000, seed=22)
    try:
        wait_for(lambda: group_assignment(kafka.bootstrap, group, topic) == [every], 30,
                 "worker a alone owning every partition")
        pub.start()
        time.sleep(1.5)
        b = WorkerProcess(env, tmp_path / "b.log").start()   # joins: the coordinator rebalances

        def split() -> bool:
            owned = group_assignment(kafka.bootstrap, group, topic)
            return (owned is not None and len(owned) == 2 and all(owned)
                    and owned[0].isdisjoint(owned[1]) and owned[0] | owned[1] == every)
        wait_for(split, 30, "the two workers splitting the partitions")
        wait_for(lambda: re.search(r"assigned partitions \[\d", b.output()) is not None, 10,
                 "b's assignment")
        time.sleep(1.5)
        assert b.stop() == 0, b.output()                      # leaves the group gracefully
        wait_for(lambda: group_assignment(kafka.bootstrap, group, topic) == [every], 30,
                 "worker a owning every partition again")
        result = pub.finish()
        assert_exact(redis_client, prefix, result.state, 90, a, b,
                     where=(kafka.bootstrap, topic))
        assert sum(log_offsets(kafka.bootstrap, topic)[1]) == result.messages
        assert a.alive(), a.output()
    finally:
        if pub.ident is not None:
            pub.join(30)
        for w in (a, b):
            if w is not None:
                w.stop()


def _publish_through(bootstrap: str, topic: str, seed: int, **config: Any) -> Any:
    """Publish ~300 messages with the SDK, flushing every 8 so each is its own request."""
    with Client(bootstrap, topic, **config) as client:
        n = [0]

        def send(batch: Any) -> None:
            client.send(SPEC, batch, partition=n[0] % 4)
            n[0] += 1
            if n[0] % 8 == 0:
                client.flush()
        return simulate(SPEC, send, dist="uniform", reports=20_000, batch_sizes=[1, 40, 150],
                        seed=seed)


def test_sdk_idempotent_producer_retries_lost_acks_without_duplicates(
        broker: str, local_backend: None, redis_server: Any, redis_client: Any,
        ldp_names: dict[str, str], tmp_path: Path) -> None:
    proxy = ProduceResponseDropper(every=5, drops=4)
    k = KafkaBroker(tmp_path / "kafka", config={
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{proxy.port}"})
    proxy.upstream = ("127.0.0.1", k.port)
    via = f"127.0.0.1:{proxy.port}"
    try:
        k.start()
        # Control: the same faults make a producer without idempotence write duplicates.
        control_topic = ldp_names["topic"] + "-control"
        sent = _publish_through(via, control_topic, seed=31, enable_idempotence=False,
                                max_in_flight_requests_per_connection=1, retries=10)
        assert proxy.dropped >= 1
        assert sum(log_offsets(via, control_topic)[1]) > sent.messages

        # The SDK as shipped: idempotent, acks=all.
        proxy.drops_left, proxy.dropped = 4, 0
        topic, prefix = ldp_names["topic"], ldp_names["prefix"]
        result = _publish_through(via, topic, seed=32)
        assert proxy.dropped >= 2                               # acks really were lost ...
        assert sum(log_offsets(via, topic)[1]) == result.messages  # ... yet each message once
        proxy.drops_left = 0
        CollectionCatalogue(redis_client, prefix).register(SPEC)
        worker = WorkerProcess(worker_env(k, redis_server, ldp_names), tmp_path / "w.log")
        worker.start()
        try:
            assert_exact(redis_client, prefix, result.state, 60, worker)
        finally:
            assert worker.stop() == 0, worker.output()
    finally:
        k.stop()
        proxy.close()
