"""query_api.routes.operations: health, readiness, metrics and the dashboard page."""

from __future__ import annotations

from typing import Any


def test_health_and_readiness_with_redis_up(redis_api: Any) -> None:
    assert redis_api.get("/healthz").status_code == 200
    assert redis_api.get("/readyz").status_code == 200


def test_metrics_are_prometheus_text_with_each_collection(redis_api: Any) -> None:
    r = redis_api.get("/metrics")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    assert 'ldp_collection_reports{collection="os"} 5000.0' in r.text
    assert "ldp_redis_up 1.0" in r.text


def test_the_dashboard_is_served(redis_api: Any) -> None:
    r = redis_api.get("/")
    assert r.status_code == 200 and "<html" in r.text.lower()
