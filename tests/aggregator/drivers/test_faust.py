"""The Faust driver's own rules, on hand-made events (the accumulator on the real Redis).

* events of an earlier consumer generation are dropped (they are fetched again);
* a partition's events are taken only while contiguous from its position: an event
  beyond the next offset is dropped with the rest and the partition sought back;
* a gap is a hole only below the broker's log start: those records are lost (counted
  by the next flush in Redis and ``ldp_records_lost_total``), the rest is read; a gap
  above the log start that persists is probed, and only offsets without a record
  there are passed over;
* Faust's timestamps (float seconds) become integer milliseconds.

The end-to-end behaviour against a real broker is in tests/integration (both engines).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest
from prometheus_client import CollectorRegistry

from aggregator.config import WorkerSettings
from aggregator.drivers.faust import FaustDriver, faust_timestamp_ms
from aggregator.metrics import AggregatorMetrics
from ldpcore import Reports
from ldpcore.collection import CollectionSpec, encode_message
from ldpstream.storage import CollectionCatalogue, read_lost

SPEC = CollectionSpec.from_dict({"id": "fd", "oracle": {"mechanism": "grr", "epsilon": 1.0},
                                 "domain": {"kind": "integers", "low": 0, "high": 7}})


@dataclass
class Msg:
    """The fields of a Faust ``ConsumerMessage`` the driver reads."""

    partition: int
    offset: int
    value: bytes
    generation_id: int = 1
    topic: str = "t"
    key: bytes | None = b"fd"
    timestamp: float = field(default_factory=time.time)  # seconds, as Faust gives them


@dataclass
class Event:
    message: Msg


@dataclass
class App:
    consumer_generation_id: int = 1


class Seeks:
    """Positions that record seeks (the driver's interface, no Kafka behind it).

    ``start``: the log start offset the "broker" answers; ``records``: the offsets of the
    records the "log" holds, for probes (None: every offset from ``start`` on).
    """

    def __init__(self) -> None:
        self.seeks: list[dict[int, int]] = []
        self.start = 0
        self.records: list[int] | None = None
        self.probes: list[tuple[int, int]] = []

    async def log_start(self, partition: int) -> int:
        return self.start

    async def next_offset(self, partition: int, offset: int) -> int | None:
        self.probes.append((partition, offset))
        if self.records is None:
            return max(offset, self.start)
        return min((o for o in self.records if o >= offset), default=None)

    async def committed(self, partition: int) -> int | None:
        return 0

    async def seek(self, offsets: Mapping[int, int]) -> None:
        self.seeks.append(dict(offsets))

    async def commit(self, offsets: Mapping[int, int]) -> None:
        pass


def _driver(redis_client: Any, names: dict[str, str]) -> tuple[FaustDriver, Seeks]:
    s = WorkerSettings(redis_prefix=names["prefix"], reports_topic="t", engine="faust")
    CollectionCatalogue(redis_client, names["prefix"]).register(SPEC)
    seeks = Seeks()
    d = FaustDriver(s, redis_client, AggregatorMetrics(CollectorRegistry()), broker=seeks)
    d.app = App()
    asyncio.run(d.on_assigned([0, 1]))
    return d, seeks


def _value(seed: int) -> bytes:
    y = np.random.default_rng(seed).integers(0, 8, 5).astype(np.uint16)
    o = SPEC.oracle()
    return encode_message(SPEC, Reports(o.mechanism, o.fingerprint, {"y": y}))


def test_events_of_an_earlier_generation_are_dropped(
        redis_client: Any, ldp_names: dict[str, str]) -> None:
    d, _ = _driver(redis_client, ldp_names)
    d.app.consumer_generation_id = 2
    asyncio.run(d.handle([Event(Msg(0, 0, _value(1), generation_id=1)),
                          Event(Msg(1, 0, _value(2), generation_id=2))]))
    assert d.acc.stats.stale_events == 1
    assert d.acc.positions() == {0: 0, 1: 1}
    assert d.acc.pending_reports == 5


def test_an_event_beyond_the_next_offset_is_sought_back_and_the_jump_dropped(
        redis_client: Any, ldp_names: dict[str, str]) -> None:
    d, seeks = _driver(redis_client, ldp_names)
    assert seeks.seeks == [{0: 0, 1: 0}]  # the assignment: watermark + 1
    # perform_seek jumped partition 0 to offset 80: 80, 81 arrive, then 82 in the next batch
    asyncio.run(d.handle([Event(Msg(0, 80, _value(80))), Event(Msg(0, 81, _value(81))),
                          Event(Msg(1, 0, _value(100)))]))
    assert seeks.seeks[-1] == {0: 0} and d.reseeks == 1
    assert d.acc.positions() == {0: 0, 1: 1}
    asyncio.run(d.handle([Event(Msg(0, 82, _value(82))), Event(Msg(0, 0, _value(0))),
                          Event(Msg(0, 1, _value(1)))]))
    assert d.reseeks == 1  # the jump's 82 is dropped, the re-fetched 0 and 1 taken
    assert d.acc.positions() == {0: 2, 1: 1}
    assert d.acc.pending_reports == 15


def test_a_gap_inside_a_batch_cuts_it_there(
        redis_client: Any, ldp_names: dict[str, str]) -> None:
    d, seeks = _driver(redis_client, ldp_names)
    # re-fetched 0..2, then an event still buffered from before a seek (119)
    asyncio.run(d.handle([Event(Msg(1, o, _value(o))) for o in (0, 1, 2, 119, 120)]))
    assert d.acc.positions()[1] == 3 and seeks.seeks[-1] == {1: 3}
    # still buffered from before (121), then the re-fetched ones: a replay (2), then on
    asyncio.run(d.handle([Event(Msg(1, o, _value(o))) for o in (121, 2, 3, 4)]))
    assert d.acc.positions()[1] == 5 and d.acc.pending_reports == 25 and d.reseeks == 1


def test_a_gap_below_the_log_start_is_a_hole_whose_records_are_lost_and_said_so(
        redis_client: Any, ldp_names: dict[str, str]) -> None:
    d, seeks = _driver(redis_client, ldp_names)
    seeks.start = 10  # offsets 0..9 were deleted before they were counted
    asyncio.run(d.handle([Event(Msg(0, o, _value(o))) for o in (10, 11)]))
    assert d.acc.positions()[0] == 12 and d.acc.pending_reports == 10
    assert d.reseeks == 0
    assert asyncio.run(d.acc.flush())
    lost = read_lost(redis_client, ldp_names["prefix"])
    assert lost["records"] == 10 and lost["partitions"] == {"t:0": (10, "0-9")}
    sample = d.acc.metrics.registry.get_sample_value
    assert sample("ldp_records_lost_total", {"topic": "t", "partition": "0"}) == 10


@pytest.mark.parametrize("batches", [
    [(0, 1, 2, 10, 11)],      # Faust's fetch reset to the log start within the batch
    [(0, 1, 2, 40), (10, 11)],  # it ran on beyond the log start: sought back there first
])
def test_events_before_a_hole_are_counted_then_the_hole_is_lost(
        redis_client: Any, ldp_names: dict[str, str], monkeypatch: Any,
        batches: list[tuple[int, ...]]) -> None:
    from aggregator.drivers import faust as fd

    monkeypatch.setattr(fd, "HOLE_WAIT_S", 0.0)
    d, seeks = _driver(redis_client, ldp_names)
    seeks.start = 10  # 0..2 came, then retention deleted everything below 10
    for batch in batches:
        asyncio.run(d.handle([Event(Msg(0, o, _value(o))) for o in batch]))
    assert d.acc.positions()[0] == 12 and d.acc.pending_reports == 5 * 5
    assert asyncio.run(d.acc.flush())
    assert read_lost(redis_client, ldp_names["prefix"])["partitions"] == {"t:0": (7, "3-9")}


def test_records_beyond_the_log_start_after_a_hole_are_sought_not_skipped(
        redis_client: Any, ldp_names: dict[str, str]) -> None:
    d, seeks = _driver(redis_client, ldp_names)
    seeks.start = 10
    # the log now starts at 10, but the first events Faust hands over are 40, 41 (its
    # fetch had moved on): 10..39 are still in the log and must be read
    asyncio.run(d.handle([Event(Msg(0, o, _value(o))) for o in (40, 41)]))
    assert d.acc.positions()[0] == 10 and seeks.seeks[-1] == {0: 10}
    asyncio.run(d.handle([Event(Msg(0, o, _value(o))) for o in range(10, 42)]))
    assert d.acc.positions()[0] == 42 and d.acc.pending_reports == 32 * 5
    assert asyncio.run(d.acc.flush())
    assert read_lost(redis_client, ldp_names["prefix"])["partitions"] == {"t:0": (10, "0-9")}


def test_a_gap_above_the_log_start_is_never_taken_while_the_log_holds_its_records(
        redis_client: Any, ldp_names: dict[str, str], monkeypatch: Any) -> None:
    from aggregator.drivers import faust as fd

    monkeypatch.setattr(fd, "HOLE_WAIT_S", 0.0)
    d, seeks = _driver(redis_client, ldp_names)
    for _ in range(4 * fd.HOLE_SEEKS):  # offset 0 exists, yet 10 comes every time
        asyncio.run(d.handle([Event(Msg(0, 10, _value(10)))]))
        assert d.acc.positions()[0] == 0
    assert seeks.probes and all(p == (0, 0) for p in seeks.probes)
    assert seeks.seeks[-1] == {0: 0}
    asyncio.run(d.acc.flush())
    assert read_lost(redis_client, ldp_names["prefix"])["records"] == 0


def test_offsets_without_records_above_the_log_start_are_passed_over_without_loss(
        redis_client: Any, ldp_names: dict[str, str], monkeypatch: Any) -> None:
    from aggregator.drivers import faust as fd

    monkeypatch.setattr(fd, "HOLE_WAIT_S", 0.0)
    d, seeks = _driver(redis_client, ldp_names)
    seeks.records = [3, 4]  # 0..2 hold transaction markers, no records
    for _ in range(fd.HOLE_SEEKS):
        asyncio.run(d.handle([Event(Msg(0, 3, _value(3)))]))
        assert d.acc.positions()[0] == 0
    asyncio.run(d.handle([Event(Msg(0, 3, _value(3))), Event(Msg(0, 4, _value(4)))]))
    assert seeks.probes == [(0, 0)]
    assert d.acc.positions()[0] == 5 and d.acc.pending_reports == 10
    assert asyncio.run(d.acc.flush())
    assert read_lost(redis_client, ldp_names["prefix"])["records"] == 0


def test_an_event_at_or_below_the_position_is_taken(
        redis_client: Any, ldp_names: dict[str, str]) -> None:
    d, seeks = _driver(redis_client, ldp_names)
    asyncio.run(d.handle([Event(Msg(1, 0, _value(3))), Event(Msg(1, 1, _value(4)))]))
    assert d.acc.positions()[1] == 2 and d.reseeks == 0 and len(seeks.seeks) == 1


def test_faust_seconds_become_milliseconds_without_float_error() -> None:
    for ms in (0, 1, 1_699_999_999_999, 1_700_000_000_123, 3_600_000 * 471_000 - 1):
        assert faust_timestamp_ms(Msg(0, 0, b"", timestamp=ms / 1000.0)) == ms


def test_events_read_again_after_a_seek_in_the_same_batch_are_counted_once(
        redis_client: Any, ldp_names: dict[str, str]) -> None:
    d, _ = _driver(redis_client, ldp_names)
    # 0..2 fetched, a seek back to 0, then 0..3 fetched again: one key, one window
    asyncio.run(d.handle([Event(Msg(0, o, _value(o))) for o in (0, 1, 2, 0, 1, 2, 3)]))
    assert d.acc.positions()[0] == 4
    assert d.acc.pending_reports == 4 * 5 and d.acc.stats.skipped_replays == 3
