"""Helpers of the integration tests: worker subprocesses, polling with deadlines."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from aggregator.servers import _die_with_parent

__all__ = ["WorkerProcess", "wait_for", "worker_env"]

ROOT = Path(__file__).resolve().parents[2]

ENGINE = "faust"
"""``LDP_ENGINE`` of the workers started by :func:`worker_env` (set by the ``engine`` fixture)."""


def worker_env(kafka: Any, redis_server: Any, names: dict[str, str],
               **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LDP_")}
    env.update({
        "LDP_KAFKA_BOOTSTRAP": kafka.bootstrap,
        "LDP_REDIS_URL": redis_server.url,
        "LDP_REDIS_PREFIX": names["prefix"],
        "LDP_REPORTS_TOPIC": names["topic"],
        "LDP_DLQ_TOPIC": names["dlq"],
        "LDP_CONSUMER_GROUP": names["group"],
        "LDP_FLUSH_INTERVAL_MS": "100",
        "LDP_ENGINE": ENGINE,
        "PYTHONPATH": str(ROOT),
    })
    env.update(extra)
    return env


class WorkerProcess:
    """``python -m aggregator`` as a child process (dies with the test run)."""

    def __init__(self, env: dict[str, str], log: Path) -> None:
        self.env, self.log = env, log
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> WorkerProcess:
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen([sys.executable, "-m", "aggregator"], cwd=ROOT,
                                         env=self.env, stdout=out, stderr=subprocess.STDOUT,
                                         preexec_fn=_die_with_parent)
        return self

    def kill9(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def stop(self, timeout: float = 20.0) -> int | None:
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        return self.proc.returncode

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""


def wait_for(cond: Callable[[], bool], timeout: float, what: str,
             interval: float = 0.1) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
