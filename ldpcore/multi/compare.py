r"""Partitioning users across questions against splitting ε between them (analytic).

With m questions of equal importance and n users, a mechanism whose estimator has
variance :math:`V(\varepsilon, n) = c(\varepsilon)/n` gives

* **partition users** (each user answers one question at ε, parallel
  composition): :math:`V_{part} = c(\varepsilon)\, m / n` (plus the variance of
  sampling n/m users of n, :math:`S^2 (m-1)/(n-1)`, which the slides assume small:
  it matters only at large ε);
* **split ε** (each user answers all m at ε/m, sequential composition):
  :math:`V_{split} = c(\varepsilon/m) / n`;
* in between, **sample k** (each user answers k at ε/k):
  :math:`V_k = c(\varepsilon/k)\, m / (k n)`.

For OLH :math:`c(\varepsilon) = 4e^\varepsilon/(e^\varepsilon - 1)^2` (the lecture
slides, "On answering multiple questions": split
:math:`4e^{\varepsilon/2}/(n(e^{\varepsilon/2}-1)^2)` against partition
:math:`8e^\varepsilon/(n(e^\varepsilon-1)^2)` for two questions).  Because
:math:`c(\varepsilon)` grows faster than :math:`1/\varepsilon` as ε shrinks
(:math:`c \approx 4/\varepsilon^2` for small ε), :math:`c(\varepsilon/m) \gg m\,
c(\varepsilon)`: partitioning wins, by about a factor m at small ε.

For two questions at ε = 1 (OLH with its integer g = 3: the slides' real-valued
optimum g = e^ε + 1 gives 7.37 and 15.67):

>>> r = sample_variances("olh", epsilon=1.0, n=10_000, attributes=2, domain_size=16)
>>> round(r[1] * 10_000, 2), round(r[2] * 10_000, 2)   # n·Var: partition, split
(7.54, 15.82)
"""

from __future__ import annotations

from typing import Any

from .._validate import check_int
from ..capabilities import FrequencyEstimates, MeanEstimates
from ..errors import ParameterError
from ..registry import make_oracle
from .attributes import sampling_variance

__all__ = ["sample_variances"]


def sample_variances(mechanism: str, *, epsilon: float, n: int, attributes: int,
                     frequency: float = 0.0, spread: float | None = None,
                     **params: Any) -> dict[int, float]:
    r"""Expected variance of one attribute's estimate for every k in [1, m].

    ``k = 1`` partitions the users, ``k = m`` splits ε; the value is
    :math:`V(\varepsilon/k, n)\cdot m/k + S^2 (m/k - 1)/(n - 1)` with V the mechanism's
    analytic frequency variance (at ``frequency``) or, for a mean-only mechanism, its
    worst-case mean variance, and the second term the variance of drawing the nk/m
    users who answer out of n (:func:`~ldpcore.multi.attributes.sampling_variance`):
    ``spread`` is the population variance :math:`S^2`, by default f(1 - f) for a
    frequency and its bound ((high - low)/2)^2 for a mean.  ``params`` are the
    mechanism's other parameters (``domain_size``, ``bins``…).
    """
    m = check_int("attributes", attributes, low=1, high=64)
    n = check_int("n", n, low=1)
    out: dict[int, float] = {}
    for k in range(1, m + 1):
        o = make_oracle(mechanism, epsilon=epsilon / k, **params)
        if isinstance(o, FrequencyEstimates):
            v = o.variance(n, frequency)
            s2 = frequency * (1 - frequency) if spread is None else spread
        elif isinstance(o, MeanEstimates):
            v = o.mean_variance(n)
            s2 = ((o.high - o.low) / 2) ** 2 if spread is None else spread  # type: ignore[attr-defined]
        else:
            raise ParameterError(f"mechanism {mechanism!r} estimates neither frequencies "
                                 "nor a mean")
        out[k] = v * m / k + sampling_variance(s2, n, n * k / m)
    return out
