r"""Mean estimation of numerical vectors in :math:`[-1, 1]^d` (Wang et al., ICDE 2019).

Each user holds :math:`t \in [-1, 1]^d`, samples k of the d dimensions uniformly
without replacement and reports each sampled :math:`t_j` with the Piecewise
Mechanism (PM) or Duchi et al.'s mechanism at :math:`\varepsilon/k` (Wang, Xiao,
Yang, Zhao, Hui, Shin, Shin & Yu, "Collecting and analyzing multidimensional data
with local differential privacy", ICDE 2019, Algorithm 4, which recommends
:math:`k = \max(1, \min(d, \lfloor \varepsilon/2.5 \rfloor))`, ``sample="auto"``).
The lecture slides' "numerical vector setting: report only one dimension
(partition users)" is k = 1.

Two unbiased estimators of :math:`\bar t_j` from the same additive state:

* the *ratio* estimator (:meth:`NumericVector.means`, the default): the mean of the
  :math:`n_j` reports that sampled dimension j,
  :math:`\hat t_j = \frac{1}{n_j}\sum_{i: j \in S_i} y_{ij}`, with variance given
  :math:`n_j` at most :math:`V_{\max}(\varepsilon/k)/n_j + S_j^2 (n - n_j)/(n_j(n-1))`
  (the mechanism's noise plus drawing :math:`n_j` of the n users, :math:`S_j^2 \le 1`
  the population variance of dimension j), where for PM
  :math:`\mathrm{Var}[y\mid t] = \frac{t^2}{e^{\varepsilon/2}-1}
  + \frac{e^{\varepsilon/2}+3}{3(e^{\varepsilon/2}-1)^2}` and for Duchi
  :math:`\mathrm{Var}[y\mid t] = B^2 - t^2` (:mod:`ldpcore.numeric.mean`);
* the paper's *scaled* (Horvitz–Thompson) estimator :math:`\hat t_j = \frac{d}{k}
  \cdot\frac1n\sum_{i: j \in S_i} y_{ij}` (:meth:`NumericVector.scaled_means`), with
  :math:`\mathrm{Var} = \frac1{n^2}\sum_i\big[\frac dk(\mathrm{Var}[y\mid t_{ij}] +
  t_{ij}^2) - t_{ij}^2\big]` — about :math:`(\frac dk - 1)\bar t_j^2/n` more than the
  ratio form's (the noise of the realised :math:`n_j` that the ratio removes; equal when
  the mean is 0).

Values are perturbed *continuously* (:meth:`NumericVector.perturb_vectors`): no
binning bias.  The mechanism is a :class:`~ldpcore.multi.MultiAttribute` whose
attributes ``x0 … x{d-1}`` are PM/Duchi oracles on [-1, 1], so its reports, states,
wire format and per-attribute API are that class's.

>>> import numpy as np, ldpcore
>>> v = ldpcore.make_oracle("vector", epsilon=2.0, dimensions=4)
>>> x = np.random.default_rng(1).uniform(-0.5, 1.0, size=(40_000, 4))
>>> st = v.aggregate(v.perturb_vectors(x, rng=2))
>>> err = np.abs(v.means(st) - x.mean(axis=0))
>>> bool(np.all(err < 4 * np.sqrt(v.mean_variances(st))))
True
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .._bounds import EPSILON_MAX_64, EPSILON_MIN, real_in
from .._validate import as_rng, check_epsilon, check_int
from ..base import FloatArray, Reports, State
from ..errors import ParameterError
from ..numeric.mean import _LEVELS, Duchi, PiecewiseMechanism
from .attributes import MAX_ATTRIBUTES, MultiAttribute

__all__ = ["NumericVector", "recommended_sample"]

_BASES = ("pm", "duchi")


def recommended_sample(epsilon: float, dimensions: int) -> int:
    r"""Wang et al.'s :math:`k = \max(1, \min(d, \lfloor \varepsilon / 2.5 \rfloor))`.

    >>> recommended_sample(1.0, 8), recommended_sample(6.0, 8), recommended_sample(40.0, 8)
    (1, 2, 8)
    """
    return max(1, min(int(dimensions), math.floor(epsilon / 2.5)))


class NumericVector(MultiAttribute):
    """Vectors in [-1, 1]^d; each report answers ``sample`` dimensions with PM or Duchi.

    Parameters
    ----------
    epsilon:
        Budget of one report.
    dimensions:
        d in [1, 64].
    sample:
        k in [1, d], or ``"auto"`` for :func:`recommended_sample` (resolved in the spec).
    base:
        ``"pm"`` (default) or ``"duchi"``, run at ε/k per sampled dimension.
    bins:
        Bins of [-1, 1] per dimension for the *binned* path (:meth:`perturb` with
        mixed-radix indices, used by collections and the generic checks; needs
        bins^d ≤ 2^62).  :meth:`perturb_vectors` does not bin.
    """

    mechanism = "vector"
    epsilon_bounds = (EPSILON_MIN, EPSILON_MAX_64)
    domain_size_bounds = (2, 1 << 62)  # bins^dimensions, capped at 2^62
    parameter_ranges = {
        "epsilon": real_in(epsilon_bounds), "dimensions": "integer in [1, 64]",
        "sample": "integer in [1, dimensions] or 'auto' (max(1, min(d, floor(eps/2.5))))",
        "base": "one of pm, duchi", "bins": "integer in [2, 2^20]",
        "domain_size": "optional; bins^dimensions, capped at 2^62"}

    def __init__(self, *, epsilon: float, dimensions: int | None = None,
                 sample: int | str = 1, base: str = "pm", bins: int = 2,
                 domain_size: int | None = None) -> None:
        lo, hi = self.epsilon_bounds
        epsilon = check_epsilon(epsilon, low=lo, high=hi,
                                context=f"for mechanism {self.mechanism!r}")
        if domain_size is not None:
            check_int("domain_size", domain_size, low=2, high=1 << 62)
        if dimensions is None:
            raise ParameterError("mechanism 'vector' needs dimensions (an integer in [1, 64])")
        d = check_int("dimensions", dimensions, low=1, high=MAX_ATTRIBUTES)
        if base not in _BASES:
            raise ParameterError(f"base must be one of {list(_BASES)}, got {base!r}")
        bins = check_int("bins", bins, low=2, high=1 << 20)
        if sample == "auto":
            sample = recommended_sample(epsilon, d)
        self.base = base
        self.bins = bins
        self.dimensions = d
        attrs = [{"name": f"x{j}", "mechanism": base, "bins": bins, "low": -1.0, "high": 1.0}
                 for j in range(d)]
        super().__init__(epsilon=epsilon, attributes=attrs, sample=sample,  # type: ignore[arg-type]
                         domain_size=domain_size)

    @property
    def params(self) -> dict[str, Any]:
        return {"dimensions": self.dimensions, "sample": self.sample, "base": self.base,
                "bins": self.bins}

    def perturb_vectors(self, x: Any, rng: np.random.Generator | int | None = None) -> Reports:
        """Perturb an (n, d) array of vectors in [-1, 1]^d (clipped) without binning."""
        arr = np.asarray(x, dtype=np.float64)
        if arr.ndim == 1 and arr.size == self.dimensions:
            arr = arr.reshape(1, -1)
        if arr.ndim != 2 or arr.shape[1] != self.dimensions:
            raise ParameterError(f"x must be an (n, {self.dimensions}) array of numbers in "
                                 f"[-1, 1], got shape {arr.shape}")
        if not np.all(np.isfinite(arr)):
            raise ParameterError("x must hold finite numbers in [-1, 1]")
        unit = (np.clip(arr, -1.0, 1.0) + 1) / 2
        vals = np.zeros(arr.shape, dtype=np.int64)
        return Reports(self.mechanism, self.fingerprint,
                       self._perturb_matrix(vals, as_rng(rng), unit=unit))

    def means(self, state: State) -> FloatArray:
        """The ratio estimator of every dimension's mean, shape (d,) (NaN where n_j = 0)."""
        out = np.full(self.dimensions, np.nan)
        for j, name in enumerate(self.attribute_names):
            sub = self.attribute_state(state, name)
            if sub.n:
                out[j] = self.attribute(name).mean(sub)  # type: ignore[attr-defined]
        return out

    def mean_variances(self, state: State) -> FloatArray:
        """Worst-case variance of each ratio estimate given the realised n_j, shape (d,):
        PM/Duchi's at n_j reports plus the sampling term of drawing n_j of the n users
        (:meth:`~ldpcore.multi.MultiAttribute.attribute_mean_variance`)."""
        n_j = self.attribute_counts(state)
        return np.array([self.attribute_mean_variance(name, state.n, reports=int(c))
                         if c else np.inf for name, c in zip(self.attribute_names, n_j,
                                                             strict=True)])

    def _y_sums(self, state: State) -> FloatArray:
        """Σ y over the reports of each dimension (continuous units)."""
        n_j = self.attribute_counts(state).astype(np.float64)
        raw = np.array([float(self.attribute_state(state, name).counts[0])
                        for name in self.attribute_names])
        sub = self.attribute(self.attribute_names[0])
        if isinstance(sub, PiecewiseMechanism):
            return raw / _LEVELS * 2 * sub.C - sub.C * n_j
        assert isinstance(sub, Duchi)
        return (2 * raw - n_j) * sub.B

    def scaled_means(self, state: State) -> FloatArray:
        r"""The paper's estimator :math:`\frac{d}{k}\cdot\frac1n\sum_{i: j\in S_i} y_{ij}`."""
        self.check_state(state)
        if state.n <= 0:
            raise ParameterError("cannot estimate means from an empty state (n = 0)")
        return self._y_sums(state) / self.sampling_probability / state.n

    def _y_variance(self, t2: float) -> float:
        sub = self.attribute(self.attribute_names[0])
        e = sub.epsilon
        if isinstance(sub, PiecewiseMechanism):
            h = math.exp(e / 2)
            return t2 / (h - 1) + (h + 3) / (3 * (h - 1) ** 2)
        assert isinstance(sub, Duchi)
        return sub.B ** 2 - t2

    def scaled_mean_variance(self, n: int) -> float:
        r"""Worst-case variance of :meth:`scaled_means` from n reports:
        :math:`\max_{t^2\in\{0,1\}} \frac1n\big[\frac dk(\mathrm{Var}[y\mid t] + t^2) -
        t^2\big]` (the bracket is linear in t², so an end point is the worst)."""
        n = check_int("n", n, low=1)
        r = 1 / self.sampling_probability
        return max(r * (self._y_variance(t2) + t2) - t2 for t2 in (0.0, 1.0)) / n

    def mean_variance(self, n: int) -> float:
        """Expected worst-case variance of one ratio estimate from n reports in total."""
        return self.attribute_mean_variance(self.attribute_names[0], n)

    @classmethod
    def _unit_test_params(cls) -> list[dict[str, Any]]:
        return [{"dimensions": 3}, {"dimensions": 4, "sample": 2, "base": "duchi", "bins": 3}]
