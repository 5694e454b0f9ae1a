"""ldpcore.range.haar: HaarHRR (Cormode et al. 2019), range queries from Haar coefficients."""

from __future__ import annotations

import numpy as np
import pytest

import ldpcore


def test_the_domain_is_padded_to_a_power_of_two_with_one_level_per_bit() -> None:
    o = ldpcore.make_oracle("haar", epsilon=1.0, domain_size=1000)
    assert (o.height, o.padded) == (10, 1024)


def test_range_answers_are_unbiased_within_the_range_variance() -> None:
    d, n = 32, 200_000
    o = ldpcore.make_oracle("haar", epsilon=2.0, domain_size=d)
    truth = np.full(d, 1 / d)
    st = o.sample_state(truth, n, rng=4)
    for lo, hi in ((0, 15), (3, 20), (7, 7), (0, 31)):
        got = o.range_query(st, lo, hi)
        want = (hi - lo + 1) / d
        assert abs(got - want) <= 5 * o.range_variance(n, lo, hi) ** 0.5 + 1e-12, (lo, hi)
    assert o.range_query(st, 0, d - 1) == pytest.approx(1.0)  # the root coefficient is exact


def test_sampled_and_perturbed_states_have_the_same_shape() -> None:
    o = ldpcore.make_oracle("haar", epsilon=1.0, domain_size=10)
    a = o.aggregate(o.perturb(np.arange(10), rng=1))
    b = o.sample_state(np.full(10, 0.1), 10, rng=1)
    assert a.counts.shape == b.counts.shape and a.n == b.n == 10
