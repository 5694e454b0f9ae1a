"""The shipped conformance suite (:mod:`ldpcore.checks`) over every registered mechanism.

Each mechanism class names its own small parameter sets; every applicable check
(common ones, then one per capability) runs on each, at three ε.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import ldpcore
from ldpcore import capabilities
from ldpcore.checks import unit_test_oracles, yield_checks
from ldpcore.registry import MECHANISMS, mechanisms_with

CASES = [(f"{oid}-{check.__name__}", o, check)
         for oid, o in unit_test_oracles() for check in yield_checks(o)]


@pytest.mark.parametrize("oracle,check", [(o, c) for _, o, c in CASES],
                         ids=[i for i, _, _ in CASES])
def test_mechanism_passes_check(oracle: ldpcore.Mechanism,
                                check: Callable[[ldpcore.Mechanism], None]) -> None:
    check(oracle)


def test_every_registered_mechanism_class_is_checked() -> None:
    checked = {o.mechanism for _, o, _ in CASES}
    assert checked == set(MECHANISMS) - {"adaptive"}  # adaptive builds registered classes


def test_each_capability_has_its_check_and_its_mechanisms() -> None:
    by_cap = {name: sorted(mechanisms_with(cap))
              for name, cap in capabilities.CAPABILITIES.items()}
    assert by_cap["ranges"] == ["haar", "hh"]
    assert by_cap["heavy_hitters"] == ["pem"]
    assert by_cap["mean"] == ["duchi", "pm", "sw"]
    assert by_cap["distribution"] == ["sw"]
    assert "pm" not in by_cap["frequencies"] and "pem" not in by_cap["frequencies"]
    names = {c.__name__ for _, _, c in CASES}
    for check in ("check_frequency_estimates", "check_range_queries",
                  "check_mean_estimates", "check_heavy_hitter_search"):
        assert check in names


@pytest.mark.parametrize("mech", sorted(set(MECHANISMS) - {"adaptive", "pem"}))
@pytest.mark.parametrize("bad", [0, -1.0, float("inf"), float("nan"), "1", None, True])
def test_bad_epsilon_is_a_parameter_error(mech: str, bad: Any) -> None:
    with pytest.raises(ldpcore.ParameterError, match="epsilon"):
        ldpcore.make_oracle(mech, epsilon=bad, domain_size=8)


@pytest.mark.parametrize("mech", sorted(set(MECHANISMS) - {"adaptive", "pem"}))
@pytest.mark.parametrize("bad", [1, 0, -3, 2.5, "8"])
def test_bad_domain_size_is_a_parameter_error(mech: str, bad: Any) -> None:
    with pytest.raises(ldpcore.ParameterError, match="domain_size|bins"):
        ldpcore.make_oracle(mech, epsilon=1.0, domain_size=bad)


@pytest.mark.parametrize("mech", sorted(set(MECHANISMS) - {"pem"}))
def test_unknown_parameter_is_rejected_naming_the_allowed_ones(mech: str) -> None:
    with pytest.raises(ldpcore.ParameterError, match="allowed"):
        ldpcore.make_oracle(mech, epsilon=1.0, domain_size=8, bogus=3)
    with pytest.raises(ValueError):  # typed errors are ValueErrors for generic callers
        ldpcore.make_oracle(mech, epsilon=1.0, domain_size=8, bogus=3)
