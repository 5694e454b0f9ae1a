"""The fleet's per-device daily ε budget at issuance (docs/budget.md).

The issuer does not issue tokens beyond a device's daily budget.  The budget is the fleet
policy in the catalogue (``P fleet``, :mod:`ldpstream.fleet`; re-read at most every
:data:`TTL` s).  Each token is charged :func:`ldpcore.budget.token_charge`: the
collection's one-report ε until the tokens a device got for that collection on that UTC
day reach the collection's daily bound (for ``permanent`` memoization with one value a
day, the first token of the day), nothing beyond.  The issuer keeps, per device, the
tokens per (collection, day) (``P pp:tok:{device}:{collection}:{day}``) and the ε granted
per day (``P pp:eps:{device}:{day}``), both expiring after two days.
"""

from __future__ import annotations

import time
from typing import Any

from ldpcore.budget import FleetBudget, token_charge, utc_day
from ldpcore.collection import CollectionSpec
from ldpstream.fleet import parse_policy
from ldpstream.storage import Keys

__all__ = ["IssuerBudget", "TTL"]

TTL = 1.0
"""Seconds the fleet policy is cached."""

_TWO_DAYS = 2 * 86_400


class IssuerBudget:
    """The fleet budget and the per-device token counts behind each token's ε charge."""

    def __init__(self, redis: Any, prefix: str) -> None:
        self.redis, self.prefix, self.key = redis, prefix, Keys(prefix).fleet
        self._cached: tuple[float, FleetBudget] | None = None

    async def budget(self) -> FleetBudget:
        now = time.monotonic()
        if self._cached is None or now - self._cached[0] >= TTL:
            self._cached = (now, parse_policy(await self.redis.get(self.key)))
        return self._cached[1]

    async def charge(self, device: str, spec: CollectionSpec, n: int, now: float
                     ) -> tuple[float, FleetBudget, str] | None:
        """(ε of these ``n`` tokens, the budget, the count key to undo with) or None when
        the fleet has no budget.  Counts the tokens (undo with :meth:`undo` if refused)."""
        budget = await self.budget()
        if budget.epsilon_per_day is None:
            return None
        key = f"{self.prefix}pp:tok:{device}:{spec.id}:{utc_day(now)}"
        after = int(await self.redis.incrby(key, n))
        await self.redis.expire(key, _TWO_DAYS)
        before = after - n
        cost = sum(token_charge(spec, issued_today=before + i,
                                values_per_day=budget.values_per_day) for i in range(n))
        return float(cost), budget, key

    async def undo(self, key: str, n: int) -> None:
        await self.redis.decrby(key, n)
