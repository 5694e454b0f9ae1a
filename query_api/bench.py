"""``ldpstream bench api``: cold and warm latency per answer kind, and the API under load.

Starts a Redis and the API (``query_api.server.main``, the function behind ``ldpstream
serve``, in a spawned process: one uvicorn process) on free loopback ports and writes
collection states through the aggregator's own flush script, every one at d = 1,024 and
n = 10^6 reports: OLH (frequencies, subsets, heavy hitters, series over 4 windows of
250,000), HH (range, quantiles, CDF, histogram), Square Wave with 1,024 bins
(mean, EMS frequencies and histogram), a set-valued ``ps`` collection (l = 8: top items,
item subsets) and a two-attribute ``multi`` collection (an attribute's frequencies).
Every request asks the route's default (``auto``, ``consistent``, EMS) with its interval.

1. **Cold and warm latency per answer kind**: *first* is the very first answer of the
   collection (the ``auto`` choice is made, EMS starts from the uniform); *cold* the
   median of 5 answers each right after a flush changed the state (a new state version:
   the state is read from Redis again and the answer computed, with a level of confidence
   never asked before; the API runs with ``LDP_MAX_STALE_MS=0`` here, so no previous
   version's answer or state can stand in for it); *warm* the median of 20 repeats of an
   answered request (a cache hit).
2. **Every request a miss, open loop**: ``--miss-rate`` requests/s (default 200) at fixed
   times over 20 collections (4 of each kind above), each request a query never asked
   before (a fresh confidence level), so every one is computed; latency is charged from
   the scheduled send time (no coordinated omission).  Meanwhile a thread flushes 1,000
   reports into each collection ``--flush-rate`` times a second (default 1: 20 flushes/s
   through the aggregator's flush script), so each collection's state version changes
   as under a live stream and its level-free parts (estimate, ``auto`` method, simulated
   errors) are computed again for every new version.  Target: p99 <= 250 ms.  The API
   runs with its default ``LDP_MAX_STALE_MS`` (``--max-stale-ms``): a request on a version
   whose parts are being computed may be answered from the previous state (``X-Cache:
   stale``, that state's n and version).  Printed: the server's CPU per request (from
   ``/proc``) and the ``X-Cache`` of the answers (``none``: ``/series``, which has none).
   ``--replicas N`` runs N API processes for this case, each on its own port with its own
   caches, as replicas behind a load balancer (connection i to replica i mod N; the CPU
   column sums them).
3. **Cached, closed loop**: ``--clients`` keep-alive clients as fast as they can on one
   cached answer (the maximum throughput of one process).

The load generator shares the machine with the server.  ``--baseline CHECKOUT`` runs a
second API from another checkout (its code, this environment: a ``python -m ldpstream
serve`` process there, the one way to run another checkout's code) against the same Redis
and prints both side by side.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["run_from_args"]

ROOT = Path(__file__).resolve().parents[1]
D = 1024
N = 10**6


CACHE: dict[str, int] = {}
"""``X-Cache`` of every answer received (hit, miss, stale, …), counted."""


async def _exchange(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, host: str,
                    path: str) -> int:
    """One keep-alive GET: send it, read the whole response, return its status."""
    writer.write(f"GET {path} HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    cache = "none"
    for line in head.split(b"\r\n"):
        low = line.lower()
        if low.startswith(b"content-length:"):
            length = int(line.split(b":")[1])
        elif low.startswith(b"x-cache:"):
            cache = line.split(b":")[1].strip().decode()
    CACHE[cache] = CACHE.get(cache, 0) + 1
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
            if scheduled >= until or k >= len(paths):
                break
            delay = scheduled - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            path = paths[k]
            k += 1
            try:  # a server that never answers: give up a minute after the case's end
                status = await asyncio.wait_for(_exchange(reader, writer, host, path),
                                                max(1.0, until + 60 - time.perf_counter()))
            except TimeoutError:
                lat.append(time.perf_counter() - scheduled)
                errors.append(0)
                break
            lat.append(time.perf_counter() - scheduled)
            if status != 200:
                errors.append(status)
    finally:
        writer.close()


async def _paced(ports: list[int], paths: list[str], clients: int, total_rate: float,
                 seconds: float) -> tuple[np.ndarray, int, float]:
    """Open loop over ``clients`` connections; connection i sends paths i, i+C, i+2C, …
    to ``ports[i % len(ports)]`` (replicas behind a connection-balancing proxy)."""
    lat: list[float] = []
    errors: list[int] = []
    t0 = time.perf_counter() + 0.2
    per = total_rate / clients
    await asyncio.gather(*(_client_paced("127.0.0.1", ports[i % len(ports)],
                                         paths[i::clients],
                                         t0 + i / total_rate, per, t0 + seconds, lat, errors)
                           for i in range(clients)))
    return np.array(lat), len(errors), seconds


ONCE_TIMEOUT_S = 60.0
"""A single timed request gives up after this long (shown as ``>60000``)."""


async def _once(port: int, path: str) -> tuple[float, int]:
    """One request on a fresh connection: (seconds, status); (inf, 0) after the timeout."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        t0 = time.perf_counter()
        status = await asyncio.wait_for(_exchange(reader, writer, "127.0.0.1", path),
                                        ONCE_TIMEOUT_S)
        return time.perf_counter() - t0, status
    except TimeoutError:
        return float("inf"), 0
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


# ---- collections and their states ---------------------------------------------------------
def _zipf(d: int, s: float = 1.2) -> np.ndarray:
    w = 1.0 / np.arange(1, d + 1) ** s
    out: np.ndarray = w / w.sum()
    return out


def _spec(cid: str, kind: str) -> Any:
    from ldpcore.collection import CollectionSpec

    ints: dict[str, Any] = {"kind": "integers", "low": 0, "high": D - 1}
    raws: dict[str, dict[str, Any]] = {
        "olh": {"oracle": {"mechanism": "olh", "epsilon": 1.0}, "domain": ints},
        "hh": {"oracle": {"mechanism": "hh", "epsilon": 1.0}, "domain": ints},
        "sw": {"oracle": {"mechanism": "sw", "epsilon": 1.0},
               "domain": {"kind": "interval", "low": 0.0, "high": 1.0, "bins": D}},
        "ps": {"oracle": {"mechanism": "ps", "epsilon": 2.0, "length": 8}, "domain": ints},
        "multi": {"oracle": {"mechanism": "multi", "epsilon": 2.0},
                  "domain": {"kind": "attributes", "attributes": [
                      {"name": "a", **ints},
                      {"name": "b", "kind": "categories", "labels": ["w", "x", "y", "z"]}]}},
    }
    return CollectionSpec.from_dict({"id": cid, **raws[kind], "window_seconds": 3600,
                                     "min_reports": 1})


def _state(spec: Any, kind: str, n: int, rng: np.random.Generator) -> Any:
    """A state of n reports of the collection (drawn through the channel, O(state))."""
    o = spec.oracle()
    if kind in ("olh", "hh"):
        return o.sample_state(_zipf(D), n, rng=rng)
    if kind == "sw":
        x = (np.arange(D) + 0.5) / D
        p = x * (1 - x) ** 4
        return o.sample_state(p / p.sum(), n, rng=rng)
    if kind == "ps":  # sets of at most l = 8 items, 4 on average: entry x has f_x / l
        from ldpcore import State

        f = np.minimum(1.0, 4.0 * _zipf(D, 1.1) * 3)
        f *= 4.0 / f.sum()
        entries = np.concatenate([f / 8, np.full(8, (1 - f.sum() / 8) / 8)])
        inner = o.inner.sample_state(entries, n, rng=rng)
        return State(o.fingerprint, n, inner.counts)
    a = rng.choice(D, size=n, p=_zipf(D))  # multi: attribute a (index-major), b uniform
    return o.aggregate(o.perturb(a * 4 + rng.integers(0, 4, n), rng=rng))


KIND_PATHS: dict[str, list[tuple[str, str]]] = {
    "olh": [("frequencies", "frequencies"), ("subset", "subset?labels=3,10"),
            ("heavy-hitters", "heavy-hitters?k=10"), ("series (4 windows)", "series?top=5")],
    "hh": [("range", "range?low=100&high=600"), ("quantiles", "quantiles?q=0.5&q=0.9"),
           ("cdf", "cdf"), ("histogram", "histogram")],
    "sw": [("mean (sw)", "mean"), ("frequencies (sw, EMS)", "frequencies"),
           ("histogram (sw, EMS)", "histogram")],
    "ps": [("top-items (ps, l=8)", "top-items?k=10"), ("subset (ps)", "subset?labels=1,2")],
    "multi": [("attribute frequencies (multi)", "attributes/a/frequencies")],
}
"""Per collection type: (answer kind, route with its query) at d = 1,024."""


class Writer:
    """Writes states into Redis with the aggregator's flush script."""

    def __init__(self, redis_url: str) -> None:
        import redis

        from ldpstream.storage import FLUSH_SCRIPT, CollectionCatalogue

        self.client = redis.Redis.from_url(redis_url)
        self.catalogue = CollectionCatalogue(self.client)
        self.script = self.client.register_script(FLUSH_SCRIPT)

    def put(self, spec: Any, start: int, state: Any) -> None:
        from ldpstream.storage import Keys, flush_args

        now = time.time()
        keys, args = flush_args(Keys(), f"bench-{uuid.uuid4().hex[:6]}", {0: (-1, 0)},
                                {(spec.id, start): (state.n, state.counts,
                                                    int((now + 86400) * 1000))},
                                int(now * 1000))
        assert self.script(keys=keys, args=args)[0] == 1


def _fill(writer: Writer, cid: str, kind: str, rng: np.random.Generator) -> Any:
    spec = _spec(cid, kind)
    writer.catalogue.register(spec)
    hour = int(time.time()) // 3600 * 3600
    parts = 4 if kind == "olh" else 1  # series: four windows
    for k in range(parts):
        writer.put(spec, hour - (parts - 1 - k) * 3600, _state(spec, kind, N // parts, rng))
    return spec


def _ms(x: float) -> str:
    return f"{1e3 * x:10.1f}"


def _cold_and_warm(ports: dict[str, int], writer: Writer, rng: np.random.Generator) -> None:
    names = list(ports)
    print(f"Cold and warm latency per answer kind at d = {D:,}, n = {N:,} (ms; one request "
          "at a time on a fresh connection)\n")
    width = 10
    if len(names) > 1:  # a group header per server
        print(f"{'':<34}" + "".join(f"{n:^{3 * width}}" for n in names))
    head = "".join(f"{c:>{width}}" for _ in names for c in ("first", "cold", "warm"))
    print(f"{'answer kind':<34}{head}")
    hour = int(time.time()) // 3600 * 3600
    for kind, routes in KIND_PATHS.items():
        spec = _fill(writer, f"kind-{kind}", kind, rng)
        for name, route in routes:
            base = f"/v1/collections/{spec.id}/{route}"
            sep = "&" if "?" in base else "?"
            first = {n: asyncio.run(_once(p, base)) for n, p in ports.items()}
            cold: dict[str, list[float]] = {n: [] for n in names}
            for k in range(5):
                writer.put(spec, hour, _state(spec, kind, 1000, rng))  # a flush: new version
                time.sleep(0.12)  # past LDP_VERSION_TTL_MS
                for n, p in ports.items():
                    if k and math.isinf(cold[n][-1]):  # timed out once: do not wait again
                        cold[n].append(float("inf"))
                        continue
                    secs, status = asyncio.run(_once(p, f"{base}{sep}confidence=0.9{k}7"))
                    cold[n].append(secs if status in (200, 0) else float("nan"))
            cells = []
            for n, p in ports.items():
                warm = [asyncio.run(_once(p, f"{base}{sep}confidence=0.947"))[0]
                        for _ in range(1 if math.isinf(cold[n][-1]) else 20)]
                cells += [_cell(first[n][0], width), _cell(float(np.median(cold[n])), width),
                          _cell(float(np.median(warm)), width)]
            bad = {n: f[1] for n, f in first.items() if f[1] != 200}
            print(f"{name:<34}{''.join(cells)}{f'  (status {bad})' if bad else ''}",
                  flush=True)


def _cell(seconds: float, width: int) -> str:
    text = f">{1e3 * ONCE_TIMEOUT_S:.0f}" if math.isinf(seconds) else f"{1e3 * seconds:.1f}"
    return f"{text:>{width}}"


def _miss_paths(specs: list[tuple[Any, str]], count: int) -> list[str]:
    """``count`` requests over the collections and their answer kinds, each never asked."""
    out = []
    kinds = {cid: KIND_PATHS[kind] for cid, kind in ((s.id, k) for s, k in specs)}
    for i in range(count):
        spec, _ = specs[i % len(specs)]
        routes = kinds[spec.id]
        route = routes[(i // len(specs)) % len(routes)][1]
        sep = "&" if "?" in route else "?"
        out.append(f"/v1/collections/{spec.id}/{route}{sep}confidence=0.{900000 + i}")
    return out


class Flusher:
    """Flushes into every collection at ``rate`` per collection per second, in a thread:
    each flush adds a state of :data:`FLUSH_REPORTS` reports to the current window, as the
    aggregator does under a live stream, so the state version of every collection changes
    that often and no answer of an older version may be served (``LDP_MAX_STALE_MS`` aside:
    every request here is a query never asked, which has no older answer either)."""

    def __init__(self, writer: Writer, specs: list[tuple[Any, str]], rate: float,
                 rng: np.random.Generator) -> None:
        self.writer, self.specs, self.rate = writer, specs, rate
        # A few distinct deltas per collection, drawn before the run (cheap to send).
        self.deltas = {s.id: [_state(s, kind, FLUSH_REPORTS, rng) for _ in range(4)]
                       for s, kind in specs}
        self.done = 0
        self.late = 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, t0: float, seconds: float) -> None:
        def run() -> None:
            hour = int(time.time()) // 3600 * 3600
            step = 1.0 / (self.rate * len(self.specs))  # staggered over the collections
            k = 0
            while not self._stop.is_set():
                due = t0 + k * step
                if due >= t0 + seconds:
                    return
                delay = due - time.perf_counter()
                if delay > 0 and self._stop.wait(delay):
                    return
                self.late = max(self.late, time.perf_counter() - due)
                spec, _ = self.specs[k % len(self.specs)]
                deltas = self.deltas[spec.id]
                self.writer.put(spec, hour, deltas[(k // len(self.specs)) % len(deltas)])
                self.done += 1
                k += 1

        self._thread = threading.Thread(target=run, name="bench-flusher", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(30)


FLUSH_REPORTS = 1000
"""Reports per flush in the every-request-a-miss case (n stays near 10^6: a kept ``auto``
choice stays valid, as between nearby flushes of a live collection)."""


def _every_miss(servers: dict[str, Replicas], writer: Writer, rng: np.random.Generator,
                rate: float, seconds: float, clients: int, flush_rate: float) -> None:
    kinds = list(KIND_PATHS)
    specs = []
    for i in range(20):
        kind = kinds[i % len(kinds)]
        specs.append((_fill(writer, f"load-{i}", kind, rng), kind))
    paths = _miss_paths(specs, int(rate * seconds))
    flushing = (f"; a flush into each collection {flush_rate:g} times a second, so every "
                "collection's state version changes that often" if flush_rate > 0 else "")
    print(f"\nEvery request a miss, open loop: {rate:,.0f} requests/s at fixed times over "
          f"{len(specs)} collections ({clients} connections, {seconds:.0f} s; each request "
          f"a query never asked before{flushing})\n")
    print(f"{'server':<12}{'offered req/s':>14}{'served':>10}{'p50 ms':>10}{'p90 ms':>10}"
          f"{'p99 ms':>10}{'max ms':>10}{'errors':>8}{'flushes':>9}{'CPU ms/req':>11}"
          "  X-Cache")
    for name, server in servers.items():
        for spec, kind in specs:  # each collection answered once: its auto choice is made
            for _, route in KIND_PATHS[kind]:
                for port in server.ports:
                    asyncio.run(_once(port, f"/v1/collections/{spec.id}/{route}"))
        CACHE.clear()
        flusher = Flusher(writer, specs, flush_rate, rng) if flush_rate > 0 else None
        if flusher is not None:
            flusher.start(time.perf_counter() + 0.2, seconds)
        cpu0 = server.cpu_seconds()
        try:
            lat, errors, secs = asyncio.run(_paced(server.ports, paths, clients, rate,
                                                   seconds))
        finally:
            if flusher is not None:
                flusher.stop()
        label = name if len(server.ports) == 1 else f"{name} x{len(server.ports)}"
        print(f"{label:<12}{rate:>14,.0f}{lat.size / secs:>10,.0f}"
              + "".join(f"{1e3 * np.percentile(lat, q):>10.1f}" for q in (50, 90, 99))
              + f"{1e3 * lat.max():>10.1f}{errors:>8}"
              + f"{flusher.done if flusher is not None else 0:>9}"
              + f"{1e3 * (server.cpu_seconds() - cpu0) / max(1, lat.size):>11.2f}"
              + "  " + ", ".join(f"{k} {v}" for k, v in sorted(CACHE.items())), flush=True)


def _cached(ports: dict[str, int], clients: int, seconds: float) -> None:
    print(f"\nCached, closed loop: {clients} keep-alive clients on one cached answer, "
          f"{seconds:.0f} s\n")
    print(f"{'case':<46}{'req/s':>10}{'p50 ms':>10}{'p99 ms':>10}{'errors':>8}")
    for server, port in ports.items():
        for name, path in (("frequencies (olh, auto)", "/v1/collections/kind-olh/frequencies"),
                           ("cdf (hh)", "/v1/collections/kind-hh/cdf")):
            asyncio.run(_load(port, [path], 4, 1.0))
            lat, errors, secs = asyncio.run(_load(port, [path], clients, seconds))
            label = f"{name} [{server}]" if len(ports) > 1 else name
            print(f"{label:<46}{lat.size / secs:>10,.0f}"
                  f"{1e3 * np.percentile(lat, 50):>10.2f}"
                  f"{1e3 * np.percentile(lat, 99):>10.2f}{errors:>8}", flush=True)


def _serve_in_child(env: dict[str, str]) -> None:
    """A spawned child: the API of this checkout, as ``ldpstream serve`` runs it."""
    from ldpstream.dev.servers import _die_with_parent

    _die_with_parent()
    os.environ.clear()
    os.environ.update(env)
    from .server import main

    main()


class ApiServer:
    """One API process on a free port: this checkout's ``query_api.server.main`` in a
    spawned :class:`multiprocessing.Process`, or another checkout's ``ldpstream serve``
    (its code: a process of its own interpreter path)."""

    def __init__(self, root: Path, redis_url: str, settings: dict[str, str]) -> None:
        from ldpstream.dev.servers import _die_with_parent, free_port

        self.port = free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith("LDP_")}
        env.update({"LDP_REDIS_URL": redis_url, "LDP_API_PORT": str(self.port), **settings})
        self._child: Any = None
        self._popen: subprocess.Popen[bytes] | None = None
        if root == ROOT:
            import multiprocessing

            self._child = multiprocessing.get_context("spawn").Process(
                target=_serve_in_child, args=(env,), name="ldp-bench-api", daemon=True)
            self._child.start()
        else:
            env["PYTHONPATH"] = str(root)
            self._popen = subprocess.Popen([sys.executable, "-m", "ldpstream", "serve"],
                                           cwd=root, env=env, preexec_fn=_die_with_parent)

    @property
    def pid(self) -> int:
        return int(self._child.pid if self._child is not None else self._popen.pid)  # type: ignore[union-attr]

    def wait(self) -> None:
        from ldpstream.dev.servers import ServerError, wait_port

        if self._popen is not None:
            wait_port(self.port, 30, self._popen)
            return
        deadline = time.monotonic() + 30
        while True:
            try:
                wait_port(self.port, 0.5)
                return
            except ServerError:
                if not self._child.is_alive() or time.monotonic() > deadline:
                    raise ServerError(f"the API did not listen on port {self.port} "
                                      f"(exit code {self._child.exitcode})") from None

    def cpu_seconds(self) -> float:
        """User + system CPU the process has used (``/proc``; 0 where there is none)."""
        try:
            fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return 0.0
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        if self._popen is not None:
            self._popen.terminate()
            try:
                self._popen.wait(10)
            except subprocess.TimeoutExpired:  # a computation that does not end
                self._popen.kill()
                self._popen.wait(10)
            return
        self._child.terminate()
        self._child.join(10)
        if self._child.is_alive():
            self._child.kill()
            self._child.join(10)


class Replicas:
    """``count`` API processes of one checkout, each on its own port (as replicas behind a
    load balancer: own caches, own metrics); ``port`` is the first one's."""

    def __init__(self, root: Path, redis_url: str, settings: dict[str, str],
                 count: int) -> None:
        self.servers = [ApiServer(root, redis_url, settings) for _ in range(count)]
        self.ports = [s.port for s in self.servers]
        self.port = self.ports[0]

    def wait(self) -> None:
        for server in self.servers:
            server.wait()

    def cpu_seconds(self) -> float:
        """User + system CPU of all the replicas."""
        return sum(server.cpu_seconds() for server in self.servers)

    def stop(self) -> None:
        for server in self.servers:
            server.stop()


def run_from_args(args: argparse.Namespace) -> int:
    from ldpstream.dev.servers import start_redis

    work = Path(tempfile.mkdtemp(prefix="ldp-bench-api-"))
    redis_server = start_redis(work)
    roots = {"this": ROOT}
    if args.baseline is not None:  # another checkout's API, same Redis, side by side
        roots["baseline"] = Path(args.baseline).resolve()
    servers: dict[str, Replicas] = {}

    def start(settings: dict[str, str], replicas: int = 1) -> dict[str, Replicas]:
        for name, root in roots.items():
            servers[name] = Replicas(root, redis_server.url, settings, replicas)
        for server in servers.values():
            server.wait()
        return dict(servers)

    def stop() -> None:
        for server in servers.values():
            server.stop()
        servers.clear()

    writer = Writer(redis_server.url)
    rng = np.random.default_rng(1)
    try:
        if not args.skip_kinds:
            # Cold means computed: no previous version's answer may stand in for it.
            running = start({"LDP_MAX_STALE_MS": "0"})
            _cold_and_warm({n: s.port for n, s in running.items()}, writer, rng)
            stop()  # fresh processes: a timed-out answer may still hold a server's thread
        stale = {} if args.max_stale_ms is None else {"LDP_MAX_STALE_MS": str(args.max_stale_ms)}
        running = start(stale, args.replicas)
        _every_miss(running, writer, rng, args.miss_rate, args.seconds, args.clients,
                    args.flush_rate)
        if not args.skip_kinds:
            _cached({n: s.port for n, s in running.items()}, args.clients, args.seconds / 2)
    finally:
        writer.client.close()
        stop()
        redis_server.stop()
    return 0


def _number(p: argparse.ArgumentParser, flag: str, default: float, what: str,
            note: str = "") -> None:
    """A numeric option whose help ends with its default (written once, here)."""
    p.add_argument(flag, type=type(default), default=default,
                   help=f"{what} (default {default:g}{note})")


def add_bench_api_parser(bsub: Any) -> None:
    p = bsub.add_parser("api", help="query API: cold/warm latency per answer kind, every "
                                    "request a miss at a fixed rate, cached throughput")
    _number(p, "--clients", 50, "connections")
    _number(p, "--seconds", 20.0, "length of the every-request-a-miss case")
    _number(p, "--miss-rate", 200.0, "requests/s of the every-request-a-miss case")
    _number(p, "--flush-rate", 1.0, "flushes per collection per second during the "
            "every-request-a-miss case, each a new state version", "; 0: states unchanged")
    p.add_argument("--max-stale-ms", type=int, default=None, metavar="MS",
                   help="LDP_MAX_STALE_MS of the API in the every-request-a-miss case "
                        "(default: the API's default; the cold/warm table always runs with 0)")
    p.add_argument("--replicas", type=int, default=1, metavar="N",
                   help="API processes in the every-request-a-miss case, each on its own port "
                        "with its own caches (replicas behind a load balancer); connection i "
                        "goes to replica i mod N, the CPU column sums them (default 1)")
    p.add_argument("--skip-kinds", action="store_true",
                   help="only the every-request-a-miss case")
    p.add_argument("--baseline", metavar="CHECKOUT",
                   help="also run the API of another checkout (e.g. a `git worktree` of "
                        "main) against the same states, side by side")
    p.set_defaults(func=run_from_args)
