"""Fixtures of the gateway tests: the gateway as a child process (``python -m gateway``)
in front of the session's real broker and Redis, and a small blocking HTTP client."""

from __future__ import annotations

import http.client
import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from ldpcore.collection import CollectionSpec

from ..integration.helpers import ROOT, ServiceProcess

__all__ = ["GatewayProcess", "gateway_env", "post", "SPECS"]

SPECS = [
    CollectionSpec.from_dict({"id": "g-grr", "oracle": {"mechanism": "grr", "epsilon": 1.0},
                              "domain": {"kind": "integers", "low": 0, "high": 63}}),
    CollectionSpec.from_dict({"id": "g-oue", "oracle": {"mechanism": "oue", "epsilon": 2.0},
                              "domain": {"kind": "categories",
                                         "labels": [f"c{i}" for i in range(20)]}}),
    CollectionSpec.from_dict({"id": "g-olh", "oracle": {"mechanism": "olh", "epsilon": 1.5},
                              "domain": {"kind": "integers", "low": 0, "high": 99}}),
]


def gateway_env(kafka: Any, redis_server: Any, names: dict[str, str],
                **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LDP_")}
    env.update({
        "LDP_KAFKA_BOOTSTRAP": kafka.bootstrap,
        "LDP_REDIS_URL": redis_server.url,
        "LDP_REDIS_PREFIX": names["prefix"],
        "LDP_REPORTS_TOPIC": names["topic"],
        "LDP_GATEWAY_PORT": "0",
        "LDP_GATEWAY_CATALOG_REFRESH": "0.5",
        "PYTHONPATH": str(ROOT),
    })
    env.update(extra)
    return env


class GatewayProcess(ServiceProcess):
    """``python -m gateway`` as a child process; :attr:`port` once it listens."""

    module = "gateway"
    port = 0

    def start(self, timeout: float = 60.0) -> GatewayProcess:
        self.spawn()
        deadline = time.monotonic() + timeout
        mark = "ldpstream gateway: listening on http://"
        while time.monotonic() < deadline:
            text = self.output()
            for line in text.splitlines():
                if line.startswith(mark):
                    self.port = int(line[len(mark):].split()[0].rsplit(":", 1)[1])
                    return self
            if self.proc is not None and self.proc.poll() is not None:
                raise AssertionError(f"the gateway exited with {self.proc.returncode}:\n{text}")
            time.sleep(0.05)
        raise AssertionError(f"the gateway did not listen within {timeout} s:\n{self.output()}")

    def url(self, path: str = "") -> str:
        return f"http://127.0.0.1:{self.port}{path}"


def post(port: int, body: bytes, content_type: str = "application/octet-stream",
         headers: dict[str, str] | None = None, path: str = "/v1/reports",
         method: str = "POST") -> tuple[int, dict[str, str], Any]:
    """One request on a fresh connection: (status, headers, JSON body or raw bytes)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        hdrs = {"Content-Type": content_type, **(headers or {})}
        conn.request(method, path, body=body, headers=hdrs)
        resp = conn.getresponse()
        raw = resp.read()
        try:
            data: Any = json.loads(raw) if raw else None
        except ValueError:
            data = raw
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, data
    finally:
        conn.close()


@pytest.fixture
def gateway_log(tmp_path: Path) -> Path:
    return tmp_path / "gateway.log"
