"""Releasing what is counted (:class:`ldpstream.retention.Janitor`), on both brokers.

While a worker counts a stream, the janitor's rounds delete the records below the Redis
watermarks: on Apache Kafka each partition's log start offset follows its watermark
(never above it: nothing uncounted goes), a worker killed and restarted afterwards
resumes from Redis above the released offsets, and the count equals what was sent,
cell for cell.  tansu 0.6 has no DeleteRecords: the janitor notices once, releases
nothing, and the count is exact all the same.  A worker started with
``LDP_RELEASE_INTERVAL_MS`` runs the janitor itself.  The janitor also drops the entries of
expired windows from the ``windows`` sorted sets, and only those.

One engine (aiokafka) is enough here: the janitor does not depend on the worker's driver.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ldpcore.collection import CollectionSpec
from ldpstream.retention import Janitor
from ldpstream.storage import CollectionCatalogue, Keys, load_state, read_watermarks

from . import helpers
from .helpers import Publisher, WorkerProcess, log_offsets, wait_for, worker_env

pytestmark = pytest.mark.integration

SPEC = CollectionSpec.from_dict({"id": "rel", "oracle": {"mechanism": "grr", "epsilon": 1.0},
                                 "domain": {"kind": "integers", "low": 0, "high": 31}})


@pytest.fixture(autouse=True)
def engine() -> Iterator[str]:
    """Overrides the per-engine parametrization of the package: aiokafka only."""
    old = helpers.ENGINE
    helpers.ENGINE = "aiokafka"
    try:
        yield "aiokafka"
    finally:
        helpers.ENGINE = old


def _worker(kafka: Any, redis_server: Any, names: dict[str, str], tmp_path: Path,
            **settings: str) -> WorkerProcess:
    """A worker counting SPEC, declared in a collections file."""
    cfile = tmp_path / "collections.json"
    cfile.write_text(json.dumps({"collections": [SPEC.to_dict()]}))
    env = worker_env(kafka, redis_server, names, LDP_COLLECTIONS_FILE=str(cfile), **settings)
    return WorkerProcess(env, tmp_path / "worker.log").start()


def test_janitor_releases_only_counted_records_and_the_count_stays_exact(
        kafka: Any, redis_server: Any, redis_client: Any, ldp_names: dict[str, str],
        tmp_path: Path) -> None:
    topic, prefix = ldp_names["topic"], ldp_names["prefix"]
    worker = _worker(kafka, redis_server, ldp_names, tmp_path)
    janitor = Janitor(bootstrap=kafka.bootstrap, redis=redis_client, topic=topic,
                      prefix=prefix, interval=0.2)
    releases = kafka.broker != "tansu"
    try:
        pub = Publisher(kafka.bootstrap, topic, SPEC, reports=36_000, rate=12_000, seed=3)
        pub.start()
        rounds = 0
        while pub.is_alive() or rounds < 3:
            janitor.run_once()
            rounds += 1
            if releases and janitor.stats.released:
                first, _ = log_offsets(kafka.bootstrap, topic)
                # read after the round: watermarks only grow, so this bounds what was
                # counted when the round ran
                wms = read_watermarks(redis_client, topic, prefix)
                for p, start in enumerate(first):
                    assert start <= wms.get(p, -1) + 1, (p, start, wms)
            time.sleep(0.2)
        result = pub.finish()
        wait_for(lambda: load_state(redis_client, SPEC, prefix=prefix).n >= result.state.n,
                 60, f"{result.state.n} reports counted")
        janitor.run_once()
        wms = read_watermarks(redis_client, topic, prefix)
        first, end = log_offsets(kafka.bootstrap, topic)
        if releases:
            assert janitor.stats.releases_supported is True
            # everything counted is gone from the log, nothing more
            assert first == [wms[p] + 1 for p in range(4)] == end, (first, wms, end)
        else:
            assert janitor.stats.releases_supported is False
            assert "KafkaConnectionError" in (janitor.stats.last_error or ""), janitor.stats
            assert first == [0, 0, 0, 0]
        # a crash and restart: the worker seeks to the watermarks, above what was released
        worker.kill9()
        worker.start()
        more = Publisher(kafka.bootstrap, topic, SPEC, reports=8_000, rate=20_000, seed=4)
        more.start()
        extra = more.finish()
        expected_n = result.state.n + extra.state.n
        wait_for(lambda: load_state(redis_client, SPEC, prefix=prefix).n >= expected_n,
                 60, f"{expected_n} reports counted after the restart")
        got = load_state(redis_client, SPEC, prefix=prefix)
        assert got.n == expected_n
        assert (got.counts == result.state.counts + extra.state.counts).all()
        assert worker.alive(), worker.output()
    finally:
        janitor.close()
        assert worker.stop() == 0, worker.output()


@pytest.mark.brokers("kafka")
def test_a_worker_with_a_release_interval_releases_what_it_counted(
        kafka: Any, redis_server: Any, redis_client: Any, ldp_names: dict[str, str],
        tmp_path: Path) -> None:
    topic, prefix = ldp_names["topic"], ldp_names["prefix"]
    worker = _worker(kafka, redis_server, ldp_names, tmp_path, LDP_RELEASE_INTERVAL_MS="300")
    try:
        pub = Publisher(kafka.bootstrap, topic, SPEC, reports=20_000, rate=20_000, seed=6)
        pub.start()
        result = pub.finish()
        wait_for(lambda: load_state(redis_client, SPEC, prefix=prefix).n >= result.state.n,
                 60, f"{result.state.n} reports counted")

        def released() -> bool:
            wms = read_watermarks(redis_client, topic, prefix)
            first, _ = log_offsets(kafka.bootstrap, topic)
            return len(wms) == 4 and first == [wms[p] + 1 for p in range(4)]
        wait_for(released, 30, "the log start offsets at the watermarks + 1", interval=0.3)
        assert load_state(redis_client, SPEC, prefix=prefix).n == result.state.n
        assert worker.alive(), worker.output()
    finally:
        assert worker.stop() == 0, worker.output()


@pytest.mark.any_broker
def test_janitor_trims_only_the_expired_windows_entries(
        kafka: Any, redis_client: Any, ldp_names: dict[str, str]) -> None:
    prefix = ldp_names["prefix"]
    spec = CollectionSpec.from_dict({**SPEC.to_dict(), "window_seconds": 60,
                                     "retention_seconds": 600})
    CollectionCatalogue(redis_client, prefix).register(spec)
    now = 1_000_000.0
    zkey = Keys(prefix).windows(spec.id)
    # window [s, s + 60) is kept until s + 60 + 600: s < now - 660 has expired
    starts = [now - 2000, now - 661, now - 660, now - 659, now - 60, now]
    redis_client.zadd(zkey, {str(int(s)): s for s in starts})
    janitor = Janitor(bootstrap=kafka.bootstrap, redis=redis_client, prefix=prefix,
                      release_records=False)
    assert janitor.trim_windows(now) == 2
    left = [float(x) for x in redis_client.zrange(zkey, 0, -1)]
    assert left == [now - 660, now - 659, now - 60, now]
    assert janitor.trim_windows(now) == 0
