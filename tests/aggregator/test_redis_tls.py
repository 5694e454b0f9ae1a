"""Redis over TLS with a password, through the services' own start-up code (real server)."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from aggregator.config import WorkerSettings
from query_api.config import ApiSettings

pytestmark = pytest.mark.integration

PASSWORD = "tls-test-password"


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


@pytest.fixture(scope="module")
def tls_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """A redis-server accepting only TLS (self-made CA, cert for 127.0.0.1) and a password."""
    exe = shutil.which("redis-server")
    if exe is None:
        pytest.fail("redis-server not found: apt-get install redis-server")
    d = tmp_path_factory.mktemp("redis-tls")
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj",
             "/CN=ldp-test-ca", "-keyout", "ca.key", "-out", "ca.crt", cwd=d)
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1",
             "-keyout", "server.key", "-out", "server.csr", cwd=d)
    (d / "ext.cnf").write_text("subjectAltName=IP:127.0.0.1\n")
    _openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
             "-CAcreateserial", "-days", "2", "-extfile", "ext.cnf", "-out", "server.crt",
             cwd=d)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [exe, "--port", "0", "--tls-port", str(port), "--bind", "127.0.0.1",
         "--tls-cert-file", "server.crt", "--tls-key-file", "server.key",
         "--tls-ca-cert-file", "ca.crt", "--tls-auth-clients", "no",
         "--requirepass", PASSWORD, "--save", "", "--appendonly", "no", "--dir", str(d)],
        cwd=d, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.05)
        yield f"rediss://127.0.0.1:{port}/0", d / "ca.crt"
    finally:
        proc.terminate()
        proc.wait(10)


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
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj",
             "/CN=other-ca", "-keyout", "o.key", "-out", "other.crt", cwd=tmp_path)
    other = WorkerSettings.from_env({"LDP_REDIS_URL": url,
                                     "LDP_REDIS_TLS_CA_FILE": str(tmp_path / "other.crt"),
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
