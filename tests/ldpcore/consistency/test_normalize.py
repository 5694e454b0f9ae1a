"""ldpcore.consistency.normalize: Norm, Norm-Mul, Norm-Sub (simplex projection), Norm-Cut
(Wang et al. 2020, "Locally differentially private frequency estimation with consistency")."""

from __future__ import annotations

import numpy as np

from ldpcore.consistency.normalize import norm, norm_cut, norm_mul, norm_sub, simplex_projection

EST = np.array([0.6, 0.3, 0.2, -0.1])


def test_norm_shifts_every_estimate_by_the_same_amount() -> None:
    est = np.array([0.5, 0.3, 0.4, -0.1])
    out = norm(est)
    assert abs(out.sum() - 1) < 1e-12
    np.testing.assert_allclose(out - est, np.full(4, -0.025))


def test_norm_mul_clips_and_rescales_and_is_uniform_when_nothing_is_positive() -> None:
    np.testing.assert_allclose(norm_mul(EST), [0.6 / 1.1, 0.3 / 1.1, 0.2 / 1.1, 0.0])
    np.testing.assert_allclose(norm_mul(-np.ones(4)), np.full(4, 0.25))


def test_norm_sub_is_the_euclidean_projection_onto_the_simplex() -> None:
    out = norm_sub(EST)
    assert abs(out.sum() - 1) < 1e-12 and (out >= 0).all()
    np.testing.assert_allclose(out, [0.6 - 0.1 / 3, 0.3 - 0.1 / 3, 0.2 - 0.1 / 3, 0.0])
    # Projection: no other point of the simplex is closer (checked on random points).
    rng = np.random.default_rng(1)
    others = rng.dirichlet(np.ones(4), size=500)
    assert np.linalg.norm(others - EST, axis=1).min() >= np.linalg.norm(out - EST) - 1e-12
    np.testing.assert_allclose(simplex_projection(np.array([0.2, 0.8])), [0.2, 0.8])


def test_norm_cut_keeps_the_largest_estimates_within_a_total_of_one() -> None:
    np.testing.assert_allclose(norm_cut(EST), [0.6, 0.3, 0.0, 0.0])
    np.testing.assert_allclose(norm_cut(np.array([0.2, -0.1, 0.3])), [0.2, 0.0, 0.3])
