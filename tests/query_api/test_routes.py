"""Every route of the query API, including each error, against real Redis states."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

from query_api.app import create_app
from query_api.config import ApiSettings

from .conftest import ADMIN

pytestmark = [pytest.mark.integration, pytest.mark.any_broker]  # tests the API, not the broker
AUTH = {"Authorization": f"Bearer {ADMIN}"}


@pytest.fixture(scope="module")
def client(pipeline: dict[str, Any]) -> Iterator[TestClient]:
    settings = ApiSettings(redis_url=pipeline["redis_url"],
                           redis_prefix=pipeline["names"]["prefix"], admin_token=ADMIN,
                           stream_interval_s=0.2)
    with TestClient(create_app(settings, registry=CollectorRegistry())) as c:
        yield c


def error_of(resp: Any, status: int, parameter: str | None = None) -> str:
    assert resp.status_code == status, resp.text
    body = resp.json()["error"]
    assert body["status"] == status
    if parameter is not None:
        assert body.get("parameter") == parameter, body
    assert body["message"]
    return str(body["message"])


# ---- operations -------------------------------------------------------------------------
def test_healthz_and_readyz_answer_when_redis_is_up(client: TestClient) -> None:
    assert client.get("/healthz").json() == {"status": "ok"}
    assert client.get("/readyz").json() == {"status": "ready"}


def test_readyz_is_503_when_redis_is_unreachable() -> None:
    from ldpstream.dev.servers import free_port
    settings = ApiSettings(redis_url=f"redis://127.0.0.1:{free_port()}/0")
    with TestClient(create_app(settings, registry=CollectorRegistry())) as c:
        msg = error_of(c.get("/readyz"), 503)
        assert "Redis" in msg
        error_of(c.get("/v1/collections"), 503)


def test_openapi_schema_lists_every_route(client: TestClient) -> None:
    schema = client.get("/openapi.json").json()
    paths = set(schema["paths"])
    for route in ("frequencies", "subset", "heavy-hitters", "range", "quantiles", "cdf",
                  "mean", "histogram", "stream"):
        assert f"/v1/collections/{{cid}}/{route}" in paths
    assert {"/v1/collections", "/v1/collections/{cid}", "/healthz", "/readyz",
            "/metrics"} <= paths


def test_unknown_route_and_method_are_json_errors(client: TestClient) -> None:
    assert "no route" in error_of(client.get("/v1/nope"), 404)
    r = client.put("/v1/collections")
    error_of(r, 405)
    assert set(r.headers["Allow"].replace(" ", "").split(",")) == {"GET", "HEAD", "POST"}


def test_head_answers_like_get_without_a_body(client: TestClient) -> None:
    for url in ("/healthz", "/v1/collections", "/v1/collections/os/frequencies", "/metrics"):
        get, head = client.get(url), client.head(url)
        assert head.status_code == get.status_code == 200, url
        assert head.content == b"" and head.headers["content-type"] == \
            get.headers["content-type"]
    assert client.head("/v1/collections/nope").status_code == 404


def test_dashboard_page_and_assets_are_served_locally(client: TestClient) -> None:
    page = client.get("/")
    assert page.status_code == 200 and "/static/app.js" in page.text
    assert "http://" not in page.text and "https://" not in page.text  # no CDN
    js = client.get("/static/app.js")
    assert js.status_code == 200 and "EventSource" in js.text


# ---- collections ------------------------------------------------------------------------
def test_list_and_get_collections_give_spec_and_fingerprint(client: TestClient,
                                                            pipeline: dict[str, Any]) -> None:
    listed = {c["id"]: c for c in client.get("/v1/collections").json()["collections"]}
    assert {"os", "latency", "apps"} <= set(listed)
    assert listed["latency"]["queries"] == sorted(
        ["cdf", "frequencies", "heavy-hitters", "histogram", "quantiles", "range", "subset"])
    got = client.get("/v1/collections/os").json()
    assert got["spec"]["fingerprint"] == pipeline["specs"]["os"].fingerprint
    from ldpcore.collection import CollectionSpec
    assert CollectionSpec.from_dict(got["spec"]) == pipeline["specs"]["os"]
    error_of(client.get("/v1/collections/missing"), 404, "id")


def test_admin_routes_need_the_bearer_token(client: TestClient) -> None:
    spec = {"id": "new-col", "oracle": {"mechanism": "oue", "epsilon": 1.0},
            "domain": {"kind": "categories", "labels": ["a", "b", "c"]}}
    error_of(client.post("/v1/collections", json=spec), 401, "Authorization")
    error_of(client.post("/v1/collections", json=spec,
                         headers={"Authorization": "Bearer wrong-token-xyz"}), 403)
    first = client.post("/v1/collections", json=spec, headers=AUTH)
    assert first.status_code == 201 and first.json()["created"] is True
    again = client.post("/v1/collections", json=spec, headers=AUTH)
    assert again.status_code == 200 and again.json()["created"] is False
    changed = dict(spec, oracle={"mechanism": "oue", "epsilon": 2.0})
    assert "immutable" in error_of(client.post("/v1/collections", json=changed,
                                               headers=AUTH), 409, "id")
    assert "epsilon" in error_of(client.post(
        "/v1/collections", json=dict(spec, oracle={"mechanism": "oue", "epsilon": -1}),
        headers=AUTH), 400, "body")
    error_of(client.post("/v1/collections", content=b"{not json", headers=AUTH), 400, "body")
    error_of(client.delete("/v1/collections/new-col"), 401)
    assert client.delete("/v1/collections/new-col", headers=AUTH).json() == {
        "deleted": "new-col"}
    error_of(client.delete("/v1/collections/new-col", headers=AUTH), 404, "id")
    error_of(client.get("/v1/collections/new-col"), 404)


def test_admin_routes_are_off_without_a_configured_token(pipeline: dict[str, Any]) -> None:
    settings = ApiSettings(redis_url=pipeline["redis_url"],
                           redis_prefix=pipeline["names"]["prefix"])
    with TestClient(create_app(settings, registry=CollectorRegistry())) as c:
        assert "LDP_ADMIN_TOKEN" in error_of(c.post("/v1/collections", json={}, headers=AUTH),
                                             403)


# ---- estimates --------------------------------------------------------------------------
def test_frequencies_match_the_truth_within_their_confidence_intervals(
        client: TestClient, pipeline: dict[str, Any]) -> None:
    body = client.get("/v1/collections/os/frequencies?method=base&confidence=0.999").json()
    truth = pipeline["truth"]["os"].truth / pipeline["truth"]["os"].reports
    assert body["n"] == 30_000 and body["mechanism"] == "grr" and body["epsilon"] == 2.0
    assert body["method"] == "base" and body["windows"] >= 1 and body["as_of"]
    rows = {r["label"]: r for r in body["estimates"]}
    assert list(rows) == ["linux", "mac", "win", "bsd", "other"]
    oracle = pipeline["specs"]["os"].oracle()
    for i, label in enumerate(rows):
        r = rows[label]
        assert r["std_error"] == pytest.approx(math.sqrt(oracle.variance(30_000, max(
            0.0, min(1.0, r["estimate"])))), rel=1e-9)
        # 5 values at 99.9%: a false failure has probability < 0.5 %.
        assert r["ci_low"] <= truth[i] <= r["ci_high"], (label, r, truth[i])


def test_default_method_is_auto_names_the_method_used_and_every_method_is_selectable(
        client: TestClient, pipeline: dict[str, Any]) -> None:
    import ldpcore
    body = client.get("/v1/collections/os/frequencies?confidence=0.999").json()
    assert body["method_requested"] == "auto"
    assert body["method"] in ldpcore.POSTPROCESS_METHODS and body["n"] == 30_000
    assert body["interval"] == ("analytic" if body["method"] == "base" else "bootstrap")
    assert body["simulated_mse"]["base"] >= body["simulated_mse"][body["method"]]
    truth = pipeline["truth"]["os"].truth / pipeline["truth"]["os"].reports
    for i, r in enumerate(body["estimates"]):
        assert 0.0 <= r["ci_low"] <= r["ci_high"] <= 1.0
        # 5 values at 99.9%: a false failure has probability < 0.5 %.
        assert r["ci_low"] <= truth[i] <= r["ci_high"], (r, truth[i])
    for method in ldpcore.POSTPROCESS_METHODS:
        r = client.get(f"/v1/collections/os/frequencies?method={method}")
        assert r.status_code == 200 and r.json()["method"] == method
        want = "analytic" if method == "base" else "bootstrap"
        assert r.json()["interval"] == want and r.json()["method_requested"] == method
    norm = client.get("/v1/collections/os/frequencies?method=norm-sub").json()
    est = np.array([r["estimate"] for r in norm["estimates"]])
    assert est.min() >= 0 and est.sum() == pytest.approx(1.0)
    msg = error_of(client.get("/v1/collections/os/frequencies?method=magic"), 400, "method")
    assert "norm-sub" in msg


def test_bad_query_parameters_name_the_parameter(client: TestClient) -> None:
    base = "/v1/collections/os/frequencies"
    error_of(client.get(f"{base}?confidence=1.5"), 400, "confidence")
    error_of(client.get(f"{base}?top=0"), 400, "top")
    error_of(client.get(f"{base}?top=abc"), 400, "top")
    error_of(client.get(f"{base}?since=yesterday"), 400, "since")
    error_of(client.get(f"{base}?since=-1y"), 400, "since")


def test_top_returns_the_largest_estimates_in_order(client: TestClient) -> None:
    rows = client.get("/v1/collections/os/frequencies?top=2&method=norm").json()["estimates"]
    assert [r["label"] for r in rows] == ["linux", "mac"]


def test_answers_are_cached_per_state_version(client: TestClient) -> None:
    url = "/v1/collections/os/frequencies?method=norm-cut"
    ra, rb = client.get(url), client.get(url)
    assert rb.headers["X-Cache"] == "hit"
    a, b = ra.json(), rb.json()
    assert a["state_version"] == b["state_version"] == rb.headers["X-State-Version"]
    assert a["estimates"] == b["estimates"]


def test_time_windows_filter_the_state(client: TestClient) -> None:
    assert client.get("/v1/collections/os/frequencies?since=2000-01-01T00:00:00Z"
                      ).json()["n"] == 30_000
    assert client.get("/v1/collections/os/frequencies?since=-1h&until=now").json()["n"] \
        == 30_000
    # A range that holds no report is answered, n = 0 and why, not refused: empty,
    # before the retention, in the future, or plausible but without data.
    for query, why in (("since=now&until=now", "empty time interval"),
                       ("since=-1h&until=-2h", "empty time interval"),
                       ("until=946684800", "no reports"), ("since=4102444800", "no reports"),
                       ("until=-40d", "no reports")):
        body = client.get(f"/v1/collections/os/frequencies?{query}").json()
        assert (body["n"], body["n_effective"], body["estimates"]) == (0, 0, []), query
        assert why in body["reason"], body


def test_relative_times_count_back_from_now(client: TestClient) -> None:
    from query_api.domain import parse_time

    for raw, secs in (("-90s", 90), ("-15m", 900), ("-1h", 3600), ("-7d", 7 * 86400),
                      ("-2w", 14 * 86400)):
        assert parse_time(raw, "since", now=1e9) == 1e9 - secs


def test_too_few_reports_say_how_many_are_needed(client: TestClient) -> None:
    r = client.get("/v1/collections/apps/frequencies")
    msg = error_of(r, 409)
    assert r.json()["error"]["have"] == 5_000 and r.json()["error"]["need"] == 10_000_000
    assert "5000" in msg and "10000000" in msg


def test_subset_queries_accept_labels_and_post_pos(client: TestClient,
                                                   pipeline: dict[str, Any]) -> None:
    res = pipeline["truth"]["os"]
    truth = (res.truth[0] + res.truth[2]) / res.reports
    for method in ("base", "post-pos", "norm-sub", None):
        q = "" if method is None else f"&method={method}"
        body = client.get(f"/v1/collections/os/subset?labels=linux,win{q}").json()
        assert body["labels"] == ["linux", "win"]
        assert abs(body["estimate"] - truth) < 5 * body["std_error"]
    error_of(client.get("/v1/collections/os/subset?labels=linux,plan9"), 400, "labels")
    error_of(client.get("/v1/collections/os/subset"), 400, "labels")
    repeated = client.get("/v1/collections/os/subset?labels=linux&labels=win&method=base")
    joined = client.get("/v1/collections/os/subset?labels=linux,win&method=base")
    assert repeated.json()["labels"] == ["linux", "win"]
    assert repeated.json()["estimate"] == joined.json()["estimate"]


def test_the_collection_list_says_when_it_cuts_labels() -> None:
    from ldpcore.collection import CollectionSpec
    from query_api.routes.collections import LIST_LABELS, summary

    labels = [f"l{i}" for i in range(LIST_LABELS + 7)]
    spec = CollectionSpec.from_dict({"id": "many", "oracle": {"mechanism": "grr",
                                     "epsilon": 1.0},
                                     "domain": {"kind": "categories", "labels": labels}})
    dom = summary(spec)["domain"]
    assert dom["labels_truncated"] is True and dom["label_count"] == len(labels)
    assert len(dom["labels"]) == LIST_LABELS


def test_heavy_hitters_find_the_top_values(client: TestClient) -> None:
    body = client.get("/v1/collections/os/heavy-hitters?k=2").json()
    assert [r["value"] for r in body["heavy_hitters"]] == ["linux", "mac"]
    error_of(client.get("/v1/collections/os/heavy-hitters?k=0"), 400, "k")


def test_range_quantiles_cdf_histogram_on_a_hierarchical_collection(
        client: TestClient, pipeline: dict[str, Any]) -> None:
    res = pipeline["truth"]["latency"]
    truth = res.truth / res.reports
    body = client.get("/v1/collections/latency/range?low=80&high=120").json()
    assert abs(body["estimate"] - truth[80:121].sum()) < 4 * body["std_error"]
    q = client.get("/v1/collections/latency/quantiles?q=0.5&q=0.9").json()["quantiles"]
    cdf_true = np.cumsum(truth)
    assert abs(q[0]["value"] - int(np.searchsorted(cdf_true, 0.5))) <= 3
    assert q[0]["value"] <= q[1]["value"]
    cdf = client.get("/v1/collections/latency/cdf").json()
    assert len(cdf["cdf"]) == 256 and len(cdf["labels"]) == 256
    assert np.max(np.abs(np.array(cdf["cdf"]) - cdf_true)) < 0.05
    hist = client.get("/v1/collections/latency/histogram").json()
    assert len(hist["bins"]) == 256
    error_of(client.get("/v1/collections/latency/range?low=300&high=301"), 400, "low")
    error_of(client.get("/v1/collections/latency/range?low=120&high=80"), 400, "low")
    error_of(client.get("/v1/collections/latency/quantiles?q=1.5"), 400, "q")


def test_numeric_collection_answers_mean_quantiles_cdf_and_histogram(
        client: TestClient, pipeline: dict[str, Any]) -> None:
    res, spec = pipeline["truth"]["session"], pipeline["specs"]["session"]
    truth = res.truth / res.reports
    o = spec.oracle()
    centers = o.bin_centers()
    body = client.get("/v1/collections/session/mean").json()
    assert abs(body["estimate"] - float(truth @ centers)) < 4 * body["std_error"]
    assert body["ci_low"] < body["estimate"] < body["ci_high"]
    q = client.get("/v1/collections/session/quantiles?q=0.25&q=0.5&q=0.9").json()["quantiles"]
    values = [x["value"] for x in q]
    assert values == sorted(values) and all(0.0 <= v <= 60.0 for v in values)
    edges = np.arange(1, 65) * o.width
    true_cdf = np.cumsum(truth)
    for x in q:  # quantile error |F(x̂_q) - q|, F the true CDF (interpolated)
        assert abs(float(np.interp(x["value"], edges, true_cdf)) - x["q"]) < 0.05, x
    cdf = np.array(client.get("/v1/collections/session/cdf").json()["cdf"])
    assert len(cdf) == 64 and np.max(np.abs(cdf - true_cdf)) < 0.05
    hist = client.get("/v1/collections/session/histogram").json()["bins"]
    assert len(hist) == 64 and abs(sum(hist) - 1) < 1e-9
    summary = client.get("/v1/collections/session").json()
    assert {"mean", "quantiles", "cdf", "histogram"} <= set(summary["queries"])


def test_mean_only_collection_answers_mean_and_refuses_frequencies(
        client: TestClient, pipeline: dict[str, Any]) -> None:
    res, spec = pipeline["truth"]["load"], pipeline["specs"]["load"]
    truth_mean = float(res.truth @ spec.oracle().bin_centers()) / res.reports
    body = client.get("/v1/collections/load/mean?confidence=0.99").json()
    assert abs(body["estimate"] - truth_mean) < 4 * body["std_error"]
    for route in ("frequencies", "subset?labels=1", "heavy-hitters?k=3"):
        msg = error_of(client.get(f"/v1/collections/load/{route}"), 409)
        assert "'pm'" in msg and "/mean" in msg, msg
    queries = client.get("/v1/collections/load").json()["queries"]
    assert "mean" in queries and "frequencies" not in queries


def test_heavy_hitters_over_a_huge_domain_come_from_pem(
        client: TestClient, pipeline: dict[str, Any]) -> None:
    truth: dict[int, float] = pipeline["truth"]["urls"]
    top5 = sorted(truth, key=lambda k: -truth[k])[:5]
    body = client.get("/v1/collections/urls/heavy-hitters?k=5").json()
    rows = body["heavy_hitters"]
    assert len({r["value"] for r in rows} & set(top5)) >= 4  # values in domain units
    for r in rows:
        assert abs(r["estimate"] - truth.get(r["value"], 0.0)) < 4.5 * r["std_error"], r
    # k beyond the candidates PEM keeps: all of them, and said (the schema allows k).
    more = client.get("/v1/collections/urls/heavy-hitters?k=17").json()
    assert (more["k"], more["k_requested"], len(more["heavy_hitters"])) == (16, 17, 16)
    msg = error_of(client.get("/v1/collections/urls/frequencies"), 409)
    assert "'pem'" in msg and "/heavy-hitters" in msg, msg
    summary = client.get("/v1/collections/urls").json()
    assert summary["queries"] == ["heavy-hitters"]


def test_queries_the_mechanism_cannot_answer_say_which_mechanisms_can(
        client: TestClient) -> None:
    for route in ("range?low=linux&high=win", "quantiles", "cdf", "histogram"):
        msg = error_of(client.get(f"/v1/collections/os/{route}"), 409)
        assert "hh" in msg and "haar" in msg and "'grr'" in msg, msg
    msg = error_of(client.get("/v1/collections/os/mean"), 409)
    from ldpcore.capabilities import MeanEstimates
    from ldpcore.registry import mechanisms_with
    assert "'grr'" in msg and all(m in msg for m in mechanisms_with(MeanEstimates)), msg
    assert "this collection answers /frequencies" in msg, msg


def test_metrics_are_prometheus_text_with_the_promised_series(client: TestClient) -> None:
    client.get("/v1/collections/os/frequencies")
    text = client.get("/metrics").text
    for name in ("ldp_api_request_seconds_bucket", "ldp_api_estimate_seconds_bucket",
                 "ldp_api_cache_hits_total", "ldp_api_cache_misses_total",
                 'ldp_collection_reports{collection="os"} 30000.0',
                 'ldp_collection_epsilon{collection="os"} 2.0',
                 "ldp_collection_staleness_seconds", "ldp_redis_up 1.0"):
        assert name in text, name
    assert 'route="/v1/collections/{cid}/frequencies"' in text
    # read at scrape time: a collection nobody queried is there too, with its n
    assert 'ldp_collection_reports{collection="latency"} 40000.0' in text


def test_metrics_pass_promtool(client: TestClient, tmp_path: Any) -> None:
    import shutil
    import subprocess
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.fail("promtool is missing: scripts/system-deps.sh installs it (Debian "
                    "package 'prometheus')")
    client.get("/v1/collections/latency/cdf")
    out = subprocess.run([promtool, "check", "metrics"], input=client.get("/metrics").content,
                         capture_output=True, timeout=60)
    assert out.returncode == 0, out.stdout.decode() + out.stderr.decode()


def test_json_answers_have_no_nan(client: TestClient) -> None:
    for url in ("/v1/collections/latency/frequencies?method=mle-apx",
                "/v1/collections/os/frequencies?method=power"):
        text = client.get(url).text
        assert "NaN" not in text
        json.loads(text)


def test_mechanisms_list_capabilities_routes_and_parameter_ranges(client: TestClient) -> None:
    mechs = client.get("/v1/mechanisms").json()["mechanisms"]
    assert mechs["hh"]["capabilities"] == ["frequencies", "ranges"]
    assert "range" in mechs["hh"]["queries"] and "mean" not in mechs["hh"]["queries"]
    assert mechs["pem"]["capabilities"] == ["heavy_hitters"]
    assert mechs["olh"]["parameters"]["epsilon_bounds"] == [0.001, 29.8]


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(body=st.recursive(
    st.none() | st.booleans() | st.integers(-2**80, 2**80) | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.sampled_from(["id", "oracle", "domain", "mechanism", "epsilon", "domain_size",
                         "kind", "labels", "low", "high", "bins", "g", "fanout", "bits",
                         "window_seconds", "memoization", "epsilon_1"]), inner, max_size=5),
    max_leaves=15))
def test_no_collection_body_crashes_or_stalls_the_api(client: TestClient, body: Any) -> None:
    r = client.post("/v1/collections", content=json.dumps(body),  # NaN and ±Infinity too
                    headers={"Authorization": f"Bearer {ADMIN}",
                             "Content-Type": "application/json"})
    assert r.status_code in (200, 201, 400, 409), (r.status_code, r.text)
    if r.status_code == 400:
        assert r.json()["error"]["parameter"] == "body"
