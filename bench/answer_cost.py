"""CPU time of one answer per kind, computed from a state (no HTTP, no Redis).

d = 1,024, n = 10^6, ε = 1: OLH (frequencies, subset, heavy hitters with ``auto``), HH
(range, quantiles, CDF, histogram), Square Wave with 1,024 bins (mean, frequencies),
set-valued ``ps`` padded to l = 8 (top items, subset; Zipf entries).
*first* is a collection's first answer (its ``auto`` choice made); *cold* the answer for
a new state 1,000 reports later (what a live collection costs at every flush), the median
of 3.  Run from the repository root; to compare with another checkout, run it there with
that checkout first on the path::

    .venv/bin/python bench/answer_cost.py
    (cd ../main && PYTHONPATH=. ../x24-answers/.venv/bin/python ../x24-answers/bench/answer_cost.py)
"""

from __future__ import annotations

import inspect
import os
import time
from collections.abc import Callable
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

import ldpcore  # noqa: E402
from query_api import estimates as E  # noqa: E402

D, N = 1024, 10**6


def main() -> None:
    choices: Any = None
    if "choice" in inspect.signature(E.frequencies).parameters:  # kept auto choices
        from query_api.choices import Choices

        choices = Choices()

    def slot(key: str) -> dict[str, Any]:
        return {} if choices is None else {"choice": choices.slot(key)}

    def cpu(f: Callable[[], Any]) -> float:
        t = time.process_time()
        f()
        return 1e3 * (time.process_time() - t)

    w = 1.0 / np.arange(1, D + 1) ** 1.2
    w /= w.sum()
    x = (np.arange(D) + 0.5) / D
    beta = x * (1 - x) ** 4 / (x * (1 - x) ** 4).sum()
    olh: Any = ldpcore.make_oracle("olh", epsilon=1.0, domain_size=D)
    hh: Any = ldpcore.make_oracle("hh", epsilon=1.0, domain_size=D)
    sw: Any = ldpcore.make_oracle("sw", epsilon=1.0, bins=D, low=0.0, high=1.0)
    cases: list[tuple[str, Any, np.ndarray, Callable[..., Any]]] = [
        ("frequencies (olh, auto)", olh, w, lambda o, s, k: E.frequencies(
            o, s, labels=None, method="auto", confidence=0.95, **k)),
        ("subset (olh, auto)", olh, w, lambda o, s, k: E.subset(
            o, s, [3, 10], method="auto", confidence=0.95, **k)),
        ("heavy-hitters (olh)", olh, w, lambda o, s, k: E.heavy_hitters(
            o, s, 10, labels=None, **k)),
        ("range (hh)", hh, w, lambda o, s, k: E.range_answer(o, s, 100, 600, confidence=0.95)),
        ("quantiles (hh)", hh, w, lambda o, s, k: E.quantiles(o, s, [0.5, 0.9])),
        ("cdf (hh)", hh, w, lambda o, s, k: E.cdf(o, s)),
        ("histogram (hh)", hh, w, lambda o, s, k: E.histogram(o, s)),
        ("mean (sw)", sw, beta, lambda o, s, k: E.mean(o, s, confidence=0.95)),
        ("frequencies (sw, 1,024 bins)", sw, beta, lambda o, s, k: E.frequencies(
            o, s, labels=None, method="auto", confidence=0.95, **k)),
    ]
    ps: Any = ldpcore.make_oracle("ps", epsilon=1.0, domain_size=D, length=8)
    try:
        from query_api import setvalued as S
    except ImportError:  # a checkout without set-valued answers
        S = None
    if S is not None:
        cases += [
            ("top items (ps, l = 8)", ps, w, lambda o, s, k: S.top_items(
                o, s, 10, labels=None, confidence=0.95)),
            ("subset (ps, l = 8)", ps, w, (lambda o, s, k: S.subset_answer(
                o, s, [3, 10], method="base", confidence=0.95))
             if hasattr(S, "subset_answer") else (lambda o, s, k: E.subset(  # simulated
                 o, s, [3, 10], method="base", confidence=0.95, **k))),
        ]
    print(f"{'answer kind':<32}{'first ms':>10}{'cold ms':>10}")
    for name, o, dist, call in cases:
        s0 = o.sample_state(dist, N, rng=1)
        first = cpu(lambda: call(o, s0, slot(name)))
        colds = [cpu(lambda k=k: call(o, s0 + o.sample_state(dist, 1000, rng=100 + k),
                                      slot(name))) for k in range(3)]
        print(f"{name:<32}{first:>10.1f}{float(np.median(colds)):>10.1f}", flush=True)


if __name__ == "__main__":
    main()
