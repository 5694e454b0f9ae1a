"""query_api.app: the app built from its settings, its documents and its metrics port.

No Redis here (an unreachable one): what a user sees with Redis down is in
tests/query_api/test_unavailable.py, every route against real states in tests/query_api/routes.
"""

from __future__ import annotations

from fastapi.testclient import TestClient
from prometheus_client import CollectorRegistry

from ldpstream.dev.servers import free_port
from query_api.app import create_app, create_metrics_app
from query_api.config import ApiSettings


def _app() -> object:
    settings = ApiSettings(redis_url=f"redis://127.0.0.1:{free_port()}/0")
    return create_app(settings, registry=CollectorRegistry())


def test_the_app_lives_without_redis_and_serves_its_documents() -> None:
    with TestClient(_app()) as c:  # type: ignore[arg-type]
        assert c.get("/healthz").status_code == 200
        assert c.get("/readyz").status_code == 503
        doc = c.get("/openapi.json").json()
        assert "/v1/collections/{cid}/frequencies" in doc["paths"]
        docs = c.get("/docs")
        assert docs.status_code == 200 and "/docs-assets/swagger-ui-bundle.js" in docs.text
        assert c.get("/docs-assets/swagger-ui-bundle.js").status_code == 200


def test_the_metrics_app_waits_for_the_api_and_answers_health() -> None:
    side = create_metrics_app(_app())  # type: ignore[arg-type]
    with TestClient(side) as c:
        assert c.get("/healthz").json() == {"status": "ok"}
        assert c.get("/metrics").status_code == 503  # the API's lifespan has not run
        assert c.get("/v1/collections").status_code == 404  # only the two routes
