"""The worker's HTTP side: ``/metrics`` for Prometheus and ``/healthz`` for liveness.

``/healthz`` answers 200 while the consume loop keeps turning (it ticks at least every
100 ms, idle or not) and 503 once it has been stuck longer than ``stall_after`` seconds:
a hung worker is restarted by its orchestrator instead of holding its partitions.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, make_wsgi_app

__all__ = ["HealthServer"]


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (stdlib name)
        pass


class _ThreadingWSGIServer(WSGIServer):
    daemon_threads = True


class HealthServer:
    """Serve ``/metrics`` and ``/healthz`` on ``host:port`` from a daemon thread."""

    def __init__(self, registry: CollectorRegistry, last_tick: Callable[[], float], *,
                 host: str, port: int, stall_after: float) -> None:
        self._metrics = make_wsgi_app(registry)
        self._last_tick = last_tick
        self.stall_after = stall_after
        self._server = make_server(host, port, self._app, server_class=_ThreadingWSGIServer,
                                   handler_class=_Quiet)
        self.port = int(self._server.server_port)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True,
                                        name="ldp-health")

    def _app(self, environ: dict[str, Any], start: Callable[..., Any]) -> Iterable[bytes]:
        if environ.get("PATH_INFO") == "/healthz":
            age = time.monotonic() - self._last_tick()
            ok = age <= self.stall_after
            body = (f'{{"status": "{"ok" if ok else "stalled"}", '
                    f'"loop_age_seconds": {age:.3f}}}').encode()
            start("200 OK" if ok else "503 Service Unavailable",
                  [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
            return [body]
        return self._metrics(environ, start)  # type: ignore[no-any-return]

    def start(self) -> HealthServer:
        self._thread.start()
        return self

    def shutdown(self) -> None:
        self._server.shutdown()
        self._server.server_close()
