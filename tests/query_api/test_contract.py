"""Contract: a valid OpenAPI schema, and no 5xx for any parameters (property-based)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

from query_api.app import create_app
from query_api.config import ApiSettings

pytestmark = [pytest.mark.integration, pytest.mark.any_broker]  # tests the API, not the broker

ROUTES = ["frequencies", "subset", "heavy-hitters", "range", "quantiles", "cdf", "mean",
          "histogram"]
PARAMS = ["method", "since", "until", "confidence", "top", "labels", "k", "low", "high", "q"]
values = st.one_of(st.text(max_size=12), st.integers(-10**6, 10**6).map(str),
                   st.floats(allow_nan=True, allow_infinity=True).map(str),
                   st.sampled_from(["norm-sub", "power", "linux,win", "0.5", "2000-01-01",
                                    "", "nan", "1e309", "-1", "255"]))


@pytest.fixture(scope="module")
def client(pipeline: dict[str, Any]) -> Iterator[TestClient]:
    s = ApiSettings(redis_url=pipeline["redis_url"], redis_prefix=pipeline["names"]["prefix"])
    with TestClient(create_app(s, registry=CollectorRegistry())) as c:
        yield c


def test_openapi_schema_is_valid_openapi_3(client: TestClient) -> None:
    from openapi_spec_validator import validate

    validate(client.get("/openapi.json").json())


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cid=st.sampled_from(["os", "latency", "apps", "missing", "x%20y"]),
       route=st.sampled_from(ROUTES),
       params=st.dictionaries(st.sampled_from(PARAMS), values, max_size=4))
def test_no_parameters_make_the_api_fail_with_5xx(client: TestClient, cid: str, route: str,
                                                   params: dict[str, str]) -> None:
    r = client.get(f"/v1/collections/{cid}/{route}", params=params)
    assert r.status_code < 500, (r.status_code, r.text)
    if r.status_code >= 400:
        assert r.json()["error"]["message"]
