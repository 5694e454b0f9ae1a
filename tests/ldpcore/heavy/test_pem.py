"""PEM heavy hitters: the schedule, fixed-size state, recall, unbiased estimates, privacy."""

from __future__ import annotations

import math

import numpy as np
import pytest

import ldpcore
from ldpcore.audit import audit
from ldpcore.base import Reports
from ldpcore.errors import ParameterError
from ldpcore.heavy import PEM, key_of
from ldpcore.heavy.pem import pem_schedule


def _pem(**kw: object) -> PEM:
    o = ldpcore.make_oracle("pem", **{"epsilon": 4.0, "bits": 24, "keep": 32, "eta": 6, **kw})
    assert isinstance(o, PEM)
    return o


def zipf_population(n: int, bits: int, seed: int) -> np.ndarray:
    """Zipf(1.5) ranks spread over the 2^bits domain by an odd multiplier (a bijection)."""
    rng = np.random.default_rng(seed)
    r = rng.zipf(1.5, size=3 * n)
    r = r[r < 2**bits][:n].astype(np.uint64)
    mask = np.uint64(2**bits - 1)
    return ((r * np.uint64(2654435761)) ^ np.uint64(0x5BD1E995)) & mask


@pytest.mark.parametrize(("bits", "keep", "eta", "expected"), [
    (32, 64, 8, [14, 20, 26, 32]), (24, 32, 6, [11, 16, 21, 24]), (8, 64, 8, [8]),
    (62, 64, 8, [14, 22, 30, 38, 46, 54, 62]),
])
def test_schedule_extends_the_kept_prefixes_by_at_most_eta_bits(
        bits: int, keep: int, eta: int, expected: list[int]) -> None:
    lengths = pem_schedule(bits, keep, eta)
    assert lengths == expected
    assert lengths[0] == min(bits, eta + math.ceil(math.log2(keep)))
    assert all(0 < b - a <= eta for a, b in zip(lengths, lengths[1:], strict=False))
    # as few groups as eta allows: more reports per group
    assert len(lengths) == 1 + math.ceil((bits - lengths[0]) / eta)


def test_state_size_is_fixed_whatever_n() -> None:
    o = _pem()
    small = o.aggregate(o.perturb(np.arange(10), rng=1))
    large = o.aggregate(o.perturb(zipf_population(200_000, 24, 1), rng=2))
    assert small.counts.shape == large.counts.shape == (len(o.lengths), o.pool, o.g)
    assert int(large.counts.sum()) == large.n == 200_000
    both = small + large
    assert both.n == 200_010


def test_finds_the_heavy_hitters_with_unbiased_estimates() -> None:
    o = _pem()
    vals = zipf_population(300_000, 24, 3)
    u, c = np.unique(vals, return_counts=True)
    order = np.argsort(-c)
    truth = dict(zip(u.tolist(), (c / vals.size).tolist(), strict=True))
    top10 = set(u[order[:10]].tolist())
    hh = o.heavy_hitters(o.aggregate(o.perturb(vals, rng=4)), 10)
    found = {v for v, _, _ in hh}
    assert len(found & top10) >= 9
    z = np.array([(f - truth.get(v, 0.0)) / se for v, f, se in hh])
    assert np.all(np.abs(z) < 4.5), z  # Bonferroni-ish over 10 items
    assert abs(z.mean()) < 4 / math.sqrt(z.size)
    # sorted by estimate, standard errors from OLH's variance on the last group
    assert [f for _, f, _ in hh] == sorted((f for _, f, _ in hh), reverse=True)


def test_pool_bias_correction_is_what_makes_estimates_unbiased() -> None:
    # Without the correction the heaviest value inflates every candidate that shares its
    # hash under more than 1/g of the pool's seeds: the raw errors are far wider.
    o = _pem(pool=64)
    vals = zipf_population(200_000, 24, 5)
    st = o.aggregate(o.perturb(vals, rng=6))
    u, c = np.unique(vals, return_counts=True)
    cand = u[np.argsort(-c)[:32]].astype(np.uint64)
    truth = np.sort(c)[::-1][:32] / vals.size
    last = len(o.lengths) - 1
    raw, n = o._raw(st.counts, last, cand)
    fixed = o._solve(last, cand, raw, n)[1]
    sd = math.sqrt(o.variance(n))
    assert np.std(raw - truth) > 2 * sd
    assert np.std(fixed - truth) < 1.6 * sd


def test_values_must_be_in_the_domain_and_there_is_no_frequency_capability() -> None:
    o = _pem(bits=16, keep=8, eta=4)
    with pytest.raises(ParameterError, match="2\\^16"):
        o.perturb([2**16])
    with pytest.raises(ParameterError, match="2\\^16"):
        o.perturb([-1])
    st = o.aggregate(o.perturb([1, 2, 3], rng=1))
    from ldpcore.capabilities import FrequencyEstimates, HeavyHitterSearch
    assert isinstance(o, HeavyHitterSearch) and not isinstance(o, FrequencyEstimates)
    with pytest.raises(ParameterError, match="k"):
        o.heavy_hitters(st, 9)
    with pytest.raises(ParameterError, match="bits"):
        ldpcore.make_oracle("pem", epsilon=1.0)
    with pytest.raises(ParameterError, match="power of two"):
        ldpcore.make_oracle("pem", epsilon=1.0, domain_size=1000)


def test_spec_rebuilds_an_equal_oracle_and_reports_round_trip() -> None:
    o = _pem(hash_seed=42)
    again = ldpcore.make_oracle(**o.spec)
    assert again == o and again.fingerprint == o.fingerprint
    rep = o.perturb(zipf_population(1000, 24, 9), rng=3)
    assert ldpcore.wire.decode(o, ldpcore.wire.encode(rep)) == rep


def test_byte_strings_map_to_keys_of_the_domain() -> None:
    keys = {key_of(f"url-{i}", 32) for i in range(1000)}
    assert len(keys) == 1000 and max(keys) < 2**32
    assert key_of("a", 20) == key_of(b"a", 20)


def _audit_perturb(o: PEM):  # type: ignore[no-untyped-def]
    def perturb(values: np.ndarray, rng: np.random.Generator) -> Reports:
        return o.perturb(values, rng=rng)
    return perturb


def test_pem_satisfies_its_epsilon_and_spends_it() -> None:
    o = ldpcore.make_oracle("pem", epsilon=1.0, bits=4, keep=4, eta=2, pool=4)
    result = audit(_audit_perturb(o), epsilon=1.0, domain_size=3, trials=60_000, seed=1)
    assert not result.violated and result.tight, result


def test_audit_catches_pem_at_twice_epsilon() -> None:
    o = ldpcore.make_oracle("pem", epsilon=2.0, bits=4, keep=4, eta=2, pool=4)
    result = audit(_audit_perturb(o), epsilon=1.0, domain_size=3, trials=60_000, seed=2)
    assert result.violated, result
