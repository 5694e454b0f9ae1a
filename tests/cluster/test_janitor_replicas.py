"""The janitor releases only what the Redis replica holds (a failover recounts the rest).

The replica is frozen (SIGSTOP) while the primary's watermarks move on: a release now
would delete records that a failover to that replica must read again.
"""

from __future__ import annotations

import os
import signal
import uuid

import pytest

from ldpstream.dev.cluster import LocalCluster
from ldpstream.retention import Janitor
from ldpstream.storage import Keys

from .conftest import redis_client

pytestmark = pytest.mark.integration


def _log_starts(cluster: LocalCluster, topic: str) -> dict[int, int]:
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
            assert _log_starts(cluster, topic) == {0: 4, 1: 4}
            assert "replica" in (janitor.stats.last_error or "")
        finally:
            os.kill(replica.pid, signal.SIGCONT)
        cluster.redis.wait_replicas(1, 30)
        assert janitor.release_records() == {0: 8, 1: 9}
        assert _log_starts(cluster, topic) == {0: 8, 1: 9}
    finally:
        janitor.close()
        client.delete(wm, f"{prefix}janitor:mark")
        client.close()
