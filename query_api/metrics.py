"""Prometheus metrics of the query service, on an injected registry (no import-time globals)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

__all__ = ["ApiMetrics"]

_LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
                    2.5, 5.0)


class ApiMetrics:
    """Request latency per route, estimate time, cache hits, per-collection gauges."""

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
        self.reports = Gauge("ldp_collection_reports",
                             "Reports n in the collection's state (last query)",
                             ["collection"], registry=registry)
        self.epsilon = Gauge("ldp_collection_epsilon", "Privacy parameter ε of the collection",
                             ["collection"], registry=registry)
        self.staleness = Gauge("ldp_collection_staleness_seconds",
                               "Seconds since the last aggregator flush into the collection "
                               "(at the last query)", ["collection"], registry=registry)
        self.redis_up = Gauge("ldp_redis_up", "1 if the last Redis call succeeded",
                              registry=registry)
