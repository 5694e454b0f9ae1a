"""ldpcore.numeric.base: the numeric oracles' interval, bins and distribution distances."""

from __future__ import annotations

import numpy as np
import pytest

import ldpcore
from ldpcore.errors import ParameterError
from ldpcore.numeric.base import ks_distance, wasserstein_distance


def test_values_map_to_the_unit_interval_and_to_bins_and_back() -> None:
    o = ldpcore.make_oracle("sw", epsilon=1.0, bins=8, low=10, high=20)
    assert o.width == 1.25
    np.testing.assert_allclose(o.to_unit([10.0, 15.0, 20.0]), [0.0, 0.5, 1.0])
    np.testing.assert_allclose(o.from_unit([0.0, 1.0]), [10.0, 20.0])
    assert o.to_bins([10.0, 20.0, 15.0]).tolist() == [0, 7, 4]
    np.testing.assert_allclose(o.bin_centers(), 10 + 1.25 * (np.arange(8) + 0.5))


def test_the_mean_standard_error_is_the_root_of_the_mean_variance() -> None:
    o = ldpcore.make_oracle("pm", epsilon=1.0, bins=8)
    assert o.mean_std_error(1000) == pytest.approx(o.mean_variance(1000) ** 0.5)


def test_bins_are_required() -> None:
    with pytest.raises(ParameterError, match="give bins"):
        ldpcore.make_oracle("pm", epsilon=1.0)


def test_distances_between_histograms() -> None:
    assert wasserstein_distance([1, 0, 0], [0, 0, 1]) == 2.0
    assert wasserstein_distance([1, 0, 0], [0, 0, 1], bin_width=0.5) == 1.0
    assert wasserstein_distance([0.5, 0.5], [0.5, 0.5]) == 0.0
    assert ks_distance([1, 0, 0, 1], [0, 1, 0, 1]) == 0.5
    assert ks_distance([1, 0], [0, 1]) == 1.0
