"""Prometheus metrics of the gateway, on an injected ``CollectorRegistry``.

The per-request counters are plain integers of the hot path (:class:`~gateway.server.Stats`,
the batcher's queue) read by a collector at scrape time; per-batch figures are ordinary
histograms.

* ``ldp_gateway_requests_total{route,status}``: requests answered;
* ``ldp_gateway_rejected_total{reason}``: requests refused, by reason;
* ``ldp_gateway_reports_accepted_total{collection}`` and
  ``ldp_gateway_messages_accepted_total{collection}``: acknowledged by the broker;
* ``ldp_gateway_queue_bytes`` / ``ldp_gateway_queue_requests``: accepted, not yet answered;
* ``ldp_gateway_queue_limit_bytes``: the bound (``LDP_GATEWAY_QUEUE_BYTES``);
* ``ldp_gateway_connections``: open client connections;
* ``ldp_gateway_broker_up``: 0 while the circuit breaker holds the broker for down;
* ``ldp_gateway_produce_seconds``: from handing a batch to the producer to its last ack;
* ``ldp_gateway_batch_reports`` / ``ldp_gateway_batch_bytes``: per Kafka message.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from prometheus_client.metrics_core import Metric

    from .batcher import Batcher
    from .server import Stats

__all__ = ["GatewayMetrics"]


class _HotPath(Collector):
    def __init__(self, metrics: GatewayMetrics) -> None:
        self.m = metrics

    def collect(self) -> Iterator[Metric]:
        m = self.m
        req = CounterMetricFamily("ldp_gateway_requests", "Requests answered",
                                  labels=["route", "status"])
        rej = CounterMetricFamily("ldp_gateway_rejected", "Requests refused, by reason",
                                  labels=["reason"])
        if m.stats is not None:
            for (route, status), v in sorted(m.stats.requests.items()):
                req.add_metric([route, str(status)], v)
            for reason, v in sorted(m.stats.rejected.items()):
                rej.add_metric([reason], v)
        yield req
        yield rej
        rep = CounterMetricFamily("ldp_gateway_reports_accepted",
                                  "Reports acknowledged by the broker", labels=["collection"])
        msg = CounterMetricFamily("ldp_gateway_messages_accepted",
                                  "Messages acknowledged by the broker", labels=["collection"])
        for cid, (nm, nr) in sorted(m.accepted.items()):
            rep.add_metric([cid], nr)
            msg.add_metric([cid], nm)
        yield rep
        yield msg
        b = m.batcher
        yield GaugeMetricFamily("ldp_gateway_queue_bytes", "Bytes accepted, not yet answered",
                                value=b.queued_bytes if b else 0)
        yield GaugeMetricFamily("ldp_gateway_queue_requests",
                                "Requests accepted, not yet answered",
                                value=b.queued_requests if b else 0)
        yield GaugeMetricFamily("ldp_gateway_queue_limit_bytes", "Bound of the queue",
                                value=b.queue_bytes if b else 0)
        yield GaugeMetricFamily("ldp_gateway_broker_up",
                                "0 while the broker is held for down", value=int(
                                    b.broker_up) if b else 0)
        yield GaugeMetricFamily("ldp_gateway_connections", "Open client connections",
                                value=m.connections())


def _zero() -> int:
    return 0


class GatewayMetrics:
    """Every gateway metric on one registry (no global default registry)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self.stats: Stats | None = None
        self.batcher: Batcher | None = None
        self.accepted: dict[str, tuple[int, int]] = {}
        self.connections: Callable[[], int] = _zero
        self.produce_seconds = Histogram(
            "ldp_gateway_produce_seconds", "From handing a batch to the producer to its acks",
            registry=registry, buckets=(.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5,
                                        5, 10, float("inf")))
        self.batch_reports = Histogram(
            "ldp_gateway_batch_reports", "Reports per Kafka message", registry=registry,
            buckets=(1, 10, 100, 1e3, 1e4, 1e5, 1e6, float("inf")))
        self.batch_bytes = Histogram(
            "ldp_gateway_batch_bytes", "Bytes per Kafka message", registry=registry,
            buckets=(256, 1024, 4096, 16384, 65536, 262144, 1 << 20, 4 << 20, 16 << 20,
                     float("inf")))
        registry.register(_HotPath(self))

    def on_flush(self, accepted: dict[str, tuple[int, int]], sizes: list[tuple[int, int]],
                 seconds: float) -> None:
        """The batcher's report of one acknowledged batch."""
        for cid, (nm, nr) in accepted.items():
            a = self.accepted.get(cid, (0, 0))
            self.accepted[cid] = (a[0] + nm, a[1] + nr)
        for reports, nbytes in sizes:
            self.batch_reports.observe(reports)
            self.batch_bytes.observe(nbytes)
        if sizes:
            self.produce_seconds.observe(seconds)

    def page(self) -> tuple[bytes, str]:
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        return generate_latest(self.registry), CONTENT_TYPE_LATEST
