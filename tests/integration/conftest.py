"""Every integration test runs once per engine: the Faust driver and the direct aiokafka one.

``LDP_TEST_ENGINES`` (comma separated, default ``faust,aiokafka``) narrows the set.
Tests marked ``faults_full`` (the fault suite's second-engine runs) are deselected unless
``LDP_FAULTS_FULL=1``: CI time (docs/faults.md).  So are the crossed pairs of a test marked
``diagonal`` when the session has both brokers: it runs Faust on tansu and aiokafka on
Apache Kafka (each engine and each broker once), the other two pairs with
``LDP_FAULTS_FULL=1``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from . import helpers

ENGINES = [e.strip() for e in os.environ.get("LDP_TEST_ENGINES", "faust,aiokafka").split(",")
           if e.strip()]
FAULTS_FULL = os.environ.get("LDP_FAULTS_FULL", "").strip() not in ("", "0")


DIAGONAL = {("faust", "tansu"), ("aiokafka", "kafka")}


def _left_out(item: pytest.Item, brokers: set[str]) -> bool:
    if item.get_closest_marker("faults_full") is not None:
        return True
    if item.get_closest_marker("diagonal") is None or not {"tansu", "kafka"} <= brokers:
        return False
    params = getattr(item, "callspec", None)
    pair = (params.params.get("engine"), params.params.get("broker")) if params else None
    return pair is not None and pair not in DIAGONAL


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if FAULTS_FULL:
        return
    brokers = {str(i.callspec.params["broker"]) for i in items  # type: ignore[attr-defined]
               if "broker" in getattr(getattr(i, "callspec", None), "params", {})}
    dropped = [i for i in items if _left_out(i, brokers)]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        kept = set(map(id, items)) - set(map(id, dropped))
        items[:] = [i for i in items if id(i) in kept]


@pytest.fixture(params=ENGINES, autouse=True)
def engine(request: pytest.FixtureRequest) -> Iterator[str]:
    """The worker engine of this test run (``LDP_ENGINE`` of every worker it starts)."""
    old = helpers.ENGINE
    helpers.ENGINE = request.param
    try:
        yield request.param
    finally:
        helpers.ENGINE = old
