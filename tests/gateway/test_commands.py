"""gateway.commands: ``gateway`` and ``bench gateway`` on the ``ldpstream`` command."""

from __future__ import annotations

import argparse
import os

import pytest

from gateway import commands
from gateway.bench import run_from_args
from ldpstream.settings import ConfigError


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="cmd")
    commands.add_commands(sub)
    commands.add_bench_commands(sub.add_parser("bench").add_subparsers(dest="what"))
    return parser


def test_the_verbs_are_registered() -> None:
    args = _parser().parse_args(["gateway", "--port", "0"])
    assert args.func is commands._cmd_gateway and args.port == 0
    assert _parser().parse_args(["bench", "gateway"]).func is run_from_args


def test_the_port_flag_wins_over_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LDP_GATEWAY_PORT", "1")
    monkeypatch.setenv("LDP_GATEWAY_LINGER_MS", "-5")  # start-up stops at the settings
    with pytest.raises(ConfigError, match="LDP_GATEWAY_LINGER_MS"):
        commands._cmd_gateway(_parser().parse_args(["gateway", "--port", "9099"]))
    assert os.environ["LDP_GATEWAY_PORT"] == "9099"
