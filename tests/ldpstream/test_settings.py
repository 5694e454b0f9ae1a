"""One settings layer: every service reads LDP_REDIS_URL, LDP_REDIS_PREFIX alike."""

from __future__ import annotations

import pytest

from aggregator.config import WorkerSettings
from ldpstream.settings import (
    DEFAULT_BOOTSTRAP,
    DEFAULT_REDIS_URL,
    ConfigError,
    env_bootstrap,
    env_redis_prefix,
    env_redis_url,
)
from ldpstream.storage import DEFAULT_PREFIX
from query_api.config import ApiSettings


@pytest.mark.parametrize("env", [{}, {"LDP_REDIS_URL": ""}, {"LDP_REDIS_PREFIX": ""}])
def test_unset_and_empty_mean_the_default_for_every_service(env: dict[str, str]) -> None:
    assert env_redis_url(env) == DEFAULT_REDIS_URL
    assert env_redis_prefix(env) == DEFAULT_PREFIX == "ldp:"
    w, a = WorkerSettings.from_env(env), ApiSettings.from_env(env)
    assert (w.redis_url, w.redis_prefix) == (a.redis_url, a.redis_prefix) \
        == (DEFAULT_REDIS_URL, DEFAULT_PREFIX)
    assert w.kafka_bootstrap == DEFAULT_BOOTSTRAP == env_bootstrap(env)


@pytest.mark.parametrize("key,value", [("LDP_REDIS_URL", "http://x"),
                                       ("LDP_REDIS_PREFIX", "a b"),
                                       ("LDP_KAFKA_BOOTSTRAP", "nohost")])
def test_a_bad_value_names_its_variable_in_every_service(key: str, value: str) -> None:
    readers = [WorkerSettings.from_env]
    if key != "LDP_KAFKA_BOOTSTRAP":
        readers.append(ApiSettings.from_env)
    for read in readers:
        with pytest.raises(ConfigError, match=key):
            read({key: value})
