"""ldpcore.errors: typed errors that subclass built-ins and carry a reason."""

from __future__ import annotations

import pickle

import pytest

from ldpcore.errors import (
    REPORT_REASONS,
    LDPError,
    ParameterError,
    ReportError,
    StateError,
    UnknownMechanismError,
)


def test_errors_are_caught_as_builtins() -> None:
    for cls in (ParameterError, UnknownMechanismError, ReportError):
        assert issubclass(cls, ValueError) and issubclass(cls, LDPError)
    assert issubclass(StateError, LDPError)


def test_a_report_error_keeps_its_reason_through_pickle() -> None:
    err = ReportError("bad magic", reason="garbage")
    back = pickle.loads(pickle.dumps(err))
    assert back.reason == "garbage" and str(back) == "bad magic"
    assert ReportError("x").reason == "invalid"


def test_an_unknown_reason_is_refused() -> None:
    with pytest.raises(ValueError, match="reason must be one of"):
        ReportError("x", reason="nope")
    assert "truncated" in REPORT_REASONS
