"""ldpcore.consistency.clipping: Base-Pos, Post-Pos and Base-Cut (Wang et al. 2020)."""

from __future__ import annotations

from statistics import NormalDist

import numpy as np
import pytest

from ldpcore.consistency.clipping import base_cut, base_pos, cut_threshold, post_pos
from ldpcore.errors import ParameterError

EST = np.array([0.5, 0.05, -0.02, 0.3])


def test_base_pos_clips_negatives_and_post_pos_leaves_the_vector_alone() -> None:
    np.testing.assert_array_equal(base_pos(EST), [0.5, 0.05, 0.0, 0.3])
    out = post_pos(EST)
    np.testing.assert_array_equal(out, EST)
    assert out is not EST


def test_the_cut_threshold_is_the_normal_quantile_of_one_minus_alpha_over_d() -> None:
    assert cut_threshold(100, 0.1) == pytest.approx(NormalDist().inv_cdf(0.98) * 0.1)
    assert cut_threshold(2, 1.0) == pytest.approx(0.0)  # alpha/d capped at 1/2


def test_base_cut_zeroes_what_noise_could_explain() -> None:
    est = np.zeros(40)
    est[:3] = [0.5, 0.05, 0.3]
    assert 0.05 < cut_threshold(40, 0.1) < 0.3
    out = base_cut(est, variance=0.01)
    np.testing.assert_array_equal(out[:3], [0.5, 0.0, 0.3])
    assert not out[3:].any()
    with pytest.raises(ParameterError, match="base-cut"):
        base_cut(EST, variance=None)
