"""gateway.commands: ``gateway`` and ``bench gateway`` on the ``ldpstream`` command."""

from __future__ import annotations

import pytest

from gateway import commands
from gateway.bench import run_from_args

from ..verbs import assert_flag_wins, verbs_parser

PARSER = verbs_parser(commands.add_commands, commands.add_bench_commands)


def test_the_verbs_are_registered() -> None:
    args = PARSER.parse_args(["gateway", "--port", "0"])
    assert args.func is commands._cmd_gateway and args.port == 0
    assert PARSER.parse_args(["bench", "gateway"]).func is run_from_args


def test_the_port_flag_wins_over_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    assert_flag_wins(monkeypatch, PARSER.parse_args(["gateway", "--port", "9099"]),
                     "LDP_GATEWAY_PORT", "9099", ("LDP_GATEWAY_LINGER_MS", "-5"))
