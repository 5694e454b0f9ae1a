"""Moving today's single-Redis layout onto a Redis Cluster (the sharded layout).

:mod:`ldpstream.storage` describes both layouts.  :func:`migrate_to_sharded` copies every
key under a prefix from a Redis holding the single-Redis layout into a Redis Cluster,
renamed into the sharded layout:

* the catalogue (``P collections``, its version, ``P private``) into the ``{catalogue}`` tag;
* every window hash and window list of a collection into partition 0's tag of the reports
  topic, ``P{topic:0}state:{id}:{window}`` and ``P{topic:0}windows:{id}``, with their
  expiry.  Only sums are ever read, so partition 0 holding all of today's counts answers
  exactly what the single Redis answered, bit for bit; the workers add later counts in the
  partitions they flush;
* each topic's watermarks ``P wm:{topic}`` split into one ``P{topic:p}wm`` per partition,
  and the lost-records hash ``P lost`` split the same way (each partition's count, last
  range and time);
* the gateway requests counted (``P req:…``), into the tag of every partition of the
  reports topic (a marker only says "counted": any partition may skip a retry);
* every other key under the prefix (fleet policy, gateway idempotency keys, issuer quotas,
  the janitor's hash …) copied as it is (``DUMP``/``RESTORE`` with its expiry).

Run it with the workers stopped (their next start reads the migrated watermarks), e.g.::

    LDP_REDIS_URL=redis://old:6379/0 LDP_REDIS_CLUSTER=n1:6379,n2:6379,n3:6379 \\
        ldpstream migrate-cluster

Copying is idempotent (``HSET``/``RESTORE … REPLACE``): a run that stopped half-way is
run again.  The source is left as it was.
"""

from __future__ import annotations

import argparse
from collections import Counter
from typing import Any

from .storage import Keys, _b

__all__ = ["migrate_to_sharded", "add_migrate_parser"]


def _s(v: Any) -> str:
    return _b(v).decode()


def _copy_hash(target: Any, key: str, mapping: dict[Any, Any], pttl: int) -> None:
    if not mapping:
        return
    target.hset(key, mapping=mapping)
    if pttl > 0:
        target.pexpire(key, pttl)


def migrate_to_sharded(source: Any, target: Any, *, prefix: str, topic: str) -> dict[str, int]:
    """Copy ``prefix``'s keys from ``source`` (single-Redis layout) into ``target``
    (sharded layout; any sync client, normally a ``RedisCluster``).

    ``topic``: the reports topic, whose partition 0 receives the counts.  Returns how
    many keys of each kind were written.
    """
    old, new = Keys(prefix), Keys(prefix, sharded=True)
    done: Counter[str] = Counter()
    handled: set[str] = set()

    # the catalogue (the version and the private set with it)
    handled |= {old.collections, old.catalogue_version, old.private}
    specs = source.hgetall(old.collections)
    if specs:
        target.hset(new.collections, mapping=specs)
    version = source.get(old.catalogue_version)
    if version is not None:
        target.set(new.catalogue_version, version)
    private = source.smembers(old.private)
    if private:
        target.sadd(new.private, *private)
    done["collections"] = len(specs)

    # watermarks and lost records, per partition
    partitions: dict[str, set[int]] = {}
    for raw in source.scan_iter(match=f"{prefix}wm:*", count=500):
        key = _s(raw)
        handled.add(key)
        t = key[len(f"{prefix}wm:"):]
        by_part: dict[int, dict[str, Any]] = {}
        for f, v in source.hgetall(key).items():
            field = _s(f)
            by_part.setdefault(int(field.split(":")[0]), {})[field] = v
        for p, fields in by_part.items():
            target.hset(new.shard_watermarks(t, p), mapping=fields)
            target.sadd(new.shards, f"{t}:{p}")
            done["watermarks"] += 1
        partitions[t] = set(by_part)
    handled.add(old.lost)
    lost = {_s(f): v for f, v in source.hgetall(old.lost).items()}
    for field, v in lost.items():
        if field in ("records", "t") or field.endswith(":last"):
            continue
        t, _, part = field.rpartition(":")
        fields = {field: v, "records": v, "t": lost.get("t", 0)}
        if field + ":last" in lost:
            fields[field + ":last"] = lost[field + ":last"]
        target.hset(new.shard_lost(t, int(part)), mapping=fields)
        target.sadd(new.shards, field)
        done["lost"] += 1

    # the counts: every window of every collection into partition 0's tag
    cids = {_s(k) for k in specs}
    for raw in source.scan_iter(match=f"{prefix}windows:*", count=500):
        cids.add(_s(raw)[len(f"{prefix}windows:"):])
    for cid in sorted(cids):
        wkey = old.windows(cid)
        handled.add(wkey)
        entries = source.zrange(wkey, 0, -1, withscores=True)
        if not entries:
            continue
        target.sadd(new.shards, f"{topic}:0")
        target.sadd(new.collection_shards(cid), f"{topic}:0")
        target.zadd(new.shard_windows(topic, 0, cid), {m: sc for m, sc in entries})
        for member, _ in entries:
            start = int(float(_s(member)))
            skey = old.state(cid, start)
            handled.add(skey)
            _copy_hash(target, new.shard_state(topic, 0, cid, start), source.hgetall(skey),
                       int(source.pttl(skey)))
            done["windows"] += 1
    # state hashes a window list no longer names (trimmed lists) are not read: skipped
    for raw in source.scan_iter(match=f"{prefix}state:*", count=1000):
        handled.add(_s(raw))

    # gateway requests counted: a marker in every partition of the reports topic
    parts = sorted(partitions.get(topic, set()) | {0})
    for raw in source.scan_iter(match=f"{prefix}req:*", count=1000):
        key = _s(raw)
        handled.add(key)
        pttl = int(source.pttl(key))
        if pttl == -2:
            continue
        name = key[len(f"{prefix}req:"):]
        for p in parts:
            target.set(new.shard_request(topic, p, name), source.get(key) or b"1",
                       px=pttl if pttl > 0 else None)
        done["requests"] += 1

    # everything else under the prefix, as it is
    for raw in source.scan_iter(match=f"{prefix}*", count=1000):
        key = _s(raw)
        if key in handled:
            continue
        dumped = source.dump(key)
        if dumped is None:
            continue
        pttl = int(source.pttl(key))
        target.restore(key, max(pttl, 0), dumped, replace=True)
        done["other"] += 1
    return dict(done)


def _cmd_migrate(args: argparse.Namespace) -> int:
    import os

    from .connections import RedisOptions
    from .settings import ConfigError, env_name, env_redis_prefix, env_redis_url

    env = dict(os.environ)
    prefix = env_redis_prefix(env)
    topic = env_name(env, "LDP_REPORTS_TOPIC", "ldp-reports")
    url = env_redis_url(env)
    opts = RedisOptions.from_env(env, url=url)
    if opts.mode != "cluster":
        raise ConfigError("LDP_REDIS_CLUSTER must name the target Redis Cluster's nodes")
    source = RedisOptions.from_env({k: v for k, v in env.items() if k != "LDP_REDIS_CLUSTER"},
                                   url=url).connect(url)
    target = opts.connect(url)
    try:
        done = migrate_to_sharded(source, target, prefix=prefix, topic=topic)
    finally:
        source.close()
        target.close()
    print("migrated: " + ", ".join(f"{k} {v}" for k, v in sorted(done.items())))
    return 0


def add_migrate_parser(sub: Any) -> None:
    """``ldpstream migrate-cluster``."""
    p = sub.add_parser(
        "migrate-cluster",
        help="copy the state of the Redis at LDP_REDIS_URL into the Redis Cluster at "
             "LDP_REDIS_CLUSTER, in the sharded layout (workers stopped; docs/cluster.md)")
    p.set_defaults(func=_cmd_migrate)
