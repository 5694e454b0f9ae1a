"""Shared pytest configuration.

Real servers for integration tests come from :mod:`ldpstream.dev.servers`, chosen once per
session by :func:`ldpstream.dev.testbackend.choose_backend` from the environment:

* ``LDP_TEST_BACKEND=local`` (default): child processes on free loopback ports, one of
  each per session: a Redis with AOF on, and the broker of the test's ``broker``
  parameter: the embedded tansu and Apache Kafka (KRaft, jars in ``.tools/kafka/libs``).
  Every test that uses the ``kafka`` fixture runs once per broker (ids ``[tansu]``,
  ``[kafka]``); ``LDP_TEST_BROKERS=tansu`` (or ``kafka``) narrows that down.
* ``LDP_TEST_BACKEND=containers``: ``apache/kafka`` and Redis in testcontainers.
* ``LDP_TEST_KAFKA`` (host:port) / ``LDP_TEST_REDIS`` (redis:// URL) name external ones.

``@pytest.mark.brokers("kafka")`` limits a test to the named brokers (it is skipped,
saying why, when the session has none of them); ``@pytest.mark.any_broker`` runs a
test that does not depend on the broker (the API tests) once, on the session's first.

Every test is marked ``e2e`` or ``unit`` here at collection (see :func:`is_end_to_end`), so
``pytest -m unit`` runs the unit tests alone: no servers, no external tools (docs/testing.md).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ldpstream.dev.testbackend import TestBackend, choose_backend

_BACKEND: list[TestBackend] = []


def session_backend() -> TestBackend:
    """The test servers of this session (from the environment, read once)."""
    if not _BACKEND:
        _BACKEND.append(choose_backend(os.environ))
    return _BACKEND[0]


@dataclass
class ExternalServer:
    """An externally managed server (cannot be restarted by tests)."""

    bootstrap: str
    url: str
    managed: bool = False
    broker: str | None = None


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrize every test that needs a broker over the session's brokers."""
    if "broker" not in metafunc.fixturenames:
        return
    backend = session_backend()
    marker = metafunc.definition.get_closest_marker("brokers")
    wanted = tuple(marker.args) if marker else backend.brokers
    if metafunc.definition.get_closest_marker("any_broker") is not None:
        wanted = wanted[:1]
    params = [pytest.param(b, id=b) for b in backend.brokers if b in wanted]
    if not params:
        reason = (f"needs broker {' or '.join(wanted)}; this session has "
                  f"{', '.join(backend.brokers)} (LDP_TEST_BROKERS, LDP_TEST_KAFKA, "
                  "LDP_TEST_BACKEND)")
        params = [pytest.param(wanted[0], id=wanted[0], marks=pytest.mark.skip(reason=reason))]
    metafunc.parametrize("broker", params, indirect=True, scope="session")


@pytest.fixture(scope="session")
def test_backend() -> TestBackend:
    return session_backend()


@pytest.fixture(scope="session")
def broker(request: pytest.FixtureRequest) -> str:
    """The broker of this test: ``"tansu"``, ``"kafka"`` (Apache Kafka) or ``"external"``."""
    return str(request.param)


@pytest.fixture(scope="session")
def kafka(broker: str, test_backend: TestBackend,
          tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The session's running broker of kind ``broker`` (started once per session)."""
    if test_backend.kafka:
        yield ExternalServer(test_backend.kafka, f"kafka://{test_backend.kafka}",
                             broker="external")
        return
    server: Any
    if test_backend.backend == "containers":
        from ldpstream.dev.testbackend import start_kafka_container

        server = start_kafka_container()
    else:
        from ldpstream.dev.servers import start_broker

        server = start_broker(broker, tmp_path_factory.mktemp(f"kafka-{broker}"))
        server.managed = True
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def redis_server(test_backend: TestBackend,
                 tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    if test_backend.redis:
        yield ExternalServer("", test_backend.redis)
        return
    server: Any
    if test_backend.backend == "containers":
        from ldpstream.dev.testbackend import start_redis_container

        server = start_redis_container()
    else:
        from ldpstream.dev.servers import start_redis

        server = start_redis(tmp_path_factory.mktemp("redis"))
        server.managed = True
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def local_backend(test_backend: TestBackend) -> None:
    """Skip unless the test may start and restart servers of its own (local backend)."""
    if not test_backend.restartable:
        pytest.skip("restarts need servers started by the tests as local processes "
                    f"(LDP_TEST_BACKEND=local; this session has {test_backend.backend!r})")


@pytest.fixture
def redis_client(redis_server: Any) -> Iterator[Any]:
    import redis

    client = redis.Redis.from_url(redis_server.url, socket_timeout=10)
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
def ldp_names() -> dict[str, str]:
    """Unique topic, dead-letter topic, consumer group and Redis prefix for one test."""
    uid = uuid.uuid4().hex[:8]
    return {"topic": f"reports-{uid}", "dlq": f"dlq-{uid}", "group": f"agg-{uid}",
            "prefix": f"t{uid}:"}


@pytest.fixture
def tests_dir() -> Path:
    return Path(__file__).parent


# Fixtures that start (or reach) a broker or a Redis: a test that uses one is end to end.
SERVER_FIXTURES = frozenset({"kafka", "redis_server", "broker"})
# Test files that run external tools (none of them starts a server fixture).
EXTERNAL_TOOL_FILES = {
    "tests/deploy/": "helm, promtool, docker-compose, kubernetes-validate",
    "tests/sdks/test_sdk_": "the TypeScript and Java SDKs under node and java",
    "tests/ldpcore/test_fuzz_atheris.py": "an atheris fuzzing run in a subprocess",
}


def is_end_to_end(item: pytest.Item) -> bool:
    """True for a test that starts servers (broker, Redis, a service, a browser) or runs an
    external tool; every other test is a unit test (``-m unit``)."""
    if any(item.get_closest_marker(m) for m in ("integration", "browser")):
        return True
    if SERVER_FIXTURES & set(getattr(item, "fixturenames", ())):
        return True
    rel = Path(str(item.path)).relative_to(Path(__file__).parents[1]).as_posix()
    return any(rel.startswith(prefix) for prefix in EXTERNAL_TOOL_FILES)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if is_end_to_end(item):
            item.add_marker(pytest.mark.e2e)
        elif item.get_closest_marker("slow") is None:
            item.add_marker(pytest.mark.unit)


def pytest_configure(config: pytest.Config) -> None:
    # kafka-python 3 loads its protocol schemas with a deprecated importlib API.
    config.addinivalue_line("filterwarnings", "ignore::DeprecationWarning:kafka.*")
    config.addinivalue_line("filterwarnings",
                            "ignore:.*is deprecated. Use files\\(\\):DeprecationWarning")
    config.addinivalue_line("filterwarnings", "ignore:Using `httpx` with")
