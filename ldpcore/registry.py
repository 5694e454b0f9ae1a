"""The mechanism registry and :func:`make_oracle`.

Mechanisms are listed by import path so that each lives in its own module and
is imported only when used.
"""

from __future__ import annotations

import importlib
import inspect
from typing import Any

from .base import FrequencyOracle
from .errors import ParameterError, UnknownMechanismError

__all__ = ["FREQUENCY_ORACLES", "MECHANISMS", "make_oracle", "oracle_class", "available_mechanisms"]

MECHANISMS: dict[str, str] = {
    "grr": "ldpcore.frequency.grr:GRR",
    "sue": "ldpcore.frequency.unary:SUE",
    "oue": "ldpcore.frequency.unary:OUE",
    "blh": "ldpcore.frequency.lh:BLH",
    "olh": "ldpcore.frequency.lh:OLH",
    "hr": "ldpcore.frequency.hr:HR",
    "hrr": "ldpcore.frequency.hrr:HRR",
    "ss": "ldpcore.frequency.ss:SS",
    "cms": "ldpcore.frequency.cms:CMS",
    "hcms": "ldpcore.frequency.cms:HCMS",
    "adaptive": "ldpcore.frequency.adaptive:make_adaptive",
    # Range-capable oracles over an ordered domain [0, D).
    "hh": "ldpcore.range.hh:HierarchicalHistogram",
    "haar": "ldpcore.range.haar:HaarHRR",
    # Numeric values on an interval [low, high] (bins of it).
    "sw": "ldpcore.numeric.sw:SquareWave",
    "pm": "ldpcore.numeric.mean:PiecewiseMechanism",
    "duchi": "ldpcore.numeric.mean:Duchi",
    # Heavy hitters over 2^bits domains (no enumeration).
    "pem": "ldpcore.heavy.pem:PEM",
}

# Mechanisms that are FrequencyOracles over [0, domain_size) built from
# (epsilon, domain_size) alone: the generic conformance suite runs over these.
FREQUENCY_ORACLES: tuple[str, ...] = (
    "grr", "sue", "oue", "blh", "olh", "hr", "hrr", "ss", "cms", "hcms", "hh", "haar",
)


def available_mechanisms() -> list[str]:
    """Names of the mechanisms whose module is importable."""
    out = []
    for name in MECHANISMS:
        try:
            oracle_class(name)
        except (ImportError, AttributeError):
            continue
        out.append(name)
    return out


def oracle_class(mechanism: str) -> Any:
    """The class (or factory) registered for ``mechanism``."""
    if not isinstance(mechanism, str) or mechanism not in MECHANISMS:
        raise UnknownMechanismError(
            f"mechanism must be one of {sorted(MECHANISMS)}, got {mechanism!r}")
    module, _, attr = MECHANISMS[mechanism].partition(":")
    return getattr(importlib.import_module(module), attr)


def make_oracle(mechanism: str, **params: Any) -> FrequencyOracle:
    """Build the oracle for ``mechanism`` from keyword parameters.

    ``make_oracle(**oracle.spec)`` rebuilds an oracle equal to ``oracle``.

    >>> import ldpcore
    >>> o = ldpcore.make_oracle("grr", epsilon=1.0, domain_size=8)
    >>> ldpcore.make_oracle(**o.spec) == o
    True
    """
    factory = oracle_class(mechanism)
    sig = inspect.signature(factory)
    accepts_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in sig.parameters.values())
    allowed = [n for n, p in sig.parameters.items() if p.kind is inspect.Parameter.KEYWORD_ONLY]
    unknown = sorted(set(params) - set(allowed))
    if unknown and not accepts_any:
        raise ParameterError(
            f"unknown parameter(s) {unknown} for mechanism {mechanism!r}; allowed: {allowed}")
    missing = [n for n, p in sig.parameters.items()
               if p.kind is inspect.Parameter.KEYWORD_ONLY and p.default is inspect.Parameter.empty
               and n not in params]
    if missing:
        raise ParameterError(f"mechanism {mechanism!r} needs parameter(s) {missing}")
    oracle: FrequencyOracle = factory(**params)
    return oracle
