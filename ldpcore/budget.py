r"""A fleet's privacy budget: what one device may spend, and spends, per day.

A fleet (every collection of one deployment) states a per-device daily budget
:math:`B` (``budget: {epsilon_per_day: 8}``, as Apple's deployment states one per
day).  Each collection counts against it by what one device can spend on it in a day,
from its per-report ε, its cadence and its memoization policy's long-run bound
(:mod:`ldpcore.longitudinal`, basic composition across collections):

* ``reports_per_day`` :math:`R` = ``reports_per_window`` × the number of windows a UTC
  day can touch (:func:`windows_per_day`);
* ``epsilon_per_report`` :math:`\varepsilon_r`: what one fresh report reveals — the
  oracle's ε, or for ``two-level`` the composed channel's one-report ε
  (:attr:`~ldpcore.longitudinal.TwoLevel.epsilon_report`);
* the daily spend, with at most :math:`v` distinct values per device and day
  (``values_per_day``, default 1):
  :func:`~ldpcore.longitudinal.epsilon_spent` of :math:`R` reports of :math:`v` values —
  ``none``: :math:`R\varepsilon`; ``permanent``: :math:`\min(R, v)\,\varepsilon`;
  ``two-level``: :math:`\min(v\,\varepsilon_\infty, R\,\varepsilon_r)`.

:func:`device_daily_spend` sums them; what one device *can* spend per day is
:math:`\min(B, \text{that sum})`, because the device enforces :math:`B`: its SDK keeps a
:class:`DailyLedger` charged by :func:`report_charge` (what each report really costs —
a repeated memoized answer costs nothing, a new value's draw costs ε) and does not report
beyond :math:`B`.  A token issuer, which sees requests but not values, charges each token
:func:`token_charge` (the worst case within the collection's daily bound).  A collection
whose one report alone exceeds :math:`B` can never be reported and is refused
(:func:`check_collection`).

Pure, no I/O.

>>> from ldpcore.collection import CollectionSpec
>>> hourly = CollectionSpec.from_dict({"id": "os", "oracle": {"mechanism": "grr",
...     "epsilon": 1.0}, "domain": {"kind": "categories", "labels": ["a", "b", "c"]},
...     "memoization": "none"})
>>> reports_per_day(hourly), collection_daily_spend(hourly)
(24, 24.0)
>>> budget = FleetBudget.from_dict({"epsilon_per_day": 8})
>>> device_daily_spend([hourly]), budget.can_spend(device_daily_spend([hourly]))
(24.0, 8.0)
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .errors import ParameterError

__all__ = [
    "DAY_SECONDS",
    "BudgetError",
    "FleetBudget",
    "windows_per_day",
    "reports_per_day",
    "epsilon_per_report",
    "collection_daily_spend",
    "device_daily_spend",
    "check_collection",
    "report_charge",
    "token_charge",
    "utc_day",
    "DailyLedger",
]

DAY_SECONDS = 86_400
_EPS_MAX = 1e6
_SLACK = 1e-9  # float sums of charges may exceed an exact budget by rounding


class BudgetError(ParameterError):
    """A collection, a budget or a report that does not fit the fleet's privacy budget;
    ``field`` names the key at fault (``oracle.epsilon``, ``budget.epsilon_per_day`` …)."""

    def __init__(self, message: str, *, field: str = "budget.epsilon_per_day") -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class FleetBudget:
    """The fleet policy's budget: ``epsilon_per_day`` per device (None: no budget) and the
    ``values_per_day`` a device's value may take in a collection for the stated spend."""

    epsilon_per_day: float | None = None
    values_per_day: int = 1

    @classmethod
    def from_dict(cls, raw: Any, *, source: str = "budget") -> FleetBudget:
        """``{"epsilon_per_day": 8, "values_per_day": 1}`` (``None``: no budget).

        >>> FleetBudget.from_dict({"epsilon_per_day": 0})
        Traceback (most recent call last):
        ...
        ldpcore.budget.BudgetError: budget.epsilon_per_day must be a number in (0, 1000000], got 0
        """
        if raw is None:
            return cls()
        if not isinstance(raw, Mapping):
            raise BudgetError(f"{source} must be an object {{epsilon_per_day, values_per_day}}"
                              f", got {type(raw).__name__}", field=source)
        extra = sorted(str(k) for k in raw if k not in ("epsilon_per_day", "values_per_day"))
        if extra:
            raise BudgetError(f"unknown {source} key(s) {extra}; allowed: "
                              "['epsilon_per_day', 'values_per_day']", field=source)
        eps = raw.get("epsilon_per_day")
        if eps is not None and (isinstance(eps, bool) or not isinstance(eps, (int, float))
                                or not math.isfinite(eps) or not 0 < eps <= _EPS_MAX):
            raise BudgetError(f"{source}.epsilon_per_day must be a number in (0, {_EPS_MAX:.0f}]"
                              f", got {eps!r}", field=f"{source}.epsilon_per_day")
        v = raw.get("values_per_day", 1)
        if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= 1_000_000:
            raise BudgetError(f"{source}.values_per_day must be an integer in [1, 1000000], "
                              f"got {v!r}", field=f"{source}.values_per_day")
        return cls(None if eps is None else float(eps), v)

    def to_dict(self) -> dict[str, Any]:
        return {"epsilon_per_day": self.epsilon_per_day, "values_per_day": self.values_per_day}

    def can_spend(self, demand: float) -> float:
        """What one device can spend per day: the demand, capped by the budget."""
        return demand if self.epsilon_per_day is None else min(self.epsilon_per_day, demand)


def windows_per_day(window_seconds: int) -> int:
    """Most tumbling windows (epoch-aligned, ``window_seconds`` long) one UTC day touches.

    A day starts at a multiple of 86,400 s and windows at multiples of ``w``; the offsets
    of a day's start within a window are the multiples of g = gcd(86400, w), so the most
    windows touched is ⌈(86400 + w − g) / w⌉.

    >>> windows_per_day(3600), windows_per_day(300), windows_per_day(7 * 86400)
    (24, 288, 1)
    >>> windows_per_day(7000)   # 86400 / 7000 = 12.3: a day may touch 14 windows
    14
    """
    w = int(window_seconds)
    if w < 1:
        raise ParameterError(f"window_seconds must be >= 1, got {window_seconds!r}")
    g = math.gcd(DAY_SECONDS, w)
    return -(-(DAY_SECONDS + w - g) // w)


def reports_per_day(spec: Any) -> int:
    """Most reports one device sends to the collection in a UTC day (its cadence)."""
    return int(spec.reports_per_window) * windows_per_day(spec.window_seconds)


def epsilon_per_report(spec: Any) -> float:
    """ε of one fresh report of the collection: the oracle's ε, or for ``two-level`` the
    composed channel's one-report ε."""
    tl = spec.two_level()
    return float(tl.epsilon_report) if tl is not None else float(spec.oracle_spec["epsilon"])


def collection_daily_spend(spec: Any, *, values_per_day: int = 1) -> float:
    """Most ε one device spends on the collection in a UTC day, its value taking at most
    ``values_per_day`` distinct values (see the module docstring)."""
    from .longitudinal import epsilon_spent

    r = reports_per_day(spec)
    return epsilon_spent(spec.memoization, epsilon=float(spec.oracle_spec["epsilon"]),
                         reports=r, distinct_values=max(1, min(values_per_day, r)),
                         epsilon_report=epsilon_per_report(spec))


def device_daily_spend(specs: Iterable[Any], *, values_per_day: int = 1) -> float:
    """What one device reporting to every collection spends per day (their sum)."""
    return float(sum(collection_daily_spend(s, values_per_day=values_per_day) for s in specs))


def check_collection(spec: Any, budget: FleetBudget) -> None:
    """Raise :class:`BudgetError` (naming the field) if one report of ``spec`` alone
    exceeds the budget: no device could ever send it.

    >>> from ldpcore.collection import CollectionSpec
    >>> spec = CollectionSpec.from_dict({"id": "x", "oracle": {"mechanism": "grr",
    ...     "epsilon": 10.0}, "domain": {"kind": "categories", "labels": ["a", "b"]}})
    >>> check_collection(spec, FleetBudget(8.0))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ldpcore.budget.BudgetError: oracle.epsilon 10 of collection 'x' alone exceeds the fleet ...
    """
    b = budget.epsilon_per_day
    if b is None:
        return
    per_report = epsilon_per_report(spec)
    if per_report <= b * (1 + _SLACK):
        return
    two = spec.two_level() is not None
    what = (f"epsilon_1 {spec.epsilon_1:g} (with oracle.epsilon {spec.oracle_spec['epsilon']:g},"
            f" one report costs {per_report:.4g})" if two
            else f"oracle.epsilon {per_report:g}")
    raise BudgetError(f"{what} of collection {spec.id!r} alone exceeds the fleet budget "
                      f"budget.epsilon_per_day = {b:g}: no device could send one report; "
                      f"lower {'epsilon_1' if two else 'oracle.epsilon'} or raise the budget",
                      field="epsilon_1" if two else "oracle.epsilon")


def report_charge(spec: Any, *, fresh: bool, value_reports: int = 0) -> float:
    """What one report really costs the device that sends it (its ledger's charge).

    * ``none``: ε, always;
    * ``permanent``: ε when the answer is drawn (``fresh``: a value the memo did not hold),
      nothing when a memoized answer is repeated;
    * ``two-level``: the increase of min(k·ε_report, ε∞) from k = ``value_reports`` (reports
      of this value so far, all days) to k + 1: ε_report each until the value's total
      reaches ε∞, then nothing.

    >>> from ldpcore.collection import CollectionSpec
    >>> spec = CollectionSpec.from_dict({"id": "x", "oracle": {"mechanism": "grr",
    ...     "epsilon": 1.0}, "domain": {"kind": "categories", "labels": ["a", "b"]}})
    >>> report_charge(spec, fresh=True), report_charge(spec, fresh=False)
    (1.0, 0.0)
    """
    eps = float(spec.oracle_spec["epsilon"])
    if spec.memoization == "none":
        return eps
    if spec.memoization == "permanent":
        return eps if fresh else 0.0
    er = epsilon_per_report(spec)
    k = 0 if fresh else max(0, int(value_reports))
    return max(0.0, min((k + 1) * er, eps) - min(k * er, eps))


def token_charge(spec: Any, *, issued_today: int, values_per_day: int = 1) -> float:
    """What a token issuer charges a device's day for one more token of ``spec``.

    The issuer sees requests, not values, so every token may carry a fresh report of a new
    value, up to ``values_per_day`` values: the charge is the increase of
    :func:`~ldpcore.longitudinal.epsilon_spent` from ``issued_today`` reports to one more
    (``none``: ε per token; ``permanent``: ε for each of the first ``values_per_day``
    tokens of the day, then nothing; ``two-level``: ε_report per token until
    ``values_per_day`` · ε∞).  Over the collection's cadence it sums to
    :func:`collection_daily_spend`.

    >>> from ldpcore.collection import CollectionSpec
    >>> spec = CollectionSpec.from_dict({"id": "x", "oracle": {"mechanism": "grr",
    ...     "epsilon": 1.0}, "domain": {"kind": "categories", "labels": ["a", "b"]}})
    >>> [token_charge(spec, issued_today=k) for k in range(3)]
    [1.0, 0.0, 0.0]
    """
    from .longitudinal import epsilon_spent

    k = max(0, int(issued_today))
    eps, er = float(spec.oracle_spec["epsilon"]), epsilon_per_report(spec)

    def spent(reports: int) -> float:
        return epsilon_spent(spec.memoization, epsilon=eps, reports=reports,
                             distinct_values=max(1, values_per_day), epsilon_report=er)

    return max(0.0, spent(k + 1) - spent(k))


def utc_day(now: float) -> int:
    """The UTC day of epoch time ``now`` (days since 1970-01-01)."""
    return int(now // DAY_SECONDS)


@dataclass
class DailyLedger:
    """What one device spent per UTC day, per collection; refuses a report beyond the budget.

    ``days`` maps a UTC day (:func:`utc_day`) to collection id → ε spent; only the current
    and previous day are kept.  JSON-able (:meth:`to_dict`), so the SDK persists it with its
    memo.

    >>> ledger = DailyLedger(2.0)
    >>> ledger.allows(1.5, now=0), ledger.charge("a", 1.5, now=0), ledger.allows(1.0, now=0)
    (True, 1.5, False)
    >>> ledger.allows(1.0, now=86_400)     # a new UTC day
    True
    """

    budget: float | None = None
    days: dict[int, dict[str, float]] = field(default_factory=dict)

    def spent(self, now: float) -> float:
        """ε spent so far on the UTC day of ``now`` (every collection)."""
        return float(sum(self.days.get(utc_day(now), {}).values()))

    def remaining(self, now: float) -> float:
        return math.inf if self.budget is None else max(0.0, self.budget - self.spent(now))

    def allows(self, epsilon: float, now: float) -> bool:
        """True if spending ``epsilon`` more today stays within the budget."""
        if self.budget is None or epsilon <= 0:
            return True
        return self.spent(now) + epsilon <= self.budget * (1 + _SLACK)

    def charge(self, collection: str, epsilon: float, now: float) -> float:
        """Record ``epsilon`` spent on ``collection`` today; returns today's total.

        Raises :class:`BudgetError` (and records nothing) if it would exceed the budget.
        """
        if not self.allows(epsilon, now):
            raise BudgetError(f"reporting to {collection!r} would spend {epsilon:.4g} more "
                              f"today, {self.spent(now):.4g} of the daily budget "
                              f"{self.budget:g} is spent")
        day = utc_day(now)
        for old in [d for d in self.days if d < day - 1]:
            del self.days[old]
        if epsilon > 0:
            today = self.days.setdefault(day, {})
            today[collection] = today.get(collection, 0.0) + float(epsilon)
        return self.spent(now)

    def to_dict(self) -> dict[str, Any]:
        return {"budget": self.budget,
                "days": {str(d): dict(c) for d, c in sorted(self.days.items())}}

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> DailyLedger:
        days = {int(d): {str(k): float(v) for k, v in c.items()}
                for d, c in dict(raw.get("days") or {}).items()}
        b = raw.get("budget")
        return cls(None if b is None else float(b), days)
