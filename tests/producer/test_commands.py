"""producer.commands: the producer registers ``simulate`` on the ``ldpstream`` command."""

from __future__ import annotations

from producer import commands
from producer.cli import cmd_simulate

from ..verbs import verbs_parser


def test_simulate_is_registered() -> None:
    args = verbs_parser(commands.add_commands).parse_args(["simulate", "--reports", "5"])
    assert args.func is cmd_simulate and args.reports == 5
