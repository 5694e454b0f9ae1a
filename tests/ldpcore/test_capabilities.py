"""ldpcore.capabilities: what each mechanism can answer, by type."""

from __future__ import annotations

import ldpcore
from ldpcore.capabilities import (
    CAPABILITIES,
    HeavyHitterSearch,
    RangeQueries,
    capabilities_of,
)
from ldpcore.registry import oracle_class


def test_capabilities_of_an_instance_and_of_its_class_agree() -> None:
    hh = ldpcore.make_oracle("hh", epsilon=1.0, domain_size=64)
    assert isinstance(hh, RangeQueries)
    assert capabilities_of(hh) == capabilities_of(type(hh))
    assert {"frequencies", "ranges"} <= set(capabilities_of(hh))


def test_each_mechanism_lists_capabilities_in_the_stable_order() -> None:
    order = list(CAPABILITIES)
    for name in ldpcore.available_mechanisms():
        caps = capabilities_of(oracle_class(name))
        assert caps == sorted(caps, key=order.index)
    assert capabilities_of(oracle_class("pm")) == ["mean"]
    assert issubclass(oracle_class("pem"), HeavyHitterSearch)
