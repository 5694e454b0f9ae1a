"""``ldpstream bench gateway``: requests/s, reports/s and latency of the HTTP gateway.

Starts the embedded broker (tansu) and a Redis on free loopback ports (or uses
``--bootstrap``/``--redis``), registers one collection, starts the gateway
(``python -m gateway``, one process) and drives it from a load generator in a process
of its own: raw asyncio sockets on uvloop, ``--connections`` keep-alive connections,
each keeping ``--depth`` pipelined requests in flight, every request pre-encoded.  Each
case runs ``--seconds`` after a warm-up; a response's latency runs from writing its
request to reading its answer (so it includes the wait behind the pipelined requests
of its connection: with depth 1 it is the plain round trip).

Cases (``--cases``, comma separated):

* ``single``: one binary message of one report per request (``application/octet-stream``);
* ``batch``: ``application/x-ldp-frames`` of ``--frames`` messages of ``--batch`` reports;
* ``many``: ``application/x-ldp-frames`` of ``--many`` one-report messages (a relay
  forwarding the messages of many devices: the per-message cost);
* ``json``: one JSON message of one report per request;
* ``latency``: ``single`` at depth 1 on 8 connections (the unloaded round trip);
* ``slow``: ``single`` while ``--slow`` (1,000) other connections are slow senders, each
  dripping one byte of a never-ending head every ``--slow-every`` seconds and opening a
  new connection when the gateway closes it (so ``--slow`` of them are always open); the
  case runs at least ``--slow-seconds`` (longer than the head deadline) and also prints
  how many the gateway closed, how many with 408, and how long they lived.
* ``tokens``: ``many``, but as ``application/x-ldp-token-frames``: each one-report message
  with its own Privacy Pass token (the gateway runs with ``LDP_GATEWAY_TOKENS=optional``,
  so the other cases carry none and are unchanged).  Every token is used once, so this
  case sends ``--token-reports`` distinct, pre-made tokens (signed by the bench, which
  publishes its key as the issuer would) and ends when they are all answered; its
  reports/s are token-verified reports/s, and ``per gateway core`` divides them by the
  CPU seconds the gateway used.  Side by side: one gateway per
  ``--token-verifiers`` (``LDP_GATEWAY_TOKEN_VERIFIER``; default ``openssl,auto``, each
  on its own Redis prefix so that both spend the same tokens), in rounds that alternate
  them, then the RSASSA-PSS verification alone per backend in the bench's process;
  ratios to the first.

Prints one row per case (requests/s, reports/s, p50/p99 latency, statuses), the CPU
the gateway and the load generator used (cores), requests per gateway CPU-second (the
figure least skewed by other work on the machine), and the load average before the run.
Every 202 is a report acknowledged by the broker: the gateway answers only then.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["Dripper", "add_bench_gateway_parser", "load", "run_from_args"]

ROOT = Path(__file__).resolve().parents[1]

SPEC = {"id": "bench-gw", "oracle": {"mechanism": "grr", "epsilon": 1.0},
        "domain": {"kind": "integers", "low": 0, "high": 63}}


class _Conn(asyncio.Protocol):
    """One keep-alive connection keeping ``depth`` requests in flight."""

    def __init__(self, request: bytes, depth: int, sink: _Sink) -> None:
        self.request, self.depth, self.sink = request, depth, sink
        self.sent: list[float] = []
        self.head = 0
        self.buf = b""
        self.transport: Any = None

    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        now = time.perf_counter()
        self.sent.extend([now] * self.depth)
        transport.write(self.request * self.depth)

    def data_received(self, data: bytes) -> None:
        buf = self.buf + data if self.buf else data
        pos, n = 0, len(buf)
        now = time.perf_counter()
        done = 0
        sink = self.sink
        while True:
            end = buf.find(b"\r\n\r\n", pos)
            if end < 0:
                break
            cl = buf.find(b"Content-Length: ", pos, end)
            length = int(buf[cl + 16:buf.index(b"\r\n", cl)]) if cl >= 0 else 0
            if end + 4 + length > n:
                break
            status = buf[pos + 9:pos + 12]
            sink.status[status] = sink.status.get(status, 0) + 1
            if sink.recording:
                sink.lat.append(now - self.sent[self.head])
            self.head += 1
            pos = end + 4 + length
            done += 1
        self.buf = buf[pos:]
        if done:
            sink.done += done
            if self.head > 4096:
                del self.sent[:self.head]
                self.head = 0
            if not sink.stopping:
                self.sent.extend([now] * done)
                self.transport.write(self.request * done)

    def connection_lost(self, exc: Exception | None) -> None:
        self.sink.lost += 1


class Dripper(asyncio.Protocol):
    """A slow sender: ``opening``, then one byte every ``every`` seconds until the peer
    closes (a head or a body that never ends); an empty ``opening`` sends nothing at all.
    ``opened``/``closed`` are ``time.monotonic()`` readings, ``answer`` what came back, and
    ``on_close(self)`` runs when the connection is lost.  The bench's slow connections and
    the hostile-client tests (tests/gateway/test_hostile.py) drip with it."""

    def __init__(self, opening: bytes, every: float,
                 on_close: Callable[[Dripper], None] | None = None) -> None:
        self.opening, self.every, self.on_close = opening, every, on_close
        self.opened = self.closed = 0.0
        self.answer = b""
        self.transport: Any = None
        self.timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: Any) -> None:
        self.transport, self.opened = transport, time.monotonic()
        if self.opening:
            transport.write(self.opening)
            self._drip()

    def _drip(self) -> None:
        if not self.transport.is_closing():
            self.transport.write(b"a")
            self.timer = asyncio.get_running_loop().call_later(self.every, self._drip)

    def data_received(self, data: bytes) -> None:
        self.answer += data

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = time.monotonic()
        if self.timer is not None:
            self.timer.cancel()
        if self.on_close is not None:
            self.on_close(self)


#: The head a slow connection of the bench never finishes.
_SLOW_HEAD = b"POST /v1/reports HTTP/1.1\r\nHost: bench\r\nX-Slow: "


class _SlowStats:
    def __init__(self) -> None:
        self.lifetimes: list[float] = []
        self.answered_408 = 0
        self.open = 0
        self.stopping = False
        self.reopen: Any = None

    def closed(self, conn: Dripper) -> None:
        self.open -= 1
        if self.stopping:
            return
        self.lifetimes.append(conn.closed - conn.opened)
        self.answered_408 += conn.answer.startswith(b"HTTP/1.1 408 ")
        if self.reopen is not None:
            self.reopen()


class _Sink:
    def __init__(self) -> None:
        self.status: dict[bytes, int] = {}
        self.lat: list[float] = []
        self.done = 0
        self.lost = 0
        self.recording = False
        self.stopping = False


async def _drive(host: str, port: int, request: bytes, connections: int, depth: int,
                 warmup: float, seconds: float, slow: int = 0,
                 slow_every: float = 1.0) -> dict[str, Any]:
    loop = asyncio.get_running_loop()
    sink = _Sink()
    conns = []
    slow_stats = _SlowStats()
    slow_conns: list[Dripper] = []

    async def open_slow() -> None:
        try:
            _, proto = await loop.create_connection(
                lambda: Dripper(_SLOW_HEAD, slow_every, slow_stats.closed), host, port)
        except OSError:
            return
        slow_stats.open += 1
        slow_conns.append(proto)

    def reopen() -> None:
        loop.create_task(open_slow())
    for i in range(slow):
        await open_slow()
    slow_stats.reopen = reopen
    for _ in range(connections):
        _, proto = await loop.create_connection(lambda: _Conn(request, depth, sink), host, port)
        conns.append(proto)
    await asyncio.sleep(warmup)
    sink.status.clear()
    start_done = sink.done
    sink.recording = True
    cpu0 = time.process_time()
    t0 = time.perf_counter()
    await asyncio.sleep(seconds)
    sink.recording = False
    elapsed = time.perf_counter() - t0
    cpu = time.process_time() - cpu0
    done = sink.done - start_done
    status = {k.decode(): v for k, v in sink.status.items()}
    sink.stopping = True
    slow_stats.stopping = True
    open_slow_now = slow_stats.open
    await asyncio.sleep(0.3)
    for c in conns:
        c.transport.close()
    for s in slow_conns:
        if s.transport is not None and not s.transport.is_closing():
            s.transport.abort()
    lat = np.asarray(sink.lat) * 1000.0
    life = np.asarray(slow_stats.lifetimes)
    slow_figures = {"slow_open_at_end": open_slow_now, "slow_closed": int(life.size),
                    "slow_408": slow_stats.answered_408,
                    "slow_life_p50_s": float(np.percentile(life, 50)) if life.size else None,
                    "slow_life_max_s": float(life.max()) if life.size else None}
    return {"requests": done, "seconds": elapsed, "status": status, "loadgen_cpu": cpu,
            **(slow_figures if slow else {}),
            "p50_ms": float(np.percentile(lat, 50)) if lat.size else float("nan"),
            "p99_ms": float(np.percentile(lat, 99)) if lat.size else float("nan"),
            "lost_connections": sink.lost}


def load(host: str, port: int, request: bytes, connections: int, depth: int, warmup: float,
         seconds: float, slow: int = 0, slow_every: float = 1.0) -> dict[str, Any]:
    """Run the load generator in this process (uvloop if installed); the case's figures."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard and soft < connections + slow + 256:  # every slow sender is a file
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, connections + slow + 256), hard))
    drive = _drive(host, port, request, connections, depth, warmup, seconds, slow, slow_every)
    try:
        import uvloop
        return uvloop.run(drive)
    except ImportError:  # pragma: no cover
        return asyncio.run(drive)


def _load_child(q: Any, *args: Any) -> None:
    q.put(load(*args))


async def _drive_once(host: str, port: int, requests: list[bytes], connections: int,
                      depth: int) -> dict[str, Any]:
    """Send each of ``requests`` once over ``connections`` × ``depth`` pipelined slots."""
    queue = list(reversed(requests))
    statuses: dict[str, int] = {}
    first_errors: dict[str, str] = {}
    lat: list[float] = []
    cpu0 = time.process_time()

    async def conn() -> None:
        reader, writer = await asyncio.open_connection(host, port)
        inflight: list[float] = []
        try:
            while queue or inflight:
                while queue and len(inflight) < depth:
                    writer.write(queue.pop())
                    inflight.append(time.perf_counter())
                head = await reader.readuntil(b"\r\n\r\n")
                cl = head.find(b"Content-Length: ")
                n = int(head[cl + 16:head.index(b"\r\n", cl)]) if cl >= 0 else 0
                body = await reader.readexactly(n) if n else b""
                code = head[9:12].decode()
                if code != "202" and code not in statuses:
                    first_errors[code] = body.decode(errors="replace")[:300]
                statuses[code] = statuses.get(code, 0) + 1
                lat.append(time.perf_counter() - inflight.pop(0))
        finally:
            writer.close()

    t0 = time.perf_counter()
    await asyncio.gather(*(conn() for _ in range(connections)))
    took = time.perf_counter() - t0
    lat.sort()
    return {"requests": len(lat), "seconds": took, "status": statuses, "errors": first_errors,
            "p50_ms": 1000 * lat[len(lat) // 2] if lat else 0.0,
            "p99_ms": 1000 * lat[int(len(lat) * 0.99)] if lat else 0.0,
            "loadgen_cpu": time.process_time() - cpu0}


def _once_child(q: Any, *args: Any) -> None:
    try:
        import uvloop
        q.put(uvloop.run(_drive_once(*args)))
    except ImportError:  # pragma: no cover
        q.put(asyncio.run(_drive_once(*args)))


def _sign_tokens(args: tuple[bytes, bytes, int]) -> list[bytes]:
    """``count`` tokens for the challenge digest under the PEM key (a pool worker)."""
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import padding

    pem, prefix, count = args
    sk: Any = serialization.load_pem_private_key(pem, password=None)
    pad = padding.PSS(mgf=padding.MGF1(hashes.SHA384()), salt_length=48)
    out = []
    for _ in range(count):
        tin = prefix[:2] + os.urandom(32) + prefix[2:]
        out.append(tin + sk.sign(tin, pad, hashes.SHA384()))
    return out


def make_tokens(redis_url: str, prefixes: Sequence[str], spec: Any, count: int) -> list[bytes]:
    """Publish a key of (spec, current window) under each of ``prefixes`` as the issuer
    would, and sign ``count`` tokens for its challenge (what devices would hold after
    issuance)."""
    import redis
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    from ldpstream.privacypass import scheme
    from ldpstream.privacypass.tokens import spki_der, token_key_id

    sk = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    w = scheme.window_of(time.time(), spec.window_seconds)
    rec = scheme.KeyRecord.of(spec.id, w, spec.window_seconds, spki_der(sk.public_key()))
    rds = redis.Redis.from_url(redis_url)
    for prefix in prefixes:
        rds.set(scheme.PPKeys(prefix).public(spec.id, w), rec.to_json(),
                pxat=(rec.end + 86_400) * 1000)
    rds.close()
    digest = scheme.challenge(scheme.DEFAULT_ISSUER_NAME, spec.id, w).digest()
    head = (2).to_bytes(2, "big") + digest + token_key_id(rec.spki)
    pem = sk.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                           serialization.NoEncryption())
    workers = os.cpu_count() or 1
    parts = [count // workers + (i < count % workers) for i in range(workers)]
    with mp.get_context("spawn").Pool(workers) as pool:
        chunks = pool.map(_sign_tokens, [(pem, head, n) for n in parts])
    return [t for c in chunks for t in c]


def http_request(host: str, port: int, body: bytes, content_type: str) -> bytes:
    return (f"POST /v1/reports HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: {content_type}"
            f"\r\nContent-Length: {len(body)}\r\n\r\n").encode() + body


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_from_args(args: argparse.Namespace) -> int:
    from ldpcore.collection import CollectionSpec

    spec = CollectionSpec.from_dict(SPEC)
    rng = np.random.default_rng(args.seed)
    work = Path(tempfile.mkdtemp(prefix="ldp-bench-gw-"))
    servers: list[Any] = []
    gateways = _Gateways(work, spec)
    try:
        bootstrap, redis_url = _start_backends(args, work, servers)
        gateways.configure(bootstrap, redis_url, args.linger_ms)
        prefix = f"benchgw{os.getpid()}:"
        try:
            gw, port = gateways.start(prefix, "auto")
        except RuntimeError as exc:
            print(exc, file=sys.stderr)
            return 1
        host = "127.0.0.1"
        cases = _cases(args, host, port, spec, rng)
        _print_header(args, bootstrap)
        ctx = mp.get_context("spawn")
        results = {}
        for name in [c.strip() for c in args.cases.split(",") if c.strip()]:
            if name == "tokens":
                results[name] = _tokens_case(args, host, redis_url, spec, rng, {
                    v: (gw, port, prefix) if v == "auto" else
                    (*gateways.start(f"{prefix}{v}:", v), f"{prefix}{v}:")
                    for v in _verifiers(args)})
                continue
            results[name] = _run_case(args, ctx, gw.pid, host, port, name, cases[name])
        if args.json:
            Path(args.json).write_text(json.dumps(results, indent=1))
        return 0
    finally:
        gateways.stop()
        for s in reversed(servers):
            s.stop()


def _start_backends(args: argparse.Namespace, work: Path, servers: list[Any]) -> tuple[str, str]:
    """(bootstrap, Redis URL): ``--bootstrap``/``--redis``, or an embedded broker and a
    Redis started under ``work`` (appended to ``servers``, which the caller stops)."""
    from ldpstream.dev.servers import start_broker, start_redis

    bootstrap, redis_url = args.bootstrap, args.redis
    if bootstrap is None:
        (work / "kafka").mkdir()
        k = start_broker(args.broker, work / "kafka")
        servers.append(k)
        bootstrap = k.bootstrap
    if redis_url is None:
        (work / "redis").mkdir()
        r = start_redis(work / "redis")
        servers.append(r)
        redis_url = r.url
    return bootstrap, redis_url


class _Gateways:
    """The gateways under test (``python -m gateway``, one process each), each on a Redis
    prefix where the bench collection is registered; :meth:`stop` ends them all."""

    def __init__(self, work: Path, spec: Any) -> None:
        self.work, self.spec = work, spec
        self.redis_url = ""
        self.env: dict[str, str] = {}
        self.prefixes: list[str] = []
        self.procs: list[subprocess.Popen[bytes]] = []

    def configure(self, bootstrap: str, redis_url: str, linger_ms: float) -> None:
        """The environment of every gateway: the broker, Redis, a topic of this run."""
        self.redis_url = redis_url
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("LDP_")}
        self.env.update({"LDP_KAFKA_BOOTSTRAP": bootstrap, "LDP_REDIS_URL": redis_url,
                         "LDP_REPORTS_TOPIC": f"bench-gw-{os.getpid()}",
                         "LDP_GATEWAY_PORT": "0", "LDP_GATEWAY_LINGER_MS": str(linger_ms),
                         "LDP_GATEWAY_TOKENS": "optional", "PYTHONPATH": str(ROOT)})

    def start(self, prefix: str, verifier: str) -> tuple[subprocess.Popen[bytes], int]:
        """A gateway on ``prefix`` checking tokens with ``verifier`` (and its port);
        RuntimeError with its log if it does not listen within 60 s."""
        import redis

        from ldpstream.storage import CollectionCatalogue

        if prefix not in self.prefixes:
            CollectionCatalogue(redis.Redis.from_url(self.redis_url), prefix).register(self.spec)
            self.prefixes.append(prefix)
        env = dict(self.env, LDP_REDIS_PREFIX=prefix, LDP_GATEWAY_TOKEN_VERIFIER=verifier)
        log_path = self.work / f"gateway-{len(self.procs)}.log"
        log = open(log_path, "wb")  # noqa: SIM115 - the child owns it
        proc = subprocess.Popen([sys.executable, "-m", "gateway"], cwd=ROOT, env=env,
                                stdout=log, stderr=subprocess.STDOUT)
        self.procs.append(proc)
        deadline = time.monotonic() + 60
        mark = "ldpstream gateway: listening on http://"
        while True:
            for line in log_path.read_text(errors="replace").splitlines():
                if line.startswith(mark):
                    return proc, int(line[len(mark):].split()[0].rsplit(":", 1)[1])
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(log_path.read_text(errors="replace"))
            time.sleep(0.05)

    def stop(self) -> None:
        """SIGTERM to all, then wait (20 s each) and kill those still running."""
        for g in self.procs:
            if g.poll() is None:
                g.terminate()
        for g in self.procs:
            try:
                g.wait(20)
            except subprocess.TimeoutExpired:
                g.kill()


def _cases(args: argparse.Namespace, host: str, port: int, spec: Any,
           rng: Any) -> dict[str, tuple[bytes, int, int, int]]:
    """Case name → (pre-encoded request, reports per request, connections, depth)."""
    from ldpcore.message import encode_message, frame

    o = spec.oracle()
    one = encode_message(spec, o.perturb([3], rng=rng))
    frames = frame([encode_message(spec, o.perturb(rng.integers(0, 64, args.batch), rng=rng))
                    for _ in range(args.frames)])
    return {
        "single": (http_request(host, port, one, "application/octet-stream"), 1,
                   args.connections, args.depth),
        "batch": (http_request(host, port, frames, "application/x-ldp-frames"),
                  args.batch * args.frames, args.batch_connections, args.batch_depth),
        "many": (http_request(host, port, frame([
            encode_message(spec, o.perturb([int(v)], rng=rng))
            for v in rng.integers(0, 64, args.many)]), "application/x-ldp-frames"),
            args.many, args.batch_connections, args.batch_depth),
        "json": (http_request(host, port, encode_message(spec, o.perturb([3], rng=rng),
                                                         "json"), "application/json"),
                 1, args.connections, args.depth),
        "latency": (http_request(host, port, one, "application/octet-stream"), 1, 8, 1),
        "slow": (http_request(host, port, one, "application/octet-stream"), 1,
                 args.connections, args.depth),
    }


def _print_header(args: argparse.Namespace, bootstrap: str) -> None:
    print(f"load average before the run: {os.getloadavg()[0]:.2f}, "
          f"{os.getloadavg()[1]:.2f}, {os.getloadavg()[2]:.2f} on {os.cpu_count()} cores; "
          f"broker {'embedded ' + args.broker if args.bootstrap is None else bootstrap}; "
          f"linger {args.linger_ms} ms", flush=True)
    print(f"{'case':<8}{'conns×depth':>12}{'requests/s':>12}{'reports/s':>13}"
          f"{'p50 ms':>9}{'p99 ms':>9}{'gw CPU':>8}{'gen CPU':>8}{'req/CPU-s':>11}"
          "  statuses", flush=True)


def _run_case(args: argparse.Namespace, ctx: Any, gw_pid: int, host: str, port: int,
              name: str, case: tuple[bytes, int, int, int]) -> dict[str, Any]:
    """One case against the gateway ``gw_pid``, its load generator in a process of its
    own; its figures, printed as a row."""
    request, per, conns, depth = case
    q = ctx.Queue()
    cpu0 = _cpu_seconds(gw_pid)
    slow = args.slow if name == "slow" else 0
    seconds = max(args.seconds, args.slow_seconds) if slow else args.seconds
    child = ctx.Process(target=_load_child, args=(q, host, port, request, conns, depth,
                                                  args.warmup, seconds, slow,
                                                  args.slow_every))
    t0 = time.perf_counter()
    child.start()
    res: dict[str, Any] = q.get(timeout=args.warmup + seconds + 120)
    child.join(30)
    gw_cpu = (_cpu_seconds(gw_pid) - cpu0) / (time.perf_counter() - t0)
    rps = res["requests"] / res["seconds"]
    res.update(name=name, rps=rps, reports_per_s=rps * per, gateway_cpu=gw_cpu,
               loadgen_cpu_share=res["loadgen_cpu"] / res["seconds"])
    res["requests_per_cpu_second"] = rps / gw_cpu if gw_cpu else None
    _print_case(args, res, per, conns, depth, slow)
    return res


def _print_case(args: argparse.Namespace, res: dict[str, Any], per: int, conns: int,
                depth: int, slow: int) -> None:
    rps, gw_cpu = res["rps"], res["gateway_cpu"]
    print(f"{res['name']:<8}{f'{conns}×{depth}':>12}{rps:>12,.0f}{rps * per:>13,.0f}"
          f"{res['p50_ms']:>9.2f}{res['p99_ms']:>9.2f}{gw_cpu:>8.2f}"
          f"{res['loadgen_cpu_share']:>8.2f}{rps / max(gw_cpu, 1e-9):>11,.0f}"
          f"  {res['status']}", flush=True)
    if slow:
        print(f"{'':<8}{slow} slow senders (a byte every {args.slow_every:g} s) beside "
              f"it: {res['slow_closed']} closed by the gateway ({res['slow_408']} with "
              f"408), lifetime p50 {res['slow_life_p50_s'] or float('nan'):.1f} s, max "
              f"{res['slow_life_max_s'] or float('nan'):.1f} s; {res['slow_open_at_end']}"
              " open at the end", flush=True)


def _verifiers(args: argparse.Namespace) -> list[str]:
    from ldpstream.privacypass.blindrsa import BACKENDS

    out = [v.strip() for v in args.token_verifiers.split(",") if v.strip()]
    for v in out:
        if v not in BACKENDS:
            raise SystemExit(f"--token-verifiers: {v!r} is not one of {', '.join(BACKENDS)}")
    return list(dict.fromkeys(out))


def _tokens_case(args: argparse.Namespace, host: str, redis_url: str, spec: Any, rng: Any,
                 gateways: dict[str, tuple[Any, int, str]]) -> dict[str, Any]:
    """Case ``tokens`` against one gateway per verifier (``gateways``: verifier → (process,
    port, Redis prefix)), side by side: the same tokens (each gateway has its own spent
    set), sent in ``--token-rounds`` rounds that alternate the gateways, so that the load
    of the machine weighs on each alike; then the RSA verification alone, per backend, in
    this process."""
    from ldpcore.message import encode_message, token_frame

    o = spec.oracle()
    tokens = make_tokens(redis_url, [p for _, _, p in gateways.values()], spec,
                         args.token_reports)
    per = args.many
    bodies = []
    for start in range(0, len(tokens) - per + 1, per):
        items = [([tokens[start + i]], encode_message(spec, o.perturb([int(v)], rng=rng)))
                 for i, v in enumerate(rng.integers(0, 64, per))]
        bodies.append(http_request(host, 0, token_frame(items),
                                   "application/x-ldp-token-frames"))
    rounds = max(1, min(args.token_rounds, len(bodies)))
    ctx = mp.get_context("spawn")
    conns, depth = args.batch_connections, args.batch_depth
    totals: dict[str, dict[str, Any]] = {
        v: {"verified": 0, "cpu": 0.0, "requests": 0, "seconds": 0.0, "status": {}}
        for v in gateways}
    rows: dict[str, Any] = {}
    for r in range(rounds):
        part = bodies[r * len(bodies) // rounds:(r + 1) * len(bodies) // rounds]
        order = list(gateways) if r % 2 == 0 else list(reversed(gateways))
        for v in order:
            proc, port, _ = gateways[v]
            q = ctx.Queue()
            cpu0 = _cpu_seconds(proc.pid)
            child = ctx.Process(target=_once_child, args=(q, host, port, part, conns, depth))
            t0 = time.perf_counter()
            child.start()
            res: dict[str, Any] = q.get(timeout=600)
            child.join(30)
            wall = time.perf_counter() - t0
            cpu = _cpu_seconds(proc.pid) - cpu0
            verified = res["status"].get("202", 0) * per
            tot = totals[v]
            tot["verified"] += verified
            tot["cpu"] += cpu
            tot["requests"] += res["requests"]
            tot["seconds"] += res["seconds"]
            for code, c in res["status"].items():
                tot["status"][code] = tot["status"].get(code, 0) + c
            rps = res["requests"] / res["seconds"]
            name = f"tokens/{v}"
            print(f"{name:<15}{f'{conns}×{depth}':>5}{rps:>12,.0f}{rps * per:>13,.0f}"
                  f"{res['p50_ms']:>9.2f}{res['p99_ms']:>9.2f}{cpu / wall:>8.2f}"
                  f"{res['loadgen_cpu'] / res['seconds']:>8.2f}  {res['status']}  "
                  f"round {r + 1}/{rounds}: {verified / max(cpu, 1e-9):,.0f} token-verified "
                  f"reports/s per gateway core ({verified} in {cpu:.2f} CPU s) "
                  f"{res['errors'] or ''}", flush=True)
            rows.setdefault(v, []).append(dict(res, verified=verified, gateway_cpu_s=cpu))
    verify = _verify_rate(tokens[:2000], redis_url, next(iter(gateways.values()))[2], spec,
                          list(gateways))
    out: dict[str, Any] = {"name": "tokens", "rounds": rows, "verify_only_per_core": verify,
                           "load_after": os.getloadavg()}
    for v, tot in totals.items():
        out[v] = dict(tot, reports_per_gateway_core=tot["verified"] / max(tot["cpu"], 1e-9),
                      rps=tot["requests"] / max(tot["seconds"], 1e-9))
    print(f"tokens, all rounds (load average now {os.getloadavg()[0]:.2f}):", flush=True)
    for v in gateways:
        label = "auto = " + _auto_backend() if v == "auto" else v
        print(f"  {label:<16}{out[v]['reports_per_gateway_core']:>10,.0f} token-verified "
              f"reports/s per gateway core ({out[v]['verified']} in {out[v]['cpu']:.2f} CPU s)"
              f"; RSASSA-PSS verification alone here: {verify[v]:,.0f}/s per core", flush=True)
    if len(gateways) > 1:
        first, *rest = list(gateways)
        for v in rest:
            gate = out[v]["reports_per_gateway_core"] / out[first]["reports_per_gateway_core"]
            print(f"  ratio {v} / {first}: {gate:.2f} (gate), {verify[v] / verify[first]:.2f} "
                  "(verification alone)", flush=True)
    return out


def _auto_backend() -> str:
    from ldpstream.privacypass.blindrsa import default_backend

    return default_backend()


def _verify_rate(tokens: list[bytes], redis_url: str, prefix: str, spec: Any,
                 backends: Sequence[str]) -> dict[str, float]:
    """RSASSA-PSS verifications per CPU second of this process, per backend (the ceiling
    of the gate), the backends interleaved in 4 rounds."""
    import redis

    from ldpstream.privacypass import scheme
    from ldpstream.privacypass.blindrsa import PSSVerifier
    from ldpstream.privacypass.tokens import VARIANT, public_key_from_spki

    rds = redis.Redis.from_url(redis_url)
    w = scheme.window_of(time.time(), spec.window_seconds)
    raw = rds.get(scheme.PPKeys(prefix).public(spec.id, w))
    rds.close()
    if raw is None or not tokens:
        return {b: 0.0 for b in backends}
    pk = public_key_from_spki(scheme.KeyRecord.from_json(raw).spki)
    cpu = {b: 0.0 for b in backends}
    for _ in range(4):
        for b in backends:
            verify = PSSVerifier(pk, VARIANT, backend=b).verify
            t0 = time.process_time()
            for t in tokens:
                if not verify(t[:98], t[98:]):
                    raise RuntimeError(f"a bench token does not verify with {b}")
            cpu[b] += time.process_time() - t0
    return {b: 4 * len(tokens) / max(c, 1e-9) for b, c in cpu.items()}


def add_bench_gateway_parser(bsub: Any) -> None:
    p = bsub.add_parser("gateway", help="HTTP gateway: requests/s, reports/s, p50/p99 latency "
                                        "(embedded broker + Redis, load generator included)")
    p.add_argument("--cases", default="single,batch,latency,slow",
                   help="comma separated: single, batch, many, json, latency, slow, tokens")
    p.add_argument("--seconds", type=float, default=10.0, help="measured time per case")
    p.add_argument("--warmup", type=float, default=2.0)
    p.add_argument("--connections", type=int, default=64)
    p.add_argument("--depth", type=int, default=16, help="pipelined requests per connection")
    p.add_argument("--batch-connections", type=int, default=16)
    p.add_argument("--batch-depth", type=int, default=8)
    p.add_argument("--frames", type=int, default=16, help="messages per batched request")
    p.add_argument("--batch", type=int, default=1024, help="reports per message (batched)")
    p.add_argument("--many", type=int, default=256,
                   help="one-report messages per request (case many)")
    p.add_argument("--slow", type=int, default=1000,
                   help="slow senders beside the load of case slow")
    p.add_argument("--slow-every", type=float, default=1.0,
                   help="seconds between two bytes of a slow sender")
    p.add_argument("--slow-seconds", type=float, default=25.0,
                   help="case slow runs at least this long (past the head deadline)")
    p.add_argument("--token-reports", type=int, default=40_000,
                   help="tokens (one per report) the 'tokens' case sends, each once to each "
                        "gateway")
    p.add_argument("--token-verifiers", default="openssl,auto",
                   help="case tokens: one gateway per RSASSA-PSS verifier "
                        "(LDP_GATEWAY_TOKEN_VERIFIER: auto, gmpy2, openssl), measured side by "
                        "side; ratios to the first")
    p.add_argument("--token-rounds", type=int, default=4,
                   help="case tokens: rounds alternating the gateways")
    p.add_argument("--linger-ms", type=float, default=5.0)
    p.add_argument("--broker", choices=("tansu", "kafka"), default="tansu")
    p.add_argument("--bootstrap", default=None, help="use this broker instead")
    p.add_argument("--redis", default=None, help="use this Redis instead")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--json", default=None, help="also write the figures to this file")
    p.set_defaults(func=run_from_args)
