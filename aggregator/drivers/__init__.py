"""The two drivers of :class:`aggregator.accumulator.Accumulator`: Faust (default) and aiokafka."""

from __future__ import annotations

from typing import Any

__all__ = ["ProducerDeadLetters"]


class ProducerDeadLetters:
    """:meth:`~aggregator.accumulator.Broker.send_dead_letter` through the driver's aiokafka
    producer (``acks="all"``, set as ``producer`` once the driver runs) to ``dlq_topic``."""

    producer: Any = None
    dlq_topic: str = ""

    async def send_dead_letter(self, value: bytes, key: bytes | None,
                               headers: list[tuple[str, bytes]]) -> Any:
        return await self.producer.send(self.dlq_topic, value=value, key=key, headers=headers)
