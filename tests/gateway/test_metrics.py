"""gateway.metrics: the hot path's plain counters read at scrape time, and each flush."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from gateway.metrics import GatewayMetrics
from gateway.server import Stats


def test_a_scrape_reads_the_counters_and_the_acknowledged_batches() -> None:
    m = GatewayMetrics(CollectorRegistry())
    m.stats = Stats()
    m.stats.count("/v1/reports", 202)
    m.stats.count("/v1/reports", 202)
    m.stats.rejected["garbage"] = 3
    m.on_flush({"os": (2, 500)}, [(500, 4096)], 0.004)
    m.on_flush({"os": (1, 10)}, [], 0.0)  # nothing produced: no produce time observed
    text, ctype = m.page()
    page = text.decode()
    assert ctype.startswith("text/plain")
    assert 'ldp_gateway_requests_total{route="/v1/reports",status="202"} 2.0' in page
    assert 'ldp_gateway_rejected_total{reason="garbage"} 3.0' in page
    assert 'ldp_gateway_reports_accepted_total{collection="os"} 510.0' in page
    assert 'ldp_gateway_messages_accepted_total{collection="os"} 3.0' in page
    assert "ldp_gateway_produce_seconds_count 1.0" in page
    assert "ldp_gateway_queue_bytes 0.0" in page  # no batcher yet
