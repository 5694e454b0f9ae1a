"""producer.commands: the producer registers ``simulate`` on the ``ldpstream`` command."""

from __future__ import annotations

import argparse

from producer import commands
from producer.cli import cmd_simulate


def test_simulate_is_registered() -> None:
    parser = argparse.ArgumentParser()
    commands.add_commands(parser.add_subparsers(dest="cmd"))
    args = parser.parse_args(["simulate", "--reports", "5"])
    assert args.func is cmd_simulate and args.reports == 5
