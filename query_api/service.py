"""What every route shares: the store, the caches, the estimation pools, the metrics and
the settings.

:meth:`Service.answer` is the one way an estimate is served: read the state
*version* (a cheap Redis round trip, itself cached for ``LDP_VERSION_TTL_MS``),
return the cached encoded answer for that version if there is one, else read the
state, compute, encode and cache.  Equal versions mean equal states (see
:mod:`query_api.store`), so a cached answer is never stale by more than the TTL.

* **Caches bounded in bytes** (:mod:`query_api.cache`): encoded answers
  (``LDP_ANSWER_CACHE_MB``) and summed states (``LDP_STATE_CACHE_MB``), each an LRU
  whose use is the ``ldp_api_cache_bytes{cache}`` gauge.  The state cache also keeps
  what the answers of one state share whatever their level or k (estimate, ``auto``
  method, simulated errors, EMS reconstruction; :data:`query_api.parts.SHARED`),
  keyed by the state's content: a miss for a new ``confidence`` costs only its interval
  and its JSON.
* **A pool per answer kind**: answers are computed off the event loop on a thread
  pool of ``LDP_ESTIMATE_THREADS`` threads *per answer kind* (frequencies, subset,
  series, top-items, …), so a slow kind — a first ``auto`` choice, a large CDF —
  never holds up the others.
* **Kept ``auto`` choices** (:mod:`query_api.choices`), made again in the background
  on their own thread.
* **Misses under a live stream**: a version's state is read from Redis once however many
  requests miss on it at once; a new version is answered from the previous version's
  state for at most ``LDP_MAX_STALE_MS`` after that one was last read as current (status
  ``stale``; the answer's ``state_version``, ``n``, ``n_effective`` and ``as_of`` are that
  state's) while the new one's level-free parts are computed in the background, one
  computation per (collection, window, query kind) at a time.
* **Every answer states** ``n`` (reports summed) and ``n_effective`` (the sample size
  behind its interval; docs/longitudinal.md).  A time range that holds no report is
  answered (n = 0, the route's empty body, ``reason``), not refused.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import orjson

import ldpcore
from ldpcore.collection import CollectionSpec
from ldpstream.catalogue import CatalogueUnavailable

from .cache import ByteLRU, size_of_answer, size_of_state
from .choices import Choices
from .config import ApiSettings
from .errors import NotEnoughReports, Unavailable, unknown_collection
from .estimates import EncodedRows
from .fleet import FleetView
from .metrics import ApiMetrics
from .parts import SHARED, STATE_KEY
from .store import StateVersion, Store

__all__ = ["Service", "Compute", "lane_of", "encode"]

Compute = Callable[[Any, ldpcore.State, float], dict[str, Any]]
"""Turns (oracle, state, effective sample size) into the JSON-able body of an answer."""

_ORACLES = 256
"""Estimation oracles kept (one per collection fingerprint; an LRU)."""


def lane_of(query: str) -> str:
    """The answer kind a query is computed under: ``series:subset`` → ``series``,
    ``attributes/os/mean`` → ``attributes``, ``frequencies`` → ``frequencies``."""
    return query.split(":", 1)[0].split("/", 1)[0]


def encode(body: Mapping[str, Any]) -> bytes:
    """Compact JSON of an answer: orjson (a C encoder: a 1,024-row answer in 0.4 ms, not
    7), ``json`` for a value orjson does not take (an int past 64 bits, a numpy scalar).
    Rows given as their JSON text (:class:`~query_api.estimates.EncodedRows`) are
    spliced in as is."""
    try:
        out: bytes = orjson.dumps(body, default=_spliced)
        return out
    except TypeError:
        return json.dumps(body, separators=(",", ":"), allow_nan=False,
                          default=_decoded).encode()


def _spliced(value: Any) -> Any:
    if isinstance(value, EncodedRows):
        return orjson.Fragment(value.text)
    raise TypeError(f"{type(value).__name__} is not JSON")


def _decoded(value: Any) -> Any:
    if isinstance(value, EncodedRows):
        return value.rows()
    raise TypeError(f"{type(value).__name__} is not JSON")


@dataclass
class _Ready:
    """A state version whose answers were computed, and when it was last known current
    (``time.monotonic()``: when a request last read it as the current version): what an
    answer may describe while a newer version's level-free parts are computed, for at most
    ``LDP_MAX_STALE_MS`` after that."""

    at: float
    version: StateVersion
    state: ldpcore.State


_READY = 4096
"""(collection, window) pairs whose newest computed state is kept (an LRU)."""

_HEADS = 4096
"""Answer heads kept (one per version and window; an LRU)."""


class Service:
    """The store, caches, pools, metrics and settings behind every route (one per app)."""

    def __init__(self, settings: ApiSettings, store: Store, metrics: ApiMetrics) -> None:
        self.settings = settings
        self.store = store
        self.metrics = metrics
        self.cache = self._byte_cache("answers", settings.answer_cache_bytes, size_of_answer)
        self.states = self._byte_cache("states", settings.state_cache_bytes, size_of_state)
        # Versions live for LDP_VERSION_TTL_MS; a long retention makes one hold thousands
        # of windows, so they are bounded in bytes too (an eighth of the states' budget).
        self._versions = self._byte_cache(
            "versions", max(1 << 20, settings.state_cache_bytes // 8),
            lambda v: 200 + 64 * len(v[1].windows))
        self._inflight: dict[Any, asyncio.Future[bytes]] = {}
        # One Redis read per state version, however many requests need it at once.
        self._reading: dict[Any, asyncio.Future[ldpcore.State]] = {}
        # Per (collection, window): the newest state whose answers were computed, and one
        # background computation per query on a newer version (see ``answer``).
        self._ready: OrderedDict[Any, _Ready] = OrderedDict()
        self._refreshing: dict[Any, asyncio.Future[bytes]] = {}
        self._pools: dict[str, ThreadPoolExecutor] = {}
        self._chooser = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ldp-choose")
        self.choices = Choices(factor=settings.auto_refresh_factor,
                               max_age_s=settings.auto_refresh_s, executor=self._chooser)
        self._oracles: OrderedDict[str, Any] = OrderedDict()
        self._heads: OrderedDict[Any, dict[str, Any]] = OrderedDict()
        self.fleet = FleetView(store)

    def _byte_cache(self, name: str, limit: int, size: Callable[[Any], int]) -> ByteLRU:
        m = self.metrics
        m.cache_limit_bytes.labels(name).set(limit)
        # The labelled series, looked up once: a cache changes on every miss.
        n_entries, n_bytes = m.cache_entries.labels(name), m.cache_bytes.labels(name)
        n_evicted = m.cache_evictions.labels(name)

        def changed(entries: int, used: int, evicted: int) -> None:
            n_entries.set(entries)
            n_bytes.set(used)
            if evicted:
                n_evicted.inc(evicted)

        changed(0, 0, 0)
        return ByteLRU(limit, getsizeof=size, on_change=changed)

    async def call(self, aw: Awaitable[Any]) -> Any:
        """Await a Redis call; an unreachable Redis becomes :class:`Unavailable` (503)."""
        try:
            out = await aw
        except (ConnectionError, OSError, TimeoutError) as exc:
            self.metrics.redis_up.set(0)
            raise Unavailable(f"Redis is unreachable: {exc}") from None
        except CatalogueUnavailable as exc:  # the spec snapshot could not be checked
            self.metrics.redis_up.set(0)
            raise Unavailable(str(exc)) from None
        except Exception as exc:  # redis-py's own connection errors
            if type(exc).__module__.startswith("redis"):
                self.metrics.redis_up.set(0)
                raise Unavailable(f"Redis error: {exc}") from None
            raise
        self.metrics.redis_up.set(1)
        return out

    async def spec(self, cid: str) -> CollectionSpec:
        """The collection, or :class:`NotFound` naming how to list them (from the store's
        snapshot of the catalogue: no Redis round trip on most requests)."""
        spec: CollectionSpec | None = await self.call(self.store.get(cid))
        if spec is None:
            raise unknown_collection(cid)
        return spec

    def oracle(self, spec: CollectionSpec) -> Any:
        """The collection's estimation oracle (the composed channel for two-level
        memoization: same state, composed probabilities), built once per fingerprint."""
        o = self._oracles.get(spec.fingerprint)
        if o is None:
            o = self._oracles[spec.fingerprint] = spec.estimation_oracle()
            while len(self._oracles) > _ORACLES:
                self._oracles.popitem(last=False)
        else:
            self._oracles.move_to_end(spec.fingerprint)
        return o

    async def version(self, spec: CollectionSpec, since: float | None,
                      until: float | None) -> StateVersion:
        """The state version, re-read at most every ``version_ttl_s`` per query window.

        Under load this turns one Redis round trip per request into one per interval;
        answers are at most that much staler than Redis (flushes come every ~200 ms).
        An empty interval (since not before until) holds no window: no round trip.
        """
        if since is not None and until is not None and since >= until:
            return StateVersion((), 0)
        key = (spec.id, spec.fingerprint, since, until)
        now = time.monotonic()
        hit = self._versions.get(key)
        if hit is not None and now - hit[0] < self.settings.version_ttl_s:
            return hit[1]  # type: ignore[no-any-return]
        version: StateVersion = await self.call(self.store.version(spec, since, until))
        self._versions.put(key, (now, version))
        return version

    async def state(self, spec: CollectionSpec, version: StateVersion, since: float | None,
                    until: float | None) -> ldpcore.State:
        """The summed state of ``version``'s windows, read from Redis once per version
        (concurrent requests for a version being read wait for that one read)."""
        skey = (spec.id, spec.fingerprint, version.tag, since, until)
        state: ldpcore.State | None = self.states.get(skey)
        if state is not None:
            return state
        fut = self._reading.get(skey)
        if fut is None:
            fut = asyncio.ensure_future(self._summed(spec, version))
            self._reading[skey] = fut

            def read(f: asyncio.Future[ldpcore.State]) -> None:
                if not f.cancelled() and f.exception() is None:
                    self.states.put(skey, f.result())
                self._reading.pop(skey, None)

            fut.add_done_callback(read)
        out: ldpcore.State = await asyncio.shield(fut)
        return out

    async def _summed(self, spec: CollectionSpec, version: StateVersion) -> ldpcore.State:
        """The sum of the version's window states, each kept under (window, n, last flush):
        a flush changes one window, so only that one is read again (an OLH collection's
        4 windows: one read of 4), and a series' windows are the range's windows."""
        if not version.windows or len(version.flushed) != len(version.windows):
            return await self.call(self.store.state(spec, version))  # type: ignore[no-any-return]
        keys = [("window", spec.id, spec.fingerprint, start, n, t)
                for (start, n), t in zip(version.windows, version.flushed, strict=True)]
        parts: list[ldpcore.State | None] = [self.states.get(k) for k in keys]
        missing = [i for i, part in enumerate(parts) if part is None]
        if missing:
            fresh = await self.call(self.store.window_states(
                spec, [version.windows[i][0] for i in missing]))
            for i, part in zip(missing, fresh, strict=True):
                parts[i] = part
                self.states.put(keys[i], part)
        total = parts[0]
        assert total is not None
        for part in parts[1:]:
            assert part is not None
            total = total + part
        return total

    def effective_n(self, spec: CollectionSpec, version: StateVersion, n: int) -> float:
        """n_effective of ``n`` reports in ``version``'s windows (ldpcore.longitudinal):
        memoized reports of one device in several windows are not independent."""
        if n <= 0:
            return 0.0
        n_eff = float(spec.effective_sample_size([c for _, c in version.windows] or [n]))
        return min(float(n), max(1.0, n_eff))

    def head(self, spec: CollectionSpec, version: StateVersion, n: int,
             since: float | None, until: float | None) -> dict[str, Any]:
        """What every answer states besides its estimate (made once per version: its
        ``n_effective`` costs a pass over the windows)."""
        key = (spec.id, spec.fingerprint, version.tag, n, since, until)
        head = self._heads.get(key)
        if head is None:
            head = self._heads[key] = self._head(spec, version, n, since, until)
            while len(self._heads) > _HEADS:
                self._heads.popitem(last=False)
        return dict(head)

    def _head(self, spec: CollectionSpec, version: StateVersion, n: int,
              since: float | None, until: float | None) -> dict[str, Any]:
        head: dict[str, Any] = {
            "collection": spec.id, "fingerprint": spec.fingerprint,
            "mechanism": spec.oracle_spec["mechanism"],
            "epsilon": spec.oracle_spec["epsilon"], "n": n,
            "n_effective": round(self.effective_n(spec, version, n), 1),
            "memoization": spec.memoization, "windows": len(version.windows),
            "since": since, "until": until,
            "as_of": (datetime.fromtimestamp(version.last_flush_ms / 1000, UTC).isoformat()
                      if version.last_flush_ms else None),
            "state_version": version.tag,
        }
        if version.lost_records:  # records deleted from Kafka before they were counted
            head["lost_records"] = version.lost_records
        return head

    def empty_answer(self, spec: CollectionSpec, version: StateVersion, since: float | None,
                     until: float | None, empty: Mapping[str, Any]) -> bytes:
        """The answer of a range without reports: n = 0, the route's empty body, why."""
        reason = ("empty time interval: since is not before until"
                  if since is not None and until is not None and since >= until
                  else "no reports in [since, until)")
        return encode({**self.head(spec, version, 0, since, until), **empty,
                        "reason": reason})

    async def answer(self, spec: CollectionSpec, query: str, params: tuple[Any, ...],
                     since: float | None, until: float | None, compute: Compute,
                     *, version: StateVersion | None = None, allow_stale: bool = True,
                     empty: Mapping[str, Any] | None = None) -> tuple[bytes, str, str]:
        """The encoded JSON answer of ``compute(oracle, state, n_eff)`` for the current version.

        Returns (body, cache status, version tag); the status is ``hit`` (this version's
        answer was cached), ``miss`` (computed now), ``stale`` or ``empty``.  While the
        state keeps changing (a flush every ~200 ms under ingest) an answer that costs more
        than that would never be cached in time, and every new version's level-free parts
        (estimate, ``auto`` method, simulated errors, EMS) cost tens of milliseconds.  So,
        for at most ``LDP_MAX_STALE_MS`` after the previous version was last known current,
        a new version is answered from that previous one at once — its answer to this very
        query if it was asked, else this query computed on its state (cheap: its parts are
        kept) — and the current one is computed in the background, one computation per
        (collection, window, query kind) at a time.  A stale answer describes the state it
        was computed on: its ``state_version``, ``n``, ``n_effective`` and ``as_of`` are that
        state's (and ``X-State-Version`` says the same).  One computation per
        (version, query), however many requests wait for it, on the pool of the query's
        answer kind.

        A range that holds no report is answered with ``empty`` (n = 0) when given, else
        refused like any range below the collection's minimum (409, have/need).
        """
        if version is None:
            version = await self.version(spec, since, until)
        if version.n == 0 and empty is not None:
            nothing = self.empty_answer(spec, version, since, until, empty)
            return await self.stated(spec, nothing), "empty", version.tag
        if version.n < spec.min_reports:
            raise NotEnoughReports(version.n, spec.min_reports)
        key = (spec.id, spec.fingerprint, version.tag, query, params, since, until)
        hit = self.cache.get(key)
        if hit is not None:
            self.metrics.cache_hits.inc()
            return await self.stated(spec, hit), "hit", version.tag
        qkey = ("latest", spec.id, spec.fingerprint, query, params, since, until)
        latest = self.cache.get(qkey)
        if (allow_stale and latest is not None
                and time.monotonic() - latest[0] <= self.settings.max_stale_s):
            self.metrics.cache_hits.inc()
            self._start(key, qkey, spec, version, since, until, compute)
            return await self.stated(spec, latest[1]), "stale", latest[2]
        wkey = (spec.id, spec.fingerprint, since, until)
        ready = self._ready.get(wkey) if allow_stale else None
        now = time.monotonic()
        if ready is not None and ready.version.tag == version.tag:
            ready.at = now  # still the current version
        elif ready is not None and now - ready.at <= self.settings.max_stale_s:
            self.metrics.cache_misses.inc()
            self._refresh((wkey, query), key, qkey, spec, version, since,
                          until, compute)
            old = (spec.id, spec.fingerprint, ready.version.tag, query, params, since, until)
            body: bytes | None = self.cache.get(old)
            if body is None:
                body = await asyncio.shield(self._start(old, None, spec, ready.version, since,
                                                        until, compute, state=ready.state))
            return await self.stated(spec, body), "stale", ready.version.tag
        self.metrics.cache_misses.inc()
        body = await asyncio.shield(
            self._start(key, qkey, spec, version, since, until, compute))
        return await self.stated(spec, body), "miss", version.tag

    async def stated(self, spec: CollectionSpec, body: bytes) -> bytes:
        """An answer with the fleet's privacy budget stated (:mod:`query_api.fleet`)."""
        out: bytes = await self.call(self.fleet.stated(spec, body))
        return out

    def _refresh(self, rkey: Any, key: Any, qkey: Any, spec: CollectionSpec,
                 version: StateVersion, since: float | None, until: float | None,
                 compute: Compute) -> None:
        """The current version's answer to this query, computed in the background unless
        one of this (collection, window, query kind) is computing already: under a live
        stream a version that comes while the previous one is computed waits for it, so
        each kind computes at most one version's parts at a time."""
        if rkey in self._refreshing:
            return
        fut = self._start(key, qkey, spec, version, since, until, compute)
        self._refreshing[rkey] = fut
        fut.add_done_callback(lambda f: self._refreshing.pop(rkey, None))

    def _start(self, key: Any, qkey: Any, spec: CollectionSpec, version: StateVersion,
               since: float | None, until: float | None, compute: Compute, *,
               state: ldpcore.State | None = None) -> asyncio.Future[bytes]:
        """The (single) computation of ``key``, started if none is running."""
        fut = self._inflight.get(key)
        if fut is None:
            fut = asyncio.ensure_future(self._compute(key, qkey, spec, version, since, until,
                                                      compute, state))
            self._inflight[key] = fut
            fut.add_done_callback(lambda f: (self._inflight.pop(key, None),
                                             f.cancelled() or f.exception()))
        return fut

    def _pool(self, lane: str) -> ThreadPoolExecutor:
        pool = self._pools.get(lane)
        if pool is None:
            pool = self._pools[lane] = ThreadPoolExecutor(
                max_workers=self.settings.estimate_threads,
                thread_name_prefix=f"ldp-estimate-{lane}")
        return pool

    def _computed(self, wkey: Any, at: float, version: StateVersion,
                  state: ldpcore.State) -> None:
        """``version`` (known current at ``at``) has answers: the newest such state of its
        (collection, window) is what a newer version may be answered from meanwhile."""
        ready = self._ready.get(wkey)
        if ready is None or ready.version.last_flush_ms <= version.last_flush_ms:
            self._ready[wkey] = _Ready(at, version, state)
            self._ready.move_to_end(wkey)
            while len(self._ready) > _READY:
                self._ready.popitem(last=False)

    async def _compute(self, key: Any, qkey: Any, spec: CollectionSpec, version: StateVersion,
                       since: float | None, until: float | None, compute: Compute,
                       given: ldpcore.State | None = None) -> bytes:
        """Compute and cache ``key``'s answer on ``version``'s state (``given``: a kept
        state of that version, not read again; its answer is not a newest one)."""
        at = time.monotonic()  # the version was current when this request read it
        state = given if given is not None else await self.state(spec, version, since, until)
        if state.n < max(spec.min_reports, 1):
            raise NotEnoughReports(state.n, spec.min_reports)
        head = self.head(spec, version, state.n, since, until)
        oracle = self.oracle(spec)

        def work() -> tuple[bytes, float]:
            t0 = time.perf_counter()
            # The answers of one state share their level-free parts (parts.SHARED),
            # kept beside the states and bounded with them (LDP_STATE_CACHE_MB).
            # The state's version and n name it (the sum of the version's windows; one read
            # a moment after its version has a larger n): its parts are found without
            # hashing its counts.
            token = SHARED.set(self.states)
            named = STATE_KEY.set((state, ("version", spec.id, spec.fingerprint, version.tag,
                                           state.n)))
            try:
                # n is the reports summed, whatever the answer says; n_effective may be
                # refined by the answer (an attribute's own effective size).
                out = {**head, **compute(oracle, state, head["n_effective"]), "n": state.n}
            finally:
                STATE_KEY.reset(named)
                SHARED.reset(token)
            return encode(out), time.perf_counter() - t0

        lane = lane_of(key[3])
        running = self.metrics.estimates_running.labels(lane)
        running.inc()
        try:
            encoded, took = await asyncio.get_running_loop().run_in_executor(
                self._pool(lane), work)
        finally:
            running.dec()
        self.metrics.estimate_seconds.labels(spec.id, key[3]).observe(took)
        self.cache.put(key, encoded)
        if given is None:
            self.cache.put(qkey, (time.monotonic(), encoded, version.tag))
            self._computed((spec.id, spec.fingerprint, since, until), at, version, state)
        return encoded

    def close(self) -> None:
        """Stop the estimation threads (the app's lifespan calls this at shutdown)."""
        for pool in (*self._pools.values(), self._chooser):
            pool.shutdown(wait=False, cancel_futures=True)
