"""query_api.commands: the verbs the query API registers on the ``ldpstream`` command."""

from __future__ import annotations

from query_api import commands
from query_api.bench import run_from_args
from query_api.layoutbench import run_layout

from ..verbs import verbs_parser


def test_serve_and_the_two_benchmarks_are_registered() -> None:
    p = verbs_parser(commands.add_commands, commands.add_bench_commands)
    assert p.parse_args(["serve"]).func is commands._cmd_serve
    api = p.parse_args(["bench", "api", "--clients", "3"])
    assert api.func is run_from_args and api.clients == 3 and api.seconds == 20.0
    layout = p.parse_args(["bench", "redis-layout"])
    assert layout.func is run_layout and (layout.partitions, layout.rounds) == (12, 200)
