"""``/v1/collections/{cid}/series``: one estimate kind over time, per window or bucket.

The range ``[since, until)`` is cut into buckets aligned to multiples of the bucket
length since the epoch, so a bucket always holds whole windows.  The bucket length is
the shortest multiple of the collection's window that is at least ``bucket`` (default:
one window) and gives at most ``points`` buckets over the range (default and at most
:data:`MAX_POINTS`): both parameters may be given, neither is ever refused.  The range
is cut to what can hold data — no window older than the retention, none after now.

The windows of the whole range are read in one version round trip; each bucket is then
answered through :meth:`Service.answer` with its own version — the (start, n) of its
windows, which only grow with flushes — so a bucket that no longer changes is computed
once and served from the answer cache after that.

Every point carries the bucket's start and end, its reports ``n`` and effective sample
size ``n_effective`` (docs/longitudinal.md), its windows, the estimate and its
confidence interval (``estimate`` is null with a ``reason`` when the bucket holds fewer
reports than the collection's minimum); the answer states ``n`` and ``n_effective`` of
the whole range.  An empty range (since not before until) is answered with no point.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

import numpy as np
from fastapi import APIRouter, Query
from fastapi.responses import Response

import ldpcore
from ldpcore.collection import CollectionSpec

from .. import estimates as E
from ..capabilities import queries_of
from ..deps import Confidence, ServiceDep, SpecDep, Window, WindowDep
from ..domain import index_value, labels_of, to_index
from ..errors import NotEnoughReports, QueryError, Unsupported
from ..schemas import ERRORS, SeriesAnswer
from ..service import Compute, Service, encode
from ..store import StateVersion
from .estimates import Method, _method

router = APIRouter(prefix="/v1", tags=["estimates"])

MAX_POINTS = 500
"""Most buckets one series answer holds."""
MAX_SERIES = 20
"""Most labels (``labels=``/``top=``) or quantile levels in one answer (a 400 beyond)."""

Kind = Literal["frequencies", "subset", "range", "quantiles", "mean"]
KINDS: tuple[str, ...] = ("frequencies", "subset", "range", "quantiles", "mean")


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).isoformat().replace("+00:00", "Z")


def _items(raw: list[str] | None) -> list[str]:
    return list(dict.fromkeys(x for r in raw or [] for x in r.split(",") if x != ""))


def quantile_rows(oracle: Any, state: ldpcore.State, qs: list[float], *, confidence: float,
                  value_of: Any, n_effective: float | None = None) -> list[dict[str, Any]]:
    """Quantiles with the intervals of :func:`query_api.estimates.quantiles` (the CDF band
    inverted, for range oracles; null for EM reconstructions), in domain values."""
    rows = E.quantiles(oracle, state, qs, confidence=confidence,
                       n_effective=n_effective)["quantiles"]
    out = []
    for row in rows:
        value, lo, hi = row["value"], row.get("ci_low"), row.get("ci_high")
        if isinstance(value, int):
            value = value_of(value)
            lo = None if lo is None else value_of(lo)
            hi = None if hi is None else value_of(hi)
        out.append({"series": f"q{row['q']:g}", "estimate": value, "ci_low": lo,
                    "ci_high": hi, "std_error": None})
    return out


def _row(name: str, body: dict[str, Any]) -> dict[str, Any]:
    return {"series": name, "estimate": body["estimate"], "std_error": body.get("std_error"),
            "ci_low": body.get("ci_low"), "ci_high": body.get("ci_high")}


def _count(since: float, until: float, bucket: int) -> int:
    """Buckets of ``bucket`` seconds (aligned to multiples of it) covering [since, until)."""
    return int(math.ceil(until / bucket) - math.floor(since / bucket))


def _buckets(version: StateVersion, since: float, until: float, bucket: int
             ) -> list[tuple[int, StateVersion]]:
    """(bucket start, its version) for every bucket in [since, until)."""
    by: dict[int, list[tuple[int, int]]] = {}
    for start, n in version.windows:
        by.setdefault(start - start % bucket, []).append((start, n))
    out = []
    for b in range(int(since), int(until), bucket):
        # last_flush_ms=0: a bucket's identity is its windows' (start, n) alone, so an
        # unchanged bucket keeps its tag (and its cached answer) while others flush.
        out.append((b, StateVersion(tuple(by.get(b, ())), 0)))
    return out


@dataclass(frozen=True)
class Plan:
    """What each bucket computes: the cache parameters, the pure computation, the names of
    the series it yields and the method the answer names."""

    params: tuple[Any, ...]
    compute: Callable[[Any], Compute]
    """Given the bucket's choice slot (kept ``auto`` choices), the computation."""
    names: list[str]
    method: str
    shape: tuple[Any, ...] = ()
    """What the bucket's kept ``auto`` choice is keyed by (not the confidence level)."""


@dataclass(frozen=True)
class Span:
    """The range actually answered: [since, end) in buckets of ``bucket`` seconds."""

    since: int
    end: int
    bucket: int


def _span(spec: CollectionSpec, window: Window, version: StateVersion | None,
          bucket: int | None, points: int | None, now: float) -> Span:
    """The bucket length and the bucket-aligned range (see the module notes)."""
    w = spec.window_seconds
    want = max(1, math.ceil((bucket or w) / w)) * w
    limit = points or MAX_POINTS
    until = min(window.until if window.until is not None else now, now + w)
    oldest = now - spec.retention_seconds - w
    if window.since is None:  # the most recent `limit` buckets, from the oldest window on
        end = int(math.ceil(until / want) * want)
        start = end - limit * want
        if version is not None and version.windows:
            first = min(s for s, _ in version.windows)
            start = max(start, first - first % want)
        return Span(start, end, want)
    since = max(window.since, oldest)
    if since >= until:
        return Span(int(since), int(since), want)
    size = max(want, math.ceil((until - since) / limit / w) * w)
    while _count(since, until, size) > limit:
        size += w
    return Span(int(math.floor(since / size) * size), int(math.ceil(until / size) * size), size)


async def _frequencies_plan(svc: Service, spec: CollectionSpec, items: list[str],
                            top: int | None, version: StateVersion, span: Span, m: str,
                            confidence: float) -> Plan:
    """Follow ``labels=`` (all, or their ``top`` over the whole range) or the ``top``
    (default 5) values of the whole range (ranked once per version and span)."""
    names = labels_of(spec)
    if len(items) > MAX_SERIES:
        raise QueryError(f"labels names {len(items)} values, at most {MAX_SERIES}",
                         parameter="labels")
    idx = [to_index(spec, x, "labels") for x in items]
    if top is not None or not items:
        k = top or 5
        order = await _ranking_of(svc, spec, version, span)
        if order is None:  # too few reports to rank: no series yet
            idx = idx[:k]
        elif idx:
            rank = np.empty_like(order)
            rank[order] = np.arange(order.size)
            idx = sorted(idx, key=lambda i: int(rank[i]))[:k]
        else:
            idx = order[:k].tolist()

    def compute(slot: Any) -> Compute:
        def run(o: Any, s: ldpcore.State, ne: float) -> dict[str, Any]:
            rows = E.frequencies(o, s, labels=names, method=m, confidence=confidence,
                                 n_effective=ne, choice=slot, only=idx)
            return {"rows": [_row(r["label"], r) for r in rows["estimates"]]}
        return run

    return Plan((m, confidence, tuple(idx)), compute,
                [names[i] if names else str(i) for i in idx], m, ("full",))


async def _ranking_of(svc: Service, spec: CollectionSpec, version: StateVersion,
                      span: Span) -> np.ndarray | None:
    """The whole range's values by decreasing estimate, kept per version and span (the
    range's state is summed only when the ranking is not kept); None below the minimum."""
    key = ("ranking", spec.id, spec.fingerprint, version.tag, span.since, span.end,
           span.bucket)
    kept: np.ndarray | None = svc.states.get(key)
    if kept is not None:
        return kept
    whole = await _whole(svc, spec, version, span)
    if whole is None:
        return None
    order: np.ndarray = svc.states.get_or_make(key, lambda: _ranking(svc.oracle(spec), whole))
    return order


def _ranking(o: Any, whole: ldpcore.State) -> np.ndarray:
    """The values by decreasing estimate, ties by index (read-only; kept per version)."""
    est = np.asarray(o.distribution(whole) if E._reconstructs(o) else o.estimate(whole),
                     dtype=np.float64)
    order = np.argsort(-est, kind="stable")
    order.flags.writeable = False
    return order


def _subset_plan(spec: CollectionSpec, items: list[str], m: str, confidence: float) -> Plan:
    if not items:
        raise QueryError("kind=subset needs labels= naming at least one domain value",
                         parameter="labels")
    idx = sorted({to_index(spec, x, "labels") for x in items})
    name = ",".join(items)

    def compute(slot: Any) -> Compute:
        return lambda o, s, ne: {"rows": [_row(name, E.subset(
            o, s, idx, method=m, confidence=confidence, n_effective=ne, choice=slot))]}

    return Plan((m, confidence, tuple(idx)), compute, [name], m, ("subset", tuple(idx)))


def _range_plan(spec: CollectionSpec, low: str | None, high: str | None,
                confidence: float) -> Plan:
    if low is None or high is None:
        raise QueryError("kind=range needs low= and high=",
                         parameter="low" if low is None else "high")
    lo, hi = to_index(spec, low, "low"), to_index(spec, high, "high")
    if lo > hi:
        raise QueryError(f"low must not exceed high (low={low}, high={high})", parameter="low")
    name = f"[{low}, {high}]"

    def compute(slot: Any) -> Compute:
        return lambda o, s, ne: {"rows": [_row(name, E.range_answer(
            o, s, lo, hi, confidence=confidence, n_effective=ne))]}

    return Plan((lo, hi, confidence), compute, [name], "consistent")


def _quantiles_plan(spec: CollectionSpec, q: list[float] | None, confidence: float) -> Plan:
    qs = list(dict.fromkeys(q or [0.5]))
    if len(qs) > MAX_SERIES:
        raise QueryError(f"q has {len(qs)} levels, at most {MAX_SERIES}", parameter="q")
    for level in qs:
        if not 0.0 <= level <= 1.0 or math.isnan(level):
            raise QueryError(f"q must be in [0, 1], got {level}", parameter="q")

    def compute(slot: Any) -> Compute:
        return lambda o, s, ne: {"rows": quantile_rows(
            o, s, qs, confidence=confidence, value_of=lambda i: index_value(spec, i),
            n_effective=ne)}

    return Plan((tuple(qs), confidence), compute, [f"q{level:g}" for level in qs],
                "CDF inversion")


def _mean_plan(confidence: float) -> Plan:
    def compute(slot: Any) -> Compute:
        return lambda o, s, ne: {"rows": [_row("mean", E.mean(o, s, confidence=confidence,
                                                              n_effective=ne))]}

    return Plan((confidence,), compute, ["mean"], "unbiased")


async def _whole(svc: Service, spec: CollectionSpec, version: StateVersion,
                 span: Span) -> ldpcore.State | None:
    """The range's state, summed from the buckets' (cached) states; None below the minimum."""
    if version.n < max(1, spec.min_reports):
        return None
    whole: ldpcore.State = svc.oracle(spec).new_state()
    for start, bv in _buckets(version, span.since, span.end, span.bucket):
        if bv.windows:
            whole += await svc.state(spec, bv, start, start + span.bucket)
    return whole


async def _bucket_rows(svc: Service, spec: CollectionSpec, kind: str, plan: Plan, start: int,
                       end: int, bv: StateVersion) -> tuple[dict[str, Any],
                                                            list[dict[str, Any]] | None, str]:
    """One bucket's (n, n_effective) update, its rows (None: no estimate) and why not."""
    if bv.n < max(1, spec.min_reports):
        return {}, None, (f"not enough reports: {bv.n} of the {spec.min_reports} needed"
                          if bv.n else "no reports")
    slot = svc.choices.slot((spec.fingerprint, ("bucket", start, end), *plan.shape))
    try:
        body, _, _ = await svc.answer(spec, f"series:{kind}", plan.params, start, end,
                                      plan.compute(slot), version=bv, allow_stale=False)
    except NotEnoughReports as exc:
        return {}, None, str(exc)
    decoded = json.loads(body)
    return {"n": decoded["n"], "n_effective": decoded["n_effective"]}, decoded["rows"], ""


async def _points(svc: Service, spec: CollectionSpec, kind: str, plan: Plan,
                  version: StateVersion, span: Span) -> list[dict[str, Any]]:
    """Every bucket's points: one per series, the estimate or why there is none.  The
    buckets are answered concurrently (on the series pool), each cached by its version."""
    buckets = _buckets(version, span.since, span.end, span.bucket)
    answers = await asyncio.gather(*(
        _bucket_rows(svc, spec, kind, plan, start, start + span.bucket, bv)
        for start, bv in buckets))
    out: list[dict[str, Any]] = []
    for (start, bv), (counts, rows, reason) in zip(buckets, answers, strict=True):
        base = {"start": start, "end": start + span.bucket, "time": _iso(start), "n": bv.n,
                "n_effective": svc.head(spec, bv, bv.n, start, start + span.bucket)[
                    "n_effective"],
                "windows": len(bv.windows)} | counts
        if rows is None:
            rows = [{"series": s, "estimate": None, "std_error": None, "ci_low": None,
                     "ci_high": None, "reason": reason} for s in plan.names]
        out.extend(base | r for r in rows)
    return out


def _estimand(svc: Service, spec: CollectionSpec, kind: str) -> dict[str, Any]:
    """What a set-valued collection's series estimates (nothing for the others)."""
    if not spec.set_valued or kind not in ("frequencies", "subset"):
        return {}
    from ..setvalued import estimand

    length = int(svc.oracle(spec).length)
    return estimand("holders-truncated" if kind == "frequencies" else "items-per-device",
                    length=length)


@router.get("/collections/{cid}/series", response_model=None,
            responses={200: {"model": SeriesAnswer}, **ERRORS})
async def series(
        svc: ServiceDep, spec: SpecDep, window: WindowDep,
        kind: Annotated[Kind, Query(description="which estimate to follow over time")]
        = "frequencies",
        bucket: Annotated[int | None, Query(
            ge=1, le=10**9, description="shortest bucket length in seconds, rounded up to a "
                                        "multiple of the collection's window (default: one "
                                        "window); grown to fit points")] = None,
        points: Annotated[int | None, Query(
            ge=1, le=MAX_POINTS, description="most points (default 500): the bucket is the "
                                             "shortest allowed length that fits")] = None,
        labels: Annotated[list[str] | None, Query(
            description="frequencies/subset: domain values (repeat and/or comma-separate); "
                        "kind=subset needs them", json_schema_extra={"items": {
                            "type": "string", "minLength": 1}})] = None,
        top: Annotated[int | None, Query(
            ge=1, le=MAX_SERIES, description="frequencies: follow the k most frequent values "
                                             "over the whole range, among labels= if given "
                                             "(default 5 without labels=)")] = None,
        low: Annotated[str | None, Query(
            min_length=1, description="range: lowest value (inclusive); kind=range needs "
                                      "low and high")] = None,
        high: Annotated[str | None, Query(
            min_length=1, description="range: highest value (inclusive)")] = None,
        q: Annotated[list[float] | None, Query(
            description="quantiles: levels in [0, 1]",
            json_schema_extra={"items": {"type": "number", "minimum": 0, "maximum": 1}})]
        = None,
        method: Method = None, confidence: Confidence = 0.95) -> Response:
    """An estimate per window or bucket, each with n, n_effective, the estimate and its
    confidence interval.

    ``kind=frequencies`` follows ``labels=`` and/or the ``top=`` values of the whole
    range; ``subset`` the total frequency of ``labels=``; ``range`` the fraction in
    [``low``, ``high``]; ``quantiles`` each level of ``q=``; ``mean`` the mean.  The
    default method is ``auto`` (chosen per bucket, kept across its nearby states).
    Rules the schema cannot state: ``kind=subset`` needs ``labels``, ``kind=range``
    needs ``low`` and ``high``; labels and bounds must be values of the collection.
    """
    if kind not in queries_of(spec):
        answers = ", ".join(k for k in KINDS if k in queries_of(spec)) or "none"
        raise Unsupported(f"kind={kind} needs a collection whose mechanism answers /{kind}; "
                          f"this one ({spec.oracle_spec['mechanism']}) answers kind={answers}",
                          parameter="kind")
    items = _items(labels)
    m = _method(method, "set" if kind == "subset" else "full" if items else "frequent")
    now = time.time()
    first = _span(spec, window, None, bucket, points, now)
    version = (await svc.version(spec, first.since, first.end) if first.end > first.since
               else StateVersion((), 0))
    span = first if window.since is not None else _span(spec, window, version, bucket,
                                                        points, now)  # from the oldest
    if kind == "frequencies":
        plan = await _frequencies_plan(svc, spec, items, top, version, span, m, confidence)
    elif kind == "subset":
        plan = _subset_plan(spec, items, m, confidence)
    elif kind == "range":
        plan = _range_plan(spec, low, high, confidence)
    elif kind == "quantiles":
        plan = _quantiles_plan(spec, q, confidence)
    else:
        plan = _mean_plan(confidence)
    named = _estimand(svc, spec, kind)
    # Encoded here as every answer is (orjson): FastAPI's jsonable_encoder walked the
    # points of a returned dict value by value.
    body = {**named, "collection": spec.id, "description": spec.description, "kind": kind,
            "mechanism": spec.oracle_spec["mechanism"], "epsilon": spec.oracle_spec["epsilon"],
            "method": plan.method, "confidence": confidence,
            "window_seconds": spec.window_seconds, "bucket_seconds": span.bucket,
            "since": span.since, "until": span.end, "min_reports": spec.min_reports,
            "n": version.n,
            "n_effective": svc.head(spec, version, version.n, span.since, span.end)[
                "n_effective"],
            "series": plan.names, "budget": await svc.call(svc.fleet.fields(spec)),
            "as_of": (_iso(version.last_flush_ms / 1000) if version.last_flush_ms else None),
            "points": await _points(svc, spec, kind, plan, version, span)}
    return Response(encode(body), media_type="application/json")
