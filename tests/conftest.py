"""Shared pytest configuration.

Real servers for integration tests come from :mod:`ldpstream.dev.servers` (a tansu broker
and a Redis with AOF on free loopback ports, one of each per test session), unless
``LDP_TEST_KAFKA`` (host:port) / ``LDP_TEST_REDIS`` (redis:// URL) name external ones.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest


@dataclass
class ExternalServer:
    """An externally managed server (cannot be restarted by tests)."""

    bootstrap: str
    url: str
    managed: bool = False


@pytest.fixture(scope="session")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    ext = os.environ.get("LDP_TEST_KAFKA")
    if ext:
        yield ExternalServer(ext, f"kafka://{ext}")
        return
    from ldpstream.dev.servers import start_kafka

    server = start_kafka(tmp_path_factory.mktemp("kafka"))
    server.managed = True  # type: ignore[attr-defined]
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    ext = os.environ.get("LDP_TEST_REDIS")
    if ext:
        yield ExternalServer("", ext)
        return
    from ldpstream.dev.servers import start_redis

    server = start_redis(tmp_path_factory.mktemp("redis"))
    server.managed = True  # type: ignore[attr-defined]
    try:
        yield server
    finally:
        server.stop()


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


def pytest_configure(config: pytest.Config) -> None:
    # kafka-python 3 loads its protocol schemas with a deprecated importlib API.
    config.addinivalue_line("filterwarnings", "ignore::DeprecationWarning:kafka.*")
    config.addinivalue_line("filterwarnings",
                            "ignore:.*is deprecated. Use files\\(\\):DeprecationWarning")
    config.addinivalue_line("filterwarnings", "ignore:Using `httpx` with")
