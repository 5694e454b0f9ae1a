"""``ldpstream bench freshness`` and ``ldpstream bench scaling``: end-to-end freshness and
worker scaling, on one broker and on the replicated cluster (:mod:`ldpctl.cluster`).

**Freshness** is the time from a device's send to the report being visible in the query
API's ``n``.  A steady background stream (:class:`ldpctl.failover.Traffic`, SDK
producer and gateways) loads the system; meanwhile single reports of an otherwise idle
collection are sent one at a time, each timed until ``GET …/frequencies`` counts it
(:func:`ldpctl.failover.freshness`).  Both paths: straight to Kafka (an idempotent
``acks=all`` producer, flushed at once, as the SDK's ``Client``) and ``POST /v1/reports``
to a gateway.  Default settings of every service.

**Scaling**: a topic of 12 partitions is filled first, then 1, 2 or 4 workers (fresh
consumer group and state each time) count it from the start.  The rate is the one
between a quarter and three quarters of the log counted (the processes' start, the
group's join and the first fetches fall outside it).  On 2 cores the workers share the
CPU with the broker and Redis, so this shows the partition spread and what the engine
costs, not a speed-up beyond two processes (docs/cluster.md).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from ldpcore.collection import CollectionSpec, encode_message

from .cluster import LocalCluster
from .failover import Traffic, freshness, percentile, post_message

__all__ = ["add_bench_cluster_parsers", "run_freshness", "run_scaling"]


def _spec(cid: str) -> CollectionSpec:
    return CollectionSpec.from_dict({"id": cid, "oracle": {"mechanism": "grr", "epsilon": 1.0},
                                     "domain": {"kind": "integers", "low": 0, "high": 15},
                                     "min_reports": 1})


def _cluster(work: Path, *, cluster: bool, engine: str, specs: list[CollectionSpec],
             workers: int = 1, apis: int = 1, gateways: int = 1,
             env: dict[str, str] | None = None, secure: bool = False) -> LocalCluster:
    from ldpstream.storage import CollectionCatalogue

    uid = uuid.uuid4().hex[:6]
    c = LocalCluster(work, secure=secure, engine=engine, brokers=3 if cluster else 1,
                     sentinel=cluster, workers=workers, apis=apis, gateways=gateways,
                     env={"LDP_REPORTS_TOPIC": f"reports-{uid}", "LDP_DLQ_TOPIC": f"dlq-{uid}",
                          "LDP_CONSUMER_GROUP": f"agg-{uid}", "LDP_REDIS_PREFIX": f"b{uid}:",
                          **(env or {})})
    c.start_servers()
    try:
        client = c.redis_client()
        CollectionCatalogue(client, c.env["LDP_REDIS_PREFIX"]).register_all(specs)
        client.close()
        c.start_services()
    except BaseException:
        c.stop()
        raise
    return c


def run_freshness(args: argparse.Namespace) -> int:
    from kafka import KafkaProducer

    rows: list[dict[str, Any]] = []
    setups = [s.strip() for s in args.setups.split(",") if s.strip()]
    engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    for setup in setups:
        for engine in engines:
            load, probe = _spec("bench-load"), _spec("bench-probe")
            with tempfile.TemporaryDirectory(prefix="ldp-fresh-") as tmp:
                t0 = time.monotonic()
                c = _cluster(Path(tmp), cluster=setup == "cluster", engine=engine,
                             specs=[load, probe], workers=2 if setup == "cluster" else 1,
                             apis=2 if setup == "cluster" else 1,
                             gateways=2 if setup == "cluster" else 1)
                up = time.monotonic() - t0
                try:
                    assert c.kafka is not None
                    topic = c.env["LDP_REPORTS_TOPIC"]
                    producer = KafkaProducer(bootstrap_servers=c.kafka.bootstrap, acks="all",
                                             enable_idempotence=True, linger_ms=10,
                                             **c.kafka_config())
                    gws = [str(s.base_url) for s in c.services["gateway"]]
                    api = str(c.services["api"][0].base_url)
                    traffic = Traffic(load, kafka_send=lambda k, v, p: producer.send(
                        topic, key=k, value=v, partition=p), kafka_flush=producer.flush,
                        gateways=gws, rate=args.rate, partitions=c.partitions).start()
                    time.sleep(2.0)

                    def via_kafka(value: bytes) -> None:
                        producer.send(topic, key=probe.id.encode(), value=value)
                        producer.flush()

                    def via_gateway(value: bytes) -> None:
                        status, _ = post_message(gws[0], value)
                        if status != 202:
                            raise RuntimeError(f"gateway answered {status}")

                    for path, send in (("sdk", via_kafka), ("gateway", via_gateway)):
                        secs = freshness(probe, send, api, args.probes)
                        rows.append({"setup": setup, "engine": engine, "path": path,
                                     "probes": len(secs),
                                     "p50_s": round(percentile(secs, 50), 3),
                                     "p99_s": round(percentile(secs, 99), 3),
                                     "max_s": round(max(secs), 3), "up_s": round(up, 1)})
                        print(json.dumps(rows[-1]), flush=True)
                    traffic.stop()
                    producer.close()
                finally:
                    c.stop()
    print("\n| setup | engine | path | probes | p50 (s) | p99 (s) | max (s) |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['setup']} | {r['engine']} | {r['path']} | {r['probes']} | {r['p50_s']} | "
              f"{r['p99_s']} | {r['max_s']} |")
    return 0


def _fill_topic(c: LocalCluster, spec: CollectionSpec, args: argparse.Namespace) -> str:
    """A new topic of ``--partitions`` holding ``--messages`` messages of ``--batch``
    reports each, spread round-robin over the partitions; its name."""
    import numpy as np
    from kafka import KafkaProducer
    from kafka.admin import NewTopic

    assert c.kafka is not None
    rng = np.random.default_rng(1)
    oracle = spec.oracle()
    messages = [encode_message(spec, oracle.perturb(rng.integers(0, 16, args.batch), rng=rng),
                               "binary") for _ in range(64)]
    topic = f"scale-{uuid.uuid4().hex[:6]}"
    admin = c.kafka.admin()
    admin.create_topics([NewTopic(topic, args.partitions, 1)])
    admin.close()
    producer = KafkaProducer(bootstrap_servers=c.kafka.bootstrap, acks=1,
                             linger_ms=20, batch_size=1 << 20)
    for i in range(args.messages):
        producer.send(topic, key=spec.id.encode(), value=messages[i % len(messages)],
                      partition=i % args.partitions)
    producer.flush()
    producer.close()
    return topic


def _count_with(c: LocalCluster, spec: CollectionSpec, topic: str, k: int,
                args: argparse.Namespace) -> dict[str, Any]:
    """``k`` fresh workers (own consumer group and Redis prefix) count the whole topic: the
    row of the table."""
    from ldpstream.storage import CollectionCatalogue, read_watermarks

    ends = {p: len(range(p, args.messages, args.partitions)) - 1
            for p in range(args.partitions)}
    prefix = f"s{k}{uuid.uuid4().hex[:4]}:"
    client = c.redis_client()
    CollectionCatalogue(client, prefix).register(spec)
    c.env = {"LDP_REPORTS_TOPIC": topic, "LDP_REDIS_PREFIX": prefix,
             "LDP_CONSUMER_GROUP": f"g{prefix[:-1]}",
             "LDP_DLQ_TOPIC": f"dlq-{prefix[:-1]}"}
    c.workers, c.apis, c.gateways = k, 0, 0
    t0 = time.monotonic()
    c.start_services()
    first: float | None = None
    samples: list[tuple[float, int]] = []
    while True:
        wms = read_watermarks(client, topic, prefix)
        done = sum(w + 1 for w in wms.values())
        samples.append((time.monotonic(), done))
        if first is None and done > 0:
            first = time.monotonic()
        if all(wms.get(p, -1) >= e for p, e in ends.items()):
            break
        if time.monotonic() - t0 > args.timeout:
            raise RuntimeError(f"{k} worker(s) did not finish in {args.timeout} s")
        time.sleep(0.05)
    took = time.monotonic() - t0
    assert first is not None
    # the steady rate: between a quarter and three quarters of the log counted
    # (the start, the group's join and the first fetches are outside it)
    t25 = next(t for t, d in samples if d >= args.messages // 4)
    t75 = next(t for t, d in samples if d >= 3 * args.messages // 4)
    steady = args.messages // 2 * args.batch / max(t75 - t25, 1e-3)
    for s in c.services.get("worker", []):
        s.stop()
    c.services.clear()
    client.close()
    return {"workers": k, "partitions": args.partitions, "reports": args.messages * args.batch,
            "seconds": round(took, 2), "start_s": round(first - t0, 2),
            "reports_per_s": round(steady)}


def run_scaling(args: argparse.Namespace) -> int:
    spec = _spec("bench-scale")
    counts = [int(x) for x in args.workers.split(",")]
    rows = []
    with tempfile.TemporaryDirectory(prefix="ldp-scale-") as tmp:
        c = LocalCluster(Path(tmp), brokers=1, sentinel=False, workers=0, apis=0, gateways=0,
                         engine=args.engine, partitions=args.partitions)
        c.start_servers()
        try:
            topic = _fill_topic(c, spec, args)
            for k in counts:
                rows.append(_count_with(c, spec, topic, k, args))
                print(json.dumps(rows[-1]), flush=True)
        finally:
            c.stop()
    base = rows[0]["reports_per_s"]
    print("\n| workers | partitions | reports | to first flush (s) | total (s) | reports/s "
          "from 25 % to 75 % of the log | vs 1 |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['workers']} | {r['partitions']} | {r['reports']} | {r['start_s']} | "
              f"{r['seconds']} | {r['reports_per_s']} | {r['reports_per_s'] / base:.2f} |")
    return 0


def add_bench_cluster_parsers(bsub: Any) -> None:
    p = bsub.add_parser("freshness", help="end-to-end freshness (send -> visible in the API's "
                                          "n), p50/p99, one broker and the cluster")
    p.add_argument("--setups", default="one-broker,cluster",
                   help="one-broker (1 Apache Kafka, 1 Redis, 1 of each service) and/or "
                        "cluster (3 brokers, Sentinel, 2 of each service)")
    p.add_argument("--engines", default="faust,aiokafka")
    p.add_argument("--probes", type=int, default=100, help="single reports timed per path")
    p.add_argument("--rate", type=float, default=100.0,
                   help="background load: messages/s on Kafka and per gateway")
    p.set_defaults(func=run_freshness)
    p = bsub.add_parser("scaling", help="throughput of 1, 2, 4 workers over 12 partitions")
    p.add_argument("--workers", default="1,2,4")
    p.add_argument("--partitions", type=int, default=12)
    p.add_argument("--messages", type=int, default=120_000)
    p.add_argument("--batch", type=int, default=64, help="reports per message")
    p.add_argument("--engine", default="faust")
    p.add_argument("--timeout", type=float, default=600.0)
    p.set_defaults(func=run_scaling)
