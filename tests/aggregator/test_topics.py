"""aggregator.topics against a real broker: topics created once, and a partition's log
probed for its next record and its bounds."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

from aggregator.topics import ensure_topics, first_offset_at, log_offset

pytestmark = pytest.mark.any_broker  # the topic calls are the same on every broker


async def produce(bootstrap: str, topic: str, n: int, partition: int = 0) -> None:
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await producer.start()
    try:
        for i in range(n):
            await producer.send_and_wait(topic, f"m{i}".encode(), partition=partition)
    finally:
        await producer.stop()


def test_topics_are_created_once_and_the_next_record_is_found(kafka: Any) -> None:
    from aiokafka import AIOKafkaConsumer
    from aiokafka.admin import AIOKafkaAdminClient

    t1, t2 = f"top-{uuid.uuid4().hex[:8]}", f"dlq-{uuid.uuid4().hex[:8]}"

    async def run() -> None:
        await ensure_topics(kafka.bootstrap, [t1, t2], 3)
        await ensure_topics(kafka.bootstrap, [t1, t2], 3)  # idempotent
        admin = AIOKafkaAdminClient(bootstrap_servers=kafka.bootstrap)
        await admin.start()
        try:
            meta = await admin.describe_topics([t1, t2])
            assert sorted(len(m["partitions"]) for m in meta) == [3, 3]
        finally:
            await admin.close()
        await produce(kafka.bootstrap, t1, 3, partition=1)
        assert await first_offset_at(kafka.bootstrap, t1, 1, 0) == 0
        assert await first_offset_at(kafka.bootstrap, t1, 1, 2) == 2
        assert await first_offset_at(kafka.bootstrap, t1, 1, 3, timeout=1.0) is None
        consumer = AIOKafkaConsumer(bootstrap_servers=kafka.bootstrap)
        await consumer.start()
        try:  # the log's bounds, as both engines' drivers ask them
            assert [await log_offset(consumer, t1, p, end=e) for p in (1, 2)
                    for e in (False, True)] == [0, 3, 0, 0]
        finally:
            await consumer.stop()

    asyncio.run(run())
