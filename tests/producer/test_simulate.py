"""Device SDK (memoization, OS entropy, no raw values) and the simulator's bookkeeping."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ldpcore import Reports
from ldpcore.collection import CollectionSpec
from producer.sdk import Device, load_spec
from producer.simulate import distribution, simulate, write_truth
from producer.store import MemoryStore

LABELS = ["alpha-label", "bravo-label", "charlie-label", "delta-label"]
SPEC = CollectionSpec.from_dict({"id": "t", "oracle": {"mechanism": "grr", "epsilon": 0.5},
                                 "domain": {"kind": "categories", "labels": LABELS}})


def _key(r: Reports) -> bytes:
    return b"".join(np.ascontiguousarray(c).tobytes() for c in r.columns.values())


def test_device_repeats_the_same_answer_for_the_same_value() -> None:
    dev = Device(SPEC)
    first = {v: _key(dev.report(v)) for v in LABELS}
    for _ in range(50):
        assert all(_key(dev.report(v)) == first[v] for v in LABELS)


def test_new_devices_draw_their_secrets_from_os_entropy() -> None:
    # 200 new devices (each its own store): with ε = 0.5 and d = 4 each answer is the true
    # value w.p. ~0.35, so 200 identical answer vectors across two unseeded runs would have
    # probability far below 1e-50.
    a = [_key(Device(SPEC, store=MemoryStore()).report("alpha-label")) for _ in range(200)]
    b = [_key(Device(SPEC, store=MemoryStore()).report("alpha-label")) for _ in range(200)]
    assert a != b and len(set(a)) > 1


def test_seeded_devices_are_reproducible() -> None:
    a = Device(SPEC, store=MemoryStore(), test_only_rng=np.random.default_rng(5))
    b = Device(SPEC, store=MemoryStore(), test_only_rng=np.random.default_rng(5))
    assert a.message("bravo-label") == b.message("bravo-label")


def test_messages_never_carry_the_raw_label() -> None:
    for v in LABELS:
        for fmt in ("binary", "json"):
            msg = Device(SPEC, store=MemoryStore()).message(v, fmt)
            assert msg is not None and v.encode() not in msg


def test_unknown_values_are_refused_before_anything_is_sent() -> None:
    with pytest.raises(ValueError, match="labels"):
        Device(SPEC).report("zulu")


def test_load_spec_reads_yaml_and_json_and_names_missing_collections(tmp_path: Path) -> None:
    raw = {"collections": [json.loads(SPEC.to_json()),
                           dict(json.loads(SPEC.to_json()), id="u", fingerprint=None)]}
    raw["collections"][1].pop("fingerprint")
    (tmp_path / "c.json").write_text(json.dumps(raw))
    import yaml
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(raw))
    for name in ("c.json", "c.yaml"):
        assert load_spec(tmp_path / name, "t") == SPEC
        with pytest.raises(ValueError, match="name one"):
            load_spec(tmp_path / name)
        with pytest.raises(ValueError, match="no collection 'v'"):
            load_spec(tmp_path / name, "v")


@pytest.mark.parametrize("bad", ["zipf:-1", "geometric:1.5", "cauchy:1", "poisson", "uniform:3"])
def test_bad_distribution_names_are_refused_with_the_allowed_forms(bad: str) -> None:
    with pytest.raises(ValueError, match="zipf:s"):
        distribution(bad, 10)


def test_simulator_sends_the_requested_reports_in_cycling_batches(tmp_path: Path) -> None:
    batches: list[Any] = []
    res = simulate(SPEC, batches.append, dist="zipf:1.0", reports=10_000,
                   batch_sizes=[1, 7, 100], seed=3)
    sizes = [len(b) for b in batches]
    assert sum(sizes) == res.reports == 10_000 and res.messages == len(batches)
    assert sizes[:6] == [1, 7, 100, 1, 7, 100]
    assert all(isinstance(b, Reports) for b in batches)
    assert int(res.truth.sum()) == 10_000
    # Ground truth follows the distribution: each count within 5 binomial s.d.
    p = distribution("zipf:1.0", len(LABELS))
    sd = np.sqrt(10_000 * p * (1 - p))
    assert np.all(np.abs(res.truth - 10_000 * p) < 5 * sd)
    again: list[Any] = []
    simulate(SPEC, again.append, dist="zipf:1.0", reports=10_000, batch_sizes=[1, 7, 100],
             seed=3)
    assert [_key(b) for b in batches] == [_key(b) for b in again]
    out = tmp_path / "truth.json"
    write_truth(out, SPEC, res, dist="zipf:1.0", seed=3)
    assert sum(json.loads(out.read_text())["counts"]) == 10_000
