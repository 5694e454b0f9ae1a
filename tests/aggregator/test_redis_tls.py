"""Redis over TLS with a password, through the services' own start-up code (real server)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from aggregator.config import WorkerSettings
from ldpstream.dev.cluster import make_secrets, redis_tls_args
from ldpstream.dev.servers import free_port, start_redis
from query_api.config import ApiSettings

pytestmark = pytest.mark.integration

PASSWORD = "tls-test-password"


@pytest.fixture(scope="module")
def tls_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """A redis-server accepting only TLS (self-made CA, cert for 127.0.0.1) and a password:
    the secrets and TLS arguments of the local cluster's Redis (ldpstream.dev.cluster)."""
    d = tmp_path_factory.mktemp("redis-tls")
    tls = make_secrets(d / "secrets")
    port = free_port()
    server = start_redis(d, port, extra=[*redis_tls_args(tls, port), "--requirepass", PASSWORD])
    try:
        yield f"rediss://127.0.0.1:{port}/0", tls.ca
    finally:
        server.stop()


def test_aggregator_registers_collections_over_tls_with_a_password(
        tls_redis: tuple[str, Path]) -> None:
    import asyncio

    from aggregator.app import lifespan

    url, ca = tls_redis
    root = Path(__file__).resolve().parents[2]
    settings = WorkerSettings.from_env({
        "LDP_REDIS_URL": url, "LDP_REDIS_TLS_CA_FILE": str(ca),
        "LDP_REDIS_PASSWORD": PASSWORD, "LDP_REDIS_PREFIX": "tls:",
        "LDP_COLLECTIONS_FILE": str(root / "deploy" / "collections.yaml")})

    async def start() -> list[str]:
        async with lifespan(settings) as worker:
            return sorted(k.decode() for k in worker.acc.redis.keys("tls:*"))

    keys = asyncio.run(start())
    assert keys, "no collection was registered through the TLS connection"


def test_wrong_ca_or_password_is_refused(tls_redis: tuple[str, Path], tmp_path: Path) -> None:
    import redis

    url, ca = tls_redis
    good = WorkerSettings.from_env({"LDP_REDIS_URL": url, "LDP_REDIS_TLS_CA_FILE": str(ca),
                                    "LDP_REDIS_PASSWORD": PASSWORD})
    assert redis.Redis.from_url(url, **good.redis_options.kwargs()).ping()
    bad_pw = WorkerSettings.from_env({"LDP_REDIS_URL": url, "LDP_REDIS_TLS_CA_FILE": str(ca),
                                      "LDP_REDIS_PASSWORD": "wrong"})
    with pytest.raises(redis.AuthenticationError):
        redis.Redis.from_url(url, **bad_pw.redis_options.kwargs()).ping()
    other_ca = make_secrets(tmp_path).ca  # a CA of its own, which did not sign the server's
    other = WorkerSettings.from_env({"LDP_REDIS_URL": url,
                                     "LDP_REDIS_TLS_CA_FILE": str(other_ca),
                                     "LDP_REDIS_PASSWORD": PASSWORD})
    with pytest.raises(redis.ConnectionError):
        redis.Redis.from_url(url, socket_timeout=5, **other.redis_options.kwargs()).ping()


def test_query_api_is_ready_over_tls(tls_redis: tuple[str, Path]) -> None:
    from fastapi.testclient import TestClient

    from query_api.app import create_app

    url, ca = tls_redis
    settings = ApiSettings.from_env({"LDP_REDIS_URL": url, "LDP_REDIS_TLS_CA_FILE": str(ca),
                                     "LDP_REDIS_PASSWORD": PASSWORD})
    with TestClient(create_app(settings)) as client:
        assert client.get("/readyz").status_code == 200
        metrics = client.get("/metrics").text
        assert "ldp_redis_up 1.0" in metrics
