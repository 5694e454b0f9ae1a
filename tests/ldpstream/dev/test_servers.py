"""ldpstream.dev.servers: ports, and the life of a server child process.

The brokers and Redis the fixtures start (tests/conftest.py) exercise the rest on every
end-to-end run; here a Python child stands in for a server."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

import pytest

from ldpstream.dev.servers import (
    ManagedServer,
    ServerError,
    free_port,
    start_broker,
    stop_together,
    wait_port,
)


def test_a_free_port_can_be_bound_and_wait_port_sees_a_listener() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", free_port()))
        s.listen()
        wait_port(s.getsockname()[1], timeout=2)
    with pytest.raises(ServerError, match="nothing listening"):
        wait_port(free_port(), timeout=0.3)


def test_an_unknown_broker_is_refused_by_name(tmp_path: Path) -> None:
    with pytest.raises(ServerError, match="broker must be one of"):
        start_broker("rabbit", tmp_path)


def _listener(tmp_path: Path, code: str | None = None) -> ManagedServer:
    port = free_port()
    code = code or ("import socket, time; s = socket.socket(); "
                    f"s.bind(('127.0.0.1', {port})); s.listen(); time.sleep(120)")
    return ManagedServer("fake", [sys.executable, "-c", code], port, tmp_path,
                         startup_timeout=20, stop_timeout=5)


@pytest.mark.integration  # starts a listening child process
def test_a_managed_server_starts_restarts_on_its_port_and_stops_once(tmp_path: Path) -> None:
    m = _listener(tmp_path).start()
    pid = m.pid
    assert m.bootstrap == f"127.0.0.1:{m.port}" and m.url.startswith("kafka://")
    m.restart()
    assert m.pid != pid
    wait_port(m.port, timeout=2)
    m.kill()
    assert m.pid is None
    m.stop()  # idempotent
    other = _listener(tmp_path).start()
    stop_together([m, other])
    assert other.proc is None


@pytest.mark.integration
def test_a_server_that_dies_at_start_is_an_error_with_its_log(tmp_path: Path) -> None:
    m = _listener(tmp_path, "print('port taken by a ghost'); raise SystemExit(2)")
    with pytest.raises(ServerError, match="fake did not start; log: port taken by a ghost"):
        m.start()
    assert m.proc is None
