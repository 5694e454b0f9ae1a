"""Every integration test runs once per engine: the Faust driver and the direct aiokafka one.

``LDP_TEST_ENGINES`` (comma separated, default ``faust,aiokafka``) narrows the set.
Tests marked ``faults_full`` (the fault suite's second-engine runs) are deselected unless
``LDP_FAULTS_FULL=1``: CI time (docs/faults.md).
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from . import helpers

ENGINES = [e.strip() for e in os.environ.get("LDP_TEST_ENGINES", "faust,aiokafka").split(",")
           if e.strip()]
FAULTS_FULL = os.environ.get("LDP_FAULTS_FULL", "").strip() not in ("", "0")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if FAULTS_FULL:
        return
    dropped = [i for i in items if i.get_closest_marker("faults_full") is not None]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = [i for i in items if i.get_closest_marker("faults_full") is None]


@pytest.fixture(params=ENGINES, autouse=True)
def engine(request: pytest.FixtureRequest) -> Iterator[str]:
    """The worker engine of this test run (``LDP_ENGINE`` of every worker it starts)."""
    old = helpers.ENGINE
    helpers.ENGINE = request.param
    try:
        yield request.param
    finally:
        helpers.ENGINE = old
