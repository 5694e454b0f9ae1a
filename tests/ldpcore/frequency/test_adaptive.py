"""recommend() / make_oracle("adaptive"): choice by analytic variance and report size."""

from __future__ import annotations

import math

import pytest

import ldpcore
from ldpcore.frequency.adaptive import compare


@pytest.mark.parametrize("eps", [0.5, 1.0, 2.0, 4.0])
def test_grr_is_chosen_over_oue_and_olh_exactly_below_the_classic_threshold(eps: float) -> None:
    threshold = 3 * math.exp(eps) + 2
    for d in [2, 3, 5, 8, 13, 21, 34, 55, 89, 144, 233]:
        rows = {r["mechanism"]: r["variance"] for r in compare(epsilon=eps, domain_size=d)}
        grr_wins = rows["grr"] < min(rows["oue"], rows["olh"])
        # OLH rounds g to a prime, so allow the boundary to move by one rounding step.
        if abs(d - threshold) > 2:
            assert grr_wins == (d < threshold), (eps, d)


def test_recommend_picks_the_least_variance_within_the_budget() -> None:
    rows = compare(epsilon=1.0, domain_size=1024)
    assert rows == sorted(rows, key=lambda r: (round(r["variance"], 12), r["report_bits"]))
    assert ldpcore.recommend(epsilon=1.0, domain_size=4) == "grr"
    small = ldpcore.recommend(epsilon=1.0, domain_size=1024, max_report_bits=16)
    assert ldpcore.make_oracle(small, epsilon=1.0, domain_size=1024).report_bits <= 16


def test_adaptive_oracle_is_the_recommended_concrete_mechanism() -> None:
    o = ldpcore.make_oracle("adaptive", epsilon=1.0, domain_size=1024)
    assert o.mechanism == ldpcore.recommend(epsilon=1.0, domain_size=1024)
    assert ldpcore.make_oracle(**o.spec) == o


def test_impossible_budget_is_a_parameter_error() -> None:
    with pytest.raises(ldpcore.ParameterError, match="max_report_bits"):
        ldpcore.recommend(epsilon=1.0, domain_size=1024, max_report_bits=1)
