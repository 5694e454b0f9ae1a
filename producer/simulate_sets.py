"""Simulated devices of a set-valued collection (mechanisms ``ps``, ``psi``, ``setsize``).

Every device holds one set of items drawn from the synthetic model of
:mod:`ldpcore.setvalued.synthetic` (Zipf item popularity, Geometric nominal set
length, i.i.d. draws with duplicates collapsed) and reports once.  ``dist`` is
``zipf:s`` (mean nominal length 4) or ``zipfsets:s,mean``.  For a phase of a
partitioned protocol (SVIM, SVSM) the simulated devices are those of *this*
phase: each reports to it once and to no other phase of the group.

The ground truth (``SimulationResult.truth``) counts, per item, the devices
holding it; ``extra["set_sizes"]`` counts the devices per set size.

>>> from ldpcore.collection import CollectionSpec
>>> spec = CollectionSpec.from_dict({"id": "apps", "oracle": {"mechanism": "ps",
...     "epsilon": 2.0, "length": 4}, "domain": {"kind": "integers", "low": 0, "high": 63}})
>>> res = simulate_sets(spec, lambda batch: None, dist="zipf:1.1", reports=2000, seed=1)
>>> res.reports, res.state.n, int(res.truth[0]) > int(res.truth[10])
(2000, 2000, True)
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

from ldpcore import Reports
from ldpcore.collection import CollectionSpec
from ldpcore.setvalued.synthetic import zipf_sets

from .progress import Progress, SimulationResult

__all__ = ["set_model", "simulate_sets"]


def set_model(dist: str) -> tuple[float, float]:
    """(Zipf exponent, mean nominal length) of ``zipf:s`` or ``zipfsets:s,mean``."""
    kind, _, arg = dist.partition(":")
    try:
        if kind == "zipf":
            s, mean = float(arg), 4.0
        elif kind == "zipfsets":
            a, b = arg.split(",")
            s, mean = float(a), float(b)
        else:
            raise ValueError(kind)
    except ValueError:
        raise ValueError(f"bad set distribution {dist!r}: use zipf:s or zipfsets:s,mean "
                         "(s > 0, mean >= 1)") from None
    if not (s > 0 and mean >= 1):
        raise ValueError(f"bad set distribution {dist!r}: need s > 0 and mean >= 1")
    return s, mean


def simulate_sets(spec: CollectionSpec, send: Callable[[Reports], Any], *, dist: str,
                  reports: int, batch_sizes: list[int] | None = None, seed: int | None = None,
                  rate: float | None = None, progress: bool = False,
                  sleep: Callable[[float], Any] = time.sleep, **_: Any) -> SimulationResult:
    """Play ``reports`` devices of a set-valued collection, one report each."""
    if not spec.set_valued:
        raise ValueError(f"collection {spec.id!r} is not set-valued")
    if reports < 1:
        raise ValueError("reports must be >= 1")
    sizes = batch_sizes or [512]
    if any(b < 1 for b in sizes):
        raise ValueError("batch sizes must be >= 1")
    zipf_s, mean = set_model(dist)
    rng = np.random.default_rng(seed)
    device_rng = rng if seed is not None else None
    oracle: Any = spec.oracle()
    d = spec.domain.size
    sets = zipf_sets(reports, d, zipf_s=zipf_s, mean_length=mean, rng=rng)
    state = oracle.new_state()
    bar = Progress(reports, progress)
    t0 = time.perf_counter()
    done = messages = 0
    i = 0
    while done < reports:
        b = min(sizes[i % len(sizes)], reports - done)
        i += 1
        batch = oracle.perturb_sets(sets[done:done + b], rng=device_rng)
        send(batch)
        state += oracle.aggregate(batch)
        done += b
        messages += 1
        if rate:
            ahead = done / rate - (time.perf_counter() - t0)
            if ahead > 0:
                sleep(ahead)
        bar.update(done)
    truth = np.bincount(sets.items, minlength=d).astype(np.int64)
    return SimulationResult(done, messages, time.perf_counter() - t0, truth, state,
                            {"window_counts": [done], "memoization": spec.memoization,
                             "set_sizes": np.bincount(sets.lengths).tolist(),
                             "model": {"zipf": zipf_s, "mean_length": mean}})
