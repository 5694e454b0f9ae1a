"""Release what is already counted: broker records below the Redis watermarks, expired windows.

The aggregator's watermark ``w`` of a partition (``P wm:{topic}``, :mod:`ldpstream.storage`)
is the highest offset of that partition whose report is counted in Redis (or was
dead-lettered, acknowledged before the flush that moved ``w``).  The worker never reads
below ``w + 1`` again: on every assignment it seeks to ``w + 1``.  So every record at an
offset ``<= w`` can go, and nothing above it may.  :class:`Janitor` does both halves of
"release what is counted":

* :meth:`Janitor.release_records`: one Kafka ``DeleteRecords`` request per round that moves
  each partition's log start offset to ``w + 1`` (the request deletes every offset
  *smaller* than the one given), for watermarks that are **durable** only
  (:class:`ldpstream.durability.DurableWatermarks`), by one rule: on the primary's disk
  per its persistence setting (``appendfsync always``, a proven fsync margin under
  ``everysec``, WAITAOF where CONFIG is hidden) **and** acknowledged by ``replicas``
  Redis replicas (``LDP_RELEASE_REPLICAS``, 1 with Sentinel; ``WAIT`` on the connection
  that read them).  A watermark only in Redis's memory could come back lower after a
  crash, and a replica that had not received the last flushes could be promoted: either
  way below records already deleted, and those reports would be lost.  Where the Redis
  cannot prove durability (AOF off, ``appendfsync no``…) the janitor refuses to release
  and says so: a warning, ``ldp_janitor_releasing`` 0, and ``P janitor`` (read by the
  query API's ``/readyz``).  Durable watermarks only move forward, so an offset released
  once is counted for good.  The broker then drops whole segments below the log start
  offset (Apache Kafka: at its next retention check).  A broker that does not implement
  the request (tansu 0.6's storage engines answer it by closing the connection) is
  noted, logged once and not asked again.
* :meth:`Janitor.trim_windows`: a window hash expires by itself (``PEXPIREAT`` at window end
  + retention), but its entry in ``P windows:{id}`` stays; the janitor removes the entries
  of windows that have expired, ``ZREMRANGEBYSCORE … -inf (now - window - retention)``.

>>> Janitor(bootstrap="127.0.0.1:9092", redis=None, interval=0)
Traceback (most recent call last):
...
ValueError: interval must be > 0 seconds, got 0
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .durability import DurableWatermarks, Verdict
from .storage import DEFAULT_PREFIX, CollectionCatalogue, Keys, read_watermarks, shard_tags

__all__ = ["Janitor", "JanitorMetrics", "JanitorStats", "release_offsets"]

log = logging.getLogger("ldpstream.retention")


def release_offsets(watermarks: Mapping[int, int],
                    released: Mapping[int, int]) -> dict[int, int]:
    """partition -> offset to delete below (``w + 1``), for the partitions that moved.

    ``watermarks``: partition -> highest counted offset; ``released``: partition -> the
    log start offset already asked for.  A partition with nothing counted (``w < 0``) or
    nothing new is left out.

    >>> release_offsets({0: 41, 1: -1, 2: 9}, {2: 10})
    {0: 42}
    """
    out = {}
    for p, w in sorted(watermarks.items()):
        if w >= 0 and w + 1 > released.get(p, 0):
            out[p] = w + 1
    return out


@dataclass
class JanitorStats:
    """What the janitor did so far."""

    rounds: int = 0
    #: partition -> log start offset the broker confirmed (or was asked for)
    released: dict[int, int] = field(default_factory=dict)
    #: window entries removed from the ``windows`` sorted sets
    windows_trimmed: int = 0
    #: None until known; False once the broker refused DeleteRecords
    releases_supported: bool | None = None
    last_error: str | None = None
    #: the last durability verdict (None before the first round that asked)
    verdict: Verdict | None = None


class JanitorMetrics:
    """The janitor's Prometheus metrics (on the worker's registry when it runs there).

    * ``ldp_janitor_releasing``: 1 while the Redis setting lets the janitor prove the
      watermarks durable, 0 while it refuses to release (see ``P janitor`` / ``/readyz``);
    * ``ldp_janitor_rounds_total{outcome}``: rounds that ``released``, found ``nothing``
      new, were ``waiting`` for a proof, ``refused`` or met an ``error``;
    * ``ldp_janitor_log_start_offset{topic,partition}``: the log start the broker confirmed.
    """

    def __init__(self, registry: Any = None) -> None:
        from prometheus_client import CollectorRegistry, Counter, Gauge

        registry = registry if registry is not None else CollectorRegistry()
        self.registry = registry
        self.releasing = Gauge("ldp_janitor_releasing",
                               "1 if the janitor can prove watermarks durable and releases",
                               registry=registry)
        self.rounds = Counter("ldp_janitor_rounds_total", "Janitor rounds by outcome",
                              ["outcome"], registry=registry)
        self.log_start = Gauge("ldp_janitor_log_start_offset",
                               "Log start offset confirmed by the broker after a release",
                               ["topic", "partition"], registry=registry)


class Janitor:
    """Periodically releases counted records of ``topic`` and trims expired window entries.

    Parameters
    ----------
    bootstrap
        Kafka bootstrap servers.
    redis
        A sync ``redis.Redis`` client of the aggregator's Redis.
    topic
        The reports topic (``LDP_REPORTS_TOPIC``).
    prefix
        Redis key prefix (``LDP_REDIS_PREFIX``).
    interval
        Seconds between rounds of :meth:`run`.
    release_records
        False: never send DeleteRecords (a broker known not to implement it).
    admin_config
        Extra ``kafka.KafkaAdminClient`` settings (security).
    replicas
        Release only what this many Redis replicas acknowledge holding (0: the primary's
        disk is enough), waiting at most ``replica_wait_ms`` per round.
    metrics
        :class:`JanitorMetrics` (default: on a private registry).
    durability
        The durability check (default :class:`~ldpstream.durability.DurableWatermarks`).
    """

    def __init__(self, *, bootstrap: str, redis: Any, topic: str = "ldp-reports",
                 prefix: str = DEFAULT_PREFIX, interval: float = 30.0,
                 release_records: bool = True,
                 admin_config: Mapping[str, Any] | None = None, replicas: int = 0,
                 replica_wait_ms: int = 1000, metrics: JanitorMetrics | None = None,
                 durability: DurableWatermarks | None = None) -> None:
        if not interval > 0:
            raise ValueError(f"interval must be > 0 seconds, got {interval}")
        if not topic:
            raise ValueError("topic must be a non-empty topic name")
        self.bootstrap = bootstrap
        self.redis = redis
        self.topic = topic
        self.prefix = prefix
        self.interval = float(interval)
        self.admin_config = dict(admin_config or {})
        self.replicas, self.replica_wait_ms = replicas, replica_wait_ms
        self.stats = JanitorStats(releases_supported=None if release_records else False)
        self.metrics = metrics if metrics is not None else JanitorMetrics()
        self.durability = durability if durability is not None else DurableWatermarks(
            redis, topic, prefix, replicas=replicas, replica_wait_ms=replica_wait_ms)
        self._admin: Any = None
        self._refusing: str | None = None

    # -- broker side -------------------------------------------------------------------
    def _client(self) -> Any:
        if self._admin is None:
            from kafka import KafkaAdminClient

            self._admin = KafkaAdminClient(bootstrap_servers=self.bootstrap,
                                           client_id="ldpstream-janitor",
                                           request_timeout_ms=15000, **self.admin_config)
        return self._admin

    def close(self) -> None:
        admin, self._admin = self._admin, None
        if admin is not None:
            try:
                admin.close()
            except Exception:  # noqa: BLE001 - closing a broken client
                pass

    def release_records(self) -> dict[int, int]:
        """Delete every record at or below its partition's watermark; partition -> new start.

        Returns the partitions released in this call (empty when nothing moved, or when
        the broker does not honour DeleteRecords).
        """
        if self.stats.releases_supported is False:
            return {}
        verdict = self.durability.durable()
        self._record(verdict)
        if verdict.watermarks is None:
            self.metrics.rounds.labels("refused" if not verdict.releasing else "waiting").inc()
            return {}
        # Read again and keep the smaller of each: a failover or a restart in between may
        # have put a Redis with older watermarks in place.
        again = read_watermarks(self.redis, self.topic, self.prefix)
        wanted = release_offsets({p: min(w, again.get(p, -1))
                                  for p, w in verdict.watermarks.items()}, self.stats.released)
        if not wanted:
            self.metrics.rounds.labels("nothing").inc()
            return {}
        from kafka import TopicPartition
        from kafka.errors import KafkaConnectionError, UnsupportedVersionError

        try:
            result = self._client().delete_records(
                {TopicPartition(self.topic, p): off for p, off in wanted.items()})
        except (KafkaConnectionError, UnsupportedVersionError) as exc:
            # tansu 0.6: its storage engine has no DeleteRecords and drops the connection
            self.stats.releases_supported = False
            self.stats.last_error = f"{type(exc).__name__}: {exc}"
            log.warning("the broker at %s does not honour DeleteRecords (%s): counted "
                        "records of %s stay on the broker", self.bootstrap, exc, self.topic)
            self.close()
            return {}
        done: dict[int, int] = {}
        for tp, meta in result.items():
            low = int(meta.get("low_watermark", wanted[tp.partition]))
            done[tp.partition] = low
            self.stats.released[tp.partition] = max(low, self.stats.released.get(
                tp.partition, 0))
            self.metrics.log_start.labels(self.topic, str(tp.partition)).set(low)
        self.stats.releases_supported = True
        self.metrics.rounds.labels("released").inc()
        return done

    def _record(self, verdict: Verdict) -> None:
        """Say what this round's durability check found: stats, metric, ``P janitor``,
        and a warning when the janitor starts (or stops) refusing, or replicas fall short."""
        self.stats.verdict = verdict
        self.metrics.releasing.set(1 if verdict.releasing else 0)
        if verdict.error:
            self.stats.last_error = f"{verdict.reason}: nothing released"
            log.warning("janitor: %s", self.stats.last_error)
        if not verdict.releasing and self._refusing != verdict.reason:
            log.warning("janitor: not releasing any record of %s: %s. Counted records stay "
                        "on the broker (its own retention applies); see docs/faults.md for "
                        "the Redis settings the janitor can prove durable", self.topic,
                        verdict.reason)
        elif verdict.releasing and self._refusing is not None:
            log.info("janitor: releasing again (%s)", verdict.strategy)
        self._refusing = None if verdict.releasing else verdict.reason
        self.redis.hset(Keys(self.prefix).janitor, mapping={
            "releasing": int(verdict.releasing), "strategy": verdict.strategy,
            "reason": verdict.reason, "t": int(time.time() * 1000)})

    # -- Redis side --------------------------------------------------------------------
    def trim_windows(self, now: float | None = None) -> int:
        """Remove the ``windows`` entries whose window hash has expired; how many went."""
        now = time.time() if now is None else now
        keys = Keys.for_client(self.redis, self.prefix)
        removed = 0
        for cid, spec in CollectionCatalogue(self.redis, self.prefix).all().items():
            cutoff = now - spec.window_seconds - spec.retention_seconds
            names = ([keys.shard_windows(t, p, cid) for t, p in shard_tags(self.redis, keys, cid)]
                     if keys.sharded else [keys.windows(cid)])
            for name in names:
                removed += int(self.redis.zremrangebyscore(name, "-inf", f"({cutoff}"))
        self.stats.windows_trimmed += removed
        return removed

    # -- loop --------------------------------------------------------------------------
    def run_once(self) -> None:
        """One round: release records, trim windows; errors are logged, never raised."""
        self.stats.rounds += 1
        for step in (self.release_records, self.trim_windows):
            try:
                step()
            except Exception as exc:  # noqa: BLE001 - the next round tries again
                self.stats.last_error = f"{type(exc).__name__}: {exc}"
                log.warning("janitor: %s failed: %s", step.__name__, exc)
                if step == self.release_records:
                    self.metrics.rounds.labels("error").inc()
                    self.close()

    def run(self, stop: threading.Event) -> None:
        """Rounds every ``interval`` seconds until ``stop`` is set."""
        try:
            while not stop.wait(self.interval):
                self.run_once()
        finally:
            self.close()

    def start(self, stop: threading.Event) -> threading.Thread:
        """:meth:`run` in a daemon thread."""
        thread = threading.Thread(target=self.run, args=(stop,), name="ldpstream-janitor",
                                  daemon=True)
        thread.start()
        return thread
