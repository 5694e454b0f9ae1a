"""Fixtures of the gateway tests: the gateway as a child process (``python -m gateway``)
in front of the session's real broker and Redis, and a small blocking HTTP client."""

from __future__ import annotations

import contextlib
import http.client
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ldpcore.collection import CollectionSpec

from ..integration.helpers import ListeningProcess, service_env

__all__ = ["GatewayProcess", "gateway_env", "post", "running_gateway", "SPECS"]

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
    return service_env(kafka, redis_server, names, **{
        "LDP_GATEWAY_PORT": "0", "LDP_GATEWAY_CATALOG_REFRESH": "0.5", **extra})


class GatewayProcess(ListeningProcess):
    """``python -m gateway`` as a child process; :attr:`port` once it listens."""

    module = "gateway"

    def url(self, path: str = "") -> str:
        return f"http://127.0.0.1:{self.port}{path}"


@pytest.fixture(scope="module")
def names() -> dict[str, str]:
    """The reports topic and Redis prefix of one test module's gateway."""
    uid = uuid.uuid4().hex[:8]
    return {"topic": f"gw-{uid}", "prefix": f"g{uid}:"}


@contextlib.contextmanager
def running_gateway(kafka: Any, redis_server: Any, names: dict[str, str],
                    specs: list[CollectionSpec], log: Path,
                    **settings: str) -> Iterator[GatewayProcess]:
    """A gateway child process serving ``specs`` (registered first) under ``names``; it
    must exit cleanly (0) when stopped."""
    import redis

    from ldpstream.storage import CollectionCatalogue

    client = redis.Redis.from_url(redis_server.url)
    CollectionCatalogue(client, names["prefix"]).register_all(specs)
    client.close()
    proc = GatewayProcess(gateway_env(kafka, redis_server, names, **settings), log).start()
    try:
        yield proc
    finally:
        assert proc.stop() == 0, proc.output()


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
