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

Times are the best of ``--repeat`` runs, in milliseconds.  Then the accuracy of both
methods at D = 1024, ε = 1 (``--runs`` states per cell, drawn with ``sample_state``):
mean squared error of the CDF (all D points), of the histogram (leaves), of range
answers of lengths 1, 16, 128 and 512 (30 random ranges each), and of the 0.1, 0.5 and
0.9 quantiles (in bins²), on Beta(2, 5)- and Zipf(1.1)-shaped data.  Results: stdout and
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


def zipf_distribution(d: int) -> np.ndarray:
    p = 1.0 / np.arange(1, d + 1) ** 1.1
    return np.asarray(p / p.sum(), dtype=np.float64)


def accuracy(runs: int, epsilon: float) -> list[str]:
    d = 1024
    rng = np.random.default_rng(0)
    lengths = (1, 16, 128, 512)
    spans = {r: [(int(lo), int(lo) + r - 1) for lo in rng.integers(0, d - r + 1, 30)]
             for r in lengths}
    qs = (0.1, 0.5, 0.9)
    configs: list[tuple[str, dict[str, Any]]] = [
        ("hh", {}), ("hh", {"base": "olh"}), ("hh", {"fanout": 4, "consistency": False}),
        ("haar", {})]
    kinds = ["cdf", "hist", *[f"range {r}" for r in lengths], "quantile"]
    head = ("| data | n | oracle | " + " | ".join(kinds) + " |")
    out = [f"## Accuracy at D = {d}, ε = {epsilon}: MSE unbiased → consistent (ratio)", "",
           f"{runs} states per row; quantile errors in bins².", "", head,
           "|" + "---|" * (3 + len(kinds))]
    print(head)
    for data, dist in (("beta", beta_distribution(d)), ("zipf", zipf_distribution(d))):
        true_cdf = np.concatenate([[0.0], np.cumsum(dist)])
        true_q = [int(np.searchsorted(true_cdf[1:], q)) for q in qs]
        for n in (10**5, 10**6):
            for mech, params in configs:
                o: Any = ldpcore.make_oracle(mech, epsilon=epsilon, domain_size=d, **params)
                gen = np.random.default_rng(1)
                err: dict[str, dict[str, list[float]]] = {"unbiased": {}, "consistent": {}}
                for _ in range(runs):
                    st = o.sample_state(dist, n, gen)
                    for m, e in err.items():
                        c = o.cdf(st, m)
                        e.setdefault("cdf", []).append(float(np.mean((c - true_cdf[1:]) ** 2)))
                        e.setdefault("hist", []).append(
                            float(np.mean((o.leaves(st, m) - dist) ** 2)))
                        for r, sp in spans.items():
                            got = np.array([o.range_query(st, lo, hi, m) for lo, hi in sp])
                            want = np.array([true_cdf[hi + 1] - true_cdf[lo] for lo, hi in sp])
                            e.setdefault(f"range {r}", []).append(
                                float(np.mean((got - want) ** 2)))
                        e.setdefault("quantile", []).append(float(np.mean(
                            [(o.quantile(st, q, m) - t) ** 2 for q, t in zip(qs, true_q,
                                                                               strict=True)])))
                name = mech + "".join(f" {k}={v}" for k, v in params.items())
                cells = []
                for k in kinds:
                    a, b = np.mean(err["unbiased"][k]), np.mean(err["consistent"][k])
                    cells.append(f"{a:.2g} → {b:.2g} ({b / a:.2f})")
                row = f"| {data} | {n:.0e} | {name} | " + " | ".join(cells) + " |"
                print(row, flush=True)
                out.append(row)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--log-d", type=int, nargs="+", default=[10, 16, 20])
    ap.add_argument("--log-n", type=int, default=20)
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--runs", type=int, default=40, help="states per accuracy cell")
    ap.add_argument("--skip-accuracy", action="store_true")
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
              "recomputes the cumulative sum (O(D)).", ""]
    if not args.skip_accuracy:
        lines += accuracy(args.runs, args.epsilon)
    write_results("range_consistent", lines)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
