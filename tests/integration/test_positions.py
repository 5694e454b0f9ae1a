"""Positions come from Redis, whatever offsets the consumer group holds in the broker.

A committed offset of the worker's group *ahead* of the Redis watermark (another
client committed it) would, left alone, make the worker skip records: Faust seeks
every partition to the group's committed offset after its assignment hook
(``perform_seek``), undoing the seek to the watermark.  The Faust driver notices
the jump on the partition's first record and seeks back; the direct driver never
seeks to a committed offset.  Either way every report is counted exactly once.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from aggregator.topics import ensure_topics
from ldpcore.collection import CollectionSpec
from ldpstream.storage import CollectionCatalogue, load_state, read_watermarks
from producer.sdk import Client

from .helpers import WorkerProcess, wait_for, worker_env

pytestmark = pytest.mark.integration

SPEC = CollectionSpec.from_dict({"id": "pos", "oracle": {"mechanism": "grr", "epsilon": 1.0},
                                 "domain": {"kind": "integers", "low": 0, "high": 15}})
PER_PARTITION = 120
AHEAD = 80


async def _committed(bootstrap: str, group: str, topic: str) -> dict[int, int | None]:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    c = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    await c.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(4)]
        c.assign(tps)
        return {tp.partition: await c.committed(tp) for tp in tps}
    finally:
        await c.stop()


async def _commit(bootstrap: str, group: str, topic: str, offsets: dict[int, int]) -> None:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    c = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    await c.start()
    try:
        tps = {TopicPartition(topic, p): off for p, off in offsets.items()}
        c.assign(list(tps))
        await c.commit(tps)
        for tp, off in tps.items():
            assert await c.committed(tp) == off
    finally:
        await c.stop()


def test_a_committed_offset_ahead_of_the_watermark_does_not_skip_records(
        kafka: Any, redis_client: Any, redis_server: Any, ldp_names: dict[str, str],
        engine: str, tmp_path: Path) -> None:
    CollectionCatalogue(redis_client, ldp_names["prefix"]).register(SPEC)
    asyncio.run(ensure_topics(kafka.bootstrap, [ldp_names["topic"]], 4))
    oracle = SPEC.oracle()
    expected = oracle.new_state()
    rng = np.random.default_rng(3)
    with Client(kafka.bootstrap, ldp_names["topic"]) as client:
        for i in range(4 * PER_PARTITION):
            batch = oracle.perturb(rng.integers(0, 16, 1 + i % 7), rng=rng)
            expected += oracle.aggregate(batch)
            client.send(SPEC, batch, partition=i % 4)
    asyncio.run(_commit(kafka.bootstrap, ldp_names["group"], ldp_names["topic"],
                        {p: AHEAD for p in range(4)}))
    worker = WorkerProcess(worker_env(kafka, redis_server, ldp_names),
                           tmp_path / "w.log").start()
    try:
        wait_for(lambda: read_watermarks(redis_client, ldp_names["topic"], ldp_names["prefix"])
                 == {p: PER_PARTITION - 1 for p in range(4)}, 60, "every partition counted")
        assert load_state(redis_client, SPEC, prefix=ldp_names["prefix"]) == expected
        # The lost-log canary (watermark + 1) is kept up to date: the direct engine in its
        # own group, the Faust engine in "<group>.canary" (Faust's group keeps what the
        # other client committed).
        canary = ldp_names["group"] + (".canary" if engine == "faust" else "")
        wait_for(lambda: asyncio.run(_committed(kafka.bootstrap, canary, ldp_names["topic"]))
                 == {p: PER_PARTITION for p in range(4)}, 10, "canary offsets committed")
        if engine == "faust":
            assert asyncio.run(_committed(kafka.bootstrap, ldp_names["group"],
                                          ldp_names["topic"])) == {p: AHEAD for p in range(4)}
    finally:
        assert worker.stop() == 0, worker.output()[-3000:]
