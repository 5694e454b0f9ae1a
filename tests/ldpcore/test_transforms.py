"""ldpcore._transforms: the Walsh-Hadamard transform and its bit tricks."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ldpcore._transforms import fwht, hadamard_sign, next_pow2, popcount_parity, sign_keep


def test_next_pow2() -> None:
    assert [next_pow2(x) for x in (1, 2, 3, 5, 1024, 1025)] == [1, 2, 4, 8, 1024, 2048]


def test_fwht_is_the_sylvester_matrix_product_and_its_own_inverse_up_to_d() -> None:
    d = 16
    x = np.random.default_rng(1).normal(size=(3, d))
    j, i = np.meshgrid(np.arange(d), np.arange(d), indexing="ij")
    h = hadamard_sign(j, i).astype(float)
    np.testing.assert_allclose(fwht(x), x @ h.T)
    np.testing.assert_allclose(fwht(fwht(x)), d * x)


def test_fwht_refuses_a_length_that_is_not_a_power_of_two() -> None:
    with pytest.raises(ValueError, match="power-of-two"):
        fwht(np.ones(6))


def test_popcount_parity() -> None:
    assert popcount_parity(np.array([0, 1, 3, 7, 255, 256])).tolist() == [0, 1, 0, 1, 0, 1]


def test_sign_keep_is_binary_randomized_response_at_epsilon() -> None:
    # keep / flip = e^ε: the ε-LDP ratio of a ±1 answer
    for eps in (0.1, 1.0, 5.0):
        p = sign_keep(eps)
        assert 0.5 < p < 1 and math.isclose(p / (1 - p), math.exp(eps))


def _fwht_by_stacked_butterflies(a: np.ndarray) -> np.ndarray:
    """The butterflies as first written (a new array per stage): the reference order."""
    x = np.array(a, dtype=np.float64)
    d, lead, h = x.shape[-1], x.shape[:-1], 1
    while h < d:
        y = x.reshape(*lead, d // (2 * h), 2, h)
        x = np.stack((y[..., 0, :] + y[..., 1, :], y[..., 0, :] - y[..., 1, :]),
                     axis=-2).reshape(*lead, d)
        h *= 2
    return x


@pytest.mark.parametrize("shape", [(1,), (2,), (8,), (4096,), (3, 64), (2, 3, 16), (0, 8)])
def test_fwht_does_the_same_operations_bit_for_bit_and_leaves_its_input(shape: tuple[int, ...]
                                                                         ) -> None:
    x = np.random.default_rng(1).standard_normal(shape)
    before = x.copy()
    assert np.array_equal(fwht(x), _fwht_by_stacked_butterflies(x))
    assert np.array_equal(x, before)
