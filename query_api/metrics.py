"""Prometheus metrics of the query service, on an injected registry (no import-time globals).

Per-collection gauges come from :class:`CollectionsCollector`, which reports what the
store held at scrape time (refreshed by the ``/metrics`` route just before rendering),
not what the last query happened to read.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

__all__ = ["ApiMetrics", "CollectionsCollector", "CollectionSample"]

_LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
                    2.5, 5.0)


@dataclass(frozen=True)
class CollectionSample:
    """What the store says of one collection at scrape time."""

    collection: str
    reports: int
    epsilon: float
    last_flush_ms: int


class CollectionsCollector(Collector):
    """``ldp_collection_reports``, ``…_epsilon`` and ``…_staleness_seconds`` per collection.

    ``collect`` is synchronous (prometheus_client's contract) while the store is async:
    the ``/metrics`` route awaits :meth:`update` with a fresh read, then renders.
    """

    def __init__(self) -> None:
        self.samples: list[CollectionSample] = []

    def update(self, samples: list[CollectionSample]) -> None:
        self.samples = samples

    def collect(self) -> Iterator[Metric]:
        reports = GaugeMetricFamily("ldp_collection_reports",
                                    "Reports n stored for the collection (all live windows)",
                                    labels=["collection"])
        eps = GaugeMetricFamily("ldp_collection_epsilon",
                                "Privacy parameter ε of the collection", labels=["collection"])
        stale = GaugeMetricFamily("ldp_collection_staleness_seconds",
                                  "Seconds since the last aggregator flush into the collection",
                                  labels=["collection"])
        now = time.time()
        for s in self.samples:
            reports.add_metric([s.collection], float(s.reports))
            eps.add_metric([s.collection], s.epsilon)
            if s.last_flush_ms:
                stale.add_metric([s.collection], max(0.0, now - s.last_flush_ms / 1000))
        yield reports
        yield eps
        yield stale


class ApiMetrics:
    """Request latency per route, estimate time, cache hits and bytes, Redis health,
    collections."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self.request_seconds = Histogram(
            "ldp_api_request_seconds", "HTTP request latency by route template",
            ["route", "method", "status"], buckets=_LATENCY_BUCKETS, registry=registry)
        self.estimate_seconds = Histogram(
            "ldp_api_estimate_seconds", "Time to compute an answer from a state (cache miss)",
            ["collection", "query"], buckets=_LATENCY_BUCKETS, registry=registry)
        self.cache_hits = Counter("ldp_api_cache_hits", "Answers served from the cache",
                                  registry=registry)
        self.cache_misses = Counter("ldp_api_cache_misses", "Answers computed afresh",
                                    registry=registry)
        self.redis_up = Gauge("ldp_redis_up", "1 if the last Redis call succeeded",
                              registry=registry)
        self.cache_bytes = Gauge("ldp_api_cache_bytes", "Bytes held by the cache "
                                 "(answers: encoded answers; states: summed states)",
                                 ["cache"], registry=registry)
        self.cache_limit_bytes = Gauge("ldp_api_cache_limit_bytes", "The cache's byte bound "
                                       "(LDP_ANSWER_CACHE_MB, LDP_STATE_CACHE_MB)", ["cache"],
                                       registry=registry)
        self.cache_entries = Gauge("ldp_api_cache_entries", "Entries held by the cache",
                                   ["cache"], registry=registry)
        self.cache_evictions = Counter("ldp_api_cache_evictions", "Entries dropped for room",
                                       ["cache"], registry=registry)
        self.estimates_running = Gauge("ldp_api_estimates_running", "Answers being computed "
                                       "or waiting for a thread, per answer kind", ["kind"],
                                       registry=registry)
        self.collections = CollectionsCollector()
        registry.register(self.collections)
