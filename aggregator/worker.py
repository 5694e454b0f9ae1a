"""The aggregator worker: Kafka report batches → validated → local delta → atomic Redis flush.

One accumulator, two drivers.  :class:`aggregator.accumulator.Accumulator` does
everything that decides what is counted; a driver only moves records from Kafka
into it and calls it on rebalances and timers:

* ``faust`` (default, :mod:`aggregator.drivers.faust`): a faust-streaming agent
  taking event batches from the reports topic;
* ``aiokafka`` (:mod:`aggregator.drivers.aiokafka`): a plain aiokafka consumer
  loop, for very high rates of single-report messages.

Exactly-once counting over at-least-once delivery, whichever the driver:

1. On partition assignment the worker reads each partition's watermark ``w``
   (highest offset already counted) from Redis and seeks to ``w + 1``; Kafka's own
   committed offsets are never used as positions.
2. Every accepted message advances the partition's position; a message below the
   position (a replay) is skipped.
3. A flush runs :data:`ldpstream.storage.FLUSH_SCRIPT`: if every touched
   partition's watermark is still what this worker last saw, it adds the delta and
   advances the watermarks, atomically; otherwise (a rebalance handed the partition
   to another worker who flushed) nothing is written, the delta is dropped and the
   worker re-seeks to the Redis watermarks.  A lost reply is the same case: on retry
   the watermark check fails and the worker re-seeks.
4. Bad messages go to the dead-letter topic with headers ``ldp-reason``,
   ``ldp-error``, ``ldp-source``.  A flush first waits for the broker to acknowledge
   every pending dead letter; if one is refused, the flush is not committed (the
   watermark stays below that message) and the dead letters are sent again.  A dead
   letter too large for the broker goes out as a bounded record with reason
   ``oversize``, its first bytes and its original coordinates.
5. No message can stop the worker: decoding raises only ``ReportError`` (with a
   machine-readable reason), and any other exception while handling one message
   dead-letters that message with reason ``internal``.  Infrastructure failures
   (Redis, Kafka) are not the message's fault: they are retried.

A kill at any moment loses only the un-flushed delta, whose messages lie above the
watermark and are consumed again.

About speed (``ldpstream bench pipeline``, README): stock Faust costs a fixed
≈ 70–90 µs per Kafka message whatever its size (its consumer hands every record
through ``wait_first``, a queue and an event object; 11–14k messages/s on two
cores), so the Faust engine reaches 6M reports/s on 1 KB messages and about half
of raw consume on 32 KB ones, but only 2 % of raw on single-report messages.  The
direct driver adds ≈ 0.6 µs per message to aiokafka's own cost (0.65 of raw on
single-report messages, 0.7 on 1 KB ones): use it for floods of tiny messages.
"""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

from .accumulator import (
    MAX_MESSAGE_BYTES,
    Accumulator,
    DeadLetterError,
    WorkerStats,
)
from .config import WorkerSettings
from .metrics import AggregatorMetrics
from .topics import ensure_topics

__all__ = ["DeadLetterError", "Driver", "WorkerStats", "ensure_topics", "MAX_MESSAGE_BYTES",
           "make_driver", "run_worker"]


class Driver(Protocol):
    """A worker: the driver of ``settings.engine`` and the accumulator it built."""

    acc: Accumulator

    async def run(self, stop: asyncio.Event, ready: asyncio.Event | None = None) -> None:
        """Consume until ``stop`` is set, then flush and close the Kafka clients."""


def make_driver(settings: WorkerSettings, redis: Any, metrics: AggregatorMetrics,
                stall_after: float = 30.0) -> Driver:
    """The driver named by ``settings.engine`` (``faust`` or ``aiokafka``), with its
    accumulator (``driver.acc``) built on its Kafka clients."""
    if settings.engine == "faust":
        from .drivers.faust import FaustDriver

        return FaustDriver(settings, redis, metrics, stall_after=stall_after)
    from .drivers.aiokafka import AiokafkaDriver

    return AiokafkaDriver(settings, redis, metrics)


async def run_worker(driver: Driver, stop: asyncio.Event,
                     ready: asyncio.Event | None = None) -> None:
    """Run ``driver`` until ``stop`` is set (then flush and close)."""
    await driver.run(stop, ready)
