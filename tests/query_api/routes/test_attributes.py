"""A multi-attribute collection end to end: simulated devices → tansu → the real worker →
Redis → the per-attribute routes (``/v1/collections/{cid}/attributes[/{name}/…]``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient
from prometheus_client import CollectorRegistry

from ldpcore.collection import CollectionSpec
from ldpstream.storage import load_state
from producer.sdk import Client
from producer.simulate import simulate, truth_by_attribute
from query_api.app import create_app
from query_api.config import ApiSettings

from ...integration.helpers import counting_worker, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.any_broker]

N = 30_000
PROFILE = {"id": "profile", "description": "os, apps installed, age",
           "oracle": {"mechanism": "multi", "epsilon": 2.0, "attributes": {"apps": "oue"},
                      "pairs": [["os", "apps"]]},
           "domain": {"kind": "attributes", "attributes": [
               {"name": "os", "kind": "categories", "labels": ["linux", "mac", "win", "bsd"]},
               {"name": "apps", "kind": "integers", "low": 0, "high": 9},
               {"name": "age", "kind": "interval", "low": 0, "high": 100, "bins": 20}]},
           "min_reports": 1000}
PLAIN = {"id": "plain", "oracle": {"mechanism": "grr", "epsilon": 1.0},
         "domain": {"kind": "categories", "labels": ["a", "b"]}, "min_reports": 1}


@pytest.fixture(scope="module")
def run(kafka: Any, redis_server: Any, tmp_path_factory: pytest.TempPathFactory
        ) -> Iterator[dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("attrs")
    spec = CollectionSpec.from_dict(PROFILE)
    with counting_worker(kafka, redis_server, tmp, [PROFILE, PLAIN], "attr") as (
            names, _, store):
        with Client(kafka.bootstrap, names["topic"]) as producer:
            res = simulate(spec, lambda b: producer.send(spec, b), dist="zipf:1.2",
                           reports=N, batch_sizes=[700], seed=11)
        wait_for(lambda: load_state(store, spec, prefix=names["prefix"]).n >= N, 90,
                 "reports counted", interval=0.3)
        settings = ApiSettings(redis_url=redis_server.url, redis_prefix=names["prefix"])
        with TestClient(create_app(settings, registry=CollectorRegistry())) as client:
            yield {"spec": spec, "result": res, "client": client, "tmp": tmp,
                   "redis_url": redis_server.url, "prefix": names["prefix"],
                   "state": load_state(store, spec, prefix=names["prefix"])}


def test_the_worker_counts_every_report_exactly_once(run: dict[str, Any]) -> None:
    assert run["state"] == run["result"].state  # additive state: same reports, same counts


def test_the_attribute_list_names_each_oracle_and_its_reports(run: dict[str, Any]) -> None:
    body = run["client"].get("/v1/collections/profile/attributes").json()
    rows = {a["name"]: a for a in body["attributes"]}
    assert list(rows) == ["os", "apps", "age", "os*apps"] and body["sample"] == 1
    assert rows["apps"]["mechanism"] == "oue" and rows["age"]["mechanism"] == "pm"
    assert rows["os"]["epsilon"] == 2.0 and "frequencies" in rows["os"]["queries"]
    assert rows["age"]["queries"] == ["mean"]
    assert sum(a["n"] for a in rows.values()) == N
    listed = run["client"].get("/v1/collections/profile").json()
    assert "attributes" in listed["queries"]
    # what producer.sdk.fetch_spec rebuilds a device's spec from
    assert CollectionSpec.from_dict(listed["spec"]).fingerprint == run["spec"].fingerprint


@pytest.mark.parametrize("name", ["os", "apps"])
def test_per_attribute_frequencies_have_intervals_around_the_truth(run: dict[str, Any],
                                                                   name: str) -> None:
    r = run["client"].get(f"/v1/collections/profile/attributes/{name}/frequencies",
                          params={"method": "base"})
    assert r.status_code == 200, r.text
    body = r.json()
    truth = truth_by_attribute(run["spec"], run["result"].truth)[name] / N
    assert body["attribute"] == name and body["n_total"] == N
    assert 0 < body["n_effective"] <= body["n_attribute"] < N
    for row, f in zip(body["estimates"], truth, strict=True):
        assert row["ci_low"] < row["estimate"] < row["ci_high"]
        assert abs(row["estimate"] - f) <= 4 * row["std_error"], (row, f)
    if name == "os":
        assert [row["label"] for row in body["estimates"]] == ["linux", "mac", "win", "bsd"]


def test_a_declared_pair_answers_its_two_way_marginal(run: dict[str, Any]) -> None:
    r = run["client"].get("/v1/collections/profile/attributes/os*apps/frequencies",
                          params={"method": "base"})
    assert r.status_code == 200, r.text
    body = r.json()
    rows = body["estimates"]
    assert len(rows) == 40 and rows[0]["label"] == "linux & 0" and rows[-1]["label"] == "bsd & 9"
    assert body["sum"] == pytest.approx(1.0, abs=0.05)
    assert all(row["ci_low"] < row["estimate"] < row["ci_high"] for row in rows)
    # the marginal of the pair agrees with the attribute's own estimate (both unbiased)
    os_rows = run["client"].get("/v1/collections/profile/attributes/os/frequencies",
                                params={"method": "base"}).json()["estimates"]
    for i, row in enumerate(os_rows):
        summed = sum(r["estimate"] for r in rows[10 * i:10 * i + 10])
        se = np.hypot(row["std_error"], np.sqrt(sum(r["std_error"] ** 2
                                                     for r in rows[10 * i:10 * i + 10])))
        assert abs(summed - row["estimate"]) <= 4 * se


def test_a_numeric_attribute_answers_its_mean_with_an_interval(run: dict[str, Any]) -> None:
    body = run["client"].get("/v1/collections/profile/attributes/age/mean").json()
    counts = truth_by_attribute(run["spec"], run["result"].truth)["age"]
    centres = 2.5 + 5 * np.arange(20)
    true_mean = float(counts @ centres / counts.sum())
    assert body["attribute_mechanism"] == "pm" and body["attribute_epsilon"] == 2.0
    assert abs(body["estimate"] - true_mean) <= 4 * body["std_error"]
    assert body["ci_low"] < body["estimate"] < body["ci_high"]


def test_questions_an_attribute_cannot_answer_are_clear_errors(run: dict[str, Any]) -> None:
    c = run["client"]
    r = c.get("/v1/collections/profile/attributes/height/frequencies")
    assert r.status_code == 404 and "'os', 'apps', 'age'" in r.json()["error"]["message"]
    r = c.get("/v1/collections/profile/attributes/age/frequencies")
    assert r.status_code == 409 and "/mean" in r.json()["error"]["message"]
    r = c.get("/v1/collections/profile/frequencies")
    assert r.status_code == 409 and "/attributes" in r.json()["error"]["message"]
    r = c.get("/v1/collections/plain/attributes")
    assert r.status_code == 409 and "multi" in r.json()["error"]["message"]


@pytest.mark.browser
def test_the_dashboard_shows_each_attribute_in_chromium(run: dict[str, Any]) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    from ..conftest import serving_api
    from .test_stream import ARTIFACTS, _driver, _need_chrome

    found = _need_chrome()
    with serving_api(run["redis_url"], run["prefix"], Path(run["tmp"]) / "api.log") as port:
        driver = _driver(found)
        try:
            driver.get(f"http://127.0.0.1:{port}/#profile/24h")

            def ready(d: Any) -> bool:
                return bool(d.execute_script("return document.body.dataset.ready === '1'"))

            wait = WebDriverWait(driver, 30)
            wait.until(lambda d: d.find_element(By.ID, "cid").text == "profile" and ready(d)
                       and d.find_elements(By.CSS_SELECTOR, "#attrs button"))
            buttons = driver.find_elements(By.CSS_SELECTOR, "#attrs button")
            assert [b.text for b in buttons] == ["os", "apps", "age", "os*apps"]
            assert "3 attributes: os, apps, age" in driver.find_element(By.ID, "domain").text
            assert len(driver.find_elements(By.CSS_SELECTOR, "#chart rect.bar")) == 4
            assert len(driver.find_elements(By.CSS_SELECTOR, "#chart line.ci")) == 4
            assert 'answered "os"' in driver.find_element(By.ID, "nowNote").text
            ARTIFACTS.mkdir(parents=True, exist_ok=True)
            driver.save_screenshot(str(ARTIFACTS / "dashboard-attributes.png"))
            buttons[2].click()
            wait.until(lambda d: ready(d) and d.find_element(By.ID, "big").is_displayed())
            big = driver.find_element(By.ID, "big").text
            assert big.startswith("age: mean ") and "95 % interval" in big
            assert driver.find_element(By.ID, "status").text == ""
        finally:
            driver.quit()
