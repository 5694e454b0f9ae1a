"""What users see while Redis has no primary (a Sentinel failover): 503 with Retry-After."""

from __future__ import annotations

from fastapi.testclient import TestClient
from prometheus_client import CollectorRegistry

from ldpstream.connections import RedisOptions
from ldpstream.dev.servers import free_port
from query_api.app import create_app
from query_api.config import ApiSettings


def _check(settings: ApiSettings) -> None:
    with TestClient(create_app(settings, registry=CollectorRegistry())) as c:
        for path in ("/readyz", "/v1/collections", "/v1/collections/x/frequencies"):
            r = c.get(path)
            assert r.status_code == 503, (path, r.text)
            assert r.headers["retry-after"] == "1", path
            assert "Redis" in r.json()["error"]["message"]


def test_an_unreachable_redis_is_503_with_retry_after() -> None:
    _check(ApiSettings(redis_url=f"redis://127.0.0.1:{free_port()}/0"))


def test_no_sentinel_naming_a_primary_is_503_with_retry_after() -> None:
    port = free_port()
    opts = RedisOptions.from_env({"LDP_REDIS_SENTINELS": f"127.0.0.1:{port}"})
    _check(ApiSettings(redis_url="redis://127.0.0.1/0", redis_options=opts))
