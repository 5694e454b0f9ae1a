"""What the tests of each service's ``commands`` module share: the ``ldpstream`` parser with
that service's verbs, and the check that a flag wins over its ``LDP_…`` variable."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from typing import Any

import pytest

from ldpstream.settings import ConfigError

Adder = Callable[[Any], None]


def verbs_parser(add_commands: Adder, add_bench_commands: Adder | None = None
                 ) -> argparse.ArgumentParser:
    """A parser like ``ldpstream``'s holding one service's verbs (and its ``bench`` ones)."""
    parser = argparse.ArgumentParser(prog="ldpstream")
    sub = parser.add_subparsers(dest="cmd")
    add_commands(sub)
    if add_bench_commands is not None:
        add_bench_commands(sub.add_parser("bench").add_subparsers(dest="what"))
    return parser


def assert_flag_wins(monkeypatch: pytest.MonkeyPatch, args: argparse.Namespace,
                     variable: str, flag_value: str, bad: tuple[str, str]) -> None:
    """Run the verb of ``args`` with ``variable`` set otherwise and the setting ``bad``
    wrong: start-up stops naming ``bad`` after the flag has replaced ``variable``."""
    monkeypatch.setenv(variable, "1")
    monkeypatch.setenv(*bad)
    with pytest.raises(ConfigError, match=bad[0]):
        args.func(args)
    assert os.environ[variable] == flag_value
