"""ldpcore.collection: collection specs and domains, validated when they are read.

Multi-attribute specs are in tests/ldpcore/multi/test_multi_collection.py; messages in
tests/ldpcore/test_message.py."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ldpcore.collection import CollectionSpec, Domain, load_collections, window_start
from ldpcore.errors import ParameterError

RAW: dict[str, Any] = {"id": "os", "oracle": {"mechanism": "grr", "epsilon": 1.0},
                       "domain": {"kind": "categories", "labels": ["a", "b", "c"]}}


def test_a_spec_fills_the_domain_size_and_round_trips() -> None:
    s = CollectionSpec.from_dict(RAW)
    assert s.oracle_spec["domain_size"] == 3 and s.oracle().domain_size == 3
    assert CollectionSpec.from_dict(s.to_dict()) == s
    assert json.loads(s.to_json())["fingerprint"] == s.fingerprint


def test_the_fingerprint_is_stable_and_follows_the_oracle() -> None:
    s = CollectionSpec.from_dict(RAW)
    assert CollectionSpec.from_dict(dict(RAW)).fingerprint == s.fingerprint
    eps = {**RAW, "oracle": {"mechanism": "grr", "epsilon": 2.0}}
    assert CollectionSpec.from_dict(eps).fingerprint != s.fingerprint


@pytest.mark.parametrize(("change", "match"), [
    ({"id": "a b"}, "collection id must match"),
    ({"bogus": 1}, r"unknown collection key\(s\) \['bogus'\]"),
    ({"oracle": {"mechanism": "grr", "epsilon": -1.0}}, "epsilon must be"),
    ({"domain": {"kind": "weird"}}, "domain.kind must be one of"),
])
def test_a_bad_spec_names_what_is_wrong(change: dict[str, Any], match: str) -> None:
    with pytest.raises(ParameterError, match=match):
        CollectionSpec.from_dict({**RAW, **change})


def test_domains_map_values_to_indices() -> None:
    cats = Domain.from_dict(RAW["domain"])
    assert cats.index(["a", "c"]).tolist() == [0, 2]
    with pytest.raises(ParameterError, match="'zz' is not one of the domain's labels"):
        cats.index(["zz"])
    ints = Domain.from_dict({"kind": "integers", "low": 0, "high": 9})
    assert ints.size == 10 and ints.index([0, 9]).tolist() == [0, 9]
    with pytest.raises(ParameterError, match=r"integers in \[0, 9\]"):
        ints.index([10])
    interval = Domain.from_dict({"kind": "interval", "low": 0, "high": 1, "bins": 8})
    assert interval.index([0.0, 0.99, 1.0]).tolist() == [0, 7, 7]


def test_a_collections_file_refuses_an_id_declared_twice() -> None:
    assert [s.id for s in load_collections({"collections": [RAW]})] == ["os"]
    with pytest.raises(ParameterError, match=r"declared twice: \['os'\]"):
        load_collections({"collections": [RAW, RAW]})


def test_windows_start_at_multiples_of_their_length() -> None:
    assert window_start(125_000, 60) == 120
    assert window_start(0, 3600) == 0
