"""Topics of the worker: create the reports and dead-letter topics if they are missing;
probe a partition's log for the first record at or after an offset."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from .accumulator import DLQ_REQUEST_BYTES

__all__ = ["ensure_topics", "first_offset_at", "log_offset"]


async def ensure_topics(bootstrap: str, topics: list[str], partitions: int, *,
                        replication: int = 1, min_isr: int = 0,
                        **client_config: Any) -> None:
    """Create the topics if missing (idempotent; bounded retries while the broker starts).

    ``client_config`` carries the security settings (:meth:`KafkaSecurity.aiokafka`);
    ``min_isr`` > 0 sets the topics' ``min.insync.replicas`` (0: the broker's default).
    """
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic
    from aiokafka.errors import TopicAlreadyExistsError

    last: Exception | None = None
    for _ in range(40):
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, **client_config)
        try:
            await admin.start()
            existing = set(await admin.list_topics())
            # Room for the largest message a worker fetches, on the reports topic and on
            # the dead-letter topic that receives it back (Kafka's default is 1 MB).
            configs = {"max.message.bytes": str(DLQ_REQUEST_BYTES)}
            if min_isr > 0:
                configs["min.insync.replicas"] = str(min_isr)
            new = [NewTopic(t, partitions, replication, topic_configs=configs)
                   for t in topics if t not in existing]
            if new:
                try:
                    await admin.create_topics(new)
                except TopicAlreadyExistsError:
                    pass
            return
        except Exception as exc:
            last = exc
            await asyncio.sleep(0.25)
        finally:
            await admin.close()
    raise RuntimeError(f"could not create topics {topics} on {bootstrap}: {last}")


async def log_offset(consumer: Any, topic: str, partition: int, *, end: bool) -> int:
    """The first (``end``: one past the last) offset of ``topic[partition]``'s log, asked
    through ``consumer`` (an aiokafka consumer: both engines have one)."""
    from aiokafka import TopicPartition

    tp = TopicPartition(topic, partition)
    offsets = consumer.end_offsets if end else consumer.beginning_offsets
    return int((await offsets([tp]))[tp])


async def first_offset_at(bootstrap: str, topic: str, partition: int, offset: int, *,
                          timeout: float = 5.0, **client_config: Any) -> int | None:
    """The offset of the first record of ``topic[partition]`` at or after ``offset``.

    A throw-away consumer (no group) fetches one record from ``offset``.  None when no
    record came within ``timeout`` seconds; raises when ``offset`` is outside the log
    (``OffsetOutOfRangeError``: nothing is ever reset past it).
    """
    from aiokafka import AIOKafkaConsumer, TopicPartition

    tp = TopicPartition(topic, partition)
    probe = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None,
                             enable_auto_commit=False, auto_offset_reset="none",
                             max_partition_fetch_bytes=1 << 20, **client_config)
    await probe.start()
    try:
        probe.assign([tp])
        probe.seek(tp, offset)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            batch = await probe.getmany(tp, timeout_ms=500, max_records=1)
            for m in batch.get(tp, []):
                return int(m.offset)
        return None
    finally:
        await probe.stop()
