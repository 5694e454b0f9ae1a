"""Phase collections: the protocol key, ε accounting, next phases, device phases."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import ldpcore
from ldpcore.collection import CollectionSpec
from ldpcore.errors import ParameterError
from ldpcore.setvalued.phases import Protocol, device_phase, next_phase
from ldpcore.setvalued.synthetic import zipf_sets

DOMAIN = {"kind": "integers", "low": 0, "high": 31}


def phase(name: str, ph: str, oracle: dict[str, Any], eps_total: float) -> dict[str, Any]:
    return {"id": f"g.{ph}", "oracle": oracle, "domain": DOMAIN,
            "protocol": {"name": name, "group": "g", "phase": ph, "k": 3,
                         "epsilon_total": eps_total}}


def advance(spec: CollectionSpec, sets: Any, seed: int) -> CollectionSpec:
    o = spec.oracle()
    st = o.aggregate(o.perturb_sets(sets, rng=seed))  # type: ignore[attr-defined]
    assert spec.protocol is not None
    return CollectionSpec.from_dict(next_phase(spec.to_dict(),
                                               Protocol.from_dict(spec.protocol, o), o, st))


def test_svsm_walks_its_five_phases_from_each_answer() -> None:
    sets = zipf_sets(30_000, 32, rng=np.random.default_rng(2))
    spec = CollectionSpec.from_dict(phase("svsm", "candidates", {"mechanism": "ps",
                                                                 "epsilon": 3.0}, 3.0))
    seen = []
    for seed in range(4):
        spec = advance(spec, sets, seed)
        assert spec.protocol is not None
        seen.append((spec.protocol["phase"], spec.oracle_spec["mechanism"]))
    assert seen == [("sizes", "setsize"), ("frequencies", "ps"), ("itemset-sizes", "setsize"),
                    ("itemsets", "psi")]
    assert [0] in spec.oracle_spec["itemsets"] and [0, 1] in spec.oracle_spec["itemsets"]
    o = spec.oracle()
    with pytest.raises(ldpcore.ParameterError, match="last phase"):
        next_phase(spec.to_dict(), Protocol.from_dict(spec.protocol, o), o,
                   o.aggregate(o.perturb_sets([[0]], rng=1)))  # type: ignore[attr-defined]


def test_ldpminer_phase_two_pads_its_candidates_to_2k_at_half_the_total() -> None:
    sets = zipf_sets(20_000, 32, rng=np.random.default_rng(3))
    spec = CollectionSpec.from_dict(phase("ldpminer", "candidates",
                                          {"mechanism": "ps", "epsilon": 1.0, "length": 4,
                                           "inner": "olh"}, 2.0))
    nxt = advance(spec, sets, 1)
    assert nxt.oracle_spec["length"] == 6 and len(nxt.oracle_spec["candidates"]) == 6
    assert nxt.oracle_spec["epsilon"] == 1.0 and nxt.protocol["epsilon_total"] == 2.0  # type: ignore


@pytest.mark.parametrize(("name", "eps_total"), [("svim", 2.0), ("ldpminer", 1.0)])
def test_a_wrong_total_epsilon_is_refused_naming_the_rule(name: str, eps_total: float) -> None:
    with pytest.raises(ldpcore.ParameterError, match="epsilon_total"):
        CollectionSpec.from_dict(phase(name, "candidates", {"mechanism": "ps", "epsilon": 1.0},
                                       eps_total))


def test_a_phase_needs_its_mechanism_and_known_keys() -> None:
    with pytest.raises(ldpcore.ParameterError, match="needs mechanism 'setsize'"):
        CollectionSpec.from_dict(phase("svim", "sizes", {"mechanism": "ps", "epsilon": 1.0},
                                       1.0))
    bad = phase("svim", "candidates", {"mechanism": "ps", "epsilon": 1.0}, 1.0)
    bad["protocol"]["fractions"] = [0.5, 0.5]
    with pytest.raises(ldpcore.ParameterError, match="fractions"):
        CollectionSpec.from_dict(bad)


def test_the_protocol_is_part_of_the_fingerprint_and_plain_specs_keep_theirs() -> None:
    with_p = CollectionSpec.from_dict(phase("svim", "candidates",
                                            {"mechanism": "ps", "epsilon": 1.0}, 1.0))
    # Outside a protocol group a ps collection declares its padding length.
    plain = {k: v for k, v in phase("svim", "candidates", {"mechanism": "ps", "epsilon": 1.0,
                                                           "length": 1},
                                    1.0).items() if k != "protocol"}
    assert CollectionSpec.from_dict(plain).fingerprint != with_p.fingerprint
    assert "protocol" not in CollectionSpec.from_dict(plain).to_dict()
    assert CollectionSpec.from_dict(with_p.to_dict()) == with_p


def test_a_plain_set_valued_collection_must_declare_its_padding_length() -> None:
    raw = {"id": "apps", "oracle": {"mechanism": "ps", "epsilon": 1.0},
           "domain": {"kind": "categories", "labels": ["a", "b", "c"]}}
    with pytest.raises(ParameterError, match="oracle.length is required.*90th percentile"):
        CollectionSpec.from_dict(raw)
    with pytest.raises(ParameterError, match="oracle.length is required"):
        CollectionSpec.from_dict({**raw, "oracle": {"mechanism": "psi", "epsilon": 1.0}})
    spec = CollectionSpec.from_dict({**raw, "oracle": {"mechanism": "ps", "epsilon": 1.0,
                                                        "length": 2}})
    # The canonical form carries it, so a stored spec reads back.
    assert CollectionSpec.from_dict(spec.to_dict()).oracle_spec["length"] == 2


def test_device_phases_follow_the_fractions_and_are_stable() -> None:
    counts = np.bincount([device_phase(i.to_bytes(4, "big"), "g", (0.5, 0.1, 0.4))
                          for i in range(4000)], minlength=3) / 4000
    assert np.allclose(counts, [0.5, 0.1, 0.4], atol=0.03)
    assert device_phase(b"x", "g", (0.5, 0.5)) == device_phase(b"x", "g", (0.5, 0.5))
