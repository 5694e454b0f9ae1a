"""query_api.deps: the dependencies every route shares (time window, answers, admin)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from query_api.deps import answer_response


def test_an_answer_carries_its_cache_status_and_state_version() -> None:
    r = answer_response(b"{}", "hit", "abc")
    assert r.headers["x-cache"] == "hit" and r.headers["x-state-version"] == "abc"
    assert r.media_type == "application/json"


def test_the_second_ask_is_a_cache_hit_of_the_same_version(redis_api: Any) -> None:
    a = redis_api.get("/v1/collections/lat/cdf")
    b = redis_api.get("/v1/collections/lat/cdf")
    assert a.status_code == b.status_code == 200
    assert b.headers["x-cache"] == "hit"
    assert a.headers["x-state-version"] == b.headers["x-state-version"]


@pytest.mark.parametrize("since", ["yesterday", "-1y", "1e99"])
def test_a_bad_time_is_a_400_naming_it(redis_api: Any, since: str) -> None:
    r = redis_api.get("/v1/collections/os/frequencies", params={"since": since})
    assert r.status_code == 400 and r.json()["error"]["parameter"] == "since"


def test_a_window_with_no_state_is_n_zero_not_an_error(redis_api: Any) -> None:
    future = str(int(time.time()) + 10 * 86400)
    r = redis_api.get("/v1/collections/os/frequencies", params={"since": future})
    assert r.status_code == 200 and r.json()["n"] == 0 and r.json()["windows"] == 0
    whole = redis_api.get("/v1/collections/os/frequencies", params={"since": "-1d"})
    assert whole.json()["n"] == 5000


def test_unknown_collections_are_404_before_anything_else(redis_api: Any) -> None:
    r = redis_api.get("/v1/collections/nope/cdf", params={"since": "bad"})
    assert r.status_code in (400, 404)

