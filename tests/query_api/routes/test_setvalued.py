"""query_api.routes.setvalued: the set-valued routes refuse collections they cannot answer.

Whole SVIM groups through the worker are in tests/query_api/test_setvalued.py."""

from __future__ import annotations

from typing import Any

import pytest


@pytest.mark.parametrize("route", ["top-items", "top-itemsets", "set-sizes", "next-phase"])
def test_a_collection_of_single_values_gets_a_409_naming_what_is_needed(
        redis_api: Any, route: str) -> None:
    r = redis_api.get(f"/v1/collections/os/{route}")
    assert r.status_code == 409, r.text
    assert r.json()["error"]["message"]


def test_an_unknown_collection_is_a_404(redis_api: Any) -> None:
    assert redis_api.get("/v1/collections/nope/top-items").status_code == 404
