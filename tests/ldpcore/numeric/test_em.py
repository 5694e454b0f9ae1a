"""ldpcore.numeric.em: Square Wave's channel and EM/EMS reconstruction (Li et al. 2020)."""

from __future__ import annotations

import numpy as np

from ldpcore.numeric.em import em_reconstruct, sw_transition_matrix


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
