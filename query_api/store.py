"""Async access to the Redis layout of :mod:`ldpstream.storage` for the query service.

The query service only reads states; it writes collections (admin routes).  A
*state version* is the list of (window start, n, last flush time) of the windows a
query covers, read in one round trip (:data:`ldpstream.storage.VERSION_SCRIPT`):
every flush adds reports to n, and window expiry drops entries, so equal versions
mean equal states and estimates can be cached per version.

Collections are read through :class:`ldpstream.catalogue.Catalogue` (the shared reader of
the catalogue): a request finds its spec in the snapshot, which is checked against the
catalogue's version (one ``GET``, merged over concurrent requests) at most every
``spec_ttl`` seconds (the API passes ``LDP_VERSION_TTL_MS``) and re-read when that moved.
So a collection registered, deleted or replaced by another writer (the aggregator, the
CLI, another API process) is seen within ``spec_ttl`` (plus one round trip); one
registered or deleted through this store is seen by the very next request.

On a Redis Cluster (the sharded layout of :mod:`ldpstream.storage`) a collection's
windows are summed over its shards: the version is read in pipelined rounds (shard
list, window lists, ``n``/``t`` of each window), each one batch per node.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from redis.exceptions import NoScriptError

from ldpcore import State
from ldpcore.collection import CollectionSpec
from ldpstream.catalogue import Catalogue, CatalogueUnavailable
from ldpstream.storage import (
    DEFAULT_PREFIX,
    REGISTER_SCRIPT,
    VERSION_SCRIPT,
    CollectionConflict,
    Keys,
    check_same_spec,
    merge_lost,
    since_until_args,
    state_from_hashes,
    windows_in,
)

__all__ = ["Store", "StateVersion", "CollectionConflict"]

_DELETE = """
-- KEYS = collections hash, its version, private set (one hash tag); ARGV[1] = id
local n = redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('INCR', KEYS[2])
redis.call('SREM', KEYS[3], ARGV[1])
return n
"""


@dataclass(frozen=True)
class StateVersion:
    """Which windows a query covers and how many reports each held when read."""

    windows: tuple[tuple[int, int], ...]  # (start, n)
    last_flush_ms: int
    lost_records: int = 0
    """Records of the reports topic deleted before they were counted (``P lost``): n
    misses their reports."""
    flushed: tuple[int, ...] = ()
    """Each window's last flush time (ms), in the order of ``windows``: with its n, what
    identifies the window's state (the service keeps window states under it)."""

    @property
    def n(self) -> int:
        return sum(n for _, n in self.windows)

    @cached_property
    def tag(self) -> str:
        """Short opaque id of this version (changes whenever the state changes); made once
        per version (every request asks for it several times)."""
        raw = (",".join(f"{s}:{n}" for s, n in self.windows)
               + f"@{self.last_flush_ms}"
               + (f"-{self.lost_records}" if self.lost_records else "")).encode()
        return hashlib.sha256(raw).hexdigest()[:16]


class Store:
    """Collections and window states in Redis, through an injected ``redis.asyncio`` client."""

    def __init__(self, redis: Any, prefix: str = DEFAULT_PREFIX, *,
                 spec_ttl: float = 0.0) -> None:
        self.redis = redis
        self.keys = Keys.for_client(redis, prefix)
        self._version_script = redis.register_script(VERSION_SCRIPT)
        self._register_script = redis.register_script(REGISTER_SCRIPT)
        self._specs: dict[str, tuple[str, CollectionSpec]] = {}
        self._delete_script: Any = None
        self.catalogue = Catalogue(redis, prefix, freshness=spec_ttl, miss_ttl=spec_ttl)
        self._recheck = True

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
        """The collection ``cid`` (None: there is none) as of at most ``spec_ttl`` seconds
        ago; :class:`ldpstream.catalogue.CatalogueUnavailable` when Redis cannot tell."""
        cat = self.catalogue
        if self._recheck or cat.clock() - cat.checked_at >= cat.freshness:
            await cat.check()
            self._recheck = False
            return cat.get(cid)
        return await cat.find(cid)

    async def _written(self) -> None:
        """This store changed the catalogue: the next request sees it (re-read now)."""
        self._recheck = True
        with contextlib.suppress(CatalogueUnavailable):
            await self.catalogue.check(full=True)

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
            await self._written()
            return True
        raw = await self.redis.hget(self.keys.collections, spec.id)
        check_same_spec(spec, None if raw is None else self._parse(spec.id, raw))
        return False

    async def delete(self, cid: str) -> bool:
        """Remove a collection and all of its window states; True if it existed."""
        if self.keys.sharded:
            return await self._delete_sharded(cid)
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
        await self._written()
        return bool(res[0])

    async def _delete_sharded(self, cid: str) -> bool:
        # the catalogue keys share a hash tag: one script (redis-py's async cluster
        # transactions leave a connection behind); then each shard's keys
        if self._delete_script is None:
            self._delete_script = self.redis.register_script(_DELETE)
        existed = await self._delete_script(
            keys=[self.keys.collections, self.keys.catalogue_version, self.keys.private],
            args=[cid])
        self._specs.pop(cid, None)
        await self._written()
        tags = await self._tags(cid)
        pipe = self.redis.pipeline(transaction=False)
        for t, p in tags:
            pipe.zrange(self.keys.shard_windows(t, p, cid), 0, -1)
        lists = await pipe.execute() if tags else []
        pipe = self.redis.pipeline(transaction=False)
        for (t, p), starts in zip(tags, lists, strict=True):
            for s in starts:
                pipe.delete(self.keys.shard_state(t, p, cid, int(float(s))))
            pipe.delete(self.keys.shard_windows(t, p, cid))
        pipe.delete(self.keys.collection_shards(cid))
        await pipe.execute()
        return bool(existed)

    async def _tags(self, cid: str | None) -> list[tuple[str, int]]:
        key = self.keys.shards if cid is None else self.keys.collection_shards(cid)
        return _parse_tags(await self.redis.smembers(key))

    async def _lost_hash(self) -> dict[Any, Any]:
        if not self.keys.sharded:
            return dict(await self.redis.hgetall(self.keys.lost))
        tags = await self._tags(None)
        pipe = self.redis.pipeline(transaction=False)
        for t, p in tags:
            pipe.hgetall(self.keys.shard_lost(t, p))
        return dict(merge_lost(await pipe.execute() if tags else []))

    async def _version_sharded(self, spec: CollectionSpec, since: float | None,
                               until: float | None) -> StateVersion:
        # three pipelined rounds: the shard lists; the window lists and the lost counts;
        # n and t of every window
        lo, hi = since_until_args(since, until, spec.window_seconds)
        pipe = self.redis.pipeline(transaction=False)
        pipe.smembers(self.keys.collection_shards(spec.id))
        pipe.smembers(self.keys.shards)
        mine, every = (_parse_tags(raw) for raw in await pipe.execute())
        pipe = self.redis.pipeline(transaction=False)
        for t, p in mine:
            pipe.zrangebyscore(self.keys.shard_windows(t, p, spec.id), lo, hi)
        for t, p in every:
            pipe.hget(self.keys.shard_lost(t, p), "records")
        got = await pipe.execute() if mine or every else []
        lists, losts = got[:len(mine)], got[len(mine):]
        names = [(s, self.keys.shard_state(t, p, spec.id, s))
                 for (t, p), raw in zip(mine, lists, strict=True)
                 for s in windows_in(spec, raw, since, until)]
        pipe = self.redis.pipeline(transaction=False)
        for _, name in names:
            pipe.hmget(name, "n", "t")
        rows = await pipe.execute() if names else []
        n_of: dict[int, int] = {}
        t_of: dict[int, int] = {}
        for (s, _), (n, t) in zip(names, rows, strict=True):
            if n is not None:
                n_of[s] = n_of.get(s, 0) + int(n)
                t_of[s] = max(t_of.get(s, 0), int(t or 0))
        lost = sum(int(v) for v in losts if v is not None)
        windows = tuple(sorted(n_of.items()))
        return StateVersion(windows, max(t_of.values(), default=0), lost,
                            tuple(t_of[s] for s, _ in windows))

    # ---- states -----------------------------------------------------------------------
    async def version(self, spec: CollectionSpec, since: float | None,
                      until: float | None) -> StateVersion:
        if self.keys.sharded:
            return await self._version_sharded(spec, since, until)
        lo, hi = since_until_args(since, until, spec.window_seconds)
        prefix = self.keys.state(spec.id, 0)[:-1]
        try:
            flat, lost = await self._version_pipe(spec, lo, hi, prefix)
        except NoScriptError:  # a restarted or flushed Redis: load the script, once
            await self.redis.script_load(VERSION_SCRIPT)
            flat, lost = await self._version_pipe(spec, lo, hi, prefix)
        rows = [(int(flat[i]), int(flat[i + 1]), int(flat[i + 2]))
                for i in range(0, len(flat), 3)]
        keep = set(windows_in(spec, [r[0] for r in rows], since, until))
        rows = [r for r in rows if r[0] in keep]
        return StateVersion(tuple((s, n) for s, n, _ in rows),
                            max((t for _, _, t in rows), default=0), int(lost or 0),
                            tuple(t for _, _, t in rows))

    async def _version_pipe(self, spec: CollectionSpec, lo: str, hi: str, prefix: str) -> Any:
        # EVALSHA itself: a script run through a pipeline makes redis-py ask SCRIPT EXISTS
        # first, one more round trip on every version read.
        pipe = self.redis.pipeline(transaction=False)
        pipe.evalsha(self._version_script.sha, 1, self.keys.windows(spec.id), lo, hi, prefix)
        pipe.hget(self.keys.lost, "records")
        return await pipe.execute()

    async def health(self) -> dict[str, Any]:
        """What the workers and the janitor left for ``/readyz``: records lost before they
        were counted (``P lost``) and whether the janitor may release records
        (``P janitor``)."""
        if self.keys.sharded:
            lost, janitor = await self._lost_hash(), await self.redis.hgetall(self.keys.janitor)
        else:
            pipe = self.redis.pipeline(transaction=False)
            pipe.hgetall(self.keys.lost)
            pipe.hgetall(self.keys.janitor)
            lost, janitor = await pipe.execute()
        out: dict[str, Any] = {}
        lost = {_s(k): _s(v) for k, v in lost.items()}
        if int(lost.get("records", 0)):
            out["lost_records"] = int(lost["records"])
            out["lost_partitions"] = {k: int(v) for k, v in lost.items()
                                      if k not in ("records", "t") and not k.endswith(":last")}
        janitor = {_s(k): _s(v) for k, v in janitor.items()}
        if "releasing" in janitor:
            out["janitor"] = {"releasing": janitor["releasing"] == "1",
                              "strategy": janitor.get("strategy", ""),
                              "reason": janitor.get("reason", "")}
        return out

    async def window_states(self, spec: CollectionSpec, starts: list[int]) -> list[State]:
        """The state of each window in ``starts`` (read now), in one round trip."""
        if self.keys.sharded:
            tags = await self._tags(spec.id)
            groups = [[self.keys.shard_state(t, p, spec.id, start) for t, p in tags]
                      for start in starts]
        else:
            groups = [[self.keys.state(spec.id, start)] for start in starts]
        pipe = self.redis.pipeline(transaction=False)
        for names in groups:
            for name in names:
                pipe.hgetall(name)
        hashes = await pipe.execute() if any(groups) else []
        out, at = [], 0
        for names in groups:
            out.append(state_from_hashes(spec, hashes[at:at + len(names)]))
            at += len(names)
        return out

    async def state(self, spec: CollectionSpec, version: StateVersion) -> State:
        """The summed state of the windows of ``version`` (read now; may be a little newer)."""
        if self.keys.sharded:  # every shard's hash of each window (missing ones are empty)
            tags = await self._tags(spec.id)
            names = [self.keys.shard_state(t, p, spec.id, start)
                     for t, p in tags for start, _ in version.windows]
        else:
            names = [self.keys.state(spec.id, start) for start, _ in version.windows]
        pipe = self.redis.pipeline(transaction=False)
        for name in names:
            pipe.hgetall(name)
        hashes = await pipe.execute() if names else []
        return state_from_hashes(spec, hashes)


def _parse_tags(raw: Any) -> list[tuple[str, int]]:
    """``topic:partition`` members of a shard set, as sorted (topic, partition) pairs."""
    out = []
    for m in raw:
        topic, _, p = _s(m).rpartition(":")
        out.append((topic, int(p)))
    return sorted(out)


def _s(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)
