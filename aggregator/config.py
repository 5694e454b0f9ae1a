"""Settings of the aggregator worker, read once from ``LDP_…`` environment variables.

A bad value fails at start-up with :class:`ConfigError` naming the variable.

========================  ==========================  ==============================================
variable                  default                     meaning
========================  ==========================  ==============================================
LDP_KAFKA_BOOTSTRAP       127.0.0.1:9092              Kafka bootstrap servers (comma separated)
LDP_REDIS_URL             redis://127.0.0.1:6379/0    Redis holding collections, states, watermarks
LDP_REDIS_PREFIX          ldp:                        prefix of every Redis key
LDP_REPORTS_TOPIC         ldp-reports                 topic of report messages (key = collection id)
LDP_DLQ_TOPIC             ldp-reports-dlq             dead-letter topic (original bytes + reason)
LDP_TOPIC_PARTITIONS      4                           partitions when the worker creates the topics
LDP_CONSUMER_GROUP        ldp-aggregator              Kafka consumer group of the workers
LDP_FLUSH_INTERVAL_MS     200                         flush the local delta at least this often
LDP_FLUSH_MAX_REPORTS     2000000                     ... or as soon as it holds this many reports
LDP_COLLECTIONS_FILE      (unset)                     YAML/JSON collections registered at start-up
LDP_TOPIC_REPLICATION     1                           replication factor when creating the topics
LDP_TOPIC_MIN_ISR         0 (broker default)          min.insync.replicas of the topics it creates
LDP_METRICS_PORT          0 (off)                     /metrics and /healthz (loop alive) on PORT
LDP_METRICS_HOST          127.0.0.1                   bind address of /metrics (0.0.0.0 in pods)
LDP_SESSION_TIMEOUT_MS    6000                        consumer session timeout (tansu: keep ~6 s)
LDP_HEARTBEAT_MS          1000                        consumer heartbeat interval
LDP_REBALANCE_TIMEOUT_MS  10000                       Faust engine: broker rebalance timeout (tansu
                                                      joins take ~30 s with Faust's default 60 s)
LDP_MAX_POLL_INTERVAL_MS  300000                      longest time between two polls before Kafka
                                                      moves the worker's partitions away; bounds the
                                                      records taken per poll (see poll_records)
LDP_ENGINE                faust                       ``faust`` (faust-streaming agent) or
                                                      ``aiokafka`` (direct consumer loop)
LDP_RELEASE_INTERVAL_MS   0 (off)                     run the janitor in this worker: delete the
                                                      records below the Redis watermarks (already
                                                      counted, durably: docs/faults.md) and trim
                                                      expired windows this often
LDP_RELEASE_REPLICAS      1 with Sentinels, else 0    release only what is durable on the primary
                                                      and this many Redis replicas acknowledge
                                                      holding (WAIT); 1 by default when
                                                      LDP_REDIS_SENTINELS is set
========================  ==========================  ==============================================

Kafka SASL/TLS and Redis TLS/credentials: see :mod:`ldpstream.connections`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from ldpstream.envconfig import KafkaRedisSettings, read_kafka_redis
from ldpstream.settings import ConfigError, env_file, env_int, env_name

__all__ = ["ConfigError", "ENGINES", "WorkerSettings"]

ENGINES = ("faust", "aiokafka")

SLOWEST_RECORDS_PER_S = 20
"""A floor on how many records per second a worker processes: a message near the 1 MiB
limit holds ~100,000 reports of the largest oracles, ~50 ms of counting at full CPU."""


@dataclass(frozen=True)
class WorkerSettings(KafkaRedisSettings):
    """Aggregator settings (see the module docstring for the variables; Kafka, Redis and the
    reports topic: :class:`~ldpstream.envconfig.KafkaRedisSettings`)."""

    dlq_topic: str = "ldp-reports-dlq"
    consumer_group: str = "ldp-aggregator"
    flush_interval_ms: int = 200
    flush_max_reports: int = 2_000_000
    collections_file: str | None = None
    metrics_port: int = 0
    metrics_host: str = "127.0.0.1"
    session_timeout_ms: int = 6000
    heartbeat_ms: int = 1000
    rebalance_timeout_ms: int = 10_000
    max_poll_interval_ms: int = 300_000
    engine: str = "faust"
    release_interval_ms: int = 0
    release_replicas: int = 0

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> WorkerSettings:
        """Read and validate every variable from ``env`` (default ``os.environ``)."""
        env = os.environ if env is None else env
        shared = read_kafka_redis(env)
        session = env_int(env, "LDP_SESSION_TIMEOUT_MS", cls.session_timeout_ms, 1000, 300_000)
        heartbeat = env_int(env, "LDP_HEARTBEAT_MS", cls.heartbeat_ms, 100, 60_000)
        if heartbeat * 3 > session:
            raise ConfigError(f"LDP_HEARTBEAT_MS ({heartbeat}) must be at most a third of "
                              f"LDP_SESSION_TIMEOUT_MS ({session})")
        engine = (env.get("LDP_ENGINE") or cls.engine).strip().lower()
        if engine not in ENGINES:
            raise ConfigError(f"LDP_ENGINE must be one of {', '.join(ENGINES)}, got {engine!r}")
        sentinel = shared["redis_options"].mode == "sentinel"
        return cls(
            **shared,
            dlq_topic=env_name(env, "LDP_DLQ_TOPIC", cls.dlq_topic),
            consumer_group=env_name(env, "LDP_CONSUMER_GROUP", cls.consumer_group),
            flush_interval_ms=env_int(env, "LDP_FLUSH_INTERVAL_MS", cls.flush_interval_ms,
                                      1, 3_600_000),
            flush_max_reports=env_int(env, "LDP_FLUSH_MAX_REPORTS", cls.flush_max_reports,
                                      1, 10**12),
            collections_file=env_file(env, "LDP_COLLECTIONS_FILE"),
            metrics_port=env_int(env, "LDP_METRICS_PORT", cls.metrics_port, 0, 65535),
            metrics_host=env.get("LDP_METRICS_HOST") or cls.metrics_host,
            session_timeout_ms=session,
            heartbeat_ms=heartbeat,
            rebalance_timeout_ms=env_int(env, "LDP_REBALANCE_TIMEOUT_MS",
                                         cls.rebalance_timeout_ms, 1000, 600_000),
            max_poll_interval_ms=env_int(env, "LDP_MAX_POLL_INTERVAL_MS",
                                         cls.max_poll_interval_ms, 1000, 86_400_000),
            engine=engine,
            release_interval_ms=env_int(env, "LDP_RELEASE_INTERVAL_MS", cls.release_interval_ms,
                                        0, 86_400_000),
            release_replicas=env_int(env, "LDP_RELEASE_REPLICAS", 1 if sentinel else 0, 0, 16),
        )

    @property
    def poll_records(self) -> int:
        """Records taken per poll and buffered between polls (Faust's stream buffer).

        A consumer that does not poll for ``LDP_MAX_POLL_INTERVAL_MS`` leaves its group
        (aiokafka), and a Faust worker that left while its buffer was full never joins
        again: Faust stops polling while the buffer is full and the client rejoins only
        from a poll.  So what one poll takes must be processed well within the interval:
        :data:`SLOWEST_RECORDS_PER_S` records per second of interval (at least 100, at
        most 50,000, where throughput stops gaining).
        """
        return max(100, min(50_000, self.max_poll_interval_ms * SLOWEST_RECORDS_PER_S // 1000))
