"""Simulated device populations: cadence per window, memo per device, honest intervals."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from ldpcore.collection import CollectionSpec
from ldpcore.longitudinal import effective_sample_size, multiwindow_variance
from producer.simulate import distribution, schedule, simulate

LABELS = ["a", "b", "c", "d"]
BASE = {"id": "pop", "oracle": {"mechanism": "grr", "epsilon": 1.0},
        "domain": {"kind": "categories", "labels": LABELS}, "window_seconds": 60}


def _spec(**extra: Any) -> CollectionSpec:
    return CollectionSpec.from_dict({**BASE, **extra})


class FakeTime:
    """A clock that only moves when slept on (or by ``tick`` per reading)."""

    def __init__(self, start: float = 6000.0, tick: float = 0.0) -> None:
        self.t, self.tick, self.slept = start, tick, 0.0

    def clock(self) -> float:
        self.t += self.tick
        return self.t

    def sleep(self, dt: float) -> None:
        self.t += max(dt, 0.0)
        self.slept += max(dt, 0.0)


def test_each_device_reports_once_per_round_and_repeats_its_memoized_answer() -> None:
    spec = _spec()
    seen: dict[int, bytes] = {}
    per_round: dict[int, list[int]] = {}
    probs = distribution("zipf:1.0", 4)
    for sent in schedule(spec, probs, 5_000, 300, [64, 7], seed=1, churn=0.2, presence=0.7):
        keys = sent.batch.row_keys()
        per_round.setdefault(sent.round, []).extend(sent.devices.tolist())
        for dev, key in zip(sent.devices.tolist(), keys, strict=True):
            assert seen.setdefault(dev, key) == key  # permanent memo: the same answer
    for ids in per_round.values():
        assert len(ids) == len(set(ids)) and len(ids) <= 300
    # Devices come and go: more distinct devices than slots, some report in several rounds.
    assert len(seen) > 300
    assert sum(len(v) for v in per_round.values()) == 5_000


def test_no_memoization_and_two_level_send_fresh_reports() -> None:
    probs = distribution("uniform", 4)
    for extra in ({"memoization": "none"}, {"memoization": "two-level", "epsilon_1": 1.0}):
        spec = _spec(**extra)
        answers: dict[int, set[bytes]] = {}
        for sent in schedule(spec, probs, 4_000, 100, [50], seed=2):
            for dev, key in zip(sent.devices.tolist(), sent.batch.row_keys(), strict=True):
                answers.setdefault(dev, set()).add(key)
        # 40 reports per device: a fixed answer everywhere would be a memo leak.
        assert np.mean([len(v) > 1 for v in answers.values()]) > 0.9, extra


def test_truth_counts_every_report_and_window_counts_add_up() -> None:
    spec = _spec()
    res = simulate(spec, lambda b: None, dist="zipf:1.2", reports=2_345, devices=400,
                   batch_sizes=[100], seed=3, churn=0.1, presence=0.8)
    assert int(res.truth.sum()) == res.reports == res.state.n == 2_345
    assert sum(res.extra["window_counts"]) == 2_345
    assert max(res.extra["window_counts"]) <= 400
    again = simulate(spec, lambda b: None, dist="zipf:1.2", reports=2_345, devices=400,
                     batch_sizes=[100], seed=3, churn=0.1, presence=0.8)
    assert again.state == res.state and np.array_equal(again.truth, res.truth)


def test_live_rounds_follow_wall_clock_windows_and_wait_for_the_next() -> None:
    spec = _spec()
    fake = FakeTime()
    res = simulate(spec, lambda b: None, dist="uniform", reports=200, devices=50,
                   batch_sizes=[16], seed=4, clock=fake.clock, sleep=fake.sleep)
    assert res.extra["window_counts"] == [50, 50, 50, 50]
    # It waited three window changes (60 s each) instead of re-sending in the same window.
    assert 3 * 60 - 60 < fake.slept <= 3 * 60 + 1


def test_a_window_change_mid_round_starts_a_new_round() -> None:
    spec = _spec()
    fake = FakeTime(tick=1.0)  # every clock reading is one second later: 60 readings a window
    probs = distribution("uniform", 4)
    windows: dict[int, list[int]] = {}
    for sent in schedule(spec, probs, 3_000, 1_000, [10], seed=5, clock=fake.clock,
                         sleep=fake.sleep):
        windows.setdefault(int(fake.t // 60), []).extend(sent.devices.tolist())
    for ids in windows.values():
        assert len(ids) == len(set(ids))
    assert len(windows) > 3


def test_rate_paces_each_window_from_its_start() -> None:
    spec = _spec()
    fake = FakeTime()
    simulate(spec, lambda b: None, dist="uniform", reports=40, devices=20, batch_sizes=[1],
             seed=6, rate=10.0, clock=fake.clock, sleep=fake.sleep)
    # Two windows of 20 reports at 10/s: ~2 s of pacing each plus the wait for window 2;
    # a pace counted from the first window's start would burst after the wait.
    assert 60 - 2 <= fake.slept <= 60 + 2 * 2 + 1


RUNS, DEVICES, REPORTS = 300, 400, 3_200


@pytest.mark.slow
@pytest.mark.parametrize("extra", [{}, {"memoization": "two-level", "epsilon_1": 2.0},
                                   {"memoization": "none"}],
                         ids=["permanent", "two-level", "none"])
def test_multiwindow_intervals_cover_the_truth_of_a_simulated_population(
        extra: dict[str, Any]) -> None:
    """RUNS independent simulated collections: DEVICES devices (churn 0.1, presence 0.8)
    report once per window over ~10 windows.  The 95 % interval built with the
    multi-window variance covers the truth (report-weighted frequency) of every value in
    >= 93 % of cases; the naive one (n = total reports) does not when reports repeat."""
    spec = _spec(**({"oracle": {"mechanism": "grr", "epsilon": 2.0}} if extra else {}),
                 **extra)
    est_oracle = spec.two_level() or spec.estimation_oracle()
    hit = naive_hit = total = 0
    n_eff = []
    for run in range(RUNS):
        res = simulate(spec, lambda b: None, dist="zipf:1.0", reports=REPORTS,
                       devices=DEVICES, batch_sizes=[2_000], seed=1_000 + run, churn=0.1,
                       presence=0.8)
        n = res.state.n
        est = est_oracle.estimate(res.state)
        truth = res.truth / n
        counts = res.extra["window_counts"]
        rho = None
        for v in range(len(LABELS)):
            f = float(np.clip(est[v], 0, 1))
            var = multiwindow_variance(est_oracle, counts, spec.memoization, frequency=f)
            naive = est_oracle.variance(n, f)
            hit += abs(est[v] - truth[v]) <= 1.96 * math.sqrt(var)
            naive_hit += abs(est[v] - truth[v]) <= 1.96 * math.sqrt(naive)
            total += 1
            rho = est_oracle.correlation(f) if spec.memoization == "two-level" else None
        n_eff.append(effective_sample_size(counts, spec.memoization, correlation=rho))
    cover, naive_cover = hit / total, naive_hit / total
    print(f"{spec.memoization}: coverage {cover:.3f}, naive (n = reports) {naive_cover:.3f}, "
          f"n = {REPORTS}, mean n_eff = {np.mean(n_eff):.0f}")
    assert cover >= 0.93
    if spec.memoization == "permanent":
        assert naive_cover < 0.75
    elif spec.memoization == "two-level":
        assert naive_cover < 0.90
