"""Settings of the replicated back ends: Sentinels, Redis Cluster, min ISR, janitor replicas."""

from __future__ import annotations

import pytest

from aggregator.config import WorkerSettings
from gateway.config import GatewaySettings
from ldpstream.connections import RedisOptions
from ldpstream.settings import ConfigError
from query_api.config import ApiSettings


def test_sentinels_and_master_name_are_read_and_give_the_sentinel_mode() -> None:
    env = {"LDP_REDIS_SENTINELS": "10.0.0.1:26379, s2:26380", "LDP_REDIS_MASTER_NAME": "m1"}
    opts = RedisOptions.from_env(env)
    assert opts.mode == "sentinel" and opts.master_name == "m1"
    assert opts.sentinels == (("10.0.0.1", 26379), ("s2", 26380))
    assert RedisOptions.from_env({}).mode == "single"
    assert RedisOptions.from_env({"LDP_REDIS_CLUSTER": "a:7000"}).mode == "cluster"


@pytest.mark.parametrize("key,value", [("LDP_REDIS_SENTINELS", "host-without-port"),
                                       ("LDP_REDIS_SENTINELS", "h:0"),
                                       ("LDP_REDIS_CLUSTER", "h:port"),
                                       ("LDP_REDIS_MASTER_NAME", "two words")])
def test_bad_redis_topology_values_fail_naming_the_variable(key: str, value: str) -> None:
    with pytest.raises(ConfigError, match=key):
        RedisOptions.from_env({key: value})


def test_sentinels_and_cluster_together_are_refused() -> None:
    with pytest.raises(ConfigError, match="LDP_REDIS_SENTINELS and LDP_REDIS_CLUSTER"):
        RedisOptions.from_env({"LDP_REDIS_SENTINELS": "a:1", "LDP_REDIS_CLUSTER": "b:2"})


def test_every_service_takes_the_sentinels() -> None:
    env = {"LDP_REDIS_SENTINELS": "s:26379", "LDP_REDIS_URL": "rediss://ignored/3"}
    for cls in (WorkerSettings, ApiSettings, GatewaySettings):
        assert cls.from_env(env).redis_options.mode == "sentinel"


def test_node_settings_come_from_the_url_and_the_variables() -> None:
    opts = RedisOptions.from_env({"LDP_REDIS_SENTINELS": "s:1", "LDP_REDIS_PASSWORD": "pw"})
    kw = opts._node_kwargs("rediss://u:urlpw@ignored:6379/3")
    assert kw == {"username": "u", "password": "pw", "db": 3, "ssl": True}


def test_min_isr_must_not_exceed_the_replication_factor() -> None:
    s = WorkerSettings.from_env({"LDP_TOPIC_REPLICATION": "3", "LDP_TOPIC_MIN_ISR": "2"})
    assert (s.topic_replication, s.topic_min_isr) == (3, 2)
    with pytest.raises(ConfigError, match="LDP_TOPIC_MIN_ISR"):
        WorkerSettings.from_env({"LDP_TOPIC_REPLICATION": "1", "LDP_TOPIC_MIN_ISR": "2"})
    with pytest.raises(ConfigError, match="LDP_TOPIC_MIN_ISR"):
        GatewaySettings.from_env({"LDP_TOPIC_REPLICATION": "2", "LDP_TOPIC_MIN_ISR": "3"})


def test_the_janitor_waits_for_one_replica_by_default_only_with_sentinels() -> None:
    assert WorkerSettings.from_env({}).release_replicas == 0
    assert WorkerSettings.from_env({"LDP_REDIS_SENTINELS": "s:1"}).release_replicas == 1
    assert WorkerSettings.from_env({"LDP_REDIS_SENTINELS": "s:1",
                                    "LDP_RELEASE_REPLICAS": "0"}).release_replicas == 0
