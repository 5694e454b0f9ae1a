"""query_api.metrics: the API's Prometheus series, per collection included."""

from __future__ import annotations

import time

from prometheus_client import CollectorRegistry, generate_latest

from query_api.metrics import ApiMetrics, CollectionSample, CollectionsCollector


def test_collections_are_reported_with_reports_epsilon_and_staleness() -> None:
    reg = CollectorRegistry()
    col = CollectionsCollector()
    reg.register(col)
    col.update([CollectionSample("os", 120, 1.5, int(time.time() * 1000) - 10_000),
                CollectionSample("new", 0, 2.0, 0)])
    text = generate_latest(reg).decode()
    assert 'ldp_collection_reports{collection="os"} 120.0' in text
    assert 'ldp_collection_epsilon{collection="new"} 2.0' in text
    stale = next(line for line in text.splitlines()
                 if line.startswith('ldp_collection_staleness_seconds{collection="os"}'))
    assert 9 < float(stale.split()[-1]) < 60
    assert 'staleness_seconds{collection="new"}' not in text  # never flushed: no age


def test_api_metrics_register_their_series_in_the_given_registry() -> None:
    reg = CollectorRegistry()
    m = ApiMetrics(reg)
    m.cache_hits.inc()
    m.redis_up.set(1)
    text = generate_latest(reg).decode()
    assert "ldp_api_cache_hits_total 1.0" in text and "ldp_redis_up 1.0" in text
    assert "ldp_api_request_seconds" in text
