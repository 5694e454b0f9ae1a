"""The gateway's verbs of the ``ldpstream`` command: ``gateway`` and ``bench gateway``.

The service registers its own verbs; :mod:`ldpctl.cli` collects every service's.
"""

from __future__ import annotations

import argparse

__all__ = ["add_bench_commands", "add_commands"]


def _cmd_gateway(args: argparse.Namespace) -> int:
    import os

    from .app import main

    if args.port is not None:  # the flag wins over LDP_GATEWAY_PORT
        os.environ["LDP_GATEWAY_PORT"] = str(args.port)
    return main()


def add_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("gateway", help="run the HTTP ingestion gateway: devices POST "
                                       "/v1/reports (settings: LDP_… env vars)")
    p.add_argument("--port", type=int, default=None,
                   help="listen on this port (default: LDP_GATEWAY_PORT, else 8080; 0 = free)")
    p.set_defaults(func=_cmd_gateway)


def add_bench_commands(bsub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from .bench import add_bench_gateway_parser

    add_bench_gateway_parser(bsub)
