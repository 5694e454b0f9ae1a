"""ldpctl.clusterbench (``ldpstream bench freshness`` / ``scaling``): verbs and collection.

The benchmarks start whole clusters for minutes (docs/cluster.md has their figures)."""

from __future__ import annotations

import argparse

from ldpctl import clusterbench


def test_the_two_benchmarks_parse_their_defaults() -> None:
    parser = argparse.ArgumentParser()
    clusterbench.add_bench_cluster_parsers(parser.add_subparsers(dest="what"))
    fresh = parser.parse_args(["freshness"])
    assert fresh.func is clusterbench.run_freshness
    assert (fresh.setups, fresh.engines, fresh.probes) == ("one-broker,cluster",
                                                           "faust,aiokafka", 100)
    scaling = parser.parse_args(["scaling", "--workers", "1,2"])
    assert scaling.func is clusterbench.run_scaling
    assert (scaling.workers, scaling.partitions) == ("1,2", 12)


def test_the_benchmark_collection_takes_every_report() -> None:
    spec = clusterbench._spec("bench-x")
    assert spec.id == "bench-x" and spec.min_reports == 1 and spec.domain.size == 16
