"""The worker in-process against the real broker and Redis: DLQ guarantees.

Faults are injected into *our* code (a send that is refused once); Kafka and Redis are
the real servers of the fixtures.  (A mechanism that blows up on one message:
tests/aggregator/test_accumulator.py.)
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import numpy as np
import pytest
from prometheus_client import CollectorRegistry

from aggregator.accumulator import Accumulator, DeadLetterError
from aggregator.config import WorkerSettings
from aggregator.metrics import AggregatorMetrics
from aggregator.topics import ensure_topics
from ldpcore import Reports
from ldpcore.collection import CollectionSpec, encode_message
from ldpstream.storage import CollectionCatalogue, load_state, read_watermarks
from tests.integration.helpers import read_topic

from .records import Rec

pytestmark = pytest.mark.integration

SPEC = CollectionSpec.from_dict({"id": "iso", "oracle": {"mechanism": "grr", "epsilon": 1.0},
                                 "domain": {"kind": "integers", "low": 0, "high": 15}})


def _rec(topic: str, offset: int, value: bytes) -> Rec:
    """A record of partition 0, stamped now (its window is the current one)."""
    return Rec(0, offset, value, topic=topic, key=b"iso", timestamp=int(time.time() * 1000))


class DeadLetters:
    """A broker that sends dead letters through a real producer (no log behind it)."""

    def __init__(self, producer: Any, topic: str) -> None:
        self.producer, self.topic = producer, topic

    async def send_dead_letter(self, value: bytes, key: bytes | None,
                               headers: list[tuple[str, bytes]]) -> Any:
        return await self.producer.send(self.topic, value=value, key=key, headers=headers)

    async def log_start(self, partition: int) -> int:
        return 0

    async def seek(self, offsets: Any) -> None:
        pass

    async def commit(self, offsets: Any) -> None:
        pass


async def _worker(kafka: Any, redis_server: Any, redis_client: Any,
                  names: dict[str, str], producer: Any) -> Accumulator:
    s = WorkerSettings(kafka_bootstrap=kafka.bootstrap, redis_url=redis_server.url,
                       redis_prefix=names["prefix"], reports_topic=names["topic"],
                       dlq_topic=names["dlq"], consumer_group=names["group"])
    CollectionCatalogue(redis_client, names["prefix"]).register(SPEC)
    agg = Accumulator(settings=s, redis=redis_client,
                      metrics=AggregatorMetrics(CollectorRegistry()),
                      broker=DeadLetters(producer, names["dlq"]))  # type: ignore[arg-type]
    await agg.assign([0])
    return agg


def _reports(y: Any) -> Reports:
    o = SPEC.oracle()
    return Reports(o.mechanism, o.fingerprint, {"y": np.asarray(y, dtype=np.uint16)})


def _good(seed: int, n: int = 20) -> bytes:
    """Perturbed-looking reports of values 0..14 (15 is the poison below)."""
    return encode_message(SPEC, _reports(np.random.default_rng(seed).integers(0, 15, n)))


def test_a_refused_dead_letter_blocks_the_watermark_until_it_is_acknowledged(
        kafka: Any, redis_server: Any, redis_client: Any, ldp_names: dict[str, str]) -> None:
    from aiokafka import AIOKafkaProducer
    from aiokafka.errors import KafkaConnectionError

    async def run() -> None:
        await ensure_topics(kafka.bootstrap, [ldp_names["dlq"]], 1)
        producer = AIOKafkaProducer(bootstrap_servers=kafka.bootstrap, acks="all")
        await producer.start()
        real_send = producer.send
        refusals = [1]

        async def send(*args: Any, **kw: Any) -> Any:
            if refusals:
                refusals.pop()
                fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
                fut.set_exception(KafkaConnectionError("broker unreachable"))
                return fut
            return await real_send(*args, **kw)

        producer.send = send
        agg = await _worker(kafka, redis_server, redis_client, ldp_names, producer)
        try:
            await agg.process(0, [_rec(ldp_names["topic"], 0, _good(1)),
                                  _rec(ldp_names["topic"], 1, b"garbage")])
            with pytest.raises(DeadLetterError):
                await agg.flush()
            assert read_watermarks(redis_client, ldp_names["topic"], ldp_names["prefix"]) == {}
            assert load_state(redis_client, SPEC, prefix=ldp_names["prefix"]).n == 0
            assert await agg.flush()
            assert read_watermarks(redis_client, ldp_names["topic"],
                                   ldp_names["prefix"]) == {0: 1}
            assert load_state(redis_client, SPEC, prefix=ldp_names["prefix"]).n == 20
        finally:
            await producer.stop()

    asyncio.run(run())
    dlq = read_topic(kafka.bootstrap, ldp_names["dlq"], 1)
    assert [(m.value, dict(m.headers)["ldp-reason"]) for m in dlq] == [(b"garbage", b"garbage")]


def test_a_dead_letter_too_large_for_the_producer_goes_out_bounded_as_oversize(
        kafka: Any, redis_server: Any, redis_client: Any, ldp_names: dict[str, str]) -> None:
    from aiokafka import AIOKafkaProducer

    huge = b"\x00junk" + bytes(300_000)

    async def run() -> None:
        await ensure_topics(kafka.bootstrap, [ldp_names["dlq"]], 1)
        producer = AIOKafkaProducer(bootstrap_servers=kafka.bootstrap, acks="all",
                                    max_request_size=200_000)
        await producer.start()
        agg = await _worker(kafka, redis_server, redis_client, ldp_names, producer)
        try:
            await agg.process(0, [_rec(ldp_names["topic"], 0, huge),
                                  _rec(ldp_names["topic"], 1, _good(3))])
            assert await agg.flush()
        finally:
            await producer.stop()

    asyncio.run(run())
    (m,) = read_topic(kafka.bootstrap, ldp_names["dlq"], 1)
    h = dict(m.headers)
    assert h["ldp-reason"] == b"oversize" and h["ldp-original-reason"] == b"garbage"
    assert h["ldp-source"] == f"{ldp_names['topic']}:0:0".encode()
    assert h["ldp-original-bytes"] == str(len(huge)).encode()
    assert m.value == huge[:len(m.value)] and 0 < len(m.value) <= 64 << 10
    assert read_watermarks(redis_client, ldp_names["topic"], ldp_names["prefix"]) == {0: 1}
    assert load_state(redis_client, SPEC, prefix=ldp_names["prefix"]).n == 20
