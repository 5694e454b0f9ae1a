"""Window states written straight into a real Redis, as the aggregator's flush writes them
(simulated devices' states, or reports perturbed here: :func:`flush_reports`).

For API tests about answers (not about ingestion): the states come from the simulator's
reports aggregated in-process and land in Redis through the aggregator's own atomic flush
script, so the query service reads exactly what a worker would have written.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import numpy as np

import ldpcore
from ldpcore.collection import CollectionSpec
from ldpstream.storage import FLUSH_SCRIPT, CollectionCatalogue, Keys, flush_args
from producer.simulate import simulate


def simulated_state(spec: CollectionSpec, dist: str, reports: int, seed: int) -> ldpcore.State:
    """The state of ``reports`` simulated devices' reports (set-valued and multi included)."""
    oracle = spec.oracle()
    total = [oracle.new_state()]

    def send(batch: Any) -> None:
        total[0] = total[0] + oracle.aggregate(batch)

    simulate(spec, send, dist=dist, reports=reports, batch_sizes=[2000], seed=seed)
    return total[0]


def write_window(client: Any, prefix: str, spec: CollectionSpec, start: int,
                 state: ldpcore.State, *, keep_s: int = 86_400) -> None:
    """Add ``state`` to the collection's window at ``start`` (epoch s) in Redis."""
    script = client.register_script(FLUSH_SCRIPT)
    now_ms = int(time.time() * 1000)
    keys, args = flush_args(Keys(prefix), f"test-{uuid.uuid4().hex[:8]}", {0: (-1, 0)},
                            {(spec.id, start): (state.n, state.counts,
                                                now_ms + keep_s * 1000)}, now_ms)
    assert script(keys=keys, args=args)[0] == 1


def register(client: Any, prefix: str, *specs: CollectionSpec) -> None:
    CollectionCatalogue(client, prefix).register_all(specs)


def flush_reports(client: Any, prefix: str, spec: CollectionSpec, seed: int,
                  n: int = 2000) -> None:
    """``n`` perturbed reports of ``spec`` into the current window (sync Redis client)."""
    oracle = spec.oracle()
    rng = np.random.default_rng(seed)
    if spec.set_valued:
        labels = list(spec.domain.labels)
        reports = oracle.perturb_sets(spec.index_sets([labels[:2], labels[2:3]] * (n // 2)),
                                      rng=rng)
    else:
        reports = oracle.perturb(rng.integers(0, spec.domain.size, n), rng=rng)
    start = int(time.time()) // spec.window_seconds * spec.window_seconds
    write_window(client, prefix, spec, start, oracle.aggregate(reports),
                 keep_s=spec.window_seconds + spec.retention_seconds)


def register_reported(client: Any, prefix: str, raws: list[dict[str, Any]],
                      private: tuple[str, ...] = ()) -> list[CollectionSpec]:
    """Register each collection of ``raws`` with 2,000 reports in its current window
    (:func:`flush_reports`), and mark the ``private`` ones so."""
    catalogue = CollectionCatalogue(client, prefix)
    specs = []
    for i, raw in enumerate(raws):
        spec = CollectionSpec.from_dict(raw)
        catalogue.register(spec)
        flush_reports(client, prefix, spec, seed=i + 1)
        specs.append(spec)
    for cid in private:
        catalogue.mark_private(cid, True)
    return specs
