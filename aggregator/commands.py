"""The aggregator's verbs of the ``ldpstream`` command: ``aggregate`` and ``bench pipeline``.

The service registers its own verbs; :mod:`ldpctl.cli` collects every service's.  What a
verb runs is imported when it runs (``ldpstream --help`` loads no worker).
"""

from __future__ import annotations

import argparse

__all__ = ["add_bench_commands", "add_commands"]


def _cmd_aggregate(args: argparse.Namespace) -> int:
    import os

    from .app import main

    if args.engine:  # the flag wins over LDP_ENGINE
        os.environ["LDP_ENGINE"] = args.engine
    return main()


def _cmd_bench_pipeline(args: argparse.Namespace) -> int:
    from .bench import run_from_args

    return run_from_args(args)


def add_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("aggregate", help="run one aggregator worker (settings: LDP_… env vars)")
    p.add_argument("--engine", choices=["faust", "aiokafka"], default=None,
                   help="faust-streaming agent (default) or the direct aiokafka loop "
                        "(default: LDP_ENGINE, else faust)")
    p.set_defaults(func=_cmd_aggregate)


def add_bench_commands(bsub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = bsub.add_parser("pipeline", help="embedded broker + Redis: raw consume vs each engine")
    p.add_argument("--sizes", default="1,512,4096:oue",
                   help="reports per message, one case each (comma separated; SIZE:MECH "
                        "picks the mechanism of that case)")
    p.add_argument("--engines", default="faust,aiokafka",
                   help="engines to measure; ENGINE:MS runs one with LDP_MAX_POLL_INTERVAL_MS=MS")
    p.add_argument("--seconds", type=float, default=10.0,
                   help="least steady-state window of every figure")
    p.add_argument("--mechanism", default="grr")
    p.add_argument("--domain-size", type=int, default=64)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--broker", choices=("tansu", "kafka"), default="tansu",
                   help="the embedded tansu (default) or Apache Kafka (KRaft, from .tools/kafka)")
    p.set_defaults(func=_cmd_bench_pipeline)
