"""query_api.commands: the verbs the query API registers on the ``ldpstream`` command."""

from __future__ import annotations

import argparse

from query_api import commands
from query_api.bench import run_from_args
from query_api.layoutbench import run_layout


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ldpstream")
    sub = parser.add_subparsers(dest="cmd")
    commands.add_commands(sub)
    bench = sub.add_parser("bench").add_subparsers(dest="what")
    commands.add_bench_commands(bench)
    return parser


def test_serve_and_the_two_benchmarks_are_registered() -> None:
    p = _parser()
    assert p.parse_args(["serve"]).func is commands._cmd_serve
    api = p.parse_args(["bench", "api", "--clients", "3"])
    assert api.func is run_from_args and api.clients == 3 and api.seconds == 20.0
    layout = p.parse_args(["bench", "redis-layout"])
    assert layout.func is run_layout and (layout.partitions, layout.rounds) == (12, 200)
