"""Every integration test runs once per engine: the Faust driver and the direct aiokafka one.

``LDP_TEST_ENGINES`` (comma separated, default ``faust,aiokafka``) narrows the set.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from . import helpers

ENGINES = [e.strip() for e in os.environ.get("LDP_TEST_ENGINES", "faust,aiokafka").split(",")
           if e.strip()]


@pytest.fixture(params=ENGINES, autouse=True)
def engine(request: pytest.FixtureRequest) -> Iterator[str]:
    """The worker engine of this test run (``LDP_ENGINE`` of every worker it starts)."""
    old = helpers.ENGINE
    helpers.ENGINE = request.param
    try:
        yield request.param
    finally:
        helpers.ENGINE = old
