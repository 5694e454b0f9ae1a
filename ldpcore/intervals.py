r"""Honest intervals for any frequency answer, and the method chosen per query by simulated error.

The consistency methods of Wang et al. (NDSS 2020) trade bias for variance: an
interval built from the unbiased estimator's variance and centred on a
post-processed value misses the truth by the bias.  This module gives every
answer an interval that contains the bias, by a **parametric bootstrap through
the mechanism's channel**:

1. fit a distribution :math:`\tilde f` to the state — Norm-Sub of the unbiased
   estimate (the paper's "synthetic dataset"), or one the caller passes;
2. draw R states of n reports from :math:`\tilde f` with
   :meth:`~ldpcore.FrequencyOracle.sample_counts` (O(state size) per draw for
   the frequency oracles: the sufficient statistics are simulated, not the
   reports) and estimate each;
3. apply the answer (post-process with method m, take the entries or a subset
   sum) to every simulated estimate; the errors
   :math:`e_r = a(\text{sim}_r) - a^*(\tilde f)` against the answer's truth at
   :math:`\tilde f` estimate the distribution of the error, bias included;
4. the *basic* bootstrap interval :math:`[\hat a - q_{1-\alpha/2}(e),\ \hat a -
   q_{\alpha/2}(e)]` (order statistics rounded outwards) covers the truth at level
   :math:`1-\alpha` where the error distribution changes slowly with the truth.  The
   bias :math:`\bar e` is itself estimated at the fit, not at the truth (a sparser
   distribution), so the interval is widened by :math:`|\bar e|` on the side that
   allows any bias between 0 and :math:`\bar e`.

The pivot fails near the boundary: a clipped value whose fitted frequency is 0 has
errors :math:`\ge 0` only, so its basic interval ends at the point (often 0) and
misses every small positive truth.  Where the fitted answer lies within
:data:`BOUNDARY_SIGMAS` standard errors of 0, or the bias exceeds
:data:`BIAS_RATIO` bootstrap standard deviations (then it depends too much on the
fit, e.g. Power's fitted law), the interval is joined with the unbiased
estimator's analytic interval (which covers at its level by itself).  Every
interval is clipped to [0, 1], where the truth lies.  The unbiased ``base``
method keeps its analytic normal interval.  Where simulating would exceed
:data:`SIMULATION_BUDGET`, a post-processed answer comes without an interval and
says why (``auto`` then keeps ``base``).

**Choosing the method** (``method="auto"``; Wang et al., Section VI, "choosing
the method on synthetic dataset"): each candidate's squared error for the query
at hand (all d frequencies, or one subset sum) is simulated, relative to ``base``,
in the Norm-Sub fit :math:`\tilde f` and in :data:`RESIMULATED_WORLDS` Norm-Sub fits
of states simulated from it (which differ from :math:`\tilde f` as :math:`\tilde f`
differs from the truth).  Their spread gives the ratio's bootstrap bias correction
and standard error; a method replaces ``base`` only if it beats base in the fit by
:data:`SELECTION_Z` Monte-Carlo standard errors and its bias-corrected ratio is
below 1 by :data:`SELECTION_Z` standard errors (fit uncertainty and Monte-Carlo
noise).  For a subset, the set's frequency is also moved to both ends of its
interval (:data:`TILT_Z` standard errors), and a method worse than ``base`` at
either end is refused: at small n a low noisy estimate of the set makes the fitted
worlds favour methods that shrink the set further.  Among the qualifying methods
the least corrected MSE ratio wins.  Fresh simulations then give the interval.
Power and PowerNS are candidates while their cost fits :data:`POWER_BUDGET`.

**Simulating a state** (:func:`simulated_estimates`).  Where a draw of the state
costs little (at most :data:`EXACT_CELLS_PER_VALUE` cells per domain value: GRR, the
unary encodings, HRR, BLH, SS) or n is small, states are drawn exactly through the
mechanism's channel.  Otherwise (OLH's :math:`g^{r+1} \ge 3d` cells, CMS/HCMS sketches)
the unbiased estimate of a state is drawn from its normal approximation,
:math:`\hat f_x \sim N(\tilde f_x, \mathrm{Var}(n, \tilde f_x) + \tilde f_x(1 - \tilde
f_x)/n)` independently per value: each :math:`\hat f_x` is a sum of n i.i.d. report
terms (normal by the central limit theorem once n >= :data:`NORMAL_MIN_N`), the first
variance is the mechanism's analytic one and the second the simulated population's, as
in the exact draw.  The estimates' covariances are left out: they are O(1/(n d)) for the
pairwise-independent hash families, and a subset's own variance is its exact one
(``subset_variance``).  This is O(R·d) instead of O(R·cells) plus the transform back.

The randomness is derived from the state (:func:`state_seed`) unless an ``rng``
is given, so the same state always gets the same answer (cache-friendly).

>>> import ldpcore
>>> from ldpcore.intervals import answer
>>> o = ldpcore.make_oracle("grr", epsilon=2.0, domain_size=8)
>>> s = o.sample_state([0.4, 0.3, 0.2, 0.1, 0, 0, 0, 0], 20_000, rng=3)
>>> a = answer(o, s, method="norm-sub", indices=[0, 1])
>>> a.interval, bool(a.low[0] <= 0.7 <= a.high[0])
('bootstrap', True)
>>> answer(o, s).method in ldpcore.POSTPROCESS_METHODS  # auto: named in the answer
True
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Any

import numpy as np

from ._validate import as_rng, check_float, check_int
from .base import FloatArray, FrequencyOracle, KeptEstimate, State, own, owned
from .consistency import METHODS
from .consistency.batch import postprocess_rows, simplex_projection_rows
from .errors import ParameterError, StateError

__all__ = ["Answer", "BOUNDARY_SIGMAS", "DEFAULT_REPLICATES", "EXACT_CELLS_PER_VALUE",
           "NORMAL_MIN_N", "Prepared", "answer", "bootstrap_interval", "can_simulate",
           "choose_method", "fit_distribution", "method_answers", "prepare", "prepare_kept",
           "simulated_estimates", "state_seed"]

DEFAULT_REPLICATES = 200
"""Bootstrap replicates R per answer (the 2.5 % quantile is then the 5th smallest error)."""

BOUNDARY_SIGMAS = 3.0
"""Fitted answers below this many standard errors get the analytic interval joined in."""

BIAS_RATIO = 0.5
"""A bias above this many bootstrap standard deviations is too fit-dependent to trust alone:
the analytic interval is joined in."""

POWER_BUDGET = 4_000_000
"""``auto`` simulates Power/PowerNS only while R·d·min(d, 512) stays within this many kernel
evaluations (their posterior mean costs O(d·512) per vector); above it they are skipped."""

SIMULATION_BUDGET = 20_000_000
"""Elementary operations (R × :meth:`~ldpcore.FrequencyOracle.sample_cost`) a bootstrap may
spend simulating states; above it the answer has no bootstrap (``auto`` keeps ``base``)."""

EXACT_CELLS_PER_VALUE = 2
"""States with at most this many cells per domain value are drawn exactly through the
channel; larger ones (OLH, the sketches) by the normal approximation of their estimate."""

NORMAL_MIN_N = 1000
"""Below this many reports every state is drawn exactly (the normal approximation of a
value's estimate needs a large n)."""

SELECTION_Z = 3.0
"""Standard errors by which a candidate must beat ``base`` (≈ 1 % family-wise over ten)."""

SELECTION_REPLICATES = 50
"""Replicates ``auto`` simulates in the Norm-Sub fit to compare candidates (fresh ones then
give the interval)."""

RESIMULATED_WORLDS = 8
"""Further synthetic worlds: Norm-Sub fits of states simulated from the Norm-Sub fit (they
differ from it as it differs from the truth); their spread is the fit's uncertainty."""

WORLD_REPLICATES = 25
"""Replicates per resimulated (or tilted) world."""

TILT_Z = 2.0
"""A subset's frequency is moved this many standard errors either side of its unbiased
estimate in two more worlds; a candidate worse than ``base`` at either end is refused."""


@dataclass(frozen=True)
class Answer:
    """A frequency answer with its interval.

    Attributes
    ----------
    method : str
        The post-processing method used (``auto`` resolved).
    estimate : array
        The answer: d frequencies (full domain) or one subset sum, shape (1,).
    low, high : array or None
        The interval at ``confidence``; ``None`` with a ``reason`` when no
        honest interval can be given.
    std_error : array or None
        Analytic standard error (``base``) or the bootstrap standard deviation of
        the error (post-processed methods).
    interval : str or None
        ``"analytic"`` (normal, unbiased estimator) or ``"bootstrap"`` (basic
        parametric bootstrap on the Norm-Sub fit, joined with the analytic
        interval near 0).
    reason : str or None
        Why there is no interval, or why ``auto`` kept fewer candidates (or kept base
        without simulating every world).
    n, confidence, replicates
        Reports behind the answer, the level, bootstrap replicates (0 if none).
    mse : dict
        Simulated mean squared error of each candidate in the Norm-Sub fit, bootstrap
        bias-corrected where the resimulated worlds were simulated (``auto``; see
        ``_select``), else empty.
    simulated_at_n : int or None
        The sample size the bootstrap errors were simulated at when they were kept from a
        nearby state and rescaled to this one (:func:`prepare_kept`); None: simulated for
        this state.
    """

    method: str
    estimate: FloatArray
    low: FloatArray | None
    high: FloatArray | None
    std_error: FloatArray | None
    interval: str | None
    reason: str | None
    n: int
    confidence: float
    replicates: int
    mse: dict[str, float] = field(default_factory=dict)
    simulated_at_n: int | None = None


def state_seed(state: State) -> int:
    """A 64-bit seed derived from the state (fingerprint, n, counts): same state, same seed."""
    h = hashlib.sha256()
    h.update(state.fingerprint.encode("ascii"))
    h.update(int(state.n).to_bytes(8, "little"))
    h.update(np.ascontiguousarray(state.counts, dtype="<i8").tobytes())
    return int.from_bytes(h.digest()[:8], "little")


def fit_distribution(oracle: FrequencyOracle, state: State) -> FloatArray:
    """The synthetic dataset of Wang et al.: Norm-Sub of the unbiased estimate."""
    raw = oracle.estimate(state)
    out: FloatArray = simplex_projection_rows(raw[None, :])[0]
    return out


def _normal_draws(oracle: FrequencyOracle, n: int) -> bool:
    """Whether states of n reports are simulated by the normal approximation."""
    cells = math.prod(oracle.state_shape)
    return n >= NORMAL_MIN_N and cells > EXACT_CELLS_PER_VALUE * oracle.domain_size


def can_simulate(oracle: FrequencyOracle, n: int, replicates: int) -> bool:
    """Whether ``replicates`` states of n reports fit :data:`SIMULATION_BUDGET`."""
    if _normal_draws(oracle, n):
        return True  # O(replicates · d)
    return replicates * oracle.sample_cost(n) <= SIMULATION_BUDGET


def _value_variances(oracle: FrequencyOracle, n: int, freqs: FloatArray) -> FloatArray:
    """``oracle.variance(n, f)`` for every f in ``freqs`` (clipped to [0, 1]).

    Every frequency oracle's variance is a polynomial of degree at most 2 in f (affine
    for the flat oracles; HH adds the sampling term f(1 − f)(h − 1)/n): the quadratic
    through f = 0, 1/2, 1 is used when two more points agree with it (relative 1e-9),
    else one call per value (d validated calls cost ~40 µs each at d = 1,024).
    """
    f = np.clip(np.asarray(freqs, dtype=np.float64), 0.0, 1.0)
    poly = _variance_polynomial(oracle, n)
    if poly is not None:
        v0, b, c = poly
        out: FloatArray = v0 + f * (b + c * (f - 0.5))
        return out
    return np.array([oracle.variance(n, float(x)) for x in f])


def _variance_polynomial(oracle: FrequencyOracle, n: int) -> tuple[float, float, float] | None:
    """(v0, b, c) of :func:`_value_variances`' quadratic at n, or None; kept by the oracle
    for its 4 latest n (every answer of a state asks it at that state's n, several times)."""
    kept: dict[int, tuple[float, float, float] | None] = owned(
        oracle, "_variance_polynomials") or {}
    if n in kept:
        return kept[n]
    v0, v1 = oracle.variance(n, 0.0), oracle.variance(n, 1.0)
    half = oracle.variance(n, 0.5)
    # Newton form through (0, v0), (1/2, half), (1, v1): v0 + b f + c f (f − 1/2).
    b = 2.0 * (half - v0)
    c = 2.0 * (v1 - half) - b
    poly = (v0, b, c) if all(
        math.isclose(oracle.variance(n, x), v0 + b * x + c * x * (x - 0.5), rel_tol=1e-9,
                     abs_tol=0.0) for x in (0.125, 0.8)) else None
    # A new dict swapped in whole: a thread reading the old one sees a whole dict.
    own(oracle, "_variance_polynomials", {**dict(list(kept.items())[-3:]), n: poly})
    return poly


def simulated_estimates(oracle: FrequencyOracle, dist: FloatArray, n: int, size: int,
                        rng: np.random.Generator) -> FloatArray:
    """Unbiased estimates (size, d) of ``size`` states of n reports drawn from ``dist``:
    exact through the channel, or by the normal approximation (see the module notes)."""
    if not _normal_draws(oracle, n):
        counts = oracle.sample_counts(dist, n, size=size, rng=rng)
        return oracle.estimate_counts(counts, n)
    f = np.asarray(dist, dtype=np.float64)
    sd = np.sqrt(_value_variances(oracle, n, f) + f * (1.0 - f) / n)
    out: FloatArray = f + rng.standard_normal((size, f.size)) * sd
    return out


def _check_indices(indices: Sequence[int] | np.ndarray | None, d: int) -> np.ndarray | None:
    if indices is None:
        return None
    idx = np.asarray(indices)
    if idx.ndim != 1 or idx.size == 0 or idx.dtype.kind not in "iu":
        raise ParameterError("indices must be a non-empty 1-D sequence of integers")
    if idx.min() < 0 or idx.max() >= d:
        raise ParameterError(f"indices must lie in [0, {d})")
    if np.unique(idx).size != idx.size:
        raise ParameterError("indices must be distinct")
    return idx.astype(np.int64)


def method_answers(est: FloatArray, method: str, indices: np.ndarray | None, *,
                   variance: float, variance_slope: float = 0.0) -> FloatArray:
    """Answers of ``method`` for every row of estimates (R, d): (R, d) or subset sums (R, 1).

    ``post-pos`` clips each query answer at 0 (per value for the full domain,
    the sum for a subset), as in :func:`ldpcore.subset_query`.
    """
    if method == "post-pos":
        clipped: FloatArray = np.maximum(
            est if indices is None else est[:, indices].sum(axis=1, keepdims=True), 0.0)
        return clipped
    vec = postprocess_rows(est, method, variance=variance, variance_slope=variance_slope)
    if indices is None:
        return vec
    out: FloatArray = vec[:, indices].sum(axis=1, keepdims=True)
    return out


def _analytic_se(oracle: FrequencyOracle, n: int, freqs: FloatArray,
                 indices: np.ndarray | None) -> FloatArray:
    var = _value_variances(oracle, n, freqs)
    if indices is None:
        se: FloatArray = np.sqrt(var)
        return se
    # Var of a sum ≈ sum of variances (the estimates' covariances are O(1/(n d))).
    return np.array([math.sqrt(float(var[indices].sum()))])


def _z(confidence: float) -> float:
    # From the tail: (1 + c) / 2 rounds to 1.0 for c within 2^-53 of 1 (inv_cdf refuses 1).
    return -NormalDist().inv_cdf((1.0 - confidence) / 2.0)


def _candidates(d: int, replicates: int) -> tuple[list[str], str | None]:
    names = list(METHODS)
    if replicates * d * min(d, 512) > POWER_BUDGET:
        names = [m for m in names if m not in ("power", "power-ns")]
        return names, (f"power and power-ns not simulated at d={d} (cost over "
                       f"{POWER_BUDGET} kernel evaluations); still available by name")
    return names, None


def _tilted(f: FloatArray, idx: np.ndarray, total: float) -> FloatArray:
    """``f`` with the set ``idx`` rescaled to hold ``total`` and the rest to hold 1 − total."""
    inside = np.zeros(f.size, dtype=bool)
    inside[idx] = True
    out = np.zeros_like(f)
    for part, mass in ((inside, total), (~inside, 1.0 - total)):
        held = float(f[part].sum())
        if part.any():
            out[part] = f[part] * (mass / held) if held > 0 else mass / int(part.sum())
    res: FloatArray = out / out.sum()
    return res


def _select(oracle: FrequencyOracle, raw: FloatArray, f_fit: FloatArray,
            idx: np.ndarray | None, simulate: Callable[[FloatArray, int], FloatArray],
            errors: Callable[..., FloatArray], query_se: float,
            ) -> tuple[str, dict[str, float], str | None]:
    r"""``auto``: the candidate with the least simulated MSE that beats base for sure.

    Let :math:`\rho_m(f)` be candidate m's MSE for the query relative to ``base``'s
    in world f.  It is simulated (paired: the same states for every method) in

    * the Norm-Sub fit :math:`\tilde f` (:data:`SELECTION_REPLICATES` states), and
    * :data:`RESIMULATED_WORLDS` Norm-Sub fits :math:`f^*_k` of states simulated from
      :math:`\tilde f` (:data:`WORLD_REPLICATES` each): they differ from
      :math:`\tilde f` as :math:`\tilde f` differs from the truth.

    The bootstrap bias-corrected ratio :math:`\rho^c = 2\rho(\tilde f) -
    \overline{\rho(f^*)}` has variance about :math:`s^2_{f^*}(1 + 1/K) + 4\,
    \mathrm{se}^2_{MC}` (the spread over the fitted worlds plus the Monte-Carlo error
    of :math:`\rho(\tilde f)`, delta method).  A candidate qualifies only if it beats
    base in the fit itself, :math:`\rho(\tilde f) + z\,\mathrm{se}_{MC} < 1` (the
    synthetic-dataset choice; the correction must not extrapolate a gain the fit does
    not show), and :math:`\rho^c + z\,\mathrm{sd} < 1`, with :math:`z` =
    :data:`SELECTION_Z`.  The worlds are simulated in that order (tilted, fit,
    resimulated) and the rest skipped once no candidate is left: same decision, less
    work.

    For a **subset** the answer's own value matters most: a method that shrinks small
    sums looks excellent in a world where the set's frequency is small, which is where
    a low noisy estimate puts it.  So the set's frequency is also moved to both ends of
    its :data:`TILT_Z`-standard-error interval around the unbiased estimate
    (:math:`\tilde f` rescaled inside and outside the set), and a candidate must not
    be worse than ``base`` at either end.  The qualifying candidate with the least
    :math:`\rho^c` wins, else ``base``.
    """
    k, s0 = RESIMULATED_WORLDS, SELECTION_REPLICATES
    names, note = _candidates(oracle.domain_size, s0)
    names = [m for m in names if m != "base"]

    def world_sse(worlds: FloatArray, sizes: list[int]) -> tuple[dict[str, FloatArray],
                                                                FloatArray]:
        """Squared errors of base and every candidate, and the per-world means, paired."""
        # Every world in one matrix: each method runs once over all the rows.
        sims = np.vstack([simulate(f, r) for f, r in zip(worlds, sizes, strict=True)])
        truths = np.repeat(method_answers(worlds, "base", idx, variance=1.0), sizes, axis=0)
        cuts = np.cumsum([0, *sizes])
        cache: dict[str, FloatArray] = {}
        rows = {m: (errors(m, sims, truths, cache) ** 2).sum(axis=1) for m in ("base", *names)}
        means = np.array([[x[a:b].mean() for a, b in zip(cuts[:-1], cuts[1:], strict=True)]
                          for x in rows.values()])
        return rows, np.maximum(means, np.finfo(np.float64).tiny)

    if idx is not None:
        # The tilted worlds first: a candidate worse than base at either end is out, and
        # when none is left the other worlds need not be simulated (same decision).
        centre = float(raw[idx].sum())
        ends = [min(max(centre + sgn * TILT_Z * query_se, 0.0), 1.0) for sgn in (-1, 1)]
        _, tilt = world_sse(np.stack([_tilted(f_fit, idx, t) for t in ends]),
                            [WORLD_REPLICATES] * len(ends))
        names = [m for i, m in enumerate(names, 1) if bool(np.all(tilt[i] <= tilt[0]))]
        if not names:
            why = (f"auto kept base: every candidate's simulated error exceeds base's with "
                   f"the set's frequency {TILT_Z:g} standard errors below or above its estimate")
            return "base", {}, why if note is None else f"{why}; {note}"
    # The fitted world itself first: a candidate must beat base there by SELECTION_Z
    # Monte-Carlo standard errors; when none does, the other worlds need not be simulated.
    rows0, means0 = world_sse(f_fit[None, :], [s0])
    base0 = float(means0[0, 0])
    mse = {"base": base0}
    rho0: dict[str, float] = {}
    mc: dict[str, float] = {}
    for i, m in enumerate(names, 1):
        rho0[m] = float(means0[i, 0]) / base0
        mc[m] = float((rows0[m] - rho0[m] * rows0["base"]).std(ddof=1)) / (math.sqrt(s0) * base0)
        mse[m] = rho0[m] * base0
    names = [m for m in names if rho0[m] + SELECTION_Z * mc[m] < 1.0]
    if not names:
        return "base", mse, note
    _, means = world_sse(simplex_projection_rows(simulate(f_fit, k)), [WORLD_REPLICATES] * k)
    chosen, best = "base", 1.0
    for i, m in enumerate(names, 1):
        rho = means[i] / means[0]
        corrected = 2.0 * rho0[m] - float(rho.mean())
        mse[m] = max(corrected, 0.0) * base0
        sd = math.sqrt(float(rho.var(ddof=1)) * (1.0 + 1.0 / k) + 4.0 * mc[m] ** 2)
        if corrected + SELECTION_Z * sd < 1.0 and corrected < best:
            chosen, best = m, corrected
    return chosen, mse, note


def answer(oracle: FrequencyOracle, state: State, *, method: str = "auto",
           indices: Sequence[int] | np.ndarray | None = None, confidence: float = 0.95,
           replicates: int = DEFAULT_REPLICATES, rng: np.random.Generator | int | None = None,
           fitted: FloatArray | None = None, n_effective: float | None = None) -> Answer:
    """A full-domain (``indices=None``) or subset-sum answer with an honest interval.

    Parameters
    ----------
    oracle, state
        The collection's oracle and its state (n >= 1).
    method : str
        ``"auto"`` (the smallest simulated MSE, never worse than ``base`` beyond
        Monte-Carlo noise) or one of :data:`ldpcore.POSTPROCESS_METHODS`.
    indices : sequence of int, optional
        A fixed set of values: the answer is the frequency of the set.
    confidence : float
        Level of the interval, in (0, 1).
    replicates : int
        Bootstrap replicates R (>= 20).
    rng : Generator or int, optional
        Default: seeded from the state (:func:`state_seed`), so answers are
        reproducible per state.
    fitted : array, optional
        The distribution to simulate from (default :func:`fit_distribution`).
    n_effective : float, optional
        The effective sample size when reports are not independent (memoized reports
        of one device in several windows: :func:`ldpcore.longitudinal.effective_sample_size`);
        variances and simulations use it instead of ``state.n``.  The estimate itself
        still uses every report.

    ``answer(..., confidence=c)`` is ``prepare(...).at(c)``: everything but the level
    (estimate, method choice, simulated errors) is computed by :func:`prepare`.
    """
    confidence = _check_confidence(confidence)
    return prepare(oracle, state, method=method, indices=indices, replicates=replicates,
                   rng=rng, fitted=fitted, n_effective=n_effective).at(confidence)


def _check_confidence(confidence: float) -> float:
    confidence = check_float("confidence", confidence, low=0.0, high=1.0, low_open=True)
    if confidence >= 1.0:
        raise ParameterError(f"confidence must be a number in (0, 1), got {confidence!r}")
    return confidence


@dataclass(frozen=True)
class Prepared:
    """An answer before its level is chosen: what :func:`answer` computes for every level.

    The point, the method (``auto`` resolved), the analytic standard errors and, for a
    bootstrap, the simulated errors sorted per entry (``errors``, shape (k, R)), their
    mean (bias) and spread and which entries join the analytic interval (``errors`` times
    ``error_scale``: errors kept from a nearby state are shared and rescaled).  :meth:`at`
    turns it into the :class:`Answer` at any confidence in O(k): a service answering
    the same state at many levels computes this once (:attr:`nbytes` is its size).
    """

    method: str
    point: FloatArray
    raw_answer: FloatArray
    raw_se: FloatArray
    kind: str | None
    reason: str | None
    n: int
    replicates: int
    mse: dict[str, float] = field(default_factory=dict)
    errors: FloatArray | None = None
    bias: FloatArray | None = None
    spread: FloatArray | None = None
    near: np.ndarray | None = None
    interval: bool = True
    simulated_at_n: int | None = None
    error_scale: float = 1.0

    @property
    def nbytes(self) -> int:
        """Bytes held by its arrays (for a cache bounded in bytes)."""
        arrays = (self.point, self.raw_answer, self.raw_se, self.errors, self.bias,
                  self.spread, self.near)
        return sum(int(a.nbytes) for a in arrays if a is not None) + 64 * len(self.mse)

    def at(self, confidence: float) -> Answer:
        """The answer with its interval at ``confidence`` (in (0, 1))."""
        confidence = _check_confidence(confidence)
        if not self.interval:
            return Answer(self.method, self.point, None, None, None, None, self.reason,
                          self.n, confidence, 0)
        z = _z(confidence)
        raw_ans, raw_se = self.raw_answer, self.raw_se
        if self.errors is None:
            return Answer("base", raw_ans, raw_ans - z * raw_se, raw_ans + z * raw_se,
                          raw_se, self.kind, self.reason, self.n, confidence, 0, self.mse)
        assert self.bias is not None and self.near is not None
        # Order statistics rounded outwards: a finite R must not narrow the interval
        # (np.quantile's "lower"/"higher").
        lo, hi = _order_indices(self.errors.shape[1], 1.0 - confidence)
        # Kept errors (prepare_kept) are shared, not copied: their scale applies here.
        q_lo, q_hi = (self.errors[:, lo] * self.error_scale,
                      self.errors[:, hi] * self.error_scale)
        bias, point = self.bias, self.point
        # The bias is estimated at the fit, not at the truth: allow any bias between 0 and it.
        low = point - q_hi + np.minimum(bias, 0.0)
        high = point - q_lo + np.maximum(bias, 0.0)
        low = np.where(self.near, np.minimum(low, raw_ans - z * raw_se), low)
        high = np.where(self.near, np.maximum(high, raw_ans + z * raw_se), high)
        return Answer(self.method, point, np.clip(low, 0.0, 1.0), np.clip(high, 0.0, 1.0),
                      self.spread, "bootstrap", self.reason, self.n, confidence,
                      self.replicates, self.mse, self.simulated_at_n)


@dataclass
class _Head:
    """What every prepared answer computes of its state before simulating anything: the
    sample size behind the interval, the unbiased estimate, its answer and analytic
    standard error (the exact subset variance where the mechanism has one)."""

    oracle: FrequencyOracle
    state: State
    n: int
    idx: np.ndarray | None
    raw: FloatArray
    var0: float
    slope: float
    raw_ans: FloatArray
    raw_se: FloatArray
    exact: Any
    _fit: FloatArray | None = None
    _kept: KeptEstimate | None = None

    @classmethod
    def of(cls, oracle: FrequencyOracle, state: State,
           indices: Sequence[int] | np.ndarray | None, n_effective: float | None) -> _Head:
        oracle.check_state(state)
        if state.n <= 0:
            raise StateError("cannot answer from an empty state (n = 0)")
        n = state.n
        if n_effective is not None:
            n = max(1, min(n, int(math.floor(check_float("n_effective", n_effective, low=1.0,
                                                                  high=float(2**62))))))
        idx = _check_indices(indices, oracle.domain_size)
        kept = _kept_estimate(oracle, state)
        raw = kept.raw
        var0 = oracle.variance(n)
        slope = oracle.variance(n, 1.0) - var0
        raw_ans = method_answers(raw[None, :], "base", idx, variance=var0)[0]
        raw_se = _analytic_se(oracle, n, raw, idx)
        exact = getattr(oracle, "subset_variance", None)
        head = cls(oracle, state, n, idx, raw, var0, slope, raw_ans, raw_se, exact,
                   _kept=kept)
        if idx is not None and exact is not None:  # the covariances in closed form
            head.raw_se = np.array([math.sqrt(exact(n, idx, head.fit()))])
        return head

    def fit(self) -> FloatArray:
        """Norm-Sub of the unbiased estimate (:func:`fit_distribution`), made once per
        state (read-only)."""
        if self._fit is None:
            parts = {} if self._kept is None else self._kept.parts
            fit = parts.get("norm-sub")
            if fit is None:
                fit = parts["norm-sub"] = simplex_projection_rows(self.raw[None, :])[0]
                fit.setflags(write=False)
            self._fit = fit
        return self._fit


def _kept_estimate(oracle: FrequencyOracle, state: State) -> KeptEstimate:
    """The state's unbiased estimate, kept by the oracle for every answer of that state
    (:meth:`~ldpcore.base.FrequencyOracle.kept_estimate`) unless its class estimates
    otherwise (then made afresh)."""
    if type(oracle).estimate is FrequencyOracle.estimate:
        return oracle.kept_estimate(state)
    return KeptEstimate(state, np.array(oracle.estimate(state), dtype=np.float64))


def _near(oracle: FrequencyOracle, n: int, f_fit: FloatArray, truth: FloatArray,
          idx: np.ndarray | None, bias: FloatArray, spread: FloatArray) -> np.ndarray:
    """Entries whose bootstrap interval is joined with the analytic one: the fitted answer
    within :data:`BOUNDARY_SIGMAS` standard errors of 0, or a bias above
    :data:`BIAS_RATIO` bootstrap standard deviations."""
    out: np.ndarray = ((truth < BOUNDARY_SIGMAS * _analytic_se(oracle, n, f_fit, idx))
                       | (np.abs(bias) > BIAS_RATIO * spread))
    return out


def prepare_kept(oracle: FrequencyOracle, state: State, kept: Prepared, *,
                 indices: Sequence[int] | np.ndarray | None = None,
                 n_effective: float | None = None) -> Prepared:
    r"""``kept``'s method and simulated errors applied to a nearby ``state`` (a later
    version of the same query under a live stream): no simulation.

    The point, the unbiased answer, its analytic standard error, the Norm-Sub fit and
    which entries join the analytic interval are this state's; the R sorted errors, their
    bias and spread are ``kept``'s, rescaled by :math:`\sqrt{n_0 / n}` (n₀: the sample size
    they were simulated at — an estimate's error scales as :math:`1/\sqrt{n}`).  The
    errors depend on the state through n (rescaled) and the Norm-Sub fit, which moves
    little between nearby states; the caller bounds how far n may move (a factor) and how
    old the errors may be, and the answer states ``simulated_at_n``.  A ``kept`` without
    simulated errors (analytic, no interval) is prepared afresh: that costs no simulation.
    """
    base_n = kept.simulated_at_n if kept.simulated_at_n is not None else kept.n
    if (kept.errors is None or kept.bias is None or kept.spread is None
            or not kept.interval or base_n <= 0):
        return prepare(oracle, state, method=kept.method, indices=indices,
                       replicates=max(20, kept.replicates), n_effective=n_effective)
    h = _Head.of(oracle, state, indices, n_effective)
    scale = math.sqrt(kept.n / h.n)  # kept's errors are at kept.n (rescaled there if kept)
    raw_se, kind = h.raw_se, kept.kind
    if kind != "analytic" and kept.raw_se.shape == raw_se.shape:
        # A subset's simulated standard error (covariances included), rescaled likewise.
        raw_se = np.maximum(raw_se, kept.raw_se * scale)
    f_fit = h.fit()
    truth = method_answers(f_fit[None, :], "base", h.idx, variance=h.var0)[0]
    point = method_answers(h.raw[None, :], kept.method, h.idx, variance=h.var0,
                           variance_slope=h.slope)[0]
    bias, spread = kept.bias * scale, kept.spread * scale
    return Prepared(kept.method, point, h.raw_ans, raw_se, kind, kept.reason, h.n,
                    kept.replicates, kept.mse, kept.errors, bias, spread,
                    _near(oracle, h.n, f_fit, truth, h.idx, bias, spread),
                    simulated_at_n=base_n, error_scale=kept.error_scale * scale)


def prepare(oracle: FrequencyOracle, state: State, *, method: str = "auto",
            indices: Sequence[int] | np.ndarray | None = None,
            replicates: int = DEFAULT_REPLICATES, rng: np.random.Generator | int | None = None,
            fitted: FloatArray | None = None, n_effective: float | None = None) -> Prepared:
    """Everything of :func:`answer` but the level (same parameters, no ``confidence``)."""
    if method != "auto" and method not in METHODS:
        raise ParameterError(f"method must be 'auto' or one of {list(METHODS)}, got {method!r}")
    replicates = check_int("replicates", replicates, low=20, high=100_000)
    h = _Head.of(oracle, state, indices, n_effective)
    n, d, idx, raw, var0, slope = h.n, oracle.domain_size, h.idx, h.raw, h.var0, h.slope
    raw_ans, raw_se, exact, kind = h.raw_ans, h.raw_se, h.exact, "analytic"

    def analytic(reason: str | None, mse: dict[str, float] | None = None) -> Prepared:
        return Prepared("base", raw_ans, raw_ans, raw_se, kind, reason, n, 0, mse or {})

    if method == "base" and (idx is None or exact is not None):
        return analytic(None)
    if not can_simulate(oracle, n, replicates):
        if method == "base":
            return analytic(None if exact is not None or idx is None else
                            "the sum's standard error treats the estimates as uncorrelated "
                            "(no simulation within the budget to check it)")
        why = (f"simulating {replicates} states of {oracle.mechanism!r} (n={n}, d={d}) costs "
               f"more than the budget of {SIMULATION_BUDGET} operations")
        if method == "auto":
            return analytic(f"auto kept base: {why}")
        point = method_answers(raw[None, :], method, idx, variance=var0,
                               variance_slope=slope)[0]
        return Prepared(method, point, raw_ans, raw_se, None,
                        f"no interval: {why}; method=base has an analytic interval", n, 0,
                        interval=False)
    f_fit = h.fit() if fitted is None else oracle.check_distribution(fitted)
    gen = as_rng(state_seed(state) if rng is None else rng)
    truth = method_answers(f_fit[None, :], "base", idx, variance=var0)[0]

    def simulate(dist: FloatArray, size: int) -> FloatArray:
        return simulated_estimates(oracle, dist, n, size, gen)

    def errors(m: str, sims: FloatArray, want: FloatArray,
               power_of: dict[str, FloatArray]) -> FloatArray:
        if m not in ("power", "power-ns"):
            out: FloatArray = method_answers(sims, m, idx, variance=var0,
                                             variance_slope=slope) - want
            return out
        # PowerNS is Norm-Sub of Power: compute the costly posterior means once per set.
        if "power" not in power_of:
            power_of["power"] = postprocess_rows(sims, "power", variance=var0)
        vec = power_of["power"]
        if m == "power-ns":
            vec = simplex_projection_rows(vec)
        ans = vec if idx is None else vec[:, idx].sum(axis=1, keepdims=True)
        res: FloatArray = ans - want
        return res

    # The interval's simulations, apart from the selection's; drawn only where needed.
    iv_sims = None
    if idx is not None and exact is None:
        iv_sims = simulate(f_fit, replicates)
        # A subset sum's variance includes the estimates' covariances (positive for OLH's
        # collinear values): take the simulated one where it exceeds the sum of variances.
        # The simulated populations vary too (by f_S(1 - f_S)/n): take that part out.
        sim_var = float(method_answers(iv_sims, "base", idx, variance=var0).var(ddof=1))
        sim_sd = math.sqrt(max(sim_var - float(truth[0] * (1 - truth[0])) / n, 0.0))
        if sim_sd > raw_se[0]:
            raw_se = np.array([sim_sd])
            kind = "normal (simulated standard error)"
    if method == "base":
        return analytic(None)
    mse: dict[str, float] = {}
    note = None
    if method == "auto":
        method, mse, note = _select(oracle, raw, f_fit, idx, simulate, errors, float(raw_se[0]))
        if method == "base":
            return analytic(note, mse)
    if iv_sims is None:
        iv_sims = simulate(f_fit, replicates)
    err = errors(method, iv_sims, truth, {})
    point = method_answers(raw[None, :], method, idx, variance=var0, variance_slope=slope)[0]
    bias, spread = err.mean(axis=0), err.std(axis=0, ddof=1)
    near = _near(oracle, n, f_fit, truth, idx, bias, spread)
    # Per entry, its R errors sorted (rows contiguous per entry: sorting along the last
    # axis is several times faster): any level's order statistics are then two columns.
    ordered = np.sort(np.ascontiguousarray(err.T), axis=1)
    return Prepared(method, point, raw_ans, raw_se, kind, note, n, replicates, mse,
                    ordered, bias, spread, near)


def _order_indices(r: int, alpha: float) -> tuple[int, int]:
    """Of R sorted errors, the ``alpha/2`` quantile rounded down and the ``1 - alpha/2`` one
    rounded up (``np.quantile(..., method="lower"/"higher")``)."""
    last = r - 1
    lo = int(math.floor(last * (alpha / 2) + 1e-12))
    hi = min(last, int(math.ceil(last * (1 - alpha / 2) - 1e-12)))
    return lo, hi


def choose_method(oracle: FrequencyOracle, state: State,
                  indices: Sequence[int] | np.ndarray | None = None,
                  rng: np.random.Generator | int | None = None, *,
                  replicates: int = DEFAULT_REPLICATES) -> str:
    """The method ``auto`` picks for this query (full domain, or the subset ``indices``)."""
    return answer(oracle, state, indices=indices, rng=rng, replicates=replicates).method


def bootstrap_interval(oracle: FrequencyOracle, state: State,
                       answer_fn: Callable[[State], Any], truth_fn: Callable[[FloatArray], Any],
                       *, fitted: FloatArray | None = None, confidence: float = 0.95,
                       replicates: int = DEFAULT_REPLICATES,
                       rng: np.random.Generator | int | None = None,
                       bounds: tuple[float, float] | None = (0.0, 1.0),
                       ) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Basic parametric-bootstrap interval of any answer of a state: (point, low, high).

    ``answer_fn(state)`` computes the answer (an array); ``truth_fn(f)`` its true
    value under a distribution f.  States of n reports are drawn from ``fitted``
    (default: Norm-Sub of the estimate) and the interval is
    :math:`[\\hat a - q_{1-\\alpha/2}(e), \\hat a - q_{\\alpha/2}(e)]` with
    :math:`e = a(\\text{sim}) - a^*(\\tilde f)`, clipped to ``bounds``.  Near a
    boundary of the answer's range the pivot fails (see the module notes):
    callers join an interval that is valid there, as :func:`answer` does.
    """
    oracle.check_state(state)
    if state.n <= 0:
        raise StateError("cannot answer from an empty state (n = 0)")
    replicates = check_int("replicates", replicates, low=20, high=100_000)
    f_fit = (fit_distribution(oracle, state) if fitted is None
             else oracle.check_distribution(fitted))
    gen = as_rng(state_seed(state) if rng is None else rng)
    counts = oracle.sample_counts(f_fit, state.n, size=replicates, rng=gen)
    truth = np.atleast_1d(np.asarray(truth_fn(f_fit), dtype=np.float64))
    sims = np.stack([np.atleast_1d(np.asarray(answer_fn(State(state.fingerprint, state.n, c)),
                                              dtype=np.float64)) for c in counts])
    point = np.atleast_1d(np.asarray(answer_fn(state), dtype=np.float64))
    alpha = 1.0 - confidence
    q_lo, q_hi = np.quantile(sims - truth, [alpha / 2, 1 - alpha / 2], axis=0)
    low, high = point - q_hi, point - q_lo
    if bounds is not None:
        low, high = np.clip(low, *bounds), np.clip(high, *bounds)
    return point, low, high
