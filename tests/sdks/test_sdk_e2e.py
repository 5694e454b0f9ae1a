"""End to end: each SDK's devices POST through a real gateway → broker → worker → Redis, and
the collection's estimate matches the ground truth within its analytic error.

Every simulated device is its own SDK ``Device`` (CSPRNG, memo, cadence) and builds one
message; the SDK's ``GatewayClient`` posts them (binary frames for one collection, a JSON
array for a two-level one).  Checks: every report is accepted and counted exactly once
(state n), and every frequency estimate is within z·sd of the true frequency, sd from the
analytic variance (the composed channel's for two-level), z Bonferroni-corrected over the
d estimates for a false failure of about 1e-6.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy import stats

from ldpcore.collection import CollectionSpec
from ldpstream.storage import CollectionCatalog, load_state

from ..gateway.conftest import GatewayProcess, gateway_env
from ..integration.helpers import WorkerProcess, wait_for, worker_env
from .conftest import JAVA, JS, SDKS, _need

pytestmark = pytest.mark.integration

N = 6_000
D = 12
P_FAIL = 1e-6


def _specs(sdk: str) -> list[tuple[CollectionSpec, str]]:
    labels = [f"app{i}" for i in range(D)]
    return [
        (CollectionSpec.from_dict({"id": f"e2e-{sdk}-oue", "oracle": {"mechanism": "oue",
                                                                      "epsilon": 2.0},
                                   "domain": {"kind": "categories", "labels": labels}}),
         "binary"),
        (CollectionSpec.from_dict({"id": f"e2e-{sdk}-grr", "oracle": {"mechanism": "grr",
                                                                      "epsilon": 3.0},
                                   "domain": {"kind": "integers", "low": 1, "high": D},
                                   "memoization": "two-level", "epsilon_1": 2.0}), "json"),
    ]


def _simulate(sdk: str, url: str, spec: CollectionSpec, inputs: list[Any], fmt: str,
              tmp: Path) -> dict[str, int]:
    req = tmp / f"{spec.id}.json"
    req.write_text(json.dumps({"collection": json.loads(spec.to_json()), "values": inputs,
                               "format": fmt, "batch": 400}))
    if sdk == "js":
        _need(JS / "dist" / "bin" / "simulate.js", "the TypeScript SDK")
        cmd = ["node", str(JS / "dist" / "bin" / "simulate.js"), url, str(req)]
    else:
        _need(JAVA / "target" / "classes", "the Java SDK")
        cmd = ["java", "-cp", str(JAVA / "target" / "classes"),
               "org.ldpstream.sdk.tools.Simulate", url, str(req)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    out: dict[str, int] = json.loads(proc.stdout)
    return out


@pytest.mark.parametrize("sdk", SDKS)
def test_sdk_devices_through_the_gateway_give_unbiased_estimates(
        sdk: str, kafka: Any, redis_server: Any, redis_client: Any,
        ldp_names: dict[str, str], tmp_path: Path) -> None:
    specs = _specs(sdk)
    CollectionCatalog(redis_client, ldp_names["prefix"]).register_all([s for s, _ in specs])
    rng = np.random.default_rng(5)
    weights = np.arange(1, D + 1, dtype=float) ** 2
    idx = rng.choice(D, size=N, p=weights / weights.sum())
    gw = GatewayProcess(gateway_env(kafka, redis_server, ldp_names), tmp_path / "gw.log").start()
    worker = WorkerProcess(worker_env(kafka, redis_server, ldp_names, LDP_ENGINE="aiokafka"),
                           tmp_path / "worker.log").start()
    try:
        for spec, fmt in specs:
            inputs: list[Any] = ([spec.domain.labels[i] for i in idx] if fmt == "binary"
                                 else (idx + 1).tolist())
            out = _simulate(sdk, gw.url(), spec, inputs, fmt, tmp_path)
            assert out == {"accepted_messages": N, "accepted_reports": N}
        for spec, _ in specs:
            wait_for(lambda s=spec: load_state(redis_client, s,
                                               prefix=ldp_names["prefix"]).n >= N,
                     120, f"{N} reports of {spec.id} counted")
        truth = np.bincount(idx, minlength=D) / N
        z = stats.norm.isf(P_FAIL / (2 * D))
        for spec, _ in specs:
            state = load_state(redis_client, spec, prefix=ldp_names["prefix"])
            assert state.n == N
            est_oracle: Any = spec.estimation_oracle()
            est = est_oracle.estimate(state)
            sd = np.array([est_oracle.std_error(N, float(f)) for f in truth])
            assert np.all(np.abs(est - truth) < z * sd), (spec.id, (est - truth) / sd)
    finally:
        assert gw.stop() == 0, gw.output()
        assert worker.stop() == 0, worker.output()
