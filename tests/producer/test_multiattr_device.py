"""Devices and the simulator on a multi-attribute collection (ldpcore.multi)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ldpcore.collection import CollectionSpec, decode_message
from ldpcore.multi import MultiAttribute
from producer.sdk import Device
from producer.simulate import distribution, simulate, truth_by_attribute, write_truth

SPEC = CollectionSpec.from_dict({
    "id": "profile", "oracle": {"mechanism": "multi", "epsilon": 2.0},
    "domain": {"kind": "attributes", "attributes": [
        {"name": "os", "kind": "categories", "labels": ["linux", "mac", "win"]},
        {"name": "age", "kind": "interval", "low": 0, "high": 100, "bins": 10}]}})


def test_a_device_reports_its_tuple_and_memoizes_the_whole_report() -> None:
    dev = Device(SPEC, test_only_rng=1)
    first = dev.report({"os": "mac", "age": 42})
    assert len(first) == 1 and first.mechanism == "multi"
    assert all(dev.report(("mac", 42.0)) == first for _ in range(5))  # same tuple, same memo
    msg = dev.message({"os": "mac", "age": 42})
    assert msg is not None and b"mac" not in msg
    _, reports = decode_message(SPEC, SPEC.oracle(), msg)
    assert reports == first


def test_the_simulator_draws_attributes_independently_and_counts_truth_per_attribute(
        tmp_path: Path) -> None:
    sent: list[object] = []
    res = simulate(SPEC, sent.append, dist="zipf:1.0", reports=6000, seed=4)
    o = SPEC.oracle()
    assert isinstance(o, MultiAttribute)
    truth = truth_by_attribute(SPEC, res.truth)
    assert {k: int(v.sum()) for k, v in truth.items()} == {"os": 6000, "age": 6000}
    for name, size in (("os", 3), ("age", 10)):
        p = distribution("zipf:1.0", size)
        # multinomial counts: within 4 standard deviations of n p
        sd = np.sqrt(6000 * p * (1 - p))
        assert np.all(np.abs(truth[name] - 6000 * p) <= 4 * sd), name
    n_j = o.attribute_counts(res.state)
    assert n_j.sum() == 6000 and res.state.n == 6000
    est = o.attribute_frequencies(res.state, "os")
    f = truth["os"] / 6000
    se = np.sqrt([o.attribute("os").variance(int(n_j[0]), float(x))  # type: ignore[attr-defined]
                  + x * (1 - x) * (6000 - n_j[0]) / (n_j[0] * 5999) for x in f])
    assert np.all(np.abs(est - f) <= 4 * se)
    path = tmp_path / "truth.json"
    write_truth(path, SPEC, res)
    assert json.loads(path.read_text())["attributes"]["os"] == truth["os"].tolist()
