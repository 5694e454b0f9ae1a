"""ldpcore.numeric.em: Square Wave's channel and EM/EMS reconstruction (Li et al. 2020)."""

from __future__ import annotations

import numpy as np
import pytest

import ldpcore
from ldpcore.base import State
from ldpcore.numeric.em import SWChannel, em_reconstruct, sw_transition_matrix


def test_every_column_of_the_sw_channel_is_a_distribution_and_peaks_near_its_bin() -> None:
    m = sw_transition_matrix(0.6, 0.2, 0.25, 8, 32)
    assert m.shape == (32, 8) and (m >= 0).all()
    np.testing.assert_allclose(m.sum(axis=0), 1.0)
    peaks = m.argmax(axis=0)
    assert (np.diff(peaks) >= 0).all()  # a larger value reports further right


def test_em_recovers_the_input_from_its_expected_output() -> None:
    m = sw_transition_matrix(0.7, 0.1, 0.2, 6, 24)
    x = np.array([0.4, 0.3, 0.1, 0.1, 0.05, 0.05])
    counts = 1e6 * (m @ x)
    got = em_reconstruct(m, counts, smoothing=False, tol=1e-12)
    np.testing.assert_allclose(got, x, atol=0.01)
    plain = em_reconstruct(m, counts, smoothing=False, tol=1e-12, accelerate=False)
    np.testing.assert_allclose(got, plain, atol=0.005)  # SQUAREM: the same fixed point


def test_no_reports_give_the_uniform_histogram() -> None:
    m = sw_transition_matrix(0.7, 0.1, 0.2, 4, 8)
    np.testing.assert_allclose(em_reconstruct(m, np.zeros(8)), np.full(4, 0.25))


@pytest.mark.parametrize(("epsilon", "b", "bins", "out_bins"), [
    (1.0, None, 1024, 1024),  # the API bench's collection
    (1.0, None, 64, 1024), (1.0, None, 1024, 64),  # bins ≠ out_bins, 64 and 8 sub-points
    (2.0, None, 8, 24), (0.5, None, 100, 37),  # bucket edges off the bin grid
    (1.0, 10.0, 16, 64), (1.0, 1000 * 2**-52, 64, 64),  # the widest and narrowest band
    (0.01, None, 2, 2), (6.0, None, 32, 1024),  # two bins; (p/q - 1) out_bins near 2^20
])
def test_sw_channel_applies_the_dense_transition_matrix(
        epsilon: float, b: float | None, bins: int, out_bins: int) -> None:
    o = ldpcore.make_oracle("sw", epsilon=epsilon, bins=bins, out_bins=out_bins,
                            **({} if b is None else {"b": b}))
    m = sw_transition_matrix(o.p, o.q, o.b, bins, out_bins)
    ch = SWChannel(o.p, o.q, o.b, bins, out_bins)
    assert ch.shape == m.shape
    # the stated rounding: relative 2^-47 (p/q - 1) out_bins, as SWChannel's docstring says
    rel = 2.0**-47 * max(1.0, (o.p / o.q - 1) * out_bins)
    rng = np.random.default_rng(bins + out_bins)
    if bins * out_bins <= 1 << 16:  # small: every column and every row, edges included
        xs, us = np.eye(bins), np.eye(out_bins)
    else:  # the first and last columns and rows, and dense and sparse mixtures
        xs = np.vstack([np.eye(bins)[[0, 1, bins - 1]], rng.random((3, bins)) ** 4])
        xs[3:, rng.random(bins) < 0.5] = 0.0
        us = np.vstack([np.eye(out_bins)[[0, out_bins - 1]], 1e6 * rng.random((3, out_bins))])
    for x in xs:
        np.testing.assert_allclose(ch.matvec(x), m @ x, rtol=rel, atol=0)
    for u in us:  # Mᵀu: rows of M for unit u (tiny entries: absolute bound at M's scale)
        np.testing.assert_allclose(ch.rmatvec(u), u @ m, rtol=rel, atol=rel * float(u.max()))


def test_sw_channel_is_used_where_faster_and_accurate_else_the_dense_matrix() -> None:
    big = ldpcore.make_oracle("sw", epsilon=1.0, bins=1024)
    assert isinstance(big._em_channel(), SWChannel)
    small = ldpcore.make_oracle("sw", epsilon=1.0, bins=64)  # 64 × 1,024: dense is as fast
    sharp = ldpcore.make_oracle("sw", epsilon=8.0, bins=1024)  # (e^8 - 1) · 1,024 > 2^20
    for o in (small, sharp):
        assert isinstance(o._em_channel(), np.ndarray)
        np.testing.assert_array_equal(o._em_channel(), o.matrix())


def test_ems_through_the_sw_channel_reaches_the_dense_fixed_point() -> None:
    o = ldpcore.make_oracle("sw", epsilon=1.0, bins=1024)
    x = (np.arange(1024) + 0.5) / 1024
    truth = x * (1 - x) ** 4 / (x * (1 - x) ** 4).sum()
    c = o.sample_state(truth, 10**6, rng=4).counts.astype(float)
    dense = em_reconstruct(o.matrix(), c)
    fast = o.distribution(State(o.fingerprint, int(c.sum()), c.astype(np.int64)))
    # the same steps up to product rounding (1e-12): far below the stopping rule's 0.01
    assert 0.5 * np.abs(fast - dense).sum() < 1e-6
