"""``ldpstream bench api``: latency and throughput of the query API under concurrent clients.

Starts a Redis and the API (``ldpstream serve``, one uvicorn process) on free loopback
ports, writes two collection states through the aggregator's own flush script (an
OLH collection with d = 1024 and an HH collection with D = 2^16, n = 10^6 each),
then drives ``/frequencies`` (norm-sub, 95% intervals) and ``/range`` with C
concurrent keep-alive connections from a light asyncio HTTP client for a fixed
time.  Prints p50/p99 latency and requests/s, for cached answers (the state does
not change) and for the cost of a cache miss (each answer computed afresh).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["run_from_args"]

ROOT = Path(__file__).resolve().parents[1]


async def _exchange(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, host: str,
                    path: str) -> int:
    """One keep-alive GET: send it, read the whole response, return its status."""
    writer.write(f"GET {path} HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":")[1])
    await reader.readexactly(length)
    return int(head.split(b" ", 2)[1])


async def _client(host: str, port: int, paths: list[str], until: float,
                  lat: list[float], errors: list[int]) -> None:
    reader, writer = await asyncio.open_connection(host, port)
    i = 0
    try:
        while time.perf_counter() < until:
            path = paths[i % len(paths)]
            i += 1
            t0 = time.perf_counter()
            status = await _exchange(reader, writer, host, path)
            lat.append(time.perf_counter() - t0)
            if status != 200:
                errors.append(status)
    finally:
        writer.close()


async def _client_paced(host: str, port: int, paths: list[str], start: float, rate: float,
                        until: float, lat: list[float], errors: list[int]) -> None:
    """Open loop: requests at fixed times; latency from the *scheduled* time (no
    coordinated omission: a slow answer delays the next send and is charged for it)."""
    reader, writer = await asyncio.open_connection(host, port)
    k = 0
    try:
        while True:
            scheduled = start + k / rate
            if scheduled >= until:
                break
            delay = scheduled - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            path = paths[k % len(paths)]
            k += 1
            status = await _exchange(reader, writer, host, path)
            lat.append(time.perf_counter() - scheduled)
            if status != 200:
                errors.append(status)
    finally:
        writer.close()


async def _paced(port: int, paths: list[str], clients: int, total_rate: float,
                 seconds: float) -> tuple[np.ndarray, int, float]:
    lat: list[float] = []
    errors: list[int] = []
    t0 = time.perf_counter() + 0.2
    per = total_rate / clients
    await asyncio.gather(*(_client_paced("127.0.0.1", port, paths[i:] + paths[:i],
                                         t0 + i / total_rate, per, t0 + seconds, lat, errors)
                           for i in range(clients)))
    return np.array(lat), len(errors), seconds


async def _once(port: int, path: str) -> tuple[float, int]:
    """One request on a fresh connection: (seconds, status)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        t0 = time.perf_counter()
        status = await _exchange(reader, writer, "127.0.0.1", path)
        return time.perf_counter() - t0, status
    finally:
        writer.close()


async def _load(port: int, paths: list[str], clients: int, seconds: float
                ) -> tuple[np.ndarray, int, float]:
    lat: list[float] = []
    errors: list[int] = []
    t0 = time.perf_counter()
    until = t0 + seconds
    await asyncio.gather(*(_client("127.0.0.1", port, paths[i:] + paths[:i], until, lat,
                                   errors) for i in range(clients)))
    return np.array(lat), len(errors), time.perf_counter() - t0


def _fill(redis_url: str) -> None:
    import redis

    from ldpcore.collection import CollectionSpec
    from ldpstream.storage import FLUSH_SCRIPT, CollectionCatalog, Keys, flush_args

    client = redis.Redis.from_url(redis_url)
    reg = CollectionCatalog(client)
    script = client.register_script(FLUSH_SCRIPT)
    rng = np.random.default_rng(1)
    specs = [
        CollectionSpec.from_dict({"id": "bench-olh", "oracle": {"mechanism": "olh",
                                                                "epsilon": 1.0},
                                  "domain": {"kind": "integers", "low": 0, "high": 1023},
                                  "min_reports": 1}),
        CollectionSpec.from_dict({"id": "bench-hh", "oracle": {"mechanism": "hh",
                                                               "epsilon": 1.0},
                                  "domain": {"kind": "integers", "low": 0,
                                             "high": 2**16 - 1}, "min_reports": 1}),
    ]
    now = time.time()
    for p, spec in enumerate(specs):
        reg.register(spec)
        o = spec.oracle()
        d = spec.domain.size
        w = 1.0 / np.arange(1, d + 1) ** 1.2
        values = rng.choice(d, size=10**6, p=w / w.sum())
        state = o.aggregate(o.perturb(values, rng=rng))
        start = int(now // spec.window_seconds) * spec.window_seconds
        keys, args = flush_args(Keys(), "bench", {p: (-1, 0)},
                                {(spec.id, start): (state.n, state.counts,
                                                    int((now + 86400) * 1000))},
                                int(now * 1000))
        assert script(keys=keys, args=args)[0] == 1
    client.close()


def run_from_args(args: argparse.Namespace) -> int:
    from ldpstream.dev.servers import _die_with_parent, free_port, start_redis, wait_port

    work = Path(tempfile.mkdtemp(prefix="ldp-bench-api-"))
    redis_server = start_redis(work)
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("LDP_")}
    env.update({"LDP_REDIS_URL": redis_server.url, "LDP_API_PORT": str(port),
                "PYTHONPATH": str(ROOT)})
    api = subprocess.Popen([sys.executable, "-m", "ldpstream", "serve"], cwd=ROOT, env=env,
                           preexec_fn=_die_with_parent)
    try:
        _fill(redis_server.url)
        wait_port(port, 30, api)
        rng = np.random.default_rng(2)
        lows = rng.integers(0, 2**15, size=200)
        o, h = "/v1/collections/bench-olh", "/v1/collections/bench-hh"
        cases = [
            ("frequencies d=1024 default (auto)", [f"{o}/frequencies"]),
            ("subset default (auto), 20 sets", [f"{o}/subset?labels={i},{i + 7}"
                                                for i in range(20)]),
            ("heavy-hitters k=10", [f"{o}/heavy-hitters?k=10"]),
            ("range D=2^16 default (consistent), 200", [f"{h}/range?low={lo}&high={lo + 2**14}"
                                                        for lo in lows]),
            ("quantiles D=2^16", [f"{h}/quantiles?q=0.5&q=0.9"]),
            ("cdf D=2^16", [f"{h}/cdf"]),
            ("histogram D=2^16", [f"{h}/histogram"]),
        ]
        # The cold cost of each answer kind: the first request for a state version computes
        # the answer (a distinct confidence level makes every one a miss).
        print("Cold (uncached) cost per answer kind, median of 5 misses (ms):\n")
        for name, paths in cases:
            lat_ms = []
            for k in range(5):
                sep = "&" if "?" in paths[0] else "?"
                path = f"{paths[0]}{sep}confidence=0.9{k}1"
                secs, status = asyncio.run(_once(port, path))
                lat_ms.append(1e3 * secs if status == 200 else float("nan"))
            print(f"  {name:<44}{np.median(lat_ms):>10.1f}", flush=True)
        print(f"\nOpen loop: {args.clients} connections sending {args.rate:,.0f} requests/s in "
              f"total at fixed times, {args.seconds:.0f} s per case\n")
        print(f"{'case':<46}{'req/s':>10}{'p50 ms':>10}{'p99 ms':>10}{'errors':>8}")
        for name, paths in cases:
            for path in paths:  # fill the cache: every answer computed before the clock
                asyncio.run(_once(port, path))
            asyncio.run(_paced(port, paths, args.clients, args.rate, 2.0))  # and settle
            lat, errors, secs = asyncio.run(_paced(port, paths, args.clients, args.rate,
                                                   args.seconds))
            print(f"{name:<46}{lat.size / secs:>10,.0f}{1e3 * np.percentile(lat, 50):>10.2f}"
                  f"{1e3 * np.percentile(lat, 99):>10.2f}{errors:>8}", flush=True)
        print(f"\nClosed loop (maximum throughput): one uvicorn process, {args.clients} "
              "concurrent keep-alive clients, "
              f"{args.seconds:.0f} s per case (client and server share this machine)\n")
        print(f"{'case':<46}{'req/s':>10}{'p50 ms':>10}{'p99 ms':>10}{'errors':>8}")
        for name, paths in cases[:1] + cases[3:4]:
            asyncio.run(_load(port, paths, 4, 1.0))  # warm the cache and the JIT-less paths
            lat, errors, secs = asyncio.run(_load(port, paths, args.clients, args.seconds))
            print(f"{name:<46}{lat.size / secs:>10,.0f}{1e3 * np.percentile(lat, 50):>10.2f}"
                  f"{1e3 * np.percentile(lat, 99):>10.2f}{errors:>8}", flush=True)
        # Cache misses: each request computes the estimate afresh (distinct confidence).
        miss = [f"/v1/collections/bench-olh/frequencies?confidence=0.{k:04d}1"
                for k in range(1, 9999)]
        lat, errors, secs = asyncio.run(_load(port, miss, args.clients, args.seconds / 2))
        print(f"{'frequencies d=1024 auto (every one a miss)':<46}"
              f"{lat.size / secs:>10,.0f}{1e3 * np.percentile(lat, 50):>10.2f}"
              f"{1e3 * np.percentile(lat, 99):>10.2f}{errors:>8}")
        hh_miss = [f"/v1/collections/bench-hh/range?low={k}&high={k + 2**14}"
                   for k in range(1, 30000)]
        lat, errors, secs = asyncio.run(_load(port, hh_miss, args.clients, args.seconds / 2))
        print(f"{'range D=2^16 (every one a miss)':<46}"
              f"{lat.size / secs:>10,.0f}{1e3 * np.percentile(lat, 50):>10.2f}"
              f"{1e3 * np.percentile(lat, 99):>10.2f}{errors:>8}")
    finally:
        api.terminate()
        api.wait(10)
        redis_server.stop()
    return 0


def add_bench_api_parser(bsub: Any) -> None:
    p = bsub.add_parser("api", help="query API latency/throughput under concurrent clients")
    p.add_argument("--clients", type=int, default=50)
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--rate", type=float, default=1000.0,
                   help="offered requests/s of the open-loop cases")
    p.set_defaults(func=run_from_args)
