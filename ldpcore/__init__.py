"""ldpcore: ε-LDP frequency oracles as fast, mergeable sufficient statistics.

Pure numpy; no I/O.  Start with :func:`make_oracle`.
"""

from __future__ import annotations

from . import capabilities, message, wire
from .base import Column, FrequencyOracle, Mechanism, Reports, State
from .consistency import METHODS as POSTPROCESS_METHODS
from .consistency import guideline, postprocess, subset_query
from .errors import LDPError, ParameterError, ReportError, StateError, UnknownMechanismError
from .frequency.adaptive import recommend
from .registry import MECHANISMS, available_mechanisms, make_oracle

__all__ = [
    "Column",
    "FrequencyOracle",
    "LDPError",
    "MECHANISMS",
    "Mechanism",
    "POSTPROCESS_METHODS",
    "ParameterError",
    "ReportError",
    "Reports",
    "State",
    "StateError",
    "UnknownMechanismError",
    "available_mechanisms",
    "capabilities",
    "guideline",
    "make_oracle",
    "message",
    "postprocess",
    "recommend",
    "subset_query",
    "wire",
]

__version__ = "0.1.0"
