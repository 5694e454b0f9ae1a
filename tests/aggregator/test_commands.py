"""aggregator.commands: ``aggregate`` and ``bench pipeline`` on the ``ldpstream`` command."""

from __future__ import annotations

import argparse

import pytest

from aggregator import commands


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="cmd")
    commands.add_commands(sub)
    commands.add_bench_commands(sub.add_parser("bench").add_subparsers(dest="what"))
    return parser


def test_aggregate_takes_an_engine_and_nothing_else() -> None:
    p = _parser()
    assert p.parse_args(["aggregate"]).engine is None
    args = p.parse_args(["aggregate", "--engine", "aiokafka"])
    assert args.engine == "aiokafka" and args.func is commands._cmd_aggregate
    with pytest.raises(SystemExit):
        p.parse_args(["aggregate", "--engine", "spark"])


def test_the_engine_flag_wins_over_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LDP_ENGINE", "faust")
    monkeypatch.setenv("LDP_TOPIC_PARTITIONS", "0")  # start-up stops at the settings
    from ldpstream.settings import ConfigError

    with pytest.raises(ConfigError, match="LDP_TOPIC_PARTITIONS"):
        commands._cmd_aggregate(_parser().parse_args(["aggregate", "--engine", "aiokafka"]))
    import os

    assert os.environ["LDP_ENGINE"] == "aiokafka"


def test_bench_pipeline_defaults() -> None:
    args = _parser().parse_args(["bench", "pipeline"])
    assert args.func is commands._cmd_bench_pipeline
    assert (args.sizes, args.engines, args.broker) == ("1,512,4096:oue", "faust,aiokafka",
                                                       "tansu")
