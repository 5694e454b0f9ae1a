"""Devices keep their store under the user data directory: never the real one in tests; a
scripted gateway (tests/producer/standins.py) for the tests that post to one."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from .standins import Gateway


@pytest.fixture(autouse=True)
def _private_user_data_dir(tmp_path_factory: pytest.TempPathFactory,
                           monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path_factory.mktemp("user-data")
    monkeypatch.setenv("XDG_DATA_HOME", str(path))
    return path


@pytest.fixture
def gateway() -> Iterator[Gateway]:
    gw = Gateway()
    yield gw
    gw.server.shutdown()
    gw.server.server_close()
