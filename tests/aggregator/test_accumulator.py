"""The accumulator through its driver's face (assign, revoke, process, flush, positions),
on the real Redis with hand-made records and a stand-in broker (no Kafka behind it):

* a batch is counted into the delta and, by the flush, into Redis with the watermark;
* positions move past what was taken; replayed offsets are skipped, never counted twice;
* records deleted before they were counted (a jump below the log start) are lost and
  said so, but the records fetched before the jump are counted;
* a revoke forgets its partitions, and a delta the revoke cannot flush is dropped (its
  records are read again by the next owner);
* a bad message becomes a dead letter with its reason, sent before the flush commits;
  an unexpected exception dead-letters only its own message (``internal``).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import numpy as np
import pytest
from prometheus_client import CollectorRegistry

from aggregator.accumulator import Accumulator
from aggregator.config import WorkerSettings
from aggregator.metrics import AggregatorMetrics
from ldpcore import Reports
from ldpcore.collection import CollectionSpec, encode_message
from ldpstream.catalogue import FRESHNESS, MISS_TTL
from ldpstream.storage import CollectionCatalogue, Keys, load_state, read_watermarks
from tests.aggregator.records import Log, Rec

SPEC = CollectionSpec.from_dict({"id": "ac", "oracle": {"mechanism": "grr", "epsilon": 1.0},
                                 "domain": {"kind": "integers", "low": 0, "high": 15}})
OTHER = CollectionSpec.from_dict({"id": "zz", "oracle": {"mechanism": "grr", "epsilon": 1.0},
                                  "domain": {"kind": "integers", "low": 0, "high": 3}})
NOW = int(time.time() * 1000)  # (windows expire after their retention)


def rec(partition: int, offset: int, value: bytes | None, key: bytes = b"ac") -> Rec:
    return Rec(partition, offset, value, key=key, timestamp=NOW)


def _values(seed: int, n: int = 4, spec: CollectionSpec = SPEC,
            below: int | None = None) -> tuple[bytes, Any]:
    """A message of ``n`` report values (all ``< below``) and the state it must add."""
    o = spec.oracle()
    top = spec.domain.size if below is None else below
    y = np.random.default_rng(seed).integers(0, top, n).astype(np.uint16)
    reports = Reports(o.mechanism, o.fingerprint, {"y": y})
    return encode_message(spec, reports), o.aggregate(reports)


def _acc(redis_client: Any, names: dict[str, str]) -> tuple[Accumulator, Log]:
    CollectionCatalogue(redis_client, names["prefix"]).register(SPEC)
    broker = Log()
    acc = Accumulator(settings=WorkerSettings(redis_prefix=names["prefix"], reports_topic="t"),
                      redis=redis_client, metrics=AggregatorMetrics(CollectorRegistry()),
                      broker=broker)
    asyncio.run(acc.assign([0, 1]))
    return acc, broker


def test_a_batch_is_counted_by_the_flush_with_its_watermark(
        redis_client: Any, ldp_names: dict[str, str]) -> None:
    acc, broker = _acc(redis_client, ldp_names)
    assert acc.positions() == {0: 0, 1: 0} and broker.seeks == [{0: 0, 1: 0}]
    msgs = [_values(seed) for seed in range(5)]
    asyncio.run(acc.process(0, [rec(0, o, v) for o, (v, _) in enumerate(msgs)]))
    assert acc.positions() == {0: 5, 1: 0} and acc.pending_reports == 20
    assert load_state(redis_client, SPEC, prefix=ldp_names["prefix"]).n == 0  # not yet
    assert asyncio.run(acc.flush())
    expect = sum((s for _, s in msgs[1:]), msgs[0][1])
    assert load_state(redis_client, SPEC, prefix=ldp_names["prefix"]) == expect
    assert read_watermarks(redis_client, "t", ldp_names["prefix"]) == {0: 4}
    assert acc.pending_reports == 0 and acc.stats.counted == 20
    assert not asyncio.run(acc.flush())  # nothing new: nothing written


def test_replayed_offsets_are_skipped_and_counted_once(
        redis_client: Any, ldp_names: dict[str, str]) -> None:
    acc, _ = _acc(redis_client, ldp_names)
    msgs = [_values(seed)[0] for seed in range(6)]
    asyncio.run(acc.process(1, [rec(1, o, msgs[o]) for o in range(4)]))
    assert asyncio.run(acc.flush())
    # the broker hands 2..5 (a redelivery after a seek): 2 and 3 are counted already
    asyncio.run(acc.process(1, [rec(1, o, msgs[o]) for o in range(2, 6)]))
    assert acc.positions()[1] == 6 and acc.stats.skipped_replays == 2
    assert asyncio.run(acc.flush())
    assert load_state(redis_client, SPEC, prefix=ldp_names["prefix"]).n == 6 * 4
    # a whole batch of replays adds nothing
    asyncio.run(acc.process(1, [rec(1, o, msgs[o]) for o in range(6)]))
    assert acc.pending_reports == 0 and acc.positions()[1] == 6


def test_records_before_a_hole_in_the_same_batch_are_counted_and_the_hole_recorded(
        redis_client: Any, ldp_names: dict[str, str]) -> None:
    from ldpstream.storage import read_lost

    acc, broker = _acc(redis_client, ldp_names)
    # 0..2 were fetched, then retention deleted up to 10: the reader went on at 10
    broker.start = 10
    asyncio.run(acc.process(0, [rec(0, o, _values(o)[0]) for o in (0, 1, 2, 10, 11)]))
    assert acc.positions()[0] == 12 and acc.pending_reports == 5 * 4
    assert asyncio.run(acc.flush())
    assert load_state(redis_client, SPEC, prefix=ldp_names["prefix"]).n == 5 * 4
    assert read_lost(redis_client, ldp_names["prefix"])["partitions"] == {"t:0": (7, "3-9")}


def test_records_of_a_partition_not_held_are_ignored(
        redis_client: Any, ldp_names: dict[str, str]) -> None:
    acc, _ = _acc(redis_client, ldp_names)
    asyncio.run(acc.process(7, [rec(7, 0, _values(1)[0])]))
    assert acc.pending_reports == 0 and 7 not in acc.positions()


def test_revoke_flushes_then_forgets_its_partitions(
        redis_client: Any, ldp_names: dict[str, str]) -> None:
    acc, _ = _acc(redis_client, ldp_names)
    asyncio.run(acc.process(0, [rec(0, 0, _values(1)[0])]))
    asyncio.run(acc.revoke([0]))
    assert acc.positions() == {1: 0} and acc.pending_reports == 0
    assert read_watermarks(redis_client, "t", ldp_names["prefix"]) == {0: 0}
    asyncio.run(acc.process(0, [rec(0, 1, _values(2)[0])]))  # late records: not ours
    assert acc.pending_reports == 0


def test_revoke_drops_a_delta_it_cannot_flush(
        redis_client: Any, ldp_names: dict[str, str]) -> None:
    acc, _ = _acc(redis_client, ldp_names)
    asyncio.run(acc.process(0, [rec(0, o, _values(o)[0]) for o in range(3)]))
    # the next owner flushed partition 0 meanwhile: this delta must not be written
    redis_client.hset(Keys(ldp_names["prefix"]).watermarks("t"), "0", 9)
    asyncio.run(acc.revoke([0, 1]))
    assert acc.positions() == {} and acc.pending_reports == 0
    assert load_state(redis_client, SPEC, prefix=ldp_names["prefix"]).n == 0
    assert read_watermarks(redis_client, "t", ldp_names["prefix"]) == {0: 9}


@pytest.mark.parametrize(("value", "key", "reason"), [
    (b"junk", b"ac", "garbage"),
    (None, b"ac", "garbage"),                          # a tombstone
    (b"LDPM", b"ac", "truncated"),
    (_values(1, spec=OTHER)[0], b"ac", "key_mismatch"),
    (_values(1, spec=OTHER)[0], b"zz", "unknown_collection"),
    (_values(1)[0][:-3], b"ac", "truncated"),         # cut inside its reports
])
def test_a_bad_message_becomes_a_dead_letter_with_its_reason(
        redis_client: Any, ldp_names: dict[str, str], value: bytes | None, key: bytes,
        reason: str) -> None:
    acc, broker = _acc(redis_client, ldp_names)
    good, state = _values(7)
    asyncio.run(acc.process(0, [rec(0, 0, good), rec(0, 1, value, key=key),
                                rec(0, 2, good)]))
    assert acc.positions()[0] == 3 and acc.pending_reports == 2 * state.n
    assert acc.stats.rejected_messages == 1
    assert asyncio.run(acc.flush())
    ((dead, dkey, headers),) = broker.dead
    assert headers["ldp-reason"] == reason.encode() and headers["ldp-error"]
    assert headers["ldp-source"] == b"t:0:1"
    assert dead == (value or b"") and dkey == key
    counted = acc.metrics.registry.get_sample_value(
        "ldp_reports_rejected_total", {"collection": key.decode(), "reason": reason})
    assert counted is not None and counted >= 1


def test_a_collection_registered_after_a_miss_is_counted_within_the_catalogue_freshness(
        redis_client: Any, ldp_names: dict[str, str]) -> None:
    # the worker reads the catalogue by the shared rule (ldpstream.catalogue): an unknown
    # id is answered from a check at most MISS_TTL old, not remembered for seconds
    acc, broker = _acc(redis_client, ldp_names)
    msg, state = _values(3, spec=OTHER)
    asyncio.run(acc.process(0, [rec(0, 0, msg, key=b"zz")]))
    assert acc.stats.rejected_messages == 1 and acc.pending_reports == 0
    CollectionCatalogue(redis_client, ldp_names["prefix"]).register(OTHER)
    time.sleep(MISS_TTL + FRESHNESS / 10)
    asyncio.run(acc.process(0, [rec(0, 1, msg, key=b"zz")]))
    assert acc.pending_reports == state.n and acc.stats.rejected_messages == 1


def test_a_message_cut_in_its_reports_is_rejected_with_its_report_count(
        redis_client: Any, ldp_names: dict[str, str]) -> None:
    acc, _ = _acc(redis_client, ldp_names)
    asyncio.run(acc.process(0, [rec(0, 0, _values(1, n=9)[0][:-1])]))
    counted = acc.metrics.registry.get_sample_value(
        "ldp_reports_rejected_total", {"collection": "ac", "reason": "truncated"})
    assert counted == 9  # the reports the message says it holds, not 1


def test_an_unexpected_exception_dead_letters_only_its_message(
        redis_client: Any, ldp_names: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    acc, broker = _acc(redis_client, ldp_names)
    oracle = type(SPEC.oracle())
    real = oracle._aggregate

    def poisoned(self: Any, columns: dict[str, Any]) -> Any:
        if np.any(columns["y"] == 15):
            raise ZeroDivisionError("a bug that only report 15 triggers")
        return real(self, columns)

    monkeypatch.setattr(oracle, "_aggregate", poisoned)
    o = SPEC.oracle()
    poison = encode_message(SPEC, Reports(o.mechanism, o.fingerprint,
                                          {"y": np.array([3, 15], dtype=np.uint16)}))
    (v1, s1), (v2, s2) = _values(1, below=15), _values(2, below=15)
    asyncio.run(acc.process(0, [rec(0, 0, v1), rec(0, 1, poison), rec(0, 2, v2)]))
    assert acc.positions()[0] == 3 and acc.pending_reports == s1.n + s2.n
    assert asyncio.run(acc.flush())
    ((dead, _, headers),) = broker.dead
    assert dead == poison and headers["ldp-reason"] == b"internal"
    assert b"ZeroDivisionError" in headers["ldp-error"]
    monkeypatch.undo()
    assert load_state(redis_client, SPEC, prefix=ldp_names["prefix"]) == s1 + s2


def test_without_a_broker_a_dead_letter_keeps_the_flush_from_committing(
        redis_client: Any, ldp_names: dict[str, str]) -> None:
    from aggregator.accumulator import DeadLetterError

    CollectionCatalogue(redis_client, ldp_names["prefix"]).register(SPEC)
    acc = Accumulator(settings=WorkerSettings(redis_prefix=ldp_names["prefix"],
                                              reports_topic="t"),
                      redis=redis_client, metrics=AggregatorMetrics(CollectorRegistry()))
    asyncio.run(acc.assign([0]))
    asyncio.run(acc.process(0, [rec(0, 0, b"junk")]))
    with pytest.raises(DeadLetterError):
        asyncio.run(acc.flush())
    assert read_watermarks(redis_client, "t", ldp_names["prefix"]) == {}
