"""Where the integration tests get their Kafka broker and Redis from.

Chosen once per test session from the environment by :func:`choose_backend` (pure):

``LDP_TEST_BACKEND``
    ``local`` (default): the fixtures start child processes with
    :mod:`ldpstream.dev.servers`: the embedded tansu broker, Apache Kafka (a KRaft JVM
    from ``.tools/kafka/libs``) and ``redis-server``.  ``containers``: they start
    ``apache/kafka`` and Redis with testcontainers (needs a Docker engine and the
    ``testcontainers`` package of the ``dev`` extra), at the images
    ``docker-compose.yml`` pins (:func:`compose_image`).
``LDP_TEST_BROKERS``
    With the local backend, the comma-separated brokers the broker-parametrized tests
    run on, among ``tansu`` and ``kafka`` (default both).  The containers backend has
    Apache Kafka only.
``LDP_TEST_KAFKA`` / ``LDP_TEST_REDIS``
    ``host:port`` of an externally managed broker / ``redis://`` URL of an external
    Redis; they override either backend for that server.  Tests run once, on the
    ``external`` broker, and tests that restart a server or need a known broker skip.

Container launchers import testcontainers lazily: nothing needs Docker, or the
package, unless the containers backend is chosen.

>>> choose_backend({}).brokers
('tansu', 'kafka')
>>> choose_backend({"LDP_TEST_BACKEND": "containers"})
TestBackend(backend='containers', brokers=('kafka',), kafka=None, redis=None)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ldpcore.errors import ParameterError

from .servers import BROKERS, LOOPBACK, ServerError, free_port, wait_port

__all__ = ["BACKENDS", "ContainerServer", "TestBackend", "choose_backend", "compose_image",
           "start_kafka_container", "start_redis_container"]

#: Allowed values of ``LDP_TEST_BACKEND``; the first is the default.
BACKENDS = ("local", "containers")

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class TestBackend:
    """The servers of one test session.

    ``backend`` is one of :data:`BACKENDS`; ``brokers`` the broker ids the
    broker-parametrized tests run on (``"tansu"``, ``"kafka"`` or ``"external"``);
    ``kafka`` / ``redis`` the external servers (``None``: the backend starts one).
    """

    __test__ = False  # not a pytest test class

    backend: str
    brokers: tuple[str, ...]
    kafka: str | None = None
    redis: str | None = None

    @property
    def restartable(self) -> bool:
        """Whether tests may start, stop and restart their own broker and Redis."""
        return self.backend == "local"


def choose_backend(env: Mapping[str, str]) -> TestBackend:
    """The test servers named by ``env`` (see the module docstring for the variables).

    Raises ParameterError naming the variable and its allowed values when
    ``LDP_TEST_BACKEND`` or ``LDP_TEST_BROKERS`` holds anything else.

    >>> choose_backend({"LDP_TEST_BROKERS": "kafka"}).brokers
    ('kafka',)
    >>> choose_backend({"LDP_TEST_KAFKA": "10.0.0.5:9092"}).brokers
    ('external',)
    >>> choose_backend({"LDP_TEST_BACKEND": "k8s"})
    Traceback (most recent call last):
    ...
    ldpcore.errors.ParameterError: LDP_TEST_BACKEND must be one of 'local', 'containers'; got 'k8s'
    """
    raw = env.get("LDP_TEST_BACKEND", "").strip()
    backend = raw.lower() or BACKENDS[0]
    if backend not in BACKENDS:
        allowed = ", ".join(repr(b) for b in BACKENDS)
        raise ParameterError(f"LDP_TEST_BACKEND must be one of {allowed}; got {raw!r}")
    kafka = env.get("LDP_TEST_KAFKA", "").strip() or None
    redis = env.get("LDP_TEST_REDIS", "").strip() or None
    raw_brokers = env.get("LDP_TEST_BROKERS", "").strip()
    names = [b.strip().lower() for b in raw_brokers.split(",") if b.strip()]
    allowed = ", ".join(repr(b) for b in BROKERS)
    bad = [b for b in names if b not in BROKERS]
    if bad or (raw_brokers and not names):
        raise ParameterError(f"LDP_TEST_BROKERS must be a comma-separated list of {allowed}; "
                             f"got {raw_brokers!r}")
    if kafka is not None:
        brokers: tuple[str, ...] = ("external",)
    elif backend == "containers":
        if names and names != ["kafka"]:
            raise ParameterError("LDP_TEST_BROKERS can only be 'kafka' with "
                                 f"LDP_TEST_BACKEND=containers; got {raw_brokers!r}")
        brokers = ("kafka",)
    else:
        brokers = tuple(dict.fromkeys(names)) or BROKERS
    return TestBackend(backend, brokers, kafka, redis)


def compose_image(service: str, compose_file: Path | None = None) -> str:
    """The ``image:`` of ``service`` in docker-compose.yml (the one pin of both images).

    >>> compose_image("kafka")
    'apache/kafka:3.9.1'
    """
    import yaml

    path = compose_file or ROOT / "docker-compose.yml"
    services = yaml.safe_load(path.read_text()).get("services", {})
    try:
        image = services[service]["image"]
    except (KeyError, TypeError):
        raise ServerError(f"{path} has no image for service {service!r}") from None
    return str(image)


class ContainerServer:
    """A server in a testcontainers container, with the attributes the fixtures use.

    It cannot be restarted by tests (``managed`` is False); ``stop`` removes the
    container.
    """

    managed = False

    def __init__(self, container: Any, bootstrap: str, url: str, broker: str | None) -> None:
        self.container, self.bootstrap, self.url, self.broker = container, bootstrap, url, broker

    def stop(self) -> None:
        container, self.container = self.container, None
        if container is not None:
            container.stop()


def _docker_container(image: str) -> Any:
    """A testcontainers ``DockerContainer`` (ServerError when the package or Docker is absent)."""
    try:
        from testcontainers.core.container import DockerContainer
    except ImportError:
        raise ServerError("LDP_TEST_BACKEND=containers needs the testcontainers package "
                          "(pip install -e '.[dev]')") from None
    try:
        return DockerContainer(image)
    except Exception as exc:  # docker.errors.DockerException: no engine to talk to
        raise ServerError("LDP_TEST_BACKEND=containers needs a reachable Docker engine "
                          f"(DOCKER_HOST or the local socket): {exc}") from None


def start_kafka_container(image: str | None = None, timeout: float = 120.0) -> ContainerServer:
    """Start ``apache/kafka`` (single-node KRaft) in a container; returns once it answers.

    The broker advertises ``127.0.0.1:<host port>``, so the host port is chosen free
    beforehand and bound explicitly (the Docker engine must run on this host).
    """
    image = image or compose_image("kafka")
    port = free_port()
    container = (
        _docker_container(image)
        .with_bind_ports(9092, port)
        .with_env("KAFKA_NODE_ID", "1")
        .with_env("KAFKA_PROCESS_ROLES", "broker,controller")
        .with_env("KAFKA_LISTENERS", "PLAINTEXT://:9092,CONTROLLER://:9093")
        .with_env("KAFKA_ADVERTISED_LISTENERS", f"PLAINTEXT://{LOOPBACK}:{port}")
        .with_env("KAFKA_CONTROLLER_LISTENER_NAMES", "CONTROLLER")
        .with_env("KAFKA_LISTENER_SECURITY_PROTOCOL_MAP",
                  "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT")
        .with_env("KAFKA_CONTROLLER_QUORUM_VOTERS", "1@localhost:9093")
        .with_env("KAFKA_NUM_PARTITIONS", "4")
        .with_env("KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR", "1")
        .with_env("KAFKA_OFFSETS_TOPIC_NUM_PARTITIONS", "8")
        .with_env("KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR", "1")
        .with_env("KAFKA_TRANSACTION_STATE_LOG_MIN_ISR", "1")
        .with_env("KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS", "0")
        .with_env("KAFKA_MESSAGE_MAX_BYTES", str(16 << 20))
    )
    server = ContainerServer(container, f"{LOOPBACK}:{port}", f"kafka://{LOOPBACK}:{port}",
                             "kafka")
    return _started(server, port, timeout,
                    lambda: _wait_kafka_metadata(server.bootstrap, timeout))


def start_redis_container(image: str | None = None, timeout: float = 60.0) -> ContainerServer:
    """Start Redis (the compose file's image, AOF on) in a container."""
    image = image or compose_image("redis")
    port = free_port()
    container = (_docker_container(image).with_bind_ports(6379, port)
                 .with_command("redis-server --appendonly yes --appendfsync always --save ''"))
    server = ContainerServer(container, "", f"redis://{LOOPBACK}:{port}/0", None)
    return _started(server, port, timeout, lambda: _wait_redis_ping(server.url, timeout))


def _started(server: ContainerServer, port: int, timeout: float,
             ready: Callable[[], None]) -> ContainerServer:
    """Start ``server``'s container and wait until it answers (stopped again on failure)."""
    server.container.start()
    try:
        wait_port(port, timeout)
        ready()
    except Exception:
        server.stop()
        raise
    return server


def _wait_kafka_metadata(bootstrap: str, timeout: float) -> None:
    import time

    from kafka import KafkaAdminClient

    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=5000)
            try:
                if admin.describe_cluster().get("brokers"):
                    return
            finally:
                admin.close()
        except Exception as exc:  # noqa: BLE001 - retried until the deadline
            last = exc
        time.sleep(0.2)
    raise ServerError(f"the Kafka container at {bootstrap} did not answer: {last}")


def _wait_redis_ping(url: str, timeout: float) -> None:
    import time

    import redis

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        client = redis.Redis.from_url(url, socket_timeout=2)
        try:
            if client.ping():
                return
        except redis.exceptions.ConnectionError:
            time.sleep(0.2)
        finally:
            client.close()
    raise ServerError(f"the Redis container at {url} did not answer PING")

