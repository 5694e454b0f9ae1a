"""States written into a real Redis with the aggregator's own flush script (the storage
contract), for API tests that need answers but no broker."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from ldpcore.collection import CollectionSpec
from ldpstream.storage import FLUSH_SCRIPT, Keys, flush_args

__all__ = ["flush_reports"]


def flush_reports(r: Any, prefix: str, spec: CollectionSpec, seed: int, n: int = 2000) -> None:
    """``n`` perturbed reports of ``spec`` into the current window (sync Redis client)."""
    oracle = spec.oracle()
    rng = np.random.default_rng(seed)
    if spec.set_valued:
        labels = list(spec.domain.labels)
        reports = oracle.perturb_sets(spec.index_sets([labels[:2], labels[2:3]] * (n // 2)),
                                      rng=rng)
    else:
        reports = oracle.perturb(rng.integers(0, spec.domain.size, n), rng=rng)
    state = oracle.aggregate(reports)
    start = int(time.time()) // spec.window_seconds * spec.window_seconds
    expire = (start + spec.window_seconds + spec.retention_seconds) * 1000
    keys, args = flush_args(Keys(prefix), f"t-{spec.id}", {0: (-1, seed)},
                            {(spec.id, start): (state.n, state.counts, expire)},
                            int(time.time() * 1000))
    assert int(r.eval(FLUSH_SCRIPT, len(keys), *keys, *args)[0]) == 1
