"""ldpcore.multi.compare: the variance of sampling k of m attributes, for every k."""

from __future__ import annotations

import pytest

import ldpcore
from ldpcore.errors import ParameterError
from ldpcore.multi.attributes import sampling_variance
from ldpcore.multi.compare import sample_variances


def test_each_k_is_the_oracle_variance_at_epsilon_over_k_scaled_plus_the_sampling_term() -> None:
    eps, n, m, f = 2.0, 10_000, 3, 0.2
    out = sample_variances("grr", epsilon=eps, n=n, attributes=m, domain_size=4, frequency=f)
    assert sorted(out) == [1, 2, 3]
    for k, v in out.items():
        o = ldpcore.make_oracle("grr", epsilon=eps / k, domain_size=4)
        want = o.variance(n, f) * m / k + sampling_variance(f * (1 - f), n, n * k / m)
        assert v == pytest.approx(want)
    assert out[m] == pytest.approx(ldpcore.make_oracle("grr", epsilon=eps / m, domain_size=4)
                                   .variance(n, f))  # k = m: every user answers everything


def test_mean_mechanisms_use_their_mean_variance_and_bad_counts_are_refused() -> None:
    out = sample_variances("pm", epsilon=2.0, n=10_000, attributes=2, bins=8)
    assert out[2] == pytest.approx(ldpcore.make_oracle("pm", epsilon=1.0, bins=8)
                                   .mean_variance(10_000))
    with pytest.raises(ParameterError, match="attributes"):
        sample_variances("grr", epsilon=1.0, n=10, attributes=0, domain_size=4)
