"""Steady traffic, probes and the exact check of the failover tests and ``ldpstream bench
cluster``.

* :class:`Traffic`: one collection's reports, sent at a steady rate at once straight to
  Kafka (an idempotent ``acks=all`` producer, what the Python SDK ``Client`` is, or that
  client itself) and through the gateways (``POST /v1/reports``, one request in flight per
  gateway).  Every message is remembered with its outcome: *acknowledged* (the broker's
  ack; a gateway's 202), *refused* (a 4xx, 429: not written) or *in doubt* (a 503, a lost
  connection, a failed future: it may have reached Kafka).
* :func:`check_counted`: Redis must equal ldpcore's aggregate of every acknowledged message
  plus some subset of the in-doubt ones, cell for cell and in ``n``; nothing acknowledged
  lost, nothing counted twice.
* :class:`ApiProbe`: queries the API replicas round robin and records status and latency
  (p99, error rate across a failover).
* :func:`freshness`: send one report of an otherwise idle collection, time until the API's
  ``n`` shows it; p50/p99 over many such probes while :class:`Traffic` loads the system.
"""

from __future__ import annotations

import http.client
import itertools
import json
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import numpy as np

from ldpcore.collection import CollectionSpec, encode_message
from ldpcore.message import MessageDecoder

__all__ = ["ApiProbe", "Outcome", "Traffic", "check_counted", "freshness", "percentile",
           "post_message"]


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0–100) of ``values`` (nan when empty).

    >>> percentile([1.0, 2.0, 3.0, 4.0], 50)
    2.5
    """
    return float(np.percentile(np.asarray(values, dtype=float), q)) if len(values) else \
        float("nan")


def post_message(base_url: str, body: bytes, timeout: float = 15.0,
                 conn: http.client.HTTPConnection | None = None) -> tuple[int, dict[str, Any]]:
    """``POST /v1/reports`` one binary message; (status, JSON answer).  Raises OSError."""
    parts = urlsplit(base_url)
    c = conn or http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port,
                                           timeout=timeout)
    try:
        c.request("POST", "/v1/reports", body=body,
                  headers={"Content-Type": "application/octet-stream"})
        resp = c.getresponse()
        raw = resp.read()
        return resp.status, (json.loads(raw) if raw else {})
    finally:
        if conn is None:
            c.close()


@dataclass
class Outcome:
    """One message sent: its bytes, path and fate."""

    value: bytes
    path: str  # "kafka" or "gateway"
    status: str = "pending"  # acked, refused, doubt
    sent_at: float = 0.0


@dataclass
class Traffic:
    """Steady traffic of one collection over Kafka and the gateways (see module docstring).

    ``kafka_send(key, value, partition)`` returns a kafka-python future (a
    ``KafkaProducer.send`` or the SDK ``Client.send_raw``); ``kafka_flush()`` waits for
    them.  ``rate`` is Kafka messages per second (the gateways send back to back, one
    request each at a time, paced to the same rate).
    """

    spec: CollectionSpec
    kafka_send: Callable[[bytes, bytes, int | None], Any] | None = None
    kafka_flush: Callable[[], Any] | None = None
    gateways: Sequence[str] = ()
    rate: float = 50.0
    partitions: int = 12
    batch_sizes: Sequence[int] = (1, 16, 64)
    seed: int = 1
    outcomes: list[Outcome] = field(default_factory=list)
    gateway_status: Counter[str] = field(default_factory=Counter)
    _stop: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    errors: list[BaseException] = field(default_factory=list)
    #: messages the Kafka client still held when its flush gave up (in doubt)
    stuck: list[Outcome] = field(default_factory=list)
    flush_error: str | None = None

    def _messages(self, seed: int) -> Any:
        rng = np.random.default_rng(seed)
        oracle = self.spec.oracle()
        sizes = list(self.batch_sizes)
        for i in itertools.count():
            n = sizes[i % len(sizes)]
            values = rng.integers(0, self.spec.domain.size, n)
            yield encode_message(self.spec, oracle.perturb(values, rng=rng), "binary")

    def _record(self, o: Outcome) -> None:
        with self._lock:
            self.outcomes.append(o)

    def _kafka_loop(self) -> None:
        assert self.kafka_send is not None
        pending: list[tuple[Outcome, Any]] = []
        key = self.spec.id.encode()
        period = 1.0 / self.rate
        nxt = time.monotonic()
        try:
            for i, value in enumerate(self._messages(self.seed)):
                if self._stop.is_set():
                    break
                o = Outcome(value, "kafka", sent_at=time.time())
                self._record(o)
                try:
                    pending.append((o, self.kafka_send(key, value, i % self.partitions)))
                except Exception:  # noqa: BLE001 - the producer refused it at once
                    o.status = "doubt"
                pending = self._settle(pending)
                nxt += period
                time.sleep(max(0.0, nxt - time.monotonic()))
            if self.kafka_flush is not None:
                try:
                    self.kafka_flush()
                except Exception as exc:  # noqa: BLE001 - the producer gave up: see stuck
                    # The client could not settle what it holds in time (kafka-python's
                    # flush waits per batch).  What it still holds was maybe delivered, maybe
                    # not: in doubt, as for a device whose library never answered.  The
                    # caller closes the producer (aborting them) before counting.
                    self.stuck = [o for o, _ in self._settle(pending)]
                    self.flush_error = repr(exc)
                    for o in self.stuck:
                        o.status = "doubt"
                    return
            self._settle(pending, wait=True)
        except BaseException as exc:  # noqa: BLE001 - surfaced by the caller
            self.errors.append(exc)

    @staticmethod
    def _settle(pending: list[tuple[Outcome, Any]],
                wait: bool = False) -> list[tuple[Outcome, Any]]:
        left = []
        for o, fut in pending:
            if wait and not fut.is_done:
                try:
                    fut.get(timeout=180)
                except Exception:  # noqa: BLE001 - a failed future: in doubt
                    pass
            if fut.is_done:
                o.status = "acked" if fut.succeeded() else "doubt"
            else:
                left.append((o, fut))
        return left

    def _gateway_loop(self, index: int) -> None:
        urls = list(self.gateways)
        period = 1.0 / self.rate
        conns: dict[str, http.client.HTTPConnection] = {}
        nxt = time.monotonic()
        try:
            for i, value in enumerate(self._messages(self.seed * 1000 + index + 1)):
                if self._stop.is_set():
                    break
                url = urls[(i + index) % len(urls)]
                o = Outcome(value, "gateway", sent_at=time.time())
                self._record(o)
                parts = urlsplit(url)
                conn = conns.get(url) or http.client.HTTPConnection(
                    parts.hostname or "127.0.0.1", parts.port, timeout=15)
                conns[url] = conn
                try:
                    status, _ = post_message(url, value, conn=conn)
                except ConnectionRefusedError:  # nothing listens: nothing was sent
                    conn.close()
                    conns.pop(url, None)
                    o.status = "refused"
                    self.gateway_status["refused"] += 1
                except OSError:  # sent, the answer lost: it may have reached Kafka
                    conn.close()
                    conns.pop(url, None)
                    o.status = "doubt"
                    self.gateway_status["lost"] += 1
                else:
                    self.gateway_status[str(status)] += 1
                    o.status = ("acked" if status == 202 else "doubt" if status >= 500
                                else "refused")
                nxt += period
                time.sleep(max(0.0, nxt - time.monotonic()))
        except BaseException as exc:  # noqa: BLE001 - surfaced by the caller
            self.errors.append(exc)

    def start(self) -> Traffic:
        if self.kafka_send is not None:
            self._threads.append(threading.Thread(target=self._kafka_loop, daemon=True))
        for i in range(len(self.gateways)):
            self._threads.append(threading.Thread(target=self._gateway_loop, args=(i,),
                                                  daemon=True))
        for t in self._threads:
            t.start()
        return self

    def stop(self, timeout: float = 240.0) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout)
        alive = [t for t in self._threads if t.is_alive()]
        if alive or self.errors:
            raise RuntimeError(f"traffic did not end cleanly: {self.errors or alive}")

    def count(self, status: str, path: str | None = None) -> int:
        return sum(1 for o in self.outcomes if o.status == status
                   and (path is None or o.path == path))


def _state_of(decoder: MessageDecoder, values: Sequence[bytes]) -> tuple[int, np.ndarray]:
    n = 0
    counts: np.ndarray | None = None
    for v in values:
        st = decoder.aggregate(v)
        n += int(st.n)
        c = np.asarray(st.counts, dtype=np.int64).reshape(-1)
        counts = c.copy() if counts is None else counts + c
    if counts is None:
        counts = np.zeros(int(np.prod(decoder.spec.oracle().new_state().counts.shape)),
                          dtype=np.int64)
    return n, counts


def _explaining_subset(parts: Sequence[tuple[int, np.ndarray]], want_n: int,
                       want: np.ndarray, budget: int) -> list[int] | None:
    """Indices of ``parts`` (n, counts) summing to (``want_n``, ``want``) exactly, or None.

    A depth-first search that drops any branch overshooting ``n`` or, when every count is
    non-negative (GRR, unary encodings), any cell: a few dozen messages in doubt are
    decided at once.  A message that alone overshoots cannot be in the subset: it is left
    out before the search (a leader kill can leave hundreds in doubt of which a few were
    counted).  ``budget`` bounds the branches tried (then AssertionError).
    """
    nonneg = all((c >= 0).all() for _, c in parts)
    fits = [i for i, (n_i, c_i) in enumerate(parts)
            if n_i <= want_n and (not nonneg or (c_i <= want).all())]
    if len(fits) > 500:  # the search recurses once per message
        raise AssertionError(f"{len(fits)} messages in doubt that could each have been "
                             "counted: too many to decide which ones")
    order = sorted(fits, key=lambda i: -parts[i][0])
    seen = [0]

    def search(k: int, left_n: int, left: np.ndarray, chosen: list[int]) -> list[int] | None:
        if left_n == 0 and not left.any():
            return list(chosen)
        if k == len(order) or left_n <= 0:
            return None
        seen[0] += 1
        if seen[0] > budget:
            raise AssertionError(f"more than {budget} subsets of the {len(parts)} in-doubt "
                                 "messages tried: too many to decide which ones")
        i = order[k]
        n_i, c_i = parts[i]
        rest = left - c_i
        if n_i <= left_n and (not nonneg or (rest >= 0).all()):
            chosen.append(i)
            found = search(k + 1, left_n - n_i, rest, chosen)
            chosen.pop()
            if found is not None:
                return found
        return search(k + 1, left_n, left, chosen)

    return search(0, want_n, want, [])


def check_counted(spec: CollectionSpec, outcomes: Sequence[Outcome], state: Any,
                  budget: int = 1_000_000) -> dict[str, int]:
    """Assert ``state`` (Redis, an ldpcore ``State``) = acknowledged + a subset of in-doubt.

    Cell for cell and in ``n``.  Returns counts of each outcome and how many in-doubt
    messages were found counted.  Raises AssertionError otherwise (or when deciding
    which in-doubt messages were counted takes more than ``budget`` steps).
    """
    dec = MessageDecoder(spec)
    acked = [o.value for o in outcomes if o.status == "acked"]
    doubt = [o.value for o in outcomes if o.status == "doubt"]
    pending = [o for o in outcomes if o.status == "pending"]
    assert not pending, f"{len(pending)} message(s) never settled"
    n0, c0 = _state_of(dec, acked)
    got_n = int(state.n)
    got = np.asarray(state.counts, dtype=np.int64).reshape(-1)
    diff_n, diff = got_n - n0, got - c0
    summary = {"acked": len(acked), "doubt": len(doubt),
               "refused": sum(1 for o in outcomes if o.status == "refused"),
               "acked_reports": n0, "redis_reports": got_n}
    if diff_n == 0 and not diff.any():
        summary["doubt_counted"] = 0
        return summary
    assert diff_n > 0 and (diff >= 0).all(), (
        f"Redis holds less than what was acknowledged: n {got_n} < {n0} or a cell below "
        f"(first cells {diff[:8].tolist()}): acknowledged reports were lost")
    found = _explaining_subset([_state_of(dec, [v]) for v in doubt], diff_n, diff, budget)
    if found is not None:
        summary["doubt_counted"] = len(found)
        return summary
    raise AssertionError(f"Redis holds {diff_n} reports beyond the acknowledged ones that no "
                         f"subset of the {len(doubt)} in-doubt messages explains: counted "
                         "twice, or not ours")


@dataclass
class ApiProbe:
    """Queries ``path`` on the API replicas round robin every ``interval`` s, in a thread."""

    bases: Sequence[str]
    path: str
    interval: float = 0.05
    samples: list[tuple[float, int, float, str]] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def _loop(self) -> None:
        for i in itertools.count():
            if self._stop.is_set():
                return
            base = self.bases[i % len(self.bases)]
            parts = urlsplit(base)
            t0 = time.perf_counter()
            c = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port,
                                           timeout=10)
            retry = ""
            try:
                c.request("GET", self.path)
                r = c.getresponse()
                r.read()
                status = r.status
                retry = r.getheader("Retry-After") or ""
            except OSError:
                status = 0  # connection refused / reset: a dead replica
            finally:
                c.close()
            self.samples.append((time.time(), status, time.perf_counter() - t0, retry))
            self._stop.wait(self.interval)

    def start(self) -> ApiProbe:
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> dict[str, Any]:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(20)
        return self.summary()

    def summary(self, since: float = 0.0, until: float = float("inf")) -> dict[str, Any]:
        s = [x for x in self.samples if since <= x[0] <= until]
        lat = [x[2] * 1000 for x in s if x[1] == 200]
        errors = [x for x in s if x[1] != 200]
        return {"requests": len(s), "errors": len(errors),
                "error_rate": len(errors) / len(s) if s else float("nan"),
                "p50_ms": percentile(lat, 50), "p99_ms": percentile(lat, 99),
                "503_with_retry_after": sum(1 for x in errors if x[1] == 503 and x[3]),
                "refused": sum(1 for x in errors if x[1] == 0),
                "statuses": dict(Counter(str(x[1]) for x in s))}


def read_n(base: str, cid: str, timeout: float = 5.0) -> int | None:
    """The collection's ``n`` as the API tells it (its ``frequencies`` answer, or the
    ``have`` of a 409 "not enough reports yet"), or None."""
    parts = urlsplit(base)
    c = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=timeout)
    try:
        c.request("GET", f"/v1/collections/{cid}/frequencies")
        r = c.getresponse()
        body = json.loads(r.read())
        if r.status == 200:
            return int(body["n"])
        if r.status == 409 and body.get("error", {}).get("have") is not None:
            return int(body["error"]["have"])
        return None
    except (OSError, ValueError):
        return None
    finally:
        c.close()


def freshness(spec: CollectionSpec, send: Callable[[bytes], Any], api: str, probes: int,
              *, timeout: float = 30.0, pause: float = 0.05, warmup: int = 3) -> list[float]:
    """Seconds from each send to the API's ``n`` showing it, for ``probes`` single reports.

    ``spec`` must be a collection nobody else sends to.  ``send(value)`` must return once
    the message is sent (it need not wait for an acknowledgement: the clock starts before
    it).  The API is polled every 10 ms.  The first ``warmup`` probes are not kept (the
    producer's first metadata fetch, the API's first computation of an answer).
    """
    rng = np.random.default_rng(7)
    oracle = spec.oracle()
    base = read_n(api, spec.id) or 0
    out: list[float] = []
    for _ in range(probes + warmup):
        value = encode_message(spec, oracle.perturb(rng.integers(0, spec.domain.size, 1),
                                                    rng=rng), "binary")
        t0 = time.perf_counter()
        send(value)
        deadline = t0 + timeout
        while True:
            n = read_n(api, spec.id)
            if n is not None and n > base:
                out.append(time.perf_counter() - t0)
                base = n
                break
            if time.perf_counter() > deadline:
                raise TimeoutError(f"a report to {spec.id!r} not visible in {timeout:.0f} s")
            time.sleep(0.01)
        time.sleep(pause)
    return out[warmup:]
