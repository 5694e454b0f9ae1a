r"""Data poisoning of frequency oracles: the maximal gain attack and fake-user detection.

Cao, Jia & Gong, *Data Poisoning Attacks to Local Differential Privacy Protocols*
(USENIX Security 2021).  An attacker injects :math:`m` fake users, a fraction
:math:`\beta = m / (n + m)` of all, that send crafted *perturbed* reports (they need not
follow the protocol) to raise the estimated frequencies of :math:`r` target items
:math:`T`.  The **frequency gain** is :math:`G = \sum_{t \in T} (\tilde f_{t,\text{after}}
- \tilde f_{t,\text{before}})`.  With :math:`s_t` = 1 when a fake report supports
:math:`t`, the unbiased estimator gives (their §4)

.. math:: \mathbb{E}[G] = \beta \left( \frac{\sum_{t} \mathbb{E}[s_t] - r q}{p - q}
          - f_T \right),

maximised by the **maximal gain attack** (MGA), whose fake report supports as many
targets as the protocol allows:

* GRR (kRR): a random target, :math:`\sum_t s_t = 1`:
  :math:`G = \beta (1 - f_T) + \beta (d - r)/(e^\varepsilon - 1)`;
* OUE: every target bit set (plus :math:`l - r` random other bits, :math:`l` the
  number of 1s an honest report has on average, so the count of 1s looks normal):
  :math:`G = \beta (2 r e^\varepsilon / (e^\varepsilon - 1) - f_T)`;
* OLH: a hash seed and bucket that hold as many targets as possible (:math:`k^*`;
  :func:`olh_best_collisions`); with :math:`q = 1/g`:
  :math:`G = \beta ((k^* - r/g)/(p - 1/g) - f_T)`.  Cao et al. search a 32-bit seed
  space and reach :math:`k^* = r`; ldpcore's exactly-universal linear family has only
  :math:`g^{r'}` seeds, so the best one may hold fewer.

**Detection** (their §6.2, for OUE and OLH): fake reports of the MGA all support the
same targets, a *frequent itemset* no honest population produces.  This module's form:
count co-supports :math:`C = S^\top S` of every item pair (:math:`S` the reports'
support sets), flag the pairs whose count exceeds the independent expectation
:math:`c_u c_v / n` by ``z`` standard deviations, take their items :math:`I` as the
suspicious itemset, and remove every report that supports at least :math:`\kappa`
items of :math:`I`, :math:`\kappa` the smallest count an honest report reaches with
probability below ``alpha`` (its own value, plus a Binomial of the others).  It needs
the reports (not only their sums), does nothing against GRR (a report supports one item)
nor against a single target (no pair), and costs honest accuracy only the honest reports
it removes (none when there is no attack, in expectation :math:`n \alpha` at most).

Pure numpy, no I/O.

>>> import numpy as np, ldpcore
>>> oue = ldpcore.make_oracle("oue", epsilon=1.0, domain_size=32)
>>> rng = np.random.default_rng(1)
>>> honest = oue.perturb(rng.integers(0, 32, 20_000), rng=rng)
>>> targets = list(range(0, 30, 3))                        # r = 10
>>> fake = mga_reports(oue, targets, 1_000, rng=rng)        # β = 1000/21000 ≈ 4.8 %
>>> both = ldpcore.Reports.concat([honest, fake])
>>> before, after = (oue.estimate(oue.aggregate(x)) for x in (honest, both))
>>> round(frequency_gain(after, before, targets), 1), round(expected_gain(oue, 1/21, 10, 0.31), 1)
(1.5, 1.5)
>>> det = detect_fake_users(oue, both)
>>> det.items == targets, int(det.flags[20_000:].sum())     # every fake report flagged
(True, 1000)
>>> int(det.flags[:20_000].sum())                           # honest ones (≈ n·alpha = 20)
8
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from ._validate import as_rng
from .base import FrequencyOracle, Reports
from .errors import ParameterError

__all__ = ["ATTACKABLE", "mga_reports", "support_matrix", "frequency_gain", "expected_gain",
           "olh_best_collisions", "Detection", "detect_fake_users"]

ATTACKABLE = ("grr", "oue", "sue", "olh", "blh")
"""Mechanisms this module crafts MGA reports for and reads support sets of."""


def _targets(oracle: FrequencyOracle, targets: Sequence[int] | npt.NDArray[Any]
             ) -> npt.NDArray[np.int64]:
    t = np.unique(np.asarray(targets, dtype=np.int64))
    if t.size == 0 or t.min() < 0 or t.max() >= oracle.domain_size:
        raise ParameterError(f"targets must be distinct items in [0, {oracle.domain_size})")
    if oracle.mechanism not in ATTACKABLE:
        raise ParameterError(f"mechanism {oracle.mechanism!r} is not one of {ATTACKABLE}")
    return t


def olh_best_collisions(oracle: Any, targets: Sequence[int] | npt.NDArray[Any], *,
                        constant_seed: bool = False
                        ) -> tuple[int, npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Local hashing: the most targets one (seed, bucket) holds, and every such pair
    whose bucket holds the fewest items (the least gain for non-targets).

    Exhaustive over the oracle's :math:`g^{r'}` seeds (the attacker knows the family).
    The seed 0 of ldpcore's linear family hashes every item to 0: a report (0, 0)
    supports every target, and every other item alike, which normalisation undoes; Cao et
    al.'s family has no such seed, so it is left out unless ``constant_seed``.
    Returns (k*, seeds, buckets).
    """
    t = _targets(oracle, targets)
    seeds = np.arange(0 if constant_seed else 1, oracle.n_hashes, dtype=np.int64)
    h = oracle.hash_values(seeds[:, None], t[None, :])  # (seeds, r)
    rows = np.arange(seeds.size)
    counts = np.zeros((seeds.size, oracle.g), dtype=np.int64)
    np.add.at(counts, (np.repeat(rows, t.size), h.ravel()), 1)
    best = int(counts.max())
    i, b = np.nonzero(counts == best)
    items = oracle.hash_values(seeds[i][:, None],
                               np.arange(oracle.domain_size, dtype=np.int64)[None, :])
    size = (items == b[:, None]).sum(axis=1)
    keep = size == size.min()
    return best, seeds[i][keep].astype(np.int64), b[keep].astype(np.int64)


def mga_reports(oracle: FrequencyOracle, targets: Sequence[int] | npt.NDArray[Any], m: int,
                rng: np.random.Generator | int | None = None) -> Reports:
    """``m`` fake reports of the maximal gain attack on ``targets`` (see the module
    docstring); they pass the oracle's validation like honest ones."""
    t, gen = _targets(oracle, targets), as_rng(rng)
    o: Any = oracle
    mech, d = oracle.mechanism, oracle.domain_size
    cols = {c.name: c for c in oracle.report_columns}
    if mech == "grr":
        y = t[gen.integers(0, t.size, m)]
        return Reports(mech, oracle.fingerprint, {"y": y.astype(cols["y"].dtype)})
    if mech in ("oue", "sue"):
        ones = max(t.size, int(round(o.p + (d - 1) * o.q)))
        others = np.setdiff1d(np.arange(d), t)
        bits = np.zeros((m, d), dtype=bool)
        bits[:, t] = True
        extra = ones - t.size
        if extra > 0:  # l - r random non-targets per report
            pick = np.argsort(gen.random((m, others.size)), axis=1)[:, :extra]
            bits[np.arange(m)[:, None], others[pick]] = True
        packed = np.packbits(bits, axis=1, bitorder="little")
        return Reports(mech, oracle.fingerprint, {"bits": packed})
    _, seeds, buckets = olh_best_collisions(oracle, t)
    pick = gen.integers(0, seeds.size, m)
    return Reports(mech, oracle.fingerprint, {"a": seeds[pick].astype(cols["a"].dtype),
                                              "t": buckets[pick].astype(cols["t"].dtype)})


def support_matrix(oracle: FrequencyOracle, reports: Reports) -> npt.NDArray[np.bool_]:
    """(n, d) booleans: report i supports item v (GRR: y = v; unary: bit v; local
    hashing: h_a(v) = t)."""
    mech, d = oracle.mechanism, oracle.domain_size
    if mech == "grr":
        y = reports.columns["y"].astype(np.int64)
        out = np.zeros((y.size, d), dtype=bool)
        out[np.arange(y.size), y] = True
        return out
    if mech in ("oue", "sue"):
        bits: npt.NDArray[np.bool_] = np.unpackbits(
            reports.columns["bits"], axis=1, count=d, bitorder="little").astype(bool)
        return bits
    if mech in ("olh", "blh"):
        o: Any = oracle
        a = reports.columns["a"].astype(np.int64)
        t = reports.columns["t"].astype(np.int64)
        out = np.empty((a.size, d), dtype=bool)
        items = np.arange(d, dtype=np.int64)[None, :]
        for s in range(0, a.size, 16_384):
            out[s:s + 16_384] = o.hash_values(a[s:s + 16_384, None], items) == t[
                s:s + 16_384, None]
        return out
    raise ParameterError(f"mechanism {mech!r} is not one of {ATTACKABLE}")


def frequency_gain(after: npt.ArrayLike, before: npt.ArrayLike,
                   targets: Sequence[int] | npt.NDArray[Any]) -> float:
    """:math:`\\sum_{t \\in T} (\\tilde f_{t,\\text{after}} - \\tilde f_{t,\\text{before}})`."""
    t = np.asarray(targets, dtype=np.int64)
    return float(np.sum(np.asarray(after)[t] - np.asarray(before)[t]))


def expected_gain(oracle: FrequencyOracle, beta: float, r: int, f_targets: float,
                  supported: float | None = None) -> float:
    """Cao et al.'s expected MGA gain (module docstring); ``supported`` = targets a fake
    report supports (default: 1 for GRR, r for unary, r for local hashing)."""
    o: Any = oracle
    mech = oracle.mechanism
    if supported is None:
        supported = 1.0 if mech == "grr" else float(r)
    q = 1.0 / o.g if mech in ("olh", "blh") else float(o.q)
    return beta * ((supported - r * q) / (float(o.p) - q) - f_targets)


@dataclass(frozen=True)
class Detection:
    """What :func:`detect_fake_users` found: the suspicious items, the support count that
    flags a report, and the flagged reports."""

    items: list[int]
    """The suspicious itemset (empty: none found)."""
    threshold: int
    """Reports supporting at least this many of ``items`` are flagged (0: none)."""
    flags: npt.NDArray[np.bool_]
    """Flagged reports: those of the itemset, and those supporting too many items."""

    @property
    def flagged(self) -> int:
        return int(self.flags.sum())


def _binomial_tail(k: int, n: int, p: float) -> float:
    """P(Binomial(n, p) >= k)."""
    if k <= 0:
        return 1.0
    if k > n:
        return 0.0
    return float(sum(math.comb(n, j) * p**j * (1 - p) ** (n - j) for j in range(k, n + 1)))


def _co_support(s: npt.NDArray[np.bool_]) -> tuple[npt.NDArray[np.float64],
                                                    npt.NDArray[np.float64]]:
    sf = s.astype(np.float32)
    return sf.sum(axis=0).astype(np.float64), (sf.T @ sf).astype(np.float64)


def detect_fake_users(oracle: FrequencyOracle, reports: Reports, *, z: float = 6.0,
                      alpha: float = 1e-3,
                      rng: np.random.Generator | int | None = 0) -> Detection:
    """Cao et al.'s frequent-itemset detection of fake users (module docstring).

    Unary encodings: a report that supports too many items is flagged, and the honest
    co-support is bounded by the product of the marginals.  Local hashing: a (seed,
    bucket) cell far above what uniformly drawn seeds give flags every report of that seed,
    and the honest co-support, which the linear family's structure correlates (h_a(2u) =
    2 h_a(u); seed 0 hashes everything to 0), is measured on a simulated honest population
    drawn from the reports' own normalised estimate, which also checks the flagging
    threshold.

    Parameters
    ----------
    z : float
        A pair of items is suspicious when its co-support count exceeds the honest
        expectation by ``z`` standard deviations (d(d-1)/2 pairs are tested: 6 keeps
        false alarms rare).
    alpha : float
        An honest report is flagged with probability at most ``alpha``.
    rng : seed or Generator
        Randomness of the simulated population (fixed by default: the same reports give
        the same answer).
    """
    mech = oracle.mechanism
    n = len(reports)
    none = Detection([], 0, np.zeros(n, dtype=bool))
    if mech == "grr" or n == 0:
        return none  # a GRR report supports one item: there is no itemset to find
    gen = as_rng(rng)
    o: Any = oracle
    d = oracle.domain_size
    lh = mech in ("olh", "blh")
    q = 1.0 / o.g if lh else float(o.q)
    s = support_matrix(oracle, reports)
    fhat = _normalised(oracle, reports)
    if lh:
        # 1. frequent reports: (seed, bucket) cells far above what honest devices, which
        #    draw seeds uniformly, put there; every report of such a seed is removed, so
        #    the remaining seeds stay (nearly) uniform and the estimator unbiased
        a = reports.columns["a"].astype(np.int64)
        cells = np.bincount(a * o.g + reports.columns["t"].astype(np.int64),
                            minlength=o.n_hashes * o.g).reshape(o.n_hashes, o.g)
        seeds = np.arange(o.n_hashes, dtype=np.int64)
        expect_cells = np.zeros((o.n_hashes, o.g))
        h = o.hash_values(seeds[:, None], np.arange(d, dtype=np.int64)[None, :])
        for v in np.flatnonzero(fhat):  # P(h_a(x) = t) under the estimate
            expect_cells[seeds, h[:, v]] += fhat[v]
        expect_cells = n / o.n_hashes * (o.p * expect_cells
                                         + (1 - o.p) * (1 - expect_cells) / max(1, o.g - 1))
        hot = ((cells - expect_cells) / np.sqrt(expect_cells + 1.0) > z).any(axis=1)
        flags = hot[a]
    else:
        # 1. reports that support too many items: an honest one supports its value and
        #    each other item with probability q
        size = 1 + next((j for j in range(d) if _binomial_tail(j, d - 1, q) <= alpha), d)
        flags = s.sum(axis=1) >= size
    # 2. frequent itemsets: item pairs supported together far more often than by honest
    #    reports
    rest = np.flatnonzero(~flags)
    if rest.size < 2:
        return Detection([], 0, flags)
    c, co = _co_support(s[rest])
    null_s = None
    if lh:
        # the linear family's structure (h_a(2u) = 2 h_a(u), …) correlates items: the
        # expectation is measured on a simulated honest population of the same size
        null_s = support_matrix(oracle, oracle.perturb(gen.choice(d, rest.size, p=fhat),
                                                       rng=gen))
        expect = _co_support(null_s)[1]
        score = (co - expect) / np.sqrt(2 * expect + 1.0)  # both ~Poisson around it
    else:
        # unary bits are independent given the value, and holding one value makes two
        # items' bits negatively correlated: the product of the marginals bounds the
        # honest co-support from above (and, unlike an estimate, the attack cannot
        # inflate it by more than the fraction of the marginals it adds)
        expect = np.outer(c, c) / rest.size
        score = (co - expect) / np.sqrt(expect + 1.0)
    np.fill_diagonal(score, 0.0)
    items = np.flatnonzero((score > z).any(axis=1))
    if items.size < 2:
        return Detection([], 0, flags)
    # An honest report supports its own value (at most one of I) and each other item of
    # I with probability q; for local hashing the simulated population checks the tail
    # where the items of I are not independent.
    threshold = 1 + next((j for j in range(items.size) if _binomial_tail(
        j, items.size - 1, q) <= alpha), items.size)
    if null_s is not None:
        null_k = null_s[:, items].sum(axis=1)
        threshold = max(threshold, next(k for k in range(items.size + 2)
                                        if np.mean(null_k >= k) <= alpha))
    if threshold > items.size:
        return Detection([], 0, flags)
    flags[rest] |= s[rest][:, items].sum(axis=1) >= threshold
    return Detection(items.tolist(), threshold, flags)


def _normalised(oracle: FrequencyOracle, reports: Reports) -> npt.NDArray[np.float64]:
    """The reports' estimate projected on the simplex (norm-sub), a distribution."""
    from .consistency import postprocess

    f = np.clip(postprocess(oracle.estimate(oracle.aggregate(reports)), "norm-sub"), 0, None)
    total = float(f.sum())
    return np.asarray(f / total if total > 0 else np.full(f.size, 1 / f.size), dtype=float)
