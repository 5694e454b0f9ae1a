"""Every test is marked unit or e2e at collection (tests/conftest.py), so `pytest -m unit` is
the fast command: no servers, no external tools."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from .conftest import is_end_to_end

TESTS = Path(__file__).resolve().parent


@dataclass
class FakeItem:
    """The three things is_end_to_end looks at."""

    path: Path
    fixturenames: list[str] = field(default_factory=list)
    markers: tuple[str, ...] = ()

    def get_closest_marker(self, name: str) -> Any:
        return name if name in self.markers else None


@pytest.mark.parametrize(("item", "e2e"), [
    (FakeItem(TESTS / "ldpcore" / "test_limits.py"), False),
    (FakeItem(TESTS / "ldpcore" / "test_limits.py", ["kafka"]), True),
    (FakeItem(TESTS / "query_api" / "test_service.py", ["redis_server", "tmp_path"]), True),
    (FakeItem(TESTS / "query_api" / "test_routes.py", markers=("integration",)), True),
    (FakeItem(TESTS / "sdks" / "test_sdk_browser.py", markers=("browser",)), True),
    (FakeItem(TESTS / "deploy" / "test_helm.py"), True),
    (FakeItem(TESTS / "sdks" / "test_sdk_statistics.py"), True),
    (FakeItem(TESTS / "sdks" / "test_vectors.py"), False),
])
def test_tests_that_start_servers_or_run_tools_are_end_to_end(item: FakeItem, e2e: bool) -> None:
    assert is_end_to_end(item) is e2e  # type: ignore[arg-type]


def test_this_file_runs_in_the_fast_command(request: pytest.FixtureRequest) -> None:
    assert request.node.get_closest_marker("unit") is not None
    assert request.node.get_closest_marker("e2e") is None
