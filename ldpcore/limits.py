r"""The parameter ranges every mechanism accepts, and why (one table for docs and the API).

A mechanism is only as private and as unbiased as the probabilities its kernels
actually realise.  A kernel draws a uniform number and compares it with a
probability ``p``; numpy's uniforms lie on a grid of step :math:`2^{-53}` (float64)
or :math:`2^{-24}` (the float32 draws of the unary-encoding and CMS kernels), so
the realised probability of an event of probability ``s`` is off by up to one grid
step.  The ranges below keep every such probability at least
:data:`GRID_STEPS` = 1000 grid steps away from 0 and 1, so the realised channel
matches the nominal one within 0.1 % and its privacy loss is within 0.001 of ε
(the estimators' constants match the channel to the same precision).  With
:math:`s_{\min}` the smallest such probability this gives

* ``1/(e^ε + 1) ≥ 1000·2^-53`` (GRR, BLH, OLH, HR, HRR, HCMS, Haar, Duchi, PEM and
  hh over those bases): :math:`ε ≤ \ln(2^{53}/1000 - 1) = 29.83`, so **29.8**;
* OUE's flip-on :math:`q = 1/(e^ε+1)` drawn in float32: :math:`ε ≤ 9.73`, so **9.7**;
* SUE's and CMS's flip :math:`1/(e^{ε/2}+1)` in float32: :math:`ε ≤ 19.45`, so **19.4**;
* the Piecewise Mechanism's :math:`1/(e^{ε/2}+1)` in float64: :math:`ε ≤ 59.66`, so
  **59.6**;
* Square Wave's half-width :math:`b(ε)` must stay 1000 float64 steps of the unit
  interval wide (:math:`b ≥ 1000·2^{-52}`; smaller bands vanish in ``v ± b``):
  :math:`ε ≤ 31.87`, so **31.8**.

The lower bound :data:`EPSILON_MIN` = 0.001 keeps :math:`p - q` (about ε) a thousand
times above its rounding error at every d; below it estimates carry a variance
factor above :math:`10^6` and no deployment needs them.

Each mechanism class declares its own ranges (``epsilon_bounds``,
``domain_size_bounds``, ``parameter_ranges``, :meth:`~ldpcore.base.Mechanism.exact_epsilon_max`)
from the floors of :mod:`ldpcore._bounds`; this module is the view over every registered
mechanism that the docs, the benchmarks and ``GET /v1/mechanisms`` read.

Sizes are bounded by memory and by the 50 ms construction budget: a state holds at
most :data:`MAX_STATE_CELLS` int64 counters (512 MiB; one-dimensional states at most
2^24), CMS/HCMS hash tables at most :data:`MAX_HASH_CELLS` entries (built on the
first estimate).  OUE/SUE/SS send d-bit reports, so their device-side ``perturb``
needs memory in proportion to d per report: the ranges allow the large d of
state-level simulations, not of devices.

>>> from ldpcore.frequency.unary import OUE
>>> OUE.epsilon_bounds
(0.001, 9.7)
>>> epsilon_range("oue")
(0.001, 9.7)
>>> param_ranges()["grr"]["domain_size"]
'integer in [2, 16777216]'
"""

from __future__ import annotations

from typing import Any

from ._bounds import (
    DEFAULT_DOMAIN_RANGE,
    DEFAULT_EPSILON_RANGE,
    EPSILON_MIN,
    GRID_STEPS,
    MAX_HASH_CELLS,
    MAX_STATE_CELLS,
    PROB_FLOOR_32,
    PROB_FLOOR_64,
    SW_B_MIN,
)
from .registry import MECHANISMS, oracle_class

__all__ = [
    "EPSILON_MIN", "EPSILON_RANGES", "DOMAIN_RANGES", "PARAMETER_RANGES", "GRID_STEPS",
    "MAX_STATE_CELLS", "MAX_HASH_CELLS", "PROB_FLOOR_64", "PROB_FLOOR_32", "SW_B_MIN",
    "DEFAULT_EPSILON_RANGE", "epsilon_range", "domain_range", "param_ranges",
    "exact_epsilon_max",
]

_DECLARING = {name: oracle_class(name) for name in MECHANISMS}

EPSILON_RANGES: dict[str, tuple[float, float]] = {
    name: cls.epsilon_bounds for name, cls in _DECLARING.items()}
"""Allowed ε per mechanism (closed intervals), as the classes declare them."""

DOMAIN_RANGES: dict[str, tuple[int, int]] = {
    name: cls.domain_size_bounds for name, cls in _DECLARING.items()}
"""Allowed ``domain_size`` (``bins`` for sw/pm/duchi, ``2^bits`` for pem) per mechanism."""

PARAMETER_RANGES: dict[str, dict[str, str]] = {
    name: dict(cls.parameter_ranges) for name, cls in _DECLARING.items()}
"""Human-readable allowed range of every parameter, per mechanism (JSON-able)."""


def exact_epsilon_max(mechanism: str) -> float:
    """The unrounded upper bound of ε derived in the module docstring.

    >>> round(exact_epsilon_max("grr"), 3), round(exact_epsilon_max("sue"), 3)
    (29.829, 19.455)
    """
    return float(oracle_class(mechanism).exact_epsilon_max())


def epsilon_range(mechanism: str) -> tuple[float, float]:
    """``(low, high)`` of ε for ``mechanism`` (both inclusive); unregistered subclasses
    get :data:`DEFAULT_EPSILON_RANGE`."""
    return EPSILON_RANGES.get(mechanism, DEFAULT_EPSILON_RANGE)


def domain_range(mechanism: str) -> tuple[int, int]:
    """``(low, high)`` of ``domain_size`` for ``mechanism`` (both inclusive)."""
    return DOMAIN_RANGES.get(mechanism, DEFAULT_DOMAIN_RANGE)


def param_ranges() -> dict[str, dict[str, Any]]:
    """A JSON-able copy of :data:`PARAMETER_RANGES` plus numeric ε and domain bounds.

    >>> r = param_ranges()
    >>> r["olh"]["epsilon_bounds"], r["olh"]["domain_size_bounds"]
    ([0.001, 29.8], [2, 8388608])
    """
    out: dict[str, dict[str, Any]] = {}
    for name, table in PARAMETER_RANGES.items():
        out[name] = {**table, "epsilon_bounds": list(EPSILON_RANGES[name]),
                     "domain_size_bounds": list(DOMAIN_RANGES[name])}
    return out
