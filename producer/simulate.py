"""Simulator: N devices draw true values, perturb them on the "device", publish only reports.

Distributions (``--dist``): ``zipf:s``, ``uniform``, ``geometric:p``,
``cauchy:center,height`` (a Cauchy density with location ``center`` and scale
``height`` in index units, discretised on the domain), or ``hist:PATH[:NAME]`` (a
``real_histograms.json``-style file; NAME picks a dataset).

Device population (``devices``; default one device per report, each reporting
once): every device holds one true value and follows the collection's memoization
policy like :class:`producer.sdk.Device` (``permanent``: the same answer every
time; ``two-level``: a memoized answer re-randomized per report; ``none``: fresh).
Reports are sent in *rounds*, one per collection window: in each round every
present device (probability ``presence``) reports once, in random order; between
rounds a fraction ``churn`` of the devices leaves and is replaced by new devices
(a new value, a new memo).  With ``rate`` (live traffic, as in ``ldpstream up``)
rounds follow the wall-clock windows of the collection: a device never reports
twice in a window, and when every present device has reported the simulator
waits for the next window.  Without ``rate`` (as fast as possible) rounds are
virtual windows.

Multi-attribute collections (domain kind ``attributes``, mechanism ``multi``): every
device holds one value per attribute, drawn *independently* per attribute from
``--dist`` over that attribute's own domain (e.g. ``zipf:1.1`` over each attribute's
labels or bins); a device's tuple is its mixed-radix index.  The truth then counts
each attribute's values: ``SimulationResult.truth`` is the per-attribute counts
concatenated in declaration order (:func:`truth_by_attribute` splits it).

The ground truth stays in this process (and the ``--truth`` file); only perturbed
reports reach Kafka.  It counts the true value of every *report* (a device that
reported in k windows counts k times), which is what an estimate from the summed
state estimates; ``SimulationResult.extra["window_counts"]`` holds the reports per
round, the input of :func:`ldpcore.longitudinal.effective_sample_size`.

>>> p = distribution("zipf:1.0", 4)
>>> [round(float(x), 3) for x in p]
[0.48, 0.24, 0.16, 0.12]
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from ldpcore import Reports
from ldpcore.collection import CollectionSpec

from .progress import Progress, SimulationResult
from .simulate_sets import simulate_sets

__all__ = ["distribution", "generate", "schedule", "Sent", "simulate", "SimulationResult",
           "Progress", "write_truth", "population_model", "truth_by_attribute"]


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


def population_model(spec: CollectionSpec, dist: str) -> Any:
    """What :func:`schedule` draws device values from: the probability vector over the
    domain, or for an ``attributes`` domain the list of per-attribute vectors (the
    attributes are independent; see the module docstring)."""
    if spec.domain.kind == "attributes":
        return [distribution(dist, d.size) for _, d in spec.domain.attributes]
    return distribution(dist, spec.domain.size)


def _draw(spec: CollectionSpec, probs: Any, rng: np.random.Generator, size: int
          ) -> np.ndarray:
    """``size`` device values (domain indices) from :func:`population_model`'s ``probs``."""
    if spec.domain.kind != "attributes":
        return rng.choice(spec.domain.size, size=size, p=probs)
    out = np.zeros(size, dtype=np.int64)
    for (_, dom), p in zip(spec.domain.attributes, probs, strict=True):
        out = out * dom.size + rng.choice(dom.size, size=size, p=p)
    return out


def _tally(spec: CollectionSpec, values: np.ndarray) -> np.ndarray:
    """Truth counts of a batch of domain indices (per attribute, concatenated, for an
    ``attributes`` domain)."""
    if spec.domain.kind != "attributes":
        return np.bincount(values, minlength=spec.domain.size)
    parts = []
    x = np.asarray(values, dtype=np.int64).copy()
    for _, dom in reversed(spec.domain.attributes):
        parts.append(np.bincount(x % dom.size, minlength=dom.size))
        x //= dom.size
    return np.concatenate(parts[::-1])


def truth_by_attribute(spec: CollectionSpec, truth: np.ndarray) -> dict[str, np.ndarray]:
    """Split :attr:`SimulationResult.truth` of an ``attributes`` collection per attribute."""
    out, pos = {}, 0
    for name, dom in spec.domain.attributes:
        out[name] = truth[pos:pos + dom.size]
        pos += dom.size
    return out


def _batch_sizes(sizes: list[int]) -> Iterator[int]:
    while True:
        yield from sizes


def _set_rows(reports: Reports, rows: np.ndarray, new: Reports) -> None:
    for name, col in reports.columns.items():
        col[rows] = new.columns[name]


class Sent(NamedTuple):
    """One batch of :func:`schedule`."""

    batch: Reports
    values: np.ndarray
    """True value behind each report (simulator-side ground truth)."""
    round: int
    """Round (window) number, from 0."""
    devices: np.ndarray
    """Device serial number of each report (a replaced device gets a new serial)."""


def schedule(spec: CollectionSpec, probs: np.ndarray, reports: int, devices: int | None,
             batch_sizes: list[int], seed: int | None, *, churn: float = 0.0,
             presence: float = 1.0, clock: Callable[[], float] | None = None,
             sleep: Callable[[float], Any] = time.sleep) -> Iterator[Sent]:
    """Yield the batches a device population sends (see the module docstring).

    ``clock`` (seconds since the epoch) makes rounds follow the collection's
    windows: a round ends when the window changes; when it runs out of devices the
    generator sleeps until the next window.  Deterministic for a seed (without a
    clock); without a seed device-side randomness comes from OS entropy.
    """
    if not 0.0 <= churn <= 1.0:
        raise ValueError(f"churn must be in [0, 1], got {churn}")
    if not 0.0 < presence <= 1.0:
        raise ValueError(f"presence must be in (0, 1], got {presence}")
    rng = np.random.default_rng(seed)
    device_rng = rng if seed is not None else None
    oracle = spec.oracle()
    two_level = spec.two_level()
    policy = spec.memoization
    one_shot = devices is None
    nd = min(devices or reports, reports) or 1
    truth = _draw(spec, probs, rng, nd)
    serial = np.arange(nd, dtype=np.int64)
    next_serial = nd
    # The memo table: one randomized (permanent) answer per device, drawn on the device side.
    memo = oracle.perturb(truth, rng=device_rng) if policy != "none" else None
    sizes = _batch_sizes(batch_sizes)

    def window() -> int:
        assert clock is not None
        return int(clock() // spec.window_seconds)

    live = clock is not None and not one_shot
    current = window() if live else 0
    j = rnd = 0
    while j < reports:
        if rnd and churn > 0:
            gone = np.flatnonzero(rng.random(nd) < churn)
            if gone.size:
                truth[gone] = _draw(spec, probs, rng, gone.size)
                serial[gone] = np.arange(next_serial, next_serial + gone.size)
                next_serial += gone.size
                if memo is not None:
                    _set_rows(memo, gone, oracle.perturb(truth[gone], rng=device_rng))
        if one_shot:
            order = np.arange(nd)
        else:
            order = rng.permutation(nd)
            if presence < 1.0:
                order = order[rng.random(nd) < presence]
        pos = 0
        while pos < order.size and j < reports:
            if live and window() != current:
                break
            b = min(next(sizes), order.size - pos, reports - j)
            idx = np.sort(order[pos:pos + b]) if one_shot else order[pos:pos + b]
            if memo is None:
                batch = oracle.perturb(truth[idx], rng=device_rng)
            elif two_level is not None:
                batch = two_level.rerandomize(memo[idx], rng=device_rng)
            else:
                batch = memo[idx]
            yield Sent(batch, truth[idx], rnd, serial[idx])
            pos += b
            j += b
        if live:
            while window() == current and j < reports:
                assert clock is not None
                sleep(min(1.0, (current + 1) * spec.window_seconds - clock() + 1e-3))
            current = window()
        rnd += 1


def generate(spec: CollectionSpec, probs: np.ndarray, reports: int, devices: int | None,
             batch_sizes: list[int], seed: int | None, **population: Any
             ) -> Iterator[tuple[Reports, np.ndarray]]:
    """Yield (perturbed batch, true values of that batch); deterministic for a seed.

    :func:`schedule` without the round numbers (``population``: churn, presence,
    clock, sleep).
    """
    for sent in schedule(spec, probs, reports, devices, batch_sizes, seed, **population):
        yield sent.batch, sent.values


def simulate(spec: CollectionSpec, send: Callable[[Reports], Any], *, dist: str, reports: int,
             devices: int | None = None, batch_sizes: list[int] | None = None,
             seed: int | None = None, rate: float | None = None,
             progress: bool = False, churn: float = 0.0, presence: float = 1.0,
             clock: Callable[[], float] | None = None,
             sleep: Callable[[float], Any] = time.sleep) -> SimulationResult:
    """Run the simulation, calling ``send`` once per batch; returns truth and sent state.

    With ``rate`` (or an explicit ``clock``) and a device population, rounds follow
    the collection's wall-clock windows (see the module docstring).
    ``result.extra["window_counts"]`` lists the reports sent per round.  A set-valued
    collection is played by :func:`producer.simulate_sets.simulate_sets`.
    """
    if spec.set_valued:
        return simulate_sets(spec, send, dist=dist, reports=reports, batch_sizes=batch_sizes,
                             seed=seed, rate=rate, progress=progress, sleep=sleep)
    if reports < 1:
        raise ValueError("reports must be >= 1")
    sizes = batch_sizes or [512]
    if any(b < 1 for b in sizes):
        raise ValueError("batch sizes must be >= 1")
    probs = population_model(spec, dist)
    oracle = spec.oracle()
    state = oracle.new_state()
    truth = np.zeros_like(_tally(spec, np.zeros(0, dtype=np.int64)), dtype=np.int64)
    bar = Progress(reports, progress)
    if clock is None and rate:
        clock = time.time
    now = clock or time.perf_counter
    window_counts: list[int] = []
    t0 = time.perf_counter()
    pace_t0 = now()
    done = messages = pace_done = 0
    for batch, true_vals, rnd, _ in schedule(spec, probs, reports, devices, sizes, seed,
                                             churn=churn, presence=presence, clock=clock,
                                             sleep=sleep):
        if rnd >= len(window_counts):
            # A new round (window): pace from here, not from before the wait for it.
            window_counts.extend([0] * (rnd + 1 - len(window_counts)))
            pace_t0, pace_done = now(), done
        send(batch)
        state += oracle.aggregate(batch)
        truth += _tally(spec, true_vals)
        window_counts[rnd] += len(batch)
        done += len(batch)
        messages += 1
        if rate:
            ahead = (done - pace_done) / rate - (now() - pace_t0)
            if ahead > 0:
                sleep(ahead)
        bar.update(done)
    return SimulationResult(done, messages, time.perf_counter() - t0, truth, state,
                            {"window_counts": window_counts,
                             "memoization": spec.memoization})


def write_truth(path: str | Path, spec: CollectionSpec, result: SimulationResult,
                **meta: Any) -> None:
    """Ground-truth counts for evaluation (kept apart from anything sent to Kafka)."""
    out = {"collection": spec.id, "fingerprint": spec.fingerprint, "reports": result.reports,
           "counts": result.truth.tolist(), **meta}
    if spec.domain.kind == "categories":
        out["labels"] = list(spec.domain.labels)
    if spec.domain.kind == "attributes":
        out["attributes"] = {name: c.tolist()
                             for name, c in truth_by_attribute(spec, result.truth).items()}
    Path(path).write_text(json.dumps(out, indent=1))


