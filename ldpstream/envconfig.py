"""The settings the services read alike, declared and read in one place.

Every service finds Redis the same way (:class:`RedisSettings`); the worker and the
gateway also find Kafka and the reports topic, and create that topic alike when it is
missing (:class:`KafkaRedisSettings`).  A service's settings class derives from one of
them and passes what :func:`read_redis` or :func:`read_kafka_redis` return to its
constructor, so each ``LDP_…`` variable below has one reader, one default and one error
message naming it (the variables' meanings are in the services' tables,
docs/configuration.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .connections import KafkaSecurity, RedisOptions
from .settings import (
    DEFAULT_BOOTSTRAP,
    DEFAULT_REDIS_URL,
    env_bootstrap,
    env_int,
    env_min_isr,
    env_name,
    env_redis_prefix,
    env_redis_url,
)
from .storage import DEFAULT_PREFIX

__all__ = ["RedisSettings", "KafkaRedisSettings", "read_redis", "read_kafka_redis"]


@dataclass(frozen=True)
class RedisSettings:
    """Where Redis is: ``LDP_REDIS_URL``, ``LDP_REDIS_PREFIX`` and the credentials and TLS
    files of :class:`~ldpstream.connections.RedisOptions`."""

    redis_url: str = DEFAULT_REDIS_URL
    redis_prefix: str = DEFAULT_PREFIX
    redis_options: RedisOptions = RedisOptions()


@dataclass(frozen=True)
class KafkaRedisSettings(RedisSettings):
    """Redis, Kafka (``LDP_KAFKA_BOOTSTRAP`` and :class:`~ldpstream.connections.
    KafkaSecurity`) and the reports topic: ``LDP_REPORTS_TOPIC``, with the partitions,
    replication and ``min.insync.replicas`` a service gives it when it creates it."""

    kafka_bootstrap: str = DEFAULT_BOOTSTRAP
    kafka_security: KafkaSecurity = KafkaSecurity()
    reports_topic: str = "ldp-reports"
    topic_partitions: int = 4
    topic_replication: int = 1
    topic_min_isr: int = 0


def read_redis(env: Mapping[str, str]) -> dict[str, Any]:
    """The fields of :class:`RedisSettings` from ``env`` (ConfigError naming a bad one).

    >>> read_redis({"LDP_REDIS_PREFIX": "t:"})["redis_prefix"]
    't:'
    """
    url = env_redis_url(env)
    return {"redis_url": url, "redis_prefix": env_redis_prefix(env),
            "redis_options": RedisOptions.from_env(env, url=url)}


def read_kafka_redis(env: Mapping[str, str]) -> dict[str, Any]:
    """The fields of :class:`KafkaRedisSettings` from ``env`` (ConfigError naming a bad one).

    >>> s = read_kafka_redis({"LDP_TOPIC_REPLICATION": "3", "LDP_TOPIC_MIN_ISR": "2"})
    >>> s["reports_topic"], s["topic_partitions"], s["topic_replication"], s["topic_min_isr"]
    ('ldp-reports', 4, 3, 2)
    """
    d = KafkaRedisSettings
    replication = env_int(env, "LDP_TOPIC_REPLICATION", d.topic_replication, 1, 32)
    return {"kafka_bootstrap": env_bootstrap(env), **read_redis(env),
            "reports_topic": env_name(env, "LDP_REPORTS_TOPIC", d.reports_topic),
            "topic_partitions": env_int(env, "LDP_TOPIC_PARTITIONS", d.topic_partitions,
                                        1, 10_000),
            "topic_replication": replication,
            "topic_min_isr": env_min_isr(env, replication),
            "kafka_security": KafkaSecurity.from_env(env)}
