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
* ``ldp_gateway_connections_closed_total{reason}``: closed without an answer (``idle``,
  ``no_request``: opened and sent nothing within the head deadline, ``not_reading``);
  the ones answered 408 are in ``ldp_gateway_rejected_total{reason="head_timeout"}`` and
  ``{reason="body_too_slow"}``;
* ``ldp_gateway_body_buffered_bytes`` / ``ldp_gateway_body_budget_bytes``: bytes of
  request bodies being received, and their bound (``LDP_GATEWAY_BODY_BUDGET``);
* ``ldp_gateway_auth_throttled_total``: requests refused 429 for too many failed
  authentications from their address; ``ldp_gateway_auth_failures_total``;
  ``ldp_gateway_auth_throttled_addresses``: addresses throttled now;
* ``ldp_gateway_catalogue_collections``, ``ldp_gateway_catalogue_checks_total``,
  ``ldp_gateway_catalogue_reloads_total``, ``ldp_gateway_catalogue_errors_total``: the
  catalogue client (errors: Redis could not be read, apart from unknown ids);
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

    from ldpstream.catalogue import CatalogueState

    from .batcher import Batcher
    from .server import GatewayServer, Stats

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
        closed = CounterMetricFamily("ldp_gateway_connections_closed",
                                     "Connections closed without an answer, by reason",
                                     labels=["reason"])
        if m.stats is not None:
            for reason, v in sorted(m.stats.closed.items()):
                closed.add_metric([reason], v)
        yield closed
        srv = m.server
        if srv is not None:
            yield GaugeMetricFamily("ldp_gateway_body_buffered_bytes",
                                    "Bytes of request bodies being received",
                                    value=srv.body_buffered)
            yield GaugeMetricFamily("ldp_gateway_body_budget_bytes",
                                    "Bound of the bodies being received", value=srv.body_budget)
            t = srv.throttle
            yield CounterMetricFamily("ldp_gateway_auth_throttled",
                                      "Requests refused for too many failed authentications "
                                      "from their address", value=t.throttled)
            yield CounterMetricFamily("ldp_gateway_auth_failures", "Failed authentications",
                                      value=t.failures)
            yield GaugeMetricFamily("ldp_gateway_auth_throttled_addresses",
                                    "Client addresses throttled now",
                                    value=t.blocked_addresses())
        c = m.catalogue
        if c is not None:
            yield GaugeMetricFamily("ldp_gateway_catalogue_collections",
                                    "Collections in the catalogue", value=len(c.specs))
            yield CounterMetricFamily("ldp_gateway_catalogue_checks",
                                      "Catalogue version checks that succeeded", value=c.checks)
            yield CounterMetricFamily("ldp_gateway_catalogue_reloads",
                                      "Catalogue re-reads", value=c.reloads)
            yield CounterMetricFamily("ldp_gateway_catalogue_errors",
                                      "Catalogue reads that failed (Redis unreachable)",
                                      value=c.errors)


def _zero() -> int:
    return 0


class GatewayMetrics:
    """Every gateway metric on one registry (no global default registry)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self.stats: Stats | None = None
        self.batcher: Batcher | None = None
        self.server: GatewayServer | None = None
        self.catalogue: CatalogueState | None = None
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
