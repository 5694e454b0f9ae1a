"""Safe parameters: every mechanism validates ε and its other parameters against the
documented ranges of :mod:`ldpcore.limits` at construction, and nothing a request body
can hold makes construction or spec parsing fail with anything but ParameterError."""

from __future__ import annotations

import inspect
import json
import math
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import ldpcore
from ldpcore.collection import CollectionSpec
from ldpcore.limits import (
    DOMAIN_RANGES,
    EPSILON_RANGES,
    PARAMETER_RANGES,
    PROB_FLOOR_32,
    PROB_FLOOR_64,
    SW_B_MIN,
    epsilon_range,
    exact_epsilon_max,
    param_ranges,
)
from ldpcore.registry import MECHANISMS, oracle_class

ALL = sorted(MECHANISMS)
NUMERIC = ("sw", "pm", "duchi")
# Composite mechanisms (ldpcore.multi): their domain_size is derived from their parts.
COMPOSITE: dict[str, dict[str, Any]] = {
    "multi": {"attributes": [{"name": "a", "mechanism": "grr", "domain_size": 4},
                             {"name": "b", "mechanism": "grr", "domain_size": 2}]},
    "vector": {"dimensions": 3},
}


def size_params(mech: str) -> dict[str, Any]:
    """A small valid size for mech."""
    if mech in COMPOSITE:
        return dict(COMPOSITE[mech])
    if mech == "pem":
        return {"bits": 16, "keep": 8, "eta": 4, "pool": 16}
    if mech in NUMERIC:
        return {"bins": 8}
    return {"domain_size": 8}


# ---- the table ---------------------------------------------------------------------------
def test_every_registered_mechanism_has_documented_ranges() -> None:
    assert set(EPSILON_RANGES) == set(MECHANISMS) == set(DOMAIN_RANGES) == set(PARAMETER_RANGES)
    table = param_ranges()
    json.dumps(table)  # JSON-able, for the API
    for mech in ALL:
        assert "epsilon" in table[mech]
        assert table[mech]["epsilon_bounds"] == list(EPSILON_RANGES[mech])


@pytest.mark.parametrize("mech", ALL)
def test_every_mechanism_class_declares_its_own_ranges(mech: str) -> None:
    # Declared in the class body itself (not inherited by accident from a parent), and
    # ldpcore.limits only lists what the classes declare.
    cls = oracle_class(mech)
    declaring = cls if isinstance(cls, type) else type(cls)  # adaptive: a factory object
    for attr in ("epsilon_bounds", "domain_size_bounds", "parameter_ranges"):
        assert attr in vars(declaring), f"{declaring.__name__} does not declare {attr}"
    assert EPSILON_RANGES[mech] == cls.epsilon_bounds
    assert DOMAIN_RANGES[mech] == cls.domain_size_bounds
    assert PARAMETER_RANGES[mech] == dict(cls.parameter_ranges)
    lo, hi = cls.epsilon_bounds
    assert PARAMETER_RANGES[mech]["epsilon"].startswith(f"real in [{lo}, {hi}]")
    assert exact_epsilon_max(mech) == cls.exact_epsilon_max()


def test_a_subclass_that_declares_narrower_ranges_is_held_to_them() -> None:
    from ldpcore.frequency.grr import GRR

    class NarrowGRR(GRR):
        mechanism = "narrow-grr"
        epsilon_bounds = (0.5, 2.0)
        domain_size_bounds = (2, 8)

    assert NarrowGRR(epsilon=2.0, domain_size=8).epsilon == 2.0
    with pytest.raises(ldpcore.ParameterError, match=r"epsilon .*\[0.5, 2.0\]"):
        NarrowGRR(epsilon=2.5, domain_size=8)
    with pytest.raises(ldpcore.ParameterError, match=r"domain_size .*\[2, 8\]"):
        NarrowGRR(epsilon=1.0, domain_size=9)
    # Unregistered: the views fall back to the defaults every Mechanism has.
    assert epsilon_range("narrow-grr") == ldpcore.Mechanism.epsilon_bounds == (0.001, 29.8)


@pytest.mark.parametrize("mech", ALL)
def test_upper_bound_is_the_exact_bound_rounded_down_to_a_tenth(mech: str) -> None:
    hi = epsilon_range(mech)[1]
    exact = exact_epsilon_max(mech)
    assert hi <= exact < hi + 0.1


def test_sampled_probabilities_at_the_upper_bounds_stay_above_the_grid_floor() -> None:
    # The smallest probability each kernel compares with a uniform draw, at its largest ε.
    grr = ldpcore.make_oracle("grr", epsilon=EPSILON_RANGES["grr"][1], domain_size=2)
    assert 1 - grr.p >= PROB_FLOOR_64
    oue = ldpcore.make_oracle("oue", epsilon=EPSILON_RANGES["oue"][1], domain_size=2)
    assert oue.q >= PROB_FLOOR_32  # float32 draws
    sue = ldpcore.make_oracle("sue", epsilon=EPSILON_RANGES["sue"][1], domain_size=2)
    assert sue.q >= PROB_FLOOR_32
    cms = ldpcore.make_oracle("cms", epsilon=EPSILON_RANGES["cms"][1], domain_size=8)
    assert cms.flip >= PROB_FLOOR_32
    pm = ldpcore.make_oracle("pm", epsilon=EPSILON_RANGES["pm"][1], bins=8)
    assert 1 - pm.p_band >= PROB_FLOOR_64
    sw = ldpcore.make_oracle("sw", epsilon=EPSILON_RANGES["sw"][1], bins=8)
    assert sw.b >= SW_B_MIN and sw.q >= PROB_FLOOR_64
    olh = ldpcore.make_oracle("olh", epsilon=EPSILON_RANGES["olh"][1], domain_size=2**23)
    assert olh.g == 2 and 1 - olh.p >= PROB_FLOOR_64


# ---- ε bounds ----------------------------------------------------------------------------
@pytest.mark.parametrize("mech", ALL)
def test_epsilon_just_inside_each_bound_constructs(mech: str) -> None:
    lo, hi = epsilon_range(mech)
    for eps in (lo, math.nextafter(lo, math.inf), math.nextafter(hi, 0.0), hi):
        o = ldpcore.make_oracle(mech, epsilon=eps, **size_params(mech))
        assert o.epsilon == eps


@pytest.mark.parametrize("mech", ALL)
def test_epsilon_just_outside_each_bound_names_epsilon_and_the_range(mech: str) -> None:
    lo, hi = epsilon_range(mech)
    for eps in (math.nextafter(lo, 0.0), math.nextafter(hi, math.inf)):
        with pytest.raises(ldpcore.ParameterError) as err:
            ldpcore.make_oracle(mech, epsilon=eps, **size_params(mech))
        assert "epsilon" in str(err.value) and f"[{lo}, {hi}]" in str(err.value)


@pytest.mark.parametrize("mech", ALL)
@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf"), 0.0, -1.0, True,
                                 False, "1.0", None, [1.0], {"v": 1}, 10**400, 710, 1e308])
def test_epsilon_that_is_not_a_finite_real_in_range_is_rejected(mech: str, bad: Any) -> None:
    with pytest.raises(ldpcore.ParameterError, match="epsilon"):
        ldpcore.make_oracle(mech, epsilon=bad, **size_params(mech))


@pytest.mark.parametrize("eps", [35.0, 50.0, 709.0, 710.0, 1000.0])
def test_olh_at_the_epsilons_of_issue_14_is_refused_at_once(eps: float) -> None:
    with pytest.raises(ldpcore.ParameterError, match=r"epsilon must be .*\[0.001, 29.8\]"):
        ldpcore.make_oracle("olh", epsilon=eps, domain_size=100)


def test_hh_epsilon_is_bounded_by_its_base() -> None:
    ldpcore.make_oracle("hh", epsilon=9.7, domain_size=64, base="oue")
    with pytest.raises(ldpcore.ParameterError, match=r"epsilon .*\[0.001, 9.7\].*'oue'"):
        ldpcore.make_oracle("hh", epsilon=9.8, domain_size=64, base="oue")
    ldpcore.make_oracle("hh", epsilon=29.8, domain_size=64, base="hrr")


# ---- other parameters --------------------------------------------------------------------
# psi at its largest domain builds its default itemsets (every item: 2^22 of them).
@pytest.mark.parametrize("mech", [pytest.param(m, marks=pytest.mark.slow) if m == "psi" else m
                                  for m in ALL if m != "pem" and m not in COMPOSITE])
def test_domain_size_bounds(mech: str) -> None:
    lo, hi = DOMAIN_RANGES[mech]
    key = "bins" if mech in NUMERIC else "domain_size"
    for d in (lo, hi):
        assert ldpcore.make_oracle(mech, epsilon=1.0, **{key: d}).domain_size == d
    for d in (lo - 1, hi + 1):
        with pytest.raises(ldpcore.ParameterError, match=rf"{key} must be .*\[{lo}, {hi}\]"):
            ldpcore.make_oracle(mech, epsilon=1.0, **{key: d})


def test_pem_bits_bounds_and_g_capped_by_the_state() -> None:
    for bits in (3, 63):
        with pytest.raises(ldpcore.ParameterError, match=r"bits must be .*\[4, 62\]"):
            ldpcore.make_oracle("pem", epsilon=1.0, bits=bits)
    o = ldpcore.make_oracle("pem", epsilon=29.8, bits=62, pool=4096, eta=1, keep=1)
    assert math.prod(o.state_shape) <= 1 << 26 and 2 <= o.g <= 1 << 16
    # below the cap g is OLH's optimum, as before
    assert ldpcore.make_oracle("pem", epsilon=4.0, bits=20, keep=16, eta=6).g == 56


def test_subset_size_is_bounded_by_the_kernels_resolution() -> None:
    d, eps = 1000, 29.8
    e = math.exp(eps)
    k_max = math.floor(d * (1 - PROB_FLOOR_64) / (PROB_FLOOR_64 * e + 1 - PROB_FLOOR_64))
    assert 1 < k_max < d - 1
    o = ldpcore.make_oracle("ss", epsilon=eps, domain_size=d, subset_size=k_max)
    assert 1 - o.p >= PROB_FLOOR_64
    with pytest.raises(ldpcore.ParameterError, match=rf"subset_size must be .*\[1, {k_max}\]"):
        ldpcore.make_oracle("ss", epsilon=eps, domain_size=d, subset_size=k_max + 1)


def test_sketch_and_square_wave_sizes_name_the_parameter() -> None:
    with pytest.raises(ldpcore.ParameterError, match="m=2 .*hash table"):
        ldpcore.make_oracle("cms", epsilon=1.0, domain_size=8192, m=2)
    with pytest.raises(ldpcore.ParameterError, match=r"^m must be .*\[2, 4096\]"):
        ldpcore.make_oracle("hcms", epsilon=1.0, domain_size=64, m=8192)
    with pytest.raises(ldpcore.ParameterError, match=r"out_bins must be .*\[2, 1024\]"):
        ldpcore.make_oracle("sw", epsilon=1.0, bins=4096, out_bins=2048)
    with pytest.raises(ldpcore.ParameterError, match=r"^b must be"):
        ldpcore.make_oracle("sw", epsilon=1.0, bins=8, b=1e-14)
    with pytest.raises(ldpcore.ParameterError, match=r"^b must be"):
        ldpcore.make_oracle("sw", epsilon=29.0, bins=8, b=10.0)
    with pytest.raises(ldpcore.ParameterError, match="fanout=1024 pads"):
        ldpcore.make_oracle("hh", epsilon=1.0, domain_size=2**22, fanout=1024)


# ---- estimates at the extremes -----------------------------------------------------------
def _freq_check(o: ldpcore.FrequencyOracle, values: np.ndarray, seed: int) -> None:
    n = values.size
    f = np.bincount(values, minlength=o.domain_size) / n  # the population's fractions
    est = o.estimate(o.aggregate(o.perturb(values, rng=seed)))
    sd = np.array([math.sqrt(o.variance(n, float(x))) for x in f])
    assert np.all(np.abs(est - f) <= 4.5 * sd + 1e-9), (o.mechanism, est - f, sd)


@pytest.mark.parametrize("mech", ["grr", "oue", "hrr", "ss", "sue"])
def test_frequency_estimates_stay_unbiased_at_the_largest_epsilon(mech: str) -> None:
    o = ldpcore.make_oracle(mech, epsilon=EPSILON_RANGES[mech][1], domain_size=16)
    values = np.random.default_rng(11).zipf(1.6, 40_000) % 16
    _freq_check(o, values, seed=12)


def test_numeric_means_stay_unbiased_at_the_largest_epsilon() -> None:
    x = np.random.default_rng(5).uniform(10.0, 40.0, 40_000)
    for mech in NUMERIC:
        o = ldpcore.make_oracle(mech, epsilon=EPSILON_RANGES[mech][1], bins=64, low=0.0,
                                high=50.0)
        bins = o.to_bins(x)
        # The device draws its value uniformly inside the bin: the target is the bins'
        # mean, and that draw adds width²/12 per report to the mechanism's variance.
        target = float(np.mean(o.bin_centers()[bins]))
        st_ = o.aggregate(o.perturb(bins, rng=6))
        sd = math.sqrt(o.mean_variance(st_.n) + o.width**2 / (12 * st_.n))
        assert abs(o.mean(st_) - target) <= 4.5 * sd, mech
    sw = ldpcore.make_oracle("sw", epsilon=EPSILON_RANGES["sw"][1], bins=16)
    dist = sw.distribution(sw.aggregate(sw.perturb(np.arange(16).repeat(200), rng=7)))
    assert np.all(np.isfinite(dist)) and abs(dist.sum() - 1) < 1e-9


# ---- property: nothing but ParameterError, nothing hangs ---------------------------------
HUGE = st.sampled_from([10**400, -(10**400), 2**63, 2**64, 2**31, 2**62, -(2**63)])
SCALARS = (st.none() | st.booleans() | st.integers() | HUGE | st.floats() | st.text(max_size=6))
JUNK = st.recursive(SCALARS, lambda kids: st.lists(kids, max_size=3)
                    | st.dictionaries(st.text(max_size=5), kids, max_size=3), max_leaves=8)


def _chance(draw: st.DrawFn, one_in: int) -> bool:
    """True with probability 1/one_in (sampled_from draws uniformly, unlike integers)."""
    return bool(draw(st.sampled_from(range(one_in))) == 0)


def _weighted(*options: tuple[int, st.SearchStrategy[Any]]) -> st.SearchStrategy[Any]:
    """Choose a strategy with the given integer weights, then draw from it."""
    table = [strat for weight, strat in options for _ in range(weight)]
    return st.sampled_from(range(len(table))).flatmap(lambda i: table[i])


def _near(values: list[Any]) -> st.SearchStrategy[Any]:
    return st.sampled_from(values)


EPS_VALUES = sorted({v for lo, hi in EPSILON_RANGES.values()
                     for v in (lo, hi, math.nextafter(hi, math.inf))})
PLAUSIBLE: dict[str, st.SearchStrategy[Any]] = {
    "epsilon": _weighted((6, st.floats(0.001, 10)), (1, st.floats(-1, 100)),
                         (1, st.integers(-2, 800)), (2, _near(EPS_VALUES))),
    "domain_size": _weighted((6, st.integers(2, 300)), (1, st.integers(-2, 2**25)),
                             (2, _near([2, 3, 16, 2**13, 2**16, 2**22, 2**23, 2**24]))),
    "bins": _weighted((6, st.integers(2, 300)), (1, st.integers(-2, 2**21)),
                      (2, _near([2, 64, 4096, 4097]))),
    "g": st.integers(-1, 70_000) | _near([2, 3, 4093, 65521, 65537]),
    "m": st.integers(-1, 70_000) | _near([2, 61, 64, 4096, 65521]),
    "subset_size": st.integers(-1, 70_000),
    "fanout": st.integers(-1, 2_000) | _near([2, 4, 8, 16, 1024]),
    "base": _near(["oue", "hrr", "olh", "grr", "sw", ""]),
    "consistency": st.booleans(),
    "nonnegative": st.booleans(),
    "smoothing": st.booleans(),
    "out_bins": st.integers(2, 300) | st.integers(-1, 10_000),
    "b": st.floats(-1, 20) | _near([SW_B_MIN, 0.5, 10.0]),
    "low": st.floats() | _near([0.0, -1e300]),
    "high": st.floats() | _near([1.0, 1e300, 1e301]),
    "bits": st.integers(4, 24) | st.integers(-1, 70),
    "keep": st.integers(1, 64) | st.integers(-1, 5_000),
    "eta": st.integers(1, 8) | st.integers(-1, 20),
    "pool": st.integers(1, 64) | st.integers(-1, 5_000),
    "hash_seed": st.integers(-1, 2**64),
    "max_report_bits": st.integers(-1, 10**6),
}


def _keywords(mech: str) -> list[str]:
    sig = inspect.signature(oracle_class(mech))
    return [n for n, p in sig.parameters.items() if p.kind is inspect.Parameter.KEYWORD_ONLY]


def _value(key: str) -> st.SearchStrategy[Any]:
    """Mostly plausible values (near and across the bounds), sometimes junk."""
    return _weighted((4, PLAUSIBLE.get(key, JUNK)), (1, JUNK))


REQUIRED = ("epsilon", "domain_size", "bins", "bits")
SIZE_KEYS = ("domain_size", "bins", "low", "high", "bits")


@st.composite
def oracle_params(draw: st.DrawFn, body: bool = False) -> tuple[Any, dict[str, Any]]:
    """A mechanism name (rarely junk) and keyword parameters: mostly its own keywords
    with plausible values, sometimes other known keys, unknown keys or junk values.
    For a collection body (``body``) the sizes mostly come from the domain instead."""
    mech = draw(JUNK) if _chance(draw, 20) else draw(st.sampled_from(ALL))
    own = _keywords(mech) if isinstance(mech, str) and mech in MECHANISMS else []
    pool = sorted(PLAUSIBLE) if not own or _chance(draw, 5) else own
    keys = set(draw(st.lists(st.sampled_from(pool), max_size=len(pool), unique=True)))
    keys |= {k for k in REQUIRED if k in own and not _chance(draw, 10)}
    if "bins" in keys and "domain_size" in keys and not _chance(draw, 4):
        keys.discard("domain_size")
    if body and not _chance(draw, 6):
        keys -= set(SIZE_KEYS)
    params = {k: draw(_value(k)) for k in sorted(keys)}
    if _chance(draw, 10):
        params[draw(st.text(max_size=6).filter(lambda s: s != "mechanism"))] = draw(JUNK)
    return mech, params


PROPERTY = settings(max_examples=400, deadline=2000, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.slow
@PROPERTY
@given(oracle_params())
def test_make_oracle_builds_or_raises_parameter_error(case: tuple[Any, dict[str, Any]]) -> None:
    mech, params = case
    try:
        o = ldpcore.make_oracle(mech, **params)
    except ldpcore.ParameterError:
        event("rejected")
        return
    event(f"built {o.mechanism}")
    assert ldpcore.make_oracle(**o.spec) == o  # a valid spec, JSON-able and rebuildable
    json.dumps(o.spec, allow_nan=False)


IDS = _weighted((18, st.sampled_from(["os", "a.b-c_1"])), (1, st.text(max_size=8)), (1, JUNK))
EXTRA = {
    "version": _weighted((12, st.integers(1, 10**6)), (1, st.integers() | HUGE | JUNK)),
    "window_seconds": _weighted((12, st.integers(1, 10**6)), (1, st.integers() | HUGE | JUNK)),
    "retention_seconds": _weighted((12, st.integers(1, 10**9)), (1, st.integers() | JUNK)),
    "min_reports": _weighted((12, st.integers(0, 10**6)), (1, st.integers() | HUGE | JUNK)),
    "description": _weighted((12, st.text(max_size=10)), (1, JUNK)),
    "fingerprint": st.text(max_size=16) | JUNK,
}
INTERVALS = st.fixed_dictionaries({
    "kind": st.just("interval"),
    "low": _weighted((6, st.sampled_from([0.0, -1.0, -1e300])), (1, PLAUSIBLE["low"] | HUGE)),
    "high": _weighted((6, st.sampled_from([1.0, 60.0, 1e300])),
                      (1, PLAUSIBLE["high"] | HUGE)),
    "bins": _weighted((6, st.integers(2, 300)), (1, PLAUSIBLE["bins"] | JUNK))})
DOMAINS = _weighted(
    (3, st.fixed_dictionaries({"kind": st.just("categories"),
                           "labels": _weighted((9, st.lists(st.text(max_size=3), min_size=2,
                                                            max_size=6, unique=True)),
                                               (1, JUNK))})),
    (3, st.fixed_dictionaries({"kind": st.just("integers"),
                           "low": _weighted((9, st.integers(-5, 5)), (1, HUGE | JUNK)),
                           "high": _weighted((6, st.integers(5, 300)),
                                             (2, st.sampled_from([2**16 - 1, 2**20 - 1])),
                                             (1, st.integers(-5, 2**24) | HUGE | JUNK))})),
    (2, INTERVALS),
    (1, JUNK),
)


@st.composite
def bodies(draw: st.DrawFn) -> Any:
    if _chance(draw, 20):
        return draw(JUNK)
    mech, params = draw(oracle_params(body=True))
    numeric = isinstance(mech, str) and mech in NUMERIC
    domain = draw(INTERVALS if numeric and not _chance(draw, 6) else DOMAINS)
    body: dict[str, Any] = {"id": draw(IDS), "oracle": {"mechanism": mech, **params},
                            "domain": domain}
    for key, values in EXTRA.items():
        if _chance(draw, 3 if key != "fingerprint" else 20):
            body[key] = draw(values)
    if _chance(draw, 20):
        body[draw(st.text(max_size=6))] = draw(JUNK)
    return body


@pytest.mark.slow
@PROPERTY
@given(bodies())
def test_collection_spec_parses_or_raises_parameter_error(body: Any) -> None:
    try:
        spec = CollectionSpec.from_dict(body)
    except ldpcore.ParameterError:
        event("rejected")
        return
    event(f"parsed {spec.oracle_spec['mechanism']}")
    again = CollectionSpec.from_dict(json.loads(spec.to_json()))
    assert again == spec and again.fingerprint == spec.fingerprint
