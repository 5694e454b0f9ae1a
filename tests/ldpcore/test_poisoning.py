"""The poisoning experiment's core, small: the maximal gain attack lifts its targets as
Cao et al.'s formulas say, its reports pass validation, and the defences reduce the gain."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import ldpcore
from ldpcore.poisoning import (
    detect_fake_users,
    expected_gain,
    frequency_gain,
    mga_reports,
    olh_best_collisions,
)

N = 20_000
# OLH on ldpcore's linear hash family: the attacker's best cells at d = 102, ε = 1 are
# support sets honest reports rarely produce (docs/poisoning.md: elsewhere they can hide)
D = {"grr": 48, "oue": 48, "olh": 102}


def world(mech: str, eps: float, r: int, beta: float, seed: int) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    d = D[mech]
    o: Any = ldpcore.make_oracle(mech, epsilon=eps, domain_size=d)
    w = 1 / np.arange(1, d + 1) ** 1.5
    values = rng.choice(d, N, p=w / w.sum())
    targets = np.sort(rng.choice(d, r, replace=False))
    honest = o.perturb(values, rng=rng)
    m = int(round(beta * N / (1 - beta)))
    fake = mga_reports(o, targets, m, rng=rng)
    o.validate(fake)  # crafted, yet well-formed: the gateway and the worker accept them
    both = ldpcore.Reports.concat([honest, fake])
    before = o.estimate(o.aggregate(honest))
    after = o.estimate(o.aggregate(both))
    f_t = float(np.bincount(values, minlength=d)[targets].sum() / N)
    return {"o": o, "targets": targets, "honest": honest, "both": both, "before": before,
            "after": after, "f_t": f_t, "m": m}


@pytest.mark.parametrize("mech,eps", [("grr", 1.0), ("oue", 1.0), ("olh", 1.0)])
def test_the_maximal_gain_attack_lifts_its_targets_as_cao_et_al_predict(
        mech: str, eps: float) -> None:
    w = world(mech, eps, r=10, beta=0.05, seed=11)
    gain = frequency_gain(w["after"], w["before"], w["targets"])
    k = float(olh_best_collisions(w["o"], w["targets"])[0]) if mech == "olh" else None
    theory = expected_gain(w["o"], 0.05, 10, w["f_t"], k)
    assert gain > 0.2  # 20 points of frequency, from 5 % fake users
    # the fake reports' part is deterministic (a target per GRR report, the target bits
    # of OUE, the chosen cells of OLH); the honest part's sampling error is ~1 %
    assert gain == pytest.approx(theory, rel=0.05)


@pytest.mark.parametrize("mech,eps", [("oue", 1.0), ("olh", 1.0)])
def test_detection_removes_the_fake_users_and_their_gain_at_little_honest_cost(
        mech: str, eps: float) -> None:
    w = world(mech, eps, r=10, beta=0.05, seed=12)
    o = w["o"]
    gain = frequency_gain(w["after"], w["before"], w["targets"])
    det = detect_fake_users(o, w["both"])
    assert det.flags[N:].mean() > 0.9 and det.flags[:N].mean() < 0.02
    defended = o.estimate(o.aggregate(w["both"][~det.flags]))
    assert abs(frequency_gain(defended, w["before"], w["targets"])) < 0.1 * gain
    # without an attack it removes (almost) nothing
    assert detect_fake_users(o, w["honest"]).flags.mean() < 0.01


def test_normalisation_reduces_the_gain_on_grr_where_detection_cannot_act() -> None:
    w = world("grr", 1.0, r=10, beta=0.05, seed=13)
    o = w["o"]
    gain = frequency_gain(w["after"], w["before"], w["targets"])
    normalised = frequency_gain(ldpcore.postprocess(w["after"], "norm-sub"),
                                ldpcore.postprocess(w["before"], "norm-sub"), w["targets"])
    assert 0 < normalised < gain
    assert not detect_fake_users(o, w["both"]).flags.any()  # one item per report


def test_a_single_target_is_not_an_itemset() -> None:
    w = world("oue", 1.0, r=1, beta=0.05, seed=14)
    assert frequency_gain(w["after"], w["before"], w["targets"]) > 0
    det = detect_fake_users(w["o"], w["both"])
    assert det.items == [] and det.flags[N:].mean() < 0.05
