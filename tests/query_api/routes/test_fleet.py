"""The fleet's privacy budget through the API: GET/PUT /v1/fleet, the budget stated in
every answer, and registration refused (400 naming the field) beyond it."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from prometheus_client import CollectorRegistry

from ldpcore.budget import collection_daily_spend, epsilon_per_report
from ldpcore.collection import CollectionSpec
from query_api.app import create_app
from query_api.config import ApiSettings

from ..states import register_reported

pytestmark = [pytest.mark.integration, pytest.mark.any_broker]  # Redis only

ADMIN = "fleet-admin-token-1"
AUTH = {"Authorization": f"Bearer {ADMIN}"}
SPECS = [
    {"id": "hourly-none", "oracle": {"mechanism": "grr", "epsilon": 0.25},
     "domain": {"kind": "categories", "labels": ["a", "b", "c"]}, "memoization": "none",
     "min_reports": 10},
    {"id": "memo", "oracle": {"mechanism": "oue", "epsilon": 2.0},
     "domain": {"kind": "integers", "low": 0, "high": 15}, "min_reports": 10},
    {"id": "two", "oracle": {"mechanism": "grr", "epsilon": 4.0},
     "domain": {"kind": "categories", "labels": ["a", "b", "c", "d"]},
     "memoization": "two-level", "epsilon_1": 2.0, "min_reports": 10},
    {"id": "hidden", "oracle": {"mechanism": "grr", "epsilon": 1.0},
     "domain": {"kind": "categories", "labels": ["a", "b"]}, "min_reports": 10},
]


@pytest.fixture(scope="module")
def client(redis_server: Any) -> Iterator[TestClient]:
    import redis

    prefix = f"fleet{uuid.uuid4().hex[:8]}:"
    r = redis.Redis.from_url(redis_server.url)
    register_reported(r, prefix, SPECS, private=("hidden",))
    settings = ApiSettings(redis_url=redis_server.url, redis_prefix=prefix, admin_token=ADMIN)
    try:
        with TestClient(create_app(settings, registry=CollectorRegistry())) as c:
            yield c
    finally:
        r.close()


def specs() -> list[CollectionSpec]:
    return [CollectionSpec.from_dict(s) for s in SPECS]


def put(client: TestClient, budget: Any) -> Any:
    return client.put("/v1/fleet", json={"budget": budget}, headers=AUTH)


def test_without_a_budget_the_fleet_states_what_one_device_spends_per_day(
        client: TestClient) -> None:
    assert put(client, None).status_code == 200
    body = client.get("/v1/fleet").json()
    demand = sum(collection_daily_spend(s) for s in specs())  # private ones count too
    assert body["budget"] is None and body["within_budget"] is True
    assert body["demand_epsilon_per_day"] == pytest.approx(demand, abs=1e-5)
    assert body["device_epsilon_per_day"] == pytest.approx(demand, abs=1e-5)
    rows = {c["id"]: c for c in body["collections"]}
    assert set(rows) == {"hourly-none", "memo", "two"}  # the private one is not named
    assert rows["hourly-none"] == {"id": "hourly-none", "memoization": "none",
                                   "epsilon": 0.25, "epsilon_per_report": 0.25,
                                   "reports_per_day": 24, "epsilon_per_day": 6.0}
    assert rows["memo"]["epsilon_per_day"] == 2.0
    two = specs()[2]
    assert rows["two"]["epsilon_per_report"] == pytest.approx(epsilon_per_report(two), abs=1e-5)
    assert "hidden" in {c["id"] for c in client.get("/v1/fleet", headers=AUTH).json()[
        "collections"]}


def test_a_budget_is_stated_in_every_answer_and_caps_what_a_device_can_spend(
        client: TestClient) -> None:
    url = "/v1/collections/hourly-none/frequencies?method=base"
    before = client.get(url).json()["budget"]
    assert before["epsilon_per_day"] is None
    assert put(client, {"epsilon_per_day": 8}).status_code == 200
    body = client.get("/v1/fleet").json()
    demand = sum(collection_daily_spend(s) for s in specs())
    assert body["budget"] == {"epsilon_per_day": 8.0, "values_per_day": 1}
    assert body["device_epsilon_per_day"] == pytest.approx(min(8.0, demand), abs=1e-5)
    assert body["within_budget"] is (demand <= 8.0)
    # the cached answer of the same state now states the new budget (added when served)
    answer = client.get(url)
    assert answer.headers["X-Cache"] == "hit"
    assert answer.json()["budget"] == {"epsilon_per_day": 8.0,
                                       "device_epsilon_per_day": body["device_epsilon_per_day"],
                                       "collection_epsilon_per_day": 6.0}
    for route in ("/v1/collections/memo/frequencies", "/v1/collections/memo/heavy-hitters",
                  "/v1/collections/two/frequencies?top=2", "/v1/collections/memo/series"):
        got = client.get(route)
        assert got.status_code == 200, (route, got.text)
        assert got.json()["budget"]["epsilon_per_day"] == 8.0, route


def test_registration_beyond_the_budget_is_a_400_naming_the_field(client: TestClient) -> None:
    assert put(client, {"epsilon_per_day": 3}).status_code == 200
    base = {"domain": {"kind": "categories", "labels": ["a", "b"]}}
    r = client.post("/v1/collections", headers=AUTH,
                    json={"id": "too-much", "oracle": {"mechanism": "grr", "epsilon": 5.0},
                          **base})
    assert r.status_code == 400
    err = r.json()["error"]
    assert err["parameter"] == "oracle.epsilon" and "budget.epsilon_per_day = 3" in err["message"]
    r = client.post("/v1/collections", headers=AUTH,
                    json={"id": "too-much-2", "oracle": {"mechanism": "grr", "epsilon": 8.0},
                          "memoization": "two-level", "epsilon_1": 6.0, **base})
    assert r.status_code == 400 and r.json()["error"]["parameter"] == "epsilon_1"
    assert client.get("/v1/collections/too-much", headers=AUTH).status_code == 404
    ok = client.post("/v1/collections", headers=AUTH,
                     json={"id": "fits", "oracle": {"mechanism": "grr", "epsilon": 3.0},
                           **base})
    assert ok.status_code == 201
    assert client.delete("/v1/collections/fits", headers=AUTH).status_code == 200


@pytest.mark.parametrize("body,parameter", [
    ({"budget": {"epsilon_per_day": 1.0}}, "budget.epsilon_per_day"),  # 'memo' costs 2
    ({"budget": {"epsilon_per_day": "eight"}}, "budget.epsilon_per_day"),
    ({"budget": {"epsilon_per_day": 8, "values_per_day": 0}}, "budget.values_per_day"),
    ({"budget": {"per_day": 8}}, "budget"),
    ({"limit": 8}, "body"),
])
def test_a_bad_or_too_small_budget_is_refused_naming_the_field(
        client: TestClient, body: Any, parameter: str) -> None:
    r = client.put("/v1/fleet", json=body, headers=AUTH)
    assert r.status_code == 400, r.text
    assert r.json()["error"]["parameter"] == parameter


def test_only_the_admin_sets_the_budget(client: TestClient) -> None:
    assert client.put("/v1/fleet", json={"budget": None}).status_code == 401
    assert client.put("/v1/fleet", json={"budget": None},
                      headers={"Authorization": "Bearer nope-nope"}).status_code == 403
