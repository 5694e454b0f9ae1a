r"""Longitudinal collection: memoization policies, RAPPOR's two-level scheme, multi-window maths.

A device that reports the same value again and again must not hand the server a
fresh ε-LDP answer each time (averaging them reveals the value).  RAPPOR
(Erlingsson, Pihur & Korolova, CCS 2014, §3) *memoizes*: a collection declares one
of three policies (:data:`POLICIES`):

``"none"``
    every report is a fresh ε-LDP answer.  Reports are independent; a device that
    reports k times spends k·ε on its value (averaging attack).
``"permanent"``
    the permanent randomized response (PRR): one answer per (device, value),
    drawn once at ε and repeated verbatim.  However often it is sent the value
    costs ε, but the answer is a stable identifier (linkability) and the
    server gains no information from repeats: they are perfectly correlated.
``"two-level"``
    RAPPOR's PRR + IRR: a permanent answer :math:`z` drawn once at
    :math:`\varepsilon_\infty` (the oracle's ε), then *every* report re-randomizes
    :math:`z` afresh with an instantaneous channel at :math:`\varepsilon_1`.  One
    report costs the composed channel's :math:`\varepsilon_{\mathrm{report}} <
    \min(\varepsilon_\infty, \varepsilon_1)`, any number of reports at most
    :math:`\varepsilon_\infty` (they are post-processing of :math:`z`), and two
    reports of the same device differ, which blunts linkage.

:class:`TwoLevel` generalises the scheme to every frequency oracle whose report
space is closed under its own randomiser (:data:`TWO_LEVEL_MECHANISMS`): the
permanent channel at :math:`\varepsilon_\infty` followed by the instantaneous
channel at :math:`\varepsilon_1` is again a channel of the same family with
composed probabilities, so the oracle's own state, unbiased estimator and
variance apply with the composed :math:`(p^*, q^*)`.  Others are refused
(:data:`TWO_LEVEL_REFUSED` says why).

Memoization correlates a device's reports across windows, so a state summed over
windows holds fewer independent answers than reports.  :func:`repeat_bound`,
:func:`effective_sample_size` and :func:`multiwindow_variance` give the honest
(worst case over which devices reported in which windows) variance from the
per-window report counts alone; :func:`epsilon_spent` says what a device spends.
Terminology follows RAPPOR, except that here :math:`\varepsilon_1` names the
instantaneous channel's own parameter; RAPPOR's one-report bound (its
:math:`\varepsilon_1`) is :attr:`TwoLevel.epsilon_report`.

Pure numpy, no I/O.

>>> import ldpcore
>>> tl = TwoLevel(ldpcore.make_oracle("grr", epsilon=3.0, domain_size=4), epsilon_1=2.0)
>>> round(tl.epsilon_inf, 3), round(tl.epsilon_1, 3), round(tl.epsilon_report, 3)
(3.0, 2.0, 1.636)
>>> effective_sample_size([1000, 1000, 1000], "permanent")
1000.0
>>> effective_sample_size([1000, 1000, 1000], "none")
3000.0
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from ._validate import as_rng, check_epsilon, check_float, check_int
from .base import FloatArray, FrequencyOracle, IntArray, Mechanism, Reports, State
from .errors import ParameterError

__all__ = [
    "POLICIES",
    "DEFAULT_POLICY",
    "EPSILON_1_MAX",
    "TWO_LEVEL_MECHANISMS",
    "TWO_LEVEL_REFUSED",
    "TwoLevel",
    "check_policy",
    "repeat_bound",
    "effective_sample_size",
    "multiwindow_variance",
    "epsilon_spent",
]

POLICIES: tuple[str, ...] = ("none", "permanent", "two-level")
DEFAULT_POLICY = "permanent"
EPSILON_1_MAX = 100.0
"""Largest instantaneous ε (beyond ~37 the channel is already noiseless in doubles)."""

TWO_LEVEL_MECHANISMS: tuple[str, ...] = ("grr", "sue", "oue", "blh", "olh", "hrr")

TWO_LEVEL_REFUSED: dict[str, str] = {
    "hr": "a Hadamard-response report is an index drawn from the value's support set; "
          "re-randomizing an index does not give a Hadamard-response channel",
    "ss": "re-randomizing a k-subset is not a subset-selection channel of the same family",
    "cms": "a report is a hash index plus an m-bit vector; re-randomizing the bits with the "
           "index kept would compose, but its estimator is not implemented",
    "hcms": "a report is (hash, coefficient, sign); re-flipping the sign would compose, but "
            "its estimator is not implemented",
    "hh": "a report samples a tree level and runs that level's oracle; composing per level "
          "is not implemented",
    "haar": "a report samples a Haar level; composing per level is not implemented",
    "pem": "a report is per-group OLH over prefixes; composing per group is not implemented",
    "adaptive": "it resolves to grr or olh: declare that mechanism instead",
    "sw": "numeric reports are continuous; re-randomizing them leaves the mechanism's family",
    "pm": "numeric reports are continuous; re-randomizing them leaves the mechanism's family",
    "duchi": "re-flipping the ±C report would compose, but the mean estimator is not "
             "generalised to it",
}


def check_policy(policy: Any) -> str:
    """Return ``policy`` if it is one of :data:`POLICIES`, else raise ParameterError."""
    if not isinstance(policy, str) or policy not in POLICIES:
        raise ParameterError(f"memoization must be one of {list(POLICIES)}, got {policy!r}")
    return policy


def _grr_probs(epsilon: float, k: int) -> tuple[float, float]:
    e = math.exp(epsilon)
    return e / (e + k - 1), 1.0 / (e + k - 1)


class TwoLevel:
    r"""RAPPOR's two-level randomized response over any oracle that admits it.

    A device draws a permanent answer :math:`z` once per value with the oracle at
    :math:`\varepsilon_\infty` = ``oracle.epsilon``, memoizes it, and each report
    passes :math:`z` through the instantaneous channel at :math:`\varepsilon_1`:

    * ``grr``: GRR over the d values (keep :math:`z` w.p. :math:`p_1 =
      e^{\varepsilon_1}/(e^{\varepsilon_1}+d-1)`, else another value uniformly);
    * ``sue``/``oue``: every bit of :math:`z` independently, with the same
      unary mechanism's :math:`(p_1, q_1)` at :math:`\varepsilon_1`
      (RAPPOR's IRR);
    * ``olh``/``blh``: the hash seed :math:`a` is permanent, and
      :math:`t` goes through GRR over :math:`[g]` twice;
    * ``hrr``: the coefficient index :math:`j` is permanent and the sign bit is
      flipped again w.p. :math:`1 - e^{\varepsilon_1}/(e^{\varepsilon_1}+1)`.

    In each case the composed channel is the oracle's own family with

    .. math:: p^* = p_\infty p_1 + (1-p_\infty) q_1, \qquad
              q^* = q_\infty p_1 + (1-q_\infty) q_1

    (RAPPOR's :math:`q^*, p^*` of §3.1; for hrr :math:`q_1 = 1 - p_1`), so the
    oracle's state and estimator apply with :math:`(p^*, q^*)`:
    :attr:`composed` is a copy of the oracle with those probabilities (same
    fingerprint and state; estimate and variance of the composed channel).

    Privacy: one report is :attr:`epsilon_report`-LDP (``ln(p*/q*)`` for grr and
    local hashing, ``ln(p*(1-q*)/((1-p*)q*))`` for unary, ``ln(p*/(1-p*))`` for
    hrr); any number of reports of one value together are
    :math:`\varepsilon_\infty`-LDP (post-processing of :math:`z`).

    Correlation: two reports of a device with value :math:`x` share :math:`z`.
    Writing the per-report contribution to :math:`\hat f(v)` as
    :math:`Y = (1[\text{report supports } v] - q^*_s)/(p^* - q^*_s)` (with
    :math:`q^*_s = 1/g` for local hashing),

    .. math:: \mathrm{Cov}(Y_r, Y_{r'}) = \frac{(p_1-q_1)^2}{(p^*-q^*_s)^2}\,
              \pi_x(1-\pi_x),

    where :math:`\pi_x` is the probability that :math:`z` supports :math:`v`
    (:math:`p_\infty` if :math:`x=v`, else :math:`q_\infty`, or :math:`1/g` for
    local hashing).  For hrr :math:`\mathrm{Cov} = (2p_1-1)^2/(2p^*-1)^2 -
    1[x=v]`.  :meth:`report_covariance` averages it over a fraction ``f`` of
    holders of v, like ``variance``.

    Parameters
    ----------
    oracle : FrequencyOracle
        The permanent channel (its ε is :math:`\varepsilon_\infty`); its mechanism
        must be one of :data:`TWO_LEVEL_MECHANISMS`.
    epsilon_1 : float
        The instantaneous channel's ε, in (0, :data:`EPSILON_1_MAX`].

    Examples
    --------
    >>> import ldpcore
    >>> tl = TwoLevel(ldpcore.make_oracle("oue", epsilon=4.0, domain_size=8), epsilon_1=3.0)
    >>> z = tl.memoize([1, 5], rng=1)           # permanent answers, stored on the device
    >>> r = tl.rerandomize(z, rng=2)            # one report each, fresh every time
    >>> r.fingerprint == tl.oracle.fingerprint  # the collection's usual state takes them
    True
    >>> est = tl.estimate(tl.oracle.aggregate(tl.perturb([3] * 4000, rng=3)))
    >>> abs(float(est[3]) - 1.0) < 5 * math.sqrt(tl.variance(4000, 1.0))
    True
    """

    def __init__(self, oracle: Mechanism, *, epsilon_1: float) -> None:
        if not isinstance(oracle, FrequencyOracle):
            raise ParameterError(f"oracle must be a FrequencyOracle, got {type(oracle).__name__}")
        mech = oracle.mechanism
        if mech not in TWO_LEVEL_MECHANISMS:
            why = TWO_LEVEL_REFUSED.get(mech, "its report space is not closed under its channel")
            raise ParameterError(
                f"memoization 'two-level' needs a mechanism in {list(TWO_LEVEL_MECHANISMS)}, "
                f"got {mech!r}: {why}")
        self.oracle = oracle
        self.epsilon_1 = check_float("epsilon_1", epsilon_1, low=0.0, high=EPSILON_1_MAX,
                                     low_open=True)
        o: Any = oracle
        if mech == "grr":
            self.p_inf, self.q_inf = float(o.p), float(o.q)
            self.p1, self.q1 = _grr_probs(self.epsilon_1, oracle.domain_size)
            self.q_support = self.q_inf
        elif mech in ("sue", "oue"):
            self.p_inf, self.q_inf = float(o.p), float(o.q)
            inst: Any = type(oracle)(epsilon=self.epsilon_1, domain_size=oracle.domain_size)
            self.p1, self.q1 = float(inst.p), float(inst.q)
            self.q_support = self.q_inf
        elif mech in ("olh", "blh"):
            self.p_inf, self.q_inf = float(o.p), float(o.q)
            self.p1, self.q1 = _grr_probs(self.epsilon_1, int(o.g))
            self.q_support = 1.0 / int(o.g)
        else:  # hrr
            self.p_inf = float(o.p)
            self.q_inf = 1.0 - self.p_inf
            e1 = math.exp(self.epsilon_1)
            self.p1, self.q1 = e1 / (e1 + 1), 1 / (e1 + 1)
            self.q_support = self.q_inf
        self.p_star = self.p_inf * self.p1 + (1 - self.p_inf) * self.q1
        self.q_star = self.q_inf * self.p1 + (1 - self.q_inf) * self.q1
        composed: Any = copy.copy(oracle)
        composed.p = self.p_star
        if hasattr(oracle, "q"):
            composed.q = self.q_star
        self.composed: FrequencyOracle = composed

    # ---- privacy -------------------------------------------------------------------------
    @property
    def epsilon_inf(self) -> float:
        r""":math:`\varepsilon_\infty`: the bound for any number of reports of one value."""
        return self.oracle.epsilon

    @property
    def epsilon_report(self) -> float:
        """ε of one report: the composed channel's likelihood-ratio bound (RAPPOR's ε₁)."""
        p, q = self.p_star, self.q_star
        if self.oracle.mechanism in ("sue", "oue"):
            return math.log(p * (1 - q) / ((1 - p) * q))
        if self.oracle.mechanism == "hrr":
            return math.log(p / (1 - p))
        return math.log(p / q)

    @property
    def spec(self) -> dict[str, Any]:
        """The oracle's spec plus the two-level parameters."""
        return {**self.oracle.spec, "memoization": "two-level", "epsilon_1": self.epsilon_1}

    # ---- device side ---------------------------------------------------------------------
    def memoize(self, values: Any, rng: np.random.Generator | int | None = None) -> Reports:
        r"""Permanent answers :math:`z` at :math:`\varepsilon_\infty` (store them; never send)."""
        return self.oracle.perturb(values, rng=rng)

    def rerandomize(self, permanent: Reports,
                    rng: np.random.Generator | int | None = None) -> Reports:
        r"""One fresh report per permanent answer (instant channel at :math:`\varepsilon_1`)."""
        z = self.oracle.validate(permanent)
        gen = as_rng(rng)
        n = len(z)
        mech = self.oracle.mechanism
        cols = dict(z.columns)
        if mech == "grr" or mech in ("olh", "blh"):
            name = "y" if mech == "grr" else "t"
            k = self.oracle.domain_size if mech == "grr" else int(getattr(self.oracle, "g"))
            cur = cols[name].astype(np.int64)
            keep = gen.random(n) < self.p1
            other = (cur + gen.integers(1, k, size=n)) % k if k > 1 else cur
            cols[name] = np.where(keep, cur, other).astype(cols[name].dtype)
        elif mech in ("sue", "oue"):
            d = self.oracle.domain_size
            bits = np.unpackbits(cols["bits"], axis=1, count=d, bitorder="little").astype(bool)
            u = gen.random(bits.shape)
            out = np.where(bits, u < self.p1, u < self.q1)
            cols["bits"] = np.packbits(out, axis=1, bitorder="little")
        else:  # hrr
            flip = gen.random(n) >= self.p1
            cols["b"] = (cols["b"] ^ flip).astype(np.uint8)
        return Reports(z.mechanism, z.fingerprint, cols)

    def perturb(self, values: Any, rng: np.random.Generator | int | None = None) -> Reports:
        """One report of fresh devices (permanent then instantaneous): the composed channel."""
        gen = as_rng(rng)
        return self.rerandomize(self.memoize(values, rng=gen), rng=gen)

    # ---- server side ---------------------------------------------------------------------
    def estimate(self, state: State) -> FloatArray:
        """Unbiased frequencies from the collection's usual state (composed p*, q*)."""
        return self.composed.estimate(state)

    def variance(self, n: int, frequency: float = 0.0) -> float:
        """Variance of one frequency estimate from n reports of n distinct devices."""
        return self.composed.variance(n, frequency)

    def report_covariance(self, frequency: float = 0.0) -> float:
        """Covariance of two reports of the same device (same value), averaged over f."""
        f = check_float("frequency", frequency, low=0.0, high=1.0)
        if self.oracle.mechanism == "hrr":
            return (2 * self.p1 - 1) ** 2 / (2 * self.p_star - 1) ** 2 - f
        q_est = self.q_support if self.oracle.mechanism in ("olh", "blh") else self.q_star
        scale = (self.p1 - self.q1) ** 2 / (self.p_star - q_est) ** 2
        hold = self.p_inf * (1 - self.p_inf)
        other = self.q_support * (1 - self.q_support)
        return scale * (f * hold + (1 - f) * other)

    def correlation(self, frequency: float = 0.0) -> float:
        """Correlation of two reports of the same device: covariance / per-report variance."""
        return self.report_covariance(frequency) / self.variance(1, frequency)


def _counts(window_counts: Sequence[int] | npt.NDArray[Any]) -> IntArray:
    arr = np.asarray(window_counts)
    if arr.ndim != 1 or (arr.size and arr.dtype.kind not in "iu"):
        raise ParameterError("window_counts must be a 1-D sequence of integers >= 0 "
                             "(reports per window)")
    if arr.size and int(arr.min()) < 0:
        raise ParameterError(f"window_counts must be integers >= 0, found {int(arr.min())}")
    return arr.astype(np.int64)


def repeat_bound(window_counts: Sequence[int] | npt.NDArray[Any], *,
                 reports_per_window: int = 1) -> int:
    r"""Worst case of :math:`\sum_i m_i^2` over devices i (m_i = reports of device i).

    With :math:`n_w` reports in window w and at most r reports per device per
    window, :math:`\sum_i m_i^2 = \sum_{w,w'} \sum_i m_{iw} m_{iw'} \le
    r \sum_{w,w'} \min(n_w, n_{w'})`, reached when the devices of the smaller
    window all report in the larger one (nested populations), each r times.
    Sorting the counts ascending, :math:`\sum_{w,w'} \min = \sum_k n_{(k)}(2(K-k)+1)`.

    >>> repeat_bound([3, 1])          # the one device of window 2 also sent in window 1
    6
    >>> repeat_bound([5])             # one window, one report per device: n
    5
    """
    c = np.sort(_counts(window_counts))
    r = check_int("reports_per_window", reports_per_window, low=1)
    k = c.size
    weights = 2 * (k - np.arange(1, k + 1)) + 1
    return int(r * int(np.dot(c, weights)))


def effective_sample_size(window_counts: Sequence[int] | npt.NDArray[Any],
                          policy: str = DEFAULT_POLICY, *, reports_per_window: int = 1,
                          correlation: float | None = None) -> float:
    r"""Number of independent reports equivalent to a state summed over windows.

    A frequency estimate from n reports with per-report variance S and covariance
    :math:`C = \rho S` between two reports of the same device has variance
    :math:`(nS + (\sum_i m_i^2 - n)C)/n^2 = S / n_\mathrm{eff}` with

    .. math:: n_\mathrm{eff} = \frac{n^2}{n + \rho\,(M - n)}, \qquad
              M = \text{repeat\_bound}(n_w) \ge \sum_i m_i^2,

    a conservative bound that needs only the per-window counts :math:`n_w`.

    * ``"none"``: :math:`\rho = 0`, reports are independent, :math:`n_\mathrm{eff} = n`;
    * ``"permanent"``: :math:`\rho = 1`, :math:`n_\mathrm{eff} = n^2/M`; with one
      report per device per window it is at most :math:`\max_w n_w` (equal to it
      when windows are equal): repeats add no information;
    * ``"two-level"``: :math:`\rho` = :meth:`TwoLevel.correlation` (the permanent
      part of the noise is shared, the instantaneous part is not); without it
      :math:`\rho = 1` (conservative).

    It assumes how often a device reports is independent of its value.

    Parameters
    ----------
    window_counts : sequence of int
        Reports counted in each window summed into the state.
    policy : str
        The collection's memoization policy (:data:`POLICIES`).
    reports_per_window : int
        The collection's cadence (at most r reports per device per window).
    correlation : float, optional
        :math:`\rho \in [0, 1]` for ``"two-level"``.

    Examples
    --------
    >>> effective_sample_size([400, 100], "permanent")        # 250000 / 700
    357.14285714285717
    >>> effective_sample_size([500, 500], "two-level", correlation=0.5)
    666.6666666666666
    """
    policy = check_policy(policy)
    counts = _counts(window_counts)
    n = int(counts.sum())
    if n == 0:
        return 0.0
    if policy == "none":
        return float(n)
    if policy == "permanent":
        rho = 1.0
    elif correlation is None:
        rho = 1.0
    else:
        rho = check_float("correlation", correlation, low=0.0, high=1.0)
    m = repeat_bound(counts, reports_per_window=reports_per_window)
    return n * n / (n + rho * (m - n))


def multiwindow_variance(estimator: Mechanism | TwoLevel,
                         window_counts: Sequence[int] | npt.NDArray[Any],
                         policy: str = DEFAULT_POLICY, *, frequency: float = 0.0,
                         reports_per_window: int = 1) -> float:
    r"""Variance of one frequency estimate from a state summed over several windows.

    .. math:: \mathrm{Var}[\hat f(v)] = \frac{n\,S(f) + (M - n)\,C(f)}{n^2}

    with :math:`S(f)` = ``estimator.variance(1, f)`` the per-report variance,
    :math:`M` = :func:`repeat_bound` and :math:`C(f)` the covariance of two
    reports of one device: 0 for ``"none"``, :math:`S(f)` for ``"permanent"``
    (identical reports) and :meth:`TwoLevel.report_covariance` for
    ``"two-level"`` (pass the :class:`TwoLevel`).  :math:`f` is the fraction of
    *reports* from holders of v: what the summed state estimates.

    >>> import ldpcore
    >>> o = ldpcore.make_oracle("grr", epsilon=1.0, domain_size=4)
    >>> math.isclose(multiwindow_variance(o, [500, 500], "permanent"), o.variance(500))
    True
    >>> math.isclose(multiwindow_variance(o, [500, 500], "none"), o.variance(1000))
    True
    """
    if not isinstance(estimator, (FrequencyOracle, TwoLevel)):
        raise ParameterError(f"multiwindow_variance needs a frequency oracle, got mechanism "
                             f"{estimator.mechanism!r}")
    if not isinstance(estimator, (FrequencyOracle, TwoLevel)):
        raise ParameterError(f"multiwindow_variance needs a frequency oracle, got mechanism "
                             f"{estimator.mechanism!r}")
    policy = check_policy(policy)
    counts = _counts(window_counts)
    n = int(counts.sum())
    if n <= 0:
        raise ParameterError("window_counts must hold at least one report")
    f = check_float("frequency", frequency, low=0.0, high=1.0)
    if policy == "two-level":
        if not isinstance(estimator, TwoLevel):
            raise ParameterError("policy 'two-level' needs the TwoLevel estimator "
                                 "(its composed channel), not a bare oracle")
        per_report = estimator.variance(1, f)
        cov = estimator.report_covariance(f)
    else:
        if isinstance(estimator, TwoLevel):
            raise ParameterError(f"a TwoLevel estimator goes with policy 'two-level', "
                                 f"got {policy!r}")
        per_report = estimator.variance(1, f)
        cov = per_report if policy == "permanent" else 0.0
    m = repeat_bound(counts, reports_per_window=reports_per_window)
    return (n * per_report + (m - n) * cov) / (n * n)


def epsilon_spent(policy: str, *, epsilon: float, reports: int, distinct_values: int = 1,
                  epsilon_report: float | None = None) -> float:
    r"""Upper bound on the ε a device spends on its values over time (basic composition).

    * ``"none"``: every report is fresh: :math:`\text{reports}\cdot\varepsilon`;
    * ``"permanent"``: one answer per distinct value:
      :math:`\min(\text{reports}, \text{values})\cdot\varepsilon`;
    * ``"two-level"``: per value at most :math:`\varepsilon_\infty` (= ``epsilon``)
      and per report at most :math:`\varepsilon_\mathrm{report}` (the composed
      channel's one-report ε, :attr:`TwoLevel.epsilon_report`), so
      :math:`\min(\text{values}\cdot\varepsilon_\infty,
      \text{reports}\cdot\varepsilon_\mathrm{report})`.

    >>> epsilon_spent("none", epsilon=1.0, reports=24)
    24.0
    >>> epsilon_spent("permanent", epsilon=1.0, reports=24, distinct_values=2)
    2.0
    >>> epsilon_spent("two-level", epsilon=4.0, reports=2, epsilon_report=1.5)
    3.0
    """
    policy = check_policy(policy)
    eps = check_epsilon(epsilon)
    k = check_int("reports", reports, low=0)
    v = check_int("distinct_values", distinct_values, low=1)
    if policy == "none":
        return k * eps
    if policy == "permanent":
        return min(k, v) * eps
    if epsilon_report is None:
        raise ParameterError("policy 'two-level' needs epsilon_report (the one-report ε, "
                             "TwoLevel.epsilon_report)")
    e1 = check_epsilon(epsilon_report)
    return min(min(k, v) * eps, k * e1)

