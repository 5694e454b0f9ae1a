"""Failover on the replicated cluster under a steady stream, nothing lost or counted twice.

Each test streams one collection's reports straight to Kafka (the idempotent ``acks=all``
producer of the Python SDK) and through both gateways at once, breaks something in the
middle, lets it come back, and ends with Redis equal to ldpcore's aggregate of every
acknowledged message (plus, for the few requests left unanswered by a killed process,
a subset of them), cell for cell (:func:`ldpctl.failover.check_counted`).
While it runs, a probe queries the API replicas: what users see is printed (``-s``).
Last, the janitor is shown to release only what the Redis replica holds.
"""

from __future__ import annotations

import os
import signal
import time
import uuid
from typing import Any

import pytest

from ldpctl.cluster import LocalCluster
from ldpstream.retention import Janitor
from ldpstream.storage import Keys

from .conftest import (
    leader_of_busiest,
    redis_client,
    restore,
    run_scenario,
    topic,
    wait_isr_full,
)

# a cluster's start (1–2 min here) counts within the first test's time: room for a
# machine several times slower
pytestmark = [pytest.mark.integration, pytest.mark.timeout(1800)]


def test_topics_are_replicated_three_times_with_two_in_sync_required(
        cluster: LocalCluster) -> None:
    from kafka.admin import ConfigResource, ConfigResourceType

    assert cluster.kafka is not None
    admin = cluster.kafka.admin()
    try:
        for name in (topic(cluster), cluster.env["LDP_DLQ_TOPIC"]):
            res = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, name)])
            entries = res["topic"][name]
            assert entries["min.insync.replicas"]["value"] == "2", (name, entries)
    finally:
        admin.close()
    isr = cluster.kafka.in_sync(topic(cluster))
    assert len(isr) == cluster.partitions and all(len(r) == 3 for r in isr.values()), isr


def test_kill9_of_the_busiest_partitions_leader_loses_and_doubles_nothing(
        cluster: LocalCluster) -> None:
    assert cluster.kafka is not None
    victim: list[int] = []

    def fault() -> None:
        node = leader_of_busiest(cluster)
        led = {p for p, n in cluster.kafka.leaders(topic(cluster)).items()  # type: ignore[union-attr]
               if n == node}
        victim.append(node)
        cluster.kafka.broker(node).kill()  # type: ignore[union-attr]
        # the other brokers elect new leaders while the stream goes on (the killed one
        # comes back after the check, in the fixture: min.insync.replicas=2 of 3)
        deadline = time.monotonic() + 60
        after: dict[int, int] = {}
        while time.monotonic() < deadline:
            time.sleep(1.0)
            after = cluster.kafka.leaders(topic(cluster))  # type: ignore[union-attr]
            if all(after.get(p) != node for p in led):
                break
        assert led and all(after.get(p) != node for p in led), (node, led, after)

    run_scenario(cluster, "leader", fault)
    assert victim


def test_rolling_restart_of_all_three_brokers(cluster: LocalCluster) -> None:
    assert cluster.kafka is not None

    def fault() -> None:
        for b in cluster.kafka.brokers:  # type: ignore[union-attr]
            b.stop()      # SIGTERM: a controlled shutdown moves its leaderships away
            b.start()
            wait_isr_full(cluster)

    run_scenario(cluster, "rolling", fault)


def test_kill9_of_the_redis_primary_sentinel_promotes_and_recounts(
        cluster: LocalCluster) -> None:
    assert cluster.redis is not None
    before = cluster.redis.primary_port()
    promoted: list[int] = []

    def fault() -> None:
        cluster.redis.primary().kill()  # type: ignore[union-attr]
        promoted.append(cluster.redis.wait_failover(before))  # type: ignore[union-attr]
        cluster.redis.node(before).start()  # type: ignore[union-attr]  # back as a replica
        cluster.redis.wait_replicas(1, 60)  # type: ignore[union-attr]

    report = run_scenario(cluster, "redis", fault)
    # the replica was promoted; with a 1 s down-after on a loaded 2-core host the
    # Sentinels may later fail over again (even back to the restarted node), which
    # the exact count in run_scenario must survive as well
    assert promoted and promoted[0] != before
    # what users saw: answers, or 503 with Retry-After; never another error
    assert report["api_during"]["errors"] == (report["api_during"]["503_with_retry_after"]
                                              + report["api_during"]["refused"])


def test_both_workers_killed_and_restarted(cluster: LocalCluster) -> None:
    def fault() -> None:
        for w in cluster.services["worker"]:
            w.kill9()
        time.sleep(2.0)
        for w in cluster.services["worker"]:
            w.start()
        for w in cluster.services["worker"]:
            w.wait_ready()

    run_scenario(cluster, "workers", fault)


def test_one_api_replica_and_one_gateway_killed(cluster: LocalCluster) -> None:
    def fault() -> None:
        api, gw = cluster.services["api"][0], cluster.services["gateway"][0]
        api.kill9()
        gw.kill9()
        time.sleep(3.0)
        api.start()
        gw.start()
        api.wait_ready()
        gw.wait_ready()

    report = run_scenario(cluster, "services", fault)
    # the other replica answered all along
    assert report["api_during"]["requests"] > report["api_during"]["errors"]


@pytest.fixture(autouse=True)
def _whole_again(cluster: LocalCluster) -> Any:
    yield
    restore(cluster)


def test_workers_export_the_freshness_of_what_they_counted(cluster: LocalCluster) -> None:
    """``ldp_freshness_seconds``: record timestamp -> the flush that made it visible."""
    import urllib.request

    from prometheus_client.parser import text_string_to_metric_families

    count = total = 0.0
    for w in cluster.services["worker"]:
        with urllib.request.urlopen(f"{w.base_url}/metrics", timeout=10) as r:  # noqa: S310
            text = r.read().decode()
        for fam in text_string_to_metric_families(text):
            if fam.name == "ldp_freshness_seconds":
                for s in fam.samples:
                    if s.name.endswith("_count"):
                        count += s.value
                    elif s.name.endswith("_sum"):
                        total += s.value
    # the probe messages of the fixture at least were counted, each a few seconds fresh
    assert count > 0
    assert 0 < total / count < 60


def _starts(cluster: LocalCluster, topic: str) -> dict[int, int]:
    from kafka import KafkaConsumer, TopicPartition

    assert cluster.kafka is not None
    c = KafkaConsumer(bootstrap_servers=cluster.kafka.bootstrap,
                      **(cluster.secrets.kafka_python() if cluster.secrets else {}))
    try:
        tps = [TopicPartition(topic, p) for p in range(2)]
        return {tp.partition: int(o) for tp, o in c.beginning_offsets(tps).items()}
    finally:
        c.close()


def test_janitor_releases_nothing_a_frozen_replica_has_not_received(
        cluster: LocalCluster) -> None:
    """The replica is frozen (SIGSTOP) while the primary's watermarks move on: a release
    then would delete records that a failover to that replica must read again."""
    from kafka import KafkaProducer
    from kafka.admin import NewTopic

    assert cluster.kafka is not None and cluster.redis is not None
    topic, prefix = f"jan-{uuid.uuid4().hex[:6]}", f"j{uuid.uuid4().hex[:6]}:"
    admin = cluster.kafka.admin()
    try:
        admin.create_topics([NewTopic(topic, 2, 3)])
    finally:
        admin.close()
    producer = KafkaProducer(bootstrap_servers=cluster.kafka.bootstrap, acks="all")
    for i in range(20):
        producer.send(topic, b"x", partition=i % 2)
    producer.flush()
    producer.close()
    client = redis_client(cluster)
    wm = Keys(prefix).watermarks(topic)
    janitor = Janitor(bootstrap=cluster.kafka.bootstrap, redis=client, topic=topic,
                      prefix=prefix, interval=1, replicas=1, replica_wait_ms=500)
    try:
        client.hset(wm, mapping={"0": 3, "1": 3})
        cluster.redis.wait_replicas(1, 30)
        assert janitor.release_records() == {0: 4, 1: 4}  # the replica has these
        replica = cluster.redis.replica()
        assert replica.pid is not None
        os.kill(replica.pid, signal.SIGSTOP)
        try:
            client.hset(wm, mapping={"0": 7, "1": 8})  # a flush the replica has not got
            assert janitor.release_records() == {}
            assert _starts(cluster, topic) == {0: 4, 1: 4}
            assert "replica" in (janitor.stats.last_error or "")
        finally:
            os.kill(replica.pid, signal.SIGCONT)
        cluster.redis.wait_replicas(1, 30)
        assert janitor.release_records() == {0: 8, 1: 9}
        assert _starts(cluster, topic) == {0: 8, 1: 9}
    finally:
        janitor.close()
        client.delete(wm, Keys(prefix).janitor)
        client.close()
