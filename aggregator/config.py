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
LDP_ENGINE                faust                       ``faust`` (faust-streaming agent) or
                                                      ``aiokafka`` (direct consumer loop)
LDP_RELEASE_INTERVAL_MS   0 (off)                     run the janitor in this worker: delete the
                                                      records below the Redis watermarks (already
                                                      counted) and trim expired windows this often
LDP_RELEASE_REPLICAS      1 with Sentinels, else 0    release only what this many Redis replicas
                                                      acknowledge holding (WAIT); 1 by default
                                                      when LDP_REDIS_SENTINELS is set
========================  ==========================  ==============================================

Kafka SASL/TLS and Redis TLS/credentials: see :mod:`ldpstream.connections`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from ldpstream.connections import KafkaSecurity, RedisOptions
from ldpstream.settings import (
    DEFAULT_BOOTSTRAP,
    DEFAULT_REDIS_URL,
    ConfigError,
    env_bootstrap,
    env_file,
    env_int,
    env_min_isr,
    env_name,
    env_redis_prefix,
    env_redis_url,
)
from ldpstream.storage import DEFAULT_PREFIX

__all__ = ["ConfigError", "ENGINES", "WorkerSettings"]

ENGINES = ("faust", "aiokafka")


@dataclass(frozen=True)
class WorkerSettings:
    """Aggregator settings (see the module docstring for the variables)."""

    kafka_bootstrap: str = DEFAULT_BOOTSTRAP
    redis_url: str = DEFAULT_REDIS_URL
    redis_prefix: str = DEFAULT_PREFIX
    reports_topic: str = "ldp-reports"
    dlq_topic: str = "ldp-reports-dlq"
    topic_partitions: int = 4
    topic_replication: int = 1
    topic_min_isr: int = 0
    consumer_group: str = "ldp-aggregator"
    flush_interval_ms: int = 200
    flush_max_reports: int = 2_000_000
    collections_file: str | None = None
    metrics_port: int = 0
    metrics_host: str = "127.0.0.1"
    session_timeout_ms: int = 6000
    heartbeat_ms: int = 1000
    rebalance_timeout_ms: int = 10_000
    engine: str = "faust"
    release_interval_ms: int = 0
    release_replicas: int = 0
    kafka_security: KafkaSecurity = KafkaSecurity()
    redis_options: RedisOptions = RedisOptions()

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> WorkerSettings:
        """Read and validate every variable from ``env`` (default ``os.environ``)."""
        env = os.environ if env is None else env
        boot = env_bootstrap(env)
        url = env_redis_url(env)
        prefix = env_redis_prefix(env)
        cfile = env_file(env, "LDP_COLLECTIONS_FILE")
        session = env_int(env, "LDP_SESSION_TIMEOUT_MS", cls.session_timeout_ms, 1000, 300_000)
        heartbeat = env_int(env, "LDP_HEARTBEAT_MS", cls.heartbeat_ms, 100, 60_000)
        if heartbeat * 3 > session:
            raise ConfigError(f"LDP_HEARTBEAT_MS ({heartbeat}) must be at most a third of "
                              f"LDP_SESSION_TIMEOUT_MS ({session})")
        replication = env_int(env, "LDP_TOPIC_REPLICATION", cls.topic_replication, 1, 32)
        redis_options = RedisOptions.from_env(env, url=url)
        engine = (env.get("LDP_ENGINE") or cls.engine).strip().lower()
        if engine not in ENGINES:
            raise ConfigError(f"LDP_ENGINE must be one of {', '.join(ENGINES)}, got {engine!r}")
        return cls(
            kafka_bootstrap=boot,
            redis_url=url,
            redis_prefix=prefix,
            reports_topic=env_name(env, "LDP_REPORTS_TOPIC", cls.reports_topic),
            dlq_topic=env_name(env, "LDP_DLQ_TOPIC", cls.dlq_topic),
            topic_partitions=env_int(env, "LDP_TOPIC_PARTITIONS", cls.topic_partitions, 1, 10_000),
            topic_replication=replication,
            topic_min_isr=env_min_isr(env, replication),
            consumer_group=env_name(env, "LDP_CONSUMER_GROUP", cls.consumer_group),
            flush_interval_ms=env_int(env, "LDP_FLUSH_INTERVAL_MS", cls.flush_interval_ms,
                                   1, 3_600_000),
            flush_max_reports=env_int(env, "LDP_FLUSH_MAX_REPORTS", cls.flush_max_reports,
                                   1, 10**12),
            collections_file=cfile,
            metrics_port=env_int(env, "LDP_METRICS_PORT", cls.metrics_port, 0, 65535),
            metrics_host=env.get("LDP_METRICS_HOST") or cls.metrics_host,
            session_timeout_ms=session,
            heartbeat_ms=heartbeat,
            rebalance_timeout_ms=env_int(env, "LDP_REBALANCE_TIMEOUT_MS",
                                         cls.rebalance_timeout_ms, 1000, 600_000),
            engine=engine,
            release_interval_ms=env_int(env, "LDP_RELEASE_INTERVAL_MS", cls.release_interval_ms,
                                        0, 86_400_000),
            kafka_security=KafkaSecurity.from_env(env),
            redis_options=redis_options,
            release_replicas=env_int(env, "LDP_RELEASE_REPLICAS",
                                     1 if redis_options.mode == "sentinel" else 0, 0, 16),
        )
