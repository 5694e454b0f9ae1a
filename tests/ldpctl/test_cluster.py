"""ldpctl.cluster: one service process's life, and the environment every service gets.

The whole replicated cluster (3 brokers, Sentinels, kill -9 of each part) is exercised in
tests/cluster."""

from __future__ import annotations

import http.server
import sys
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest

from ldpctl.cluster import LocalCluster, Service
from ldpstream.dev.servers import ServerError, free_port


def _sleeper(tmp_path: Path, code: str = "import time; time.sleep(60)", **kw: str) -> Service:
    return Service("sleeper", [sys.executable, "-c", code], {}, tmp_path / "s.log", **kw)


def test_a_service_starts_stops_and_can_be_killed(tmp_path: Path) -> None:
    s = _sleeper(tmp_path).start()
    assert s.alive()
    s.kill9()
    assert not s.alive()
    s.start().stop(timeout=5)
    assert s.proc is None and not s.alive()
    s.stop()  # stopping a stopped service does nothing


def test_wait_ready_says_when_the_process_died_with_its_log(tmp_path: Path) -> None:
    s = _sleeper(tmp_path, "print('bad config LDP_X'); raise SystemExit(3)",
                 ready_url=f"http://127.0.0.1:{free_port()}/healthz").start()
    with pytest.raises(ServerError, match="exited while starting; log: bad config LDP_X"):
        s.wait_ready(timeout=30)


def test_wait_ready_gives_up_after_its_timeout(tmp_path: Path) -> None:
    s = _sleeper(tmp_path, ready_url=f"http://127.0.0.1:{free_port()}/healthz").start()
    try:
        with pytest.raises(ServerError, match="not ready in 1 s"):
            s.wait_ready(timeout=1)
    finally:
        s.stop(timeout=5)


class _Ready(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        self.send_response(200 if self.path == "/healthz" else 503)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def test_is_ready_is_one_look_and_wait_ready_returns_once_the_url_answers_200(
        tmp_path: Path) -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Ready)
    url = f"http://127.0.0.1:{server.server_address[1]}"
    s = _sleeper(tmp_path, ready_url=f"{url}/healthz").start()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        s.wait_ready(timeout=30)
        assert s.is_ready()
        s.ready_url = f"{url}/starting"  # answers 503
        assert not s.is_ready()
    finally:
        server.shutdown()
        server.server_close()
        s.stop(timeout=5)
    assert not s.is_ready()  # nothing listens: refused
    assert _sleeper(tmp_path).is_ready()  # no ready URL: nothing to wait for


def test_services_get_the_clusters_servers_and_settings_over_the_callers(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LDP_TOPIC_PARTITIONS", "99")  # the caller's LDP_ are not passed on
    c = LocalCluster(tmp_path, brokers=1, partitions=4, engine="aiokafka",
                     env={"LDP_REDIS_PREFIX": "p:"})
    with pytest.raises(AssertionError, match="start_servers first"):
        c.service_env()
    c.kafka = SimpleNamespace(bootstrap="127.0.0.1:1")  # type: ignore[assignment]
    c.single_redis = SimpleNamespace(url="redis://127.0.0.1:2/0")  # type: ignore[assignment]
    env = c.service_env()
    assert env["LDP_KAFKA_BOOTSTRAP"] == "127.0.0.1:1"
    assert env["LDP_REDIS_URL"] == "redis://127.0.0.1:2/0"
    assert (env["LDP_TOPIC_PARTITIONS"], env["LDP_TOPIC_REPLICATION"],
            env["LDP_TOPIC_MIN_ISR"]) == ("4", "1", "1")
    assert env["LDP_ENGINE"] == "aiokafka" and env["LDP_REDIS_PREFIX"] == "p:"
