"""Prometheus config, alert rules (with unit tests) and the Grafana dashboard.

Every ``ldp_…`` series a rule or panel reads must be one the services really export: a
renamed metric would otherwise silently blank a panel or disarm an alert.
"""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import parse_qs

import pytest
import yaml
from prometheus_client import CollectorRegistry

from aggregator.metrics import AggregatorMetrics
from ldpstream.collections_file import read_collections_file
from query_api.app import create_app
from query_api.capabilities import queries_of
from query_api.config import ApiSettings
from query_api.metrics import ApiMetrics

from .conftest import ROOT, run

PROM = ROOT / "deploy" / "prometheus"
GRAFANA = ROOT / "deploy" / "grafana"
_SUFFIXES = {"counter": ("_total",), "gauge": ("",), "histogram": ("_bucket", "_count", "_sum"),
             "summary": ("_count", "_sum", "")}


def exported_series() -> set[str]:
    """Series names the aggregator and the API expose, as Prometheus stores them."""
    worker, api = CollectorRegistry(), CollectorRegistry()  # one registry per service
    AggregatorMetrics(worker)
    ApiMetrics(api)
    names: set[str] = set()
    for reg in (worker, api):
        for family in reg.collect():
            names |= {family.name + s for s in _SUFFIXES[family.type]}
    return names


def ldp_names(expr: str) -> set[str]:
    return set(re.findall(r"\bldp_[a-z0-9_]+\b", expr))


def dashboard() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((GRAFANA / "dashboards" / "ldpstream.json").read_text())
    return data


def test_prometheus_config_is_valid(promtool: str) -> None:
    out = run(promtool, "check", "config", "prometheus.yml", cwd=PROM)
    assert "SUCCESS" in out.stdout + out.stderr


def test_alert_rules_are_valid_and_pass_their_unit_tests(promtool: str) -> None:
    run(promtool, "check", "rules", "alerts.yml", cwd=PROM)
    run(promtool, "test", "rules", "alerts_test.yml", cwd=PROM)


def test_alert_unit_tests_would_catch_a_silent_alert(promtool: str, tmp_path: Any) -> None:
    # Disarm the stalled-consumer alert: the unit tests must then fail.
    rules = yaml.safe_load((PROM / "alerts.yml").read_text())
    for group in rules["groups"]:
        for rule in group["rules"]:
            if rule["alert"] == "LdpConsumerStalled":
                rule["expr"] = "vector(0) > 1"
    (tmp_path / "alerts.yml").write_text(yaml.safe_dump(rules))
    (tmp_path / "alerts_test.yml").write_text((PROM / "alerts_test.yml").read_text())
    proc = run(promtool, "test", "rules", "alerts_test.yml", cwd=tmp_path, ok=False)
    assert proc.returncode != 0


def test_the_alerts_the_deployment_needs_exist() -> None:
    rules = yaml.safe_load((PROM / "alerts.yml").read_text())
    alerts = {r["alert"] for g in rules["groups"] for r in g["rules"]}
    assert {"LdpConsumerStalled", "LdpDeadLetterRate", "LdpFlushLatencyHigh",
            "LdpRedisDown"} <= alerts


def test_alerts_read_only_exported_series_and_scraped_jobs() -> None:
    exported = exported_series()
    rules = yaml.safe_load((PROM / "alerts.yml").read_text())
    jobs = {j["job_name"] for j in yaml.safe_load((PROM / "prometheus.yml").read_text())
            ["scrape_configs"]}
    for group in rules["groups"]:
        for rule in group["rules"]:
            missing = ldp_names(rule["expr"]) - exported
            assert not missing, f"{rule['alert']} reads unexported {missing}"
            for job in re.findall(r'job="([^"]+)"', rule["expr"]):
                assert job in jobs, f"{rule['alert']} reads job {job!r} nobody scrapes"


def test_exported_series_helper_knows_the_real_names() -> None:
    exported = exported_series()
    assert {"ldp_reports_ingested_total", "ldp_flush_seconds_bucket", "ldp_consumer_lag",
            "ldp_api_request_seconds_bucket", "ldp_redis_up"} <= exported
    assert "ldp_reports_ingested" not in exported  # counters are stored with _total


def test_dashboard_panels_read_only_exported_series() -> None:
    exported = exported_series()
    exprs = [t["expr"] for p in dashboard()["panels"] for t in p.get("targets", [])
             if "expr" in t]
    assert len(exprs) >= 10
    for expr in exprs:
        missing = ldp_names(expr) - exported
        assert not missing, f"panel query {expr!r} reads unexported {missing}"


def test_dashboard_shows_ingest_rejects_latency_and_live_estimates() -> None:
    titles = " | ".join(p["title"].lower() for p in dashboard()["panels"])
    for word in ("ingest", "reject", "latency", "live estimates"):
        assert word in titles


@pytest.mark.parametrize("panel_type", ["barchart"])
def test_live_estimate_panel_calls_a_real_api_route(panel_type: str) -> None:
    app = create_app(ApiSettings(), redis=object())
    paths = set(app.openapi()["paths"])  # included routers do not list in app.routes
    panels = [p for p in dashboard()["panels"] if p["type"] == panel_type]
    assert panels
    for p in panels:
        url = p["targets"][0]["url"].split("?")[0].replace("$collection", "{cid}")
        assert url in paths, url
        assert p["targets"][0]["root_selector"] == "estimates"


def test_datasources_point_at_the_compose_services() -> None:
    ds = yaml.safe_load((GRAFANA / "provisioning/datasources/datasources.yml").read_text())
    by_uid = {d["uid"]: d for d in ds["datasources"]}
    used = {t["datasource"]["uid"] for p in dashboard()["panels"] for t in p["targets"]}
    assert used <= set(by_uid)
    assert by_uid["ldp-prometheus"]["url"] == "http://prometheus:9090"
    assert by_uid["ldp-api"]["url"] == "http://api:8000"


POINT_FIELDS = {"start", "end", "time", "n", "windows", "series", "estimate", "std_error",
                "ci_low", "ci_high", "reason"}
GRAFANA_RANGE = {"since": "${__from:date:seconds}", "until": "${__to:date:seconds}"}


def test_history_panels_read_real_series_of_collections_that_answer_them() -> None:
    """Every ``/series`` panel: a declared route and parameters, a kind its collections
    (the deployed ones, or every option of ``$collection``) answer, fields a point has."""
    app = create_app(ApiSettings(), redis=object())
    op = app.openapi()["paths"]["/v1/collections/{cid}/series"]["get"]
    declared = {p["name"]: p for p in op["parameters"]}
    kinds = set(declared["kind"]["schema"]["enum"])
    specs = {s.id: s for s in read_collections_file(ROOT / "deploy" / "collections.yaml")}
    board = dashboard()
    variable = next(v for v in board["templating"]["list"] if v["name"] == "collection")
    options = [o["value"] for o in variable["options"]]
    assert options == variable["query"].split(",")
    targets = [(p, t) for p in board["panels"] for t in p.get("targets", [])
               if "/series?" in t.get("url", "")]
    assert len(targets) >= 4
    for panel, t in targets:
        assert panel["title"].startswith("History")
        path, _, query = t["url"].partition("?")
        m = re.fullmatch(r"/v1/collections/([^/]+)/series", path)
        assert m, path
        params = parse_qs(query)
        assert set(params) <= set(declared), set(params) - set(declared)
        for name, macro in GRAFANA_RANGE.items():
            assert params[name] == [macro]  # the dashboard's time picker
        kind = params["kind"][0]
        assert kind in kinds
        for cid in (options if m[1] == "$collection" else [m[1]]):
            assert cid in specs, f"{panel['title']} reads {cid!r}, which is not deployed"
            assert kind in queries_of(specs[cid]), f"{cid} cannot answer kind={kind}"
        assert t["root_selector"] == "points"
        assert {c["selector"] for c in t["columns"]} <= POINT_FIELDS
        assert t["datasource"]["uid"] == "ldp-api"
