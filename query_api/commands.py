"""The query API's verbs of the ``ldpstream`` command: ``serve``, ``bench api`` and ``bench
redis-layout``.

The service registers its own verbs; :mod:`ldpctl.cli` collects every service's.
"""

from __future__ import annotations

import argparse

__all__ = ["add_bench_commands", "add_commands"]


def _cmd_serve(args: argparse.Namespace) -> int:
    from .server import main

    return main()


def add_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("serve", help="run the query API (settings: LDP_… env vars)")
    p.set_defaults(func=_cmd_serve)


def add_bench_commands(bsub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from .bench import add_bench_api_parser
    from .layoutbench import add_bench_layout_parser

    add_bench_api_parser(bsub)
    add_bench_layout_parser(bsub)
