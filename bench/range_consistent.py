"""Cost of the consistent range estimates and of the exact state samplers (issue 14).

    .venv/bin/python bench/range_consistent.py                  # D = 2^10, 2^16, 2^20
    .venv/bin/python bench/range_consistent.py --log-d 10 16 --repeat 5

For each range oracle and domain size: a state of n reports is drawn with
``sample_state`` (Beta(2, 5)-shaped data), then the cold (uncached) cost of

* ``unbiased cdf``: today's answer;
* ``raw levels``: the per-level base-oracle estimates (hh only; shared by both methods);
* ``solve``: the exact non-negative weighted least squares on the tree (hh) or the
  simplex projection (haar), i.e. the extra cost of ``method="consistent"``;
* ``consistent cdf``: everything from the state (raw levels + solve + cumsum), cold;
* ``cached``: a second consistent query on the same state (one-entry cache).

Times are the best of ``--repeat`` runs, in milliseconds.  Results: stdout and
bench/results/range_consistent.md.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from _results import write_results

import ldpcore
from ldpcore.consistency.hierarchy import tree_nonneg_wls


def best_ms(fn: Callable[[], Any], repeat: int) -> float:
    out = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        out = min(out, time.perf_counter() - t)
    return out * 1e3


def beta_distribution(d: int) -> np.ndarray:
    x = (np.arange(d) + 0.5) / d
    p = x * (1 - x) ** 4  # Beta(2, 5)
    return np.asarray(p / p.sum(), dtype=np.float64)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--log-d", type=int, nargs="+", default=[10, 16, 20])
    ap.add_argument("--log-n", type=int, default=20)
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    n = 2**args.log_n
    configs: list[tuple[str, dict[str, Any]]] = [
        ("hh", {"base": "hrr"}), ("hh", {"base": "olh"}), ("hh", {"base": "hrr", "fanout": 4}),
        ("haar", {})]
    head = ("| D | oracle | sample_state | unbiased cdf | raw levels | solve | "
            "consistent cdf (cold) | cached |")
    lines = [f"# Consistent range estimates: cost at ε = {args.epsilon}, n = 2^{args.log_n}",
             "", "Milliseconds, best of "
             f"{args.repeat}; one core of a shared 2-core machine.", "", head,
             "|---|---|---|---|---|---|---|---|"]
    print(head)
    for log_d in args.log_d:
        d = 2**log_d
        dist = beta_distribution(d)
        for mech, params in configs:
            o: Any = ldpcore.make_oracle(mech, epsilon=args.epsilon, domain_size=d, **params)
            name = mech + "".join(f" {k}={v}" for k, v in params.items())
            if mech == "hh":
                name += f" (B={o.fanout}, h={o.height})"
            rng = np.random.default_rng(1)
            t_sample = best_ms(lambda: o.sample_state(dist, n, rng), args.repeat)  # noqa: B023
            st = o.sample_state(dist, n, rng)
            t_unb = best_ms(lambda: o.cdf(st), args.repeat)  # noqa: B023
            if mech == "hh":
                raw = o._raw_levels(st)
                w = o.level_weights(st)
                t_raw = best_ms(lambda: o._raw_levels(st), args.repeat)  # noqa: B023
                t_solve = best_ms(lambda: tree_nonneg_wls(raw, w, o.fanout, d),  # noqa: B023
                                  args.repeat)
                raw_s = f"{t_raw:.1f}"
            else:
                t_solve = best_ms(lambda: o._fit_consistent(st), args.repeat)  # noqa: B023
                raw_s = "–"

            def cold() -> None:
                o._consistent_cache = None  # noqa: B023
                o.cdf(st, method="consistent")  # noqa: B023

            t_cold = best_ms(cold, args.repeat)
            t_warm = best_ms(lambda: o.cdf(st, method="consistent"), args.repeat)  # noqa: B023
            row = (f"| 2^{log_d} | {name} | {t_sample:.1f} | {t_unb:.1f} | {raw_s} | "
                   f"{t_solve:.1f} | {t_cold:.1f} | {t_warm:.2f} |")
            print(row, flush=True)
            lines.append(row)
    lines += ["", "`cached` still compares the state's counts with the cached copy and "
              "recomputes the cumulative sum (O(D))."]
    write_results("range_consistent", lines)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
