"""The accumulator's own rules for holes in the log and for Redis going back, on the real
Redis (hand-made records, positions without Kafka behind them):

* offsets a batch jumps over are lost only below the broker's log start; they are
  recorded once, by the flush that passes them (``P lost``, ``ldp_records_lost_total``);
* a watermark below the log start at assignment is a hole known before any record comes;
* a flush refused because Redis holds a *lower* watermark, and an idle worker whose
  watermarks went down, restart the partition from Redis
  (``ldp_watermark_regressions_total``), not counted as rebalance conflicts.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from prometheus_client import CollectorRegistry

from aggregator.accumulator import Accumulator
from aggregator.config import WorkerSettings
from aggregator.metrics import AggregatorMetrics
from ldpcore import Reports
from ldpcore.collection import CollectionSpec, encode_message
from ldpstream.catalogue import CatalogueUnavailable, SyncCatalogue
from ldpstream.storage import CollectionCatalogue, Keys, read_lost, read_watermarks
from tests.aggregator.records import Log, Rec

SPEC = CollectionSpec.from_dict({"id": "lr", "oracle": {"mechanism": "grr", "epsilon": 1.0},
                                 "domain": {"kind": "integers", "low": 0, "high": 7}})


def _value(seed: int) -> bytes:
    y = np.random.default_rng(seed).integers(0, 8, 3).astype(np.uint16)
    o = SPEC.oracle()
    return encode_message(SPEC, Reports(o.mechanism, o.fingerprint, {"y": y}))


def _acc(redis_client: Any, names: dict[str, str]) -> tuple[Any, Log]:
    s = WorkerSettings(redis_prefix=names["prefix"], reports_topic="t", engine="aiokafka")
    CollectionCatalogue(redis_client, names["prefix"]).register(SPEC)
    log = Log()
    acc = Accumulator(settings=s, redis=redis_client,
                      metrics=AggregatorMetrics(CollectorRegistry()), broker=log)
    return acc, log


def _sample(acc: Any, name: str, partition: int = 0) -> float:
    return acc.metrics.registry.get_sample_value(name, {"topic": "t",
                                                        "partition": str(partition)}) or 0.0


def test_a_jump_below_the_log_start_is_lost_and_recorded_once_by_the_flush(
        redis_client: Any, ldp_names: dict[str, str]) -> None:
    acc, log = _acc(redis_client, ldp_names)
    asyncio.run(acc.assign([0]))
    log.start = 7  # offsets 0..6 were deleted: the reader reset to 7
    recs = [Rec(0, o, _value(o)) for o in (7, 8, 9)]
    asyncio.run(acc.process(0, recs))
    assert acc.positions() == {0: 10} and acc.pending_reports == 9
    assert _sample(acc, "ldp_records_lost_total") == 0  # not before the flush
    assert asyncio.run(acc.flush())
    assert _sample(acc, "ldp_records_lost_total") == 7
    assert read_lost(redis_client, ldp_names["prefix"]) == {
        "records": 7, "t": read_lost(redis_client, ldp_names["prefix"])["t"],
        "partitions": {"t:0": (7, "0-6")}}
    assert read_watermarks(redis_client, "t", ldp_names["prefix"]) == {0: 9}


def test_a_jump_above_the_log_start_loses_nothing(
        redis_client: Any, ldp_names: dict[str, str]) -> None:
    acc, log = _acc(redis_client, ldp_names)
    asyncio.run(acc.assign([0]))
    recs = [Rec(0, o, _value(o)) for o in (0, 1, 4, 5)]  # 2, 3: transaction markers
    asyncio.run(acc.process(0, recs))
    assert asyncio.run(acc.flush())
    assert read_lost(redis_client, ldp_names["prefix"])["records"] == 0
    assert acc.positions() == {0: 6}


def test_a_watermark_below_the_log_start_at_assignment_is_a_hole_found_at_once(
        redis_client: Any, ldp_names: dict[str, str]) -> None:
    acc, log = _acc(redis_client, ldp_names)
    redis_client.hset(Keys(ldp_names["prefix"]).watermarks("t"), mapping={"0": 4, "1": 20})
    log.start = 15
    asyncio.run(acc.assign([0, 1]))
    assert log.seeks[-1] == {0: 15, 1: 21}  # 5..14 are gone; partition 1 is above the start
    assert asyncio.run(acc.flush())
    lost = read_lost(redis_client, ldp_names["prefix"])
    assert lost["partitions"] == {"t:0": (10, "5-14")}
    assert read_watermarks(redis_client, "t", ldp_names["prefix"]) == {0: 14, 1: 20}
    # a second worker finding the same watermark finds nothing more to lose
    again, log2 = _acc(redis_client, ldp_names)
    log2.start = 15
    asyncio.run(again.assign([0, 1]))
    assert log2.seeks[-1] == {0: 15, 1: 21}
    assert not asyncio.run(again.flush())
    assert read_lost(redis_client, ldp_names["prefix"])["records"] == 10


def test_a_lost_count_is_dropped_with_a_refused_flush_and_found_again_once(
        redis_client: Any, ldp_names: dict[str, str]) -> None:
    acc, log = _acc(redis_client, ldp_names)
    asyncio.run(acc.assign([0]))
    log.start = 3
    recs = [Rec(0, 3, _value(3))]
    asyncio.run(acc.process(0, recs))
    # another worker took the partition and flushed meanwhile (its own count of the hole)
    redis_client.hset(Keys(ldp_names["prefix"]).watermarks("t"), "0", 3)
    assert not asyncio.run(acc.flush())
    assert acc.stats.conflicts == 1 and acc.stats.regressions == 0
    assert read_lost(redis_client, ldp_names["prefix"])["records"] == 0
    assert _sample(acc, "ldp_records_lost_total") == 0 and acc.positions() == {0: 4}


def test_an_idle_worker_notices_redis_going_back_and_reads_again_from_there(
        redis_client: Any, ldp_names: dict[str, str]) -> None:
    acc, log = _acc(redis_client, ldp_names)
    asyncio.run(acc.assign([0, 1]))
    for p in (0, 1):
        asyncio.run(acc.process(p, [Rec(p, o, _value(o)) for o in range(5)]))
    assert asyncio.run(acc.flush())
    assert not asyncio.run(acc.flush())  # idle: nothing to write, watermarks read back
    assert acc.stats.regressions == 0 and acc.positions() == {0: 5, 1: 5}
    # Redis restored from an older file: partition 1's last flush is gone
    redis_client.hset(Keys(ldp_names["prefix"]).watermarks("t"), "1", 1)
    assert not asyncio.run(acc.flush())
    assert acc.positions() == {0: 5, 1: 2} and log.seeks[-1] == {1: 2}
    assert acc.stats.regressions == 1 and acc.stats.conflicts == 0
    assert _sample(acc, "ldp_watermark_regressions_total", 1) == 1
    # the re-read records are counted again, once
    asyncio.run(acc.process(1, [Rec(1, o, _value(o)) for o in range(5)]))
    assert acc.pending_reports == 9 and acc.stats.skipped_replays == 2
    assert asyncio.run(acc.flush())


def test_a_flush_refused_by_a_lower_watermark_is_a_regression_not_a_conflict(
        redis_client: Any, ldp_names: dict[str, str]) -> None:
    acc, log = _acc(redis_client, ldp_names)
    asyncio.run(acc.assign([0]))
    asyncio.run(acc.process(0, [Rec(0, o, _value(o)) for o in range(4)]))
    assert asyncio.run(acc.flush())
    asyncio.run(acc.process(0, [Rec(0, o, _value(o)) for o in range(4, 6)]))
    redis_client.hdel(Keys(ldp_names["prefix"]).watermarks("t"), "0")  # Redis lost it all
    assert not asyncio.run(acc.flush())
    assert acc.stats.regressions == 1 and acc.stats.conflicts == 0
    assert acc.positions() == {0: 0} and log.seeks[-1] == {0: 0}


def test_a_hole_in_a_partition_without_committed_offsets_counts_only_what_was_never_counted(
        redis_client: Any, ldp_names: dict[str, str]) -> None:
    # A worker killed before its first offset commit leaves no committed offset: the next one
    # reads the partition from the start to see whether the log is new (check_suspect); the
    # records at or below the watermark are counted, whatever was deleted.
    acc, log = _acc(redis_client, ldp_names)
    log.commit_at = None  # the group never committed an offset
    redis_client.hset(Keys(ldp_names["prefix"]).watermarks("t"), mapping={"0": 8, "0:t": 1})
    log.start = 90
    asyncio.run(acc.assign([0]))
    recs = [Rec(0, o, _value(o)) for o in (90, 91)]
    asyncio.run(acc.process(0, recs))
    assert acc.positions() == {0: 92} and acc.pending_reports == 6
    assert asyncio.run(acc.flush())
    assert read_lost(redis_client, ldp_names["prefix"])["partitions"] == {"t:0": (81, "9-89")}


def test_a_flush_before_a_suspect_partitions_first_record_leaves_its_watermark(
        redis_client: Any, ldp_names: dict[str, str]) -> None:
    # No committed offset (a worker killed before its first commit): the partition is read
    # from its start until the first record decides.  A flush meanwhile (the timer) must not
    # write watermark -1 over w: the next worker would count everything again.
    acc, log = _acc(redis_client, ldp_names)
    log.commit_at = None  # the group never committed an offset
    # flushed after the records were produced: the same log
    redis_client.hset(Keys(ldp_names["prefix"]).watermarks("t"),
                      mapping={"0": 8, "0:t": 1_800_000_000_000})
    asyncio.run(acc.assign([0]))
    assert acc.positions() == {0: 0}
    asyncio.run(acc.flush())
    assert read_watermarks(redis_client, "t", ldp_names["prefix"]) == {0: 8}
    # the same log: 0..8 counted
    asyncio.run(acc.process(0, [Rec(0, o, _value(o)) for o in range(12)]))
    assert acc.positions() == {0: 12} and acc.pending_reports == 9
    assert asyncio.run(acc.flush())
    assert read_watermarks(redis_client, "t", ldp_names["prefix"]) == {0: 11}


def _assigned_after_a_commit_at_30(redis_client: Any, names: dict[str, str],
                                   end: int) -> tuple[Any, Log]:
    acc, log = _acc(redis_client, names)
    redis_client.hset(Keys(names["prefix"]).watermarks("t"), mapping={"0": 29, "0:t": 1})
    log.commit_at, log.end = 30, end
    asyncio.run(acc.assign([0]))
    return acc, log


def test_a_committed_offset_beyond_the_log_end_is_a_lost_log_and_the_new_log_is_counted(
        redis_client: Any, ldp_names: dict[str, str]) -> None:
    # The canary commit of the last flush before a broker restart, retried to the restarted
    # (empty) broker, lands there: the group has an offset again, but beyond the new log's
    # end.  The partition is suspect, and the new log's first record (produced after the
    # flush) proves it new: counted from its start, not skipped as replays of 0..29.
    acc, log = _assigned_after_a_commit_at_30(redis_client, ldp_names, end=3)
    assert acc.positions() == {0: 0} and log.seeks[-1] == {0: 0}
    asyncio.run(acc.process(0, [Rec(0, o, _value(o)) for o in range(3)]))
    assert acc.positions() == {0: 3} and acc.pending_reports == 9
    assert acc.stats.offset_resets == [(0, 29, 0)]
    assert asyncio.run(acc.flush())
    assert read_watermarks(redis_client, "t", ldp_names["prefix"]) == {0: 2}


def test_a_committed_offset_within_the_log_is_the_same_log_and_reading_resumes_after_it(
        redis_client: Any, ldp_names: dict[str, str]) -> None:
    acc, log = _assigned_after_a_commit_at_30(redis_client, ldp_names, end=30)
    assert acc.positions() == {0: 30} and log.seeks[-1] == {0: 30}
    assert acc.stats.offset_resets == []


@dataclass
class Tagged(Rec):
    headers: list[tuple[str, bytes]] = field(default_factory=list)


def _tag(name: str) -> list[tuple[str, bytes]]:
    return [("ldp-request", f"{name}.{int(time.time() * 1000) + 60_000}".encode())]


def test_records_of_a_request_counted_already_are_skipped_once_counted(
        redis_client: Any, ldp_names: dict[str, str]) -> None:
    # a gateway request with an Idempotency-Key, written to the log three times (the gateway
    # died after the broker's ack; the device retried twice)
    acc, log = _acc(redis_client, ldp_names)
    asyncio.run(acc.assign([0]))
    value = _value(1)
    asyncio.run(acc.process(0, [Tagged(0, 0, value, headers=_tag("d1.0")),
                    Tagged(0, 1, value, headers=_tag("d1.0")),
                    Rec(0, 2, _value(2))]))
    assert acc.pending_reports == 6 and acc.stats.duplicate_requests == 1
    assert asyncio.run(acc.flush())
    assert redis_client.pttl(Keys(ldp_names["prefix"]).request("d1.0")) > 50_000
    asyncio.run(acc.process(0, [Tagged(0, 3, value, headers=_tag("d1.0"))]))  # the last retry
    assert acc.positions() == {0: 4} and acc.pending_reports == 0
    assert acc.stats.duplicate_requests == 2
    assert _count(acc, "ldp_duplicate_requests_total", collection="lr") == 2
    # another worker that reads the partition again skips the copies too
    again, _ = _acc(redis_client, ldp_names)
    redis_client.hset(Keys(ldp_names["prefix"]).watermarks("t"), "0", -1)
    asyncio.run(again.assign([0]))
    asyncio.run(again.process(0, [Tagged(0, 0, value, headers=_tag("d1.0")), Rec(0, 2, _value(2))]))
    assert again.pending_reports == 3 and again.positions() == {0: 3}


def test_a_flush_counting_a_request_another_worker_counted_is_refused_and_read_again(
        redis_client: Any, ldp_names: dict[str, str]) -> None:
    acc, log = _acc(redis_client, ldp_names)
    asyncio.run(acc.assign([0]))
    asyncio.run(acc.process(0, [Tagged(0, 0, _value(1), headers=_tag("d2.0"))]))
    redis_client.set(Keys(ldp_names["prefix"]).request("d2.0"), 1)  # a copy counted elsewhere
    assert not asyncio.run(acc.flush())
    assert acc.stats.conflicts == 1 and acc.positions() == {0: 0} and log.seeks[-1] == {0: 0}
    asyncio.run(acc.process(0, [Tagged(0, 0, _value(1), headers=_tag("d2.0"))]))
    assert acc.pending_reports == 0 and acc.positions() == {0: 1}


def _count(acc: Any, name: str, **labels: str) -> float:
    return acc.metrics.registry.get_sample_value(name, labels) or 0.0


def test_a_request_read_while_redis_fails_is_not_taken_for_counted_when_read_again(
        redis_client: Any, ldp_names: dict[str, str], monkeypatch: Any) -> None:
    acc, log = _acc(redis_client, ldp_names)
    asyncio.run(acc.assign([0]))
    recs = [Tagged(0, 0, _value(1), headers=_tag("d3.0"))]

    def down(self: Any, cid: str) -> None:
        raise CatalogueUnavailable("Redis is away")
    sought = len(log.seeks)
    with monkeypatch.context() as m:
        m.setattr(SyncCatalogue, "get", down)
        asyncio.run(acc.process(0, recs))  # the outage: nothing taken, sought back
    assert acc.positions() == {0: 0} and log.seeks[sought:] == [{0: 0}]
    asyncio.run(acc.process(0, recs))  # read again: counted, not skipped as a copy
    assert acc.pending_reports == 3 and acc.stats.duplicate_requests == 0
