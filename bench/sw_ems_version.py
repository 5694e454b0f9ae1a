"""CPU of Square Wave's EMS reconstruction of a new state version: the dense transition
matrix vs :class:`ldpcore.numeric.em.SWChannel` (its products in O(bins + out_bins)),
side by side in one run, on the API bench's own SW collection (d = 1,024, n = 10^6, flushes
of 1,000 reports; ``query_api.bench``).

Run from the repository root::

    .venv/bin/python bench/sw_ems_version.py [--versions 40]

Each version is the previous state plus one flush; each method warm-starts from its own
previous reconstruction (as ``SquareWave.distribution`` does).  Prints CPU per version
(``time.process_time``, median and mean), EM steps, the cold first version (neither
counting the channel's construction), and the largest total variation between the two
methods' reconstructions of a version.
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
    channels = {"dense": dense, "SWChannel": fast}
    c = state.counts.astype(float)
    last, cold = {}, {}
    for k, m in channels.items():  # the first version: a cold start
        t = time.process_time()
        last[k] = em.em_reconstruct(m, c)
        cold[k] = time.process_time() - t
    cpu: dict[str, list[float]] = {k: [] for k in channels}
    steps = {k: 0 for k in channels}
    tv = 0.0
    step = em._em_step

    for v in range(args.versions):
        state = state + deltas[v % 4]
        c = state.counts.astype(float)
        for k, m in channels.items():
            calls = [0]

            def counted(*a: object, _calls: list[int] = calls) -> object:
                _calls[0] += 1
                return step(*a)  # type: ignore[arg-type]

            em._em_step = counted  # type: ignore[assignment]
            t = time.process_time()
            last[k] = em.em_reconstruct(m, c, start=last[k])
            cpu[k].append(time.process_time() - t)
            em._em_step = step
            steps[k] += calls[0]
        tv = max(tv, 0.5 * float(np.abs(last["dense"] - last["SWChannel"]).sum()))
    print(f"SW EMS per new version, d = {o.domain_size}, out_bins = {o.out_bins}, "
          f"eps = {o.epsilon}, n = {B.N:,} + {B.FLUSH_REPORTS:,}/version, "
          f"{args.versions} versions")
    print("| channel | CPU/version median (ms) | mean (ms) | EM steps/version | cold (ms) |")
    print("|---|---|---|---|---|")
    for k in channels:
        print(f"| {k} | {1e3 * float(np.median(cpu[k])):.2f} | "
              f"{1e3 * float(np.mean(cpu[k])):.2f} | {steps[k] / args.versions:.1f} | "
              f"{1e3 * cold[k]:.0f} |")
    ratio = float(np.median(cpu["dense"])) / float(np.median(cpu["SWChannel"]))
    print(f"ratio (median): {ratio:.1f}x; largest TV between the two: {tv:.2e}")


if __name__ == "__main__":
    main()
