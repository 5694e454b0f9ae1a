"""How the integration tests choose their servers (``LDP_TEST_BACKEND`` and friends)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ldpcore.errors import ParameterError
from ldpstream.dev.servers import BROKERS, KAFKA_VERSION, ServerError
from ldpstream.dev.testbackend import (
    BACKENDS,
    TestBackend,
    choose_backend,
    compose_image,
    start_kafka_container,
    start_redis_container,
)

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize(("env", "expected"), [
    ({}, TestBackend("local", ("tansu", "kafka"))),
    ({"LDP_TEST_BACKEND": ""}, TestBackend("local", ("tansu", "kafka"))),
    ({"LDP_TEST_BACKEND": "local"}, TestBackend("local", ("tansu", "kafka"))),
    ({"LDP_TEST_BACKEND": " Containers "}, TestBackend("containers", ("kafka",))),
    ({"LDP_TEST_BROKERS": "tansu"}, TestBackend("local", ("tansu",))),
    ({"LDP_TEST_BROKERS": "kafka, tansu,kafka"}, TestBackend("local", ("kafka", "tansu"))),
    ({"LDP_TEST_BACKEND": "containers", "LDP_TEST_BROKERS": "kafka"},
     TestBackend("containers", ("kafka",))),
    ({"LDP_TEST_KAFKA": "10.1.2.3:9092"}, TestBackend("local", ("external",), "10.1.2.3:9092")),
    ({"LDP_TEST_BACKEND": "containers", "LDP_TEST_REDIS": "redis://h:6379/0"},
     TestBackend("containers", ("kafka",), None, "redis://h:6379/0")),
])
def test_environment_values_choose_the_backend_and_brokers(
        env: dict[str, str], expected: TestBackend) -> None:
    assert choose_backend(env) == expected


def test_default_is_the_first_backend_and_every_local_broker() -> None:
    assert BACKENDS[0] == "local" and choose_backend({}).brokers == BROKERS


def test_only_the_local_backend_lets_tests_restart_their_servers() -> None:
    assert choose_backend({}).restartable
    assert not choose_backend({"LDP_TEST_BACKEND": "containers"}).restartable


@pytest.mark.parametrize("value", ["docker", "k8s", "tansu", "containers,local"])
def test_unknown_backend_names_the_variable_and_the_allowed_values(value: str) -> None:
    with pytest.raises(ParameterError) as err:
        choose_backend({"LDP_TEST_BACKEND": value})
    msg = str(err.value)
    assert "LDP_TEST_BACKEND" in msg and "'local'" in msg and "'containers'" in msg
    assert repr(value) in msg


@pytest.mark.parametrize("value", ["redpanda", "tansu,zookeeper", ",", "apache"])
def test_unknown_broker_names_the_variable_and_the_allowed_values(value: str) -> None:
    with pytest.raises(ParameterError, match=r"LDP_TEST_BROKERS .*'tansu', 'kafka'"):
        choose_backend({"LDP_TEST_BROKERS": value})


def test_containers_have_no_tansu() -> None:
    with pytest.raises(ParameterError, match="LDP_TEST_BROKERS.*LDP_TEST_BACKEND=containers"):
        choose_backend({"LDP_TEST_BACKEND": "containers", "LDP_TEST_BROKERS": "tansu"})


def test_one_kafka_version_in_compose_pom_and_launcher() -> None:
    assert compose_image("kafka") == f"apache/kafka:{KAFKA_VERSION}"
    pom = (ROOT / "deploy" / "kafka-broker" / "pom.xml").read_text()
    assert re.findall(r"<kafka\.version>([^<]+)</kafka\.version>", pom) == [KAFKA_VERSION]
    assert re.fullmatch(r"redis:\d+\.\d+\.\d+(-alpine)?", compose_image("redis"))


def test_compose_image_of_an_unknown_service_is_an_error() -> None:
    with pytest.raises(ServerError, match="no image for service 'zookeeper'"):
        compose_image("zookeeper")


@pytest.mark.parametrize("start", [start_kafka_container, start_redis_container])
def test_containers_without_a_docker_engine_fail_saying_what_is_missing(
        start: object, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    pytest.importorskip("testcontainers")
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path / 'no-docker.sock'}")
    with pytest.raises(ServerError, match="LDP_TEST_BACKEND=containers needs a reachable Docker"):
        start(timeout=5)  # type: ignore[operator]
