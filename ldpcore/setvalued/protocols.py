r"""Multi-phase protocols for set-valued data: LDPMiner, SVIM (items) and SVSM (itemsets).

Each protocol is a sequence of phases.  A phase is one registered mechanism
(``ps``, ``setsize``, ``psi``) whose parameters — the candidate items, the
padding length — come from the *answers* of the earlier phases, so a deployment
runs each phase as its own collection, created from the query API's answer to
the previous one.  :meth:`run` simulates a whole protocol in process.

ε accounting (per device):

* **LDPMiner** (Qin et al., CCS 2016): every device reports to both phases at
  ε/2 each — ε in total by sequential composition.  Phase 1: padding to l
  (a given size, the 90th percentile of the set sizes) and sampling over all d
  items; the top 2k become candidates.  Phase 2: the device's candidates padded
  to 2k, one sampled.  The oracle is OLH in both phases (LDPMiner's succinct
  histogram is a hashing oracle; OLH is its improved form); no amplification.
* **SVIM** (Wang, Li & Jha, IEEE S&P 2018, §V): the devices are *partitioned*
  (default 50 % / 10 % / 40 %); each reports to one phase, at the full ε.
  Phase 1: ``ps`` with l = 1 over all items → top 2k candidates C.  Phase 2:
  ``setsize`` of :math:`|v \cap C|` → the size distribution θ and
  l = its 90th percentile.  Phase 3: ``ps`` on C padded to l with the
  adaptive, amplified oracle; every estimate is multiplied by the truncation
  correction

  .. math:: u(l) = \frac{\sum_L \theta_L\, L}{\sum_L \theta_L \min(L, l)}

  (a holder of x with :math:`|v \cap C| = L > l` keeps x with probability
  l/L; with item membership proportional to L the under-count is 1/u).
* **SVSM** (§VI): half the devices run SVIM for the top items; from the top
  ``k_items`` of those, candidate itemsets (sizes 1..``max_itemset_size``) are
  ranked by the guess :math:`\prod_{x \in I} 0.9\,\hat f_x / \max_y \hat f_y`
  and the best 2k kept; 10 % of the devices report the number of candidate
  itemsets they hold (``setsize``), 40 % report one padded candidate itemset
  (``psi``) with the same correction.  ε per device.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np

from .._validate import as_rng, check_epsilon, check_float, check_int
from ..base import FloatArray, State
from ..errors import ParameterError
from .base import SetBatch
from .ps import MAX_LENGTH, PaddingSampling, PaddingSamplingItemsets, SetSize

__all__ = ["TopItems", "TopItemsets", "LDPMiner", "SVIM", "SVSM", "truncation_correction",
           "top_candidates", "itemset_candidates", "ncr"]


@dataclass(frozen=True)
class TopItems:
    """The answer of an item-mining protocol: items by estimated frequency, best first."""

    items: list[int]
    frequencies: FloatArray
    std_errors: FloatArray
    details: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class TopItemsets:
    """The answer of an itemset-mining protocol: itemsets by estimated support, best first."""

    itemsets: list[list[int]]
    supports: FloatArray
    std_errors: FloatArray
    details: dict[str, Any] = field(default_factory=dict)


def truncation_correction(size_distribution: FloatArray, length: int) -> float:
    r"""SVIM's factor :math:`u(l) = \sum_L \theta_L L / \sum_L \theta_L \min(L, l)` (>= 1).

    >>> truncation_correction(np.array([0.0, 0.5, 0.0, 0.0, 0.5]), 2)  # sizes 1 and 4
    1.6666666666666667
    >>> truncation_correction(np.array([0.2, 0.8]), 1)
    1.0
    """
    sizes = np.arange(size_distribution.size)
    num = float(np.dot(size_distribution, sizes))
    den = float(np.dot(size_distribution, np.minimum(sizes, length)))
    return num / den if den > 0 else 1.0


def top_candidates(estimates: FloatArray, count: int) -> list[int]:
    """Indices of the ``count`` largest estimates (ties: smaller index first)."""
    order = np.lexsort((np.arange(estimates.size), -estimates))
    return [int(i) for i in order[:count]]


def itemset_candidates(items: Sequence[int], frequencies: Sequence[float], count: int,
                       max_size: int = 3) -> list[list[int]]:
    r"""SVSM's candidate itemsets: subsets of ``items`` (sizes 1..max_size) with the largest
    guessed support :math:`\prod_{x \in I} 0.9\, f_x / \max f`.

    >>> itemset_candidates([4, 7, 9], [0.5, 0.4, 0.1], 4)
    [[4], [7], [4, 7], [9]]
    """
    f = np.clip(np.asarray(frequencies, dtype=np.float64), 1e-12, None)
    rel = 0.9 * f / f.max()
    scored: list[tuple[float, int, list[int]]] = []
    for size in range(1, max_size + 1):
        for combo in itertools.combinations(range(len(items)), size):
            guess = float(np.prod(rel[list(combo)]))
            scored.append((-guess, len(scored), sorted(int(items[i]) for i in combo)))
    scored.sort()
    return [s for _, _, s in scored[:count]]


def _split(n: int, fractions: Sequence[float], rng: np.random.Generator) -> list[np.ndarray]:
    """A random partition of range(n) into groups of the given fractions."""
    perm = rng.permutation(n)
    cuts = np.floor(np.cumsum(fractions)[:-1] * n).astype(int)
    return list(np.split(perm, cuts))


def _check_fractions(fractions: Sequence[float], parts: int) -> tuple[float, ...]:
    if len(fractions) != parts:
        raise ParameterError(f"fractions must have {parts} entries, got {len(fractions)}")
    out = tuple(check_float(f"fractions[{i}]", f, low=0.0, high=1.0, low_open=True)
                for i, f in enumerate(fractions))
    if abs(sum(out) - 1.0) > 1e-9:
        raise ParameterError(f"fractions must sum to 1, got {sum(out)!r}")
    return out


_Support = TypeVar("_Support", PaddingSampling, PaddingSamplingItemsets)


def _sized_support(size_phase: SetSize, support_phase: Callable[[int], _Support],
                   size_sets: SetBatch, support_sets: SetBatch, quantile: float,
                   rng: np.random.Generator) -> tuple[State, _Support, State]:
    """The last two phases of SVIM and SVSM: the set sizes fix the padding length.

    Returns the size state, the support oracle at that length and its state.
    """
    size_state = size_phase.aggregate(size_phase.perturb_sets(size_sets, rng=rng))
    support = support_phase(size_phase.size_percentile(size_state, quantile))
    return size_state, support, support.aggregate(support.perturb_sets(support_sets, rng=rng))


def _rank(est: FloatArray, se: FloatArray, entries: Sequence[Any], k: int
          ) -> tuple[list[Any], FloatArray, FloatArray]:
    order = top_candidates(est, min(k, est.size))
    return [entries[i] for i in order], est[order], se[order]


class _Protocol:
    def __init__(self, *, epsilon: float, domain_size: int, k: int) -> None:
        self.epsilon = check_epsilon(epsilon, low=1e-3, high=21.5, context="for a protocol")
        self.domain_size = check_int("domain_size", domain_size, low=2, high=1 << 22)
        self.k = check_int("k", k, low=1, high=MAX_LENGTH // 2)

    @property
    def n_candidates(self) -> int:
        """2k candidates (at most d)."""
        return min(2 * self.k, self.domain_size)


class LDPMiner(_Protocol):
    """LDPMiner's two phases (see the module docstring); ε/2 per phase, every device in both.

    Parameters
    ----------
    epsilon : float
        Total ε per device.
    domain_size : int
        Number of items d.
    k : int
        Number of frequent items wanted.
    length : int
        Phase 1 padding length (LDPMiner takes the 90th percentile of the sizes
        as known).
    """

    def __init__(self, *, epsilon: float, domain_size: int, k: int, length: int) -> None:
        super().__init__(epsilon=epsilon, domain_size=domain_size, k=k)
        self.length = check_int("length", length, low=1, high=MAX_LENGTH)

    def phase1(self) -> PaddingSampling:
        return PaddingSampling(epsilon=self.epsilon / 2, domain_size=self.domain_size,
                               length=self.length, inner="olh")

    def phase2(self, candidates: list[int]) -> PaddingSampling:
        return PaddingSampling(epsilon=self.epsilon / 2, domain_size=self.domain_size,
                               length=len(candidates), inner="olh", candidates=candidates)

    def run(self, sets: Any, rng: np.random.Generator | int | None = None) -> TopItems:
        """Simulate both phases on every device of ``sets``."""
        gen = as_rng(rng)
        batch = SetBatch.from_any(sets, self.domain_size)
        p1 = self.phase1()
        s1 = p1.aggregate(p1.perturb_sets(batch, rng=gen))
        cands = top_candidates(p1.estimate(s1), self.n_candidates)
        p2 = self.phase2(cands)
        s2 = p2.aggregate(p2.perturb_sets(batch, rng=gen))
        est = p2.estimate(s2)[cands]
        se = np.array([p2.std_error(s2.n, float(np.clip(f, 0, 1))) for f in est])
        items, f, s = _rank(est, se, cands, self.k)
        return TopItems(items, f, s, {"candidates": cands, "epsilon_per_device": self.epsilon,
                                      "phase_epsilons": [self.epsilon / 2] * 2,
                                      "n": [s1.n, s2.n]})


class SVIM(_Protocol):
    """SVIM's three phases (see the module docstring); each device in one phase, at ε.

    Parameters
    ----------
    epsilon : float
        ε per device (each device reports once, to one phase).
    domain_size : int
        Number of items d.
    k : int
        Number of frequent items wanted (2k candidates).
    fractions : (float, float, float)
        Shares of the devices in phases 1, 2, 3 (default 0.5, 0.1, 0.4).
    quantile : float
        Phase 3 pads to this quantile of the estimated sizes (default 0.9).
    inner : {"auto", "grr", "olh"}
        Phase 3's oracle (phase 1 uses ``auto`` too).

    Examples
    --------
    >>> from ldpcore.setvalued.synthetic import zipf_sets
    >>> sets = zipf_sets(40_000, 64, rng=np.random.default_rng(3))
    >>> top = SVIM(epsilon=2.0, domain_size=64, k=4).run(sets, rng=4)
    >>> top.items
    [0, 1, 2, 3]
    """

    def __init__(self, *, epsilon: float, domain_size: int, k: int,
                 fractions: Sequence[float] = (0.5, 0.1, 0.4), quantile: float = 0.9,
                 inner: str = "auto") -> None:
        super().__init__(epsilon=epsilon, domain_size=domain_size, k=k)
        self.fractions = _check_fractions(fractions, 3)
        self.quantile = check_float("quantile", quantile, low=0.0, high=1.0, low_open=True)
        self.inner = inner

    def phase1(self) -> PaddingSampling:
        """Candidate identification: one item sampled (l = 1)."""
        return PaddingSampling(epsilon=self.epsilon, domain_size=self.domain_size, length=1)

    def candidates(self, phase1: PaddingSampling, state: State) -> list[int]:
        return top_candidates(phase1.estimate(state), self.n_candidates)

    def phase2(self, candidates: list[int]) -> SetSize:
        """Size of the device's intersection with the candidates."""
        return SetSize(epsilon=self.epsilon, domain_size=self.domain_size,
                       candidates=candidates, max_size=len(candidates))

    def phase3(self, candidates: list[int], length: int) -> PaddingSampling:
        """Frequencies of the candidates, padded to ``length``."""
        return PaddingSampling(epsilon=self.epsilon, domain_size=self.domain_size,
                               length=length, inner=self.inner, candidates=candidates)

    def result(self, phase2: SetSize, state2: State, phase3: PaddingSampling, state3: State,
               k: int | None = None) -> TopItems:
        """Corrected top items from the phase 2 and phase 3 states."""
        assert phase3.candidates is not None
        theta = phase2.size_distribution(state2)
        u = truncation_correction(theta, phase3.length)
        cands = phase3.candidates
        raw = phase3.estimate(state3)[cands]
        est = raw * u
        se = u * np.array([phase3.std_error(state3.n, float(np.clip(f, 0, 1))) for f in raw])
        items, f, s = _rank(est, se, cands, self.k if k is None else k)
        return TopItems(items, f, s, {"candidates": cands, "length": phase3.length,
                                      "correction": u, "epsilon_per_device": self.epsilon,
                                      "inner": phase3.inner.mechanism,
                                      "inner_epsilon": phase3.inner_epsilon})

    def run(self, sets: Any, rng: np.random.Generator | int | None = None) -> TopItems:
        """Simulate the three phases on a random partition of ``sets``."""
        gen = as_rng(rng)
        batch = SetBatch.from_any(sets, self.domain_size)
        g1, g2, g3 = _split(len(batch), self.fractions, gen)
        p1 = self.phase1()
        s1 = p1.aggregate(p1.perturb_sets(batch[g1], rng=gen))
        cands = self.candidates(p1, s1)
        p2 = self.phase2(cands)
        s2, p3, s3 = _sized_support(p2, lambda length: self.phase3(cands, length),
                                    batch[g2], batch[g3], self.quantile, gen)
        out = self.result(p2, s2, p3, s3)
        out.details["n"] = [s1.n, s2.n, s3.n]
        return out


class SVSM(_Protocol):
    """SVSM: frequent itemsets (see the module docstring); each device in one phase, at ε.

    Parameters
    ----------
    epsilon, domain_size
        As for :class:`SVIM`.
    k : int
        Number of frequent itemsets wanted (2k candidate itemsets).
    k_items : int
        Top items (from SVIM) whose subsets are the candidate itemsets (default
        min(k, 12)).
    max_itemset_size : int
        Largest candidate itemset (default 3).
    fractions : (float, float, float)
        Shares of the devices for SVIM, the itemset sizes and the itemset
        supports (default 0.5, 0.1, 0.4).
    """

    def __init__(self, *, epsilon: float, domain_size: int, k: int, k_items: int | None = None,
                 max_itemset_size: int = 3, fractions: Sequence[float] = (0.5, 0.1, 0.4),
                 quantile: float = 0.9) -> None:
        super().__init__(epsilon=epsilon, domain_size=domain_size, k=k)
        self.k_items = check_int("k_items", min(k, 12) if k_items is None else k_items,
                                 low=1, high=min(self.domain_size, 32))
        self.max_itemset_size = check_int("max_itemset_size", max_itemset_size, low=1, high=6)
        self.fractions = _check_fractions(fractions, 3)
        self.quantile = check_float("quantile", quantile, low=0.0, high=1.0, low_open=True)
        self.svim = SVIM(epsilon=self.epsilon, domain_size=self.domain_size, k=self.k_items,
                         quantile=self.quantile)

    def candidates(self, items: TopItems) -> list[list[int]]:
        return itemset_candidates(items.items, items.frequencies.tolist(), 2 * self.k,
                                  self.max_itemset_size)

    def size_phase(self, itemsets: list[list[int]]) -> SetSize:
        return SetSize(epsilon=self.epsilon, domain_size=self.domain_size, itemsets=itemsets,
                       max_size=len(itemsets))

    def support_phase(self, itemsets: list[list[int]], length: int) -> PaddingSamplingItemsets:
        return PaddingSamplingItemsets(epsilon=self.epsilon, domain_size=self.domain_size,
                                       length=length, itemsets=itemsets)

    def result(self, size_phase: SetSize, size_state: State, support: PaddingSamplingItemsets,
               support_state: State, k: int | None = None) -> TopItemsets:
        u = truncation_correction(size_phase.size_distribution(size_state), support.length)
        raw, se = support.itemset_support(support_state)
        its, f, s = _rank(raw * u, se * u, support.itemsets, self.k if k is None else k)
        return TopItemsets(its, f, s, {"length": support.length, "correction": u,
                                       "epsilon_per_device": self.epsilon})

    def run(self, sets: Any, rng: np.random.Generator | int | None = None) -> TopItemsets:
        """Simulate SVSM on a random partition of ``sets``."""
        gen = as_rng(rng)
        batch = SetBatch.from_any(sets, self.domain_size)
        g_items, g_size, g_sup = _split(len(batch), self.fractions, gen)
        items = self.svim.run(batch[g_items], rng=gen)
        cands = self.candidates(items)
        p2 = self.size_phase(cands)
        s2, p3, s3 = _sized_support(p2, lambda length: self.support_phase(cands, length),
                                    batch[g_size], batch[g_sup], self.quantile, gen)
        out = self.result(p2, s2, p3, s3)
        out.details.update({"items": items.items, "candidates": cands,
                            "n": [len(g_items), s2.n, s3.n]})
        return out


def ncr(found: Sequence[Any], truth: Sequence[Any]) -> float:
    r"""Normalised cumulative rank (S&P 2018, §VII): the true top-k item of rank i scores
    k - i + 1 when found; NCR = found score / total score.

    >>> ncr([3, 1], [1, 2, 3])
    0.6666666666666666
    """
    k = len(truth)
    score = {t if not isinstance(t, list) else tuple(t): k - i for i, t in enumerate(truth)}
    got = sum(score.get(x if not isinstance(x, list) else tuple(x), 0) for x in found)
    return got / (k * (k + 1) / 2) if k else math.nan
