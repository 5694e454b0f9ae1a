"""What every route shares: the store, the answer cache, the metrics and the settings.

:meth:`Service.answer` is the one way an estimate is served: read the state
*version* (a cheap Redis round trip, itself cached for ``LDP_VERSION_TTL_MS``),
return the cached encoded answer for that version if there is one, else read the
state, compute, encode and cache.  Equal versions mean equal states (see
:mod:`query_api.store`), so a cached answer is never stale by more than the TTL.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

import ldpcore
from ldpcore.collection import CollectionSpec

from .config import ApiSettings
from .errors import NotEnoughReports, Unavailable, unknown_collection
from .fleet import FleetView
from .metrics import ApiMetrics
from .store import StateVersion, Store

__all__ = ["Service", "AnswerCache", "Compute"]

Compute = Callable[[Any, ldpcore.State, float], dict[str, Any]]
"""Turns (oracle, state, effective sample size) into the JSON-able body of an answer."""


class AnswerCache:
    """A small LRU keyed by (collection, fingerprint, version, query, params, window)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.data: OrderedDict[Any, Any] = OrderedDict()

    def get(self, key: Any) -> Any:
        hit = self.data.get(key)
        if hit is not None:
            self.data.move_to_end(key)
        return hit

    def put(self, key: Any, value: Any) -> None:
        self.data[key] = value
        self.data.move_to_end(key)
        while len(self.data) > self.size:
            self.data.popitem(last=False)


class Service:
    """The store, cache, metrics and settings behind every route (one per app)."""

    def __init__(self, settings: ApiSettings, store: Store, metrics: ApiMetrics) -> None:
        self.settings = settings
        self.store = store
        self.metrics = metrics
        self.cache = AnswerCache(settings.cache_entries)
        self._latest = AnswerCache(settings.cache_entries)  # per query: the newest answer
        self._inflight: dict[Any, asyncio.Future[bytes]] = {}
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ldp-estimate")
        self._oracles: dict[str, Any] = {}
        self._versions: dict[Any, tuple[float, StateVersion]] = {}
        self.fleet = FleetView(store)

    async def call(self, aw: Awaitable[Any]) -> Any:
        """Await a Redis call; an unreachable Redis becomes :class:`Unavailable` (503)."""
        try:
            out = await aw
        except (ConnectionError, OSError, TimeoutError) as exc:
            self.metrics.redis_up.set(0)
            raise Unavailable(f"Redis is unreachable: {exc}") from None
        except Exception as exc:  # redis-py's own connection errors
            if type(exc).__module__.startswith("redis"):
                self.metrics.redis_up.set(0)
                raise Unavailable(f"Redis error: {exc}") from None
            raise
        self.metrics.redis_up.set(1)
        return out

    async def spec(self, cid: str) -> CollectionSpec:
        """The collection, or :class:`NotFound` naming how to list them."""
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
        return o

    async def version(self, spec: CollectionSpec, since: float | None,
                      until: float | None) -> StateVersion:
        """The state version, re-read at most every ``version_ttl_s`` per query window.

        Under load this turns one Redis round trip per request into one per interval;
        answers are at most that much staler than Redis (flushes come every ~200 ms).
        """
        key = (spec.id, spec.fingerprint, since, until)
        now = time.monotonic()
        hit = self._versions.get(key)
        if hit is not None and now - hit[0] < self.settings.version_ttl_s:
            return hit[1]
        version: StateVersion = await self.call(self.store.version(spec, since, until))
        if len(self._versions) > 4 * self.settings.cache_entries:
            self._versions.clear()
        self._versions[key] = (now, version)
        return version

    async def state(self, spec: CollectionSpec, version: StateVersion, since: float | None,
                    until: float | None) -> ldpcore.State:
        """The summed state of ``version``'s windows, read from Redis once per version."""
        skey = (spec.id, spec.fingerprint, version.tag, "state", since, until)
        state: ldpcore.State | None = self.cache.get(skey)
        if state is None:
            state = await self.call(self.store.state(spec, version))
            self.cache.put(skey, state)
        return state

    async def answer(self, spec: CollectionSpec, query: str, params: tuple[Any, ...],
                     since: float | None, until: float | None, compute: Compute,
                     *, version: StateVersion | None = None,
                     allow_stale: bool = True) -> tuple[bytes, str, str]:
        """The encoded JSON answer of ``compute(oracle, state, n_eff)`` for the current version.

        Returns (body, cache status, version tag); the status is ``hit`` (this version's
        answer was cached), ``miss`` (computed now) or ``stale``.  While the state keeps
        changing (a flush every ~200 ms under ingest) an answer that costs more than that
        would never be cached in time: a previous version's answer at most
        ``LDP_MAX_STALE_MS`` old is served at once (it names the state it describes:
        ``state_version``, ``n``, ``as_of``) and the current one is computed in the
        background.  One computation per (version, query), however many requests wait for
        it; computations run on one worker thread, so the event loop keeps answering.
        """
        if version is None:
            version = await self.version(spec, since, until)
        key = (spec.id, spec.fingerprint, version.tag, query, params, since, until)
        hit = self.cache.get(key)
        if hit is not None:
            self.metrics.cache_hits.inc()
            return await self.stated(spec, hit), "hit", version.tag
        qkey = (spec.id, spec.fingerprint, query, params, since, until)
        latest = self._latest.get(qkey)
        if (allow_stale and latest is not None
                and time.monotonic() - latest[0] <= self.settings.max_stale_s):
            self.metrics.cache_hits.inc()
            self._start(key, qkey, spec, version, since, until, compute)
            return await self.stated(spec, latest[1]), "stale", latest[2]
        self.metrics.cache_misses.inc()
        body: bytes = await asyncio.shield(
            self._start(key, qkey, spec, version, since, until, compute))
        return await self.stated(spec, body), "miss", version.tag

    async def stated(self, spec: CollectionSpec, body: bytes) -> bytes:
        """An answer with the fleet's privacy budget stated (:mod:`query_api.fleet`)."""
        out: bytes = await self.call(self.fleet.stated(spec, body))
        return out

    def _start(self, key: Any, qkey: Any, spec: CollectionSpec, version: StateVersion,
               since: float | None, until: float | None, compute: Compute
               ) -> asyncio.Future[bytes]:
        """The (single) computation of ``key``, started if none is running."""
        fut = self._inflight.get(key)
        if fut is None:
            fut = asyncio.ensure_future(self._compute(key, qkey, spec, version, since, until,
                                                      compute))
            self._inflight[key] = fut
            fut.add_done_callback(lambda f: (self._inflight.pop(key, None),
                                             f.cancelled() or f.exception()))
        return fut

    async def _compute(self, key: Any, qkey: Any, spec: CollectionSpec, version: StateVersion,
                       since: float | None, until: float | None, compute: Compute) -> bytes:
        state = await self.state(spec, version, since, until)
        if state.n < spec.min_reports:
            raise NotEnoughReports(state.n, spec.min_reports)
        # Memoized reports of one device in several windows are not independent: the
        # intervals use the effective sample size (ldpcore.longitudinal).
        n_eff = float(spec.effective_sample_size([n for _, n in version.windows] or [state.n]))
        n_eff = min(float(state.n), max(1.0, n_eff))
        oracle = self.oracle(spec)
        head = {
            "collection": spec.id, "fingerprint": spec.fingerprint,
            "mechanism": spec.oracle_spec["mechanism"],
            "epsilon": spec.oracle_spec["epsilon"], "n": state.n,
            "n_effective": round(n_eff, 1), "memoization": spec.memoization,
            "windows": len(version.windows),
            "since": since, "until": until,
            "as_of": (datetime.fromtimestamp(version.last_flush_ms / 1000, UTC).isoformat()
                      if version.last_flush_ms else None),
            "state_version": version.tag,
        }
        if version.lost_records:  # records deleted from Kafka before they were counted
            head["lost_records"] = version.lost_records

        def work() -> tuple[bytes, float]:
            t0 = time.perf_counter()
            out = {**head, **compute(oracle, state, n_eff)}
            return (json.dumps(out, separators=(",", ":"), allow_nan=False).encode(),
                    time.perf_counter() - t0)

        encoded, took = await asyncio.get_running_loop().run_in_executor(self._executor, work)
        self.metrics.estimate_seconds.labels(spec.id, key[3]).observe(took)
        self.cache.put(key, encoded)
        self._latest.put(qkey, (time.monotonic(), encoded, version.tag))
        return encoded

    def close(self) -> None:
        """Stop the estimation thread (the app's lifespan calls this at shutdown)."""
        self._executor.shutdown(wait=False, cancel_futures=True)
