"""CORS of the query API (LDP_CORS_ORIGINS): read routes for listed origins or any with '*',
admin routes for listed origins only, preflights answered; the gateway's origins fall back
to LDP_CORS_ORIGINS."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from prometheus_client import CollectorRegistry

from gateway.config import GatewaySettings
from ldpstream.settings import ConfigError
from query_api.app import create_app
from query_api.config import ApiSettings

pytestmark = [pytest.mark.integration, pytest.mark.any_broker]  # Redis only

ADMIN = "cors-admin-token-1"
SPEC = {"id": "web", "oracle": {"mechanism": "grr", "epsilon": 1.0},
        "domain": {"kind": "categories", "labels": ["a", "b"]}}
APP = "https://app.example"


@pytest.fixture
def make_client(redis_server: Any) -> Iterator[Any]:
    opened: list[TestClient] = []
    prefix = f"cors{uuid.uuid4().hex[:8]}:"

    def make(origins: tuple[str, ...]) -> TestClient:
        settings = ApiSettings(redis_url=redis_server.url, redis_prefix=prefix,
                               admin_token=ADMIN, cors_origins=origins)
        client = TestClient(create_app(settings, registry=CollectorRegistry()))
        client.__enter__()
        opened.append(client)
        return client

    yield make
    for c in opened:
        c.__exit__(None, None, None)


def _preflight(client: TestClient, path: str, origin: str, method: str) -> Any:
    return client.options(path, headers={"Origin": origin,
                                         "Access-Control-Request-Method": method,
                                         "Access-Control-Request-Headers": "authorization"})


def test_star_opens_the_read_routes_to_any_origin_and_never_the_admin_ones(
        make_client: Any) -> None:
    c = make_client(("*",))
    auth = {"Authorization": f"Bearer {ADMIN}"}
    # an admin request from a page: refused by the browser (no CORS headers), even with '*'
    r = c.post("/v1/collections", json=SPEC, headers={**auth, "Origin": "https://x.example"})
    assert r.status_code == 201 and "access-control-allow-origin" not in r.headers
    pre = _preflight(c, "/v1/collections", "https://x.example", "POST")
    assert pre.status_code == 204 and "access-control-allow-origin" not in pre.headers
    pre = _preflight(c, "/v1/collections/web", "https://x.example", "DELETE")
    assert "access-control-allow-origin" not in pre.headers
    # reads: any origin
    r = c.get("/v1/collections/web", headers={"Origin": "https://x.example"})
    assert r.status_code == 200 and r.headers["access-control-allow-origin"] == "*"
    assert "x-state-version" in r.headers["access-control-expose-headers"].lower()
    pre = _preflight(c, "/v1/collections/web/frequencies", "https://x.example", "GET")
    assert pre.status_code == 204 and pre.headers["access-control-allow-origin"] == "*"
    assert "POST" not in pre.headers["access-control-allow-methods"]
    assert "authorization" in pre.headers["access-control-allow-headers"].lower()
    # an error answer carries the headers too (the page can read why)
    r = c.get("/v1/collections/nope", headers={"Origin": "https://x.example"})
    assert r.status_code == 404 and r.headers["access-control-allow-origin"] == "*"
    # no Origin: no CORS headers
    assert "access-control-allow-origin" not in c.get("/v1/collections/web").headers


def test_listed_origins_are_echoed_and_may_use_the_admin_routes(make_client: Any) -> None:
    c = make_client((APP,))
    auth = {"Authorization": f"Bearer {ADMIN}"}
    pre = _preflight(c, "/v1/collections", APP, "POST")
    assert pre.headers["access-control-allow-origin"] == APP
    assert "POST" in pre.headers["access-control-allow-methods"]
    assert pre.headers["vary"] == "Origin"
    r = c.post("/v1/collections", json=SPEC, headers={**auth, "Origin": APP})
    assert r.status_code in (200, 201) and r.headers["access-control-allow-origin"] == APP
    r = c.get("/v1/collections/web", headers={"Origin": APP})
    assert r.headers["access-control-allow-origin"] == APP and r.headers["vary"] == "Origin"
    # another origin: nothing (the browser refuses), the answer itself unchanged
    r = c.get("/v1/collections/web", headers={"Origin": "https://evil.example"})
    assert r.status_code == 200 and "access-control-allow-origin" not in r.headers
    assert r.headers["vary"] == "Origin"
    assert "access-control-allow-origin" not in _preflight(
        c, "/v1/collections/web", "https://evil.example", "GET").headers


def test_without_ldp_cors_origins_there_are_no_cors_headers(make_client: Any) -> None:
    c = make_client(())
    r = c.get("/healthz", headers={"Origin": APP})
    assert r.status_code == 200 and "access-control-allow-origin" not in r.headers


def test_the_settings_read_ldp_cors_origins_and_the_gateway_falls_back_to_them() -> None:
    assert ApiSettings.from_env({}).cors_origins == ()
    assert ApiSettings.from_env({"LDP_CORS_ORIGINS": f"{APP}/, http://127.0.0.1:3000"}
                                ).cors_origins == (APP, "http://127.0.0.1:3000")
    for bad in ("app.example", "https://app.example/path", "ftp://x"):
        with pytest.raises(ConfigError, match="LDP_CORS_ORIGINS"):
            ApiSettings.from_env({"LDP_CORS_ORIGINS": bad})
    # the gateway: its own variable wins (empty = off), else LDP_CORS_ORIGINS, else '*'
    assert GatewaySettings.from_env({}).cors_origins == ("*",)
    assert GatewaySettings.from_env({"LDP_CORS_ORIGINS": APP}).cors_origins == (APP,)
    both = {"LDP_CORS_ORIGINS": APP, "LDP_GATEWAY_CORS_ORIGINS": "https://gw.example"}
    assert GatewaySettings.from_env(both).cors_origins == ("https://gw.example",)
    assert GatewaySettings.from_env({"LDP_CORS_ORIGINS": APP, "LDP_GATEWAY_CORS_ORIGINS": ""}
                                    ).cors_origins == ()
    with pytest.raises(ConfigError, match="LDP_CORS_ORIGINS"):
        GatewaySettings.from_env({"LDP_CORS_ORIGINS": "nope"})
