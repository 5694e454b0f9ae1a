"""The live paths over a real HTTP server: SSE updates and the dashboard in Chromium."""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from producer.sdk import Client
from producer.simulate import simulate

pytestmark = [pytest.mark.integration, pytest.mark.any_broker]  # tests the API, not the broker

ARTIFACTS = Path(os.environ.get("LDP_ARTIFACTS", Path(__file__).resolve().parents[2]
                                / "artifacts"))


def sse_events(resp: httpx.Response, ids: list[str] | None = None
               ) -> Iterator[tuple[str, dict[str, Any]]]:
    event, data = "message", ""
    for line in resp.iter_lines():
        if line.startswith("id:") and ids is not None:
            ids.append(line[3:].strip())
        elif line.startswith("event:"):
            event = line[6:].strip()
        elif line.startswith("data:"):
            data += line[5:].strip()
        elif line == "" and data:
            yield event, json.loads(data)
            event, data = "message", ""


def publish_more(pipeline: dict[str, Any], cid: str, reports: int, seed: int) -> None:
    spec = pipeline["specs"][cid]
    with Client(pipeline["kafka"].bootstrap, pipeline["names"]["topic"]) as producer:
        simulate(spec, lambda b: producer.send(spec, b), dist="zipf:1.5", reports=reports,
                 batch_sizes=[500], seed=seed)


def test_stream_pushes_fresh_estimates_when_reports_arrive(
        api_server: str, pipeline: dict[str, Any]) -> None:
    with httpx.Client(timeout=30) as http, http.stream(
            "GET", f"{api_server}/v1/collections/os/stream?method=norm-sub") as resp:
        assert resp.status_code == 200
        assert resp.headers["content-type"].startswith("text/event-stream")
        events = sse_events(resp)
        kind, first = next(events)
        assert kind == "estimates" and first["method"] == "norm-sub"
        n0 = first["n"]
        publish_more(pipeline, "os", 2_000, seed=99)
        deadline = time.monotonic() + 60
        for kind, body in events:
            assert kind == "estimates"
            assert body["state_version"] != first["state_version"]
            if body["n"] >= n0 + 2_000:
                break
            assert time.monotonic() < deadline, "no update with the new reports"
        assert sum(r["estimate"] for r in body["estimates"]) == pytest.approx(1.0)


def test_stream_events_carry_ids_and_resume_after_last_event_id(
        api_server: str, pipeline: dict[str, Any]) -> None:
    url = f"{api_server}/v1/collections/os/stream?method=norm-sub"
    ids: list[str] = []
    with httpx.Client(timeout=30) as http, http.stream("GET", url) as resp:
        kind, first = next(sse_events(resp, ids))
    assert kind == "estimates" and ids == [first["state_version"]]
    # Reconnecting with that id: nothing new until the state changes (read times out).
    with httpx.Client(timeout=httpx.Timeout(10, read=2.5)) as http, http.stream(
            "GET", url, headers={"Last-Event-ID": ids[0]}) as resp:
        assert resp.status_code == 200
        with pytest.raises(httpx.ReadTimeout):
            for kind, _ in sse_events(resp):
                raise AssertionError(f"unexpected {kind} event for an unchanged state")


def test_stream_of_a_collection_below_its_minimum_says_it_is_waiting(
        api_server: str) -> None:
    with httpx.Client(timeout=30) as http, http.stream(
            "GET", f"{api_server}/v1/collections/apps/stream") as resp:
        kind, body = next(sse_events(resp))
        assert kind == "waiting" and body["need"] == 10_000_000 and body["have"] >= 5_000


@pytest.mark.parametrize(("cid", "has_cdf"), [("session", True), ("load", False)])
def test_stream_of_a_numeric_collection_carries_its_mean(
        api_server: str, cid: str, has_cdf: bool) -> None:
    with httpx.Client(timeout=30) as http, http.stream(
            "GET", f"{api_server}/v1/collections/{cid}/stream") as resp:
        kind, body = next(sse_events(resp))
        assert kind == "estimates"
        mean = body["mean"]
        assert mean["ci_low"] < mean["estimate"] < mean["ci_high"]
        assert ("cdf" in body) is has_cdf
        if has_cdf:
            assert body["method"] == "ems" and body["cdf"][-1] == pytest.approx(1.0)


def test_stream_of_a_heavy_hitter_collection_lists_its_top_values(api_server: str) -> None:
    with httpx.Client(timeout=30) as http, http.stream(
            "GET", f"{api_server}/v1/collections/urls/stream?top=5") as resp:
        kind, body = next(sse_events(resp))
        assert kind == "estimates" and body["method"] == "pem"
        rows = body["estimates"]
        assert len(rows) == 5 and all(int(r["label"]) >= 1000 for r in rows)
        assert [r["estimate"] for r in rows] == sorted((r["estimate"] for r in rows),
                                                        reverse=True)


def test_stream_rejects_bad_parameters_before_streaming(api_server: str) -> None:
    r = httpx.get(f"{api_server}/v1/collections/os/stream?method=bogus", timeout=10)
    assert r.status_code == 400 and r.json()["error"]["parameter"] == "method"


def _chrome() -> tuple[str, str] | None:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    return (browser, driver) if browser and driver else None


@pytest.mark.browser
def test_dashboard_shows_a_collection_and_its_numbers_change_in_chromium(
        api_server: str, pipeline: dict[str, Any]) -> None:
    found = _chrome()
    if found is None:
        pytest.fail("chromium and chromium-driver are missing: scripts/system-deps.sh "
                    "installs them")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    opts = webdriver.ChromeOptions()
    opts.binary_location = found[0]
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                "--disable-gpu", "--window-size=1280,800"):
        opts.add_argument(arg)
    driver = webdriver.Chrome(service=Service(found[1]), options=opts)
    try:
        driver.get(api_server + "/")
        wait = WebDriverWait(driver, 30)
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#collections li"))
        items = driver.find_elements(By.CSS_SELECTOR, "#collections li")
        os_item = next(li for li in items if li.get_attribute("data-id") == "os")
        os_item.click()
        wait.until(lambda d: d.find_element(By.ID, "n").get_attribute("data-n"))
        n0 = int(driver.find_element(By.ID, "n").get_attribute("data-n") or 0)
        assert n0 >= 30_000
        assert driver.find_element(By.ID, "mech").text == "grr"
        assert len(driver.find_elements(By.CSS_SELECTOR, "#chart rect.bar")) == 5
        assert len(driver.find_elements(By.CSS_SELECTOR, "#chart line.ci")) == 5
        publish_more(pipeline, "os", 3_000, seed=123)
        WebDriverWait(driver, 60).until(
            lambda d: int(d.find_element(By.ID, "n").get_attribute("data-n") or 0) > n0)
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(ARTIFACTS / "dashboard.png"))
        # The range collection draws a CDF with its confidence band.
        next(li for li in driver.find_elements(By.CSS_SELECTOR, "#collections li")
             if li.get_attribute("data-id") == "latency").click()
        WebDriverWait(driver, 30).until(
            lambda d: d.find_elements(By.CSS_SELECTOR, "#chart polyline.line"))
        assert driver.find_elements(By.CSS_SELECTOR, "#chart polygon.band")
        driver.save_screenshot(str(ARTIFACTS / "dashboard-range.png"))
        # The numeric collection draws its EMS CDF and states the mean with its interval.
        next(li for li in driver.find_elements(By.CSS_SELECTOR, "#collections li")
             if li.get_attribute("data-id") == "session").click()
        WebDriverWait(driver, 30).until(
            lambda d: "mean " in d.find_element(By.ID, "status").text)
        assert driver.find_elements(By.CSS_SELECTOR, "#chart polyline.line")
        assert "±" in driver.find_element(By.ID, "status").text
        driver.save_screenshot(str(ARTIFACTS / "dashboard-numeric.png"))
    finally:
        driver.quit()
