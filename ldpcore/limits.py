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

Sizes are bounded by memory and by the 50 ms construction budget: a state holds at
most :data:`MAX_STATE_CELLS` int64 counters (512 MiB; one-dimensional states at most
2^24), CMS/HCMS hash tables at most :data:`MAX_HASH_CELLS` entries (built on the
first estimate).  OUE/SUE/SS send d-bit reports, so their device-side ``perturb``
needs memory in proportion to d per report: the ranges allow the large d of
state-level simulations, not of devices.

>>> epsilon_range("oue")
(0.001, 9.7)
>>> param_ranges()["grr"]["domain_size"]
'integer in [2, 16777216]'
"""

from __future__ import annotations

import math
from typing import Any

from .errors import UnknownMechanismError

__all__ = [
    "EPSILON_MIN", "EPSILON_RANGES", "DOMAIN_RANGES", "PARAMETER_RANGES", "GRID_STEPS",
    "MAX_STATE_CELLS", "MAX_HASH_CELLS", "PROB_FLOOR_64", "PROB_FLOOR_32", "epsilon_range",
    "domain_range", "param_ranges", "exact_epsilon_max",
]

GRID_STEPS = 1000
PROB_FLOOR_64 = GRID_STEPS * 2.0**-53
"""Smallest probability a float64-uniform kernel may compare with (0.1 % realised error)."""
PROB_FLOOR_32 = GRID_STEPS * 2.0**-24
"""Smallest probability a float32-uniform kernel may compare with."""
SW_B_MIN = GRID_STEPS * 2.0**-52
"""Smallest Square Wave half-width b: 1000 float64 steps of [1, 2)."""
MAX_STATE_CELLS = 1 << 26
"""Largest state (int64 counters, 512 MiB) of any mechanism (hh at d = 2^22 needs 38M)."""
MAX_HASH_CELLS = 1 << 22
"""Largest (rows × values × digits) CMS/HCMS hash-table work, built on first estimate."""

EPSILON_MIN = 0.001

EPSILON_RANGES: dict[str, tuple[float, float]] = {
    "grr": (EPSILON_MIN, 29.8),
    "sue": (EPSILON_MIN, 19.4),
    "oue": (EPSILON_MIN, 9.7),
    "blh": (EPSILON_MIN, 29.8),
    "olh": (EPSILON_MIN, 29.8),
    "hr": (EPSILON_MIN, 29.8),
    "hrr": (EPSILON_MIN, 29.8),
    "ss": (EPSILON_MIN, 29.8),
    "cms": (EPSILON_MIN, 19.4),
    "hcms": (EPSILON_MIN, 29.8),
    "adaptive": (EPSILON_MIN, 29.8),
    "hh": (EPSILON_MIN, 29.8),  # and at most the base oracle's upper bound
    "haar": (EPSILON_MIN, 29.8),
    "sw": (EPSILON_MIN, 31.8),
    "pm": (EPSILON_MIN, 59.6),
    "duchi": (EPSILON_MIN, 29.8),
    "pem": (EPSILON_MIN, 29.8),
    "multi": (EPSILON_MIN, 29.8),  # and ε/sample within every attribute oracle's range
    "vector": (EPSILON_MIN, 29.8),
    "ps": (EPSILON_MIN, 21.5),  # GRR's amplified eps' = ln(l(e^eps-1)+1) <= 29.8 for l <= 4096
    "psi": (EPSILON_MIN, 21.5),
    "setsize": (EPSILON_MIN, 29.8),
}
"""Allowed ε per mechanism (closed intervals)."""

DOMAIN_RANGES: dict[str, tuple[int, int]] = {
    "grr": (2, 1 << 24),
    "sue": (2, 1 << 24),
    "oue": (2, 1 << 24),
    "blh": (2, 1 << 23),
    "olh": (2, 1 << 23),
    "hr": (2, 1 << 24),
    "hrr": (2, 1 << 24),
    "ss": (2, 1 << 20),
    "cms": (2, 1 << 13),
    "hcms": (2, 1 << 13),
    "adaptive": (2, 1 << 24),
    "hh": (2, 1 << 22),
    "haar": (2, 1 << 23),
    "sw": (2, 1 << 12),
    "pm": (2, 1 << 20),
    "duchi": (2, 1 << 20),
    "pem": (16, 1 << 62),
    "multi": (2, 1 << 62),  # the product of the attributes' domain sizes, capped at 2^62
    "vector": (2, 1 << 62),  # bins^dimensions, capped at 2^62
    "ps": (2, 1 << 22),  # items; the inner oracle sees d + l values
    "psi": (2, 1 << 22),
    "setsize": (2, 1 << 22),
}
"""Allowed ``domain_size`` (``bins`` for sw/pm/duchi, ``2^bits`` for pem) per mechanism."""


def exact_epsilon_max(mechanism: str) -> float:
    """The unrounded upper bound of ε derived in the module docstring.

    >>> round(exact_epsilon_max("grr"), 3), round(exact_epsilon_max("sue"), 3)
    (29.829, 19.455)
    """
    e64 = math.log(1 / PROB_FLOOR_64 - 1)
    e32 = math.log(1 / PROB_FLOOR_32 - 1)
    if mechanism == "oue":
        return e32
    if mechanism in ("sue", "cms"):
        return 2 * e32
    if mechanism == "pm":
        return 2 * e64
    if mechanism == "sw":
        from .numeric.sw import sw_b

        lo, hi = 1.0, 100.0
        for _ in range(200):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if sw_b(mid) >= SW_B_MIN else (lo, mid)
        return lo
    if mechanism in ("ps", "psi"):
        # GRR runs at eps' = ln(l (e^eps - 1) + 1) with l up to 4096 (setvalued.ps.MAX_LENGTH).
        return math.log(math.expm1(e64) / 4096 + 1)
    if mechanism not in EPSILON_RANGES:
        raise UnknownMechanismError(f"mechanism must be one of {sorted(EPSILON_RANGES)}, "
                                    f"got {mechanism!r}")
    return e64


DEFAULT_EPSILON_RANGE = (EPSILON_MIN, 29.8)
"""For subclasses outside the registry: the float64 bound."""


def epsilon_range(mechanism: str) -> tuple[float, float]:
    """``(low, high)`` of ε for ``mechanism`` (both inclusive); unregistered subclasses
    get :data:`DEFAULT_EPSILON_RANGE`."""
    return EPSILON_RANGES.get(mechanism, DEFAULT_EPSILON_RANGE)


def domain_range(mechanism: str) -> tuple[int, int]:
    """``(low, high)`` of ``domain_size`` for ``mechanism`` (both inclusive)."""
    return DOMAIN_RANGES.get(mechanism, (2, 2**31 - 1))


def _eps(m: str) -> str:
    lo, hi = EPSILON_RANGES[m]
    return f"real in [{lo}, {hi}]"


def _dom(m: str) -> str:
    lo, hi = DOMAIN_RANGES[m]
    return f"integer in [{lo}, {hi}]"


PARAMETER_RANGES: dict[str, dict[str, str]] = {
    "grr": {"epsilon": _eps("grr"), "domain_size": _dom("grr")},
    "sue": {"epsilon": _eps("sue"), "domain_size": _dom("sue") + " (d-bit reports)"},
    "oue": {"epsilon": _eps("oue"), "domain_size": _dom("oue") + " (d-bit reports)"},
    "blh": {"epsilon": _eps("blh"), "domain_size": _dom("blh") + " (state 2^(r+1) <= 2^24)"},
    "olh": {"epsilon": _eps("olh"), "domain_size": _dom("olh"),
            "g": "prime in [2, 65536] with g^(r+1) <= 2^24 cells, g^r >= d; default the prime "
                 "nearest e^eps + 1, halved until the state fits"},
    "hr": {"epsilon": _eps("hr"), "domain_size": _dom("hr")},
    "hrr": {"epsilon": _eps("hrr"), "domain_size": _dom("hrr")},
    "ss": {"epsilon": _eps("ss"), "domain_size": _dom("ss") + " (d-bit reports)",
           "subset_size": "integer k in [1, d-1] with (d-k)/(k e^eps + d-k) >= 1000*2^-53"},
    "cms": {"epsilon": _eps("cms"), "domain_size": _dom("cms"),
            "m": "prime in [2, 65536]; k (m+1) <= 2^26 and k*d*r <= 2^22 (k = (m^r-1)/(m-1))"},
    "hcms": {"epsilon": _eps("hcms"), "domain_size": _dom("hcms"),
             "m": "power of two in [2, 4096]; 2 k m <= 2^26 and k*d*r <= 2^22"},
    "adaptive": {"epsilon": _eps("adaptive"), "domain_size": _dom("adaptive"),
                 "max_report_bits": "integer >= the smallest candidate's report"},
    "hh": {"epsilon": _eps("hh") + ", at most the base's upper bound (9.7 for oue)",
           "domain_size": _dom("hh"),
           "fanout": "integer in [2, 1024]; fanout^height within the base's domain_size range "
                     "and the whole state <= 2^26 cells",
           "base": "one of oue, hrr, olh, grr", "consistency": "boolean",
           "nonnegative": "boolean"},
    "haar": {"epsilon": _eps("haar"), "domain_size": _dom("haar")},
    "sw": {"epsilon": _eps("sw"), "bins": _dom("sw"),
           "out_bins": "integer in [2, 4096], bins*out_bins <= 2^22",
           "b": "real in [1000*2^-52, 10] with 2b e^eps + 1 <= 2^53/1000; default b(eps)",
           "smoothing": "boolean", "low": "finite real in [-1e300, 1e300]",
           "high": "finite real in [-1e300, 1e300], > low"},
    "pm": {"epsilon": _eps("pm"), "bins": _dom("pm"), "low": "finite real in [-1e300, 1e300]",
           "high": "finite real in [-1e300, 1e300], > low"},
    "duchi": {"epsilon": _eps("duchi"), "bins": _dom("duchi"),
              "low": "finite real in [-1e300, 1e300]",
              "high": "finite real in [-1e300, 1e300], > low"},
    "pem": {"epsilon": _eps("pem"), "bits": "integer in [4, 62] (domain_size = 2^bits)",
            "keep": "integer in [1, 4096]", "eta": "integer in [1, 16], keep*2^eta <= 2^22",
            "pool": "integer in [1, 4096]", "hash_seed": "integer in [0, 2^63-1]",
            "g (derived)": "round(e^eps + 1), lowered so groups*pool*g <= 2^26 and g <= 65536"},
    "multi": {"epsilon": _eps("multi") + "; each attribute runs at epsilon/sample, within its "
                                         "mechanism's range",
              "attributes": "list of 1 to 64 {name, mechanism, <its parameters but epsilon>}, "
                            "distinct names [A-Za-z][A-Za-z0-9_-]{0,63}",
              "sample": "integer k in [1, attributes + pairs] (default 1)",
              "pairs": "optional list of [a, b] or {attributes: [a, b], mechanism, ...}: "
                       "2-way marginals, each pair of different attributes once",
              "domain_size": "optional; the product of the attributes' sizes, capped at 2^62"},
    "vector": {"epsilon": _eps("vector"), "dimensions": "integer in [1, 64]",
               "sample": "integer in [1, dimensions] or 'auto' (max(1, min(d, floor(eps/2.5))))",
               "base": "one of pm, duchi", "bins": "integer in [2, 2^20]",
               "domain_size": "optional; bins^dimensions, capped at 2^62"},
    "ps": {"epsilon": _eps("ps"), "domain_size": _dom("ps") + " (items)",
           "length": "integer l in [1, 4096] (padding length)",
           "inner": "one of auto, grr (at eps' = ln(l(e^eps-1)+1)), olh (at eps)",
           "candidates": "optional non-empty list of distinct item indices in [0, d)"},
    "psi": {"epsilon": _eps("psi"), "domain_size": _dom("psi") + " (items)",
            "length": "integer l in [1, 4096] (padding length)",
            "inner": "one of auto, grr (at eps' = ln(l(e^eps-1)+1)), olh (at eps)",
            "itemsets": "non-empty list of distinct itemsets (non-empty lists of distinct "
                        "item indices in [0, d)); default every single item"},
    "setsize": {"epsilon": _eps("setsize"), "domain_size": _dom("setsize") + " (items)",
                "max_size": "integer in [1, 4096]; default the number of candidates or "
                            "itemsets, else min(d, 64)",
                "candidates": "optional list of distinct item indices in [0, d)",
                "itemsets": "optional list of itemsets (not with candidates)",
                "inner": "a frequency mechanism or auto (resolved by recommend)"},
}
"""Human-readable allowed range of every parameter, per mechanism (JSON-able)."""


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
