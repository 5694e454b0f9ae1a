"""The Faust driver (``--engine faust``, the default): a faust-streaming agent feeds it.

The app (:func:`build_app`) has one agent on the reports topic.  The topic is
declared with ``acks=False``: Faust tracks and commits nothing for it, because
positions live in Redis (:mod:`aggregator.accumulator`).  The agent takes event
batches (``stream.take_events``), groups them by partition and hands them to
:meth:`Accumulator.process`; a timer flushes the delta at least every
``LDP_FLUSH_INTERVAL_MS`` (so an idle delta is flushed), and the agent flushes a
delta of ``LDP_FLUSH_MAX_REPORTS`` reports at once.

Rebalances:

* revoke: Faust stops the flow and waits for the agent to finish its batch, then
  sends ``app.on_partitions_revoked``; the driver flushes first, then forgets
  the partitions;
* assign (``app.on_partitions_assigned``): every assigned partition restarts at
  its Redis watermark + 1, seeked with ``consumer.seek_wait`` (which runs on
  Faust's consumer thread);
* an event fetched in an earlier consumer generation (``message.generation_id``)
  is dropped: its offset was sought again at the assignment, so it comes back;
* a seek does not clear the events Faust has already buffered from the old
  position, and after the assignment hook Faust itself seeks every partition to
  the group's committed offset (``perform_seek``), which undoes the seek above if
  the group has one.  This driver commits nothing to its group, but another client
  may have (the aiokafka engine under the same group id, an operator).  An offset
  behind the watermark only replays records, which are skipped; anything *ahead*
  would skip records.  So the driver takes a partition's events only while they
  are contiguous from its position (:meth:`FaustDriver.contiguous`): at the first
  event beyond the next expected offset it drops the rest and seeks back there;
* a gap is a hole in the log only as far as the broker says so: the offsets below
  its log start (``ListOffsets``, earliest) were deleted before they were counted
  (:meth:`Accumulator.records_lost`: counted, logged, recorded in Redis) and the
  partition continues at the log start; a gap above the log start that persists
  over :data:`HOLE_SEEKS` seeks is probed by fetching from the expected offset: only
  offsets that hold no record there (transaction markers) are passed over.  Nothing
  still in the log is ever skipped, whatever Faust buffered or sought.

The lost-log canary (see :meth:`Accumulator.reset_to_redis`) lives in a separate
consumer group, ``<group>.canary``, committed by a small aiokafka client with a
manual assignment, so Faust's group never holds an offset from this worker.
Dead letters go through an aiokafka producer with ``acks="all"`` as in the other
driver.  ``/metrics`` and ``/healthz`` are pages of Faust's web server (port
``LDP_METRICS_PORT``).

Faust hands out record timestamps in seconds; the accumulator gets milliseconds.

Throughput comes from public settings only: large poll batches and stream buffer
(:func:`build_app`), batches of up to :data:`TAKE_MAX` events, and a Monitor sensor
whose per-message hooks do nothing (the worker exports Prometheus metrics, not
Faust's).  What remains is Faust's fixed cost per Kafka message (≈ 70–90 µs, see
:mod:`aggregator.worker`), which no setting removes.
"""

from __future__ import annotations

import asyncio
import logging
import tempfile
import time
from collections.abc import Mapping
from typing import Any

from ..accumulator import DLQ_REQUEST_BYTES, MAX_MESSAGE_BYTES, Accumulator, Broker
from ..config import WorkerSettings
from ..health import health_status, metrics_page
from ..metrics import AggregatorMetrics
from ..topics import ensure_topics, first_offset_at, log_offset
from . import ProducerDeadLetters

__all__ = ["FaustDriver", "build_app", "faust_timestamp_ms", "TAKE_MAX", "TAKE_WITHIN_S",
           "HOLE_SEEKS", "HOLE_WAIT_S"]

log = logging.getLogger("ldpstream.aggregator")

TAKE_MAX = 20_000
"""Largest batch of events the agent takes at once."""
TAKE_WITHIN_S = 0.05
"""How long the agent waits to fill a batch before it processes what it has."""
HOLE_SEEKS = 3
"""Seeks back over one gap above the log start before the log is probed there."""
HOLE_WAIT_S = 1.0
"""Least time between two seeks back over the same gap."""
PROBE_TIMEOUT_S = 5.0
"""How long a probe of the log (the first record at or after an offset) waits."""


def faust_timestamp_ms(message: Any) -> int:
    """A Faust record's timestamp (float seconds) in integer milliseconds.

    >>> class M: timestamp = 1_700_000_000.123
    >>> faust_timestamp_ms(M())
    1700000000123
    """
    return int(round((message.timestamp or 0) * 1000))


def _credentials(security: Any) -> Any:
    if security.protocol == "PLAINTEXT":
        return None
    import ssl

    import faust

    ctx = None
    if security.uses_tls:
        ctx = ssl.create_default_context(cafile=security.ssl_cafile)
        if security.ssl_certfile:
            ctx.load_cert_chain(security.ssl_certfile, security.ssl_keyfile)
        ctx.check_hostname = security.ssl_check_hostname
    if security.uses_sasl:
        return faust.SASLCredentials(username=security.sasl_username,
                                     password=security.sasl_password,
                                     mechanism=security.sasl_mechanism, ssl_context=ctx)
    return faust.SSLCredentials(ctx)


def _monitor() -> Any:
    """Faust's Monitor without its per-message bookkeeping (this app reads none of it).

    Faust's stock Monitor times and counts every message and stream event (a few µs
    each, the latency deques of its own web pages); the worker's metrics are the
    Prometheus ones.  Rebalance, commit and send statistics are kept.
    """
    from faust.sensors import Monitor

    class PerMessageQuietMonitor(Monitor):
        def on_message_in(self, tp: Any, offset: int, message: Any) -> None:
            pass

        def on_stream_event_in(self, tp: Any, offset: int, stream: Any, event: Any) -> None:
            return None

        def on_stream_event_out(self, tp: Any, offset: int, stream: Any, event: Any,
                                state: Any = None) -> None:
            pass

        def on_message_out(self, tp: Any, offset: int, message: Any) -> None:
            pass

    return PerMessageQuietMonitor()


def build_app(s: WorkerSettings, datadir: str) -> Any:
    """The faust App of one worker: consumer group ``LDP_CONSUMER_GROUP``, no tables.

    Settings that matter for throughput (all public): big poll batches, a deep
    stream buffer, fetches up to :data:`MAX_MESSAGE_BYTES` per partition.
    """
    import faust

    return faust.App(
        s.consumer_group,
        monitor=_monitor(),
        broker=[f"kafka://{hp.strip()}" for hp in s.kafka_bootstrap.split(",")],
        broker_credentials=_credentials(s.kafka_security),
        datadir=datadir,
        store="memory://",
        autodiscover=False,
        web_enabled=bool(s.metrics_port),
        web_port=s.metrics_port or 6066,
        web_bind=s.metrics_host,
        web_host=s.metrics_host,
        web_in_thread=False,
        topic_partitions=s.topic_partitions,
        topic_replication_factor=s.topic_replication,
        topic_allow_declare=True,  # its leader topic; ours exist already (ensure_topics)
        consumer_auto_offset_reset="earliest",
        broker_session_timeout=s.session_timeout_ms / 1000,
        broker_heartbeat_interval=s.heartbeat_ms / 1000,
        broker_rebalance_timeout=s.rebalance_timeout_ms / 1000,
        broker_max_poll_interval=s.max_poll_interval_ms / 1000,
        broker_max_poll_records=s.poll_records,
        broker_commit_interval=3600.0,
        consumer_max_fetch_size=MAX_MESSAGE_BYTES,
        stream_buffer_maxsize=s.poll_records,
        stream_wait_empty=True,
        producer_max_request_size=DLQ_REQUEST_BYTES,
    )


def _split(msgs: list[Any], pos: int) -> tuple[list[Any], int, int]:
    """(events continuing from ``pos``, the next expected offset, index of the first event
    of the trailing run beyond it or -1)."""
    exp = pos
    keep: list[Any] = []
    tail = -1
    for j, m in enumerate(msgs):
        off = m.offset
        if off > exp:
            if tail < 0:
                tail = j
            continue
        if off == exp:
            exp = off + 1
        keep.append(m)
        tail = -1
    return keep, exp, tail


def _log_seek_failure(task: asyncio.Future[Any]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("seek after an assignment failed (the gap check seeks again): %s",
                  task.exception())


class _FaustBroker(ProducerDeadLetters):
    """Seeks through Faust's consumer; the lost-log canary in ``<group>.canary``; dead
    letters through an aiokafka producer (the clients are made by :meth:`FaustDriver.run`).

    A seek does not drop the events Faust buffered from the old position: the
    driver's gap check (:meth:`FaustDriver.contiguous`) keeps them out.
    """

    def __init__(self, driver: FaustDriver, settings: WorkerSettings) -> None:
        self.driver, self.settings, self.topic = driver, settings, settings.reports_topic
        self.dlq_topic = settings.dlq_topic
        self.canary: Any = None

    async def committed(self, partition: int) -> int | None:
        from aiokafka import TopicPartition

        tp = TopicPartition(self.topic, partition)
        if tp not in self.canary.assignment():
            self.canary.assign(list(self.canary.assignment() | {tp}))
        res = await self.canary.committed(tp)
        return None if res is None else int(res)

    async def seek(self, offsets: Mapping[int, int]) -> None:
        from faust.types import TP

        wanted = {TP(self.topic, p): off for p, off in offsets.items()}
        if self.driver.in_rebalance:
            # The assignment callback can run on the consumer thread's own method queue,
            # where awaiting seek_wait (queued on that same thread) never returns: seek once
            # the callback is over.  Meanwhile the gap check keeps out any event that does
            # not continue from the partition's position.
            task = asyncio.ensure_future(self.driver.app.consumer.seek_wait(wanted))
            task.add_done_callback(_log_seek_failure)
            return
        await self.driver.app.consumer.seek_wait(wanted)

    async def commit(self, offsets: Mapping[int, int]) -> None:
        from aiokafka import TopicPartition

        tps = {TopicPartition(self.topic, p): off for p, off in offsets.items()}
        missing = set(tps) - self.canary.assignment()
        if missing:
            self.canary.assign(list(self.canary.assignment() | missing))
        await self.canary.commit(tps)

    async def log_start(self, partition: int) -> int:
        return await log_offset(self.canary, self.topic, partition, end=False)

    async def log_end(self, partition: int) -> int:
        return await log_offset(self.canary, self.topic, partition, end=True)

    async def next_offset(self, partition: int, offset: int) -> int | None:
        s = self.settings
        return await first_offset_at(s.kafka_bootstrap, self.topic, partition, offset,
                                     timeout=PROBE_TIMEOUT_S, **s.kafka_security.aiokafka())


class FaustDriver:
    """Run one accumulator as a faust-streaming app until told to stop.

    ``settings``, ``redis`` (sync) and ``metrics`` are the accumulator's (``self.acc``);
    the metrics' registry is served at ``/metrics``.

    Parameters
    ----------
    stall_after : float
        ``/healthz`` answers 503 once the worker's timer has not turned for this long.
    broker : Broker, optional
        Faust's consumer, the canary and the dead-letter producer unless given (tests
        give a stand-in).
    """

    def __init__(self, settings: WorkerSettings, redis: Any, metrics: AggregatorMetrics, *,
                 stall_after: float = 30.0, broker: Broker | None = None) -> None:
        self.settings = settings
        self.registry = metrics.registry
        self.stall_after = stall_after
        self._kafka = _FaustBroker(self, settings)
        self._broker: Broker = broker if broker is not None else self._kafka
        self.acc = Accumulator(settings=settings, redis=redis, metrics=metrics,
                               broker=self._broker, timestamp_ms=faust_timestamp_ms)
        self.app: Any = None
        self._closing = False
        self._gap: dict[int, tuple[int, int, float]] = {}  # p -> (offset, seeks, last seek)
        self.in_rebalance = False
        """Inside the assignment callback (see :meth:`_FaustBroker.seek`)."""
        self.reseeks = 0
        """Seeks back to a partition's position after an event beyond it (a gap)."""

    # ---- the agent's work ------------------------------------------------------------
    async def handle(self, events: Any) -> None:
        """Process one batch of events (any partitions, offset order within each)."""
        acc = self.acc
        acc.stats.last_tick = time.monotonic()
        if self._closing or not events:
            return
        gen = self.app.consumer_generation_id
        by_part: dict[int, list[Any]] = {}
        stale = 0
        for ev in events:
            m = ev.message
            if m.generation_id != gen:
                stale += 1
                continue
            lst = by_part.get(m.partition)
            if lst is None:
                lst = by_part[m.partition] = []
            lst.append(m)
        acc.stats.stale_events += stale
        for p, msgs in by_part.items():
            # the gap check runs under the accumulator's lock: a flush conflict re-seeks
            # under it too, never in between
            await acc.process(p, msgs, admit=self.contiguous)
        if acc.pending_reports >= self.settings.flush_max_reports:
            await acc.try_flush()

    async def contiguous(self, p: int, msgs: list[Any]) -> list[Any]:
        """The events of ``msgs`` that continue partition ``p`` from its position.

        Replays (offsets below the position) pass, the accumulator skips them; an
        event *beyond* the next expected offset is dropped.  After a seek Faust may
        still deliver events it buffered from the old position, and ``perform_seek``
        may have moved the fetch to a committed offset ahead: such events come before
        the ones fetched from the new position, so dropping them is enough.  If the
        batch *ends* with dropped events, the broker's log start is asked (once per
        :data:`HOLE_WAIT_S`): offsets below it are gone (records deleted before they
        were counted: :meth:`Accumulator.records_lost`) and the partition continues at
        the log start; otherwise it is sought back to the expected offset, and a gap
        that persists over :data:`HOLE_SEEKS` seeks is probed (:meth:`_probe`).
        """
        pos = self.acc.positions().get(p)
        if pos is None:
            return msgs  # not ours (any more): the accumulator ignores them
        keep, exp, tail = _split(msgs, pos)
        if tail < 0:
            self._gap.pop(p, None)
            return keep
        gap = self._gap.get(p)
        now = time.monotonic()
        if gap is not None and gap[0] == exp and now - gap[2] < HOLE_WAIT_S:
            return keep  # sought back less than a second ago: wait for the re-read events
        resume = None  # where the partition goes on, past offsets that hold no record
        start = await self.acc.log_start(p)
        if start is not None and start > exp:
            # A hole: [exp, start) left the log before it was counted.  With events before
            # it in hand, the accumulator counts them first and then finds the hole itself.
            if exp == pos:
                self.acc.records_lost(p, exp, start)
            resume = start
        elif gap is not None and gap[0] == exp and gap[1] >= HOLE_SEEKS \
                and gap[1] % HOLE_SEEKS == 0:
            nxt = await self._probe(p, exp)
            if nxt is not None and nxt > exp:
                log.warning("partition %d: the log holds no record at offsets %d..%d (above "
                            "its log start: transaction markers); going on at %d",
                            p, exp, nxt - 1, nxt)
                self.acc.skip_empty(p, exp, nxt)
                resume = nxt
        if resume is not None:
            self._gap.pop(p, None)
            more, exp, tail2 = _split(msgs[tail:], resume)
            keep += more
            if tail2 < 0:
                return keep
            tail, msgs, gap = 0, msgs[tail:][tail2:], None
        if gap is None or gap[0] != exp:
            log.warning("partition %d: record at offset %d beyond the next offset %d (a "
                        "committed offset of the group, or events buffered before a seek): "
                        "seeking back", p, msgs[tail].offset, exp)
            self._gap[p] = (exp, 0, 0.0)
        due = self._due_gaps()
        if due:  # (under the accumulator's lock already: the broker directly)
            try:
                await self._broker.seek(due)
            except Exception:
                log.exception("seeking partitions %s back failed", sorted(due))
        return keep

    async def _probe(self, p: int, offset: int) -> int | None:
        """The first offset at or after ``offset`` that holds a record (None: unknown)."""
        try:
            return await self._broker.next_offset(p, offset)
        except Exception as exc:
            log.warning("partition %d: probing the log at offset %d failed: %r", p, offset,
                        exc)
            return None

    def _due_gaps(self) -> dict[int, int]:
        """The partitions with a gap to seek back over now (once a second), and where to.

        The timer seeks them too: a seek back may itself be undone by Faust's own
        ``perform_seek`` after an assignment, and then no event would ever come.
        """
        now = time.monotonic()
        due: dict[int, int] = {}
        for p, (exp, seeks, last) in list(self._gap.items()):
            if now - last >= HOLE_WAIT_S:
                self._gap[p] = (exp, seeks + 1, now)
                self.reseeks += 1
                due[p] = exp
        return due

    async def on_revoked(self, partitions: list[int]) -> None:
        for p in partitions:
            self._gap.pop(p, None)
        await self.acc.revoke(partitions)

    async def on_assigned(self, partitions: list[int]) -> None:
        for p in partitions:
            self._gap.pop(p, None)
        self.in_rebalance = True
        try:
            await self.acc.assign(partitions)
        finally:
            self.in_rebalance = False

    async def tick(self) -> None:
        """The timer: liveness, the periodic (and idle) flush, lag."""
        acc = self.acc
        acc.stats.last_tick = time.monotonic()
        if self._closing:
            return
        if self._gap:
            await acc.seek(self._due_gaps())
        await acc.try_flush()
        from faust.types import TP

        consumer = self.app.consumer
        topic = self.settings.reports_topic

        def high(p: int) -> int | None:
            try:
                return consumer.highwater(TP(topic, p))  # type: ignore[no-any-return]
            except Exception:
                return None
        acc.observe_lag(high)

    # ---- the app -----------------------------------------------------------------------
    def _wire(self, app: Any) -> None:
        acc, s = self.acc, self.settings
        topic = app.topic(s.reports_topic, key_type=bytes, value_type=bytes,
                          key_serializer="raw", value_serializer="raw", acks=False)
        driver = self

        @app.agent(topic, name="ldp-aggregate")
        async def aggregate(stream: Any) -> None:
            async for events in stream.take_events(TAKE_MAX, TAKE_WITHIN_S):
                await driver.handle(events)

        @app.timer(max(s.flush_interval_ms / 1000, 0.01), name="ldp-flush")
        async def flush_timer() -> None:
            await driver.tick()

        async def revoked(sender: Any, revoked: Any, **kw: Any) -> None:
            await driver.on_revoked([tp.partition for tp in revoked
                                     if tp.topic == s.reports_topic])

        async def assigned(sender: Any, assigned: Any, **kw: Any) -> None:
            await driver.on_assigned([tp.partition for tp in assigned
                                      if tp.topic == s.reports_topic])

        app.on_partitions_revoked.connect(revoked, weak=False)
        app.on_partitions_assigned.connect(assigned, weak=False)
        registry, stall_after = self.registry, self.stall_after

        @app.page("/metrics")
        async def metrics(web: Any, request: Any) -> Any:
            body, ctype = metrics_page(registry)
            return web.bytes(body, headers={"Content-Type": ctype})

        @app.page("/healthz")
        async def healthz(web: Any, request: Any) -> Any:
            code, body = health_status(acc.stats.last_tick, stall_after)
            return web.bytes(body, status=code, headers={"Content-Type": "application/json"})

    async def run(self, stop: asyncio.Event, ready: asyncio.Event | None = None) -> None:
        """Start the app, run until ``stop`` is set, flush, then stop the app."""
        from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

        acc, s = self.acc, self.settings
        security = s.kafka_security.aiokafka()
        await ensure_topics(s.kafka_bootstrap, [s.reports_topic, s.dlq_topic],
                            s.topic_partitions, replication=s.topic_replication,
                            min_isr=s.topic_min_isr, **security)
        producer = self._kafka.producer = AIOKafkaProducer(
            bootstrap_servers=s.kafka_bootstrap, acks="all", linger_ms=5,
            max_request_size=DLQ_REQUEST_BYTES, **security)
        canary = self._kafka.canary = AIOKafkaConsumer(
            bootstrap_servers=s.kafka_bootstrap, group_id=f"{s.consumer_group}.canary",
            enable_auto_commit=False, **security)
        with tempfile.TemporaryDirectory(prefix="ldp-faust-") as datadir:
            self.app = app = build_app(s, datadir)
            self._wire(app)
            await producer.start()
            await canary.start()
            try:
                await app.start()
                if ready is not None:
                    ready.set()
                while not stop.is_set() and not app.should_stop:
                    try:
                        await asyncio.wait_for(stop.wait(), 0.5)
                    except TimeoutError:
                        pass
                    if app.crashed:
                        raise RuntimeError(f"faust app crashed: {app.crash_reason!r}")
                self._closing = True
                try:
                    await acc.flush()
                except Exception:
                    log.exception("final flush failed; the next worker resumes from the "
                                  "watermark")
            finally:
                self._closing = True
                try:
                    await app.stop()
                finally:
                    await canary.stop()
                    await producer.stop()
