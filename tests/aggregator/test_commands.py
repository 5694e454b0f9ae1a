"""aggregator.commands: ``aggregate`` and ``bench pipeline`` on the ``ldpstream`` command."""

from __future__ import annotations

import pytest

from aggregator import commands

from ..verbs import assert_flag_wins, verbs_parser

PARSER = verbs_parser(commands.add_commands, commands.add_bench_commands)


def test_aggregate_takes_an_engine_and_nothing_else() -> None:
    assert PARSER.parse_args(["aggregate"]).engine is None
    args = PARSER.parse_args(["aggregate", "--engine", "aiokafka"])
    assert args.engine == "aiokafka" and args.func is commands._cmd_aggregate
    with pytest.raises(SystemExit):
        PARSER.parse_args(["aggregate", "--engine", "spark"])


def test_the_engine_flag_wins_over_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    assert_flag_wins(monkeypatch, PARSER.parse_args(["aggregate", "--engine", "aiokafka"]),
                     "LDP_ENGINE", "aiokafka", ("LDP_TOPIC_PARTITIONS", "0"))


def test_bench_pipeline_defaults() -> None:
    args = PARSER.parse_args(["bench", "pipeline"])
    assert args.func is commands._cmd_bench_pipeline
    assert (args.sizes, args.engines, args.broker) == ("1,512,4096:oue", "faust,aiokafka",
                                                       "tansu")
