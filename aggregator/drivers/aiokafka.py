"""The direct driver (``--engine aiokafka``): an aiokafka consumer loop around the accumulator.

Kept for very high rates of single-report messages, where Faust's per-message
cost dominates.  The loop: ``getmany`` (up to 50,000 records), hand each
partition's records to :meth:`Accumulator.process`, flush when the delta is idle,
large (``LDP_FLUSH_MAX_REPORTS``) or old (``LDP_FLUSH_INTERVAL_MS``).  A
rebalance listener flushes on revoke and restarts assigned partitions from their
Redis watermarks (aiokafka rebalances eagerly: revoke always precedes assign).
A position outside the log resets to the log start (``auto_offset_reset=earliest``);
the offsets a batch jumps over are checked against the broker's log start first
(:meth:`Accumulator.process`), so records deleted before they were counted are
recorded as lost, never skipped in silence.
``/metrics`` and ``/healthz`` come from :class:`aggregator.health.HealthServer`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from typing import Any

from ..accumulator import DLQ_REQUEST_BYTES, MAX_MESSAGE_BYTES, Accumulator
from ..config import WorkerSettings
from ..metrics import AggregatorMetrics
from ..topics import ensure_topics, first_offset_at, log_offset
from . import ProducerDeadLetters

__all__ = ["AiokafkaDriver"]

log = logging.getLogger("ldpstream.aggregator")


class _ConsumerBroker(ProducerDeadLetters):
    """The :class:`~aggregator.accumulator.Broker` of an ``AIOKafkaConsumer`` and the
    dead-letter producer (both made and started by :meth:`AiokafkaDriver.run`)."""

    def __init__(self, settings: WorkerSettings) -> None:
        self.topic, self.dlq_topic = settings.reports_topic, settings.dlq_topic
        self.bootstrap = settings.kafka_bootstrap
        self.security = settings.kafka_security.aiokafka()
        self.consumer: Any = None

    async def committed(self, partition: int) -> int | None:
        from aiokafka import TopicPartition

        res = await self.consumer.committed(TopicPartition(self.topic, partition))
        return None if res is None else int(res)

    async def seek(self, offsets: Mapping[int, int]) -> None:
        from aiokafka import TopicPartition

        for p, off in offsets.items():
            self.consumer.seek(TopicPartition(self.topic, p), off)

    async def commit(self, offsets: Mapping[int, int]) -> None:
        from aiokafka import TopicPartition

        await self.consumer.commit({TopicPartition(self.topic, p): off
                                    for p, off in offsets.items()})

    async def log_start(self, partition: int) -> int:
        return await log_offset(self.consumer, self.topic, partition, end=False)

    async def log_end(self, partition: int) -> int:
        return await log_offset(self.consumer, self.topic, partition, end=True)

    async def next_offset(self, partition: int, offset: int) -> int | None:
        return await first_offset_at(self.bootstrap, self.topic, partition, offset,
                                     **self.security)


class AiokafkaDriver:
    """Run one accumulator with a plain aiokafka consumer group member.

    ``settings``, ``redis`` (sync) and ``metrics`` are the accumulator's (``self.acc``),
    built here on this driver's consumer and producer.
    """

    def __init__(self, settings: WorkerSettings, redis: Any, metrics: AggregatorMetrics) -> None:
        self.settings = settings
        self._broker = _ConsumerBroker(settings)
        self.acc = Accumulator(settings=settings, redis=redis, metrics=metrics,
                               broker=self._broker)

    async def run(self, stop: asyncio.Event, ready: asyncio.Event | None = None) -> None:
        """Consume until ``stop`` is set, then flush and close the Kafka clients."""
        from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
        from aiokafka.abc import ConsumerRebalanceListener

        acc, s = self.acc, self.settings
        topic = s.reports_topic

        class _Listener(ConsumerRebalanceListener):  # type: ignore[misc]
            async def on_partitions_revoked(self, revoked: Any) -> None:
                await acc.revoke([tp.partition for tp in revoked])

            async def on_partitions_assigned(self, assigned: Any) -> None:
                await acc.assign([tp.partition for tp in assigned if tp.topic == topic])

        security = s.kafka_security.aiokafka()
        await ensure_topics(s.kafka_bootstrap, [topic, s.dlq_topic], s.topic_partitions,
                            replication=s.topic_replication,
                            min_isr=s.topic_min_isr, **security)
        producer = self._broker.producer = AIOKafkaProducer(
            bootstrap_servers=s.kafka_bootstrap, acks="all", linger_ms=5,
            max_request_size=DLQ_REQUEST_BYTES, **security)
        consumer = self._broker.consumer = AIOKafkaConsumer(
            bootstrap_servers=s.kafka_bootstrap, group_id=s.consumer_group, **security,
            enable_auto_commit=False, auto_offset_reset="earliest",
            session_timeout_ms=s.session_timeout_ms,
            heartbeat_interval_ms=s.heartbeat_ms, max_poll_interval_ms=s.max_poll_interval_ms,
            rebalance_timeout_ms=min(60_000, s.max_poll_interval_ms),
            fetch_max_bytes=64 << 20, max_partition_fetch_bytes=MAX_MESSAGE_BYTES)
        await producer.start()
        try:
            await consumer.start()
            consumer.subscribe([topic], listener=_Listener())
            if ready is not None:
                ready.set()
            last_flush = time.monotonic()
            interval = s.flush_interval_ms / 1000
            while not stop.is_set():
                acc.stats.last_tick = time.monotonic()
                batch = await consumer.getmany(timeout_ms=min(100, s.flush_interval_ms),
                                               max_records=s.poll_records)
                for tp, msgs in batch.items():
                    await acc.process(tp.partition, msgs)
                idle = not any(batch.values()) and acc.pending_reports > 0
                if (idle or acc.pending_reports >= s.flush_max_reports
                        or time.monotonic() - last_flush >= interval):
                    await acc.try_flush()
                    last_flush = time.monotonic()
                    acc.observe_lag(lambda p: consumer.highwater(TopicPartition(topic, p)))
            try:
                await acc.flush()
            except Exception:
                log.exception("final flush failed; the next worker resumes from the watermark")
        finally:
            await consumer.stop()
            await producer.stop()
