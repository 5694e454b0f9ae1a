"""``/v1/collections/{cid}/attributes[/{name}/…]``: per-attribute estimates of a
multi-attribute collection (mechanism ``multi``, :mod:`ldpcore.multi`).

Each attribute is answered by its own oracle from its own sub-state (the
:math:`n_j` reports that sampled it), with the same query functions and
parameters as the collection-level routes (:mod:`query_api.routes.estimates`):
``/attributes/{name}/frequencies``, ``subset``, ``heavy-hitters``, ``mean``,
``histogram``, ``cdf``, ``quantiles``, ``range`` — as far as that attribute's
mechanism supports them (a 409 names the ones it does).  A declared 2-way marginal is
the attribute ``"a*b"`` whose values are labelled ``"x & y"``.  Intervals cover the
frequency (or mean) among *all* n reporting devices: they are computed at the
attribute's effective sample size
(:meth:`ldpcore.multi.MultiAttribute.attribute_effective_size`), which adds the
variance of sampling :math:`n_j` of the n devices to the oracle's own, times the
collection's longitudinal factor ``n_effective / n``.  Every answer names the
``attribute``, its ``attribute_mechanism`` and ``attribute_epsilon`` (ε/k), the
reports that answered it (``n_attribute``) and all reports (``n_total``).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query
from fastapi.responses import Response

import ldpcore
from ldpcore.capabilities import AttributeEstimates
from ldpcore.collection import CollectionSpec

from .. import estimates as E
from ..capabilities import require, routes_of
from ..deps import Confidence, ServiceDep, SpecDep, WindowDep, answer_response
from ..domain import index_offset, labels_of, to_index
from ..errors import NotEnoughReports, NotFound, QueryError
from ..parts import STATE_KEY, ByIdentity, shared
from ..schemas import ERRORS
from .estimates import NO_ESTIMATE, Compute, Method, RangeMethod, _curve, _method, _quantiles

router = APIRouter(prefix="/v1", tags=["attributes"])

AttrName = Annotated[str, Path(description="an attribute of the collection "
                                           "(GET /v1/collections/{cid}/attributes)")]


_VIEWS = ByIdentity(1024)
"""Attribute views made, under (the collection's spec object, attribute): a spec object
is the catalogue's as long as its JSON does not change, and building the view builds the
collection's oracle (a fifth of a millisecond or more on every request)."""


def _attribute(spec: CollectionSpec, name: str) -> CollectionSpec:
    """The attribute's view as a collection (labels, indices), or 409/404."""
    return _VIEWS.get_or_make((spec,), name, lambda: _make_attribute(spec, name))


def _make_attribute(spec: CollectionSpec, name: str) -> CollectionSpec:
    require(spec.oracle(), AttributeEstimates, "per-attribute")
    if name not in spec.attribute_names:
        raise NotFound(f"collection {spec.id!r} has no attribute {name!r}; its attributes: "
                       f"{list(spec.attribute_names)}", parameter="name")
    return spec.attribute_spec(name)


def _per_attribute(name: str, fn: Compute) -> Compute:
    """``fn`` applied to the attribute's oracle and sub-state, at its effective size."""

    def compute(oracle: Any, state: ldpcore.State, n_eff: float) -> dict[str, Any]:
        # The attribute's sub-state is level-free: made once per state (shared), and named
        # by the state's own name (its version) and the attribute, so its parts are found
        # without hashing its counts at every level.
        sub = oracle.attribute(name)
        part = shared("attribute-state", oracle, state, (name,),
                      lambda: oracle.attribute_state(state, name))
        if part.n < 1:
            raise NotEnoughReports(0, 1)
        ne = oracle.attribute_effective_size(name, state.n, part.n) * min(1.0, n_eff / state.n)
        held = STATE_KEY.get()
        named = None if held is None or held[0] is not state else STATE_KEY.set(
            (part, (held[1], "attribute", name)))
        try:
            out = fn(sub, part, max(1.0, ne))
        finally:
            if named is not None:
                STATE_KEY.reset(named)
        return {**out, "attribute": name, "attribute_mechanism": sub.mechanism,
                "attribute_epsilon": sub.epsilon, "n_attribute": part.n,
                "n_total": state.n, "n_effective": round(ne, 1)}

    return compute


_EMPTY: dict[str, dict[str, Any]] = {
    "frequencies": {"estimates": [], "sum": None}, "subset": NO_ESTIMATE,
    "heavy-hitters": {"heavy_hitters": []}, "mean": NO_ESTIMATE, "histogram": {"bins": []},
    "cdf": {"cdf": []}, "quantiles": {"quantiles": []}, "range": NO_ESTIMATE}
"""Each query's body over a range without reports (n = 0)."""


async def _answer(svc: ServiceDep, spec: CollectionSpec, window: WindowDep, name: str,
                  query: str, params: tuple[Any, ...], fn: Compute) -> Response:
    empty = {**_EMPTY[query], "attribute": name, "n_attribute": 0, "n_total": 0}
    return answer_response(*await svc.answer(
        spec, f"attributes/{name}/{query}", params, window.since, window.until,
        _per_attribute(name, fn), empty=empty))


def _slot(svc: ServiceDep, spec: CollectionSpec, window: WindowDep, name: str,
          *shape: Any) -> Any:
    """Where the attribute query's ``auto`` choice is kept (see query_api.choices)."""
    return svc.choices.slot((spec.fingerprint, window.raw, "attribute", name, *shape))


@router.get("/collections/{cid}/attributes", response_model=None,
            responses={200: {"description": "the attributes, their oracles and report counts"},
                       **ERRORS})
async def attributes(svc: ServiceDep, spec: SpecDep, window: WindowDep) -> Response:
    """The attributes of a multi-attribute collection, then its 2-way marginals
    (``"a*b"``): domain, mechanism, ε/k, the queries each answers and how many reports
    answered it."""
    require(spec.oracle(), AttributeEstimates, "per-attribute")

    def compute(oracle: Any, state: ldpcore.State, n_eff: float) -> dict[str, Any]:
        counts = oracle.attribute_counts(state)
        rows = []
        for j, name in enumerate(oracle.attribute_names):
            sub = oracle.attribute(name)
            domain = ({"kind": "pair", "attributes": name.split("*")} if "*" in name
                      else spec.domain.attribute(name).to_dict())
            rows.append({"name": name, "domain": domain,
                         "mechanism": sub.mechanism, "epsilon": sub.epsilon,
                         "queries": routes_of(type(sub)), "n": int(counts[j])})
        return {"sample": oracle.sample, "sampling_probability": oracle.sampling_probability,
                "attributes": rows}

    return answer_response(*await svc.answer(spec, "attributes", (), window.since,
                                             window.until, compute))


@router.get("/collections/{cid}/attributes/{name}/frequencies", response_model=None,
            responses=ERRORS)
async def attribute_frequencies(svc: ServiceDep, spec: SpecDep, window: WindowDep,
                                name: AttrName, method: Method = None,
                                confidence: Confidence = 0.95,
                                top: Annotated[int | None, Query(ge=1)] = None) -> Response:
    """Per value of the attribute: estimate, standard error and confidence interval."""
    sub = _attribute(spec, name)
    m, labels = _method(method, "full"), labels_of(sub)
    slot = _slot(svc, spec, window, name, "full")
    return await _answer(svc, spec, window, name, "frequencies", (m, confidence, top),
                         lambda o, s, ne: E.frequencies(o, s, labels=labels, method=m,
                                                        confidence=confidence, top=top,
                                                        n_effective=ne, choice=slot,
                                                        encoded=True))


@router.get("/collections/{cid}/attributes/{name}/subset", response_model=None,
            responses=ERRORS)
async def attribute_subset(svc: ServiceDep, spec: SpecDep, window: WindowDep, name: AttrName,
                           labels: Annotated[list[str], Query()], method: Method = None,
                           confidence: Confidence = 0.95) -> Response:
    """Frequency of a set of the attribute's values."""
    sub = _attribute(spec, name)
    m = _method(method, "set")
    items = list(dict.fromkeys(x for raw in labels for x in raw.split(",") if x != ""))
    if not items:
        raise QueryError("labels must name at least one domain value", parameter="labels")
    idx = sorted({to_index(sub, x, "labels") for x in items})
    slot = _slot(svc, spec, window, name, "subset", tuple(idx))
    return await _answer(svc, spec, window, name, "subset", (m, confidence, tuple(idx)),
                         lambda o, s, ne: {"labels": items, **E.subset(
                             o, s, idx, method=m, confidence=confidence, n_effective=ne,
                             choice=slot)})


@router.get("/collections/{cid}/attributes/{name}/heavy-hitters", response_model=None,
            responses=ERRORS)
async def attribute_heavy_hitters(svc: ServiceDep, spec: SpecDep, window: WindowDep,
                                  name: AttrName,
                                  k: Annotated[int, Query(ge=1, le=10_000)] = 10,
                                  confidence: Confidence = 0.95) -> Response:
    """The attribute's k most frequent values."""
    sub = _attribute(spec, name)
    labels, offset = labels_of(sub), index_offset(sub)
    slot = _slot(svc, spec, window, name, "full")
    return await _answer(svc, spec, window, name, "heavy-hitters", (k, confidence),
                         lambda o, s, ne: E.heavy_hitters(o, s, k, labels=labels, offset=offset,
                                                          confidence=confidence,
                                                          n_effective=ne, choice=slot))


@router.get("/collections/{cid}/attributes/{name}/mean", response_model=None,
            responses=ERRORS)
async def attribute_mean(svc: ServiceDep, spec: SpecDep, window: WindowDep, name: AttrName,
                         confidence: Confidence = 0.95) -> Response:
    """Mean of a numeric attribute."""
    _attribute(spec, name)
    return await _answer(svc, spec, window, name, "mean", (confidence,),
                         lambda o, s, ne: E.mean(o, s, confidence=confidence, n_effective=ne))


@router.get("/collections/{cid}/attributes/{name}/histogram", response_model=None,
            responses=ERRORS)
async def attribute_histogram(svc: ServiceDep, spec: SpecDep, window: WindowDep,
                              name: AttrName, method: RangeMethod = None,
                              confidence: Confidence = 0.95) -> Response:
    """Distribution over the attribute's bins (range and distribution mechanisms)."""
    return await _answer(svc, spec, window, name, "histogram", (method, confidence),
                         _curve("histogram", labels_of(_attribute(spec, name)), method,
                                confidence))


@router.get("/collections/{cid}/attributes/{name}/cdf", response_model=None,
            responses=ERRORS)
async def attribute_cdf(svc: ServiceDep, spec: SpecDep, window: WindowDep, name: AttrName,
                        method: RangeMethod = None, confidence: Confidence = 0.95) -> Response:
    """Cumulative distribution of an ordered attribute."""
    return await _answer(svc, spec, window, name, "cdf", (method, confidence),
                         _curve("cdf", labels_of(_attribute(spec, name)), method, confidence))


@router.get("/collections/{cid}/attributes/{name}/quantiles", response_model=None,
            responses=ERRORS)
async def attribute_quantiles(svc: ServiceDep, spec: SpecDep, window: WindowDep,
                              name: AttrName,
                              q: Annotated[list[float], Query()] = [0.5],  # noqa: B006
                              method: RangeMethod = None,
                              confidence: Confidence = 0.95) -> Response:
    """Quantiles of an ordered or numeric attribute."""
    return await _answer(svc, spec, window, name, "quantiles", (tuple(q), method, confidence),
                         _quantiles(_attribute(spec, name), q, method, confidence))


@router.get("/collections/{cid}/attributes/{name}/range", response_model=None,
            responses=ERRORS)
async def attribute_range(svc: ServiceDep, spec: SpecDep, window: WindowDep, name: AttrName,
                          low: Annotated[str, Query()], high: Annotated[str, Query()],
                          method: RangeMethod = None,
                          confidence: Confidence = 0.95) -> Response:
    """Fraction of the attribute's values in [low, high] (range-capable mechanisms)."""
    sub = _attribute(spec, name)
    lo, hi = to_index(sub, low, "low"), to_index(sub, high, "high")
    if lo > hi:
        raise QueryError(f"low must not exceed high (low={low}, high={high})", parameter="low")
    return await _answer(svc, spec, window, name, "range", (lo, hi, method, confidence),
                         lambda o, s, ne: E.range_answer(
                             o, s, lo, hi, confidence=confidence, method=method,
                             n_effective=ne) | {"low": low, "high": high})
