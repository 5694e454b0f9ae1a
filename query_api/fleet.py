"""The fleet's privacy budget as the API states it: ``GET /v1/fleet`` and every answer.

:class:`FleetView` reads the policy (``P fleet``) and the catalogue at most once a second
and keeps the summary of :func:`ldpstream.fleet.fleet_summary`; every answer gets its
``budget`` object (the fleet's budget, what one device can spend per day over the fleet
and on the answer's collection) added when it is served, so a cached answer never states
an old budget for longer than that second.
"""

from __future__ import annotations

import json
import time
from typing import Any

from ldpcore.budget import FleetBudget
from ldpcore.collection import CollectionSpec
from ldpstream.fleet import answer_budget, fleet_summary, parse_policy, policy_json

from .store import Store

__all__ = ["FleetView", "TTL"]

TTL = 1.0
"""Seconds the policy and the summary are cached (writes through this API refresh them)."""


class FleetView:
    """The fleet policy and its summary, read through ``store``'s Redis client."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._cached: tuple[float, FleetBudget, list[CollectionSpec], dict[str, Any]] | None
        self._cached = None
        self._raw: Any = None
        self._fields: dict[str, tuple[dict[str, Any], bytes]] = {}

    def invalidate(self) -> None:
        self._cached = None

    async def current(self) -> tuple[FleetBudget, list[CollectionSpec], dict[str, Any]]:
        """(budget, every collection, summary), re-read at most every :data:`TTL` s."""
        now = time.monotonic()
        if self._cached is not None and now - self._cached[0] < TTL:
            return self._cached[1], self._cached[2], self._cached[3]
        raw = await self.store.redis.get(self.store.keys.fleet)
        specs = await self.store.all()
        kept = self._cached
        if (kept is not None and raw == self._raw and len(specs) == len(kept[2])
                and all(a is b for a, b in zip(specs, kept[2], strict=True))):
            # Unchanged policy and specs (the store keeps a spec object while its JSON is
            # the same): the summary stands; making it builds every collection's oracle.
            self._cached = (now, *kept[1:])
            return kept[1], kept[2], kept[3]
        budget = parse_policy(raw)
        summary = fleet_summary(specs, budget)
        self._cached, self._raw = (now, budget, specs, summary), raw
        return budget, specs, summary

    async def budget(self) -> FleetBudget:
        return (await self.current())[0]

    async def set_budget(self, budget: FleetBudget) -> None:
        await self.store.redis.set(self.store.keys.fleet, policy_json(budget))
        self.invalidate()

    async def stated(self, spec: CollectionSpec, body: bytes) -> bytes:
        """``body`` (a JSON object) with the ``budget`` object of ``spec`` added."""
        _, _, summary = await self.current()
        hit = self._fields.get(spec.fingerprint)
        if hit is None or hit[0] is not summary:
            hit = (summary, b',"budget":' + json.dumps(answer_budget(spec, summary),
                                                        separators=(",", ":")).encode())
            if len(self._fields) > 4096:
                self._fields.clear()
            self._fields[spec.fingerprint] = hit
        if not body.endswith(b"}"):
            return body
        return body[:-1] + hit[1] + b"}"

    async def fields(self, spec: CollectionSpec) -> dict[str, Any]:
        """The ``budget`` object of ``spec`` (for answers built as dicts)."""
        return answer_budget(spec, (await self.current())[2])
