"""Redis state shared by the aggregator and the query API: collections, window counters, watermarks.

Key layout (``P`` = key prefix, default ``"ldp:"``; every value is plain Redis data)::

    P collections                 hash   collection id -> canonical spec JSON (with fingerprint)
    P collections:version         string bumped (INCR) by every change of ``P collections``, in
                                         the same atomic step: readers poll it
                                         (:mod:`ldpstream.catalogue`)
    P state:{id}:{window_start}   hash   "n" -> reports counted; "t" -> wall time (ms) of
                                         the last flush into it; "{i}" -> count of cell i
                                         (i = flat C-order index into the oracle's state_shape;
                                         only nonzero cells exist); expires at window end +
                                         retention (PEXPIREAT)
    P windows:{id}                zset   member = score = window start (epoch s) with data
    P wm:{topic}                  hash   "{partition}" -> highest Kafka offset already counted;
                                         "{partition}:t" -> wall time (ms) of that flush
    P lost                        hash   records deleted from the log before they were counted:
                                         "records" -> total; "{topic}:{partition}" -> per
                                         partition; "{topic}:{partition}:last" -> the last
                                         offset range "first-last"; "t" -> wall time (ms) of
                                         the flush that recorded the last loss
    P req:{digest}.{part}         string a gateway request's record counted (``ldp-request``
                                         header; see gateway/idempotency.py); expires
                                         with the gateway's idempotency window
    P janitor                     hash   the janitor's last round: "releasing" 1/0, "strategy"
                                         (how it proved the watermarks durable), "reason"
                                         (why it refused), "t" (ms); "snap" (ms) is the
                                         write its durability check waits for
    P private                     set    ids of the private collections (ldpstream.access)
    P fleet                       string fleet policy JSON {"budget": {...}} (ldpstream.fleet)

A flush is one Lua script (:data:`FLUSH_SCRIPT`): it checks that every touched
partition's watermark still has the value the worker started from
(compare-and-set: a worker that lost its partitions in a rebalance cannot add its
stale delta) and that none of the gateway requests it counts is counted already
(``P req:…``), then HINCRBYs the delta cells and ``n`` of every (collection,
window) hash, marks those requests, advances the watermarks, and adds the records a
partition lost (deleted from the log before they were counted) to ``P lost``.  Either
all of it happens or none, so a loss is recorded exactly once, like a count.

Readers use :func:`load_state` (sync ``redis.Redis``; the query API's async store
reads the same keys), which sums the windows overlapping ``[since, until)``.

**Sharded layout (Redis Cluster).**  A cluster runs a script only on keys of one hash
slot, so with a cluster client (``LDP_REDIS_CLUSTER``; :func:`is_cluster`) the keys a
flush writes carry the hash tag of their (topic, partition), ``T = {topic:partition}``,
and a worker runs one flush script per partition::

    P T state:{id}:{window_start}  hash   as ``P state:…`` above, the counts of this partition
    P T windows:{id}               zset   as ``P windows:{id}``, the windows of this partition
    P T wm                         hash   as ``P wm:{topic}``, one field pair: "{partition}"
                                          and "{partition}:t"
    P T lost                       hash   as ``P lost``, for this partition
    P T req:{digest}.{part}        string as ``P req:…`` (a retry is recognised in the
                                          partition the collection's key maps to)
    P shards                       set    every "topic:partition" that has flushed
    P shards:{id}                  set    the "topic:partition" tags holding ``id``'s counts
    P {catalogue}collections       hash   the catalogue, its version and the private set
    P {catalogue}collections:version      share one tag, so registering and deleting stay
    P {catalogue}private                  in one slot

(with ``T`` written out, e.g. ``ldp:{ldp.reports:3}state:grr:1700000000``).  A worker
adds its partition to ``P shards`` and ``P shards:{id}`` before the first flush that
writes there, so a reader never misses a shard; readers sum a collection's shards
(:func:`load_state`, pipelined: the cluster client sends one batch per node).  Sums of
integers are the same in any order, so every answer equals the single-Redis one bit
for bit.  :func:`ldpstream.sharding.migrate_to_sharded` moves today's layout into the sharded
one (the counts go to partition 0's tag).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, overload

import numpy as np

from ldpcore import State
from ldpcore.collection import CollectionSpec

__all__ = [
    "check_same_spec",
    "DEFAULT_PREFIX",
    "FLUSH_SCRIPT",
    "Keys",
    "CollectionConflict",
    "CollectionCatalogue",
    "load_state",
    "state_from_hashes",
    "read_watermarks",
    "read_flush_times",
    "read_lost",
    "flush_args",
    "VERSION_SCRIPT",
    "REGISTER_SCRIPT",
    "since_until_args",
    "is_cluster",
    "shard_tags",
]

DEFAULT_PREFIX = "ldp:"

FLUSH_SCRIPT = """
-- KEYS[1] = watermark hash, KEYS[2] = lost-records hash, KEYS[2 + r] = marker of request
-- record r, then KEYS[2 + nr + 2w - 1], KEYS[2 + nr + 2w] = state hash and window zset of
-- window w
-- ARGV: now_ms, topic, np, then np x (partition, expected, new, lost, lost range); nr, then
--       nr x marker expiry (ms); nw, then per window: start, expire_at_ms, n, ncells,
--       ncells x (cell, delta)
local now = ARGV[1]
local topic = ARGV[2]
local np = tonumber(ARGV[3])
local i = 4
for p = 1, np do
  local cur = redis.call('HGET', KEYS[1], ARGV[i])
  if not cur then cur = '-1' end
  if tonumber(cur) ~= tonumber(ARGV[i + 1]) then
    return {0, ARGV[i], cur}
  end
  i = i + 5
end
local nr = tonumber(ARGV[i])
for r = 1, nr do
  if redis.call('EXISTS', KEYS[2 + r]) == 1 then
    return {0, 'request', KEYS[2 + r]}
  end
end
local ri = i + 1
i = i + 1 + nr
local nw = tonumber(ARGV[i])
i = i + 1
for w = 1, nw do
  local sk = KEYS[2 + nr + 2 * w - 1]
  local zk = KEYS[2 + nr + 2 * w]
  local start, expire_at, n, nc = ARGV[i], ARGV[i + 1], ARGV[i + 2], tonumber(ARGV[i + 3])
  i = i + 4
  redis.call('HINCRBY', sk, 'n', n)
  redis.call('HSET', sk, 't', now)
  for c = 1, nc do
    redis.call('HINCRBY', sk, ARGV[i], ARGV[i + 1])
    i = i + 2
  end
  redis.call('ZADD', zk, start, start)
  redis.call('PEXPIREAT', sk, expire_at)
end
for r = 1, nr do
  redis.call('SET', KEYS[2 + r], '1', 'PXAT', ARGV[ri + r - 1])
end
i = 4
local lk = KEYS[2]
for p = 1, np do
  redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 2], ARGV[i] .. ':t', now)
  local lost = tonumber(ARGV[i + 3])
  if lost > 0 then
    local f = topic .. ':' .. ARGV[i]
    redis.call('HINCRBY', lk, f, lost)
    redis.call('HINCRBY', lk, 'records', lost)
    redis.call('HSET', lk, f .. ':last', ARGV[i + 4], 't', now)
  end
  i = i + 5
end
return {1}
"""


REGISTER_SCRIPT = """
-- KEYS[1] = collections hash, KEYS[2] = its version key; ARGV = id, spec JSON.
-- Store the spec unless the id exists; a new entry bumps the version in the same step.
if redis.call('HSETNX', KEYS[1], ARGV[1], ARGV[2]) == 1 then
  redis.call('INCR', KEYS[2])
  return 1
end
return 0
"""


class CollectionConflict(ValueError):
    """An id is already registered with a different spec (specs are immutable)."""


def is_cluster(redis: Any) -> bool:
    """Whether ``redis`` is a Redis Cluster client (sync or asyncio): the sharded layout."""
    from redis.asyncio.cluster import RedisCluster as AsyncCluster
    from redis.cluster import RedisCluster

    return isinstance(redis, (RedisCluster, AsyncCluster))


class _Named:
    """A key of one fixed name, read on a :class:`Keys`: under its prefix or, with
    ``catalogue``, under the catalogue's hash tag (one slot of a Redis Cluster)."""

    def __init__(self, name: str, doc: str | None = None, *, catalogue: bool = False) -> None:
        self.name, self.catalogue, self.__doc__ = name, catalogue, doc

    @overload
    def __get__(self, keys: None, owner: type) -> _Named: ...
    @overload
    def __get__(self, keys: Keys, owner: type) -> str: ...
    def __get__(self, keys: Keys | None, owner: type) -> _Named | str:
        if keys is None:
            return self
        return f"{keys._cat if self.catalogue else keys.prefix}{self.name}"


@dataclass(frozen=True)
class Keys:
    """Builds the Redis keys of the layout above for one prefix.

    ``sharded``: the Redis Cluster layout (module docstring); :meth:`for_client` picks it
    from the client.
    """

    prefix: str = DEFAULT_PREFIX
    sharded: bool = False

    def __post_init__(self) -> None:
        if self.sharded and ("{" in self.prefix or "}" in self.prefix):
            raise ValueError(f"LDP_REDIS_PREFIX must have no braces on a Redis Cluster (they "
                             f"make hash tags), got {self.prefix!r}")

    @classmethod
    def for_client(cls, redis: Any, prefix: str = DEFAULT_PREFIX) -> Keys:
        return cls(prefix, sharded=is_cluster(redis))

    @property
    def _cat(self) -> str:
        return f"{self.prefix}{{catalogue}}" if self.sharded else self.prefix

    # the keys of one fixed name
    collections = _Named("collections", catalogue=True)
    catalogue_version = _Named("collections:version", "Bumped with every change of "
                               ":attr:`collections` (see :mod:`ldpstream.catalogue`).",
                               catalogue=True)
    private = _Named("private", catalogue=True)
    shards = _Named("shards", "Set of every ``topic:partition`` that has flushed (sharded "
                    "layout).")
    lost = _Named("lost")
    janitor = _Named("janitor")
    fleet = _Named("fleet")

    # ---- the sharded layout: one hash tag per (topic, partition) -----------------------
    def shard(self, topic: str, partition: int) -> str:
        """The key prefix of a partition's keys: ``P{topic:partition}``."""
        return f"{self.prefix}{{{topic}:{partition}}}"

    def shard_state(self, topic: str, partition: int, collection: str, start: int) -> str:
        return f"{self.shard(topic, partition)}state:{collection}:{start}"

    def shard_windows(self, topic: str, partition: int, collection: str) -> str:
        return f"{self.shard(topic, partition)}windows:{collection}"

    def shard_watermarks(self, topic: str, partition: int) -> str:
        return f"{self.shard(topic, partition)}wm"

    def shard_lost(self, topic: str, partition: int) -> str:
        return f"{self.shard(topic, partition)}lost"

    def shard_request(self, topic: str, partition: int, name: str) -> str:
        return f"{self.shard(topic, partition)}req:{name}"

    def collection_shards(self, collection: str) -> str:
        """Set of the ``topic:partition`` tags holding ``collection``'s counts."""
        return f"{self.prefix}shards:{collection}"

    def state(self, collection: str, start: int) -> str:
        return f"{self.prefix}state:{collection}:{start}"

    def windows(self, collection: str) -> str:
        return f"{self.prefix}windows:{collection}"

    def watermarks(self, topic: str) -> str:
        return f"{self.prefix}wm:{topic}"

    def request(self, name: str) -> str:
        return f"{self.prefix}req:{name}"


def check_same_spec(spec: CollectionSpec, existing: CollectionSpec | None) -> None:
    """Raise :class:`CollectionConflict` unless ``existing`` is the same spec as ``spec``."""
    if existing is None or existing.fingerprint != spec.fingerprint:
        theirs = existing.fingerprint if existing else "?"
        raise CollectionConflict(
            f"collection {spec.id!r} is already registered with fingerprint {theirs}; "
            f"refusing a different spec (fingerprint {spec.fingerprint}). Specs are "
            "immutable: register it under a new id or version.")


class CollectionCatalogue:
    """Collections stored in Redis (sync client); registering is idempotent, never mutating.

    ``register`` of an id that exists with an equal spec is a no-op; with a
    different spec it raises :class:`CollectionConflict` naming both fingerprints.
    """

    def __init__(self, redis: Any, prefix: str = DEFAULT_PREFIX) -> None:
        self.redis = redis
        self.keys = Keys.for_client(redis, prefix)
        self._register: Any = None

    def register(self, spec: CollectionSpec) -> bool:
        """Store ``spec``; True if newly created, False if already there (equal)."""
        if self._register is None:
            self._register = self.redis.register_script(REGISTER_SCRIPT)
        created = bool(self._register(keys=[self.keys.collections, self.keys.catalogue_version],
                                      args=[spec.id, spec.to_json()]))
        if created:
            return True
        check_same_spec(spec, self.get(spec.id))
        return False

    def register_all(self, specs: Iterable[CollectionSpec]) -> None:
        for spec in specs:
            self.register(spec)

    def mark_private(self, collection: str, private: bool) -> None:
        """Mark a collection private (readable only with a token naming it) or public."""
        if private:
            self.redis.sadd(self.keys.private, collection)
        else:
            self.redis.srem(self.keys.private, collection)

    def private_ids(self) -> set[str]:
        return {k.decode() if isinstance(k, bytes) else str(k)
                for k in self.redis.smembers(self.keys.private)}

    def get(self, collection: str) -> CollectionSpec | None:
        raw = self.redis.hget(self.keys.collections, collection)
        return None if raw is None else CollectionSpec.from_dict(json.loads(raw))

    def all(self) -> dict[str, CollectionSpec]:
        raw = self.redis.hgetall(self.keys.collections)
        out = {}
        for k, v in raw.items():
            key = k.decode() if isinstance(k, bytes) else str(k)
            out[key] = CollectionSpec.from_dict(json.loads(v))
        return out


# the name before the catalogue was spelled one way throughout (kept for callers)
CollectionCatalog = CollectionCatalogue


VERSION_SCRIPT = """
-- The cheap "state version" of a collection over a score range of windows.
-- KEYS[1] = windows zset; ARGV = lo, hi, state key prefix ("P state:{id}:").
-- Returns a flat list: start, n, t (last flush ms) for every window in range.
local starts = redis.call('ZRANGEBYSCORE', KEYS[1], ARGV[1], ARGV[2])
local out = {}
for _, s in ipairs(starts) do
  local v = redis.call('HMGET', ARGV[3] .. s, 'n', 't')
  if v[1] then
    out[#out + 1] = s
    out[#out + 1] = v[1]
    out[#out + 1] = v[2] or '0'
  end
end
return out
"""


def windows_in(spec: CollectionSpec, starts: Iterable[Any], since: float | None,
                until: float | None) -> list[int]:
    out = []
    for s in starts:
        start = int(float(s))
        end = start + spec.window_seconds
        if since is not None and end <= since:
            continue
        if until is not None and start >= until:
            continue
        out.append(start)
    return sorted(out)


_EMPTY: dict[str, tuple[str, tuple[int, ...]]] = {}
"""Per spec fingerprint: its oracle's fingerprint and state shape (building the oracle to
learn them cost 0.1–0.5 ms at every window read; a spec never changes)."""


def _empty_state(spec: CollectionSpec) -> State:
    made = _EMPTY.get(spec.fingerprint)
    if made is None:
        oracle = spec.oracle()
        if len(_EMPTY) >= 4096:
            _EMPTY.clear()
        made = _EMPTY[spec.fingerprint] = (oracle.fingerprint, tuple(oracle.state_shape))
    return State(made[0], 0, np.zeros(made[1], dtype=np.int64))


def state_from_hashes(spec: CollectionSpec, hashes: Iterable[Mapping[Any, Any]]) -> State:
    """Sum window hashes (``HGETALL`` results) into one ldpcore :class:`State`."""
    state = _empty_state(spec)
    flat = state.counts.reshape(-1)
    n = 0
    for h in hashes:
        if not h:
            continue
        cells = dict(h)
        for meta in (b"n", "n"):
            if meta in cells:
                n += int(cells.pop(meta))
        for meta in (b"t", "t"):
            cells.pop(meta, None)
        if cells:  # a hash's cells are distinct: a plain fancy-index add is exact
            flat[_decimals(list(cells))] += _decimals(list(cells.values()))
    state.n = n
    return state


def _decimals(values: list[Any]) -> np.ndarray:
    """Decimal integers as a client returns them (bytes, or str when it decodes) as int64,
    parsed in C: a window of an OLH, HH or multi collection holds thousands of cells, and
    converting them one by one cost the query API ~15 ms per window read."""
    try:
        text = b" ".join(values)
    except TypeError:
        text = " ".join(map(str, values)).encode()
    out: np.ndarray = np.fromstring(text, dtype=np.int64, sep=" ")
    if out.size != len(values):
        raise ValueError(f"a window hash holds a non-integer cell ({len(values)} cells, "
                         f"{out.size} read)")
    return out


def since_until_args(since: float | None, until: float | None,
                      window: int) -> tuple[str, str]:
    # A window [s, s + w) overlaps [since, until) iff s > since - w and s < until.
    lo = "-inf" if since is None else f"({since - window}"
    hi = "+inf" if until is None else f"({until}"
    return lo, hi


def _tags(raw: Iterable[Any]) -> list[tuple[str, int]]:
    out = []
    for m in raw:
        topic, _, p = _b(m).decode().rpartition(":")
        out.append((topic, int(p)))
    return sorted(out)


def shard_tags(redis: Any, keys: Keys, collection: str | None = None) -> list[tuple[str, int]]:
    """The (topic, partition) shards of the sharded layout: all of them, or those holding
    ``collection``'s counts."""
    key = keys.shards if collection is None else keys.collection_shards(collection)
    return _tags(redis.smembers(key))


def load_state(redis: Any, spec: CollectionSpec, since: float | None = None,
               until: float | None = None, prefix: str = DEFAULT_PREFIX) -> State:
    """The summed state of ``spec`` over windows overlapping ``[since, until)`` (epoch s).

    On a Redis Cluster the sum runs over every shard of the collection, two pipelined
    rounds (window lists, then hashes), each one batch per node.
    """
    keys = Keys.for_client(redis, prefix)
    lo, hi = since_until_args(since, until, spec.window_seconds)
    if keys.sharded:
        tags = shard_tags(redis, keys, spec.id)
        pipe = redis.pipeline(transaction=False)
        for t, p in tags:
            pipe.zrangebyscore(keys.shard_windows(t, p, spec.id), lo, hi)
        lists = pipe.execute() if tags else []
        names = [keys.shard_state(t, p, spec.id, s)
                 for (t, p), raw in zip(tags, lists, strict=True)
                 for s in windows_in(spec, raw, since, until)]
    else:
        starts = windows_in(spec, redis.zrangebyscore(keys.windows(spec.id), lo, hi), since,
                            until)
        names = [keys.state(spec.id, s) for s in starts]
    pipe = redis.pipeline(transaction=False)
    for name in names:
        pipe.hgetall(name)
    return state_from_hashes(spec, pipe.execute() if names else [])


def _wm_hash(redis: Any, topic: str, prefix: str,
             partitions: Iterable[int] | None) -> dict[Any, Any]:
    """``P wm:{topic}``, or on a cluster the union of the partitions' ``P{topic:p}wm``
    (``partitions``: those to read; None: every one in ``P shards``)."""
    keys = Keys.for_client(redis, prefix)
    if not keys.sharded:
        return dict(redis.hgetall(keys.watermarks(topic)))
    parts = sorted(set(partitions) if partitions is not None
                   else {p for t, p in shard_tags(redis, keys) if t == topic})
    pipe = redis.pipeline(transaction=False)
    for p in parts:
        pipe.hgetall(keys.shard_watermarks(topic, p))
    out: dict[Any, Any] = {}
    for h in pipe.execute() if parts else []:
        out.update(h)
    return out


def read_watermarks(redis: Any, topic: str, prefix: str = DEFAULT_PREFIX,
                    partitions: Iterable[int] | None = None) -> dict[int, int]:
    """partition -> highest counted offset, for one topic (on a cluster: of ``partitions``,
    or of every partition that has flushed)."""
    raw = _wm_hash(redis, topic, prefix, partitions)
    return {int(k): int(v) for k, v in raw.items() if b":" not in _b(k)}


def read_flush_times(redis: Any, topic: str, prefix: str = DEFAULT_PREFIX,
                     partitions: Iterable[int] | None = None) -> dict[int, int]:
    """partition -> wall time (ms) of the flush that set its watermark."""
    raw = _wm_hash(redis, topic, prefix, partitions)
    return {int(_b(k).split(b":")[0]): int(v) for k, v in raw.items() if b":" in _b(k)}


def _b(k: Any) -> bytes:
    return k if isinstance(k, bytes) else str(k).encode()


def flush_args(keys: Keys, topic: str, partitions: Mapping[int, tuple[int, int]],
               deltas: Mapping[tuple[str, int], tuple[int, np.ndarray, int]],
               now_ms: int = 0, lost: Mapping[int, tuple[int, int, int]] | None = None,
               requests: Mapping[str, int] | None = None,
               shard: int | None = None) -> tuple[list[str], list[Any]]:
    """KEYS and ARGV of :data:`FLUSH_SCRIPT`.

    ``shard``: the sharded layout's partition, whose hash tag every key carries (then
    ``partitions`` may hold that partition only); None: the single-Redis layout.

    ``partitions``: partition -> (expected watermark, new watermark);
    ``deltas``: (collection, window start) -> (n, counts, expire_at_ms);
    ``lost``: partition -> (records, first, last offset of the last range) deleted from
    the log before they were counted (only for partitions in ``partitions``);
    ``requests``: ``ldp-request`` name -> expiry (ms) of the records of gateway requests
    counted by this flush (the script refuses it if one is counted already).
    """
    lost, requests = lost or {}, requests or {}
    if shard is not None:
        if set(partitions) - {shard}:
            raise ValueError(f"a flush of shard {shard} cannot move partitions "
                             f"{sorted(partitions)}")
        t, sp = topic, shard
        k: list[str] = [keys.shard_watermarks(t, sp), keys.shard_lost(t, sp)]
    else:
        k = [keys.watermarks(topic), keys.lost]
    a: list[Any] = [now_ms, topic, len(partitions)]
    for p, (expected, new) in sorted(partitions.items()):
        count, first, last = lost.get(p, (0, 0, 0))
        a += [p, expected, new, count, f"{first}-{last}"]
    a.append(len(requests))
    for name, expire_ms in requests.items():
        k.append(keys.request(name) if shard is None else keys.shard_request(t, sp, name))
        a.append(expire_ms)
    a.append(len(deltas))
    for (cid, start), (n, counts, expire_at) in deltas.items():
        if shard is None:
            k += [keys.state(cid, start), keys.windows(cid)]
        else:
            k += [keys.shard_state(t, sp, cid, start), keys.shard_windows(t, sp, cid)]
        flat = counts.reshape(-1)
        nz = np.flatnonzero(flat)
        a += [start, expire_at, n, int(nz.size)]
        cells = np.empty(2 * nz.size, dtype=np.int64)
        cells[0::2] = nz
        cells[1::2] = flat[nz]
        a += cells.tolist()
    return k, a


def read_lost(redis: Any, prefix: str = DEFAULT_PREFIX) -> dict[str, Any]:
    """What ``P lost`` says: ``records`` (total), ``t`` (ms of the last loss) and, per
    ``"{topic}:{partition}"``, ``(records, "first-last")`` of that partition."""
    raw = lost_fields(redis.hgetall(Keys(prefix).lost)) if not is_cluster(redis) else \
        read_lost_hashes(redis, Keys.for_client(redis, prefix))
    parts = {f: (int(v), raw.get(f + ":last", "")) for f, v in raw.items()
             if f not in ("records", "t") and not f.endswith(":last")}
    return {"records": int(raw.get("records", 0)), "t": int(raw.get("t", 0)),
            "partitions": parts}


def lost_fields(h: Mapping[Any, Any]) -> dict[str, str]:
    return {_b(k).decode(): _b(v).decode() for k, v in h.items()}


def merge_lost(hashes: Iterable[Mapping[Any, Any]]) -> dict[str, str]:
    """The shards' ``P{topic:p}lost`` hashes as one ``P lost`` (records summed, t max)."""
    out: dict[str, str] = {}
    records = t = 0
    for h in hashes:
        f = lost_fields(h)
        records += int(f.pop("records", 0))
        t = max(t, int(f.pop("t", 0)))
        out.update(f)
    if records:
        out["records"], out["t"] = str(records), str(t)
    return out


def read_lost_hashes(redis: Any, keys: Keys) -> dict[str, str]:
    """The merged lost hashes of every shard (sharded layout; sync client)."""
    tags = shard_tags(redis, keys)
    pipe = redis.pipeline(transaction=False)
    for t, p in tags:
        pipe.hgetall(keys.shard_lost(t, p))
    return merge_lost(pipe.execute() if tags else [])
