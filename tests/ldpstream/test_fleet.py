"""The fleet policy in a collections file and in the Redis catalogue (ldpstream.fleet)."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from ldpcore.budget import BudgetError, FleetBudget
from ldpstream.collections_file import read_catalogue_file, register_catalogue_file
from ldpstream.fleet import read_budget
from ldpstream.storage import CollectionCatalogue

ROOT = Path(__file__).resolve().parents[2]


def spec(cid: str, eps: float) -> dict[str, Any]:
    return {"id": cid, "oracle": {"mechanism": "grr", "epsilon": eps},
            "domain": {"kind": "categories", "labels": ["a", "b"]}}


def write(tmp_path: Path, doc: Any, name: str = "c.yaml") -> Path:
    import yaml

    path = tmp_path / name
    path.write_text(yaml.safe_dump(doc))
    return path


def test_a_file_states_the_budget_beside_its_collections(tmp_path: Path) -> None:
    cat = read_catalogue_file(write(tmp_path, {"budget": {"epsilon_per_day": 8},
                                               "collections": [spec("a", 2.0)]}))
    assert cat.budget == FleetBudget(8.0) and [s.id for s in cat.specs] == ["a"]
    assert read_catalogue_file(write(tmp_path, {"collections": []})).budget is None
    assert read_catalogue_file(write(tmp_path, {"budget": None, "collections": []})
                               ).budget == FleetBudget()


def test_a_file_whose_collection_exceeds_its_budget_is_refused_naming_both(
        tmp_path: Path) -> None:
    path = write(tmp_path, {"budget": {"epsilon_per_day": 4},
                            "collections": [spec("ok", 1.0), spec("greedy", 6.0)]})
    with pytest.raises(BudgetError, match="oracle.epsilon 6 of collection 'greedy'.*= 4"):
        read_catalogue_file(path)


def test_the_aggregator_refuses_to_start_on_such_a_file_and_says_why(tmp_path: Path) -> None:
    path = write(tmp_path, {"budget": {"epsilon_per_day": 4},
                            "collections": [spec("greedy", 6.0)]})
    out = subprocess.run([sys.executable, "-m", "aggregator"], cwd=ROOT, timeout=60,
                         env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT),
                              "LDP_COLLECTIONS_FILE": str(path),
                              "LDP_REDIS_URL": "redis://127.0.0.1:1/0"},
                         capture_output=True, text=True)
    assert out.returncode == 2, out.stderr[-2000:]
    assert "LDP_COLLECTIONS_FILE" in out.stderr and "budget.epsilon_per_day = 4" in out.stderr


@pytest.mark.integration
@pytest.mark.any_broker
def test_registering_a_file_stores_the_budget_and_checks_what_is_registered(
        redis_server: Any, tmp_path: Path) -> None:
    import redis

    r = redis.Redis.from_url(redis_server.url)
    prefix = f"fp{uuid.uuid4().hex[:8]}:"
    try:
        register_catalogue_file(r, prefix, write(tmp_path, {
            "budget": {"epsilon_per_day": 8}, "collections": [spec("a", 5.0)]}, "one.yaml"))
        assert read_budget(r, prefix) == FleetBudget(8.0)
        assert json.loads(r.get(f"{prefix}fleet"))["budget"]["epsilon_per_day"] == 8.0
        # a later file without a budget is checked against the stored one
        with pytest.raises(BudgetError, match="'b'"):
            register_catalogue_file(r, prefix, write(tmp_path, {
                "collections": [spec("b", 9.0)]}, "two.yaml"))
        # a budget below a registered collection's one report is refused, nothing written
        with pytest.raises(BudgetError, match="'a'"):
            register_catalogue_file(r, prefix, write(tmp_path, {
                "budget": {"epsilon_per_day": 4}, "collections": []}, "three.yaml"))
        assert read_budget(r, prefix) == FleetBudget(8.0)
        assert set(CollectionCatalogue(r, prefix).all()) == {"a"}
    finally:
        r.close()
