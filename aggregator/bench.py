"""``ldpstream bench pipeline``: raw aiokafka consume rate vs the aggregator's end-to-end rate.

Everything runs against the embedded tansu broker and a private Redis started here.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from ldpstream.storage import DEFAULT_PREFIX

__all__ = ["run_from_args", "pipeline"]


def _produce(bootstrap: str, topic: str, spec: Any, reports: int, batch: int,
             partitions: int = 4) -> int:
    from kafka import KafkaProducer

    from ldpcore.collection import encode_message

    oracle = spec.oracle()
    rng = np.random.default_rng(1)
    # A pool of distinct encoded batches, re-sent round-robin: producing is not measured.
    pool = [encode_message(spec, oracle.perturb(rng.integers(0, spec.domain.size, batch),
                                                rng=rng)) for _ in range(16)]
    msgs = reports // batch
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=50,
                             batch_size=1 << 20, max_request_size=16 << 20)
    try:
        for i in range(msgs):
            producer.send(topic, key=spec.id.encode(), value=pool[i % len(pool)],
                          partition=i % partitions)
        producer.flush(120)
    finally:
        producer.close(10)
    return msgs


async def _raw_consume(bootstrap: str, topic: str, messages: int) -> float:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    c = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                         fetch_max_bytes=64 << 20, max_partition_fetch_bytes=16 << 20)
    await c.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(4)]
        c.assign(tps)
        await c.seek_to_beginning(*tps)
        await c.getmany(*tps, timeout_ms=0)  # connect before the clock starts
        n, t0 = 0, time.perf_counter()
        deadline = time.monotonic() + 600
        while n < messages and time.monotonic() < deadline:
            got = await c.getmany(timeout_ms=500, max_records=50_000)
            n += sum(len(msgs) for msgs in got.values())
        return n / (time.perf_counter() - t0)
    finally:
        await c.stop()


async def _aggregate(settings: Any, redis: Any, expected: int) -> tuple[float, Any]:
    from prometheus_client import CollectorRegistry

    from .metrics import AggregatorMetrics
    from .worker import Aggregator

    agg = Aggregator(settings, redis, AggregatorMetrics(CollectorRegistry()))
    stop = asyncio.Event()
    task = asyncio.create_task(agg.run(stop))
    deadline = time.monotonic() + 900
    while agg.stats.counted < expected and time.monotonic() < deadline and not task.done():
        await asyncio.sleep(0.05)
    stop.set()
    await task
    st = agg.stats
    secs = (st.last_flush_at or 0) - (st.first_message_at or 0)
    return st.counted / max(secs, 1e-9), st


def _memory(redis: Any, prefix: str, cid: str) -> int:
    total = 0
    for key in redis.scan_iter(f"{prefix}state:{cid}:*"):
        total += int(redis.memory_usage(key) or 0)
    total += int(redis.memory_usage(f"{prefix}windows:{cid}") or 0)
    return total


def pipeline(reports: int, batch: int, single: int, mechanism: str, domain_size: int,
             out: Any = print, broker: str = "tansu") -> dict[str, float]:
    import redis as redis_lib

    from ldpcore.collection import CollectionSpec
    from ldpstream.dev.servers import start_broker, start_redis
    from ldpstream.storage import CollectionCatalog

    from .config import WorkerSettings
    from .worker import ensure_topics

    spec = CollectionSpec.from_dict({"id": "bench", "oracle": {"mechanism": mechanism,
                                                                "epsilon": 1.0},
                                     "domain": {"kind": "integers", "low": 0,
                                                "high": domain_size - 1}})
    res: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="ldp-bench-") as tmp:
        k, r = start_broker(broker, Path(tmp)), start_redis(Path(tmp))
        out(f"broker: {broker} at {k.bootstrap}")
        rc = redis_lib.Redis.from_url(r.url)
        try:
            CollectionCatalog(rc).register(spec)
            s = WorkerSettings(kafka_bootstrap=k.bootstrap, redis_url=r.url,
                               reports_topic="bench-big", dlq_topic="bench-dlq",
                               consumer_group="bench-big", flush_interval_ms=200)
            asyncio.run(ensure_topics(k.bootstrap, ["bench-big", "bench-small", "bench-dlq"], 4))
            t = time.perf_counter()
            msgs = _produce(k.bootstrap, "bench-big", spec, reports, batch)
            n = msgs * batch
            out(f"produced {n:,} reports in {msgs:,} messages of {batch} "
                f"({time.perf_counter() - t:.1f} s)")
            raw = asyncio.run(_raw_consume(k.bootstrap, "bench-big", msgs)) * batch
            out(f"raw aiokafka consume:        {raw:>14,.0f} reports/s")
            agg, st = asyncio.run(_aggregate(s, rc, n))
            out(f"aggregator end-to-end:       {agg:>14,.0f} reports/s  "
                f"({st.flushes} flushes, counted {st.counted:,})")
            out(f"ratio aggregator / raw:      {agg / raw:>14.2f}")
            mem_big = _memory(rc, DEFAULT_PREFIX, spec.id)
            res.update(raw=raw, aggregator=agg, ratio=agg / raw)
            if single:
                _produce(k.bootstrap, "bench-small", spec, single, 1)
                s1 = WorkerSettings(kafka_bootstrap=k.bootstrap, redis_url=r.url,
                                    reports_topic="bench-small", dlq_topic="bench-dlq",
                                    consumer_group="bench-small", flush_interval_ms=200)
                res["single"], _ = asyncio.run(_aggregate(s1, rc, single))
            mem_after = _memory(rc, DEFAULT_PREFIX, spec.id)
            if single:
                out(f"single-report messages:      {res['single']:>14,.0f} messages/s")
            out(f"Redis memory of '{spec.id}': {mem_big:,} B after {n:,} reports, "
                f"{mem_after:,} B after {n + single:,} (state size is independent of n)")
            res.update(memory_before=mem_big, memory_after=mem_after)
        finally:
            rc.close()
            k.stop()
            r.stop()
    return res


def run_from_args(args: argparse.Namespace) -> int:
    pipeline(args.reports, args.batch_size, args.single_messages, args.mechanism,
             args.domain_size, broker=getattr(args, "broker", "tansu"))
    return 0
