"""Accepted requests → validated, re-batched Kafka messages → acknowledged answers.

The durability rule: a request is answered 202 only once the broker has acknowledged
(``acks=all``) every Kafka message holding its reports.  In between, requests wait in
a *batch*: the first request of an empty batch starts a timer of ``linger`` seconds;
when it fires, or as soon as the batch holds ``batch_bytes`` bytes, the batch is
*flushed*:

1. **validate**: the canonically framed binary messages of each collection are checked
   in one vectorised pass (:meth:`~gateway.parse.CollectionEntry.validate_many`); a
   request with a bad message is answered 400 and *none* of its messages goes on;
2. **re-batch**: the good reports of each collection become binary messages
   (:func:`ldpcore.message` envelope, one wire batch) of at most ``batch_bytes``
   bytes, key = collection id;
3. **produce** them (:class:`KafkaSink`, an idempotent kafka-python producer) and wait
   for every acknowledgement, at most ``ack_timeout`` seconds; then answer every
   request of the batch 202, or 503 if anything failed or timed out.

A report the gateway answered 202 is in the broker's log, so a ``kill -9`` of the
gateway loses none; the aggregator counts each Kafka message exactly once (its
watermarks).  A request answered 503 (or never answered) may still have reached the
log: a device that retries it may be counted twice (at-least-once for unanswered
requests, exactly-once for answered ones).

Overload: the bytes of requests accepted but not yet answered are bounded by
``queue_bytes``; a request that would exceed it is refused at once with 429.  After a
failed or timed-out flush the broker counts as *down*: requests are refused with 503,
except one batch every ``retry_after`` seconds that probes it (a circuit breaker).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ldpcore import Reports

from .parse import BodyError, CollectionEntry, Message

__all__ = ["Batcher", "KafkaSink", "Overloaded", "Unavailable", "Request", "kafka_records",
           "validate_requests"]

log = logging.getLogger("ldpstream.gateway")


class Overloaded(Exception):
    """The bounded queue is full: answer 429 with Retry-After."""


class Unavailable(Exception):
    """The broker does not acknowledge: answer 503 with Retry-After."""


Answer = Callable[[tuple[int, int] | BaseException], None]
"""Called once with (accepted messages, accepted reports), or the BodyError/Unavailable
(or other exception: a bug) that refuses the request."""


class Request:
    """One request waiting for its answer: its messages, its size and its callback."""

    __slots__ = ("answer", "messages", "nbytes", "error")

    def __init__(self, answer: Answer, messages: list[Message], nbytes: int) -> None:
        self.answer, self.messages, self.nbytes = answer, messages, nbytes
        self.error: BodyError | None = None


class KafkaSink:
    """Produces records with an idempotent kafka-python producer (``acks=all``).

    kafka-python rather than aiokafka: the broker of ``ldpstream up`` and the tests
    (tansu) refuses aiokafka's idempotent producer, and kafka-python's is the one the
    device SDK already uses on both brokers.  Its ``send`` runs on one worker thread
    (it may block on metadata), its acknowledgements come back on its I/O thread and
    are handed to the event loop.
    """

    def __init__(self, bootstrap: str, topic: str, *, batch_bytes: int, ack_timeout_ms: int,
                 **client_config: Any) -> None:
        self.topic = topic
        # The producer gives up on a batch a little after the gateway answered 503 for it,
        # so what it holds for a broker that is away stays bounded.
        self._config: dict[str, Any] = dict(
            bootstrap_servers=bootstrap, acks="all", enable_idempotence=True, linger_ms=0,
            batch_size=batch_bytes + (64 << 10), max_request_size=batch_bytes + (1 << 20),
            max_in_flight_requests_per_connection=5,
            request_timeout_ms=min(30_000, ack_timeout_ms),
            bootstrap_timeout_ms=min(30_000, ack_timeout_ms),
            delivery_timeout_ms=ack_timeout_ms + 5000, **client_config)
        self.producer: Any = self._new_producer()
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="ldp-gateway-send")
        self.resets = 0
        self._reset_pending = False

    def _new_producer(self) -> Any:
        from kafka import KafkaProducer

        return KafkaProducer(**self._config)

    def _swap(self) -> None:
        self._reset_pending = False
        old, self.producer = self.producer, None
        self.resets += 1
        if old is not None:
            try:
                old.close(0)
            except Exception:  # noqa: BLE001 - it failed already; a new one replaces it
                pass
        try:
            self.producer = self._new_producer()
        except Exception as exc:  # noqa: BLE001 - the broker is away: the next send retries
            log.warning("a new Kafka producer could not start: %r", exc)

    def reset(self) -> None:
        """Replace the producer after a batch failed or timed out (runs on the send thread,
        so sends queued after it use the new one).

        An idempotent producer whose batch expired unacknowledged cannot be trusted to
        recover (kafka-python's stays stuck after the broker returns); a new one starts
        with a new producer id.  Its records that were in flight may still land: their
        requests were answered 503, so a retry may count them twice (see the module
        docstring).  At most one replacement waits at a time."""
        if not self._reset_pending:
            self._reset_pending = True
            self._pool.submit(self._swap)

    def warm_up(self, timeout: float = 30.0) -> int:
        """Fetch the topic's partitions (blocking) so that sends never wait on metadata."""
        deadline = time.monotonic() + timeout
        while True:
            parts = self.producer.partitions_for(self.topic)
            if parts:
                return len(parts)
            if time.monotonic() > deadline:
                raise RuntimeError(f"topic {self.topic!r} has no partitions after {timeout} s")
            time.sleep(0.2)

    def _send(self, records: Sequence[tuple[bytes, bytes]],
              timestamp_ms: int | None = None) -> list[Any]:
        if self.producer is None:  # the last replacement could not start: try again
            self.producer = self._new_producer()
        return [self.producer.send(self.topic, key=k, value=v, timestamp_ms=timestamp_ms)
                for k, v in records]

    async def send_all(self, records: Sequence[tuple[bytes, bytes]],
                       timestamp_ms: int | None = None) -> None:
        """Produce ``records`` (key, value) and return once the broker acknowledged all;
        ``timestamp_ms``: the records' timestamp (default: now, set by the producer)."""
        loop = asyncio.get_running_loop()
        kfuts = await loop.run_in_executor(self._pool, self._send, records, timestamp_ms)
        waits: list[asyncio.Future[None]] = []

        def done(fut: asyncio.Future[None], value: Any) -> None:
            if fut.done():
                return
            if isinstance(value, BaseException):
                fut.set_exception(value)
            else:
                fut.set_result(None)

        for kf in kfuts:
            af: asyncio.Future[None] = loop.create_future()
            waits.append(af)

            def cb(value: Any, af: asyncio.Future[None] = af) -> None:
                loop.call_soon_threadsafe(done, af, value)
            kf.add_both(cb)
        await asyncio.gather(*waits)

    def close(self, timeout: float = 5.0) -> None:
        self._pool.shutdown(wait=True)
        if self.producer is not None:
            self.producer.close(timeout)


class Batcher:
    """Collects requests, flushes them as re-batched Kafka messages, answers them.

    Parameters
    ----------
    send : async callable
        Produces (key, value) records and returns once all are acknowledged (raises if
        not); :meth:`KafkaSink.send_all` in the service.
    linger, ack_timeout, retry_after : float
        Seconds (see the module docstring).
    batch_bytes, queue_bytes : int
    on_flush : callable, optional
        Called after each flush with (accepted per collection {id: (messages, reports)},
        Kafka messages [(reports, bytes)], seconds from send to acknowledgement).
    on_failure : callable, optional
        Called when a batch failed or timed out (:meth:`KafkaSink.reset` in the service).
    tokens : TokenGate, optional
        Privacy Pass redemption (:mod:`gateway.tokens`): after the values are validated,
        the tokens of the batch are verified and spent; the batch is then produced with
        the timestamp of that moment (so each report lands in its token's window), and its
        spent tokens are released if the broker does not take it.
    """

    def __init__(self, send: Callable[..., Any], *,
                 linger: float, batch_bytes: int, queue_bytes: int, ack_timeout: float,
                 retry_after: float,
                 on_flush: Callable[[dict[str, tuple[int, int]], list[tuple[int, int]],
                                     float], None] | None = None,
                 on_failure: Callable[[], None] | None = None,
                 tokens: Any = None) -> None:
        self.send = send
        self.tokens = tokens
        self.linger, self.batch_bytes, self.queue_bytes = linger, batch_bytes, queue_bytes
        self.ack_timeout, self.retry_after = ack_timeout, retry_after
        self.on_flush, self.on_failure = on_flush, on_failure
        self.pending: list[Request] = []
        self.pending_bytes = 0
        self.queued_bytes = 0
        """Bytes of requests accepted and not yet answered (the bounded queue)."""
        self.queued_requests = 0
        self.down_since: float | None = None
        self._last_probe = 0.0
        self._timer: asyncio.TimerHandle | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def broker_up(self) -> bool:
        return self.down_since is None

    def submit(self, messages: list[Message], nbytes: int, answer: Answer) -> None:
        """Queue a parsed request; ``answer`` is called once when it is answered (never from
        within this call).  Raises :class:`Overloaded` or :class:`Unavailable` at once when
        it cannot be taken."""
        if self.queued_bytes + nbytes > self.queue_bytes:
            raise Overloaded(f"{self.queued_bytes} bytes wait for the broker (limit "
                             f"{self.queue_bytes})")
        loop = self._loop
        if loop is None:
            loop = self._loop = asyncio.get_running_loop()
        if self.down_since is not None:
            now = loop.time()
            if self.queued_requests or now - self._last_probe < self.retry_after:
                raise Unavailable("the broker does not acknowledge")
            self._last_probe = now  # half open: this request probes the broker
        req = Request(answer, messages, nbytes)
        self.pending.append(req)
        self.pending_bytes += nbytes
        self.queued_bytes += nbytes
        self.queued_requests += 1
        if self.pending_bytes >= self.batch_bytes:
            self.flush()
        elif self._timer is None:
            self._timer = loop.call_later(self.linger, self.flush)

    def flush(self) -> None:
        """Start flushing what is pending (a task per batch; batches overlap)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not self.pending:
            return
        reqs, self.pending, self.pending_bytes = self.pending, [], 0
        task = asyncio.get_running_loop().create_task(self._flush(reqs))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def drain(self) -> None:
        """Flush what is pending and wait for every batch to be answered."""
        self.flush()
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    # ---- one batch --------------------------------------------------------------------------
    def _validate(self, reqs: list[Request]) -> list[tuple[CollectionEntry, Reports]]:
        return validate_requests(reqs)

    def _records(self, batches: list[tuple[CollectionEntry, Reports]]
                 ) -> tuple[list[tuple[bytes, bytes]], list[tuple[int, int]]]:
        return kafka_records(batches, self.batch_bytes)

    async def _flush(self, reqs: list[Request]) -> None:
        spent: list[bytes] = []
        now_ms: int | None = None
        try:
            batches = self._validate(reqs)
            if self.tokens is not None:
                now_ms = int(time.time() * 1000)
                standing = [r for r in reqs if r.error is None]
                try:
                    spent = await self.tokens.redeem(standing, now_ms)
                except Exception as exc:  # noqa: BLE001 - Redis away: nothing was spent
                    log.warning("redeeming the tokens of a batch failed: %r", exc)
                    for req in reqs:
                        self._answer(req, Unavailable("the token store (Redis) cannot be "
                                                      f"reached: {type(exc).__name__}"))
                    return
                if any(r.error is not None for r in standing):  # a token refused a request
                    batches = self._validate([r for r in standing if r.error is None])
            records, sizes = self._records(batches)
        except Exception as exc:  # a bug: answer 500 rather than hang the requests
            log.exception("validating a batch of %d requests failed", len(reqs))
            for req in reqs:
                self._answer(req, exc)
            return
        good = []
        for req in reqs:
            if req.error is not None:
                self._answer(req, req.error)
            else:
                good.append(req)
        try:
            t0 = time.perf_counter()
            if records:
                sending = (self.send(records) if now_ms is None
                           else self.send(records, timestamp_ms=now_ms))
                await asyncio.wait_for(sending, self.ack_timeout)
            took = time.perf_counter() - t0
        except Exception as exc:  # the broker failed or timed out: nothing is acknowledged
            if spent:  # the device may retry: its tokens were not used
                try:
                    await self.tokens.release(spent)
                except Exception as rexc:  # noqa: BLE001 - Redis away: they stay spent
                    log.warning("releasing %d tokens failed: %r", len(spent), rexc)
            if not isinstance(exc, (asyncio.TimeoutError, TimeoutError)):
                log.warning("producing a batch of %d requests failed: %r", len(good), exc)
            if self.down_since is None:
                self.down_since = time.monotonic()
            if self.on_failure is not None:
                self.on_failure()
            err = Unavailable(f"the broker did not acknowledge: {type(exc).__name__}")
            for req in good:
                self._answer(req, err)
            return
        if records:
            self.down_since = None
        accepted: dict[str, tuple[int, int]] = {}
        for req in good:
            nm = nr = 0
            for m in req.messages:
                a = accepted.get(m.entry.cid, (0, 0))
                accepted[m.entry.cid] = (a[0] + m.messages, a[1] + m.n)
                nm += m.messages
                nr += m.n
            self._answer(req, (nm, nr))
        if self.on_flush is not None:
            self.on_flush(accepted, sizes, took)

    def _answer(self, req: Request, result: tuple[int, int] | BaseException) -> None:
        self.queued_bytes -= req.nbytes
        self.queued_requests -= 1
        try:
            req.answer(result)
        except Exception:  # a bug of the HTTP side must not stop the other answers
            log.exception("answering a request failed")


def validate_requests(reqs: list[Request]) -> list[tuple[CollectionEntry, Reports]]:
    """Per collection, the reports of the requests without a bad message; a request with a
    bad one gets ``error`` set (the first bad message's 400) and none of its reports goes
    on.  One vectorised check of the canonically framed messages per collection."""
    groups: dict[CollectionEntry, list[tuple[Request, int, Message]]] = {}
    for req in reqs:
        for i, m in enumerate(req.messages):
            groups.setdefault(m.entry, []).append((req, i, m))
    checked: dict[CollectionEntry, Reports | None] = {}
    for entry, items in groups.items():
        raw = [(req, i, m.raw) for req, i, m in items if m.raw is not None]
        items_raw_msg = [m for _, _, m in items if m.raw is not None]
        if not raw:
            checked[entry] = None
            continue
        reports, bad = entry.validate_many([r for _, _, r in raw])
        for pos, exc in bad:
            req, i, _ = raw[pos]
            where = items_raw_msg[pos].first_bad()
            if where is not None:  # a merged frames body: the frame at fault
                i, exc = where
            if req.error is None or req.error.index is None or i < req.error.index:
                req.error = BodyError(400, exc.reason, str(exc), i)
        checked[entry] = None if bad else reports
    out: list[tuple[CollectionEntry, Reports]] = []
    for entry, items in groups.items():
        clean = checked[entry] is not None and all(req.error is None for req, _, _ in items)
        parts: list[Reports] = []
        done = checked[entry]
        if clean and done is not None:
            parts.append(done)
        else:
            raw_ok = [m.raw for req, _, m in items if m.raw is not None and req.error is None]
            if raw_ok:
                again, bad = entry.validate_many(raw_ok)
                if bad:  # cannot happen: every bad one was found above
                    raise RuntimeError("a message validated alone failed in a batch")
                parts.append(again)
        parts += [m.reports for req, _, m in items
                  if m.reports is not None and req.error is None]
        parts = [p for p in parts if len(p)]
        if parts:
            out.append((entry, parts[0] if len(parts) == 1 else Reports.concat(parts)))
    return out


def kafka_records(batches: list[tuple[CollectionEntry, Reports]], batch_bytes: int
                  ) -> tuple[list[tuple[bytes, bytes]], list[tuple[int, int]]]:
    """(key, value) Kafka records of at most about ``batch_bytes`` bytes holding each
    collection's reports, and the (reports, bytes) of each record."""
    records: list[tuple[bytes, bytes]] = []
    sizes: list[tuple[int, int]] = []
    for entry, reports in batches:
        key = entry.cid.encode()
        per = max(1, (batch_bytes - 256) // max(entry.row_bytes, 1))
        n = len(reports)
        for start in range(0, n, per):
            value = entry.encode(reports if n <= per else reports[start:start + per])
            records.append((key, value))
            sizes.append((min(per, n - start), len(value)))
    return records, sizes
