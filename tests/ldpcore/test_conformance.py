"""Generic conformance suite, parametrised over every registered frequency oracle.

Each mechanism must: round-trip its spec and its reports (binary and JSON),
aggregate additively, reproduce with a seed, and reject bad input with typed
errors.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import ldpcore
from ldpcore import wire

from .oracle_cases import FREQUENCY_MECHANISMS, available, make

MECHS = available()


def test_every_registered_mechanism_is_implemented() -> None:
    assert sorted(MECHS) == sorted(FREQUENCY_MECHANISMS)


@pytest.fixture(params=MECHS)
def mech(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(params=[(2.0, 6), (0.5, 37), (1.0, 64)], ids=lambda p: f"eps{p[0]}-d{p[1]}")
def oracle(request: pytest.FixtureRequest, mech: str) -> ldpcore.FrequencyOracle:
    eps, d = request.param
    return make(mech, epsilon=eps, domain_size=d)


def _values(d: int, n: int = 500, seed: int = 3) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, d, size=n)


def test_spec_is_json_and_rebuilds_an_equal_oracle(oracle: ldpcore.FrequencyOracle) -> None:
    spec = json.loads(json.dumps(oracle.spec))
    again = ldpcore.make_oracle(**spec)
    assert again == oracle
    assert again.fingerprint == oracle.fingerprint
    assert spec["mechanism"] == oracle.mechanism


def test_fingerprint_changes_with_epsilon(mech: str) -> None:
    a = make(mech, epsilon=1.0, domain_size=16)
    b = make(mech, epsilon=1.5, domain_size=16)
    assert a.fingerprint != b.fingerprint


def test_binary_wire_round_trip(oracle: ldpcore.FrequencyOracle) -> None:
    reps = oracle.perturb(_values(oracle.domain_size), rng=1)
    data = wire.encode(reps)
    back = wire.decode(oracle, data)
    assert back == reps and len(back) == len(reps) == 500
    assert wire.peek(data).fingerprint == oracle.fingerprint


def test_json_records_round_trip(oracle: ldpcore.FrequencyOracle) -> None:
    reps = oracle.perturb(_values(oracle.domain_size, n=50), rng=2)
    records = json.loads(json.dumps(wire.to_records(reps)))
    assert len(records) == 50
    assert wire.from_records(oracle, records) == reps


def test_empty_batch_round_trips(oracle: ldpcore.FrequencyOracle) -> None:
    reps = oracle.perturb(np.zeros(0, dtype=np.int64), rng=1)
    assert len(reps) == 0
    assert wire.decode(oracle, wire.encode(reps)) == reps
    assert oracle.aggregate(reps) == oracle.new_state()


def test_aggregation_is_additive_and_independent_of_n(oracle: ldpcore.FrequencyOracle) -> None:
    reps = oracle.perturb(_values(oracle.domain_size, n=1000), rng=4)
    whole = oracle.aggregate(reps)
    a, b = oracle.aggregate(reps[:313]), oracle.aggregate(reps[313:])
    assert whole == a + b
    acc = oracle.new_state()
    acc += a
    acc += b
    assert acc == whole and acc.n == 1000
    assert whole.counts.dtype == np.int64
    assert whole.counts.shape == oracle.state_shape == oracle.new_state().counts.shape
    assert ldpcore.State.from_bytes(whole.to_bytes()) == whole
    assert oracle.aggregate(ldpcore.Reports.concat([reps[:10], reps[10:]])) == whole


def test_seeded_perturbation_is_reproducible(oracle: ldpcore.FrequencyOracle) -> None:
    vals = _values(oracle.domain_size)
    assert oracle.perturb(vals, rng=11) == oracle.perturb(vals, rng=11)
    g1, g2 = np.random.default_rng(5), np.random.default_rng(5)
    assert oracle.perturb(vals, rng=g1) == oracle.perturb(vals, rng=g2)


def test_unseeded_perturbation_uses_fresh_entropy(oracle: ldpcore.FrequencyOracle) -> None:
    vals = _values(oracle.domain_size, n=200)
    assert oracle.perturb(vals) != oracle.perturb(vals)


def test_estimate_has_shape_d_and_finite_values(oracle: ldpcore.FrequencyOracle) -> None:
    est = oracle.estimate(oracle.aggregate(oracle.perturb(_values(oracle.domain_size), rng=6)))
    assert est.shape == (oracle.domain_size,)
    assert np.all(np.isfinite(est))


def test_variance_is_positive_and_shrinks_as_one_over_n(oracle: ldpcore.FrequencyOracle) -> None:
    v1, v2 = oracle.variance(1000), oracle.variance(4000)
    assert v1 > 0
    assert v1 / v2 == pytest.approx(4.0, rel=1e-9)
    assert oracle.variance(1000, frequency=0.3) > 0


@pytest.mark.parametrize("bad", [0, -1.0, float("inf"), float("nan"), "1", None, True])
def test_bad_epsilon_is_a_parameter_error(mech: str, bad: object) -> None:
    with pytest.raises(ldpcore.ParameterError, match="epsilon"):
        make(mech, epsilon=bad, domain_size=8)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [1, 0, -3, 2.5, "8"])
def test_bad_domain_size_is_a_parameter_error(mech: str, bad: object) -> None:
    with pytest.raises(ldpcore.ParameterError, match="domain_size"):
        make(mech, epsilon=1.0, domain_size=bad)  # type: ignore[arg-type]


def test_unknown_parameter_is_rejected_naming_the_allowed_ones(mech: str) -> None:
    with pytest.raises(ldpcore.ParameterError, match="allowed"):
        make(mech, epsilon=1.0, domain_size=8, bogus=3)
    with pytest.raises(ValueError):  # typed errors are ValueErrors for generic callers
        make(mech, epsilon=1.0, domain_size=8, bogus=3)


def test_out_of_domain_values_are_rejected(oracle: ldpcore.FrequencyOracle) -> None:
    d = oracle.domain_size
    for bad in ([d], [-1], [0.5], [[0, 1]], ["a"]):
        with pytest.raises(ldpcore.ParameterError):
            oracle.perturb(bad, rng=1)


def test_decode_rejects_garbage_truncation_and_foreign_batches(
        oracle: ldpcore.FrequencyOracle) -> None:
    reps = oracle.perturb(_values(oracle.domain_size, n=20), rng=1)
    data = wire.encode(reps)
    for bad in (b"", b"garbage", data[:-1], data + b"\x00", b"LDPR\x09" + data[5:]):
        with pytest.raises(ldpcore.ReportError):
            wire.decode(oracle, bad)
    other = make(oracle.mechanism, epsilon=oracle.epsilon * 2, domain_size=oracle.domain_size)
    with pytest.raises(ldpcore.ReportError, match="fingerprint"):
        wire.decode(other, data)
    grr = ldpcore.make_oracle("grr", epsilon=1.0, domain_size=5)
    if oracle.mechanism != "grr":
        with pytest.raises(ldpcore.ReportError, match="mechanism"):
            wire.decode(grr, data)


def test_aggregate_rejects_out_of_range_columns(oracle: ldpcore.FrequencyOracle) -> None:
    reps = oracle.perturb(_values(oracle.domain_size, n=20), rng=1)
    for col in oracle.report_columns:
        if col.bits:
            continue
        if col.high >= np.iinfo(np.dtype(col.dtype)).max:
            continue  # full-range column: nothing can be out of range
        cols = {k: v.copy() for k, v in reps.columns.items()}
        cols[col.name][0] = col.high + 1
        bad = ldpcore.Reports(reps.mechanism, reps.fingerprint, cols)
        with pytest.raises(ldpcore.ReportError, match=col.name):
            oracle.aggregate(bad)
        with pytest.raises(ldpcore.ReportError):
            wire.decode(oracle, wire.encode(bad))


def test_json_records_are_validated(oracle: ldpcore.FrequencyOracle) -> None:
    rec = wire.to_records(oracle.perturb([0], rng=1))[0]
    name = oracle.report_columns[0].name
    for broken in ({k: v for k, v in rec.items() if k != name}, {**rec, "fingerprint": "0" * 16},
                   {**rec, name: "x"}, {**rec, "extra": 1}):
        with pytest.raises(ldpcore.ReportError):
            wire.from_records(oracle, [broken])


def test_states_of_different_oracles_do_not_mix(oracle: ldpcore.FrequencyOracle) -> None:
    st = oracle.aggregate(oracle.perturb([0, 1], rng=1))
    other = make(oracle.mechanism, epsilon=oracle.epsilon + 1, domain_size=oracle.domain_size)
    with pytest.raises(ldpcore.StateError):
        other.estimate(st)
    with pytest.raises(ldpcore.StateError):
        st + other.aggregate(other.perturb([0], rng=1))
    with pytest.raises(ldpcore.StateError):
        oracle.estimate(oracle.new_state())
    with pytest.raises(ldpcore.StateError):
        ldpcore.State.from_bytes(st.to_bytes()[:-3])
