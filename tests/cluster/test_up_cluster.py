"""``ldpstream up --cluster``: the replicated system from one command, stopped by Ctrl-C."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from ldpstream.dev.servers import _die_with_parent

# a cluster's start (1–2 min here) counts within the first test's time: room for a
# machine several times slower
pytestmark = [pytest.mark.integration, pytest.mark.timeout(1800)]
ROOT = Path(__file__).resolve().parents[2]


def _descendants(pid: int) -> set[int]:
    out = subprocess.run(["ps", "-e", "-o", "pid=,ppid="], capture_output=True, text=True)
    kids: dict[int, list[int]] = {}
    for line in out.stdout.splitlines():
        p, pp = (int(x) for x in line.split())
        kids.setdefault(pp, []).append(p)
    seen, todo = set(), [pid]
    while todo:
        for k in kids.get(todo.pop(), []):
            if k not in seen:
                seen.add(k)
                todo.append(k)
    return seen


def test_up_cluster_starts_three_brokers_sentinels_and_two_of_each_service(
        tmp_path: Path) -> None:
    log = tmp_path / "up.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "ldpstream", "up", "--cluster", "--rate", "50",
             "--data-dir", str(tmp_path / "data")], cwd=ROOT, stdout=out,
            stderr=subprocess.STDOUT, preexec_fn=_die_with_parent)
    try:
        deadline = time.monotonic() + 400
        text = ""
        while time.monotonic() < deadline and "Ctrl-C stops everything" not in text:
            assert proc.poll() is None, log.read_text()
            time.sleep(1.0)
            text = log.read_text()
        assert "Ctrl-C stops everything" in text, text
        assert "3 KRaft brokers" in text and "Sentinels" in text
        assert "Up in" in text and "resident memory" in text
        apis = [w for line in text.splitlines() if line.strip().startswith("api-")
                for w in line.split() if w.startswith("http://")]
        gws = [w for line in text.splitlines() if line.strip().startswith("gateway-")
               for w in line.split() if w.startswith("http://")]
        workers = [line for line in text.splitlines() if line.strip().startswith("worker-")]
        assert len(apis) == 2 and len(gws) == 2 and len(workers) == 2, text
        # the demo devices' reports become visible through both API replicas
        deadline = time.monotonic() + 120
        counted = [0, 0]
        while time.monotonic() < deadline and not all(counted):
            for i, api in enumerate(apis):
                try:
                    with urllib.request.urlopen(
                            f"{api}/v1/collections/adult-race/frequencies", timeout=5) as r:
                        counted[i] = int(json.loads(r.read())["n"])
                except (OSError, ValueError, KeyError):
                    pass
            time.sleep(1.0)
        assert all(counted), (counted, text)
        family = _descendants(proc.pid)
        assert len(family) >= 3 + 2 + 3 + 6  # brokers, Redis, Sentinels, services (+ devices)
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(120)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
    assert proc.returncode == 0, log.read_text()[-3000:]
    time.sleep(1.0)
    alive = [p for p in family if Path(f"/proc/{p}").exists()
             and "zombie" not in Path(f"/proc/{p}/status").read_text().lower()]
    assert not alive, f"left running after Ctrl-C: {alive}"
