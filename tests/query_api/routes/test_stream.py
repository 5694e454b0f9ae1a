"""The live paths over a real HTTP server: SSE updates and the dashboard in Chromium."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

import ldpcore
from ldpcore.collection import CollectionSpec
from ldpstream.storage import load_state
from producer.demo import demo_collections
from producer.sdk import Client
from producer.simulate import simulate

from ...integration.helpers import wait_for
from ..conftest import ADMIN

pytestmark = [pytest.mark.integration, pytest.mark.any_broker]  # tests the API, not the broker

ARTIFACTS = Path(os.environ.get("LDP_ARTIFACTS", Path(__file__).resolve().parents[3]
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


def _driver(found: tuple[str, str]) -> Any:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = found[0]
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                "--disable-gpu", "--window-size=1280,1100"):
        opts.add_argument(arg)
    return webdriver.Chrome(service=Service(found[1]), options=opts)


def _need_chrome() -> tuple[str, str]:
    found = _chrome()
    if found is None:
        pytest.fail("chromium and chromium-driver are missing: scripts/system-deps.sh "
                    "installs them")
    return found


@pytest.mark.browser
def test_dashboard_pick_a_collection_change_the_range_and_hover_in_chromium(
        api_server: str, pipeline: dict[str, Any]) -> None:
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    driver = _driver(_need_chrome())

    def ready(d: Any) -> bool:
        return bool(d.execute_script("return document.body.dataset.ready === '1'"))

    def pick(cid: str) -> None:
        next(li for li in driver.find_elements(By.CSS_SELECTOR, "#collections li")
             if li.get_attribute("data-id") == cid).click()
        WebDriverWait(driver, 30).until(
            lambda d: d.find_element(By.ID, "cid").text == cid and ready(d))

    def hover(element: Any) -> str:
        ActionChains(driver).move_to_element(element).perform()
        tip = driver.find_element(By.ID, "tip")
        WebDriverWait(driver, 5).until(lambda d: tip.is_displayed())
        return str(tip.text)

    try:
        driver.get(api_server + "/?live=1")
        wait = WebDriverWait(driver, 30)
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#collections li"))
        pick("os")
        wait.until(lambda d: d.find_element(By.ID, "n").get_attribute("data-n"))
        n0 = int(driver.find_element(By.ID, "n").get_attribute("data-n") or 0)
        assert n0 >= 30_000
        assert driver.find_element(By.ID, "mech").text == "grr"
        assert driver.find_element(By.ID, "desc").text == "operating system"
        assert "all 5 values" in driver.find_element(By.ID, "nowTitle").text
        bars = driver.find_elements(By.CSS_SELECTOR, "#chart rect.bar")
        assert len(bars) == 5 and len(driver.find_elements(By.CSS_SELECTOR, "#chart line.ci")) == 5
        # Hover a bar: its label, estimate, interval, n and method.
        text = hover(bars[0])
        assert text.startswith(bars[0].get_attribute("data-label") + ": ")
        assert "95 % interval" in text and f"n = {n0:,} reports" in text
        named = "|".join(ldpcore.POSTPROCESS_METHODS)
        assert re.search(rf"method: ({named})\b", text), text
        # The history: one point per window (the fixtures' windows are 1 h long).
        points = driver.find_elements(By.CSS_SELECTOR, "#history circle.pt")
        assert points and {p.get_attribute("data-series") for p in points} >= {"linux"}
        text = hover(points[-1])
        assert "interval" in text and "n = " in text and "method: " in text
        assert " – " in text.splitlines()[0]  # the bucket's span, with its date
        # Change the range: the page asks /series for the new range and marks it.
        before = driver.execute_script("return performance.getEntriesByType('resource')"
                                       ".length")
        driver.find_element(By.CSS_SELECTOR, '#ranges button[data-range="7d"]').click()
        wait.until(lambda d: d.current_url.endswith("#os/7d") and ready(d))
        urls = driver.execute_script(
            "return performance.getEntriesByType('resource').slice(arguments[0])"
            ".map(e => e.name)", before)
        series = [u for u in urls if "/series?" in u]
        assert series, urls
        since = int(series[-1].split("since=")[1].split("&")[0])
        assert abs(since - (time.time() - 7 * 86400)) < 2 * 3600
        assert "one point per 3 h" in driver.find_element(By.ID, "rangeinfo").text
        assert driver.find_element(
            By.CSS_SELECTOR, "#ranges button.active").get_attribute("data-range") == "7d"
        # Live: new reports re-render the page (over the event stream).
        driver.find_element(By.CSS_SELECTOR, '#ranges button[data-range="1h"]').click()
        wait.until(lambda d: d.current_url.endswith("#os/1h") and ready(d))
        publish_more(pipeline, "os", 3_000, seed=123)
        WebDriverWait(driver, 60).until(
            lambda d: int(d.find_element(By.ID, "n").get_attribute("data-n") or 0) > n0)
        assert driver.find_element(By.ID, "conn").text == "live"
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(ARTIFACTS / "dashboard.png"))
        # A range collection: CDF with its band, quantiles, a point's tooltip.
        pick("latency")
        assert driver.find_elements(By.CSS_SELECTOR, "#chart polyline.line")
        assert driver.find_elements(By.CSS_SELECTOR, "#chart polygon.cdfband")
        # The CDF line stays inside the plot area (clipped there, values clamped to [0, 1]).
        assert driver.execute_script("""
            const l = document.querySelector('#chart polyline.line').getBBox();
            const c = document.querySelector('#chart clipPath rect').getBBox();
            return l.y >= c.y - 0.5 && l.y + l.height <= c.y + c.height + 0.5 &&
                   l.x >= c.x - 0.5 && l.x + l.width <= c.x + c.width + 0.5;""")
        assert "median" in driver.find_element(By.ID, "quantiles").text
        text = hover(driver.find_elements(By.CSS_SELECTOR, "#chart circle.pt")[5])
        assert "95 % interval" in text and "method: unbiased range query" in text
        assert "Median" in driver.find_element(By.ID, "histTitle").text
        driver.save_screenshot(str(ARTIFACTS / "dashboard-range.png"))
        # A numeric collection: its mean with the interval, and the mean over time.
        pick("session")
        big = driver.find_element(By.ID, "big").text
        assert big.startswith("mean ") and "95 % interval" in big
        text = hover(driver.find_elements(By.CSS_SELECTOR, "#history circle.pt")[-1])
        assert "mean:" in text and "interval" in text and "method: unbiased" in text
        driver.save_screenshot(str(ARTIFACTS / "dashboard-numeric.png"))
        # A heavy-hitter collection: the values found, cut-off stated.
        pick("urls")
        assert len(driver.find_elements(By.CSS_SELECTOR, "#chart rect.bar")) >= 5
        assert "top" in driver.find_element(By.ID, "nowTitle").text
        # Below the minimum: the page says what it waits for.
        pick("apps")
        assert "Waiting for reports" in driver.find_element(By.ID, "status").text
    finally:
        driver.quit()


@pytest.mark.browser
def test_emoji_labels_are_drawn_as_emoji_and_the_cut_off_is_stated(
        api_server: str, pipeline: dict[str, Any]) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    spec = next(s for s, _ in demo_collections() if s["id"] == "emoji")
    spec = {**spec, "id": "emoji-ui", "min_reports": 1000}
    r = httpx.post(f"{api_server}/v1/collections", json=spec, timeout=10,
                    headers={"Authorization": f"Bearer {ADMIN}"})
    assert r.status_code in (200, 201), r.text
    cs = CollectionSpec.from_dict(spec)
    with Client(pipeline["kafka"].bootstrap, pipeline["names"]["topic"]) as producer:
        simulate(cs, lambda b: producer.send(cs, b), dist="zipf:1.2", reports=6_000,
                 batch_sizes=[2000], seed=5)
    # A snapshot page never refreshes: load it only once every report is counted.
    import redis

    with redis.Redis.from_url(pipeline["redis_url"]) as client:
        wait_for(lambda: load_state(client, cs, prefix=pipeline["names"]["prefix"]).n
                 >= 6_000, 90, "the emoji reports counted", interval=0.3)
    driver = _driver(_need_chrome())
    try:
        driver.get(api_server + "/?static=1#emoji-ui/1h")
        WebDriverWait(driver, 60).until(
            lambda d: d.execute_script("return document.body.dataset.ready === '1'")
            and d.find_elements(By.CSS_SELECTOR, "#chart rect.bar"))
        title = driver.find_element(By.ID, "nowTitle").text
        assert "top 40 of 845 values shown" in title
        labels = [t.text for t in driver.find_elements(By.CSS_SELECTOR, "#chart text.label")]
        assert labels[0] == "\U0001F602"  # 1F602, face with tears of joy (the most frequent)
        assert not any(re.match(r"^[0-9A-F]{4}", x) for x in labels)  # no hex codes
        assert driver.find_element(By.ID, "conn").text == "snapshot (not live)"
        streams = driver.execute_script(
            "return performance.getEntriesByType('resource').filter("
            "e => e.name.includes('/stream')).length")
        assert streams == 0
    finally:
        driver.quit()


@pytest.mark.browser
def test_a_headless_screenshot_of_the_dashboard_terminates(api_server: str,
                                                            tmp_path: Path) -> None:
    """``chromium --headless --virtual-time-budget`` finishes: no stream keeps it waiting."""
    found = _need_chrome()
    out = tmp_path / "shot.png"
    subprocess.run([found[0], "--headless", "--no-sandbox", "--disable-gpu",
                    f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1200,900",
                    "--virtual-time-budget=5000", f"--screenshot={out}", api_server + "/"],
                   check=True, timeout=60, capture_output=True)
    assert out.stat().st_size > 10_000
