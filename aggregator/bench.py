"""``ldpstream bench pipeline``: raw aiokafka consume vs each engine, per message size.

Everything runs against an embedded broker (tansu, or Apache Kafka with ``--broker kafka``)
and a private Redis started here.
For each message size (reports per message, by default 1 and 512 reports of GRR
d = 64: 64 B and 1,086 B; 4,096 reports of OUE d = 64: 32,833 B) a topic of 4
partitions is filled once, then:

* raw: a plain ``AIOKafkaConsumer`` reads the topic (from the beginning again
  whenever it reaches the end) and counts records;
* each engine: one worker (:func:`aggregator.worker.run_worker`) in this process
  counts the topic into Redis; its rate is that of *flushed* reports.

Every figure is a steady-state rate: sampled every 0.1 s, starting ``warmup``
seconds after the first record arrived (the group has joined by then) and ending
before the topic is drained; the window must last at least ``seconds``.  If a
worker drains the topic too early the topic is made larger and the case runs
again.  Producing is not measured.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["run_from_args", "pipeline", "Rate", "steady_rate"]

SIZES = (1, 512, 4096)
ENGINES = ("faust", "aiokafka")


@dataclass
class Rate:
    """A steady-state rate (units/s) measured over ``seconds``."""

    rate: float
    seconds: float
    complete: bool = True
    """False if the window is shorter than asked (the topic drained too early)."""


def steady_rate(samples: list[tuple[float, int]], warmup: float, total: int) -> Rate:
    """Rate between ``warmup`` s after the first progress and the last sample before ``total``.

    ``samples`` are (monotonic time, cumulative count).

    >>> s = [(t / 10, 0 if t < 5 else 100 * (t - 5)) for t in range(0, 200)]
    >>> r = steady_rate(s, 1.0, 100 * 194)
    >>> round(r.rate), round(r.seconds, 1)
    (1000, 18.2)
    """
    first = next((t for t, c in samples if c > 0), None)
    if first is None:
        return Rate(0.0, 0.0, False)
    start = next(((t, c) for t, c in samples if t >= first + warmup), None)
    end = None
    for t, c in samples:
        if c >= total:
            break
        end = (t, c)
    if start is None or end is None or end[0] <= start[0]:
        return Rate(0.0, 0.0, False)
    secs = end[0] - start[0]
    return Rate((end[1] - start[1]) / secs, secs)


def _produce(bootstrap: str, topic: str, spec: Any, messages: int, batch: int,
             partitions: int = 4) -> int:
    """``messages`` messages of ``batch`` reports, round-robin over the partitions; bytes each."""
    from kafka import KafkaProducer

    from ldpcore.message import encode_message

    oracle = spec.oracle()
    rng = np.random.default_rng(1)
    # A pool of distinct encoded batches, re-sent round-robin: producing is not measured.
    pool = [encode_message(spec, oracle.perturb(rng.integers(0, spec.domain.size, batch),
                                                rng=rng)) for _ in range(16)]
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks=1, linger_ms=50,
                             batch_size=1 << 20, max_request_size=16 << 20)
    key = spec.id.encode()
    try:
        send = producer.send
        for i in range(messages):
            send(topic, key=key, value=pool[i & 15], partition=i % partitions)
        producer.flush(600)
    finally:
        producer.close(10)
    return int(np.mean([len(v) for v in pool]))


async def _raw_consume(bootstrap: str, topic: str, seconds: float, warmup: float) -> Rate:
    """Records/s of a plain consumer re-reading the topic for ``warmup + seconds``."""
    from aiokafka import AIOKafkaConsumer, TopicPartition

    c = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                         fetch_max_bytes=64 << 20, max_partition_fetch_bytes=16 << 20)
    await c.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(4)]
        c.assign(tps)
        await c.seek_to_beginning(*tps)
        ends = await c.end_offsets(tps)
        n, t0 = 0, time.monotonic()
        start: tuple[float, int] | None = None
        while True:
            got = await c.getmany(timeout_ms=500, max_records=50_000)
            n += sum(len(msgs) for msgs in got.values())
            now = time.monotonic()
            if start is None and n and now - t0 >= warmup:
                start = (now, n)
            if start is not None and now - start[0] >= seconds:
                return Rate((n - start[1]) / (now - start[0]), now - start[0])
            for tp in tps:  # at the end of a partition: read it again
                if await c.position(tp) >= ends[tp]:
                    c.seek(tp, 0)
    finally:
        await c.stop()


def _engine_process(settings: Any, total_reports: int, warmup: float, seconds: float,
                    timeout: float) -> tuple[Rate, dict[str, Any]]:
    """:func:`_engine` in a fresh interpreter (no state left over from another engine)."""
    import dataclasses
    import json
    import subprocess
    import sys

    fields = {f.name: getattr(settings, f.name) for f in dataclasses.fields(settings)
              if f.name not in ("kafka_security", "redis_options")}
    job = json.dumps({"settings": fields, "total": total_reports, "warmup": warmup,
                      "seconds": seconds, "timeout": timeout})
    root = Path(__file__).resolve().parents[1]
    proc = subprocess.run([sys.executable, "-m", "aggregator.bench", job], cwd=root,
                          capture_output=True, text=True, timeout=timeout + 120)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"engine run failed ({proc.returncode}): {proc.stderr[-2000:]}")
    out = json.loads(lines[-1])
    return Rate(out["rate"], out["seconds"], out["complete"]), out["stats"]


def _child(job_json: str) -> int:
    import json

    import redis as redis_lib

    from .config import WorkerSettings

    job = json.loads(job_json)
    settings = WorkerSettings(**job["settings"])
    rc = redis_lib.Redis.from_url(settings.redis_url)
    try:
        rate, st = asyncio.run(_engine(settings, rc, job["total"], job["warmup"],
                                       job["seconds"], job["timeout"]))
    finally:
        rc.close()
    print(json.dumps({"rate": rate.rate, "seconds": rate.seconds, "complete": rate.complete,
                      "stats": {"flushes": st.flushes, "counted": st.counted}}))
    return 0


async def _engine(settings: Any, redis: Any, total_reports: int, warmup: float,
                  seconds: float, timeout: float) -> tuple[Rate, Any]:
    """Run one worker until the topic is counted or the window is long enough."""
    from prometheus_client import CollectorRegistry

    from .metrics import AggregatorMetrics
    from .worker import make_driver, run_worker

    worker = make_driver(settings, redis, AggregatorMetrics(CollectorRegistry()))
    acc = worker.acc
    stop = asyncio.Event()
    task = asyncio.create_task(run_worker(worker, stop))
    samples: list[tuple[float, int]] = []
    deadline = time.monotonic() + timeout
    first: float | None = None
    while acc.stats.counted < total_reports and time.monotonic() < deadline \
            and not task.done():
        now = time.monotonic()
        samples.append((now, acc.stats.counted))
        if first is None and acc.stats.counted:
            first = now
        if first is not None and now - first > warmup + seconds + 0.5:
            break  # long enough: no need to drain the topic
        await asyncio.sleep(0.1)
    samples.append((time.monotonic(), acc.stats.counted))
    stop.set()
    await task
    return steady_rate(samples, warmup, total_reports), acc.stats


def _memory(redis: Any, prefix: str, cid: str) -> int:
    total = 0
    for key in redis.scan_iter(f"{prefix}state:{cid}:*"):
        total += int(redis.memory_usage(key) or 0)
    total += int(redis.memory_usage(f"{prefix}windows:{cid}") or 0)
    return total


@dataclass
class _Bench:
    """One run of :func:`pipeline`: its servers, what it measures and where it writes."""

    bootstrap: str
    redis_url: str
    redis: Any
    engines: tuple[str, ...]
    seconds: float
    warmup: float
    out: Callable[[str], Any]
    prefixes: list[str]

    def engine_rates(self, topic: str, spec: Any, size: int,
                     total: int) -> dict[str, Rate]:
        """Each engine counting ``topic`` in a worker process of its own."""
        from ldpstream.storage import CollectionCatalogue

        from .config import WorkerSettings

        rates: dict[str, Rate] = {}
        for eng in self.engines:
            # its own Redis prefix: watermarks and counts of this run only
            prefix = f"{topic}-{eng}:"
            CollectionCatalogue(self.redis, prefix).register(spec)
            self.prefixes.append(prefix)
            # "faust:3600000": the engine with that LDP_MAX_POLL_INTERVAL_MS
            name, _, poll_ms = eng.partition(":")
            s = WorkerSettings(kafka_bootstrap=self.bootstrap, redis_url=self.redis_url,
                               redis_prefix=prefix,
                               reports_topic=topic, dlq_topic="bench-dlq",
                               consumer_group=f"bench-{topic}-{name}{poll_ms}",
                               flush_interval_ms=200, engine=name,
                               max_poll_interval_ms=int(poll_ms or 300_000))
            rate, st = _engine_process(s, total, self.warmup, self.seconds, 900)
            rates[eng] = rate
            self.out(f"  {eng:<13} {rate.rate:>14,.0f} reports/s "
                     f"({rate.rate / size:,.0f} msg/s over {rate.seconds:.1f} s; "
                     f"{st['flushes']} flushes, counted {st['counted']:,}/{total:,})"
                     + ("" if rate.complete and rate.seconds >= self.seconds
                        else "  [window too short]"))
        return rates

    def size(self, size: int, spec: Any, mech: str, msgs: int) -> tuple[dict[str, Rate], int]:
        """Raw consume and every engine on a topic of ``msgs`` messages of ``size``
        reports, made larger (up to three times) while a worker drains it too early;
        the rates and the bytes of one message."""
        from .topics import ensure_topics

        attempt = 0
        while True:
            attempt += 1
            topic = f"bench-{size}-{attempt}"
            asyncio.run(ensure_topics(self.bootstrap, [topic, "bench-dlq"], 4))
            t = time.perf_counter()
            nbytes = _produce(self.bootstrap, topic, spec, msgs, size)
            self.out(f"[{size} {mech} reports/message, {nbytes:,} B] produced "
                     f"{msgs:,} messages "
                     f"in {time.perf_counter() - t:.1f} s")
            raw = asyncio.run(_raw_consume(self.bootstrap, topic, self.seconds, self.warmup))
            rates = {"raw": Rate(raw.rate * size, raw.seconds)}
            self.out(f"  raw consume   {rates['raw'].rate:>14,.0f} reports/s "
                     f"({raw.rate:,.0f} msg/s over {raw.seconds:.1f} s)")
            rates.update(self.engine_rates(topic, spec, size, msgs * size))
            short = [e for e in self.engines if rates[e].seconds < self.seconds]
            if not short or attempt >= 3:
                return rates, nbytes
            fastest = max(rates[e].rate for e in short) / size
            msgs = int(max(2 * msgs, fastest * (self.seconds + self.warmup + 2) * 1.3))
            self.out(f"  topic drained too early: again with {msgs:,} messages")


def _bench_spec(mech: str, domain_size: int) -> Any:
    from ldpcore.collection import CollectionSpec

    return CollectionSpec.from_dict({"id": "bench", "oracle": {"mechanism": mech,
                                                                "epsilon": 1.0},
                                     "domain": {"kind": "integers", "low": 0,
                                                "high": domain_size - 1}})


def pipeline(sizes: tuple[int, ...] = SIZES, engines: tuple[str, ...] = ENGINES,
             seconds: float = 10.0, warmup: float = 1.5, mechanism: str = "grr",
             domain_size: int = 64, initial_messages: dict[int, int] | None = None,
             out: Callable[[str], Any] = print,
             mechanisms: dict[int, str] | None = None,
             broker: str = "tansu") -> dict[Any, Any]:
    """Run the benchmark; return ``{(size, who): Rate}`` (rates in reports/s) and bytes.

    ``mechanisms`` overrides ``mechanism`` for some sizes (default: OUE for 4,096).
    """
    import redis as redis_lib

    from ldpstream.dev.servers import start_broker, start_redis

    mechs = {4096: "oue"} if mechanisms is None else mechanisms
    # first guesses, doubled while a worker drains the topic before the window is long enough
    guess = {1: 8_000_000, 512: 2_000_000, 4096: 80_000}
    guess.update(initial_messages or {})
    res: dict[Any, Any] = {}
    with tempfile.TemporaryDirectory(prefix="ldp-bench-") as tmp:
        k, r = start_broker(broker, Path(tmp)), start_redis(Path(tmp))
        out(f"broker: {broker} at {k.bootstrap}")
        rc = redis_lib.Redis.from_url(r.url)
        bench = _Bench(k.bootstrap, r.url, rc, engines, seconds, warmup, out, [])
        try:
            for size in sizes:
                mech = mechs.get(size, mechanism)
                rates, nbytes = bench.size(size, _bench_spec(mech, domain_size), mech,
                                           guess.get(size, 100_000))
                for who, rate in rates.items():
                    res[(size, who)] = rate
                res[(size, "bytes")] = nbytes
                res[(size, "mechanism")] = mech
            out("")
            out(table(res, sizes, engines))
            mem = {pfx: _memory(rc, pfx, "bench") for pfx in bench.prefixes}
            res["memory"] = max(mem.values(), default=0)
            out(f"Redis memory of 'bench' per run: {min(mem.values(), default=0):,} to "
                f"{res['memory']:,} B, whatever the number of reports counted (state size is "
                "independent of n)")
        finally:
            rc.close()
            k.stop()
            r.stop()
    return res


def table(res: dict[Any, Any], sizes: tuple[int, ...], engines: tuple[str, ...]) -> str:
    """The results as a Markdown table (reports/s and ratio to raw consume)."""
    head = "| reports/message | message | raw consume | " + " | ".join(
        f"{e} | {e}/raw" for e in engines) + " |"
    rows = [head, "|" + "---|" * (3 + 2 * len(engines))]
    for size in sizes:
        raw = res[(size, "raw")].rate
        cells = [f"{size:,}", f"{res[(size, 'mechanism')]}, {res[(size, 'bytes')]:,} B",
                 f"{raw:,.0f}"]
        for e in engines:
            r = res[(size, e)]
            cells += [f"{r.rate:,.0f}" + ("" if r.seconds >= 10 else " (short)"),
                      f"{r.rate / raw:.2f}" if raw else "n/a"]
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


def run_from_args(args: argparse.Namespace) -> int:
    sizes: list[int] = []
    mechs: dict[int, str] = {}
    for item in args.sizes.split(","):  # "4096:oue" = 4,096 OUE reports per message
        n, _, mech = item.strip().partition(":")
        sizes.append(int(n))
        mechs[int(n)] = mech or args.mechanism
    engines = tuple(e.strip() for e in args.engines.split(",") if e.strip())
    pipeline(tuple(sizes), engines, seconds=args.seconds, mechanism=args.mechanism,
             domain_size=args.domain_size, mechanisms=mechs,
             broker=getattr(args, "broker", "tansu"))
    return 0


if __name__ == "__main__":  # one engine run of the benchmark, in its own interpreter
    import sys

    logging.basicConfig(level=logging.WARNING)
    sys.exit(_child(sys.argv[1]))
