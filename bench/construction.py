"""Construction time of every mechanism across its whole allowed parameter range.

Usage::

    python bench/construction.py [--quick]

For each registered mechanism, builds the oracle on a grid of its documented ranges
(:mod:`ldpcore.limits`): ε on a geometric grid including both bounds, domain sizes from
the smallest to the largest allowed, and the mechanism's other parameters at their
extremes.  Each point is timed as the best of ``--repeat`` constructions (modules
imported beforehand, as in a running service); the table shows, per mechanism, the
number of points built, the worst (max over points) construction time and where it
happens, plus the worst time to *reject* a point just outside the ranges (ε just above
the bound, NaN, a huge integer).  OLH's prime cache is cleared before every
construction, so the times include the cold prime search.  The target is at most
50 ms everywhere.  Writes bench/results/construction.md.
"""

from __future__ import annotations

import argparse
import itertools
import math
import time
from collections.abc import Iterator
from typing import Any

import numpy as np

import ldpcore
from ldpcore.errors import ParameterError
from ldpcore.frequency.lh import nearest_prime
from ldpcore.limits import DOMAIN_RANGES, EPSILON_RANGES, SW_B_MIN

try:
    from bench._results import write_results
except ImportError:  # run as a script from bench/
    from _results import write_results  # type: ignore[no-redef]

TARGET_MS = 50.0


def eps_grid(mech: str, points: int) -> list[float]:
    lo, hi = EPSILON_RANGES[mech]
    grid = set(np.geomspace(lo, hi, points).tolist()) | {lo, hi, 1.0}
    return sorted(grid)


def dom_grid(mech: str) -> list[int]:
    lo, hi = DOMAIN_RANGES[mech]
    if mech == "pem":
        return []
    cands = {lo, lo + 1, 100, 1000, 1024, 4097, 65_536, 10**6, hi - 1, hi}
    return sorted(d for d in cands if lo <= d <= hi)


def points(mech: str, quick: bool) -> Iterator[dict[str, Any]]:
    """Parameter dicts covering mech's ranges (some combinations are invalid by design:
    those must be rejected fast, and are timed separately)."""
    n_eps = 5 if quick else 9
    eps = eps_grid(mech, n_eps)
    small_eps = eps_grid(mech, 4)
    doms = dom_grid(mech)
    if mech in ("grr", "sue", "oue", "blh", "hr", "hrr", "haar", "adaptive"):
        for e, d in itertools.product(eps, doms):
            yield {"epsilon": e, "domain_size": d}
    elif mech == "olh":
        for e, d, g in itertools.product(eps, doms, (None, 2, 3, 257, 4093, 65521)):
            yield {"epsilon": e, "domain_size": d, **({} if g is None else {"g": g})}
    elif mech == "ss":
        for e, d in itertools.product(eps, doms):
            for k in sorted({None, 1, max(1, d // 2), d - 1}, key=lambda x: x or 0):
                yield {"epsilon": e, "domain_size": d,
                       **({} if k is None else {"subset_size": k})}
    elif mech in ("cms", "hcms"):
        ms = (None, 2, 3, 61, 65521) if mech == "cms" else (None, 2, 64, 4096)
        for e, d, m in itertools.product(small_eps, doms, ms):
            yield {"epsilon": e, "domain_size": d, **({} if m is None else {"m": m})}
    elif mech == "hh":
        for e, d, b, f, c in itertools.product(small_eps, doms, ("hrr", "oue", "olh", "grr"),
                                               (None, 2, 4, 16, 1024), (True, False)):
            yield {"epsilon": e, "domain_size": d, "base": b, "consistency": c,
                   **({} if f is None else {"fanout": f})}
    elif mech == "sw":
        for e, d, ob, b in itertools.product(eps, doms, (2, 1024, 4096),
                                             (None, SW_B_MIN, 0.5, 10.0)):
            yield {"epsilon": e, "bins": d, "out_bins": ob, "low": -1e300, "high": 1e300,
                   **({} if b is None else {"b": b})}
    elif mech in ("pm", "duchi"):
        for e, d, (lo, hi) in itertools.product(eps, doms, ((0.0, 1.0), (-1e300, 1e300))):
            yield {"epsilon": e, "bins": d, "low": lo, "high": hi}
    elif mech == "pem":
        for e, bits, keep, eta, pool in itertools.product(
                small_eps, (4, 16, 32, 62), (1, 64, 4096), (1, 8, 16), (1, 256, 4096)):
            yield {"epsilon": e, "bits": bits, "keep": keep, "eta": eta, "pool": pool}
    else:  # pragma: no cover - a new mechanism needs a grid here
        raise SystemExit(f"no grid for mechanism {mech!r}")


def outside(mech: str) -> Iterator[dict[str, Any]]:
    """Points just outside the ranges, each of which must raise ParameterError."""
    lo, hi = EPSILON_RANGES[mech]
    size = {"bits": 16} if mech == "pem" else (
        {"bins": 8} if mech in ("sw", "pm", "duchi") else {"domain_size": 8})
    for e in (math.nextafter(hi, math.inf), math.nextafter(lo, 0.0), hi + 20.0, 710.0, 1e308,
              float("nan"), float("inf"), 10**400, True, "1.0"):
        yield {"epsilon": e, **size}
    dlo, dhi = DOMAIN_RANGES[mech]
    key = "bits" if mech == "pem" else ("bins" if mech in ("sw", "pm", "duchi") else
                                        "domain_size")
    bad = (3, 63, 10**30) if mech == "pem" else (dlo - 1, dhi + 1, 10**30)
    for d in bad:
        yield {"epsilon": 1.0, key: d}


def best_time(mech: str, params: dict[str, Any], repeat: int) -> tuple[float, bool]:
    """(best time in seconds, built?) of make_oracle(mech, **params)."""
    best, built = math.inf, True
    for _ in range(repeat):
        nearest_prime.cache_clear()  # time the cold prime search, not the cache
        t = time.perf_counter()
        try:
            ldpcore.make_oracle(mech, **params)
        except ParameterError:
            built = False
        best = min(best, time.perf_counter() - t)
    return best, built


def fmt(params: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                     for k, v in params.items())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="coarser ε grid")
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    mechs = [m for m in ldpcore.available_mechanisms() if m in EPSILON_RANGES]
    for m in mechs:  # import every module first, as a running service has
        ldpcore.registry.oracle_class(m)
    rows = []
    for mech in mechs:
        worst, worst_at, built, rejected, worst_rej = 0.0, {}, 0, 0, 0.0
        for params in points(mech, args.quick):
            dt, ok = best_time(mech, params, args.repeat)
            if ok:
                built += 1
                if dt > worst:
                    worst, worst_at = dt, params
            else:
                rejected += 1
                worst_rej = max(worst_rej, dt)
        for params in outside(mech):
            dt, ok = best_time(mech, params, 1)
            if ok:
                raise SystemExit(f"{mech}: {fmt(params)} was accepted, outside the ranges")
            worst_rej = max(worst_rej, dt)
        rows.append((mech, built, rejected, worst * 1e3, fmt(worst_at), worst_rej * 1e3))
        print(f"{mech:9s} built {built:5d}  rejected {rejected:4d}  max {worst * 1e3:7.2f} ms "
              f"at {fmt(worst_at)}; max reject {worst_rej * 1e3:.2f} ms", flush=True)
    overall = max(r[3] for r in rows)
    lines = ["# Construction time across the allowed ranges", "",
             "`python bench/construction.py" + (" --quick" if args.quick else "") + "`: best of "
             f"{args.repeat} per grid point, modules already imported; target {TARGET_MS:.0f} ms.",
             "", "| mechanism | points built | points rejected | max build (ms) | at | "
             "max reject (ms) |", "|---|---:|---:|---:|---|---:|"]
    lines += [f"| {m} | {b} | {r} | {w:.2f} | {at} | {rej:.2f} |"
              for m, b, r, w, at, rej in rows]
    lines += ["", f"Worst over all mechanisms: {overall:.2f} ms "
              f"({'within' if overall <= TARGET_MS else 'OVER'} the {TARGET_MS:.0f} ms target)."]
    write_results("construction", lines)
    print(lines[-1])


if __name__ == "__main__":
    main()
