"""``/v1/collections/{cid}/…`` of set-valued collections: top items, top itemsets, set sizes,
and the declaration of a protocol's next phase (see :mod:`ldpcore.setvalued.phases`)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query
from fastapi.responses import Response
from pydantic import Field

import ldpcore
from ldpcore.collection import CollectionSpec
from ldpcore.setvalued.phases import Protocol, next_phase

from .. import setvalued as SV
from ..deps import Confidence, ServiceDep, SpecDep, Window, WindowDep, answer_response
from ..domain import labels_of
from ..errors import Unsupported
from ..schemas import ERRORS, Answer

router = APIRouter(prefix="/v1", tags=["set-valued"])

K = Annotated[int, Query(ge=1, le=4096, description="how many")]


class TopItemsAnswer(Answer):
    items: list[dict[str, Any]] = Field(description="label, index, estimate (fraction of "
                                        "devices holding the item), std_error, ci_low, ci_high")
    epsilon_per_device: float


class TopItemsetsAnswer(Answer):
    itemsets: list[dict[str, Any]] = Field(description="items, indices, estimate (support), "
                                           "std_error, ci_low, ci_high")
    epsilon_per_device: float


class SetSizesAnswer(Answer):
    sizes: list[dict[str, Any]]
    quantile_size: int | None = Field(description="null when the range holds no report")


class NextPhaseAnswer(Answer):
    next_phase: dict[str, Any] = Field(description="the next phase's collection declaration "
                                       "(POST it to /v1/collections)")


_SIZES_OF = {"frequencies": "sizes", "itemsets": "itemset-sizes"}


async def _sizes(svc: ServiceDep, spec: CollectionSpec, window: Window
                 ) -> tuple[tuple[Any, ldpcore.State] | None, str]:
    """The (oracle, state) of the group's size phase behind this phase, and its version."""
    proto = spec.protocol
    if proto is None or proto["name"] == "ldpminer" or proto["phase"] not in _SIZES_OF:
        return None, ""
    want = _SIZES_OF[proto["phase"]]
    for other in await svc.call(svc.store.all()):
        p = other.protocol
        if (p is not None and p["name"] == proto["name"] and p["group"] == proto["group"]
                and p["phase"] == want):
            version = await svc.version(other, window.since, window.until)
            state = await svc.state(other, version, window.since, window.until)
            if state.n < max(other.min_reports, 1):
                return None, ""
            return (svc.oracle(other), state), version.tag
    return None, ""


_RANKED = {"top-items": (SV.top_items, "items"), "top-itemsets": (SV.top_itemsets, "itemsets")}
"""The ranked queries: the function answering each and the key of its rows."""


async def _ranked(svc: ServiceDep, spec: CollectionSpec, window: Window, query: str, k: int,
                  confidence: float) -> Response:
    """A top-items or top-itemsets answer, truncation-corrected when a sizes phase exists."""
    fn, key = _RANKED[query]
    labels = labels_of(spec)
    sizes, tag = await _sizes(svc, spec, window)
    return answer_response(*await svc.answer(
        spec, query, (k, confidence, tag), window.since, window.until,
        lambda o, s, ne: fn(o, s, k, labels=labels, confidence=confidence, sizes=sizes,
                            protocol=spec.protocol, n_effective=ne),
        empty={"k": k, "confidence": confidence, key: [],
               **SV.epsilon_note(svc.oracle(spec), spec.protocol)}))


@router.get("/collections/{cid}/top-items", response_model=None,
            responses={200: {"model": TopItemsAnswer}, **ERRORS})
async def top_items(svc: ServiceDep, spec: SpecDep, window: WindowDep, k: K = 10,
                    confidence: Confidence = 0.95) -> Response:
    """Set-valued (``ps``) collections: the k items held by the most devices, with intervals
    (truncation-corrected in an SVIM/SVSM frequencies phase)."""
    return await _ranked(svc, spec, window, "top-items", k, confidence)


@router.get("/collections/{cid}/top-itemsets", response_model=None,
            responses={200: {"model": TopItemsetsAnswer}, **ERRORS})
async def top_itemsets(svc: ServiceDep, spec: SpecDep, window: WindowDep, k: K = 10,
                       confidence: Confidence = 0.95) -> Response:
    """Itemset (``psi``) collections: the k candidate itemsets with the largest support."""
    return await _ranked(svc, spec, window, "top-itemsets", k, confidence)


@router.get("/collections/{cid}/set-sizes", response_model=None,
            responses={200: {"model": SetSizesAnswer}, **ERRORS})
async def set_sizes(svc: ServiceDep, spec: SpecDep, window: WindowDep,
                    q: Annotated[float, Query(gt=0, le=1, description="size quantile")] = 0.9,
                    confidence: Confidence = 0.95) -> Response:
    """Size (``setsize``) collections: the distribution of set sizes and its q-quantile."""
    return answer_response(*await svc.answer(
        spec, "set-sizes", (q, confidence), window.since, window.until,
        lambda o, s, ne: SV.set_sizes(o, s, confidence=confidence, quantile=q,
                                      protocol=spec.protocol, n_effective=ne),
        empty={"confidence": confidence, "sizes": [], "quantile": q, "quantile_size": None,
               **SV.epsilon_note(svc.oracle(spec), spec.protocol)}))


@router.get("/collections/{cid}/next-phase", response_model=None,
            responses={200: {"model": NextPhaseAnswer}, **ERRORS})
async def next_phase_(svc: ServiceDep, spec: SpecDep, window: WindowDep) -> Response:
    """A protocol phase's successor: its collection declaration with the candidates (and
    padding length) this phase's answer gives; POST it to ``/v1/collections``."""
    if spec.protocol is None:
        raise Unsupported(f"collection {spec.id!r} is not a phase of a protocol (no "
                          "'protocol' key)")
    raw = dict(spec.protocol)

    def compute(o: Any, s: ldpcore.State, ne: float) -> dict[str, Any]:
        try:
            return {"next_phase": next_phase(spec.to_dict(), Protocol.from_dict(raw, o), o, s)}
        except ldpcore.ParameterError as exc:
            raise Unsupported(str(exc)) from exc

    return answer_response(*await svc.answer(spec, "next-phase", (), window.since,
                                             window.until, compute))
