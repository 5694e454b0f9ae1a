"""The device SDK and the simulator with set-valued collections."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ldpcore.collection import CollectionSpec
from producer.sdk import Device
from producer.simulate import simulate
from producer.store import FileStore

SPEC = CollectionSpec.from_dict({
    "id": "emoji", "oracle": {"mechanism": "ps", "epsilon": 2.0, "length": 3},
    "domain": {"kind": "categories", "labels": ["😀", "😂", "❤️", "👍", "🔥"]}})


def test_a_set_is_memoized_and_survives_a_restart(tmp_path: Path) -> None:
    memo = tmp_path / "store.json"
    dev = Device(SPEC, store=FileStore(memo))
    first = dev.report(["😂", "🔥"])
    assert dev.report(["🔥", "😂"]) == first  # the same set, in any order: the same answer
    assert Device(SPEC, store=FileStore(memo)).report({"😂", "🔥"}) == first
    with pytest.raises(ValueError):
        dev.report(["🙃"])


def test_the_simulator_plays_sets_from_the_model_and_counts_items() -> None:
    sent = []
    res = simulate(SPEC, sent.append, dist="zipfsets:1.5,2", reports=3000, batch_sizes=[700],
                   seed=4)
    assert res.reports == 3000 and sum(len(b) for b in sent) == 3000 and len(sent) == 5
    assert res.state.n == 3000
    sizes = np.array(res.extra["set_sizes"])
    assert res.truth.sum() == (sizes * np.arange(sizes.size)).sum()  # item counts = Σ|v|
    assert res.truth[0] > res.truth[4]
    with pytest.raises(ValueError, match="zipfsets"):
        simulate(SPEC, sent.append, dist="uniform", reports=10)
