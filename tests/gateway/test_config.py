"""The gateway's limits as settings: defaults, values, and start-up errors naming the key."""

from __future__ import annotations

import pytest

from gateway.config import ConfigError, GatewaySettings


def test_the_limits_have_safe_defaults() -> None:
    s = GatewaySettings.from_env({})
    assert s.head_timeout <= 10 and s.body_min_rate >= 1024 and s.body_grace <= 10
    assert s.idle_timeout > s.head_timeout
    assert (s.max_head, s.max_headers, s.max_target) == (16384, 100, 8192)
    assert s.max_body <= s.body_budget <= 1 << 30
    assert (s.auth_fail_burst, s.auth_fail_rate, s.trusted_proxies) == (20, 1.0, ())


def test_the_limits_are_read_from_the_environment() -> None:
    s = GatewaySettings.from_env({
        "LDP_GATEWAY_HEAD_TIMEOUT": "3", "LDP_GATEWAY_BODY_MIN_RATE": "4096",
        "LDP_GATEWAY_BODY_GRACE": "2.5", "LDP_GATEWAY_IDLE_TIMEOUT": "30",
        "LDP_GATEWAY_MAX_HEAD": "8192", "LDP_GATEWAY_MAX_HEADERS": "50",
        "LDP_GATEWAY_MAX_TARGET": "2048", "LDP_GATEWAY_BODY_BUDGET": str(32 << 20),
        "LDP_GATEWAY_AUTH_FAIL_BURST": "5", "LDP_GATEWAY_AUTH_FAIL_RATE": "0.2",
        "LDP_GATEWAY_TRUSTED_PROXIES": "10.0.0.0/8, fd00::/8"})
    assert (s.head_timeout, s.body_min_rate, s.body_grace, s.idle_timeout) == (3, 4096, 2.5, 30)
    assert (s.max_head, s.max_headers, s.max_target, s.body_budget) == (8192, 50, 2048,
                                                                        32 << 20)
    assert (s.auth_fail_burst, s.auth_fail_rate) == (5, 0.2)
    assert s.trusted_proxies == ("10.0.0.0/8", "fd00::/8")


@pytest.mark.parametrize("env,key", [
    ({"LDP_GATEWAY_HEAD_TIMEOUT": "0"}, "LDP_GATEWAY_HEAD_TIMEOUT"),
    ({"LDP_GATEWAY_BODY_MIN_RATE": "fast"}, "LDP_GATEWAY_BODY_MIN_RATE"),
    ({"LDP_GATEWAY_MAX_HEADERS": "1"}, "LDP_GATEWAY_MAX_HEADERS"),
    ({"LDP_GATEWAY_MAX_TARGET": "20000"}, "LDP_GATEWAY_MAX_TARGET"),
    ({"LDP_GATEWAY_BODY_BUDGET": "100000"}, "LDP_GATEWAY_BODY_BUDGET"),
    ({"LDP_GATEWAY_AUTH_FAIL_RATE": "0"}, "LDP_GATEWAY_AUTH_FAIL_RATE"),
    ({"LDP_GATEWAY_TRUSTED_PROXIES": "10.0.0.0/8,proxy.example"},
     "LDP_GATEWAY_TRUSTED_PROXIES"),
])
def test_a_bad_limit_fails_at_start_up_naming_the_variable(env: dict[str, str],
                                                            key: str) -> None:
    with pytest.raises(ConfigError, match=key):
        GatewaySettings.from_env(env)


def test_the_server_reads_the_limits_the_settings_say() -> None:
    s = GatewaySettings.from_env({"LDP_GATEWAY_HEAD_TIMEOUT": "4", "LDP_GATEWAY_MAX_BODY": "9999"})
    lim = s.limits()
    assert (lim.head_timeout, lim.max_body, lim.max_head, lim.body_min_rate) == (
        4.0, 9999, s.max_head, float(s.body_min_rate))
