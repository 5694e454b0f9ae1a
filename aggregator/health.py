"""The worker's HTTP side: ``/metrics`` for Prometheus and ``/healthz`` for liveness.

The Faust engine serves both pages from Faust's own web server
(:mod:`aggregator.drivers.faust`, with :func:`health_status` and
:func:`metrics_page`); the direct aiokafka engine from :class:`HealthServer`.

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

__all__ = ["HealthServer", "health_status", "metrics_page"]


def health_status(last_tick: float, stall_after: float) -> tuple[int, bytes]:
    """HTTP status and JSON body of ``/healthz`` for a loop that last turned at ``last_tick``.

    >>> health_status(time.monotonic(), 5.0)[0]
    200
    >>> health_status(time.monotonic() - 9.0, 5.0)[0]
    503
    """
    age = time.monotonic() - last_tick
    ok = age <= stall_after
    body = (f'{{"status": "{"ok" if ok else "stalled"}", '
            f'"loop_age_seconds": {age:.3f}}}').encode()
    return (200 if ok else 503), body


def metrics_page(registry: CollectorRegistry) -> tuple[bytes, str]:
    """Prometheus text exposition of ``registry`` and its Content-Type."""
    from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

    return generate_latest(registry), CONTENT_TYPE_LATEST


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
            code, body = health_status(self._last_tick(), self.stall_after)
            start("200 OK" if code == 200 else "503 Service Unavailable",
                  [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
            return [body]
        return self._metrics(environ, start)  # type: ignore[no-any-return]

    def start(self) -> HealthServer:
        self._thread.start()
        return self

    def shutdown(self) -> None:
        self._server.shutdown()
        self._server.server_close()
