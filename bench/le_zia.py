"""Reproduce Tables II–IV of Le & Zia, "Discrete Distribution Estimation with Local
Differential Privacy: A Comparative Analysis" (MAE of k-RR, basic RAPPOR, CMS, k-subset
and HR on the Statlog and Adult attributes, ε ∈ {0.5, 1, 2}) with ldpcore.

Run from the repository root::

    .venv/bin/python bench/le_zia.py            # 100 runs per cell, as in the paper
    .venv/bin/python bench/le_zia.py --quick    # 10 runs per cell (smoke test)
    .venv/bin/python bench/le_zia.py --runs 30 --out /tmp/le_zia.md

Prints Markdown tables to stdout and writes them, with a summary on top, to
``bench/results/le_zia.md`` (or ``--out``).  The data is
``/work/shared/data/real_histograms.json`` (``--data``): each population is rebuilt from
its category counts (value i repeated counts[i] times), so n is the paper's population
size (690 for Statlog, 32,561 for Adult).  Run r (0-based) of every (dataset, ε,
mechanism) cell perturbs the population with ``np.random.default_rng(r)``.

Mechanisms (ldpcore names): k-RR = ``grr``, basic RAPPOR = ``sue``, CMS = ``cms``,
k-subset = ``ss``, HR = ``hr``.  The paper decodes k-RR with the constrained maximum
likelihood estimator of Kairouz et al.; the script scores the raw unbiased k-RR estimate
and every ldpcore post-processing method against the paper's k-RR column to find the one
that reproduces it.  A last section re-runs the other columns with the settings the paper's
implementations appear to have used (RAPPOR's default probabilities, fixed k = ⌊d/2⌋, negative
estimates clipped, ...).  The paper's numbers are typed in below (``PAPER_TABLES``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

import ldpcore  # noqa: E402
from ldpcore.frequency.unary import UnaryEncoding  # noqa: E402

ROOT = Path(__file__).resolve().parent
DEFAULT_DATA = Path("/work/shared/data/real_histograms.json")
DEFAULT_OUT = ROOT / "results" / "le_zia.md"

EPSILONS = (0.5, 1.0, 2.0)
TABLE_OF_EPS = {0.5: "II", 1.0: "III", 2.0: "IV"}
PAPER_RUNS = 100  # Statlog and Adult rows: "the average of the results from a hundred runs"

# (paper dataset, paper attribute, key in real_histograms.json, d in the paper's Table I),
# in the paper's row order.  The USCensus1990 rows are not reproduced (no data here).
DATASETS: tuple[tuple[str, str, str, int], ...] = (
    ("Statlog", "A4", "australian/A4", 3),
    ("Statlog", "A6", "australian/A6", 8),
    ("Statlog", "A5", "australian/A5", 14),
    ("Adult", "Race", "adult/race", 5),
    ("Adult", "Occ", "adult/occupation", 15),
    ("Adult", "Country", "adult/native-country", 42),
)
PAPER_N = {"Statlog": 690, "Adult": 32_561}

# Paper column -> ldpcore mechanism, in the paper's column order.
MECHS: tuple[tuple[str, str], ...] = (
    ("k-RR", "grr"), ("bRAPPOR", "sue"), ("CMS", "cms"), ("k-subset", "ss"), ("HR", "hr"),
)

# ---- the paper's numbers ------------------------------------------------------------------
# Le & Zia, Tables II (ε = 0.5), III (ε = 1) and IV (ε = 2), Statlog and Adult rows, typed
# from the paper text.  Per row: Mean Std. for k-RR, bRAPPOR, CMS, k-subset, HR.
PAPER_TABLES: dict[float, dict[str, str]] = {
    0.5: {  # TABLE II
        "A4": "0.067 0.036   0.05 0.024   0.109 0.054   0.063 0.037   0.078 0.048",
        "A6": "0.083 0.03    0.043 0.014  0.089 0.03    0.082 0.022   0.071 0.023",
        "A5": "0.083 0.013   0.05 0.01    0.086 0.021   0.085 0.014   0.061 0.011",
        "Race": "0.012 0.005   0.008 0.002  0.015 0.006   0.013 0.004   0.014 0.005",
        "Occ": "0.024 0.005   0.009 0.002  0.016 0.003   0.015 0.003   0.015 0.003",
        "Country": "0.008 0.002   0.005 0.001  0.01 0.002    0.01 0.001    0.013 0.002",
    },
    1.0: {  # TABLE III
        "A4": "0.033 0.02    0.05 0.023   0.044 0.025   0.034 0.02    0.106 0.04",
        "A6": "0.041 0.013   0.044 0.013  0.043 0.014   0.044 0.013   0.048 0.015",
        "A5": "0.054 0.011   0.049 0.011  0.049 0.01    0.051 0.009   0.046 0.008",
        "Race": "0.006 0.002   0.008 0.003  0.008 0.003   0.007 0.002   0.008 0.003",
        "Occ": "0.01 0.002    0.008 0.002  0.008 0.002   0.008 0.002   0.016 0.003",
        "Country": "0.005 0.001   0.005 0.001  0.005 0.001   0.006 0.001   0.008 0.001",
    },
    2.0: {  # TABLE IV
        "A4": "0.013 0.008   0.047 0.024  0.024 0.013   0.013 0.008   0.031 0.013",
        "A6": "0.018 0.005   0.047 0.014  0.025 0.006   0.027 0.008   0.029 0.008",
        "A5": "0.022 0.004   0.051 0.01   0.027 0.006   0.031 0.006   0.032 0.007",
        "Race": "0.003 0.001   0.008 0.003  0.004 0.002   0.004 0.001   0.055 0.002",
        "Occ": "0.003 0.001   0.009 0.002  0.004 0.001   0.005 0.001   0.006 0.001",
        "Country": "0.003 0.0     0.005 0.001  0.003 0.0     0.004 0.0     0.007 0.001",
    },
}


def paper_value(eps: float, attr: str, label: str) -> tuple[float, float]:
    """(mean, std) of the paper's cell for column ``label`` ("k-RR", "bRAPPOR", ...)."""
    nums = [float(x) for x in PAPER_TABLES[eps][attr].split()]
    i = [lab for lab, _ in MECHS].index(label)
    return nums[2 * i], nums[2 * i + 1]


# ---- decoders -----------------------------------------------------------------------------
METHODS: tuple[str, ...] = tuple(ldpcore.POSTPROCESS_METHODS)  # "base" = raw unbiased
MLE = "mle (exact)"  # k-RR only: Kairouz et al.'s constrained MLE
KRR_MAIN = MLE  # the decoder the paper states for its k-RR column


def krr_mle(counts: np.ndarray, p: float, q: float) -> np.ndarray:
    """Constrained MLE of k-RR (Kairouz et al. 2016): argmax Σ_y C_y log(q + (p−q) f_y).

    Over the simplex the KKT conditions give f_y = max(θ C_y − r, 0) with r = q/(p − q)
    and θ such that Σ f = 1; the support is the s largest counts, s the largest size
    whose smallest member stays positive.
    """
    r = q / (p - q)
    c = np.sort(counts.astype(np.float64))[::-1]
    s = np.arange(1, c.size + 1)
    theta = (1.0 + s * r) / np.cumsum(c)
    top = int(np.nonzero(theta * c - r > 0)[0][-1])
    out: np.ndarray = np.maximum(theta[top] * counts - r, 0.0)
    return out


def decode_all(oracle: Any, est: np.ndarray, n: int) -> dict[str, np.ndarray]:
    """Every ldpcore post-processing of ``est`` (and, for k-RR, the exact MLE two ways)."""
    v0 = oracle.variance(n)
    slope = oracle.variance(n, 1.0) - v0
    out: dict[str, np.ndarray] = {}
    for m in METHODS:
        kw = {"variance_slope": slope} if m == "mle-apx" else {}
        out[m] = ldpcore.postprocess(est, m, n=n, variance=v0, **kw)
    if oracle.mechanism == "grr":
        # Multinomial model Var ≈ π/(n(p−q)²), π = q + (p−q)f: a/b = q/(p−q) makes
        # ldpcore's mle-apx iteration the exact constrained MLE of k-RR.
        p, q = oracle.p, oracle.q
        out[MLE] = ldpcore.postprocess(est, "mle-apx", n=n, variance=q / (n * (p - q) ** 2),
                                       variance_slope=1.0 / (n * (p - q)))
    return out


# ---- the experiment -----------------------------------------------------------------------
def cms_width(d: int) -> int:
    """Smallest prime >= d: ldpcore's projective sketch then has r = 1, one row, no hashing."""
    m = max(d, 2)
    while any(m % i == 0 for i in range(2, math.isqrt(m) + 1)):
        m += 1
    return m


def oracle_params(mech: str, d: int) -> dict[str, Any]:
    return {"m": cms_width(d)} if mech == "cms" else {}


class RapporDefault(UnaryEncoding):
    """Basic one-time RAPPOR (one-hot, h = 1) with the RAPPOR library's default probabilities.

    Google RAPPOR's ``Params`` default to prob_p = 0.5, prob_q = 0.75 (instantaneous RR:
    a 1 bit is reported as 1 w.p. q, a 0 bit w.p. p) and prob_f = 0.5 (permanent RR).
    ``f = 0`` drops the permanent RR: a set bit is reported as 1 w.p. 0.75, an unset bit
    w.p. 0.5, a unary encoding with ε = ln(0.75·0.5 / (0.5·0.25)) = ln 3 ≈ 1.10, whatever ε
    the table asks for.  With f > 0 the bit first becomes 1 or 0 w.p. f/2 each.
    """

    mechanism = "rappor-default"

    def __init__(self, *, domain_size: int, f: float = 0.0) -> None:
        p_irr, q_irr = 0.5, 0.75
        p1 = q_irr * (1 - f / 2) + p_irr * f / 2  # P(report 1 | bit set)
        p0 = q_irr * f / 2 + p_irr * (1 - f / 2)  # P(report 1 | bit unset)
        super().__init__(epsilon=math.log(p1 * (1 - p0) / (p0 * (1 - p1))),
                         domain_size=domain_size)
        self.p, self.q = p1, p0


# Reconstruction of what the paper's implementations appear to have run: (paper column,
# key of our run, decoder, description).  "ss-half" = k-subset with k = max(1, ⌊d/2⌋).
RECON: tuple[tuple[str, str, str, str], ...] = (
    ("k-RR", "grr", MLE, "k-RR, constrained MLE"),
    ("bRAPPOR", "rappor-default", "base-pos",
     "RAPPOR default p=0.5, q=0.75, f=0 (ε = ln 3 for every table), negatives clipped"),
    ("CMS", "cms", "base-pos", "one-hot CMS at the table's ε, negatives clipped"),
    ("k-subset", "ss-half", "base-pos",
     "k-subset with fixed k = ⌊d/2⌋ at the table's ε, negatives clipped"),
    ("HR", "hr", "norm-mul", "HR, clip-and-normalize (the HR code's default decoder)"),
)
EXTRA_RUNS = ("rappor-default", "rappor-default-f", "ss-half")


def make(key: str, eps: float, d: int) -> Any:
    """The oracle of run ``key`` (a ldpcore mechanism or a reconstruction) at ε, d."""
    if key == "rappor-default":
        return RapporDefault(domain_size=d)
    if key == "rappor-default-f":  # with RAPPOR's default permanent RR f = 0.5 as well
        return RapporDefault(domain_size=d, f=0.5)
    if key == "ss-half":
        return ldpcore.make_oracle("ss", epsilon=eps, domain_size=d, subset_size=max(1, d // 2))
    return ldpcore.make_oracle(key, epsilon=eps, domain_size=d, **oracle_params(key, d))


def load_populations(path: Path) -> dict[str, dict[str, Any]]:
    data = {x["name"]: x for x in json.loads(path.read_text())["datasets"]}
    pops: dict[str, dict[str, Any]] = {}
    for ds, attr, key, d_paper in DATASETS:
        entry = data[key]
        counts = np.asarray(entry["counts"], dtype=np.int64)
        n = int(counts.sum())
        if n != entry["n"] or n != PAPER_N[ds] or counts.size != d_paper:
            raise SystemExit(f"{key}: n={n}, d={counts.size} differ from the paper's Table I")
        values = np.repeat(np.arange(counts.size), counts)
        pops[attr] = {"values": values, "f": counts / n, "n": n, "d": counts.size, "key": key}
    return pops


def run_cells(pops: dict[str, dict[str, Any]], runs: int) -> tuple[dict[Any, np.ndarray],
                                                                   dict[str, Any]]:
    """MAE of every (mechanism, decoder, dataset, ε) over ``runs`` seeded runs."""
    mae: dict[Any, np.ndarray] = {}
    info: dict[str, Any] = {"ss_k": {}, "cms": {}, "hr_K": {}, "mle_maxdiff": 0.0,
                            "cms_default": {}}
    for _, attr, _, _ in DATASETS:
        pop = pops[attr]
        values, f, n, d = pop["values"], pop["f"], pop["n"], pop["d"]
        for eps in EPSILONS:
            for mech in [m for _, m in MECHS] + list(EXTRA_RUNS):
                oracle = make(mech, eps, d)
                if mech == "ss":
                    info["ss_k"][attr, eps] = oracle.k
                if mech == "cms":
                    info["cms"][attr] = (oracle.m, oracle.k)
                if mech == "hr":
                    info["hr_K"][attr] = oracle.K
                acc: dict[str, list[float]] = {}
                for r in range(runs):
                    state = oracle.aggregate(oracle.perturb(values, rng=np.random.default_rng(r)))
                    est = oracle.estimate(state)
                    dec = decode_all(oracle, est, n)
                    if mech == "grr":
                        exact = krr_mle(state.counts, oracle.p, oracle.q)
                        diff = float(np.abs(exact - dec[MLE]).max())
                        info["mle_maxdiff"] = max(info["mle_maxdiff"], diff)
                    for name, vec in dec.items():
                        # The paper's MAE: (1/d) Σ_i |f̂_i − f_i|.
                        acc.setdefault(name, []).append(float(np.abs(vec - f).mean()))
                for name, lst in acc.items():
                    mae[mech, name, attr, eps] = np.asarray(lst)
        info["cms_default"][attr] = cms_default_check(values, f, n, d, 1.0, runs)
    return mae, info


def cms_default_check(values: np.ndarray, f: np.ndarray, n: int, d: int, eps: float,
                      runs: int) -> tuple[int, int, float] | str:
    """Sensitivity: CMS with ldpcore's default width (smallest prime >= √d, hash collisions)."""
    o = ldpcore.make_oracle("cms", epsilon=eps, domain_size=d)
    try:
        errs = [float(np.abs(o.estimate(o.aggregate(o.perturb(
            values, rng=np.random.default_rng(r)))) - f).mean()) for r in range(runs)]
    except Exception as exc:  # report, do not hide, a library failure
        return (f"default m={o.m} gives k={o.k} rows = d, and `cms.estimate` raises "
                f"{type(exc).__name__}: {exc}")
    return o.m, o.k, float(np.mean(errs))


# ---- comparison statistics ----------------------------------------------------------------
def stat(arr: np.ndarray) -> tuple[float, float]:
    """Mean and sample standard deviation (ddof = 1) over the runs."""
    return float(arr.mean()), float(arr.std(ddof=1)) if arr.size > 1 else 0.0


def consistent(ours: tuple[float, float], paper: tuple[float, float], runs: int) -> bool:
    """|ours − paper| within the paper's rounding (±0.0005) plus 2 combined standard errors."""
    se = math.sqrt(ours[1] ** 2 / runs + paper[1] ** 2 / PAPER_RUNS)
    return abs(ours[0] - paper[0]) <= 0.0005 + 2.0 * se


def score(mae: dict[Any, np.ndarray], mech: str, label: str, method: str,
          runs: int) -> dict[str, float]:
    """How well decoder ``method`` of ``mech`` reproduces the paper's ``label`` column."""
    ratios, cons, w10, w20 = [], 0, 0, 0
    for _, attr, _, _ in DATASETS:
        for eps in EPSILONS:
            ours = stat(mae[mech, method, attr, eps])
            paper = paper_value(eps, attr, label)
            ratio = ours[0] / paper[0]
            ratios.append(ratio)
            cons += consistent(ours, paper, runs)
            w10 += abs(ratio - 1) <= 0.10
            w20 += abs(ratio - 1) <= 0.20
    lr = np.abs(np.log(ratios))
    return {"cons": cons, "w10": w10, "w20": w20, "gm": float(np.exp(np.mean(np.log(ratios)))),
            "mlr": float(np.mean(lr)), "worst": float(ratios[int(np.argmax(lr))]),
            "cells": len(ratios)}


def rank_methods(mae: dict[Any, np.ndarray], mech: str, label: str, methods: list[str],
                 runs: int) -> list[tuple[str, dict[str, float]]]:
    scored = [(m, score(mae, mech, label, m, runs)) for m in methods]
    return sorted(scored, key=lambda t: (-t[1]["cons"], -t[1]["w10"], t[1]["mlr"]))


# ---- Markdown -----------------------------------------------------------------------------
def md_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def fmt_paper(v: tuple[float, float]) -> str:
    return f"{v[0]:g} ({v[1]:g})"


def fmt_ours(v: tuple[float, float]) -> str:
    return f"{v[0]:.4f} ({v[1]:.4f})"


def main_tables(mae: dict[Any, np.ndarray], pops: dict[str, dict[str, Any]]) -> str:
    out = []
    for eps in EPSILONS:
        header = ["Dataset", "Attr.", "n", "d"]
        for label, mech in MECHS:
            header += [f"{label} ours", "paper", "ratio"]
        rows = []
        for ds, attr, _, _ in DATASETS:
            row = [ds, attr, f"{pops[attr]['n']:,}", str(pops[attr]["d"])]
            for label, mech in MECHS:
                ours = stat(mae[mech, KRR_MAIN if mech == "grr" else "base", attr, eps])
                paper = paper_value(eps, attr, label)
                row += [fmt_ours(ours), fmt_paper(paper), f"{ours[0] / paper[0]:.2f}"]
            rows.append(row)
        out.append(f"### Table {TABLE_OF_EPS[eps]}: ε = {eps:g}\n\n" + md_table(header, rows))
    return "\n\n".join(out)


def krr_tables(mae: dict[Any, np.ndarray], runs: int) -> tuple[str, list[tuple[str, Any]]]:
    methods = list(METHODS) + [MLE]
    header = ["ε", "Attr.", "paper"] + [("base (raw)" if m == "base" else m) for m in methods]
    rows = []
    for eps in EPSILONS:
        for _, attr, _, _ in DATASETS:
            paper = paper_value(eps, attr, "k-RR")
            row = [f"{eps:g}", attr, fmt_paper(paper)]
            for m in methods:
                ours = stat(mae["grr", m, attr, eps])
                mark = "✓" if consistent(ours, paper, runs) else ""
                row.append(f"{ours[0]:.4f} ({ours[0] / paper[0]:.2f}){mark}")
            rows.append(row)
    ranked = rank_methods(mae, "grr", "k-RR", methods, runs)
    srows = [[m, f"{s['cons']}/{s['cells']}", f"{s['w10']}/{s['cells']}",
              f"{s['w20']}/{s['cells']}", f"{s['gm']:.3f}", f"{s['worst']:.2f}"]
             for m, s in ranked]
    text = (md_table(header, rows) + "\n\nCell: our mean MAE (ratio ours/paper); ✓ = consistent "
            "with the paper (|difference| ≤ 0.0005 rounding + 2 combined standard errors of the "
            "two means).  `post-pos` leaves the vector unchanged (it clips query answers), so "
            "its column equals `base`.\n\n"
            + md_table(["k-RR decoder", "consistent", "within 10%", "within 20%",
                        "geo-mean ratio", "worst ratio"], srows))
    return text, ranked


def other_columns_table(mae: dict[Any, np.ndarray], runs: int) -> tuple[str, dict[str, Any]]:
    """For each other column: how every ldpcore decoder of our mechanism scores vs the paper."""
    header = ["decoder"] + [f"{lab} ({mech})" for lab, mech in MECHS[1:]]
    best: dict[str, Any] = {}
    per: dict[str, dict[str, dict[str, float]]] = {}
    for label, mech in MECHS[1:]:
        ranked = rank_methods(mae, mech, label, list(METHODS), runs)
        per[label] = dict(ranked)
        best[label] = ranked[0]
    rows = []
    for m in METHODS:
        row = ["base (raw)" if m == "base" else m]
        for label, _ in MECHS[1:]:
            s = per[label][m]
            row.append(f"{s['cons']}/{s['cells']} · {s['w20']}/{s['cells']} · {s['gm']:.2f}")
        rows.append(row)
    text = (md_table(header, rows) + "\n\nCell: cells consistent with the paper · cells within "
            "20% · geometric-mean ratio ours/paper (18 cells per column).")
    return text, best


def eps_dependence_table(mae: dict[Any, np.ndarray]) -> tuple[str, dict[str, Any]]:
    header = ["Attr."] + [f"{lab} paper / ours" for lab, _ in MECHS]
    rows, flat = [], {}
    for _, attr, _, _ in DATASETS:
        row = [attr]
        for label, mech in MECHS:
            p = paper_value(0.5, attr, label)[0] / paper_value(2.0, attr, label)[0]
            dec = KRR_MAIN if mech == "grr" else "base"
            o = float(mae[mech, dec, attr, 0.5].mean() / mae[mech, dec, attr, 2.0].mean())
            flat.setdefault(label, []).append((p, o))
            row.append(f"{p:.2f} / {o:.2f}")
        rows.append(row)
    return md_table(header, rows), flat


def non_monotone(mae: dict[Any, np.ndarray]) -> list[str]:
    """Paper cells whose MAE grows by > 20% when ε grows (noise should shrink with ε)."""
    out = []
    for label, _ in MECHS:
        for _, attr, _, _ in DATASETS:
            for lo, hi in ((0.5, 1.0), (1.0, 2.0)):
                a, b = paper_value(lo, attr, label)[0], paper_value(hi, attr, label)[0]
                if b > 1.2 * a:
                    out.append(f"{label} {attr}: {a:g} (ε={lo:g}) → {b:g} (ε={hi:g})")
    return out


def recon_table(mae: dict[Any, np.ndarray], runs: int) -> tuple[str, dict[str, Any]]:
    """The paper's columns re-run with the settings its implementations appear to have used."""
    header = ["ε", "Attr."] + [f"{label}: ours (ratio) / paper" for label, *_ in RECON]
    rows = []
    for eps in EPSILONS:
        for _, attr, _, _ in DATASETS:
            row = [f"{eps:g}", attr]
            for label, key, dec, _ in RECON:
                ours = stat(mae[key, dec, attr, eps])
                paper = paper_value(eps, attr, label)
                mark = "✓" if consistent(ours, paper, runs) else ""
                row.append(f"{ours[0]:.4f} ({ours[0] / paper[0]:.2f}){mark} / {paper[0]:g}")
            rows.append(row)
    scores = {label: score(mae, key, label, dec, runs) for label, key, dec, _ in RECON}
    srows = [[label, f"`{key}` + `{dec}`", desc, f"{scores[label]['cons']}/18",
              f"{scores[label]['w10']}/18", f"{scores[label]['w20']}/18",
              f"{scores[label]['gm']:.3f}", f"{scores[label]['worst']:.2f}"]
             for label, key, dec, desc in RECON]
    text = (md_table(header, rows) + "\n\n✓ = consistent with the paper (as above).\n\n"
            + md_table(["column", "run + decoder", "what", "consistent", "within 10%",
                        "within 20%", "geo-mean ratio", "worst ratio"], srows))
    return text, scores


def summary(mae: dict[Any, np.ndarray], info: dict[str, Any], pops: dict[str, dict[str, Any]],
            runs: int, ranked: list[tuple[str, Any]], best_other: dict[str, Any],
            flat: dict[str, Any], recon: dict[str, Any], elapsed: float) -> str:
    ns = ", ".join(f"{a} n={pops[a]['n']:,} d={pops[a]['d']}" for _, a, _, _ in DATASETS)
    ssk = "; ".join(
        f"{a}: " + "/".join(str(info["ss_k"][a, e]) for e in EPSILONS) for _, a, _, _ in DATASETS)
    cms = ", ".join(f"{a}: m={m}" for a, (m, _) in info["cms"].items())
    hrk = ", ".join(f"{a}: K={k}" for a, k in info["hr_K"].items())
    sc = dict(ranked)
    top = ranked[0][0]

    def line(m: str) -> str:
        s = sc[m]
        return (f"`{m}` {s['cons']}/18 consistent, {s['w10']}/18 within 10%, {s['w20']}/18 "
                f"within 20%, geo-mean ratio {s['gm']:.3f}")

    def brief(s: dict[str, float]) -> str:
        return (f"{s['cons']}/18 consistent, {s['w20']}/18 within 20%, geo-mean ratio "
                f"{s['gm']:.2f}, worst {s['worst']:.2f}")

    def ratio(key: str, dec: str, a: str, e: float, label: str) -> float:
        return float(mae[key, dec, a, e].mean() / paper_value(e, a, label)[0])

    rest = [(a, e) for _, a, _, _ in DATASETS if a != "A4" for e in EPSILONS]
    rest_cons = sum(consistent(stat(mae["grr", MLE, a, e]), paper_value(e, a, "k-RR"), runs)
                    for a, e in rest)
    rest_w10 = sum(abs(ratio("grr", MLE, a, e, "k-RR") - 1) <= 0.1 for a, e in rest)
    rest_w20 = sum(abs(ratio("grr", MLE, a, e, "k-RR") - 1) <= 0.2 for a, e in rest)
    off = [f"{a} ε={e:g} (paper {paper_value(e, a, 'k-RR')[0]:g}, ratio "
           f"{ratio('grr', MLE, a, e, 'k-RR'):.2f})"
           for a, e in rest if abs(ratio("grr", MLE, a, e, "k-RR") - 1) > 0.2]
    behind = "; ".join(line(m) for m in [m for m, _ in ranked if m not in (top, MLE)][:3])
    std_r = [stat(mae["grr", MLE, a, e])[1] / paper_value(e, a, "k-RR")[1]
             for _, a, _, _ in DATASETS for e in EPSILONS if paper_value(e, a, "k-RR")[1] > 0]
    std_gm = float(np.exp(np.mean(np.log(std_r))))

    a4 = "; ".join(f"ε={e:g}: paper {paper_value(e, 'A4', 'k-RR')[0]:g}, MLE "
                   f"{mae['grr', MLE, 'A4', e].mean():.4f} "
                   f"({ratio('grr', MLE, 'A4', e, 'k-RR'):.2f}), raw "
                   f"{mae['grr', 'base', 'A4', e].mean():.4f} "
                   f"({ratio('grr', 'base', 'A4', e, 'k-RR'):.2f})" for e in EPSILONS)
    a4_cv = [paper_value(e, "A4", "k-RR")[1] / paper_value(e, "A4", "k-RR")[0] for e in EPSILONS]
    family = ("mle-apx", MLE, "norm-sub")
    fam_spread = max(
        max(mae["grr", m, a, e].mean() for m in family)
        / min(mae["grr", m, a, e].mean() for m in family) - 1
        for _, a, _, _ in DATASETS for e in EPSILONS)
    country_raw = [ratio("grr", "base", "Country", e, "k-RR") for e in EPSILONS]
    a4_cons = {dec: sum(consistent(stat(mae["grr", dec, "A4", e]), paper_value(e, "A4", "k-RR"),
                                   runs) for e in EPSILONS) for dec in (MLE, "base")}

    brap = flat["bRAPPOR"]
    brap_p = ", ".join(f"{p:.2f}" for p, _ in brap)
    brap_o = ", ".join(f"{o:.2f}" for _, o in brap)
    raw = {label: score(mae, mech, label, "base", runs) for label, mech in MECHS}
    with_f = score(mae, "rappor-default-f", "bRAPPOR", "base-pos", runs)
    hr_best = best_other["HR"]
    cms_def = []
    for a, v in info["cms_default"].items():
        if isinstance(v, str):
            cms_def.append(f"{a}: {v}")
        else:
            m_one = mae["cms", "base", a, 1.0].mean()
            cms_def.append(f"{a}: m={v[0]}, {v[1]} rows, MAE {v[2]:.4f} (one-hot {m_one:.4f})")
    nm = non_monotone(mae)
    cmd = "" if runs == 100 else f" --runs {runs}"
    return f"""# Le & Zia, Tables II–IV (real datasets, MAE) reproduced with ldpcore

**What was run.** For each of the six Statlog/Adult attributes of the paper's Table I and
ε ∈ {{0.5, 1, 2}}, each mechanism perturbs the whole population {runs} times; run r uses
`np.random.default_rng(r)` (r = 0..{runs - 1}, the same seeds in every cell).  Each run's
estimate is scored with the paper's MAE, (1/d) Σ_i |f̂_i − f_i|; the tables give the mean and
the sample standard deviation (ddof = 1) over the runs next to the paper's mean (std) and
the ratio ours/paper.  Populations are rebuilt from the category counts in
`real_histograms.json`: {ns} (n and d as in the paper's Table I).  The USCensus1990 rows are
not reproduced (no data here).  Command: `.venv/bin/python bench/le_zia.py{cmd}`; runtime
{elapsed:.0f} s on one core.  "Consistent" below means |ours − paper| ≤ 0.0005 (the paper's
3-decimal rounding) + 2 standard errors of the difference of the two means (the paper's
std / √100 and ours / √{runs}).

**Mechanisms and parameters.** k-RR = `grr`; basic RAPPOR = `sue`
(p = e^(ε/2)/(e^(ε/2)+1), q = 1 − p); CMS = `cms`; k-subset = `ss`; HR = `hr`.  Parameters
the paper does not state:
- CMS: sketch width m = smallest prime ≥ d ({cms}).  ldpcore's exact projective sketch
  then has one row and no hashing: the one-hot vector with flip probability 1/(e^(ε/2)+1)
  that the paper's Section II-E describes (Apple's deployed m = 1024 ≥ d gives the same
  estimator up to a 1/m collision term), statistically identical to `sue`.  Sensitivity at
  ε = 1 with ldpcore's default width (smallest prime ≥ √d, m+1 hashed rows): {'; '.join(cms_def)}.
- k-subset: ldpcore's default k = max(1, round(d/(e^ε+1))) (Wang et al. 2016's optimum);
  k at ε = 0.5/1/2: {ssk}.
- HR: K = next power of two > d ({hrk}), keep probability e^ε/(e^ε+1), the estimator of
  the paper's Section II-F.
- Decoders: k-RR with the constrained MLE the paper names (below); every other column of the
  main tables is the raw unbiased estimate written in the paper's Section II.

**Which post-processing reproduces the paper's k-RR column.** Best: {line(top)}.  The
paper's decoder, Kairouz et al.'s constrained MLE, is `{MLE}`: ldpcore `mle-apx` with the
multinomial variance model a = q/(n(p−q)²), slope b = 1/(n(p−q)), which makes its iteration
the exact MLE (it agrees with a direct closed-form solver to {info['mle_maxdiff']:.1e}):
{line(MLE)}.  Next: {behind}.  The raw unbiased estimate: {line('base')}.  So the
constrained-MLE / Norm-Sub family reproduces the column (`mle-apx` with ldpcore's own
variance model, the exact MLE and `norm-sub` differ by at most {100 * fam_spread:.0f}% from
each other in any cell) and the raw estimate does not (on Adult/Country, where most
frequencies are near 0, it is {', '.join(f'{x:.1f}' for x in country_raw)}× the paper at
ε = 0.5, 1, 2).  Without A4, the MLE is consistent with the paper on {rest_cons}/15 cells,
within 10% on {rest_w10}/15 and within 20% on {rest_w20}/15 (off by > 20%:
{'; '.join(off) or 'none'}); the run-to-run spread matches too (our std / the paper's std,
geo-mean {std_gm:.2f}).

**Where we differ, and why.**
- k-RR, Statlog A4 (d = 3, counts 163/525/2) is the weakest k-RR row: {a4}.  The paper's
  A4 values lie between our MLE and our raw estimate (MLE consistent on {a4_cons[MLE]}/3, raw on
  {a4_cons['base']}/3); with the paper's std at {100 * min(a4_cv):.0f}–{100 * max(a4_cv):.0f}% of
  its mean, A4 cannot separate the decoders.
- bRAPPOR ({brief(raw['bRAPPOR'])} for `sue`): the paper's column does not depend on ε —
  MAE(ε=0.5)/MAE(ε=2) per attribute is {brap_p} in the paper vs {brap_o} for `sue`.  The
  paper ran its algorithms "with default values of parameters"; Google RAPPOR's defaults
  prob_p = 0.5, prob_q = 0.75 (report a set bit as 1 w.p. 0.75, an unset one w.p. 0.5) fix ε
  at ln 3 ≈ 1.10 whatever the table says, and re-running that without the permanent RR
  (ldpcore unary encoding with those probabilities, negatives clipped) reproduces the column:
  {brief(recon['bRAPPOR'])}.
  With RAPPOR's default permanent RR prob_f = 0.5 on top it does not fit
  ({brief(with_f)}).
- CMS (raw one-hot: {brief(raw['CMS'])}): the paper's values are the same estimator with
  negative estimates clipped to 0 (ldpcore `base-pos`): {brief(recon['CMS'])}.
- k-subset (raw, optimal k: {brief(raw['k-subset'])}; the paper's values are mostly lower
  than ours at ε = 0.5 and higher at ε = 2): a fixed k = ⌊d/2⌋ at every ε with negatives clipped
  reproduces it: {brief(recon['k-subset'])}.
- HR (raw: {brief(raw['HR'])}; closest ldpcore decoder `{hr_best[0]}`:
  {brief(hr_best[1])}).  Paper cells whose MAE *grows* with ε by > 20% (impossible for these
  estimators, whose noise shrinks with ε; ours never do): {'; '.join(nm) if nm else 'none'}.
  The paper ran "the implementation of [Acharya et al.]"; that public code
  (`k2k_hadamard.py`) decodes by default with "clip and normalize" (= ldpcore `norm-mul`) and
  its all-regime variant splits the output into B = 2^⌊log2 min(2d, e^ε)⌋ blocks (B = 1, 2, 4
  at ε = 0.5, 1, 2), a different scheme at each ε.  We run the single-block HR of the
  paper's Section II-F, so HR matches only roughly.
"""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=100, help="runs per cell (default 100)")
    ap.add_argument("--quick", action="store_true", help="10 runs per cell")
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = ap.parse_args(argv)
    runs = 10 if args.quick else args.runs
    if runs < 2:
        ap.error("--runs must be >= 2")

    t0 = time.perf_counter()
    pops = load_populations(args.data)
    mae, info = run_cells(pops, runs)
    elapsed = time.perf_counter() - t0

    krr_text, ranked = krr_tables(mae, runs)
    other_text, best_other = other_columns_table(mae, runs)
    eps_text, flat = eps_dependence_table(mae)
    recon_text, recon = recon_table(mae, runs)
    doc = "\n\n".join([
        summary(mae, info, pops, runs, ranked, best_other, flat, recon, elapsed).rstrip(),
        "## Tables II–IV: ours vs paper\n\nCells: mean (std) of the MAE over the runs; "
        f"k-RR decoded with `{KRR_MAIN}`, the other columns raw (unbiased).",
        main_tables(mae, pops),
        "## k-RR column: every ldpcore decoder vs the paper\n\nDecoders ranked by cells "
        "consistent with the paper, then cells within 10%, then mean |log ratio|.",
        krr_text,
        "## Other columns: every ldpcore decoder vs the paper (diagnostic)",
        other_text,
        "## ε-dependence: MAE(ε = 0.5) / MAE(ε = 2), paper / ours",
        eps_text,
        "## Reconstruction: the settings the paper's implementations appear to have used\n\n"
        "Same seeds and populations; `rappor-default` is ldpcore's unary encoding with RAPPOR's "
        "default probabilities (a set bit reported as 1 w.p. 0.75, an unset bit w.p. 0.5; ε = "
        "ln 3 in every table), `ss-half` is `ss` with subset_size = max(1, ⌊d/2⌋).",
        recon_text,
    ]) + "\n"
    sys.stdout.write(doc)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(doc, encoding="utf-8")
    print(f"\nwrote {args.out} ({runs} runs per cell, {elapsed:.0f} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
