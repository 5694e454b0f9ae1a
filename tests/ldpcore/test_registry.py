"""ldpcore.registry: mechanisms by name, by capability, and from their spec."""

from __future__ import annotations

import pytest

import ldpcore
from ldpcore.capabilities import FrequencyEstimates, MeanEstimates
from ldpcore.errors import ParameterError, UnknownMechanismError
from ldpcore.registry import (
    available_mechanisms,
    make_frequency_oracle,
    make_oracle,
    mechanisms_with,
    oracle_class,
)


def test_every_available_mechanism_has_its_class_named_after_it() -> None:
    names = available_mechanisms()
    assert {"grr", "oue", "olh", "hh", "pm", "ps"} <= set(names)
    for name in names:
        assert oracle_class(name).mechanism == name


def test_an_oracle_is_rebuilt_from_its_spec() -> None:
    o = make_oracle("olh", epsilon=1.5, domain_size=20)
    assert make_oracle(**o.spec) == o


def test_unknown_names_are_their_own_error() -> None:
    with pytest.raises(UnknownMechanismError, match="nope"):
        make_oracle("nope", epsilon=1.0)


def test_mechanisms_with_a_capability_and_frequency_oracles_only() -> None:
    freq = mechanisms_with(FrequencyEstimates)
    assert "grr" in freq and "pm" not in freq
    assert "pm" in mechanisms_with(MeanEstimates)
    assert isinstance(make_frequency_oracle("grr", epsilon=1.0, domain_size=3),
                      ldpcore.FrequencyOracle)
    with pytest.raises(ParameterError):
        make_frequency_oracle("pm", epsilon=1.0, bins=8)
