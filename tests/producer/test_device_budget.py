"""The Python SDK's Device keeps a daily privacy ledger over every collection, in its store
(shared by the store's Devices, changed with the cadence), and does not report beyond the
fleet's budget."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ldpcore.budget import DailyLedger, epsilon_per_report
from ldpcore.collection import CollectionSpec
from producer.sdk import Device
from producer.store import FileStore, MemoryStore

DAY = 20_000 * 86_400.0  # a UTC midnight


def spec(cid: str, memo: str, eps: float, **extra: object) -> CollectionSpec:
    return CollectionSpec.from_dict({"id": cid, "oracle": {"mechanism": "grr", "epsilon": eps},
                                     "domain": {"kind": "categories", "labels": list("abcd")},
                                     "memoization": memo, "window_seconds": 3600, **extra})


def test_fresh_answers_stop_at_the_budget_and_the_next_utc_day_starts_afresh() -> None:
    dev = Device(spec("fresh", "none", 1.0), test_only_rng=1, budget=2.5)
    sent = [dev.message("a", now=DAY + h * 3600) is not None for h in range(5)]
    assert sent == [True, True, False, False, False]  # 1 + 1, then 3 > 2.5
    assert dev.ledger is not None and dev.ledger.spent(DAY) == 2.0
    assert dev.message("a", now=DAY + 86_400) is not None  # a new day


def test_a_memoized_answer_repeats_for_free_and_a_new_value_costs_epsilon() -> None:
    dev = Device(spec("memo", "permanent", 1.5), test_only_rng=2, budget=2.0)
    assert dev.cost("a") == 1.5
    assert dev.message("a", now=DAY) is not None
    assert dev.cost("a") == 0.0
    for h in range(1, 6):  # the same value every hour: free
        assert dev.message("a", now=DAY + h * 3600) is not None
    assert dev.message("b", now=DAY + 6 * 3600) is None  # a new draw: 3.0 > 2.0
    assert dev.message("a", now=DAY + 7 * 3600) is not None


def test_two_level_reports_cost_epsilon_report_until_the_values_epsilon_inf() -> None:
    s = spec("two", "two-level", 2.0, epsilon_1=1.0)
    er = epsilon_per_report(s)
    dev = Device(s, test_only_rng=3, budget=10.0)
    costs = []
    for h in range(8):
        costs.append(dev.cost("c"))
        assert dev.message("c", now=DAY + h * 3600) is not None
    assert costs[0] == pytest.approx(er) and sum(costs) == pytest.approx(2.0)
    assert costs[-1] == 0.0


def test_collections_share_one_ledger_through_the_store_and_it_survives_a_restart(
        tmp_path: Path) -> None:
    memo = tmp_path / "store.json"
    a = Device(spec("col-a", "none", 1.0), test_only_rng=4, memo_path=memo, budget=3.0)
    b = Device(spec("col-b", "none", 1.5), test_only_rng=5, memo_path=memo, budget=3.0)
    assert a.message("a", now=DAY) is not None  # 1.0
    assert b.message("a", now=DAY) is not None  # 2.5
    assert a.message("a", now=DAY + 3600) is None  # 3.5 > 3: b's spend is seen
    doc = json.loads(memo.read_text())
    assert doc["ledger"]["budget"] == 3.0
    assert doc["ledger"]["days"][str(int(DAY // 86_400))] == {"col-a": 1.0, "col-b": 1.5}
    again = Device(spec("col-a", "none", 1.0), test_only_rng=6, memo_path=memo)  # restart
    assert again.ledger is not None and again.ledger.spent(DAY) == 2.5
    assert again.message("a", now=DAY + 7200) is None
    assert again.message("a", now=DAY + 86_400) is not None


def test_a_shared_ledger_object_and_no_budget() -> None:
    ledger = DailyLedger(1.0)
    # devices on different stores (say, two apps of one user) sharing one ledger object
    a = Device(spec("x", "none", 1.0), store=MemoryStore(), test_only_rng=7, ledger=ledger)
    b = Device(spec("y", "none", 1.0), store=MemoryStore(), test_only_rng=8, ledger=ledger)
    assert a.message("a", now=DAY) is not None and b.message("a", now=DAY) is None
    free = Device(spec("z", "none", 1.0), store=MemoryStore(), test_only_rng=9)  # no budget
    assert free.ledger is None
    assert all(free.message("a", now=DAY + h * 3600) is not None for h in range(30))


def test_a_bad_ledger_in_the_store_is_a_clear_error(tmp_path: Path) -> None:
    memo = tmp_path / "store.json"
    memo.write_text(json.dumps({"format": "ldpstream-device-store", "version": 1,
                                "collections": {}, "ledger": {"days": {"x": 1}}}))
    with pytest.raises(ValueError, match="bad ledger"):
        Device(spec("q", "none", 1.0), memo_path=memo).message("a", now=DAY)


def test_the_store_names_no_value_and_devices_racing_on_one_store_share_the_budget(
        tmp_path: Path) -> None:
    import threading

    path = tmp_path / "store.json"
    s = spec("race", "permanent", 1.0)
    Device(s, store=FileStore(path), budget=2.5).message("c", now=DAY)  # 1.0 spent
    results: list[bool] = []

    def go(i: int) -> None:  # 8 threads, 8 other values: only one more fits (2.0 <= 2.5)
        d = Device(spec(f"r{i}", "permanent", 1.0), store=FileStore(path), budget=2.5)
        results.append(d.message("abcd"[i % 4], now=DAY) is not None)

    threads = [threading.Thread(target=go, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sum(results) == 1
    doc = json.loads(path.read_text())
    entry = doc["collections"][s.fingerprint]
    assert list(entry["reports"].values()) == [1] and "2" not in entry["reports"]
    assert all(len(tag) == 32 for tag in entry["reports"])  # a keyed hash, not the index
