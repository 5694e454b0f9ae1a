"""The direct driver (``--engine aiokafka``): an aiokafka consumer loop around the accumulator.

Kept for very high rates of single-report messages, where Faust's per-message
cost dominates.  The loop: ``getmany`` (up to 50,000 records), hand each
partition's records to :meth:`Accumulator.process`, flush when the delta is idle,
large (``LDP_FLUSH_MAX_REPORTS``) or old (``LDP_FLUSH_INTERVAL_MS``).  A
rebalance listener flushes on revoke and restarts assigned partitions from their
Redis watermarks (aiokafka rebalances eagerly: revoke always precedes assign).
A position outside the log resets to the log start (``auto_offset_reset=earliest``);
the offsets a batch jumps over are checked against the broker's log start first
(:meth:`Accumulator.check_jumps`), so records deleted before they were counted are
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
from ..topics import ensure_topics, first_offset_at

__all__ = ["AiokafkaDriver"]

log = logging.getLogger("ldpstream.aggregator")


class _ConsumerPositions:
    """:class:`~aggregator.accumulator.Positions` of an ``AIOKafkaConsumer``."""

    def __init__(self, consumer: Any, topic: str, bootstrap: str = "",
                 security: dict[str, Any] | None = None) -> None:
        self.consumer, self.topic = consumer, topic
        self.bootstrap, self.security = bootstrap, security or {}

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
        from aiokafka import TopicPartition

        tp = TopicPartition(self.topic, partition)
        return int((await self.consumer.beginning_offsets([tp]))[tp])

    async def log_end(self, partition: int) -> int:
        from aiokafka import TopicPartition

        tp = TopicPartition(self.topic, partition)
        return int((await self.consumer.end_offsets([tp]))[tp])

    async def next_offset(self, partition: int, offset: int) -> int | None:
        return await first_offset_at(self.bootstrap, self.topic, partition, offset,
                                     **self.security)


class AiokafkaDriver:
    """Run one accumulator with a plain aiokafka consumer group member."""

    def __init__(self, acc: Accumulator) -> None:
        self.acc = acc
        self._consumer: Any = None

    async def run(self, stop: asyncio.Event, ready: asyncio.Event | None = None) -> None:
        """Consume until ``stop`` is set, then flush and close the Kafka clients."""
        from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
        from aiokafka.abc import ConsumerRebalanceListener

        acc, s = self.acc, self.acc.s
        topic = s.reports_topic

        class _Listener(ConsumerRebalanceListener):  # type: ignore[misc]
            async def on_partitions_revoked(self, revoked: Any) -> None:
                await acc.on_partitions_revoked([tp.partition for tp in revoked])

            async def on_partitions_assigned(self, assigned: Any) -> None:
                await acc.on_partitions_assigned([tp.partition for tp in assigned
                                                  if tp.topic == topic])

        security = s.kafka_security.aiokafka()
        await ensure_topics(s.kafka_bootstrap, [topic, s.dlq_topic], s.topic_partitions,
                            replication=s.topic_replication,
                            min_isr=s.topic_min_isr, **security)
        producer = AIOKafkaProducer(bootstrap_servers=s.kafka_bootstrap, acks="all",
                                    linger_ms=5, max_request_size=DLQ_REQUEST_BYTES, **security)
        consumer = self._consumer = AIOKafkaConsumer(
            bootstrap_servers=s.kafka_bootstrap, group_id=s.consumer_group, **security,
            enable_auto_commit=False, auto_offset_reset="earliest",
            session_timeout_ms=s.session_timeout_ms,
            heartbeat_interval_ms=s.heartbeat_ms, max_poll_interval_ms=s.max_poll_interval_ms,
            rebalance_timeout_ms=min(60_000, s.max_poll_interval_ms),
            fetch_max_bytes=64 << 20, max_partition_fetch_bytes=MAX_MESSAGE_BYTES)
        acc.producer = producer
        acc.positions = _ConsumerPositions(consumer, topic, s.kafka_bootstrap, security)
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
                async with acc._lock:
                    for tp, msgs in batch.items():
                        try:
                            await acc.check_jumps(tp.partition, msgs)
                            acc.process(tp.partition, msgs)
                        except Exception:  # Redis unreachable for a collection lookup
                            log.exception("partition %d: processing failed; reading it again",
                                          tp.partition)
                            pos = acc.assigned().get(tp.partition)
                            if pos is not None:
                                consumer.seek(tp, pos)
                idle = not any(batch.values()) and acc.has_delta
                if (idle or acc.pending_reports >= s.flush_max_reports
                        or time.monotonic() - last_flush >= interval):
                    await acc.try_flush()
                    last_flush = time.monotonic()
                    self._observe_lag()
            try:
                await acc.flush()
            except Exception:
                log.exception("final flush failed; the next worker resumes from the watermark")
        finally:
            await consumer.stop()
            await producer.stop()

    def _observe_lag(self) -> None:
        from aiokafka import TopicPartition

        topic = self.acc.s.reports_topic
        self.acc.observe_lag(lambda p: self._consumer.highwater(TopicPartition(topic, p)))
