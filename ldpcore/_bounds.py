"""The numeric floors every mechanism's parameter ranges derive from.

A leaf module (it imports nothing of ldpcore): the mechanism classes declare their
ranges from these constants (``epsilon_bounds``, ``domain_size_bounds``,
``parameter_ranges`` on each class), and :mod:`ldpcore.limits` explains the derivation
and lists the declarations for docs and the API.

>>> round(EXACT_EPSILON_MAX_64, 3), round(EXACT_EPSILON_MAX_32, 3)
(29.829, 9.728)
>>> real_in((0.001, 29.8)), integer_in((2, 16))
('real in [0.001, 29.8]', 'integer in [2, 16]')
"""

from __future__ import annotations

import math

__all__ = [
    "GRID_STEPS", "PROB_FLOOR_64", "PROB_FLOOR_32", "SW_B_MIN", "MAX_STATE_CELLS",
    "MAX_HASH_CELLS", "EPSILON_MIN", "EPSILON_MAX_64", "EXACT_EPSILON_MAX_64",
    "EXACT_EPSILON_MAX_32", "DEFAULT_EPSILON_RANGE", "DEFAULT_DOMAIN_RANGE", "real_in",
    "integer_in", "ranges",
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
"""Smallest ε of every mechanism: p − q stays a thousand times above its rounding error."""
EXACT_EPSILON_MAX_64 = math.log(1 / PROB_FLOOR_64 - 1)
"""Largest ε with ``1/(e^ε + 1) ≥ PROB_FLOOR_64`` (kernels drawing float64 uniforms)."""
EXACT_EPSILON_MAX_32 = math.log(1 / PROB_FLOOR_32 - 1)
"""Largest ε with ``1/(e^ε + 1) ≥ PROB_FLOOR_32`` (kernels drawing float32 uniforms)."""
EPSILON_MAX_64 = 29.8
""":data:`EXACT_EPSILON_MAX_64` rounded down to a tenth: the usual upper bound of ε."""

DEFAULT_EPSILON_RANGE = (EPSILON_MIN, EPSILON_MAX_64)
"""ε range of a mechanism that declares none (the float64 bound)."""
DEFAULT_DOMAIN_RANGE = (2, 2**31 - 1)
"""``domain_size`` range of a mechanism that declares none."""


def real_in(bounds: tuple[float, float]) -> str:
    """The human-readable text of a closed real interval."""
    return f"real in [{bounds[0]}, {bounds[1]}]"


def integer_in(bounds: tuple[int, int]) -> str:
    """The human-readable text of a closed integer interval."""
    return f"integer in [{bounds[0]}, {bounds[1]}]"


def ranges(epsilon: tuple[float, float], domain_size: tuple[int, int], domain_note: str = "",
           **more: str) -> dict[str, str]:
    """A mechanism's ``parameter_ranges``: ε and ``domain_size`` from their bounds (the
    latter's text followed by ``domain_note``), then the mechanism's own parameters.

    >>> ranges((0.001, 29.8), (2, 16), " (items)", length="integer in [1, 4096]")
    ... # doctest: +NORMALIZE_WHITESPACE
    {'epsilon': 'real in [0.001, 29.8]', 'domain_size': 'integer in [2, 16] (items)',
     'length': 'integer in [1, 4096]'}
    """
    return {"epsilon": real_in(epsilon), "domain_size": integer_in(domain_size) + domain_note,
            **more}
