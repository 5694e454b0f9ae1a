"""The parts of a long-running ``up`` that need no server: what the janitor asks to release,
which broker ``up`` picks, and the soak benchmark's figures."""

from __future__ import annotations

from pathlib import Path

import pytest

from ldpctl.soak import ROLES, Sample, classify, report, slope
from ldpctl.stack import choose_broker
from ldpstream.retention import Janitor, release_offsets


def test_release_offsets_stop_at_each_watermark_plus_one_and_skip_what_did_not_move() -> None:
    wms = {0: 99, 1: -1, 2: 5, 3: 0}
    assert release_offsets(wms, {}) == {0: 100, 2: 6, 3: 1}
    assert release_offsets(wms, {0: 100, 2: 6, 3: 1}) == {}
    # never below what was already released, never above the watermark
    assert release_offsets({0: 120}, {0: 100}) == {0: 121}
    assert release_offsets({0: 90}, {0: 100}) == {}


def test_janitor_refuses_a_bad_interval_or_topic() -> None:
    with pytest.raises(ValueError, match="interval"):
        Janitor(bootstrap="127.0.0.1:1", redis=None, interval=-1)
    with pytest.raises(ValueError, match="topic"):
        Janitor(bootstrap="127.0.0.1:1", redis=None, topic="")


def test_janitor_told_the_broker_cannot_release_never_asks_it() -> None:
    # redis=None: release_records would fail on the first Redis read if it tried
    janitor = Janitor(bootstrap="127.0.0.1:1", redis=None, release_records=False)
    assert janitor.release_records() == {}
    assert janitor.stats.releases_supported is False


def test_up_falls_back_to_tansu_without_apache_kafkas_jars(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("LDP_KAFKA_LIBS", str(tmp_path))  # no kafka_2.13-*.jar there
    assert choose_broker("auto") == "tansu"
    assert choose_broker("kafka") == "kafka"  # an explicit choice is kept (and fails later)
    assert choose_broker("tansu") == "tansu"


def test_soak_classifies_every_process_of_up() -> None:
    assert classify(["/x/tansu-v0.6.0-510f3e2", "broker", "--listener-url", "tcp://a"]) \
        == "broker"
    assert classify(["/usr/bin/valkey-server *:6379"]) == "redis"
    assert classify(["python", "-m", "aggregator"]) == "worker"
    assert classify(["python", "-m", "ldpstream", "serve"]) == "api"
    assert classify(["python", "-m", "ldpstream", "up", "--port", "1"]) == "supervisor"
    assert set(ROLES) == {"supervisor", "broker", "redis", "worker", "api", "devices"}


def test_soak_report_gives_each_process_its_slope() -> None:
    samples = [Sample(m, {"broker": 20 + 5 * m, "redis": 12.0}, 1000 * int(m), 50, 1.0)
               for m in (0.0, 1.0, 2.0, 3.0, 4.0)]
    lines = report(samples, broker="tansu", rate=400, minutes=4, warmup=1, devices=5)
    broker = next(line for line in lines if line.startswith("| broker |"))
    redis = next(line for line in lines if line.startswith("| redis |"))
    assert broker == "| broker | 20.0 | 40.0 | 40.0 | +5.00 | +5.00 |"
    assert redis == "| redis | 12.0 | 12.0 | 12.0 | +0.00 | +0.00 |"
    assert any("Counted 4,000 reports" in line for line in lines)
    assert slope([0, 1], [3, 3]) == 0.0
