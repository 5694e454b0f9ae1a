"""ldpctl.soak: the soak benchmark's figures (which process is which, memory slopes)."""

from __future__ import annotations

from ldpctl.soak import ROLES, Sample, classify, report, slope


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
