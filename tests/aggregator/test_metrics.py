"""aggregator.metrics: every worker series on the registry it is given."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest

from aggregator.metrics import FRESHNESS_BUCKETS, AggregatorMetrics


def test_series_live_on_the_injected_registry_with_their_labels() -> None:
    reg = CollectorRegistry()
    m = AggregatorMetrics(reg)
    m.ingested.labels("os").inc(5)
    m.rejected.labels("?", "garbage").inc()
    m.watermark.labels("t", "0").set(41)
    m.freshness.observe(1.8)
    text = generate_latest(reg).decode()
    assert 'ldp_reports_ingested_total{collection="os"} 5.0' in text
    assert 'ldp_reports_rejected_total{collection="?",reason="garbage"} 1.0' in text
    assert 'ldp_partition_watermark{partition="0",topic="t"} 41.0' in text
    assert 'ldp_freshness_seconds_bucket{le="2.0"} 1.0' in text
    assert generate_latest(CollectorRegistry()) == b""  # nothing on another registry
    AggregatorMetrics(CollectorRegistry())  # a second worker's metrics do not clash


def test_the_freshness_target_sits_between_two_buckets() -> None:
    assert 1.5 in FRESHNESS_BUCKETS and 2.5 in FRESHNESS_BUCKETS
    assert list(FRESHNESS_BUCKETS) == sorted(FRESHNESS_BUCKETS)
