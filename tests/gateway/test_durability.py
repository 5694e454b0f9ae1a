"""kill -9 under load loses no acknowledged report; overload and a stalled broker get 429/503
with Retry-After, with bounded memory, and the gateway recovers when the broker does."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ldpcore import Reports
from ldpcore.collection import encode_message
from ldpstream.storage import CollectionCatalogue, load_state

from ..integration.helpers import WorkerProcess, wait_for, worker_env
from .conftest import SPECS, GatewayProcess, gateway_env, post

pytestmark = pytest.mark.integration

SPEC = SPECS[0]  # GRR over 64 values: a report is its value, so counts bound every subset


def _request(port: int, body: bytes, ctype: str) -> bytes:
    return (b"POST /v1/reports HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: %s\r\n"
            b"Content-Length: %d\r\n\r\n" % (port, ctype.encode(), len(body))) + body


async def _exchange(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                    request: bytes) -> tuple[int, dict[str, str], bytes]:
    writer.write(request)
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:] if ln)}
    body = await reader.readexactly(int(headers.get("content-length", "0")))
    return int(lines[0].split()[1]), headers, body


class Load(threading.Thread):
    """Posts GRR reports from ``connections`` keep-alive connections until stopped or the
    gateway dies; keeps every sent batch and every acknowledged one."""

    def __init__(self, port: int, connections: int, seed: int) -> None:
        super().__init__(daemon=True)
        self.port, self.connections = port, connections
        self.rng = np.random.default_rng(seed)
        self.oracle = SPEC.oracle()
        self.sent: list[Reports] = []
        self.acked: list[Reports] = []
        self.statuses: dict[int, int] = {}
        self.stop = False

    def run(self) -> None:
        asyncio.run(self._main())

    async def _main(self) -> None:
        await asyncio.gather(*(self._conn(i) for i in range(self.connections)),
                             return_exceptions=True)

    async def _conn(self, i: int) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", self.port)
        k = 0
        try:
            while not self.stop:
                k += 1
                batches = [self.oracle.perturb(self.rng.integers(0, 64, int(n)), rng=self.rng)
                           for n in self.rng.integers(1, 40, 1 + (k % 3))]
                msgs = [encode_message(SPEC, b) for b in batches]
                if len(msgs) == 1:
                    req = _request(self.port, msgs[0], "application/octet-stream")
                else:
                    req = _request(self.port, b"".join(len(m).to_bytes(4, "little") + m
                                                       for m in msgs),
                                   "application/x-ldp-frames")
                self.sent += batches
                status, _, _ = await _exchange(reader, writer, req)
                self.statuses[status] = self.statuses.get(status, 0) + 1
                if status == 202:
                    self.acked += batches
        finally:
            writer.close()


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["kill-9", "sigterm"])
def test_kill_9_under_load_loses_no_acknowledged_report(
        kafka: Any, redis_server: Any, redis_client: Any, ldp_names: dict[str, str],
        tmp_path: Path, sig: int) -> None:
    """SIGKILL: nothing answered 202 is lost.  SIGTERM: the same, and the gateway answers
    what it holds (503 to requests that come meanwhile) and exits 0."""
    CollectionCatalogue(redis_client, ldp_names["prefix"]).register(SPEC)
    worker = WorkerProcess(worker_env(kafka, redis_server, ldp_names, LDP_ENGINE="aiokafka"),
                           tmp_path / "worker.log").start()
    gw = GatewayProcess(gateway_env(kafka, redis_server, ldp_names), tmp_path / "gw.log").start()
    load = Load(gw.port, connections=12, seed=3)
    try:
        load.start()
        wait_for(lambda: len(load.acked) >= 3000, 30, "3000 acknowledged batches")
        if sig == signal.SIGKILL:
            gw.kill9()                  # in the middle of batches, answers and produce calls
        else:
            assert gw.stop() == 0, gw.output()
        load.join(30)
        assert not load.is_alive()
        o = SPEC.oracle()
        acked = o.aggregate(Reports.concat(load.acked))
        sent = o.aggregate(Reports.concat(load.sent))
        assert sent.n > acked.n         # some requests were in flight when it died
        prefix = ldp_names["prefix"]
        wait_for(lambda: load_state(redis_client, SPEC, prefix=prefix).n >= acked.n, 60,
                 f"the {acked.n} acknowledged reports counted")
        time.sleep(1.0)  # whatever else reached the broker is counted now too
        counted = load_state(redis_client, SPEC, prefix=prefix)
        # Every acknowledged report is counted, nothing is counted that was not sent.
        assert (acked.counts <= counted.counts).all()
        assert (counted.counts <= sent.counts).all()
        assert acked.n <= counted.n <= sent.n
        assert set(load.statuses) <= ({202} if sig == signal.SIGKILL else {202, 503})
    finally:
        load.stop = True
        worker.stop()


@pytest.mark.usefixtures("local_backend")
def test_overload_gets_429_a_stalled_broker_503_with_retry_after_and_memory_stays_bounded(
        redis_server: Any, redis_client: Any, tmp_path: Path) -> None:
    from ldpstream.dev.servers import start_broker

    names = {"topic": f"gw-{uuid.uuid4().hex[:8]}", "prefix": f"o{uuid.uuid4().hex[:8]}:"}
    CollectionCatalogue(redis_client, names["prefix"]).register(SPEC)
    (tmp_path / "k").mkdir()
    broker = start_broker("tansu", tmp_path / "k")    # our own, to stall it with SIGSTOP
    env = gateway_env(broker, redis_server, names, LDP_GATEWAY_QUEUE_BYTES=str(256 << 10),
                      LDP_GATEWAY_MAX_BODY=str(64 << 10), LDP_GATEWAY_ACK_TIMEOUT_MS="1500",
                      LDP_GATEWAY_RETRY_AFTER="1")
    gw = GatewayProcess(env, tmp_path / "gw.log").start()
    rng = np.random.default_rng(9)
    o = SPEC.oracle()
    body = encode_message(SPEC, o.perturb(rng.integers(0, 64, 20_000), rng=rng))  # ~40 KB
    assert post(gw.port, body)[0] == 202

    def rss_kb() -> int:
        assert gw.proc is not None
        for line in Path(f"/proc/{gw.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        raise AssertionError("no VmRSS")

    async def flood(seconds: float, connections: int) -> list[tuple[int, dict[str, str]]]:
        out: list[tuple[int, dict[str, str]]] = []
        req = _request(gw.port, body, "application/octet-stream")
        until = time.monotonic() + seconds

        async def conn() -> None:
            reader, writer = await asyncio.open_connection("127.0.0.1", gw.port)
            try:
                while time.monotonic() < until:
                    status, headers, _ = await _exchange(reader, writer, req)
                    out.append((status, headers))
            finally:
                writer.close()
        await asyncio.gather(*(conn() for _ in range(connections)))
        return out

    try:
        assert broker.proc is not None
        rss0 = rss_kb()
        os.kill(broker.proc.pid, signal.SIGSTOP)      # acknowledgements stop coming
        answers = asyncio.run(flood(4.0, 16))
        statuses = [s for s, _ in answers]
        offered = len(answers) * len(body)
        # At most the queue's worth waits (≤ 6 bodies of 40 KB in 256 KB); the rest is refused
        # at once with 429, or with 503 once the stalled batches time out (the broker is then
        # held for down: 503 at once, but for one probe a second).
        assert statuses.count(429) > 500 and offered > 100 << 20, (offered, len(statuses))
        assert 202 not in statuses
        assert set(statuses) <= {429, 503}
        assert all(h.get("retry-after") == "1" for s, h in answers)
        assert rss_kb() - rss0 < 40_000, "the gateway's memory grew with the offered load"
        # The broker is held for down now: 503 at once, Retry-After.
        status, headers, answer = post(gw.port, body)
        assert (status, answer["reason"], headers["retry-after"]) == (503, "unavailable", "1")
        assert post(gw.port, b"", method="GET", path="/readyz")[0] == 503
        os.kill(broker.proc.pid, signal.SIGCONT)
        # After Retry-After a request probes the broker; once one is acknowledged, all pass.
        wait_for(lambda: post(gw.port, body)[0] == 202, 30, "a 202 after the broker is back",
                 interval=0.5)
        assert post(gw.port, body)[0] == 202
        assert post(gw.port, b"", method="GET", path="/readyz")[0] == 200
    finally:
        if broker.proc is not None:
            os.kill(broker.proc.pid, signal.SIGCONT)
        assert gw.stop() == 0, gw.output()
        broker.stop()
