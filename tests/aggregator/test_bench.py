"""aggregator.bench (``ldpstream bench pipeline``): the steady-state rate and the table.

The benchmark runs brokers and workers for minutes (docs/benchmarks.md)."""

from __future__ import annotations

from aggregator.bench import Rate, steady_rate, table


def test_the_rate_leaves_out_the_warm_up_and_the_drain() -> None:
    samples = [(t / 10, 0 if t < 5 else 100 * (t - 5)) for t in range(200)]
    r = steady_rate(samples, 1.0, 100 * 194)
    assert round(r.rate) == 1000 and r.complete
    assert steady_rate([(0.0, 0), (1.0, 0)], 1.0, 10) == Rate(0.0, 0.0, False)
    short = steady_rate([(0.0, 1), (0.5, 50), (0.6, 100)], 1.0, 100)
    assert not short.complete


def test_the_table_gives_each_engine_and_its_ratio_to_raw_consume() -> None:
    res = {(512, "raw"): Rate(1000.0, 12.0), (512, "mechanism"): "grr", (512, "bytes"): 600,
           (512, "faust"): Rate(500.0, 12.0), (512, "aiokafka"): Rate(800.0, 5.0)}
    text = table(res, (512,), ("faust", "aiokafka"))
    head, rule, row = text.splitlines()
    assert head.startswith("| reports/message | message | raw consume | faust | faust/raw")
    assert row == "| 512 | grr, 600 B | 1,000 | 500 | 0.50 | 800 (short) | 0.80 |"
    assert rule.count("---") == 7
