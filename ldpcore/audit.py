r"""Empirical privacy audit of an ε-LDP mechanism.

For every pair of inputs :math:`x \ne x'` of a small domain and every output
:math:`y`, ε-LDP requires :math:`P[y \mid x] \le e^\varepsilon P[y \mid x']`.
:func:`audit` perturbs ``trials`` copies of every input, counts each distinct
report, and bounds each log-likelihood ratio with a normal confidence interval
on :math:`\log(\hat p / \hat p')` (delta method: standard error
:math:`\sqrt{1/c - 1/N + 1/c' - 1/N}`), Bonferroni-corrected over all
(pair, output) cells.  The mechanism *violates* its claim when the lower
confidence bound of some log ratio exceeds ε; the audit is *tight* when the
upper bound of the worst observed ratio reaches ε (the mechanism spends its
budget rather than adding needless noise).

Audits are statistical: they catch mechanisms that leak measurably more than
claimed (e.g. one run at 2ε), not violations on outputs too rare to observe.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from .base import Reports

__all__ = ["AuditResult", "audit"]


@dataclass(frozen=True)
class AuditResult:
    """Outcome of :func:`audit` (log-ratios, i.e. in units of ε)."""

    claimed_epsilon: float
    observed: float
    """Largest point estimate of a log-likelihood ratio over well-sampled cells."""
    lower_bound: float
    """Largest lower confidence bound of a log ratio: > ε proves a violation."""
    upper_bound_of_worst: float
    """Upper confidence bound of the cell with the largest point estimate."""
    cells: int

    @property
    def violated(self) -> bool:
        """True when some log ratio exceeds ε with the audit's confidence."""
        return self.lower_bound > self.claimed_epsilon

    @property
    def tight(self) -> bool:
        """True when the worst ratio is consistent with reaching e^ε."""
        return self.upper_bound_of_worst >= self.claimed_epsilon


def audit(
    perturb: Callable[[np.ndarray, np.random.Generator], Reports],
    *,
    epsilon: float,
    domain_size: int,
    trials: int = 100_000,
    seed: int = 0,
    confidence: float = 0.999,
    min_count: int = 30,
) -> AuditResult:
    """Audit ``perturb`` (``values, rng -> Reports``) against the claim ``epsilon``.

    Parameters
    ----------
    perturb:
        The device-side randomiser, e.g. ``oracle.perturb``.
    epsilon:
        The privacy level the mechanism claims.
    domain_size:
        Inputs ``0 .. domain_size-1`` are audited pairwise (keep it small).
    trials:
        Perturbations per input.
    confidence:
        Family-wise confidence (Bonferroni over every pair × output cell).
    min_count:
        Cells where both counts are below this are too rare to judge and skipped
        (a cell seen for one input but never for the other still counts, with the
        zero replaced by 0.5 — the usual continuity correction).

    Examples
    --------
    >>> import ldpcore
    >>> o = ldpcore.make_oracle("grr", epsilon=1.0, domain_size=3)
    >>> r = audit(o.perturb, epsilon=1.0, domain_size=3, trials=20_000)
    >>> r.violated, r.tight
    (False, True)
    >>> loud = ldpcore.make_oracle("grr", epsilon=2.0, domain_size=3)
    >>> audit(loud.perturb, epsilon=1.0, domain_size=3, trials=20_000).violated
    True
    """
    rng = np.random.default_rng(seed)
    index: dict[bytes, int] = {}
    per_input: list[np.ndarray] = []
    for x in range(domain_size):
        keys = perturb(np.full(trials, x, dtype=np.int64), rng).row_keys()
        ids = np.fromiter((index.setdefault(k, len(index)) for k in keys), dtype=np.int64,
                          count=len(keys))
        per_input.append(ids)
    counts = np.stack([np.bincount(ids, minlength=len(index)) for ids in per_input]).astype(float)
    n_out = counts.shape[1]
    cells = domain_size * (domain_size - 1) * n_out
    z = NormalDist().inv_cdf(1 - (1 - confidence) / max(cells, 1))
    best_point, best_lower, best_upper = -math.inf, -math.inf, -math.inf
    for a in range(domain_size):
        for b in range(domain_size):
            if a == b:
                continue
            ca, cb = counts[a], counts[b]
            ok = np.maximum(ca, cb) >= min_count
            ca_, cb_ = np.maximum(ca[ok], 0.5), np.maximum(cb[ok], 0.5)
            log_ratio = np.log(ca_ / cb_)
            se = np.sqrt(np.maximum(1 / ca_ - 1 / trials + 1 / cb_ - 1 / trials, 0.0))
            if log_ratio.size == 0:
                continue
            best_lower = max(best_lower, float(np.max(log_ratio - z * se)))
            i = int(np.argmax(log_ratio))
            if log_ratio[i] > best_point:
                best_point = float(log_ratio[i])
                best_upper = float(log_ratio[i] + z * se[i])
    return AuditResult(epsilon, best_point, best_lower, best_upper, cells)
