"""End to end: devices POST to the gateway → broker → aggregator → Redis equals ldpcore."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ldpcore import Reports
from ldpcore.collection import encode_message
from ldpstream.storage import CollectionCatalogue, load_state

from ..integration.helpers import WorkerProcess, wait_for, worker_env
from .conftest import SPECS, GatewayProcess, gateway_env, post

pytestmark = pytest.mark.integration

FRAMES = "application/x-ldp-frames"


def frame(messages: list[bytes]) -> bytes:
    return b"".join(len(m).to_bytes(4, "little") + m for m in messages)


def test_reports_posted_in_every_format_are_counted_exactly_once(
        kafka: Any, redis_server: Any, redis_client: Any, ldp_names: dict[str, str],
        tmp_path: Path) -> None:
    CollectionCatalogue(redis_client, ldp_names["prefix"]).register_all(SPECS)
    rng = np.random.default_rng(17)
    sent: dict[str, list[Reports]] = {s.id: [] for s in SPECS}

    def batch(spec_i: int, n: int) -> Reports:
        spec = SPECS[spec_i]
        reports = spec.oracle().perturb(rng.integers(0, spec.domain.size, n), rng=rng)
        sent[spec.id].append(reports)
        return reports

    gw = GatewayProcess(gateway_env(kafka, redis_server, ldp_names), tmp_path / "gw.log").start()
    worker = WorkerProcess(worker_env(kafka, redis_server, ldp_names, LDP_ENGINE="aiokafka"),
                           tmp_path / "worker.log").start()
    try:
        accepted = 0
        for i in range(60):  # one binary message per request, alternating collections
            s = SPECS[i % 3]
            status, _, body = post(gw.port, encode_message(s, batch(i % 3, 1 + i % 4)))
            assert status == 202, body
            accepted += body["accepted_reports"]
        for _ in range(5):  # frames mixing the collections, several messages each
            msgs = [encode_message(SPECS[j % 3], batch(j % 3, 50 + j)) for j in range(9)]
            status, _, body = post(gw.port, frame(msgs), FRAMES)
            assert status == 202, body
            assert body["accepted_messages"] == 9
            accepted += body["accepted_reports"]
        for _ in range(3):  # JSON: one object, then an array of objects
            status, _, body = post(gw.port, encode_message(SPECS[1], batch(1, 7), "json"),
                                   "application/json")
            assert status == 202, body
            accepted += body["accepted_reports"]
            arr = b"[" + b",".join(encode_message(SPECS[j], batch(j, 5), "json")
                                   for j in range(3)) + b"]"
            status, _, body = post(gw.port, arr, "application/json")
            assert status == 202 and body["accepted_messages"] == 3, body
            accepted += body["accepted_reports"]
        expected = {s.id: s.oracle().aggregate(Reports.concat(sent[s.id])) for s in SPECS}
        assert accepted == sum(e.n for e in expected.values())

        def counted() -> int:
            return sum(load_state(redis_client, s, prefix=ldp_names["prefix"]).n for s in SPECS)
        wait_for(lambda: counted() >= accepted, 60, f"{accepted} reports counted")
        for s in SPECS:
            assert load_state(redis_client, s, prefix=ldp_names["prefix"]) == expected[s.id]
    finally:
        assert gw.stop() == 0, gw.output()
        assert worker.stop() == 0, worker.output()
