"""aggregator.drivers.aiokafka: the consumer's side of the accumulator's broker (committed
offsets, seeks, the log's ends, the next record), on a real broker.  The driver's whole run
(rebalances, faults) is in tests/integration, every test of which runs on this engine too."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

from aggregator.config import WorkerSettings
from aggregator.drivers.aiokafka import _ConsumerBroker
from aggregator.topics import ensure_topics

from ..test_topics import produce

pytestmark = pytest.mark.any_broker


def test_positions_commit_read_back_seek_and_probe_the_log(kafka: Any) -> None:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    topic, group = f"pos-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"

    async def run() -> None:
        await ensure_topics(kafka.bootstrap, [topic], 1)
        await produce(kafka.bootstrap, topic, 4)
        consumer = AIOKafkaConsumer(bootstrap_servers=kafka.bootstrap, group_id=group,
                                    enable_auto_commit=False)
        await consumer.start()
        try:
            tp = TopicPartition(topic, 0)
            consumer.assign([tp])
            pos = _ConsumerBroker(WorkerSettings.from_env({
                "LDP_KAFKA_BOOTSTRAP": kafka.bootstrap, "LDP_REPORTS_TOPIC": topic}))
            pos.consumer = consumer
            assert await pos.committed(0) is None
            assert (await pos.log_start(0), await pos.log_end(0)) == (0, 4)
            await pos.commit({0: 3})
            assert await pos.committed(0) == 3
            await pos.seek({0: 2})
            assert await consumer.position(tp) == 2
            assert await pos.next_offset(0, 1) == 1
        finally:
            await consumer.stop()

    asyncio.run(run())
