"""``/v1/collections/{cid}/series``: one estimate kind over time, per window or bucket.

The range ``[since, until)`` is cut into buckets of ``bucket`` seconds (a multiple of
the collection's window, aligned to multiples of ``bucket`` since the epoch, so a bucket
always holds whole windows); ``points=N`` instead picks the shortest such bucket that
gives at most N points (what a dashboard with a time picker wants).  The windows of
the whole range are read in one version round trip; each bucket is then answered
through :meth:`Service.answer` with its own version — the (start, n) of its windows,
which only grow with flushes — so a bucket that no longer changes is computed once
and served from the answer cache after that.

Every point carries the bucket's start and end, its number of reports ``n`` and
windows, the estimate and its confidence interval (``estimate`` is null with a
``reason`` when the bucket holds fewer reports than the collection's minimum).
"""

from __future__ import annotations

import json
import math
import time
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query

import ldpcore

from .. import estimates as E
from ..capabilities import queries_of
from ..deps import Confidence, ServiceDep, SpecDep, WindowDep
from ..domain import index_value, labels_of, to_index
from ..errors import NotEnoughReports, QueryError, Unsupported
from ..schemas import ERRORS, SeriesAnswer
from ..store import StateVersion
from .estimates import Method, _method

router = APIRouter(prefix="/v1", tags=["estimates"])

MAX_POINTS = 500
"""Most buckets one series answer holds (a 400 names ``bucket`` beyond)."""
MAX_SERIES = 20
"""Most labels (``labels=``/``top=``) or quantile levels in one answer."""

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


@router.get("/collections/{cid}/series", response_model=None,
            responses={200: {"model": SeriesAnswer}, **ERRORS})
async def series(
        svc: ServiceDep, spec: SpecDep, window: WindowDep,
        kind: Annotated[Kind, Query(description="which estimate to follow over time")]
        = "frequencies",
        bucket: Annotated[int | None, Query(
            ge=1, description="bucket length in seconds, a multiple of the collection's "
                              "window (default: one window, or see points)")] = None,
        points: Annotated[int | None, Query(
            ge=1, le=MAX_POINTS, description="instead of bucket: at most this many points; "
                                             "the bucket is the shortest multiple of the "
                                             "window that fits")] = None,
        labels: Annotated[list[str] | None, Query(
            description="frequencies/subset: domain values (repeat and/or comma-separate)")]
        = None,
        top: Annotated[int | None, Query(
            ge=1, le=MAX_SERIES, description="frequencies: follow the k values most frequent "
                                             "over the whole range (default 5)")] = None,
        low: Annotated[str | None, Query(description="range: lowest value (inclusive)")] = None,
        high: Annotated[str | None, Query(description="range: highest value (inclusive)")]
        = None,
        q: Annotated[list[float] | None, Query(description="quantiles: levels in [0, 1]")]
        = None,
        method: Method = None, confidence: Confidence = 0.95) -> dict[str, Any]:
    """An estimate per window or bucket: n, the estimate and its confidence interval.

    ``kind=frequencies`` follows ``labels=`` or the ``top=`` values of the whole range
    (default method: the paper's guideline for single values, resp. frequent values);
    ``subset`` the total frequency of ``labels=``; ``range`` the fraction in
    [``low``, ``high``]; ``quantiles`` each level of ``q=``; ``mean`` the mean.
    """
    if kind not in queries_of(spec):
        answers = ", ".join(k for k in KINDS if k in queries_of(spec)) or "none"
        raise Unsupported(f"kind={kind} needs a collection whose mechanism answers /{kind}; "
                          f"this one ({spec.oracle_spec['mechanism']}) answers kind={answers}",
                          parameter="kind")
    w = spec.window_seconds
    now = time.time()
    until = window.until if window.until is not None else now
    if bucket is not None and points is not None:
        raise QueryError("give bucket= or points=, not both", parameter="points")
    if points is not None:
        bucket = w
        if window.since is not None:
            bucket = max(1, math.ceil((until - window.since) / points / w)) * w
            while _count(window.since, until, bucket) > points:
                bucket += w
    bucket = w if bucket is None else bucket
    if bucket % w:
        raise QueryError(f"bucket must be a multiple of the collection's window ({w} s), "
                         f"got {bucket}", parameter="bucket")
    limit = points or MAX_POINTS
    end = math.ceil(until / bucket) * bucket
    if window.since is not None:
        since = math.floor(window.since / bucket) * bucket
        count = (end - since) // bucket
        if count > MAX_POINTS:
            need = math.ceil((end - since) / MAX_POINTS / w) * w
            raise QueryError(f"bucket={bucket} s gives {count} points over this range, more "
                             f"than {MAX_POINTS}; use bucket >= {need} or a shorter "
                             "since/until", parameter="bucket")
    else:  # the most recent MAX_POINTS buckets, from the oldest stored window on
        since = end - limit * bucket
    version = await svc.call(svc.store.version(spec, since, end))
    if window.since is None and version.windows:
        oldest = min(s for s, _ in version.windows)
        since = max(since, oldest - oldest % bucket)

    # What each bucket computes (pure, cached per bucket version by Service.answer).
    items = _items(labels)
    # The default per query: auto (the method of least simulated error for the task).
    task = "set" if kind == "subset" else "full" if items else "frequent"
    m = _method(method, task)
    shown: str = m if kind in ("frequencies", "subset") else (
        "consistent" if kind in ("range", "quantiles") else "unbiased")
    params: tuple[Any, ...]
    names = labels_of(spec)
    compute: Any
    if kind == "frequencies":
        if items and top is not None:
            raise QueryError("give labels= or top=, not both", parameter="top")
        if len(items) > MAX_SERIES:
            raise QueryError(f"labels names {len(items)} values, at most {MAX_SERIES}",
                             parameter="labels")
        if items:
            idx = [to_index(spec, x, "labels") for x in items]
        else:  # the top k of the whole range: the sum of the buckets' (cached) states
            k = top or 5
            idx = []
            if version.n >= spec.min_reports:
                oracle = svc.oracle(spec)
                whole = oracle.new_state()
                for start, bv in _buckets(version, since, end, bucket):
                    if bv.windows:
                        whole += await svc.state(spec, bv, start, start + bucket)
                best = E.frequencies(oracle, whole, labels=names, method=m,
                                     confidence=confidence, top=k)["estimates"]
                idx = [r["index"] for r in best]
        params = (m, confidence, tuple(idx))

        def compute(o: Any, s: ldpcore.State, ne: float) -> dict[str, Any]:
            rows = E.frequencies(o, s, labels=names, method=m, confidence=confidence,
                                 n_effective=ne)
            return {"rows": [_row(rows["estimates"][i]["label"], rows["estimates"][i])
                             for i in idx]}
        series_names = [names[i] if names else str(i) for i in idx]
    elif kind == "subset":
        if not items:
            raise QueryError("kind=subset needs labels= naming at least one domain value",
                             parameter="labels")
        sidx = sorted({to_index(spec, x, "labels") for x in items})
        params = (m, confidence, tuple(sidx))
        name = ",".join(items)
        series_names = [name]

        def compute(o: Any, s: ldpcore.State, ne: float) -> dict[str, Any]:
            return {"rows": [_row(name, E.subset(o, s, sidx, method=m,
                                                 confidence=confidence, n_effective=ne))]}
    elif kind == "range":
        if low is None or high is None:
            raise QueryError("kind=range needs low= and high=",
                             parameter="low" if low is None else "high")
        lo, hi = to_index(spec, low, "low"), to_index(spec, high, "high")
        if lo > hi:
            raise QueryError(f"low must not exceed high (low={low}, high={high})",
                             parameter="low")
        params = (lo, hi, confidence)
        name = f"[{low}, {high}]"
        series_names = [name]

        def compute(o: Any, s: ldpcore.State, ne: float) -> dict[str, Any]:
            return {"rows": [_row(name, E.range_answer(o, s, lo, hi, confidence=confidence,
                                                       n_effective=ne))]}
    elif kind == "quantiles":
        qs = list(dict.fromkeys(q or [0.5]))
        if len(qs) > MAX_SERIES:
            raise QueryError(f"q has {len(qs)} levels, at most {MAX_SERIES}", parameter="q")
        for level in qs:
            if not 0.0 <= level <= 1.0 or math.isnan(level):
                raise QueryError(f"q must be in [0, 1], got {level}", parameter="q")
        params = (tuple(qs), confidence)
        series_names = [f"q{level:g}" for level in qs]
        shown = "CDF inversion"

        def compute(o: Any, s: ldpcore.State, ne: float) -> dict[str, Any]:
            return {"rows": quantile_rows(o, s, qs, confidence=confidence,
                                          value_of=lambda i: index_value(spec, i),
                                          n_effective=ne)}
    else:  # mean
        params = (confidence,)
        series_names = ["mean"]

        def compute(o: Any, s: ldpcore.State, ne: float) -> dict[str, Any]:
            return {"rows": [_row("mean", E.mean(o, s, confidence=confidence,
                                                 n_effective=ne))]}

    out: list[dict[str, Any]] = []
    for start, bv in _buckets(version, since, end, bucket):
        base = {"start": start, "end": start + bucket, "time": _iso(start), "n": bv.n,
                "windows": len(bv.windows)}
        rows: list[dict[str, Any]] | None = None
        reason = None
        if bv.n < spec.min_reports:
            reason = (f"not enough reports: {bv.n} of the {spec.min_reports} needed"
                      if bv.n else "no reports")
        else:
            try:
                body, _, _ = await svc.answer(spec, f"series:{kind}", params, start,
                                              start + bucket, compute, version=bv,
                                              allow_stale=False)
            except NotEnoughReports as exc:
                reason = str(exc)
            else:
                decoded = json.loads(body)
                base["n"] = decoded["n"]
                rows = decoded["rows"]
        if rows is None:
            rows = [{"series": s, "estimate": None, "std_error": None, "ci_low": None,
                     "ci_high": None, "reason": reason} for s in series_names]
        out.extend(base | r for r in rows)
    return {"collection": spec.id, "description": spec.description, "kind": kind,
            "mechanism": spec.oracle_spec["mechanism"], "epsilon": spec.oracle_spec["epsilon"],
            "method": shown, "confidence": confidence, "window_seconds": w,
            "bucket_seconds": bucket, "since": since, "until": end,
            "min_reports": spec.min_reports, "series": series_names,
            "budget": await svc.call(svc.fleet.fields(spec)),
            "as_of": (_iso(version.last_flush_ms / 1000) if version.last_flush_ms else None),
            "points": out}
