"""Closed by default: the gateway refuses to start open beyond loopback unless opened on
purpose, and says which access mode it runs in at start-up and on /readyz."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from gateway.config import GatewaySettings
from ldpstream.settings import ConfigError

from ..integration.helpers import ROOT
from .conftest import GatewayProcess, gateway_env, post

pytestmark = [pytest.mark.integration, pytest.mark.any_broker]


@pytest.mark.parametrize("env", [
    {"LDP_GATEWAY_HOST": "0.0.0.0"},
    {"LDP_GATEWAY_HOST": "gateway.internal"},
    {"LDP_GATEWAY_HOST": "127.0.0.1", "LDP_GATEWAY_OPEN": "false"},
    {"LDP_GATEWAY_HOST": "0.0.0.0", "LDP_GATEWAY_KEYS": "", "LDP_GATEWAY_TOKENS": "optional"},
])
def test_without_keys_or_tokens_the_gateway_refuses_to_start_beyond_loopback(
        env: dict[str, str]) -> None:
    with pytest.raises(ConfigError, match="LDP_GATEWAY_OPEN=true"):
        GatewaySettings.from_env(env)
    out = subprocess.run([sys.executable, "-m", "ldpstream", "gateway"], cwd=ROOT,
                         env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), **env},
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2, out.stderr
    assert "LDP_GATEWAY_KEYS" in out.stderr and "LDP_GATEWAY_OPEN" in out.stderr


@pytest.mark.parametrize(("env", "mode"), [
    ({"LDP_GATEWAY_HOST": "0.0.0.0", "LDP_GATEWAY_OPEN": "true"}, "open"),
    ({"LDP_GATEWAY_HOST": "0.0.0.0", "LDP_GATEWAY_KEYS": "fleet:k1"}, "keys"),
    ({"LDP_GATEWAY_HOST": "::1"}, "open"),
    ({}, "open"),  # 127.0.0.1 by default: ldpstream up, tests, a developer's machine
])
def test_keys_tokens_loopback_or_the_explicit_flag_let_it_start(
        env: dict[str, str], mode: str) -> None:
    assert GatewaySettings.from_env(env).access == mode


def test_tokens_required_by_the_token_redemption_close_it_too() -> None:
    from gateway.config import access_mode

    assert access_mode({}, "0.0.0.0", {}, tokens_required=True) == "tokens"


def _readyz(port: int) -> dict[str, Any]:
    status, _, body = post(port, b"", method="GET", path="/readyz")
    assert status == 200, body
    return dict(json.loads(body) if isinstance(body, bytes) else body)


def test_an_opened_gateway_says_so_at_start_up_and_on_readyz(
        kafka: Any, redis_server: Any, tmp_path: Path) -> None:
    names = {"topic": f"gwa-{uuid.uuid4().hex[:8]}", "prefix": f"gwa{uuid.uuid4().hex[:6]}:"}
    env = gateway_env(kafka, redis_server, names, LDP_GATEWAY_HOST="0.0.0.0",
                      LDP_GATEWAY_OPEN="true")
    gw = GatewayProcess(env, tmp_path / "open.log").start()
    try:
        ready = _readyz(gw.port)
        assert ready["access"] == "open" and "anyone" in ready["access_note"]
        assert "access open: OPEN" in gw.output() and "anyone" in gw.output()
    finally:
        assert gw.stop() == 0, gw.output()
    env = gateway_env(kafka, redis_server, names, LDP_GATEWAY_HOST="0.0.0.0",
                      LDP_GATEWAY_KEYS="fleetA:key-123456")
    gw = GatewayProcess(env, tmp_path / "keys.log").start()
    try:
        assert _readyz(gw.port)["access"] == "keys"
        assert "access keys: device keys of 1 fleets required" in gw.output()
    finally:
        assert gw.stop() == 0, gw.output()
