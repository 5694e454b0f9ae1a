"""The producer's verb of the ``ldpstream`` command: ``simulate`` (:mod:`producer.cli`).

The service registers its own verbs; :mod:`ldpctl.cli` collects every service's.
"""

from __future__ import annotations

import argparse

__all__ = ["add_commands"]


def add_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from .cli import add_simulate_parser

    add_simulate_parser(sub)
