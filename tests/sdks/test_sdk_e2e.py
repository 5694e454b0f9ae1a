"""End to end: each SDK's devices POST through a real gateway → broker → worker → Redis, and
the collection's estimate matches the ground truth within its analytic error.

Every simulated device is its own SDK ``Device`` (CSPRNG, memo, cadence) and builds one
message; the SDK's ``GatewayClient`` posts them (binary frames for one collection, a JSON
array for a two-level one), a set-valued ``ps`` collection (sets of labels) and a ``multi``
one (attribute tuples, JSON).  Checks: every report is accepted and counted exactly once
(state n), and every frequency estimate (ps: items; multi: each attribute's, from the
reports that sampled it) is within z·sd of the true frequency, sd from the analytic
variance (the composed channel's for two-level; ps_variance; the attribute's at the
realised n_j plus the sampling term), z Bonferroni-corrected over the estimates for a
false failure of about 1e-6.
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
from ldpstream.storage import CollectionCatalogue, load_state

from ..gateway.conftest import GatewayProcess, gateway_env
from ..integration.helpers import WorkerProcess, wait_for, worker_env
from .conftest import SDKS, java_tool, js_tool

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
        # A device holds a set of labels (at most the padding length 3: exact variance).
        (CollectionSpec.from_dict({"id": f"e2e-{sdk}-ps", "oracle": {"mechanism": "ps",
                                                                     "epsilon": 2.0,
                                                                     "length": 3},
                                   "domain": {"kind": "categories", "labels": labels}}),
         "binary"),
        # A device holds one value per attribute; each report answers one attribute.
        (CollectionSpec.from_dict({"id": f"e2e-{sdk}-multi", "oracle": {
            "mechanism": "multi", "epsilon": 2.0, "sample": 1},
            "domain": {"kind": "attributes", "attributes": [
                {"name": "app", "kind": "categories", "labels": labels},
                {"name": "n", "kind": "integers", "low": 1, "high": D}]}}), "json"),
    ]


def _inputs(spec: CollectionSpec, idx: np.ndarray, rng: np.random.Generator) -> list[Any]:
    """Each device's raw value; for ps a set of up to 3 labels holding its own (idx) label,
    for multi the tuple (label idx, integer 1 + the reversed index)."""
    labels = [f"app{i}" for i in range(D)]
    mech = spec.oracle_spec["mechanism"]
    if mech == "ps":
        extra = rng.integers(0, D, size=(idx.size, 2))
        return [sorted({labels[i], *(labels[x] for x in e if x % 3 == 0)})
                for i, e in zip(idx, extra, strict=True)]
    if mech == "multi":
        return [{"app": labels[i], "n": int(D - i)} for i in idx]
    if mech == "grr":
        return (idx + 1).tolist()
    return [labels[i] for i in idx]


def _truth_and_estimate(spec: CollectionSpec, state: Any, inputs: list[Any]
                        ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(truth, estimate, analytic sd) of every frequency the collection estimates."""
    o: Any = spec.oracle()
    if o.mechanism == "ps":
        member = spec.index_sets(inputs)
        truth = np.bincount(member.items, minlength=D) / N
        est = o.estimate(state)
        return truth, est, np.sqrt([o.variance(N, float(f)) for f in truth])
    if o.mechanism == "multi":
        rows = spec.domain.attribute_indices(inputs)
        n_j = o.attribute_counts(state)
        truth_l, est_l, sd_l = [], [], []
        for j, name in enumerate(o.attribute_names):
            f = np.bincount(rows[:, j], minlength=D) / N
            truth_l.append(f)
            est_l.append(o.attribute_frequencies(state, name))
            sd_l.append(np.sqrt([o.attribute_variance(name, N, float(x), reports=int(n_j[j]))
                                 for x in f]))
        return np.concatenate(truth_l), np.concatenate(est_l), np.concatenate(sd_l)
    est_oracle: Any = spec.estimation_oracle()
    idx = np.asarray(spec.domain.index(inputs))
    truth = np.bincount(idx, minlength=D) / N
    return truth, est_oracle.estimate(state), np.array([est_oracle.std_error(N, float(f))
                                                        for f in truth])


def _simulate(sdk: str, url: str, spec: CollectionSpec, inputs: list[Any], fmt: str,
              tmp: Path) -> dict[str, int]:
    req = tmp / f"{spec.id}.json"
    req.write_text(json.dumps({"collection": json.loads(spec.to_json()), "values": inputs,
                               "format": fmt, "batch": 400}))
    cmd = [*(js_tool("simulate") if sdk == "js" else java_tool("SimulateTool")), url, str(req)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    out: dict[str, int] = json.loads(proc.stdout)
    return out


@pytest.mark.parametrize("sdk", SDKS)
def test_sdk_devices_through_the_gateway_give_unbiased_estimates(
        sdk: str, kafka: Any, redis_server: Any, redis_client: Any,
        ldp_names: dict[str, str], tmp_path: Path) -> None:
    specs = _specs(sdk)
    CollectionCatalogue(redis_client, ldp_names["prefix"]).register_all([s for s, _ in specs])
    rng = np.random.default_rng(5)
    weights = np.arange(1, D + 1, dtype=float) ** 2
    idx = rng.choice(D, size=N, p=weights / weights.sum())
    gw = GatewayProcess(gateway_env(kafka, redis_server, ldp_names), tmp_path / "gw.log").start()
    worker = WorkerProcess(worker_env(kafka, redis_server, ldp_names, LDP_ENGINE="aiokafka"),
                           tmp_path / "worker.log").start()
    inputs = {spec.id: _inputs(spec, idx, rng) for spec, _ in specs}
    try:
        for spec, fmt in specs:
            out = _simulate(sdk, gw.url(), spec, inputs[spec.id], fmt, tmp_path)
            assert out == {"accepted_messages": N, "accepted_reports": N}
        for spec, _ in specs:
            wait_for(lambda s=spec: load_state(redis_client, s,
                                               prefix=ldp_names["prefix"]).n >= N,
                     120, f"{N} reports of {spec.id} counted")
        for spec, _ in specs:
            state = load_state(redis_client, spec, prefix=ldp_names["prefix"])
            assert state.n == N
            truth, est, sd = _truth_and_estimate(spec, state, inputs[spec.id])
            z = stats.norm.isf(P_FAIL / (2 * truth.size))
            assert np.all(np.abs(est - truth) < z * sd), (spec.id, (est - truth) / sd)
    finally:
        assert gw.stop() == 0, gw.output()
        assert worker.stop() == 0, worker.output()
