"""End to end with Privacy Pass on Apache Kafka: Python SDK devices obtain tokens from a
real issuer and post through a real gateway (LDP_GATEWAY_TOKENS=required) to a real worker.
A device limited to k reports per window is counted at most k times however often it posts
(new clients, replayed tokens), and the honest devices' reports are counted exactly: the
state in Redis is the sum of the reports they sent."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ldpcore import Reports
from ldpcore.collection import CollectionSpec, encode_message
from ldpstream.privacypass.client import IssuanceRefused
from ldpstream.storage import CollectionCatalog, load_state
from producer.sdk import Device, GatewayClient, GatewayError

from ..gateway.conftest import GatewayProcess, gateway_env, post
from ..integration.helpers import WorkerProcess, wait_for, worker_env
from ..issuer.conftest import IssuerProcess, issuer_env

pytestmark = [pytest.mark.integration, pytest.mark.brokers("kafka")]

K = 2
SPEC = CollectionSpec.from_dict({"id": "pp-e2e", "oracle": {"mechanism": "grr", "epsilon": 2.0},
                                 "domain": {"kind": "categories",
                                            "labels": [f"v{i}" for i in range(8)]},
                                 "quota": {"reports_per_window": K}})
HONEST = 60
FLEET = "fleet-key-e2e"


def test_a_device_is_counted_at_most_k_times_and_honest_counts_are_exact(
        kafka: Any, redis_server: Any, redis_client: Any, ldp_names: dict[str, str],
        tmp_path: Path) -> None:
    CollectionCatalog(redis_client, ldp_names["prefix"]).register(SPEC)
    iss = IssuerProcess(issuer_env(redis_server, ldp_names, LDP_ISSUER_KEYS=f"app:{FLEET}"),
                        tmp_path / "issuer.log").start()
    gw = GatewayProcess(gateway_env(kafka, redis_server, ldp_names,
                                    LDP_GATEWAY_TOKENS="required",
                                    LDP_GATEWAY_KEYS=f"app:{FLEET}"),
                        tmp_path / "gateway.log").start()
    worker = WorkerProcess(worker_env(kafka, redis_server, ldp_names, LDP_ENGINE="aiokafka"),
                           tmp_path / "worker.log").start()
    try:
        rng = np.random.default_rng(7)
        sent: list[Reports] = []
        for i in range(HONEST):
            dev = Device(SPEC, secret=os.urandom(16))
            with GatewayClient(gw.url(), key=FLEET, issuer_url=iss.url,
                               device_secret=dev.secret,
                               fmt="json" if i % 3 == 0 else "binary") as client:
                value = f"v{int(rng.integers(0, 8))}"
                reports = dev.report(value)
                client.send(SPEC, reports)
                sent.append(reports)
        # a greedy device: one secret, many posts, new clients, a replayed token
        secret = os.urandom(16)
        greedy = GatewayClient(gw.url(), key=FLEET, issuer_url=iss.url, device_secret=secret)
        o = SPEC.oracle()
        accepted = refused = 0
        for j in range(10):
            reports = o.perturb([7], rng=j)  # it always pushes v7
            try:
                greedy.send(SPEC, reports)
                accepted += 1
                sent.append(reports)
            except IssuanceRefused as exc:
                assert exc.reason == "quota"
                refused += 1
        again = GatewayClient(gw.url(), key=FLEET, issuer_url=iss.url, device_secret=secret)
        with pytest.raises(IssuanceRefused):
            again.send(SPEC, o.perturb([7], rng=99))
        assert (accepted, refused) == (K, 10 - K)
        # nor can anyone post without a token
        status, _, body = post(gw.port, encode_message(SPEC, o.perturb([7], rng=5)),
                               headers={"X-LDP-Key": FLEET})
        assert (status, body["reason"]) == (401, "token_missing")
        with pytest.raises(GatewayError):
            GatewayClient(gw.url(), key=FLEET).send(SPEC, o.perturb([7], rng=6))
        greedy.close()
        expected = o.aggregate(Reports.concat(sent))
        want_n = HONEST + K
        wait_for(lambda: load_state(redis_client, SPEC, prefix=ldp_names["prefix"]).n
                 >= want_n, 120, f"{want_n} reports counted")
        state = load_state(redis_client, SPEC, prefix=ldp_names["prefix"])
        assert state.n == want_n
        assert state == expected
    finally:
        worker.stop()
        gw.stop()
        iss.stop()
