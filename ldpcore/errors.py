"""Typed errors of ldpcore.

Every error subclasses a built-in (``ValueError`` or ``TypeError``) so callers
that do not know ldpcore still catch them, while callers that do can tell a bad
parameter from a bad report or an incompatible state.
"""

from __future__ import annotations

__all__ = [
    "LDPError",
    "ParameterError",
    "REPORT_REASONS",
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


REPORT_REASONS: dict[str, str] = {
    "garbage": "not a ldpstream message at all (bad magic, not UTF-8, not JSON)",
    "version": "an envelope or batch version this library does not read",
    "truncated": "the bytes end early, or trailing bytes follow the batch",
    "too_large": "JSON nested deeper or longer than the format allows",
    "schema": "a JSON message or record with missing, extra or mistyped fields",
    "shape": "binary columns that do not fit the mechanism (count, names, dtypes, widths)",
    "wrong_collection": "the envelope names another collection than the one decoding it",
    "fingerprint": "the collection or oracle fingerprint does not match the spec",
    "mechanism": "the batch was perturbed with another mechanism",
    "out_of_range": "a report value outside its column's domain (or bad padding bits)",
    "invalid": "a report that breaks a mechanism-specific rule",
}
"""Every :attr:`ReportError.reason`, with what it means (metric labels, DLQ headers)."""


class ReportError(LDPError, ValueError):
    """A report batch (or its wire encoding) is malformed or does not fit the oracle.

    ``reason`` is a short machine-readable label from :data:`REPORT_REASONS`, set
    where the error is raised, so callers never parse the English message.

    >>> ReportError("bad magic", reason="garbage").reason
    'garbage'
    """

    def __init__(self, message: str, *, reason: str = "invalid") -> None:
        if reason not in REPORT_REASONS:
            raise ValueError(f"reason must be one of {sorted(REPORT_REASONS)}, got {reason!r}")
        super().__init__(message)
        self.reason = reason

    def __reduce__(self) -> tuple[object, ...]:
        return (_report_error, (str(self), self.reason))


def _report_error(message: str, reason: str) -> ReportError:
    return ReportError(message, reason=reason)


class StateError(LDPError, ValueError):
    """A sufficient-statistics state does not fit the oracle, or cannot be decoded."""
