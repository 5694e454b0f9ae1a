"""Topics of the worker: create the reports and dead-letter topics if they are missing."""

from __future__ import annotations

import asyncio
from typing import Any

from .accumulator import DLQ_REQUEST_BYTES

__all__ = ["ensure_topics"]


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
