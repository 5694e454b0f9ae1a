"""Range oracles at scale: D = 2^22 and n = 2^26 reports on one machine (issue #3's bar).

    .venv/bin/python bench/range_scale.py                 # D = 2^22, n = 2^26
    .venv/bin/python bench/range_scale.py --log-d 16 --log-n 20

Devices are simulated in chunks (2^22 values at a time), so memory stays O(D + chunk),
never O(n·D).  For each oracle: perturb and aggregate throughput, state size, time of
cdf (all D prefix answers), one range query and a median, peak resident memory, and the
error of a few range answers against the truth with their analytic standard errors.
Results: stdout and bench/results/range_scale.md.
"""

from __future__ import annotations

import argparse
import math
import resource
import time

import numpy as np
from _results import write_results

import ldpcore


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--log-d", type=int, default=22)
    ap.add_argument("--log-n", type=int, default=26)
    ap.add_argument("--epsilon", type=float, default=1.0)
    args = ap.parse_args()
    d, n = 2**args.log_d, 2**args.log_n
    chunk = min(n, 1 << 22)
    configs = [("hh", {"fanout": 4}), ("hh", {"fanout": 16}), ("haar", {})]
    lines = [f"# Range oracles at D = 2^{args.log_d}, n = 2^{args.log_n} "
             f"({n:,} reports), ε = {args.epsilon}", "",
             "Cauchy data (centre 0.4·D, scale D/10, as Cormode et al.), perturbed and "
             f"aggregated in chunks of {chunk:,}.", "",
             "| oracle | perturb M/s | aggregate M/s | state cells | cdf s | range s | "
             "median s | peak RSS MB | max |error|/SE over 5 ranges |",
             "|---|---|---|---|---|---|---|---|---|"]
    for mech, params in configs:
        o = ldpcore.make_oracle(mech, epsilon=args.epsilon, domain_size=d, **params)
        rng = np.random.default_rng(1)
        truth = np.zeros(d, dtype=np.int64)
        state = o.new_state()
        t_p = t_a = 0.0
        for _ in range(n // chunk):
            x = np.floor(0.4 * d + d / 10 * rng.standard_cauchy(chunk))
            x = x[(x >= 0) & (x < d)].astype(np.int64)
            truth += np.bincount(x, minlength=d)
            t0 = time.perf_counter()
            rep = o.perturb(x, rng=rng)
            t1 = time.perf_counter()
            state += o.aggregate(rep)
            t_a += time.perf_counter() - t1
            t_p += t1 - t0
            del rep
        t0 = time.perf_counter()
        o.cdf(state)
        t_cdf = time.perf_counter() - t0
        t0 = time.perf_counter()
        o.range_query(state, d // 4, d // 2)
        t_rq = time.perf_counter() - t0
        t0 = time.perf_counter()
        o.quantile(state, 0.5)
        t_q = time.perf_counter() - t0
        cum = np.concatenate([[0], np.cumsum(truth)]) / state.n
        worst = 0.0
        for lo, hi in ((0, d - 1), (d // 4, d // 2), (d // 3, d // 3 + d // 100),
                       (0, d // 8), (d // 2, d - 1)):
            est = o.range_query(state, lo, hi)
            se = math.sqrt(o.range_variance(state.n, lo, hi))
            worst = max(worst, abs(est - (cum[hi + 1] - cum[lo])) / se)
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        name = f"{mech} {params}" if params else mech
        lines.append(f"| {name} | {state.n / t_p / 1e6:.1f} | {state.n / t_a / 1e6:.1f} | "
                     f"{state.counts.size:,} | {t_cdf:.2f} | {t_rq:.2f} | {t_q:.2f} | "
                     f"{rss:.0f} | {worst:.2f} |")
        print(lines[-1], flush=True)
    write_results("range_scale", lines)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
