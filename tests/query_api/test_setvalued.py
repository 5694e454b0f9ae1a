"""An SVIM group end to end: devices publish set-valued reports, the real worker counts them,
the API answers top items and serves each next phase's declaration, created via the API."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient
from prometheus_client import CollectorRegistry

from ldpcore.collection import CollectionSpec
from ldpstream.storage import load_state
from producer.sdk import Client, Device
from producer.simulate import simulate
from producer.store import MemoryStore
from query_api.app import create_app
from query_api.config import ApiSettings

from ..integration.helpers import counting_worker, wait_for
from .conftest import ADMIN

pytestmark = [pytest.mark.integration, pytest.mark.any_broker]
AUTH = {"Authorization": f"Bearer {ADMIN}"}
LABELS = [f"app{i}" for i in range(40)]
PHASE1 = {"id": "apps.candidates", "oracle": {"mechanism": "ps", "epsilon": 2.0},
          "domain": {"kind": "categories", "labels": LABELS}, "min_reports": 500,
          "protocol": {"name": "svim", "group": "apps", "phase": "candidates", "k": 4,
                       "epsilon_total": 2.0}}
REPORTS = {"candidates": 20_000, "sizes": 6_000, "frequencies": 20_000}


@pytest.fixture(scope="module")
def svim(kafka: Any, redis_server: Any, tmp_path_factory: pytest.TempPathFactory
         ) -> Iterator[dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("svim")
    with counting_worker(kafka, redis_server, tmp, [PHASE1], "sv") as (names, _, rclient):
        settings = ApiSettings(redis_url=redis_server.url, redis_prefix=names["prefix"],
                               admin_token=ADMIN)
        with (Client(kafka.bootstrap, names["topic"]) as producer,
              TestClient(create_app(settings, registry=CollectorRegistry())) as api):

            def play(spec: CollectionSpec, seed: int) -> Any:
                n = REPORTS[str(spec.protocol["phase"])]  # type: ignore[index]
                res = simulate(spec, lambda b: producer.send(spec, b), dist="zipf:1.1",
                               reports=n, batch_sizes=[500], seed=seed)
                producer.flush()
                wait_for(lambda: load_state(rclient, spec, prefix=names["prefix"]).n >= n, 90,
                         f"{spec.id} counted", interval=0.3)
                return res

            yield {"api": api, "play": play, "redis": rclient, "prefix": names["prefix"],
                   "redis_url": redis_server.url, "tmp": tmp}


def _advance(api: TestClient, cid: str) -> CollectionSpec:
    resp = api.get(f"/v1/collections/{cid}/next-phase")
    assert resp.status_code == 200, resp.text
    decl = resp.json()["next_phase"]
    created = api.post("/v1/collections", json=decl, headers=AUTH)
    assert created.status_code == 201, created.text
    return CollectionSpec.from_dict(decl)


@pytest.fixture(scope="module")
def group(svim: Any) -> dict[str, Any]:
    """The whole SVIM group, played once per module phase by phase: every test that reads a
    phase's collection depends on this, so none depends on the order the tests run in."""
    api, play = svim["api"], svim["play"]
    out: dict[str, Any] = {}
    p1 = CollectionSpec.from_dict(PHASE1)
    out["res1"] = play(p1, seed=1)
    out["stored1"] = load_state(svim["redis"], p1, prefix=svim["prefix"])
    out["top1"] = api.get("/v1/collections/apps.candidates/top-items", params={"k": 4}).json()
    out["sizes"] = sizes = _advance(api, "apps.candidates")
    play(sizes, seed=2)
    out["sz"] = api.get("/v1/collections/apps.sizes/set-sizes").json()
    out["freq"] = freq = _advance(api, "apps.sizes")
    out["res3"] = play(freq, seed=3)
    out["ans"] = api.get("/v1/collections/apps.frequencies/top-items", params={"k": 4}).json()
    return out


def test_an_svim_group_runs_phase_by_phase_through_the_worker_and_the_api(
        group: dict[str, Any]) -> None:
    # Counted exactly once: the stored state is the state of the reports sent.
    assert group["stored1"] == group["res1"].state

    top1 = group["top1"]
    assert top1["items"][0]["label"] == "app0" and top1["epsilon_per_device"] == 2.0
    assert top1["correction"] == 1.0 and top1["length"] == 1

    sizes = group["sizes"]
    assert sizes.id == "apps.sizes" and sizes.oracle_spec["mechanism"] == "setsize"
    assert len(sizes.oracle_spec["candidates"]) == 8
    sz = group["sz"]
    assert abs(sum(r["distribution"] for r in sz["sizes"]) - 1) < 1e-9
    assert 1 <= sz["quantile_size"] <= 8

    assert group["freq"].oracle_spec["length"] == sz["quantile_size"]
    ans, res3 = group["ans"], group["res3"]
    assert ans["method"] == "unbiased-truncation-corrected" and ans["correction"] >= 1.0
    assert ans["protocol"]["phase"] == "frequencies" and ans["epsilon_per_device"] == 2.0
    truth = res3.truth / res3.reports
    found = [r["index"] for r in ans["items"]]
    assert set(found) >= {0, 1}
    covered = [r["ci_low"] <= truth[r["index"]] <= r["ci_high"] for r in ans["items"]]
    assert sum(covered) >= 3, (ans["items"], truth[found])


def test_set_valued_routes_refuse_what_they_cannot_answer(svim: Any, group: Any) -> None:
    api = svim["api"]
    assert api.get("/v1/collections/apps.sizes/top-items").status_code == 409
    assert api.get("/v1/collections/apps.candidates/set-sizes").status_code == 409
    bad = api.get("/v1/collections/apps.candidates/frequencies", params={"method": "norm-sub"})
    assert bad.status_code == 400 and "sum to 1" in bad.json()["error"]["message"]
    ok = api.get("/v1/collections/apps.frequencies/frequencies").json()
    assert ok["method"] == "base"
    assert ok["sum"] > 1.2  # item fractions sum to the mean number of items held (padded to l)


def test_a_device_takes_part_in_one_phase_of_a_partitioned_group() -> None:
    specs = [CollectionSpec.from_dict(PHASE1)]
    p2 = {**PHASE1, "id": "apps.sizes", "oracle": {"mechanism": "setsize", "epsilon": 2.0,
                                                     "candidates": [0, 1, 2]},
          "protocol": {**PHASE1["protocol"], "phase": "sizes"}}  # type: ignore[dict-item]
    p3 = {**PHASE1, "id": "apps.frequencies",
          "oracle": {"mechanism": "ps", "epsilon": 2.0, "length": 2, "candidates": [0, 1, 2]},
          "protocol": {**PHASE1["protocol"], "phase": "frequencies"}}  # type: ignore[dict-item]
    specs += [CollectionSpec.from_dict(p2), CollectionSpec.from_dict(p3)]
    per_phase = np.zeros(3, int)
    for i in range(600):
        secret = i.to_bytes(16, "big")
        sent = [Device(s, store=MemoryStore(), test_only_rng=i, secret=secret)
                .message(["app0", "app2"], now=0.0) is not None
                for s in specs]
        assert sum(sent) == 1
        per_phase[sent.index(True)] += 1
    assert abs(per_phase[0] / 600 - 0.5) < 0.08 and abs(per_phase[1] / 600 - 0.1) < 0.05


@pytest.mark.browser
def test_dashboard_draws_the_set_valued_panels_in_chromium(svim: Any, group: Any) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    from .conftest import serving_api
    from .routes.test_stream import _driver, _need_chrome

    found = _need_chrome()
    with serving_api(svim["redis_url"], svim["prefix"], svim["tmp"] / "api.log") as port:
        driver = _driver(found)
        try:
            for cid, title, bars in (("apps.frequencies", "Items held by the most devices", 8),
                                     ("apps.sizes", "Set sizes", 9)):
                driver.get(f"http://127.0.0.1:{port}/?view={cid}#{cid}")  # a new page load
                WebDriverWait(driver, 30).until(
                    lambda d: d.find_element(By.ID, "cid").text == cid
                    and d.execute_script("return document.body.dataset.ready === '1'"))
                assert title in driver.find_element(By.ID, "nowTitle").text
                assert len(driver.find_elements(By.CSS_SELECTOR, "#chart rect.bar")) == bars
                note = driver.find_element(By.ID, "nowNote").text
                assert "ε per device 2 (" in note and "SVIM" in note, note
                assert driver.find_element(By.ID, "status").text == ""
        finally:
            driver.quit()
