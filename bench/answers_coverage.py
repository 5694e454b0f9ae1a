"""How honest each default answer is: coverage and width of its 95 % interval.

For each collection kind and each default answer (what the API serves without a
``method=``): many independent collections with known truth, simulated at the state
level (the real device perturbation of a population, aggregated in-process: no broker),
answered by the query service's own pure functions (:mod:`query_api.estimates`,
:mod:`query_api.setvalued`, the attribute computation of
:mod:`query_api.routes.attributes`).  Per answer:

* **coverage**: the share of intervals holding the truth (every value of every collection
  for a vector answer);
* **width ratio**: the median over those intervals of width / reference width, where the
  reference is the analytic interval 2·z·σ at the truth (the unbiased estimator's σ, with
  the collection's effective sample size), or — for quantiles, which have none — the
  interval that inverting the *true* CDF within ±z analytic standard errors gives.  An
  interval much wider than its reference is dishonest too (it says less than it could).

Truths: frequencies are the population's (the convention of the analytic variances);
set-valued item frequencies the share of devices holding the item; a longitudinal
window's the share among reports (docs/longitudinal.md).

``tests/query_api/test_coverage_suite.py`` runs it (≥ 50 collections per answer) and holds
coverage ≥ 0.9 and the width ratio ≤ 1.5.  Run from the repository root for the table of
docs/answers.md::

    .venv/bin/python bench/answers_coverage.py [--trials 200]
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from statistics import NormalDist
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import ldpcore  # noqa: E402
from ldpcore.collection import CollectionSpec  # noqa: E402

__all__ = ["CASES", "Result", "run_case", "run_all", "markdown"]

Z = NormalDist().inv_cdf(0.975)
LEVEL = 0.95


@dataclass
class Result:
    """One answer's intervals over the collections: covered?, width, reference width."""

    kind: str
    answer: str
    setup: str
    covered: list[bool] = field(default_factory=list)
    ratios: list[float] = field(default_factory=list)
    errors: dict[Any, list[tuple[float, float]]] = field(default_factory=dict)
    trials: int = 0
    seconds: float = 0.0

    def add(self, low: float, high: float, truth: float, reference: float, *,
            estimate: float | None = None, key: Any = 0) -> None:
        self.covered.append(bool(low - 1e-12 <= truth <= high + 1e-12))
        self.ratios.append((high - low) / reference if reference > 0 else float("nan"))
        if estimate is not None:
            self.errors.setdefault(key, []).append((float(estimate) - truth, high - low))

    @property
    def empirical_ratio(self) -> float:
        """Median over the answer's positions of its median width / (2 z RMSE): how wide
        the interval is against the error it really makes (informative: an upper-bound
        variance shows here, not in the analytic ratio)."""
        out = []
        for rows in self.errors.values():
            err = np.array([e for e, _ in rows])
            rmse = float(np.sqrt(np.mean(err**2)))
            if rmse > 0:
                out.append(float(np.median([w for _, w in rows])) / (2 * Z * rmse))
        return float(np.median(out)) if out else float("nan")

    @property
    def coverage(self) -> float:
        return float(np.mean(self.covered))

    @property
    def width_ratio(self) -> float:
        return float(np.nanmedian(self.ratios))


def _zipf(d: int, s: float = 1.1) -> np.ndarray:
    w = 1.0 / np.arange(1, d + 1) ** s
    out: np.ndarray = w / w.sum()
    return out


def _skewed(d: int) -> np.ndarray:
    p = np.exp(-np.arange(d) / (d / 5)) + 0.2 * np.exp(-((np.arange(d) - 0.7 * d) ** 2) / 8)
    out: np.ndarray = p / p.sum()
    return out


def _population(rng: np.random.Generator, p: np.ndarray, n: int) -> tuple[np.ndarray,
                                                                          np.ndarray]:
    values = rng.choice(p.size, size=n, p=p)
    return values, np.bincount(values, minlength=p.size) / n


# ---- the answers -------------------------------------------------------------------------
def _frequencies(mechanism: str, d: int, n: int, eps: float) -> Callable[..., None]:
    from query_api import estimates as E

    o = ldpcore.make_oracle(mechanism, epsilon=eps, domain_size=d)
    p = _zipf(d)

    def trial(rng: np.random.Generator, res: Result) -> None:
        values, truth = _population(rng, p, n)
        st = o.aggregate(o.perturb(values, rng=rng))
        body = E.frequencies(o, st, labels=None, method="auto", confidence=LEVEL)
        for row, f in zip(body["estimates"], truth, strict=True):
            res.add(row["ci_low"], row["ci_high"], f, 2 * Z * math.sqrt(o.variance(n, f)),
                    estimate=row["estimate"], key=row["index"])
    return trial


def _subset(d: int, n: int) -> Callable[..., None]:
    from query_api import estimates as E

    o: Any = ldpcore.make_oracle("olh", epsilon=1.0, domain_size=d)
    p = _zipf(d)
    sets = ([0, 5, 9], [1, 2], [d - 3, d - 2, d - 1])

    def trial(rng: np.random.Generator, res: Result) -> None:
        values, truth = _population(rng, p, n)
        st = o.aggregate(o.perturb(values, rng=rng))
        for idx in sets:
            body = E.subset(o, st, idx, method="auto", confidence=LEVEL)
            ref = 2 * Z * math.sqrt(o.subset_variance(n, idx, truth))
            res.add(body["ci_low"], body["ci_high"], float(truth[idx].sum()), ref,
                    estimate=body["estimate"], key=tuple(idx))
    return trial


def _range(d: int, n: int) -> Callable[..., None]:
    from query_api import estimates as E

    o: Any = ldpcore.make_oracle("hh", epsilon=1.0, domain_size=d, fanout=4)
    p = _skewed(d)
    ranges = ((4, 11), (0, d // 2), (d // 3, d - 1))

    def trial(rng: np.random.Generator, res: Result) -> None:
        values, truth = _population(rng, p, n)
        st = o.aggregate(o.perturb(values, rng=rng))
        for lo, hi in ranges:
            r = E.range_answer(o, st, lo, hi, confidence=LEVEL)
            ref = 2 * Z * math.sqrt(o.range_variance(n, lo, hi))
            res.add(r["ci_low"], r["ci_high"], float(truth[lo:hi + 1].sum()), ref,
                    estimate=r["estimate"], key=(lo, hi))
    return trial


def _quantile(d: int, n: int) -> Callable[..., None]:
    from query_api import estimates as E

    o: Any = ldpcore.make_oracle("hh", epsilon=1.0, domain_size=d, fanout=4)
    p = _skewed(d)
    qs = (0.25, 0.5, 0.9)
    se = np.sqrt([o.range_variance(n, 0, x) for x in range(d)])

    def trial(rng: np.random.Generator, res: Result) -> None:
        values, truth = _population(rng, p, n)
        st = o.aggregate(o.perturb(values, rng=rng))
        rows = E.quantiles(o, st, list(qs), confidence=LEVEL)["quantiles"]
        cum = np.cumsum(truth)
        for q, row in zip(qs, rows, strict=True):
            true_q = int(np.searchsorted(cum, q - 1e-12))
            # Reference: invert the true CDF within ± z analytic standard errors.
            lo = int(np.argmax(cum + Z * se >= q - 1e-12))
            hi_hits = np.flatnonzero(cum - Z * se >= q - 1e-12)
            hi = int(hi_hits[0]) if hi_hits.size else d - 1
            res.add(row["ci_low"], row["ci_high"], true_q, max(1, hi - lo),
                    estimate=row["value"], key=q)
    return trial


def _mean(mechanism: str, n: int) -> Callable[..., None]:
    from query_api import estimates as E

    o: Any = ldpcore.make_oracle(mechanism, epsilon=1.0, bins=32, low=0.0, high=10.0)
    p = _skewed(32)

    def trial(rng: np.random.Generator, res: Result) -> None:
        values = rng.choice(32, size=n, p=p)
        # The device draws its value uniformly in its bin: the truth is the bin centres'
        # mean (the draw's own spread is in the estimator's variance).
        truth = float(o.bin_centers()[values].mean())
        r = E.mean(o, o.aggregate(o.perturb(values, rng=rng)), confidence=LEVEL)
        res.add(r["ci_low"], r["ci_high"], truth, 2 * Z * math.sqrt(o.mean_variance(n)),
                estimate=r["estimate"])
    return trial


def _sets(d: int, length: int, n: int) -> tuple[list[list[int]], np.ndarray]:
    """n sets of 1..length items, item popularity Zipf; (sets, fraction holding each)."""
    rng = np.random.default_rng(99)
    p = _zipf(d, 0.8)
    sizes = rng.integers(1, length + 1, size=n)
    sets = [sorted(rng.choice(d, size=int(k), replace=False, p=p).tolist()) for k in sizes]
    held = np.zeros(d)
    for s in sets:
        held[s] += 1
    return sets, held / n


def _set_items(d: int, length: int, n: int) -> Callable[..., None]:
    from query_api import estimates as E

    o: Any = ldpcore.make_oracle("ps", epsilon=2.0, domain_size=d, length=length)
    sets, truth = _sets(d, length, n)

    def trial(rng: np.random.Generator, res: Result) -> None:
        st = o.aggregate(o.perturb_sets(sets, rng=rng))
        body = E.frequencies(o, st, labels=None, method="auto", confidence=LEVEL)
        assert body["estimand"] == "holders-truncated"
        for row, f in zip(body["estimates"], truth, strict=True):
            res.add(row["ci_low"], row["ci_high"], f, 2 * Z * math.sqrt(o.variance(n, f)),
                    estimate=row["estimate"], key=row["index"])
    return trial


def _set_subset(d: int, length: int, n: int) -> Callable[..., None]:
    from query_api import estimates as E

    o: Any = ldpcore.make_oracle("ps", epsilon=2.0, domain_size=d, length=length)
    sets, truth = _sets(d, length, n)
    subsets = ([0, 3, 7], [1, 2], [10, 12, 14, 15])
    # Reference: the sum's spread over 100 perturbations of the same population (there is
    # no closed form across the items of a set-valued report; the served one is a bound).
    rng0 = np.random.default_rng(7)
    sims = np.array([o.estimate(o.aggregate(o.perturb_sets(sets, rng=rng0)))
                     for _ in range(100)])
    refs = {tuple(idx): 2 * Z * float(sims[:, idx].sum(axis=1).std(ddof=1))
            for idx in subsets}

    def trial(rng: np.random.Generator, res: Result) -> None:
        st = o.aggregate(o.perturb_sets(sets, rng=rng))
        for idx in subsets:
            body = E.subset(o, st, idx, method="auto", confidence=LEVEL)
            assert body["estimand"] == "items-per-device"
            res.add(body["ci_low"], body["ci_high"], float(truth[idx].sum()),
                    refs[tuple(idx)], estimate=body["estimate"], key=tuple(idx))
    return trial


def _attribute(n: int) -> Callable[..., None]:
    from query_api import estimates as E
    from query_api.routes.attributes import _per_attribute

    spec = CollectionSpec.from_dict({
        "id": "prof", "oracle": {"mechanism": "multi", "epsilon": 2.0,
                                 "pairs": [["os", "age"]]},
        "domain": {"kind": "attributes", "attributes": [
            {"name": "os", "kind": "categories", "labels": ["linux", "mac", "win", "bsd"]},
            {"name": "age", "kind": "interval", "low": 0, "high": 80, "bins": 4}]}})
    o: Any = spec.oracle()
    p_os, p_age = np.array([0.5, 0.25, 0.2, 0.05]), np.array([0.1, 0.4, 0.3, 0.2])

    def trial(rng: np.random.Generator, res: Result) -> None:
        os_v = rng.choice(4, size=n, p=p_os)
        age_v = np.where(rng.random(n) < 0.7, os_v % 4, rng.choice(4, size=n, p=p_age))
        st = o.aggregate(o.perturb(os_v * 4 + age_v, rng=rng))
        for name, truth in (("os", np.bincount(os_v, minlength=4) / n),
                            ("os*age", np.bincount(os_v * 4 + age_v, minlength=16) / n)):
            body = _per_attribute(name, lambda s, ps, ne: E.frequencies(
                s, ps, labels=None, method="auto", confidence=LEVEL, n_effective=ne))(
                    o, st, float(n))
            sub, ne = o.attribute(name), body["n_effective"]
            for row, f in zip(body["estimates"], truth, strict=True):
                res.add(row["ci_low"], row["ci_high"], f, 2 * Z * math.sqrt(sub.variance(
                    max(1, int(ne)), f)), estimate=row["estimate"], key=(name, row["index"]))
    return trial


def _longitudinal(devices: int, windows: int) -> Callable[..., None]:
    from query_api import estimates as E

    spec = CollectionSpec.from_dict({"id": "pop", "oracle": {"mechanism": "grr",
                                                              "epsilon": 1.0},
                                     "domain": {"kind": "categories",
                                                "labels": ["a", "b", "c", "d"]}})
    o: Any = spec.oracle()
    p = np.array([0.5, 0.3, 0.15, 0.05])

    def trial(rng: np.random.Generator, res: Result) -> None:
        # Devices come and go (presence 0.8, churn 0.15 a window), each repeats its
        # memoized (permanent) answer in every window it reports in.
        values = list(rng.choice(4, size=devices, p=p))
        alive = np.arange(devices)
        who, counts = [], []
        for w in range(windows):
            if w:
                gone = rng.random(alive.size) < 0.15
                fresh = np.arange(len(values), len(values) + int(gone.sum()))
                values.extend(rng.choice(4, size=fresh.size, p=p))
                alive = np.concatenate([alive[~gone], fresh])
            present = alive[rng.random(alive.size) < 0.8]
            who.append(present)
            counts.append(int(present.size))
        everyone = np.concatenate(who)
        vals = np.asarray(values)
        memo = o.perturb(vals, rng=rng).columns["y"]
        n = int(everyone.size)
        st = ldpcore.State(o.fingerprint, n, np.bincount(memo[everyone], minlength=4))
        truth = np.bincount(vals[everyone], minlength=4) / n
        n_eff = spec.effective_sample_size(counts)
        body = E.frequencies(o, st, labels=None, method="auto", confidence=LEVEL,
                             n_effective=n_eff)
        for row, f in zip(body["estimates"], truth, strict=True):
            ref = 2 * Z * math.sqrt(spec.multiwindow_variance(counts, frequency=f))
            res.add(row["ci_low"], row["ci_high"], f, ref, estimate=row["estimate"],
                    key=row["index"])
    return trial


CASES: list[tuple[str, str, str, Callable[[], Callable[..., None]]]] = [
    ("categorical (grr)", "frequencies", "d = 8, n = 5,000, ε = 1, Zipf",
     lambda: _frequencies("grr", 8, 5_000, 1.0)),
    ("categorical (olh)", "frequencies", "d = 32, n = 20,000, ε = 1, Zipf",
     lambda: _frequencies("olh", 32, 20_000, 1.0)),
    ("categorical (olh)", "subset", "3 sets, d = 32, n = 20,000, ε = 1",
     lambda: _subset(32, 20_000)),
    ("range (hh)", "range", "3 ranges, d = 64, n = 20,000, ε = 1",
     lambda: _range(64, 20_000)),
    ("range (hh)", "quantiles", "q = 0.25, 0.5, 0.9, d = 64, n = 20,000",
     lambda: _quantile(64, 20_000)),
    ("numeric (sw)", "mean", "32 bins, n = 5,000, ε = 1", lambda: _mean("sw", 5_000)),
    ("numeric (pm)", "mean", "32 bins, n = 5,000, ε = 1", lambda: _mean("pm", 5_000)),
    ("set-valued (ps)", "item frequencies", "d = 16, sets of 1–4, l = 4, n = 5,000, ε = 2",
     lambda: _set_items(16, 4, 5_000)),
    ("set-valued (ps)", "subset (items per device)", "3 sets of items, d = 16, l = 4, "
     "n = 5,000",
     lambda: _set_subset(16, 4, 5_000)),
    ("multi-attribute", "attribute and 2-way marginal frequencies",
     "os (4) and os×age (16), ε = 2, n = 20,000", lambda: _attribute(20_000)),
    ("longitudinal (permanent memo)", "frequencies over 6 windows",
     "grr d = 4, 600 devices, churn 0.15, presence 0.8", lambda: _longitudinal(600, 6)),
]
"""(collection kind, answer, setup, the trial's factory)."""


def run_case(index: int, trials: int, seed: int = 2024) -> Result:
    kind, answer, setup, make = CASES[index]
    res = Result(kind, answer, setup)
    trial = make()
    t0 = time.perf_counter()
    rng = np.random.default_rng(seed + 1000 * index)
    for _ in range(trials):
        trial(rng, res)
    res.trials, res.seconds = trials, time.perf_counter() - t0
    return res


def run_all(trials: int) -> list[Result]:
    return [run_case(i, trials) for i in range(len(CASES))]


def markdown(results: list[Result]) -> str:
    lines = ["| collection kind | default answer | setup | collections | intervals | "
             "coverage (95 %) | median width / reference | median width / (2z·RMSE) |",
             "|---|---|---|---:|---:|---:|---:|---:|"]
    for r in results:
        lines.append(f"| {r.kind} | {r.answer} | {r.setup} | {r.trials} | {len(r.covered)} | "
                     f"{r.coverage:.3f} | {r.width_ratio:.2f} | {r.empirical_ratio:.2f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trials", type=int, default=200)
    args = ap.parse_args(argv)
    print(markdown(run_all(args.trials)))


if __name__ == "__main__":
    main()
