"""``GET /v1/collections/{id}/series`` over real window states with a history.

A module pipeline (real broker, real Redis, a real aggregator worker) receives
simulated reports stamped into four consecutive 10-minute windows of the recent
past: a first distribution, an empty window, a window below the minimum, then a
second, clearly different distribution.  The series must follow the change window
by window, with intervals that cover the truth, and merge windows into buckets.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from statistics import NormalDist
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient
from prometheus_client import CollectorRegistry

from ldpcore.collection import CollectionSpec, encode_message
from ldpstream.storage import load_state
from producer.sdk import Client
from producer.simulate import simulate
from query_api.app import create_app
from query_api.config import ApiSettings

from ...integration.helpers import counting_worker, wait_for

pytestmark = pytest.mark.integration

W = 600
SPECS: list[dict[str, Any]] = [
    {"id": "os", "description": "operating system",
     "oracle": {"mechanism": "grr", "epsilon": 2.0},
     "domain": {"kind": "categories", "labels": ["linux", "mac", "win", "bsd", "other"]},
     "window_seconds": W, "min_reports": 1000},
    {"id": "latency", "description": "latency in ms",
     "oracle": {"mechanism": "hh", "epsilon": 2.0, "fanout": 4},
     "domain": {"kind": "integers", "low": 0, "high": 255},
     "window_seconds": W, "min_reports": 1000},
    {"id": "load", "description": "CPU load in percent",
     "oracle": {"mechanism": "pm", "epsilon": 2.0},
     "domain": {"kind": "interval", "low": 0.0, "high": 100.0, "bins": 100},
     "window_seconds": W, "min_reports": 1000},
]
# Per window (offset from the first): (reports, distribution) per collection.
PLAN: dict[str, list[tuple[int, int, str]]] = {
    "os": [(0, 4000, "geometric:0.7"), (2, 400, "uniform"), (3, 4000, "cauchy:1,0.3")],
    "latency": [(0, 6000, "cauchy:30,6"), (2, 400, "uniform"), (3, 6000, "cauchy:200,6")],
    "load": [(0, 4000, "cauchy:20,5"), (2, 400, "uniform"), (3, 4000, "cauchy:70,5")],
}
Z = NormalDist().inv_cdf(0.9995)  # the tests ask for 99.9 % intervals


@pytest.fixture(scope="module")
def history(kafka: Any, redis_server: Any, tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("series")
    specs = {s["id"]: CollectionSpec.from_dict(s) for s in SPECS}
    first = (int(time.time()) // (2 * W) - 2) * 2 * W  # four whole past windows
    with counting_worker(kafka, redis_server, tmp, SPECS, "ser") as (names, _, client):
        truth: dict[tuple[str, int], np.ndarray] = {}
        with Client(kafka.bootstrap, names["topic"]) as producer:
            for cid, plan in PLAN.items():
                spec = specs[cid]
                for k, (offset, reports, dist) in enumerate(plan):
                    ts = (first + offset * W + 1) * 1000

                    def send(batch: Any, spec: CollectionSpec = spec, ts: int = ts) -> Any:
                        return producer.producer.send(
                            names["topic"], key=spec.id.encode(),
                            value=encode_message(spec, batch, "binary"), timestamp_ms=ts)

                    res = simulate(spec, send, dist=dist, reports=reports, batch_sizes=[500],
                                   seed=11 + k, progress=False)
                    truth[(cid, offset)] = res.truth / reports
        total = {c: sum(r for _, r, _ in p) for c, p in PLAN.items()}
        wait_for(lambda: all(load_state(client, specs[c], prefix=names["prefix"]).n
                             >= total[c] for c in specs), 90, "reports counted", interval=0.3)
        settings = ApiSettings(redis_url=redis_server.url, redis_prefix=names["prefix"])
        with TestClient(create_app(settings, registry=CollectorRegistry())) as api:
            yield {"api": api, "first": first, "truth": truth, "specs": specs}


def get(h: dict[str, Any], cid: str, **params: Any) -> Any:
    params.setdefault("since", h["first"])
    params.setdefault("until", h["first"] + 4 * W)
    params.setdefault("confidence", 0.999)
    return h["api"].get(f"/v1/collections/{cid}/series", params=params)


def ok(resp: Any) -> dict[str, Any]:
    assert resp.status_code == 200, resp.text
    body: dict[str, Any] = resp.json()
    return body


def error_of(resp: Any, status: int, parameter: str) -> str:
    assert resp.status_code == status, resp.text
    err = resp.json()["error"]
    assert err["parameter"] == parameter, err
    return str(err["message"])


def by_start(body: dict[str, Any], series: str) -> dict[int, dict[str, Any]]:
    return {p["start"]: p for p in body["points"] if p["series"] == series}


def covers(point: dict[str, Any], truth: float, slack: float = 0.0) -> bool:
    return bool(point["ci_low"] - slack <= truth <= point["ci_high"] + slack)


def test_frequency_series_follows_each_window_with_intervals_covering_the_truth(
        history: dict[str, Any]) -> None:
    first = history["first"]
    body = ok(get(history, "os", kind="frequencies", labels="linux,mac"))
    assert body["bucket_seconds"] == W and body["series"] == ["linux", "mac"]
    assert len(body["points"]) == 2 * 4
    linux = by_start(body, "linux")
    assert [linux[first + i * W]["n"] for i in range(4)] == [4000, 0, 400, 4000]
    for offset in (0, 3):
        p, true = linux[first + offset * W], history["truth"][("os", offset)][0]
        assert covers(p, true), (offset, p, true)
        assert p["ci_low"] < p["estimate"] < p["ci_high"]
    # The distribution changed: linux fell from ~0.7 to ~0.1; the intervals do not overlap.
    assert linux[first + 3 * W]["ci_high"] < linux[first]["ci_low"]
    assert linux[first + W]["estimate"] is None and linux[first + W]["reason"] == "no reports"
    low = linux[first + 2 * W]
    assert low["estimate"] is None and "400 of the 1000" in low["reason"]
    assert body["points"][0]["time"].endswith("Z")


def test_buckets_merge_whole_windows_and_are_served_from_the_cache_when_unchanged(
        history: dict[str, Any]) -> None:
    first = history["first"]
    metrics = history["api"].app.state.metrics
    body = ok(get(history, "os", kind="subset", labels="linux", bucket=2 * W))
    assert [(p["start"], p["n"], p["windows"]) for p in body["points"]] == \
        [(first, 4000, 1), (first + 2 * W, 4400, 2)]
    merged = body["points"][1]
    t2, t3 = history["truth"][("os", 2)][0], history["truth"][("os", 3)][0]
    assert covers(merged, (400 * t2 + 4000 * t3) / 4400)
    hits = metrics.cache_hits._value.get()
    again = ok(get(history, "os", kind="subset", labels="linux", bucket=2 * W))
    assert again["points"] == body["points"]
    assert metrics.cache_hits._value.get() - hits == 2  # one per bucket with data


def test_points_picks_the_shortest_bucket_that_fits(history: dict[str, Any]) -> None:
    body = ok(get(history, "os", kind="subset", labels="linux", points=3))
    assert body["bucket_seconds"] == 2 * W and len(body["points"]) == 2
    assert ok(get(history, "os", kind="subset", labels="linux", points=4))["bucket_seconds"] == W
    recent = ok(history["api"].get("/v1/collections/os/series",
                                   params={"kind": "subset", "labels": "mac", "points": 2}))
    assert recent["bucket_seconds"] == W and len(recent["points"]) == 2


def test_top_follows_the_most_frequent_values_over_the_whole_range(
        history: dict[str, Any]) -> None:
    body = ok(get(history, "os", kind="frequencies", top=2))
    assert sorted(body["series"]) == ["linux", "mac"]  # the others are below 0.1 throughout
    assert {p["series"] for p in body["points"]} == {"linux", "mac"}
    assert body["method"] and body["description"] == "operating system"


def test_range_and_quantile_series_of_a_hierarchical_histogram(
        history: dict[str, Any]) -> None:
    first = history["first"]
    rng = by_start(ok(get(history, "latency", kind="range", low=0, high=99)), "[0, 99]")
    quant = ok(get(history, "latency", kind="quantiles", q=[0.5]))
    assert quant["series"] == ["q0.5"] and quant["method"] == "CDF inversion"
    med = by_start(quant, "q0.5")
    for offset in (0, 3):
        truth = history["truth"][("latency", offset)]
        assert covers(rng[first + offset * W], float(truth[:100].sum()))
        true_median = int(np.searchsorted(np.cumsum(truth), 0.5))
        m = med[first + offset * W]
        assert m["ci_low"] <= true_median <= m["ci_high"], (m, true_median)
        assert m["ci_high"] - m["ci_low"] < 40
    assert med[first]["ci_high"] < med[first + 3 * W]["ci_low"]  # 30 ms → 200 ms


def test_mean_series_of_a_numeric_collection(history: dict[str, Any]) -> None:
    first = history["first"]
    spec = history["specs"]["load"]
    centres = (np.arange(100) + 0.5) * 100 / 100
    body = ok(get(history, "load", kind="mean"))
    mean = by_start(body, "mean")
    for offset in (0, 3):
        true_mean = float(history["truth"][("load", offset)] @ centres)
        assert covers(mean[first + offset * W], true_mean, slack=0.5), true_mean
    assert mean[first]["ci_high"] < mean[first + 3 * W]["ci_low"]
    assert body["min_reports"] == spec.min_reports


def test_without_since_the_series_starts_at_the_oldest_stored_window(
        history: dict[str, Any]) -> None:
    body = ok(history["api"].get("/v1/collections/os/series",
                                 params={"kind": "subset", "labels": "mac"}))
    assert body["since"] == history["first"]
    assert body["points"][0]["n"] == 4000
    assert body["until"] >= time.time() and len(body["points"]) >= 5


def test_bucket_and_points_together_and_long_ranges_are_answered(
        history: dict[str, Any]) -> None:
    # bucket is the shortest length wanted (rounded up to whole windows), points the most
    # buckets: neither is refused, the answer says the bucket it used.
    assert ok(get(history, "os", kind="subset", labels="linux", bucket=W + 1)
              )["bucket_seconds"] == 2 * W
    both = ok(get(history, "os", kind="subset", labels="linux", bucket=W, points=2))
    assert both["bucket_seconds"] == 2 * W and len(both["points"]) == 2
    month = ok(get(history, "os", kind="subset", labels="linux", since="-30d", until="now"))
    assert len(month["points"]) <= 500 and month["bucket_seconds"] % W == 0
    assert sum(p["n"] for p in month["points"]) == 8400 == month["n"]
    # An empty range has no point.
    empty = ok(get(history, "os", since="now", until="-1h"))
    assert (empty["points"], empty["n"], empty["n_effective"]) == ([], 0, 0)


def test_top_among_labels_follows_the_most_frequent_of_them(history: dict[str, Any]) -> None:
    body = ok(get(history, "os", kind="frequencies", labels="bsd,linux,other", top=1))
    assert body["series"] == ["linux"]


@pytest.mark.parametrize(("cid", "params", "status", "parameter", "says"), [
    ("os", {"points": 501}, 400, "points", "500"),
    ("os", {"kind": "mean"}, 409, "kind", "answers kind=frequencies, subset"),
    ("load", {"kind": "frequencies"}, 409, "kind", "answers kind=mean"),
    ("os", {"kind": "median"}, 400, "kind", "frequencies"),
    ("os", {"kind": "subset"}, 400, "labels", "at least one"),
    ("os", {"labels": "linux,plan9"}, 400, "labels", "plan9"),
    ("os", {"top": 99}, 400, "top", "20"),
    ("latency", {"kind": "range", "low": 5}, 400, "high", "needs low= and high="),
    ("latency", {"kind": "range", "low": 50, "high": 10}, 400, "low", "must not exceed"),
    ("latency", {"kind": "quantiles", "q": 1.5}, 400, "q", "[0, 1]"),
    ("os", {"confidence": 1.5}, 400, "confidence", "1"),
    ("nope", {}, 404, "id", "GET /v1/collections"),
])
def test_bad_series_queries_are_4xx_naming_the_parameter(
        history: dict[str, Any], cid: str, params: dict[str, Any], status: int,
        parameter: str, says: str) -> None:
    msg = error_of(get(history, cid, **params), status, parameter)
    assert says in msg, msg


def test_series_is_in_the_openapi_document_with_its_kinds(history: dict[str, Any]) -> None:
    op = history["api"].get("/openapi.json").json()["paths"][
        "/v1/collections/{cid}/series"]["get"]
    kind = next(p for p in op["parameters"] if p["name"] == "kind")
    assert set(kind["schema"]["enum"]) == {"frequencies", "subset", "range", "quantiles",
                                           "mean"}
    names = {p["name"] for p in op["parameters"]}
    assert {"bucket", "since", "until", "labels", "top", "q"} <= names


def test_the_whole_range_ranks_values_by_estimate_then_index() -> None:
    from query_api.routes.series import _ranking

    class Oracle:  # a frequency oracle's estimate, ties included
        def estimate(self, state: Any) -> np.ndarray:
            return np.array([0.1, 0.3, 0.3, 0.0, 0.3, 0.3])

    order = _ranking(Oracle(), None)  # type: ignore[arg-type]
    assert order.tolist() == [1, 2, 4, 5, 0, 3]
    assert order.tolist() == sorted(range(6), key=lambda i: (-Oracle().estimate(None)[i], i))
    assert not order.flags.writeable  # kept per version and shared
