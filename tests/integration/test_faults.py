"""The fault suite: every scenario on Apache Kafka, with both engines, under a steady stream.

Each scenario ends with ``n`` and every cell in Redis equal to ldpcore's aggregate of what
the broker acknowledged (less the records deleted before they were counted, where the
scenario deletes some), and proves its premise: the stream made progress between
faults, and the metrics the docs name for the fault are asserted.  docs/faults.md
lists what each fault does, what a user sees, and the recovery times these tests print.

Select them with ``-m faults``; they share the session's broker.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import pytest

from ldpcore.collection import CollectionSpec
from ldpstream.dev.servers import free_port
from ldpstream.storage import CollectionCatalog, read_lost, read_watermarks

from .faults import AckedPublisher, counted, delete_records, metric, scrape
from .helpers import WorkerProcess, log_offsets, wait_for, worker_env

pytestmark = [pytest.mark.integration, pytest.mark.faults, pytest.mark.brokers("kafka")]

SPEC = CollectionSpec.from_dict({"id": "fault", "oracle": {"mechanism": "olh", "epsilon": 1.5},
                                 "domain": {"kind": "integers", "low": 0, "high": 63}})
RATE = 4000.0
"""Reports per second of the steady stream (about 25 messages per second and partition)."""


def assert_exact(redis_client: Any, prefix: str, expected: Any, *workers: WorkerProcess,
                 timeout: float = 90.0) -> float:
    """Wait until Redis holds ``expected`` exactly; the seconds it took."""
    t0 = time.monotonic()
    try:
        wait_for(lambda: counted(redis_client, SPEC, prefix).n >= expected.n, timeout,
                 f"{expected.n} reports counted")
        took = time.monotonic() - t0
        time.sleep(0.5)  # anything counted twice would show up now
        got = counted(redis_client, SPEC, prefix)
        assert got.n == expected.n, f"n = {got.n}, expected {expected.n}"
        assert (got.counts == expected.counts).all(), "cells differ"
    except AssertionError as exc:
        logs = "".join(f"\n--- worker {i} ---\n{w.output()[-5000:]}"
                       for i, w in enumerate(workers))
        raise AssertionError(f"{exc}; counted {counted(redis_client, SPEC, prefix).n} of "
                             f"{expected.n}{logs}") from None
    return took


def progress(redis_client: Any, prefix: str, more: int, timeout: float = 60.0) -> int:
    """Wait until ``more`` reports beyond what is counted now are counted; the new n."""
    target = counted(redis_client, SPEC, prefix).n + more
    wait_for(lambda: counted(redis_client, SPEC, prefix).n >= target, timeout,
             f"the stream making progress (n >= {target})")
    return counted(redis_client, SPEC, prefix).n


def test_a_hole_in_the_log_under_live_traffic_loses_only_the_deleted_records_and_says_so(
        kafka: Any, redis_server: Any, redis_client: Any, ldp_names: dict[str, str],
        tmp_path: Path) -> None:
    topic, prefix = ldp_names["topic"], ldp_names["prefix"]
    CollectionCatalog(redis_client, prefix).register(SPEC)
    port = free_port()
    env = worker_env(kafka, redis_server, ldp_names, LDP_METRICS_PORT=str(port))
    worker = WorkerProcess(env, tmp_path / "w.log").start()
    pub = AckedPublisher(kafka.bootstrap, topic, SPEC, rate=RATE, seed=11)
    pub.start()
    try:
        progress(redis_client, prefix, 2000)
        worker.kill9()
        wms = read_watermarks(redis_client, topic, prefix)
        # devices keep sending while nobody counts: 60+ records above every watermark
        wait_for(lambda: all(e > wms.get(p, -1) + 60
                             for p, e in enumerate(log_offsets(kafka.bootstrap, topic)[1])),
                 30, "records above every watermark")
        # retention runs ahead: half of the uncounted records are deleted, the rest (and
        # everything sent from now on) is still in the log
        ends = log_offsets(kafka.bootstrap, topic)[1]
        cut = {p: wms.get(p, -1) + 1 + (ends[p] - wms.get(p, -1) - 1) // 2 for p in range(4)}
        delete_records(kafka.bootstrap, topic, cut)
        holes = {p: (wms.get(p, -1) + 1, cut[p]) for p in range(4)}
        worker = WorkerProcess(env, tmp_path / "w.log").start()
        progress(redis_client, prefix, 4000)
        pub.finish()
        expected = pub.expected(without=holes)
        assert_exact(redis_client, prefix, expected, worker)
        samples = scrape(port)
        lost = read_lost(redis_client, prefix)
        for p, (lo, hi) in holes.items():
            assert metric(samples, "ldp_records_lost_total", partition=str(p)) == hi - lo, (
                p, lo, hi, lost, worker.output()[-8000:])
            assert lost["partitions"][f"{topic}:{p}"] == (hi - lo, f"{lo}-{hi - 1}")
            assert re.search(rf"partition {p} of \S+: records at offsets {lo}\.\.{hi - 1} "
                             "were deleted", worker.output()), worker.output()[-3000:]
        assert lost["records"] == sum(hi - lo for lo, hi in holes.values())
    finally:
        pub.stop()
        worker.stop()
