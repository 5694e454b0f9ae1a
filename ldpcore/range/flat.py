"""Range queries answered by summing a plain frequency oracle's estimates ("flat")."""

from __future__ import annotations

import numpy as np

from .._validate import check_int
from ..base import FloatArray, FrequencyOracle, State
from ..consistency.normalize import simplex_projection
from .base import RangeMixin

__all__ = ["FlatRange"]


class FlatRange(RangeMixin):
    """Range answers from any frequency oracle: :math:`\\hat R = \\sum_{v=lo}^{hi} \\hat f(v)`.

    Its variance is :math:`r V_F` for a range of length r (Cormode et al. 2019,
    Lemma 4.1), which is why hierarchical methods win beyond short ranges.

    >>> import ldpcore
    >>> flat = FlatRange(ldpcore.make_oracle("oue", epsilon=1.0, domain_size=16))
    >>> st = flat.oracle.aggregate(flat.oracle.perturb(list(range(16)) * 50, rng=1))
    >>> abs(flat.range_query(st, 0, 7) - 0.5) < 4 * flat.range_variance(st.n, 0, 7) ** 0.5
    True
    """

    def __init__(self, oracle: FrequencyOracle) -> None:
        self.oracle = oracle
        self.domain_size = oracle.domain_size

    def _check_range_state(self, state: State) -> None:
        self.oracle.check_state(state)
        self._check_nonempty(state)

    def _unbiased_leaves(self, state: State) -> FloatArray:
        return self.oracle.estimate(state)

    def _unbiased_cdf(self, state: State) -> FloatArray:
        out: FloatArray = np.cumsum(self.oracle.estimate(state))
        return out

    def _fit_consistent(self, state: State) -> FloatArray:
        """Norm-Sub (the simplex projection) of the oracle's estimates."""
        return simplex_projection(self.oracle.estimate(state))

    def range_variance(self, n: int, lo: int, hi: int) -> float:
        lo, hi = self._check_range(lo, hi)
        n = check_int("n", n, low=1)
        return (hi - lo + 1) * self.oracle.variance(n, 0.0)
