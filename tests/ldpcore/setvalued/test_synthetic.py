"""ldpcore.setvalued.synthetic: Zipf-distributed sets for simulations and tests."""

from __future__ import annotations

import numpy as np

from ldpcore.setvalued.synthetic import item_frequencies, zipf_sets, zipf_weights


def test_zipf_weights_sum_to_one_and_decrease_as_rank_to_the_minus_s() -> None:
    w = zipf_weights(5, s=1.1)
    assert abs(w.sum() - 1) < 1e-12
    np.testing.assert_allclose(w[0] / w[1], 2**1.1)


def test_sets_are_non_empty_distinct_items_following_the_weights() -> None:
    b = zipf_sets(4000, 30, mean_length=3.0, rng=np.random.default_rng(2))
    assert len(b) == 4000 and b.lengths.min() >= 1
    assert 2.0 < b.lengths.mean() < 4.0
    assert all(len(set(s)) == len(s) for s in b.to_lists()[:200])
    f = item_frequencies(b)
    assert f.shape == (30,) and f[0] > f[5] > f[29]
    assert abs(f.sum() - b.lengths.mean()) < 1e-9  # fractions sum to the mean set size
