"""The engine-independent half of a worker: decode, validate, accumulate, flush exactly once.

One :class:`Accumulator` is fed by a driver (:mod:`aggregator.drivers.faust` or
:mod:`aggregator.drivers.aiokafka`) with one partition's consumed records at a
time, in offset order.  Everything that decides what is counted lives here:

* decoding and validation, once per (collection, window) group of records, by
  :func:`ldpcore.message.decode_group`: one :class:`~ldpcore.message.Decoded` with the
  state of the good reports, one per bad message with its reason and report count;
* the local delta of sufficient statistics per (collection, window), the window
  being the record's timestamp (milliseconds, :func:`ldpcore.collection.window_start`);
* replay skipping: per partition, the next offset to accept; a record below it
  was counted already;
* gateway requests with an ``Idempotency-Key`` (header ``ldp-request``): a record
  whose request and part is counted already (``P req:…``, written by the flush that
  counted it) is skipped, however often a retry wrote it to the log;
* dead letters (``ldp-reason``, ``ldp-error``, ``ldp-source`` headers), which the
  broker must acknowledge before a flush commits;
* the flush, one :data:`ldpstream.storage.FLUSH_SCRIPT` call: the delta and the
  partition watermarks, atomically, if every watermark is still what this worker
  last saw (compare-and-set); otherwise the delta is dropped and every partition
  restarts from its Redis watermark.  On a Redis Cluster (the sharded layout of
  :mod:`ldpstream.storage`) the delta is kept per partition and each partition's part
  is one script call in that partition's hash slot, with the same checks;
* the broker-lost-its-log check (a "suspect" partition, see :meth:`_check_suspect`);
* holes in the log (:meth:`records_lost`, :meth:`process`): records deleted before
  they were counted (retention or ``DeleteRecords`` ahead of the worker) are never
  silent: the flush that moves the watermark past them records them in Redis
  (``P lost``), ``ldp_records_lost_total`` counts them and a warning names the range.
  Only offsets below the broker's log start are taken for lost; anything still in
  the log is read;
* Redis going back (a crash that lost its last writes): every flush interval without
  anything to flush, the watermarks are read back; one below what this worker flushed
  makes the partition restart from it (``ldp_watermark_regressions_total``).

The driver owns the Kafka clients and hands the accumulator, at construction, a
:class:`Broker` that reaches them (seek, read and commit the group's offsets, send a
dead letter).  Kafka's committed offsets are never positions: Redis is the source of
truth.

The driver's face (nothing else is for drivers):

* :meth:`Accumulator.assign` / :meth:`Accumulator.revoke`: the rebalance callbacks;
* :meth:`Accumulator.process`: one partition's consumed records;
* :meth:`Accumulator.flush` (raises) and :meth:`Accumulator.try_flush` (logs);
* :meth:`Accumulator.positions`: partition -> next offset to accept;
* :meth:`Accumulator.seek`, :meth:`Accumulator.records_lost`,
  :meth:`Accumulator.skip_empty`, :meth:`Accumulator.log_start`: for a driver that
  checks the log's continuity itself (Faust's);
* :meth:`Accumulator.observe_lag`, :attr:`Accumulator.stats`,
  :attr:`Accumulator.pending_reports`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any, Protocol

import numpy as np

from ldpcore import ReportError, State
from ldpcore.collection import window_start
from ldpcore.message import Decoded, MessageDecoder, decode_group, peek_message
from ldpstream.catalogue import SyncCatalogue
from ldpstream.storage import (
    FLUSH_SCRIPT,
    Keys,
    flush_args,
    read_flush_times,
    read_watermarks,
)

from .config import WorkerSettings
from .metrics import FRESHNESS_SAMPLE, AggregatorMetrics

__all__ = ["Accumulator", "Broker", "DeadLetterError", "WorkerStats", "MAX_MESSAGE_BYTES",
           "DLQ_REQUEST_BYTES", "message_key", "request_tag"]

log = logging.getLogger("ldpstream.aggregator")


MAX_MESSAGE_BYTES = 16 << 20
"""Largest message a worker fetches per partition, and so the largest dead letter."""
DLQ_REQUEST_BYTES = MAX_MESSAGE_BYTES + (1 << 20)  # headroom for headers and framing
_OVERSIZE_KEEP = 64 << 10  # bytes of an oversized message kept in its bounded dead letter


class DeadLetterError(RuntimeError):
    """The broker did not acknowledge a dead letter: the flush must not commit."""


class Broker(Protocol):
    """What the accumulator needs of a driver's Kafka clients: the reports topic's log
    and the group's offsets there, and the dead-letter producer."""

    async def committed(self, partition: int) -> int | None:
        """The offset the broker holds for this group and partition (None: none at all)."""

    async def seek(self, offsets: Mapping[int, int]) -> None:
        """Make the next records of each partition start at its offset."""

    async def commit(self, offsets: Mapping[int, int]) -> None:
        """Store offsets in the broker (a canary of a lost log, never read as positions)."""

    async def log_start(self, partition: int) -> int:
        """The partition's log start offset: the first offset the broker still holds."""

    async def log_end(self, partition: int) -> int:
        """The partition's log end offset: the offset the next record will get."""

    async def next_offset(self, partition: int, offset: int) -> int | None:
        """The offset of the first record at or after ``offset`` (None: none came)."""

    async def send_dead_letter(self, value: bytes, key: bytes | None,
                               headers: list[tuple[str, bytes]]) -> Awaitable[Any]:
        """Queue one record on the dead-letter topic; returns its acknowledgement to await
        (aiokafka's ``send``: ``MessageSizeTooLargeError`` for a record too large)."""


@dataclass
class _DeadLetter:
    """One message on its way to the dead-letter topic."""

    value: bytes
    key: bytes | None
    headers: list[tuple[str, bytes]]
    future: Any = None
    oversize: bool = False

    def shrink(self) -> None:
        """Replace the record by a bounded one: reason ``oversize``, original coordinates."""
        h = dict(self.headers)
        self.headers = [("ldp-reason", b"oversize"),
                        ("ldp-original-reason", h.get("ldp-reason", b"")),
                        ("ldp-error", h.get("ldp-error", b"")),
                        ("ldp-source", h.get("ldp-source", b"")),
                        ("ldp-original-bytes", str(len(self.value)).encode())]
        self.value = self.value[:_OVERSIZE_KEEP]
        self.oversize = True
        self.future = None


@dataclass
class WorkerStats:
    """Counters for benchmarks and tests (Prometheus has the same, labelled)."""

    counted: int = 0
    rejected_messages: int = 0
    flushes: int = 0
    conflicts: int = 0
    first_message_at: float | None = None
    last_flush_at: float | None = None
    messages: int = 0
    skipped_replays: int = 0
    duplicate_requests: int = 0
    """Records of gateway requests counted already (a retry written again), skipped."""
    stale_events: int = 0
    """Records of an earlier consumer generation, dropped (they are fetched again)."""
    offset_resets: list[tuple[int, int, int]] = field(default_factory=list)
    records_lost: int = 0
    """Records deleted from the log before they were counted (flushed to ``P lost``)."""
    regressions: int = 0
    """Watermarks found below what this worker had flushed (Redis went back)."""
    last_tick: float = field(default_factory=time.monotonic)
    """``time.monotonic()`` of the consume loop's last turn (liveness)."""


def _ms(m: Any) -> int:
    return int(m.timestamp or 0)


class Accumulator:
    """The engine-independent state of one worker of the consumer group.

    Built with everything it needs (keyword-only); a driver then uses only the face
    listed in the module docstring.

    Parameters
    ----------
    settings : WorkerSettings
    redis : redis.Redis
        A *sync* client (flushes run in a thread so heartbeats keep flowing).
    metrics : AggregatorMetrics
    broker : Broker, optional
        The driver's Kafka clients.  Without one (tests, tools) nothing is sought or
        committed, and a dead letter makes the flush fail.
    clock : callable
        Wall clock (epoch seconds) for retention cut-offs.
    timestamp_ms : callable
        A consumed record's timestamp in epoch milliseconds (aiokafka records carry
        milliseconds already; Faust's carry seconds).

    Records handed to :meth:`process` need ``topic``, ``partition``, ``offset``,
    ``key``, ``value`` and ``timestamp`` (``headers`` if any).
    """

    def __init__(self, *, settings: WorkerSettings, redis: Any, metrics: AggregatorMetrics,
                 broker: Broker | None = None, clock: Callable[[], float] = time.time,
                 timestamp_ms: Callable[[Any], int] = _ms) -> None:
        self.settings = settings
        self.redis = redis
        self.metrics = metrics
        self._broker = broker
        self._clock = clock
        self._timestamp_ms = timestamp_ms
        self._keys = Keys.for_client(redis, settings.redis_prefix)
        self.sharded = self._keys.sharded
        """Redis Cluster layout: each partition's part of a flush is its own script."""
        self._part = -1  # the partition process() works on (sharded layout), else -1
        self._shards: set[str] = set()  # shard index entries written (sharded layout)
        # the shared catalogue client: the same freshness rule as every other service
        self._catalogue = SyncCatalogue(redis, settings.redis_prefix)
        self._flush_script = redis.register_script(FLUSH_SCRIPT)
        self.stats = WorkerStats()
        self._codecs: dict[str, MessageDecoder] = {}
        self._pos: dict[int, int] = {}        # partition -> next offset to accept
        self._flushed: dict[int, int] = {}    # partition -> watermark in Redis as we know it
        # (partition or -1, collection, window start) -> (n, counts); the partition only in
        # the sharded layout, where each partition flushes alone
        self._delta: dict[tuple[int, str, int], tuple[int, np.ndarray]] = {}
        self._pending_reports = 0
        self._ingested: dict[str, int] = defaultdict(int)
        self._dead: list[_DeadLetter] = []
        self._lock = asyncio.Lock()
        self._suspect: dict[int, tuple[int, int]] = {}
        # partition -> (records, first, last offset of the last range): lost, not yet flushed
        self._lost: dict[int, tuple[int, int, int]] = {}
        self._verify_failed = False
        self._requests: dict[str, int] = {}  # ldp-request name -> expiry ms, not yet flushed
        self._request_part: dict[str, int] = {}  # its partition (sharded layout)
        self._stamps: list[int] = []  # record timestamps (ms) of the delta, sampled

    @property
    def pending_reports(self) -> int:
        """Reports in the local delta, not yet flushed."""
        return self._pending_reports

    def positions(self) -> dict[int, int]:
        """partition -> next offset to accept, for every partition this worker holds."""
        return dict(self._pos)

    # ---- collections ------------------------------------------------------------------
    def _codec(self, cid: str) -> MessageDecoder | None:
        c = self._codecs.get(cid)
        if c is not None:
            return c
        spec = self._catalogue.get(cid)  # misses merged and negatively cached there
        if spec is None:
            return None
        c = self._codecs[cid] = MessageDecoder(spec)
        return c

    # ---- consuming ----------------------------------------------------------------------
    async def process(self, partition: int, records: list[Any], *,
                      admit: Callable[[int, list[Any]], Awaitable[list[Any]]] | None = None
                      ) -> None:
        """Validate and accumulate one partition's records (never raises).

        Records come in offset order.  A record below the partition's position is a
        replay and is skipped; records of a partition this worker does not hold are
        ignored; offsets the records jump over are lost only below the broker's log
        start (:meth:`records_lost`).  ``admit`` (a driver's own continuity check) picks
        the records to take, under the same lock as flushes and rebalance resets.  If
        Redis or the broker fails meanwhile the partition is sought back to its position
        and read again.
        """
        async with self._lock:
            if admit is not None:
                records = await admit(partition, records)
            try:
                await self._take_jumps(partition, records)
            except Exception:  # Redis unreachable for a collection lookup, log start unknown
                log.exception("partition %d: processing failed; reading it again", partition)
                pos = self._pos.get(partition)
                if pos is not None:
                    await self._seek_unlocked({partition: pos})

    async def seek(self, offsets: Mapping[int, int]) -> None:
        """Have the driver read each partition again from its offset (between batches)."""
        async with self._lock:
            await self._seek_unlocked(offsets)

    async def _seek_unlocked(self, offsets: Mapping[int, int]) -> None:
        if self._broker is None or not offsets:
            return
        try:
            await self._broker.seek(offsets)
        except Exception:
            log.exception("seeking partitions %s failed", sorted(offsets))

    def _process(self, partition: int, msgs: list[Any]) -> None:
        pos = self._pos.get(partition)
        if pos is None or not msgs:  # revoked meanwhile
            return
        if self.sharded:
            self._part = partition
        if self.stats.first_message_at is None:
            self.stats.first_message_at = time.time()
        if partition in self._suspect:
            self._check_suspect(partition, msgs[0])
            pos = self._pos[partition]
        if any(map(_HEADERS, msgs)):
            end = msgs[-1].offset + 1
            kept, names = self._uncounted_requests(msgs, pos)
            if kept:
                self._take(partition, kept, pos)
            # only now (a Redis outage in _take leaves nothing done: read again)
            self._requests.update(names)
            if self.sharded:
                self._request_part.update(dict.fromkeys(names, partition))
            self._pos[partition] = max(self._pos[partition], end)  # past the skipped
            return
        self._take(partition, msgs, pos)

    def _take(self, partition: int, msgs: list[Any], pos: int) -> None:
        """:meth:`process` once the suspect and request checks are done."""
        step = max(1, len(msgs) // FRESHNESS_SAMPLE)
        self._stamps.extend(self._timestamp_ms(m) for m in msgs[::step] if m.offset >= pos)
        ts = None if self._timestamp_ms is _ms else self._timestamp_ms
        if msgs[0].offset >= pos and self._one_group(partition, msgs, ts):
            return
        # The general loop: replays, several keys or windows, or offsets out of order
        # (a driver may hand events fetched before a seek back, then the re-read ones).
        groups: dict[tuple[str, int], list[Any]] = {}
        # The loop below runs once per record: keep it lean.  Consecutive records mostly
        # share their key and window, so both are looked up only when they change.
        last_key: Any = None
        cid, w = "?", 3600
        lo = hi = 0      # [lo, hi) in ms: the window of the current group
        group: list[Any] = []
        skipped = 0
        for m in msgs:
            off = m.offset
            if off < pos:
                skipped += 1
                continue
            pos = off + 1
            key = m.key
            if key is None or key != last_key:
                cid = message_key(m)
                dec = self._codec(cid)  # Redis I/O: an outage propagates and is retried
                w = dec.spec.window_seconds if dec else 3600
                last_key = key
                lo = hi = 0
            t = (m.timestamp or 0) if ts is None else ts(m)
            if not lo <= t < hi:
                start = window_start(max(int(t), 0), w)
                lo, hi = start * 1000, (start + w) * 1000
                gk = (cid, start)
                group = groups.get(gk)  # type: ignore[assignment]
                if group is None:
                    group = groups[gk] = []
            group.append(m)
        self.stats.skipped_replays += skipped
        self.stats.messages += len(msgs) - skipped
        self._pos[partition] = pos
        for (cid, start), group in groups.items():
            self._apply(decode_group(self._codec(cid), cid, start, [m.value for m in group]),
                        group)

    def _apply(self, decoded: list[Decoded], group: list[Any]) -> None:
        """Count the good reports of a decoded group; dead-letter its bad messages."""
        for d in decoded:
            if d.state is not None:
                self._add(d.collection, d.window, d.state)
            else:
                self._reject(group[d.index], d)

    def _reject(self, msg: Any, d: Decoded) -> None:
        self.stats.rejected_messages += 1
        self.metrics.rejected.labels(d.collection, d.reason).inc(max(d.reports, 1))
        self.metrics.dlq.labels(d.reason).inc()
        headers = [("ldp-reason", d.reason.encode()),
                   ("ldp-error", d.error[:500].encode("utf-8", "replace")),
                   ("ldp-source", f"{msg.topic}:{msg.partition}:{msg.offset}".encode())]
        value = msg.value if msg.value is not None else b""
        self._dead.append(_DeadLetter(bytes(value), msg.key, headers))
        log.warning("dead-lettered %s:%d:%d (%s): %s", msg.topic, msg.partition, msg.offset,
                    d.reason, d.error[:200])

    def _add(self, cid: str, start: int, state: State) -> None:
        """Add a decoded group's state to the local delta of its (collection, window)."""
        if not state.n:
            return
        key = (self._part, cid, start)
        old = self._delta.get(key)
        if old is None:
            self._delta[key] = (state.n, state.counts)
        else:
            old[1].__iadd__(state.counts)
            self._delta[key] = (old[0] + state.n, old[1])
        self._pending_reports += state.n
        self._ingested[cid] += state.n

    def _uncounted_requests(self, msgs: list[Any], pos: int
                            ) -> tuple[list[Any], dict[str, int]]:
        """``msgs`` without the records of gateway requests counted already, and the
        markers (name -> expiry ms) of the requests they count.

        A record tagged ``ldp-request: <digest>.<part>.<expiry ms>`` is counted once per
        ``<digest>.<part>``: skipped if Redis has its marker (a flush counted it) or this
        delta holds it; otherwise its marker goes with the next flush, which refuses to
        commit if another worker counted the same request meanwhile.
        """
        tagged = []
        for i, m in enumerate(msgs):
            if m.offset >= pos:
                tag = request_tag(m)
                if tag is not None:
                    tagged.append((i, tag))
        if not tagged:
            return msgs, {}
        fresh = [name for _, (name, _) in tagged if name not in self._requests]
        known: set[str] = set()
        if fresh:  # Redis I/O: an outage propagates and the batch is read again
            if self.sharded:  # one partition's markers: one slot
                t, p = self.settings.reports_topic, msgs[0].partition
                found = self.redis.mget([self._keys.shard_request(t, p, n) for n in fresh])
            else:
                found = self.redis.mget([self._keys.request(n) for n in fresh])
            known = {n for n, v in zip(fresh, found, strict=True) if v is not None}
        drop = set()
        names: dict[str, int] = {}
        for i, (name, expires) in tagged:
            if name in known or name in self._requests or name in names:
                drop.add(i)
                cid = message_key(msgs[i])
                self.stats.duplicate_requests += 1
                self.metrics.duplicates.labels(cid).inc()
                log.info("skipped %s:%d:%d: request %s counted already (a retry)",
                         msgs[i].topic, msgs[i].partition, msgs[i].offset, name)
            else:
                names[name] = expires
        return ([m for i, m in enumerate(msgs) if i not in drop] if drop else msgs), names

    def _one_group(self, partition: int, msgs: list[Any],
                   ts: Callable[[Any], int] | None) -> bool:
        """The common case in C-speed passes: no replay, one key, one window.

        Only for offsets strictly increasing from a first one that is new (then no
        record is a replay); False (nothing done) for anything else, such as events
        fetched before a seek back followed by the re-read ones, or mixed keys or
        windows.
        """
        offsets = list(map(_OFFSET, msgs))
        if offsets != sorted(offsets) or len(set(offsets)) != len(offsets):
            return False
        keys = set(map(_KEY, msgs))
        if len(keys) != 1:
            return False
        key = keys.pop()
        if key is None:
            return False
        stamps = list(map(_TIMESTAMP, msgs)) if ts is None else list(map(ts, msgs))
        try:
            lo, hi = min(stamps), max(stamps)
        except TypeError:  # a record without a timestamp: the general loop handles it
            return False
        t0, t1 = max(int(lo or 0), 0), max(int(hi or 0), 0)
        cid = message_key(msgs[0])
        dec = self._codec(cid)  # Redis I/O: an outage propagates and is retried
        w = dec.spec.window_seconds if dec else 3600
        start = window_start(t0, w)
        if window_start(t1, w) != start:
            return False
        self.stats.messages += len(msgs)
        self._pos[partition] = msgs[-1].offset + 1
        self._apply(decode_group(dec, cid, start, [m.value for m in msgs]), msgs)
        return True

    # ---- flushing -----------------------------------------------------------------------
    async def flush(self) -> bool:
        """Write the delta and watermarks atomically; True if something was committed."""
        async with self._lock:
            return await self._flush_locked()

    async def _flush_locked(self) -> bool:
        # A suspect partition's position is provisional (0, until its first record says
        # whether the log is new): flushing it would write watermark -1 over w, and the next
        # worker would count the partition again from its start.
        parts = {p: (self._flushed.get(p, -1), pos - 1) for p, pos in self._pos.items()
                 if pos - 1 != self._flushed.get(p, -1) and p not in self._suspect}
        if not parts and not self._delta:
            await self._verify_watermarks()
            return False
        if self._dead:
            await self._send_dead_letters()
        deltas: dict[tuple[str, int], tuple[int, np.ndarray, int]] = {}
        for (_, cid, start), (n, counts) in self._delta.items():
            codec = self._codecs[cid]
            expire_ms = (start + codec.spec.window_seconds + codec.spec.retention_seconds) * 1000
            deltas[(cid, start)] = (n, counts, expire_ms)
        lost = {p: self._lost[p] for p in parts if p in self._lost}
        flush_ms = int(self._clock() * 1000)
        t0 = time.perf_counter()
        if self.sharded:
            res = await self._flush_shards(parts, lost, flush_ms)
        else:
            keys, args = flush_args(self._keys, self.settings.reports_topic, parts, deltas,
                                    flush_ms, lost=lost, requests=self._requests)
            res = await asyncio.to_thread(self._flush_script, keys=keys, args=args)
        self.metrics.flush_seconds.observe(time.perf_counter() - t0)
        if int(res[0]) != 1 and _text(res[1]) == "request":
            # another worker counted a copy of one of these requests (written to another
            # partition): read again; the marker now says to skip it
            self.stats.conflicts += 1
            self.metrics.conflicts.inc()
            log.warning("flush refused: %s is counted already; dropping the delta and "
                        "re-seeking", _text(res[2]))
            await self._reset_to_redis()
            return False
        if int(res[0]) != 1:
            p, cur = int(res[1]), int(res[2])
            if cur < parts[p][0]:  # Redis lost writes (crash, restore): not another worker
                self._regressed(p, parts[p][0], cur)
            else:
                self.stats.conflicts += 1
                self.metrics.conflicts.inc()
                log.warning("flush refused: watermark of partition %s is %s, not what this "
                            "worker saw; dropping the delta and re-seeking", p, cur)
            await self._reset_to_redis()
            return False
        topic = self.settings.reports_topic
        for p, (count, _, _) in lost.items():
            self.metrics.records_lost.labels(topic, str(p)).inc(count)
            self.stats.records_lost += count
            self._lost.pop(p, None)
        total = self._pending_reports
        for cid, n in self._ingested.items():
            self.metrics.ingested.labels(cid).inc(n)
        for p, (_, new) in parts.items():
            self._flushed[p] = new
            self.metrics.watermark.labels(self.settings.reports_topic, str(p)).set(new)
        self.metrics.flush_reports.observe(total)
        self.metrics.last_flush.set(time.time())
        self.metrics.redis_up.set(1)
        self.stats.counted += total
        self.stats.flushes += 1
        self.stats.last_flush_at = time.time()
        now_ms = time.time() * 1000
        for t in self._stamps:
            if t > 0:
                self.metrics.freshness.observe(max(0.0, (now_ms - t) / 1000))
        self._clear()
        await self._commit_canary(parts)
        return True

    async def _flush_shards(self, parts: dict[int, tuple[int, int]],
                            lost: dict[int, tuple[int, int, int]], now_ms: int) -> Any:
        """The sharded flush: one script per partition, each in its partition's slot.

        Returns the first refusal (as the single script would), else ``[1]``.  The
        partitions flushed before a refusal stay committed (their reports are accounted
        here): the reset that follows re-reads every partition from its Redis watermark,
        theirs included.
        """
        topic = self.settings.reports_topic
        by_part: dict[int, dict[tuple[str, int], tuple[int, np.ndarray, int]]] = {}
        for (p, cid, start), (n, counts) in self._delta.items():
            spec = self._codecs[cid].spec
            expire_ms = (start + spec.window_seconds + spec.retention_seconds) * 1000
            by_part.setdefault(p, {})[(cid, start)] = (n, counts, expire_ms)
        reqs: dict[int, dict[str, int]] = {}
        for name, expires in self._requests.items():
            reqs.setdefault(self._request_part[name], {})[name] = expires
        committed: list[int] = []
        for p in sorted(set(parts) | set(by_part) | set(reqs)):
            deltas = by_part.get(p, {})
            await self._index_shard(p, {cid for cid, _ in deltas})
            keys, args = flush_args(self._keys, topic, {p: parts[p]} if p in parts else {},
                                    deltas, now_ms, lost={p: lost[p]} if p in lost else {},
                                    requests=reqs.get(p, {}), shard=p)
            res = await asyncio.to_thread(self._flush_script, keys=keys, args=args)
            if int(res[0]) != 1:
                self._account_committed(committed, by_part, lost)
                return res
            committed.append(p)
        return [1]

    def _account_committed(self, committed: list[int],
                           by_part: Mapping[int, Mapping[tuple[str, int], tuple[Any, ...]]],
                           lost: Mapping[int, tuple[int, int, int]]) -> None:
        """Metrics of the partitions a sharded flush committed before one was refused."""
        topic = self.settings.reports_topic
        for p in committed:
            for (cid, _), (n, *_rest) in by_part.get(p, {}).items():
                self.metrics.ingested.labels(cid).inc(n)
                self.stats.counted += n
            if p in lost:
                self.metrics.records_lost.labels(topic, str(p)).inc(lost[p][0])
                self.stats.records_lost += lost[p][0]

    async def _index_shard(self, partition: int, collections: set[str]) -> None:
        """Name the shard in ``P shards`` (and each collection's) before the first flush
        writes there, so readers summing the shards never miss it."""
        tag = f"{self.settings.reports_topic}:{partition}"
        todo = [(self._keys.shards, tag)] if tag not in self._shards else []
        todo += [(self._keys.collection_shards(c), f"{c}\0{tag}") for c in collections
                 if f"{c}\0{tag}" not in self._shards]
        if not todo:
            return

        def write() -> None:
            pipe = self.redis.pipeline(transaction=False)
            for key, _ in todo:
                pipe.sadd(key, tag)
            pipe.execute()
        await asyncio.to_thread(write)
        self._shards.update(entry for _, entry in todo)

    async def _send_dead_letters(self) -> None:
        """Have the broker acknowledge every pending dead letter, or raise.

        A record the producer or the broker finds too large is replaced by its bounded
        ``oversize`` form and sent again at once; any other failure leaves the letters
        pending and raises :class:`DeadLetterError`, so the flush does not commit and
        the next one sends them again.
        """
        from aiokafka.errors import MessageSizeTooLargeError

        for _ in range(2):
            for dl in self._dead:
                if dl.future is not None:
                    continue
                try:
                    dl.future = await self._send(dl)
                except MessageSizeTooLargeError:
                    if dl.oversize:
                        raise
                    dl.shrink()
                    dl.future = await self._send(dl)
            results = await asyncio.gather(*(dl.future for dl in self._dead),
                                           return_exceptions=True)
            failed: list[_DeadLetter] = []
            errors: list[BaseException] = []
            for dl, res in zip(self._dead, results, strict=True):
                if not isinstance(res, BaseException):
                    continue
                if isinstance(res, MessageSizeTooLargeError) and not dl.oversize:
                    dl.shrink()
                else:
                    dl.future = None
                    errors.append(res)
                failed.append(dl)
            self._dead = failed
            if not failed:
                return
            if errors:
                break
        raise DeadLetterError(f"{len(self._dead)} dead letter(s) not acknowledged: "
                              f"{self._dead and errors[:1]}")

    async def _send(self, dl: _DeadLetter) -> Awaitable[Any]:
        if self._broker is None:
            raise DeadLetterError("no broker to send dead letters to")
        return await self._broker.send_dead_letter(dl.value, dl.key, dl.headers)

    async def _commit_canary(self, parts: dict[int, tuple[int, int]]) -> None:
        # Kafka-committed offsets are never read back as positions (Redis is the source of
        # truth); they tell a broker that lost its log: then the group's offsets are gone.
        if self._broker is None or not parts:
            return
        try:
            await self._broker.commit({p: new + 1 for p, (_, new) in parts.items()})
        except Exception as exc:  # rebalance in progress: the next flush commits again
            log.debug("offset commit skipped: %s", exc)

    def _clear(self) -> None:
        self._requests.clear()
        self._request_part.clear()
        self._stamps.clear()
        self._delta.clear()
        self._ingested.clear()
        self._pending_reports = 0

    def _drop_delta(self) -> None:
        """Forget the un-flushed delta and dead letters (their records are read again)."""
        self._clear()
        self._dead.clear()
        self._lost.clear()  # found again when the partitions are read again

    # ---- Redis going back -----------------------------------------------------------------
    async def _verify_watermarks(self) -> None:
        """Nothing to flush: check that Redis still holds the watermarks this worker flushed.

        Redis that lost its last writes (a host crash under ``appendfsync everysec``, a
        restore from an older file) comes back with lower watermarks and the counts of
        those flushes gone; the records are still in Kafka.  Without new traffic no flush
        would notice (its compare-and-set would), so this read does, once per flush
        interval: the partitions concerned restart from the restored watermarks.
        """
        if not self._flushed:
            return
        try:
            wms = await asyncio.to_thread(read_watermarks, self.redis, self.settings.reports_topic,
                                          self.settings.redis_prefix, list(self._flushed))
        except Exception as exc:  # Redis away: said once, tried again next interval
            self.metrics.redis_up.set(0)
            if not self._verify_failed:
                log.warning("reading the watermarks back failed: %r", exc)
            self._verify_failed = True
            return
        self._verify_failed = False
        self.metrics.redis_up.set(1)
        behind = [p for p, w in self._flushed.items() if wms.get(p, -1) < w]
        if not behind:
            return
        for p in behind:
            self._regressed(p, self._flushed[p], wms.get(p, -1))
        await self._reset_to_redis(behind)

    def _regressed(self, partition: int, flushed: int, found: int) -> None:
        self.stats.regressions += 1
        self.metrics.regressions.labels(self.settings.reports_topic, str(partition)).inc()
        log.error("partition %d: Redis holds watermark %d, below the %d this worker flushed "
                  "(Redis lost its last writes: a crash or a restore); reading the partition "
                  "again from offset %d", partition, found, flushed, found + 1)

    # ---- holes in the log ----------------------------------------------------------------
    async def log_start(self, partition: int) -> int | None:
        """The broker's log start offset of ``partition`` (None if it cannot say now)."""
        return await self._log_bound(partition, "start")

    async def _log_end(self, partition: int) -> int | None:
        """The broker's log end offset of ``partition`` (None if it cannot say now)."""
        return await self._log_bound(partition, "end")

    async def _log_bound(self, partition: int, which: str) -> int | None:
        if self._broker is None:
            return None
        ask = self._broker.log_start if which == "start" else self._broker.log_end
        try:
            return await ask(partition)
        except Exception as exc:
            log.warning("partition %d: asking the broker for its log %s failed: %r",
                        partition, which, exc)
            return None

    def records_lost(self, partition: int, first: int, end: int) -> None:
        """Records ``[first, end)`` of ``partition`` left the log before they were counted.

        The position moves to ``end``.  The next flush records the loss in Redis with the
        watermark that passes it (``P lost``, read by the query API), and then
        ``ldp_records_lost_total`` moves: a loss found again after a crash or a conflict
        is recorded once, like a count.
        """
        pos = self._pos.get(partition)
        if pos is None:
            return
        self._pos[partition] = max(pos, end)
        if partition in self._suspect:
            # read from the start to see whether the log is a new one (_check_suspect): if it
            # is the same log, what the watermark covers was counted, not lost
            first = max(first, self._suspect[partition][0] + 1)
        if end <= first:
            return
        count = self._lost.get(partition, (0, 0, 0))[0]
        self._lost[partition] = (count + end - first, first, end - 1)
        log.warning("partition %d of %s: records at offsets %d..%d were deleted from the log "
                    "before they were counted (retention or DeleteRecords ran ahead of the "
                    "workers): %d record(s) lost; the collections of this topic miss their "
                    "reports (ldp_records_lost_total, the answers' lost_records)",
                    partition, self.settings.reports_topic, first, end - 1, end - first)

    def skip_empty(self, partition: int, first: int, end: int) -> None:
        """Offsets ``[first, end)`` hold no record (the log was probed there): go on at ``end``."""
        if self._pos.get(partition) == first and end > first:
            self._pos[partition] = end

    async def _take_jumps(self, partition: int, msgs: list[Any]) -> None:
        """:meth:`process` ``msgs``, accounting for the offsets they jump over.

        A driver reading the log as it is (aiokafka) gets, after its position left the
        log (``auto_offset_reset=earliest``), the records from the new log start on: the
        offsets below that start are :meth:`records_lost`; a jump above it (transaction
        markers) loses nothing.  The records before a hole are taken before the position
        moves past it (else they would pass for replays, neither counted nor lost).
        Raises when the broker cannot say where its log starts: the driver then reads
        the partition again from its position.
        """
        pos = self._pos.get(partition)
        if pos is None or not msgs:
            return
        if msgs[0].offset == pos and msgs[-1].offset - pos + 1 == len(msgs):
            self._process(partition, msgs)  # contiguous from the position: the common case
            return
        exp, done = pos, 0
        for j, m in enumerate(msgs):
            off = m.offset
            if off > exp:
                start = await self.log_start(partition)
                if start is None:
                    raise RuntimeError(f"partition {partition}: records jump from offset "
                                       f"{exp} to {off} and the log start is unknown")
                if start > exp:
                    self._process(partition, msgs[done:j])
                    done = j
                    self.records_lost(partition, exp, min(start, off))
            exp = max(exp, off + 1)
        self._process(partition, msgs[done:])

    async def _reset_to_redis(self, partitions: list[int] | None = None) -> None:
        """Drop the delta and restart every (given) partition from its Redis watermark."""
        self._drop_delta()
        self._shards.clear()  # a Redis that went back may have lost the shard index too
        parts = list(self._pos) if partitions is None else partitions
        wms = await asyncio.to_thread(read_watermarks, self.redis, self.settings.reports_topic,
                                      self.settings.redis_prefix, parts)
        times = await asyncio.to_thread(read_flush_times, self.redis, self.settings.reports_topic,
                                        self.settings.redis_prefix, parts)
        seeks: dict[int, int] = {}
        # Every await happens before any position changes: records fetched meanwhile from an
        # old position must not meet a new _pos (they would be taken for a jump and the
        # re-fetched ones for replays: reports lost in a rebalance, seen on Apache Kafka).
        committed_of: dict[int, Any] = {}
        ends: dict[int, int | None] = {}
        starts: dict[int, int | None] = {}
        if self._broker is not None:
            for p in parts:
                if wms.get(p, -1) >= 0:
                    committed_of[p] = await self._broker.committed(p)
                    if committed_of[p] is not None:
                        ends[p] = await self._log_end(p)
                # records deleted while nobody read the partition: known before any arrives
                starts[p] = await self.log_start(p)
        for p in parts:
            w = wms.get(p, -1)
            self._flushed[p] = w
            self._pos[p] = w + 1
            if self._broker is None:
                continue
            committed = committed_of.get(p, 0)
            end = ends.get(p)
            if committed is None or (end is not None and committed > end):
                # Redis counted up to w but the broker has no offsets for this group, or holds
                # one beyond its log's end (a commit sent to the old broker and retried to the
                # restarted one lands there): it may have lost its log (tansu memory storage
                # restart).  Read from the start and let the first message decide (see
                # _check_suspect).
                self._suspect[p] = (w, times.get(p, 0))
                self._pos[p] = 0
                seeks[p] = 0
            else:
                self._suspect.pop(p, None)
                start = starts.get(p)
                if start is not None and start > w + 1:
                    self.records_lost(p, w + 1, start)
                seeks[p] = self._pos[p]
        if seeks and self._broker is not None:
            await self._broker.seek(seeks)

    # ---- rebalances ---------------------------------------------------------------------
    async def revoke(self, partitions: list[int]) -> None:
        """Flush first; then forget the revoked partitions."""
        try:
            await self.flush()
        except Exception:  # Redis down: the next owner re-reads from the watermark
            log.exception("flush on revoke failed; dropping the delta")
            self._drop_delta()
        for p in partitions:
            self._pos.pop(p, None)
            self._flushed.pop(p, None)
            self._suspect.pop(p, None)
            self._lost.pop(p, None)
            with contextlib.suppress(KeyError):  # another worker reports its lag now
                self.metrics.lag.remove(self.settings.reports_topic, str(p))

    async def assign(self, partitions: list[int]) -> None:
        """Restart every assigned partition from its Redis watermark (retrying Redis)."""
        for attempt in range(50):
            try:
                await self._reset_to_redis(partitions)
                log.info("assigned partitions %s at %s", partitions,
                         {p: self._pos[p] for p in partitions})
                return
            except Exception:
                log.exception("reading watermarks failed (attempt %d)", attempt + 1)
                await asyncio.sleep(0.2)
        raise RuntimeError("could not read partition watermarks from Redis")

    def _check_suspect(self, partition: int, first: Any) -> None:
        """Decide whether a partition's log is the one the watermark refers to.

        The message at an offset <= w of the *same* log was produced before the flush
        that counted offset w; one produced after that flush proves a new log.
        """
        w, flushed_at_ms = self._suspect.pop(partition)
        if first.offset <= w and self._timestamp_ms(first) > flushed_at_ms:
            self._pos[partition] = first.offset
            self._log_reset(partition, w, first.offset)
        else:  # same log: skip what is counted (a hole found meanwhile may be beyond it)
            self._pos[partition] = max(self._pos[partition], w + 1)

    def _log_reset(self, partition: int, w: int, first_offset: int) -> None:
        log.error("partition %d restarted at offset %d below watermark %d: the broker lost its "
                  "log (e.g. tansu memory storage restarted); counting the new log from its "
                  "start", partition, first_offset, w)
        self.stats.offset_resets.append((partition, w, first_offset))
        self.metrics.offset_resets.labels(self.settings.reports_topic, str(partition)).inc()

    # ---- periodic work ------------------------------------------------------------------
    async def try_flush(self) -> bool:
        """Flush, logging (not raising) a failure: the delta is kept and retried later."""
        try:
            return await self.flush()
        except DeadLetterError:
            log.exception("dead letters not acknowledged; keeping the delta and retrying")
        except Exception:  # Redis unavailable: keep the delta, retry later
            self.metrics.redis_up.set(0)
            log.exception("flush failed; keeping the delta and retrying")
        return False

    def observe_lag(self, highwater: Callable[[int], int | None]) -> None:
        """Export high watermark minus next offset for every assigned partition."""
        for p, pos in list(self._pos.items()):
            high = highwater(p)
            if high is not None:
                self.metrics.lag.labels(self.settings.reports_topic, str(p)).set(max(0, high - pos))


_KEY = attrgetter("key")


def _HEADERS(m: Any) -> Any:  # noqa: N802 - a getter like the others
    return getattr(m, "headers", None)


def _text(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def request_tag(msg: Any) -> tuple[str, int] | None:
    """``(name, expiry ms)`` of a record's ``ldp-request`` header (None: none, or garbled).

    >>> class R: headers = [("ldp-request", b"ab12.0.1700000000000")]
    >>> request_tag(R())
    ('ab12.0', 1700000000000)
    """
    headers = getattr(msg, "headers", None)
    if not headers:
        return None
    items = headers.items() if isinstance(headers, Mapping) else headers
    for k, v in items:
        if k == "ldp-request" or k == b"ldp-request":
            raw = v.decode("ascii", "replace") if isinstance(v, bytes) else str(v)
            name, _, expires = raw.rpartition(".")
            if name and expires.isdigit() and len(name) <= 80:
                return name, int(expires)
            return None
    return None
_OFFSET = attrgetter("offset")
_TIMESTAMP = attrgetter("timestamp")


def message_key(msg: Any) -> str:
    """The collection id of a record: its key, else its envelope's (``"?"`` if neither)."""
    if msg.key is not None:
        try:
            return str(msg.key.decode("ascii"))
        except UnicodeDecodeError:
            return "?"
    try:
        return peek_message(msg.value or b"")[0]
    except ReportError:
        return "?"
