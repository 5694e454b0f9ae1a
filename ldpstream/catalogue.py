"""The collection catalogue as every service reads it: one client, one freshness rule.

The catalogue is the Redis hash ``P collections`` (id → spec JSON, see
:mod:`ldpstream.storage`).  Every writer (:class:`~ldpstream.storage.CollectionCatalogue`,
the query API's admin routes) changes it and bumps ``P collections:version`` in the same
atomic step.  A reader keeps a snapshot of the hash and the version it was read at:

* **Freshness.** At least every :data:`FRESHNESS` seconds the reader reads the version
  (one ``GET``) and, if it moved, re-reads the hash.  So a collection registered (or
  deleted) at time *t* is seen by every service by *t* + :data:`FRESHNESS` (plus one
  Redis round trip).  A full re-read every ``reread`` seconds (optional) also catches a
  writer that changed the hash without bumping the version.
* **Misses.** An id that is not in the snapshot costs at most one version check: the
  checks are *merged* (every miss that comes while one check is in flight waits for
  that one: a single flight, so at most one Redis round trip is ever in flight for
  misses, whatever the number of distinct unknown ids) and *negatively cached* (for
  :data:`MISS_TTL` seconds after a check, a miss is answered "unknown" from the snapshot
  without Redis).  No per-id state is kept, so unknown ids cost no memory.  A
  collection registered a moment ago is found by the next miss that names it (at most
  :data:`MISS_TTL` later).
* **Failures** are not "unknown": a check that cannot reach Redis raises
  :class:`CatalogueUnavailable` (and is counted in :attr:`Catalogue.errors`), and misses
  within :data:`MISS_TTL` after it raise it too without retrying, so a sick Redis is not
  hammered.  The snapshot stays in use: known collections keep working while Redis is away.

Two I/O faces share these rules: :class:`Catalogue` over a ``redis.asyncio`` client
(the gateway) and :class:`SyncCatalogue` over a blocking
``redis.Redis`` (the worker, the CLI).

>>> import time
>>> from ldpcore.collection import CollectionSpec
>>> spec = CollectionSpec.from_dict({"id": "os", "oracle": {"mechanism": "grr", "epsilon": 1},
...     "domain": {"kind": "categories", "labels": ["a", "b"]}})
>>> state = CatalogueState(clock=lambda: 100.0)
>>> state.apply(b"3", {b"os": spec.to_json().encode()})
True
>>> state.get("os").fingerprint == spec.fingerprint, state.get("nope")
(True, None)
>>> state.checked(99.95); state.known_absent("nope")
True
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from ldpcore.collection import CollectionSpec

from .storage import DEFAULT_PREFIX, Keys

__all__ = ["FRESHNESS", "MISS_TTL", "Catalogue", "CatalogueState", "CatalogueUnavailable",
           "SyncCatalogue"]

log = logging.getLogger("ldpstream.catalogue")

FRESHNESS = 1.0
"""Seconds within which every reader sees a change of the catalogue."""

MISS_TTL = 0.1
"""Seconds a version check answers for every miss after it (the negative cache)."""

_UNREAD = object()


class CatalogueUnavailable(RuntimeError):
    """The catalogue could not be read from Redis (not the same as "no such collection")."""


class CatalogueState:
    """What a reader knows, without I/O: the snapshot, its version, when it was checked.

    Parameters
    ----------
    clock : callable
        Monotonic seconds (``time.monotonic``; injectable for tests).
    on_change : callable, optional
        Called with the new ``{id: spec}`` after every re-read that changed something.
    """

    def __init__(self, *, clock: Callable[[], float] = time.monotonic,
                 on_change: Callable[[Mapping[str, CollectionSpec]], None] | None = None,
                 miss_ttl: float = MISS_TTL) -> None:
        self.clock, self.on_change, self.miss_ttl = clock, on_change, miss_ttl
        self.specs: dict[str, CollectionSpec] = {}
        self.version: object = _UNREAD
        self._raw: dict[str, bytes] = {}
        self.checked_at = float("-inf")
        """Start time of the last check that succeeded."""
        self.failed_at = float("-inf")
        """End time of the last check that failed."""
        self.loaded_at = float("-inf")
        self.checks = 0
        self.reloads = 0
        self.errors = 0

    @property
    def loaded(self) -> bool:
        return self.version is not _UNREAD

    def get(self, cid: str) -> CollectionSpec | None:
        """The spec of ``cid`` in the snapshot (no I/O)."""
        return self.specs.get(cid)

    def known_absent(self, cid: str) -> bool:
        """True if ``cid`` is not in a snapshot checked less than ``miss_ttl`` ago."""
        return cid not in self.specs and self.clock() - self.checked_at < self.miss_ttl

    def recently_failed(self) -> bool:
        """True if the last check failed less than ``miss_ttl`` ago."""
        return self.failed_at > self.checked_at and self.clock() - self.failed_at < self.miss_ttl

    def _answers(self, cid: str) -> bool:
        """True if the snapshot answers for ``cid`` without asking Redis (a known id, or one
        absent less than ``miss_ttl`` ago); :class:`CatalogueUnavailable` if Redis must be
        asked but failed less than ``miss_ttl`` ago."""
        if cid in self.specs or self.known_absent(cid):
            return True
        if self.recently_failed():
            raise CatalogueUnavailable("the collection catalogue cannot be read (Redis failed "
                                       "less than a moment ago)")
        return False

    def checked(self, started: float) -> None:
        self.checks += 1
        self.checked_at = max(self.checked_at, started)

    def failed(self, exc: BaseException) -> CatalogueUnavailable:
        self.errors += 1
        self.failed_at = self.clock()
        return CatalogueUnavailable(f"the collection catalogue cannot be read: "
                                    f"{type(exc).__name__}: {exc}")

    def apply(self, version: object, raw: Mapping[Any, Any]) -> bool:
        """Take a re-read hash ``raw`` at ``version``; True if the specs changed.

        Entries whose JSON did not change keep their spec object; an unreadable entry is
        logged and left out (one bad entry must not hide the others).
        """
        self.version = version
        self.loaded_at = self.clock()
        self.reloads += 1
        specs: dict[str, CollectionSpec] = {}
        texts: dict[str, bytes] = {}
        for k, v in raw.items():
            cid = k.decode() if isinstance(k, bytes) else str(k)
            text = v if isinstance(v, bytes) else str(v).encode()
            old = self.specs.get(cid)
            if old is not None and self._raw.get(cid) == text:
                specs[cid], texts[cid] = old, text
                continue
            try:
                specs[cid] = CollectionSpec.from_dict(json.loads(text))
            except Exception as exc:  # noqa: BLE001 - skip it, keep the others
                log.warning("catalogue entry %r is unreadable: %r", cid, exc)
                continue
            texts[cid] = text
        changed = specs.keys() != self.specs.keys() or any(
            specs[c] is not self.specs[c] for c in specs)
        self.specs, self._raw = specs, texts
        if changed and self.on_change is not None:
            self.on_change(specs)
        return changed


class _RedisReader(CatalogueState):
    """The state of a catalogue read from Redis: the client, the keys, the freshness."""

    def __init__(self, redis: Any, prefix: str, *, freshness: float, miss_ttl: float,
                 clock: Callable[[], float],
                 on_change: Callable[[Mapping[str, CollectionSpec]], None] | None) -> None:
        super().__init__(clock=clock, on_change=on_change, miss_ttl=miss_ttl)
        self.redis, self.keys = redis, Keys.for_client(redis, prefix)
        self.freshness = freshness

    def _read_pipeline(self) -> Any:
        """A pipeline reading the version, then the whole hash (execute, then :meth:`apply`).

        One transaction; on a cluster a pipeline (its async transactions leave a connection
        behind): the version is read first, so a newer hash only means one more read at the
        next check.
        """
        pipe = self.redis.pipeline(transaction=not self.keys.sharded)
        pipe.get(self.keys.catalogue_version)
        pipe.hgetall(self.keys.collections)
        return pipe


class Catalogue(_RedisReader):
    """The catalogue over a ``redis.asyncio`` client (see the module docstring).

    Parameters
    ----------
    redis : redis.asyncio.Redis
    prefix : str
        The Redis key prefix (``LDP_REDIS_PREFIX``).
    freshness : float
        Seconds between version checks of :meth:`run` (default :data:`FRESHNESS`).
    reread : float or None
        Seconds between full re-reads of :meth:`run` whatever the version (None: never).
    """

    def __init__(self, redis: Any, prefix: str = DEFAULT_PREFIX, *,
                 freshness: float = FRESHNESS, reread: float | None = None,
                 miss_ttl: float = MISS_TTL, clock: Callable[[], float] = time.monotonic,
                 on_change: Callable[[Mapping[str, CollectionSpec]], None] | None = None
                 ) -> None:
        super().__init__(redis, prefix, freshness=freshness, miss_ttl=miss_ttl, clock=clock,
                         on_change=on_change)
        self.reread = reread
        self._flight: asyncio.Task[None] | None = None

    async def _read_all(self) -> None:
        self.apply(*await self._read_pipeline().execute())

    async def load(self) -> None:
        """Read the version and the whole hash now (one transaction); raises what the
        Redis client raises (start-up retries it)."""
        started = self.clock()
        await self._read_all()
        self.checked(started)

    async def _check(self, full: bool) -> None:
        started = self.clock()
        try:
            version = await self.redis.get(self.keys.catalogue_version)
            if full or version != self.version:
                await self._read_all()
            self.checked(started)
        except Exception as exc:
            raise self.failed(exc) from exc

    def _landed(self, task: asyncio.Task[None]) -> None:
        self._flight = None
        if not task.cancelled():
            task.exception()  # retrieved here: a flight nobody waits for is not an error

    async def check(self, *, full: bool = False) -> None:
        """Read the version and re-read the hash if it moved; merged with a check in flight.

        Raises :class:`CatalogueUnavailable` if Redis cannot be read.
        """
        if full:
            await self._check(True)
            return
        flight = self._flight
        if flight is None:
            flight = self._flight = asyncio.get_running_loop().create_task(self._check(False))
            flight.add_done_callback(self._landed)
        # shield: a waiter that gives up does not cancel the check the others wait for
        await asyncio.shield(flight)

    async def find(self, cid: str) -> CollectionSpec | None:
        """The spec of ``cid``, checking Redis (merged, negatively cached) on a miss.

        None: no such collection.  Raises :class:`CatalogueUnavailable` if it cannot be
        told (Redis unreachable now or less than ``miss_ttl`` ago).
        """
        if not self._answers(cid):
            await self.check()
        return self.specs.get(cid)

    async def run(self) -> None:
        """Check every ``freshness`` seconds (and re-read all every ``reread``) until
        cancelled; failures are logged and counted, the snapshot stays."""
        last_warning = float("-inf")
        while True:
            await asyncio.sleep(self.freshness)
            full = self.reread is not None and self.clock() - self.loaded_at >= self.reread
            try:
                await self.check(full=full)
            except CatalogueUnavailable as exc:
                if self.clock() - last_warning > 30:
                    last_warning = self.clock()
                    log.warning("%s (the last catalogue read stays in use)", exc)


class SyncCatalogue(_RedisReader):
    """The catalogue over a blocking ``redis.Redis`` client, with the same rules.

    There is no background task: :meth:`get` checks the version itself when the last
    check is older than ``freshness`` (and on a miss, negatively cached as above).
    """

    def __init__(self, redis: Any, prefix: str = DEFAULT_PREFIX, *,
                 freshness: float = FRESHNESS, miss_ttl: float = MISS_TTL,
                 clock: Callable[[], float] = time.monotonic,
                 on_change: Callable[[Mapping[str, CollectionSpec]], None] | None = None
                 ) -> None:
        super().__init__(redis, prefix, freshness=freshness, miss_ttl=miss_ttl, clock=clock,
                         on_change=on_change)

    def _read_all(self) -> None:
        self.apply(*self._read_pipeline().execute())

    def load(self) -> None:
        """Read the version and the whole hash now; raises what the Redis client raises."""
        started = self.clock()
        self._read_all()
        self.checked(started)

    def check(self) -> None:
        """Read the version, re-read the hash if it moved; :class:`CatalogueUnavailable`."""
        started = self.clock()
        try:
            if self.redis.get(self.keys.catalogue_version) != self.version:
                self._read_all()
            self.checked(started)
        except Exception as exc:
            raise self.failed(exc) from exc

    def get(self, cid: str) -> CollectionSpec | None:
        """The spec of ``cid`` as of at most ``freshness`` seconds ago (None: no such id).

        Raises :class:`CatalogueUnavailable` only when ``cid`` is not in the snapshot and
        Redis cannot tell; a known id is answered from the snapshot while Redis is away.
        """
        now = self.clock()
        if now - self.checked_at >= self.freshness and not self.recently_failed():
            try:
                self.check()
            except CatalogueUnavailable:
                if cid not in self.specs:
                    raise
        if not self._answers(cid):
            self.check()
        return self.specs.get(cid)

    def all(self) -> dict[str, CollectionSpec]:
        """Every collection, as of at most ``freshness`` seconds ago."""
        if self.clock() - self.checked_at >= self.freshness:
            self.check()
        return dict(self.specs)
