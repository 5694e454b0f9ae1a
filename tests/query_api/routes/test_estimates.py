"""query_api.routes.estimates: each estimate route against states in a real Redis.

Accuracy against the truth of real traffic is in tests/query_api/test_routes.py."""

from __future__ import annotations

from typing import Any

import pytest


def test_frequencies_name_their_method_and_carry_intervals(redis_api: Any) -> None:
    body = redis_api.get("/v1/collections/os/frequencies").json()
    assert body["n"] == 5000 and len(body["estimates"]) == 5
    row = body["estimates"][0]
    assert row["label"] == "linux" and row["ci_low"] <= row["estimate"] <= row["ci_high"]
    base = redis_api.get("/v1/collections/os/frequencies", params={"method": "base"}).json()
    assert base["method"] == "base"


def test_subset_range_and_mean_routes(redis_api: Any) -> None:
    sub = redis_api.get("/v1/collections/os/subset", params={"labels": "linux,mac"}).json()
    assert 0.5 < sub["estimate"] <= 1.2
    rng = redis_api.get("/v1/collections/lat/range", params={"low": 0, "high": 31}).json()
    assert abs(rng["estimate"] - 0.5) < 0.2
    mean = redis_api.get("/v1/collections/load/mean").json()
    assert abs(mean["estimate"] - 50) < 10


@pytest.mark.parametrize(("path", "status", "parameter"), [
    ("/v1/collections/os/frequencies?method=nope", 400, "method"),
    ("/v1/collections/os/range?low=linux&high=mac", 409, None),
    ("/v1/collections/load/frequencies", 409, None),
    ("/v1/collections/few/frequencies", 409, None),
    ("/v1/collections/nope/frequencies", 404, "id"),
])
def test_what_a_route_cannot_answer_is_a_4xx(redis_api: Any, path: str, status: int,
                                             parameter: str | None) -> None:
    r = redis_api.get(path)
    assert r.status_code == status, r.text
    assert r.json()["error"].get("parameter") == parameter


def test_methods_and_mechanisms_are_listed(redis_api: Any) -> None:
    methods = redis_api.get("/v1/methods").json()
    assert "base" in str(methods) and "norm-sub" in str(methods)
    mechs = redis_api.get("/v1/mechanisms").json()
    assert "grr" in str(mechs)
