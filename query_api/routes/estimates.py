"""``/v1/collections/{cid}/…``: the estimates of one collection, and ``/v1/methods``.

Every route computes its answer through :meth:`query_api.service.Service.answer`
(cached per state version) with a pure function of :mod:`query_api.estimates`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query
from fastapi.responses import Response

import ldpcore
from ldpcore.collection import CollectionSpec

from .. import estimates as E
from ..access import require_reader
from ..deps import Confidence, ServiceDep, SpecDep, WindowDep, answer_response
from ..domain import index_offset, index_value, labels_of, to_index
from ..errors import QueryError
from ..schemas import (
    ERRORS,
    CdfAnswer,
    FrequenciesAnswer,
    HeavyHittersAnswer,
    HistogramAnswer,
    MeanAnswer,
    Methods,
    QuantilesAnswer,
    RangeAnswer,
    SubsetAnswer,
)

router = APIRouter(prefix="/v1", tags=["estimates"])

Compute = Callable[[Any, ldpcore.State, float], dict[str, Any]]
"""What an answer computes from the oracle, the window's state and its effective size."""

Method = Annotated[str | None, Query(
    description="post-processing method (GET /v1/methods); default: the guideline for the "
                "query", json_schema_extra={"enum": list(E.method_names())})]


RangeMethod = Annotated[str | None, Query(
    description="range oracles: consistent (default: non-negative, monotone CDF, total 1) "
                "or unbiased", json_schema_extra={"enum": list(E.RANGE_METHODS)})]


def _labelled(body: dict[str, Any], labels: list[str] | None, at: str) -> dict[str, Any]:
    """The body with the labels of the values it holds (all, or those at ``body[at]``)."""
    if labels is None:
        return body | {"labels": None}
    if at == "points" and len(body.get("cdf", [])) != len(labels):
        return body | {"labels": [labels[i] for i in body["points"]]}
    if at == "bin_starts" and "bin_starts" in body:
        w = body["bin_width"]
        return body | {"labels": [f"{labels[a]}–{labels[min(a + w, len(labels)) - 1]}"
                                  for a in body["bin_starts"]]}
    return body | {"labels": labels}


_CURVES: dict[str, tuple[Callable[..., dict[str, Any]], str]] = {
    "cdf": (E.cdf, "points"), "histogram": (E.histogram, "bin_starts")}


def _curve(query: str, labels: list[str] | None, method: str | None,
           confidence: float) -> Compute:
    """The compute of a ``cdf`` or ``histogram`` answer, labelled."""
    estimator, at = _CURVES[query]
    return lambda o, s, ne: _labelled(estimator(o, s, method=method, confidence=confidence,
                                                n_effective=ne), labels, at)


def _quantiles(spec: CollectionSpec, q: list[float], method: str | None,
               confidence: float) -> Compute:
    """The compute of a quantiles answer: an index quantile is given as the domain's value."""

    def compute(o: Any, s: ldpcore.State, ne: float) -> dict[str, Any]:
        out = E.quantiles(o, s, q, method=method, confidence=confidence, n_effective=ne)
        for row in out["quantiles"]:
            if isinstance(row["value"], int):
                row["index"] = row["value"]
                row["value"] = index_value(spec, row["index"])
                for key in ("ci_low", "ci_high"):
                    if key in row:
                        row[key] = index_value(spec, row[key])
        return out

    return compute


NO_ESTIMATE: dict[str, Any] = {"estimate": None, "std_error": None, "ci_low": None,
                               "ci_high": None}
"""The estimate fields of an answer over a range without reports (n = 0)."""


def _method(method: str | None, task: str) -> str:
    return E._check_method(method if method is not None else E.default_method(task))


@router.get("/collections/{cid}/frequencies", response_model=None,
            responses={200: {"model": FrequenciesAnswer}, **ERRORS})
async def frequencies(svc: ServiceDep, spec: SpecDep, window: WindowDep, method: Method = None,
                      confidence: Confidence = 0.95,
                      top: Annotated[int | None, Query(ge=1, description="only the top k")]
                      = None) -> Response:
    """Per value: estimate, standard error and confidence interval."""
    m = _method(method, "full")
    labels = labels_of(spec)
    slot = svc.choices.slot((spec.fingerprint, window.raw, "full"))
    return answer_response(*await svc.answer(
        spec, "frequencies", (m, confidence, top), window.since, window.until,
        lambda o, s, ne: E.frequencies(o, s, labels=labels, method=m, confidence=confidence,
                                       top=top, n_effective=ne, choice=slot,
                                       encoded=True),
        empty={"method": m, "method_requested": m, "confidence": confidence,
               "estimates": [], "sum": None}))


@router.get("/collections/{cid}/subset", response_model=None,
            responses={200: {"model": SubsetAnswer}, **ERRORS})
async def subset(svc: ServiceDep, spec: SpecDep, window: WindowDep,
                 labels: Annotated[list[str], Query(
                     description="domain values: repeat the parameter and/or separate them "
                                 "with commas")],
                 method: Method = None, confidence: Confidence = 0.95) -> Response:
    """Frequency of a set of values (set-value query)."""
    m = _method(method, "set")
    items = list(dict.fromkeys(x for raw in labels for x in raw.split(",") if x != ""))
    if not items:
        raise QueryError("labels must name at least one domain value", parameter="labels")
    idx = sorted({to_index(spec, x, "labels") for x in items})
    slot = svc.choices.slot((spec.fingerprint, window.raw, "subset", tuple(idx)))
    return answer_response(*await svc.answer(
        spec, "subset", (m, confidence, tuple(idx)), window.since, window.until,
        lambda o, s, ne: {"labels": items, **E.subset(o, s, idx, method=m,
                                                      confidence=confidence, n_effective=ne,
                                                      choice=slot)},
        empty={"labels": items, "method": m, "method_requested": m,
               "confidence": confidence, **NO_ESTIMATE}))


@router.get("/collections/{cid}/heavy-hitters", response_model=None,
            responses={200: {"model": HeavyHittersAnswer}, **ERRORS})
async def heavy_hitters(svc: ServiceDep, spec: SpecDep, window: WindowDep,
                        k: Annotated[int, Query(ge=1, le=10_000, description="how many")] = 10,
                        confidence: Confidence = 0.95) -> Response:
    """The k most frequent values with estimates and standard errors."""
    labels = labels_of(spec)
    slot = svc.choices.slot((spec.fingerprint, window.raw, "full"))
    return answer_response(*await svc.answer(
        spec, "heavy-hitters", (k, confidence), window.since, window.until,
        lambda o, s, ne: E.heavy_hitters(o, s, k, labels=labels, offset=index_offset(spec),
                                         confidence=confidence, n_effective=ne, choice=slot),
        empty={"k": k, "heavy_hitters": [], "confidence": confidence}))


@router.get("/collections/{cid}/range", response_model=None,
            responses={200: {"model": RangeAnswer}, **ERRORS})
async def range_(svc: ServiceDep, spec: SpecDep, window: WindowDep,
                 low: Annotated[str, Query(description="lowest domain value (inclusive)")],
                 high: Annotated[str, Query(description="highest domain value (inclusive)")],
                 method: RangeMethod = None, confidence: Confidence = 0.95) -> Response:
    """Fraction of values in [low, high] (range-capable mechanisms)."""
    lo, hi = to_index(spec, low, "low"), to_index(spec, high, "high")
    if lo > hi:
        raise QueryError(f"low must not exceed high (low={low}, high={high})", parameter="low")
    return answer_response(*await svc.answer(
        spec, "range", (lo, hi, method, confidence), window.since, window.until,
        lambda o, s, ne: E.range_answer(o, s, lo, hi, confidence=confidence, method=method,
                                        n_effective=ne) | {"low": low, "high": high},
        empty={"low": low, "high": high, "method": E.check_range_method(method),
               "confidence": confidence, **NO_ESTIMATE}))


@router.get("/collections/{cid}/quantiles", response_model=None,
            responses={200: {"model": QuantilesAnswer}, **ERRORS})
async def quantiles(svc: ServiceDep, spec: SpecDep, window: WindowDep,
                    q: Annotated[list[float], Query(description="levels in [0, 1]")] = [0.5],  # noqa: B006
                    method: RangeMethod = None, confidence: Confidence = 0.95) -> Response:
    """Quantiles of an ordered domain or of a numeric distribution."""
    return answer_response(*await svc.answer(
        spec, "quantiles", (tuple(q), method, confidence), window.since, window.until,
        _quantiles(spec, q, method, confidence),
        empty={"quantiles": [{"q": x, "value": None} for x in q], "confidence": confidence}))


@router.get("/collections/{cid}/cdf", response_model=None,
            responses={200: {"model": CdfAnswer}, **ERRORS})
async def cdf(svc: ServiceDep, spec: SpecDep, window: WindowDep, method: RangeMethod = None,
              confidence: Confidence = 0.95) -> Response:
    """Cumulative distribution over the ordered domain, with pointwise intervals."""
    return answer_response(*await svc.answer(
        spec, "cdf", (method, confidence), window.since, window.until,
        _curve("cdf", labels_of(spec), method, confidence),
        empty={"cdf": [], "labels": None, "confidence": confidence}))


@router.get("/collections/{cid}/mean", response_model=None,
            responses={200: {"model": MeanAnswer}, **ERRORS})
async def mean(svc: ServiceDep, spec: SpecDep, window: WindowDep,
               confidence: Confidence = 0.95) -> Response:
    """Mean of a numeric collection."""
    return answer_response(*await svc.answer(
        spec, "mean", (confidence,), window.since, window.until,
        lambda o, s, ne: E.mean(o, s, confidence=confidence, n_effective=ne),
        empty={"confidence": confidence, **NO_ESTIMATE}))


@router.get("/collections/{cid}/histogram", response_model=None,
            responses={200: {"model": HistogramAnswer}, **ERRORS})
async def histogram(svc: ServiceDep, spec: SpecDep, window: WindowDep,
                    method: RangeMethod = None, confidence: Confidence = 0.95) -> Response:
    """Distribution over the domain's bins (range and numeric mechanisms)."""
    return answer_response(*await svc.answer(
        spec, "histogram", (method, confidence), window.since, window.until,
        _curve("histogram", labels_of(spec), method, confidence),
        empty={"bins": [], "labels": None, "confidence": confidence}))


@router.get("/methods", response_model=None, responses={200: {"model": Methods}},
            dependencies=[Depends(require_reader)])
async def methods() -> dict[str, Any]:
    """Post-processing methods and the paper's guideline per task."""
    return {"methods": list(ldpcore.POSTPROCESS_METHODS),
            "guideline": {t: E.default_method(t) for t in ("full", "frequent", "set")}}


@router.get("/mechanisms", response_model=None,
            responses={200: {"description": "every mechanism: capabilities, parameter ranges"}},
            dependencies=[Depends(require_reader)])
async def mechanisms() -> dict[str, Any]:
    """What a collection spec may declare: each mechanism's capabilities, the routes they
    answer and the allowed range of ε and of every other parameter."""
    from ldpcore.capabilities import capabilities_of
    from ldpcore.limits import param_ranges
    from ldpcore.registry import available_mechanisms, oracle_class

    from ..capabilities import routes_of

    ranges = param_ranges()
    out = {}
    for name in available_mechanisms():
        cls = oracle_class(name)
        caps = capabilities_of(cls) if isinstance(cls, type) else ["frequencies"]
        out[name] = {"capabilities": caps,
                     "queries": routes_of(cls) if isinstance(cls, type) else [],
                     "parameters": ranges.get(name, {})}
    return {"mechanisms": out}
