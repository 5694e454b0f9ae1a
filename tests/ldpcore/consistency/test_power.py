"""ldpcore.consistency.power: Power and Power-NS (a power-law prior fitted to the estimates)."""

from __future__ import annotations

import numpy as np
import pytest

from ldpcore.consistency.power import fit_power_law, power, power_ns
from ldpcore.errors import ParameterError


def _zipf_estimates(s: float, d: int, sigma: float, seed: int) -> np.ndarray:
    law = np.arange(1, d + 1, dtype=float) ** -s
    return law / law.sum() + np.random.default_rng(seed).normal(0, sigma, d)


def test_the_fitted_exponent_recovers_a_clear_power_law() -> None:
    s, prior = fit_power_law(_zipf_estimates(1.5, 200, 1e-4, 1), 1e-4)
    assert abs(s - 1.5) < 0.1
    assert abs(prior.sum() - 1) < 1e-12 and (np.diff(prior) <= 0).all()


def test_power_shrinks_noise_towards_the_prior_and_power_ns_is_consistent() -> None:
    sigma = 0.01
    est = _zipf_estimates(1.2, 100, sigma, 2)
    law = np.arange(1, 101, dtype=float) ** -1.2
    truth = law / law.sum()
    out = power(est, variance=sigma**2)
    assert np.abs(out - truth).sum() < np.abs(est - truth).sum()
    ns = power_ns(est, variance=sigma**2)
    assert abs(ns.sum() - 1) < 1e-12 and (ns >= 0).all()
    with pytest.raises(ParameterError, match="'power' needs variance="):
        power(est, variance=None)
