"""The settings the services share have one reader: defaults, errors naming the variable."""

from __future__ import annotations

import dataclasses

import pytest

from ldpstream.connections import KafkaSecurity, RedisOptions
from ldpstream.envconfig import KafkaRedisSettings, RedisSettings, read_kafka_redis, read_redis
from ldpstream.settings import ConfigError, EnvRecorder


def test_an_empty_environment_gives_the_declared_defaults() -> None:
    # What the reader returns with nothing set is what the dataclass declares: one default.
    assert KafkaRedisSettings(**read_kafka_redis({})) == KafkaRedisSettings()
    assert RedisSettings(**read_redis({})) == RedisSettings()
    assert set(read_kafka_redis({})) == {f.name for f in dataclasses.fields(KafkaRedisSettings)}


def test_the_values_set_are_read() -> None:
    s = KafkaRedisSettings(**read_kafka_redis({
        "LDP_KAFKA_BOOTSTRAP": "a:1,b:2", "LDP_REDIS_URL": "rediss://r:6380/1",
        "LDP_REDIS_PREFIX": "t:", "LDP_REPORTS_TOPIC": "r.x", "LDP_TOPIC_PARTITIONS": "12",
        "LDP_TOPIC_REPLICATION": "3", "LDP_TOPIC_MIN_ISR": "2",
        "LDP_KAFKA_SECURITY_PROTOCOL": "SSL"}))
    assert (s.kafka_bootstrap, s.redis_url, s.redis_prefix) == ("a:1,b:2", "rediss://r:6380/1",
                                                                "t:")
    assert (s.reports_topic, s.topic_partitions, s.topic_replication, s.topic_min_isr) == (
        "r.x", 12, 3, 2)
    assert isinstance(s.kafka_security, KafkaSecurity) and s.kafka_security.protocol == "SSL"
    assert isinstance(s.redis_options, RedisOptions)


# One bad value per variable; LDP_TOPIC_MIN_ISR is bad only above the replication.
BAD = {"LDP_KAFKA_BOOTSTRAP": "nohostport", "LDP_REDIS_URL": "http://x",
       "LDP_REDIS_PREFIX": "a b", "LDP_REPORTS_TOPIC": "bad topic",
       "LDP_TOPIC_PARTITIONS": "0", "LDP_TOPIC_REPLICATION": "three", "LDP_TOPIC_MIN_ISR": "3"}


@pytest.mark.parametrize("name", sorted(BAD))
def test_a_bad_value_fails_naming_the_variable(name: str) -> None:
    with pytest.raises(ConfigError, match=name):
        read_kafka_redis({"LDP_TOPIC_REPLICATION": "2", name: BAD[name]})


def test_the_readers_note_every_variable_for_the_configuration_reference() -> None:
    # scripts/gen_docs.py documents what the services' from_env read through these readers.
    env = EnvRecorder()
    read_kafka_redis(env)
    assert {"LDP_KAFKA_BOOTSTRAP", "LDP_REDIS_URL", "LDP_REDIS_PREFIX", "LDP_REPORTS_TOPIC",
            "LDP_TOPIC_PARTITIONS", "LDP_TOPIC_REPLICATION", "LDP_TOPIC_MIN_ISR"} <= set(env.read)
    assert env.read["LDP_TOPIC_PARTITIONS"]["default"] == KafkaRedisSettings.topic_partitions
