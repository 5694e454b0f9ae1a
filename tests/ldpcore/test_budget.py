"""The fleet budget's maths: windows a day touches, daily spends, charges and the ledger."""

from __future__ import annotations

import math
from typing import Any

import pytest

from ldpcore.budget import (
    BudgetError,
    DailyLedger,
    FleetBudget,
    check_collection,
    collection_daily_spend,
    device_daily_spend,
    epsilon_per_report,
    report_charge,
    reports_per_day,
    token_charge,
    windows_per_day,
)
from ldpcore.collection import CollectionSpec
from ldpcore.longitudinal import TwoLevel


def spec(memo: str = "permanent", eps: float = 1.0, window: int = 3600, per_window: int = 1,
         **extra: Any) -> CollectionSpec:
    raw: dict[str, Any] = {"id": f"c-{memo}", "oracle": {"mechanism": "grr", "epsilon": eps},
                           "domain": {"kind": "categories", "labels": list("abcd")},
                           "memoization": memo, "window_seconds": window,
                           "reports_per_window": per_window, **extra}
    return CollectionSpec.from_dict(raw)


@pytest.mark.parametrize("w", [1, 7, 60, 300, 3600, 7000, 10_000, 86_399, 86_400, 86_401,
                               100_000, 7 * 86_400])
def test_windows_per_day_is_the_most_any_utc_day_touches(w: int) -> None:
    # enumerate every day start modulo the window (days start at multiples of 86400)
    most = 0
    for k in range(0, w // math.gcd(86_400, w) + 1):
        start = k * 86_400
        first, last = start // w, (start + 86_399) // w
        most = max(most, last - first + 1)
    assert windows_per_day(w) == most


def test_daily_spend_follows_each_memoization_policy() -> None:
    none, perm = spec("none", 1.0), spec("permanent", 1.0)
    two = spec("two-level", 4.0, epsilon_1=2.0)
    er = TwoLevel(two.oracle(), epsilon_1=2.0).epsilon_report
    assert reports_per_day(none) == 24
    assert collection_daily_spend(none) == 24.0  # fresh answers: 24 ε
    assert collection_daily_spend(perm) == 1.0  # one memoized value: ε
    assert collection_daily_spend(perm, values_per_day=3) == 3.0
    assert epsilon_per_report(two) == pytest.approx(er)
    assert collection_daily_spend(two) == pytest.approx(min(4.0, 24 * er))
    half = spec("two-level", 4.0, window=86_400, epsilon_1=2.0)  # one report a day
    assert collection_daily_spend(half) == pytest.approx(er)
    assert device_daily_spend([none, perm, two]) == pytest.approx(24 + 1 + 4.0)
    assert reports_per_day(spec("none", 1.0, window=300, per_window=2)) == 576


def test_a_collection_whose_one_report_exceeds_the_budget_is_refused_naming_the_field() -> None:
    with pytest.raises(BudgetError, match="oracle.epsilon 10") as exc:
        check_collection(spec("none", 10.0), FleetBudget(8.0))
    assert exc.value.field == "oracle.epsilon"
    # two-level: one report costs ε_report < ε∞ = 10, so it fits ...
    check_collection(spec("two-level", 10.0, epsilon_1=1.0), FleetBudget(8.0))
    # ... unless ε_report itself exceeds the budget: then ε₁ is named
    with pytest.raises(BudgetError, match="epsilon_1") as exc:
        check_collection(spec("two-level", 12.0, epsilon_1=11.0), FleetBudget(8.0))
    assert exc.value.field == "epsilon_1"
    check_collection(spec("none", 8.0), FleetBudget(8.0))  # exactly the budget fits
    check_collection(spec("none", 20.0), FleetBudget())  # no budget: anything


@pytest.mark.parametrize("raw,field", [({"epsilon_per_day": -1}, "budget.epsilon_per_day"),
                                       ({"epsilon_per_day": True}, "budget.epsilon_per_day"),
                                       ({"epsilon_per_day": float("nan")},
                                        "budget.epsilon_per_day"),
                                       ({"values_per_day": 0}, "budget.values_per_day"),
                                       ({"epsilon": 8}, "budget"), ([8], "budget")])
def test_a_bad_budget_names_its_field(raw: Any, field: str) -> None:
    with pytest.raises(BudgetError) as exc:
        FleetBudget.from_dict(raw)
    assert exc.value.field == field and field in str(exc.value)


def test_report_charges_sum_to_the_policy_bounds() -> None:
    none, perm = spec("none", 1.5), spec("permanent", 1.5)
    two = spec("two-level", 4.0, epsilon_1=2.0)
    assert sum(report_charge(none, fresh=k == 0) for k in range(10)) == 15.0
    assert sum(report_charge(perm, fresh=k == 0) for k in range(10)) == 1.5
    charges = [report_charge(two, fresh=k == 0, value_reports=k) for k in range(10)]
    er = epsilon_per_report(two)
    assert charges[0] == pytest.approx(er) and sum(charges) == pytest.approx(4.0)
    assert charges[-1] == 0.0  # the value's bound ε∞ is reached


def test_token_charges_sum_to_the_daily_spend_over_the_cadence_and_bound_memoized_ones(
        ) -> None:
    for s in (spec("none", 1.0), spec("permanent", 1.0),
              spec("two-level", 4.0, epsilon_1=2.0)):
        r = reports_per_day(s)
        total = sum(token_charge(s, issued_today=k) for k in range(r))
        assert total == pytest.approx(collection_daily_spend(s)), s.memoization
        beyond = token_charge(s, issued_today=r + 5)
        # a token beyond the cadence may still carry a fresh report: charged unless the
        # policy's bound for the day's values is reached
        assert beyond == (1.0 if s.memoization == "none" else 0.0), s.memoization


def test_the_ledger_refuses_beyond_the_budget_per_utc_day_and_round_trips() -> None:
    ledger = DailyLedger(3.0)
    day = 19_000 * 86_400.0
    assert ledger.charge("a", 2.0, day + 10) == 2.0
    assert ledger.allows(1.0, day + 20) and not ledger.allows(1.01, day + 20)
    with pytest.raises(BudgetError, match="daily budget 3"):
        ledger.charge("b", 1.5, day + 30)
    assert ledger.spent(day + 30) == 2.0  # the refused charge left no trace
    assert ledger.charge("b", 1.0, day + 40) == 3.0
    assert ledger.remaining(day + 40) == 0.0 and ledger.allows(0.0, day + 40)
    copy = DailyLedger.from_dict(ledger.to_dict())
    assert copy == ledger and not copy.allows(0.5, day + 86_399)
    assert copy.allows(3.0, day + 86_400)  # the next UTC day starts afresh
    copy.charge("a", 1.0, day + 3 * 86_400)
    assert set(copy.days) == {19_003}  # days before yesterday are forgotten
    assert DailyLedger().allows(1e9, 0.0)  # no budget
