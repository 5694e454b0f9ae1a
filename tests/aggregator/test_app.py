"""aggregator.app: the worker's start-up (settings first) and its health deadline.

A worker running against real servers: tests/integration (both engines)."""

from __future__ import annotations

import pytest

from aggregator.app import main, stall_after
from aggregator.config import WorkerSettings
from ldpstream.settings import ConfigError


def test_a_stall_is_several_session_timeouts_and_at_least_thirty_seconds() -> None:
    assert stall_after(WorkerSettings.from_env({})) >= 30.0
    long = WorkerSettings.from_env({"LDP_SESSION_TIMEOUT_MS": "60000"})
    assert stall_after(long) == 180.0


def test_main_stops_at_a_bad_variable_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LDP_TOPIC_PARTITIONS", "-3")
    with pytest.raises(ConfigError, match="LDP_TOPIC_PARTITIONS"):
        main()
