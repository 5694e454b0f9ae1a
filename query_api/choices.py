"""The ``auto`` method per query, kept across nearby state versions.

Choosing the post-processing method by simulated error (Wang et al. 2020; see
:mod:`ldpcore.intervals`) simulates hundreds of states per candidate: the larger part
of a cold ``auto`` answer.  Under a live stream the state changes at every flush, so
every answer would be cold.  The choice depends on the state only through the
distribution (which moves little between flushes) and n, so it is kept per query
shape — collection, time range as asked, full domain or subset — and reused while

* n stays within a factor :attr:`Choices.factor` of the n it was made at (stated in
  every answer; ``LDP_AUTO_REFRESH_FACTOR``, default 1.25), and
* it is younger than :attr:`Choices.max_age_s` (``LDP_AUTO_REFRESH_S``, default 300 s);
  an older choice is still used while it is made again in the background.

Outside the factor the choice is made again at once.  The answer shows the choice:
``method_choice`` = {method, chosen_at_n, age_s, refresh}.

The bootstrap errors behind a kept choice's interval are kept by the same rule
(:meth:`Choices.near`; see :func:`query_api.estimates._answer`): simulated for one state,
rescaled by sqrt(n0/n) for the nearby ones, simulated again at once outside the factor or
past the maximum age (not in the background: the answer waits for its own errors).  The
point, the analytic standard error and the fit are always the state's own, and an answer
on kept errors says so: ``method_choice.simulation`` = {errors_simulated_at_n, age_s,
refresh}.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Choice", "Choices", "ChoiceSlot"]


@dataclass(frozen=True)
class Choice:
    """A method chosen by ``auto`` for a query at sample size ``n`` (epoch time ``at``)."""

    method: str
    n: int
    at: float
    note: str | None = None
    mse: dict[str, float] = field(default_factory=dict)


class Choices:
    """Choices per query shape (an LRU of ``size`` entries: each is a few hundred bytes)."""

    def __init__(self, *, factor: float = 1.25, max_age_s: float = 300.0,
                 executor: Executor | None = None, size: int = 4096) -> None:
        self.factor = float(factor)
        self.max_age_s = float(max_age_s)
        self.executor = executor
        self.size = size
        self._data: OrderedDict[Hashable, Choice] = OrderedDict()
        self._refreshing: set[Hashable] = set()
        self._lock = threading.Lock()

    def slot(self, key: Hashable) -> ChoiceSlot:
        return ChoiceSlot(self, key)

    def lookup(self, key: Hashable, n: int) -> tuple[Choice | None, bool]:
        """(the choice to use or None, whether to make it again in the background)."""
        with self._lock:
            hit = self._data.get(key)
            if hit is None:
                return None, False
            self._data.move_to_end(key)
        if not hit.n / self.factor <= n <= hit.n * self.factor:
            return None, False
        return hit, time.time() - hit.at > self.max_age_s

    def put(self, key: Hashable, choice: Choice) -> None:
        with self._lock:
            self._data[key] = choice
            self._data.move_to_end(key)
            while len(self._data) > self.size:
                self._data.popitem(last=False)

    def refresh(self, key: Hashable, make: Callable[[], Choice]) -> None:
        """Make the choice again in the background (once at a time per key)."""
        if self.executor is None:
            return
        with self._lock:
            if key in self._refreshing:
                return
            self._refreshing.add(key)

        def run() -> None:
            try:
                self.put(key, make())
            finally:
                with self._lock:
                    self._refreshing.discard(key)

        self.executor.submit(run)

    def near(self, n0: int, at: float, n: int) -> bool:
        """Whether what was computed at sample size ``n0`` at epoch time ``at`` may serve n
        (the rule of a kept choice: within the factor, and younger than the maximum age)."""
        return (n0 / self.factor <= n <= n0 * self.factor
                and time.time() - at <= self.max_age_s)

    def describe_simulation(self, n0: int, at: float | None) -> dict[str, Any]:
        """What an answer says of bootstrap errors kept from a nearby state."""
        return {"errors_simulated_at_n": n0,
                "age_s": None if at is None else round(max(0.0, time.time() - at), 1),
                "refresh": f"simulated again when n leaves [n/{self.factor:g}, "
                           f"n·{self.factor:g}] of errors_simulated_at_n, or after "
                           f"{self.max_age_s:g} s; kept errors are rescaled by "
                           "sqrt(errors_simulated_at_n / n)"}

    def describe(self, choice: Choice) -> dict[str, Any]:
        """What an answer says of the choice it used."""
        return {"method": choice.method, "chosen_at_n": choice.n,
                "age_s": round(max(0.0, time.time() - choice.at), 1),
                "refresh": f"made again when n leaves [n/{self.factor:g}, n·{self.factor:g}] "
                           f"of chosen_at_n, or after {self.max_age_s:g} s"}


@dataclass(frozen=True)
class ChoiceSlot:
    """One query shape's place in :class:`Choices` (what an estimate function is given)."""

    choices: Choices
    key: Hashable
