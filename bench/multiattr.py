"""Several questions per user: partitioning users beats splitting ε (lecture slides, "On
answering multiple questions"; Wang et al., ICDE 2019, for numerical vectors).

    .venv/bin/python bench/multiattr.py            # n = 100,000, 5 runs (~5 min)
    .venv/bin/python bench/multiattr.py --quick    # n = 20,000, 2 runs (~10 s)

Each of n users holds m attributes.  *Partition users*: a user answers one sampled
attribute at ε (``multi``/``vector`` with sample = 1).  *Split ε*: a user answers all m
at ε/m (sample = m).  Total budget ε per user in both.

Data (synthetic, documented): categorical attributes have d = 16 values with a
Zipf(s = 1.1) distribution, each attribute's ranks permuted by its own seed; numeric
attributes are Beta(a_j, b_j) on [0, 1] mapped to [-1, 1], with (a_j, b_j) cycling
through (2, 5), (5, 2), (2, 2), (0.5, 0.5).  Fresh data every run; MSE is over every
attribute, value and run (means: max(4·runs, 64·runs/m) runs, so about 64·runs
estimates per cell).  Frequencies: OLH and GRR (each attribute its own
oracle); means: PM and Duchi (``vector``, continuous values).  "analytic" is the
expected MSE :math:`V(ε/k, n)·m/k + S^2 (m/k - 1)/(n - 1)` from the oracles' variance
formulas plus the variance of sampling the nk/m users who answer an attribute
(``ldpcore.multi.sample_variances``; for means, the per-report variance and the
population variance S^2 taken from the data).  Results: stdout and
bench/results/multiattr.md.
"""

from __future__ import annotations

import time

import numpy as np
from _results import bench_parser, parse_bench_args, write_results

import ldpcore
from ldpcore.multi import MultiAttribute, NumericVector, sample_variances
from ldpcore.multi.attributes import sampling_variance

D = 16
ATTRIBUTES = (1, 2, 4, 8, 16)
EPSILONS = (1.0, 4.0)
BETAS = ((2, 5), (5, 2), (2, 2), (0.5, 0.5))


def zipf(d: int, s: float = 1.1) -> np.ndarray:
    w = 1 / np.arange(1, d + 1) ** s
    return np.asarray(w / w.sum())


def categorical_data(n: int, m: int, rng: np.random.Generator) -> np.ndarray:
    p = zipf(D)
    return np.stack([np.random.default_rng(100 + j).permutation(D)[rng.choice(D, n, p=p)]
                     for j in range(m)], axis=1)


def numeric_data(n: int, m: int, rng: np.random.Generator) -> np.ndarray:
    return np.stack([2 * rng.beta(*BETAS[j % len(BETAS)], n) - 1 for j in range(m)], axis=1)


def freq_mse(mech: str, eps: float, n: int, m: int, k: int, runs: int, seed: int) -> float:
    o = ldpcore.make_oracle("multi", epsilon=eps, sample=k, attributes=[
        {"name": f"q{j}", "mechanism": mech, "domain_size": D} for j in range(m)])
    assert isinstance(o, MultiAttribute)
    rng = np.random.default_rng(seed)
    errs = []
    for _ in range(runs):
        vals = categorical_data(n, m, rng)
        st = o.aggregate(o.perturb_attributes(vals, rng=rng))
        for j, name in enumerate(o.attribute_names):
            truth = np.bincount(vals[:, j], minlength=D) / n
            errs.append(np.mean((o.attribute_frequencies(st, name) - truth) ** 2))
    return float(np.mean(errs))


def mean_mse(base: str, eps: float, n: int, m: int, k: int, runs: int, seed: int
             ) -> tuple[float, float]:
    o = ldpcore.make_oracle("vector", epsilon=eps, dimensions=m, sample=k, base=base)
    assert isinstance(o, NumericVector)
    rng = np.random.default_rng(seed)
    errs, analytic = [], []
    for _ in range(runs):
        x = numeric_data(n, m, rng)
        st = o.aggregate(o.perturb_vectors(x, rng=rng))
        errs.append(np.mean((o.means(st) - x.mean(axis=0)) ** 2))
        t2, s2 = (x ** 2).mean(axis=0), x.var(axis=0)
        analytic.append(np.mean([o._y_variance(float(a)) * m / k / n
                                 + sampling_variance(float(b), n, n * k / m)
                                 for a, b in zip(t2, s2, strict=True)]))
    return float(np.mean(errs)), float(np.mean(analytic))


def main() -> int:
    args = parse_bench_args(bench_parser(__doc__, n=100_000, runs=5, quick=(20_000, 2)))
    n, runs = args.n, args.runs
    t0 = time.perf_counter()
    lines = [f"# Partition users vs split ε: n = {n:,} users, {runs} runs", "",
             "MSE of one attribute's estimate (mean over attributes, values and runs); "
             "'gain' = split / partition (measured).  Data and method: "
             "`bench/multiattr.py` docstring.", ""]
    for eps in EPSILONS:
        for mech in ("olh", "grr"):
            lines += [f"## Frequencies, {mech.upper()}, d = {D}, ε = {eps}", "",
                      "| attributes m | partition (k=1) | analytic | split (k=m) | analytic "
                      "| gain |", "|---|---|---|---|---|---|"]
            for m in ATTRIBUTES:
                part = freq_mse(mech, eps, n, m, 1, runs, seed=m)
                split = freq_mse(mech, eps, n, m, m, runs, seed=1000 + m)
                # averaged over the d values: the oracles' variances are linear in f (so
                # at f = 1/d); the sampling term's spread is the mean of f(1 - f)
                p = zipf(D)
                an = sample_variances(mech, epsilon=eps, n=n, attributes=m, frequency=1 / D,
                                      spread=float(np.mean(p * (1 - p))), domain_size=D)
                lines.append(f"| {m} | {part:.3e} | {an[1]:.3e} | {split:.3e} | {an[m]:.3e} "
                             f"| {split / part:.2f}× |")
                print(lines[-1], flush=True)
            lines.append("")
        for base in ("pm", "duchi"):
            lines += [f"## Means, {base.upper()} on [-1, 1]^m, ε = {eps}", "",
                      "| dimensions m | partition (k=1) | analytic | split (k=m) | analytic "
                      "| gain |", "|---|---|---|---|---|---|"]
            for m in ATTRIBUTES:
                reps = max(4 * runs, 64 * runs // m)  # about 64·runs means per cell
                part, apart = mean_mse(base, eps, n, m, 1, reps, seed=m)
                split, asplit = mean_mse(base, eps, n, m, m, reps, seed=1000 + m)
                lines.append(f"| {m} | {part:.3e} | {apart:.3e} | {split:.3e} | {asplit:.3e} "
                             f"| {split / part:.2f}× |")
                print(lines[-1], flush=True)
            lines.append("")
    lines.append(f"Runtime {time.perf_counter() - t0:.0f} s.")
    write_results("multiattr", lines)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
