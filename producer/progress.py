"""What a simulation run shows while it runs and returns at the end.

Shared by :mod:`producer.simulate` and :mod:`producer.simulate_sets` (below both, so
neither imports the other for it).
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ldpcore import State

__all__ = ["Progress", "SimulationResult"]


class Progress:
    """A small stderr progress bar (no dependency)."""

    def __init__(self, total: int, enabled: bool = True, stream: Any = None) -> None:
        self.total, self.enabled = total, enabled
        self.stream = stream or sys.stderr
        self.t0 = time.perf_counter()
        self._last = 0.0

    def update(self, done: int) -> None:
        now = time.perf_counter()
        if not self.enabled or (now - self._last < 0.2 and done < self.total):
            return
        self._last = now
        frac = done / max(self.total, 1)
        bar = "#" * int(30 * frac)
        rate = done / max(now - self.t0, 1e-9)
        self.stream.write(f"\r[{bar:<30}] {done}/{self.total} reports {rate:,.0f}/s")
        if done >= self.total:
            self.stream.write("\n")
        self.stream.flush()


@dataclass
class SimulationResult:
    reports: int
    messages: int
    seconds: float
    truth: np.ndarray
    state: State
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def rate(self) -> float:
        return self.reports / max(self.seconds, 1e-9)

    def summary(self) -> str:
        return (f"sent {self.reports} reports in {self.messages} messages in "
                f"{self.seconds:.2f} s ({self.rate:,.0f} reports/s)")
