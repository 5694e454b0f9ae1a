"""Numeric distributions under ε-LDP: Square Wave (EMS, EM) against a categorical
baseline, and means from SW, PM and Duchi et al.  Wasserstein and KS distances.

    .venv/bin/python bench/numeric.py            # n = 100,000, 5 runs (~2 min)
    .venv/bin/python bench/numeric.py --quick    # n = 20,000, 2 runs

Values in [0, 1] cut into 256 bins (SW reports one of 1024 output buckets).  Datasets:
Beta(5, 2) (as in Li et al. 2020), a two-Gaussian mixture and a clipped log-normal
("income"-like, heavy right tail).  Distribution methods: SW + EMS (default), SW + EM
(run to convergence), and OLH over the 256 bins + Norm-Sub (the categorical approach the
slides show as "Result of Norm sub").  Metrics: W1 = Σ|F − F̂| · bin width and
KS = max|F − F̂|; deciles' quantile error |F(x̂_q) − q|; mean absolute error of the
mean (SW unbiased, SW EMS, PM, Duchi).  Results: stdout and bench/results/numeric.md.
"""

from __future__ import annotations

import time

import numpy as np
from _results import bench_parser, parse_bench_args, write_results

import ldpcore
from ldpcore.base import Reports
from ldpcore.numeric import ks_distance, wasserstein_distance

BINS = 256


def dataset(name: str, n: int, rng: np.random.Generator) -> np.ndarray:
    if name == "beta(5,2)":
        return rng.beta(5, 2, n)
    if name == "mixture":
        a = rng.normal(0.3, 0.05, n)
        b = rng.normal(0.7, 0.1, n)
        return np.clip(np.where(rng.random(n) < 0.4, a, b), 0, 1)
    return np.clip(rng.lognormal(-2.0, 0.7, n), 0, 1)  # "income": long right tail


def run(name: str, eps: float, n: int, seed: int) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    x = dataset(name, n, rng)
    ems = ldpcore.make_oracle("sw", epsilon=eps, bins=BINS)
    em = ldpcore.make_oracle("sw", epsilon=eps, bins=BINS, smoothing=False)
    bins = ems.to_bins(x)
    truth = np.bincount(bins, minlength=BINS) / n
    true_mean = float(ems.bin_centers()[bins].mean())
    out: dict[str, float] = {}
    rep = ems.perturb(bins, rng=rng)
    st = ems.aggregate(rep)
    st_em = em.aggregate(Reports("sw", em.fingerprint, rep.columns))
    olh = ldpcore.make_oracle("olh", epsilon=eps, domain_size=BINS)
    st_olh = olh.aggregate(olh.perturb(bins, rng=rng))
    raw = olh.estimate(st_olh)
    dists = {"SW+EMS": ems.distribution(st), "SW+EM": em.distribution(st_em),
             "OLH+Norm-Sub": ldpcore.postprocess(raw, "norm-sub", n=n,
                                                 variance=olh.variance(n))}
    for k, d in dists.items():
        out[f"W1 {k}"] = wasserstein_distance(truth, d, bin_width=1 / BINS)
        out[f"KS {k}"] = ks_distance(truth, d)
    cdf_true = np.cumsum(truth)
    qerr = [abs(float(np.interp(ems.quantile(st, q), np.arange(1, BINS + 1) / BINS, cdf_true))
                - q) for q in np.arange(0.1, 0.95, 0.1)]
    out["decile q-error SW+EMS"] = float(np.mean(qerr))
    out["mean SW unbiased"] = abs(ems.mean(st) - true_mean)
    out["mean SW EMS"] = abs(ems.mean(st, "ems") - true_mean)
    for mech in ("pm", "duchi"):
        o = ldpcore.make_oracle(mech, epsilon=eps, bins=BINS)
        out[f"mean {mech.upper()}"] = abs(o.mean(o.aggregate(o.perturb(bins, rng=rng)))
                                          - true_mean)
    return out


def main() -> int:
    args = parse_bench_args(bench_parser(__doc__, n=100_000, runs=5, quick=(20_000, 2)))
    t0 = time.perf_counter()
    eps_list = (0.5, 1.0, 2.0, 4.0)
    lines = [f"# Numeric distributions: n = {args.n:,}, {BINS} bins, {args.runs} runs "
             "(mean over runs)", ""]
    for name in ("beta(5,2)", "mixture", "income"):
        table: dict[float, dict[str, float]] = {}
        for eps in eps_list:
            rows = [run(name, eps, args.n, seed) for seed in range(args.runs)]
            table[eps] = {k: float(np.mean([r[k] for r in rows])) for k in rows[0]}
        metrics = list(table[eps_list[0]])
        lines += [f"## {name}", "", "| metric | " + " | ".join(f"ε = {e}" for e in eps_list)
                  + " |", "|---|" + "---|" * len(eps_list)]
        lines += [f"| {m} | " + " | ".join(f"{table[e][m]:.4f}" for e in eps_list) + " |"
                  for m in metrics]
        lines.append("")
        print("\n".join(lines[-(len(metrics) + 5):]), flush=True)
    lines.append(f"Runtime {time.perf_counter() - t0:.0f} s.")
    write_results("numeric", lines)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
