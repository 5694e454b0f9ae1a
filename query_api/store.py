"""Async access to the Redis layout of :mod:`ldpstream.storage` for the query service.

The query service only reads states; it writes collections (admin routes).  A
*state version* is the list of (window start, n, last flush time) of the windows a
query covers, read in one round trip (:data:`ldpstream.storage.VERSION_SCRIPT`):
every flush adds reports to n, and window expiry drops entries, so equal versions
mean equal states and estimates can be cached per version.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from ldpcore import State
from ldpcore.collection import CollectionSpec
from ldpstream.storage import (
    DEFAULT_PREFIX,
    REGISTER_SCRIPT,
    VERSION_SCRIPT,
    CollectionConflict,
    Keys,
    check_same_spec,
    since_until_args,
    state_from_hashes,
    windows_in,
)

__all__ = ["Store", "StateVersion", "CollectionConflict"]


@dataclass(frozen=True)
class StateVersion:
    """Which windows a query covers and how many reports each held when read."""

    windows: tuple[tuple[int, int], ...]  # (start, n)
    last_flush_ms: int

    @property
    def n(self) -> int:
        return sum(n for _, n in self.windows)

    @property
    def tag(self) -> str:
        """Short opaque id of this version (changes whenever the state changes)."""
        raw = (",".join(f"{s}:{n}" for s, n in self.windows)
               + f"@{self.last_flush_ms}").encode()
        return hashlib.sha256(raw).hexdigest()[:16]


class Store:
    """Collections and window states in Redis, through an injected ``redis.asyncio`` client."""

    def __init__(self, redis: Any, prefix: str = DEFAULT_PREFIX) -> None:
        self.redis = redis
        self.keys = Keys(prefix)
        self._version_script = redis.register_script(VERSION_SCRIPT)
        self._register_script = redis.register_script(REGISTER_SCRIPT)
        self._specs: dict[str, tuple[str, CollectionSpec]] = {}

    async def ping(self) -> bool:
        return bool(await self.redis.ping())

    # ---- collections ------------------------------------------------------------------
    def _parse(self, cid: str, raw: Any) -> CollectionSpec:
        text = raw.decode() if isinstance(raw, bytes) else str(raw)
        hit = self._specs.get(cid)
        if hit is not None and hit[0] == text:
            return hit[1]
        spec = CollectionSpec.from_dict(json.loads(text))
        self._specs[cid] = (text, spec)
        return spec

    async def get(self, cid: str) -> CollectionSpec | None:
        raw = await self.redis.hget(self.keys.collections, cid)
        return None if raw is None else self._parse(cid, raw)

    async def all(self) -> list[CollectionSpec]:
        raw = await self.redis.hgetall(self.keys.collections)
        specs = [self._parse(k.decode() if isinstance(k, bytes) else str(k), v)
                 for k, v in raw.items()]
        return sorted(specs, key=lambda s: s.id)

    async def register(self, spec: CollectionSpec) -> bool:
        """True if created, False if an equal spec exists; CollectionConflict otherwise."""
        # a new entry bumps the catalogue version (every reader sees it within its freshness)
        if await self._register_script(keys=[self.keys.collections, self.keys.catalogue_version],
                                       args=[spec.id, spec.to_json()]):
            return True
        check_same_spec(spec, await self.get(spec.id))
        return False

    async def delete(self, cid: str) -> bool:
        """Remove a collection and all of its window states; True if it existed."""
        starts = await self.redis.zrange(self.keys.windows(cid), 0, -1)
        pipe = self.redis.pipeline(transaction=True)
        pipe.hdel(self.keys.collections, cid)
        pipe.incr(self.keys.catalogue_version)
        for s in starts:
            pipe.delete(self.keys.state(cid, int(float(s))))
        pipe.delete(self.keys.windows(cid))
        pipe.srem(self.keys.private, cid)
        res = await pipe.execute()
        self._specs.pop(cid, None)
        return bool(res[0])

    # ---- states -----------------------------------------------------------------------
    async def version(self, spec: CollectionSpec, since: float | None,
                      until: float | None) -> StateVersion:
        lo, hi = since_until_args(since, until, spec.window_seconds)
        prefix = self.keys.state(spec.id, 0)[:-1]
        flat = await self._version_script(keys=[self.keys.windows(spec.id)],
                                          args=[lo, hi, prefix])
        rows = [(int(flat[i]), int(flat[i + 1]), int(flat[i + 2]))
                for i in range(0, len(flat), 3)]
        keep = set(windows_in(spec, [r[0] for r in rows], since, until))
        rows = [r for r in rows if r[0] in keep]
        return StateVersion(tuple((s, n) for s, n, _ in rows),
                            max((t for _, _, t in rows), default=0))

    async def state(self, spec: CollectionSpec, version: StateVersion) -> State:
        """The summed state of the windows of ``version`` (read now; may be a little newer)."""
        pipe = self.redis.pipeline(transaction=False)
        for start, _ in version.windows:
            pipe.hgetall(self.keys.state(spec.id, start))
        hashes = await pipe.execute() if version.windows else []
        return state_from_hashes(spec, hashes)
