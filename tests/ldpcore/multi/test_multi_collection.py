"""Multi-attribute collections: the ``attributes`` domain, the ``multi`` oracle filled
from it, clear ParameterErrors, and messages through the decoder exactly once."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from ldpcore.collection import CollectionSpec, encode_message
from ldpcore.errors import ParameterError
from ldpcore.message import MessageDecoder
from ldpcore.multi import MultiAttribute

DOMAIN = {"kind": "attributes", "attributes": [
    {"name": "os", "kind": "categories", "labels": ["linux", "mac", "win"]},
    {"name": "apps", "kind": "integers", "low": 0, "high": 40},
    {"name": "age", "kind": "interval", "low": 0, "high": 100, "bins": 20}]}


def spec(**oracle: Any) -> CollectionSpec:
    return CollectionSpec.from_dict({"id": "profile", "domain": DOMAIN,
                                     "oracle": {"mechanism": "multi", "epsilon": 3.0,
                                                **oracle}})


def test_attribute_oracles_default_by_kind_and_take_sizes_from_the_domain() -> None:
    s = spec()
    o = s.oracle()
    assert isinstance(o, MultiAttribute) and o.attribute_names == ("os", "apps", "age")
    assert o.domain_size == s.domain.size == 3 * 41 * 20
    assert o.attribute("os").mechanism in ("grr", "olh")  # adaptive, resolved in the spec
    age = o.attribute("age")
    assert age.mechanism == "pm" and (age.low, age.high, age.domain_size) == (0, 100, 20)  # type: ignore[attr-defined]
    assert CollectionSpec.from_dict(s.to_dict()).fingerprint == s.fingerprint


def test_attribute_oracles_can_be_named_by_mapping_or_list() -> None:
    by_map = spec(sample=2, attributes={"os": "oue", "age": {"mechanism": "duchi"}})
    by_list = spec(sample=2, attributes=[{"mechanism": "oue"}, {}, "duchi"])
    assert by_map.fingerprint == by_list.fingerprint
    o = by_map.oracle()
    assert isinstance(o, MultiAttribute)
    assert o.attribute("os").mechanism == "oue" and o.attribute("age").mechanism == "duchi"
    assert o.attribute("os").epsilon == 1.5 and o.sample == 2


@pytest.mark.parametrize("oracle,domain,match", [
    ({"mechanism": "grr"}, DOMAIN, "kind 'attributes' needs mechanism 'multi'"),
    ({"mechanism": "multi"}, {"kind": "categories", "labels": ["a", "b"]},
     "needs a domain of kind 'attributes'"),
    ({"mechanism": "multi", "attributes": {"height": "grr"}}, DOMAIN,
     r"names \['height'\] are not attributes"),
    ({"mechanism": "multi", "attributes": [{}]}, DOMAIN, "list of 3 objects"),
    ({"mechanism": "multi", "attributes": {"os": "pm"}}, DOMAIN,
     r"\(os\): mechanism 'pm' needs an interval domain"),
    ({"mechanism": "multi", "attributes": {"os": {"mechanism": "grr", "domain_size": 4}}},
     DOMAIN, r"\(os\).domain_size 4 does not match the domain's 3"),
    ({"mechanism": "multi", "sample": 4}, DOMAIN, r"sample must be .*\[1, 3\]"),
    ({"mechanism": "vector", "dimensions": 2}, {"kind": "integers", "low": 0, "high": 3},
     "declares mechanism 'multi' with interval attributes"),
    ({"mechanism": "multi"}, {"kind": "attributes", "attributes": [
        {"name": "a", "kind": "categories", "labels": ["x", "y"]},
        {"name": "a", "kind": "categories", "labels": ["x", "y"]}]}, "distinct"),
    ({"mechanism": "multi"}, {"kind": "attributes", "attributes": [
        {"name": "a", "kind": "attributes", "attributes": []}]}, r"\(a\).kind must be one of"),
    ({"mechanism": "multi"}, {"kind": "attributes", "attributes": [
        {"name": "a", "kind": "categories", "labels": ["x"]}]},
     r"attributes\[0\] \(a\): domain.labels"),
    ({"mechanism": "multi"}, {"kind": "attributes", "attributes": [
        {"name": f"a{i}", "kind": "integers", "low": 0, "high": 2**20} for i in range(4)]},
     "multiply to .* > 2\\^62"),
])
def test_bad_multi_attribute_specs_name_the_problem(oracle: dict[str, Any],
                                                   domain: dict[str, Any], match: str) -> None:
    with pytest.raises(ParameterError, match=match):
        CollectionSpec.from_dict({"id": "p", "oracle": {"epsilon": 1.0, **oracle},
                                  "domain": domain})


def test_device_tuples_map_to_indices_by_name_or_position() -> None:
    dom = spec().domain
    idx = dom.attribute_indices([{"os": "win", "apps": 7, "age": 55.0}, ("mac", 0, 100)])
    assert idx.tolist() == [[2, 7, 11], [1, 0, 19]]
    assert dom.index([("win", 7, 55.0)]).tolist() == [(2 * 41 + 7) * 20 + 11]
    with pytest.raises(ParameterError, match=r"missing \['age'\]"):
        dom.index([{"os": "win", "apps": 7}])
    with pytest.raises(ParameterError, match="attribute 'os'.*labels"):
        dom.index([("bsd", 1, 2.0)])
    with pytest.raises(ParameterError, match="sequence of 3 values"):
        dom.index([("win", 1)])


def test_messages_decode_and_aggregate_exactly_once_per_report() -> None:
    s = spec(sample=2)
    o = s.oracle()
    assert isinstance(o, MultiAttribute)
    rng = np.random.default_rng(3)
    vals = rng.integers(0, s.domain.size, 1000)
    batches = [o.perturb(vals[i:i + 100], rng=rng) for i in range(0, 1000, 100)]
    msgs = [encode_message(s, b, fmt) for b, fmt in zip(batches, ["binary", "json"] * 5,
                                                         strict=True)]
    state, bad = MessageDecoder(s).aggregate_many(msgs)
    assert not bad and state.n == 1000
    assert state == sum((o.aggregate(b) for b in batches[1:]), o.aggregate(batches[0]))
    assert o.attribute_counts(state).sum() == 2 * 1000
    sub = s.attribute_spec("os")
    assert o.attribute_state(state, "os").fingerprint == sub.oracle().fingerprint


def test_a_collection_declares_pairs_and_labels_their_values() -> None:
    s = spec(pairs=[["os", "apps"]])
    assert s.attribute_names == ("os", "apps", "age", "os*apps")
    sub = s.attribute_spec("os*apps")
    assert sub.domain.kind == "categories" and sub.domain.size == 3 * 41
    assert sub.domain.labels[:2] == ("linux & 0", "linux & 1")
    assert sub.oracle().domain_size == 3 * 41
    assert CollectionSpec.from_dict(s.to_dict()).fingerprint == s.fingerprint
    assert spec().fingerprint != s.fingerprint
