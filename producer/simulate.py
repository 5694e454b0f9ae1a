"""Simulator: N devices draw true values, perturb them on the "device", publish only reports.

Distributions (``--dist``): ``zipf:s``, ``uniform``, ``geometric:p``,
``cauchy:center,height`` (a Cauchy density with location ``center`` and scale
``height`` in index units, discretised on the domain), or ``hist:PATH[:NAME]`` (a
``real_histograms.json``-style file; NAME picks a dataset).  Each device draws one
true value and memoizes its randomized answer (see :mod:`producer.sdk`), so a device
that reports several times repeats the same answer.  The ground truth stays in this
process (and the ``--truth`` file); only perturbed reports reach Kafka.

>>> p = distribution("zipf:1.0", 4)
>>> [round(float(x), 3) for x in p]
[0.48, 0.24, 0.16, 0.12]
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ldpcore import Reports, State
from ldpcore.collection import CollectionSpec

__all__ = ["distribution", "generate", "simulate", "SimulationResult", "Progress", "write_truth"]


def distribution(name: str, d: int) -> np.ndarray:
    """Probabilities over ``[0, d)`` for a distribution name (see the module docstring)."""
    kind, _, arg = name.partition(":")
    k = np.arange(d, dtype=np.float64)
    try:
        if kind == "uniform" and not arg:
            w = np.ones(d)
        elif kind == "zipf":
            s = float(arg)
            if s <= 0:
                raise ValueError
            w = (k + 1) ** -s
        elif kind == "geometric":
            p = float(arg)
            if not 0 < p < 1:
                raise ValueError
            w = (1 - p) ** k
        elif kind == "cauchy":
            c, h = (float(x) for x in arg.split(","))
            if h <= 0:
                raise ValueError
            w = 1.0 / (1.0 + ((k - c) / h) ** 2)
        elif kind == "hist":
            path, _, ds = arg.partition(":")
            w = _histogram(path, ds or None, d)
        else:
            raise ValueError
    except (ValueError, TypeError):
        raise ValueError(f"bad distribution {name!r}: use zipf:s (s>0), uniform, geometric:p "
                         "(0<p<1), cauchy:center,height (height>0) or hist:PATH[:NAME]") from None
    return np.asarray(w / w.sum(), dtype=np.float64)


def _histogram(path: str, name: str | None, d: int) -> np.ndarray:
    raw = json.loads(Path(path).read_text())
    sets = raw["datasets"] if isinstance(raw, dict) and "datasets" in raw else raw
    if isinstance(sets, dict):
        sets = [sets]
    chosen = [s for s in sets if name is None or s.get("name") == name]
    if not chosen:
        raise ValueError(f"no dataset {name!r} in {path}")
    counts = np.asarray(chosen[0]["counts"], dtype=np.float64)
    if counts.size != d:
        raise ValueError(f"histogram has {counts.size} categories, the collection {d}")
    return counts


def _batch_sizes(sizes: list[int]) -> Iterator[int]:
    while True:
        yield from sizes


def generate(spec: CollectionSpec, probs: np.ndarray, reports: int, devices: int | None,
             batch_sizes: list[int], seed: int | None
             ) -> Iterator[tuple[Reports, np.ndarray]]:
    """Yield (perturbed batch, true values of that batch); deterministic for a seed.

    Device ``i`` holds one true value and one memoized answer; report ``j`` comes
    from device ``j mod devices``.
    """
    rng = np.random.default_rng(seed)
    oracle = spec.oracle()
    nd = min(devices or reports, reports) or 1
    truth = rng.choice(spec.domain.size, size=nd, p=probs)
    # The memo table: one randomized answer per device (perturbed on the device side).
    answers = oracle.perturb(truth, rng=rng if seed is not None else None)
    sizes = _batch_sizes(batch_sizes)
    j = 0
    while j < reports:
        b = min(next(sizes), reports - j)
        idx = np.arange(j, j + b) % nd
        yield answers[idx], truth[idx]
        j += b


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


def simulate(spec: CollectionSpec, send: Callable[[Reports], Any], *, dist: str, reports: int,
             devices: int | None = None, batch_sizes: list[int] | None = None,
             seed: int | None = None, rate: float | None = None,
             progress: bool = False) -> SimulationResult:
    """Run the simulation, calling ``send`` once per batch; returns truth and sent state."""
    if reports < 1:
        raise ValueError("reports must be >= 1")
    sizes = batch_sizes or [512]
    if any(b < 1 for b in sizes):
        raise ValueError("batch sizes must be >= 1")
    probs = distribution(dist, spec.domain.size)
    oracle = spec.oracle()
    state = oracle.new_state()
    truth = np.zeros(spec.domain.size, dtype=np.int64)
    bar = Progress(reports, progress)
    t0 = time.perf_counter()
    done = messages = 0
    for batch, true_vals in generate(spec, probs, reports, devices, sizes, seed):
        send(batch)
        state += oracle.aggregate(batch)
        truth += np.bincount(true_vals, minlength=spec.domain.size)
        done += len(batch)
        messages += 1
        if rate:
            ahead = done / rate - (time.perf_counter() - t0)
            if ahead > 0:
                time.sleep(ahead)
        bar.update(done)
    return SimulationResult(done, messages, time.perf_counter() - t0, truth, state)


def write_truth(path: str | Path, spec: CollectionSpec, result: SimulationResult,
                **meta: Any) -> None:
    """Ground-truth counts for evaluation (kept apart from anything sent to Kafka)."""
    out = {"collection": spec.id, "fingerprint": spec.fingerprint, "reports": result.reports,
           "counts": result.truth.tolist(), **meta}
    if spec.domain.kind == "categories":
        out["labels"] = list(spec.domain.labels)
    Path(path).write_text(json.dumps(out, indent=1))


