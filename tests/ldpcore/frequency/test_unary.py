"""The bit counts of packed unary reports, both algorithms, against unpacking."""

from __future__ import annotations

import numpy as np
import pytest

from ldpcore.frequency.unary import bit_counts


@pytest.mark.parametrize("n", [0, 1, 254, 255, 1019, 1020, 1021, 5000, 70_001])
@pytest.mark.parametrize("width", [1, 3, 8, 9, 17])
def test_bit_counts_equal_the_column_sums_of_the_unpacked_bits(n: int, width: int) -> None:
    rng = np.random.default_rng(n * 31 + width)
    packed = rng.integers(0, 256, size=(n, width + 2), dtype=np.uint8)
    for arr in (packed[:, :width].copy(), packed[:, 1:width + 1]):  # contiguous, strided
        ref = np.unpackbits(arr, axis=1, bitorder="little").sum(axis=0, dtype=np.int64)
        nbits = max(width * 8 - 3, 1)
        assert np.array_equal(bit_counts(arr, nbits), ref[:nbits])


def test_bit_counts_do_not_carry_between_bytes_when_every_bit_is_set() -> None:
    ones = np.full((255 * 7 + 3, 16), 0xFF, dtype=np.uint8)
    assert np.array_equal(bit_counts(ones, 128), np.full(128, ones.shape[0]))
