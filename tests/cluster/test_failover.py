"""Failover on the replicated cluster under a steady stream, nothing lost or counted twice.

Each test streams one collection's reports straight to Kafka (the idempotent ``acks=all``
producer of the Python SDK) and through both gateways at once, breaks something in the
middle, lets it come back, and ends with Redis equal to ldpcore's aggregate of every
acknowledged message (plus, for the few requests left unanswered by a killed process,
a subset of them), cell for cell (:func:`ldpstream.dev.failover.check_counted`).
While it runs, a probe queries the API replicas: what users see is printed (``-s``).
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from ldpstream.dev.cluster import LocalCluster
from ldpstream.dev.failover import ApiProbe, Traffic, check_counted

from .conftest import SPECS, end_offsets, restore, topic, wait_counted

pytestmark = pytest.mark.integration

BEFORE_S = 4.0   # steady traffic before the fault
AFTER_S = 4.0    # and after the cluster is whole again


def _client(cluster: LocalCluster) -> Any:
    from producer.sdk import Client

    assert cluster.kafka is not None
    extra = cluster.secrets.kafka_python() if cluster.secrets else {}
    return Client(cluster.kafka.bootstrap, topic(cluster), linger_ms=5, **extra)


def _run(cluster: LocalCluster, name: str, fault: Any) -> dict[str, Any]:
    spec = SPECS[name]
    client = _client(cluster)
    gws = [str(s.base_url) for s in cluster.services["gateway"]]
    apis = [str(s.base_url) for s in cluster.services["api"]]
    traffic = Traffic(spec, kafka_send=lambda k, v, p: client.send_raw(k, v, partition=p),
                      kafka_flush=client.flush, gateways=gws, rate=40.0,
                      partitions=cluster.partitions, seed=hash(name) % 1000).start()
    probe = ApiProbe(apis, f"/v1/collections/{spec.id}/frequencies").start()
    try:
        time.sleep(BEFORE_S)
        t0 = time.time()
        fault()
        t1 = time.time()
        time.sleep(AFTER_S)
    finally:
        traffic.stop()
        probe.stop()
        client.close()
    state = wait_counted(cluster, spec)
    summary = check_counted(spec, traffic.outcomes, state)
    during = probe.summary(t0, t1 + 1.0)
    report = {"fault_s": round(t1 - t0, 1), **summary,
              "gateway": dict(traffic.gateway_status), "api_during": during,
              "api_all": probe.summary()}
    print(f"\n{name}: {report}")
    # nothing acknowledged may be missing, and the stream must have flowed
    assert summary["acked"] > 100, summary
    assert traffic.gateway_status["202"] > 10, traffic.gateway_status
    return report


def _leader_of_busiest(cluster: LocalCluster) -> int:
    """Node id leading the most of the partitions holding the most records."""
    assert cluster.kafka is not None
    ends = end_offsets(cluster)
    leaders = cluster.kafka.leaders(topic(cluster))
    top = sorted(ends, key=lambda p: -ends[p])[: max(1, len(ends) // 3)]
    votes: dict[int, int] = {}
    for p in top:
        votes[leaders[p]] = votes.get(leaders[p], 0) + ends[p]
    return max(votes, key=lambda n: votes[n])


def _wait_isr_full(cluster: LocalCluster, timeout: float = 120.0) -> None:
    assert cluster.kafka is not None
    deadline = time.monotonic() + timeout
    isr: dict[int, list[int]] = {}
    while time.monotonic() < deadline:
        try:
            isr = cluster.kafka.in_sync(topic(cluster))
            if isr and all(len(r) == 3 for r in isr.values()):
                return
        except Exception:  # noqa: BLE001 - metadata while a broker restarts
            pass
        time.sleep(0.5)
    raise AssertionError(f"partitions not back to 3 in-sync replicas: {isr}")


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
        node = _leader_of_busiest(cluster)
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

    _run(cluster, "leader", fault)
    assert victim


def test_rolling_restart_of_all_three_brokers(cluster: LocalCluster) -> None:
    assert cluster.kafka is not None

    def fault() -> None:
        for b in cluster.kafka.brokers:  # type: ignore[union-attr]
            b.stop()      # SIGTERM: a controlled shutdown moves its leaderships away
            b.start()
            _wait_isr_full(cluster)

    _run(cluster, "rolling", fault)


def test_kill9_of_the_redis_primary_sentinel_promotes_and_recounts(
        cluster: LocalCluster) -> None:
    assert cluster.redis is not None
    before = cluster.redis.primary_port()

    def fault() -> None:
        cluster.redis.primary().kill()  # type: ignore[union-attr]
        cluster.redis.wait_failover(before)  # type: ignore[union-attr]
        cluster.redis.node(before).start()  # type: ignore[union-attr]  # back as a replica
        cluster.redis.wait_replicas(1, 60)  # type: ignore[union-attr]

    report = _run(cluster, "redis", fault)
    assert cluster.redis.primary_port() != before
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

    _run(cluster, "workers", fault)


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

    report = _run(cluster, "services", fault)
    # the other replica answered all along
    assert report["api_during"]["requests"] > report["api_during"]["errors"]


@pytest.fixture(autouse=True)
def _whole_again(cluster: LocalCluster) -> Any:
    yield
    restore(cluster)
