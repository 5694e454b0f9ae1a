"""The worker's /healthz follows its consume loop; /metrics stays Prometheus text."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request

from prometheus_client import CollectorRegistry, Counter

from aggregator.health import HealthServer


def test_healthz_is_ok_while_the_loop_turns_and_503_once_it_stalls() -> None:
    registry = CollectorRegistry()
    Counter("ldp_test_events", "a test counter", registry=registry).inc(3)
    tick = [time.monotonic()]
    server = HealthServer(registry, lambda: tick[0], host="127.0.0.1", port=0,
                          stall_after=0.5).start()
    base = f"http://127.0.0.1:{server.port}"
    try:
        body = json.loads(urllib.request.urlopen(f"{base}/healthz", timeout=5).read())
        assert body["status"] == "ok"
        tick[0] = time.monotonic() - 2.0  # the loop has not turned for 2 s
        try:
            urllib.request.urlopen(f"{base}/healthz", timeout=5)
            raise AssertionError("a stalled loop must answer 503")
        except urllib.error.HTTPError as exc:
            assert exc.code == 503
            assert json.loads(exc.read())["status"] == "stalled"
        metrics = urllib.request.urlopen(f"{base}/metrics", timeout=5).read().decode()
        assert "ldp_test_events_total 3.0" in metrics
    finally:
        server.shutdown()
