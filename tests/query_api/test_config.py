"""query_api.config: ``LDP_…`` variables read once, each failing naming itself."""

from __future__ import annotations

import pytest

from ldpstream.settings import ConfigError
from query_api.config import ApiSettings


def test_defaults_and_values_from_the_environment() -> None:
    assert ApiSettings.from_env({}) == ApiSettings()
    s = ApiSettings.from_env({"LDP_API_PORT": "9001", "LDP_ADMIN_TOKEN": "long-enough",
                              "LDP_REDIS_PREFIX": "x:", "LDP_CORS_ORIGINS": "*"})
    assert (s.port, s.admin_token, s.redis_prefix) == (9001, "long-enough", "x:")
    assert s.cors_origins == ("*",)


@pytest.mark.parametrize(("env", "key"), [
    ({"LDP_API_PORT": "0"}, "LDP_API_PORT"),
    ({"LDP_ADMIN_TOKEN": "short"}, "LDP_ADMIN_TOKEN"),
    ({"LDP_STREAM_INTERVAL_S": "nan"}, "LDP_STREAM_INTERVAL_S"),
    ({"LDP_CACHE_ENTRIES": "10"}, "LDP_ANSWER_CACHE_MB"),
])
def test_a_bad_value_fails_at_start_naming_the_variable(env: dict[str, str], key: str) -> None:
    with pytest.raises(ConfigError, match=key):
        ApiSettings.from_env(env)
