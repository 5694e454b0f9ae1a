"""Devices keep their store under the user data directory: never the real one in tests."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _private_user_data_dir(tmp_path_factory: pytest.TempPathFactory,
                           monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path_factory.mktemp("user-data")
    monkeypatch.setenv("XDG_DATA_HOME", str(path))
    return path
