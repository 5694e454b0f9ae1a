"""The replicated cluster of the failover tests, started once per module and shared by its
tests (one module at a time, so the machine runs one cluster at a time).

:class:`ldpctl.cluster.LocalCluster`: three Apache Kafka brokers (KRaft, RF 3,
``min.insync.replicas=2``), Redis primary + replica + three Sentinels, two workers (the
default engine) with the janitor on, two query APIs, two gateways.  Every collection the
tests use is registered before the services start (the gateways read the catalogue at
start).  A test that kills something restores it before it ends, so the next one starts
from a whole cluster.  ``secure_cluster``: the same with Kafka SASL_SSL + SCRAM and Redis
TLS + an ACL user.
"""

from __future__ import annotations

import contextlib
import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ldpcore.collection import CollectionSpec, encode_message
from ldpctl.cluster import LocalCluster
from ldpctl.failover import ApiProbe, Traffic, check_counted, post_message
from ldpstream.connections import RedisOptions
from ldpstream.storage import CollectionCatalogue, load_state, read_watermarks

from ..integration.helpers import log_offsets

pytestmark = pytest.mark.integration

NAMES = ("leader", "rolling", "redis", "workers", "services", "fresh", "secure", "fresh-gw",
         "probe")


def spec_of(name: str) -> CollectionSpec:
    return CollectionSpec.from_dict({
        "id": f"fo-{name}", "oracle": {"mechanism": "grr", "epsilon": 1.0},
        "domain": {"kind": "integers", "low": 0, "high": 15}, "min_reports": 1})


SPECS = {n: spec_of(n) for n in NAMES}


def _start(tmp: Path, secure: bool) -> LocalCluster:
    uid = uuid.uuid4().hex[:6]
    env = {"LDP_REPORTS_TOPIC": f"reports-{uid}", "LDP_DLQ_TOPIC": f"dlq-{uid}",
           "LDP_CONSUMER_GROUP": f"agg-{uid}", "LDP_REDIS_PREFIX": f"c{uid}:",
           "LDP_RELEASE_INTERVAL_MS": "1000", "LDP_GATEWAY_CATALOG_REFRESH": "1"}
    cluster = LocalCluster(tmp, secure=secure, env=env, partitions=12)
    cluster.start_servers()
    try:
        client = redis_client(cluster)
        CollectionCatalogue(client, env["LDP_REDIS_PREFIX"]).register_all(SPECS.values())
        client.close()
        cluster.start_services()
        _wait_counting(cluster)
    except BaseException:
        cluster.stop()
        raise
    return cluster


def _wait_counting(cluster: LocalCluster, timeout: float = 180.0) -> None:
    """Until a report posted to a gateway shows in Redis: the workers' first rebalance is
    over, and the tests' API probes see answers, not "no reports yet"."""
    for gw in cluster.services["gateway"]:
        _wake(gw)
    spec = SPECS["probe"]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        client = redis_client(cluster)
        try:
            if load_state(client, spec, prefix=prefix(cluster)).n > 0:
                return
        finally:
            client.close()
        with contextlib.suppress(OSError):
            body = encode_message(spec, spec.oracle().perturb([1], rng=0), "binary")
            post_message(str(cluster.services["gateway"][0].base_url), body)
        time.sleep(1.0)
    raise AssertionError(f"no report counted {timeout:.0f} s after the start; see "
                         f"{cluster.workdir / 'logs'}")


def _running(workdir: Path, *, secure: bool) -> Iterator[LocalCluster]:
    c = _start(workdir, secure=secure)
    try:
        yield c
    finally:
        c.kill()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    yield from _running(tmp_path_factory.mktemp("cluster"), secure=False)


@pytest.fixture(scope="module")
def secure_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    yield from _running(tmp_path_factory.mktemp("secure-cluster"), secure=True)


def redis_client(cluster: LocalCluster) -> Any:
    """A sync client of the current primary, through the Sentinels (as the services)."""
    env = cluster.service_env()
    return RedisOptions.from_env(env, url=env["LDP_REDIS_URL"]).connect(
        env["LDP_REDIS_URL"], socket_timeout=10, socket_connect_timeout=5)


def topic(cluster: LocalCluster) -> str:
    return cluster.env["LDP_REPORTS_TOPIC"]


def prefix(cluster: LocalCluster) -> str:
    return cluster.env["LDP_REDIS_PREFIX"]


def log_offsets_of(cluster: LocalCluster) -> tuple[dict[int, int], dict[int, int]]:
    """partition -> the reports topic's first offset, and its high watermark (next offset)."""
    assert cluster.kafka is not None
    first, end = log_offsets(cluster.kafka.live_bootstrap, topic(cluster), cluster.partitions,
                             request_timeout_ms=20000, **cluster.kafka_config())
    return dict(enumerate(first)), dict(enumerate(end))


def end_offsets(cluster: LocalCluster) -> dict[int, int]:
    """partition -> the reports topic's high watermark (next offset)."""
    return log_offsets_of(cluster)[1]


def wait_counted(cluster: LocalCluster, spec: CollectionSpec, timeout: float = 180.0) -> Any:
    """Once every record in the topic is behind a watermark: the collection's Redis state."""
    ends = end_offsets(cluster)
    deadline = time.monotonic() + timeout
    wms: dict[int, int] = {}
    while time.monotonic() < deadline:
        try:
            client = redis_client(cluster)
            try:
                wms = read_watermarks(client, topic(cluster), prefix(cluster))
                if all(wms.get(p, -1) >= end - 1 for p, end in ends.items()):
                    return load_state(client, spec, prefix=prefix(cluster))
            finally:
                client.close()
        except Exception:  # noqa: BLE001 - Redis failing over: ask again
            pass
        time.sleep(0.3)
    raise AssertionError(f"not every record counted after {timeout:.0f} s: ends {ends}, "
                         f"watermarks {wms}; see {cluster.workdir / 'logs'}")


def restore(cluster: LocalCluster) -> None:
    """Bring back every killed process and wait until the cluster is whole again."""
    assert cluster.kafka is not None and cluster.redis is not None
    for b in cluster.kafka.brokers:
        if b.proc is None or b.proc.poll() is not None:
            b.start()
    for n in [*cluster.redis.nodes, *cluster.redis.sentinels]:
        if n.proc is None or n.proc.poll() is not None:
            n.start()
    for group in cluster.services.values():
        for s in group:
            if not s.alive():
                s.start()
    for kind in ("worker", "api"):
        for s in cluster.services[kind]:
            s.wait_ready()
    for gw in cluster.services["gateway"]:
        _wake(gw)
    cluster.redis.wait_replicas(1, 60)


def _wake(gw: Any, timeout: float = 120.0) -> None:
    """Until the gateway is ready.  A gateway that saw the broker fail holds it for down
    until a request gets through (it has no traffic of its own to probe with): post a
    one-report message of the ``probe`` collection every second until then."""
    spec = SPECS["probe"]
    body = encode_message(spec, spec.oracle().perturb([1], rng=0), "binary")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if gw.is_ready():
            return
        if gw.alive():
            with contextlib.suppress(OSError):
                post_message(str(gw.base_url), body, timeout=15)
        time.sleep(1.0)
    raise AssertionError(f"{gw.name} not ready in {timeout:.0f} s; see {gw.log}")


BEFORE_S = 4.0   # steady traffic before the fault
AFTER_S = 4.0    # and after the cluster is whole again


def sdk_client(cluster: LocalCluster) -> Any:
    from producer.sdk import Client

    assert cluster.kafka is not None
    extra = cluster.secrets.kafka_python() if cluster.secrets else {}
    return Client(cluster.kafka.bootstrap, topic(cluster), linger_ms=5, **extra)


def _abort(producer: Any) -> None:
    """Close ``producer`` so that nothing it still holds reaches Kafka after the count:
    those messages are in doubt.  kafka-python 3.0.12's ``close`` flushes first and raises
    ``KafkaTimeoutError`` when batches stay stuck after a leader kill (its sender never
    stops then), so the sender is forced down: it aborts what it holds."""
    from kafka.errors import KafkaTimeoutError

    try:
        producer.close(timeout=10)
    except KafkaTimeoutError:
        sender = producer._sender
        sender.force_close()
        sender.join(30)
        assert not sender.is_alive(), "the Kafka producer's sender did not stop"


def run_scenario(cluster: LocalCluster, name: str, fault: Any) -> dict[str, Any]:
    spec = SPECS[name]
    client = sdk_client(cluster)
    gws = [str(s.base_url) for s in cluster.services["gateway"]]
    apis = [str(s.base_url) for s in cluster.services["api"]]
    traffic = Traffic(spec, kafka_send=lambda k, v, p: client.send_raw(k, v, partition=p),
                      # after a broker restart over TLS the producer may take a few of
                      # its reconnect backoffs (up to 30 s each) to deliver what it holds
                      kafka_flush=lambda: client.flush(180), gateways=gws, rate=40.0,
                      partitions=cluster.partitions, seed=hash(name) % 1000).start()
    probe = ApiProbe(apis, f"/v1/collections/{spec.id}/frequencies").start()
    try:
        time.sleep(BEFORE_S)
        t0 = time.time()
        fault()
        t1 = time.time()
        time.sleep(AFTER_S)
    finally:
        try:
            traffic.stop()
        finally:
            probe.stop()
            _abort(client.producer)
    state = wait_counted(cluster, spec)
    summary = check_counted(spec, traffic.outcomes, state)
    during = probe.summary(t0, t1 + 1.0)
    report = {"fault_s": round(t1 - t0, 1), **summary,
              "kafka_stuck": len(traffic.stuck), "kafka_flush_error": traffic.flush_error,
              "gateway": dict(traffic.gateway_status), "api_during": during,
              "api_all": probe.summary()}
    print(f"\nFAILOVER {json.dumps({'test': name, **report})}")
    # nothing acknowledged may be missing, and the stream must have flowed
    assert summary["acked"] > 100, summary
    assert traffic.gateway_status["202"] > 10, traffic.gateway_status
    return report


def leader_of_busiest(cluster: LocalCluster) -> int:
    """Node id leading the most of the partitions holding the most records."""
    assert cluster.kafka is not None
    ends = end_offsets(cluster)
    leaders = cluster.kafka.leaders(topic(cluster))
    top = sorted(ends, key=lambda p: -ends[p])[: max(1, len(ends) // 3)]
    votes: dict[int, int] = {}
    for p in top:
        votes[leaders[p]] = votes.get(leaders[p], 0) + ends[p]
    return max(votes, key=lambda n: votes[n])


def wait_isr_full(cluster: LocalCluster, timeout: float = 120.0) -> None:
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
