"""Helpers of the integration tests: worker subprocesses, polling with deadlines,
a background publisher, consumer-group views and a response-dropping Kafka proxy."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Self

from ldpcore.collection import CollectionSpec
from ldpstream.dev.servers import LOOPBACK, _die_with_parent

__all__ = ["ProduceResponseDropper", "Publisher", "ServiceProcess", "WorkerProcess",
           "counting_worker", "group_assignment", "log_offsets", "service_env", "unique_names",
           "wait_for", "worker_env"]

ROOT = Path(__file__).resolve().parents[2]

ENGINE = "faust"
"""``LDP_ENGINE`` of the workers started by :func:`worker_env` (set by the ``engine`` fixture)."""


def service_env(kafka: Any, redis_server: Any, names: dict[str, str],
                **settings: str) -> dict[str, str]:
    """The environment of a service child process: the caller's without its ``LDP_…``
    variables, then the test's servers and names, then ``settings``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LDP_")}
    env.update({
        "LDP_KAFKA_BOOTSTRAP": kafka.bootstrap,
        "LDP_REDIS_URL": redis_server.url,
        "LDP_REDIS_PREFIX": names["prefix"],
        "LDP_REPORTS_TOPIC": names["topic"],
        "PYTHONPATH": str(ROOT),
    })
    env.update(settings)
    return env


def worker_env(kafka: Any, redis_server: Any, names: dict[str, str],
               **extra: str) -> dict[str, str]:
    return service_env(kafka, redis_server, names, **{
        "LDP_DLQ_TOPIC": names["dlq"], "LDP_CONSUMER_GROUP": names["group"],
        "LDP_FLUSH_INTERVAL_MS": "100", "LDP_ENGINE": ENGINE, **extra})


def unique_names(tag: str = "t") -> dict[str, str]:
    """Topic, dead-letter topic, consumer group and Redis prefix of one test's own."""
    uid = uuid.uuid4().hex[:8]
    return {"topic": f"reports-{uid}", "dlq": f"dlq-{uid}", "group": f"agg-{uid}",
            "prefix": f"{tag}{uid}:"}


@contextlib.contextmanager
def counting_worker(kafka: Any, redis_server: Any, tmp: Path, collections: list[Any],
                    tag: str = "t") -> Iterator[tuple[dict[str, str], WorkerProcess, Any]]:
    """A worker child process counting ``collections`` (declared in a file in ``tmp``)
    under names of its own: (names, the worker, a sync Redis client), both closed after."""
    import redis

    names = unique_names(tag)
    cfile = tmp / "collections.json"
    cfile.write_text(json.dumps({"collections": collections}))
    worker = WorkerProcess(worker_env(kafka, redis_server, names,
                                      LDP_COLLECTIONS_FILE=str(cfile)), tmp / "worker.log")
    worker.start()
    client = redis.Redis.from_url(redis_server.url)
    try:
        yield names, worker, client
    finally:
        worker.stop()
        client.close()


class ServiceProcess:
    """``python -m <module>`` as a child process (dies with the test run)."""

    module = ""

    def __init__(self, env: dict[str, str], log: Path) -> None:
        self.env, self.log = env, log
        self.proc: subprocess.Popen[bytes] | None = None

    def spawn(self) -> None:
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen([sys.executable, "-m", self.module], cwd=ROOT,
                                         env=self.env, stdout=out, stderr=subprocess.STDOUT,
                                         preexec_fn=_die_with_parent)

    def spawn_listening(self, timeout: float) -> int:
        """Spawn and wait for the ``ldpstream <module>: listening on http://…`` line of a
        service that picks its own port; that port."""
        self.spawn()
        deadline = time.monotonic() + timeout
        mark = f"ldpstream {self.module}: listening on http://"
        while time.monotonic() < deadline:
            text = self.output()
            for line in text.splitlines():
                if line.startswith(mark):
                    return int(line[len(mark):].split()[0].rsplit(":", 1)[1])
            if self.proc is not None and self.proc.poll() is not None:
                raise AssertionError(f"the {self.module} exited with {self.proc.returncode}:"
                                     f"\n{text}")
            time.sleep(0.05)
        raise AssertionError(f"the {self.module} did not listen within {timeout} s:\n"
                             f"{self.output()}")

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


class ListeningProcess(ServiceProcess):
    """A service that picks its own port (the gateway, the issuer); :attr:`port` once
    :meth:`start` saw it listen."""

    port = 0

    def start(self, timeout: float = 60.0) -> Self:
        self.port = self.spawn_listening(timeout)
        return self


class WorkerProcess(ServiceProcess):
    """``python -m aggregator`` as a child process (dies with the test run)."""

    module = "aggregator"

    def start(self) -> WorkerProcess:
        self.spawn()
        return self


def wait_for(cond: Callable[[], bool], timeout: float, what: str,
             interval: float = 0.1) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


class Publisher(threading.Thread):
    """Publishes simulated reports with the SDK in the background, at a bounded rate.

    Messages go round-robin to partitions 0..3.  ``result`` is the simulator's
    :class:`~producer.simulate.SimulationResult` (the exact expected state) once done.
    """

    def __init__(self, bootstrap: str, topic: str, spec: CollectionSpec, reports: int,
                 rate: float, seed: int = 5, **client_config: Any) -> None:
        super().__init__(daemon=True)
        self.args = (bootstrap, topic, spec, reports, rate, seed)
        self.client_config = client_config
        self.result: Any = None
        self.error: BaseException | None = None

    def run(self) -> None:
        from producer.sdk import Client
        from producer.simulate import simulate

        bootstrap, topic, spec, reports, rate, seed = self.args
        try:
            with Client(bootstrap, topic, **self.client_config) as client:
                n = [0]

                def send(batch: Any) -> None:
                    client.send(spec, batch, partition=n[0] % 4)
                    n[0] += 1
                self.result = simulate(spec, send, dist="geometric:0.05", reports=reports,
                                       batch_sizes=[1, 33, 250, 700], seed=seed, rate=rate)
        except BaseException as exc:  # surfaced by the test
            self.error = exc

    def finish(self, timeout: float = 120.0) -> Any:
        """Wait for the end of publishing; the simulation result (raises what it raised)."""
        self.join(timeout)
        assert not self.is_alive(), f"the publisher did not finish within {timeout:.0f} s"
        assert self.error is None and self.result is not None, repr(self.error)
        return self.result


def group_assignment(bootstrap: str, group: str, topic: str) -> list[set[int]] | None:
    """The partitions of ``topic`` each member of a *stable* consumer group owns.

    ``None`` while the group is rebalancing (or unknown).  Asks the group coordinator
    with DescribeGroups, so it shows what Apache Kafka's group protocol decided.
    """
    from kafka import KafkaAdminClient
    from kafka.errors import KafkaError

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=5000)
    try:
        info = admin.describe_groups([group]).get(group)
    except KafkaError as exc:  # e.g. the coordinator is still loading: ask again later
        if not exc.retriable:
            raise
        return None
    finally:
        admin.close()
    if not info or info.get("group_state") != "Stable":
        return None
    owned: list[set[int]] = []
    for member in info.get("members", []):
        assignment = member.get("member_assignment") or {}
        parts: set[int] = set()
        for tp in assignment.get("assigned_partitions", []):
            if tp.get("topic") == topic:
                parts.update(tp.get("partitions", []))
        owned.append(parts)
    return owned


def log_offsets(bootstrap: str, topic: str, partitions: int = 4,
                **client: Any) -> tuple[list[int], list[int]]:
    """(first offsets, end offsets) of ``topic``'s partitions 0..partitions-1; ``client``:
    more kafka-python settings (a secured cluster's)."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, **client)
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        first = consumer.beginning_offsets(tps)
        end = consumer.end_offsets(tps)
        return [first[tp] for tp in tps], [end[tp] for tp in tps]
    finally:
        consumer.close()


def _recv_exact(sock: socket.socket, n: int) -> bytes | None:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


def _recv_frame(sock: socket.socket) -> bytes | None:
    """One Kafka protocol frame: a 4-byte big-endian size, then that many bytes."""
    head = _recv_exact(sock, 4)
    if head is None:
        return None
    body = _recv_exact(sock, struct.unpack(">i", head)[0])
    return None if body is None else head + body


class ProduceResponseDropper:
    """A TCP proxy in front of a Kafka broker that loses some Produce *responses*.

    Requests always reach the broker, so the batch is appended; but for every
    ``every``-th Produce request (at most ``drops`` times) the proxy swallows the
    broker's response and closes the client's connection, as a network failure right
    after the write would.  The producer cannot tell the write happened and sends the
    batch again: without idempotence the log gets it twice; an idempotent producer's
    retry carries the same producer id and sequence numbers, and the broker acknowledges
    it without appending it again.

    The broker must advertise the proxy (``advertised.listeners`` = ``port`` below), so
    that clients keep talking through it after bootstrap.
    """

    PRODUCE = 0  # Kafka API key of Produce requests

    def __init__(self, every: int, drops: int) -> None:
        self.every, self.drops_left = every, drops
        self.produce_requests = 0
        self.dropped = 0
        self.upstream: tuple[str, int] | None = None
        self._lock = threading.Lock()
        self._listener = socket.create_server((LOOPBACK, 0))
        self.port = int(self._listener.getsockname()[1])
        self._socks: list[socket.socket] = []
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if self.upstream is None:
                client.close()
                continue
            try:
                broker = socket.create_connection(self.upstream, timeout=10)
            except OSError:
                client.close()
                continue
            broker.settimeout(None)
            with self._lock:
                self._socks += [client, broker]
            doomed: set[int] = set()
            threading.Thread(target=self._requests, args=(client, broker, doomed),
                             daemon=True).start()
            threading.Thread(target=self._responses, args=(client, broker, doomed),
                             daemon=True).start()

    def _requests(self, client: socket.socket, broker: socket.socket, doomed: set[int]) -> None:
        try:
            while (frame := _recv_frame(client)) is not None:
                api_key, _, correlation = struct.unpack(">hhi", frame[4:12])
                if api_key == self.PRODUCE:
                    with self._lock:
                        self.produce_requests += 1
                        if self.drops_left > 0 and self.produce_requests % self.every == 0:
                            self.drops_left -= 1
                            doomed.add(correlation)
                broker.sendall(frame)
        except OSError:
            pass
        self._close(client, broker)

    def _responses(self, client: socket.socket, broker: socket.socket, doomed: set[int]) -> None:
        try:
            while (frame := _recv_frame(broker)) is not None:
                (correlation,) = struct.unpack(">i", frame[4:8])
                if correlation in doomed:          # the write happened; the client never hears
                    with self._lock:
                        self.dropped += 1
                    break
                client.sendall(frame)
        except OSError:
            pass
        self._close(client, broker)

    @staticmethod
    def _close(*socks: socket.socket) -> None:
        for s in socks:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()

    def close(self) -> None:
        self._closed = True
        self._listener.close()
        with self._lock:
            socks, self._socks = self._socks, []
        self._close(*socks)


def read_topic(bootstrap: str, topic: str, expected: int) -> list[Any]:
    """Every record of ``topic`` from the start, reading until ``expected`` have come (or
    about 30 s of silence)."""
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                             consumer_timeout_ms=2000, group_id=None)
    out: list[Any] = []
    try:
        for _ in range(15):
            out += list(consumer)
            if len(out) >= expected:
                break
    finally:
        consumer.close()
    return out
