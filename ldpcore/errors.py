"""Typed errors of ldpcore.

Every error subclasses a built-in (``ValueError`` or ``TypeError``) so callers
that do not know ldpcore still catch them, while callers that do can tell a bad
parameter from a bad report or an incompatible state.
"""

from __future__ import annotations

__all__ = [
    "LDPError",
    "ParameterError",
    "ReportError",
    "StateError",
    "UnknownMechanismError",
]


class LDPError(Exception):
    """Base class of every error raised by ldpcore."""


class ParameterError(LDPError, ValueError):
    """A constructor or function argument is outside its allowed domain."""


class UnknownMechanismError(ParameterError):
    """The mechanism name is not one ldpcore knows."""


class ReportError(LDPError, ValueError):
    """A report batch (or its wire encoding) is malformed or does not fit the oracle."""


class StateError(LDPError, ValueError):
    """A sufficient-statistics state does not fit the oracle, or cannot be decoded."""
