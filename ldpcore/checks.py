"""The conformance suite every mechanism must pass, shipped with the library.

In the spirit of river's estimator checks: :func:`yield_checks` gives the checks
that apply to a mechanism (by its capabilities, :mod:`ldpcore.capabilities`) and
:func:`check_mechanism` runs them all.  Each check takes a *freshly built* oracle
and raises ``AssertionError`` saying what is wrong.  Each class says which small
parameter sets to check it with (:meth:`~ldpcore.base.Mechanism._unit_test_params`);
:func:`unit_test_oracles` builds them for every registered mechanism.

The test suite runs this over every registered mechanism; a new mechanism gets
the whole suite by being registered.

>>> import ldpcore
>>> from ldpcore.checks import check_mechanism
>>> check_mechanism(ldpcore.make_oracle("grr", epsilon=1.0, domain_size=5))
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from . import wire
from .base import Mechanism, Reports, State
from .capabilities import (
    AttributeEstimates,
    FrequencyEstimates,
    HeavyHitterSearch,
    ItemsetSupport,
    MeanEstimates,
    RangeQueries,
    SetSizeEstimates,
)
from .errors import ParameterError, ReportError, StateError
from .registry import MECHANISMS, make_oracle, oracle_class

__all__ = ["yield_checks", "check_mechanism", "unit_test_oracles", "UNIT_TEST_EPSILONS"]

Check = Callable[[Mechanism], None]

UNIT_TEST_EPSILONS = (2.0, 0.5, 1.0)


def _values(o: Mechanism, n: int = 500, seed: int = 3) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, o.domain_size, size=n)


def _rebuild(o: Mechanism, **changes: Any) -> Mechanism:
    return make_oracle(**{**o.spec, **changes})


def check_spec_round_trip(o: Mechanism) -> None:
    """The spec is JSON and rebuilds an equal oracle with the same fingerprint."""
    spec = json.loads(json.dumps(o.spec))
    again = make_oracle(**spec)
    assert again == o and again.fingerprint == o.fingerprint
    assert spec["mechanism"] == o.mechanism


def check_fingerprint_follows_epsilon(o: Mechanism) -> None:
    """Another ε is another fingerprint (reports of the two never mix)."""
    other = _rebuild(o, epsilon=o.epsilon * 0.75)
    assert other.fingerprint != o.fingerprint


def check_binary_wire_round_trip(o: Mechanism) -> None:
    """Reports survive the binary wire format unchanged."""
    reps = o.perturb(_values(o), rng=1)
    back = wire.decode(o, wire.encode(reps))
    assert back == reps and len(back) == 500


def check_json_records_round_trip(o: Mechanism) -> None:
    """Reports survive the JSON records unchanged."""
    reps = o.perturb(_values(o, n=50), rng=2)
    records = json.loads(json.dumps(wire.to_records(reps)))
    assert wire.from_records(o, records) == reps


def check_empty_batch(o: Mechanism) -> None:
    """An empty batch encodes, decodes and aggregates to the empty state."""
    empty = o.perturb(np.zeros(0, dtype=np.int64), rng=1)
    assert len(wire.decode(o, wire.encode(empty))) == 0
    assert o.aggregate(empty) == o.new_state()


def check_aggregation_is_additive(o: Mechanism) -> None:
    """aggregate(a ∪ b) = aggregate(a) + aggregate(b); the state size ignores n."""
    a = o.perturb(_values(o, seed=4), rng=4)
    b = o.perturb(_values(o, n=300, seed=5), rng=5)
    both = o.aggregate(Reports.concat([a, b]))
    assert both == o.aggregate(a) + o.aggregate(b)
    assert both.n == 800 and both.counts.shape == o.state_shape
    assert State.from_bytes(both.to_bytes()) == both


def check_seeded_perturbation_reproduces(o: Mechanism) -> None:
    """A seed makes perturbation reproducible."""
    vals = _values(o, n=200)
    assert o.perturb(vals, rng=9) == o.perturb(vals, rng=9)


def check_unseeded_perturbation_is_fresh(o: Mechanism) -> None:
    """Without a seed, randomness comes fresh from the OS."""
    vals = _values(o, n=200)
    assert o.perturb(vals) != o.perturb(vals)


def check_out_of_domain_values_rejected(o: Mechanism) -> None:
    """Values outside [0, d), non-integers and nested lists are ParameterErrors."""
    for bad in ([o.domain_size], [-1], [0.5], [[0, 1]], ["a"]):
        try:
            o.perturb(bad, rng=1)
        except ParameterError:
            continue
        raise AssertionError(f"perturb({bad!r}) was accepted")


def _raises(exc: type[Exception], fn: Callable[..., Any], what: str, *args: Any) -> Exception:
    try:
        fn(*args)
    except exc as e:
        return e
    raise AssertionError(f"{what}: no {exc.__name__}")


def check_decode_rejects_bad_batches(o: Mechanism) -> None:
    """Garbage, truncation, trailing bytes, other versions and other specs are refused."""
    data = wire.encode(o.perturb(_values(o, n=20), rng=1))
    for bad in (b"", b"garbage", data[:-1], data + b"\x00", b"LDPR\x09" + data[5:]):
        _raises(ReportError, wire.decode, f"decode({bad[:12]!r}…)", o, bad)
    other = _rebuild(o, epsilon=o.epsilon * 0.75)
    err = _raises(ReportError, lambda: wire.decode(other, data), "another ε")
    assert getattr(err, "reason", None) == "fingerprint", err


def check_aggregate_rejects_out_of_range_columns(o: Mechanism) -> None:
    """A column value beyond its declared range is a ReportError naming the column."""
    reps = o.perturb(_values(o, n=20), rng=1)
    for col in o.report_columns:
        if col.bits or col.high >= np.iinfo(np.dtype(col.dtype)).max:
            continue  # bit masks and full-range columns: nothing is out of range
        cols = {k: v.copy() for k, v in reps.columns.items()}
        cols[col.name][0] = col.high + 1
        bad = Reports(reps.mechanism, reps.fingerprint, cols)
        err = _raises(ReportError, o.aggregate, f"column {col.name}", bad)
        assert col.name in str(err), err
        _raises(ReportError, wire.decode, f"decoded column {col.name}", o, wire.encode(bad))


def check_json_records_validated(o: Mechanism) -> None:
    """Records with a missing, extra, mistyped column or a foreign fingerprint are refused."""
    rec = wire.to_records(o.perturb([0], rng=1))[0]
    name = o.report_columns[0].name
    for broken in ({k: v for k, v in rec.items() if k != name}, {**rec, "fingerprint": "0" * 16},
                   {**rec, name: "x"}, {**rec, "extra": 1}):
        _raises(ReportError, wire.from_records, f"record {broken}", o, [broken])


def check_states_do_not_mix(o: Mechanism) -> None:
    """States of another spec cannot be added; corrupt state bytes are refused."""
    st = o.aggregate(o.perturb([0, 1], rng=1))
    other = _rebuild(o, epsilon=o.epsilon * 0.75)
    _raises(StateError, lambda: st + other.aggregate(other.perturb([0], rng=1)), "mixed states")
    _raises(StateError, lambda: State.from_bytes(st.to_bytes()[:-3]), "truncated state")
    _raises(StateError, lambda: other.check_state(st), "foreign state")


def check_frequency_estimates(o: Mechanism) -> None:
    """Estimates have shape (d,) and are finite; variance is positive and ∝ 1/n."""
    assert isinstance(o, FrequencyEstimates)
    est = o.estimate(o.aggregate(o.perturb(_values(o), rng=6)))
    assert est.shape == (o.domain_size,) and np.all(np.isfinite(est))
    v1, v2 = o.variance(1000), o.variance(4000)
    assert v1 > 0 and abs(v1 / v2 - 4.0) < 1e-9, (v1, v2)
    assert o.variance(1000, 0.3) > 0
    _raises(StateError, lambda: o.estimate(o.new_state()), "estimate of an empty state")


def check_range_queries(o: Mechanism) -> None:
    """The CDF has shape (d,); a range is the difference of two prefixes; quantiles in [0, d)."""
    assert isinstance(o, RangeQueries)
    st = o.aggregate(o.perturb(_values(o, n=2000), rng=7))
    cdf = np.asarray(o.cdf(st))
    d = o.domain_size
    assert cdf.shape == (d,) and np.all(np.isfinite(cdf))
    lo, hi = d // 4, (3 * d) // 4
    want = cdf[hi] - (cdf[lo - 1] if lo else 0.0)
    assert abs(o.range_query(st, lo, hi) - want) < 1e-9
    assert 0 <= o.quantile(st, 0.5) < d
    assert o.range_variance(1000, lo, hi) > 0


def check_mean_estimates(o: Mechanism) -> None:
    """The mean is finite; its variance is positive and ∝ 1/n."""
    assert isinstance(o, MeanEstimates)
    st = o.aggregate(o.perturb(_values(o, n=2000), rng=8))
    assert np.isfinite(o.mean(st))
    v1, v2 = o.mean_variance(1000), o.mean_variance(4000)
    assert v1 > 0 and abs(v1 / v2 - 4.0) < 1e-9, (v1, v2)


def check_heavy_hitter_search(o: Mechanism) -> None:
    """At most k distinct values in the domain, each with a finite estimate and error."""
    assert isinstance(o, HeavyHitterSearch)
    vals = np.where(np.arange(3000) % 2 == 0, 3, _values(o, n=3000))
    top = o.heavy_hitters(o.aggregate(o.perturb(vals, rng=9)), 2)
    assert len(top) <= 2 and len({v for v, _, _ in top}) == len(top)
    for v, f, se in top:
        assert 0 <= v < o.domain_size and np.isfinite(f) and se > 0


def check_attribute_estimates(o: Mechanism) -> None:
    """Each attribute's sub-state is its oracle's state of the reports that answered it;
    the per-attribute report counts add up to sample × n."""
    assert isinstance(o, AttributeEstimates)
    st = o.aggregate(o.perturb(_values(o, n=400), rng=10))
    total = 0
    for name in o.attribute_names:
        sub, part = o.attribute(name), o.attribute_state(st, name)
        sub.check_state(part)
        assert part.n > 0 and part.counts.min() >= 0
        total += part.n
    assert total == getattr(o, "sample", 1) * st.n, (total, st.n)
    _raises(ParameterError, lambda: o.attribute("no-such-attribute"), "unknown attribute")


def check_itemset_support(o: Mechanism) -> None:
    """One finite support and positive standard error per candidate itemset."""
    assert isinstance(o, ItemsetSupport)
    sets = [list(range(i % 4)) for i in range(2000)]
    sup, se = o.itemset_support(o.aggregate(o.perturb_sets(sets, rng=10)))  # type: ignore
    assert sup.shape == se.shape == (len(o.itemsets),)
    assert np.all(np.isfinite(sup)) and np.all(se > 0)


def check_set_size_estimates(o: Mechanism) -> None:
    """The size distribution is a distribution over 0..max_size; percentiles are sizes."""
    assert isinstance(o, SetSizeEstimates)
    sets = [list(range(i % 4)) for i in range(2000)]
    st = o.aggregate(o.perturb_sets(sets, rng=11))  # type: ignore[attr-defined]
    dist = o.size_distribution(st)
    assert dist.shape == (o.max_size + 1,) and np.all(dist >= 0)
    assert abs(float(dist.sum()) - 1.0) < 1e-9
    assert 1 <= o.size_percentile(st, 0.9) <= max(o.max_size, 1)


_COMMON: tuple[Check, ...] = (
    check_spec_round_trip, check_fingerprint_follows_epsilon, check_binary_wire_round_trip,
    check_json_records_round_trip, check_empty_batch, check_aggregation_is_additive,
    check_seeded_perturbation_reproduces, check_unseeded_perturbation_is_fresh,
    check_out_of_domain_values_rejected, check_decode_rejects_bad_batches,
    check_aggregate_rejects_out_of_range_columns, check_json_records_validated,
    check_states_do_not_mix,
)
_BY_CAPABILITY: tuple[tuple[type, Check], ...] = (
    (FrequencyEstimates, check_frequency_estimates),
    (RangeQueries, check_range_queries),
    (MeanEstimates, check_mean_estimates),
    (HeavyHitterSearch, check_heavy_hitter_search),
    (AttributeEstimates, check_attribute_estimates),
    (ItemsetSupport, check_itemset_support),
    (SetSizeEstimates, check_set_size_estimates),
)


def yield_checks(o: Mechanism) -> Iterator[Check]:
    """Every check that applies to ``o``: the common ones, then one per capability."""
    yield from _COMMON
    for cap, check in _BY_CAPABILITY:
        if isinstance(o, cap):
            yield check


def check_mechanism(o: Mechanism) -> None:
    """Run every applicable check (raises AssertionError naming the first failure)."""
    for check in yield_checks(o):
        try:
            check(o)
        except AssertionError as exc:
            raise AssertionError(f"{check.__name__} failed for {o!r}: {exc}") from exc


def unit_test_oracles() -> Iterator[tuple[str, Mechanism]]:
    """(id, oracle) for every registered mechanism class × its unit-test params × ε."""
    for name in MECHANISMS:
        cls = oracle_class(name)
        if not (isinstance(cls, type) and issubclass(cls, Mechanism)):
            continue  # a factory (adaptive): it builds registered classes
        for params in cls._unit_test_params():
            for eps in UNIT_TEST_EPSILONS:
                label = ",".join(f"{k}={v}" for k, v in params.items())
                yield f"{name}-eps{eps}-{label}", make_oracle(name, epsilon=eps, **params)
