"""Defaults chosen by expected error: MSE of every method vs ``auto`` vs ``base``, the
coverage of the served intervals, and the cold cost of each answer kind.

Run from the repository root::

    .venv/bin/python bench/defaults.py                 # all three tables
    .venv/bin/python bench/defaults.py --quick         # fewer trials (smoke test)
    .venv/bin/python bench/defaults.py --part mse      # or coverage / timing

Prints Markdown and writes it to ``bench/results/defaults.md`` (``--out``).

* **MSE** (``--trials`` collections per cell, default 100, ε = 1): datasets Zipf(1.1) and
  uniform over 64 values and the real histograms of ``/work/shared/data/real_histograms.json``; each
  collection is n i.i.d. reports from the dataset's distribution, drawn exactly with
  ``sample_state`` (n = the population for the Adult and Statlog attributes, 10^6 for the
  emoji counts).  Queries: all d frequencies (squared error summed over the domain), the
  top-2 set and a fixed arbitrary set (every fourth value).  Errors are against the
  distribution.  ``auto`` is :func:`ldpcore.intervals.answer`'s default; the table shows
  MSE relative to ``base`` (< 1 is better) and the best fixed method.
* **Coverage** (``--collections`` per mechanism, d = 16, Zipf 1.2, n = 4,000, ε = 1, real
  perturbation of a population; truth = that population's frequencies): share of 95 %
  intervals holding the truth, for the default answers and, for comparison, the plug-in
  intervals served before (the guideline's method ± 1.96 analytic standard errors:
  base-cut for frequencies, power-ns for sets).
* **Timing**: cold cost (no cache) of one answer, best of 3, per answer kind and d.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import zlib
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import ldpcore  # noqa: E402
from ldpcore.intervals import answer, method_answers  # noqa: E402

ROOT = Path(__file__).resolve().parent
DEFAULT_DATA = Path("/work/shared/data/real_histograms.json")
RESULTS = ROOT / "results"
DEFAULT_OUT = RESULTS / "defaults.md"
MECHANISMS = ("grr", "oue", "olh", "hr")
METHODS = ldpcore.POSTPROCESS_METHODS


def datasets(path: Path) -> list[tuple[str, np.ndarray, int]]:
    """(name, distribution, n) of every dataset."""
    out = []
    for name, f in (("zipf1.1-d64", np.arange(1, 65) ** -1.1), ("uniform-d64", np.ones(64))):
        out.append((name, f / f.sum(), 100_000))
    if path.exists():
        for e in json.loads(path.read_text())["datasets"]:
            counts = np.asarray(e["counts"], dtype=np.float64)
            if counts.size < 2:
                continue
            n = int(e["n"]) if e["n"] <= 10**6 else 10**6
            out.append((e["name"], counts / counts.sum(), n))
    return out


def queries(f: np.ndarray) -> list[tuple[str, np.ndarray | None]]:
    order = np.argsort(-f, kind="stable")
    return [("full", None), ("top-2", order[:2]), ("every-4th", np.arange(0, f.size, 4))]


def mse_table(trials: int, data: Path) -> list[str]:
    lines = ["## MSE relative to base (ε = 1; < 1 is better)", "",
             "auto ± its Monte-Carlo standard error (paired over the collections: "
             "sd(SE_auto − SE_base) / √trials / MSE_base).", "",
             "| dataset | d | n | mechanism | query | auto | best fixed | worst fixed | "
             "auto picks |", "|---|---|---|---|---|---|---|---|---|"]
    worst_auto, worst_cell = 0.0, ""
    above: list[tuple[str, float, float]] = []
    cells = 0
    for name, f, n in datasets(data):
        d = f.size
        for mech in MECHANISMS:
            oracle = ldpcore.make_oracle(mech, epsilon=1.0, domain_size=d)
            var0 = oracle.variance(n)
            slope = oracle.variance(n, 1.0) - var0
            rng = np.random.default_rng(zlib.crc32(f"{name}|{mech}".encode()))
            for qname, idx in queries(f):
                truth = f if idx is None else np.array([f[idx].sum()])
                sse = {m: 0.0 for m in (*METHODS, "auto")}
                picks: dict[str, int] = {}
                paired = np.zeros(trials)
                for t in range(trials):
                    s = oracle.sample_state(f, n, rng=rng)
                    raw = oracle.estimate(s)[None, :]
                    for m in METHODS:
                        a = method_answers(raw, m, idx, variance=var0, variance_slope=slope)[0]
                        sse[m] += float(((a - truth) ** 2).sum()) / trials
                    au = answer(oracle, s, indices=idx)
                    sse["auto"] += float(((au.estimate - truth) ** 2).sum()) / trials
                    b = raw[0] if idx is None else raw[0, idx].sum(keepdims=True)
                    paired[t] = float(((au.estimate - truth) ** 2).sum() - ((b - truth) ** 2).sum())
                    picks[au.method] = picks.get(au.method, 0) + 1
                base = sse["base"]
                rel = {m: v / base for m, v in sse.items()}
                best = min(METHODS, key=lambda m: rel[m])
                worst = max(METHODS, key=lambda m: rel[m])
                se = float(paired.std(ddof=1)) / np.sqrt(trials) / base
                cell = f"{name} {mech} {qname}"
                cells += 1
                if rel["auto"] > worst_auto:
                    worst_auto, worst_cell = rel["auto"], f"{cell} ({rel['auto']:.3f} ± {se:.3f})"
                if rel["auto"] > 1.0 + 1e-9:
                    above.append((cell, rel["auto"], se))
                top = ", ".join(f"{m} {c}" for m, c in sorted(picks.items(), key=lambda x: -x[1]))
                lines.append(f"| {name} | {d} | {n} | {mech} | {qname} | "
                             f"{rel['auto']:.3f} ± {se:.3f} | "
                             f"{best} {rel[best]:.3f} | {worst} {rel[worst]:.2f} | {top} |")
            print(lines[-1], flush=True)
    beyond = [c for c in above if c[1] - 2 * c[2] > 1.0]
    lines += ["", f"{trials} collections per cell. auto's MSE exceeds base's in {len(above)} of "
              f"{cells} cells, by more than 2 standard errors in {len(beyond)}"
              + ("" if not above else ": " + "; ".join(
                  f"{c} {r:.3f} ± {e:.3f}" for c, r, e in above)) + ".",
              f"Largest auto/base MSE ratio: {worst_cell}.", ""]
    return lines


def coverage_table(collections: int) -> list[str]:
    d, n = 16, 4_000
    f = np.arange(1, d + 1) ** -1.2
    f /= f.sum()
    cells = [("top", 0, None), ("middle", 8, None), ("tail", 15, None),
             ("top-2", None, [0, 1]), ("{1,8,15}", None, [1, 8, 15])]
    lines = [f"## Coverage of 95 % intervals ({collections} collections, d = {d}, Zipf 1.2, "
             f"n = {n}, ε = 1)", "",
             "| mechanism | " + " | ".join(c[0] for c in cells) + " | old plug-in: "
             + " | ".join(c[0] for c in cells) + " |",
             "|---|" + "---|" * (2 * len(cells))]
    for mech in ("grr", "oue", "olh", "hr", "hrr", "sue", "ss", "cms", "hcms", "blh"):
        o = ldpcore.make_oracle(mech, epsilon=1.0, domain_size=d)
        rng = np.random.default_rng(31337)
        hits = np.zeros(len(cells))
        old = np.zeros(len(cells))
        var0 = o.variance(n)
        for _ in range(collections):
            vals = rng.choice(d, size=n, p=f)
            truth = np.bincount(vals, minlength=d) / n
            s = o.aggregate(o.perturb(vals, rng=rng))
            full = answer(o, s)
            raw = o.estimate(s)
            se = np.sqrt([o.variance(n, float(np.clip(x, 0, 1))) for x in raw])
            cut = ldpcore.postprocess(raw, "base-cut", variance=var0)
            for k, (_, i, idx) in enumerate(cells):
                if i is not None:
                    assert full.low is not None and full.high is not None
                    hits[k] += full.low[i] <= truth[i] <= full.high[i]
                    old[k] += abs(cut[i] - truth[i]) <= 1.96 * se[i]
                else:
                    a = answer(o, s, indices=idx)
                    t = truth[idx].sum()
                    assert a.low is not None and a.high is not None
                    hits[k] += a.low[0] <= t <= a.high[0]
                    p = ldpcore.subset_query(raw, idx, "power-ns", variance=var0)
                    old[k] += abs(p - t) <= 1.96 * float(np.sqrt((se[idx] ** 2).sum()))
        row = " | ".join(f"{h / collections:.3f}" for h in hits)
        row_old = " | ".join(f"{h / collections:.3f}" for h in old)
        lines.append(f"| {mech} | {row} | {row_old} |")
        print(lines[-1], flush=True)
    return lines + [""]


def timing_table() -> list[str]:
    lines = ["## Cold cost of one answer (ms, best of 3; R = 200; selection: the fit × 50 and 8 "
             "resimulated worlds × 25, a subset first 2 tilted worlds × 25)", "",
             "| d | mechanism | full auto | subset auto | full norm-sub | full power-ns | "
             "base |", "|---|---|---|---|---|---|---|"]
    for d in (64, 845, 1024):
        f = np.arange(1, d + 1) ** -1.1
        f /= f.sum()
        for mech in ("grr", "oue", "olh", "hr", "hrr", "ss", "cms", "hcms"):
            o = ldpcore.make_oracle(mech, epsilon=1.0, domain_size=d)
            s = o.sample_state(f, 100_000, rng=1)
            cols: list[str] = []
            for kw in ({}, {"indices": [0, 1, 2]}, {"method": "norm-sub"},
                       {"method": "power-ns"}, {"method": "base"}):
                best, used = np.inf, ""
                for rep in range(3):
                    t = time.perf_counter()
                    a = answer(o, s, rng=rep, **kw)  # type: ignore[arg-type]
                    best = min(best, time.perf_counter() - t)
                    used = a.method if a.low is not None else f"{a.method}, no interval"
                cols.append(f"{1000 * best:.0f} ({used})")
            lines.append(f"| {d} | {mech} | " + " | ".join(cols) + " |")
            print(lines[-1], flush=True)
    return lines + [""]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="5 trials, 100 collections")
    ap.add_argument("--part", choices=("mse", "coverage", "timing", "all"), default="all")
    ap.add_argument("--trials", type=int, default=100)
    ap.add_argument("--collections", type=int, default=600)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = ap.parse_args(argv)
    trials, colls = (5, 100) if args.quick else (args.trials, args.collections)
    lines: list[str] = ["# Defaults by expected error, and honest intervals", "",
                        f"Generated by `bench/defaults.py` (MSE: --trials {trials}; coverage: "
                        f"--collections {colls}; timing: best of 3 on a shared 2-core "
                        "machine).", ""]
    parts: dict[str, Any] = {"mse": lambda: mse_table(trials, args.data),
                             "coverage": lambda: coverage_table(colls),
                             "timing": timing_table}
    for name, fn in parts.items():
        if args.part in (name, "all"):
            lines += fn()
    print("\n".join(lines))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n")
    print(f"written to {args.out}")


if __name__ == "__main__":
    main()
