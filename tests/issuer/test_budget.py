"""The issuer does not issue tokens beyond a device's daily ε budget (the fleet policy)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ldpcore.budget import FleetBudget
from ldpcore.collection import CollectionSpec
from ldpstream.fleet import write_budget
from ldpstream.privacypass.client import IssuanceRefused, IssuerClient, device_credential

from .conftest import IssuerProcess, issuer_env, register

pytestmark = pytest.mark.integration

FLEET_KEY = "fleet-secret-key-2"
# fresh answers every report (memoization none): each token costs ε = 1.5
FRESH = CollectionSpec.from_dict({
    "id": "bud-fresh", "oracle": {"mechanism": "grr", "epsilon": 1.5},
    "domain": {"kind": "categories", "labels": ["a", "b"]}, "memoization": "none",
    "window_seconds": 86_400, "quota": {"reports_per_window": 2}})
# permanent memoization: only the first token of the day costs ε = 1
MEMO = CollectionSpec.from_dict({
    "id": "bud-memo", "oracle": {"mechanism": "grr", "epsilon": 1.0},
    "domain": {"kind": "categories", "labels": ["a", "b"]}, "window_seconds": 86_400,
    "quota": {"reports_per_window": 2}})


def test_tokens_stop_at_the_daily_budget_and_memoized_repeats_cost_nothing(
        redis_server: Any, redis_client: Any, ldp_names: dict[str, str],
        tmp_path: Path) -> None:
    register(redis_client, ldp_names["prefix"], FRESH, MEMO)
    write_budget(redis_client, FleetBudget(4.0), ldp_names["prefix"])
    proc = IssuerProcess(issuer_env(redis_server, ldp_names,
                                    LDP_ISSUER_KEYS=f"app:{FLEET_KEY}"),
                         tmp_path / "issuer.log").start()
    try:
        device = IssuerClient(proc.url, device_credential(b"budget-device-01"),
                              fleet_key=FLEET_KEY)
        w = device.window_now(86_400)
        assert len(device.tokens(MEMO.id, w, 2)) == 2  # ε 1, then 0: spent 1
        assert len(device.tokens(FRESH.id, w, 2)) == 2  # 1.5 each: spent 4
        with pytest.raises(IssuanceRefused) as exc:  # 5.5 > 4
            device.tokens(FRESH.id, w + 86_400, 1)
        assert (exc.value.status, exc.value.reason) == (429, "budget")
        assert len(device.tokens(MEMO.id, w + 86_400, 2)) == 2  # repeats of the day: free
        # another device has its own day
        other = IssuerClient(proc.url, device_credential(b"budget-device-02"),
                             fleet_key=FLEET_KEY)
        assert len(other.tokens(FRESH.id, w, 2)) == 2
        # without a budget nothing is counted
        write_budget(redis_client, FleetBudget(), ldp_names["prefix"])
        import time

        time.sleep(1.2)  # the issuer re-reads the policy every second
        assert len(device.tokens(FRESH.id, w + 86_400, 2)) == 2
    finally:
        proc.stop()
