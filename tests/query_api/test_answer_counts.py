"""``n`` and ``n_effective`` in every answer kind, with the meaning docs/longitudinal.md gives.

``n`` is the number of reports summed over the range's windows; ``n_effective`` the
sample size behind the intervals — for memoized collections (the default policy) fewer
than n when the range spans several windows.  Each collection here holds three windows
of 2,000, 3,000 and 1,000 reports written into a real Redis by the aggregator's flush
script; a real ``ldpstream serve`` answers every route (the SSE stream included).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from ldpcore.collection import CollectionSpec

from .conftest import serving_api
from .routes.test_stream import sse_events
from .states import register, simulated_state, write_window

pytestmark = [pytest.mark.integration, pytest.mark.any_broker]

W = 600
COUNTS = (2000, 3000, 1000)
CAT8 = {"kind": "categories", "labels": [f"a{i}" for i in range(8)]}
SPECS: dict[str, tuple[dict[str, Any], str]] = {
    "os": ({"oracle": {"mechanism": "grr", "epsilon": 2.0},
            "domain": {"kind": "categories", "labels": ["linux", "mac", "win", "bsd"]}},
           "zipf:1.2"),
    "lat": ({"oracle": {"mechanism": "hh", "epsilon": 2.0, "fanout": 4},
             "domain": {"kind": "integers", "low": 0, "high": 63}}, "cauchy:20,5"),
    "sess": ({"oracle": {"mechanism": "sw", "epsilon": 2.0},
              "domain": {"kind": "interval", "low": 0.0, "high": 60.0, "bins": 16}},
             "geometric:0.2"),
    "prof": ({"oracle": {"mechanism": "multi", "epsilon": 2.0},
              "domain": {"kind": "attributes", "attributes": [
                  {"name": "os", "kind": "categories", "labels": ["linux", "mac", "win"]},
                  {"name": "age", "kind": "interval", "low": 0, "high": 100, "bins": 4}]}},
             "uniform"),
    "apps": ({"oracle": {"mechanism": "ps", "epsilon": 2.0, "length": 3}, "domain": CAT8},
             "zipf:1.1"),
    "pairs": ({"oracle": {"mechanism": "psi", "epsilon": 2.0, "length": 2,
                          "itemsets": [[0, 1], [2], [3, 4]]}, "domain": CAT8}, "zipf:1.1"),
    "sizes": ({"oracle": {"mechanism": "setsize", "epsilon": 2.0, "max_size": 4},
               "domain": CAT8}, "zipf:1.1"),
    "cands": ({"oracle": {"mechanism": "ps", "epsilon": 2.0}, "domain": CAT8,
               "protocol": {"name": "svim", "group": "cands", "phase": "candidates", "k": 2,
                            "epsilon_total": 2.0}}, "zipf:1.1"),
}
ROUTES: list[tuple[str, str]] = [
    ("os", "frequencies"), ("os", "subset?labels=linux,mac"), ("os", "heavy-hitters?k=2"),
    ("lat", "range?low=0&high=20"), ("lat", "quantiles?q=0.5"), ("lat", "cdf"),
    ("lat", "histogram"), ("sess", "mean"), ("sess", "frequencies"), ("sess", "histogram"),
    ("sess", "quantiles?q=0.5"), ("sess", "cdf"), ("prof", "attributes"),
    ("prof", "attributes/os/frequencies"), ("prof", "attributes/age/mean"),
    ("apps", "top-items?k=3"), ("apps", "frequencies"), ("apps", "subset?labels=a0,a1"),
    ("pairs", "top-itemsets?k=2"), ("sizes", "set-sizes"), ("cands", "next-phase"),
]


@pytest.fixture(scope="module")
def served(redis_server: Any, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[dict[str, Any]]:
    import redis

    prefix = f"cnt{uuid.uuid4().hex[:8]}:"
    client = redis.Redis.from_url(redis_server.url)
    specs = {cid: CollectionSpec.from_dict({"id": cid, **raw, "window_seconds": W,
                                            "min_reports": 100})
             for cid, (raw, _) in SPECS.items()}
    # Below its minimum: its stream says it is waiting.
    specs["few"] = CollectionSpec.from_dict({"id": "few", **SPECS["os"][0],
                                             "window_seconds": W, "min_reports": 10**9})
    register(client, prefix, *specs.values())
    first = (int(time.time()) // (3 * W) - 2) * 3 * W  # the three windows: one 3W bucket
    for k, (cid, spec) in enumerate(specs.items()):
        for i, n in enumerate(COUNTS):
            write_window(client, prefix, spec, first + i * W,
                         simulated_state(spec, SPECS.get(cid, SPECS["os"])[1], n,
                                         seed=100 * k + i))
    try:
        with (serving_api(redis_server.url, prefix,
                          tmp_path_factory.mktemp("counts") / "api.log",
                          LDP_STREAM_INTERVAL_S="0.2") as port,
              httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as http):
            yield {"http": http, "specs": specs, "first": first}
    finally:
        client.close()


def _expected(spec: CollectionSpec, counts: tuple[int, ...]) -> tuple[int, float]:
    n = sum(counts)
    return n, round(min(float(n), spec.effective_sample_size(list(counts))), 1)


@pytest.mark.parametrize(("cid", "route"), ROUTES, ids=[f"{c}/{r}" for c, r in ROUTES])
def test_every_answer_states_reports_summed_and_the_effective_sample_size(
        served: dict[str, Any], cid: str, route: str) -> None:
    spec = served["specs"][cid]
    resp = served["http"].get(f"/v1/collections/{cid}/{route}")
    assert resp.status_code == 200, resp.text
    body = resp.json()
    n, n_eff = _expected(spec, COUNTS)
    assert body["n"] == n, body  # every report of the three windows, not n_effective
    assert n_eff < n  # memoized reports over three windows: fewer independent answers
    if route.startswith("attributes/"):
        # An attribute's intervals stand on its own effective size (the devices that
        # sampled it, times the collection's longitudinal factor).
        assert 0 < body["n_effective"] < n_eff and body["n_total"] == n
    else:
        assert body["n_effective"] == n_eff, body


@pytest.mark.parametrize(("cid", "kind", "extra"), [
    ("os", "frequencies", {"labels": "linux"}), ("os", "subset", {"labels": "linux,mac"}),
    ("lat", "range", {"low": 0, "high": 20}), ("lat", "quantiles", {}),
    ("sess", "mean", {})])
def test_every_series_point_states_its_own_n_and_n_effective(
        served: dict[str, Any], cid: str, kind: str, extra: dict[str, Any]) -> None:
    spec, first = served["specs"][cid], served["first"]
    resp = served["http"].get(f"/v1/collections/{cid}/series", params={
        "kind": kind, "since": first, "until": first + 3 * W, **extra})
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert (body["n"], body["n_effective"]) == _expected(spec, COUNTS)
    got = {p["start"]: (p["n"], p["n_effective"]) for p in body["points"]}
    # One window per bucket: its effective size is its own count.
    assert got == {first + i * W: (c, float(c)) for i, c in enumerate(COUNTS)}
    merged = served["http"].get(f"/v1/collections/{cid}/series", params={
        "kind": kind, "since": first, "until": first + 3 * W, "bucket": 3 * W,
        **extra}).json()["points"]
    assert {(p["n"], p["n_effective"]) for p in merged} == {_expected(spec, COUNTS)}


@pytest.mark.parametrize(("cid", "kind"), [("os", "estimates"), ("lat", "estimates"),
                                         ("sess", "estimates"), ("prof", "estimates"),
                                         ("few", "waiting")])
def test_sse_events_state_n_and_n_effective_and_match_their_schema(
        served: dict[str, Any], cid: str, kind: str) -> None:
    import jsonschema

    from query_api.openapi import EVENT_DATA, event_schema

    spec = served["specs"][cid]
    with served["http"].stream("GET", f"/v1/collections/{cid}/stream") as resp:
        assert resp.status_code == 200
        assert resp.headers["content-type"].startswith("text/event-stream")
        event, data = next(sse_events(resp))
    assert event == kind
    assert (data["n"], data["n_effective"]) == _expected(spec, COUNTS)
    # The event as a client parses it, and its data, fit the documented schemas.
    jsonschema.validate({"event": event, "data": json.dumps(data)}, event_schema())
    jsonschema.validate(data, EVENT_DATA[kind])


def test_the_stream_of_an_unknown_collection_is_a_json_404(served: dict[str, Any]) -> None:
    resp = served["http"].get("/v1/collections/nope/stream")
    assert resp.status_code == 404 and resp.headers["content-type"] == "application/json"
    assert resp.json()["error"]["parameter"] == "id"


@pytest.mark.parametrize(("route", "estimand"), [
    ("top-items?k=3", "holders-truncated"), ("frequencies", "holders-truncated"),
    ("heavy-hitters?k=2", "holders-truncated"), ("subset?labels=a0,a1", "items-per-device"),
    ("series?labels=a0", "holders-truncated"), ("series?kind=subset&labels=a0,a1",
                                               "items-per-device")])
def test_every_set_valued_answer_names_its_estimand(served: dict[str, Any], route: str,
                                                    estimand: str) -> None:
    body = served["http"].get(f"/v1/collections/apps/{route}").json()
    assert body["estimand"] == estimand, body
    assert "l = 3" in body["estimand_text"] and body["under_count"]["length"] == 3
    for cid, route2, code in (("pairs", "top-itemsets?k=2", "holders-truncated"),
                              ("sizes", "set-sizes", "set-sizes")):
        other = served["http"].get(f"/v1/collections/{cid}/{route2}").json()
        assert other["estimand"] == code and other["estimand_text"]
