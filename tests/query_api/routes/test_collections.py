"""query_api.routes.collections: list, get, create and delete collections (admin token)."""

from __future__ import annotations

from typing import Any

from ..conftest import ADMIN

AUTH = {"Authorization": f"Bearer {ADMIN}"}
NEW = {"id": "fresh", "oracle": {"mechanism": "grr", "epsilon": 1.0},
       "domain": {"kind": "categories", "labels": ["x", "y"]}}


def test_the_list_and_one_collection_give_spec_queries_and_reports(redis_api: Any) -> None:
    listed = redis_api.get("/v1/collections").json()
    ids = [c["id"] for c in listed["collections"]]
    assert {"os", "lat", "load", "few"} <= set(ids)
    one = redis_api.get("/v1/collections/lat").json()
    assert one["id"] == "lat" and "range" in one["queries"]
    assert redis_api.get("/v1/collections/nope").status_code == 404


def test_create_then_delete_with_the_admin_token(redis_api: Any) -> None:
    assert redis_api.post("/v1/collections", json=NEW).status_code == 401
    bad = {**AUTH, "Authorization": "Bearer wrong-token"}
    assert redis_api.post("/v1/collections", json=NEW, headers=bad).status_code == 403
    r = redis_api.post("/v1/collections", json=NEW, headers=AUTH)
    assert r.status_code == 201, r.text
    assert redis_api.get("/v1/collections/fresh").status_code == 200
    # The same id with another spec is a conflict, the same spec again is not.
    other = {**NEW, "oracle": {"mechanism": "grr", "epsilon": 2.0}}
    assert redis_api.post("/v1/collections", json=other, headers=AUTH).status_code == 409
    assert redis_api.delete("/v1/collections/fresh", headers=AUTH).status_code == 200
    assert redis_api.get("/v1/collections/fresh").status_code == 404


def test_a_bad_spec_is_a_400_naming_the_problem(redis_api: Any) -> None:
    r = redis_api.post("/v1/collections", json={**NEW, "bogus": 1}, headers=AUTH)
    assert r.status_code == 400 and "bogus" in r.json()["error"]["message"]
