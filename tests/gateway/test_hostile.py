"""The gateway against hostile clients (issue #26), on one keyed gateway with short deadlines:
slow senders timed out while devices are served, the key checked before the body and a
bounded total of buffered bodies, head and target limits, the HTTP corners, key guessing
throttled per address, and unknown collection ids answered 404 at any rate.

Clients on other loopback addresses (127.0.0.2, …) stand for other machines: the throttle of
failed keys is per client address.
"""

from __future__ import annotations

import asyncio
import functools
import re
import socket
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from gateway.bench import Dripper
from ldpcore.collection import encode_message
from ldpstream.storage import CollectionCatalogue

from .conftest import SPECS, GatewayProcess, gateway_env, post, running_gateway

pytestmark = [pytest.mark.integration, pytest.mark.any_broker]

KEY = "the-fleet-key-0123456789"
GRR = SPECS[0]
HEAD_TIMEOUT = 2.0
BODY_GRACE = 2.0
BUDGET = 8 << 20
SLACK = 3.0  # the sweep period (0.5 s) and a loaded 2-core machine


@functools.cache
def message(n: int = 1, seed: int = 0) -> bytes:
    rng = np.random.default_rng(seed)
    return encode_message(GRR, GRR.oracle().perturb(rng.integers(0, 64, n), rng=rng))


def request(body: bytes, *, key: str | None = KEY, target: str = "/v1/reports",
            method: str = "POST", extra: str = "", host: bool = True) -> bytes:
    head = f"{method} {target} HTTP/1.1\r\n" + ("Host: gw\r\n" if host else "")
    if key is not None:
        head += f"Authorization: Bearer {key}\r\n"
    if method in ("POST", "PUT"):
        head += f"Content-Type: application/octet-stream\r\nContent-Length: {len(body)}\r\n"
    return (head + extra + "\r\n").encode() + body


async def read_response(reader: asyncio.StreamReader, head_only: bool = False
                        ) -> tuple[int, dict[str, str], bytes]:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip()
               for k, _, v in (ln.partition(":") for ln in lines[1:] if ln)}
    n = 0 if head_only else int(headers.get("content-length", "0"))
    return int(lines[0].split()[1]), headers, await reader.readexactly(n)


async def connect(port: int, source: str = "127.0.0.1"
                  ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection("127.0.0.1", port, local_addr=(source, 0))


def metric(port: int, name: str) -> float:
    _, _, text = post(port, b"", method="GET", path="/metrics")
    total = 0.0
    for line in text.decode().splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            total += float(line.rsplit(" ", 1)[1])
    return total


def rss_mb(gw: GatewayProcess) -> float:
    assert gw.proc is not None
    for line in Path(f"/proc/{gw.proc.pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


class Device:
    """A legitimate device posting one report per request on a keep-alive connection at a
    steady rate; keeps every status and latency."""

    def __init__(self, port: int, rate: float, source: str = "127.0.0.1") -> None:
        self.port, self.rate, self.source = port, rate, source
        self.statuses: list[int] = []
        self.latencies: list[float] = []
        self.stop = False

    async def run(self) -> None:
        reader, writer = await connect(self.port, self.source)
        req = request(message())
        try:
            while not self.stop:
                t0 = time.perf_counter()
                writer.write(req)
                status, _, _ = await asyncio.wait_for(read_response(reader), 30)
                self.latencies.append(time.perf_counter() - t0)
                self.statuses.append(status)
                await asyncio.sleep(max(0.0, 1 / self.rate - (time.perf_counter() - t0)))
        finally:
            writer.close()

    def p99_ms(self) -> float:
        return float(np.percentile(np.asarray(self.latencies) * 1000, 99))


@pytest.fixture(scope="module")
def gw(kafka: Any, redis_server: Any, names: dict[str, str],
       tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    with running_gateway(
            kafka, redis_server, names, SPECS, tmp_path_factory.mktemp("gwh") / "gateway.log",
            LDP_GATEWAY_KEYS=f"fleet:{KEY}", LDP_GATEWAY_HEAD_TIMEOUT=str(HEAD_TIMEOUT),
            LDP_GATEWAY_BODY_GRACE=str(BODY_GRACE), LDP_GATEWAY_BODY_MIN_RATE="1024",
            LDP_GATEWAY_BODY_BUDGET=str(BUDGET)) as proc:
        yield proc


# ---- 1. slow senders -----------------------------------------------------------------------

def test_slow_senders_are_closed_by_the_deadlines_while_devices_are_served(
        gw: GatewayProcess) -> None:
    """1,000 sockets: 850 drip a head (a byte a second), 100 open and send nothing, 50
    drip a body of a declared 1 MB; all are closed within the deadline (408 for the ones
    that sent something) while a device posts 20 requests a second, and a keep-alive
    connection idle for longer than the head deadline stays open."""

    async def main() -> tuple[list[Dripper], Device, bool, int]:
        loop = asyncio.get_running_loop()
        device = Device(gw.port, rate=20)
        task = loop.create_task(device.run())
        await asyncio.sleep(0.5)
        # keep-alive: a request, then idle past the head deadline, then another request
        idle_r, idle_w = await connect(gw.port)
        idle_w.write(request(message()))
        assert (await read_response(idle_r))[0] == 202
        slow: list[Dripper] = []
        head = b"POST /v1/reports HTTP/1.1\r\nHost: gw\r\nX-Pad: "
        body_head = request(b"", extra="").replace(b"Content-Length: 0",
                                                   b"Content-Length: 1000000")
        for i in range(1000):
            opening, every = ((b"", 3600.0) if i % 10 == 0 else
                              (body_head, 0.5) if i % 20 == 1 else (head, 1.0))
            proto = Dripper(opening, every)  # no opening: sends nothing at all
            await loop.create_connection(lambda p=proto: p, "127.0.0.1", gw.port)
            slow.append(proto)
        deadline = time.monotonic() + HEAD_TIMEOUT + BODY_GRACE + 2 * SLACK
        while any(not p.closed for p in slow) and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
        still_open = sum(1 for p in slow if not p.closed)
        idle_w.write(request(message()))
        try:
            idle_ok = (await asyncio.wait_for(read_response(idle_r), 10))[0] == 202
        except (asyncio.IncompleteReadError, ConnectionError):
            idle_ok = False
        idle_w.close()
        await asyncio.sleep(1.0)  # the device goes on after the slow ones are gone
        device.stop = True
        await task
        for p in slow:
            if p.transport is not None and not p.closed:
                p.transport.abort()
        return slow, device, idle_ok, still_open

    slow, device, idle_ok, still_open = asyncio.run(main())
    assert still_open == 0, f"{still_open} of 1000 slow sockets still open"
    heads = [p for i, p in enumerate(slow) if i % 10 and i % 20 != 1]
    bodies = [p for i, p in enumerate(slow) if i % 20 == 1]
    silent = [p for i, p in enumerate(slow) if i % 10 == 0]
    # every one closed within its deadline (head: from the connection; body: the grace
    # after the head, at 1 KB/s), give or take the sweep and a loaded machine
    assert max(p.closed - p.opened for p in heads + silent) < HEAD_TIMEOUT + SLACK
    assert max(p.closed - p.opened for p in bodies) < BODY_GRACE + SLACK
    assert all(p.answer.startswith(b"HTTP/1.1 408 ") for p in heads + bodies)
    assert all(p.answer == b"" for p in silent)      # never said anything: closed quietly
    assert idle_ok, "an idle keep-alive connection was closed by the head deadline"
    assert set(device.statuses) == {202} and len(device.statuses) > 50
    p99 = device.p99_ms()
    print(f"\nslow senders: 1000 closed, heads after at most "
          f"{max(p.closed - p.opened for p in heads + silent):.2f} s (deadline {HEAD_TIMEOUT:g}"
          f" s), bodies after at most {max(p.closed - p.opened for p in bodies):.2f} s (grace "
          f"{BODY_GRACE:g} s); device: {len(device.statuses)} requests, all 202, p99 "
          f"{p99:.1f} ms")
    assert p99 < 1000, p99


# ---- 2. the key before the body; the total of buffered bodies ------------------------------

def test_a_wrong_key_is_refused_before_the_body_and_costs_no_memory(gw: GatewayProcess) -> None:
    body_len = (4 << 20) - 1

    async def main() -> list[int]:
        # Expect: 100-continue with a wrong key: the refusal comes instead of the 100
        r, w = await connect(gw.port, "127.0.0.5")
        w.write(request(b"", key="wrong").replace(
            b"Content-Length: 0", b"Content-Length: %d\r\nExpect: 100-continue" % body_len))
        status, headers, _ = await asyncio.wait_for(read_response(r), 10)
        assert status == 403 and headers.get("connection") == "close"
        w.close()
        # 25 connections with a wrong key, each sending 4 MiB - 1 bytes of a declared 4 MiB
        # and stalling
        statuses = []
        conns = []
        for i in range(25):
            r, w = await connect(gw.port, f"127.0.0.{10 + i}")
            w.write(request(b"", key=f"wrong-{i}").replace(
                b"Content-Length: 0", b"Content-Length: %d" % (body_len + 1)))
            conns.append((r, w))
        for r, w in conns:   # the body follows at once, and the client stalls
            w.write(b"x" * body_len)
        answers = await asyncio.wait_for(
            asyncio.gather(*(read_response(r) for r, _ in conns)), 20)
        statuses += [status for status, _, _ in answers]
        await asyncio.sleep(1.0)
        held.append(rss_mb(gw) - before)   # while they stall
        for _, w in conns:
            w.close()
        return statuses

    held: list[float] = []
    before = rss_mb(gw)
    statuses = asyncio.run(main())
    assert statuses == [403] * 25
    assert held[0] < 20, held
    grew = rss_mb(gw) - before
    print(f"\n25 wrong keys x 4 MiB: the gateway's memory grew by {grew:.1f} MB")
    assert grew < 20, grew
    assert post(gw.port, message(), headers={"Authorization": f"Bearer {KEY}"})[0] == 202


def test_buffered_bodies_have_a_total_budget_answered_503_and_memory_returns(
        gw: GatewayProcess) -> None:
    """Slow valid bodies hold at most the budget (8 MiB here): a body that would pass it
    gets 503 with Retry-After (before its body if its length says so), smaller requests
    go on, and the memory is given back when the slow ones are gone."""
    part = 3 << 20
    declared = b"Content-Length: %d" % (4 << 20)

    async def hold(w: asyncio.StreamWriter, stop: asyncio.Event) -> None:
        while not stop.is_set():   # 4 KB/s: above the minimum rate, far from the end
            w.write(b"y" * 2048)
            await asyncio.sleep(0.5)

    async def main() -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        out: dict[str, Any] = {}
        holders = []
        for _ in range(2):
            r, w = await connect(gw.port)
            w.write(request(b"").replace(b"Content-Length: 0", declared) + b"y" * part)
            await w.drain()
            holders.append((r, w, loop.create_task(hold(w, stop))))
        await asyncio.sleep(0.5)
        out["held"] = metric(gw.port, "ldp_gateway_body_buffered_bytes")
        # a third slow body passes the budget on its way: 503 and closed
        r, w = await connect(gw.port)
        w.write(request(b"").replace(b"Content-Length: 0", declared))
        try:
            w.write(b"y" * part)
            await w.drain()
        except ConnectionError:
            pass
        out["third"] = (await asyncio.wait_for(read_response(r), 10))[:2]
        w.close()
        # a request whose length does not fit: 503 before its body is sent
        r, w = await connect(gw.port)
        w.write(request(b"").replace(b"Content-Length: 0", b"Content-Length: %d" % part))
        out["declared"] = (await asyncio.wait_for(read_response(r), 10))[:2]
        w.close()
        # a device's small request fits
        out["small"] = await post_async(gw.port, "127.0.0.1")
        stop.set()
        for r, w, task in holders:
            await task
            w.close()
        await asyncio.sleep(0.5)
        out["after"] = metric(gw.port, "ldp_gateway_body_buffered_bytes")
        return out

    before = rss_mb(gw)
    out = asyncio.run(main())
    assert 2 * part <= out["held"] <= BUDGET, out["held"]
    for case in ("third", "declared"):
        status, headers = out[case]
        assert (status, headers.get("retry-after")) == (503, "1"), (case, status, headers)
    assert out["small"] == 202
    assert out["after"] == 0
    assert metric(gw.port, "ldp_gateway_body_budget_bytes") == BUDGET
    assert post(gw.port, message(), headers={"Authorization": f"Bearer {KEY}"})[0] == 202
    left = rss_mb(gw) - before
    print(f"\nbody budget: {out['held'] / 2**20:.1f} MiB held; memory after: {left:+.1f} MB")
    assert left < 8, left


# ---- 3. head and target limits ------------------------------------------------------------

def test_huge_heads_many_headers_and_long_targets_get_431_and_414_at_once(
        gw: GatewayProcess) -> None:
    async def send_and_answer(raw_head: bytes, total: int, filler: bytes
                              ) -> tuple[int, float]:
        r, w = await connect(gw.port)
        t0 = time.monotonic()
        w.write(raw_head)

        async def pour() -> None:
            sent = len(raw_head)
            try:
                while sent < total:
                    w.write(filler)
                    sent += len(filler)
                    await w.drain()
            except ConnectionError:
                pass
        pouring = asyncio.get_running_loop().create_task(pour())
        status, headers, _ = await asyncio.wait_for(read_response(r), 20)
        took = time.monotonic() - t0
        pouring.cancel()
        w.close()
        assert headers.get("connection") == "close"
        return status, took

    async def healthz_ms() -> float:
        r, w = await connect(gw.port)
        t0 = time.perf_counter()
        w.write(b"GET /healthz HTTP/1.1\r\nHost: gw\r\n\r\n")
        await read_response(r)
        w.close()
        return (time.perf_counter() - t0) * 1000

    async def main() -> None:
        mb32 = 32 << 20
        status, took = await send_and_answer(b"POST /v1/reports HTTP/1.1\r\nHost: gw\r\nX-Big: ",
                                             mb32, b"b" * 65536)
        assert status == 431 and took < 5, (status, took)
        status, _ = await send_and_answer(
            b"POST /v1/reports HTTP/1.1\r\nHost: gw\r\n", 10_000 * 12, b"X-H: 12345\r\n" * 100)
        assert status == 431
        status, _ = await send_and_answer(b"GET /v1/reports?q=", mb32, b"q" * 65536)
        assert status == 414
        # and all the while the gateway answers at once
        assert max([await healthz_ms() for _ in range(5)]) < 500

    asyncio.run(main())
    assert metric(gw.port, 'ldp_gateway_rejected_total{reason="head_too_large"}') >= 1


# ---- 4. HTTP corners -----------------------------------------------------------------------

def test_head_absolute_form_missing_host_and_a_true_allow(gw: GatewayProcess) -> None:
    async def main() -> None:
        r, w = await connect(gw.port)
        # HEAD answers carry no body: the pipelined GET after them must parse cleanly
        w.write(b"HEAD /healthz HTTP/1.1\r\nHost: gw\r\n\r\n"
                b"HEAD /v1/reports HTTP/1.1\r\nHost: gw\r\n\r\n"
                b"HEAD /nowhere HTTP/1.1\r\nHost: gw\r\n\r\n"
                b"GET /healthz HTTP/1.1\r\nHost: gw\r\n\r\n")
        s1, h1, _ = await read_response(r, head_only=True)
        s2, h2, _ = await read_response(r, head_only=True)
        s3, _, _ = await read_response(r, head_only=True)
        s4, _, b4 = await asyncio.wait_for(read_response(r), 5)
        assert (s1, s2, s3, s4, b4) == (200, 405, 404, 200, b'{"status":"ok"}')
        assert h2["allow"] == "POST, OPTIONS"
        # absolute-form target (RFC 9112 §3.2.2)
        w.write(request(message(), target=f"http://127.0.0.1:{gw.port}/v1/reports"))
        assert (await read_response(r))[0] == 202
        w.write(request(b"", method="GET", key=None, target="HTTP://gw/healthz?x=1"))
        assert (await read_response(r))[0] == 200
        # a true Allow per route
        for target, allow in (("/healthz", "GET, HEAD"), ("/metrics", "GET, HEAD"),
                              ("/readyz", "GET, HEAD"), ("/v1/reports", "POST, OPTIONS")):
            w.write(request(b"x", method="PUT", target=target))
            status, headers, _ = await read_response(r)
            assert (status, headers.get("allow")) == (405, allow), target
        w.close()
        # HTTP/1.1 without Host: 400 (and the connection closes)
        r, w = await connect(gw.port)
        w.write(request(message(), host=False))
        status, _, body = await asyncio.wait_for(read_response(r), 5)
        assert status == 400 and b"missing_host" in body
        w.close()
        # HTTP/1.0 needs none
        r, w = await connect(gw.port)
        w.write(request(message(), host=False).replace(b"HTTP/1.1", b"HTTP/1.0"))
        assert (await asyncio.wait_for(read_response(r), 5))[0] == 202
        w.close()

    asyncio.run(main())


# ---- 5. key guessing -----------------------------------------------------------------------

def test_failed_keys_are_throttled_per_address_and_valid_keys_are_not_slowed(
        gw: GatewayProcess) -> None:
    guesser = "127.0.0.3"

    async def guess(i: int) -> tuple[int, str | None]:
        r, w = await connect(gw.port, guesser)
        try:
            w.write(request(message(), key=f"guess-{i}"))
            status, headers, _ = await asyncio.wait_for(read_response(r), 10)
            return status, headers.get("retry-after")
        finally:
            w.close()

    async def main() -> tuple[list[tuple[int, str | None]], Device, Device, int, float]:
        loop = asyncio.get_running_loop()
        # a device on another machine, and one on the guesser's own, connected before
        other = Device(gw.port, rate=20, source="127.0.0.2")
        same = Device(gw.port, rate=20, source=guesser)
        tasks = [loop.create_task(other.run()), loop.create_task(same.run())]
        await asyncio.sleep(0.5)
        answers: list[tuple[int, str | None]] = []
        t0 = time.monotonic()
        for start in range(0, 4000, 50):
            answers += await asyncio.gather(*(guess(i) for i in range(start, start + 50)))
        took = time.monotonic() - t0
        # a new connection from the guesser's address, even with the right key, waits
        fresh = (await post_async(gw.port, guesser))
        await asyncio.sleep(0.5)
        other.stop = same.stop = True
        await asyncio.gather(*tasks)
        return answers, other, same, fresh, took

    before = metric(gw.port, "ldp_gateway_auth_throttled_total")
    answers, other, same, fresh, took = asyncio.run(main())
    statuses = [s for s, _ in answers]
    assert set(statuses) == {403, 429}, set(statuses)
    # the default burst (20), then the default rate (1 a second)
    assert statuses.count(403) <= 20 + took * 1.0 + 2, (statuses.count(403), took)
    assert all(ra is not None and int(ra) >= 1 for s, ra in answers if s == 429)
    # every throttled answer counted (the guesses' and the fresh connection's)
    assert metric(gw.port, "ldp_gateway_auth_throttled_total") - before == statuses.count(
        429) + 1
    assert fresh == 429
    # valid keys go on: from another address, and on a connection that proved its key
    assert set(other.statuses) == {202} and set(same.statuses) == {202}
    print(f"\nkey guessing: {statuses.count(403)} x 403 then {statuses.count(429)} x 429 in "
          f"{took:.1f} s; "
          f"devices p99 {other.p99_ms():.1f} / {same.p99_ms():.1f} ms")
    assert other.p99_ms() < 1000 and same.p99_ms() < 1000


async def post_async(port: int, source: str) -> int:
    r, w = await connect(port, source)
    try:
        w.write(request(message()))
        return (await asyncio.wait_for(read_response(r), 10))[0]
    finally:
        w.close()


# ---- 6. unknown collection ids -------------------------------------------------------------

def unknown_message(i: int) -> bytes:
    m = message()
    cid = f"unknown-{i:05d}".encode()
    return m[:5] + bytes([len(cid)]) + cid + m[6 + len(GRR.id):]


def redis_calls(url: str, command: str) -> int:
    import redis

    stats = redis.Redis.from_url(url).info("commandstats")
    return int(stats.get(f"cmdstat_{command}", {}).get("calls", 0))


def test_two_thousand_unknown_ids_pipelined_are_all_404_for_a_few_redis_reads(
        gw: GatewayProcess, redis_server: Any) -> None:
    def calls() -> int:
        return sum(redis_calls(redis_server.url, c) for c in ("get", "hget", "hgetall"))

    payloads = [b"".join(request(unknown_message(k * 100 + j)) for j in range(100))
                for k in range(20)]

    async def main() -> list[tuple[int, bytes]]:
        conns = [await connect(gw.port, "127.0.0.4") for _ in range(20)]
        for (_, w), payload in zip(conns, payloads):
            w.write(payload)
        out = []
        for r, w in conns:
            for _ in range(100):
                status, _, body = await asyncio.wait_for(read_response(r), 30)
                out.append((status, body))
            w.close()
        return out

    before = calls()
    t0 = time.monotonic()
    answers = asyncio.run(main())
    took = time.monotonic() - t0
    assert [s for s, _ in answers] == [404] * 2000, sorted({s for s, _ in answers})
    assert all(b'"unknown_collection"' in b for _, b in answers)
    # merged and negatively cached: a few version reads, not one read per id
    reads = calls() - before
    print(f"\n2000 unknown ids: all 404 in {took:.2f} s, {reads} Redis reads")
    assert reads <= 10 + 2 * took / 0.1 + 4 * took, reads


def test_a_catalogue_failure_is_503_and_counted_apart_from_unknown(
        kafka: Any, tmp_path: Path) -> None:
    import redis

    from ldpstream.dev.servers import start_redis

    (tmp_path / "r").mkdir()
    own = start_redis(tmp_path / "r")
    names = {"topic": f"gwf-{uuid.uuid4().hex[:8]}", "prefix": "f:"}
    CollectionCatalogue(redis.Redis.from_url(own.url), "f:").register(GRR)
    gw = GatewayProcess(gateway_env(kafka, own, names), tmp_path / "gw.log").start()
    try:
        status, _, body = post(gw.port, unknown_message(1))
        assert (status, body["reason"]) == (404, "unknown_collection")
        own.stop()
        time.sleep(0.3)
        status, headers, body = post(gw.port, unknown_message(2))
        assert (status, body["reason"], headers.get("retry-after")) == (
            503, "catalogue_unavailable", "1")
        assert post(gw.port, message())[0] == 202       # known collections go on
        _, _, text = post(gw.port, b"", method="GET", path="/metrics")
        errors = re.search(rb"^ldp_gateway_catalogue_errors_total (\S+)", text, re.M)
        assert errors is not None and float(errors.group(1)) >= 1
        assert b'ldp_gateway_rejected_total{reason="catalogue_unavailable"}' in text
        assert b'ldp_gateway_rejected_total{reason="unknown_collection"} 1.0' in text
    finally:
        assert gw.stop() == 0, gw.output()
        own.stop()


# ---- the head parser under fuzz ------------------------------------------------------------

def test_fuzzed_heads_get_an_answer_never_a_5xx_and_the_gateway_lives_on(
        gw: GatewayProcess) -> None:
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    token = st.text(alphabet=st.characters(min_codepoint=33, max_codepoint=126,
                                           exclude_characters=":"), min_size=1, max_size=20)
    header = st.tuples(token, st.text(alphabet=st.characters(min_codepoint=32,
                                                             max_codepoint=126), max_size=40))
    heads = st.tuples(
        st.sampled_from(["GET", "HEAD", "POST", "OPTIONS", "PUT", "DELETE", "X"]),
        st.sampled_from(["/v1/reports", "/healthz", "/metrics", "*", "http://h/v1/reports",
                         "/v1/reports?a=b", "/nowhere", "https://h:1/healthz"]),
        st.sampled_from(["HTTP/1.1", "HTTP/1.0"]),
        st.lists(header, max_size=8), st.binary(max_size=64))

    @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
    @given(heads)
    def check(case: tuple[str, str, str, list[tuple[str, str]], bytes]) -> None:
        method, target, version, headers, body = case
        raw = f"{method} {target} {version}\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers)
        raw += f"Host: gw\r\nContent-Length: {len(body)}\r\n\r\n"
        with socket.create_connection(("127.0.0.1", gw.port), timeout=10) as s:
            s.sendall(raw.encode() + body)
            data = s.recv(65536)
        assert data.startswith(b"HTTP/1.1 "), data
        assert data[9:10] in (b"2", b"4"), data[:200]
    check()
    assert post(gw.port, b"", method="GET", path="/healthz")[0] == 200
