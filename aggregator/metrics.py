"""Prometheus metrics of the aggregator, registered on an injected ``CollectorRegistry``."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

__all__ = ["AggregatorMetrics", "FRESHNESS_BUCKETS", "FRESHNESS_SAMPLE"]

#: Buckets (s) of ``ldp_freshness_seconds``: the 2 s target sits between 1.5 and 2.5.
FRESHNESS_BUCKETS = (0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 30.0,
                     60.0, float("inf"))
#: Records per partition batch whose timestamps feed the freshness histogram.
FRESHNESS_SAMPLE = 16


class AggregatorMetrics:
    """All aggregator metrics on one registry (no global default registry).

    * ``ldp_reports_ingested_total{collection}``: reports counted into Redis;
    * ``ldp_reports_rejected_total{collection,reason}``: reports dead-lettered (the
      header's count when readable, else 1 per message; collection ``"?"`` if unknown);
    * ``ldp_dlq_messages_total{reason}``: messages sent to the dead-letter topic;
    * ``ldp_flush_seconds`` / ``ldp_flush_reports``: duration and size of flushes;
    * ``ldp_flush_conflicts_total``: flushes refused by the watermark check (rebalance);
    * ``ldp_partition_watermark{topic,partition}``: highest counted offset;
    * ``ldp_offset_resets_total{topic,partition}``: broker log went backwards (lost topic);
    * ``ldp_consumer_lag{topic,partition}``: broker high watermark minus the next offset to
      process, per assigned partition (what HPA-on-lag and the "stalled" alert read);
    * ``ldp_last_flush_timestamp_seconds``: Unix time of the last committed flush;
    * ``ldp_redis_up``: 1 if the last flush reached Redis, 0 if it failed;
    * ``ldp_freshness_seconds``: for the records of each committed flush (a strided sample
      of at most :data:`FRESHNESS_SAMPLE` per partition batch), the time from the record's
      Kafka timestamp (the device's or gateway's send) to the commit that made it visible
      in Redis, so in the API's ``n``.
    """

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self.ingested = Counter("ldp_reports_ingested_total", "Reports counted into Redis",
                                ["collection"], registry=registry)
        self.rejected = Counter("ldp_reports_rejected_total", "Reports dead-lettered",
                                ["collection", "reason"], registry=registry)
        self.dlq = Counter("ldp_dlq_messages_total", "Messages sent to the dead-letter topic",
                           ["reason"], registry=registry)
        self.flush_seconds = Histogram("ldp_flush_seconds", "Duration of a Redis flush",
                                       registry=registry)
        self.flush_reports = Histogram(
            "ldp_flush_reports", "Reports per flush", registry=registry,
            buckets=(1, 10, 100, 1e3, 1e4, 1e5, 1e6, 1e7, float("inf")))
        self.conflicts = Counter("ldp_flush_conflicts_total",
                                 "Flushes refused because a watermark moved (rebalance)",
                                 registry=registry)
        self.watermark = Gauge("ldp_partition_watermark", "Highest counted offset",
                               ["topic", "partition"], registry=registry)
        self.offset_resets = Counter("ldp_offset_resets_total",
                                     "Partitions whose log restarted below the watermark",
                                     ["topic", "partition"], registry=registry)
        self.lag = Gauge("ldp_consumer_lag", "Messages behind the broker's high watermark",
                         ["topic", "partition"], registry=registry)
        self.last_flush = Gauge("ldp_last_flush_timestamp_seconds",
                                "Unix time of the last committed flush", registry=registry)
        self.redis_up = Gauge("ldp_redis_up", "1 if the last flush reached Redis",
                              registry=registry)
        self.freshness = Histogram("ldp_freshness_seconds",
                                   "Record timestamp to the flush that made it visible",
                                   registry=registry, buckets=FRESHNESS_BUCKETS)
