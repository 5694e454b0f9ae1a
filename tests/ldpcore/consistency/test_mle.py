"""ldpcore.consistency.mle: the approximate MLE under the simplex constraints."""

from __future__ import annotations

import numpy as np
import pytest

from ldpcore.consistency.mle import mle_apx
from ldpcore.consistency.normalize import norm_sub
from ldpcore.errors import ParameterError


def test_with_constant_variance_mle_apx_is_norm_sub() -> None:
    est = np.array([0.6, 0.3, 0.2, -0.1, 0.05])
    out = mle_apx(est, variance=0.01)
    assert abs(out.sum() - 1) < 1e-12 and (out >= 0).all()
    np.testing.assert_allclose(out, norm_sub(est), atol=1e-12)


def test_a_consistent_vector_is_left_as_it_is() -> None:
    est = np.array([0.5, 0.25, 0.25])
    np.testing.assert_allclose(mle_apx(est, variance=0.01, variance_slope=0.005), est)


def test_a_slope_below_minus_the_variance_is_refused() -> None:
    with pytest.raises(ParameterError, match="variance_slope"):
        mle_apx(np.array([0.5, 0.5]), variance=0.01, variance_slope=-1.0)
