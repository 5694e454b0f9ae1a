"""The mechanism registry and :func:`make_oracle`.

Mechanisms are listed by import path so that each lives in its own module and
is imported only when used.
"""

from __future__ import annotations

import importlib
import inspect
from typing import Any

from .base import FrequencyOracle, Mechanism
from .capabilities import FrequencyEstimates
from .errors import ParameterError, UnknownMechanismError

__all__ = ["MECHANISMS", "make_oracle", "make_frequency_oracle", "mechanisms_with", "oracle_class",
           "available_mechanisms"]

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
    # Several attributes per report (ldpcore.multi).
    "multi": "ldpcore.multi.attributes:MultiAttribute",
    "vector": "ldpcore.multi.vector:NumericVector",
    # Set-valued data: each device holds a set of items (padding and sampling).
    "ps": "ldpcore.setvalued.ps:PaddingSampling",
    "psi": "ldpcore.setvalued.ps:PaddingSamplingItemsets",
    "setsize": "ldpcore.setvalued.ps:SetSize",
}


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


def make_frequency_oracle(mechanism: str, **params: Any) -> FrequencyOracle:
    """:func:`make_oracle` for a mechanism that must estimate frequencies.

    >>> make_frequency_oracle("pm", epsilon=1.0, bins=8)
    Traceback (most recent call last):
    ...
    ldpcore.errors.ParameterError: mechanism 'pm' does not estimate frequencies; ...
    """
    oracle = make_oracle(mechanism, **params)
    if not isinstance(oracle, FrequencyOracle):
        raise ParameterError(f"mechanism {mechanism!r} does not estimate frequencies; "
                             f"use one of {sorted(mechanisms_with(FrequencyEstimates))}")
    return oracle


def mechanisms_with(capability: type) -> list[str]:
    """Registered (importable) mechanisms whose class has ``capability``.

    >>> from ldpcore.capabilities import HeavyHitterSearch
    >>> mechanisms_with(HeavyHitterSearch)
    ['pem']
    """
    out = []
    for name in available_mechanisms():
        cls = oracle_class(name)
        if isinstance(cls, type) and issubclass(cls, capability):
            out.append(name)
    return out


def make_oracle(mechanism: str, **params: Any) -> Mechanism:
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
    oracle: Mechanism = factory(**params)
    return oracle
