"""End to end: simulator → broker → aggregator worker → Redis equals ldpcore, cell for cell."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ldpcore.collection import CollectionSpec
from ldpstream.storage import load_state, read_watermarks
from producer.sdk import Client
from producer.simulate import simulate

from .helpers import WorkerProcess, wait_for, worker_env

pytestmark = pytest.mark.integration

SPECS = [
    {"id": "grr64", "oracle": {"mechanism": "grr", "epsilon": 1.0},
     "domain": {"kind": "integers", "low": 0, "high": 63}},
    {"id": "oue32", "oracle": {"mechanism": "oue", "epsilon": 2.0},
     "domain": {"kind": "categories", "labels": [f"c{i}" for i in range(32)]}},
]


def publish(kafka: Any, topic: str, spec: CollectionSpec, reports: int, sizes: list[int],
            seed: int, partitions: int = 4) -> Any:
    """Publish with the simulator, spreading messages round-robin over the partitions."""
    sent = [0]
    with Client(kafka.bootstrap, topic) as client:
        def send(batch: Any) -> None:
            client.send(spec, batch, partition=sent[0] % partitions)
            sent[0] += 1
        result = simulate(spec, send, dist="zipf:1.2", reports=reports, devices=reports // 3,
                          batch_sizes=sizes, seed=seed)
    return result


def test_redis_state_equals_ldpcore_aggregation_of_the_sent_reports(
        kafka: Any, redis_server: Any, redis_client: Any, ldp_names: dict[str, str],
        tmp_path: Path) -> None:
    cfile = tmp_path / "collections.json"
    cfile.write_text(json.dumps({"collections": SPECS}))
    specs = [CollectionSpec.from_dict(s) for s in SPECS]
    env = worker_env(kafka, redis_server, ldp_names, LDP_COLLECTIONS_FILE=str(cfile))
    worker = WorkerProcess(env, tmp_path / "worker.log").start()
    try:
        sizes = [1, 7, 64, 512, 2048, 300]
        results = [publish(kafka, ldp_names["topic"], specs[0], 140_000, sizes, seed=11),
                   publish(kafka, ldp_names["topic"], specs[1], 70_000, sizes, seed=12)]
        total = sum(r.reports for r in results)
        assert total >= 200_000

        def counted() -> int:
            return sum(load_state(redis_client, s, prefix=ldp_names["prefix"]).n for s in specs)
        wait_for(lambda: counted() >= total, 90, f"{total} reports counted")
        for spec, result in zip(specs, results, strict=True):
            got = load_state(redis_client, spec, prefix=ldp_names["prefix"])
            assert got.n == result.state.n
            assert (got.counts == result.state.counts).all()
        wms = read_watermarks(redis_client, ldp_names["topic"], ldp_names["prefix"])
        assert sorted(wms) == [0, 1, 2, 3]
        assert sum(w + 1 for w in wms.values()) == sum(r.messages for r in results)
        assert worker.alive(), worker.output()
    finally:
        assert worker.stop() == 0, worker.output()
