"""ldpstream.sharding: the single-Redis layout copied into the sharded one.

Here the target is another database of the same Redis (any client will do, the keys carry
the cluster's hash tags); a real 3-primary cluster, answering the same estimates after the
migration, is in tests/integration/test_redis_cluster.py."""

from __future__ import annotations

import argparse
import time
import uuid
from typing import Any

import numpy as np
import pytest

from ldpcore.collection import CollectionSpec
from ldpstream.settings import ConfigError
from ldpstream.sharding import _cmd_migrate, add_migrate_parser, migrate_to_sharded
from ldpstream.storage import FLUSH_SCRIPT, CollectionCatalogue, Keys, flush_args

SPEC = CollectionSpec.from_dict({"id": "m", "oracle": {"mechanism": "grr", "epsilon": 1.0},
                                 "domain": {"kind": "categories", "labels": ["a", "b"]}})


def test_migrate_copies_catalogue_counts_and_watermarks_into_their_shards(
        redis_server: Any) -> None:
    import redis

    prefix, topic = f"sh{uuid.uuid4().hex[:8]}:", "reports"
    src = redis.Redis.from_url(redis_server.url)
    dst = redis.Redis.from_url(redis_server.url.rsplit("/", 1)[0] + "/3")
    try:
        CollectionCatalogue(src, prefix).register(SPEC)
        start = int(time.time()) // 3600 * 3600
        keys, args = flush_args(Keys(prefix), topic, {0: (-1, 9), 2: (-1, 4)},
                                {("m", start): (7, np.array([3, 4]), int(time.time() + 600)
                                                * 1000)}, int(time.time() * 1000))
        assert src.eval(FLUSH_SCRIPT, len(keys), *keys, *args)[0] == 1
        src.set(f"{prefix}fleet", b'{"budget": null}')
        done = migrate_to_sharded(src, dst, prefix=prefix, topic=topic)
        assert done == {"collections": 1, "watermarks": 2, "windows": 1, "other": 1}
        new = Keys(prefix, sharded=True)
        assert dst.hgetall(new.collections) == src.hgetall(Keys(prefix).collections)
        assert dst.hgetall(new.shard_state(topic, 0, "m", start)) == \
            src.hgetall(Keys(prefix).state("m", start))
        assert dst.pttl(new.shard_state(topic, 0, "m", start)) > 0  # the expiry goes along
        # each partition's watermark (and its time) alone in its partition's hash
        wm = src.hgetall(Keys(prefix).watermarks(topic))
        assert dst.hgetall(new.shard_watermarks(topic, 2)) == {b"2": b"4", b"2:t": wm[b"2:t"]}
        assert dst.hget(new.shard_watermarks(topic, 0), "0") == b"9"
        assert dst.get(f"{prefix}fleet") == b'{"budget": null}'
        assert migrate_to_sharded(src, dst, prefix=prefix, topic=topic) == done  # idempotent
    finally:
        for key in dst.scan_iter(match=f"{prefix}*"):
            dst.delete(key)
        src.close()
        dst.close()


def test_the_verb_needs_the_target_cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    parser = argparse.ArgumentParser()
    add_migrate_parser(parser.add_subparsers(dest="cmd"))
    args = parser.parse_args(["migrate-cluster"])
    assert args.func is _cmd_migrate
    monkeypatch.delenv("LDP_REDIS_CLUSTER", raising=False)
    with pytest.raises(ConfigError, match="LDP_REDIS_CLUSTER"):
        args.func(args)
