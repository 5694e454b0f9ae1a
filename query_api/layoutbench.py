"""``ldpstream bench redis-layout``: the single-Redis layout and the sharded one (Redis
Cluster) side by side, in one run, on this machine.

Starts one Redis and a 3-primary Redis Cluster (:class:`ldpstream.dev.cluster.RedisClusterNodes`)
and times, on each, what a worker and the query API do with the state of one collection
(GRR, d = 64) counted from ``--partitions`` partitions:

* **flush**: a worker holding every partition flushes a 64-cell delta per partition and the
  watermarks — one script on one Redis, one script per partition on the cluster;
* **load_state**: the summed state (``ldpstream.storage.load_state``, sync);
* **API read**: what the query API reads on a cache miss (``Store.version`` then
  ``Store.state``, asyncio).

Medians over ``--rounds`` rounds, and the cluster-to-single ratio.  Client, servers and
the cluster's three primaries share the machine, so the ratio is what counts.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["add_bench_layout_parser", "run_layout"]


def _spec() -> Any:
    from ldpcore.collection import CollectionSpec

    return CollectionSpec.from_dict({
        "id": "bench-layout", "oracle": {"mechanism": "grr", "epsilon": 1.0},
        "domain": {"kind": "integers", "low": 0, "high": 63}, "min_reports": 1})


def _median_ms(fn: Any, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(times)


def _bench(client: Any, make_async: Any, partitions: int, rounds: int) -> dict[str, float]:
    from ldpstream.storage import FLUSH_SCRIPT, CollectionCatalogue, Keys, flush_args, load_state

    from .store import Store

    spec = _spec()
    prefix = "bench:"
    keys = Keys.for_client(client, prefix)
    CollectionCatalogue(client, prefix).register(spec)
    script = client.register_script(FLUSH_SCRIPT)
    rng = np.random.default_rng(3)
    now = time.time()
    start = int(now // spec.window_seconds) * spec.window_seconds
    expire = int((now + 86400) * 1000)
    wm = dict.fromkeys(range(partitions), -1)
    for p in range(partitions):  # the shard index a worker writes before its first flush
        if keys.sharded:
            client.sadd(keys.shards, f"t:{p}")
            client.sadd(keys.collection_shards(spec.id), f"t:{p}")

    def flush() -> None:
        deltas = {p: rng.integers(0, 20, 64) for p in range(partitions)}
        if keys.sharded:
            for p, counts in deltas.items():
                k, a = flush_args(keys, "t", {p: (wm[p], wm[p] + 10)},
                                  {(spec.id, start): (int(counts.sum()), counts, expire)},
                                  int(now * 1000), shard=p)
                assert script(keys=k, args=a)[0] == 1
        else:
            total = np.sum(list(deltas.values()), axis=0)
            k, a = flush_args(keys, "t", {p: (wm[p], wm[p] + 10) for p in deltas},
                              {(spec.id, start): (int(total.sum()), total, expire)},
                              int(now * 1000))
            assert script(keys=k, args=a)[0] == 1
        for p in wm:
            wm[p] += 10

    out = {"flush": _median_ms(flush, rounds)}
    out["load_state"] = _median_ms(lambda: load_state(client, spec, prefix=prefix), rounds)

    async def api_read() -> float:
        aclient = make_async()
        store = Store(aclient, prefix)
        times = []
        try:
            for _ in range(rounds):
                t0 = time.perf_counter()
                version = await store.version(spec, None, None)
                await store.state(spec, version)
                times.append(time.perf_counter() - t0)
        finally:
            await aclient.aclose()
        return 1e3 * statistics.median(times)
    out["api_read"] = asyncio.run(api_read())
    out["n"] = float(load_state(client, spec, prefix=prefix).n)
    return out


def run_layout(args: argparse.Namespace) -> int:
    from ldpstream.connections import RedisOptions
    from ldpstream.dev.cluster import RedisClusterNodes
    from ldpstream.dev.servers import start_redis

    work = Path(tempfile.mkdtemp(prefix="ldp-bench-layout-"))
    (work / "single").mkdir()
    single = start_redis(work / "single")
    nodes = RedisClusterNodes(work / "cluster").start()
    try:
        opts = RedisOptions.from_env({"LDP_REDIS_CLUSTER": nodes.addresses})
        results = {}
        for name, url, o in (("single", single.url, RedisOptions()),
                             ("cluster", "redis://", opts)):
            client = o.connect(url)
            try:
                results[name] = _bench(client, lambda o=o, url=url: o.connect_async(url),
                                       args.partitions, args.rounds)
            finally:
                client.close()
        assert results["single"]["n"] == results["cluster"]["n"]
        print(f"One collection (GRR d=64) from {args.partitions} partitions; median of "
              f"{args.rounds} rounds (ms); cluster = 3 primaries on this machine\n")
        print(f"{'operation':<44}{'single':>10}{'cluster':>10}{'ratio':>8}")
        what = {"flush": f"flush ({args.partitions} partitions, 64 cells each)",
                "load_state": "load_state (sum of the shards)",
                "api_read": "API cache miss (Store.version + Store.state)"}
        for key, label in what.items():
            s, c = results["single"][key], results["cluster"][key]
            print(f"{label:<44}{s:>10.2f}{c:>10.2f}{c / s:>8.2f}")
    finally:
        nodes.stop()
        single.stop()
    return 0


def add_bench_layout_parser(bsub: Any) -> None:
    p = bsub.add_parser("redis-layout", help="one Redis vs a 3-primary Redis Cluster: flush "
                                             "and read cost of the sharded layout")
    p.add_argument("--partitions", type=int, default=12)
    p.add_argument("--rounds", type=int, default=200)
    p.set_defaults(func=run_layout)
