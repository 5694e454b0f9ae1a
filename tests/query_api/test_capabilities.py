"""query_api.capabilities: the routes a collection answers, and a 409 naming the others."""

from __future__ import annotations

import pytest

import ldpcore
from ldpcore.capabilities import MeanEstimates, RangeQueries
from ldpcore.collection import CollectionSpec
from query_api.capabilities import queries_of, require, routes_of
from query_api.errors import Unsupported


def test_the_routes_of_a_collection_follow_its_mechanism() -> None:
    hh = CollectionSpec.from_dict({"id": "x", "oracle": {"mechanism": "hh", "epsilon": 1.0},
                                   "domain": {"kind": "integers", "low": 0, "high": 63}})
    assert queries_of(hh) == ["cdf", "frequencies", "heavy-hitters", "histogram",
                              "quantiles", "range", "subset"]
    assert routes_of(ldpcore.registry.oracle_class("pm")) == ["mean"]


def test_require_names_the_mechanisms_that_can_and_what_this_one_answers() -> None:
    grr = ldpcore.make_oracle("grr", epsilon=1.0, domain_size=4)
    require(grr, ldpcore.FrequencyOracle, "frequency")
    with pytest.raises(Unsupported, match="range queries need .*hh.*'grr'.*/frequencies") as err:
        require(grr, RangeQueries, "range")
    assert err.value.status == 409
    with pytest.raises(Unsupported, match="pm"):
        require(grr, MeanEstimates, "mean")
