"""Square Wave collections answer frequencies by EMS (Li et al., SIGMOD 2020), not flat."""

from __future__ import annotations

import numpy as np
import pytest

import ldpcore
from query_api import estimates as E


def _smooth(bins: int, kind: str) -> np.ndarray:
    x = (np.arange(bins) + 0.5) / bins
    if kind == "beta":  # Beta(2, 5)
        p = x * (1 - x) ** 4
    else:  # two wide bumps
        p = np.exp(-0.5 * ((x - 0.3) / 0.12) ** 2) + 0.5 * np.exp(-0.5 * ((x - 0.72) / 0.12) ** 2)
    return p / p.sum()


@pytest.mark.parametrize(("kind", "seed"), [("beta", 1), ("beta", 2), ("bimodal", 3)])
def test_default_frequencies_of_square_wave_are_the_ems_distribution(kind: str,
                                                                     seed: int) -> None:
    # 10^5 reports at ε = 1: total variation to the truth within 0.15 (EMS gives ≈ 0.05 on
    # Beta(2, 5) and ≈ 0.11 on the two bumps; every post-processing of the unbiased
    # inverse gives 0.3–0.7, the old default answer was flat).
    o = ldpcore.make_oracle("sw", epsilon=1.0, bins=64, low=0.0, high=60.0)
    truth = _smooth(64, kind)
    state = o.sample_state(truth, 100_000, rng=seed)
    body = E.frequencies(o, state, labels=None, method="auto", confidence=0.95)
    est = np.array([r["estimate"] for r in body["estimates"]])
    tv = 0.5 * float(np.abs(est - truth).sum())
    assert body["method"] == "ems" and tv <= 0.15, tv
    assert body["interval"] is None and body["interval_reason"]
    # The same reconstruction behind /histogram, /subset and /heavy-hitters.
    assert np.allclose(est, E.histogram(o, state)["bins"])
    sub = E.subset(o, state, [10, 11, 12], method="auto", confidence=0.95)
    assert sub["estimate"] == pytest.approx(est[10:13].sum())
    top = E.heavy_hitters(o, state, 3, labels=None)["heavy_hitters"]
    assert [r["index"] for r in top] == list(np.argsort(-est, kind="stable")[:3])
