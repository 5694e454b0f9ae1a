"""The state on a real 3-primary Redis Cluster (the sharded layout of ldpstream.storage).

One cluster (``RedisClusterNodes``: ``redis-server --cluster-enabled yes`` ×3 joined by
``redis-cli --cluster create``) is shared by the module.  A worker on the default engine
counts a stream into the cluster while a second worker counts the same topic into the
single Redis of the other tests: the cluster's summed shards equal ldpcore's aggregate
cell for cell, and the query API answers the same from both.  The migration moves the
single-Redis layout into the cluster with every sum unchanged.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ldpcore.collection import CollectionSpec
from ldpstream.connections import RedisOptions
from ldpstream.dev.cluster import RedisClusterNodes
from ldpstream.sharding import migrate_to_sharded
from ldpstream.storage import (
    FLUSH_SCRIPT,
    CollectionCatalogue,
    Keys,
    flush_args,
    load_state,
    read_lost,
    read_watermarks,
    shard_tags,
)

from .helpers import WorkerProcess, wait_for, worker_env
from .test_exactness import SPECS, publish

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisClusterNodes]:
    nodes = RedisClusterNodes(tmp_path_factory.mktemp("rcluster")).start()
    try:
        yield nodes
    finally:
        nodes.stop()


def cluster_options(nodes: RedisClusterNodes) -> RedisOptions:
    return RedisOptions.from_env({"LDP_REDIS_CLUSTER": nodes.addresses})


@pytest.fixture
def cluster_client(redis_cluster: RedisClusterNodes) -> Iterator[Any]:
    client = cluster_options(redis_cluster).connect("redis://", socket_timeout=10)
    try:
        yield client
    finally:
        client.close()


def _answers(settings: Any, paths: list[str]) -> list[Any]:
    from fastapi.testclient import TestClient
    from prometheus_client import CollectorRegistry

    from query_api.app import create_app

    out = []
    with TestClient(create_app(settings, registry=CollectorRegistry())) as c:
        for path in paths:
            r = c.get(path)
            assert r.status_code == 200, r.text
            out.append(r.json())
    return out


# fields that say when the state was flushed (two workers, two clocks) or how old the
# `auto` choice is (two services, read 0.1 s apart): the rest is equal
_CLOCKS = {"as_of", "state_version", "age_s"}


def _strip(doc: Any) -> Any:
    if isinstance(doc, dict):
        return {k: _strip(v) for k, v in doc.items() if k not in _CLOCKS}
    if isinstance(doc, list):
        return [_strip(v) for v in doc]
    return doc


@pytest.mark.any_broker  # the layout does not depend on the broker: one is enough (CI time)
def test_a_stream_counted_on_a_redis_cluster_equals_ldpcore_and_the_single_redis_answers(
        kafka: Any, redis_server: Any, redis_client: Any, redis_cluster: RedisClusterNodes,
        cluster_client: Any, ldp_names: dict[str, str], tmp_path: Path) -> None:
    from query_api.config import ApiSettings

    cfile = tmp_path / "collections.json"
    cfile.write_text(json.dumps({"collections": SPECS}))
    specs = [CollectionSpec.from_dict(s) for s in SPECS]
    prefix, topic = ldp_names["prefix"], ldp_names["topic"]
    on_cluster = WorkerProcess(worker_env(kafka, redis_server, ldp_names,
                                          LDP_COLLECTIONS_FILE=str(cfile),
                                          LDP_REDIS_CLUSTER=redis_cluster.addresses),
                               tmp_path / "cluster-worker.log").start()
    single_names = {**ldp_names, "group": ldp_names["group"] + "-single"}
    on_single = WorkerProcess(worker_env(kafka, redis_server, single_names,
                                         LDP_COLLECTIONS_FILE=str(cfile)),
                              tmp_path / "single-worker.log").start()
    try:
        sizes = [1, 7, 64, 512, 300]
        results = [publish(kafka, topic, specs[0], 30_000, sizes, seed=21),
                   publish(kafka, topic, specs[1], 15_000, sizes, seed=22)]
        total = sum(r.reports for r in results)

        def counted(client: Any) -> int:
            return sum(load_state(client, s, prefix=prefix).n for s in specs)
        wait_for(lambda: counted(cluster_client) >= total, 90,
                 f"{total} reports counted on the cluster")
        wait_for(lambda: counted(redis_client) >= total, 90,
                 f"{total} reports counted on the single Redis")
        keys = Keys(prefix, sharded=True)
        for spec, result in zip(specs, results, strict=True):
            got = load_state(cluster_client, spec, prefix=prefix)
            assert got.n == result.state.n
            assert np.array_equal(got.counts, result.state.counts)
            # spread over the partitions the stream used, hence over several primaries
            assert shard_tags(cluster_client, keys, spec.id) == [(topic, p) for p in range(4)]
        nodes = {cluster_client.get_node_from_key(keys.shard_watermarks(topic, p)).name
                 for p in range(4)}
        assert len(nodes) >= 2, nodes
        wms = read_watermarks(cluster_client, topic, prefix)
        assert wms == read_watermarks(redis_client, topic, prefix)
        assert sum(w + 1 for w in wms.values()) == sum(r.messages for r in results)
        assert read_lost(cluster_client, prefix)["records"] == 0

        paths = [f"/v1/collections/{specs[0].id}/frequencies",
                 f"/v1/collections/{specs[1].id}/frequencies?method=norm-sub",
                 f"/v1/collections/{specs[0].id}/heavy-hitters?k=5",
                 "/v1/collections", "/readyz"]
        base = ApiSettings(redis_url=redis_server.url, redis_prefix=prefix)
        single = _answers(base, paths)
        sharded = _answers(ApiSettings(redis_url=redis_server.url, redis_prefix=prefix,
                                       redis_options=cluster_options(redis_cluster)), paths)
        assert single[0]["n"] == results[0].state.n
        assert _strip(sharded) == _strip(single)
        assert on_cluster.alive(), on_cluster.output()
    finally:
        assert on_cluster.stop() == 0, on_cluster.output()
        assert on_single.stop() == 0, on_single.output()


def test_migration_moves_the_single_redis_layout_into_the_cluster_with_equal_sums(
        redis_client: Any, cluster_client: Any) -> None:
    uid = uuid.uuid4().hex[:8]
    prefix, topic = f"m{uid}:", f"reports-{uid}"
    specs = [CollectionSpec.from_dict(s) for s in SPECS]
    CollectionCatalogue(redis_client, prefix).register_all(specs)
    CollectionCatalogue(redis_client, prefix).mark_private(specs[1].id, True)
    old = Keys(prefix)
    rng = np.random.default_rng(5)
    script = redis_client.register_script(FLUSH_SCRIPT)
    far = 4_000_000_000_000  # expiry (ms) far ahead
    # three flushes, as a worker holding partitions 0..2 of the old layout writes them
    for p, windows in ((0, [3600, 7200]), (1, [3600]), (2, [0, 7200])):
        deltas = {}
        for spec in specs:
            for w in windows:
                counts = rng.integers(0, 50, size=spec.oracle().new_state().counts.shape)
                deltas[(spec.id, w)] = (int(rng.integers(1, 1000)), counts, far)
        k, a = flush_args(old, topic, {p: (-1, 10 * p + 9)}, deltas, now_ms=1234,
                          lost={2: (5, 0, 4)} if p == 2 else None,
                          requests={f"abc{p}.0": far})
        assert script(keys=k, args=a) == [1]
    redis_client.set(f"{prefix}fleet", '{"budget": {}}')
    before = {s.id: load_state(redis_client, s, prefix=prefix) for s in specs}
    some = load_state(redis_client, specs[0], since=3600, until=7200, prefix=prefix)

    done = migrate_to_sharded(redis_client, cluster_client, prefix=prefix, topic=topic)
    assert done["collections"] == 2 and done["windows"] == 6 and done["watermarks"] == 3

    for spec in specs:
        after = load_state(cluster_client, spec, prefix=prefix)
        assert after.n == before[spec.id].n
        assert np.array_equal(after.counts, before[spec.id].counts)
        assert shard_tags(cluster_client, Keys(prefix, sharded=True), spec.id) == [(topic, 0)]
    ranged = load_state(cluster_client, specs[0], since=3600, until=7200, prefix=prefix)
    assert ranged.n == some.n and np.array_equal(ranged.counts, some.counts)
    assert read_watermarks(cluster_client, topic, prefix) == {0: 9, 1: 19, 2: 29}
    assert read_lost(cluster_client, prefix) == read_lost(redis_client, prefix)
    cat = CollectionCatalogue(cluster_client, prefix)
    assert set(cat.all()) == {s.id for s in specs} and cat.private_ids() == {specs[1].id}
    assert cluster_client.get(f"{prefix}fleet") == b'{"budget": {}}'
    new = Keys(prefix, sharded=True)
    assert cluster_client.exists(new.shard_request(topic, 1, "abc0.0")) == 1
    # the migrated state keeps its expiry, and a second run changes nothing
    assert cluster_client.pttl(new.shard_state(topic, 0, specs[0].id, 3600)) > 0
    migrate_to_sharded(redis_client, cluster_client, prefix=prefix, topic=topic)
    again = load_state(cluster_client, specs[0], prefix=prefix)
    assert again.n == before[specs[0].id].n
    # deleting a collection (query API admin route) removes it from every shard
    import asyncio

    from query_api.store import Store

    async def delete() -> bool:
        client = cluster_options_of(cluster_client).connect_async("redis://")
        try:
            return await Store(client, prefix).delete(specs[1].id)
        finally:
            await client.aclose()
    assert asyncio.run(delete())
    assert load_state(cluster_client, specs[1], prefix=prefix).n == 0
    assert set(cat.all()) == {specs[0].id} and cat.private_ids() == set()
    assert not cluster_client.exists(new.shard_windows(topic, 0, specs[1].id))


def cluster_options_of(client: Any) -> RedisOptions:
    node = client.get_default_node()
    return RedisOptions.from_env({"LDP_REDIS_CLUSTER": f"{node.host}:{node.port}"})


def test_the_gateways_token_spend_script_runs_on_the_cluster(cluster_client: Any) -> None:
    # a batch spends tokens of several collections and windows in one script call
    from gateway.tokens import _SPEND
    from ldpstream.privacypass import scheme

    pp = scheme.PPKeys(f"s{uuid.uuid4().hex[:8]}:", sharded=True)
    spend = cluster_client.register_script(_SPEND)
    keys = [pp.spent("a", 0, b"\x01"), pp.spent("b", 60, b"\x02"), pp.spent("a", 0, b"\x03")]
    far = 4_000_000_000_000
    # two requests (2 tokens, 1 token), one expiry run of 3 keys
    assert spend(keys=keys, args=[2, 2, 1, 1, 3, far]) == [0, 0]
    assert spend(keys=keys[1:], args=[1, 2, 1, 2, far]) == [1]


def test_ldpstream_migrate_cluster_copies_the_state_named_by_the_environment(
        redis_server: Any, redis_client: Any, redis_cluster: RedisClusterNodes,
        cluster_client: Any) -> None:
    import os
    import subprocess
    import sys

    from .helpers import ROOT

    uid = uuid.uuid4().hex[:8]
    prefix, topic = f"c{uid}:", f"reports-{uid}"
    spec = CollectionSpec.from_dict(SPECS[0])
    CollectionCatalogue(redis_client, prefix).register(spec)
    counts = np.arange(64, dtype=np.int64)
    k, a = flush_args(Keys(prefix), topic, {3: (-1, 41)},
                      {(spec.id, 7200): (99, counts, 4_000_000_000_000)})
    assert redis_client.register_script(FLUSH_SCRIPT)(keys=k, args=a) == [1]
    env = {k: v for k, v in os.environ.items() if not k.startswith("LDP_")}
    env.update(LDP_REDIS_URL=redis_server.url, LDP_REDIS_CLUSTER=redis_cluster.addresses,
               LDP_REDIS_PREFIX=prefix, LDP_REPORTS_TOPIC=topic, PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-m", "ldpstream", "migrate-cluster"], env=env,
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert "collections 1" in done.stdout and "windows 1" in done.stdout
    got = load_state(cluster_client, spec, prefix=prefix)
    assert got.n == 99 and np.array_equal(got.counts, counts)
    assert read_watermarks(cluster_client, topic, prefix) == {3: 41}
    # without a cluster to copy into, it names the setting
    env.pop("LDP_REDIS_CLUSTER")
    done = subprocess.run([sys.executable, "-m", "ldpstream", "migrate-cluster"], env=env,
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2 and "LDP_REDIS_CLUSTER" in done.stderr


def test_a_sharded_flush_fences_each_partition_by_its_own_watermark(
        cluster_client: Any) -> None:
    # Hand-made records for partitions 0 and 1; another worker moves partition 1's
    # watermark meanwhile (it took the partition over): partition 0's part commits,
    # partition 1's is refused, and partition 1 restarts from the other worker's watermark.
    import asyncio
    import time

    from ..aggregator.test_lost_and_regressions import SPEC, Rec, _acc, _value

    uid = uuid.uuid4().hex[:8]
    names = {"prefix": f"f{uid}:"}
    acc, log = _acc(cluster_client, names)
    assert acc.sharded
    keys = Keys(names["prefix"], sharded=True)
    now = int(time.time() * 1000)  # windows expire after their retention

    async def run() -> None:
        await acc.assign([0, 1])
        for p in (0, 1):
            await acc.process(p, [Rec(p, i, _value(10 * p + i), timestamp=now)
                                  for i in range(5)])
        assert await acc.flush()
        assert read_watermarks(cluster_client, "t", names["prefix"]) == {0: 4, 1: 4}
        for p in (0, 1):
            await acc.process(p, [Rec(p, i, _value(100 + 10 * p + i), timestamp=now)
                                  for i in range(5, 8)])
        cluster_client.hset(keys.shard_watermarks("t", 1), "1", 9)  # the other worker
        assert not await acc.flush()
    asyncio.run(run())
    assert read_watermarks(cluster_client, "t", names["prefix"]) == {0: 7, 1: 9}
    state = load_state(cluster_client, SPEC, prefix=names["prefix"])
    assert state.n == 3 * (5 + 5 + 3)  # partition 1's last three records were not added
    assert acc.stats.counted == state.n and acc.stats.conflicts == 1
    ingested = acc.metrics.registry.get_sample_value("ldp_reports_ingested_total",
                                                     {"collection": SPEC.id})
    assert ingested == state.n
    assert acc.positions() == {0: 8, 1: 10} and log.seeks[-1] == {0: 8, 1: 10}


def test_the_catalogue_readers_follow_a_registration_on_the_cluster(
        redis_cluster: RedisClusterNodes, cluster_client: Any) -> None:
    # the gateway's asyncio catalogue and the blocking one read {catalogue} keys
    import asyncio

    from ldpstream.catalogue import Catalogue, SyncCatalogue

    prefix = f"k{uuid.uuid4().hex[:8]}:"
    first, second = (CollectionSpec.from_dict(s) for s in SPECS)
    CollectionCatalogue(cluster_client, prefix).register(first)
    sync = SyncCatalogue(cluster_client, prefix)
    sync.load()
    assert set(sync.all()) == {first.id}

    async def run() -> set[str]:
        client = cluster_options(redis_cluster).connect_async("redis://")
        try:
            cat = Catalogue(client, prefix)
            await cat.load()
            assert await cat.find(first.id) == first and await cat.find(second.id) is None
            CollectionCatalogue(cluster_client, prefix).register(second)
            await cat.check(full=True)
            return {c for c in (first.id, second.id) if await cat.find(c) is not None}
        finally:
            await client.aclose()
    assert asyncio.run(run()) == {first.id, second.id}
    sync.check()
    assert set(sync.all()) == {first.id, second.id}
