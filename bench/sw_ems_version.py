"""CPU of Square Wave's EMS reconstruction of a new state version: main's (the dense
transition matrix, a warm start mixed with 0.1 % of the uniform) vs now
(:class:`ldpcore.numeric.em.SWChannel`, its products in O(bins + out_bins), and a 0.01 %
mix), side by side in one run, on the API bench's own SW collection (d = 1,024,
n = 10^6, flushes of 1,000 reports; ``query_api.bench``).

Run from the repository root::

    .venv/bin/python bench/sw_ems_version.py [--versions 40]

Each version is the previous state plus one flush; each method warm-starts from its own
previous reconstruction (as ``SquareWave.distribution`` does).  Prints CPU per version
(``time.process_time``, median and mean), EM steps, the cold first version (neither
counting the channel's construction), the largest total variation to main's
reconstruction of a version, and each one's distance to a cold start at the last version.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ldpcore.numeric import em  # noqa: E402
from query_api import bench as B  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--versions", type=int, default=40)
    args = ap.parse_args()
    spec = B._spec("x", "sw")
    o = spec.oracle()
    rng = np.random.default_rng(1)
    state = B._state(spec, "sw", B.N, rng)
    deltas = [B._state(spec, "sw", B.FLUSH_REPORTS, rng) for _ in range(4)]
    dense = o.matrix()
    fast = em.SWChannel(o.p, o.q, o.b, o.domain_size, o.out_bins)
    uniform = np.full(o.domain_size, 1.0 / o.domain_size)

    def main_mix(x: np.ndarray) -> np.ndarray:
        # main mixed a warm start with 0.1 % of the uniform; em_reconstruct adds 0.01 %
        return np.asarray((0.999 * x / x.sum() + 0.0009 * uniform) / 0.9999)

    def as_is(x: np.ndarray) -> np.ndarray:
        return x

    methods = {"dense, 0.1 % mix (main)": (dense, main_mix),
               "SWChannel, 0.1 % mix": (fast, main_mix),
               "SWChannel, 0.01 % mix (now)": (fast, as_is)}
    c = state.counts.astype(float)
    last, cold = {}, {}
    for k, (m, _) in methods.items():  # the first version: a cold start
        t = time.process_time()
        last[k] = em.em_reconstruct(m, c)
        cold[k] = time.process_time() - t
    cpu: dict[str, list[float]] = {k: [] for k in methods}
    steps = {k: 0 for k in methods}
    tv = {k: 0.0 for k in methods}
    step = em._em_step
    base = next(iter(methods))

    for v in range(args.versions):
        state = state + deltas[v % 4]
        c = state.counts.astype(float)
        for k, (m, mix) in methods.items():
            calls = [0]

            def counted(*a: object, _calls: list[int] = calls) -> object:
                _calls[0] += 1
                return step(*a)  # type: ignore[arg-type]

            em._em_step = counted  # type: ignore[assignment]
            t = time.process_time()
            last[k] = em.em_reconstruct(m, c, start=mix(last[k]))
            cpu[k].append(time.process_time() - t)
            em._em_step = step
            steps[k] += calls[0]
        for k in methods:
            tv[k] = max(tv[k], 0.5 * float(np.abs(last[k] - last[base]).sum()))
    cold_now = em.em_reconstruct(fast, c)
    print(f"SW EMS per new version, d = {o.domain_size}, out_bins = {o.out_bins}, "
          f"eps = {o.epsilon}, n = {B.N:,} + {B.FLUSH_REPORTS:,}/version, "
          f"{args.versions} versions")
    print("| method | CPU/version median (ms) | mean (ms) | EM steps/version | cold (ms) "
          "| max TV to main's | TV to cold, last version |")
    print("|---|---|---|---|---|---|---|")
    for k in methods:
        print(f"| {k} | {1e3 * float(np.median(cpu[k])):.2f} | "
              f"{1e3 * float(np.mean(cpu[k])):.2f} | {steps[k] / args.versions:.1f} | "
              f"{1e3 * cold[k]:.0f} | {tv[k]:.1e} | "
              f"{0.5 * float(np.abs(last[k] - cold_now).sum()):.1e} |")
    now = list(methods)[-1]
    ratio = float(np.median(cpu[base])) / float(np.median(cpu[now]))
    print(f"ratio main / now (median CPU per version): {ratio:.1f}x")


if __name__ == "__main__":
    main()
