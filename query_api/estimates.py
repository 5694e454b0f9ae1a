"""Pure estimation layer of the query service (no I/O): state in, JSON-able answer out.

Every answer states n, ε, mechanism and method.  Frequency and subset answers
come from :func:`ldpcore.intervals.answer`: the default method is ``auto`` (the
method with the least simulated error for the query at hand, on the Norm-Sub
fitted synthetic dataset; the answer names the method used), the unbiased
``base`` method has the analytic normal interval, and every post-processed
method a parametric-bootstrap interval that includes its bias (``interval``
says which; ``null`` intervals come with ``interval_reason``).  The bootstrap is
seeded from the state, so a state always gets the same answer.  The ``auto`` choice
may be kept across nearby states (a :class:`~query_api.choices.ChoiceSlot`; the answer
then says so in ``method_choice``).

Square Wave collections (numeric, EMS-reconstructed) answer frequencies, subsets and
heavy hitters from the EMS distribution (Li et al., SIGMOD 2020): the unbiased inverse
of their blurring channel is so noisy that every post-processing of it is flat.

**Shared parts.**  What an answer computes before its level is known — the estimate, the
``auto`` method, the simulated errors (:func:`ldpcore.intervals.prepare`), an EMS
reconstruction — depends only on the oracle, the state and the method's parameters.  When
the service sets :data:`SHARED` (a byte-bounded cache), these parts are kept there under
the state's *content* (a SHA-256 of its fingerprint, n and counts: a new state version
with new counts is a new key, an unchanged state the same one; the service names the
state it computes on by its version instead, :data:`STATE_KEY`), so frequencies and heavy
hitters of one state, or the same query at another ``confidence``, pay only for their
interval and their JSON.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import orjson

import ldpcore
from ldpcore import intervals as ldp_intervals
from ldpcore.capabilities import (
    DistributionEstimates,
    FrequencyEstimates,
    HeavyHitterSearch,
    MeanEstimates,
    RangeQueries,
    SetItemFrequencies,
)
from ldpcore.numeric.base import NumericOracle

from .capabilities import require
from .choices import Choice, ChoiceSlot
from .confidence import z_value
from .errors import QueryError
from .parts import SHARED, ByIdentity, fingerprint, peek, shared

__all__ = [
    "z_value",
    "frequencies",
    "subset",
    "range_answer",
    "quantiles",
    "cdf",
    "mean",
    "histogram",
    "heavy_hitters",
    "default_method",
]


def _curve(kind: str, oracle: Any, state: ldpcore.State, method: str) -> np.ndarray:
    """A range oracle's CDF or leaves by ``method`` (the consistent one fits the whole
    tree), shared by the CDF, quantile and histogram answers of a state (read-only)."""
    def make() -> np.ndarray:
        out = np.array(getattr(oracle, kind)(state, method=method), dtype=np.float64)
        out.flags.writeable = False
        return out
    curve: np.ndarray = shared(kind, oracle, state, (method,), make)
    return curve


def _distribution(oracle: Any, state: ldpcore.State) -> np.ndarray:
    """The EMS (or EM) reconstruction of a numeric state, shared (read-only)."""
    def make() -> np.ndarray:
        out = np.asarray(oracle.distribution(state), dtype=np.float64)
        out.flags.writeable = False
        return out
    dist: np.ndarray = shared("distribution", oracle, state, (), make)
    return dist


AUTO = "auto"


def _methods() -> tuple[str, ...]:
    return (AUTO, *ldpcore.POSTPROCESS_METHODS)


def method_names() -> tuple[str, ...]:
    """Every value the ``method`` parameter accepts."""
    return _methods()


def default_method(task: str = "full") -> str:
    """The default post-processing for every task: ``auto`` (chosen per query by simulated
    error; Wang et al. 2020, "choosing the method on synthetic dataset")."""
    return AUTO


def _check_method(method: str) -> str:
    allowed = _methods()
    if method not in allowed:
        raise QueryError(f"method must be one of {list(allowed)}, got {method!r}",
                         parameter="method")
    return method


def _need_frequencies(oracle: Any, what: str) -> None:
    require(oracle, FrequencyEstimates, what)


def _opt(values: np.ndarray | None, i: int) -> float | None:
    return None if values is None else float(values[i])


def _rows(ans: ldp_intervals.Answer, order: np.ndarray, labels: Sequence[str] | None,
          name: str) -> list[dict[str, Any]]:
    """The rows of ``order``'s entries: label (under ``name``), index, estimate, standard
    error and interval (``tolist`` converts each column at once: d rows cost O(d) in C)."""
    nothing = [None] * len(order)

    def col(values: np.ndarray | None) -> list[Any]:
        return nothing if values is None else np.asarray(values)[order].tolist()

    idx = np.asarray(order).tolist()
    names = [str(i) for i in idx] if labels is None else [labels[i] for i in idx]
    return [{name: lab, "index": i, "estimate": e, "std_error": se, "ci_low": lo,
             "ci_high": hi}
            for lab, i, e, se, lo, hi in zip(names, idx, col(ans.estimate), col(ans.std_error),
                                             col(ans.low), col(ans.high), strict=True)]


class EncodedRows:
    """Answer rows as their JSON text (``text``: a JSON array): what :func:`frequencies`
    gives with ``encoded=True``.  The service's encoder splices the text in as is
    (:func:`query_api.service.encode`); the bytes are those the rows' dicts encode to.
    (Not a dataclass: orjson would encode a dataclass as an object of its fields.)"""

    __slots__ = ("text",)

    def __init__(self, text: bytes) -> None:
        self.text = text

    def rows(self) -> list[dict[str, Any]]:
        """The rows as dicts (what ``encoded=False`` gives)."""
        out: list[dict[str, Any]] = orjson.loads(self.text)
        return out


_ROW_PREFIXES = ByIdentity(64)
"""Row prefixes (:func:`_row_prefixes`) kept: per labels object, name and domain size."""

_ROW_HEADS = ByIdentity(64)
"""Row heads (:func:`_row_heads`) kept: per (estimate, standard errors, labels) arrays."""


def _texts(values: list[Any]) -> list[bytes]:
    """Each number's JSON text, as orjson writes it (numbers hold no comma; a non-finite
    float is ``null``, as orjson writes it in a dict)."""
    out: list[bytes] = orjson.dumps(values)[1:-1].split(b",") if values else []
    return out


def _row_prefixes(labels: Sequence[str] | None, name: str, d: int) -> list[bytes]:
    """Per entry of the domain, the start of its row's JSON up to the estimate's value
    (``,{"label":"x","index":i,"estimate":``): the same for every state of a collection,
    so made once per labels object and kept."""
    def make() -> list[bytes]:
        names = ([orjson.dumps(str(i)) for i in range(d)] if labels is None
                 else [orjson.dumps(labels[i]) for i in range(d)])
        start = b',{' + orjson.dumps(name) + b':'
        return [b'%s%s,"index":%d,"estimate":' % (start, lab, i) for i, lab in enumerate(names)]
    return _ROW_PREFIXES.get_or_make((labels,), (name, d), make)


def _row_heads(ans: ldp_intervals.Answer, labels: Sequence[str] | None,
               name: str) -> list[bytes]:
    """Per entry of the domain, the level-free start of its row's JSON, up to the value
    of ``ci_low``: the same for every level of one prepared answer (whose arrays are
    shared by its answers at every level), so made once for them and kept (by the arrays'
    identity; the arrays are held, so an id is not reused while kept).  Its labels part
    is kept per collection (:func:`_row_prefixes`): a new state writes two columns."""
    def make() -> list[bytes]:
        est = _texts(np.asarray(ans.estimate).tolist())
        se = ([b"null"] * len(est) if ans.std_error is None
              else _texts(np.asarray(ans.std_error).tolist()))
        return [b'%b%b,"std_error":%b,"ci_low":' % row
                for row in zip(_row_prefixes(labels, name, len(est)), est, se, strict=True)]
    return _ROW_HEADS.get_or_make((ans.estimate, ans.std_error, labels), name, make)


def _encoded_rows(ans: ldp_intervals.Answer, order: np.ndarray,
                  labels: Sequence[str] | None, name: str) -> EncodedRows:
    """:func:`_rows` as JSON text: the level-free start of each row made once per prepared
    answer (:func:`_row_heads`), at a level only the two interval columns are written
    (two ``orjson.dumps`` and a join: no dict per row)."""
    heads = _row_heads(ans, labels, name)
    idx = np.asarray(order)
    k = int(idx.size)
    if k == 0:
        return EncodedRows(b"[]")
    # The whole domain in its order (no top): the columns as they are, no gather.
    whole = k == len(heads) and bool(idx[0] == 0 and idx[-1] == k - 1
                                     and (k < 3 or np.all(np.diff(idx) == 1)))

    def column(values: np.ndarray | None) -> list[bytes]:
        if values is None:
            return [b"null"] * k
        return _texts((np.asarray(values) if whole else np.asarray(values)[idx]).tolist())

    parts: list[bytes] = [b""] * (5 * k)
    parts[0::5] = heads if whole else [heads[i] for i in idx.tolist()]
    parts[1::5] = column(ans.low)
    parts[2::5] = [b',"ci_high":'] * k
    parts[3::5] = column(ans.high)
    parts[4::5] = [b"}"] * k
    return EncodedRows(b"[" + b"".join(parts)[1:] + b"]")


def _order(est: np.ndarray, top: int | None, only: Sequence[int] | None) -> np.ndarray:
    """Which rows an answer holds, in order: ``only`` as given, else the ``top`` largest
    estimates (ties by index), else every entry by index."""
    if only is not None:
        return np.asarray(only, dtype=np.intp)
    if top is not None:
        return np.argsort(-est, kind="stable")[:top]
    return np.arange(est.size)


def _meta(ans: ldp_intervals.Answer, requested: str,
          choice: dict[str, Any] | None = None) -> dict[str, Any]:
    # No "n" here: the service states n (reports summed) and n_effective (behind the
    # interval) in every answer's head (docs/longitudinal.md).
    out: dict[str, Any] = {"method": ans.method, "method_requested": requested,
                           "confidence": ans.confidence, "interval": ans.interval,
                           "replicates": ans.replicates}
    if ans.reason:
        out["interval_reason" if ans.low is None else "note"] = ans.reason
    if ans.mse:
        out["simulated_mse"] = {k: float(v) for k, v in ans.mse.items()}
    if choice is not None:
        out["method_choice"] = choice
    return out


@dataclasses.dataclass(frozen=True)
class _Spread:
    """A query shape's bootstrap errors as simulated for one state (``prepared``), at epoch
    time ``at``: reused, rescaled, for the shape's nearby states (see :func:`_answer`)."""

    prepared: ldp_intervals.Prepared
    at: float

    @property
    def nbytes(self) -> int:
        return self.prepared.nbytes


@dataclasses.dataclass(frozen=True)
class _Errors:
    """Where a query shape's bootstrap errors are kept (:data:`SHARED`, beside its kept
    choice's key) and the rule they are reused by: the choice's (:meth:`Choices.near`)."""

    choice: ChoiceSlot
    shape: tuple[Any, ...]

    def spot(self, method: str) -> tuple[Any, ...]:  # not the state's n_effective
        return ("spread", self.choice.key, method, self.shape[0])

    def held(self, method: str) -> _Spread | None:
        memo = SHARED.get()
        held = None if memo is None else memo.get(self.spot(method))
        return held if isinstance(held, _Spread) and held.prepared.method == method else None

    def keep(self, prepared: ldp_intervals.Prepared | None) -> None:
        """Keep errors simulated for a state (not errors rescaled from another)."""
        memo = SHARED.get()
        if memo is not None and prepared is not None and prepared.simulated_at_n is None:
            memo.put(self.spot(prepared.method), _Spread(prepared, time.time()))

    def prepare(self, oracle: Any, state: ldpcore.State, method: str, n: int,
                idx: list[int] | None, n_effective: float | None) -> ldp_intervals.Prepared:
        """The kept errors applied to this state if they are near enough, else simulated
        afresh (and kept)."""
        held = self.held(method)
        if held is not None and self.choice.choices.near(held.prepared.n, held.at, n):
            return ldp_intervals.prepare_kept(oracle, state, held.prepared, indices=idx,
                                              n_effective=n_effective)
        fresh = ldp_intervals.prepare(oracle, state, method=method, indices=idx,
                                      n_effective=n_effective)
        self.keep(fresh)
        return fresh

    def describe(self, ans: ldp_intervals.Answer) -> dict[str, Any]:
        if ans.simulated_at_n is None:
            return {}
        held = self.held(ans.method)
        return {"simulation": self.choice.choices.describe_simulation(
            ans.simulated_at_n, None if held is None else held.at)}


def _answer(oracle: ldpcore.FrequencyOracle, state: ldpcore.State, method: str,
            confidence: float, indices: Sequence[int] | None,
            n_effective: float | None = None, choice: ChoiceSlot | None = None
            ) -> tuple[ldp_intervals.Answer, dict[str, Any] | None]:
    """The answer, and what it says of a kept ``auto`` choice (see :mod:`.choices`).

    With a kept choice, the bootstrap errors of the query shape are kept too and applied,
    rescaled to this state's n, to its nearby states (:class:`_Errors`,
    :func:`ldpcore.intervals.prepare_kept`): the same rule as the choice — within the
    factor of the n they were simulated at, younger than the choice's maximum age, else
    simulated again at once.  The answer's ``method_choice.simulation`` says so."""
    z_value(confidence)  # the API's message for a bad level
    if isinstance(oracle, SetItemFrequencies):
        # Set-valued items: the fractions sum to the mean set size, not to 1.
        if method not in (AUTO, "base", "base-pos"):
            raise QueryError(f"set-valued item frequencies do not sum to 1: method must be "
                             f"auto (= base), base or base-pos, got {method!r}",
                             parameter="method")
        method = "base" if method == AUTO else method
    idx = None if indices is None else list(indices)

    shape = (None if idx is None else tuple(idx), n_effective)

    def run(m: str, make: Callable[[], ldp_intervals.Prepared] | None = None
            ) -> ldp_intervals.Answer:
        try:
            # Everything but the level is shared by the answers of this state; the method
            # auto chose for this state is prepared already: the kept choice uses that (the
            # same intervals as the first answer's, and no second bootstrap).
            chosen = None if m == AUTO else peek("prepared", oracle, state, (AUTO, *shape))
            prepared = chosen if chosen is not None and chosen.method == m else shared(
                "prepared", oracle, state, (m, *shape),
                make or (lambda: ldp_intervals.prepare(oracle, state, method=m, indices=idx,
                                                       n_effective=n_effective)))
            return prepared.at(confidence)  # type: ignore[no-any-return]
        except ldpcore.ParameterError as exc:
            raise QueryError(str(exc), parameter="labels" if indices is not None
                             else "method") from exc

    if method != AUTO or choice is None:
        return run(method), None
    store, key, errors = choice.choices, choice.key, _Errors(choice, shape)
    n = _n(state, n_effective)
    kept, stale = store.lookup(key, n)
    if kept is None:
        ans = run(AUTO)
        kept = Choice(ans.method, n, time.time(), ans.reason, dict(ans.mse))
        store.put(key, kept)
        errors.keep(peek("prepared", oracle, state, (AUTO, *shape)))
        return ans, store.describe(kept)
    if stale:
        def again() -> Choice:
            fresh = run(AUTO)
            return Choice(fresh.method, n, time.time(), fresh.reason, dict(fresh.mse))
        store.refresh(key, again)
    method = kept.method
    ans = run(method, lambda: errors.prepare(oracle, state, method, n, idx, n_effective))
    return (dataclasses.replace(ans, reason=ans.reason or kept.note, mse=kept.mse),
            {**store.describe(kept), **errors.describe(ans)})


def frequencies(oracle: ldpcore.FrequencyOracle, state: ldpcore.State, *,
                labels: Sequence[str] | None, method: str, confidence: float,
                top: int | None = None, n_effective: float | None = None,
                choice: ChoiceSlot | None = None, encoded: bool = False,
                only: Sequence[int] | None = None) -> dict[str, Any]:
    """Per-label estimate, standard error and confidence interval (see the module notes).

    ``encoded``: the rows as :class:`EncodedRows` (their JSON text, for the service's
    encoder: a new level of a computed answer then writes two columns, not d dicts).
    ``only``: the rows of these indices, in this order (a series follows a few values:
    their rows, not d); ``top`` is then not used."""
    _need_frequencies(oracle, "frequency")
    method = _check_method(method)
    if top is not None and top < 1:
        raise QueryError(f"top must be an integer >= 1, got {top}", parameter="top")
    if _reconstructs(oracle) and method == AUTO:
        return _ems_frequencies(oracle, state, labels=labels, top=top, encoded=encoded,
                                only=only)
    ans, kept = _answer(oracle, state, method, confidence, None, n_effective, choice)
    est = ans.estimate
    order = _order(est, top, only)
    rows = (_encoded_rows if encoded else _rows)(ans, order, labels, "label")
    return {**_meta(ans, method, kept), "estimates": rows, "sum": float(est.sum()),
            **_set_estimand(oracle)}


def subset(oracle: ldpcore.FrequencyOracle, state: ldpcore.State, indices: Sequence[int], *,
           method: str, confidence: float, n_effective: float | None = None,
           choice: ChoiceSlot | None = None) -> dict[str, Any]:
    """Frequency of a set of values (set-value query), any post-processing method.

    ``post-pos`` clips the unbiased sum at 0; the other methods sum the
    post-processed vector.  Base's standard error is the exact variance of the sum
    where the mechanism gives it (``subset_variance``: OLH, BLH, HCMS, whose
    estimates correlate through shared hashes), else the larger of the summed
    variances and the simulated variance of the sum.
    """
    _need_frequencies(oracle, "subset")
    method = _check_method(method)
    if _reconstructs(oracle) and method == AUTO:
        dist = _distribution(oracle, state)
        return {"method": _reconstruction(oracle), "method_requested": method,
                "confidence": None, "estimate": float(dist[list(indices)].sum()),
                "std_error": None,
                "ci_low": None, "ci_high": None, "interval": None,
                "interval_reason": _NUMERIC_REASON}
    if isinstance(oracle, SetItemFrequencies) and method in (AUTO, "base", "base-pos"):
        from .setvalued import subset_answer

        return {**subset_answer(oracle, state, indices, confidence=confidence,
                                method="base" if method == AUTO else method,
                                n_effective=n_effective), "method_requested": method}
    ans, kept = _answer(oracle, state, method, confidence, indices, n_effective, choice)
    return {**_meta(ans, method, kept), "estimate": float(ans.estimate[0]),
            "std_error": _opt(ans.std_error, 0), "ci_low": _opt(ans.low, 0),
            "ci_high": _opt(ans.high, 0)}


RANGE_METHODS = ("consistent", "unbiased")
"""Methods of range answers; ``consistent`` (the default) is HH-ADMM's exact solution for
hh (a weighted tree fit for haar): non-negative leaves, every node the sum of its
children, total 1 — so the CDF is monotone in [0, 1] and the histogram non-negative."""

_HULL = ("analytic (unbiased estimator's interval, joined with the consistent point)")


def check_range_method(method: str | None) -> str:
    method = "consistent" if method is None else method
    if method not in RANGE_METHODS:
        raise QueryError(f"method must be one of {list(RANGE_METHODS)} for range answers, "
                         f"got {method!r}", parameter="method")
    return method


def _n(state: ldpcore.State, n_effective: float | None) -> int:
    """The sample size behind an interval: n, or the effective n of memoized reports."""
    if n_effective is None:
        return int(state.n)
    return max(1, min(int(state.n), int(n_effective)))


def _hull(point: Any, unbiased: Any, se: Any, z: float) -> tuple[np.ndarray, np.ndarray]:
    """[min(point, u − z·se), max(point, u + z·se)] ∩ [0, 1]: the unbiased estimator's
    interval covers the truth at its level, so any interval containing it does too, and
    the consistent point is always inside its own interval."""
    p, u, e = (np.asarray(x, dtype=np.float64) for x in (point, unbiased, se))
    return (np.clip(np.minimum(p, u - z * e), 0.0, 1.0),
            np.clip(np.maximum(p, u + z * e), 0.0, 1.0))


_UNIT_RANGE_VARIANCES: OrderedDict[str, np.ndarray | None] = OrderedDict()
"""Per range oracle (fingerprint): n · range_variance(n, 0, r − 1) for every length r, or
None when the variance is not of the form c(r)/n."""


def _unit_range_variances(oracle: Any) -> np.ndarray | None:
    """Every range oracle's variance bound is c(length)/n (hh, haar, flat): tabulated once
    per oracle, so a CDF's or histogram's d bands cost O(d), not d validated calls."""
    key = fingerprint(oracle)
    if key in _UNIT_RANGE_VARIANCES:
        _UNIT_RANGE_VARIANCES.move_to_end(key)
        return _UNIT_RANGE_VARIANCES[key]
    d = oracle.domain_size
    table: np.ndarray | None = None
    # Only where the bound depends on (n, length) alone as c/n (checked at a few points).
    probes = [(1, 0, d - 1), (7, d // 3, d - 1), (1000, 0, 0), (13, d - 1, d - 1)]
    if d <= 1 << 16 and all(math.isclose(oracle.range_variance(n, lo, hi) * n,
                                         oracle.range_variance(1, 0, hi - lo), rel_tol=1e-9)
                            for n, lo, hi in probes):
        table = np.array([float(oracle.range_variance(1, 0, r - 1)) for r in range(1, d + 1)])
    _UNIT_RANGE_VARIANCES[key] = table
    while len(_UNIT_RANGE_VARIANCES) > 64:
        _UNIT_RANGE_VARIANCES.popitem(last=False)
    return table


def _range_se(oracle: Any, n: int, lows: np.ndarray, highs: np.ndarray) -> np.ndarray:
    """Standard errors of the ranges [lows[i], highs[i]] from n reports."""
    table = _unit_range_variances(oracle)
    if table is None:
        return np.sqrt([float(oracle.range_variance(n, int(a), int(b)))
                        for a, b in zip(lows, highs, strict=True)])
    out: np.ndarray = np.sqrt(table[np.asarray(highs) - np.asarray(lows)] / n)
    return out


def _prefix_se(oracle: Any, n: int, points: np.ndarray) -> np.ndarray:
    return _range_se(oracle, n, np.zeros_like(points), points)


def range_answer(oracle: Any, state: ldpcore.State, low: int, high: int, *,
                 confidence: float, method: str | None = None,
                 n_effective: float | None = None) -> dict[str, Any]:
    """Fraction of reports with a value in [low, high] (inclusive)."""
    require(oracle, RangeQueries, "range")
    method = check_range_method(method)
    d = oracle.domain_size
    if not 0 <= low <= high < d:
        raise QueryError(f"low and high must satisfy 0 <= low <= high < {d}, got low={low}, "
                         f"high={high}", parameter="low" if low < 0 or low > high else "high")
    z = z_value(confidence)
    n = _n(state, n_effective)

    def make() -> tuple[float, float, float]:  # level-free: shared by every level
        unbiased = float(oracle.range_query(state, low, high, method="unbiased"))
        se = math.sqrt(float(oracle.range_variance(n, low, high)))
        value = unbiased if method == "unbiased" else float(
            oracle.range_query(state, low, high, method="consistent"))
        return unbiased, se, value

    unbiased, se, value = shared("range", oracle, state, (low, high, method, n), make)
    lo_, hi_ = _hull(value, unbiased, se, z)
    kind = "analytic" if method == "unbiased" else _HULL
    return {"low": low, "high": high, "method": method, "estimate": value, "std_error": se,
            "ci_low": float(lo_), "ci_high": float(hi_), "confidence": confidence,
            "interval": kind}


def _range_bands(oracle: Any, state: ldpcore.State, method: str, z: float,
                 n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(cdf, its low and high bands, the points they are at): every point for d ≤ 4096,
    else 512 evenly spaced ones."""
    d = oracle.domain_size
    cdf_u = _curve("cdf", oracle, state, "unbiased")
    cdf_m = cdf_u if method == "unbiased" else _curve("cdf", oracle, state, method)
    pts = np.arange(d) if d <= 4096 else np.unique(np.linspace(0, d - 1, 512).astype(int))
    se = _prefix_se(oracle, n, pts)
    lo, hi = _hull(cdf_m[pts], cdf_u[pts], se, z)
    return cdf_m, lo, hi, pts


def quantiles(oracle: Any, state: ldpcore.State, qs: Sequence[float], *,
              method: str | None = None, confidence: float = 0.95,
              n_effective: float | None = None) -> dict[str, Any]:
    """Quantiles: domain indices for range oracles (with intervals from inverting the CDF
    band), values for numeric ones (EMS reconstruction: no honest interval)."""
    for q in qs:
        if not 0.0 <= q <= 1.0:
            raise QueryError(f"q must be in [0, 1], got {q}", parameter="q")
    method = check_range_method(method)
    if isinstance(oracle, DistributionEstimates):
        return {"quantiles": [{"q": q, "value": _num(oracle.quantile(state, q))} for q in qs],
                "method": _reconstruction(oracle),
                "interval": None, "interval_reason": _NUMERIC_REASON}
    require(oracle, RangeQueries, "quantile")
    method = check_range_method(method)
    z = z_value(confidence)
    cdf_m, lo, hi, pts = _range_bands(oracle, state, method, z, _n(state, n_effective))
    rows = []
    for q in qs:
        value = int(np.searchsorted(cdf_m, q - 1e-12)) if method != "unbiased" \
            else int(oracle.quantile(state, q, method="unbiased"))
        value = min(value, oracle.domain_size - 1)
        # The q-quantile x* has F(x*) >= q > F(x* - 1): where the band allows F >= q.
        up = pts[hi >= q - 1e-12]
        down = pts[lo >= q - 1e-12]
        rows.append({"q": q, "value": value,
                     "ci_low": int(up[0]) if up.size else int(pts[-1]),
                     "ci_high": int(down[0]) if down.size else oracle.domain_size - 1})
    return {"quantiles": rows, "method": method, "confidence": confidence,
            "interval": "inverted pointwise CDF band"}


_NUMERIC_REASON = ("the EMS reconstruction is smoothed and biased; no interval that holds at "
                   "its level is available at live cost (the mean has one)")


def _reconstruction(oracle: Any) -> str:
    """How a numeric distribution was rebuilt: EM, or EM with smoothing (Square Wave)."""
    return "ems" if getattr(oracle, "smoothing", True) else "em"


def _set_estimand(oracle: Any) -> dict[str, Any]:
    """What a set-valued (``ps``) collection's item frequencies estimate (else nothing)."""
    if not isinstance(oracle, SetItemFrequencies):
        return {}
    from .setvalued import estimand

    return estimand("holders-truncated", length=int(oracle.length))


def _reconstructs(oracle: Any) -> bool:
    """A numeric oracle whose distribution is rebuilt by EM/EMS (Square Wave): its
    frequencies are that distribution, not the unbiased inverse of its blurred channel
    (whose post-processing is flat: Li et al., SIGMOD 2020, §5)."""
    return isinstance(oracle, DistributionEstimates) and isinstance(oracle, NumericOracle)


def _ems_frequencies(oracle: Any, state: ldpcore.State, *, labels: Sequence[str] | None,
                     top: int | None, encoded: bool = False,
                     only: Sequence[int] | None = None) -> dict[str, Any]:
    """Frequencies of a Square Wave collection: the EMS (or EM) reconstruction per bin
    (the default ``auto``; a named post-processing method still post-processes the
    unbiased inverse; ``encoded``, ``only``: see :func:`frequencies`)."""
    if state.n <= 0:
        raise QueryError("no reports to reconstruct from", parameter="since")
    est = _distribution(oracle, state)
    order = _order(est, top, only)
    rows = (_encoded_rows if encoded else _rows)(
        ldp_intervals.Answer(_reconstruction(oracle), est, None, None, None, None, None,
                             int(state.n), 0.95, 0), order, labels, "label")
    return {"method": _reconstruction(oracle), "method_requested": "auto",
            "confidence": None, "interval": None, "interval_reason": _NUMERIC_REASON,
            "replicates": 0, "estimates": rows, "sum": float(est.sum())}


def _num(x: Any) -> float | int:
    return int(x) if isinstance(x, (int, np.integer)) else float(x)


def cdf(oracle: Any, state: ldpcore.State, *, method: str | None = None,
        confidence: float = 0.95, n_effective: float | None = None) -> dict[str, Any]:
    """Cumulative distribution over the ordered domain, with pointwise intervals."""
    method = check_range_method(method)
    if isinstance(oracle, DistributionEstimates):
        return {"cdf": np.asarray(oracle.cdf(state), dtype=np.float64).tolist(),
                "method": _reconstruction(oracle),
                "interval": None, "interval_reason": _NUMERIC_REASON}
    require(oracle, RangeQueries, "cdf")
    method = check_range_method(method)
    cdf_m, lo, hi, pts = _range_bands(oracle, state, method, z_value(confidence),
                                      _n(state, n_effective))
    # Beyond 4096 values the answer holds the CDF at its 512 points (the full curve of a
    # 2^20 domain would be megabytes per answer); "points" says where.
    values = cdf_m if oracle.domain_size <= 4096 else cdf_m[pts]
    return {"cdf": values.tolist(), "method": method, "confidence": confidence,
            "interval": _HULL if method != "unbiased" else "analytic",
            "points": pts.tolist(), "ci_low": lo.tolist(), "ci_high": hi.tolist()}


def mean(oracle: Any, state: ldpcore.State, *, confidence: float,
         n_effective: float | None = None) -> dict[str, Any]:
    """Mean of a numeric collection, with its (worst-case) analytic standard error."""
    require(oracle, MeanEstimates, "mean")
    z = z_value(confidence)
    n = _n(state, n_effective)
    value, se = shared("mean", oracle, state, (n,), lambda: (
        float(oracle.mean(state)), math.sqrt(float(oracle.mean_variance(n)))))
    return {"estimate": value, "confidence": confidence, "std_error": se,
            "ci_low": value - z * se, "ci_high": value + z * se,
            "interval": "analytic (worst-case variance)"}


def histogram(oracle: Any, state: ldpcore.State, *, method: str | None = None,
              confidence: float = 0.95, n_effective: float | None = None) -> dict[str, Any]:
    """The distribution over the domain's bins: EMS for numeric collections, the consistent
    (non-negative, summing to 1) leaves for range collections, with intervals."""
    method = check_range_method(method)
    if isinstance(oracle, DistributionEstimates):
        values = _distribution(oracle, state)
        return {"bins": values.tolist(), "method": _reconstruction(oracle), "interval": None,
                "interval_reason": _NUMERIC_REASON}
    require(oracle, RangeQueries, "histogram")
    method = check_range_method(method)
    z = z_value(confidence)
    n = _n(state, n_effective)
    unbiased = _curve("leaves", oracle, state, "unbiased")
    point = unbiased if method == "unbiased" else _curve("leaves", oracle, state, method)
    d = oracle.domain_size
    # Beyond 4096 values the bins are groups of ``bin_width`` consecutive values (at most
    # 1024 bins): each group is a range, with its own range variance.
    width = 1 if d <= 4096 else math.ceil(d / 1024)
    starts = np.arange(0, d, width)
    ends = np.minimum(starts + width, d) - 1
    if width > 1:
        point = np.add.reduceat(point, starts)
        unbiased = np.add.reduceat(unbiased, starts)
    se = _range_se(oracle, n, starts, ends)
    lo, hi = _hull(point, unbiased, se, z)
    out = {"bins": point.tolist(), "method": method, "confidence": confidence,
           "interval": _HULL if method != "unbiased" else "analytic",
           "ci_low": lo.tolist(), "ci_high": hi.tolist()}
    if width > 1:
        out |= {"bin_width": width, "bin_starts": starts.tolist()}
    return out


def heavy_hitters(oracle: Any, state: ldpcore.State, k: int, *,
                  labels: Sequence[str] | None, offset: int = 0, confidence: float = 0.95,
                  n_effective: float | None = None, choice: ChoiceSlot | None = None
                  ) -> dict[str, Any]:
    """Top-k values: PEM's candidate search, else the top of the default (``auto``)
    frequency answer — post-processed, so a numeric collection's bins sum to 1."""
    if k < 1:
        raise QueryError(f"k must be an integer >= 1, got {k}", parameter="k")
    if isinstance(oracle, HeavyHitterSearch):
        # PEM keeps `keep` candidates: a larger k is answered with all of them, and said.
        asked, k = k, min(k, int(oracle.keep))
        z = z_value(confidence)
        rows: list[dict[str, Any]] = [{"value": _num(r[0]) + offset, "estimate": float(r[1]),
                 "std_error": float(r[2]), "ci_low": max(0.0, float(r[1]) - z * float(r[2])),
                 "ci_high": min(1.0, float(r[1]) + z * float(r[2]))}
                for r in oracle.heavy_hitters(state, k)]
        out = {"k": k, "heavy_hitters": rows, "method": "pem", "interval": "analytic"}
        if asked > k:
            out |= {"k_requested": asked, "note": f"the collection keeps {k} candidates "
                                                  "(its 'keep'): all of them are answered"}
        return out
    _need_frequencies(oracle, "heavy-hitters")
    if _reconstructs(oracle):
        full = _ems_frequencies(oracle, state, labels=labels, top=k)
        rows = [{"value": r["label"], **{x: r[x] for x in ("index", "estimate", "std_error",
                                                          "ci_low", "ci_high")}}
                for r in full.pop("estimates")]
        return {**full, "k": k, "heavy_hitters": rows, "of": int(oracle.domain_size)}
    ans, kept = _answer(oracle, state, AUTO, confidence, None, n_effective, choice)
    est = ans.estimate
    order = np.argsort(-est, kind="stable")[:k]
    rows = _rows(ans, order, labels, "value")
    return {**_meta(ans, AUTO, kept), "k": k, "heavy_hitters": rows,
            "of": int(est.size), **_set_estimand(oracle)}


def numeric_summary(oracle: Any, state: ldpcore.State, *, confidence: float,
                    n_effective: float | None = None) -> dict[str, Any]:
    """What the live view shows of a numeric collection: the reconstructed histogram
    (bins labelled by their centres), its CDF, and the mean with its interval."""
    m = mean(oracle, state, confidence=confidence, n_effective=n_effective)
    row = {"label": "mean", "index": 0, "estimate": m["estimate"],
           "std_error": m["std_error"], "ci_low": m["ci_low"], "ci_high": m["ci_high"]}
    if not isinstance(oracle, DistributionEstimates) or not isinstance(oracle, NumericOracle):
        return {"method": "unbiased", "estimates": [row], "mean": m}
    values = np.asarray(oracle.distribution(state), dtype=float)
    centers = oracle.bin_centers()
    rows = [{"label": f"{c:.4g}", "index": i, "estimate": float(v), "std_error": None,
             "ci_low": None, "ci_high": None}
            for i, (c, v) in enumerate(zip(centers, values, strict=True))]
    return {"method": _reconstruction(oracle), "estimates": rows,
            "cdf": np.cumsum(values).tolist(),
            "mean": m, "interval_reason": _NUMERIC_REASON}


def heavy_hitter_rows(oracle: Any, state: ldpcore.State, k: int, *, confidence: float,
                      offset: int = 0) -> dict[str, Any]:
    """The live view of a heavy-hitter collection: its top k as labelled rows."""
    keep = oracle.keep if isinstance(oracle, HeavyHitterSearch) else k
    hh = heavy_hitters(oracle, state, min(k, keep), labels=None, offset=offset,
                       confidence=confidence)["heavy_hitters"]
    rows = [{"label": str(r["value"]), "index": i, "estimate": r["estimate"],
             "std_error": r["std_error"], "ci_low": r["ci_low"], "ci_high": r["ci_high"]}
            for i, r in enumerate(hh)]
    return {"method": oracle.mechanism, "estimates": rows}
